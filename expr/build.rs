//! Tells the crates that embed this crate's kernel image (the `strided-apply` facade's
//! build script) where its sources and committed snapshot (`image/`) are, as
//! `DEP_STRIDED_APPLY_EXPR_KERNELS_ROOT`: from a registry, this crate's own unpacked
//! directory.
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    println!("cargo:root={dir}");
    println!("cargo:rerun-if-changed=build.rs");
}
