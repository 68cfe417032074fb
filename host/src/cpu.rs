//! The CPU twin: the same [`plan`](crate::plan) and the same op code as the GPU kernels,
//! run with rayon over host slices. Operands are `(slice, layout)` pairs; each layout is
//! checked against its slice first, exactly as device views are.

use crate::api::check_aliasing;
use crate::api::Region;
use crate::error::Result;
use crate::layout::Layout;
use crate::plan::{plan, Plan};
use gpu_kernels::dispatch;
use gpu_kernels::ops::{Op1, Op2, Op3, Op4};
use gpu_kernels::{Elem, Geometry, MAX_DIMS};
use rayon::prelude::*;

/// Elements per rayon task; below two of these the walk stays on the calling thread.
const CHUNK: u64 = 1 << 15;

/// A raw pointer that may cross rayon tasks (this module's runs and the stencil twin).
#[derive(Clone, Copy)]
pub(crate) struct SendPtr<T>(pub(crate) *mut T);
// SAFETY: used only where the planner proved that distinct linear indices reach distinct
// output elements, so tasks over disjoint index ranges never touch the same element, and
// inputs are only read (`for_each_row`'s runs, `stencil::apply_cpu`'s chunks).
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}
impl<T> SendPtr<T> {
    pub(crate) fn get(self) -> *mut T {
        self.0
    }
}

/// Calls `row(offsets, len)` for runs of `len` consecutive linear indices of the plan,
/// where `offsets[k]` is operand `k`'s element offset from its base at the run's first index
/// and the run walks the innermost collapsed dimension (see [`inner_steps`]). A run never
/// crosses a row of the innermost dimension nor a rayon task's chunk. IndexToOffset (the
/// kernels' own [`Geometry::offsets`]) runs once per run.
fn for_each_row<const N: usize>(plan: &Plan<N>, row: impl Fn([isize; N], usize) + Sync) {
    let g: Geometry<u64, MAX_DIMS, N> = plan.geometry();
    let run = |lo: u64, hi: u64| {
        if plan.ndim == 0 {
            row([lo as isize; N], (hi - lo) as usize);
            return;
        }
        let inner = plan.sizes[0];
        let mut i = lo;
        while i < hi {
            let row_end = (i - i % inner + inner).min(hi);
            row(g.offsets(i, plan.ndim), (row_end - i) as usize);
            i = row_end;
        }
    };
    if plan.numel < 2 * CHUNK {
        run(0, plan.numel);
    } else {
        let chunks = plan.numel.div_ceil(CHUNK);
        (0..chunks)
            .into_par_iter()
            .for_each(|c| run(c * CHUNK, ((c + 1) * CHUNK).min(plan.numel)));
    }
}

/// Each operand's stride along a run of [`for_each_row`] (1 for every operand when the plan
/// is contiguous).
fn inner_steps<const N: usize>(plan: &Plan<N>) -> [isize; N] {
    if plan.ndim == 0 {
        [1; N]
    } else {
        std::array::from_fn(|k| plan.strides[k][0] as isize)
    }
}

/// A host slice as an operand of the aliasing checks.
pub(crate) fn region<'a, T>(operand: &'static str, data: &[T], layout: &'a Layout) -> Region<'a> {
    Region {
        operand,
        buffer: data.as_ptr() as u64,
        elem_size: size_of::<T>(),
        layout,
    }
}

/// Runs `row(ptrs, steps, len)` over the plan: `ptrs[k]` is operand `k`'s address at a
/// run's first element (from `bases[k]`, the address of the element at `plan.base[k]`, and
/// `sizes[k]` bytes per element) and `steps[k]` its stride along the run, in elements.
///
/// # Safety
/// For every offset of the plan, `bases[k]` moved by it stays inside operand `k`'s
/// allocation; distinct indices reach distinct output elements (runs of different tasks
/// write disjoint elements), and the output does not overlap the inputs.
unsafe fn walk<const N: usize>(
    plan: &Plan<N>,
    bases: [*mut u8; N],
    sizes: [usize; N],
    row: impl Fn([*mut u8; N], [isize; N], usize) + Sync,
) {
    let bases = bases.map(SendPtr);
    let steps = inner_steps(plan);
    for_each_row(plan, |off: [isize; N], len: usize| {
        // SAFETY: `off[k]` is an offset of the plan (the caller's bounds proof).
        let ptrs =
            std::array::from_fn(|k| unsafe { bases[k].get().offset(off[k] * sizes[k] as isize) });
        row(ptrs, steps, len)
    });
}

