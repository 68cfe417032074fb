//! Normalisation programs on the CPU twin: parsing, the builder, checks, and values
//! against an f64 reference.

use super::Norm;
use crate::error::Error;
use crate::expr::{Arg, Expr, HostTensor, HostTensorMut, ReduceOp, Stage};
use crate::layout::Layout;
use gpu_kernels::elem::ElemType::{self, F32, F64};

fn run(
    text: &str,
    elem: ElemType,
    shape: &[usize],
    data: &[f64],
    axes: &[usize],
    out_shape: &[usize],
) -> crate::error::Result<Vec<f64>> {
    let f = Norm::parse(text)?.compile(&[("a", Arg::Tensor(elem))], None)?;
    let l = Layout::contiguous(shape)?;
    let lo = Layout::contiguous(out_shape)?;
    let n_out: usize = out_shape.iter().product();
    match elem {
        F64 => {
            let mut out = vec![0f64; n_out];
            f.run_cpu(
                HostTensorMut::new(bytemuck::cast_slice_mut(&mut out), F64, &lo),
                &[HostTensor::new(bytemuck::cast_slice(data), F64, &l)],
                &[],
                axes,
            )?;
            Ok(out)
        }
        _ => {
            let x: Vec<f32> = data.iter().map(|&v| v as f32).collect();
            let mut out = vec![0f32; n_out];
            f.run_cpu(
                HostTensorMut::new(bytemuck::cast_slice_mut(&mut out), F32, &lo),
                &[HostTensor::new(bytemuck::cast_slice(&x), F32, &l)],
                &[],
                axes,
            )?;
            Ok(out.iter().map(|&v| v as f64).collect())
        }
    }
}

const SOFTMAX: &str = "m = amax(a); e = exp(a - m); e / sum(e)";

#[test]
fn softmax_matches_an_f64_reference_over_either_axis() {
    let data: Vec<f64> = (0..12)
        .map(|i| ((i * 7) % 11) as f64 * 0.37 - 1.5)
        .collect();
    for axis in [0usize, 1] {
        let got = run(SOFTMAX, F64, &[3, 4], &data, &[axis], &[3, 4]).unwrap();
        for i in 0..3 {
            for j in 0..4 {
                let idx = |k: usize| if axis == 1 { i * 4 + k } else { k * 4 + j };
                let n = if axis == 1 { 4 } else { 3 };
                let m = (0..n)
                    .map(|k| data[idx(k)])
                    .fold(f64::NEG_INFINITY, f64::max);
                let s: f64 = (0..n).map(|k| (data[idx(k)] - m).exp()).sum();
                let me = if axis == 1 { j } else { i };
                let want = (data[idx(me)] - m).exp() / s;
                assert!(
                    (got[i * 4 + j] - want).abs() < 1e-14,
                    "axis {axis} ({i},{j}): {} vs {want}",
                    got[i * 4 + j]
                );
            }
        }
    }
}

#[test]
fn logsumexp_is_one_value_a_row_kept_or_dropped() {
    let data: Vec<f64> = (0..8).map(|i| i as f64 * 0.5).collect();
    let lse = "m = amax(a); m + log(sum(exp(a - m)))";
    for out_shape in [&[2usize, 1][..], &[2]] {
        let got = run(lse, F64, &[2, 4], &data, &[1], out_shape).unwrap();
        for r in 0..2 {
            let want = (0..4).map(|k| data[r * 4 + k].exp()).sum::<f64>().ln();
            assert!((got[r] - want).abs() < 1e-12);
        }
    }
    // The input's shape is not the reduced one.
    assert!(matches!(
        run(lse, F64, &[2, 4], &data, &[1], &[2, 4]),
        Err(Error::ReducedShape { .. })
    ));
}

#[test]
fn rms_and_layer_norm_match_the_reference() {
    let data: Vec<f64> = (0..10).map(|i| (i as f64 - 4.0) * 0.25).collect();
    let rms = run(
        "a * rsqrt(mean(a * a) + 1e-6)",
        F64,
        &[2, 5],
        &data,
        &[1],
        &[2, 5],
    )
    .unwrap();
    let ln = run(
        "mu = mean(a); d = a - mu; d * rsqrt(mean(d * d) + 1e-5)",
        F64,
        &[2, 5],
        &data,
        &[1],
        &[2, 5],
    )
    .unwrap();
    for r in 0..2 {
        let row = &data[r * 5..r * 5 + 5];
        let ms = row.iter().map(|x| x * x).sum::<f64>() / 5.0;
        let mu = row.iter().sum::<f64>() / 5.0;
        let var = row.iter().map(|x| (x - mu) * (x - mu)).sum::<f64>() / 5.0;
        for k in 0..5 {
            assert!((rms[r * 5 + k] - row[k] / (ms + 1e-6).sqrt()).abs() < 1e-12);
            assert!((ln[r * 5 + k] - (row[k] - mu) / (var + 1e-5).sqrt()).abs() < 1e-12);
        }
    }
}

