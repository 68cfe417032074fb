//! Copies (groups `permute_copy`, `cast` and the copy ceiling): device-to-device copies,
//! the permuted copy and the casts, each checked and timed.

use super::data::{dense, rand_bf16, rand_f32, random, Operand};
use super::harness::Bench;
use super::report::{check_label, report};
use super::timing::median_ms;
use strided_apply::verify::Distance;
use strided_apply::{api, bf16, cpu, ops, DeviceTensor, Elem, Gpu, Kernels2, Layout, Result};

/// Times `out = a` through `apply2(Cast)` (a strided copy when `O` is `A`, a conversion
/// otherwise) and checks one result against the CPU twin. The dtype label is the type's name
/// for a copy and `A->O` for a conversion (`f32->bf16`).
pub(super) fn bench_copy<O: Elem + Distance, A: Elem>(
    gpu: &Gpu,
    case: &str,
    out: &Layout,
    a: &Operand<A>,
    poison: O,
) -> Result<()>
where
    ops::Cast: Kernels2<O, A>,
{
    let n = out.numel();
    let da =
        DeviceTensor::from_slice(gpu, &a.host, &[a.host.len()])?.with_layout(a.layout.clone())?;
    let mut dc = DeviceTensor::from_slice(gpu, &vec![poison; n], &[n])?.with_layout(out.clone())?;
    api::apply2(gpu, ops::Cast, &mut dc, &da)?;
    let got = dc.buffer_to_vec(gpu)?;
    let mut want = vec![poison; n];
    cpu::apply2(ops::Cast, (&mut want, out), (&a.host, &a.layout))?;
    let check = check_label(&got, &want);
    let ms = median_ms(gpu, |_| api::apply2(gpu, ops::Cast, &mut dc, &da))?;
    let dtype = if O::NAME == A::NAME {
        O::NAME.to_string()
    } else {
        format!("{}->{}", A::NAME, O::NAME)
    };
    let bytes = n * (size_of::<O>() + size_of::<A>());
    report(case, &dtype, n, bytes, ms, &check);
    Ok(())
}

/// A device-to-device copy of `n` random elements of `T`, reported as `case`.
pub(super) fn bench_d2d<T: Elem>(
    gpu: &Gpu,
    case: &str,
    n: usize,
    seed: u64,
    f: impl Fn(u64) -> T,
) -> Result<()> {
    let src = DeviceTensor::from_slice(gpu, &random(n, seed, f), &[n])?;
    let dst = DeviceTensor::<T>::zeros(gpu, &[n])?;
    let bytes = n * size_of::<T>();
    let ms = median_ms(gpu, |_| dst.buffer().copy_from(gpu, src.buffer(), bytes))?;
    report(case, T::NAME, n, 2 * bytes, ms, "-");
    Ok(())
}

/// Ceiling: 1 GiB device-to-device copy (every run), and the copy of the same bytes as the
/// u8 broadcast row and the bf16 permuted copy when either runs.
pub(super) fn copy_ceiling(bench: &Bench) -> Result<()> {
    let (gpu, quick) = (&bench.gpu, bench.quick);
    let n = if quick { 1 << 24 } else { 1 << 28 };
    bench_d2d(gpu, "d2d_copy", n, 1, rand_f32)?;
    // A device-to-device copy of 256 MiB: the same bytes as the u8 broadcast row and the
    // bf16 permuted copy (2^28 bytes read, 2^28 written), the bound of a case that reads and
    // writes equal streams of that size (a copy of 1 GiB above runs longer, and its DRAM
    // sees the same read/write mix).
    if bench.wants("broadcast_row") || bench.wants("permute_copy") {
        bench_d2d(gpu, "d2d_copy_same_bytes", n, 2, |x| x as u8)?;
    }
    Ok(())
}

/// Permuted copy: (64,64,128,256) permuted (3,1,0,2) into a dense tensor.
pub(super) fn permute_copy(bench: &Bench) -> Result<()> {
    let (gpu, quick) = (&bench.gpu, bench.quick);
    let shape = if quick {
        [16, 16, 32, 64]
    } else {
        [64, 64, 128, 256]
    };
    let src = dense(&shape, 14, rand_f32)?;
    let perm = Operand {
        layout: src.layout.permute(&[3, 1, 0, 2])?,
        host: src.host,
    };
    let out = Layout::contiguous(perm.layout.shape())?;
    bench_copy(gpu, "permute_copy", &out, &perm, f32::NAN)?;
    let src16 = dense(&shape, 38, rand_bf16)?;
    let perm16 = Operand {
        layout: src16.layout.permute(&[3, 1, 0, 2])?,
        host: src16.host,
    };
    bench_copy(gpu, "permute_copy", &out, &perm16, bf16::NAN)?;
    Ok(())
}

/// Contiguous casts, big × big elements, both ways between f32 and bf16.
pub(super) fn casts(bench: &Bench) -> Result<()> {
    let (gpu, big) = (&bench.gpu, bench.big);
    let n = big * big;
    let x = dense(&[n], 39, rand_f32)?;
    bench_copy(gpu, "cast", &x.layout.clone(), &x, bf16::NAN)?;
    let x = dense(&[n], 40, rand_bf16)?;
    bench_copy(gpu, "cast", &x.layout.clone(), &x, f32::NAN)?;
    Ok(())
}
