//! GPU benchmark: `cargo run --release --bin bench [-- --quick] [--only CASE]`, or
//! `-- --cold LABEL` for the cold start of a fresh process (driver and context, first
//! module load, first launch; see `scripts/gpu-run cold`); `-- --cold-expr dense|broadcast`
//! for the expression engine's (the first expression of a fresh process). One JSON line per case on stdout: GB/s with bytes = every input read once + the output written
//! once, timed with CUDA events, median of 25 runs after warm-up, random inputs, outputs poisoned first and
//! checked against the CPU twin once. Buffers that fit in L2 are rotated. Each operand counts
//! its own element size, so mixed-type cases (`bf16*f32->f32`) and casts (`f32->bf16`) count
//! what they move. Reductions (groups `reduce`, `reduce_rows`, `reduce_cols_1b`,
//! `reduce_cols_slot`, `reduce_rows_expr`) count every input read once (an expression
//! reduction's broadcast `[rows, 1]` operand once per element it holds) and report the
//! first input's elements; their outputs are not counted.
//! `--release-pool`: the device's memory pool gives freed memory back at every
//! synchronisation (the driver's default) instead of keeping it (the library's;
//! `Gpu::set_memory_cache_limit`), for comparison. `--diet`: every family whose op has an
//! expression program, its kernel against its program (`bench/diet.rs`; squares of 8192²,
//! 2048² with `--quick`; `--only` filters families).
//! `STRIDED_APPLY_BENCH_QUEUED=1`: each timed call waits in the stream behind a 50 µs spin
//! kernel, so that the events exclude the host's submission of the call (see `load_spin`).

use std::time::Instant;
use strided_apply::cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};
use strided_apply::gpu_kernels::ops::Sub;
use strided_apply::gpu_kernels::reduce::{
    Amax, Argmax, MapReduce, Mean, OutOf, ReduceKernels, Sum, SumSq,
};
use strided_apply::verify::{first_mismatch, Distance};
use strided_apply::{
    api, bf16, cpu, f16, gpu_kernels, ops, reduce, stencil, DeviceTensor, Elem, Gpu, Kernels2,
    Kernels3, Layout, Result,
};

#[cfg(feature = "dispatch")]
#[path = "bench/diet.rs"]
mod diet;
#[path = "bench/opset.rs"]
mod opset;
#[path = "bench/tier1.rs"]
mod tier1;

const REPS: usize = 25;
/// Rotate among enough buffer sets to move at least this many bytes per round.
const ROTATE_BYTES: usize = 512 << 20;

