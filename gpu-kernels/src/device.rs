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

// Dynamic shared memory, sized at launch; the tiled variant carves its tiles out of it.
core::arch::global_asm!(".extern .shared .align 16 .b8 smem_dyn[];");

/// Generic address of this block's dynamic shared memory.
#[inline(always)]
pub fn shared_base() -> *mut u8 {
    let p: u64;
    // SAFETY: converts the address of the declared shared array; no memory is touched.
    unsafe { core::arch::asm!("cvta.shared.u64 {0}, smem_dyn;", out(reg64) p) };
    p as *mut u8
}

/// `(threadIdx.x, threadIdx.y, blockIdx.x)`.
#[inline(always)]
pub fn tile_thread() -> (u32, u32, u32) {
    // SAFETY: reading special registers has no preconditions.
    unsafe {
        (
            nvptx::_thread_idx_x() as u32,
            nvptx::_thread_idx_y() as u32,
            nvptx::_block_idx_x() as u32,
        )
    }
}

/// Block-wide barrier.
#[inline(always)]
pub fn sync_threads() {
    // SAFETY: every thread of the block reaches the barrier (no divergent early return).
    unsafe { nvptx::_syncthreads() }
}
