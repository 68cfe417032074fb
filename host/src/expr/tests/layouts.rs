//! Layouts: strided inputs and outputs give the bits of contiguous copies.

use super::*;

/// A random view of logical shape `shape` over a fresh buffer (`fill` for every element,
/// or random values): sliced with steps ±1 and ±2 from random starts, transposed, or (for
/// inputs) broadcast with zero strides.
fn random_view(
    r: &mut Rng,
    e: ElemType,
    shape: &[usize],
    broadcast: bool,
    fill: Option<u8>,
) -> (Buf, Layout) {
    if broadcast && shape.iter().any(|&n| n > 1) && r.chance(0.3) {
        // Zero strides: a view with size-1 axes (and maybe fewer axes) broadcast up.
        let lead = r.below(shape.len().min(2) + 1).min(shape.len() - 1);
        let small: Vec<usize> = shape[lead..]
            .iter()
            .map(|&n| if r.chance(0.5) { 1 } else { n })
            .collect();
        let (b, l) = random_view(r, e, &small, false, fill);
        let l = l.broadcast_to(shape).unwrap();
        assert_eq!(l.shape(), shape);
        return (b, l);
    }
    let rank = shape.len();
    let swap = (rank >= 2 && r.chance(0.4)).then(|| {
        let i = r.below(rank);
        (i, (i + 1 + r.below(rank - 1)) % rank)
    });
    let mut m = shape.to_vec();
    if let Some((i, j)) = swap {
        m.swap(i, j);
    }
    let steps: Vec<isize> = m
        .iter()
        .map(|_| {
            if r.chance(0.5) {
                r.pick(&[2, -1, -2, 1])
            } else {
                1
            }
        })
        .collect();
    let storage: Vec<usize> = m
        .iter()
        .zip(&steps)
        .map(|(&n, &s)| {
            if s == 1 && r.chance(0.5) {
                n
            } else {
                n * s.unsigned_abs() + 1 + r.below(2)
            }
        })
        .collect();
    let mut l = contiguous(&storage);
    for d in 0..rank {
        let (n, k, size) = (m[d], steps[d].unsigned_abs(), storage[d]);
        if size == n {
            continue;
        }
        let (start, end) = if steps[d] > 0 {
            let s = r.below(size - n * k + 1);
            (s, s + n * k)
        } else {
            let s = n * k + r.below(size - n * k);
            (s, s - n * k)
        };
        l = l
            .slice(d, Some(start as isize), Some(end as isize), steps[d])
            .unwrap();
        assert_eq!(l.shape()[d], n, "slice {start}..{end} by {}", steps[d]);
    }
    if let Some((i, j)) = swap {
        l = l.transpose(i, j).unwrap();
    }
    assert_eq!(l.shape(), shape);
    let count: usize = storage.iter().product();
    let b = match fill {
        Some(f) => Buf::new(count * e.size(), f),
        None => random_buf(r, e, count),
    };
    (b, l)
}

