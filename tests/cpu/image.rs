//! The embedded kernel image (no GPU needed): every target decodes, every family's cubins
//! are ELF images and its PTX holds exactly its own kernels, and every kernel name the
//! library's ops launch is in the family the host will look it up in.

use strided_apply::image::{family_of, Image, Kind, Target};
use strided_apply::ops::*;
use strided_apply::{f16, Bool, Kernels2, Kernels3, Kernels4, Variant, BUILTIN};

fn builtin() -> Image<'static> {
    Image::parse(BUILTIN.bytes).expect("the built-in image parses")
}

#[test]
fn builtin_image_has_every_target() {
    let image = builtin();
    assert_eq!(image.targets(), &[Target::cubin(90), Target::ptx(70)]);
    assert!(
        image.meta().starts_with("module gpu-kernels\n"),
        "{}",
        image.meta()
    );
    // Compute capability 9.0 gets the cubin, every other one from 7.0 the sm_70 PTX.
    for (cc, want) in [
        ((7, 0), Target::ptx(70)),
        ((7, 5), Target::ptx(70)),
        ((8, 6), Target::ptx(70)),
        ((8, 9), Target::ptx(70)),
        ((9, 0), Target::cubin(90)),
        ((10, 0), Target::ptx(70)),
        ((12, 0), Target::ptx(70)),
        ((13, 0), Target::ptx(70)),
    ] {
        let t = image.choose(cc, false).expect("a target");
        assert_eq!(image.targets()[t], want, "{cc:?}");
    }
    assert_eq!(image.choose((6, 1), false), None);
}

#[test]
fn every_family_decodes_for_every_target() {
    let image = builtin();
    let mut kernels = 0;
    for (t, target) in image.targets().iter().enumerate() {
        let dict = image.dictionary(t).expect("dictionary decodes");
        for f in 0..image.len() {
            let family = image.family_name(f);
            let code = image
                .decode(f, t, dict.as_deref())
                .unwrap_or_else(|e| panic!("{e}"));
            match target.kind {
                Kind::Cubin => {
                    assert_eq!(&code[..4], b"\x7fELF", "{family} {target}");
                    assert_eq!(code[4], 2, "{family} {target}: 64-bit ELF");
                }
                Kind::Ptx => {
                    let text = std::str::from_utf8(&code).expect("PTX is text");
                    let entries: Vec<&str> = text
                        .lines()
                        .filter_map(|l| l.strip_prefix(".visible .entry "))
                        .map(|l| l.split('(').next().unwrap_or(l))
                        .collect();
                    assert!(!entries.is_empty(), "{family}: no kernels");
                    for e in &entries {
                        assert_eq!(family_of(e), family, "{e} in family {family}");
                    }
                    if target.sm == 70 {
                        kernels += entries.len();
                    }
                    assert!(
                        image
                            .header(t)
                            .contains(&format!(".target sm_{}", target.sm)),
                        "{}",
                        image.header(t)
                    );
                }
            }
        }
    }
    assert!(kernels > 2000, "only {kernels} kernels in the sm_70 PTX");
}

/// The PTX text of the family holding `kernel` (the stored sm_70 PTX).
fn family_ptx(image: &Image, kernel: &str) -> String {
    let f = image
        .family(family_of(kernel))
        .unwrap_or_else(|| panic!("no family for {kernel}"));
    let t = image
        .targets()
        .iter()
        .position(|t| *t == Target::ptx(70))
        .expect("sm_70 PTX");
    let dict = image.dictionary(t).expect("dictionary");
    String::from_utf8(image.decode(f, t, dict.as_deref()).expect("decodes")).expect("text")
}

#[test]
fn launched_kernel_names_are_in_their_families() {
    use strided_apply::Variant::*;
    let image = builtin();
    let names = [
        <Add as Kernels3<f32, f32, f32>>::NAMES,
        <Add as Kernels3<u8, u8, u8>>::NAMES,
        <Lt as Kernels3<Bool, f32, f32>>::NAMES,
        <Sin as Kernels2<f64, f64>>::NAMES,
        <Cast as Kernels2<f32, i64>>::NAMES,
        <Where as Kernels4<u8, Bool, u8, u8>>::NAMES,
        <Fma as Kernels4<f16, f16, f16, f16>>::NAMES,
    ];
    for n in names {
        assert_eq!(n.module, "gpu-kernels");
        let ptx = family_ptx(&image, n.d1);
        for v in [Vec, Tiled, Contig, D1, D2, D3, Dn, Dn64] {
            let kernel = n.get(v);
            if kernel.is_empty() {
                continue; // no tiled variant for this arity; Contig and Dn64 run through others
            }
            assert_eq!(family_of(kernel), family_of(n.d1));
            assert!(
                ptx.contains(&format!(".entry {kernel}(")),
                "{kernel} missing from family {}",
                family_of(kernel)
            );
        }
    }
    // A family holds its own kernels only: sin_f64 is not in add_f32's module.
    assert!(!family_ptx(&image, "add_f32_d1").contains("sin_f64"));
    // An op that runs as a program (an `@program` line) has no names and no family.
    let fma = <Fma as Kernels4<f32, f32, f32, f32>>::NAMES;
    assert_eq!(
        fma.program.map(|p| (p.op, p.family)),
        Some(("fma", "fma_f32"))
    );
    assert!(Variant::ALL.iter().all(|&v| fma.get(v).is_empty()));
    assert!((0..image.len()).all(|f| image.family_name(f) != "fma_f32"));
}

