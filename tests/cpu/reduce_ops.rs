//! The reductions beyond folds of values, on the CPU twin: arg reductions, all/any and
//! map-reduces over two inputs.
//!
//! - `Argmin`/`Argmax` against a sequential walk of the logical order (first extreme, a
//!   NaN beats every number, the first NaN wins), over values with many ties (integers of
//!   a small range, floats with `±0.0` and NaN), on contiguous, transposed, permuted,
//!   reversed, broadcast and multi-group inputs, kept and dropped outputs.
//! - `All`/`Any` against a walk (non-zero is true, NaN too, `-0.0` is zero), on `Bool`,
//!   floats and integers, including reductions of nothing.
//! - `MapReduce` (`sqdiff`, `dot`) against the one-input reduction of the map's result
//!   materialised by an apply: the same order, so bit for bit, also with a broadcast or
//!   transposed second input.
//! - The typed errors: argmax of nothing, inputs that do not broadcast, an output of the
//!   wrong element type or a wrong input count through run-time dispatch.

use crate::common::Rng;
use strided_apply::gpu_kernels::ops::{Mul, Sub};
use strided_apply::gpu_kernels::reduce::{All, Any, Argmax, Argmin, MapReduce, Reduce, Sum, SumSq};
use strided_apply::reduce::{map_reduce_cpu, reduce_cpu};
use strided_apply::{bf16, f16, Bool, Elem, Error, Layout};

/// Element types of these tests: a comparison key and test values.
trait El: Elem + std::fmt::Debug {
    /// `None` for NaN, else a value ordered as the element is.
    fn key(self) -> Option<f64>;
    fn truth(self) -> bool;
    /// A value of a small range (many ties), sometimes `±0` and (floats) sometimes NaN.
    fn tie_value(rng: &mut Rng) -> Self;
}

macro_rules! float_el {
    ($($t:ty),*) => {$(
        impl El for $t {
            fn key(self) -> Option<f64> { if self.is_nan() { None } else { Some(self as f64) } }
            fn truth(self) -> bool { self != 0.0 }
            fn tie_value(rng: &mut Rng) -> Self {
                match rng.next() % 64 {
                    0 => <$t>::NAN,
                    1 => -0.0,
                    r => (r % 7) as $t - 3.0,
                }
            }
        }
    )*};
}
float_el!(f32, f64);

macro_rules! narrow_el {
    ($($t:ident),*) => {$(
        impl El for $t {
            fn key(self) -> Option<f64> { if self.is_nan() { None } else { Some(self.to_f64()) } }
            fn truth(self) -> bool { self.to_f32() != 0.0 }
            fn tie_value(rng: &mut Rng) -> Self {
                match rng.next() % 64 {
                    0 => $t::NAN,
                    1 => $t::from_f32(-0.0),
                    r => $t::from_f32((r % 7) as f32 - 3.0),
                }
            }
        }
    )*};
}
narrow_el!(f16, bf16);

macro_rules! int_el {
    ($($t:ty),*) => {$(
        impl El for $t {
            // Exact in f64 for the range the tests draw.
            fn key(self) -> Option<f64> { Some(self as f64) }
            fn truth(self) -> bool { self != 0 }
            fn tie_value(rng: &mut Rng) -> Self { (rng.next() % 7) as $t }
        }
    )*};
}
int_el!(i32, i64, u32, u8);

impl El for Bool {
    fn key(self) -> Option<f64> {
        Some(self.0 as f64)
    }
    fn truth(self) -> bool {
        self.0 != 0
    }
    fn tie_value(rng: &mut Rng) -> Self {
        Bool(!rng.next().is_multiple_of(16) as u8)
    }
}

