//! Inputs: deterministic random data of each element type and dense operands (host values
//! and their layout).

use strided_apply::{bf16, f16, Elem, Layout, Result};

pub(super) fn random<T: Elem>(len: usize, seed: u64, f: impl Fn(u64) -> T) -> Vec<T> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            f(x)
        })
        .collect()
}

pub(super) fn rand_f32(x: u64) -> f32 {
    (x >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
}
/// Uniform in [-1, 1], rounded once to bf16.
pub(super) fn rand_bf16(x: u64) -> bf16 {
    bf16::from_f32(rand_f32(x))
}
/// Uniform in [-1, 1], rounded once to f16.
pub(super) fn rand_f16(x: u64) -> f16 {
    f16::from_f32(rand_f32(x))
}

pub(super) struct Operand<T> {
    pub(super) host: Vec<T>,
    pub(super) layout: Layout,
}

pub(super) fn dense<T: Elem>(
    shape: &[usize],
    seed: u64,
    f: impl Fn(u64) -> T,
) -> Result<Operand<T>> {
    let layout = Layout::contiguous(shape)?;
    Ok(Operand {
        host: random(layout.numel(), seed, f),
        layout,
    })
}
