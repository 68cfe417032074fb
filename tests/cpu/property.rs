//! Property tests over random layouts (issue #6): rank 0–6 and near the maximum, sizes 0
//! and 1, positive, negative and zero strides, offsets, broadcasting across 1–4 operands,
//! every element type.
//!
//! 1. The collapsed plan visits exactly the (output, inputs) offset tuples of a naive walk
//!    over the un-collapsed shape, computed with the index width the plan's variant uses.
//! 2. The CPU twin equals a naive reference for a random (op, types) row of the op table.
//! 3. Validation accepts a (shape, strides, offset, buffer length) iff every reachable
//!    offset is inside the buffer (computed independently in `common::random`).
//!
//! Each case is generated from one `u64` seed (`common::random`), which proptest prints on
//! failure and stores in `tests/cpu/property.regressions` so the next run replays it first.
//! `STRIDED_APPLY_PROPTEST_SCALE` multiplies the case counts (default 1).

use crate::common::random::{all_offsets, random_case, reference_fits, wild_layout, Limits};
use crate::common::{naive_offsets, random_vec, Case, Rng, TestElem};
use crate::op_table;
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, TestCaseError, TestRunner};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use strided_apply::ops::{Cast, Fill, Op1, Op2, Op3, Op4, Tolerance};
use strided_apply::plan::plan;
use strided_apply::verify::first_mismatch;
use strided_apply::{cpu, Error, Layout, Variant, MAX_DIMS};

const NAMES: [&str; 4] = ["out", "a", "b", "c"];
const LIMITS: Limits = Limits { max_numel: 1 << 12 };

/// Runs `property` on `cases` random seeds (times `STRIDED_APPLY_PROPTEST_SCALE`) with
/// proptest's runner: a failure is shrunk, printed with its seed and stored in
/// `tests/cpu/property.regressions`, whose seeds later runs try first. Prints the case count.
fn run_property(name: &str, cases: u32, property: fn(u64) -> Result<(), String>) {
    let scale: u32 = std::env::var("STRIDED_APPLY_PROPTEST_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let config = ProptestConfig {
        cases: cases * scale,
        source_file: Some(file!()),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        // A seed shrinks to another seed, i.e. to another case: a few tries are enough.
        max_shrink_iters: 64,
        ..ProptestConfig::default()
    };
    let ran = AtomicUsize::new(0);
    let start = std::time::Instant::now();
    let mut runner = TestRunner::new(config);
    let result = runner.run(&any::<u64>(), |seed| {
        ran.fetch_add(1, Ordering::Relaxed);
        property(seed).map_err(TestCaseError::fail)
    });
    // Past the harness's output capture, so `cargo test` shows the counts.
    let _ = writeln!(
        std::io::stderr(),
        "proptest {name}: {} cases in {:.1} s",
        ran.load(Ordering::Relaxed),
        start.elapsed().as_secs_f64()
    );
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
    assert!(ran.load(Ordering::Relaxed) >= (cases * scale) as usize);
}

/// The (output, inputs) offsets the plan visits, computed by the kernels' own
/// IndexToOffset (`Geometry::offsets`) with the index type of the plan's variant.
fn plan_offsets<const N: usize>(
    layouts: [&Layout; N],
) -> Result<(Variant, Vec<Vec<usize>>), Error> {
    let p = plan(layouts, std::array::from_fn(|k| NAMES[k]))?;
    let mut out = Vec::with_capacity(p.numel as usize);
    let (g1, g2, g3) = (
        p.geometry::<u32, 1>(),
        p.geometry::<u32, 2>(),
        p.geometry::<u32, 3>(),
    );
    let (gn, gn64) = (p.geometry::<u32, MAX_DIMS>(), p.geometry::<u64, MAX_DIMS>());
    for i in 0..p.numel {
        let rel: [isize; N] = match p.variant {
            Variant::Contig => [i as isize; N],
            Variant::D1 => g1.offsets(i as u32, 1),
            Variant::D2 => g2.offsets(i as u32, 2),
            Variant::D3 => g3.offsets(i as u32, 3),
            Variant::Dn => gn.offsets(i as u32, p.ndim),
            Variant::Dn64 => gn64.offsets(i, p.ndim),
            v => panic!("the planner picked {v:?}, which only the launcher may pick"),
        };
        out.push(
            (0..N)
                .map(|k| (p.base[k] as isize + rel[k]) as usize)
                .collect(),
        );
    }
    Ok((p.variant, out))
}

static VARIANTS: [AtomicUsize; 6] = [const { AtomicUsize::new(0) }; 6];