/// Input offsets of every output's elements, in the logical order: outputs in row-major
/// order of the kept axes, each output's elements in row-major order of the reduced axes.
fn walk(l: &Layout, axes: &[usize]) -> Vec<Vec<usize>> {
    let shape = l.shape();
    let kept: Vec<usize> = (0..shape.len()).filter(|a| !axes.contains(a)).collect();
    let red: Vec<usize> = (0..shape.len()).filter(|a| axes.contains(a)).collect();
    let index = |dims: &[usize], mut i: usize| -> Vec<(usize, usize)> {
        let mut out = vec![];
        for &d in dims.iter().rev() {
            out.push((d, i % shape[d]));
            i /= shape[d];
        }
        out
    };
    let count = |dims: &[usize]| dims.iter().map(|&d| shape[d]).product::<usize>();
    (0..count(&kept))
        .map(|o| {
            (0..count(&red))
                .map(|r| {
                    let mut off = l.offset() as isize;
                    for (d, i) in index(&kept, o).into_iter().chain(index(&red, r)) {
                        off += i as isize * l.strides()[d];
                    }
                    off as usize
                })
                .collect()
        })
        .collect()
}

/// The layouts of the tests, over a buffer of the returned length, with the axes to
/// reduce: (name, buffer length, layout, axes).
fn layouts() -> Vec<(&'static str, usize, Layout, Vec<usize>)> {
    let c = |s: &[usize]| Layout::contiguous(s).unwrap();
    vec![
        ("rows", 7 * 300, c(&[7, 300]), vec![1]),
        ("columns", 7 * 300, c(&[7, 300]), vec![0]),
        (
            "transposed rows",
            300 * 7,
            c(&[300, 7]).transpose(0, 1).unwrap(),
            vec![1],
        ),
        (
            "permuted axes 0, 2",
            5 * 6 * 70,
            c(&[5, 6, 70]).permute(&[2, 0, 1]).unwrap(),
            vec![0, 2],
        ),
        ("flipped", 9 * 260, c(&[9, 260]).flip(1).unwrap(), vec![1]),
        (
            "sliced step 3",
            4 * 900,
            c(&[4, 900]).slice(1, Some(2), None, 3).unwrap(),
            vec![1],
        ),
        (
            "broadcast reduced",
            300,
            c(&[1, 300]).broadcast_to(&[7, 300]).unwrap(),
            vec![0],
        ),
        ("all axes", 13 * 17 * 19, c(&[13, 17, 19]), vec![0, 1, 2]),
        ("two groups", (1 << 17) + 5, c(&[(1 << 17) + 5]), vec![0]),
    ]
}

/// The shape `axes` leaves, dropped.
fn dropped(l: &Layout, axes: &[usize]) -> Vec<usize> {
    (0..l.ndim())
        .filter(|a| !axes.contains(a))
        .map(|a| l.shape()[a])
        .collect()
}

/// The first extreme's position (`better(b, a)`: `b` strictly beats `a`; a NaN beats every
/// number and the first NaN stays).
fn arg_ref<T: El>(xs: &[T], better: impl Fn(f64, f64) -> bool) -> i64 {
    let mut best = 0;
    for (i, x) in xs.iter().enumerate().skip(1) {
        match (xs[best].key(), x.key()) {
            (None, _) => {}
            (Some(_), None) => best = i,
            (Some(a), Some(b)) => {
                if better(b, a) {
                    best = i
                }
            }
        }
    }
    best as i64
}

