//! GPU tests, one module per topic: pointwise ops against the CPU twin (`apply`), 16-bit
//! floats (`narrow`), the framework paths (`dispatch`), reductions (`reduce`), stencils
//! (`stencil`), expressions on the interpreter's kernels (`expr`), normalisation programs
//! (`norm`), tier 1 (`tier1`) and its
//! disk cache across processes (`cache`), typed errors that need a device (`errors`), device memory and 64-bit
//! indexing (`memory`), threads under load (`load`). The runner (`harness`) reports each
//! test by name; without a GPU every test is reported as skipped, and with
//! `STRIDED_APPLY_REQUIRE_GPU=1` that is a failure.

#[path = "../common/mod.rs"]
mod common;

mod apply;
mod cache;
mod dispatch;
mod errors;
mod expr;
mod harness;
mod load;
mod memory;
mod narrow;
mod norm;
mod reduce;
mod stencil;
mod tier1;

use harness::GpuTest;

/// Tests that need `STRIDED_APPLY_BIG=1` (tensors of 2^31 elements and more, ~30 GiB of
/// device memory, ~1 minute).
const BIG: [&str; 3] = [
    "gpu_64bit_index_u8_3gib",
    "gpu_64bit_index_f32_2pow31_plus_7",
    "gpu_index_width_boundary_2pow31",
];

fn main() {
    // A child process of the disk cache's test (`cache`): its work alone.
    if let Some(out) = std::env::var_os(cache::CHILD) {
        match cache::child(std::path::Path::new(&out)) {
            Ok(line) => println!("{line}"),
            Err(e) => {
                eprintln!("cache test child: {e}");
                std::process::exit(2);
            }
        }
        return;
    }
    let tests: [GpuTest; 42] = [
        ("gpu_conformance_table_matches_cpu_twin", apply::conformance),
        (
            "gpu_stencils_by_id_match_cpu_twin",
            dispatch::dispatch_stencils,
        ),
        (
            "gpu_run_time_dispatch_every_family_matches_cpu_twin",
            dispatch::dispatch_all_instances,
        ),
        (
            "gpu_run_time_dispatch_programs_match_cpu_twin",
            dispatch::dispatch_programs,
        ),
        (
            "gpu_graph_capture_of_100_launches_replays",
            dispatch::graph_capture_replays,
        ),
        (
            "gpu_dlpack_and_ndarray_round_trips",
            dispatch::dlpack_and_ndarray_round_trips,
        ),
        ("gpu_two_byte_tiles_match_cpu_twin", apply::two_byte_tiles),
        ("gpu_tiled_batches_match_cpu_twin", apply::tiled_batches),
        (
            "gpu_16bit_floats_exhaustive_bit_identical",
            narrow::narrow_exhaustive,
        ),
        ("gpu_stencils_match_cpu_twin", stencil::gpu_stencils),
        ("gpu_reductions_match_cpu_twin", reduce::reductions),
        (
            "gpu_transcendentals_within_ulp_bound_of_f64",
            apply::accuracy,
        ),
        (
            "gpu_typed_errors_and_context_survives",
            errors::typed_errors,
        ),
        (
            "gpu_raw_api_matches_expected",
            dispatch::raw_api_matches_typed,
        ),
        (
            "gpu_step2_views_ending_at_buffer_end",
            apply::step2_views_ending_at_buffer_end,
        ),
        (
            "gpu_raw_api_bad_inputs_are_typed_errors",
            errors::raw_api_catalogue,
        ),
        ("gpu_empty_tensors_launch_nothing", apply::empty_tensors),
        ("gpu_module_errors_are_typed", errors::module_errors),
        ("gpu_module_choice_and_lazy_families", errors::module_choice),
        ("gpu_random_layouts_match_cpu_twin", apply::random_layouts),
        (
            "gpu_expr_random_programs_match_cpu_twin",
            expr::random_programs,
        ),
        (
            "gpu_expr_transcendentals_match_library_kernels",
            expr::transcendentals_match_library_kernels,
        ),
        (
            "gpu_expr_typed_seed_expression",
            expr::typed_seed_expression,
        ),
        (
            "gpu_expr_hoisting_keeps_the_bits",
            expr::hoisting_keeps_the_bits,
        ),
        (
            "gpu_expr_vectorised_kernels_match_cpu_twin",
            expr::vectorised_kernels_match_cpu_twin,
        ),
        (
            "gpu_expr_tiled_kernels_match_cpu_twin",
            expr::tiled_kernels_match_cpu_twin,
        ),
        (
            "gpu_expr_one_op_kernels_match_cpu_twin",
            expr::one_op_kernels_match_cpu_twin,
        ),
        (
            "gpu_expr_wide_programs_match_cpu_twin",
            expr::wide_programs_match_cpu_twin,
        ),
        (
            "gpu_expr_reductions_match_cpu_twin",
            expr::reductions_match_cpu_twin,
        ),
        (
            "gpu_expr_tier1_matches_tier0_and_cpu_twin",
            tier1::tiers_agree,
        ),
        ("gpu_expr_tier1_graph_capture", tier1::graph_capture),
        ("gpu_expr_tier1_failures", tier1::failures),
        (
            "gpu_expr_tier1_damaged_cache_files_fresh_processes",
            cache::damaged_entries,
        ),
        (
            "gpu_norm_programs_match_cpu_twin",
            norm::programs_match_cpu_twin,
        ),
        (
            "gpu_norm_bad_calls_are_typed_errors",
            norm::bad_calls_are_typed_errors,
        ),
        ("gpu_load_8_threads_shared_gpu", load::load_shared_gpu),
        ("gpu_load_8_threads_own_streams", load::load_own_streams),
        ("gpu_64bit_index_u8_3gib", memory::index64_u8_3gib),
        (
            "gpu_64bit_index_f32_2pow31_plus_7",
            memory::index64_f32_2pow31_plus_7,
        ),
        (
            "gpu_index_width_boundary_2pow31",
            memory::index_width_boundary,
        ),
        (
            "gpu_memory_pool_keeps_then_releases",
            memory::memory_pool_keeps_then_releases,
        ),
        (
            "gpu_out_of_memory_then_recover",
            memory::out_of_memory_then_recover,
        ),
    ];
    harness::run(&tests, &BIG);
}
