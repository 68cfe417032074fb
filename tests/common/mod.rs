//! Shared by the conformance tests (CPU twin against a naive walk) and the GPU tests
//! (GPU against the CPU twin): random data, the table of layout classes, and the table of
//! (op, element types) cases.
#![allow(dead_code)]

pub mod random;
pub mod stencil;

use strided_apply::{bf16, f16, Bool, Elem, Layout};

/// xorshift64*: reproducible random data without a dependency.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Random values and small constants of each element type.
pub trait TestElem: Elem + strided_apply::verify::Distance {
    fn random(rng: &mut Rng) -> Self;
    fn small(v: i8) -> Self;
    /// A value the kernels never produce from the test data, to poison outputs.
    fn poison() -> Self;
}
macro_rules! float_elem {
    ($($t:ty),*) => {$( impl TestElem for $t {
        fn random(rng: &mut Rng) -> Self { ((rng.unit() * 8.0 - 4.0) as $t) }
        fn small(v: i8) -> Self { v as $t }
        fn poison() -> Self { -7.77e7 }
    } )*};
}
float_elem!(f32, f64);
macro_rules! narrow_elem {
    ($($t:ident),*) => {$( impl TestElem for $t {
        /// Mostly values in [-4, 4); one in 16 a special: NaN, ±inf, ±0, a subnormal, or a
        /// value near the largest finite (products and sums overflow to inf).
        fn random(rng: &mut Rng) -> Self {
            let r = rng.next();
            if r % 16 != 0 {
                return $t::from_f32((rng.unit() * 8.0 - 4.0) as f32);
            }
            match (r >> 8) % 6 {
                0 => $t::NAN,
                1 => if r & 1 << 20 == 0 { $t::INFINITY } else { $t::NEG_INFINITY },
                2 => $t::from_bits(((r >> 24) as u16 & 0x8000) | ((r >> 32) as u16 & 0x3)),
                3 => $t::from_bits(((r >> 24) as u16 & 0x8000) | ((r >> 32) as u16 & 0x7f)),
                4 => $t::from_f32(if r & 1 << 21 == 0 { 0.0 } else { -0.0 }),
                _ => $t::from_bits($t::MAX.to_bits() - ((r >> 32) as u16 & 0xff)),
            }
        }
        fn small(v: i8) -> Self { $t::from_f32(v as f32) }
        fn poison() -> Self { $t::from_f32(-12345.0) }
    } )*};
}
narrow_elem!(f16, bf16);
macro_rules! int_elem {
    ($($t:ty),*) => {$( impl TestElem for $t {
        fn random(rng: &mut Rng) -> Self {
            // Mostly small values (so division and comparison are interesting), some huge.
            let r = rng.next();
            if r % 4 == 0 { (r >> 8) as $t } else { ((r >> 8) % 200) as $t }
        }
        fn small(v: i8) -> Self { v as $t }
        fn poison() -> Self { 0x5a as $t }
    } )*};
}
int_elem!(i32, i64, u32, u8);
impl TestElem for Bool {
    fn random(rng: &mut Rng) -> Self {
        Bool((rng.next() >> 20) as u8 & 1)
    }
    fn small(v: i8) -> Self {
        Bool((v != 0) as u8)
    }
    fn poison() -> Self {
        Bool(0x5a)
    }
}

pub fn random_vec<T: TestElem>(rng: &mut Rng, len: usize) -> Vec<T> {
    (0..len).map(|_| T::random(rng)).collect()
}

/// One operand: a buffer length and a view of it.
#[derive(Clone, Debug)]
pub struct Operand {
    pub len: usize,
    pub layout: Layout,
}

/// A layout class: the output and `k` inputs.
#[derive(Clone, Debug)]
pub struct Case {
    pub name: &'static str,
    pub out: Operand,
    pub inputs: Vec<Operand>,
}

fn dense(shape: &[usize]) -> Operand {
    let layout = Layout::contiguous(shape).unwrap();
    Operand {
        len: layout.numel(),
        layout,
    }
}
fn view(buffer: &[usize], f: impl Fn(Layout) -> Layout) -> Operand {
    let base = Layout::contiguous(buffer).unwrap();
    Operand {
        len: base.numel(),
        layout: f(base),
    }
}