/// Every kernel name the expression launcher looks up (every variant, interpreter, tiled,
/// wide, cheap, one-op and reduction kernel) is an entry of the interpreter's image.
#[test]
fn expression_kernel_names_are_in_the_interpreters_image() {
    use strided_apply_expr::{kernel, reduce};
    let image = Image::parse(strided_apply::EXPR_KERNELS.bytes).expect("the image parses");
    let mut names: Vec<&str> = kernel::NAMES.iter().flatten().copied().collect();
    names.extend(kernel::EXT_NAMES);
    names.extend(kernel::TILED_NAMES);
    names.extend(kernel::WIDE_NAMES.iter().flatten());
    names.extend(kernel::CHEAP_NAMES.iter().flatten());
    names.extend(
        kernel::ONE_NAMES
            .iter()
            .flat_map(|k| k.iter().map(|&(_, n)| n)),
    );
    names.extend(reduce::GROUP_KERNELS);
    names.push(reduce::FINAL_KERNEL);
    assert!(
        names.contains(&"expr_fv_wide"),
        "the f32 wide kernel is listed"
    );
    assert!(
        names.contains(&"expr_fv_cheap"),
        "the f32 cheap kernel is listed"
    );
    assert!(
        names.contains(&"expr_bo_k16"),
        "the u8 one-op kernel is listed"
    );
    assert!(
        names.contains(&"expr_io_k16") && names.contains(&"expr_gx_dn"),
        "the i8 one-op kernel and the extended ops' kernels are listed"
    );
    for name in names {
        let ptx = family_ptx(&image, name);
        assert!(ptx.contains(&format!(".entry {name}(")), "{name} missing");
    }
}

/// The interpreter's image is split into families by class and layout group
/// (`expr_<class><group>_<variant>`): a process's first expression decodes and loads only
/// its own family. The dense `f32` kernels (vectorised, cheap, wide) share one family that
/// holds no other class's kernels and is a small part of the image, and no family mixes
/// classes.
#[test]
fn the_interpreters_families_are_split_by_class_and_layout_group() {
    use strided_apply_expr::{kernel, reduce};
    let dense_f32 = family_of(kernel::NAMES[0][1]);
    assert_eq!(dense_f32, "expr_fv");
    assert_eq!(
        family_of(kernel::CHEAP_NAMES[0].expect("f32 cheap")),
        dense_f32
    );
    assert_eq!(
        family_of(kernel::WIDE_NAMES[0].expect("f32 wide")),
        dense_f32
    );
    // Column c of NAMES is class c (0 the general interpreter); the tiled and reduction
    // kernels by fast path follow the same classes.
    let class_of = |name: &str| -> char {
        let family = family_of(name);
        let class = family.strip_prefix("expr_").and_then(|c| c.chars().next());
        class.unwrap_or_else(|| panic!("{name}: not named expr_<class><group>_<variant>"))
    };
    let mut by_family: std::collections::HashMap<&str, char> = Default::default();
    let mut named = |name: &'static str, class: char| {
        assert_eq!(class_of(name), class, "{name}");
        let seen = *by_family.entry(family_of(name)).or_insert(class);
        assert_eq!(seen, class, "{name}: its family mixes classes");
    };
    let classes = ['g', 'f', 'd', 'i', 'l', 'u', 'b'];
    for row in &kernel::NAMES {
        for (c, name) in row.iter().enumerate() {
            // A class without a kernel of this variant runs the general interpreter's.
            let class = if class_of(name) == 'g' {
                'g'
            } else {
                classes[c]
            };
            named(name, class);
        }
    }
    for (i, name) in kernel::TILED_NAMES.iter().enumerate() {
        named(name, classes[i + 1]);
    }
    // The extended ops' general kernels: a family of their own.
    for name in kernel::EXT_NAMES {
        assert_eq!(family_of(name), "expr_gx", "{name}");
    }
    for (c, name) in reduce::GROUP_KERNELS.iter().enumerate() {
        named(name, classes[c]);
    }
    // The one-op kernels: a family per class of its own (`expr_<class>o`), not the
    // vectorised interpreter's, so a one-op program decodes only its loads and its op.
    for (i, kernels) in kernel::ONE_NAMES.iter().enumerate() {
        for &(_, name) in kernels.iter() {
            named(name, classes[i + 1]);
            assert_eq!(
                family_of(name),
                format!("expr_{}o", classes[i + 1]),
                "{name}"
            );
        }
    }
    // The dense f32 family's sm_90 cubin is under a quarter of the interpreter's sm_90
    // cubins (it was the whole 4.3 MB, 33 ms of decoding on a process's first expression).
    let image = Image::parse(strided_apply::EXPR_KERNELS.bytes).expect("the image parses");
    let t = image
        .targets()
        .iter()
        .position(|t| *t == Target::cubin(90))
        .expect("sm_90 cubin");
    let raw = |f: usize| image.frame(f, t).raw_len as u64;
    let total: u64 = (0..image.len()).map(raw).sum();
    let f = image.family(dense_f32).expect("the expr_fv family");
    assert!(4 * raw(f) < total, "expr_fv: {} of {total} bytes", raw(f));
}
