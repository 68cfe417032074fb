//! Deep expressions in a child process: a stack overflow aborts the whole test binary and a
//! hang never ends, so such tests run in a copy of this binary, limited in time.

use super::*;
use std::time::Duration;

const CHILD_ENV: &str = "STRIDED_APPLY_EXPR_TEST_CHILD";

/// This module's path as the test harness names tests (without the crate).
fn test_path(name: &str) -> String {
    let m = module_path!();
    let m = m.split_once("::").map_or(m, |(_, rest)| rest);
    format!("{m}::{name}")
}

/// Whether this process is the child that runs test `name`.
fn is_child(name: &str) -> bool {
    std::env::var(CHILD_ENV).ok() == Some(test_path(name))
}

/// Runs test `name` of this binary in a child process; `Ok(stderr)` when it passed,
/// `Err(why)` when it failed, crashed, or ran past `timeout` (then it is killed).
fn run_child(name: &str, timeout: Duration) -> std::result::Result<String, String> {
    use std::process::{Command, Stdio};
    let path = test_path(name);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([path.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, &path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if start.elapsed() > timeout {
            // Our own child, by its handle.
            child.kill().ok();
            child.wait().ok();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        std::io::Read::read_to_string(&mut e, &mut err).ok();
    }
    let tail: String = err
        .lines()
        .rev()
        .take(6)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n");
    match status {
        Some(s) if s.success() => Ok(tail),
        Some(s) => Err(format!("{path} failed ({s}):\n{tail}")),
        None => Err(format!(
            "{path} did not finish in {timeout:?} (killed):\n{tail}"
        )),
    }
}

/// The child of [`a_long_flat_chain_is_a_limit_error_not_a_stack_overflow`].
#[test]
fn child_long_flat_chain() {
    if !is_child("child_long_flat_chain") {
        return;
    }
    // An 8 MiB stack, a main thread's usual size.
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(|| {
            // 65_533 bytes: under the parser's own 64 KiB limit, and no nesting at all.
            let text = vec!["a"; 32_767].join("+");
            let e = Expr::parse(&text).expect("a flat sum parses");
            let r = e.compile(&[("a", Arg::Tensor(F32))], None);
            assert!(
                matches!(
                    r,
                    Err(Error::ExprLimit {
                        what: "instructions",
                        ..
                    })
                ),
                "{r:?}"
            );
            drop(e);
        })
        .unwrap()
        .join()
        .unwrap();
}

/// A flat `a+a+…+a` has no nesting, so the parser's nesting limit lets it through as a
/// left-deep tree; compiling (and dropping) it must end in `ExprLimit`, not a stack
/// overflow that aborts the process.
#[test]
fn a_long_flat_chain_is_a_limit_error_not_a_stack_overflow() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    if let Err(e) = run_child("child_long_flat_chain", Duration::from_secs(60)) {
        panic!("{e}");
    }
}

/// The child of [`a_shared_subtree_compiles_in_time_linear_in_its_nodes`].
#[test]
fn child_shared_dag() {
    if !is_child("child_shared_dag") {
        return;
    }
    // 41 distinct nodes, a tree of 2^40 leaves: `Expr` clones share subtrees.
    let mut e = v("a");
    for _ in 0..40 {
        e = e.clone() + e;
    }
    let r = e.compile(&[("a", Arg::Tensor(F32))], None);
    assert!(
        matches!(
            r,
            Err(Error::ExprLimit {
                what: "instructions",
                ..
            })
        ),
        "{r:?}"
    );
}

/// `Expr` is cheap to clone because subtrees are shared; compiling such a DAG must not
/// walk the tree it stands for (2^40 leaves here) before the instruction limit stops it.
#[test]
fn a_shared_subtree_compiles_in_time_linear_in_its_nodes() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    if let Err(e) = run_child("child_shared_dag", Duration::from_secs(20)) {
        panic!("{e}");
    }
}
