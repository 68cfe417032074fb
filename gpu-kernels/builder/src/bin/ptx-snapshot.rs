//! `ptx-snapshot <crate-dir> [--with DIR]… [--check | --fingerprint | --extract DIR]`:
//! refresh a kernel crate's committed image snapshot, prove it fresh (exit 1 if not, or if
//! sm_90 cubins spill registers), check only that its `FINGERPRINT` matches today's sources
//! (seconds, no toolchain: a stale image makes every build script compile the kernels), or
//! write every family's decoded cubin and PTX into DIR. `--with DIR`
//! names another crate whose sources the kernels are built from (part of the
//! fingerprint). Used by `scripts/ptx`.

use strided_apply_builder::image::{Image, Kind};
use strided_apply_builder::{PtxBuild, TargetStats, Toolchain};

fn fail(msg: String) -> ! {
    eprintln!("ptx-snapshot: {msg}");
    std::process::exit(1)
}

/// Prints the statistics; `false` when a no-spill target spills.
fn report(stats: &[TargetStats]) -> bool {
    let mut ok = true;
    for s in stats {
        eprintln!("ptx-snapshot: {s}");
        if s.forbidden_spills() {
            eprintln!(
                "ptx-snapshot: ERROR: register spills on {} are not allowed",
                s.target
            );
            ok = false;
        }
    }
    ok
}

/// Writes `DIR/<target>/<family>.cubin|.ptx` from the snapshot (no toolchain needed).
fn extract(build: &PtxBuild, dir: &std::path::Path) -> Result<usize, String> {
    let bytes = std::fs::read(build.snapshot_image()).map_err(|e| e.to_string())?;
    let image = Image::parse(&bytes).map_err(|e| e.to_string())?;
    let mut n = 0;
    for (t, target) in image.targets().iter().enumerate() {
        let sub = dir.join(target.to_string().replace(' ', "-"));
        std::fs::create_dir_all(&sub).map_err(|e| e.to_string())?;
        let dict = image.dictionary(t).map_err(|e| e.to_string())?;
        for f in 0..image.len() {
            let mut code = image
                .decode(f, t, dict.as_deref())
                .map_err(|e| e.to_string())?;
            let ext = match target.kind {
                Kind::Cubin => "cubin",
                Kind::Ptx => {
                    code.splice(0..0, image.header(t).bytes());
                    "ptx"
                }
            };
            std::fs::write(sub.join(format!("{}.{ext}", image.family_name(f))), code)
                .map_err(|e| e.to_string())?;
            n += 1;
        }
    }
    Ok(n)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let check = args.iter().any(|a| a == "--check");
    let Some(dir) = args.first().filter(|a| !a.starts_with("--")) else {
        eprintln!(
            "usage: ptx-snapshot <kernel-crate-dir> [--with DIR]... [--check | --fingerprint | --extract DIR]"
        );
        std::process::exit(2);
    };
    let mut build = PtxBuild::new(dir);
    build.extra_sources = args
        .windows(2)
        .filter(|w| w[0] == "--with")
        .map(|w| std::path::PathBuf::from(&w[1]))
        .collect();
    if let Some(i) = args.iter().position(|a| a == "--extract") {
        let out = args
            .get(i + 1)
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| build.target_dir.join("extracted"));
        match extract(&build, &out) {
            Ok(n) => eprintln!("ptx-snapshot: wrote {n} files under {}", out.display()),
            Err(e) => fail(e),
        }
        return;
    }
    if args.iter().any(|a| a == "--fingerprint") {
        let fresh = build
            .snapshot_matches_sources()
            .unwrap_or_else(|e| fail(e.to_string()));
        if fresh {
            eprintln!(
                "ptx-snapshot: {}: FINGERPRINT matches the sources",
                build.snapshot_dir.display()
            );
            return;
        }
        fail(format!(
            "{}: FINGERPRINT does not match the sources (a kernel source changed after the \
             last refresh; builds would compile the kernels from source): run scripts/ptx",
            build.snapshot_dir.display()
        ));
    }
    let tc = match Toolchain::detect() {
        Ok(tc) => tc,
        Err(e) => {
            eprintln!("ptx-snapshot: no NVPTX toolchain ({e}); run scripts/setup-toolchain");
            std::process::exit(2);
        }
    };
    eprintln!("ptx-snapshot: {} ({})", tc.version, tc.rustc.display());
    eprintln!(
        "ptx-snapshot: {}",
        strided_apply_builder::ptxas_version(&tc.ptxas)
    );
    if check {
        let scratch = build.target_dir.join("check");
        // `STRIDED_APPLY_CHECK_ARCHS=90` (comma-separated): rebuild and compare only those
        // PTX targets and the cubins made from them; `STRIDED_APPLY_CHECK_CUBINS=90`: of
        // those cubins, only the listed SM versions' (CI splits the op library's check in
        // two for memory). Empty means every target.
        let sm_list = |var: &str| -> Option<Vec<u32>> {
            std::env::var(var)
                .ok()
                .filter(|v| !v.trim().is_empty())
                .map(|v| {
                    v.split(',')
                        .map(|a| {
                            a.trim().parse().unwrap_or_else(|_| {
                                fail(format!("{var}: `{a}` is not an sm number"))
                            })
                        })
                        .collect()
                })
        };
        let archs = sm_list("STRIDED_APPLY_CHECK_ARCHS");
        let cubins = sm_list("STRIDED_APPLY_CHECK_CUBINS");
        let r = build
            .check_snapshot_archs(&tc, &scratch, archs.as_deref(), cubins.as_deref())
            .unwrap_or_else(|e| fail(e.to_string()));
        let spills_ok = report(&r.stats);
        for n in &r.notes {
            eprintln!("ptx-snapshot: note: {n}");
        }
        if r.stale.is_empty() {
            eprintln!("ptx-snapshot: {} is fresh", build.snapshot_dir.display());
        } else {
            for s in &r.stale {
                eprintln!("ptx-snapshot: stale: {s}");
            }
            eprintln!("ptx-snapshot: run scripts/ptx to refresh the snapshot");
        }
        std::process::exit(if r.stale.is_empty() && spills_ok {
            0
        } else {
            1
        });
    }
    let stats = build
        .refresh_snapshot(&tc)
        .unwrap_or_else(|e| fail(e.to_string()));
    let ok = report(&stats);
    eprintln!("ptx-snapshot: wrote {}", build.snapshot_dir.display());
    std::process::exit(if ok { 0 } else { 1 });
}
