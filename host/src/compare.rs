//! The comparison layer: distances between element values, the first mismatch between a
//! GPU result and a reference, and the upload-run-compare step that every `verify`
//! (apply, reductions, stencils) shares. [`verify`](crate::verify) re-exports it.

use crate::error::Result;
use crate::gpu::Gpu;
use crate::layout::Layout;
use crate::tensor::DeviceTensor;
use gpu_kernels::elem::{f8e4m3fn, f8e5m2};
use gpu_kernels::ops::{Accuracy, Tolerance};
use gpu_kernels::{bf16, f16, Bool, Elem};

/// Distance between two values of an element type: ulps for floats (NaN equals NaN),
/// 0 or `u64::MAX` for the others.
pub trait Distance: Elem {
    fn distance(a: Self, b: Self) -> u64;
}

macro_rules! exact {
    ($($t:ty),*) => {$( impl Distance for $t {
        fn distance(a: Self, b: Self) -> u64 { if a == b { 0 } else { u64::MAX } }
    } )*};
}
exact!(i32, i64, u32, u8, Bool, i8, i16, u16, u64, f8e4m3fn, f8e5m2);

macro_rules! float_distance {
    ($($t:ty => $bits:ty, $signed:ty),*) => {$( impl Distance for $t {
        fn distance(a: Self, b: Self) -> u64 {
            if a.is_nan() && b.is_nan() { return 0; }
            if a.is_nan() || b.is_nan() { return u64::MAX; }
            if a == b { return 0; }
            // Map the bit patterns onto a line where adjacent floats differ by one.
            let key = |x: $t| { let i = x.to_bits() as $signed; if i < 0 { <$signed>::MIN - i } else { i } };
            (key(a) as i128 - key(b) as i128).unsigned_abs() as u64
        }
    } )*};
}
float_distance!(f32 => u32, i32, f64 => u64, i64, f16 => u16, i16, bf16 => u16, i16);

/// The first element where two buffers disagree beyond a tolerance.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch<T> {
    pub index: usize,
    pub gpu: T,
    pub cpu: T,
    /// Distance in ulps (`u64::MAX` for a non-float mismatch or a NaN against a number).
    pub ulps: u64,
}

impl<T: std::fmt::Debug> std::fmt::Display for Mismatch<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "element {}: GPU {:?}, CPU {:?} ({} ulp)",
            self.index, self.gpu, self.cpu, self.ulps
        )
    }
}

/// `None` when `gpu` and `cpu` agree everywhere within `tol`.
pub fn first_mismatch<T: Distance>(gpu: &[T], cpu: &[T], tol: Tolerance) -> Option<Mismatch<T>> {
    if gpu.len() != cpu.len() {
        return Some(Mismatch {
            index: gpu.len().min(cpu.len()),
            gpu: T::zeroed(),
            cpu: T::zeroed(),
            ulps: u64::MAX,
        });
    }
    let bound = match tol {
        Tolerance::Exact => 0,
        Tolerance::Ulp(n) => n as u64,
    };
    gpu.iter()
        .zip(cpu)
        .enumerate()
        .find_map(|(index, (&g, &c))| {
            let ulps = T::distance(g, c);
            (ulps > bound).then_some(Mismatch {
                index,
                gpu: g,
                cpu: c,
                ulps,
            })
        })
}

/// GPU results against the CPU twin for an op's tolerance: GPU and CPU are each within the
/// op's bound of the exact result, so they may be twice the bound apart.
pub fn twin_tolerance<Op: Accuracy>() -> Tolerance {
    match Op::TOLERANCE {
        Tolerance::Exact => Tolerance::Exact,
        Tolerance::Ulp(n) => Tolerance::Ulp(2 * n),
    }
}

/// The GPU-against-twin check of stencils and reductions: `cpu` runs the twin on a copy of
/// `out`'s buffer, `on_gpu` the GPU on uploads of every buffer viewed through its layout;
/// the first element of the whole output buffer where they differ (exact).
pub(crate) fn with_inputs<O: Distance, T: Elem, const K: usize>(
    gpu: &Gpu,
    out: (&[O], &Layout),
    inputs: [(&[T], &Layout); K],
    cpu: impl FnOnce(&mut [O]) -> Result<()>,
    on_gpu: impl FnOnce(&mut DeviceTensor<O>, [&DeviceTensor<T>; K]) -> Result<()>,
) -> Result<Option<Mismatch<O>>> {
    let mut on_cpu = out.0.to_vec();
    cpu(&mut on_cpu)?;
    let mut d_out =
        DeviceTensor::from_slice(gpu, out.0, &[out.0.len()])?.with_layout(out.1.clone())?;
    let d_in = inputs
        .iter()
        .map(|x| DeviceTensor::from_slice(gpu, x.0, &[x.0.len()])?.with_layout(x.1.clone()))
        .collect::<Result<Vec<_>>>()?;
    on_gpu(&mut d_out, std::array::from_fn(|k| &d_in[k]))?;
    let got = d_out.buffer_to_vec(gpu)?;
    Ok(first_mismatch(&got, &on_cpu, Tolerance::Exact))
}