fn arg_for_type<T: El>(rng: &mut Rng) -> usize
where
    Argmin: Reduce<T, Out = i64>,
    Argmax: Reduce<T, Out = i64>,
{
    let mut count = 0;
    for (name, len, l, axes) in layouts() {
        let buf: Vec<T> = (0..len).map(|_| T::tie_value(rng)).collect();
        let shape = dropped(&l, &axes);
        let out = Layout::contiguous(&shape).unwrap();
        let groups = walk(&l, &axes);
        let elems = |g: &Vec<usize>| g.iter().map(|&o| buf[o]).collect::<Vec<T>>();
        for (which, min) in [("argmin", true), ("argmax", false)] {
            let mut got = vec![-9i64; out.numel()];
            let r = if min {
                reduce_cpu(Argmin, (&mut got, &out), (&buf, &l), &axes)
            } else {
                reduce_cpu(Argmax, (&mut got, &out), (&buf, &l), &axes)
            };
            r.unwrap_or_else(|e| panic!("{which} {} {name}: {e}", T::NAME));
            let want: Vec<i64> = groups
                .iter()
                .map(|g| {
                    if min {
                        arg_ref(&elems(g), |b, a| b < a)
                    } else {
                        arg_ref(&elems(g), |b, a| b > a)
                    }
                })
                .collect();
            assert_eq!(got, want, "{which} {} {name}", T::NAME);
            count += got.len();
        }
        // Kept axes: the same values in an output of size-1 reduced axes.
        let keep: Vec<usize> = (0..l.ndim())
            .map(|a| if axes.contains(&a) { 1 } else { l.shape()[a] })
            .collect();
        let kept = Layout::contiguous(&keep).unwrap();
        let mut got = vec![-9i64; kept.numel()];
        reduce_cpu(Argmax, (&mut got, &kept), (&buf, &l), &axes).unwrap();
        let want: Vec<i64> = groups
            .iter()
            .map(|g| arg_ref(&elems(g), |b, a| b > a))
            .collect();
        assert_eq!(got, want, "argmax keepdim {} {name}", T::NAME);
    }
    count
}

#[test]
fn arg_reductions_give_the_first_extreme_nan_first() {
    let mut rng = Rng(0xa59a);
    let mut count = 0;
    count += arg_for_type::<f32>(&mut rng);
    count += arg_for_type::<f64>(&mut rng);
    count += arg_for_type::<f16>(&mut rng);
    count += arg_for_type::<bf16>(&mut rng);
    count += arg_for_type::<i32>(&mut rng);
    count += arg_for_type::<i64>(&mut rng);
    count += arg_for_type::<u32>(&mut rng);
    count += arg_for_type::<u8>(&mut rng);
    assert!(count > 10_000, "{count} outputs checked");
    // Spelled out: ties go to the first position, a NaN wins, the first NaN of several.
    let l = Layout::contiguous(&[6]).unwrap();
    let scalar = Layout::contiguous(&[]).unwrap();
    let run = |x: &[f32], max: bool| {
        let mut got = [-1i64];
        if max {
            reduce_cpu(Argmax, (&mut got, &scalar), (x, &l), &[0]).unwrap();
        } else {
            reduce_cpu(Argmin, (&mut got, &scalar), (x, &l), &[0]).unwrap();
        }
        got[0]
    };
    assert_eq!(run(&[1.0, 3.0, 2.0, 3.0, 0.0, 3.0], true), 1);
    assert_eq!(run(&[1.0, 0.0, 2.0, 3.0, 0.0, -0.0], false), 1);
    assert_eq!(run(&[1.0, 9.0, f32::NAN, 3.0, f32::NAN, 9.0], true), 2);
    assert_eq!(run(&[1.0, -9.0, 2.0, f32::NAN, f32::NAN, -9.0], false), 3);
}

/// Outputs checked; `seen[all][answer]` counts the answers of `any` (0) and `all` (1).
fn truth_for_type<T: El>(rng: &mut Rng, seen: &mut [[usize; 2]; 2]) -> usize
where
    All: Reduce<T, Out = Bool>,
    Any: Reduce<T, Out = Bool>,
{
    let mut count = 0;
    for (i, (name, len, l, axes)) in layouts().into_iter().enumerate() {
        // So that both answers of both ops occur: mostly true (a zero, `0`, `-0.0` or
        // false, in about one element of 400), or in every other layout mostly false.
        let buf: Vec<T> = (0..len)
            .map(|_| {
                let zero = rng.next().is_multiple_of(400) != (i % 2 == 1);
                loop {
                    let x = T::tie_value(rng);
                    if x.truth() != zero {
                        break x;
                    }
                }
            })
            .collect();
        let out = Layout::contiguous(&dropped(&l, &axes)).unwrap();
        let groups = walk(&l, &axes);
        for (which, all) in [("all", true), ("any", false)] {
            let mut got = vec![Bool(7); out.numel()];
            if all {
                reduce_cpu(All, (&mut got, &out), (&buf, &l), &axes).unwrap();
            } else {
                reduce_cpu(Any, (&mut got, &out), (&buf, &l), &axes).unwrap();
            }
            let want: Vec<Bool> = groups
                .iter()
                .map(|g| {
                    let mut t = g.iter().map(|&o| buf[o].truth());
                    Bool(if all { t.all(|v| v) } else { t.any(|v| v) } as u8)
                })
                .collect();
            assert_eq!(got, want, "{which} {} {name}", T::NAME);
            count += got.len();
            // How often each answer occurred, per op.
            for b in &want {
                seen[all as usize][(b.0 != 0) as usize] += 1;
            }
        }
    }
    count
}