/// The CPU twin from buffer starts: plans `layouts` (output first), checks that the output
/// does not overlap itself, and runs `row` over the plan ([`walk`]) from `data[k]`, the
/// address operand `k`'s layout counts from (`sizes[k]` bytes per element).
///
/// # Safety
/// Every offset each layout reaches, from its `data`, is an element of one live
/// allocation, initialised for the inputs; no input element is an output element, nothing
/// else accesses the output's elements during the call, and `row` is sound on such runs.
pub(crate) unsafe fn run_layouts<const N: usize>(
    layouts: [&Layout; N],
    data: [*mut u8; N],
    sizes: [usize; N],
    row: impl Fn([*mut u8; N], [isize; N], usize) + Sync,
) -> Result<()> {
    const NAMES: [&str; 4] = ["out", "a", "b", "c"];
    let plan: Plan<N> = plan(layouts, std::array::from_fn(|k| NAMES[k]))?;
    let out = Region {
        operand: "out",
        buffer: data[0] as u64,
        elem_size: sizes[0],
        layout: layouts[0],
    };
    // The caller keeps the inputs apart from the output; this proves the output does not
    // overlap itself.
    check_aliasing(&out, &[])?;
    if plan.numel == 0 {
        return Ok(());
    }
    let bases = std::array::from_fn(|k| data[k].wrapping_add(plan.base[k] * sizes[k]));
    // SAFETY: the caller's bounds and aliasing proofs, and the output offsets are distinct
    // per index (no internal overlap), so runs of different tasks write disjoint elements.
    unsafe { walk(&plan, bases, sizes, row) };
    Ok(())
}

