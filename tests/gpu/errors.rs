//! Typed errors that need a device: bad views and raw calls refused before any launch,
//! module-level failures (missing, corrupt or refused code), and which module a launch uses.

use crate::harness::TestResult;
use strided_apply::{api, image, DeviceTensor, Error, Gpu, ModuleImage, Target};

pub fn expect_err<T>(
    r: strided_apply::Result<T>,
    what: &str,
    ok: impl Fn(&Error) -> bool,
) -> Result<String, String> {
    match r {
        Err(e) if ok(&e) => Ok(format!("{what}: {e}")),
        Err(e) => Err(format!("{what}: wrong error {e:?}")),
        Ok(_) => Err(format!("{what}: no error")),
    }
}

pub fn estr(e: Error) -> String {
    e.to_string()
}

pub fn typed_errors(gpu: &Gpu) -> TestResult {
    use strided_apply::ops::*;
    use strided_apply::raw::{self, RawTensor};
    use strided_apply::ElemType;
    let e = |e: Error| e.to_string();
    let a = DeviceTensor::from_slice(gpu, &[1.0f32; 12], &[3, 4]).map_err(e)?;
    let mut lines = Vec::new();
    // Output with a stride-0 axis.
    let mut bcast_out = a
        .slice(0, Some(0), Some(1), 1)
        .map_err(e)?
        .broadcast_to(&[3, 4])
        .map_err(e)?;
    lines.push(expect_err(
        api::apply2(gpu, Neg, &mut bcast_out, &a),
        "overlapping output",
        |e| matches!(e, Error::OverlappingOutput { .. }),
    )?);
    // Input shifted by one element against the output in the same buffer.
    let buf = DeviceTensor::from_slice(gpu, &[1.0f32; 13], &[13]).map_err(e)?;
    let mut out = buf.slice(0, Some(0), Some(12), 1).map_err(e)?;
    let shifted = buf.slice(0, Some(1), None, 1).map_err(e)?;
    lines.push(expect_err(
        api::apply2(gpu, Neg, &mut out, &shifted),
        "partial overlap",
        |e| matches!(e, Error::PartialOverlap { operand: "a" }),
    )?);
    // Exactly in place is fine: a = -a.
    let mut x = DeviceTensor::from_slice(gpu, &[1.0f32, -2.0, 3.0], &[3]).map_err(e)?;
    let x_in = x.clone();
    api::apply2(gpu, Neg, &mut x, &x_in).map_err(e)?;
    if x.to_vec(gpu).map_err(e)? != [-1.0, 2.0, -3.0] {
        return Err("in-place neg gave wrong values".into());
    }
    lines.push("in place a = -a: ok".into());
    lines.push(expect_err(
        a.with_layout(strided_apply::Layout::new(&[3, 4], &[4, 1], 1).map_err(e)?),
        "out of bounds",
        |e| matches!(e, Error::OutOfBounds { .. }),
    )?);
    lines.push(expect_err(strided_apply::open(4096), "no device", |e| {
        matches!(e, Error::NoDevice { .. })
    })?);
    lines.push(expect_err(
        DeviceTensor::from_slice(gpu, &[1.0f32; 5], &[2, 3]),
        "length",
        |e| matches!(e, Error::LengthMismatch { .. }),
    )?);
    // Raw API: type, alignment, null.
    let base = a.buffer().addr();
    let (shape, strides) = ([12usize], [1isize]);
    let t = |ptr, elem| RawTensor {
        ptr,
        elem,
        shape: &shape,
        strides: &strides,
    };
    // SAFETY: every call below is refused by the checks before any launch.
    unsafe {
        lines.push(expect_err(
            raw::apply2::<_, f32, f32>(
                gpu,
                None,
                Neg,
                t(base, ElemType::F32),
                t(base, ElemType::I32),
            ),
            "raw type",
            |e| matches!(e, Error::TypeMismatch { operand: "a", .. }),
        )?);
        lines.push(expect_err(
            raw::apply2::<_, f32, f32>(
                gpu,
                None,
                Neg,
                t(base + 2, ElemType::F32),
                t(base, ElemType::F32),
            ),
            "raw misaligned",
            |e| matches!(e, Error::Misaligned { operand: "out", .. }),
        )?);
        lines.push(expect_err(
            raw::apply2::<_, f32, f32>(gpu, None, Neg, t(base, ElemType::F32), t(0, ElemType::F32)),
            "raw null",
            |e| matches!(e, Error::NullPointer { operand: "a" }),
        )?);
    }
    // A tensor of another Gpu handle (another stream) is refused.
    let other = gpu.new_stream().map_err(e)?;
    let mut z = DeviceTensor::<f32>::zeros(gpu, &[3, 4]).map_err(e)?;
    lines.push(expect_err(
        api::apply2(&other, Neg, &mut z, &a),
        "wrong handle",
        |e| matches!(e, Error::WrongDevice { operand: "out" }),
    )?);
    // The context still works afterwards.
    let mut y = DeviceTensor::<f32>::zeros(gpu, &[3, 4]).map_err(e)?;
    api::apply2(gpu, Neg, &mut y, &a).map_err(e)?;
    if y.to_vec(gpu).map_err(e)? != vec![-1.0f32; 12] {
        return Err("context unusable after errors".into());
    }
    Ok(format!("{} errors checked", lines.len()))
}

