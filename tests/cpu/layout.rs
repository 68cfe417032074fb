//! Views against brute force: every view's offsets equal the element positions the same
//! operation picks on an explicit list of offsets.

use strided_apply::Layout;

/// Offsets of every element of `l` in row-major order.
fn offsets(l: &Layout) -> Vec<isize> {
    let mut out = vec![l.offset() as isize];
    for d in 0..l.ndim() {
        out = out
            .iter()
            .flat_map(|&base| (0..l.shape()[d]).map(move |i| base + i as isize * l.strides()[d]))
            .collect();
    }
    if l.numel() == 0 {
        out.clear();
    }
    out
}

/// Python's `range(start, stop, step)` semantics for `x[start:stop:step]` on a length-n axis.
fn py_slice(n: isize, start: Option<isize>, end: Option<isize>, step: isize) -> Vec<isize> {
    let norm = |i: isize, lo, hi| (if i < 0 { i + n } else { i }).clamp(lo, hi);
    let mut v = Vec::new();
    if step > 0 {
        let (mut i, e) = (
            start.map_or(0, |s| norm(s, 0, n)),
            end.map_or(n, |e| norm(e, 0, n)),
        );
        while i < e {
            v.push(i);
            i += step;
        }
    } else {
        let (mut i, e) = (
            start.map_or(n - 1, |s| norm(s, -1, n - 1)),
            end.map_or(-1, |e| norm(e, -1, n - 1)),
        );
        while i > e {
            v.push(i);
            i += step;
        }
    }
    v
}

#[test]
fn slices_match_python_semantics() {
    let n = 11;
    let base = Layout::contiguous(&[n as usize]).unwrap();
    let bounds = [
        None,
        Some(-20),
        Some(-3),
        Some(0),
        Some(2),
        Some(7),
        Some(11),
        Some(30),
    ];
    for &start in &bounds {
        for &end in &bounds {
            for step in [-4, -3, -1, 1, 2, 5] {
                let l = base.slice(0, start, end, step).unwrap();
                assert_eq!(
                    offsets(&l),
                    py_slice(n, start, end, step),
                    "[{start:?}:{end:?}:{step}]"
                );
                assert!(l.check_in(n as usize, "view").is_ok());
            }
        }
    }
}

#[test]
fn permute_flip_broadcast_squeeze_match_brute_force() {
    let base = Layout::contiguous(&[2, 3, 4]).unwrap();
    let p = base.permute(&[2, 0, 1]).unwrap();
    let expect: Vec<isize> = (0..4)
        .flat_map(|k| (0..2).flat_map(move |i| (0..3).map(move |j| i * 12 + j * 4 + k)))
        .collect();
    assert_eq!(offsets(&p), expect);
    let f = base.flip(1).unwrap().flip(2).unwrap();
    let expect: Vec<isize> = (0..2)
        .flat_map(|i| (0..3).flat_map(move |j| (0..4).map(move |k| i * 12 + (2 - j) * 4 + (3 - k))))
        .collect();
    assert_eq!(offsets(&f), expect);
    let b = Layout::contiguous(&[3, 1])
        .unwrap()
        .broadcast_to(&[2, 3, 5])
        .unwrap();
    assert_eq!(b.strides(), [0, 1, 0]);
    let u = base.unsqueeze(1).unwrap();
    assert_eq!(u.shape(), [2, 1, 3, 4]);
    assert_eq!(offsets(&u.squeeze(1).unwrap()), offsets(&base));
    assert!(base.is_contiguous() && !p.is_contiguous());
}

#[test]
fn reshape_keeps_row_major_order_whenever_it_succeeds() {
    let shapes: [&[usize]; 7] = [
        &[24],
        &[2, 12],
        &[4, 6],
        &[2, 3, 4],
        &[6, 4],
        &[1, 24, 1],
        &[2, 2, 2, 3],
    ];
    let base = Layout::contiguous(&[4, 6]).unwrap();
    let views = [
        base.clone(),
        base.slice(0, None, None, 2)
            .unwrap()
            .reshape(&[12])
            .unwrap_or(base.clone()),
        base.transpose(0, 1).unwrap(),
        base.flip(0).unwrap(),
        Layout::contiguous(&[4, 12])
            .unwrap()
            .slice(1, None, None, 2)
            .unwrap(),
        Layout::contiguous(&[8, 6])
            .unwrap()
            .slice(0, None, None, 2)
            .unwrap(),
    ];
    let mut reshaped = 0;
    for v in &views {
        let order = offsets(v);
        for s in shapes {
            if s.iter().product::<usize>() != v.numel() {
                continue;
            }
            if let Ok(r) = v.reshape(s) {
                assert_eq!(offsets(&r), order, "{v:?} -> {s:?}");
                reshaped += 1;
            }
        }
    }
    assert!(reshaped >= 15, "only {reshaped} reshapes succeeded");
}

#[test]
fn internal_overlap_detection() {
    let ok = [
        Layout::contiguous(&[3, 4]).unwrap(),
        Layout::new(&[3, 4], &[1, 3], 0).unwrap(),
        Layout::new(&[4], &[-2], 6).unwrap(),
    ];
    for l in ok {
        assert!(!l.has_internal_overlap(), "{l:?}");
    }
    let bad = [
        Layout::new(&[3, 4], &[0, 1], 0).unwrap(),
        Layout::new(&[3, 4], &[2, 1], 0).unwrap(),
    ];
    for l in bad {
        assert!(l.has_internal_overlap(), "{l:?}");
    }
}