fn plan_visits_naive_tuples(seed: u64) -> Result<(), String> {
    let mut rng = Rng(seed | 1);
    let inputs = rng.below(4) as usize;
    let case = random_case(&mut rng, inputs, LIMITS);
    let l: Vec<&Layout> = std::iter::once(&case.out)
        .chain(&case.inputs)
        .map(|o| &o.layout)
        .collect();
    let got = match inputs {
        0 => plan_offsets([l[0]]),
        1 => plan_offsets([l[0], l[1]]),
        2 => plan_offsets([l[0], l[1], l[2]]),
        _ => plan_offsets([l[0], l[1], l[2], l[3]]),
    };
    let (variant, mut got) = got.map_err(|e| format!("seed {seed}: plan refused {case:?}: {e}"))?;
    let mut expect = naive_offsets(&case);
    got.sort_unstable();
    expect.sort_unstable();
    if got != expect {
        return Err(format!(
            "seed {seed}: the {variant:?} plan visits {} tuples, the naive walk {}; first difference {:?}; case {case:?}",
            got.len(),
            expect.len(),
            got.iter().zip(&expect).find(|(g, e)| g != e)
        ));
    }
    let v = [
        Variant::Contig,
        Variant::D1,
        Variant::D2,
        Variant::D3,
        Variant::Dn,
        Variant::Dn64,
    ];
    if let Some(i) = v.iter().position(|&x| x == variant) {
        VARIANTS[i].fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

#[test]
fn plan_visits_exactly_the_naive_tuples() {
    run_property(
        "plan_visits_exactly_the_naive_tuples",
        20000,
        plan_visits_naive_tuples,
    );
    let names = ["Contig", "D1", "D2", "D3", "Dn", "Dn64"];
    let seen: Vec<usize> = VARIANTS.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    let _ = writeln!(
        std::io::stderr(),
        "proptest plan variants: {}",
        names
            .iter()
            .zip(&seen)
            .map(|(n, c)| format!("{n} {c}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // Every 32-bit variant is reached (64-bit needs more than 2^31 elements or offsets).
    assert!(seen[..5].iter().all(|&c| c > 0), "{seen:?}");
}

// ---------------------------------------------------------------- CPU twin vs naive

fn poisoned<O: TestElem>(rng: &mut Rng, len: usize, update: bool) -> Vec<O> {
    if update {
        random_vec(rng, len)
    } else {
        vec![O::poison(); len]
    }
}

fn compare<O: TestElem>(name: &str, case: &Case, got: &[O], expect: &[O]) -> Result<(), String> {
    match first_mismatch(got, expect, Tolerance::Exact) {
        None => Ok(()),
        Some(m) => Err(format!(
            "{name}: CPU twin differs from the naive walk at {m}; case {case:?}"
        )),
    }
}

fn twin1<Op: Op1<T>, T: TestElem>(op: Op, name: &str, rng: &mut Rng) -> Result<(), String> {
    let case = random_case(rng, 0, LIMITS);
    let init: Vec<T> = poisoned(rng, case.out.len, true);
    let mut got = init.clone();
    cpu::apply1(op, (&mut got, &case.out.layout)).map_err(|e| format!("{name}: {e}"))?;
    let mut expect = init;
    for o in naive_offsets(&case) {
        op.apply(&mut expect[o[0]]);
    }
    compare(name, &case, &got, &expect)
}

fn twin2<Op: Op2<O, A>, O: TestElem, A: TestElem>(
    op: Op,
    name: &str,
    rng: &mut Rng,
) -> Result<(), String> {
    let case = random_case(rng, 1, LIMITS);
    let a: Vec<A> = random_vec(rng, case.inputs[0].len);
    let mut got: Vec<O> = poisoned(rng, case.out.len, false);
    let mut expect = got.clone();
    cpu::apply2(
        op,
        (&mut got, &case.out.layout),
        (&a, &case.inputs[0].layout),
    )
    .map_err(|e| format!("{name}: {e}"))?;
    for o in naive_offsets(&case) {
        op.apply(&mut expect[o[0]], a[o[1]]);
    }
    compare(name, &case, &got, &expect)
}

fn twin3<Op: Op3<O, A, B>, O: TestElem, A: TestElem, B: TestElem>(
    op: Op,
    name: &str,
    rng: &mut Rng,
) -> Result<(), String> {
    let case = random_case(rng, 2, LIMITS);
    let a: Vec<A> = random_vec(rng, case.inputs[0].len);
    let b: Vec<B> = random_vec(rng, case.inputs[1].len);
    let mut got: Vec<O> = poisoned(rng, case.out.len, false);
    let mut expect = got.clone();
    cpu::apply3(
        op,
        (&mut got, &case.out.layout),
        (&a, &case.inputs[0].layout),
        (&b, &case.inputs[1].layout),
    )
    .map_err(|e| format!("{name}: {e}"))?;
    for o in naive_offsets(&case) {
        op.apply(&mut expect[o[0]], a[o[1]], b[o[2]]);
    }
    compare(name, &case, &got, &expect)
}

fn twin4<Op: Op4<O, A, B, C>, O: TestElem, A: TestElem, B: TestElem, C: TestElem>(
    op: Op,
    name: &str,
    rng: &mut Rng,
) -> Result<(), String> {
    let case = random_case(rng, 3, LIMITS);
    let a: Vec<A> = random_vec(rng, case.inputs[0].len);
    let b: Vec<B> = random_vec(rng, case.inputs[1].len);
    let c: Vec<C> = random_vec(rng, case.inputs[2].len);
    let mut got: Vec<O> = poisoned(rng, case.out.len, false);
    let mut expect = got.clone();
    cpu::apply4(
        op,
        (&mut got, &case.out.layout),
        (&a, &case.inputs[0].layout),
        (&b, &case.inputs[1].layout),
        (&c, &case.inputs[2].layout),
    )
    .map_err(|e| format!("{name}: {e}"))?;
    for o in naive_offsets(&case) {
        op.apply(&mut expect[o[0]], a[o[1]], b[o[2]], c[o[3]]);
    }
    compare(name, &case, &got, &expect)
}

/// Rows of the op table (every op × element types).
fn op_rows() -> usize {
    let mut rows = 0;
    macro_rules! count {
        ($($t:tt)*) => {
            rows += 1
        };
    }
    // The table's `use`s and bindings, which counting does not need.
    #[allow(unused_imports, unused_variables)]
    {
        op_table!(count);
    }
    rows
}

/// Runs one random (op, types) row of the table on one random case.
fn twin_matches_naive(seed: u64) -> Result<(), String> {
    let mut rng = Rng(seed | 1);
    let pick = rng.below(op_rows() as u64) as usize;
    let mut row = 0usize;
    let mut result: Option<Result<(), String>> = None;
    macro_rules! run {
        (1, $name:expr, $op:expr, $t:ty) => {
            run!(@row twin1::<_, $t>($op, $name, &mut rng))
        };
        (2, $name:expr, $op:expr, $o:ty, $a:ty) => {
            run!(@row twin2::<_, $o, $a>($op, $name, &mut rng))
        };
        (3, $name:expr, $op:expr, $o:ty, $a:ty, $b:ty) => {
            run!(@row twin3::<_, $o, $a, $b>($op, $name, &mut rng))
        };
        (4, $name:expr, $op:expr, $o:ty, $a:ty, $b:ty, $c:ty) => {
            run!(@row twin4::<_, $o, $a, $b, $c>($op, $name, &mut rng))
        };
        (@row $call:expr) => {{
            if row == pick {
                result = Some($call);
            }
            row += 1;
        }};
    }
    op_table!(run);
    let _ = row;
    result
        .unwrap_or_else(|| Err(format!("row {pick} not in the table")))
        .map_err(|e| format!("seed {seed}: {e}"))
}

#[test]
fn cpu_twin_equals_naive_reference() {
    run_property("cpu_twin_equals_naive_reference", 20000, twin_matches_naive);
}

// ---------------------------------------------------------------- validation

static REFUSED: AtomicUsize = AtomicUsize::new(0);
static ACCEPTED: AtomicUsize = AtomicUsize::new(0);

fn validation_is_exact(seed: u64) -> Result<(), String> {
    let mut rng = Rng(seed | 1);
    let (layout, len) = wild_layout(&mut rng);
    let fits = reference_fits(&layout, len);
    let ctx = || format!("seed {seed}: {layout:?} in a buffer of {len}");
    let checked = layout.check_in(len, "a");
    match (&checked, fits) {
        (Ok(_), true) => {
            ACCEPTED.fetch_add(1, Ordering::Relaxed);
        }
        (
            Err(Error::OutOfBounds { operand: "a", .. } | Error::Overflow { operand: "a", .. }),
            false,
        ) => {
            REFUSED.fetch_add(1, Ordering::Relaxed);
            let msg = checked.as_ref().unwrap_err().to_string();
            if !msg.starts_with("a: ") {
                return Err(format!(
                    "{}: message does not name the operand: {msg}",
                    ctx()
                ));
            }
        }
        (Ok(_), false) => return Err(format!("{}: accepted, but it reaches outside", ctx())),
        (Err(e), _) => return Err(format!("{}: refused with {e:?} (in bounds: {fits})", ctx())),
    }
    // The span it reports is the one a naive walk reaches.
    let small = layout.numel() <= 1 << 12 && len <= 1 << 16 && layout.ndim() <= MAX_DIMS;
    if let (Ok(span), true) = (&checked, small) {
        let offs = all_offsets(&layout);
        let naive = offs
            .iter()
            .min()
            .map(|&lo| (lo as isize, *offs.iter().max().unwrap() as isize));
        if naive != span.map(|s| (s.min, s.max)) {
            return Err(format!("{}: span {span:?}, naive walk {naive:?}", ctx()));
        }
    }
    if !small {
        return Ok(());
    }
    // The same verdict through the CPU twin, for the layout as an input and as an output.
    let src: Vec<u8> = (0..len).map(|i| i as u8).collect();
    let shape = layout.shape().to_vec();
    let mut dst = vec![0u8; layout.numel()];
    let dense = Layout::contiguous(&shape).map_err(|e| e.to_string())?;
    match (cpu::apply2(Cast, (&mut dst, &dense), (&src, &layout)), fits) {
        (Ok(()), true) => {
            let expect: Vec<u8> = all_offsets(&layout).iter().map(|&o| src[o]).collect();
            if dst != expect {
                return Err(format!("{}: gathered wrong elements", ctx()));
            }
        }
        (
            Err(Error::OutOfBounds { operand: "a", .. } | Error::Overflow { operand: "a", .. }),
            false,
        ) => {}
        (r, _) => {
            return Err(format!(
                "{}: cpu::apply2 input gave {r:?} (in bounds: {fits})",
                ctx()
            ))
        }
    }
    let mut buf = vec![0u8; len];
    let r = cpu::apply1(Fill(7u8), (&mut buf, &layout));
    let offs = if fits { all_offsets(&layout) } else { vec![] };
    let mut sorted = offs.clone();
    sorted.sort_unstable();
    sorted.dedup();
    let distinct = sorted.len() == offs.len();
    match (r, fits) {
        (Ok(()), true) if distinct => {
            let written = buf.iter().filter(|&&x| x == 7).count();
            if written != offs.len() {
                return Err(format!(
                    "{}: fill wrote {written} elements, not {}",
                    ctx(),
                    offs.len()
                ));
            }
        }
        (Err(Error::OverlappingOutput { operand: "out", .. }), true)
            if !distinct || layout.has_internal_overlap() => {}
        (
            Err(Error::OutOfBounds { operand: "out", .. } | Error::Overflow { operand: "out", .. }),
            false,
        ) => {}
        (r, _) => {
            return Err(format!(
                "{}: cpu::apply1 output gave {r:?} (in bounds: {fits}, distinct: {distinct})",
                ctx()
            ))
        }
    }
    Ok(())
}

#[test]
fn validation_accepts_exactly_the_in_bounds_layouts() {
    run_property(
        "validation_accepts_exactly_the_in_bounds_layouts",
        40000,
        validation_is_exact,
    );
    let (yes, no) = (
        ACCEPTED.load(Ordering::Relaxed),
        REFUSED.load(Ordering::Relaxed),
    );
    let _ = writeln!(
        std::io::stderr(),
        "proptest validation: {yes} accepted, {no} refused"
    );
    // Both verdicts are well represented (the generator aims at the edges).
    assert!(
        yes * 5 > yes + no && no * 5 > yes + no,
        "{yes} accepted, {no} refused"
    );
}

/// The 32/64-bit index choice at its boundary: a reversed 1-D view (not contiguous, so a
/// `D` variant) of 2^31 - 1, 2^31 and 2^31 + 1 elements, and 2-element views whose reach
/// is just below, at and above 2^31 - 1.
#[test]
fn index_width_switches_at_2_pow_31() {
    let flipped = |n: usize| Layout::new(&[n], &[-1], n - 1).unwrap();
    let dense = |n: usize| Layout::contiguous(&[n]).unwrap();
    let variant = |o: &Layout, a: &Layout| plan([o, a], ["out", "a"]).unwrap().variant;
    let m = i32::MAX as usize;
    assert_eq!(variant(&dense(m), &flipped(m)), Variant::D1);
    assert_eq!(variant(&dense(m + 1), &flipped(m + 1)), Variant::Dn64);
    assert_eq!(variant(&dense(m + 2), &flipped(m + 2)), Variant::Dn64);
    assert_eq!(variant(&dense(m + 8), &dense(m + 8)), Variant::Contig);
    let two = |stride: isize| Layout::new(&[2], &[stride], 0).unwrap();
    assert_eq!(variant(&dense(2), &two(m as isize)), Variant::D1);
    assert_eq!(variant(&dense(2), &two(m as isize + 1)), Variant::Dn64);
    assert_eq!(variant(&dense(2), &two(-(m as isize) - 1)), Variant::Dn64);
    assert_eq!(variant(&two(m as isize + 1), &dense(2)), Variant::Dn64);
}