/// The raw API's checks: everything the library can see is a typed error naming the
/// operand, before any launch.
pub fn raw_api_catalogue(gpu: &Gpu) -> TestResult {
    use strided_apply::ops::{Add, Neg};
    use strided_apply::raw::{self, RawTensor};
    use strided_apply::{ElemType, MAX_DIMS};
    let buf = DeviceTensor::<f32>::zeros(gpu, &[64]).map_err(estr)?;
    let base = buf.buffer().addr();
    let t = |ptr: u64, shape: &'static [usize], strides: &'static [isize]| RawTensor {
        ptr,
        elem: ElemType::F32,
        shape,
        strides,
    };
    let mut lines = Vec::new();
    let n = MAX_DIMS + 1;
    let deep_shape: &'static [usize] = Box::leak(vec![2usize; n].into_boxed_slice());
    let deep_strides: &'static [isize] = Box::leak(
        (0..n)
            .rev()
            .map(|d| 3isize.pow(d as u32))
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    // SAFETY: every call below is refused by the checks before any launch.
    unsafe {
        lines.push(expect_err(
            raw::apply2::<_, f32, f32>(
                gpu,
                None,
                Neg,
                t(base, &[8], &[1]),
                t(base + 4, &[8], &[1]),
            ),
            "raw partial overlap",
            |e| {
                matches!(e, Error::PartialOverlap { operand: "a" })
                    && e.to_string().starts_with("a ")
            },
        )?);
        lines.push(expect_err(
            raw::apply2::<_, f32, f32>(
                gpu,
                None,
                Neg,
                t(base, &[4, 4], &[0, 1]),
                t(base + 256, &[4, 4], &[4, 1]),
            ),
            "raw overlapping output",
            |e| matches!(e, Error::OverlappingOutput { operand: "out", .. }),
        )?);
        lines.push(expect_err(
            raw::apply3::<_, f32, f32, f32>(
                gpu,
                None,
                Add,
                t(base, &[4, 4], &[4, 1]),
                t(base + 128, &[4, 4], &[4, 1]),
                t(base + 128, &[3], &[1]),
            ),
            "raw broadcast",
            |e| matches!(e, Error::Broadcast { operand: "b", .. }),
        )?);
        lines.push(expect_err(
            raw::apply2::<_, f32, f32>(
                gpu,
                None,
                Neg,
                t(base, &[4, 2], &[isize::MAX / 2, 1]),
                t(base + 128, &[2], &[1]),
            ),
            "raw stride overflow",
            |e| matches!(e, Error::Overflow { operand: "out", .. }),
        )?);
        lines.push(expect_err(
            raw::apply1::<_, f32>(
                gpu,
                None,
                strided_apply::ops::Fill(1.0f32),
                t(base, deep_shape, deep_strides),
            ),
            "raw rank above the maximum",
            |e| matches!(e, Error::RankTooHigh { operand: "out", .. }),
        )?);
        lines.push(expect_err(
            raw::apply2::<_, f32, f32>(gpu, None, Neg, t(base, &[2], &[1]), t(base, &[2, 2], &[2])),
            "raw strides/shape length",
            |e| matches!(e, Error::InvalidView { operand: "a", .. }),
        )?);
        lines.push(expect_err(
            raw::apply2::<_, f32, f32>(
                gpu,
                None,
                Neg,
                t(base, &[2], &[1]),
                RawTensor {
                    ptr: base + 128,
                    elem: ElemType::U8,
                    shape: &[2],
                    strides: &[1],
                },
            ),
            "raw element type",
            |e| {
                matches!(e, Error::TypeMismatch { operand: "a", .. })
                    && e.to_string().contains("u8")
            },
        )?);
    }
    // The buffer is untouched and the context works.
    if buf.to_vec(gpu).map_err(estr)? != vec![0.0f32; 64] {
        return Err("a refused raw call wrote memory".into());
    }
    Ok(lines.join("; "))
}

/// `(family, code)` pairs of one target.
type Families<'a> = &'a [(&'a str, &'a [u8])];

