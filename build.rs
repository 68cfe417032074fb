//! The kernel images, compressed: the op library's (`gpu-kernels`) and the expression
//! interpreter's (`strided-apply-expr`), each with cubins for sm_90 and sm_70 PTX for every
//! other GPU, one zstd frame per kernel family. Each uses its committed
//! snapshot (`<crate>/image/`) when the fingerprint matches the kernel sources, so stable
//! Rust without any GPU toolchain builds this crate; otherwise compiles with the NVPTX
//! toolchain and ptxas (`scripts/setup-toolchain`).

use std::path::{Path, PathBuf};

/// Builds (or takes from its snapshot) one kernel crate's image and writes
/// `<out>/<sub>/module.rs`; returns where the image came from and its fingerprint.
fn image(crate_dir: PathBuf, extra: &[PathBuf], module: &str, out: &Path, sub: &str) -> String {
    let mut build = strided_apply_builder::PtxBuild::new(crate_dir);
    build.extra_sources = extra.to_vec();
    let image = build.run().unwrap_or_else(|e| panic!("{e}"));
    let dir = out.join(sub);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    image
        .write_module_rs(&dir, module, "crate")
        .unwrap_or_else(|e| panic!("{e}"));
    format!("{:?} {}", image.source, image.fingerprint)
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it"));
    // Each kernel crate's directory, from its `links` metadata (a registry build unpacks it
    // beside this crate, not inside it); the workspace path otherwise.
    let dep = |var: &str, dir: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join(dir))
    };
    let kernels = dep("DEP_STRIDED_APPLY_KERNELS_ROOT", "gpu-kernels");
    let expr = dep("DEP_STRIDED_APPLY_EXPR_KERNELS_ROOT", "expr");
    let builtin = image(kernels.clone(), &[], "gpu-kernels", &out, "builtin");
    // The interpreter's kernels are built from the op library's sources too.
    let interp = image(expr, &[kernels], "strided-apply-expr", &out, "expr");
    let (source, fingerprint) = builtin.split_once(' ').unwrap_or((&builtin, ""));
    println!("cargo:rustc-env=STRIDED_APPLY_PTX_SOURCE={source}");
    println!("cargo:rustc-env=STRIDED_APPLY_PTX_FINGERPRINT={fingerprint}");
    let (source, fingerprint) = interp.split_once(' ').unwrap_or((&interp, ""));
    println!("cargo:rustc-env=STRIDED_APPLY_EXPR_PTX_SOURCE={source}");
    println!("cargo:rustc-env=STRIDED_APPLY_EXPR_PTX_FINGERPRINT={fingerprint}");
}
