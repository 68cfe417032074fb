//! The launch layer: turns a [`Plan`] into a kernel launch — the variant's geometry
//! (vectorised, tiled, collapsed dimensions, 32-bit pieces of huge plans) and the kernel
//! parameters — and hands it to [`Gpu::launch`], the one launch site. Every apply path (the
//! typed API, the raw API, run-time dispatch) ends here.

use crate::error::Result;
use crate::gpu::{Gpu, LaunchShape};
use crate::plan::Plan;
use cudarc::driver::sys::CUstream;
use gpu_kernels::apply::VecArg;
use gpu_kernels::{FastDiv, Geometry, Index, KernelNames, TileArg, Variant, MAX_DIMS};
use std::ffi::c_void;

/// The divider by 1, for kernel parameters whose divider goes unused or divides nothing
/// (the vectorised variant's `VecArg` outside its 2-D form, for a caller that launches it
/// through the driver itself, as the bench's raw-launch row does).
pub const DIV_ONE: FastDiv = match FastDiv::new(1) {
    Some(d) => d,
    None => panic!("1 is a divisor"),
};

/// Builds the per-variant kernel parameters and launches through [`Gpu::launch`].
///
/// # Safety
/// `ptrs[k]` is the device address of operand `k`'s element at `plan.base[k]`, in a buffer
/// for which the planner proved every offset of `plan` in bounds; the output does not
/// overlap itself and inputs overlap it only element-wise in place. `op` points to the
/// kernels' first parameter, an `OpArg` of the op that `names` were instantiated for (the
/// typed API's `OpArg::new(op)`, or run-time dispatch's `OpValue`).
pub(crate) unsafe fn launch_plan<const N: usize>(
    gpu: &Gpu,
    names: &KernelNames,
    op: *const c_void,
    plan: &Plan<N>,
    ptrs: [u64; N],
    elem_sizes: [usize; N],
    stream: CUstream,
) -> Result<()> {
    if let Some((g, arg)) = vec_geometry(plan, &ptrs, &elem_sizes) {
        let n = plan.numel;
        let mut args = params(op, &arg, &g, &ptrs);
        let chunks = n.div_ceil(gpu_kernels::apply::vec_width(&elem_sizes) as u64);
        // One chunk per thread, no grid-stride loop: on the H200 the CUDA C reference
        // measured 4353 against 4056–4151 GB/s (dense add) and 3352 against 3199–3206
        // (step-2 slice) for grid-stride launches of 4–32 blocks per SM. Blocks of
        // `VEC_BLOCK` (128) threads.
        let shape = gpu.shape_per_thread(chunks);
        // SAFETY: the parameter list is (OpArg<Op>, VecArg, Geometry<u32, 2, N>, N pointers),
        // as `kernels!` declares for the vectorised variant; `vec_geometry` checked its extra
        // alignment conditions and made the row divider, the caller the rest.
        return unsafe { gpu.launch(names, Variant::Vec, shape, stream, args.as_mut()) };
    }
    if let Some((g, t, shape)) = tiled_geometry(names, plan, &ptrs, &elem_sizes) {
        let mut args = params(op, &t, &g, &ptrs);
        // SAFETY: the parameter list is (OpArg<Op>, TileArg, Geometry<u32, 5, N>, N pointers)
        // as `kernels!` declares for the tiled variant; `tiled_geometry` sized the launch.
        return unsafe { gpu.launch(names, Variant::Tiled, shape, stream, args.as_mut()) };
    }
    // A dense plan whose operands are not all 16-byte aligned has no kernel of its own: it
    // runs as one axis of unit strides (`D1`, or 32-bit pieces of it beyond 2^31 elements).
    let plan = &*plan.strided();
    unsafe fn go<I: Index, const D: usize, const N: usize>(
        gpu: &Gpu,
        names: &KernelNames,
        op: *const c_void,
        plan: &Plan<N>,
        ptrs: [u64; N],
        stream: CUstream,
    ) -> Result<()> {
        let n = I::from_u64(plan.numel);
        let g = plan.geometry::<I, D>();
        let mut args = params(op, &n, &g, &ptrs);
        // SAFETY: the parameter list is (OpArg<Op>, I, Geometry<I, D, N>, N pointers), as
        // `kernels!` declares for this variant; pointers are valid by this fn's contract.
        unsafe {
            gpu.launch(
                names,
                plan.variant,
                gpu.shape_1d(plan.numel),
                stream,
                args.as_mut(),
            )
        }
    }
    /// Launches a plan with its own scalar variant (never `Dn64`).
    unsafe fn scalar<const N: usize>(
        gpu: &Gpu,
        names: &KernelNames,
        op: *const c_void,
        plan: &Plan<N>,
        ptrs: [u64; N],
        stream: CUstream,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe {
            match plan.variant {
                // `Contig` is flattened to `D1` above, `Vec` and `Tiled` are chosen above:
                // no plan reaches here with them.
                Variant::D1 | Variant::Contig | Variant::Vec | Variant::Tiled => {
                    go::<u32, 1, N>(gpu, names, op, plan, ptrs, stream)
                }
                Variant::D2 => go::<u32, 2, N>(gpu, names, op, plan, ptrs, stream),
                Variant::D3 => go::<u32, 3, N>(gpu, names, op, plan, ptrs, stream),
                Variant::Dn | Variant::Dn64 => {
                    go::<u32, MAX_DIMS, N>(gpu, names, op, plan, ptrs, stream)
                }
            }
        }
    }
    if plan.variant != Variant::Dn64 {
        // SAFETY: forwarded contract.
        return unsafe { scalar(gpu, names, op, plan, ptrs, stream) };
    }
    // No 64-bit strided kernels: 32-bit launches over pieces (each a subset of the plan's
    // indices, so the caller's bounds and aliasing proofs cover it; `split32` gives no
    // `Dn64` piece).
    for (piece, off) in plan.split32() {
        let mut p = ptrs;
        for k in 0..N {
            p[k] = ptrs[k].wrapping_add_signed(off[k] * elem_sizes[k] as i64);
        }
        // SAFETY: as above, for the piece's part of every operand.
        unsafe { scalar(gpu, names, op, &piece, p, stream)? };
    }
    Ok(())
}

