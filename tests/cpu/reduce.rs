//! Reductions on the CPU: the CPU twin (`reduce::reduce_cpu`) against an independent
//! reference of the order that `gpu_kernels::reduce` defines in its module documentation
//! (groups of `group_len(n, w)` elements, slots `(q / w) % SLOTS` folded in order, halving
//! trees over the present slots and over the groups, `finish`; `empty` for `n = 0`),
//! compared bit for bit over every op and a row of element types, on contiguous,
//! transposed, permuted, reversed, step-sliced, broadcast and offset inputs, kept and
//! dropped (and strided) outputs, and lengths on both sides of the slot and group
//! boundaries. Then: the result does not depend on the memory layout; integer and min/max
//! results are exact; NaN propagates; reductions of nothing; accuracy against f64; the
//! typed errors. (Output-shares-memory-with-input needs two views of one buffer, which
//! safe host slices cannot express: `tests/gpu/reduce.rs` checks `Error::ReduceOverlap` with
//! device tensors.)
//!
//! The reference re-derives the op arithmetic too (it does not call the library's
//! `Reduce` impls, `tree`, `group_value` or `write_output`): `first`/`fold`/`combine`/
//! `finish` as the op documentation states them, in the accumulator type (f32 for f16 and
//! bf16, the type itself otherwise; integers wrap).

use crate::common::{Rng, TestElem};
use std::fmt::Debug;
use strided_apply::gpu_kernels::reduce::{
    chunk, group_len, groups, groups_used, Amax, Amin, Mean, Norm2, Prod, Reduce, Sum, SumSq, SLOTS,
};
use strided_apply::reduce::reduce_cpu;
use strided_apply::{bf16, f16, Error, Layout};

// ------------------------------------------------------------------ the reference

/// Accumulator arithmetic, written from the op documentation.
trait Acc: Copy + Debug {
    const ZERO: Self;
    const ONE: Self;
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    /// NaN if either is NaN, else `o` when strictly less, else `self` (the lower index).
    fn lesser(self, o: Self) -> Self;
    fn greater(self, o: Self) -> Self;
    /// `self * self` (a slot's first square).
    fn square(self) -> Self;
    /// `fma(self, self, acc)`, one rounding.
    fn square_add(self, acc: Self) -> Self;
    /// `self / n`.
    fn over(self, n: usize) -> Self;
    fn root(self) -> Self;
}

macro_rules! float_acc {
    ($($t:ty),*) => {$(
        impl Acc for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            fn add(self, o: Self) -> Self { self + o }
            fn mul(self, o: Self) -> Self { self * o }
            // IEEE 754-2019 `minimum`/`maximum`: NaN wins, `-0 < +0`.
            fn lesser(self, o: Self) -> Self {
                if self.is_nan() || o.is_nan() { <$t>::NAN }
                else if o == self { if o.is_sign_negative() { o } else { self } }
                else if o < self { o } else { self }
            }
            fn greater(self, o: Self) -> Self {
                if self.is_nan() || o.is_nan() { <$t>::NAN }
                else if o == self { if o.is_sign_positive() { o } else { self } }
                else if o > self { o } else { self }
            }
            fn square(self) -> Self { self * self }
            fn square_add(self, acc: Self) -> Self { self.mul_add(self, acc) }
            fn over(self, n: usize) -> Self { self / n as $t }
            fn root(self) -> Self { self.sqrt() }
        }
    )*};
}
float_acc!(f32, f64);

macro_rules! int_acc {
    ($($t:ty),*) => {$(
        impl Acc for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            fn lesser(self, o: Self) -> Self { if o < self { o } else { self } }
            fn greater(self, o: Self) -> Self { if o > self { o } else { self } }
            fn square(self) -> Self { unreachable!("no float reductions over integers") }
            fn square_add(self, _: Self) -> Self { unreachable!("no float reductions over integers") }
            fn over(self, _: usize) -> Self { unreachable!("no float reductions over integers") }
            fn root(self) -> Self { unreachable!("no float reductions over integers") }
        }
    )*};
}
int_acc!(i32, i64, u32, u8);

/// An element type of the tests: its accumulator, conversions and test values.
trait El: TestElem {
    type A: Acc;
    fn to_a(self) -> Self::A;
    /// Rounded once (nearest even).
    fn from_a(a: Self::A) -> Self;
    fn bits(self) -> u64;
    fn nan(self) -> bool;
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
    /// A random value: uniform in [-4, 4) for floats; with `near_one`, ±[0.875, 1.125) so
    /// that long products stay finite and their order shows. Integers: small and huge.
    fn value(rng: &mut Rng, near_one: bool) -> Self;
}

fn float_value(rng: &mut Rng, near_one: bool) -> f64 {
    if near_one {
        let sign = if rng.next() & 1 == 0 { 1.0 } else { -1.0 };
        sign * (0.875 + rng.unit() * 0.25)
    } else {
        rng.unit() * 8.0 - 4.0
    }
}

macro_rules! wide_el {
    ($($t:ty),*) => {$(
        impl El for $t {
            type A = $t;
            fn to_a(self) -> $t { self }
            fn from_a(a: $t) -> $t { a }
            fn bits(self) -> u64 { self.to_bits() as u64 }
            fn nan(self) -> bool { self.is_nan() }
            fn from_f64(v: f64) -> $t { v as $t }
            fn to_f64(self) -> f64 { self as f64 }
            fn value(rng: &mut Rng, near_one: bool) -> $t { float_value(rng, near_one) as $t }
        }
    )*};
}
wide_el!(f32, f64);

macro_rules! narrow_el {
    ($($t:ident),*) => {$(
        impl El for $t {
            type A = f32;
            fn to_a(self) -> f32 { self.to_f32() }
            fn from_a(a: f32) -> $t { $t::from_f32(a) }
            fn bits(self) -> u64 { self.to_bits() as u64 }
            fn nan(self) -> bool { self.is_nan() }
            fn from_f64(v: f64) -> $t { $t::from_f64(v) }
            fn to_f64(self) -> f64 { self.to_f64() }
            fn value(rng: &mut Rng, near_one: bool) -> $t { $t::from_f64(float_value(rng, near_one)) }
        }
    )*};
}
narrow_el!(f16, bf16);

