//! The group kernels of expression reductions (`expr_<class>r_groups`) and their final
//! kernel (`expr_reduce_final`), over [`crate::reduce`]'s walk and order.

use crate::ir::{Instr, Program};
use crate::kernel::interp::Path;
use crate::kernel::staging::{fetch, konst, stage, word};
use crate::kernel::{Pointers, STAGED_BYTES};
use crate::reduce::store_bits;
use crate::reduce::{self, input_bases, Walk};
use crate::value::Math;
use gpu_kernels::device::{
    block_rows_and_grid, shared_base, sync_threads, sync_warp, tile_thread, WARP,
};
use gpu_kernels::reduce::{Reduce, FINAL_BLOCK, MAX_GROUPS, SLOT_BITS};

/// The halving tree over the `1 << shift` slots of thread `tid`'s segment of the
/// block, as `gpu_kernels::reduce`'s row kernel pairs them ([`tree`](crate::reduce::tree)):
/// the thread holds its slot's value `v`, the first `used` slots take part, a block
/// barrier before each level of at least a warp of pairs and a warp barrier before the
/// others (a segment of at most a warp of slots lies in one warp). Slot 0's thread
/// returns the tree's value. Every thread of the block calls it with the same `shift`.
///
/// # Safety
/// `sm` holds `SLOTS` accumulators of this block's shared memory; `tid < SLOTS`.
#[inline(always)]
unsafe fn segment_tree<R: Reduce<T>, T>(
    op: &R,
    sm: *mut R::Acc,
    mut v: R::Acc,
    tid: u32,
    shift: u32,
    used: u32,
) -> R::Acc {
    let slot = tid & ((1 << shift) - 1);
    // SAFETY (every access below): `seg + slot + s` with `slot + s < 1 << shift`
    // stays in the thread's segment, inside the `SLOTS` accumulators.
    let seg = unsafe { sm.add((tid - slot) as usize) };
    unsafe { *sm.add(tid as usize) = v };
    let mut s = (1u32 << shift) / 2;
    if s >= WARP {
        sync_threads();
    }
    while s >= 1 {
        if s < WARP {
            sync_warp();
        }
        if slot < s {
            if slot + s < used {
                v = op.combine(v, unsafe { *seg.add((slot + s) as usize) });
            }
            unsafe { *seg.add(slot as usize) = v };
        }
        if s / 2 >= WARP {
            sync_threads();
        }
        s /= 2;
    }
    v
}

/// The group kernels of an expression reduction (`crate::reduce`), one per interpreter
/// (`reduce::GROUP_KERNELS`): logical block `b < blocks` reduces group `b % groups` of
/// `SLOTS >> row_shift` consecutive outputs, thread `t` folding slot `t % (1 <<
/// row_shift)` of output `t >> row_shift` among them; one group's value is the output,
/// more go to the scratch. Any grid: block `k` takes the logical blocks `k, k + grid,
/// …`. `SLOTS` threads, [`STAGED_BYTES`] + `8 * SLOTS` bytes of dynamic shared memory.
///
/// # Safety
/// The module contract's program (a fast kernel only for a program of its path), the
/// [`Geometry`](crate::reduce::Geometry) invariants, the launch shape above.
#[inline(always)]
unsafe fn reduce_groups(
    path: Path,
    p: &Program,
    g: &reduce::Geometry,
    ptrs: &Pointers,
    scratch: u64,
) {
    // SAFETY: the launch's shared memory; called once by every thread.
    let base = unsafe { stage(p, !matches!(path, Path::General)) };
    let walk = Walk::new(
        p,
        g,
        |pc| fetch(base, pc),
        |pc| word(base, pc),
        |c| konst(base, c),
    );
    let (tid, _, first) = tile_thread();
    let (_, grid) = block_rows_and_grid();
    // Each block takes the logical blocks `first, first + grid, …` (the program staged
    // once for all of them).
    let mut bid = first;
    while bid < g.blocks {
        // The previous logical block's tree is read to the end before this one's
        // slots overwrite it.
        sync_threads();
        // SAFETY: forwarded; every thread of the block takes the same logical blocks.
        unsafe { reduce_block(path, &walk, g, ptrs, scratch, tid, bid) };
        bid += grid;
    }
}

