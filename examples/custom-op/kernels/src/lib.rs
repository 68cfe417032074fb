//! A user's own kernel crate: ops the library does not ship, instantiated by the library's
//! `apply` kernels (every layout and variant) and stencil body. The host crate beside it
//! compiles this crate to PTX in its `build.rs` and runs the same ops on the CPU twin.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]

use gpu_kernels::math::{Num, Signed};
use gpu_kernels::ops::{Accuracy, Op3};
use gpu_kernels::stencil::{Stencil, Taps};

/// Huber loss between a prediction and a target: `0.5 d²` for `|d| ≤ delta`, else
/// `delta (|d| - delta / 2)`, with `d = a - b`. Written by hand as an `Op3`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Huber<T> {
    pub delta: T,
}

impl<T: Signed> Op3<T, T, T> for Huber<T> {
    #[inline(always)]
    fn apply(&self, out: &mut T, a: T, b: T) {
        let d = a.sub(b).abs();
        let half = T::ONE.div(T::ONE.add(T::ONE));
        *out = if d <= self.delta {
            half.mul(d).mul(d)
        } else {
            self.delta.mul(d.sub(half.mul(self.delta)))
        };
    }
}
impl<T> Accuracy for Huber<T> {}

gpu_kernels::fused! {
    /// `limit * tanh(x / limit)`: a smooth clip to `(-limit, limit)`, as a fused expression.
    pub struct SoftClip<T: Float>(limit) = |x| limit * tanh(x / limit);
}

/// Central difference along x: `(in[x + 1] - in[x - 1]) / 2`, clamped at the edges.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CentralDiff;
impl<T: Num> Stencil<T> for CentralDiff {
    #[inline(always)]
    fn apply(&self, t: &Taps<T>) -> T {
        let two = T::ONE.add(T::ONE);
        t.at(1, 0, 0).sub(t.at(-1, 0, 0)).div(two)
    }
}

gpu_kernels::kernels! {
    apply3 [huber f32]: Huber<f32> => (f32, f32, f32);
    apply3 [huber f64]: Huber<f64> => (f64, f64, f64);
    apply2 [soft_clip f32]: SoftClip<f32> => (f32, f32);
    stencil [central_diff f32]: CentralDiff => (f32);
}
