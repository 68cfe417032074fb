use super::*;

fn image_with(frames: &[(&str, &[u8])], targets: &[Target]) -> Vec<u8> {
    let mut w = Writer::new("module test\nfingerprint 0");
    for t in targets {
        w.add_target(
            *t,
            if t.kind == Kind::Ptx {
                ".target sm_90\n"
            } else {
                ""
            },
            None,
        );
    }
    for (name, bytes) in frames {
        for t in 0..targets.len() {
            w.add_frame(name, t, store_frame(bytes), bytes.len() as u32);
        }
    }
    w.finish()
}

#[test]
fn choice_per_compute_capability() {
    let built = [
        Target::cubin(70),
        Target::cubin(80),
        Target::cubin(90),
        Target::cubin(100),
        Target::cubin(120),
        Target::ptx(70),
        Target::ptx(80),
        Target::ptx(90),
    ];
    // (device, force_ptx, expected)
    let table: &[((u32, u32), bool, Option<Target>)] = &[
        ((7, 0), false, Some(Target::cubin(70))),
        ((7, 5), false, Some(Target::cubin(70))),
        ((8, 0), false, Some(Target::cubin(80))),
        ((8, 6), false, Some(Target::cubin(80))),
        ((8, 9), false, Some(Target::cubin(80))),
        ((9, 0), false, Some(Target::cubin(90))),
        ((10, 0), false, Some(Target::cubin(100))),
        ((10, 3), false, Some(Target::cubin(100))),
        ((12, 0), false, Some(Target::cubin(120))),
        ((12, 1), false, Some(Target::cubin(120))),
        // Newer than every cubin: the newest PTX.
        ((11, 0), false, Some(Target::ptx(90))),
        ((13, 0), false, Some(Target::ptx(90))),
        // Older than every target.
        ((6, 0), false, None),
        ((6, 1), true, None),
        ((5, 2), false, None),
        // Forced PTX.
        ((9, 0), true, Some(Target::ptx(90))),
        ((8, 6), true, Some(Target::ptx(80))),
        ((7, 5), true, Some(Target::ptx(70))),
        ((12, 0), true, Some(Target::ptx(90))),
    ];
    for &(cc, force, want) in table {
        let got = choose(&built, cc, force).map(|i| built[i]);
        assert_eq!(got, want, "device {cc:?}, force_ptx {force}");
    }
    assert_eq!(choose(&[Target::cubin(90)], (9, 0), true), None);
    assert_eq!(choose(&[], (9, 0), false), None);
}

#[test]
fn families_of_kernel_names() {
    for (kernel, family) in [
        ("add_f32_d2", "add_f32"),
        ("add_s_f64_dn64", "add_s_f64"),
        ("cast_f32_u8_v", "cast_f32_u8"),
        ("lap2_f32_s64", "lap2_f32"),
        ("plain", "plain"),
    ] {
        assert_eq!(family_of(kernel), family);
    }
}

#[test]
fn round_trip_and_lookup() {
    let targets = [Target::cubin(90), Target::ptx(90)];
    let bytes = image_with(
        &[
            ("sub_f32", b"sub"),
            ("add_f32", b"add body"),
            ("empty_u8", b""),
        ],
        &targets,
    );
    let image = Image::parse(&bytes).expect("valid image");
    assert_eq!(image.targets(), &targets);
    assert_eq!(image.len(), 3);
    assert_eq!(image.meta(), "module test\nfingerprint 0");
    assert_eq!(image.header(1), ".target sm_90\n");
    assert_eq!(image.header(0), "");
    // Names are stored sorted.
    let names: Vec<&str> = (0..image.len()).map(|f| image.family_name(f)).collect();
    assert_eq!(names, ["add_f32", "empty_u8", "sub_f32"]);
    for (name, want) in [
        ("add_f32", &b"add body"[..]),
        ("sub_f32", b"sub"),
        ("empty_u8", b""),
    ] {
        let f = image.family(name).expect(name);
        for t in 0..targets.len() {
            assert_eq!(
                image.decode(f, t, None).expect("decodes"),
                want,
                "{name} {t}"
            );
        }
    }
    assert_eq!(image.family("mul_f32"), None);
    assert_eq!(image.family(""), None);
    // Both targets' frames are identical: stored once.
    let f = image.family("add_f32").expect("present");
    assert_eq!(image.frame(f, 0), image.frame(f, 1));
}