/// Logical block `bid` of a group kernel ([`reduce_groups`]).
///
/// # Safety
/// As [`reduce_groups`]; every thread of the block calls it with the same `bid`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn reduce_block<F: Fn(usize) -> Instr, W: Fn(usize) -> u32, C: Fn(usize) -> u64>(
    path: Path,
    walk: &Walk<F, W, C>,
    g: &reduce::Geometry,
    ptrs: &Pointers,
    scratch: u64,
    tid: u32,
    bid: u32,
) {
    let shift = g.row_shift;
    let slot = tid & ((1 << shift) - 1);
    let o = ((bid / g.groups) << (SLOT_BITS - shift)) + (tid >> shift);
    let grp = bid % g.groups;
    // Invariant 2: only the last logical block has outputs past the last; theirs read
    // and write nothing, and their offsets are the last output's.
    let live = o < g.outputs;
    let (lo, len) = g.group(grp);
    let (oo, io) = g.kept_offsets(if live { o } else { g.outputs - 1 }, walk.n_in);
    let bases = input_bases(&ptrs.0, &io, &walk.ins, walk.n_in);
    let group = if live { (lo, len) } else { (lo, 0) };
    // SAFETY (the items): invariant 3 for this output's group; the host launches a
    // fast kernel only for a program of its path whose output has its math type
    // (`reduce::groups_kernel`).
    macro_rules! fast {
        ($t:ty) => {{
            const L: usize = reduce::lanes(core::mem::size_of::<$t>());
            unsafe { walk.slot_fast::<$t, L>(g, &bases, group, slot) }.map(|v| v.enc())
        }};
    }
    let v = match path {
        // The reduce kernels run every program's ops (`run`, extended ones included).
        Path::General | Path::GeneralExt => {
            const G: usize = reduce::GENERAL_LANES;
            walk.slot::<G>(group, slot, |r, live| unsafe {
                walk.items::<G>(g, &bases, r, live)
            })
        }
        Path::F32 => fast!(f32),
        Path::F64 => fast!(f64),
        Path::I32 => fast!(i32),
        Path::I64 => fast!(i64),
        Path::U32 => fast!(u32),
        Path::U8 => fast!(u8),
    };
    let v = v.unwrap_or(0);
    // SAFETY: the launch's shared memory holds `SLOTS` accumulators after the staged
    // program (8-byte aligned: `STAGED_BYTES` is a multiple of 8); every thread calls
    // the tree with the same `shift <= SLOT_BITS`.
    let v = unsafe {
        let sm = shared_base().add(STAGED_BYTES as usize) as *mut u64;
        segment_tree(&walk.fold, sm, v, tid, shift, g.used(len, walk.w))
    };
    if live && slot == 0 {
        if g.groups == 1 {
            // SAFETY: invariant 3, the output's offset.
            unsafe { store_bits(ptrs.0[0], oo, walk.out.size(), walk.output(g, v)) };
        } else {
            // SAFETY: invariant 4.
            unsafe { *(scratch as *mut u64).add((o * g.groups + grp) as usize) = v };
        }
    }
}

/// The group kernels, `expr_<class>r_groups`.
macro_rules! reduce_groups {
    ($($suffix:literal $path:ident;)*) => {$(
        const _: () = {
            #[export_name = concat!("expr_", $suffix, "r_groups")]
            #[allow(improper_ctypes_definitions)]
            unsafe extern "ptx-kernel" fn entry(
                p: Program,
                g: reduce::Geometry,
                ptrs: Pointers,
                scratch: u64,
            ) {
                // SAFETY: the module contract and `reduce_groups`'.
                unsafe { reduce_groups(Path::$path, &p, &g, &ptrs, scratch) }
            }
        };
    )*};
}

reduce_groups! {
    "g" General;
    "f" F32;
    "d" F64;
    "i" I32;
    "l" I64;
    "u" U32;
    "b" U8;
}

/// The final kernel of an expression reduction of more than one group: block `o`
/// trees over output `o`'s group values in the scratch and writes the output.
/// `FINAL_BLOCK` threads, `8 * groups` bytes of dynamic shared memory.
///
/// # Safety
/// As the group kernels, after one on the same stream.
#[export_name = "expr_reduce_final"]
#[allow(improper_ctypes_definitions)]
unsafe extern "ptx-kernel" fn reduce_final(
    p: Program,
    g: reduce::Geometry,
    ptrs: Pointers,
    scratch: u64,
) {
    // The walk's program is not read here: its output type and reduction only.
    let walk = Walk::new(&p, &g, |_| Instr::default(), |_| 0, |_| 0);
    let (tid, _, o) = tile_thread();
    let sm = shared_base() as *mut u64;
    let mut l = tid;
    while l < g.groups {
        // SAFETY: invariant 4; `l < groups`, the shared array's length.
        unsafe { *sm.add(l as usize) = *(scratch as *const u64).add((o * g.groups + l) as usize) };
        l += FINAL_BLOCK;
    }
    // The halving tree over the groups, as `tree` pairs them.
    let mut s = MAX_GROUPS / 2;
    while s >= 1 {
        sync_threads();
        let mut l = tid;
        while l < s {
            if l + s < g.groups {
                // SAFETY: `l + s < groups`, within the shared array.
                unsafe {
                    *sm.add(l as usize) = walk
                        .fold
                        .combine(*sm.add(l as usize), *sm.add((l + s) as usize))
                };
            }
            l += FINAL_BLOCK;
        }
        s /= 2;
    }
    sync_threads();
    if tid == 0 {
        let (oo, _) = g.kept_offsets(o, 0);
        // SAFETY: invariant 3; `*sm` is the tree's value.
        unsafe { store_bits(ptrs.0[0], oo, walk.out.size(), walk.output(&g, *sm)) };
    }
}
