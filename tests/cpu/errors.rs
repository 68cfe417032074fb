//! The bad-input catalogue that needs no GPU: each case triggers one typed error and checks
//! that its message names the operand and the reason.

use strided_apply::ops::{Add, Neg};
use strided_apply::plan::plan;
use strided_apply::{cpu, Error, Layout, MAX_DIMS};

fn dense(shape: &[usize]) -> Layout {
    Layout::contiguous(shape).unwrap()
}

#[test]
fn view_outside_its_buffer_is_out_of_bounds() {
    let l = Layout::new(&[3, 4], &[4, 1], 1).unwrap();
    let mut out = vec![0.0f32; 12];
    let a = vec![0.0f32; 12];
    let e = cpu::apply2(Neg, (&mut out, &dense(&[3, 4])), (&a, &l)).unwrap_err();
    assert!(
        matches!(
            e,
            Error::OutOfBounds {
                operand: "a",
                max: 12,
                len: 12,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().starts_with("a: "), "{e}");
    // A negative stride reaching below element 0.
    let back = Layout::new(&[4], &[-1], 2).unwrap();
    let e = cpu::apply2(Neg, (&mut out[..4], &dense(&[4])), (&a, &back)).unwrap_err();
    assert!(matches!(e, Error::OutOfBounds { min: -1, .. }), "{e:?}");
}

#[test]
fn offset_and_stride_overflow_is_reported() {
    let huge = Layout::new(&[3, 4], &[isize::MAX / 2, 1], 0).unwrap();
    let e = huge.check_in(100, "a").unwrap_err();
    assert!(matches!(e, Error::Overflow { operand: "a", .. }), "{e:?}");
    let count = Layout::new(&[usize::MAX, 3], &[0, 0], 0).unwrap();
    assert!(matches!(
        count.check_in(1, "b"),
        Err(Error::Overflow { operand: "b", .. })
    ));
    assert!(Layout::contiguous(&[usize::MAX, 4]).is_err());
}

#[test]
fn non_broadcastable_shapes_are_refused() {
    let mut out = vec![0.0f32; 12];
    let (a, b) = (vec![0.0f32; 12], vec![0.0f32; 3]);
    let e = cpu::apply3(
        Add,
        (&mut out, &dense(&[3, 4])),
        (&a, &dense(&[3, 4])),
        (&b, &dense(&[3])),
    )
    .unwrap_err();
    assert!(matches!(&e, Error::Broadcast { operand: "b", .. }), "{e:?}");
    assert!(e.to_string().contains("cannot be broadcast"), "{e}");
    // An input of higher rank than the output.
    let e = cpu::apply2(
        Neg,
        (&mut out[..4], &dense(&[4])),
        (&a[..4], &dense(&[1, 4])),
    )
    .unwrap_err();
    assert!(matches!(e, Error::Broadcast { operand: "a", .. }), "{e:?}");
}

#[test]
fn rank_above_the_maximum_after_collapsing_is_refused() {
    // Strides 1, 3, 9, … never merge: MAX_DIMS + 1 dimensions remain.
    let n = MAX_DIMS + 1;
    let shape = vec![2usize; n];
    let strides: Vec<isize> = (0..n).rev().map(|d| 3isize.pow(d as u32)).collect();
    let l = Layout::new(&shape, &strides, 0).unwrap();
    let e = plan([&l], ["out"]).unwrap_err();
    assert!(
        matches!(e, Error::RankTooHigh { ndim, max: MAX_DIMS, .. } if ndim == n),
        "{e:?}"
    );
    // The same rank collapses fine when contiguous.
    let c = dense(&shape);
    assert_eq!(plan([&c], ["out"]).unwrap().ndim, 0);
}

#[test]
fn output_mapping_two_indices_to_one_element_is_refused() {
    let mut out = vec![0.0f32; 4];
    let a = vec![1.0f32; 12];
    let bcast = Layout::new(&[3, 4], &[0, 1], 0).unwrap();
    let e = cpu::apply2(Neg, (&mut out, &bcast), (&a, &dense(&[3, 4]))).unwrap_err();
    assert!(
        matches!(e, Error::OverlappingOutput { operand: "out", .. }),
        "{e:?}"
    );
    let overlapping = Layout::new(&[3, 3], &[1, 1], 0).unwrap();
    let mut out = vec![0.0f32; 9];
    let e = cpu::apply2(Neg, (&mut out, &overlapping), (&a[..9], &dense(&[3, 3]))).unwrap_err();
    assert!(matches!(e, Error::OverlappingOutput { .. }), "{e:?}");
}

#[test]
fn invalid_views_are_typed_errors() {
    let l = dense(&[3, 4]);
    assert!(matches!(
        l.slice(0, None, None, 0),
        Err(Error::InvalidView { .. })
    ));
    assert!(matches!(
        l.slice(2, None, None, 1),
        Err(Error::InvalidView { .. })
    ));
    assert!(matches!(l.permute(&[0, 0]), Err(Error::InvalidView { .. })));
    assert!(matches!(l.permute(&[1]), Err(Error::InvalidView { .. })));
    assert!(matches!(l.squeeze(0), Err(Error::InvalidView { .. })));
    assert!(matches!(l.unsqueeze(3), Err(Error::InvalidView { .. })));
    assert!(matches!(l.reshape(&[5, 2]), Err(Error::InvalidView { .. })));
    let e = l.transpose(0, 1).unwrap().reshape(&[12]).unwrap_err();
    assert!(e.to_string().contains("needs a copy"), "{e}");
    assert!(matches!(
        Layout::new(&[3], &[1, 1], 0),
        Err(Error::InvalidView { .. })
    ));
    assert!(matches!(l.broadcast_to(&[4]), Err(Error::Broadcast { .. })));
}

#[test]
fn empty_tensors_are_valid_and_touch_nothing() {
    let mut out: Vec<f32> = vec![];
    cpu::apply3(
        Add,
        (&mut out, &dense(&[0, 5])),
        (&[] as &[f32], &dense(&[0, 5])),
        (&[1.0f32], &dense(&[1])),
    )
    .unwrap();
    let mut sentinel = vec![7.0f32; 3];
    cpu::apply2(Neg, (&mut sentinel, &dense(&[3, 0])), (&[], &dense(&[0]))).unwrap();
    assert_eq!(sentinel, [7.0; 3]);
}

#[test]
fn missing_driver_is_an_error_not_a_panic() {
    if strided_apply::driver_present() {
        // A GPU machine: the GPU test binary checks NoDevice instead.
        println!(
            "driver present: NoDriver cannot be triggered here (tests/gpu/errors.rs checks NoDevice)"
        );
        assert!(!matches!(strided_apply::open(0), Err(Error::NoDriver(_))));
        return;
    }
    let e = strided_apply::open(0).unwrap_err();
    assert!(matches!(e, Error::NoDriver(_)), "{e:?}");
    assert!(e.to_string().contains("driver"), "{e}");
}

#[test]
fn rank_above_the_maximum_through_the_cpu_twin_names_out() {
    // Strides 2^(d+1) - 1 never merge and reach 2^27 elements: a 128 MiB buffer, which
    // calloc maps lazily and nothing writes.
    let n = MAX_DIMS + 1;
    let shape = vec![2usize; n];
    let strides: Vec<isize> = (0..n).rev().map(|d| (2isize << d) - 1).collect();
    let l = Layout::new(&shape, &strides, 0).unwrap();
    let len = l.span("out").unwrap().unwrap().max as usize + 1;
    let mut buf = vec![0u8; len];
    let e = cpu::apply1(strided_apply::ops::Fill(1u8), (&mut buf, &l)).unwrap_err();
    assert!(
        matches!(e, Error::RankTooHigh { operand: "out", ndim, .. } if ndim == n),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.starts_with("out: ") && msg.contains("more than the maximum 25"),
        "{msg}"
    );
    assert!(buf.iter().all(|&x| x == 0), "a refused call wrote memory");
}

#[test]
fn empty_tensors_of_any_rank_and_size_are_valid() {
    // A partial product of the sizes overflows before the 0: still 0 elements.
    let huge = Layout::new(&[usize::MAX, 2, 0], &[1, 1, 1], 0).unwrap();
    assert_eq!(huge.numel(), 0);
    assert_eq!(huge.check_in(0, "a").unwrap(), None);
    let dense = Layout::contiguous(&[usize::MAX, 2, 0]).unwrap();
    assert_eq!(dense.numel(), 0);
    let mut out: Vec<f32> = vec![];
    cpu::apply2(Neg, (&mut out, &dense), (&[], &huge)).unwrap();
    // More axes than the maximum, none mergeable, one of them 0: nothing to do, no error.
    let n = MAX_DIMS + 5;
    let shape: Vec<usize> = (0..n).map(|d| if d == 3 { 0 } else { 2 }).collect();
    let strides: Vec<isize> = (0..n).rev().map(|d| 3isize.pow(d as u32)).collect();
    let deep = Layout::new(&shape, &strides, 0).unwrap();
    let p = plan([&deep], ["out"]).unwrap();
    assert_eq!(p.numel, 0);
    let mut sentinel = vec![7u8; 4];
    cpu::apply1(strided_apply::ops::Fill(1u8), (&mut sentinel, &deep)).unwrap();
    assert_eq!(sentinel, [7; 4]);
}

#[test]
fn offset_beyond_isize_and_long_broadcast_axes() {
    // An offset no isize can hold: overflow, naming the operand.
    let far = Layout::new(&[2], &[1], usize::MAX).unwrap();
    let e = far.check_in(10, "b").unwrap_err();
    assert!(matches!(e, Error::Overflow { operand: "b", .. }), "{e:?}");
    assert!(e.to_string().starts_with("b: "), "{e}");
    // A stride-0 axis longer than isize::MAX reaches one element: in bounds.
    let long = Layout::new(&[(isize::MAX as usize) + 2], &[0], 3).unwrap();
    let span = long.check_in(4, "a").unwrap().unwrap();
    assert_eq!((span.min, span.max), (3, 3));
    assert!(matches!(
        long.check_in(3, "a"),
        Err(Error::OutOfBounds {
            operand: "a",
            max: 3,
            len: 3,
            ..
        })
    ));
}

/// Every error the CPU side can raise names its operand first and says why.
#[test]
fn cpu_error_messages_name_the_operand_and_the_reason() {
    let mut out = vec![0.0f32; 12];
    let a = vec![0.0f32; 12];
    let cases: Vec<(Error, &str, &str)> = vec![
        (
            Layout::new(&[3, 4], &[4, 1], 1)
                .unwrap()
                .check_in(12, "a")
                .unwrap_err(),
            "a: ",
            "outside a buffer of 12",
        ),
        (
            Layout::new(&[3], &[isize::MAX], 0)
                .unwrap()
                .check_in(12, "c")
                .unwrap_err(),
            "c: ",
            "overflows",
        ),
        (
            cpu::apply2(Neg, (&mut out, &dense(&[3, 4])), (&a[..5], &dense(&[5]))).unwrap_err(),
            "a: ",
            "cannot be broadcast to [3, 4]",
        ),
        (
            cpu::apply2(
                Neg,
                (&mut out, &Layout::new(&[3, 4], &[1, 1], 0).unwrap()),
                (&a, &dense(&[3, 4])),
            )
            .unwrap_err(),
            "out: ",
            "maps several indices to one element",
        ),
        (
            dense(&[3, 4]).permute(&[0, 0]).unwrap_err(),
            "view: ",
            "not a permutation",
        ),
        (
            Layout::contiguous(&[usize::MAX, 3]).unwrap_err(),
            "view: ",
            "overflows",
        ),
    ];
    for (e, operand, reason) in cases {
        let msg = e.to_string();
        assert!(
            msg.starts_with(operand) && msg.contains(reason),
            "{msg:?} should start with {operand:?} and say {reason:?}"
        );
    }
}
