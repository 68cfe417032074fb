//! The host side of the custom-op example: the kernel image of `custom-op-kernels`
//! (compiled by `build.rs`) as a [`ModuleImage`](strided_apply::ModuleImage), registered beside the
//! library's built-in kernels. Launches go through strided-apply's planner and typed API,
//! and the CPU twin runs the same op code.
//!
//! ```
//! use custom_op::kernels::Huber;
//! use strided_apply::{cpu, Layout};
//! let (a, b) = (vec![0.0f32, 1.0, 5.0], vec![0.5f32]);
//! let mut loss = vec![0.0f32; 3];
//! let (l3, l1) = (Layout::contiguous(&[3])?, Layout::contiguous(&[1])?);
//! cpu::apply3(Huber { delta: 1.0f32 }, (&mut loss, &l3), (&a, &l3), (&b, &l1))?;
//! assert_eq!(loss, [0.125, 0.125, 4.0]);
//! # Ok::<(), strided_apply::Error>(())
//! ```

pub use custom_op_kernels as kernels;

include!(concat!(env!("OUT_DIR"), "/module.rs"));

/// Opens device `ordinal` with the built-in kernels and this crate's kernels registered.
pub fn open(ordinal: usize) -> strided_apply::Result<strided_apply::Gpu> {
    let gpu = strided_apply::open(ordinal)?;
    gpu.register(MODULE);
    Ok(gpu)
}
