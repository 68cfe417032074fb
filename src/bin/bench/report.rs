//! Results: one JSON line per case and its check label against the CPU twin.

use strided_apply::ops;
use strided_apply::verify::{first_mismatch, Distance};

/// `GPU=CPU` when the GPU result equals the CPU twin's bit for bit, else the first mismatch.
pub(super) fn check_label<T: Distance>(got: &[T], want: &[T]) -> String {
    match first_mismatch(got, want, ops::Tolerance::Exact) {
        None => "GPU=CPU".to_string(),
        Some(m) => format!("MISMATCH {m}"),
    }
}

/// [`check_label`] for results within `max_ulp` of the CPU twin (transcendentals: each side
/// within the library's ulp bounds, not bit-identical): `GPU~CPU (max k ulp)` when some
/// differ by at most `max_ulp`.
pub(super) fn check_label_ulp<T: Distance>(got: &[T], want: &[T], max_ulp: u64) -> String {
    let worst = got
        .iter()
        .zip(want)
        .map(|(&g, &c)| T::distance(g, c))
        .max()
        .unwrap_or(0);
    match worst {
        0 if got.len() == want.len() => "GPU=CPU".to_string(),
        k if k <= max_ulp && got.len() == want.len() => format!("GPU~CPU (max {k} ulp)"),
        _ => check_label(got, want),
    }
}

pub(super) fn report(case: &str, dtype: &str, elements: usize, bytes: usize, ms: f64, check: &str) {
    println!(
        "{{\"impl\":\"strided-apply\",\"case\":\"{case}\",\"dtype\":\"{dtype}\",\"elements\":{elements},\"bytes\":{bytes},\"ms\":{ms:.5},\"gbps\":{:.1},\"check\":\"{check}\"}}",
        bytes as f64 / ms / 1e6
    );
}