macro_rules! int_el {
    ($($t:ty),*) => {$(
        impl El for $t {
            type A = $t;
            fn to_a(self) -> $t { self }
            fn from_a(a: $t) -> $t { a }
            fn bits(self) -> u64 { self as u64 }
            fn nan(self) -> bool { false }
            fn from_f64(v: f64) -> $t { v as $t }
            fn to_f64(self) -> f64 { self as f64 }
            fn value(rng: &mut Rng, _: bool) -> $t { <$t as TestElem>::random(rng) }
        }
    )*};
}
int_el!(i32, i64, u32, u8);

/// Bit-identical, or both NaN (NaN payloads are not part of the order's definition).
fn same<T: El>(a: T, b: T) -> bool {
    a.bits() == b.bits() || (a.nan() && b.nan())
}

/// The reductions, for the reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Sum,
    Prod,
    Amin,
    Amax,
    Mean,
    SumSq,
    Norm2,
}

impl Op {
    fn combine<A: Acc>(self, a: A, b: A) -> A {
        match self {
            Op::Sum | Op::Mean | Op::SumSq | Op::Norm2 => a.add(b),
            Op::Prod => a.mul(b),
            Op::Amin => a.lesser(b),
            Op::Amax => a.greater(b),
        }
    }
    fn first<T: El>(self, x: T) -> T::A {
        match self {
            Op::SumSq | Op::Norm2 => x.to_a().square(),
            _ => x.to_a(),
        }
    }
    fn fold<T: El>(self, acc: T::A, x: T) -> T::A {
        match self {
            Op::SumSq | Op::Norm2 => x.to_a().square_add(acc),
            _ => self.combine(acc, x.to_a()),
        }
    }
    fn finish<T: El>(self, acc: T::A, n: usize) -> T {
        T::from_a(match self {
            Op::Mean => acc.over(n),
            Op::Norm2 => acc.root(),
            _ => acc,
        })
    }
    /// The value of a reduction of nothing (`None`: an error).
    fn empty<T: El>(self) -> Option<T> {
        match self {
            Op::Sum | Op::SumSq | Op::Norm2 => Some(T::from_a(T::A::ZERO)),
            Op::Prod => Some(T::from_a(T::A::ONE)),
            Op::Mean => Some(T::from_a(T::A::ZERO.over(0))),
            Op::Amin | Op::Amax => None,
        }
    }
}

/// The halving tree, as levels over a power-of-two array of present/absent values: at each
/// level entry `l` of the lower half combines with entry `l + half` when that is present
/// (the present entries are always a prefix).
fn halving_tree<A: Copy>(vals: Vec<A>, combine: impl Fn(A, A) -> A) -> Option<A> {
    if vals.is_empty() {
        return None;
    }
    let p = vals.len().next_power_of_two();
    let mut v: Vec<Option<A>> = vals
        .into_iter()
        .map(Some)
        .chain(std::iter::repeat(None))
        .take(p)
        .collect();
    while v.len() > 1 {
        let half = v.len() / 2;
        v = (0..half)
            .map(|l| match (v[l], v[l + half]) {
                (Some(a), Some(b)) => Some(combine(a, b)),
                (a, None) => a,
                (None, Some(_)) => unreachable!("present values form a prefix"),
            })
            .collect();
    }
    v[0]
}

/// The order's definition over the logical elements `xs` of one output. `None`: a
/// reduction of nothing without a value (min, max).
fn reference<T: El>(op: Op, xs: &[T]) -> Option<T> {
    let n = xs.len();
    if n == 0 {
        return op.empty();
    }
    let w = chunk(size_of::<T>()) as usize;
    let slots = SLOTS as usize;
    let glen = group_len(n as u32, w as u32) as usize;
    assert_eq!(glen % (slots * w), 0);
    let values: Vec<T::A> = xs
        .chunks(glen)
        .map(|g| {
            let mut slot: Vec<Option<T::A>> = vec![None; slots];
            for (q, &x) in g.iter().enumerate() {
                let s = (q / w) % slots;
                slot[s] = Some(match slot[s] {
                    None => op.first(x),
                    Some(a) => op.fold(a, x),
                });
            }
            let present: Vec<T::A> = slot.iter().map_while(|s| *s).collect();
            assert!(
                slot[present.len()..].iter().all(Option::is_none),
                "slots that receive elements are a prefix"
            );
            halving_tree(present, |a, b| op.combine(a, b)).expect("a group holds elements")
        })
        .collect();
    assert_eq!(values.len(), groups_used(n as u32, w as u32) as usize);
    let acc = halving_tree(values, |a, b| op.combine(a, b)).expect("n > 0");
    Some(op.finish::<T>(acc, n))
}

// ------------------------------------------------------------------ index walking

