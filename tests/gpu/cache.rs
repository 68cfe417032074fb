//! Tier 1's disk cache across processes: every kind of damage to one cached cubin (emptied,
//! cut short, a flipped byte, random bytes, a folder in its place, a file another process
//! is still writing) is found, deleted, compiled again and reported once, in a fresh
//! process each, with results bit-identical to a run on a fresh cache; processes sharing
//! one cache folder at once see only whole entries.
//!
//! The processes are this test binary itself: with `STRIDED_APPLY_TEST_CACHE_CHILD=FILE`
//! set, `main` runs [`child`] instead of the tests.

use crate::harness::TestResult;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use strided_apply::expr::{
    damaged_cache_entries, tier1_launches, Arg, DeviceArg, Expr, ReduceOp, Tier,
};
use strided_apply::{DeviceTensor, ElemType, Error, Gpu};

/// The variable that makes this binary a child: the file its results go to.
pub const CHILD: &str = "STRIDED_APPLY_TEST_CACHE_CHILD";

fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64 * 8.0 - 4.0
        })
        .collect()
}

/// The child's work: four expressions compiled by tier 1 (three pointwise over contiguous,
/// transposed and broadcast operands, f32 and f64, and a row reduction), their results'
/// bytes written to `out`; a line with the compiled launches and the damaged cache files.
pub fn child(out: &Path) -> Result<String, String> {
    let e = |e: Error| e.to_string();
    let g = strided_apply::open(0).map_err(e)?;
    let (r, c) = (96usize, 160usize);
    let n = r * c;
    let f32s = |seed| {
        values(n, seed)
            .into_iter()
            .map(|v| v as f32)
            .collect::<Vec<_>>()
    };
    let (a, b) = (f32s(1), f32s(2));
    let da = DeviceTensor::from_slice(&g, &a, &[r, c]).map_err(e)?;
    let db = DeviceTensor::from_slice(&g, &b, &[r, c]).map_err(e)?;
    let dat = DeviceTensor::from_slice(&g, &a, &[c, r]).map_err(e)?;
    let row = DeviceTensor::from_slice(&g, &b[..c], &[c]).map_err(e)?;
    let t32 = [
        ("a", Arg::Tensor(ElemType::F32)),
        ("b", Arg::Tensor(ElemType::F32)),
    ];
    let compile = |text: &str, args: &[(&str, Arg)]| {
        Expr::parse(text)
            .and_then(|x| x.compile(args, None))
            .map(|f| f.with_tier(Tier::Compile))
            .map_err(e)
    };
    let mut bytes: Vec<u8> = Vec::new();
    let before = tier1_launches();
    // Pointwise, f32: contiguous, then a transposed and a broadcast operand.
    let f = compile("fma(a, b, 3.5) / (abs(b) + 0.75) - maximum(a, b)", &t32)?;
    let ta = dat.transpose(0, 1).map_err(e)?;
    let rb = row.broadcast_to(&[r, c]).map_err(e)?;
    for (x, y) in [(&da, &db), (&ta, &rb)] {
        let mut o = DeviceTensor::from_slice(&g, &vec![f32::NAN; n], &[r, c]).map_err(e)?;
        f.run(&g, &mut o, &[DeviceArg::from(x), DeviceArg::from(y)], &[])
            .map_err(e)?;
        bytes.extend(
            o.to_vec(&g)
                .map_err(e)?
                .iter()
                .flat_map(|v| v.to_le_bytes()),
        );
    }
    // Pointwise, f64, with library functions.
    let (a64, b64) = (values(n, 3), values(n, 4));
    let d64a = DeviceTensor::from_slice(&g, &a64, &[n]).map_err(e)?;
    let d64b = DeviceTensor::from_slice(&g, &b64, &[n]).map_err(e)?;
    let t64 = [
        ("a", Arg::Tensor(ElemType::F64)),
        ("b", Arg::Tensor(ElemType::F64)),
    ];
    let f = compile("tanh(a) + log1p(abs(b)) * sin(a * b)", &t64)?;
    let mut o = DeviceTensor::from_slice(&g, &vec![f64::NAN; n], &[n]).map_err(e)?;
    f.run(
        &g,
        &mut o,
        &[DeviceArg::from(&d64a), DeviceArg::from(&d64b)],
        &[],
    )
    .map_err(e)?;
    bytes.extend(
        o.to_vec(&g)
            .map_err(e)?
            .iter()
            .flat_map(|v| v.to_le_bytes()),
    );
    // A reduction of an expression's values over rows.
    let f = compile("(a - b) * (a - b)", &t32)?;
    let mut o = DeviceTensor::from_slice(&g, &vec![f32::NAN; r], &[r]).map_err(e)?;
    f.reduce(
        &g,
        ReduceOp::Sum,
        &mut o,
        &[DeviceArg::from(&da), DeviceArg::from(&db)],
        &[],
        &[1],
    )
    .map_err(e)?;
    bytes.extend(
        o.to_vec(&g)
            .map_err(e)?
            .iter()
            .flat_map(|v| v.to_le_bytes()),
    );
    std::fs::write(out, &bytes).map_err(|x| x.to_string())?;
    Ok(format!(
        "launches={} damaged={}",
        tier1_launches() - before,
        damaged_cache_entries()
    ))
}

