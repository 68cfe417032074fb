//! Compiles the kernel crate `kernels/` with strided-apply-builder into a compressed kernel
//! image (cubins for sm_70/80/90/100/120 and PTX, one frame per kernel family, each loaded
//! on first use) and writes `$OUT_DIR/module.rs` (`pub const MODULE: ModuleImage`).
//! Needs the NVPTX toolchain and ptxas (`scripts/setup-toolchain` at the repository root):
//! this example keeps no snapshot, to show the from-source path a downstream crate takes.
//! `STRIDED_APPLY_EXAMPLE_CUBINS=90` (comma-separated SM versions) builds only those cubins
//! and the PTX they come from (CI builds sm_90's: one nvptx build instead of three).

use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it"));
    let mut build = strided_apply_builder::PtxBuild::new(dir.join("kernels"));
    // The PTX also depends on the library's kernel bodies.
    build.extra_sources.push(dir.join("../../gpu-kernels"));
    build.target_dir = dir.join("../../target/ptx-build/custom-op");
    println!("cargo:rerun-if-env-changed=STRIDED_APPLY_EXAMPLE_CUBINS");
    if let Ok(list) = std::env::var("STRIDED_APPLY_EXAMPLE_CUBINS") {
        let sms: Vec<u32> = list
            .split(',')
            .filter_map(|a| a.trim().parse().ok())
            .collect();
        if !build.only_cubins(&sms) {
            eprintln!("custom-op: STRIDED_APPLY_EXAMPLE_CUBINS=`{list}` names none of the cubins");
            std::process::exit(1);
        }
    }
    let result = build
        .run()
        .and_then(|ptx| ptx.write_module_rs(&out, "custom-op-kernels", "strided_apply"));
    if let Err(e) = result {
        eprintln!("custom-op: building the kernel image failed: {e}");
        std::process::exit(1);
    }
}
