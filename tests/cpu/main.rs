//! The CPU tests, one module per topic, in one test binary (one link of the library's
//! generic code, not one per file: CI's build time): the CPU twin against a naive walk for
//! every (op, element types) × layout class (`conformance`), random layouts (`property`, with proptest),
//! reductions (`reduce`, `reduce_ops`), stencils (`stencil`), typed errors (`errors`), the
//! layout API (`layout`) and the kernel image (`image`). `cargo test --release --test cpu
//! NAME` runs the tests whose path contains NAME.

#[path = "../common/mod.rs"]
mod common;

mod conformance;
mod errors;
mod image;
mod layout;
mod property;
mod reduce;
mod reduce_ops;
mod stencil;
