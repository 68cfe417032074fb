//! Reductions of expressions: one pass against the two steps it fuses, and reductions of
//! nothing and their errors.

use super::*;

/// An input of a reduction test: its elements, type and layout over them.
struct In {
    buf: Buf,
    elem: ElemType,
    layout: Layout,
}

impl In {
    fn random(r: &mut Rng, elem: ElemType, layout: Layout) -> In {
        let len = layout
            .span("input")
            .unwrap()
            .map_or(0, |s| s.max as usize + 1)
            + 1;
        In {
            buf: random_buf(r, elem, len),
            elem,
            layout,
        }
    }
    fn host(&self) -> HostTensor<'_> {
        HostTensor::new(self.buf.bytes(), self.elem, &self.layout)
    }
}

/// A fused case: the expression, its inputs (name, type, layout), the broadcast shape and
/// an output type of its own.
type Fused = (
    &'static str,
    Vec<(&'static str, ElemType, Layout)>,
    Vec<usize>,
    Option<ElemType>,
);

/// The reduced shape of `shape` over `axes`.
fn reduced(shape: &[usize], axes: &[usize], keepdim: bool) -> Vec<usize> {
    (0..shape.len())
        .filter_map(|a| match (axes.contains(&a), keepdim) {
            (false, _) => Some(shape[a]),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect()
}

/// Equal bits, or NaN on both sides: which NaN payload an operation on two NaNs keeps
/// depends on how the compiler ordered its operands (and a GPU gives its own canonical
/// NaN), so the reductions compare NaN as NaN.
fn same_bits(e: ElemType, got: &[u64], want: &[u64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            g == w || both_nan(e, g, w),
            "{what}: output {i}: {} against {}",
            show(e, g),
            show(e, w)
        );
    }
}

/// The one-pass reduction of `f` over `ins` (broadcast to `shape`) on the CPU twin, into
/// a poisoned output.
fn one_pass(
    f: &Compiled,
    op: ReduceOp,
    ins: &[In],
    shape: &[usize],
    axes: &[usize],
    keepdim: bool,
) -> Result<Vec<u64>> {
    let lo = contiguous(&reduced(shape, axes, keepdim));
    let mut out = Buf::new(lo.numel() * f.out().size(), 0x5a);
    let hosts: Vec<HostTensor<'_>> = ins.iter().map(In::host).collect();
    f.reduce_cpu(
        op,
        HostTensorMut::new(out.bytes_mut(), f.out(), &lo),
        &hosts,
        &[],
        axes,
    )?;
    Ok(out.elems(f.out()))
}

/// The same reduction in two steps: the expression's values into a temporary (an
/// expression run), then the library's reduction of it (run-time dispatch's twin).
#[cfg(feature = "dispatch")]
fn two_steps(f: &Compiled, op: ReduceOp, ins: &[In], shape: &[usize], axes: &[usize]) -> Vec<u64> {
    let e = f.out();
    let lt = contiguous(shape);
    let mut tmp = Buf::new(lt.numel() * e.size(), 0);
    let hosts: Vec<HostTensor<'_>> = ins.iter().map(In::host).collect();
    f.run_cpu(HostTensorMut::new(tmp.bytes_mut(), e, &lt), &hosts, &[])
        .unwrap();
    let lo = contiguous(&reduced(shape, axes, false));
    let mut out = Buf::new(lo.numel() * e.size(), 0xa5);
    fn raw(ptr: u64, e: ElemType, l: &Layout) -> RawTensor<'_> {
        RawTensor {
            ptr,
            elem: e,
            shape: l.shape(),
            strides: l.strides(),
        }
    }
    // SAFETY: both buffers hold the layouts' elements; the output is borrowed uniquely.
    unsafe {
        crate::reduce::DynReduce::new(op.name(), e)
            .unwrap()
            .run_cpu_raw(
                raw(out.bytes_mut().as_mut_ptr() as u64, e, &lo),
                &[raw(tmp.bytes().as_ptr() as u64, e, &lt)],
                axes,
            )
            .unwrap()
    };
    out.elems(e)
}

#[cfg(feature = "dispatch")]
#[test]
fn expression_reductions_give_the_bits_of_the_two_steps_they_fuse() {
    let mut r = Rng::new(41);
    let mut cases = 0;
    // (expression, inputs' types and layouts, broadcast shape, axes lists)
    let permuted = Layout::contiguous(&[300, 7])
        .unwrap()
        .transpose(0, 1)
        .unwrap();
    let reversed = contiguous(&[7, 300]).flip(1).unwrap();
    for e in [F32, F64, F16, BF16, I32, I64, U32, U8] {
        for layout in [contiguous(&[7, 300]), permuted.clone(), reversed.clone()] {
            let f = compile("a", &tensors(&[("a", e)])).unwrap();
            let ins = [In::random(&mut r, e, layout)];
            for op in ReduceOp::ALL {
                if op == ReduceOp::Mean && !matches!(e, F32 | F64 | F16 | BF16) {
                    continue;
                }
                for axes in [&[1][..], &[0], &[0, 1], &[1, 0]] {
                    let got = one_pass(&f, op, &ins, &[7, 300], axes, false).unwrap();
                    let want = two_steps(&f, op, &ins, &[7, 300], axes);
                    same_bits(e, &got, &want, &format!("{op:?} of {e:?} over {axes:?}"));
                    cases += 1;
                }
            }
        }
    }
    // Fused expressions over broadcast inputs, promotion, an output type of one's own,
    // and a reduction long enough for several groups.
    let row = |n: usize| contiguous(&[n]);
    let col = |n: usize| contiguous(&[n, 1]);
    let fused: Vec<Fused> = vec![
        (
            "(a - b) * (a - b)",
            vec![
                ("a", F32, contiguous(&[5, 1000])),
                ("b", F32, row(1000).flip(0).unwrap()),
            ],
            vec![5, 1000],
            None,
        ),
        (
            "sin(a*b) + sqrt(c) + cos(a)/log(cos(b)+2)",
            vec![
                ("a", F32, row(64)),
                ("b", F32, col(32)),
                ("c", F32, contiguous(&[32, 64])),
            ],
            vec![32, 64],
            None,
        ),
        (
            "a * b + 1",
            vec![("a", I32, contiguous(&[3, 400])), ("b", F32, row(400))],
            vec![3, 400],
            None,
        ),
        (
            "a * b",
            vec![("a", F32, contiguous(&[4, 333])), ("b", F32, col(4))],
            vec![4, 333],
            Some(F16),
        ),
        (
            "a * 0.5 + b",
            vec![("a", BF16, row(300_001)), ("b", F32, row(300_001))],
            vec![300_001],
            None,
        ),
        (
            "a * a",
            vec![("a", F64, contiguous(&[2, 200_000]))],
            vec![2, 200_000],
            None,
        ),
    ];
    for (text, args, shape, out) in fused {
        let names: Vec<(&str, Arg)> = args.iter().map(|(n, e, _)| (*n, Arg::Tensor(*e))).collect();
        let f = parse(text).compile(&names, out).unwrap();
        let ins: Vec<In> = args
            .into_iter()
            .map(|(_, e, l)| In::random(&mut r, e, l))
            .collect();
        let rank = shape.len();
        let mut axes_list: Vec<Vec<usize>> = (0..rank).map(|a| vec![a]).collect();
        axes_list.push((0..rank).collect());
        for axes in &axes_list {
            for op in ReduceOp::ALL {
                if op == ReduceOp::Mean && !matches!(f.out(), F32 | F64 | F16 | BF16) {
                    continue;
                }
                let got = one_pass(&f, op, &ins, &shape, axes, false).unwrap();
                let want = two_steps(&f, op, &ins, &shape, axes);
                same_bits(
                    f.out(),
                    &got,
                    &want,
                    &format!("{op:?} of `{text}` over {axes:?}"),
                );
                // The kept axes as size 1: the same values.
                assert_eq!(one_pass(&f, op, &ins, &shape, axes, true).unwrap(), got);
                cases += 1;
            }
        }
    }
    assert!(cases > 200, "{cases} cases");
}

#[test]
fn expression_reductions_of_nothing_and_their_errors() {
    let mut r = Rng::new(42);
    let f = compile("a * 2", &tensors(&[("a", F32)])).unwrap();
    let empty = [In::random(&mut r, F32, contiguous(&[3, 0]))];
    let sum = one_pass(&f, ReduceOp::Sum, &empty, &[3, 0], &[1], false).unwrap();
    assert_eq!(sum, vec![0; 3]);
    let prod = one_pass(&f, ReduceOp::Prod, &empty, &[3, 0], &[1], false).unwrap();
    assert_eq!(prod, vec![1.0f32.to_bits() as u64; 3]);
    let mean = one_pass(&f, ReduceOp::Mean, &empty, &[3, 0], &[1], false).unwrap();
    assert!(
        mean.iter().all(|&b| f32::from_bits(b as u32).is_nan()),
        "{mean:?}"
    );
    let err = one_pass(&f, ReduceOp::Amax, &empty, &[3, 0], &[1], false).unwrap_err();
    assert!(matches!(err, Error::EmptyReduction { .. }), "{err}");
    // An output without elements: nothing to do.
    assert_eq!(
        one_pass(&f, ReduceOp::Amax, &empty, &[3, 0], &[0], false).unwrap(),
        Vec::<u64>::new()
    );

    let ins = [In::random(&mut r, F32, contiguous(&[4, 5]))];
    let refuse = |f: &Compiled, op, ins: &[In], out_shape: &[usize], axes: &[usize]| {
        let lo = contiguous(out_shape);
        let mut out = Buf::new(lo.numel() * f.out().size(), 0x77);
        let hosts: Vec<HostTensor<'_>> = ins.iter().map(In::host).collect();
        let e = f
            .reduce_cpu(
                op,
                HostTensorMut::new(out.bytes_mut(), f.out(), &lo),
                &hosts,
                &[],
                axes,
            )
            .unwrap_err();
        assert!(
            out.bytes().iter().all(|&b| b == 0x77),
            "{e}: the output was written"
        );
        e
    };
    let e = refuse(&f, ReduceOp::Sum, &ins, &[5], &[1]);
    assert!(matches!(e, Error::ReducedShape { .. }), "{e}");
    let e = refuse(&f, ReduceOp::Sum, &ins, &[4], &[2]);
    assert!(e.to_string().contains("out of range"), "{e}");
    let e = refuse(&f, ReduceOp::Sum, &ins, &[], &[0, 0]);
    assert!(e.to_string().contains("named twice"), "{e}");
    let ints = compile("a + 1", &tensors(&[("a", I32)])).unwrap();
    let int_in = [In::random(&mut r, I32, contiguous(&[4, 5]))];
    let e = refuse(&ints, ReduceOp::Mean, &int_in, &[4], &[1]);
    assert!(
        matches!(e, Error::ExprType { .. }) && e.to_string().contains("mean"),
        "{e}"
    );
    let bools = compile("a > 0", &tensors(&[("a", F32)])).unwrap();
    let e = refuse(&bools, ReduceOp::Sum, &ins, &[4], &[1]);
    assert!(
        matches!(e, Error::ExprType { .. }) && e.to_string().contains("bool"),
        "{e}"
    );
    let two = compile("a + b", &tensors(&[("a", F32), ("b", F32)])).unwrap();
    let e = refuse(&two, ReduceOp::Sum, &ins, &[4], &[1]);
    assert!(matches!(e, Error::ExprBind { .. }), "{e}");
    // The output inside an input's memory.
    let mut buf = ins[0].buf.clone();
    let lo = contiguous(&[4]);
    let la = contiguous(&[4, 5]);
    let ptr = buf.bytes_mut().as_mut_ptr() as u64;
    let raw = |shape: &'static [usize], l: &Layout| RawTensor {
        ptr,
        elem: F32,
        shape,
        strides: if shape.len() == 1 { &[1] } else { l.strides() }
            .to_vec()
            .leak(),
    };
    // SAFETY: both views lie in `buf`, which lives through the call.
    let e = unsafe {
        f.reduce_cpu_raw(
            ReduceOp::Sum,
            raw(&[4], &lo),
            &[raw(&[4, 5], &la)],
            &[],
            &[1],
        )
    }
    .unwrap_err();
    assert!(matches!(e, Error::ReduceOverlap { .. }), "{e}");
}