#[test]
fn the_builder_and_the_parser_give_one_program() {
    let a = Expr::var("a");
    let e = (a.clone() - Norm::stage(0)).exp();
    let built = Norm::new(
        vec![
            Stage {
                op: ReduceOp::Amax,
                value: a,
            },
            Stage {
                op: ReduceOp::Sum,
                value: e.clone(),
            },
        ],
        e / Norm::stage(1),
    )
    .unwrap();
    assert_eq!(built, Norm::parse(SOFTMAX).unwrap());
    // A stage may name only earlier stages.
    let bad = Norm::new(
        vec![Stage {
            op: ReduceOp::Sum,
            value: Norm::stage(0),
        }],
        Norm::stage(0),
    );
    assert!(matches!(bad, Err(Error::ExprType { .. })));
}

#[test]
fn bf16_softmax_is_bf16_and_computes_in_f32() {
    let f = Norm::parse(SOFTMAX)
        .unwrap()
        .compile(&[("a", Arg::Tensor(ElemType::BF16))], None)
        .unwrap();
    assert_eq!(f.out(), ElemType::BF16);
    let (stages, result) = f.parts();
    assert_eq!(stages.len(), 2);
    assert!(stages.iter().all(|(_, c)| c.out() == F32));
    assert_eq!(result.out(), ElemType::BF16);
}

#[test]
fn bad_programs_and_calls_are_typed_errors() {
    // Reductions are values only in normalisation programs.
    assert!(matches!(
        Expr::parse("a / sum(a)"),
        Err(Error::ExprSyntax { .. })
    ));
    assert!(matches!(
        Norm::parse("sum(a, b)"),
        Err(Error::ExprSyntax { .. })
    ));
    assert!(matches!(
        Norm::parse("exp = a; exp"),
        Err(Error::ExprSyntax { .. })
    ));
    assert!(matches!(
        Norm::parse("m = amax(a) m"),
        Err(Error::ExprSyntax { .. })
    ));
    let too_many = (0..=super::MAX_STAGES)
        .map(|_| "sum(a)")
        .collect::<Vec<_>>()
        .join(" + ");
    assert!(matches!(
        Norm::parse(&too_many),
        Err(Error::ExprLimit { .. })
    ));
    // Axes out of range, named twice, none.
    let data = vec![0.0; 6];
    for axes in [&[2usize][..], &[1, 1], &[]] {
        let e = run(SOFTMAX, F64, &[2, 3], &data, axes, &[2, 3]);
        assert!(
            matches!(
                e,
                Err(Error::InvalidView {
                    operand: "axes",
                    ..
                })
            ),
            "{axes:?}: {e:?}"
        );
    }
    // The output's shape is not the inputs'.
    assert!(matches!(
        run(SOFTMAX, F64, &[2, 3], &data, &[1], &[2, 1]),
        Err(Error::Broadcast { .. })
    ));
    // A name the program does not have.
    let e = Norm::parse(SOFTMAX)
        .unwrap()
        .compile(&[("a", Arg::Tensor(F32)), ("b", Arg::Tensor(F32))], None);
    assert!(matches!(e, Err(Error::ExprBind { .. })));
    // `mean` of integers.
    let e = Norm::parse("a - mean(a)")
        .unwrap()
        .compile(&[("a", Arg::Tensor(ElemType::I32))], None);
    assert!(matches!(e, Err(Error::ExprType { .. })), "{e:?}");
}

/// A stage that reads only inputs broadcast along the normalised axis (a row-constant `t`,
/// a lower-rank `w`) folds the row's every element, as the fused kernel does: `sum(t)` is
/// `n * t`, `sum(w)` the sum of the whole `w` row.
#[test]
fn stages_of_broadcast_inputs_fold_the_whole_row() {
    let f = Norm::parse("m = amax(a); st = sum(t); sw = sum(w); st + sw + 0 * m")
        .unwrap()
        .compile(
            &[
                ("a", Arg::Tensor(F64)),
                ("t", Arg::Tensor(F64)),
                ("w", Arg::Tensor(F64)),
            ],
            None,
        )
        .unwrap();
    let (la, lt, lw) = (
        Layout::contiguous(&[2, 3]).unwrap(),
        Layout::contiguous(&[2, 1]).unwrap(),
        Layout::contiguous(&[3]).unwrap(),
    );
    let lo = Layout::contiguous(&[2]).unwrap();
    let (a, t, w) = ([0f64; 6], [1f64, 10.0], [1f64, 2.0, 4.0]);
    let mut out = [0f64; 2];
    f.run_cpu(
        HostTensorMut::new(bytemuck::cast_slice_mut(&mut out), F64, &lo),
        &[
            HostTensor::new(bytemuck::cast_slice(&a), F64, &la),
            HostTensor::new(bytemuck::cast_slice(&t), F64, &lt),
            HostTensor::new(bytemuck::cast_slice(&w), F64, &lw),
        ],
        &[],
        &[1],
    )
    .unwrap();
    assert_eq!(out, [3.0 + 7.0, 30.0 + 7.0]);
}