/// An image for the built-in module's name, built from stored (uncompressed) frames:
/// `(target, PTX header, [(family, code)])`.
fn leak_image(targets: &[(Target, &str, Families)]) -> ModuleImage {
    let mut w = image::Writer::new("module gpu-kernels (test image)");
    for (target, header, families) in targets {
        let t = w.add_target(*target, header, None);
        for (family, code) in *families {
            w.add_frame(family, t, image::store_frame(code), code.len() as u32);
        }
    }
    ModuleImage {
        name: "gpu-kernels",
        bytes: Box::leak(w.finish().into_boxed_slice()),
    }
}

/// The built-in image with one byte of family `family`'s frame for the device's target
/// flipped (or, with `cut`, the image cut off inside that frame).
fn damaged_builtin(gpu: &Gpu, family: &str, cut: bool) -> Result<ModuleImage, String> {
    let bytes = strided_apply::BUILTIN.bytes;
    let img = image::Image::parse(bytes).map_err(|e| e.to_string())?;
    let (major, minor) = gpu.compute_capability();
    let t = img
        .choose((major as u32, minor as u32), force_ptx())
        .ok_or("no target for this device")?;
    let f = img
        .family(family)
        .ok_or("family missing from the built-in image")?;
    let range = img.frame_range(img.frame(f, t));
    let mut copy = bytes.to_vec();
    let mid = (range.start + range.end) / 2;
    if cut {
        copy.truncate(mid);
    } else {
        copy[mid] ^= 0x55;
    }
    Ok(ModuleImage {
        name: "gpu-kernels",
        bytes: Box::leak(copy.into_boxed_slice()),
    })
}