/// Calls `f(idx)` for every multi-index of `shape` in row-major order (once for `[]`).
fn for_each_index(shape: &[usize], mut f: impl FnMut(&[usize])) {
    if shape.contains(&0) {
        return;
    }
    let mut idx = vec![0usize; shape.len()];
    loop {
        f(&idx);
        let mut d = shape.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

fn offset_of(l: &Layout, idx: &[usize]) -> usize {
    let mut o = l.offset() as isize;
    for (&i, &s) in idx.iter().zip(l.strides()) {
        o += i as isize * s;
    }
    o as usize
}

/// Elements a buffer for `l` needs (0 for an empty layout).
fn buffer_len(l: &Layout) -> usize {
    if l.numel() == 0 {
        return l.offset();
    }
    let mut hi = l.offset() as isize;
    for (&n, &s) in l.shape().iter().zip(l.strides()) {
        hi += (n as isize - 1) * s.max(0);
    }
    hi as usize + 1
}

/// The shapes of the output: reduced axes dropped, and kept as size 1.
fn out_shapes(shape: &[usize], axes: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let dropped = (0..shape.len())
        .filter(|a| !axes.contains(a))
        .map(|a| shape[a])
        .collect();
    let keepdim = (0..shape.len())
        .map(|a| if axes.contains(&a) { 1 } else { shape[a] })
        .collect();
    (dropped, keepdim)
}

/// The whole expected output buffer: `init` with every output written from the reference
/// over its elements, gathered by index arithmetic from the layouts. `None` when some
/// output is a reduction of nothing without a value.
fn expected<T: El>(
    op: Op,
    init: &[T],
    out: &Layout,
    data: &[T],
    lin: &Layout,
    axes: &[usize],
) -> Option<Vec<T>> {
    let shape = lin.shape();
    let rank = shape.len();
    let kept: Vec<usize> = (0..rank).filter(|a| !axes.contains(a)).collect();
    let red: Vec<usize> = (0..rank).filter(|a| axes.contains(a)).collect();
    let (dropped, keepdim) = out_shapes(shape, axes);
    let out_axis: Vec<usize> = if out.shape() == keepdim.as_slice() {
        kept.clone()
    } else {
        assert_eq!(out.shape(), dropped.as_slice(), "the test's output shape");
        (0..kept.len()).collect()
    };
    let kept_shape: Vec<usize> = kept.iter().map(|&a| shape[a]).collect();
    let red_shape: Vec<usize> = red.iter().map(|&a| shape[a]).collect();
    let mut want = init.to_vec();
    let mut no_value = false;
    for_each_index(&kept_shape, |k| {
        let (mut ib, mut ob) = (lin.offset() as isize, out.offset() as isize);
        for (j, &i) in k.iter().enumerate() {
            ib += i as isize * lin.strides()[kept[j]];
            ob += i as isize * out.strides()[out_axis[j]];
        }
        let mut xs = Vec::new();
        for_each_index(&red_shape, |r| {
            let mut o = ib;
            for (j, &i) in r.iter().enumerate() {
                o += i as isize * lin.strides()[red[j]];
            }
            xs.push(data[o as usize]);
        });
        match reference(op, &xs) {
            Some(v) => want[ob as usize] = v,
            None => no_value = true,
        }
    });
    (!no_value).then_some(want)
}

// ------------------------------------------------------------------ running a case

/// Random data for one buffer: plain values, and values near one for products.
struct Data<T> {
    plain: Vec<T>,
    near_one: Vec<T>,
}

impl<T: El> Data<T> {
    fn new(rng: &mut Rng, len: usize) -> Data<T> {
        Data {
            plain: (0..len).map(|_| T::value(rng, false)).collect(),
            near_one: (0..len).map(|_| T::value(rng, true)).collect(),
        }
    }
    fn for_op(&self, op: Op) -> &[T] {
        if op == Op::Prod {
            &self.near_one
        } else {
            &self.plain
        }
    }
}

/// Runs the CPU twin on a poisoned output buffer and compares the whole buffer with the
/// reference, bit for bit; a reduction of nothing without a value must be
/// `Error::EmptyReduction` and leave the buffer untouched.
#[allow(clippy::too_many_arguments)]
fn check<T: El, R: Reduce<T, Out = T>>(
    op: R,
    which: Op,
    what: &str,
    data: &Data<T>,
    lin: &Layout,
    axes: &[usize],
    out: &Layout,
    out_len: usize,
) {
    let data = data.for_op(which);
    let init = vec![T::poison(); out_len];
    let mut got = init.clone();
    let r = reduce_cpu(op, (&mut got, out), (data, lin), axes);
    let tag = || {
        format!(
            "{which:?} {} / {what}: input {:?} strides {:?} offset {}, axes {axes:?}, out {:?} strides {:?}",
            T::NAME,
            lin.shape(),
            lin.strides(),
            lin.offset(),
            out.shape(),
            out.strides()
        )
    };
    match expected(which, &init, out, data, lin, axes) {
        Some(want) => {
            if let Err(e) = r {
                panic!("{}: {e}", tag());
            }
            for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    same(g, w),
                    "{}: element {i}: twin {g:?} ({:#x}), reference {w:?} ({:#x})",
                    tag(),
                    g.bits(),
                    w.bits()
                );
            }
        }
        None => {
            assert!(
                matches!(r, Err(Error::EmptyReduction { .. })),
                "{}: {r:?}, expected EmptyReduction",
                tag()
            );
            assert!(
                got.iter().zip(&init).all(|(&g, &i)| same(g, i)),
                "{}: output touched",
                tag()
            );
        }
    }
}

/// Output layouts for an input shape and axes: dropped and kept contiguous, and dropped
/// as a column-major view with doubled strides and an offset (elements in between must
/// keep their poison).
fn out_layouts(shape: &[usize], axes: &[usize]) -> Vec<(&'static str, Layout, usize)> {
    let (dropped, keepdim) = out_shapes(shape, axes);
    let mut v = Vec::new();
    for (name, s) in [("out dropped", &dropped), ("out keepdim", &keepdim)] {
        let l = Layout::contiguous(s).unwrap();
        let len = l.numel();
        v.push((name, l, len));
    }
    if !dropped.is_empty() {
        let mut strides = vec![0isize; dropped.len()];
        let mut acc = 2isize;
        for (d, &n) in dropped.iter().enumerate() {
            strides[d] = acc;
            acc *= n.max(1) as isize;
        }
        let l = Layout::new(&dropped, &strides, 3).unwrap();
        let len = buffer_len(&l) + 2;
        v.push(("out strided", l, len));
    }
    v
}

/// Invokes `$f::<$t, _>(op, Op::…, args…)` for each reduction instantiated over `$t`.
macro_rules! for_ops {
    (int $t:ty, $f:ident($($arg:expr),*)) => {{
        $f::<$t, _>(Sum, Op::Sum $(, $arg)*);
        $f::<$t, _>(Prod, Op::Prod $(, $arg)*);
        $f::<$t, _>(Amin, Op::Amin $(, $arg)*);
        $f::<$t, _>(Amax, Op::Amax $(, $arg)*);
    }};
    (float $t:ty, $f:ident($($arg:expr),*)) => {{
        for_ops!(int $t, $f($($arg),*));
        $f::<$t, _>(Mean, Op::Mean $(, $arg)*);
        $f::<$t, _>(SumSq, Op::SumSq $(, $arg)*);
        $f::<$t, _>(Norm2, Op::Norm2 $(, $arg)*);
    }};
}

// ------------------------------------------------------------------ layouts × axes

/// An input view: a name, the buffer length and the layout.
fn view(
    name: &'static str,
    buffer: &[usize],
    f: impl Fn(Layout) -> Layout,
) -> (&'static str, usize, Layout) {
    let base = Layout::contiguous(buffer).unwrap();
    (name, base.numel(), f(base))
}

