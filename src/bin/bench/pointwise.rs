//! Pointwise groups: the contiguous add over sizes and types, the broadcast row, transposed
//! operand and step-2 slice, mixed types, and the fused `divmul` against its three kernels.

#[cfg(feature = "dispatch")]
use super::apply3::bench3_dlpack;
use super::apply3::{bench3, bench3_typed};
use super::data::{dense, rand_bf16, rand_f16, rand_f32, random, Operand};
use super::harness::Bench;
use super::report::{check_label, report};
use super::timing::median_ms;
use strided_apply::{api, bf16, cpu, f16, gpu_kernels, ops, DeviceTensor, Layout, Result};

/// Contiguous add over sizes (f32), then f64, u8, bf16 and f16 over `big × big / 2` or
/// `big × big` elements.
pub(super) fn contiguous_add(bench: &Bench) -> Result<()> {
    let (gpu, quick, big) = (&bench.gpu, bench.quick, bench.big);
    // Contiguous add over sizes.
    let sizes: Vec<u32> = if quick {
        vec![12, 20, 24]
    } else {
        vec![12, 16, 20, 24, 26, 28]
    };
    for p in sizes {
        let n = 1usize << p;
        let (a, b) = (dense(&[n], 2, rand_f32)?, dense(&[n], 3, rand_f32)?);
        bench3(
            gpu,
            "contiguous_add",
            ops::Add,
            &a.layout.clone(),
            &a,
            &b,
            f32::NAN,
        )?;
    }
    // f64 and u8 contiguous add.
    let n = big * big / 2;
    let (a, b) = (
        dense(&[n], 4, |x| x as f64 / u64::MAX as f64)?,
        dense(&[n], 5, |x| (x >> 3) as f64 / 1e18)?,
    );
    bench3(
        gpu,
        "contiguous_add",
        ops::Add,
        &a.layout.clone(),
        &a,
        &b,
        f64::NAN,
    )?;
    let n = big * big;
    let (a, b) = (
        dense(&[n], 6, |x| x as u8)?,
        dense(&[n], 7, |x| (x >> 8) as u8)?,
    );
    bench3(
        gpu,
        "contiguous_add",
        ops::Add,
        &a.layout.clone(),
        &a,
        &b,
        0x5a,
    )?;
    // bf16 and f16 over the same big × big elements (math in f32, rounded once).
    let (a, b) = (dense(&[n], 30, rand_bf16)?, dense(&[n], 31, rand_bf16)?);
    bench3(
        gpu,
        "contiguous_add",
        ops::Add,
        &a.layout.clone(),
        &a,
        &b,
        bf16::NAN,
    )?;
    let (a, b) = (dense(&[n], 32, rand_f16)?, dense(&[n], 33, rand_f16)?);
    bench3(
        gpu,
        "contiguous_add",
        ops::Add,
        &a.layout.clone(),
        &a,
        &b,
        f16::NAN,
    )?;
    Ok(())
}

/// The groups `broadcast_row`, `transposed` and `slice_step2`, those selected: each adds a
/// dense `big × big` f32 operand, made once for all three.
pub(super) fn broadcast_transposed_sliced(bench: &Bench) -> Result<()> {
    let (gpu, big, sq) = (&bench.gpu, bench.big, &bench.sq);
    let a = dense(&[big, big], 8, rand_f32)?;
    if bench.wants("broadcast_row") {
        let row = dense(&[1, big], 9, rand_f32)?;
        bench3(gpu, "broadcast_row", ops::Add, sq, &a, &row, f32::NAN)?;
        let a8 = dense(&[big, big], 10, |x| x as u8)?;
        let row8 = dense(&[1, big], 11, |x| x as u8)?;
        bench3(gpu, "broadcast_row", ops::Add, sq, &a8, &row8, 0x5a)?;
        let a16 = dense(&[big, big], 34, rand_bf16)?;
        let row16 = dense(&[1, big], 35, rand_bf16)?;
        bench3(gpu, "broadcast_row", ops::Add, sq, &a16, &row16, bf16::NAN)?;
    }
    // Transposed operand: A + B^T.
    if bench.wants("transposed") {
        let bt = Operand {
            host: random(big * big, 12, rand_f32),
            layout: sq.transpose(0, 1)?,
        };
        bench3(gpu, "transposed", ops::Add, sq, &a, &bt, f32::NAN)?;
        #[cfg(feature = "dispatch")]
        bench3_dlpack(gpu, "transposed_dlpack", sq, &a, &bt)?;
        let a16 = dense(&[big, big], 36, rand_bf16)?;
        let bt16 = Operand {
            host: random(big * big, 37, rand_bf16),
            layout: sq.transpose(0, 1)?,
        };
        bench3(gpu, "transposed", ops::Add, sq, &a16, &bt16, bf16::NAN)?;
    }
    // Slice with step 2 as an operand: A[:, ::2] + B.
    if bench.wants("slice_step2") {
        let wide = Layout::contiguous(&[big, 2 * big])?;
        let s2 = Operand {
            host: random(2 * big * big, 13, rand_f32),
            layout: wide.slice(1, None, None, 2)?,
        };
        bench3(gpu, "slice_step2", ops::Add, sq, &s2, &a, f32::NAN)?;
    }
    Ok(())
}

