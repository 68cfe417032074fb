//! Pointwise cases of three operands (`out = op(a, b)`): the buffer sets they rotate through,
//! the typed launch, and the framework path through DLPack and run-time dispatch; each
//! checked against the CPU twin once and timed.

use super::data::Operand;
use super::report::{check_label, report};
use super::timing::{median_ms, ROTATE_BYTES};
#[cfg(feature = "dispatch")]
use strided_apply::ops;
use strided_apply::verify::Distance;
use strided_apply::{api, cpu, DeviceTensor, Elem, Gpu, Kernels3, Layout, Result};

/// Times `out = op(a, b)` for the given layouts and checks one result against the CPU twin;
/// all three of one element type, whose name is the dtype label.
pub(super) fn bench3<Op, T>(
    gpu: &Gpu,
    case: &str,
    op: Op,
    out: &Layout,
    a: &Operand<T>,
    b: &Operand<T>,
    poison: T,
) -> Result<()>
where
    Op: Kernels3<T, T, T> + Copy,
    T: Elem + Distance,
{
    bench3_typed(gpu, case, T::NAME, op, out, a, b, poison)
}

/// Device copies of `a`, `b` and a poisoned output, as many sets as rotate through
/// [`ROTATE_BYTES`], and the bytes one launch moves.
pub(super) type Sets<O, A, B> = Vec<(DeviceTensor<A>, DeviceTensor<B>, DeviceTensor<O>)>;
pub(super) fn operand_sets<O: Elem, A: Elem, B: Elem>(
    gpu: &Gpu,
    out: &Layout,
    a: &Operand<A>,
    b: &Operand<B>,
    poison: O,
) -> Result<(usize, Sets<O, A, B>)> {
    let n = out.numel();
    let bytes = n * size_of::<O>()
        + a.layout.numel().min(n) * size_of::<A>()
        + b.layout.numel().min(n) * size_of::<B>();
    let sets = ROTATE_BYTES.div_ceil(bytes.max(1)).clamp(1, 64);
    let mut tensors = Vec::new();
    for _ in 0..sets {
        let da = DeviceTensor::from_slice(gpu, &a.host, &[a.host.len()])?
            .with_layout(a.layout.clone())?;
        let db = DeviceTensor::from_slice(gpu, &b.host, &[b.host.len()])?
            .with_layout(b.layout.clone())?;
        let dc = DeviceTensor::from_slice(gpu, &vec![poison; n], &[n])?.with_layout(out.clone())?;
        tensors.push((da, db, dc));
    }
    Ok((bytes, tensors))
}

/// [`bench3`] over distinct element types (out `O`, inputs `A` and `B`), reported under the
/// dtype label `dtype`.
#[allow(clippy::too_many_arguments)]
pub(super) fn bench3_typed<Op, O, A, B>(
    gpu: &Gpu,
    case: &str,
    dtype: &str,
    op: Op,
    out: &Layout,
    a: &Operand<A>,
    b: &Operand<B>,
    poison: O,
) -> Result<()>
where
    Op: Kernels3<O, A, B> + Copy,
    O: Elem + Distance,
    A: Elem,
    B: Elem,
{
    let n = out.numel();
    let (bytes, mut tensors) = operand_sets(gpu, out, a, b, poison)?;
    let sets = tensors.len();
    let (da, db, dc) = &mut tensors[0];
    api::apply3(gpu, op, dc, da, db)?;
    let got = dc.buffer_to_vec(gpu)?;
    let mut want = vec![poison; n];
    cpu::apply3(
        op,
        (&mut want, out),
        (&a.host, &a.layout),
        (&b.host, &b.layout),
    )?;
    let check = check_label(&got, &want);
    let ms = median_ms(gpu, |i| {
        let (da, db, dc) = &mut tensors[i % sets];
        api::apply3(gpu, op, dc, da, db)
    })?;
    report(case, dtype, n, bytes, ms, &check);
    Ok(())
}

#[cfg(feature = "dispatch")]
/// [`bench3`]'s f32 `add` through the framework path: every tensor exported as DLPack
/// (`to_dlpack`) and imported back (`Dlpack::from_versioned`), launched by run-time dispatch
/// (`DynOp`) over the imported operands. Same rotation, timing and check as `bench3`.
pub(super) fn bench3_dlpack(
    gpu: &Gpu,
    case: &str,
    out: &Layout,
    a: &Operand<f32>,
    b: &Operand<f32>,
) -> Result<()> {
    use strided_apply::dispatch::DynOp;
    use strided_apply::dlpack::Dlpack;
    use strided_apply::ElemType::F32;
    let n = out.numel();
    let import = |t: &DeviceTensor<f32>| -> Result<Dlpack> {
        // SAFETY: `to_dlpack` gives an owned managed tensor, handed over at once.
        unsafe { Dlpack::from_versioned(t.to_dlpack(gpu)?) }
    };
    let (bytes, sets) = operand_sets(gpu, out, a, b, f32::NAN)?;
    // The imports hold the buffers (the exports' references) until the end.
    let tensors = sets
        .into_iter()
        .map(|(da, db, dc)| Ok((import(&da)?, import(&db)?, import(&dc)?, dc)))
        .collect::<Result<Vec<_>>>()?;
    let sets = tensors.len();
    let op = DynOp::new("add", &[F32, F32, F32], &[])?;
    let launch = |i: usize| -> Result<()> {
        let (a, b, c, _) = &tensors[i % sets];
        // SAFETY: the imported tensors are this Gpu's live buffers, held by `tensors`.
        unsafe {
            op.launch(
                gpu,
                None,
                c.raw_on(gpu, "out")?,
                &[a.raw_on(gpu, "a")?, b.raw_on(gpu, "b")?],
            )
        }
    };
    launch(0)?;
    let got = tensors[0].3.buffer_to_vec(gpu)?;
    let mut want = vec![f32::NAN; n];
    cpu::apply3(
        ops::Add,
        (&mut want, out),
        (&a.host, &a.layout),
        (&b.host, &b.layout),
    )?;
    let check = check_label(&got, &want);
    let ms = median_ms(gpu, launch)?;
    report(case, "f32", n, bytes, ms, &check);
    Ok(())
}
