//! The CPU twin: the same [`plan`](crate::plan) and the same op code as the GPU kernels,
//! run with rayon over host slices. Operands are `(slice, layout)` pairs; each layout is
//! checked against its slice first, exactly as device views are.

use crate::api::check_aliasing;
use crate::api::Region;
use crate::error::Result;
use crate::layout::Layout;
use crate::plan::{plan, Plan};
use gpu_kernels::ops::{Op1, Op2, Op3, Op4};
use gpu_kernels::{Elem, Geometry, MAX_DIMS};
use rayon::prelude::*;

/// Elements per rayon task; below two of these the walk stays on the calling thread.
const CHUNK: u64 = 1 << 15;

/// A raw pointer that may cross threads.
#[derive(Clone, Copy)]
struct SendPtr<T>(*mut T);
// SAFETY: used only inside `for_each_offset`, where the planner proved that distinct linear
// indices reach distinct output elements, so no two threads touch the same element.
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}
impl<T> SendPtr<T> {
    fn get(self) -> *mut T {
        self.0
    }
}

/// Calls `f(offsets)` for every linear index of the plan, where `offsets[k]` is operand
/// `k`'s element offset from its base. Rows of the innermost dimension are walked by
/// adding strides; IndexToOffset (the kernels' own [`Geometry::offsets`]) runs once per row.
fn for_each_offset<const N: usize>(plan: &Plan<N>, f: impl Fn([isize; N]) + Sync) {
    let g: Geometry<u64, MAX_DIMS, N> = plan.geometry();
    let run = |lo: u64, hi: u64| {
        if plan.ndim == 0 {
            for i in lo..hi {
                f([i as isize; N]);
            }
            return;
        }
        let inner = plan.sizes[0];
        let step: [isize; N] = std::array::from_fn(|k| plan.strides[k][0] as isize);
        let mut i = lo;
        while i < hi {
            let mut off = g.offsets(i, plan.ndim);
            let row_end = (i - i % inner + inner).min(hi);
            for _ in i..row_end {
                f(off);
                for k in 0..N {
                    off[k] += step[k];
                }
            }
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

fn region<'a, T>(operand: &'static str, data: &[T], layout: &'a Layout) -> Region<'a> {
    Region {
        operand,
        buffer: data.as_ptr() as u64,
        elem_size: size_of::<T>(),
        layout,
    }
}

macro_rules! cpu_apply {
    ($(#[$doc:meta])* $fn:ident, $trait:ident, $n:literal, out: $o:ident,
     [$($x:ident: $t:ident),*], |$op:ident, $po:ident, $offs:ident, [$($px:ident),*]| $call:expr) => {
        $(#[$doc])*
        pub fn $fn<Op: $trait<$o $(, $t)*>, $o: Elem $(, $t: Elem)*>(
            op: Op,
            out: (&mut [$o], &Layout),
            $($x: (&[$t], &Layout)),*
        ) -> Result<()> {
            out.1.check_in(out.0.len(), "out")?;
            $( $x.1.check_in($x.0.len(), stringify!($x))?; )*
            let plan: Plan<$n> = plan([out.1 $(, $x.1)*], ["out" $(, stringify!($x))*])?;
            // Inputs are shared borrows and the output a unique one, so they cannot overlap;
            // this proves the output does not overlap itself.
            check_aliasing(&region("out", out.0, out.1), &[])?;
            if plan.numel == 0 {
                return Ok(());
            }
            let $po = SendPtr(out.0.as_mut_ptr().wrapping_add(plan.base[0]));
            let mut _k = 0;
            $(
                _k += 1;
                let $px = SendPtr($x.0.as_ptr().wrapping_add(plan.base[_k]) as *mut $t);
            )*
            let $op = op;
            for_each_offset(&plan, |$offs: [isize; $n]| {
                // SAFETY: `check_in` proved every offset of the plan inside its slice; the
                // output offsets are distinct per index (no internal overlap), and inputs
                // are only read.
                unsafe { $call }
            });
            Ok(())
        }
    };
}

cpu_apply!(
    /// CPU twin of [`apply1`](crate::api::apply1).
    apply1, Op1, 1, out: T, [], |op, po, o, []| op.apply(&mut *po.get().offset(o[0]))
);
cpu_apply!(
    /// CPU twin of [`apply2`](crate::api::apply2).
    apply2, Op2, 2, out: O, [a: A], |op, po, o, [pa]| op.apply(&mut *po.get().offset(o[0]), *pa.get().offset(o[1]))
);
cpu_apply!(
    /// CPU twin of [`apply3`](crate::api::apply3).
    apply3, Op3, 3, out: O, [a: A, b: B],
    |op, po, o, [pa, pb]| op.apply(&mut *po.get().offset(o[0]), *pa.get().offset(o[1]), *pb.get().offset(o[2]))
);
cpu_apply!(
    /// CPU twin of [`apply4`](crate::api::apply4).
    apply4, Op4, 4, out: O, [a: A, b: B, c: C],
    |op, po, o, [pa, pb, pc]| op.apply(
        &mut *po.get().offset(o[0]), *pa.get().offset(o[1]), *pb.get().offset(o[2]), *pc.get().offset(o[3]))
);