/// Mixed types: out_f32[big, big] = a_bf16[big, big] * b_f32, with b a broadcast row
/// [1, big] and then dense [big, big].
pub(super) fn mixed(bench: &Bench) -> Result<()> {
    let (gpu, big, sq) = (&bench.gpu, bench.big, &bench.sq);
    let a = dense(&[big, big], 41, rand_bf16)?;
    let row = dense(&[1, big], 42, rand_f32)?;
    let full = dense(&[big, big], 43, rand_f32)?;
    for (case, b) in [("mixed_broadcast_row", &row), ("mixed_contiguous", &full)] {
        bench3_typed(gpu, case, "bf16*f32->f32", ops::Mul, sq, &a, b, f32::NAN)?;
    }
    Ok(())
}

/// Fused expression c = (a / 3) * (b / 7): one kernel against three (t = a / 3,
/// u = b / 7, c = t * u, temporaries allocated once). Bytes are counted as 2 reads + 1
/// write for both, so the GB/s ratio is the speed ratio.
pub(super) fn divmul(bench: &Bench) -> Result<()> {
    let (gpu, quick) = (&bench.gpu, bench.quick);
    let n = if quick { 1 << 24 } else { 1 << 28 };
    let (a, b) = (dense(&[n], 20, rand_f32)?, dense(&[n], 21, rand_f32)?);
    let fused = gpu_kernels::fused::DivMul::new(3.0f32, 7.0);
    bench3(
        gpu,
        "fused_divmul",
        fused,
        &a.layout.clone(),
        &a,
        &b,
        f32::NAN,
    )?;
    let da = DeviceTensor::from_slice(gpu, &a.host, &[n])?;
    let db = DeviceTensor::from_slice(gpu, &b.host, &[n])?;
    let mut t = DeviceTensor::<f32>::zeros(gpu, &[n])?;
    let mut u = DeviceTensor::<f32>::zeros(gpu, &[n])?;
    let mut c = DeviceTensor::from_slice(gpu, &vec![f32::NAN; n], &[n])?;
    let three = |t: &mut DeviceTensor<f32>,
                 u: &mut DeviceTensor<f32>,
                 c: &mut DeviceTensor<f32>|
     -> Result<()> {
        api::apply2(
            gpu,
            ops::Rhs {
                op: ops::Div,
                s: 3.0f32,
            },
            t,
            &da,
        )?;
        api::apply2(
            gpu,
            ops::Rhs {
                op: ops::Div,
                s: 7.0f32,
            },
            u,
            &db,
        )?;
        api::apply3(gpu, ops::Mul, c, t, u)
    };
    three(&mut t, &mut u, &mut c)?;
    let got = c.to_vec(gpu)?;
    let mut want = vec![f32::NAN; n];
    cpu::apply3(
        fused,
        (&mut want, &a.layout),
        (&a.host, &a.layout),
        (&b.host, &b.layout),
    )?;
    let check = check_label(&got, &want);
    let ms = median_ms(gpu, |_| three(&mut t, &mut u, &mut c))?;
    report("three_kernel_divmul", "f32", n, 3 * n * 4, ms, &check);
    Ok(())
}