/// Every layout class, for an op with `k` inputs. The last input takes the broadcast shapes.
pub fn cases(k: usize) -> Vec<Case> {
    let s = [37usize, 53];
    let all = |name, out: Operand, inp: Operand| Case {
        name,
        out,
        inputs: vec![inp; k],
    };
    let last = |name, out: Operand, rest: Operand, l: Operand| {
        let mut inputs = vec![rest; k];
        if let Some(x) = inputs.last_mut() {
            *x = l;
        }
        Case { name, out, inputs }
    };
    let perm4 = |l: Layout| l.permute(&[1, 3, 2, 0]).unwrap();
    let perm5_in = |l: Layout| l.permute(&[4, 1, 0, 2, 3]).unwrap();
    vec![
        all("contiguous", dense(&s), dense(&s)),
        all(
            "transposed-2d",
            dense(&s),
            view(&[53, 37], |l| l.transpose(0, 1).unwrap()),
        ),
        all(
            "out-transposed",
            view(&[53, 37], |l| l.transpose(0, 1).unwrap()),
            dense(&s),
        ),
        last("broadcast-row", dense(&s), dense(&s), dense(&[1, 53])),
        last("broadcast-row-1d", dense(&s), dense(&s), dense(&[53])),
        last(
            "broadcast-row-64",
            dense(&[37, 64]),
            dense(&[37, 64]),
            dense(&[1, 64]),
        ),
        all(
            "rows-sliced-64",
            view(&[74, 64], |l| l.slice(0, None, None, 2).unwrap()),
            view(&[111, 64], |l| l.slice(0, Some(1), None, 3).unwrap()),
        ),
        all(
            "transposed-both-in",
            view(&[64, 40], |l| l.transpose(0, 1).unwrap()),
            view(&[64, 40], |l| l.transpose(0, 1).unwrap().flip(0).unwrap()),
        ),
        last("broadcast-col", dense(&s), dense(&s), dense(&[37, 1])),
        last("broadcast-scalar", dense(&s), dense(&s), dense(&[])),
        all(
            "slice-step2",
            view(&[74, 53], |l| l.slice(0, None, None, 2).unwrap()),
            view(&[37, 106], |l| l.slice(1, None, None, 2).unwrap()),
        ),
        // Every input a `[:, ::2]` slice of 128-wide rows (vectorised as pairs of vectors).
        all(
            "slice-step2-rows-64",
            dense(&[37, 64]),
            view(&[37, 128], |l| l.slice(1, None, None, 2).unwrap()),
        ),
        // A step-2 view whose last even element is the buffer's last element: nothing
        // after it may be read.
        all(
            "slice-step2-ends-buffer",
            dense(&[37, 64]),
            view(&[37 * 128 - 1], |_| {
                Layout::new(&[37, 64], &[128, 2], 0).unwrap()
            }),
        ),
        all(
            "slice-step3",
            dense(&s),
            view(&[111, 53], |l| l.slice(0, Some(2), None, 3).unwrap()),
        ),
        all(
            "1d-step2",
            dense(&[1000]),
            view(&[2001], |l| l.slice(0, Some(1), None, 2).unwrap()),
        ),
        all(
            "negative-2-axes",
            view(&s, |l| l.flip(1).unwrap()),
            view(&s, |l| l.flip(0).unwrap().flip(1).unwrap()),
        ),
        all(
            "offset-view",
            dense(&s),
            view(&[40, 60], |l| {
                l.slice(0, Some(3), Some(40), 1)
                    .unwrap()
                    .slice(1, Some(7), None, 1)
                    .unwrap()
            }),
        ),
        all(
            "permuted-3d",
            dense(&[6, 7, 11]),
            view(&[7, 6, 11], |l| l.permute(&[1, 0, 2]).unwrap()),
        ),
        all(
            "permuted-4d",
            dense(&[17, 33, 5, 3]),
            view(&[3, 17, 5, 33], perm4),
        ),
        all(
            "permuted-5d",
            view(&[65, 17, 3, 5, 2], |l| l.permute(&[2, 1, 4, 3, 0]).unwrap()),
            view(&[2, 17, 5, 65, 3], perm5_in),
        ),
        all(
            "generic-6d",
            dense(&[3, 2, 3, 2, 3, 2]),
            view(&[2, 3, 2, 3, 2, 3], |l| {
                l.permute(&[5, 4, 3, 2, 1, 0]).unwrap()
            }),
        ),
        all("size-0", dense(&[0, 5]), dense(&[0, 5])),
        all("size-1", dense(&[1]), dense(&[1])),
        all("0-d", dense(&[]), dense(&[])),
        all(
            "broadcast-all-to-1000",
            dense(&[10, 10, 10]),
            dense(&[1, 1, 1]),
        ),
    ]
}

