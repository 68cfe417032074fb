//! `ptx-snapshot <crate-dir> [--check | --materialize DIR]`: refresh a kernel crate's
//! committed PTX snapshot, prove it fresh (exit 1 if not), or write its per-target PTX
//! files into DIR. Used by `scripts/ptx` and `scripts/check-ptx`.

use strided_apply_builder::{PtxBuild, Toolchain};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let check = args.iter().any(|a| a == "--check");
    let Some(dir) = args.first().filter(|a| !a.starts_with("--")) else {
        eprintln!("usage: ptx-snapshot <kernel-crate-dir> [--check]");
        std::process::exit(2);
    };
    let build = PtxBuild::new(dir);
    if let Some(i) = args.iter().position(|a| a == "--materialize") {
        // Writes sm_NN.ptx files from the snapshot into the given folder (no toolchain).
        let out = args
            .get(i + 1)
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| build.target_dir.join("snapshot"));
        match build.materialize(&out) {
            Ok(files) => {
                for (_, p) in files {
                    println!("{}", p.display());
                }
                std::process::exit(0);
            }
            Err(e) => {
                eprintln!("ptx-snapshot: {e}");
                std::process::exit(1);
            }
        }
    }
    let tc = match Toolchain::detect() {
        Ok(tc) => tc,
        Err(e) => {
            eprintln!("ptx-snapshot: no NVPTX toolchain ({e}); run scripts/setup-toolchain");
            std::process::exit(2);
        }
    };
    eprintln!("ptx-snapshot: {} ({})", tc.version, tc.rustc.display());
    let result = if check {
        let scratch = build.target_dir.join("check");
        build.check_snapshot(&tc, &scratch).map(|stale| {
            if stale.is_empty() {
                eprintln!("ptx-snapshot: {} is fresh", build.snapshot_dir.display());
                0
            } else {
                eprintln!("ptx-snapshot: stale: {}; run scripts/ptx", stale.join(", "));
                1
            }
        })
    } else {
        build.refresh_snapshot(&tc).map(|()| {
            eprintln!("ptx-snapshot: wrote {}", build.snapshot_dir.display());
            0
        })
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("ptx-snapshot: {e}");
            std::process::exit(1);
        }
    }
}