macro_rules! cpu_apply {
    ($(#[$doc:meta])* $fn:ident, $raw:ident, $trait:ident, $run:ident, $n:literal, out: $o:ident,
     [$($x:ident: $t:ident @ $k:literal),*]) => {
        $(#[$doc])*
        pub fn $fn<Op: $trait<$o $(, $t)*>, $o: Elem $(, $t: Elem)*>(
            op: Op,
            out: (&mut [$o], &Layout),
            $($x: (&[$t], &Layout)),*
        ) -> Result<()> {
            out.1.check_in(out.0.len(), "out")?;
            $( $x.1.check_in($x.0.len(), stringify!($x))?; )*
            // SAFETY: `check_in` proved every offset of each layout inside its slice; the
            // output (a unique borrow) cannot overlap the inputs (shared borrows).
            unsafe { $raw(op, (out.0.as_mut_ptr(), out.1) $(, ($x.0.as_ptr(), $x.1))*) }
        }

        /// The CPU twin over pointers: the layouts' offsets count from each pointer.
        ///
        /// # Safety
        /// Every offset each layout reaches, from its pointer, is an element of one live
        /// allocation, initialised for the inputs; no input element is an output element,
        /// and nothing else accesses the output's elements during the call.
        pub(crate) unsafe fn $raw<Op: $trait<$o $(, $t)*>, $o: Elem $(, $t: Elem)*>(
            op: Op,
            out: (*mut $o, &Layout),
            $($x: (*const $t, &Layout)),*
        ) -> Result<()> {
            let data = [out.0.cast::<u8>() $(, $x.0.cast::<u8>().cast_mut())*];
            let sizes = [size_of::<$o>() $(, size_of::<$t>())*];
            // SAFETY: the caller's contract.
            unsafe {
                run_layouts([out.1 $(, $x.1)*], data, sizes, |ptrs, steps, len| {
                    dispatch::$run::<Op, $o $(, $t)*>(op, len, ptrs, steps)
                })
            }
        }
    };
}

cpu_apply!(
    /// CPU twin of [`apply1`](crate::api::apply1).
    apply1, apply1_raw, Op1, run1, 1, out: T, []
);
cpu_apply!(
    /// CPU twin of [`apply2`](crate::api::apply2).
    apply2, apply2_raw, Op2, run2, 2, out: O, [a: A @ 1]
);
cpu_apply!(
    /// CPU twin of [`apply3`](crate::api::apply3).
    apply3, apply3_raw, Op3, run3, 3, out: O, [a: A @ 1, b: B @ 2]
);
cpu_apply!(
    /// CPU twin of [`apply4`](crate::api::apply4).
    apply4, apply4_raw, Op4, run4, 4, out: O, [a: A @ 1, b: B @ 2, c: C @ 3]
);

#[cfg(test)]
mod tests {
    //! Layouts large enough for the parallel path (≥ 2 chunks), with rows that straddle
    //! chunk boundaries, against a naive index-by-index walk. The conformance table in
    //! `tests/` covers the layout classes on small shapes.
    use super::*;
    use gpu_kernels::ops::{Add, Cast, Fill, Fma};

    fn values(len: usize, seed: u32) -> Vec<f32> {
        let mut x = seed.wrapping_mul(2_654_435_761) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                (x >> 8) as f32
            })
            .collect()
    }

    /// Element offsets of `l` broadcast to `shape`, in row-major order of `shape`.
    fn naive(l: &Layout, shape: &[usize]) -> Vec<usize> {
        let l = l.broadcast_to(shape).unwrap();
        let n: usize = shape.iter().product();
        let mut idx = vec![0usize; shape.len()];
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let off = idx
                .iter()
                .zip(l.strides())
                .fold(l.offset() as isize, |acc, (&i, &s)| acc + i as isize * s);
            out.push(off as usize);
            for d in (0..shape.len()).rev() {
                idx[d] += 1;
                if idx[d] < shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        out
    }

    fn dense(shape: &[usize]) -> Layout {
        Layout::contiguous(shape).unwrap()
    }

    /// `(name, out, a, b)` layouts over buffers of `out.numel()`-ish elements.
    fn cases() -> Vec<(&'static str, Layout, Layout, Layout)> {
        let s = [301usize, 263];
        vec![
            ("contiguous", dense(&s), dense(&s), dense(&s)),
            (
                "1-d odd length",
                dense(&[70_001]),
                dense(&[70_001]),
                dense(&[70_001]),
            ),
            ("broadcast row", dense(&s), dense(&s), dense(&[1, 263])),
            ("broadcast col", dense(&s), dense(&s), dense(&[301, 1])),
            (
                "transposed",
                dense(&s),
                dense(&[263, 301]).transpose(0, 1).unwrap(),
                dense(&s),
            ),
            (
                "slice step 2",
                dense(&s),
                dense(&[301, 526]).slice(1, None, None, 2).unwrap(),
                dense(&s),
            ),
            (
                "flipped, offset out",
                dense(&[305, 263]).slice(0, Some(2), Some(303), 1).unwrap(),
                dense(&s).flip(0).unwrap().flip(1).unwrap(),
                dense(&s),
            ),
            (
                "permuted 4-d",
                dense(&[37, 9, 11, 29]),
                dense(&[29, 9, 37, 11]).permute(&[2, 1, 3, 0]).unwrap(),
                dense(&[37, 9, 11, 29]),
            ),
        ]
    }

    fn len_of(l: &Layout) -> usize {
        l.span("t").unwrap().map_or(0, |s| s.max as usize + 1)
    }

    #[test]
    fn large_layouts_match_naive_walk() {
        for (name, lo, la, lb) in cases() {
            let shape = lo.shape().to_vec();
            let (a, b) = (values(len_of(&la), 1), values(len_of(&lb), 2));
            let c = values(len_of(&lb), 3);
            let (no, na, nb) = (naive(&lo, &shape), naive(&la, &shape), naive(&lb, &shape));
            let poison = -1.0f32;

            let mut got = vec![poison; len_of(&lo)];
            apply3(Add, (&mut got, &lo), (&a, &la), (&b, &lb)).unwrap();
            let mut expect = vec![poison; len_of(&lo)];
            for i in 0..no.len() {
                Op3::apply(&Add, &mut expect[no[i]], a[na[i]], b[nb[i]]);
            }
            assert!(got == expect, "apply3 {name}");

            let mut got = vec![poison; len_of(&lo)];
            apply2(Cast, (&mut got, &lo), (&a, &la)).unwrap();
            let mut expect = vec![poison; len_of(&lo)];
            for i in 0..no.len() {
                expect[no[i]] = a[na[i]];
            }
            assert!(got == expect, "apply2 {name}");

            let mut got = vec![poison; len_of(&lo)];
            apply1(Fill(7.0f32), (&mut got, &lo)).unwrap();
            let mut expect = vec![poison; len_of(&lo)];
            for &o in &no {
                expect[o] = 7.0;
            }
            assert!(got == expect, "apply1 {name}");

            let mut got = vec![poison; len_of(&lo)];
            apply4(Fma, (&mut got, &lo), (&a, &la), (&b, &lb), (&c, &lb)).unwrap();
            let mut expect = vec![poison; len_of(&lo)];
            for i in 0..no.len() {
                Op4::apply(&Fma, &mut expect[no[i]], a[na[i]], b[nb[i]], c[nb[i]]);
            }
            assert!(got == expect, "apply4 {name}");
        }
    }
}