/// A finished child: its results and what it printed.
struct Run {
    bytes: Vec<u8>,
    stdout: String,
    stderr: String,
}

impl Run {
    /// The count the child printed for `key` (`launches`, `damaged`).
    fn count(&self, key: &str) -> Option<u64> {
        let at = self.stdout.find(&format!("{key}="))? + key.len() + 1;
        let digits: String = self.stdout[at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    }
}

/// Starts a child on cache folder `cache` (`None`: no cache) writing to `out`.
fn spawn(cache: Option<&Path>, out: &Path) -> Result<std::process::Child, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(exe);
    cmd.env(CHILD, out)
        .env_remove("STRIDED_APPLY_EXPR_TIER")
        .env_remove("STRIDED_APPLY_EXPR_TIER1_FAULT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match cache {
        Some(d) => cmd.env("STRIDED_APPLY_EXPR_CACHE", d),
        None => cmd.env("STRIDED_APPLY_EXPR_CACHE", "0"),
    };
    cmd.spawn().map_err(|e| format!("starting a child: {e}"))
}

/// Waits for a child: its run, or what went wrong (a signal, a non-zero exit, no results).
fn finish(what: &str, child: std::process::Child, out: &Path) -> Result<Run, String> {
    let o: Output = child
        .wait_with_output()
        .map_err(|e| format!("{what}: {e}"))?;
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    if !o.status.success() {
        return Err(format!(
            "{what}: the child ended with {} (stdout: {stdout:?}, stderr: {stderr:?})",
            o.status
        ));
    }
    let bytes = std::fs::read(out).map_err(|e| format!("{what}: no results: {e}"))?;
    let _ = std::fs::remove_file(out);
    Ok(Run {
        bytes,
        stdout,
        stderr,
    })
}

fn run(what: &str, cache: Option<&Path>, out: &Path) -> Result<Run, String> {
    finish(what, spawn(cache, out)?, out)
}