#[test]
fn all_and_any_read_non_zero_as_true() {
    let mut rng = Rng(0x7a11);
    let mut count = 0;
    let mut seen = [[0; 2]; 2];
    count += truth_for_type::<Bool>(&mut rng, &mut seen);
    count += truth_for_type::<f32>(&mut rng, &mut seen);
    count += truth_for_type::<bf16>(&mut rng, &mut seen);
    count += truth_for_type::<f64>(&mut rng, &mut seen);
    count += truth_for_type::<i64>(&mut rng, &mut seen);
    count += truth_for_type::<u8>(&mut rng, &mut seen);
    assert!(count > 5_000, "{count} outputs checked");
    // Both answers of each op occurred many times.
    assert!(seen.iter().flatten().all(|&n| n > 50), "{seen:?}");
    let l = Layout::contiguous(&[3]).unwrap();
    let scalar = Layout::contiguous(&[]).unwrap();
    let all = |x: &[f32]| {
        let mut got = [Bool(7)];
        reduce_cpu(All, (&mut got, &scalar), (x, &l), &[0]).unwrap();
        got[0]
    };
    assert_eq!(all(&[1.0, f32::NAN, -2.0]), Bool::TRUE);
    assert_eq!(all(&[1.0, -0.0, -2.0]), Bool::FALSE);
    // Reductions of nothing: all is true, any is false.
    let empty = Layout::new(&[2, 0], &[1, 1], 0).unwrap();
    let two = Layout::contiguous(&[2]).unwrap();
    let mut got = [Bool(7); 2];
    reduce_cpu(All, (&mut got, &two), (&[] as &[f32], &empty), &[1]).unwrap();
    assert_eq!(got, [Bool::TRUE; 2]);
    reduce_cpu(Any, (&mut got, &two), (&[] as &[f32], &empty), &[1]).unwrap();
    assert_eq!(got, [Bool::FALSE; 2]);
}

