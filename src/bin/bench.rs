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
//!
//! The modules under `bench/`: the command line (`cli`), the case groups and `--only`'s rule
//! (`groups`), the device and sizes (`harness`), timing (`timing`), inputs (`data`), the JSON
//! lines and checks (`report`), the cold starts (`cold`), and the case families: `apply3`
//! (three-operand pointwise cases), `copy`, `pointwise`, `expressions`, `stencils`,
//! `reductions`, `rows_expr`, `opset`, `tier1`, `tiny`, and `diet` (`--diet`).

use cli::Args;
use harness::Bench;
use strided_apply::Result;

#[path = "bench/apply3.rs"]
mod apply3;
#[path = "bench/cli.rs"]
mod cli;
#[path = "bench/cold.rs"]
mod cold;
#[path = "bench/copy.rs"]
mod copy;
#[path = "bench/data.rs"]
mod data;
#[cfg(feature = "dispatch")]
#[path = "bench/diet.rs"]
mod diet;
#[path = "bench/expressions.rs"]
mod expressions;
#[path = "bench/groups.rs"]
mod groups;
#[path = "bench/harness.rs"]
mod harness;
#[path = "bench/opset.rs"]
mod opset;
#[path = "bench/pointwise.rs"]
mod pointwise;
#[path = "bench/reductions.rs"]
mod reductions;
#[path = "bench/report.rs"]
mod report;
#[path = "bench/rows_expr.rs"]
mod rows_expr;
#[path = "bench/stencils.rs"]
mod stencils;
#[path = "bench/tier1.rs"]
mod tier1;
#[path = "bench/timing.rs"]
mod timing;
#[path = "bench/tiny.rs"]
mod tiny;

/// A runner of one or more case groups.
type Run = fn(&Bench) -> Result<()>;
/// The runners in the order they run, each with its groups (see
/// [`GROUPS`](groups::GROUPS)): a runner runs when `--only` selects one of its groups, and
/// runs the selected ones only.
const RUNS: &[(&[&str], Run)] = &[
    (&["contiguous_add"], pointwise::contiguous_add),
    // Broadcast row, transposed operand and step-2 slice share the dense operand `a`.
    (
        &["broadcast_row", "transposed", "slice_step2"],
        pointwise::broadcast_transposed_sliced,
    ),
    (&["permute_copy"], copy::permute_copy),
    (&["cast"], copy::casts),
    (&["mixed"], pointwise::mixed),
    (&["divmul"], pointwise::divmul),
    (&["stencil"], stencils::stencils),
    (&["reduce"], reductions::reductions),
    (&["reduce_rows"], reductions::short_rows),
    (&["reduce_cols_1b"], reductions::cols_1b),
    (&["reduce_cols_slot"], reductions::cols_slot),
    (&["reduce_rows_expr"], rows_expr::short_rows_expr),
    (&["expr"], expressions::expressions),
    (&["opset"], opset::opset),
    (&["tier1"], tier1::tier1),
    (&["tiny"], tiny::tiny),
];

fn main() -> Result<()> {
    let args = Args::parse();
    if let Some(label) = &args.cold {
        return cold::cold_start(label);
    }
    if let Some(first) = &args.cold_expr {
        return cold::cold_expr(first);
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
    copy::copy_ceiling(&bench)?;
    for (groups, run) in RUNS {
        if groups.iter().any(|g| bench.wants(g)) {
            run(&bench)?;
        }
    }
    Ok(())
}