/// Kernel parameters in the order every variant declares them: the op, a scalar (the
/// element count or the tile arguments), the geometry, then one device pointer per operand.
/// The pointers in the result point into the arguments, which must outlive the launch.
/// A fixed array (no allocation per launch); [`Params::as_mut`] is the used part.
pub(crate) fn params<S, G, const N: usize>(
    op: *const c_void,
    scalar: &S,
    g: &G,
    ptrs: &[u64; N],
) -> Params {
    const { assert!(N <= 4, "apply kernels take at most 4 operands") };
    let mut p = Params {
        args: [std::ptr::null_mut(); 3 + 4],
        len: 3 + N,
    };
    p.args[0] = op as *mut c_void;
    p.args[1] = scalar as *const S as *mut c_void;
    p.args[2] = g as *const G as *mut c_void;
    for (slot, ptr) in p.args[3..].iter_mut().zip(ptrs) {
        *slot = ptr as *const u64 as *mut c_void;
    }
    p
}

/// A launch's parameter pointers (at most 4 operands).
pub(crate) struct Params {
    args: [*mut c_void; 3 + 4],
    len: usize,
}

impl Params {
    pub(crate) fn as_mut(&mut self) -> &mut [*mut c_void] {
        &mut self.args[..self.len]
    }
}

/// The vectorised variant's geometry when it applies: every base pointer 16-byte aligned,
/// and either a contiguous plan, or a 1-axis or 2-axis plan whose inner axis has stride 1
/// in the output and 1 in every input, or 2 in an input that `step2_ok` allows (a
/// step-2 slice such as `A[:, ::2]`); with 2 axes, also a row length that is a multiple of
/// the vector width and 16-byte aligned row strides.
fn vec_geometry<const N: usize>(
    plan: &Plan<N>,
    ptrs: &[u64; N],
    elem_sizes: &[usize; N],
) -> Option<(Geometry<u32, 2, N>, VecArg)> {
    if ptrs.iter().any(|p| p % 16 != 0) {
        return None;
    }
    let width = gpu_kernels::apply::vec_width(elem_sizes) as u64;
    // Stride 2 only for 4- and 8-byte inputs read as whole 16-byte vectors (the kernels
    // compile the path out of the others: their bytes would be picked out of 32-bit words,
    // one by one).
    let step_ok = |k: usize| match plan.strides[k][0] {
        1 => true,
        2 => gpu_kernels::apply::step2_ok(elem_sizes[k], width as usize),
        _ => false,
    };
    let inner_ok = plan.strides[0][0] == 1 && (1..N).all(step_ok);
    let one = DIV_ONE;
    let arg = |row| VecArg { n: plan.numel, row };
    match plan.variant {
        Variant::Contig => Some((Geometry::empty(), arg(one))),
        Variant::D1 => inner_ok.then(|| (plan.geometry::<u32, 2>(), arg(one))),
        Variant::D2 => {
            let rows_ok = (0..N).all(|k| (plan.strides[k][1] * elem_sizes[k] as i64) % 16 == 0);
            // Chunks per row, at least one; a 2-D plan is 32-bit, so chunk indices are below
            // 2^31 as `FastDiv` needs.
            let per_row = u32::try_from(plan.sizes[0] / width)
                .ok()
                .and_then(FastDiv::new)?;
            (inner_ok && rows_ok && plan.sizes[0].is_multiple_of(width))
                .then(|| (plan.geometry::<u32, 2>(), arg(per_row)))
        }
        _ => None,
    }
}

