//! The CPU twin: the same [`plan`](crate::plan) and the same op code as the GPU kernels,
//! run with rayon over host slices. Operands are `(slice, layout)` pairs; each layout is
//! checked against its slice first, exactly as device views are.

use crate::error::Result;
use crate::layout::Layout;
use crate::twin::{apply1_raw, apply2_raw, apply3_raw, apply4_raw};
use gpu_kernels::ops::{Op1, Op2, Op3, Op4};
use gpu_kernels::Elem;

macro_rules! cpu_apply {
    ($(#[$doc:meta])* $fn:ident, $raw:ident, $trait:ident, out: $o:ident,
     [$($x:ident: $t:ident),*]) => {
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
    };
}

cpu_apply!(
    /// CPU twin of [`apply1`](crate::api::apply1).
    apply1, apply1_raw, Op1, out: T, []
);
cpu_apply!(
    /// CPU twin of [`apply2`](crate::api::apply2).
    apply2, apply2_raw, Op2, out: O, [a: A]
);
cpu_apply!(
    /// CPU twin of [`apply3`](crate::api::apply3).
    apply3, apply3_raw, Op3, out: O, [a: A, b: B]
);
cpu_apply!(
    /// CPU twin of [`apply4`](crate::api::apply4).
    apply4, apply4_raw, Op4, out: O, [a: A, b: B, c: C]
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