fn cubins(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|r| {
            r.flatten()
                .map(|x| x.path())
                .filter(|p| p.extension().is_some_and(|x| x == "cubin"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn copy_folder(from: &Path, to: &Path) -> Result<(), String> {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).map_err(|e| e.to_string())?;
    for f in cubins(from) {
        let name = f.file_name().ok_or("a cache file without a name")?;
        std::fs::copy(&f, to.join(name)).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Whether `dir` holds files other than cache entries (temporary files left behind).
fn strays(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|r| {
            r.flatten()
                .map(|x| x.path())
                .filter(|p| p.extension().is_none_or(|x| x != "cubin"))
                .map(|p| p.display().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The damages, each applied to one cache file in a folder of its own.
const DAMAGES: [&str; 6] = [
    "emptied",
    "cut to half its length",
    "one byte flipped in the middle",
    "replaced by 333 random bytes",
    "a folder in its place",
    "another process still writing it",
];

pub fn damaged_entries(_gpu: &Gpu) -> TestResult {
    let root = std::env::temp_dir().join(format!("sa-t1-damage-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
    let outcome = damage_cases(&root);
    let _ = std::fs::remove_dir_all(&root);
    outcome
}

fn damage_cases(root: &Path) -> TestResult {
    let out = root.join("out.bin");
    let fresh = run("no cache", None, &out)?;
    let pristine = root.join("pristine");
    let first = run("fresh cache", Some(&pristine), &out)?;
    if first.bytes != fresh.bytes {
        return Err("a run writing the cache differs from a run without one".into());
    }
    let launches = first.count("launches").ok_or("no launch count")?;
    if launches < 4 {
        return Err(format!("only {launches} launches ran compiled"));
    }
    let files = cubins(&pristine);
    if files.len() < 4 {
        return Err(format!("{} cache files after the first run", files.len()));
    }
    let cached = run("from the cache", Some(&pristine), &out)?;
    if cached.bytes != fresh.bytes || cached.count("damaged") != Some(0) {
        return Err(format!("from a whole cache: {}", cached.stdout.trim()));
    }
    let mut lines = Vec::new();
    for (k, damage) in DAMAGES.iter().enumerate() {
        let dir = root.join(format!("case{k}"));
        copy_folder(&pristine, &dir)?;
        // A file in the middle of the list: which kernel it holds does not matter.
        let victim = cubins(&dir)
            .get(files.len() / 2)
            .cloned()
            .ok_or("no cache file to damage")?;
        let entry = std::fs::read(&victim).map_err(|e| e.to_string())?;
        let write = |b: &[u8]| std::fs::write(&victim, b).map_err(|e| e.to_string());
        let mut writer = None;
        match k {
            0 => write(&[])?,
            1 => write(&entry[..entry.len() / 2])?,
            2 => {
                let mut b = entry.clone();
                b[entry.len() / 2] ^= 0x10;
                write(&b)?
            }
            3 => write(
                &(0..333u32)
                    .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
                    .collect::<Vec<_>>(),
            )?,
            4 => {
                std::fs::remove_file(&victim).map_err(|e| e.to_string())?;
                std::fs::create_dir(&victim).map_err(|e| e.to_string())?;
            }
            _ => {
                // The first half written and the file held open, the rest written after
                // the child ends (to the file it found, which it replaced).
                use std::io::Write;
                let mut f = std::fs::File::create(&victim).map_err(|e| e.to_string())?;
                f.write_all(&entry[..entry.len() / 2])
                    .and_then(|()| f.flush())
                    .map_err(|e| e.to_string())?;
                writer = Some(f);
            }
        }
        let got = run(damage, Some(&dir), &out)?;
        if let Some(mut f) = writer {
            use std::io::Write;
            f.write_all(&entry[entry.len() / 2..])
                .map_err(|e| e.to_string())?;
        }
        if got.bytes != fresh.bytes {
            return Err(format!("{damage}: results differ from a fresh cache's"));
        }
        if got.count("damaged") != Some(1) || got.count("launches") != Some(launches) {
            return Err(format!("{damage}: {}", got.stdout.trim()));
        }
        let reports = got.stderr.matches("is damaged").count();
        if reports != 1 || !got.stderr.contains("(reported once)") {
            return Err(format!(
                "{damage}: reported {reports} times: {:?}",
                got.stderr
            ));
        }
        // The damaged file was replaced by a whole entry: a third process finds none.
        let again = run(damage, Some(&dir), &out)?;
        if again.bytes != fresh.bytes || again.count("damaged") != Some(0) {
            return Err(format!("{damage}, then again: {}", again.stdout.trim()));
        }
        if cubins(&dir).len() != files.len() || !strays(&dir).is_empty() {
            return Err(format!(
                "{damage}: {} entries (want {}), strays {:?}",
                cubins(&dir).len(),
                files.len(),
                strays(&dir)
            ));
        }
        lines.push(*damage);
    }
    // Processes sharing one folder at once: first on an empty folder (every one compiles
    // and stores every kernel), then on the full folder.
    let shared = root.join("shared");
    for round in ["empty", "full"] {
        let outs: Vec<PathBuf> = (0..6).map(|i| root.join(format!("out{i}.bin"))).collect();
        let children = outs
            .iter()
            .map(|o| spawn(Some(&shared), o))
            .collect::<Result<Vec<_>, _>>()?;
        for (i, (c, o)) in children.into_iter().zip(&outs).enumerate() {
            let got = finish(&format!("shared {round} folder, process {i}"), c, o)?;
            if got.bytes != fresh.bytes || got.count("damaged") != Some(0) {
                return Err(format!(
                    "shared {round} folder, process {i}: {} {:?}",
                    got.stdout.trim(),
                    got.stderr
                ));
            }
        }
        if cubins(&shared).len() != files.len() || !strays(&shared).is_empty() {
            return Err(format!(
                "shared {round} folder: {} entries, strays {:?}",
                cubins(&shared).len(),
                strays(&shared)
            ));
        }
    }
    Ok(format!(
        "{} cached kernels; {}: each found, deleted, compiled again and reported once in a fresh process, results bit-identical to no cache; 6 processes at once on one folder, empty then full: no damage seen",
        files.len(),
        lines.join(", ")
    ))
}
