//! Every 16-bit float pattern through the exact ops, the casts and the transcendentals.

use crate::common::{Rng, TestElem};
use crate::errors::estr;
use crate::harness::TestResult;
use strided_apply::verify::Distance;
use strided_apply::{api, DeviceTensor, Gpu};

/// Every 16-bit pattern (NaNs, infinities, subnormals included) of `f16` and `bf16` through
/// the exact ops and casts on the GPU, against the CPU twin **bit for bit** where the result
/// is a 16-bit float (NaNs too: both sides give the canonical NaN, and a cast to the same
/// type keeps every bit), an integer or a bool;
/// equal values (any NaN payload) where it is an f32 or f64; the transcendentals within one
/// 16-bit ulp.
pub fn narrow_exhaustive(gpu: &Gpu) -> TestResult {
    use strided_apply::ops::*;
    use strided_apply::{bf16, f16, Bool, Layout};
    let n = 1 << 16;
    let l = Layout::contiguous(&[n]).map_err(estr)?;
    let mut lines = Vec::new();
    // `out` on the GPU and the CPU twin: (bit mismatches, worst ulp) over all n elements.
    macro_rules! both {
        ($api:ident, $cpu:ident, $op:expr, $o:ty, [$($x:ident),*]) => {{
            let mut want = vec![<$o as TestElem>::poison(); n];
            strided_apply::cpu::$cpu($op, (&mut want, &l) $(, (&$x[..], &l))*).map_err(estr)?;
            let mut d = DeviceTensor::from_slice(gpu, &vec![<$o as TestElem>::poison(); n], &[n]).map_err(estr)?;
            $( let $x = DeviceTensor::from_slice(gpu, &$x, &[n]).map_err(estr)?; )*
            api::$api(gpu, $op, &mut d $(, &$x)*).map_err(estr)?;
            let got = d.to_vec(gpu).map_err(estr)?;
            let bits = got.iter().zip(&want).filter(|(g, w)| bytemuck::bytes_of(*g) != bytemuck::bytes_of(*w)).count();
            let ulp = got.iter().zip(&want).map(|(&g, &w)| <$o as Distance>::distance(g, w)).max().unwrap_or(0);
            (bits, ulp)
        }};
    }
    macro_rules! exact {
        ($what:expr, $r:expr) => {{
            let (bits, _) = $r;
            if bits != 0 {
                return Err(format!("{}: {bits} of {n} results differ in bits", $what));
            }
        }};
    }
    // Casts to f32 and f64: a NaN stays a NaN, its payload is the hardware's (the GPU's
    // `cvt` gives the canonical NaN, the host keeps the payload); every other value exact.
    macro_rules! same_value {
        ($what:expr, $r:expr) => {{
            let (_, ulp) = $r;
            if ulp != 0 {
                return Err(format!("{}: results differ ({ulp} ulp)", $what));
            }
        }};
    }
    macro_rules! for_type {
        ($t:ident) => {{
            let x: Vec<$t> = (0..n).map(|i| $t::from_bits(i as u16)).collect();
            // y: the same patterns in another order (every pair class meets).
            let y: Vec<$t> = (0..n)
                .map(|i| $t::from_bits((i as u32).wrapping_mul(40503) as u16))
                .collect();
            let t = stringify!($t);
            exact!(format!("add {t}"), both!(apply3, apply3, Add, $t, [x, y]));
            exact!(format!("sub {t}"), both!(apply3, apply3, Sub, $t, [x, y]));
            exact!(format!("mul {t}"), both!(apply3, apply3, Mul, $t, [x, y]));
            exact!(format!("div {t}"), both!(apply3, apply3, Div, $t, [x, y]));
            exact!(format!("min {t}"), both!(apply3, apply3, Min, $t, [x, y]));
            exact!(format!("max {t}"), both!(apply3, apply3, Max, $t, [x, y]));
            exact!(format!("fma {t}"), {
                let z = x.clone();
                both!(apply4, apply4, Fma, $t, [x, y, z])
            });
            exact!(format!("lt {t}"), both!(apply3, apply3, Lt, Bool, [x, y]));
            exact!(format!("eq {t}"), both!(apply3, apply3, Eq, Bool, [x, y]));
            exact!(format!("neg {t}"), both!(apply2, apply2, Neg, $t, [x]));
            exact!(format!("abs {t}"), both!(apply2, apply2, Abs, $t, [x]));
            exact!(format!("relu {t}"), both!(apply2, apply2, Relu, $t, [x]));
            exact!(format!("sqrt {t}"), both!(apply2, apply2, Sqrt, $t, [x]));
            exact!(format!("rsqrt {t}"), both!(apply2, apply2, Rsqrt, $t, [x]));
            same_value!(format!("{t} -> f32"), both!(apply2, apply2, Cast, f32, [x]));
            same_value!(format!("{t} -> f64"), both!(apply2, apply2, Cast, f64, [x]));
            // To the same type: every bit kept on both sides (NaN payloads too).
            exact!(format!("{t} -> {t}"), both!(apply2, apply2, Cast, $t, [x]));
            exact!(format!("{t} -> i32"), both!(apply2, apply2, Cast, i32, [x]));
            exact!(format!("{t} -> i64"), both!(apply2, apply2, Cast, i64, [x]));
            exact!(format!("{t} -> u8"), both!(apply2, apply2, Cast, u8, [x]));
            exact!(
                format!("{t} -> bool"),
                both!(apply2, apply2, Cast, Bool, [x])
            );
            same_value!(format!("add f32 = {t} + f32"), {
                let b: Vec<f32> = y.iter().map(|v| v.to_f32() * 0.37).collect();
                both!(apply3, apply3, Add, f32, [x, b])
            });
            exact!(format!("mul {t} = {t} * f32"), {
                let b: Vec<f32> = y.iter().map(|v| v.to_f32() * 0.37).collect();
                both!(apply3, apply3, Mul, $t, [x, b])
            });
            // Into the type: f32 and f64 of every exponent, integers of every size.
            let mut rng = Rng(0x16);
            let f: Vec<f32> = (0..n).map(|_| f32::from_bits(rng.next() as u32)).collect();
            let d: Vec<f64> = (0..n)
                .map(|_| f64::from_bits(rng.next() >> (rng.next() % 3)))
                .collect();
            let i: Vec<i64> = (0..n)
                .map(|_| (rng.next() as i64) >> (rng.next() % 64))
                .collect();
            let u: Vec<u32> = (0..n)
                .map(|_| (rng.next() as u32) >> (rng.next() % 32))
                .collect();
            exact!(format!("f32 -> {t}"), both!(apply2, apply2, Cast, $t, [f]));
            exact!(format!("f64 -> {t}"), both!(apply2, apply2, Cast, $t, [d]));
            exact!(format!("i64 -> {t}"), both!(apply2, apply2, Cast, $t, [i]));
            exact!(format!("u32 -> {t}"), both!(apply2, apply2, Cast, $t, [u]));
            let mut worst = 0;
            for (name, r) in [
                ("exp", both!(apply2, apply2, Exp, $t, [x])),
                ("log", both!(apply2, apply2, Log, $t, [x])),
                ("sin", both!(apply2, apply2, Sin, $t, [x])),
                ("tanh", both!(apply2, apply2, Tanh, $t, [x])),
                ("sigmoid", both!(apply2, apply2, Sigmoid, $t, [x])),
                ("pow", both!(apply3, apply3, Pow, $t, [x, y])),
            ] {
                if r.1 > 1 {
                    return Err(format!(
                        "{name} {t}: GPU and CPU {} ulp apart (bound 1)",
                        r.1
                    ));
                }
                worst = worst.max(r.1);
            }
            lines.push(format!(
                "{t}: 25 exact ops bit-identical, transcendentals within {worst} ulp"
            ));
        }};
    }
    for_type!(f16);
    for_type!(bf16);
    Ok(lines.join("; "))
}
