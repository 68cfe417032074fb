//! The runner of the GPU tests: each test is reported by name as passed, failed or skipped,
//! with a closing "gpu: N passed, N failed, N skipped" line (the default harness has no
//! run-time skip). Without a GPU every test is reported as skipped; with
//! `STRIDED_APPLY_REQUIRE_GPU=1` that is a failure.

use strided_apply::Gpu;

/// A test's one-line report, or why it failed.
pub type TestResult = Result<String, String>;
/// A test: its name (scripts select tests by it) and its body.
pub type GpuTest = (&'static str, fn(&Gpu) -> TestResult);

/// A count from the environment (`name`), else `default`: the sanitizer run
/// (`scripts/sanitize`) makes the random, load and size tests smaller with these.
pub fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Whether `STRIDED_APPLY_BIG=1` lets the tests that need ~30 GiB of device memory run.
fn big_enabled() -> bool {
    std::env::var("STRIDED_APPLY_BIG").is_ok_and(|v| v == "1")
}

/// Runs `tests` in order on device 0 and prints the report; `big` names the tests that need
/// `STRIDED_APPLY_BIG=1`. Arguments that are not flags select tests by substring. Exits with
/// status 1 when a test failed.
pub fn run(tests: &[GpuTest], big: &[&str]) {
    // Arguments that are not flags select tests by substring (as the default harness).
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let selected =
        |name: &str| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()));
    let require = std::env::var("STRIDED_APPLY_REQUIRE_GPU").is_ok_and(|v| v == "1");
    let gpu = strided_apply::open(0);
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    match &gpu {
        Err(e) => {
            for (name, _) in tests {
                println!("test {name} ... SKIPPED (no GPU: {e})");
                skipped += 1;
            }
            if require {
                println!("STRIDED_APPLY_REQUIRE_GPU=1 and no GPU: failing");
                failed += 1;
            }
        }
        Ok(g) => {
            println!(
                "GPU: {} (cc {:?}), {} SMs, kernel image from {}",
                g.name(),
                g.compute_capability(),
                g.sm_count(),
                strided_apply::PTX_SOURCE
            );
            for (name, f) in tests {
                if !selected(name) {
                    println!("test {name} ... SKIPPED (not selected by the filter)");
                    skipped += 1;
                    continue;
                }
                if big.contains(name) && !big_enabled() {
                    println!("test {name} ... SKIPPED (set STRIDED_APPLY_BIG=1: needs ~30 GiB of device memory)");
                    skipped += 1;
                    continue;
                }
                let t = std::time::Instant::now();
                match f(g) {
                    Ok(msg) => {
                        println!(
                            "test {name} ... ok ({msg}; {:.1} s)",
                            t.elapsed().as_secs_f64()
                        );
                        passed += 1;
                    }
                    Err(msg) => {
                        println!("test {name} ... FAILED: {msg}");
                        failed += 1;
                    }
                }
            }
        }
    }
    if let Ok(g) = &gpu {
        for m in g.module_info() {
            println!("module {m}");
        }
    }
    println!(
        "expression launches compiled (tier 1, STRIDED_APPLY_EXPR_TIER={}): {}",
        std::env::var("STRIDED_APPLY_EXPR_TIER").unwrap_or_else(|_| "unset".into()),
        strided_apply::expr::tier1_launches()
    );
    println!("\ngpu: {passed} passed, {failed} failed, {skipped} skipped");
    if failed > 0 {
        std::process::exit(1);
    }
}