#[test]
fn compressed_frames_with_a_dictionary() {
    let samples: Vec<Vec<u8>> = (0..200)
        .map(|i| format!("kernel_{i} {{ ld.global.f32 %f1, [%rd{i}]; add.f32 %f2, %f1, %f1; st.global.f32 [%rd{i}], %f2; ret; }}\n").repeat(4).into_bytes())
        .collect();
    let dict = zstd::dict::from_samples(&samples, 4096).expect("trained");
    let mut c = zstd::bulk::Compressor::with_dictionary(19, &dict).expect("compressor");
    c.include_checksum(true).expect("checksum flag");
    let mut w = Writer::new("m");
    let mut plain = zstd::bulk::Compressor::new(19).expect("compressor");
    plain.include_checksum(true).expect("checksum flag");
    let dict_frame = plain.compress(&dict).expect("compress dict");
    let t = w.add_target(
        Target::ptx(80),
        ".target sm_80\n",
        Some((dict_frame, dict.len() as u32)),
    );
    for (i, s) in samples.iter().enumerate().take(20) {
        w.add_frame(
            &format!("fam{i:03}"),
            t,
            c.compress(s).expect("compress"),
            s.len() as u32,
        );
    }
    let bytes = w.finish();
    let image = Image::parse(&bytes).expect("valid");
    let d = image
        .dictionary(t)
        .expect("dictionary decodes")
        .expect("present");
    assert_eq!(d, dict);
    for (i, s) in samples.iter().enumerate().take(20) {
        let f = image.family(&format!("fam{i:03}")).expect("present");
        assert_eq!(&image.decode(f, t, Some(&d)).expect("decodes"), s);
        // Without its dictionary the frame does not decode.
        assert!(image.decode(f, t, None).is_err());
    }
}

#[test]
fn truncated_images_are_refused() {
    let bytes = image_with(
        &[("add_f32", b"0123456789"), ("mul_f32", b"abc")],
        &[Target::ptx(90)],
    );
    for len in 0..bytes.len() {
        let cut = &bytes[..len];
        match Image::parse(cut) {
            Err(_) => {}
            Ok(image) => {
                // Only a cut in the data section parses: the targets are still known, and
                // a family whose frame was cut does not decode.
                assert_eq!(image.targets(), &[Target::ptx(90)]);
                let cut_off = (0..image.len())
                    .filter(|&f| image.decode(f, 0, None).is_err())
                    .count();
                assert!(
                    cut_off >= 1,
                    "a cut at {len} of {} lost no frame",
                    bytes.len()
                );
            }
        }
    }
    assert_eq!(
        Image::parse(b"SAIM").unwrap_err(),
        ImageError::Truncated { what: "preamble" }
    );
    assert_eq!(
        Image::parse(b"not an image").unwrap_err(),
        ImageError::BadMagic
    );
}

#[test]
fn corrupt_bytes_are_detected() {
    let payload = b"the quick brown fox jumps over the lazy dog";
    let bytes = image_with(&[("add_f32", payload)], &[Target::cubin(90)]);
    let index_end = 16 + u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize;
    let mut failed = 0;
    for i in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[i] ^= 0x40;
        match Image::parse(&bad) {
            Err(_) => assert!(
                i < index_end,
                "byte {i} of the data section broke the index"
            ),
            Ok(image) => {
                assert!(i >= index_end, "corrupt index byte {i} was accepted");
                let f = image.family("add_f32").expect("present");
                // A flipped bit either fails to decode, naming the family and target, or
                // falls in a field that does not change the content (never wrong bytes).
                match image.decode(f, 0, None) {
                    Ok(bytes) => assert_eq!(bytes, payload, "byte {i} changed the content"),
                    Err(err) => {
                        let text = err.to_string();
                        assert!(
                            text.contains("add_f32") && text.contains("sm_90 cubin"),
                            "{text}"
                        );
                        failed += 1;
                    }
                }
            }
        }
    }
    // Every payload byte and the checksum are covered.
    assert!(
        failed >= payload.len() + 4,
        "only {failed} corruptions detected"
    );
}

#[test]
fn errors_name_their_cause() {
    assert!(ImageError::IndexChecksum.to_string().contains("checksum"));
    assert!(ImageError::Truncated { what: "index" }
        .to_string()
        .contains("truncated"));
}