/// `reduce(map(a, b))` in one pass against `reduce` over `map(a, b)` materialised by the
/// CPU apply (both rounded to `T` per element, then the same order): bit for bit.
fn map_for_type<T: El + crate::common::TestElem>(rng: &mut Rng) -> usize
where
    MapReduce<SumSq, Sub>: strided_apply::gpu_kernels::reduce::Source<T, 2, Item = T, R = SumSq>,
    MapReduce<Sum, Mul>: strided_apply::gpu_kernels::reduce::Source<T, 2, Item = T, R = Sum>,
    SumSq: Reduce<T, Out = T>,
    Sum: Reduce<T, Out = T>,
    Sub: strided_apply::Kernels3<T, T, T>,
    Mul: strided_apply::Kernels3<T, T, T>,
{
    let c = |s: &[usize]| Layout::contiguous(s).unwrap();
    let mut count = 0;
    // (name, a's buffer, a, b's buffer, b, axes): a second input contiguous, broadcast along
    // the reduced or the kept axis, transposed.
    type Case = (&'static str, usize, Layout, usize, Layout, Vec<usize>);
    let cases: Vec<Case> = vec![
        (
            "same",
            64 * 500,
            c(&[64, 500]),
            64 * 500,
            c(&[64, 500]),
            vec![1],
        ),
        ("b row", 64 * 500, c(&[64, 500]), 500, c(&[1, 500]), vec![1]),
        (
            "b column",
            64 * 500,
            c(&[64, 500]),
            64,
            c(&[64, 1]),
            vec![0],
        ),
        (
            "b transposed",
            64 * 500,
            c(&[64, 500]),
            500 * 64,
            c(&[500, 64]).transpose(0, 1).unwrap(),
            vec![0, 1],
        ),
        (
            "two groups",
            (1 << 17) + 9,
            c(&[(1 << 17) + 9]),
            (1 << 17) + 9,
            c(&[(1 << 17) + 9]),
            vec![0],
        ),
    ];
    for (name, na, la, nb, lb, axes) in cases {
        let a: Vec<T> = (0..na).map(|_| T::random(rng)).collect();
        let b: Vec<T> = (0..nb).map(|_| T::random(rng)).collect();
        let shape = strided_apply::layout::broadcast_shapes(la.shape(), lb.shape()).unwrap();
        let (ba, bb) = (
            la.broadcast_to(&shape).unwrap(),
            lb.broadcast_to(&shape).unwrap(),
        );
        let full = c(&shape);
        let out = c(&dropped(&full, &axes));
        for (which, sq) in [("sqdiff", true), ("dot", false)] {
            let mut mapped = vec![T::poison(); full.numel()];
            let mut want = vec![T::poison(); out.numel()];
            let mut got = vec![T::poison(); out.numel()];
            if sq {
                strided_apply::cpu::apply3(Sub, (&mut mapped, &full), (&a, &ba), (&b, &bb))
                    .unwrap();
                reduce_cpu(SumSq, (&mut want, &out), (&mapped, &full), &axes).unwrap();
                let op = MapReduce {
                    reduce: SumSq,
                    map: Sub,
                };
                map_reduce_cpu(op, (&mut got, &out), ((&a, &la), (&b, &lb)), &axes).unwrap();
            } else {
                strided_apply::cpu::apply3(Mul, (&mut mapped, &full), (&a, &ba), (&b, &bb))
                    .unwrap();
                reduce_cpu(Sum, (&mut want, &out), (&mapped, &full), &axes).unwrap();
                let op = MapReduce {
                    reduce: Sum,
                    map: Mul,
                };
                map_reduce_cpu(op, (&mut got, &out), ((&a, &la), (&b, &lb)), &axes).unwrap();
            }
            let bits = |v: &[T]| format!("{v:?}");
            assert_eq!(bits(&got), bits(&want), "{which} {} {name}", T::NAME);
            count += got.len();
        }
    }
    count
}

#[test]
fn map_reduce_equals_the_reduction_of_the_applied_map() {
    let mut rng = Rng(0x5d1f);
    let mut count = 0;
    count += map_for_type::<f32>(&mut rng);
    count += map_for_type::<f64>(&mut rng);
    count += map_for_type::<f16>(&mut rng);
    count += map_for_type::<bf16>(&mut rng);
    assert!(count > 1000, "{count} outputs checked");
    // Spelled out: (1-1)² + (2-0)² + (3-1)² = 8, 1·1 + 2·0 + 3·1 = 4.
    let l = Layout::contiguous(&[3]).unwrap();
    let scalar = Layout::contiguous(&[]).unwrap();
    let (a, b) = ([1.0f32, 2.0, 3.0], [1.0f32, 0.0, 1.0]);
    let mut got = [0.0f32];
    let sqdiff = MapReduce {
        reduce: SumSq,
        map: Sub,
    };
    map_reduce_cpu(sqdiff, (&mut got, &scalar), ((&a, &l), (&b, &l)), &[0]).unwrap();
    assert_eq!(got, [8.0]);
    let dot = MapReduce {
        reduce: Sum,
        map: Mul,
    };
    map_reduce_cpu(dot, (&mut got, &scalar), ((&a, &l), (&b, &l)), &[0]).unwrap();
    assert_eq!(got, [4.0]);
}

#[test]
fn bad_input_gives_typed_errors_and_leaves_the_output() {
    let l0 = Layout::new(&[3, 0], &[1, 1], 0).unwrap();
    let out3 = Layout::contiguous(&[3]).unwrap();
    let mut got = [-5i64; 3];
    let r = reduce_cpu(Argmax, (&mut got, &out3), (&[] as &[f32], &l0), &[1]);
    assert!(
        matches!(r, Err(Error::EmptyReduction { operand: "input" })),
        "{r:?}"
    );
    assert_eq!(got, [-5; 3]);
    // Inputs that do not broadcast: the error names `b`.
    let (a, b) = ([1.0f32; 6], [1.0f32; 4]);
    let (la, lb) = (
        Layout::contiguous(&[2, 3]).unwrap(),
        Layout::contiguous(&[2, 2]).unwrap(),
    );
    let mut out = [7.0f32; 2];
    let sqdiff = MapReduce {
        reduce: SumSq,
        map: Sub,
    };
    let r = map_reduce_cpu(
        sqdiff,
        (&mut out, &Layout::contiguous(&[2]).unwrap()),
        ((&a, &la), (&b, &lb)),
        &[1],
    );
    assert!(
        matches!(r, Err(Error::Broadcast { operand: "b", .. })),
        "{r:?}"
    );
    assert_eq!(out, [7.0; 2]);
    // An axis out of range.
    let r = map_reduce_cpu(
        sqdiff,
        (&mut out, &Layout::contiguous(&[2]).unwrap()),
        ((&a, &la), (&a, &la)),
        &[2],
    );
    assert!(
        matches!(
            r,
            Err(Error::InvalidView {
                operand: "axes",
                ..
            })
        ),
        "{r:?}"
    );
}

/// Run-time dispatch: the output's element type is the family's (i64 for argmax, bool for
/// all), the input count is checked, and a float output for argmax is refused naming
/// `out`.
#[test]
fn dispatch_checks_the_output_type_and_the_input_count() {
    use strided_apply::raw::RawTensor;
    use strided_apply::reduce::DynReduce;
    use strided_apply::ElemType;
    let argmax = DynReduce::new("argmax", ElemType::F32).unwrap();
    assert_eq!(argmax.instance().out_elem, ElemType::I64);
    assert_eq!(argmax.instance().inputs, 1);
    let sqdiff = DynReduce::new("sqdiff", ElemType::BF16).unwrap();
    assert_eq!(sqdiff.instance().inputs, 2);
    let x = [3.0f32, 9.0, 1.0, 9.0];
    let (shape, strides) = ([4usize], [1isize]);
    let input = RawTensor {
        ptr: x.as_ptr() as u64,
        elem: ElemType::F32,
        shape: &shape,
        strides: &strides,
    };
    let mut idx = [-1i64];
    let out = RawTensor {
        ptr: idx.as_mut_ptr() as u64,
        elem: ElemType::I64,
        shape: &[],
        strides: &[],
    };
    // SAFETY: host addresses of live arrays matching their shapes and types.
    unsafe { argmax.run_cpu_raw(out, &[input], &[0]) }.unwrap();
    assert_eq!(idx, [1]);
    let mut f = [-1.0f32];
    let wrong = RawTensor {
        ptr: f.as_mut_ptr() as u64,
        elem: ElemType::F32,
        shape: &[],
        strides: &[],
    };
    // SAFETY: as above.
    let r = unsafe { argmax.run_cpu_raw(wrong, &[input], &[0]) };
    assert!(
        matches!(r, Err(Error::TypeMismatch { operand: "out", .. })),
        "{r:?}"
    );
    assert_eq!(f, [-1.0]);
    let out = RawTensor {
        ptr: idx.as_mut_ptr() as u64,
        elem: ElemType::I64,
        shape: &[],
        strides: &[],
    };
    // SAFETY: as above.
    let r = unsafe { argmax.run_cpu_raw(out, &[input, input], &[0]) };
    assert!(
        matches!(
            r,
            Err(Error::InvalidView {
                operand: "inputs",
                ..
            })
        ),
        "{r:?}"
    );
}
