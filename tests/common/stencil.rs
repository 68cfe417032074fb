//! Stencil layouts shared by the CPU conformance test (`tests/cpu/stencil.rs`) and the GPU
//! tests (`tests/gpu/stencil.rs`, `tests/gpu/dispatch.rs`): input and output layouts of
//! every class.

use strided_apply::Layout;

/// Input layouts over a buffer, all viewing a tensor of shape `shape`.
pub fn input_layouts(shape: &[usize]) -> Vec<(&'static str, Layout, usize)> {
    let n: usize = shape.iter().product();
    let rank = shape.len();
    let mut v = Vec::new();
    v.push(("contiguous", Layout::contiguous(shape).unwrap(), n));
    // Transposed: a dense buffer of the reversed shape, viewed reversed back.
    let rev: Vec<usize> = shape.iter().rev().copied().collect();
    let perm: Vec<usize> = (0..rank).rev().collect();
    v.push((
        "transposed",
        Layout::contiguous(&rev).unwrap().permute(&perm).unwrap(),
        n,
    ));
    // Sliced: every other element of a last axis twice as long, starting at 1.
    let mut wide = shape.to_vec();
    wide[rank - 1] = 2 * shape[rank - 1] + 1;
    let sliced = Layout::contiguous(&wide)
        .unwrap()
        .slice(rank - 1, Some(1), None, 2)
        .unwrap();
    assert_eq!(sliced.shape(), shape);
    v.push(("sliced step 2", sliced, wide.iter().product()));
    // Reversed along every axis.
    let mut r = Layout::contiguous(shape).unwrap();
    for a in 0..rank {
        r = r.flip(a).unwrap();
    }
    v.push(("reversed", r, n));
    // Broadcast: the input has size 1 on axis 0 (the output's shape is kept).
    let mut b = shape.to_vec();
    b[0] = 1;
    v.push((
        "broadcast axis 0",
        Layout::contiguous(&b).unwrap(),
        n / shape[0],
    ));
    v
}

/// Output layouts: dense and transposed.
pub fn output_layouts(shape: &[usize]) -> Vec<(&'static str, Layout)> {
    let rank = shape.len();
    let rev: Vec<usize> = shape.iter().rev().copied().collect();
    let perm: Vec<usize> = (0..rank).rev().collect();
    vec![
        ("dense out", Layout::contiguous(shape).unwrap()),
        (
            "transposed out",
            Layout::contiguous(&rev).unwrap().permute(&perm).unwrap(),
        ),
    ]
}