/// The row kernel's plan over row lengths 1 to 262 144, `f32`, `bf16` and `f64`, a
/// program of one row input and one of a row input with a weight and a bias row: the
/// shape's invariants (the slots it spans hold the used ones; threads × adjacent × sets
/// is the span; whole warps a block, at most 1024 threads; vectors only over whole
/// vectors; the read-once form within its register budget), and the shapes the design
/// picks: a warp a row for rows of 256, two adjacent slots for 16-bit rows, a weight row
/// kept out of the registers.
#[test]
fn row_kernel_plans_keep_their_invariants() {
    use super::plan::Shapes;
    use crate::expr::RawTensor;
    use gpu_kernels::elem::ElemType::BF16;
    use gpu_kernels::reduce::{group_len, groups_used, SLOTS};
    let lens = [
        1usize, 2, 3, 7, 8, 64, 100, 255, 256, 257, 1000, 1024, 1025, 2048, 4096, 5003, 16384,
        16385, 65536, 131_072, 140_000, 262_144,
    ];
    let progs: [(&str, &[&str]); 2] = [
        ("m = amax(a); e = exp(a - m); e / sum(e)", &["a"]),
        (
            "mu = mean(a); d = a - mu; d * rsqrt(mean(d * d) + 1e-5) * w + b",
            &["a", "w", "b"],
        ),
    ];
    let rows = 3usize;
    let mut checked = 0;
    for (text, names) in progs {
        for elem in [F32, BF16, F64] {
            let args: Vec<(&str, Arg)> = names.iter().map(|n| (*n, Arg::Tensor(elem))).collect();
            let f = Norm::parse(text).unwrap().compile(&args, None).unwrap();
            let w: u32 = if elem == F64 { 2 } else { 4 };
            for &n in &lens {
                let full = [rows, n];
                let row_strides = [n as isize, 1];
                let (wshape, wstrides) = ([n], [1isize]);
                let mut ops = vec![RawTensor {
                    ptr: 0x10000,
                    elem,
                    shape: &full,
                    strides: &row_strides,
                }];
                for name in names {
                    ops.push(if *name == "a" {
                        RawTensor {
                            ptr: 0x20000,
                            elem,
                            shape: &full,
                            strides: &row_strides,
                        }
                    } else {
                        RawTensor {
                            ptr: 0x30000,
                            elem,
                            shape: &wshape,
                            strides: &wstrides,
                        }
                    });
                }
                let shapes: Vec<&[usize]> = ops[1..].iter().map(|t| t.shape).collect();
                let sh = Shapes::new(&shapes, &full, &[1], true).unwrap();
                let types = vec![elem; ops.len()];
                let what = format!("{text} ({elem:?}), n = {n}");
                let s = f
                    .row_plan(&sh, &ops, &types)
                    .expect("the row kernel takes it")
                    .shape;
                let (span, t, k) = (s.span as u32, s.threads as u32, s.adjacent as u32);
                assert!(
                    span.is_power_of_two() && t.is_power_of_two(),
                    "{what}: {s:?}"
                );
                assert!(
                    [1, 2, 4].contains(&k) && span % (t * k) == 0,
                    "{what}: {s:?}"
                );
                let sets = span / (t * k);
                let n32 = n as u32;
                if groups_used(n32, w) == 1 {
                    assert!(span >= n32.div_ceil(w).min(SLOTS), "{what}: {s:?}");
                } else {
                    assert_eq!(span, SLOTS, "{what}");
                }
                let block = s.block();
                assert!(
                    block.is_multiple_of(32) && block <= 1024,
                    "{what}: block {block}"
                );
                for op in 0..ops.len() {
                    if s.unit >> op & 1 != 0 {
                        assert_eq!(n32 % (k * w), 0, "{what}: operand {op} read as vectors");
                    }
                }
                if s.cached != 0 {
                    let rounds = group_len(n32, w) / (SLOTS * w);
                    assert_eq!(s.cached as u32, rounds, "{what}");
                    assert!(rounds * sets * k * w <= 64, "{what}: {s:?}");
                } else {
                    assert_eq!((sets, t * k), (1, SLOTS), "{what}: {s:?}");
                }
                // The shapes the design picks.
                if n == 256 && elem == F32 {
                    assert_eq!((t, s.rows_per_block()), (32, 8), "{what}: a warp a row");
                }
                if n == 4096 {
                    assert_eq!(
                        k,
                        if elem == BF16 { 2 } else { 1 },
                        "{what}: 16-byte vectors"
                    );
                }
                if n == 16384 && elem == F32 {
                    assert!(
                        s.cached != 0,
                        "{what}: the weight and bias rows stay out of the registers"
                    );
                    assert_eq!(
                        s.shared,
                        if names.len() == 3 { 0b1100 } else { 0 },
                        "{what}"
                    );
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 2 * 3 * lens.len());
}
