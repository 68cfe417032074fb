//! The program in shared memory: each block stages it once ([`stage`]), and the
//! interpreters read its instructions, dispatch words and constants from there.

use crate::eval::fast_word;
use crate::ir::{Instr, Program, MAX_INSTRS};
use crate::kernel::PROGRAM_BYTES;
use core::arch::nvptx;
use gpu_kernels::device::{ld_shared_u32, shared_base32, st_shared_u32, sync_threads, tile_thread};

/// `$f(w)` for each constant `w` of `0..100`.
macro_rules! hundred {
    ($f:ident) => { hundred!(@hi $f, 0 1 2 3 4 5 6 7 8 9) };
    (@hi $f:ident, $($h:literal)*) => { $( hundred!(@lo $f, $h, 0 1 2 3 4 5 6 7 8 9); )* };
    (@lo $f:ident, $h:literal, $($l:literal)*) => { $( $f($h * 10 + $l); )* };
}

/// Copies the program into this block's shared memory, and with `words` (a fast path's
/// kernel) the dispatch word of each instruction after it ([`word`]); returns the
/// program's shared address.
///
/// # Safety
/// The launch provides [`STAGED_BYTES`] of dynamic shared memory, and every thread of
/// the block calls this once, with the same `words`, before any other shared-memory
/// access.
#[inline(always)]
pub(crate) unsafe fn stage(p: &Program, words: bool) -> u32 {
    let base = shared_base32();
    if tile_thread().0 == 0 {
        const WORDS: usize = PROGRAM_BYTES as usize / 4;
        // SAFETY: `Program` is `repr(C)`, 400 bytes of plain integers, 4-byte aligned.
        let words = unsafe { &*(p as *const Program as *const [u32; WORDS]) };
        // Word `w` of the parameter at a constant offset (a loop would index the
        // parameter at run time, which copies it whole into a stack frame).
        let copy = |w: usize| {
            if w < WORDS {
                // SAFETY: below PROGRAM_BYTES of the launch's shared memory, aligned.
                unsafe { st_shared_u32(base + 4 * w as u32, words[w]) };
            }
        };
        const _: () = assert!(WORDS <= 100);
        hundred!(copy);
    }
    sync_threads();
    if words {
        // SAFETY: reading special registers has no preconditions.
        let (tid, threads) = unsafe { (nvptx::_thread_idx_x(), nvptx::_block_dim_x()) };
        let mut pc = tid as usize;
        while pc < MAX_INSTRS {
            // SAFETY: below STAGED_BYTES, aligned; the program is staged.
            unsafe {
                st_shared_u32(
                    base + PROGRAM_BYTES + 4 * pc as u32,
                    fast_word(fetch(base, pc)),
                )
            };
            pc += threads as usize;
        }
        sync_threads();
    }
    base
}

/// The fast path's dispatch word of instruction `pc` ([`fast_word`]), as staged.
#[inline(always)]
pub(crate) fn word(base: u32, pc: usize) -> u32 {
    // SAFETY: `pc < MAX_INSTRS` (the interpreter's bound), inside the staged words.
    unsafe { ld_shared_u32(base + PROGRAM_BYTES + 4 * pc as u32) }
}

/// Instruction `pc` of the staged program.
#[inline(always)]
pub(crate) fn fetch(base: u32, pc: usize) -> Instr {
    // SAFETY: `pc < MAX_INSTRS` (the interpreter's bound), inside the staged program.
    let w = unsafe { ld_shared_u32(base + 4 * pc as u32) };
    let b = w.to_le_bytes();
    Instr {
        op: b[0],
        class: b[1],
        depth: b[2],
        arg: b[3],
    }
}

/// Constant `c` of the staged program.
#[inline(always)]
pub(crate) fn konst(base: u32, c: usize) -> u64 {
    const CONSTS: u32 = core::mem::offset_of!(Program, consts) as u32;
    let at = base + CONSTS + 8 * c as u32;
    // SAFETY: `c < MAX_CONSTS` (the interpreter masks it), inside the staged program.
    let (lo, hi) = unsafe { (ld_shared_u32(at), ld_shared_u32(at + 4)) };
    lo as u64 | (hi as u64) << 32
}