/// The tiled variant's geometry when it applies ([`tile_axes`]).
/// With 2-byte operands (the paired form) the operands whose pairs are aligned words are
/// marked ([`pairs_aligned`]).
fn tiled_geometry<const N: usize>(
    names: &KernelNames,
    plan: &Plan<N>,
    ptrs: &[u64; N],
    elem_sizes: &[usize; N],
) -> Option<(Geometry<u32, 5, N>, TileArg, LaunchShape)> {
    if names.tiled.is_empty() {
        return None;
    }
    let (g, mut staged) = tile_axes(plan)?;
    let tile = gpu_kernels::tile_shape(elem_sizes);
    if tile.paired {
        for k in 0..N {
            let unit_axis = usize::from(k > 0 && staged & 1 << (k - 1) != 0);
            if pairs_aligned(&g, k, unit_axis, ptrs[k]) {
                staged |= gpu_kernels::PAIR_ALIGNED << k;
            }
        }
    }
    // Every divisor is at least 1 (sizes in use are) and at most the element count, below
    // 2^31 in a 32-bit plan; `FastDiv::new` checks both.
    let t = TileArg {
        staged,
        tiles_x: FastDiv::new(g.sizes[0].div_ceil(tile.x))?,
        tiles_y: FastDiv::new(g.sizes[1].div_ceil(tile.y))?,
        batch: [
            FastDiv::new(g.sizes[2].max(1))?,
            FastDiv::new(g.sizes[3].max(1))?,
        ],
    };
    let batch: u64 = (2..plan.ndim).map(|d| g.sizes[d] as u64).product();
    let blocks = t.tiles_x.d as u64 * t.tiles_y.d as u64 * batch;
    let shared: usize = (1..N).map(|k| tile.stage_bytes(elem_sizes[k])).sum();
    // Above 48 KiB a kernel needs an opt-in attribute. No layout comes near it (two staged
    // 8-byte inputs take 2 × 8.5 KiB with apply3's 32 × 32 tiles, one 33.3 KiB with
    // apply2's 64 × 64), so this only guards the tile constants.
    (blocks <= i32::MAX as u64 && shared <= 48 * 1024).then_some((
        g,
        t,
        LaunchShape {
            grid: blocks as u32,
            block: (32, tile.rows),
            shared_bytes: shared as u32,
        },
    ))
}

/// The axes of a tiled launch, when a plan has them: a 32-bit plan of at most 5 dimensions
/// whose output has unit stride on axis 0 while some input has unit stride on another axis
/// `j`. Axes are reordered to `[0, j, batch…]`, the batch axes by that input's strides; the
/// inputs not coalesced along axis 0 are staged (bit `k - 1` of the mask: input `k`).
pub(crate) fn tile_axes<const N: usize>(plan: &Plan<N>) -> Option<(Geometry<u32, 5, N>, u32)> {
    let fits = matches!(plan.variant, Variant::D2 | Variant::D3 | Variant::Dn) && plan.ndim <= 5;
    if !fits || plan.strides[0][0] != 1 {
        return None;
    }
    let slow = |k: usize| !matches!(plan.strides[k][0], -1..=1);
    let (j, k) = (1..plan.ndim).find_map(|d| {
        (1..N)
            .find(|&k| slow(k) && plan.strides[k][d].abs() == 1)
            .map(|k| (d, k))
    })?;
    // Batch axes in the order of input k's strides, so consecutive blocks read consecutive
    // memory of it (in the output's order the bf16 permuted copy ran 3-4 % slower:
    // `benches/NOTES.md`, "Tiles").
    let mut order: Vec<usize> = [0, j]
        .into_iter()
        .chain((1..plan.ndim).filter(|&d| d != j))
        .collect();
    order[2..].sort_by_key(|&d| plan.strides[k][d].unsigned_abs());
    let mut g = Geometry::<u32, 5, N>::empty();
    g.ndim = plan.ndim as u32;
    for (to, &from) in order.iter().enumerate() {
        g.sizes[to] = plan.sizes[from] as u32;
        for k in 0..N {
            g.strides[k][to] = plan.strides[k][from] as i32 as u32;
        }
    }
    let staged = (1..N)
        .filter(|&k| slow(k))
        .fold(0u32, |m, k| m | 1 << (k - 1));
    Some((g, staged))
}