/// The naive reference walk: offsets of every operand for each output multi-index in
/// row-major order, computed straight from the layouts (no planner, no collapse).
pub fn naive_offsets(case: &Case) -> Vec<Vec<usize>> {
    let shape = case.out.layout.shape().to_vec();
    let n: usize = shape.iter().product();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..n {
        let mut offs = Vec::new();
        for op in std::iter::once(&case.out).chain(&case.inputs) {
            let l = &op.layout;
            let lead = shape.len() - l.ndim();
            let mut o = l.offset() as isize;
            for d in 0..l.ndim() {
                if l.shape()[d] != 1 {
                    o += idx[lead + d] as isize * l.strides()[d];
                }
            }
            offs.push(o as usize);
        }
        out.push(offs);
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

/// Invokes `$m!(arity, name, op-expression, types…)` for every (op, types) of the table.
#[macro_export]
macro_rules! op_table {
    ($m:ident) => {{
        use strided_apply::ops::*;
        use strided_apply::Bool;
        use strided_apply::{bf16, f16};
        $crate::op_table!(@types $m, binary, [f32, f64, i32, i64, u32, u8, f16, bf16], Add, Sub, Mul, Div, Min, Max);
        $crate::op_table!(@types $m, binary, [f32, f64, f16, bf16], Pow);
        $crate::op_table!(@types $m, compare, [f32, f64, i32, i64, u32, u8, f16, bf16], Eq, Ne, Lt, Le, Gt, Ge);
        $crate::op_table!(@types $m, unary, [f32, f64, i32, i64, f16, bf16], Neg, Abs);
        $crate::op_table!(@types $m, unary, [f32, f64, i32, i64, u32, u8, f16, bf16], Relu);
        $crate::op_table!(@types $m, unary, [f32, f64, f16, bf16], Sqrt, Rsqrt, Exp, Log, Sin, Cos, Tanh, Sigmoid);
        $crate::op_table!(@types $m, scalar, [f32, f64, i32, i64, u32, u8, f16, bf16], Add, Sub, Mul, Div, Min, Max);
        $crate::op_table!(@types $m, scalar, [f32, f64, f16, bf16], Pow);
        $crate::op_table!(@types $m, lscalar, [f32, f64, i32, i64, u32, u8, f16, bf16], Sub, Div);
        $crate::op_table!(@types $m, cmp_scalar, [f32, f64, i32, i64, u32, u8, f16, bf16], Eq, Ne, Lt, Le, Gt, Ge);
        $crate::op_table!(@types $m, update, [f32, f64, i32, i64, u32, u8, f16, bf16], Add, Sub, Mul, Div);
        $crate::op_table!(@types $m, inplace_scalar, [f32, f64, i32, i64, u32, u8, f16, bf16], Add, Sub, Mul, Div);
        $crate::op_table!(@types $m, clamp, [f32, f64, i32, i64, u32, u8, f16, bf16], Clamp);
        $crate::op_table!(@types $m, fma, [f32, f64, i32, i64, u32, u8, f16, bf16], Fma);
        $crate::op_table!(@types $m, where_, [f32, f64, i32, i64, u32, u8, Bool, f16, bf16], Where);
        $crate::op_table!(@types $m, fill, [f32, f64, i32, i64, u32, u8, Bool, f16, bf16], Fill);
        $crate::op_table!(@cast $m, [f32, f64, i32, i64, u32, u8, Bool, f16, bf16], [f32, f64, i32, i64, u32, u8, Bool, f16, bf16]);
        $crate::op_table!(@fused $m, [f32, f64, f16, bf16]);
        $crate::op_table!(@mixed $m, [f16, bf16], [Add, Sub, Mul, Div]);
    }};
    // 16-bit input with an f32 one: f32 or 16-bit output.
    (@mixed $m:ident, [$($h:ty),*], $ops:tt) => {{
        $( $crate::op_table!(@mixed_h $m, $h, $ops); )*
    }};
    (@mixed_h $m:ident, $h:ty, [$($op:ident),*]) => {{
        $(
            $m!(3, concat!(stringify!($op), " f32 = ", stringify!($h), " f32"), $op, f32, $h, f32);
            $m!(3, concat!(stringify!($op), " ", stringify!($h), " = ", stringify!($h), " f32"), $op, $h, $h, f32);
        )*
    }};
    // The library's fused expressions (`gpu_kernels::fused`), one kernel per expression.
    (@fused $m:ident, [$($t:ty),*]) => {{
        use strided_apply::gpu_kernels::fused::{Axpby, Axpy, BiasRelu, DivMul, Lerp, RecipUpdate, Silu};
        $(
            let s = |k: i8| <$t as $crate::common::TestElem>::small(k);
            $m!(3, concat!("fused Axpy ", stringify!($t)), Axpy::<$t>::new(s(3)), $t, $t, $t);
            $m!(3, concat!("fused Axpby ", stringify!($t)), Axpby::<$t>::new(s(3), s(5)), $t, $t, $t);
            $m!(3, concat!("fused BiasRelu ", stringify!($t)), BiasRelu::<$t>::new(), $t, $t, $t);
            $m!(2, concat!("fused Silu ", stringify!($t)), Silu::<$t>::new(), $t, $t);
            $m!(3, concat!("fused DivMul ", stringify!($t)), DivMul::<$t>::new(s(3), s(7)), $t, $t, $t);
            $m!(4, concat!("fused Lerp ", stringify!($t)), Lerp::<$t>::new(), $t, $t, $t, $t);
            $m!(2, concat!("fused RecipUpdate ", stringify!($t)), RecipUpdate::<$t>::new(), $t, $t);
        )*
    }};
    (@types $m:ident, $kind:ident, $ts:tt, $($op:ident),*) => {
        $( $crate::op_table!(@op_types $m, $kind, $op, $ts); )*
    };
    (@op_types $m:ident, $kind:ident, $op:ident, [$($t:ty),*]) => {
        $( $crate::op_table!(@one $m, $kind, $op, $t); )*
    };
    (@cast $m:ident, [$($from:ty),*], $to:tt) => { $( $crate::op_table!(@cast_row $m, $from, $to); )* };
    (@cast_row $m:ident, $from:ty, [$($to:ty),*]) => {
        $( $m!(2, concat!("cast ", stringify!($from), "->", stringify!($to)), Cast, $to, $from); )*
    };
    (@one $m:ident, binary, $op:ident, $t:ty) => {
        $m!(3, concat!(stringify!($op), " ", stringify!($t)), $op, $t, $t, $t)
    };
    (@one $m:ident, compare, $op:ident, $t:ty) => {
        $m!(3, concat!(stringify!($op), " ", stringify!($t)), $op, Bool, $t, $t)
    };
    (@one $m:ident, unary, $op:ident, $t:ty) => {
        $m!(2, concat!(stringify!($op), " ", stringify!($t)), $op, $t, $t)
    };
    (@one $m:ident, scalar, $op:ident, $t:ty) => {
        $m!(2, concat!(stringify!($op), " scalar ", stringify!($t)),
            Rhs { op: $op, s: <$t as $crate::common::TestElem>::small(3) }, $t, $t)
    };
    (@one $m:ident, lscalar, $op:ident, $t:ty) => {
        $m!(2, concat!("scalar ", stringify!($op), " ", stringify!($t)),
            Lhs { op: $op, s: <$t as $crate::common::TestElem>::small(7) }, $t, $t)
    };
    (@one $m:ident, cmp_scalar, $op:ident, $t:ty) => {
        $m!(2, concat!(stringify!($op), " scalar ", stringify!($t)),
            Rhs { op: $op, s: <$t as $crate::common::TestElem>::small(50) }, Bool, $t)
    };
    (@one $m:ident, update, $op:ident, $t:ty) => {
        $m!(2, concat!(stringify!($op), "-assign ", stringify!($t)), Update($op), $t, $t)
    };
    (@one $m:ident, inplace_scalar, $op:ident, $t:ty) => {
        $m!(1, concat!(stringify!($op), "-assign scalar ", stringify!($t)),
            InPlace(Rhs { op: $op, s: <$t as $crate::common::TestElem>::small(3) }), $t)
    };
    (@one $m:ident, clamp, $op:ident, $t:ty) => {
        $m!(2, concat!("Clamp ", stringify!($t)), Clamp {
            lo: <$t as $crate::common::TestElem>::small(1),
            hi: <$t as $crate::common::TestElem>::small(60),
        }, $t, $t)
    };
    (@one $m:ident, fma, $op:ident, $t:ty) => {
        $m!(4, concat!("Fma ", stringify!($t)), Fma, $t, $t, $t, $t)
    };
    (@one $m:ident, where_, $op:ident, $t:ty) => {
        $m!(4, concat!("Where ", stringify!($t)), Where, $t, Bool, $t, $t)
    };
    (@one $m:ident, fill, $op:ident, $t:ty) => {
        $m!(1, concat!("Fill ", stringify!($t)), Fill(<$t as $crate::common::TestElem>::small(9)), $t)
    };
}
