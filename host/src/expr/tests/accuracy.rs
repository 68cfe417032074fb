//! Accuracy of the seed expression in `f32` against an `f64` reference.

use super::*;

/// Distance in f32 ulps between `x` and `y` (finite, same sign or near 0).
fn ulps(x: f32, y: f32) -> u64 {
    let key = |v: f32| {
        let b = v.to_bits() as i64;
        if b < 0x8000_0000 {
            b
        } else {
            0x8000_0000 - b
        }
    };
    (key(x) - key(y)).unsigned_abs()
}

#[test]
fn the_seed_expression_is_within_a_few_ulps_of_an_f64_reference() {
    let mut r = Rng::new(2024);
    let n = 4000;
    // a, b in [-2, 2] (cos(b) + 2 ≥ 1.58: no cancellation in the log), c in [4, 10] (the
    // sum stays ≥ 0.09 and every term is O(1)).
    let gen = |r: &mut Rng, lo: f64, hi: f64| -> Vec<f32> {
        (0..n).map(|_| (lo + (hi - lo) * r.unit()) as f32).collect()
    };
    let (a, b, c) = (
        gen(&mut r, -2.0, 2.0),
        gen(&mut r, -2.0, 2.0),
        gen(&mut r, 4.0, 10.0),
    );
    let args = [
        ("a", F32, f32s(&a)),
        ("b", F32, f32s(&b)),
        ("c", F32, f32s(&c)),
    ];
    let (t, got) = eval_1d(
        "sin(a*b) + sqrt(c) + cos(a)/log(cos(b)+2)",
        &args,
        &[],
        None,
    )
    .unwrap();
    assert_eq!(t, F32);
    let mut worst = (0u64, 0usize);
    for i in 0..n {
        let (x, y, z) = (a[i] as f64, b[i] as f64, c[i] as f64);
        let want = (x * y).sin() + z.sqrt() + x.cos() / (y.cos() + 2.0).ln();
        let g = f32::from_bits(got[i] as u32);
        let d = ulps(g, want as f32);
        if d > worst.0 {
            worst = (d, i);
        }
    }
    let i = worst.1;
    println!(
        "seed expression: worst {} ulp at a={} b={} c={}",
        worst.0, a[i], b[i], c[i]
    );
    assert!(
        worst.0 <= 4,
        "{} ulp at a={} b={} c={}",
        worst.0,
        a[i],
        b[i],
        c[i]
    );
}