/// Whether every pair of 2-byte elements of operand `k` that a paired tile moves — the
/// element at an even coordinate of `unit_axis` (0: the output's unit-stride axis, 1: a
/// staged input's) and the next one along that axis — is an aligned 4-byte word: the
/// operand has unit stride on that axis, even strides on every other axis of more than
/// one element, and a 4-byte aligned address at the origin.
pub(crate) fn pairs_aligned<const N: usize>(
    g: &Geometry<u32, 5, N>,
    k: usize,
    unit_axis: usize,
    addr: u64,
) -> bool {
    let ndim = g.ndim as usize;
    addr.is_multiple_of(4)
        && g.strides[k][unit_axis] == 1
        && (0..ndim)
            .filter(|&d| d != unit_axis && g.sizes[d] > 1)
            .all(|d| g.strides[k][d].is_multiple_of(2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Layout;
    use crate::plan::plan;
    use crate::plan::Plan;

    /// `vec_geometry` of `out = f(a, b)` with 16-byte aligned f32 operands at `ptrs`.
    fn vec_of(out: &Layout, a: &Layout, b: &Layout, ptrs: [u64; 3]) -> Option<Geometry<u32, 2, 3>> {
        vec_arg_of(out, a, b, ptrs).map(|(g, _)| g)
    }

    /// The same with the kernel's `VecArg`.
    fn vec_arg_of(
        out: &Layout,
        a: &Layout,
        b: &Layout,
        ptrs: [u64; 3],
    ) -> Option<(Geometry<u32, 2, 3>, VecArg)> {
        let p: Plan<3> = plan([out, a, b], ["out", "a", "b"]).unwrap();
        let r = vec_geometry(&p, &ptrs, &[4; 3]);
        if let Some((_, arg)) = r {
            assert_eq!(arg.n, p.numel);
        }
        r
    }

    const ALIGNED: [u64; 3] = [0x1000, 0x2000, 0x3000];

    #[test]
    fn step2_slices_take_the_vectorised_variant() {
        let out = Layout::contiguous(&[64, 128]).unwrap();
        let wide = Layout::contiguous(&[64, 256]).unwrap();
        // A[:, ::2] collapses to one axis of stride 2.
        let s2 = wide.slice(1, None, None, 2).unwrap();
        let g = vec_of(&out, &s2, &out, ALIGNED).expect("1-axis step-2 slice");
        assert_eq!(
            (g.ndim, g.strides[0][0], g.strides[1][0], g.strides[2][0]),
            (1, 1, 2, 1)
        );
        // A[:, 0:128:2] keeps two axes: rows of 64 elements, row stride 256.
        let half = wide.slice(1, Some(0), Some(128), 2).unwrap();
        let out2 = Layout::contiguous(&[64, 64]).unwrap();
        let (g, arg) = vec_arg_of(&out2, &half, &out2, ALIGNED).expect("2-axis step-2 slice");
        assert_eq!(
            (g.ndim, g.sizes[0], g.strides[1][0], g.strides[1][1]),
            (2, 64, 2, 256)
        );
        // Rows of 64 f32: 16 chunks of 4 per row, divided without a division on the GPU.
        assert_eq!(arg.row, FastDiv::new(16).unwrap());
        assert_eq!(arg.row.divmod(37), (2, 5));
        // Dense operands: the contiguous form, whose divider is 1.
        let (g, arg) = vec_arg_of(&out, &out, &out, ALIGNED).expect("dense");
        assert_eq!((g.ndim, arg.row.d), (0, 1));
    }

    #[test]
    fn other_strides_and_misalignment_are_refused() {
        let out = Layout::contiguous(&[64, 128]).unwrap();
        let wide3 = Layout::contiguous(&[64, 384]).unwrap();
        let s3 = wide3.slice(1, None, None, 3).unwrap();
        assert!(vec_of(&out, &s3, &out, ALIGNED).is_none(), "step 3");
        let wide = Layout::contiguous(&[64, 256]).unwrap();
        let s2 = wide.slice(1, None, None, 2).unwrap();
        assert!(vec_of(&s2, &out, &out, ALIGNED).is_none(), "step-2 output");
        let rev = out.flip(1).unwrap();
        assert!(
            vec_of(&out, &rev, &out, ALIGNED).is_none(),
            "reversed input"
        );
        let odd = [0x1000, 0x2008, 0x3000];
        assert!(
            vec_of(&out, &s2, &out, odd).is_none(),
            "8-byte aligned input"
        );
        // Step-2 slices of 1-byte elements keep the scalar variants.
        let p: Plan<3> = plan([&out, &s2, &out], ["out", "a", "b"]).unwrap();
        assert!(
            vec_geometry(&p, &ALIGNED, &[1; 3]).is_none(),
            "u8 step-2 input"
        );
        assert!(vec_geometry(&p, &ALIGNED, &[4; 3]).is_some());
        // Rows of 66 elements: not a multiple of the vector width (4 f32).
        let out66 = Layout::contiguous(&[64, 66]).unwrap();
        let s66 = wide.slice(1, Some(0), Some(132), 2).unwrap();
        assert!(
            vec_of(&out66, &s66, &out66, ALIGNED).is_none(),
            "ragged rows"
        );
    }

    #[test]
    fn chunks_follow_the_output_and_step2_needs_whole_vectors() {
        use gpu_kernels::apply::{step2_ok, vec_width};
        // One 16-byte vector of the output per chunk.
        assert_eq!(vec_width(&[4, 2, 4]), 4, "f32 out of bf16 and f32");
        assert_eq!(vec_width(&[2, 4]), 8, "bf16 out of f32");
        assert_eq!(vec_width(&[1, 4, 4]), 16, "bool out of f32");
        // An f32 input of an f64 output (chunks of 2: 8 bytes) is not read as stride 2.
        assert!(step2_ok(4, 4) && step2_ok(8, 2) && !step2_ok(4, 2) && !step2_ok(2, 8));
        let out = Layout::contiguous(&[64, 128]).unwrap();
        let wide = Layout::contiguous(&[64, 256]).unwrap();
        let s2 = wide.slice(1, None, None, 2).unwrap();
        let p: Plan<2> = plan([&out, &s2], ["out", "a"]).unwrap();
        assert!(
            vec_geometry(&p, &[0x1000, 0x2000], &[8, 4]).is_none(),
            "f64 ← f32[::2]"
        );
        assert!(
            vec_geometry(&p, &[0x1000, 0x2000], &[4, 4]).is_some(),
            "f32 ← f32[::2]"
        );
    }

    /// Kernel names of a family with a tiled variant (never launched here).
    const NAMES: KernelNames = KernelNames {
        module: "m",
        vec: "v",
        tiled: "t",
        d1: "d1",
        d2: "d2",
        d3: "d3",
        dn: "dn",
        program: None,
    };

    /// An `[r, c]` view of a dense `[c, r]` tensor.
    fn transposed(r: usize, c: usize) -> Layout {
        Layout::contiguous(&[c, r])
            .unwrap()
            .permute(&[1, 0])
            .unwrap()
    }

    /// The tiled launch of `out = f(a, b)` over 2-byte operands with `ptrs`.
    fn tiled_of(out: &Layout, a: &Layout, b: &Layout, ptrs: [u64; 3]) -> (TileArg, LaunchShape) {
        let p: Plan<3> = plan([out, a, b], ["out", "a", "b"]).unwrap();
        let (_, t, shape) = tiled_geometry(&NAMES, &p, &ptrs, &[2; 3]).expect("a tiled plan");
        (t, shape)
    }

    #[test]
    fn two_byte_tiles_are_paired_where_pairs_are_aligned_words() {
        use gpu_kernels::{PAIR_ALIGNED, TILE3_PAIRED};
        assert!(TILE3_PAIRED.paired && gpu_kernels::tile_shape(&[2, 2, 2]) == TILE3_PAIRED);
        assert!(!gpu_kernels::tile_shape(&[2, 2, 4]).paired);
        let (r, c) = (128usize, 192usize);
        let out = Layout::contiguous(&[r, c]).unwrap();
        let bt = transposed(r, c);
        let ptrs = [0x1000, 0x2000, 0x3000];
        let (t, shape) = tiled_of(&out, &out, &bt, ptrs);
        // b staged; out, a and b all aligned; 64 × 64 tiles, 32 × 8 threads, two stages.
        assert_eq!(t.staged, 0b10 | (0b111 * PAIR_ALIGNED));
        assert_eq!((t.tiles_x.d, t.tiles_y.d), (3, 2));
        assert_eq!(shape.block, (32, 8));
        assert_eq!(shape.shared_bytes as usize, 2 * TILE3_PAIRED.stage_bytes(2));
        // An input at an odd element: its pairs are not words.
        let (t, _) = tiled_of(&out, &out, &bt, [0x1000, 0x2000, 0x3002]);
        assert_eq!(t.staged, 0b10 | (0b011 * PAIR_ALIGNED));
        // An odd row stride (a view of rows of 193 elements), and a reversed unit axis.
        let odd = Layout::new(&[c, r], &[193, 1], 0)
            .unwrap()
            .permute(&[1, 0])
            .unwrap();
        let (t, _) = tiled_of(&out, &out, &odd, ptrs);
        assert_eq!(t.staged & (PAIR_ALIGNED << 2), 0, "odd row stride");
        let rev = bt.flip(0).unwrap();
        let (t, _) = tiled_of(&out, &out, &rev, ptrs);
        assert_eq!(
            t.staged & (PAIR_ALIGNED << 2),
            0,
            "reversed unit-stride axis"
        );
    }

    #[test]
    fn two_byte_copies_take_128_by_128_paired_tiles() {
        use gpu_kernels::{PAIR_ALIGNED, TILE2_PAIRED};
        assert!(TILE2_PAIRED.paired && gpu_kernels::tile_shape(&[2, 2]) == TILE2_PAIRED);
        assert_eq!(
            (TILE2_PAIRED.x, TILE2_PAIRED.y, TILE2_PAIRED.rows),
            (128, 128, 16)
        );
        assert!(!gpu_kernels::tile_shape(&[2, 4]).paired);
        // out[r][c] = a[c][r] with 300 × 200 elements: tiles of 128 along the output's unit
        // axis (c, 200) and the input's (r, 300).
        let (r, c) = (300usize, 200usize);
        let out = Layout::contiguous(&[r, c]).unwrap();
        let at = transposed(r, c);
        let p: Plan<2> = plan([&out, &at], ["out", "a"]).unwrap();
        let (_, t, shape) =
            tiled_geometry(&NAMES, &p, &[0x1000, 0x2000], &[2, 2]).expect("a tiled plan");
        assert_eq!(t.staged, 0b1 | (0b11 * PAIR_ALIGNED));
        assert_eq!((t.tiles_x.d, t.tiles_y.d), (2, 3));
        assert_eq!(shape.grid, 6);
        assert_eq!(shape.block, (32, 16));
        // One stage: 128 rows of 64 pairs and a padding word, 33 280 bytes.
        assert_eq!(shape.shared_bytes, 128 * 65 * 4);
    }

    #[test]
    fn tiled_batch_axes_follow_the_staged_input() {
        // The bench's permutation, small: in [s, q, u, p] = [2, 3, 128, 256] permuted
        // (3, 1, 0, 2) to out [p, q, s, u]. Axis 0 is u (the output's unit axis), axis 1 p
        // (the input's); the batch axes go by the input's strides, q (128 · 256) before s
        // (3 · 128 · 256), where the output's order is s (128) before q (2 · 128).
        let a = Layout::contiguous(&[2, 3, 128, 256])
            .unwrap()
            .permute(&[3, 1, 0, 2])
            .unwrap();
        let out = Layout::contiguous(a.shape()).unwrap();
        let p: Plan<2> = plan([&out, &a], ["out", "a"]).unwrap();
        for size in [4, 2] {
            let (g, t, shape) =
                tiled_geometry(&NAMES, &p, &[0x1000, 0x2000], &[size; 2]).expect("a tiled plan");
            assert_eq!(g.ndim, 4);
            assert_eq!(g.sizes[..4], [128, 256, 3, 2]);
            assert_eq!(g.strides[1][..4], [256, 1, 128 * 256, 3 * 128 * 256]);
            assert_eq!(g.strides[0][..4], [1, 3 * 2 * 128, 2 * 128, 128]);
            assert_eq!(t.batch[0].d, 3);
            let tile = gpu_kernels::tile_shape(&[size; 2]);
            assert_eq!(shape.grid, 128 / tile.x * (256 / tile.y) * 6);
        }
    }
}
