//! GPU-only glue: thread indices and the panic handler.

use crate::geometry::Index;
use core::arch::nvptx;

/// This thread's first linear index and the grid-stride step.
#[inline(always)]
pub fn thread_range<I: Index>() -> (I, I) {
    // SAFETY: reading special registers has no preconditions.
    unsafe {
        let block = nvptx::_block_idx_x() as u64;
        let dim = nvptx::_block_dim_x() as u64;
        let thread = nvptx::_thread_idx_x() as u64;
        let grid = nvptx::_grid_dim_x() as u64;
        (I::from_u64(block * dim + thread), I::from_u64(grid * dim))
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; the host sees a launch failure.
    unsafe { nvptx::trap() }
}
