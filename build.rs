//! The built-in kernels (`gpu-kernels`) as a compressed image: cubins for sm_70, sm_80,
//! sm_90, sm_100 and sm_120 and PTX for sm_70/80/90, one zstd frame per kernel family.
//! Uses the committed snapshot (`gpu-kernels/image/`) when its fingerprint matches the
//! kernel sources, so stable Rust without any GPU toolchain builds this crate; otherwise
//! compiles with the NVPTX toolchain and ptxas (`scripts/setup-toolchain`).

fn main() {
    let root =
        std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it"));
    // The kernel crate's directory, from its `links` metadata (a registry build unpacks it
    // beside this crate, not inside it); the workspace path otherwise.
    let kernels = std::env::var_os("DEP_STRIDED_APPLY_KERNELS_ROOT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root.join("gpu-kernels"));
    let build = strided_apply_builder::PtxBuild::new(kernels);
    let image = build.run().unwrap_or_else(|e| panic!("{e}"));
    image
        .write_module_rs(&out, "gpu-kernels", "crate")
        .unwrap_or_else(|e| panic!("{e}"));
    println!(
        "cargo:rustc-env=STRIDED_APPLY_PTX_SOURCE={:?}",
        image.source
    );
    println!(
        "cargo:rustc-env=STRIDED_APPLY_PTX_FINGERPRINT={}",
        image.fingerprint
    );
}