#[test]
fn strided_layouts_give_the_bits_of_contiguous_copies() {
    let mut r = Rng::new(0x5eed_1a70);
    let (mut ran, mut refused, mut scalars_refused) = (0, 0, 0);
    let mut failures: Vec<String> = Vec::new();
    let trials = 1500;
    for trial in 0..trials {
        let all = ["a", "b", "c", "d"];
        let n_in = 1 + r.below(4);
        let g = Gen {
            names: &all[..n_in],
            scalar: r.chance(0.3),
        };
        let text = gen_num(&mut r, 4, &g);
        let e = parse(&text);
        let used: Vec<String> = e.names().iter().map(|s| s.to_string()).collect();
        let dtypes: Vec<ElemType> = used.iter().map(|_| r.pick(&ALL_TYPES)).collect();
        let scalar = if r.chance(0.5) {
            Scalar::F64(r.pick(&[0.5, -3.0, 1e10, 0.1, f64::NAN]))
        } else {
            Scalar::I64(r.pick(&[0, 1, 3, 100, -2]))
        };
        let args: Vec<(&str, Arg)> = used
            .iter()
            .zip(&dtypes)
            .map(|(n, &t)| {
                if n == "s" {
                    (n.as_str(), Arg::Scalar(kind_of(&scalar)))
                } else {
                    (n.as_str(), Arg::Tensor(t))
                }
            })
            .collect();
        let out = r.chance(0.3).then(|| r.pick(&ALL_TYPES));
        let c = match e.compile(&args, out) {
            Ok(c) => c,
            Err(Error::ExprType { .. } | Error::ExprLimit { .. }) => {
                refused += 1;
                continue;
            }
            Err(err) => panic!("`{text}` {args:?}: {err}"),
        };
        let sc: Vec<(&str, Scalar)> = if g.scalar && used.iter().any(|n| n == "s") {
            vec![("s", scalar)]
        } else {
            vec![]
        };
        if c.bind(&sc).is_err() {
            // An int scalar that does not fit the type it meets (e.g. -2 for u8).
            scalars_refused += 1;
            continue;
        }
        // Shapes: the output's, rank 1 to 3, an inner axis longer than the interpreter's
        // 16 lanes at times; each input the same or broadcastable (size-1 axes, fewer axes).
        let rank = 1 + r.below(3);
        let mut shape: Vec<usize> = (0..rank).map(|_| r.pick(&[1, 2, 3, 5])).collect();
        shape[rank - 1] = r.pick(&[1, 3, 7, 17, 37]);
        let ins: Vec<(ElemType, Buf, Layout)> = c
            .inputs()
            .iter()
            .map(|name| {
                let t = dtypes[used.iter().position(|n| n == name).unwrap()];
                let lead = r.below(rank);
                let own: Vec<usize> = shape[lead..]
                    .iter()
                    .map(|&n| if r.chance(0.2) { 1 } else { n })
                    .collect();
                let (b, l) = random_view(&mut r, t, &own, true, None);
                (t, b, l)
            })
            .collect();
        let ot = c.out();
        let (mut ob, ol) = random_view(&mut r, ot, &shape, false, Some(0xC3));
        let strided: Vec<HostTensor> = ins
            .iter()
            .map(|(t, b, l)| HostTensor::new(b.bytes(), *t, l))
            .collect();
        c.run_cpu(HostTensorMut::new(ob.bytes_mut(), ot, &ol), &strided, &sc)
            .unwrap_or_else(|err| panic!("`{text}`: {err}"));
        // Contiguous copies of the same logical inputs, broadcast to the output's shape.
        let cl = contiguous(&shape);
        let copies: Vec<(ElemType, Buf)> = ins
            .iter()
            .map(|(t, b, l)| (*t, Buf::of(*t, &gather(b, *t, l, &shape))))
            .collect();
        let dense: Vec<HostTensor> = copies
            .iter()
            .map(|(t, b)| HostTensor::new(b.bytes(), *t, &cl))
            .collect();
        let numel: usize = shape.iter().product();
        let mut want = Buf::new(numel * ot.size(), 0x3C);
        c.run_cpu(HostTensorMut::new(want.bytes_mut(), ot, &cl), &dense, &sc)
            .unwrap();
        ran += 1;
        let got = gather(&ob, ot, &ol, &shape);
        let want = want.elems(ot);
        // A NaN is a NaN whatever its payload (see `both_nan`).
        if let Some(i) = (0..numel).find(|&i| got[i] != want[i] && !both_nan(ot, got[i], want[i])) {
            let layouts: Vec<String> = ins
                .iter()
                .map(|(t, _, l)| format!("{t:?} {:?}/{:?}+{}", l.shape(), l.strides(), l.offset()))
                .collect();
            failures.push(format!(
                "trial {trial}: `{text}` out {ot:?} {shape:?} {:?}/{:?}, inputs {layouts:?}: \
                 element {i}: strided {}, contiguous {}",
                ol.strides(),
                ol.offset(),
                show(ot, got[i]),
                show(ot, want[i])
            ));
        }
        // Elements of the output buffer outside the view are untouched.
        let reached: std::collections::HashSet<usize> = offsets(&ol, &shape).into_iter().collect();
        let poison = u64::from_ne_bytes([0xC3; 8]) & value::width_mask(ot);
        for k in 0..ob.len / ot.size() {
            if !reached.contains(&k) && ob.get(ot, k) != poison {
                failures.push(format!(
                    "trial {trial}: `{text}` wrote element {k} outside the view"
                ));
                break;
            }
        }
    }
    println!(
        "layouts: {ran} expressions run, {refused} refused when compiling (ExprType/ExprLimit), \
         {scalars_refused} with a scalar that does not fit, of {trials}"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        ran * 10 >= trials * 6,
        "only {ran} of {trials} expressions ran"
    );
}
