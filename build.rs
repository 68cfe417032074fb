//! Ahead-of-time PTX for the built-in kernels (`gpu-kernels`), for sm_70, sm_80 and sm_90.
//! Uses the committed snapshot (`gpu-kernels/ptx/`) when its fingerprint matches the
//! kernel sources, so stable Rust without any GPU toolchain builds this crate; otherwise
//! compiles with the NVPTX toolchain (`scripts/setup-toolchain`).

fn main() {
    let root =
        std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it"));
    let build = strided_apply_builder::PtxBuild::new(root.join("gpu-kernels"));
    let ptx = build.run().unwrap_or_else(|e| panic!("{e}"));
    let embedded = ptx
        .embed(&out.join("embed"))
        .unwrap_or_else(|e| panic!("{e}"));
    println!(
        "cargo:rustc-env=STRIDED_APPLY_PTX_BODY={}",
        embedded.body.display()
    );
    for (sm, header, shared) in &embedded.targets {
        println!(
            "cargo:rustc-env=STRIDED_APPLY_PTX_SM{sm}_HEADER={}",
            header.display()
        );
        println!(
            "cargo:rustc-env=STRIDED_APPLY_PTX_SM{sm}_SHARED={}",
            *shared as u8
        );
    }
    println!("cargo:rustc-env=STRIDED_APPLY_PTX_SOURCE={:?}", ptx.source);
    println!(
        "cargo:rustc-env=STRIDED_APPLY_PTX_FINGERPRINT={}",
        ptx.fingerprint
    );
}
