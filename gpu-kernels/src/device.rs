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

/// Shared-window (32-bit) address of this block's dynamic shared memory, for
/// [`ld_shared_u32`] and [`st_shared_u32`]: accesses through it compile to shared-memory
/// instructions with the constant part of the address as an immediate, where the generic
/// pointer of [`shared_base`] left ptxas generic loads and stores and 64-bit address sums
/// (`benches/NOTES.md`, "Shared memory").
#[inline(always)]
pub fn shared_base32() -> u32 {
    let p: u32;
    // SAFETY: takes the address of the declared shared array; no memory is touched.
    unsafe {
        core::arch::asm!("mov.u32 {0}, smem_dyn;", out(reg32) p, options(nomem, nostack, pure))
    };
    p
}

/// Stores `v` at shared-window address `addr`.
///
/// # Safety
/// `addr` is 4-byte aligned and inside this block's dynamic shared memory (from
/// [`shared_base32`] plus an offset below the launch's shared bytes).
#[inline(always)]
pub unsafe fn st_shared_u32(addr: u32, v: u32) {
    core::arch::asm!("st.shared.u32 [{0}], {1};", in(reg32) addr, in(reg32) v, options(nostack));
}

/// The 4-byte word at shared-window address `addr`.
///
/// # Safety
/// As [`st_shared_u32`].
#[inline(always)]
pub unsafe fn ld_shared_u32(addr: u32) -> u32 {
    let v: u32;
    core::arch::asm!(
        "ld.shared.u32 {0}, [{1}];",
        out(reg32) v,
        in(reg32) addr,
        options(nostack, readonly, pure)
    );
    v
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

/// `(blockDim.y, gridDim.x)`.
#[inline(always)]
pub fn block_rows_and_grid() -> (u32, u32) {
    // SAFETY: reading special registers has no preconditions.
    unsafe { (nvptx::_block_dim_y() as u32, nvptx::_grid_dim_x() as u32) }
}

/// Block-wide barrier.
#[inline(always)]
pub fn sync_threads() {
    // SAFETY: every thread of the block reaches the barrier (no divergent early return).
    unsafe { nvptx::_syncthreads() }
}

/// Threads per warp.
pub const WARP: u32 = 32;

/// Warp-wide barrier over all 32 lanes (`bar.warp.sync`): orders the lanes' shared-memory
/// accesses before it against those after it, as [`sync_threads`] does for the block.
#[inline(always)]
pub fn sync_warp() {
    // SAFETY: every lane of the warp reaches it (callers run it outside divergent code);
    // it touches no memory itself (the asm's memory clobber keeps accesses on their side).
    unsafe { core::arch::asm!("bar.warp.sync -1;", options(nostack)) }
}

/// Lane `lane + s`'s `v` (`shfl.sync.down`, all 32 lanes; lanes past 31 get their own `v`).
///
/// # Safety
/// Every lane of the warp calls it with the same `s` (callers run it outside divergent
/// code).
#[inline(always)]
pub unsafe fn shfl_down(v: u32, s: u32) -> u32 {
    let r: u32;
    // SAFETY: the caller's contract (the full member mask names every lane); no memory.
    unsafe {
        core::arch::asm!(
            "shfl.sync.down.b32 {r}, {v}, {s}, 31, -1;",
            r = out(reg32) r,
            v = in(reg32) v,
            s = in(reg32) s,
            options(nomem, nostack)
        )
    };
    r
}

/// `E` elements of `T` from `p` (16-byte aligned; `E * size_of::<T>()` a multiple of 16)
/// as 16-byte `ld.global.v4` instructions in inline assembly. LLVM sees through a plain
/// load: it narrows one whose lanes are partly unused (as in [`load_even`]) to scalar loads,
/// and merges it with another path's loads of different widths; it can do neither here.
///
/// [`load_even`]: crate::apply
#[inline(always)]
pub unsafe fn load_v4<T: Copy, const E: usize>(p: *const T) -> [T; E] {
    let mut v = core::mem::MaybeUninit::<[T; E]>::uninit();
    let words = v.as_mut_ptr() as *mut [u32; 4];
    let src = p as *const [u32; 4];
    let mut i = 0;
    while i < core::mem::size_of::<[T; E]>() / 16 {
        let (a, b, c, d): (u32, u32, u32, u32);
        // SAFETY: the caller guarantees 16 readable, 16-byte aligned global bytes at
        // `src + i`; the block only declares a scoped register and loads.
        unsafe {
            core::arch::asm!(
                "{{ .reg .b64 g; cvta.to.global.u64 g, {p}; ld.global.v4.b32 {{{a}, {b}, {c}, {d}}}, [g]; }}",
                p = in(reg64) src.add(i),
                a = out(reg32) a,
                b = out(reg32) b,
                c = out(reg32) c,
                d = out(reg32) d,
                options(pure, readonly, nostack, preserves_flags),
            );
            *words.add(i) = [a, b, c, d];
        }
        i += 1;
    }
    // SAFETY: every byte was written above (the size is a multiple of 16), and `T` is a
    // plain number type, for which any bits are a value.
    unsafe { v.assume_init() }
}