/// An input view (name, buffer length, layout) and the axes sets reduced over it.
type InputCase = ((&'static str, usize, Layout), Vec<Vec<usize>>);

/// The input layout classes, each with the axes sets reduced over it.
fn input_cases() -> Vec<InputCase> {
    let two_d = || vec![vec![1], vec![0], vec![], vec![0, 1], vec![1, 0]];
    vec![
        (view("contiguous", &[5, 37], |l| l), two_d()),
        (
            view("transposed", &[37, 5], |l| l.transpose(0, 1).unwrap()),
            two_d(),
        ),
        (
            view("permuted-4d", &[3, 4, 5, 6], |l| {
                l.permute(&[2, 0, 3, 1]).unwrap()
            }),
            vec![
                vec![1, 3],
                vec![3, 1],
                vec![0, 2],
                vec![3],
                vec![0],
                vec![2],
                vec![0, 1, 2, 3],
                vec![],
                vec![0, 1, 3],
            ],
        ),
        (view("flipped", &[6, 33], |l| l.flip(1).unwrap()), two_d()),
        (
            view("flipped-both", &[6, 33], |l| {
                l.flip(0).unwrap().flip(1).unwrap()
            }),
            two_d(),
        ),
        (
            view("sliced-step3", &[12, 70], |l| {
                l.slice(1, Some(1), None, 3).unwrap()
            }),
            two_d(),
        ),
        (
            view("sliced-step2-rows", &[12, 70], |l| {
                l.slice(0, Some(1), None, 2)
                    .unwrap()
                    .slice(1, Some(5), Some(60), 1)
                    .unwrap()
            }),
            two_d(),
        ),
        (
            view("negative-step2", &[9, 41], |l| {
                l.slice(1, None, None, -2).unwrap()
            }),
            two_d(),
        ),
        (
            view("broadcast-rows", &[1, 40], |l| {
                l.broadcast_to(&[7, 40]).unwrap()
            }),
            two_d(),
        ),
        (
            view("broadcast-cols", &[7, 1], |l| {
                l.broadcast_to(&[7, 40]).unwrap()
            }),
            two_d(),
        ),
        (
            view("broadcast-new-axis", &[40], |l| {
                l.broadcast_to(&[3, 5, 40]).unwrap()
            }),
            vec![vec![0, 1], vec![1], vec![2], vec![0, 2], vec![0, 1, 2]],
        ),
        (
            (
                "offset",
                13 + 5 * 25 + 20,
                Layout::new(&[6, 20], &[25, 1], 13).unwrap(),
            ),
            two_d(),
        ),
        (view("0-d", &[], |l| l), vec![vec![]]),
        (view("1-d", &[300], |l| l), vec![vec![0], vec![]]),
        (
            view("size-1-axes", &[1, 9, 1, 4], |l| l),
            vec![vec![0], vec![0, 2], vec![1, 2], vec![1], vec![3, 0]],
        ),
        // Reductions past one group (2^17 + 5 and 520 * 260 = 135_200: 2 groups each)
        // through strided and multi-dimensional reduced axes.
        (
            view("rows-2-groups", &[3, (1 << 17) + 5], |l| l),
            vec![vec![1]],
        ),
        (
            view("cols-2-groups", &[(1 << 17) + 5, 2], |l| l),
            vec![vec![0]],
        ),
        (
            view("permuted-3d-2-groups", &[520, 2, 260], |l| {
                l.permute(&[1, 0, 2]).unwrap()
            }),
            vec![vec![1, 2], vec![2, 1]],
        ),
    ]
}

fn layouts_for_op<T: El, R: Reduce<T, Out = T>>(
    op: R,
    which: Op,
    rng: &mut Rng,
    count: &mut usize,
) {
    for ((name, len, lin), axes_sets) in input_cases() {
        let data = Data::<T>::new(rng, len);
        for axes in &axes_sets {
            for (oname, out, out_len) in out_layouts(lin.shape(), axes) {
                check(
                    op,
                    which,
                    &format!("{name}, {oname}"),
                    &data,
                    &lin,
                    axes,
                    &out,
                    out_len,
                );
                *count += 1;
            }
        }
    }
}

#[test]
fn twin_matches_reference_over_layouts_and_axes() {
    let mut rng = Rng(0x5eed_0001);
    let mut count = 0usize;
    for_ops!(float f32, layouts_for_op(&mut rng, &mut count));
    for_ops!(float f64, layouts_for_op(&mut rng, &mut count));
    for_ops!(float bf16, layouts_for_op(&mut rng, &mut count));
    for_ops!(float f16, layouts_for_op(&mut rng, &mut count));
    for_ops!(int i32, layouts_for_op(&mut rng, &mut count));
    for_ops!(int u8, layouts_for_op(&mut rng, &mut count));
    for_ops!(int i64, layouts_for_op(&mut rng, &mut count));
    for_ops!(int u32, layouts_for_op(&mut rng, &mut count));
    println!("{count} (op, type, layout, axes, output) cases bit-identical to the reference");
}

// ------------------------------------------------------------------ lengths

/// Lengths around the chunk, slot and group boundaries of `T`.
fn lengths<T>() -> Vec<usize> {
    let w = chunk(size_of::<T>()) as usize;
    let g = (SLOTS as usize) * w;
    vec![
        1,
        2,
        3,
        w - 1,
        w,
        w + 1,
        5 * w + 3,
        g - 1,
        g,
        g + 1,
        3 * g + 7,
        (1 << 17) - 1,
        (1 << 17) + 5,
        (1 << 18) + 3,
    ]
}

fn lengths_for_op<T: El, R: Reduce<T, Out = T>>(
    op: R,
    which: Op,
    rng: &mut Rng,
    count: &mut usize,
) {
    let mut ns = lengths::<T>();
    if matches!(T::NAME, "f32" | "u8") {
        ns.push((1 << 19) + 7); // 8 groups
    }
    for n in ns.into_iter().filter(|&n| n > 0) {
        let data = Data::<T>::new(rng, n);
        let lin = Layout::contiguous(&[n]).unwrap();
        let out = Layout::contiguous(&[]).unwrap();
        check(
            op,
            which,
            &format!("1-d n = {n}"),
            &data,
            &lin,
            &[0],
            &out,
            1,
        );
        *count += 1;
    }
}

#[test]
fn twin_matches_reference_across_slot_and_group_boundaries() {
    // The lengths do cross the boundaries they are named for.
    assert_eq!(groups((1 << 17) - 1), 1);
    assert_eq!(groups_used((1 << 17) + 5, 4), 2);
    assert_eq!(groups_used((1 << 18) + 3, 4), 4);
    assert_eq!(groups_used((1 << 19) + 7, 4), 8);
    assert_eq!(groups_used((1 << 19) + 7, 16), 8);
    let mut rng = Rng(0x5eed_0002);
    let mut count = 0usize;
    for_ops!(float f32, lengths_for_op(&mut rng, &mut count));
    for_ops!(float f64, lengths_for_op(&mut rng, &mut count));
    for_ops!(float bf16, lengths_for_op(&mut rng, &mut count));
    for_ops!(float f16, lengths_for_op(&mut rng, &mut count));
    for_ops!(int i32, lengths_for_op(&mut rng, &mut count));
    for_ops!(int i64, lengths_for_op(&mut rng, &mut count));
    for_ops!(int u32, lengths_for_op(&mut rng, &mut count));
    for_ops!(int u8, lengths_for_op(&mut rng, &mut count));
    println!("{count} (op, type, length) cases bit-identical to the reference");
}

// ------------------------------------------------------------------ layout independence

/// `values` (logical, row-major over `shape`) stored in a buffer through `layout`.
fn store<T: El>(values: &[T], layout: &Layout, len: usize) -> Vec<T> {
    let mut buf = vec![T::poison(); len];
    let mut i = 0;
    for_each_index(layout.shape(), |idx| {
        buf[offset_of(layout, idx)] = values[i];
        i += 1;
    });
    assert_eq!(i, values.len());
    buf
}

/// Storage variants of one logical shape: `(name, layout, buffer length)`.
fn storages(shape: &[usize]) -> Vec<(&'static str, Layout, usize)> {
    let c = Layout::contiguous(shape).unwrap();
    let rev: Vec<usize> = shape.iter().rev().copied().collect();
    let perm_shape = [shape[2], shape[0], shape[1]];
    // Memory axes (2, 0, 1): logical axis 0 is memory axis 1, 1 is 2, 2 is 0.
    let permuted = Layout::contiguous(&perm_shape)
        .unwrap()
        .permute(&[1, 2, 0])
        .unwrap();
    let reversed = Layout::contiguous(&rev)
        .unwrap()
        .permute(&[2, 1, 0])
        .unwrap();
    let flipped = c.flip(0).unwrap().flip(2).unwrap();
    let padded = Layout::new(
        shape,
        &[
            (shape[1] * (shape[2] + 3)) as isize,
            (shape[2] + 3) as isize,
            1,
        ],
        5,
    )
    .unwrap();
    let mut v = Vec::new();
    for (name, l) in [
        ("contiguous", c),
        ("permuted", permuted),
        ("reversed-axes", reversed),
        ("flipped", flipped),
        ("padded-offset", padded),
    ] {
        assert_eq!(l.shape(), shape);
        let len = buffer_len(&l);
        v.push((name, l, len));
    }
    v
}

fn independence_for_op<T: El, R: Reduce<T, Out = T>>(
    op: R,
    which: Op,
    shape: &[usize],
    rng: &mut Rng,
    count: &mut usize,
) {
    let n: usize = shape.iter().product();
    let values: Vec<T> = (0..n).map(|_| T::value(rng, which == Op::Prod)).collect();
    let all = storages(shape);
    for axes in [
        vec![0],
        vec![1],
        vec![2],
        vec![0, 2],
        vec![1, 2],
        vec![0, 1, 2],
        vec![],
    ] {
        let (dropped, _) = out_shapes(shape, &axes);
        let out = Layout::contiguous(&dropped).unwrap();
        let mut first: Option<Vec<T>> = None;
        for (name, lin, len) in &all {
            let buf = store(&values, lin, *len);
            let mut got = vec![T::poison(); out.numel()];
            reduce_cpu(op, (&mut got, &out), (&buf, lin), &axes).unwrap();
            match &first {
                None => first = Some(got),
                Some(f) => {
                    for (i, (&a, &b)) in f.iter().zip(&got).enumerate() {
                        assert!(
                            same(a, b),
                            "{which:?} {} over {axes:?} of {shape:?}: {name} storage gives {b:?} at {i}, contiguous {a:?}",
                            T::NAME
                        );
                    }
                }
            }
            *count += 1;
        }
    }
}

#[test]
fn result_does_not_depend_on_the_memory_layout() {
    let mut rng = Rng(0x5eed_0003);
    let mut count = 0usize;
    for shape in [[6usize, 7, 300], [2, 260, 520]] {
        for_ops!(float f32, independence_for_op(&shape, &mut rng, &mut count));
    }
    independence_for_op::<bf16, _>(Sum, Op::Sum, &[2, 260, 520], &mut rng, &mut count);
    independence_for_op::<f64, _>(Sum, Op::Sum, &[6, 7, 300], &mut rng, &mut count);
    println!("{count} (op, storage, axes) results bit-identical across storages");
}

// ------------------------------------------------------------------ exactness

/// Reduces a 1-D contiguous vector to one value.
fn reduce_all<T: El, R: Reduce<T, Out = T>>(op: R, x: &[T]) -> Result<T, Error> {
    let mut out = [T::poison()];
    reduce_cpu(
        op,
        (&mut out, &Layout::contiguous(&[]).unwrap()),
        (x, &Layout::contiguous(&[x.len()]).unwrap()),
        &[0],
    )?;
    Ok(out[0])
}

macro_rules! int_exact {
    ($($t:ty),*) => {$({
        let mut rng = Rng(0x5eed_0004);
        for n in [1usize, 17, 4099, (1 << 17) + 5, (1 << 18) + 3] {
            let x: Vec<$t> = (0..n).map(|_| <$t as El>::value(&mut rng, false)).collect();
            let sum = x.iter().fold(0 as $t, |a, &b| a.wrapping_add(b));
            let prod = x.iter().fold(1 as $t, |a, &b| a.wrapping_mul(b | 1));
            let odd: Vec<$t> = x.iter().map(|&v| v | 1).collect();
            let (lo, hi) = (*x.iter().min().unwrap(), *x.iter().max().unwrap());
            assert_eq!(reduce_all(Sum, &x).unwrap(), sum, "sum {} n = {n}", stringify!($t));
            assert_eq!(reduce_all(Prod, &odd).unwrap(), prod, "prod {} n = {n}", stringify!($t));
            assert_eq!(reduce_all(Amin, &x).unwrap(), lo, "amin {} n = {n}", stringify!($t));
            assert_eq!(reduce_all(Amax, &x).unwrap(), hi, "amax {} n = {n}", stringify!($t));
        }
        // Column sums of a [rows, cols] matrix, stored transposed: each exact.
        let (rows, cols) = (70_001usize, 3usize);
        let x: Vec<$t> = (0..rows * cols).map(|_| <$t as El>::value(&mut rng, false)).collect();
        let lin = Layout::contiguous(&[cols, rows]).unwrap().transpose(0, 1).unwrap();
        let mut got = vec![0 as $t; cols];
        reduce_cpu(Sum, (&mut got, &Layout::contiguous(&[cols]).unwrap()), (&x, &lin), &[0]).unwrap();
        for c in 0..cols {
            let want = x[c * rows..(c + 1) * rows].iter().fold(0 as $t, |a, &b| a.wrapping_add(b));
            assert_eq!(got[c], want, "column sum {} {c}", stringify!($t));
        }
    })*};
}

#[test]
fn integer_sums_and_products_wrap_exactly_and_min_max_are_exact() {
    int_exact!(i32, i64, u32, u8);
}

fn float_min_max<T: El>(rng: &mut Rng)
where
    Amin: Reduce<T, Out = T>,
    Amax: Reduce<T, Out = T>,
{
    for n in [1usize, 3, 1000, (1 << 17) + 5, (1 << 18) + 3] {
        let x: Vec<T> = (0..n).map(|_| T::value(rng, false)).collect();
        let lo = x.iter().map(|v| v.to_f64()).fold(f64::INFINITY, f64::min);
        let hi = x
            .iter()
            .map(|v| v.to_f64())
            .fold(f64::NEG_INFINITY, f64::max);
        assert_eq!(
            reduce_all(Amin, &x).unwrap().to_f64(),
            lo,
            "amin {} n = {n}",
            T::NAME
        );
        assert_eq!(
            reduce_all(Amax, &x).unwrap().to_f64(),
            hi,
            "amax {} n = {n}",
            T::NAME
        );
    }
    // Ties of +0 and -0: `-0 < +0` (IEEE 754-2019 `maximum`/`minimum`), so amax is +0 and
    // amin -0 wherever the two zeros are, and a row of one zero gives that zero.
    for n in [2usize, 1000, (1 << 17) + 5] {
        for mix in 0..3 {
            let z: Vec<T> = (0..n)
                .map(|i| {
                    let neg = match mix {
                        0 => rng.next() & 1 == 1 || i == 0,
                        1 => false,
                        _ => true,
                    };
                    T::from_f64(if neg { -0.0 } else { 0.0 })
                })
                .collect();
            let has = |neg: bool| {
                z.iter()
                    .any(|v| (v.bits() == T::from_f64(-0.0).bits()) == neg)
            };
            let pick = |neg: bool| T::from_f64(if neg { -0.0 } else { 0.0 }).bits();
            let (amin, amax) = (pick(has(true)), pick(!has(false)));
            for (got, want, which) in [
                (reduce_all(Amin, &z), amin, "amin"),
                (reduce_all(Amax, &z), amax, "amax"),
            ] {
                assert_eq!(
                    got.unwrap().bits(),
                    want,
                    "{which} {} of ±0, n = {n}, mix {mix}",
                    T::NAME
                );
            }
        }
    }
}

#[test]
fn float_min_max_are_exact() {
    let mut rng = Rng(0x5eed_0005);
    float_min_max::<f32>(&mut rng);
    float_min_max::<f64>(&mut rng);
    float_min_max::<f16>(&mut rng);
    float_min_max::<bf16>(&mut rng);
}

fn nan_case<T: El, R: Reduce<T, Out = T>>(op: R, which: Op, rng: &mut Rng, count: &mut usize) {
    let n = (1usize << 17) + 5;
    let w = chunk(size_of::<T>()) as usize;
    let glen = group_len(n as u32, w as u32) as usize;
    let clean: Vec<T> = (0..n).map(|_| T::value(rng, which == Op::Prod)).collect();
    // First, last, middle of a slot's run, just after the group boundary; ±inf around it
    // (NaN wins over infinities too).
    for at in [0, n - 1, 5 * w + 1, glen, glen + 1] {
        let mut x = clean.clone();
        x[at] = T::from_f64(f64::NAN);
        if at + 1 < n {
            x[at + 1] = T::from_f64(f64::INFINITY);
        }
        if at > 0 {
            x[at - 1] = T::from_f64(f64::NEG_INFINITY);
        }
        let r = reduce_all(op, &x).unwrap();
        assert!(
            r.nan(),
            "{which:?} {}: NaN at {at} of {n} gives {r:?}",
            T::NAME
        );
        *count += 1;
    }
    // Short: NaN in the middle of three.
    let x = [T::from_f64(1.0), T::from_f64(f64::NAN), T::from_f64(2.0)];
    assert!(
        reduce_all(op, &x).unwrap().nan(),
        "{which:?} {} of [1, NaN, 2]",
        T::NAME
    );
    // Rows: only the row holding the NaN is NaN.
    let (rows, cols) = (4usize, 1000usize);
    let mut m: Vec<T> = (0..rows * cols)
        .map(|_| T::value(rng, which == Op::Prod))
        .collect();
    m[2 * cols + 517] = T::from_f64(f64::NAN);
    let mut out = vec![T::poison(); rows];
    reduce_cpu(
        op,
        (&mut out, &Layout::contiguous(&[rows]).unwrap()),
        (&m, &Layout::contiguous(&[rows, cols]).unwrap()),
        &[1],
    )
    .unwrap();
    for (r, v) in out.iter().enumerate() {
        // Plain sums of values in [-4, 4) and products near 1 of 1000 stay finite.
        assert_eq!(v.nan(), r == 2, "{which:?} {} row {r}: {v:?}", T::NAME);
    }
    *count += 2;
}

#[test]
fn nan_anywhere_gives_nan() {
    let mut rng = Rng(0x5eed_0006);
    let mut count = 0usize;
    for_ops!(float f32, nan_case(&mut rng, &mut count));
    for_ops!(float f64, nan_case(&mut rng, &mut count));
    for_ops!(float f16, nan_case(&mut rng, &mut count));
    for_ops!(float bf16, nan_case(&mut rng, &mut count));
    println!("{count} NaN cases");
}

fn empty_case<T: El, R: Reduce<T, Out = T>>(op: R, which: Op) {
    // [4, 0] over axis 1: four reductions of nothing; [0] over axis 0: one (0-d output).
    for (shape, axes, out_shape) in [
        (vec![4usize, 0], vec![1usize], vec![4usize]),
        (vec![4, 0], vec![1], vec![4, 1]),
        (vec![0], vec![0], vec![]),
        (vec![3, 0, 2], vec![1], vec![3, 2]),
    ] {
        let lin = Layout::contiguous(&shape).unwrap();
        let out = Layout::contiguous(&out_shape).unwrap();
        let init = vec![T::poison(); out.numel()];
        let mut got = init.clone();
        let r = reduce_cpu(op, (&mut got, &out), (&[] as &[T], &lin), &axes);
        let what = format!(
            "{which:?} {} of nothing, input {shape:?} axes {axes:?}",
            T::NAME
        );
        match which {
            Op::Amin | Op::Amax => {
                assert!(
                    matches!(r, Err(Error::EmptyReduction { operand: "input" })),
                    "{what}: {r:?}"
                );
                assert!(
                    got.iter().zip(&init).all(|(&a, &b)| same(a, b)),
                    "{what}: output touched"
                );
            }
            _ => {
                r.unwrap_or_else(|e| panic!("{what}: {e}"));
                for v in &got {
                    let ok = match which {
                        Op::Sum | Op::SumSq | Op::Norm2 => v.bits() == 0,
                        Op::Prod => v.to_f64() == 1.0,
                        Op::Mean => v.nan(),
                        Op::Amin | Op::Amax => unreachable!(),
                    };
                    assert!(ok, "{what}: {v:?}");
                }
            }
        }
    }
}

#[test]
fn reductions_of_nothing() {
    for_ops!(float f32, empty_case());
    for_ops!(float f64, empty_case());
    for_ops!(float f16, empty_case());
    for_ops!(float bf16, empty_case());
    for_ops!(int i32, empty_case());
    for_ops!(int i64, empty_case());
    for_ops!(int u32, empty_case());
    for_ops!(int u8, empty_case());
}

fn no_output_case<T: El, R: Reduce<T, Out = T>>(op: R, which: Op) {
    // No outputs: nothing is read or written, even for min and max of nothing.
    for (shape, axes, out_shape) in [
        (vec![0usize, 5], vec![1usize], vec![0usize]),
        (vec![0, 5], vec![1], vec![0, 1]),
        (vec![0, 0], vec![1], vec![0]),
        (vec![3, 0, 4], vec![2], vec![3, 0]),
    ] {
        let lin = Layout::contiguous(&shape).unwrap();
        let out = Layout::contiguous(&out_shape).unwrap();
        let mut buf = vec![T::poison(); 3];
        reduce_cpu(op, (&mut buf, &out), (&[] as &[T], &lin), &axes)
            .unwrap_or_else(|e| panic!("{which:?} {} {shape:?} {axes:?}: {e}", T::NAME));
        assert!(
            buf.iter().all(|&v| same(v, T::poison())),
            "{which:?}: buffer written"
        );
    }
}

#[test]
fn outputs_with_no_elements_are_a_no_op() {
    for_ops!(float f32, no_output_case());
    for_ops!(float bf16, no_output_case());
    for_ops!(int i32, no_output_case());
    for_ops!(int u8, no_output_case());
}

// ------------------------------------------------------------------ accuracy

#[test]
fn f32_sum_of_2_pow_20_is_accurate() {
    let n = 1usize << 20;
    let mut rng = Rng(0x5eed_0007);
    let x: Vec<f32> = (0..n).map(|_| (rng.unit() * 2.0 - 1.0) as f32).collect();
    let s64: f64 = x.iter().map(|&v| v as f64).sum();
    let abs: f64 = x.iter().map(|&v| (v as f64).abs()).sum();
    let sq64: f64 = x.iter().map(|&v| (v as f64) * (v as f64)).sum();
    let s = reduce_all(Sum, &x).unwrap() as f64;
    let err = (s - s64).abs();
    // A rigorous bound: every element passes through at most `depth` roundings (its
    // slot's sequential fold, the slot tree, the group tree), so
    // |err| <= depth * u * sum |x| (first order, u = 2^-24).
    let (w, slots) = (4usize, SLOTS as usize);
    let glen = group_len(n as u32, w as u32) as usize;
    let depth = glen / slots
        + slots.ilog2() as usize
        + (groups_used(n as u32, w as u32) as usize).ilog2() as usize;
    let u = f32::EPSILON as f64 / 2.0;
    assert!(
        err <= depth as f64 * u * abs,
        "sum {s} vs {s64}: error {err}"
    );
    // The working bound: 1e-4 relative to the sum (the data's sum is not small: |s| is
    // hundreds against sum |x| = 2^19, so this is not an ill-conditioned case).
    assert!(
        s64.abs() > 100.0,
        "the seed gives a well-conditioned sum ({s64})"
    );
    assert!(
        err <= 1e-4 * s64.abs(),
        "sum {s} vs f64 {s64}: relative error {}",
        err / s64.abs()
    );
    // A sequential f32 sum for comparison: the tree order is not worse.
    let seq = x.iter().fold(0.0f32, |a, &b| a + b) as f64;
    println!(
        "f32 sum of 2^20: error {err:.3e} (relative {:.3e}); sequential f32: {:.3e}; rigorous bound {:.3e}",
        err / s64.abs(),
        (seq - s64).abs(),
        depth as f64 * u * abs
    );
    // Squares (all terms positive: relative to the sum itself).
    let sq = reduce_all(SumSq, &x).unwrap() as f64;
    assert!(
        (sq - sq64).abs() <= (depth + 1) as f64 * u * sq64,
        "sum of squares {sq} vs {sq64}"
    );
    assert!(
        (sq - sq64).abs() <= 1e-5 * sq64,
        "sum of squares {sq} vs {sq64}"
    );
    let norm = reduce_all(Norm2, &x).unwrap() as f64;
    assert!(
        (norm - sq64.sqrt()).abs() <= 1e-5 * sq64.sqrt(),
        "norm {norm} vs {}",
        sq64.sqrt()
    );
    let mean = reduce_all(Mean, &x).unwrap() as f64;
    assert!(
        (mean - s64 / n as f64).abs() <= 1e-4 * (s64 / n as f64).abs(),
        "mean {mean}"
    );
}

#[test]
fn bf16_sums_accumulate_in_f32() {
    let n = (1usize << 17) + 5;
    let mut rng = Rng(0x5eed_0008);
    let x: Vec<bf16> = (0..n).map(|_| bf16::from_f64(rng.unit())).collect();
    let got = reduce_all(Sum, &x).unwrap();
    // The f32 reference in the same order (bf16's w = 8), rounded once to bf16.
    let xf: Vec<f32> = x.iter().map(|v| v.to_f32()).collect();
    let w = chunk(2) as usize;
    let glen = group_len(n as u32, w as u32) as usize;
    let group_sums: Vec<f32> = xf
        .chunks(glen)
        .map(|g| {
            let mut slot = vec![0.0f32; SLOTS as usize];
            for (q, &v) in g.iter().enumerate() {
                slot[(q / w) % SLOTS as usize] += v; // 0.0 + v is v: same as `first`
            }
            halving_tree(slot, |a, b| a + b).unwrap()
        })
        .collect();
    let f32_sum = halving_tree(group_sums, |a, b| a + b).unwrap();
    assert_eq!(
        got.to_bits(),
        bf16::from_f32(f32_sum).to_bits(),
        "bf16 sum {got} vs f32 {f32_sum}"
    );
    // And it is the bf16 nearest the exact sum (within one bf16 ulp: the f32 error is ~1
    // against a bf16 ulp of 512 here).
    let s64: f64 = x.iter().map(|v| v.to_f64()).sum();
    let ulp = {
        let b = bf16::from_f64(s64);
        bf16::from_bits(b.to_bits() + 1).to_f64() - b.to_f64()
    };
    assert!(
        (got.to_f64() - s64).abs() <= ulp,
        "bf16 sum {got} vs f64 {s64} (ulp {ulp})"
    );
    // Accumulating in bf16 would stagnate far below (at a few hundred).
    let naive = x.iter().fold(bf16::from_f32(0.0), |a, &b| {
        bf16::from_f32(a.to_f32() + b.to_f32())
    });
    assert!(
        naive.to_f64() < s64 / 8.0,
        "a bf16 accumulator would be {naive}"
    );
    // f16 too: its sum would overflow f16's 65504 only in the final rounding, not midway.
    let h: Vec<f16> = (0..n).map(|_| f16::from_f64(rng.unit() * 0.5)).collect();
    let hs: f64 = h.iter().map(|v| v.to_f64()).sum();
    let got = reduce_all(Sum, &h).unwrap().to_f64();
    assert!((got - hs).abs() <= 32.0, "f16 sum {got} vs {hs}");
}

// ------------------------------------------------------------------ errors

#[test]
fn typed_errors_leave_the_output_untouched() {
    let x: Vec<f32> = (0..5 * 37).map(|v| v as f32).collect();
    let lin = Layout::contiguous(&[5, 37]).unwrap();
    let init = vec![-7.0f32; 200];
    // The op on `x` over `axes` into the first `len` elements of a poisoned buffer: the
    // result and whether the buffer is untouched.
    let run = |out: &Layout, axes: &[usize], len: usize| -> (Result<(), Error>, bool) {
        let mut buf = init[..len].to_vec();
        let r = reduce_cpu(Sum, (&mut buf, out), (&x, &lin), axes);
        (r, buf == init[..len])
    };
    let c = |s: &[usize]| Layout::contiguous(s).unwrap();
    let mut n = 0;
    let mut expect =
        |what: &str, (r, untouched): (Result<(), Error>, bool), ok: &dyn Fn(&Error) -> bool| {
            match &r {
                Err(e) if ok(e) => {}
                _ => panic!("{what}: {r:?}"),
            }
            assert!(untouched, "{what}: output written before the error");
            n += 1;
        };
    let bad_axes = |e: &Error| {
        matches!(
            e,
            Error::InvalidView {
                operand: "axes",
                ..
            }
        )
    };
    expect("axis out of range", run(&c(&[5]), &[2], 5), &bad_axes);
    expect(
        "axis out of range (keepdim)",
        run(&c(&[5, 1]), &[7], 5),
        &bad_axes,
    );
    expect("axis named twice", run(&c(&[5]), &[1, 1], 5), &bad_axes);
    expect(
        "axis named twice, all",
        run(&c(&[]), &[0, 1, 0], 1),
        &bad_axes,
    );
    let shape = |e: &Error| matches!(e, Error::ReducedShape { operand: "out", .. });
    expect("wrong output shape", run(&c(&[37]), &[1], 37), &shape);
    expect("wrong keepdim shape", run(&c(&[5, 2]), &[1], 10), &shape);
    expect(
        "keepdim of the wrong axis",
        run(&c(&[1, 37]), &[1], 37),
        &shape,
    );
    expect(
        "unreduced output for a reduction",
        run(&c(&[5, 37]), &[1], 185),
        &shape,
    );
    expect("reduced output for no axes", run(&c(&[5]), &[], 5), &shape);
    expect(
        "output of another rank",
        run(&c(&[5, 1, 1]), &[1], 5),
        &shape,
    );
    let overlapping = |e: &Error| matches!(e, Error::OverlappingOutput { operand: "out", .. });
    let stride0 = Layout::new(&[5], &[0], 0).unwrap();
    expect(
        "output with a stride-0 axis",
        run(&stride0, &[1], 1),
        &overlapping,
    );
    let broadcast_keepdim = c(&[1, 1]).broadcast_to(&[1, 37]).unwrap();
    expect(
        "keepdim output broadcast",
        run(&broadcast_keepdim, &[0], 1),
        &overlapping,
    );
    // Control: a strided (not overlapping) output is fine.
    let (r, _) = run(&Layout::new(&[5], &[2], 1).unwrap(), &[1], 10);
    r.expect("a stride-2 output");
    expect("output past its buffer", run(&c(&[5]), &[1], 4), &|e| {
        matches!(e, Error::OutOfBounds { operand: "out", .. })
    });
    // Min and max of nothing.
    let empty_in = Layout::contiguous(&[5, 0]).unwrap();
    for keep in [false, true] {
        let out = if keep { c(&[5, 1]) } else { c(&[5]) };
        let mut buf = init[..5].to_vec();
        let r = reduce_cpu(Amax, (&mut buf, &out), (&[] as &[f32], &empty_in), &[1]);
        assert!(
            matches!(r, Err(Error::EmptyReduction { operand: "input" })),
            "{r:?}"
        );
        assert_eq!(buf, init[..5]);
        let r = reduce_cpu(Amin, (&mut buf, &out), (&[] as &[f32], &empty_in), &[1]);
        assert!(
            matches!(r, Err(Error::EmptyReduction { operand: "input" })),
            "{r:?}"
        );
        assert_eq!(buf, init[..5]);
        n += 2;
    }
    println!("{n} error cases");
}
