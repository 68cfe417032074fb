//! The final kernel (`<family>_f`): a block per output, the tree over its groups' values
//! in the scratch.

use super::gpu::block_tree;
use super::*;
use crate::device::{shared_base, sync_threads, tile_thread};

/// The final kernel: block `o` trees over output `o`'s `groups` values in `scratch`
/// and writes the output. `FINAL_BLOCK` threads, `groups * size_of::<Acc>()` bytes of
/// dynamic shared memory.
///
/// # Safety
/// The [`ReduceGeometry`] invariants with `groups > 1`; the launch shape above.
#[inline(always)]
pub unsafe fn finals<S: Source<T, K>, T, const K: usize>(
    src: S,
    g: &ReduceGeometry,
    out: *mut OutOf<S, T, K>,
    scratch: *const AccOf<S, T, K>,
) {
    let op = src.reduction();
    let (tid, _, o) = tile_thread();
    let sm = shared_base() as *mut AccOf<S, T, K>;
    let mut l = tid;
    while l < g.groups {
        // SAFETY: invariant 4; `l < groups`, the shared array's length.
        unsafe { *sm.add(l as usize) = *scratch.add((o * g.groups + l) as usize) };
        l += FINAL_BLOCK;
    }
    sync_threads();
    // SAFETY: every thread calls it.
    unsafe { block_tree(&op, sm, g.groups, MAX_GROUPS / 2, FINAL_BLOCK, tid) };
    if tid == 0 {
        let (oo, _) = g.kept_offsets::<0>(o);
        // SAFETY: invariant 3; `*sm` is the tree's result.
        unsafe { *out.offset(oo) = op.finish(*sm, g.n) };
    }
}