fn force_ptx() -> bool {
    std::env::var("STRIDED_APPLY_FORCE_PTX").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// An image with one family of sm_70 PTX.
fn ptx70_image(header: &str, family: &str, body: &[u8]) -> ModuleImage {
    leak_image(&[(Target::ptx(70), header, &[(family, body)])])
}

const PTX_HEADER: &str = ".version 7.0\n.target sm_70\n.address_size 64\n";
/// A valid PTX body with one kernel that none of the library's names match.
const DUMMY_BODY: &[u8] = b"\n.visible .entry neg_f32_dummy()\n{\n\tret;\n}\n";

/// Module-level failures, each on a fresh handle with one bad image registered under the
/// built-in module's name: every error names the module, the device's compute capability
/// and the targets built; the handle keeps working for other families, and so does the
/// original handle.
pub fn module_errors(gpu: &Gpu) -> TestResult {
    use strided_apply::ops::{Add, Neg};
    let mut lines = Vec::new();
    let neg = |g: &Gpu| -> Result<Result<(), Error>, String> {
        let a = DeviceTensor::from_slice(g, &[1.0f32, 2.0], &[2]).map_err(estr)?;
        let mut out = DeviceTensor::<f32>::zeros(g, &[2]).map_err(estr)?;
        Ok(api::apply2(g, Neg, &mut out, &a))
    };
    let add_works = |g: &Gpu| -> Result<(), String> {
        let a = DeviceTensor::from_slice(g, &[1.0f32, -2.0], &[2]).map_err(estr)?;
        let mut out = DeviceTensor::<f32>::zeros(g, &[2]).map_err(estr)?;
        api::apply3(g, Add, &mut out, &a, &a).map_err(estr)?;
        match out.to_vec(g).map_err(estr)? {
            v if v == [2.0, -4.0] => Ok(()),
            v => Err(format!("add after a module error gave {v:?}")),
        }
    };
    let fresh = |image: Option<ModuleImage>| -> Result<(Gpu, Result<(), Error>), String> {
        let g = Gpu::new(0).map_err(estr)?;
        if let Some(image) = image {
            g.register(image);
        }
        let r = neg(&g)?;
        Ok((g, r))
    };
    let (major, minor) = gpu.compute_capability();
    let cc = format!("compute capability {major}.{minor}");
    let names_all = |e: &Error, built: &str| {
        let t = e.to_string();
        t.contains("gpu-kernels") && t.contains(&cc) && t.contains(built)
    };
    let (_g, r) = fresh(None)?;
    lines.push(expect_err(r, "module not registered", |e| {
        matches!(
            e,
            Error::ModuleNotRegistered {
                module: "gpu-kernels"
            }
        ) && e.to_string().contains("not registered")
    })?);
    // Only targets newer than the device (as an sm_60 device sees an sm_70+ image).
    let newer = (major as u32 + 1) * 10;
    let (_g, r) = fresh(Some(leak_image(&[
        (Target::cubin(newer), "", &[("neg_f32", b"x")]),
        (Target::ptx(newer), PTX_HEADER, &[("neg_f32", DUMMY_BODY)]),
    ])))?;
    lines.push(expect_err(r, "no code for this device", |e| {
        matches!(e, Error::NoCodeForDevice { .. })
            && names_all(e, &format!("sm_{newer} cubin, sm_{newer} PTX"))
    })?);
    // A corrupt frame and a truncated image: the family fails with a typed error, the
    // same handle still launches other families.
    for (what, cut) in [("corrupt frame", false), ("truncated image", true)] {
        let (g, r) = fresh(Some(damaged_builtin(gpu, "neg_f32", cut)?))?;
        lines.push(expect_err(r, what, |e| {
            matches!(e, Error::ImageCorrupt { .. }) && names_all(e, "sm_70 PTX")
        })?);
        if !cut {
            add_works(&g).map_err(|e| format!("{what}: {e}"))?;
        }
    }
    // An unreadable index: the targets are unknown, the error says so.
    let garbage = ModuleImage {
        name: "gpu-kernels",
        bytes: b"SAIMAGE1 but nothing else",
    };
    let (_g, r) = fresh(Some(garbage))?;
    lines.push(expect_err(r, "unreadable image", |e| {
        matches!(e, Error::ImageCorrupt { .. }) && names_all(e, "unknown")
    })?);
    // The family is not in the image.
    let (_g, r) = fresh(Some(ptx70_image(PTX_HEADER, "add_f32", DUMMY_BODY)))?;
    lines.push(expect_err(r, "family missing", |e| {
        matches!(
            e,
            Error::FamilyMissing {
                family: "neg_f32",
                ..
            }
        ) && names_all(e, "sm_70 PTX")
    })?);
    // The driver refuses the code: garbage PTX, PTX newer than the driver.
    let (_g, r) = fresh(Some(ptx70_image(
        PTX_HEADER,
        "neg_f32",
        b"this is not PTX\n",
    )))?;
    lines.push(expect_err(r, "garbage PTX", |e| {
        matches!(
            e,
            Error::ModuleLoad {
                family: "neg_f32",
                ..
            }
        ) && names_all(e, "sm_70 PTX")
    })?);
    let (_g, r) = fresh(Some(ptx70_image(
        ".version 99.9\n.target sm_70\n.address_size 64\n",
        "neg_f32",
        DUMMY_BODY,
    )))?;
    lines.push(expect_err(r, "PTX too new for the driver", |e| {
        matches!(e, Error::ModuleLoad { .. }) && e.to_string().contains("older than the PTX")
    })?);
    // The family loads but lacks the kernel.
    let (g, r) = fresh(Some(ptx70_image(PTX_HEADER, "neg_f32", DUMMY_BODY)))?;
    lines.push(expect_err(r, "kernel missing", |e| {
        matches!(e, Error::KernelMissing { module: "gpu-kernels", kernel, .. } if kernel.contains("neg"))
    })?);
    // Registering the real image again on the failing handle makes it whole.
    g.register(strided_apply::BUILTIN);
    neg(&g)?.map_err(|e| format!("after re-registering: {e}"))?;
    add_works(gpu)?;
    Ok(lines.join("; "))
}

/// The module each launch uses comes from the best target for the device: a cubin unless
/// `STRIDED_APPLY_FORCE_PTX=1` (then PTX), visible in `module_info`; only the launched
/// families are loaded.
pub fn module_choice(_gpu: &Gpu) -> TestResult {
    use strided_apply::ops::Add;
    let g = strided_apply::open(0).map_err(estr)?;
    let forced = force_ptx();
    let info = g.module_info();
    let builtin = info
        .iter()
        .find(|i| i.module == "gpu-kernels")
        .ok_or("built-in module not listed")?;
    let chosen = builtin.chosen.ok_or("no target chosen")?;
    let want = if forced {
        image::Kind::Ptx
    } else {
        image::Kind::Cubin
    };
    if chosen.kind != want || builtin.forced_ptx != forced {
        return Err(format!("chose {chosen} (forced {forced}): {builtin}"));
    }
    if !builtin.loaded.is_empty() {
        return Err(format!("families loaded before any launch: {builtin}"));
    }
    let a = DeviceTensor::from_slice(&g, &[1.0f32, 2.0], &[2]).map_err(estr)?;
    let mut out = DeviceTensor::<f32>::zeros(&g, &[2]).map_err(estr)?;
    api::apply3(&g, Add, &mut out, &a, &a).map_err(estr)?;
    let one = DeviceTensor::from_slice(&g, &[5.0f32], &[1]).map_err(estr)?;
    api::apply3(&g, Add, &mut out, &a, &one).map_err(estr)?;
    if out.to_vec(&g).map_err(estr)? != [6.0, 7.0] {
        return Err("wrong sums".into());
    }
    let after = g.module_info();
    let loaded: Vec<&str> = after
        .iter()
        .find(|i| i.module == "gpu-kernels")
        .map(|i| i.loaded.iter().map(|l| l.family).collect())
        .unwrap_or_default();
    if loaded != ["add_f32"] {
        return Err(format!("loaded {loaded:?} for two f32 adds"));
    }
    Ok(after
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; "))
}