fn random<T: Elem>(len: usize, seed: u64, f: impl Fn(u64) -> T) -> Vec<T> {
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
fn cpu_sum(a: &[f32], b: &[f32]) -> Vec<f32> {
    a.iter().zip(b).map(|(x, y)| x + y).collect()
}
fn rand_f32(x: u64) -> f32 {
    (x >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
}
/// Uniform in [-1, 1], rounded once to bf16.
fn rand_bf16(x: u64) -> bf16 {
    bf16::from_f32(rand_f32(x))
}
/// Uniform in [-1, 1], rounded once to f16.
fn rand_f16(x: u64) -> f16 {
    f16::from_f32(rand_f32(x))
}

/// The case groups and the names of their cases. `--only NAME` runs exactly the group named
/// NAME when NAME is a group's name, and otherwise every group with a case whose name contains
/// NAME. Plain substring matching is ambiguous for the group names `scripts/gpu-run
/// bench-cases` passes: `broadcast_row` is inside `mixed_broadcast_row`, and `cast` is inside
/// `broadcast_row`, so one process would run (and report) another group's cases too.
/// `benches/peers/torch_bench.py` keeps the same table and rule.
const GROUPS: &[(&str, &[&str])] = &[
    ("contiguous_add", &["contiguous_add"]),
    ("broadcast_row", &["broadcast_row"]),
    ("transposed", &["transposed", "transposed_dlpack"]),
    ("slice_step2", &["slice_step2"]),
    ("permute_copy", &["permute_copy"]),
    ("cast", &["cast"]),
    ("mixed", &["mixed_broadcast_row", "mixed_contiguous"]),
    ("divmul", &["fused_divmul", "three_kernel_divmul"]),
    ("stencil", &["stencil_laplacian2", "stencil_laplacian3"]),
    (
        "reduce",
        &[
            "sum_dim1_f32",
            "sum_dim0_f32",
            "sum_all_f32",
            "sum_perm13_f32",
            "sum_dim1_bf16",
            "amax_dim1_f32",
            "argmax_dim1_f32",
            "sumsq_all_f32",
            "sqdiff_all_f32",
        ],
    ),
    (
        "reduce_rows",
        &[
            "sum_rows16_f32",
            "amax_rows16_f32",
            "mean_rows16_f32",
            "argmax_rows16_f32",
            "sumsq_rows16_f32",
            "sum_rows16_bf16",
            "amax_rows16_bf16",
            "mean_rows16_bf16",
            "argmax_rows16_bf16",
            "sumsq_rows16_bf16",
            "sum_rows64_f32",
            "amax_rows64_f32",
            "mean_rows64_f32",
            "argmax_rows64_f32",
            "sumsq_rows64_f32",
            "sum_rows64_bf16",
            "amax_rows64_bf16",
            "mean_rows64_bf16",
            "argmax_rows64_bf16",
            "sumsq_rows64_bf16",
            "sum_rows128_f32",
            "amax_rows128_f32",
            "mean_rows128_f32",
            "argmax_rows128_f32",
            "sumsq_rows128_f32",
            "sum_rows128_bf16",
            "amax_rows128_bf16",
            "mean_rows128_bf16",
            "argmax_rows128_bf16",
            "sumsq_rows128_bf16",
            "sum_rows512_f32",
            "amax_rows512_f32",
            "mean_rows512_f32",
            "argmax_rows512_f32",
            "sumsq_rows512_f32",
            "sum_rows512_bf16",
            "amax_rows512_bf16",
            "mean_rows512_bf16",
            "argmax_rows512_bf16",
            "sumsq_rows512_bf16",
            "sum_rows1024_f32",
            "amax_rows1024_f32",
            "mean_rows1024_f32",
            "argmax_rows1024_f32",
            "sumsq_rows1024_f32",
            "sum_rows1024_bf16",
            "amax_rows1024_bf16",
            "mean_rows1024_bf16",
            "argmax_rows1024_bf16",
            "sumsq_rows1024_bf16",
            "sum_rows4096_f32",
            "amax_rows4096_f32",
            "mean_rows4096_f32",
            "argmax_rows4096_f32",
            "sumsq_rows4096_f32",
            "sum_rows4096_bf16",
            "amax_rows4096_bf16",
            "mean_rows4096_bf16",
            "argmax_rows4096_bf16",
            "sumsq_rows4096_bf16",
            "sum_rows32768_f32",
            "amax_rows32768_f32",
            "mean_rows32768_f32",
            "argmax_rows32768_f32",
            "sumsq_rows32768_f32",
            "sum_rows32768_bf16",
            "amax_rows32768_bf16",
            "mean_rows32768_bf16",
            "argmax_rows32768_bf16",
            "sumsq_rows32768_bf16",
        ],
    ),
    (
        "reduce_cols_1b",
        &[
            "all_dim0_Bool",
            "any_dim0_Bool",
            "all_dim0_u8",
            "any_dim0_u8",
            "all_dim0_i32",
            "any_dim0_i32",
            "all_dim0_u32",
            "any_dim0_u32",
            "all_dim0_i64",
            "any_dim0_i64",
            "all_dim0_f32",
            "any_dim0_f32",
            "all_dim0_f64",
            "any_dim0_f64",
            "all_dim0_f16",
            "any_dim0_f16",
            "all_dim0_bf16",
            "any_dim0_bf16",
            "sum_dim0_u8",
            "amax_dim0_u8",
            "amin_dim0_u8",
            "prod_dim0_u8",
        ],
    ),
    (
        "reduce_cols_slot",
        &[
            "amax_dim0_f32",
            "amin_dim0_f32",
            "amax_dim0odd_f32",
            "amin_dim0odd_f32",
            "amax_dim0_f64",
            "amin_dim0_f64",
            "amax_dim0odd_f64",
            "amin_dim0odd_f64",
            "amax_dim0_f16",
            "amin_dim0_f16",
            "amax_dim0odd_f16",
            "amin_dim0odd_f16",
            "amax_dim0_bf16",
            "amin_dim0_bf16",
            "amax_dim0odd_bf16",
            "amin_dim0odd_bf16",
            "any_dim0odd_Bool",
            "all_dim0odd_Bool",
            "any_dim0odd_u8",
            "all_dim0odd_u8",
            "all_dim0odd_f16",
            "any_dim0odd_f16",
            "all_dim0odd_bf16",
            "any_dim0odd_bf16",
            "sum_dim0odd_u8",
            "amax_dim0odd_u8",
            "amin_dim0odd_u8",
            "prod_dim0odd_u8",
        ],
    ),
    (
        "reduce_rows_expr",
        &[
            "sumexp_rows128_f32",
            "sqdev_rows128_f32",
            "sumexp_rows128_bf16",
            "sqdev_rows128_bf16",
            "sumexp_rows1024_f32",
            "sqdev_rows1024_f32",
            "sumexp_rows1024_bf16",
            "sqdev_rows1024_bf16",
            "sumexp_rows4096_f32",
            "sqdev_rows4096_f32",
            "sumexp_rows4096_bf16",
            "sqdev_rows4096_bf16",
            "sumexp_rows32768_f32",
            "sqdev_rows32768_f32",
            "sumexp_rows32768_bf16",
            "sqdev_rows32768_bf16",
            "sumexp_cols1024_f32",
            "sqdev_cols1024_f32",
            "sumexp_cols1024_bf16",
            "sqdev_cols1024_bf16",
            "sumexp_cols32768_f32",
            "sqdev_cols32768_f32",
            "sumexp_cols32768_bf16",
            "sqdev_cols32768_bf16",
        ],
    ),
    (
        "expr",
        &[
            "expr_contiguous_add",
            "expr_transposed",
            "expr_broadcast_row",
            "expr_contiguous_add_u8",
            "expr_seed_dense",
            "expr_seed_broadcast",
            "expr_seed_broadcast_unhoisted",
        ],
    ),
    (
        "opset",
        &[
            "opset_erf_broadcast_row",
            "opset_where_isnan_f16_transposed",
            "opset_add_i8_contiguous",
            "opset_add_bf16_f32_broadcast_row",
            "opset_gelu_tanh_bf16_contiguous",
            "opset_gelu_tanh_bf16_transposed",
        ],
    ),
    ("tier1", &["t1_chain12", "t1_seed_f64_broadcast"]),
    (
        "tiny",
        &[
            "tiny_add_host_us",
            "tiny_expr_host_us",
            "tiny_dispatch_host_us",
            "tiny_graph_per_op_us",
        ],
    ),
];

/// Whether `--only` (`only`) selects `group` (see [`GROUPS`]).
fn selected(only: Option<&str>, group: &str) -> bool {
    let Some(only) = only else { return true };
    if GROUPS.iter().any(|(g, _)| *g == only) {
        return group == only;
    }
    GROUPS
        .iter()
        .filter(|(g, _)| *g == group)
        .any(|(_, cases)| cases.iter().any(|c| c.contains(only)))
}

/// Host µs per call of `f`: the median over 50 bursts of 200 calls, each burst started from
/// an idle queue (host time alone, never throttled by a full launch queue).
fn burst_us(gpu: &Gpu, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut v: Vec<f64> = (0..50)
        .map(|_| -> Result<f64> {
            gpu.synchronize()?;
            let t = Instant::now();
            for _ in 0..200 {
                f()?;
            }
            Ok(t.elapsed().as_secs_f64() * 1e6 / 200.0)
        })
        .collect::<Result<_>>()?;
    v.sort_by(f64::total_cmp);
    Ok(v[v.len() / 2])
}

fn median_ms(gpu: &Gpu, mut f: impl FnMut(usize) -> Result<()>) -> Result<f64> {
    for i in 0..3 {
        f(i)?;
    }
    let mut t: Vec<f64> = (0..REPS)
        .map(|i| {
            queue_behind_spin(gpu)?;
            gpu.time_ms(|| f(i)).map(|x| x as f64)
        })
        .collect::<Result<_>>()?;
    t.sort_by(f64::total_cmp);
    Ok(t[REPS / 2])
}

/// A kernel that spins for `ns` nanoseconds of the global timer (one thread).
const SPIN_PTX: &str = r#"
.version 7.0
.target sm_70
.address_size 64
.visible .entry spin(.param .u64 ns)
{
    .reg .u64 %t0, %t, %d, %n;
    .reg .pred %p;
    ld.param.u64 %n, [ns];
    mov.u64 %t0, %globaltimer;
WAIT:
    mov.u64 %t, %globaltimer;
    sub.u64 %d, %t, %t0;
    setp.lt.u64 %p, %d, %n;
    @%p bra WAIT;
    ret;
}
"#;

/// How long the spin before each timed call lasts: longer than any call's submission.
const SPIN_NS: u64 = 50_000;

/// The spin kernel, when `STRIDED_APPLY_BENCH_QUEUED` asks for queued timing.
static SPIN: std::sync::OnceLock<CudaFunction> = std::sync::OnceLock::new();

/// `STRIDED_APPLY_BENCH_QUEUED=1`: every timed call waits in the stream behind a 50 µs spin,
/// so that its events time the GPU's work, not the host's submission of the call (the
/// PyTorch peer does the same with `torch.cuda._sleep`). Default: events around the call
/// with the stream idle, the submission included.
fn load_spin(gpu: &Gpu) -> Result<bool> {
    let queued =
        std::env::var("STRIDED_APPLY_BENCH_QUEUED").is_ok_and(|v| !v.is_empty() && v != "0");
    if !queued {
        return Ok(false);
    }
    let f = gpu
        .context()
        .load_module(strided_apply::cudarc::nvrtc::Ptx::from_src(SPIN_PTX))
        .and_then(|module| module.load_function("spin"))
        .map_err(spin_error)?;
    let _ = SPIN.set(f);
    Ok(true)
}

fn spin_error(source: strided_apply::cudarc::driver::DriverError) -> strided_apply::Error {
    strided_apply::Error::Launch {
        kernel: "spin",
        source,
    }
}

fn queue_behind_spin(gpu: &Gpu) -> Result<()> {
    let Some(f) = SPIN.get() else {
        return Ok(());
    };
    let cfg = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (1, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: `spin` takes one u64 and touches no memory.
    unsafe { gpu.stream().launch_builder(f).arg(&SPIN_NS).launch(cfg) }.map_err(spin_error)?;
    Ok(())
}

/// `GPU=CPU` when the GPU result equals the CPU twin's bit for bit, else the first mismatch.
fn check_label<T: Distance>(got: &[T], want: &[T]) -> String {
    match first_mismatch(got, want, ops::Tolerance::Exact) {
        None => "GPU=CPU".to_string(),
        Some(m) => format!("MISMATCH {m}"),
    }
}

/// [`check_label`] for results within `max_ulp` of the CPU twin (transcendentals: each side
/// within the library's ulp bounds, not bit-identical): `GPU~CPU (max k ulp)` when some
/// differ by at most `max_ulp`.
fn check_label_ulp<T: Distance>(got: &[T], want: &[T], max_ulp: u64) -> String {
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

fn report(case: &str, dtype: &str, elements: usize, bytes: usize, ms: f64, check: &str) {
    println!(
        "{{\"impl\":\"strided-apply\",\"case\":\"{case}\",\"dtype\":\"{dtype}\",\"elements\":{elements},\"bytes\":{bytes},\"ms\":{ms:.5},\"gbps\":{:.1},\"check\":\"{check}\"}}",
        bytes as f64 / ms / 1e6
    );
}

struct Operand<T> {
    host: Vec<T>,
    layout: Layout,
}

/// Times `out = op(a, b)` for the given layouts and checks one result against the CPU twin;
/// all three of one element type, whose name is the dtype label.
fn bench3<Op, T>(
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
type Sets<O, A, B> = Vec<(DeviceTensor<A>, DeviceTensor<B>, DeviceTensor<O>)>;
fn operand_sets<O: Elem, A: Elem, B: Elem>(
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
fn bench3_typed<Op, O, A, B>(
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
fn bench3_dlpack(
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

/// Times `out = a` through `apply2(Cast)` (a strided copy when `O` is `A`, a conversion
/// otherwise) and checks one result against the CPU twin. The dtype label is the type's name
/// for a copy and `A->O` for a conversion (`f32->bf16`).
fn bench_copy<O: Elem + Distance, A: Elem>(
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

/// Times `out = op(neighbours of input)` over a dense random f32 tensor of `shape` and
/// checks the result against the CPU twin (bytes: input read once + output written once).
fn bench_stencil<S: gpu_kernels::stencil::StencilKernels<f32>>(
    gpu: &Gpu,
    case: &str,
    op: S,
    shape: &[usize],
    axes: &[usize],
) -> Result<()> {
    let n: usize = shape.iter().product();
    let x = dense(shape, 22, rand_f32)?;
    let d_x = DeviceTensor::from_slice(gpu, &x.host, shape)?;
    let mut out = DeviceTensor::from_slice(gpu, &vec![f32::NAN; n], shape)?;
    stencil::apply(gpu, op, &mut out, &d_x, axes)?;
    let got = out.to_vec(gpu)?;
    let mut want = vec![f32::NAN; n];
    stencil::apply_cpu(op, (&mut want, &x.layout), (&x.host, &x.layout), axes)?;
    let check = check_label(&got, &want);
    let ms = median_ms(gpu, |_| stencil::apply(gpu, op, &mut out, &d_x, axes))?;
    report(case, "f32", n, 2 * n * 4, ms, &check);
    Ok(())
}

/// Times `out = op(inputs over axes)` through `reduce::reduce` (one input) or
/// `reduce::map_reduce` (two) into a poisoned output of shape `out_shape` and checks one
/// result against the CPU twin (exact: both reduce in one order). Bytes: the inputs read
/// once (the output is not counted); elements: one input's. Inputs that fit in L2 are
/// rotated.
#[allow(clippy::too_many_arguments)]
fn bench_reduce<S, T, const K: usize>(
    gpu: &Gpu,
    case: &str,
    op: S,
    out_shape: &[usize],
    inputs: [&Operand<T>; K],
    axes: &[usize],
    poison: OutOf<S, T, K>,
) -> Result<()>
where
    S: ReduceKernels<T, K>,
    T: Elem,
    OutOf<S, T, K>: Elem + Distance,
{
    let out = Layout::contiguous(out_shape)?;
    let m = out.numel();
    let n = inputs[0].layout.numel();
    let bytes = n * size_of::<T>() * K;
    let sets = ROTATE_BYTES.div_ceil(bytes.max(1)).clamp(1, 64);
    let mut tensors = Vec::with_capacity(sets);
    for _ in 0..sets {
        let di = inputs
            .iter()
            .map(|x| {
                DeviceTensor::from_slice(gpu, &x.host, &[x.host.len()])?
                    .with_layout(x.layout.clone())
            })
            .collect::<Result<Vec<_>>>()?;
        let dout =
            DeviceTensor::from_slice(gpu, &vec![poison; m], &[m])?.with_layout(out.clone())?;
        tensors.push((di, dout));
    }
    let run = |di: &[DeviceTensor<T>], dout: &mut DeviceTensor<OutOf<S, T, K>>| {
        let di: [&DeviceTensor<T>; K] = std::array::from_fn(|k| &di[k]);
        reduce::reduce_n(gpu, op, dout, di, axes)
    };
    let (di, dout) = &mut tensors[0];
    run(di, dout)?;
    let got = dout.buffer_to_vec(gpu)?;
    let mut want = vec![poison; m];
    let host = inputs.map(|x| (&x.host[..], &x.layout));
    reduce::reduce_n_cpu(op, (&mut want, &out), host, axes)?;
    let check = check_label(&got, &want);
    let ms = median_ms(gpu, |i| {
        let (di, dout) = &mut tensors[i % sets];
        run(di, dout)
    })?;
    report(case, T::NAME, n, bytes, ms, &check);
    Ok(())
}

/// A device-to-device copy of `n` random elements of `T`, reported as `case`.
fn bench_d2d<T: Elem>(
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

fn dense<T: Elem>(shape: &[usize], seed: u64, f: impl Fn(u64) -> T) -> Result<Operand<T>> {
    let layout = Layout::contiguous(shape)?;
    Ok(Operand {
        host: random(layout.numel(), seed, f),
        layout,
    })
}

/// One cold start, in this (fresh) process: `open` (driver and context), the first f32
/// `apply3(Add)` with its family's decode and module load, and a second launch.
fn cold_start(label: &str) -> Result<()> {
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let gpu = strided_apply::open(0)?;
    let open_ms = ms(t);
    let n = 1 << 20;
    let a = DeviceTensor::from_slice(&gpu, &random(n, 1, rand_f32), &[n])?;
    let mut out = DeviceTensor::from_slice(&gpu, &vec![f32::NAN; n], &[n])?;
    gpu.synchronize()?;
    let t = Instant::now();
    api::apply3(&gpu, ops::Add, &mut out, &a, &a)?;
    gpu.synchronize()?;
    let first_ms = ms(t);
    let t = Instant::now();
    api::apply3(&gpu, ops::Add, &mut out, &a, &a)?;
    gpu.synchronize()?;
    let second_ms = ms(t);
    let want: Vec<f32> = a.to_vec(&gpu)?.iter().map(|x| x + x).collect();
    let check = check_label(&out.to_vec(&gpu)?, &want);
    let (target, loaded, decode_ms, load_ms) = module_loads(&gpu, "gpu-kernels");
    println!(
        "{{\"impl\":\"strided-apply\",\"case\":\"cold_start\",\"label\":\"{label}\",\"target\":\"{target}\",\"open_ms\":{open_ms:.2},\"first_apply3_ms\":{first_ms:.3},\"decode_ms\":{decode_ms:.3},\"load_ms\":{load_ms:.3},\"second_apply3_ms\":{second_ms:.3},\"families_loaded\":{loaded:?},\"check\":\"{check}\"}}"
    );
    Ok(())
}

/// What `gpu` has loaded of `module` so far: the chosen target, the families in load order,
/// and their decoding and module-load milliseconds, summed.
fn module_loads(gpu: &Gpu, module: &str) -> (String, Vec<&'static str>, f64, f64) {
    let info = gpu.module_info();
    let Some(m) = info.iter().find(|m| m.module == module) else {
        return ("none".into(), Vec::new(), 0.0, 0.0);
    };
    let target = m.chosen.map_or("none".into(), |t| t.to_string());
    let families = m.loaded.iter().map(|l| l.family).collect();
    let (decode, load) = m
        .loaded
        .iter()
        .fold((0.0, 0.0), |(d, l), x| (d + x.decode_ms, l + x.load_ms));
    (target, families, decode, load)
}

/// One cold start of the expression engine, in this (fresh) process, after `open`: the
/// first expression of the process from its text to the end of a synchronisation (parse,
/// compile, the interpreter family's decode and module load, the launch), `first` being
/// `dense` (the seed expression over three dense f32 inputs of 2^20) or `broadcast` (the
/// same over a row, a column and a full 1024² input, hoisted: its first call also makes
/// the temporaries); then a second call of it, and the first call of a second, new
/// expression (`a*b + c`) on the same inputs. The interpreter module's decode and load
/// times and its families loaded; the first result against the CPU twin.
fn cold_expr(first: &str) -> Result<()> {
    use strided_apply::expr::{Arg, DeviceArg, Expr, HostTensor, HostTensorMut};
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let gpu = strided_apply::open(0)?;
    let open_ms = ms(t);
    let side = 1024;
    let shapes: [&[usize]; 3] = match first {
        "dense" => [&[side, side], &[side, side], &[side, side]],
        "broadcast" => [&[1, side], &[side, 1], &[side, side]],
        _ => {
            eprintln!("bench: --cold-expr takes dense or broadcast, not `{first}`");
            std::process::exit(2);
        }
    };
    let hosts: Vec<Vec<f32>> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| random(s.iter().product(), 40 + i as u64, |x| rand_f32(x).abs()))
        .collect();
    let dev = hosts
        .iter()
        .zip(shapes)
        .map(|(h, s)| DeviceTensor::from_slice(&gpu, h, s))
        .collect::<Result<Vec<_>, _>>()?;
    let n = side * side;
    let mut out = DeviceTensor::from_slice(&gpu, &vec![f32::NAN; n], &[side, side])?;
    let args = [
        ("a", Arg::Tensor(gpu_kernels::elem::ElemType::F32)),
        ("b", Arg::Tensor(gpu_kernels::elem::ElemType::F32)),
        ("c", Arg::Tensor(gpu_kernels::elem::ElemType::F32)),
    ];
    let ins: Vec<DeviceArg> = dev.iter().map(DeviceArg::from).collect();
    gpu.synchronize()?;
    let text = "sin(a*b) + sqrt(c) + cos(a)/log(cos(b)+2)";
    let t = Instant::now();
    let f = Expr::parse(text)?.compile(&args, None)?;
    f.run(&gpu, &mut out, &ins, &[])?;
    gpu.synchronize()?;
    let first_ms = ms(t);
    let got = out.buffer_to_vec(&gpu)?;
    let t = Instant::now();
    f.run(&gpu, &mut out, &ins, &[])?;
    gpu.synchronize()?;
    let second_ms = ms(t);
    let t = Instant::now();
    let g = Expr::parse("a*b + c")?.compile(&args, None)?;
    g.run(&gpu, &mut out, &ins, &[])?;
    gpu.synchronize()?;
    let new_expr_ms = ms(t);
    // The CPU twin of the first call.
    let layouts = shapes
        .iter()
        .map(|s| Layout::contiguous(s))
        .collect::<Result<Vec<_>, _>>()?;
    let out_layout = Layout::contiguous(&[side, side])?;
    let mut want = vec![f32::NAN; n];
    let f32t = gpu_kernels::elem::ElemType::F32;
    let host_ins: Vec<HostTensor> = hosts
        .iter()
        .zip(&layouts)
        .map(|(h, l)| HostTensor::new(bytemuck::cast_slice(h), f32t, l))
        .collect();
    f.run_cpu(
        HostTensorMut::new(bytemuck::cast_slice_mut(&mut want), f32t, &out_layout),
        &host_ins,
        &[],
    )?;
    // Transcendentals: within the library's ulp bounds of the CPU twin, not bit-identical.
    let max_ulp = got
        .iter()
        .zip(&want)
        .map(|(&g, &c)| f32::distance(g, c))
        .max()
        .unwrap_or(0);
    let check = if max_ulp <= 4 {
        format!("GPU~CPU (max {max_ulp} ulp)")
    } else {
        format!("MISMATCH (max {max_ulp} ulp)")
    };
    let (_, loaded, decode_ms, load_ms) = module_loads(&gpu, "strided-apply-expr");
    println!(
        "{{\"impl\":\"strided-apply\",\"case\":\"cold_expr\",\"first\":\"{first}\",\"open_ms\":{open_ms:.2},\"first_call_ms\":{first_ms:.3},\"decode_ms\":{decode_ms:.3},\"load_ms\":{load_ms:.3},\"second_call_ms\":{second_ms:.3},\"new_expression_ms\":{new_expr_ms:.3},\"families_loaded\":{loaded:?},\"check\":\"{check}\"}}"
    );
    Ok(())
}

/// What the command line asks for.
struct Args {
    /// `--quick`: smaller sizes.
    quick: bool,
    /// `--only NAME`: only the group NAME, or the groups with a case whose name contains NAME
    /// (see `GROUPS`); the copy ceiling always runs.
    only: Option<String>,
    /// `--cold LABEL`: one cold start in this process, nothing else.
    cold: Option<String>,
    /// `--cold-expr dense|broadcast`: one cold start of the expression engine, nothing else.
    cold_expr: Option<String>,
    /// `--release-pool`: the driver's default release threshold (freed memory goes back at
    /// every synchronisation) instead of the library's (the pool keeps it), for comparison.
    release_pool: bool,
    /// `--diet`: every family with an expression program, kernel against program
    /// (`bench/diet.rs`; `--only` filters families by name), nothing else.
    diet: bool,
}

impl Args {
    fn parse() -> Args {
        let args: Vec<String> = std::env::args().collect();
        let after = |flag: &str| args.iter().skip_while(|a| *a != flag).nth(1).cloned();
        Args {
            quick: args.iter().any(|a| a == "--quick"),
            only: after("--only"),
            cold: after("--cold"),
            cold_expr: after("--cold-expr"),
            release_pool: args.iter().any(|a| a == "--release-pool"),
            diet: args.iter().any(|a| a == "--diet"),
        }
    }
}

/// The device and the sizes every case group uses.
struct Bench {
    gpu: Gpu,
    quick: bool,
    only: Option<String>,
    /// The side of the square matrices.
    big: usize,
    /// A dense `big × big` layout.
    sq: Layout,
}

impl Bench {
    /// Opens device 0 as `args` ask and says so on stderr.
    fn open(args: &Args) -> Result<Bench> {
        // Families load on their first launch, inside each case's warm-up.
        let gpu = strided_apply::open(0)?;
        if args.release_pool {
            gpu.set_memory_cache_limit(0)?;
        }
        let queued = load_spin(&gpu)?;
        eprintln!(
            "bench: {} ({} SMs), pool {}, timing {}",
            gpu.name(),
            gpu.sm_count(),
            if args.release_pool {
                "releases"
            } else {
                "keeps"
            },
            if queued {
                "queued behind a spin"
            } else {
                "around each call"
            }
        );
        let big = if args.quick { 4096 } else { 16384 };
        Ok(Bench {
            gpu,
            quick: args.quick,
            only: args.only.clone(),
            big,
            sq: Layout::contiguous(&[big, big])?,
        })
    }

    /// Whether `--only` selects `group` (see [`GROUPS`]).
    fn wants(&self, group: &str) -> bool {
        selected(self.only.as_deref(), group)
    }
}

/// A runner of one or more case groups.
type Run = fn(&Bench) -> Result<()>;
/// The runners in the order they run, each with its groups (see [`GROUPS`]): a runner runs
/// when `--only` selects one of its groups, and runs the selected ones only.
const RUNS: &[(&[&str], Run)] = &[
    (&["contiguous_add"], contiguous_add),
    // Broadcast row, transposed operand and step-2 slice share the dense operand `a`.
    (
        &["broadcast_row", "transposed", "slice_step2"],
        broadcast_transposed_sliced,
    ),
    (&["permute_copy"], permute_copy),
    (&["cast"], casts),
    (&["mixed"], mixed),
    (&["divmul"], divmul),
    (&["stencil"], stencils),
    (&["reduce"], reductions),
    (&["reduce_rows"], short_rows),
    (&["reduce_cols_1b"], cols_1b),
    (&["reduce_cols_slot"], cols_slot),
    (&["reduce_rows_expr"], short_rows_expr),
    (&["expr"], expressions),
    (&["opset"], opset::opset),
    (&["tier1"], tier1::tier1),
    (&["tiny"], tiny),
];

fn main() -> Result<()> {
    let args = Args::parse();
    if let Some(label) = &args.cold {
        return cold_start(label);
    }
    if let Some(first) = &args.cold_expr {
        return cold_expr(first);
    }
    let bench = Bench::open(&args)?;
    if args.diet {
        #[cfg(feature = "dispatch")]
        return diet::run(&bench.gpu, bench.big / 2, args.only.as_deref());
        #[cfg(not(feature = "dispatch"))]
        {
            eprintln!("bench: --diet needs the feature `dispatch`");
            return Ok(());
        }
    }
    copy_ceiling(&bench)?;
    for (groups, run) in RUNS {
        if groups.iter().any(|g| bench.wants(g)) {
            run(&bench)?;
        }
    }
    Ok(())
}

/// Ceiling: 1 GiB device-to-device copy (every run), and the copy of the same bytes as the
/// u8 broadcast row and the bf16 permuted copy when either runs.
fn copy_ceiling(bench: &Bench) -> Result<()> {
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

/// Contiguous add over sizes (f32), then f64, u8, bf16 and f16 over `big × big / 2` or
/// `big × big` elements.
fn contiguous_add(bench: &Bench) -> Result<()> {
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
fn broadcast_transposed_sliced(bench: &Bench) -> Result<()> {
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

/// `out = a + b` as a one-op expression on the interpreter's kernels (tier 0), after the
/// library's specialised kernel for the same operands in the same process (reported as
/// `<case>_specialised`); the expression's result is checked against the specialised
/// kernel's, bit for bit.
fn bench_expr_add<T: Elem + Distance>(
    gpu: &Gpu,
    case: &str,
    out: &Layout,
    a: &Operand<T>,
    b: &Operand<T>,
    poison: T,
) -> Result<()>
where
    ops::Add: Kernels3<T, T, T>,
{
    use strided_apply::expr::{Arg, DeviceArg, Expr};
    bench3(
        gpu,
        &format!("{case}_specialised"),
        ops::Add,
        out,
        a,
        b,
        poison,
    )?;
    let f = Expr::parse("a + b")?.compile(
        &[("a", Arg::Tensor(T::TYPE)), ("b", Arg::Tensor(T::TYPE))],
        None,
    )?;
    let n = out.numel();
    let (bytes, mut tensors) = operand_sets(gpu, out, a, b, poison)?;
    let sets = tensors.len();
    let (da, db, dc) = &mut tensors[0];
    f.run(
        gpu,
        dc,
        &[DeviceArg::from(&*da), DeviceArg::from(&*db)],
        &[],
    )?;
    let got = dc.buffer_to_vec(gpu)?;
    let mut want =
        DeviceTensor::from_slice(gpu, &vec![poison; n], &[n])?.with_layout(out.clone())?;
    api::apply3(gpu, ops::Add, &mut want, da, db)?;
    let check = match first_mismatch(&got, &want.buffer_to_vec(gpu)?, ops::Tolerance::Exact) {
        None => "expr=specialised".to_string(),
        Some(m) => format!("MISMATCH {m}"),
    };
    let ms = median_ms(gpu, |i| {
        let (da, db, dc) = &mut tensors[i % sets];
        f.run(
            gpu,
            dc,
            &[DeviceArg::from(&*da), DeviceArg::from(&*db)],
            &[],
        )
    })?;
    report(case, T::NAME, n, bytes, ms, &check);
    Ok(())
}

/// Expressions on the interpreter's kernels (tier 0) against the specialised kernels of the
/// same op in the same process, and the seed expression over three dense f32 inputs.
fn expressions(bench: &Bench) -> Result<()> {
    use strided_apply::expr::{Arg, DeviceArg, Expr};
    let (gpu, big, sq) = (&bench.gpu, bench.big, &bench.sq);
    let a = dense(&[big, big], 8, rand_f32)?;
    let b = dense(&[big, big], 14, rand_f32)?;
    bench_expr_add(gpu, "expr_contiguous_add", sq, &a, &b, f32::NAN)?;
    let bt = Operand {
        host: random(big * big, 12, rand_f32),
        layout: sq.transpose(0, 1)?,
    };
    bench_expr_add(gpu, "expr_transposed", sq, &a, &bt, f32::NAN)?;
    let a16 = dense(&[big, big], 34, rand_bf16)?;
    let row16 = dense(&[1, big], 35, rand_bf16)?;
    bench_expr_add(gpu, "expr_broadcast_row", sq, &a16, &row16, bf16::NAN)?;
    let a8 = dense(&[big, big], 10, |x| x as u8)?;
    let b8 = dense(&[big, big], 11, |x| (x >> 8) as u8)?;
    bench_expr_add(gpu, "expr_contiguous_add_u8", sq, &a8, &b8, 0x5a)?;
    // The seed expression, three dense f32 inputs (`big × big` each).
    let f = Expr::parse("sin(a*b) + sqrt(c) + cos(a)/log(cos(b)+2)")?.compile(
        &[
            ("a", Arg::Tensor(gpu_kernels::elem::ElemType::F32)),
            ("b", Arg::Tensor(gpu_kernels::elem::ElemType::F32)),
            ("c", Arg::Tensor(gpu_kernels::elem::ElemType::F32)),
        ],
        None,
    )?;
    let n = big * big;
    let c = dense(&[big, big], 15, |x| rand_f32(x).abs())?;
    let up = |o: &Operand<f32>| DeviceTensor::from_slice(gpu, &o.host, &[big, big]);
    let (da, db, dc) = (up(&a)?, up(&b)?, up(&c)?);
    let mut out = DeviceTensor::from_slice(gpu, &vec![f32::NAN; n], &[big, big])?;
    let ins = [
        DeviceArg::from(&da),
        DeviceArg::from(&db),
        DeviceArg::from(&dc),
    ];
    let ms = median_ms(gpu, |_| f.run(gpu, &mut out, &ins, &[]))?;
    report("expr_seed_dense", "f32", n, 4 * n * 4, ms, "-");
    // The same over a row `a`, a column `b` and a full `c`: `cos(a)` and `log(cos(b) + 2)`
    // hoisted (once per column and row) and not; bytes: the inputs once and the output.
    let (dr, dcol) = (
        DeviceTensor::from_slice(gpu, &a.host[..big], &[1, big])?,
        DeviceTensor::from_slice(gpu, &b.host[..big], &[big, 1])?,
    );
    let ins = [
        DeviceArg::from(&dr),
        DeviceArg::from(&dcol),
        DeviceArg::from(&dc),
    ];
    let bytes = (2 * n + 2 * big) * 4;
    let mut first: Option<Vec<f32>> = None;
    for (case, hoist) in [
        ("expr_seed_broadcast", true),
        ("expr_seed_broadcast_unhoisted", false),
    ] {
        let f = f.clone().with_hoisting(hoist);
        f.run(gpu, &mut out, &ins, &[])?;
        let got = out.buffer_to_vec(gpu)?;
        let check = match &first {
            None => "-".to_string(),
            Some(w) => match first_mismatch(&got, w, ops::Tolerance::Exact) {
                None => "hoisted=unhoisted".to_string(),
                Some(m) => format!("MISMATCH {m}"),
            },
        };
        first.get_or_insert(got);
        let ms = median_ms(gpu, |_| f.run(gpu, &mut out, &ins, &[]))?;
        report(case, "f32", n, bytes, ms, &check);
    }
    Ok(())
}

/// Permuted copy: (64,64,128,256) permuted (3,1,0,2) into a dense tensor.
fn permute_copy(bench: &Bench) -> Result<()> {
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
fn casts(bench: &Bench) -> Result<()> {
    let (gpu, big) = (&bench.gpu, bench.big);
    let n = big * big;
    let x = dense(&[n], 39, rand_f32)?;
    bench_copy(gpu, "cast", &x.layout.clone(), &x, bf16::NAN)?;
    let x = dense(&[n], 40, rand_bf16)?;
    bench_copy(gpu, "cast", &x.layout.clone(), &x, f32::NAN)?;
    Ok(())
}

/// Mixed types: out_f32[big, big] = a_bf16[big, big] * b_f32, with b a broadcast row
/// [1, big] and then dense [big, big].
fn mixed(bench: &Bench) -> Result<()> {
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
fn divmul(bench: &Bench) -> Result<()> {
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

/// Stencils: the 2-D Laplacian of a big × big f32 image and the 3-D one of a cube, x
/// along the unit-stride axis (bytes: input read once + output written once).
fn stencils(bench: &Bench) -> Result<()> {
    let (gpu, quick, big) = (&bench.gpu, bench.quick, bench.big);
    let op = gpu_kernels::stencil::Laplacian2;
    bench_stencil(gpu, "stencil_laplacian2", op, &[big, big], &[1, 0])?;
    let side = if quick { 128 } else { 512 };
    let op = gpu_kernels::stencil::Laplacian3;
    bench_stencil(gpu, "stencil_laplacian3", op, &[side; 3], &[2, 1, 0])?;
    Ok(())
}

/// Reductions (bytes: the input read once). Rows and columns of a big × big matrix, a
/// whole 2^28-element vector into a 0-d output, and a permuted view reduced over two
/// non-adjacent axes.
fn reductions(bench: &Bench) -> Result<()> {
    let (gpu, quick, big) = (&bench.gpu, bench.quick, bench.big);
    let m = dense(&[big, big], 50, rand_f32)?;
    bench_reduce(gpu, "sum_dim1_f32", Sum, &[big], [&m], &[1], f32::NAN)?;
    bench_reduce(gpu, "sum_dim0_f32", Sum, &[big], [&m], &[0], f32::NAN)?;
    bench_reduce(gpu, "amax_dim1_f32", Amax, &[big], [&m], &[1], f32::NAN)?;
    bench_reduce(gpu, "argmax_dim1_f32", Argmax, &[big], [&m], &[1], -1i64)?;
    drop(m);
    let n = if quick { 1 << 24 } else { 1 << 28 };
    let v = dense(&[n], 51, rand_f32)?;
    bench_reduce(gpu, "sum_all_f32", Sum, &[], [&v], &[0], f32::NAN)?;
    bench_reduce(gpu, "sumsq_all_f32", SumSq, &[], [&v], &[0], f32::NAN)?;
    let w = dense(&[n], 54, rand_f32)?;
    let sqdiff = MapReduce {
        reduce: SumSq,
        map: Sub,
    };
    bench_reduce(gpu, "sqdiff_all_f32", sqdiff, &[], [&v, &w], &[0], f32::NAN)?;
    drop((v, w));
    // (64,64,128,256) permuted (3,1,0,2) to (256,64,64,128), summed over axes 1 and 3.
    let shape = if quick {
        [16, 16, 32, 64]
    } else {
        [64, 64, 128, 256]
    };
    let src = dense(&shape, 52, rand_f32)?;
    let perm = Operand {
        layout: src.layout.permute(&[3, 1, 0, 2])?,
        host: src.host,
    };
    let ps = perm.layout.shape();
    let out = [ps[0], ps[2]];
    bench_reduce(gpu, "sum_perm13_f32", Sum, &out, [&perm], &[1, 3], f32::NAN)?;
    drop(perm);
    let m16 = dense(&[big, big], 53, rand_bf16)?;
    bench_reduce(gpu, "sum_dim1_bf16", Sum, &[big], [&m16], &[1], bf16::NAN)?;
    Ok(())
}

/// Short rows (issue #41): dim 1 of a contiguous `[total / len, len]` matrix, `total` 2^28
/// elements (2^24 quick), rows of 16 to 32768 elements (a normalisation's statistics, a
/// classifier's argmax). For each length, one f32 and then one bf16 matrix, each built once,
/// reduced by sum, amax, mean, argmax and sumsq (the sum of squares, layer norm's statistic),
/// and dropped before the next; cases `{op}_rows{len}_{dtype}`, in the order of [`GROUPS`].
fn short_rows(bench: &Bench) -> Result<()> {
    let (gpu, quick) = (&bench.gpu, bench.quick);
    let total = if quick { 1 << 24 } else { 1 << 28 };
    for len in [16, 64, 128, 512, 1024, 4096, 32768] {
        let rows = total / len;
        // The five reductions of one random `[rows, len]` matrix of `$t` (NaN-poisoned
        // outputs, -1 for the argmax's indices); the matrix drops at the block's end.
        macro_rules! five {
            ($t:ident, $seed:expr, $rand:expr) => {{
                let m = dense(&[rows, len], $seed, $rand)?;
                let case = |op: &str| format!("{op}_rows{len}_{}", stringify!($t));
                let nan = $t::NAN;
                bench_reduce(gpu, &case("sum"), Sum, &[rows], [&m], &[1], nan)?;
                bench_reduce(gpu, &case("amax"), Amax, &[rows], [&m], &[1], nan)?;
                bench_reduce(gpu, &case("mean"), Mean, &[rows], [&m], &[1], nan)?;
                bench_reduce(gpu, &case("argmax"), Argmax, &[rows], [&m], &[1], -1i64)?;
                bench_reduce(gpu, &case("sumsq"), SumSq, &[rows], [&m], &[1], nan)?;
            }};
        }
        five!(f32, 55, rand_f32);
        five!(bf16, 56, rand_bf16);
    }
    Ok(())
}

/// Column reductions (over axis 0 of a dense `big × big` matrix) whose column kernel folds
/// one-byte values: `all` and `any` of every element type (boolean accumulators) and
/// `sum`, `amax`, `amin`, `prod` of `u8`. Outputs poisoned with a value no reduction
/// writes (`Bool(7)`) or a random-looking byte.
fn cols_1b(bench: &Bench) -> Result<()> {
    use strided_apply::gpu_kernels::elem::Bool;
    use strided_apply::gpu_kernels::reduce::{All, Any};
    let (gpu, big) = (&bench.gpu, bench.big);
    // `all` and `any` of one random `big × big` matrix of `$t` (as `short_rows`' `five!`).
    macro_rules! truth {
        ($t:ident, $seed:expr, $rand:expr) => {{
            let m = dense(&[big, big], $seed, $rand)?;
            let case = |op: &str| format!("{op}_dim0_{}", stringify!($t));
            bench_reduce(gpu, &case("all"), All, &[big], [&m], &[0], Bool(7))?;
            bench_reduce(gpu, &case("any"), Any, &[big], [&m], &[0], Bool(7))?;
        }};
    }
    // Mostly true values, a zero now and then (so `all` is false in some columns).
    truth!(Bool, 61, |x| Bool(((x >> 40) % 64 != 0) as u8));
    truth!(u8, 62, |x| (x >> 40) as u8);
    truth!(i32, 63, |x| (x >> 40) as i32 % 4096);
    truth!(u32, 64, |x| (x >> 40) as u32 % 4096);
    truth!(i64, 65, |x| (x >> 40) as i64 % 4096);
    truth!(f32, 66, rand_f32);
    truth!(f64, 67, |x| rand_f32(x) as f64);
    truth!(f16, 68, rand_f16);
    truth!(bf16, 69, rand_bf16);
    u8_col_folds(gpu, &dense(&[big, big], 70, |x| (x >> 40) as u8)?, "dim0")
}

/// `sum`, `amax`, `amin` and `prod` over dim 0 of the `u8` matrix `m` into `u8` (cases
/// `{op}_{shape}_u8`).
fn u8_col_folds(gpu: &Gpu, m: &Operand<u8>, shape: &str) -> Result<()> {
    use strided_apply::gpu_kernels::reduce::{Amin, Prod};
    let cols = m.layout.shape()[1];
    let case = |op: &str| format!("{op}_{shape}_u8");
    bench_reduce(gpu, &case("sum"), Sum, &[cols], [m], &[0], 0xa5u8)?;
    bench_reduce(gpu, &case("amax"), Amax, &[cols], [m], &[0], 0xa5u8)?;
    bench_reduce(gpu, &case("amin"), Amin, &[cols], [m], &[0], 0xa5u8)?;
    bench_reduce(gpu, &case("prod"), Prod, &[cols], [m], &[0], 0xa5u8)
}

/// Column reductions that the slot column kernel serves and `reduce_cols_1b` does not time:
/// float `amax` and `amin`, dim 0 of a random `big × big` matrix (whole vectors) and of a
/// `big × (big - 1)` one (element reads), per type; then the `big × (big - 1)` matrices of
/// the one-byte folds that take the order-free kernel where their vectors are whole (`any`
/// and `all` of 1- and 2-byte types, the folds of `u8`).
fn cols_slot(bench: &Bench) -> Result<()> {
    use strided_apply::gpu_kernels::elem::Bool;
    use strided_apply::gpu_kernels::reduce::{All, Amin, Any};
    let (gpu, big) = (&bench.gpu, bench.big);
    macro_rules! minmax {
        ($t:ident, $seed:expr, $rand:expr, $poison:expr) => {{
            for (shape, cols) in [("dim0", big), ("dim0odd", big - 1)] {
                let m = dense(&[big, cols], $seed, $rand)?;
                let case = |op: &str| format!("{op}_{shape}_{}", stringify!($t));
                bench_reduce(gpu, &case("amax"), Amax, &[cols], [&m], &[0], $poison)?;
                bench_reduce(gpu, &case("amin"), Amin, &[cols], [&m], &[0], $poison)?;
            }
        }};
    }
    minmax!(f32, 71, rand_f32, f32::NAN);
    minmax!(f64, 72, |x| rand_f32(x) as f64, f64::NAN);
    minmax!(f16, 73, rand_f16, f16::NAN);
    minmax!(bf16, 74, rand_bf16, bf16::NAN);
    let odd = big - 1;
    let case = |op: &str, t: &str| format!("{op}_dim0odd_{t}");
    let m = dense(&[big, odd], 75, |x| Bool(((x >> 40) % 64 != 0) as u8))?;
    bench_reduce(gpu, &case("any", "Bool"), Any, &[odd], [&m], &[0], Bool(7))?;
    bench_reduce(gpu, &case("all", "Bool"), All, &[odd], [&m], &[0], Bool(7))?;
    let m = dense(&[big, odd], 76, |x| (x >> 40) as u8)?;
    bench_reduce(gpu, &case("any", "u8"), Any, &[odd], [&m], &[0], Bool(7))?;
    bench_reduce(gpu, &case("all", "u8"), All, &[odd], [&m], &[0], Bool(7))?;
    let m = dense(&[big, odd], 77, rand_f16)?;
    bench_reduce(gpu, &case("all", "f16"), All, &[odd], [&m], &[0], Bool(7))?;
    bench_reduce(gpu, &case("any", "f16"), Any, &[odd], [&m], &[0], Bool(7))?;
    let m = dense(&[big, odd], 78, rand_bf16)?;
    bench_reduce(gpu, &case("all", "bf16"), All, &[odd], [&m], &[0], Bool(7))?;
    bench_reduce(gpu, &case("any", "bf16"), Any, &[odd], [&m], &[0], Bool(7))?;
    u8_col_folds(
        gpu,
        &dense(&[big, odd], 79, |x| (x >> 40) as u8)?,
        "dim0odd",
    )
}

/// Each column's maximum of a row-major matrix with rows of `cols` elements (no NaN in it).
fn col_max<T: Copy + PartialOrd>(host: &[T], cols: usize) -> Vec<T> {
    let mut m = host[..cols].to_vec();
    for r in host.chunks(cols).skip(1) {
        for (a, &b) in m.iter_mut().zip(r) {
            if b > *a {
                *a = b;
            }
        }
    }
    m
}

/// Each row's maximum of a row-major matrix with rows of `len` elements (no NaN in it).
fn row_max<T: Copy + PartialOrd>(host: &[T], len: usize) -> Vec<T> {
    host.chunks(len)
        .map(|r| {
            r.iter()
                .copied()
                .fold(r[0], |a, b| if b > a { b } else { a })
        })
        .collect()
}

/// Times the expression `f` over `x` (`[rows, len]`) and `m` (`[rows, 1]`, broadcast along
/// each row) reduced by `op` over axis 1 (`Compiled::reduce`, one pass, no temporary) into a
/// NaN-poisoned `[rows]` output of `T` (or, with `axis` 0, `x` `[len, cols]` and `m` `[1,
/// cols]` reduced over axis 0 into `[cols]`), and checks one result against the CPU twin
/// (`Compiled::reduce_cpu`: both fold in the library's order, so bit for bit where the
/// expression's ops are exact; within `max_ulp` where it has transcendentals, whose values
/// differ in the last bits on the two sides). Bytes: `x` and
/// `m` read once each (`(rows * len + rows) * size_of::<T>()`, the output not counted, as
/// [`bench_reduce`]); elements: `x`'s. Operand sets that fit in L2 are rotated.
#[allow(clippy::too_many_arguments)]
fn bench_expr_rows<T: Elem + Distance>(
    gpu: &Gpu,
    case: &str,
    f: &strided_apply::expr::Compiled,
    op: strided_apply::expr::ReduceOp,
    x: &Operand<T>,
    m: &Operand<T>,
    poison: T,
    max_ulp: u64,
    axis: usize,
) -> Result<()> {
    use strided_apply::expr::{DeviceArg, HostTensor, HostTensorMut};
    let rows = m.layout.numel();
    let out = Layout::contiguous(&[rows])?;
    let n = x.layout.numel();
    let bytes = (n + rows) * size_of::<T>();
    let sets = ROTATE_BYTES.div_ceil(bytes.max(1)).clamp(1, 64);
    let up = |o: &Operand<T>| {
        DeviceTensor::from_slice(gpu, &o.host, &[o.host.len()])?.with_layout(o.layout.clone())
    };
    let mut tensors = Vec::with_capacity(sets);
    for _ in 0..sets {
        let dout = DeviceTensor::from_slice(gpu, &vec![poison; rows], &[rows])?;
        tensors.push((up(x)?, up(m)?, dout));
    }
    let run = |dx: &DeviceTensor<T>, dm: &DeviceTensor<T>, dout: &mut DeviceTensor<T>| {
        f.reduce(
            gpu,
            op,
            dout,
            &[DeviceArg::from(dx), DeviceArg::from(dm)],
            &[],
            &[axis],
        )
    };
    let (dx, dm, dout) = &mut tensors[0];
    run(dx, dm, dout)?;
    let got = dout.buffer_to_vec(gpu)?;
    let mut want = vec![poison; rows];
    f.reduce_cpu(
        op,
        HostTensorMut::new(bytemuck::cast_slice_mut(&mut want), T::TYPE, &out),
        &[
            HostTensor::new(bytemuck::cast_slice(&x.host), T::TYPE, &x.layout),
            HostTensor::new(bytemuck::cast_slice(&m.host), T::TYPE, &m.layout),
        ],
        &[],
        &[axis],
    )?;
    let check = check_label_ulp(&got, &want, max_ulp);
    let ms = median_ms(gpu, |i| {
        let (dx, dm, dout) = &mut tensors[i % sets];
        run(dx, dm, dout)
    })?;
    report(case, T::NAME, n, bytes, ms, &check);
    Ok(())
}

/// The two expression reductions of one random `[rows, len]` matrix `x` of `T` (built here,
/// dropped at the end) with `m` its row maxima (`[rows, 1]`, computed on the host):
/// `sumexp_rows{len}_{T}`, the sum over each row of `exp(x - m)` (softmax's denominator),
/// and `sqdev_rows{len}_{T}`, the mean over each row of `(x - m) * (x - m)`. Both compile
/// for `x` and `m` of `T`, so the output is `T` (a bf16 expression computes in f32 and
/// rounds each value once to bf16 before it is folded in f32).
fn expr_rows<T: Elem + Distance + PartialOrd>(
    gpu: &Gpu,
    rows: usize,
    len: usize,
    seed: u64,
    rand: impl Fn(u64) -> T,
    poison: T,
    cols: bool,
) -> Result<()> {
    use strided_apply::expr::{Arg, Expr, ReduceOp};
    let (x, m) = if cols {
        let x = dense(&[len, rows], seed, rand)?;
        let m = Operand {
            host: col_max(&x.host, rows),
            layout: Layout::contiguous(&[1, rows])?,
        };
        (x, m)
    } else {
        let x = dense(&[rows, len], seed, rand)?;
        let m = Operand {
            host: row_max(&x.host, len),
            layout: Layout::contiguous(&[rows, 1])?,
        };
        (x, m)
    };
    let args = [("x", Arg::Tensor(T::TYPE)), ("m", Arg::Tensor(T::TYPE))];
    // `exp`: each side within 2 ulp of an f64 reference (`ops::Tolerance`), so a sum of
    // them differs by a few ulp of the sum at most; the squares are exact.
    for (name, text, op, max_ulp) in [
        ("sumexp", "exp(x - m)", ReduceOp::Sum, 8),
        ("sqdev", "(x - m) * (x - m)", ReduceOp::Mean, 0),
    ] {
        let f = Expr::parse(text)?.compile(&args, None)?;
        let (kind, axis) = if cols { ("cols", 0) } else { ("rows", 1) };
        let case = format!("{name}_{kind}{len}_{}", T::NAME);
        bench_expr_rows(gpu, &case, &f, op, &x, &m, poison, max_ulp, axis)?;
    }
    Ok(())
}

/// Expression reductions over short rows (issue #41): dim 1 of a contiguous `[total / len,
/// len]` matrix `x`, `total` 2^28 elements (2^24 quick), rows of 128 to 32768 elements, with
/// a `[rows, 1]` operand `m` broadcast along each row (see [`expr_rows`]); then columns of
/// 1024 and 32768 elements (dim 0 of `[len, total / len]`, `m` `[1, total / len]`). For each
/// length, one f32 and then one bf16 matrix, each built once and dropped before the next;
/// cases `{sumexp,sqdev}_{rows,cols}{len}_{dtype}`, in the order of [`GROUPS`].
fn short_rows_expr(bench: &Bench) -> Result<()> {
    let (gpu, quick) = (&bench.gpu, bench.quick);
    let total = if quick { 1 << 24 } else { 1 << 28 };
    for len in [128, 1024, 4096, 32768] {
        let rows = total / len;
        expr_rows(gpu, rows, len, 57, rand_f32, f32::NAN, false)?;
        expr_rows(gpu, rows, len, 58, rand_bf16, bf16::NAN, false)?;
    }
    // Columns: `x` `[len, total / len]`, `m` its column maxima `[1, total / len]`, reduced
    // over axis 0 (the reduced axis strided, the kept one unit-stride).
    for len in [1024, 32768] {
        let cols = total / len;
        expr_rows(gpu, cols, len, 59, rand_f32, f32::NAN, true)?;
        expr_rows(gpu, cols, len, 60, rand_bf16, bf16::NAN, true)?;
    }
    Ok(())
}

/// Tiny tensor: host time per call, planning and launch included.
fn tiny(bench: &Bench) -> Result<()> {
    let gpu = &bench.gpu;
    let n = 1024;
    let a = DeviceTensor::from_slice(gpu, &random(n, 15, rand_f32), &[n])?;
    let b = DeviceTensor::from_slice(gpu, &random(n, 16, rand_f32), &[n])?;
    let mut c = DeviceTensor::<f32>::zeros(gpu, &[n])?;
    for _ in 0..1000 {
        api::apply3(gpu, ops::Add, &mut c, &a, &b)?;
    }
    gpu.synchronize()?;
    let calls = 20_000;
    let t = Instant::now();
    for _ in 0..calls {
        api::apply3(gpu, ops::Add, &mut c, &a, &b)?;
    }
    let host_us = t.elapsed().as_secs_f64() * 1e6 / calls as f64;
    gpu.synchronize()?;
    let us = t.elapsed().as_secs_f64() * 1e6 / calls as f64;
    // Short bursts from an idle queue: host time alone, never throttled by a full
    // launch queue waiting on the GPU. Median over bursts of 200 calls.
    let typed_burst_us = burst_us(gpu, || api::apply3(gpu, ops::Add, &mut c, &a, &b))?;
    // The driver's share (see `driver_launch_us`).
    let raw_us = driver_launch_us(gpu, &c, &a, &b)?;
    gpu.synchronize()?;
    if c.to_vec(gpu)? != cpu_sum(&a.to_vec(gpu)?, &b.to_vec(gpu)?) {
        eprintln!("bench: raw launches gave a wrong sum");
    }
    println!(
        "{{\"impl\":\"strided-apply\",\"case\":\"tiny_add_host_us\",\"dtype\":\"f32\",\"elements\":{n},\"host_us\":{host_us:.3},\"us_incl_sync\":{us:.3},\"burst_host_us\":{typed_burst_us:.3},\"driver_launch_us\":{raw_us:.3}}}"
    );
    tiny_expr(gpu, &mut c, &a, &b)?;
    #[cfg(feature = "dispatch")]
    tiny_dispatch_and_graph(gpu, &mut c, &a, &b, typed_burst_us)?;
    Ok(())
}

/// The same 1024-element add as a kept expression (`Expr::parse("a + b")` compiled once,
/// `Compiled::run` per call) against the typed `apply3`: issue #38's host time per call.
/// Bursts of `calls` from an idle queue, the two alternating burst by burst (the host's
/// drift falls on both), medians of 40 bursts each, for bursts of 200 and of 20 calls; and
/// the device time per call of each (CUDA events around 100 calls, median of 25: a host
/// that submits faster than the device runs them is bounded by the latter). Case
/// `tiny_expr_host_us`.
fn tiny_expr(
    gpu: &Gpu,
    c: &mut DeviceTensor<f32>,
    a: &DeviceTensor<f32>,
    b: &DeviceTensor<f32>,
) -> Result<()> {
    use strided_apply::expr::{Arg, DeviceArg, Expr};
    use strided_apply::ElemType::F32;
    let n = c.numel();
    let f =
        Expr::parse("a + b")?.compile(&[("a", Arg::Tensor(F32)), ("b", Arg::Tensor(F32))], None)?;
    *c = DeviceTensor::zeros(gpu, &[n])?;
    let expr =
        |c: &mut DeviceTensor<f32>| f.run(gpu, c, &[DeviceArg::from(a), DeviceArg::from(b)], &[]);
    let typed = |c: &mut DeviceTensor<f32>| api::apply3(gpu, ops::Add, c, a, b);
    expr(c)?;
    gpu.synchronize()?;
    if c.to_vec(gpu)? != cpu_sum(&a.to_vec(gpu)?, &b.to_vec(gpu)?) {
        eprintln!("bench: kept-expression adds gave a wrong sum");
    }
    let burst = |calls: usize, c: &mut DeviceTensor<f32>| -> Result<(f64, f64)> {
        let (mut e, mut t) = (Vec::new(), Vec::new());
        for round in 0..40 {
            for which in [round % 2, 1 - round % 2] {
                gpu.synchronize()?;
                let start = Instant::now();
                for _ in 0..calls {
                    if which == 0 {
                        expr(c)?;
                    } else {
                        typed(c)?;
                    }
                }
                let us = start.elapsed().as_secs_f64() * 1e6 / calls as f64;
                if which == 0 {
                    e.push(us)
                } else {
                    t.push(us)
                }
            }
        }
        e.sort_by(f64::total_cmp);
        t.sort_by(f64::total_cmp);
        Ok((e[e.len() / 2], t[t.len() / 2]))
    };
    let (expr_us, typed_us) = burst(200, c)?;
    let (expr20_us, typed20_us) = burst(20, c)?;
    let per_call = |which: usize, c: &mut DeviceTensor<f32>| -> Result<f64> {
        let mut v: Vec<f64> = (0..25)
            .map(|_| -> Result<f64> {
                gpu.synchronize()?;
                let ms = gpu.time_ms(|| {
                    for _ in 0..100 {
                        if which == 0 {
                            expr(c)?
                        } else {
                            typed(c)?
                        }
                    }
                    Ok(())
                })?;
                Ok(ms as f64 * 10.0)
            })
            .collect::<Result<_>>()?;
        v.sort_by(f64::total_cmp);
        Ok(v[v.len() / 2])
    };
    let expr_dev_us = per_call(0, c)?;
    let typed_dev_us = per_call(1, c)?;
    println!(
        "{{\"impl\":\"strided-apply\",\"case\":\"tiny_expr_host_us\",\"dtype\":\"f32\",\"elements\":{n},\"burst_host_us\":{expr_us:.3},\"typed_burst_host_us\":{typed_us:.3},\"burst20_host_us\":{expr20_us:.3},\"typed_burst20_host_us\":{typed20_us:.3},\"device_us_per_call\":{expr_dev_us:.3},\"typed_device_us_per_call\":{typed_dev_us:.3}}}"
    );
    Ok(())
}

/// The driver's share of a tiny add: host µs per call of the kernel `api::apply3` launches for
/// `c = a + b` (dense, 1024 elements), through `cuLaunchKernel` directly with the same
/// parameters, in the same bursts as [`burst_us`] (no planning, no checks, no cache lookups).
fn driver_launch_us(
    gpu: &Gpu,
    c: &DeviceTensor<f32>,
    a: &DeviceTensor<f32>,
    b: &DeviceTensor<f32>,
) -> Result<f64> {
    let n = c.numel();
    let names = <ops::Add as Kernels3<f32, f32, f32>>::NAMES;
    let f = gpu.kernel(names.module, names.vec)?;
    let op = gpu_kernels::apply::OpArg::new(ops::Add);
    // The kernel's second parameter is a `VecArg` (24 bytes): the driver copies that
    // many bytes from its pointer, so it gets the whole struct, as `api::apply3` passes.
    let count = gpu_kernels::apply::VecArg {
        n: n as u64,
        row: strided_apply::api::DIV_ONE,
    };
    let g = gpu_kernels::Geometry::<u32, 2, 3>::empty();
    let ptrs = [c.buffer().addr(), a.buffer().addr(), b.buffer().addr()];
    let mut args: [*mut std::ffi::c_void; 6] = [
        &op as *const _ as *mut _,
        &count as *const _ as *mut _,
        &g as *const _ as *mut _,
        &ptrs[0] as *const _ as *mut _,
        &ptrs[1] as *const _ as *mut _,
        &ptrs[2] as *const _ as *mut _,
    ];
    let stream = gpu.stream().cu_stream();
    burst_us(gpu, || {
        // SAFETY: the parameters are those `api::apply3` passes to `add_f32_v` for these
        // dense 1024-element tensors (16-byte aligned allocations).
        unsafe {
            strided_apply::cudarc::driver::result::launch_kernel(
                f.cu_function(),
                (1, 1, 1),
                (256, 1, 1),
                0,
                stream,
                &mut args,
            )
        }
        .map_err(|source| strided_apply::Error::Launch {
            kernel: names.vec,
            source,
        })
    })
}

#[cfg(feature = "dispatch")]
/// The same 1024-element add through run-time dispatch (a `DynOp` found and built on every
/// call, and one kept), in the same bursts as `tiny_add_host_us`; and the per-op device time
/// of 100 adds replayed from a CUDA graph against the same 100 launched eagerly (CUDA
/// events, median of 25). Cases `tiny_dispatch_host_us` and `tiny_graph_per_op_us`.
fn tiny_dispatch_and_graph(
    gpu: &Gpu,
    c: &mut DeviceTensor<f32>,
    a: &DeviceTensor<f32>,
    b: &DeviceTensor<f32>,
    typed_burst_us: f64,
) -> Result<()> {
    use strided_apply::cudarc::driver::sys;
    use strided_apply::dispatch::DynOp;
    use strided_apply::raw::RawTensor;
    use strided_apply::ElemType::F32;
    let n = c.numel();
    let (shape, strides) = ([n], [1isize]);
    let t = |ptr| RawTensor {
        ptr,
        elem: F32,
        shape: &shape,
        strides: &strides,
    };
    let (pc, pa, pb) = (c.buffer().addr(), a.buffer().addr(), b.buffer().addr());
    // SAFETY (both closures): three live 1024-element f32 buffers of this Gpu, kept until
    // the synchronisation after the bursts.
    let lookup_us = burst_us(gpu, || unsafe {
        strided_apply::dispatch::apply(gpu, None, "add", &[], t(pc), &[t(pa), t(pb)])
    })?;
    let op = DynOp::new("add", &[F32, F32, F32], &[])?;
    let kept_us = burst_us(gpu, || unsafe {
        op.launch(gpu, None, t(pc), &[t(pa), t(pb)])
    })?;
    gpu.synchronize()?;
    if c.to_vec(gpu)? != cpu_sum(&a.to_vec(gpu)?, &b.to_vec(gpu)?) {
        eprintln!("bench: run-time dispatched adds gave a wrong sum");
    }
    println!(
        "{{\"impl\":\"strided-apply\",\"case\":\"tiny_dispatch_host_us\",\"dtype\":\"f32\",\"elements\":{n},\"burst_host_us\":{lookup_us:.3},\"kept_op_burst_host_us\":{kept_us:.3},\"typed_burst_host_us\":{typed_burst_us:.3}}}"
    );

    // 100 adds: eager against a replayed graph, device time per op.
    const OPS: usize = 100;
    gpu.preload_kernels(&<ops::Add as Kernels3<f32, f32, f32>>::NAMES)?;
    let hundred = |c: &mut DeviceTensor<f32>| -> Result<()> {
        for _ in 0..OPS {
            api::apply3(gpu, ops::Add, c, a, b)?;
        }
        Ok(())
    };
    let eager_ms = median_ms(gpu, |_| hundred(c))?;
    let stream = gpu.stream().clone();
    let driver = |what| move |source| strided_apply::Error::Driver { what, source };
    stream
        .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL)
        .map_err(driver("beginning a capture"))?;
    let captured = hundred(c);
    let graph = stream
        .end_capture(sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)
        .map_err(driver("ending a capture"))?;
    captured?;
    let Some(graph) = graph else {
        eprintln!("bench: the capture recorded no graph");
        return Ok(());
    };
    graph.upload().map_err(driver("uploading a graph"))?;
    let graph_ms = median_ms(gpu, |_| graph.launch().map_err(driver("launching a graph")))?;
    println!(
        "{{\"impl\":\"strided-apply\",\"case\":\"tiny_graph_per_op_us\",\"dtype\":\"f32\",\"elements\":{n},\"ops\":{OPS},\"graph_per_op_us\":{:.3},\"eager_per_op_us\":{:.3}}}",
        graph_ms * 1e3 / OPS as f64,
        eager_ms * 1e3 / OPS as f64
    );
    Ok(())
}
