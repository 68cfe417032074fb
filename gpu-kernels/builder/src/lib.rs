//! Ahead-of-time PTX for kernel crates written in Rust.
//!
//! A `build.rs` calls [`PtxBuild::run`]: when the crate's committed snapshot
//! (`<crate>/ptx/sm_NN.ptx` + `FINGERPRINT`) matches the hash of the kernel sources and
//! builder flags, the snapshot is used and no GPU toolchain is needed (stable Rust is
//! enough). Otherwise the crate is compiled with rustc's NVPTX backend:
//!
//! ```text
//! RUSTC_BOOTSTRAP=1 cargo build --release --target nvptx64-nvidia-cuda -Zbuild-std=core
//!   -C target-cpu=sm_NN -C linker=llvm-bitcode-linker -C link-arg=libdevice.10.bc
//! ```
//!
//! The toolchain is found, in this order: environment overrides
//! (`STRIDED_APPLY_NVPTX_RUSTC`, `…_CARGO`, `…_BITCODE_LINKER`, `…_LLVM_BIN`), a rustup
//! nightly with `rust-src`, `llvm-tools` and `llvm-bitcode-linker`, Debian's `rustc-web`
//! packages with the linker built by `scripts/setup-toolchain`.
//!
//! A downstream crate with its own kernel crate (see `examples/custom-op`):
//!
//! ```no_run
//! // build.rs of a host crate whose kernels live in ../my-kernels
//! let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap());
//! let ptx = strided_apply_builder::PtxBuild::new("../my-kernels")
//!     .run()
//!     .unwrap_or_else(|e| panic!("{e}"));
//! // Defines `pub const MODULE: strided_apply::ModuleImage`; the host crate does
//! // `include!(concat!(env!("OUT_DIR"), "/module.rs"));` and `gpu.register(MODULE)`.
//! ptx.write_module_rs(&out, "my-kernels", "strided_apply").unwrap();
//! ```

use sha2::{Digest, Sha256};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// SM targets built by default. The host picks the highest one the device can run.
pub const DEFAULT_ARCHS: [u32; 3] = [70, 80, 90];

/// Flags that change the PTX; part of the fingerprint.
const PROFILE_FLAGS: [&str; 6] = [
    "--config",
    "profile.release.lto=true",
    "--config",
    "profile.release.codegen-units=1",
    "--config",
    "profile.release.panic=\"abort\"",
];

/// Why PTX could not be produced.
#[derive(Debug)]
pub enum BuildError {
    /// No NVPTX toolchain was found and the snapshot is stale or missing.
    NoToolchain {
        crate_dir: PathBuf,
        reason: String,
    },
    /// The nvptx build itself failed.
    Compile {
        sm: u32,
        stderr: String,
    },
    Io(std::io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::NoToolchain { crate_dir, reason } => write!(
                f,
                "the kernel crate {} has no PTX snapshot matching its sources, and no NVPTX \
                 toolchain was found to compile it ({reason}). Run scripts/setup-toolchain \
                 (installs rustc-web, rust-web-src, llvm-22, llvm-bitcode-linker and ptxas), \
                 or set STRIDED_APPLY_NVPTX_RUSTC, STRIDED_APPLY_NVPTX_CARGO, \
                 STRIDED_APPLY_BITCODE_LINKER and STRIDED_APPLY_LLVM_BIN; for a committed \
                 snapshot, refresh it with scripts/ptx.",
                crate_dir.display()
            ),
            BuildError::Compile { sm, stderr } => {
                write!(f, "compiling the kernels for sm_{sm} failed:\n{stderr}")
            }
            BuildError::Io(e) => write!(f, "I/O error while building PTX: {e}"),
        }
    }
}

impl std::error::Error for BuildError {}

impl From<std::io::Error> for BuildError {
    fn from(e: std::io::Error) -> Self {
        BuildError::Io(e)
    }
}

/// A found NVPTX toolchain.
#[derive(Clone, Debug)]
pub struct Toolchain {
    pub rustc: PathBuf,
    pub cargo: PathBuf,
    pub linker: PathBuf,
    /// Folder with llvm-link, opt and llc (put on the linker's PATH).
    pub llvm_bin: PathBuf,
    pub libdevice: PathBuf,
    /// `rustc --version` and where it came from.
    pub version: String,
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn run_stdout(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn find_libdevice() -> Result<PathBuf, String> {
    if let Some(p) = env_path("STRIDED_APPLY_LIBDEVICE") {
        return Ok(p);
    }
    let py = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let dir = run_stdout(Command::new(py).args([
        "-c",
        "import nvidia.cuda_nvcc as m; print(list(m.__path__)[0])",
    ]))
    .ok_or("libdevice not found: pip package nvidia-cuda-nvcc-cu12 is not installed")?;
    let p = Path::new(&dir).join("nvvm/libdevice/libdevice.10.bc");
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!("{} is missing", p.display()))
    }
}

impl Toolchain {
    /// Finds a toolchain: environment overrides, rustup nightly, Debian packages.
    pub fn detect() -> Result<Toolchain, String> {
        let libdevice = find_libdevice()?;
        // 1. Explicit overrides.
        if let (Some(rustc), Some(cargo), Some(linker), Some(llvm_bin)) = (
            env_path("STRIDED_APPLY_NVPTX_RUSTC"),
            env_path("STRIDED_APPLY_NVPTX_CARGO"),
            env_path("STRIDED_APPLY_BITCODE_LINKER"),
            env_path("STRIDED_APPLY_LLVM_BIN"),
        ) {
            let version = run_stdout(Command::new(&rustc).arg("--version"))
                .ok_or_else(|| format!("{} --version failed", rustc.display()))?;
            return Ok(Toolchain {
                rustc,
                cargo,
                linker,
                llvm_bin,
                libdevice,
                version,
            });
        }
        // 2. rustup nightly with rust-src, llvm-tools and llvm-bitcode-linker.
        if let Some(sysroot) = run_stdout(
            Command::new("rustup").args(["run", "nightly", "rustc", "--print", "sysroot"]),
        ) {
            let sysroot = PathBuf::from(sysroot);
            let host = run_stdout(Command::new("rustup").args([
                "run",
                "nightly",
                "rustc",
                "--print",
                "host-tuple",
            ]))
            .unwrap_or_default();
            let bin = sysroot.join("lib/rustlib").join(&host).join("bin");
            let linker = bin.join("llvm-bitcode-linker");
            let src = sysroot.join("lib/rustlib/src/rust/library/core");
            if linker.is_file() && src.is_dir() && bin.join("llc").is_file() {
                let rustc = sysroot.join("bin/rustc");
                let version = run_stdout(Command::new(&rustc).arg("--version")).unwrap_or_default();
                return Ok(Toolchain {
                    cargo: sysroot.join("bin/cargo"),
                    rustc,
                    linker,
                    llvm_bin: bin,
                    libdevice,
                    version,
                });
            }
        }
        // 3. Debian's rustc-web + rust-web-src + llvm-22, linker from scripts/setup-toolchain.
        let rustc = PathBuf::from("/usr/bin/rustc");
        let cache = env_path("STRIDED_APPLY_TOOLS")
            .or_else(|| env_path("XDG_CACHE_HOME").map(|c| c.join("strided-apply")))
            .or_else(|| env_path("HOME").map(|h| h.join(".cache/strided-apply")))
            .ok_or("neither STRIDED_APPLY_TOOLS nor HOME is set")?;
        let linker = cache.join("llvm-bitcode-linker");
        let llvm_bin = PathBuf::from("/usr/lib/llvm-22/bin");
        let targets = run_stdout(Command::new(&rustc).args(["--print", "target-list"]))
            .ok_or("no /usr/bin/rustc")?;
        if !targets.lines().any(|t| t == "nvptx64-nvidia-cuda") {
            return Err("/usr/bin/rustc has no nvptx64-nvidia-cuda target".into());
        }
        if !Path::new("/usr/lib/rustlib/src/rust/library/core").is_dir() {
            return Err("rust-web-src (Rust source for -Zbuild-std) is not installed".into());
        }
        if !linker.is_file() {
            return Err(format!("{} is missing", linker.display()));
        }
        if !llvm_bin.join("llc").is_file() {
            return Err("llvm-22 is not installed".into());
        }
        let version = run_stdout(Command::new(&rustc).arg("--version")).unwrap_or_default();
        Ok(Toolchain {
            rustc,
            cargo: PathBuf::from("/usr/bin/cargo"),
            linker,
            llvm_bin,
            libdevice,
            version,
        })
    }
}

/// Where a build's PTX came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtxSource {
    Snapshot,
    Compiled,
}

/// The PTX files of one kernel crate, one per SM target.
#[derive(Clone, Debug)]
pub struct PtxOutput {
    pub files: Vec<(u32, PathBuf)>,
    pub source: PtxSource,
    pub fingerprint: String,
}

/// One kernel crate to compile.
#[derive(Clone, Debug)]
pub struct PtxBuild {
    /// The kernel crate's folder (with its Cargo.toml).
    pub crate_dir: PathBuf,
    /// Extra folders whose sources the PTX depends on (e.g. `gpu-kernels` for a user crate).
    pub extra_sources: Vec<PathBuf>,
    pub archs: Vec<u32>,
    /// Where the nested nvptx builds keep their target folders.
    pub target_dir: PathBuf,
    /// Where the committed snapshot lives (default `<crate_dir>/ptx`).
    pub snapshot_dir: PathBuf,
}

impl PtxBuild {
    pub fn new(crate_dir: impl Into<PathBuf>) -> Self {
        let crate_dir = crate_dir.into();
        let target_dir = env_path("STRIDED_APPLY_PTX_TARGET_DIR")
            .unwrap_or_else(|| crate_dir.join("../target/ptx-build"));
        PtxBuild {
            snapshot_dir: crate_dir.join("ptx"),
            crate_dir,
            extra_sources: Vec::new(),
            archs: DEFAULT_ARCHS.to_vec(),
            target_dir,
        }
    }

    /// The crate's package name, read from its Cargo.toml.
    pub fn package_name(&self) -> Result<String, BuildError> {
        let toml = std::fs::read_to_string(self.crate_dir.join("Cargo.toml"))?;
        toml.lines()
            .find_map(|l| {
                let l = l.trim();
                l.strip_prefix("name").map(|r| {
                    r.trim_start()
                        .trim_start_matches('=')
                        .trim()
                        .trim_matches('"')
                        .to_string()
                })
            })
            .ok_or_else(|| BuildError::Io(std::io::Error::other("no package name in Cargo.toml")))
    }

    /// Hash of every source file of the kernel crate (and `extra_sources`) and of the
    /// builder's flags and targets.
    pub fn fingerprint(&self) -> Result<String, BuildError> {
        let mut files = Vec::new();
        for (i, dir) in std::iter::once(&self.crate_dir)
            .chain(&self.extra_sources)
            .enumerate()
        {
            let mut own = vec![dir.join("Cargo.toml")];
            collect_rs(&dir.join("src"), &mut own)?;
            // Paths relative to their crate, so the hash does not depend on the checkout.
            files.extend(own.into_iter().map(|f| {
                let rel = f
                    .strip_prefix(dir)
                    .unwrap_or(&f)
                    .to_string_lossy()
                    .replace('\\', "/");
                (i, rel, f)
            }));
        }
        files.sort();
        let mut h = Sha256::new();
        for (i, rel, f) in &files {
            h.update(format!("{i} {rel}\n").as_bytes());
            h.update(std::fs::read(f)?);
        }
        h.update(format!("{PROFILE_FLAGS:?} {:?} libdevice", self.archs).as_bytes());
        Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
    }

    fn snapshot_fingerprint(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.snapshot_dir.join("FINGERPRINT")).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("sources ").map(str::to_string))
    }

    /// Rebuilds each target's PTX from the snapshot (`body.ptx` + `sm_NN.header`, or a
    /// whole `sm_NN.ptx` for a target whose body differs) into `out_dir`.
    pub fn materialize(&self, out_dir: &Path) -> Result<Vec<(u32, PathBuf)>, BuildError> {
        std::fs::create_dir_all(out_dir)?;
        let body = std::fs::read_to_string(self.snapshot_dir.join("body.ptx")).unwrap_or_default();
        let mut files = Vec::new();
        for &sm in &self.archs {
            let whole = self.snapshot_dir.join(format!("sm_{sm}.ptx"));
            let text = if whole.is_file() {
                std::fs::read_to_string(&whole)?
            } else {
                std::fs::read_to_string(self.snapshot_dir.join(format!("sm_{sm}.header")))? + &body
            };
            let dest = out_dir.join(format!("sm_{sm}.ptx"));
            if std::fs::read_to_string(&dest).ok().as_deref() != Some(text.as_str()) {
                std::fs::write(&dest, text)?;
            }
            files.push((sm, dest));
        }
        Ok(files)
    }

    /// The snapshot when it is fresh, else a fresh compile into `out_dir`.
    pub fn run_into(&self, out_dir: &Path) -> Result<PtxOutput, BuildError> {
        let fingerprint = self.fingerprint()?;
        let forced = std::env::var_os("STRIDED_APPLY_PTX_REBUILD").is_some();
        if !forced && self.snapshot_fingerprint().as_deref() == Some(&fingerprint) {
            if let Ok(files) = self.materialize(&out_dir.join("snapshot")) {
                return Ok(PtxOutput {
                    files,
                    source: PtxSource::Snapshot,
                    fingerprint,
                });
            }
        }
        let tc = Toolchain::detect().map_err(|reason| BuildError::NoToolchain {
            crate_dir: self.crate_dir.clone(),
            reason,
        })?;
        let files = self.compile(&tc, out_dir)?;
        Ok(PtxOutput {
            files,
            source: PtxSource::Compiled,
            fingerprint,
        })
    }

    /// [`run_into`](Self::run_into) with `$OUT_DIR`, printing `rerun-if-changed` lines.
    pub fn run(&self) -> Result<PtxOutput, BuildError> {
        for dir in std::iter::once(&self.crate_dir).chain(&self.extra_sources) {
            println!("cargo:rerun-if-changed={}", dir.join("src").display());
            println!(
                "cargo:rerun-if-changed={}",
                dir.join("Cargo.toml").display()
            );
        }
        println!("cargo:rerun-if-changed={}", self.snapshot_dir.display());
        for v in [
            "STRIDED_APPLY_PTX_REBUILD",
            "STRIDED_APPLY_NVPTX_RUSTC",
            "STRIDED_APPLY_NVPTX_CARGO",
            "STRIDED_APPLY_BITCODE_LINKER",
            "STRIDED_APPLY_LLVM_BIN",
            "STRIDED_APPLY_LIBDEVICE",
        ] {
            println!("cargo:rerun-if-env-changed={v}");
        }
        let out = env_path("OUT_DIR").unwrap_or_else(|| self.target_dir.join("out"));
        self.run_into(&out)
    }

    /// Compiles every arch with `tc`; returns the PTX paths under `out_dir`.
    pub fn compile(
        &self,
        tc: &Toolchain,
        out_dir: &Path,
    ) -> Result<Vec<(u32, PathBuf)>, BuildError> {
        let name = self.package_name()?.replace('-', "_");
        std::fs::create_dir_all(out_dir)?;
        let mut files = Vec::new();
        for &sm in &self.archs {
            let target_dir = self.target_dir.join(format!("sm_{sm}"));
            let flags = [
                format!("-Ctarget-cpu=sm_{sm}"),
                format!("-Clinker={}", tc.linker.display()),
                format!("-Clink-arg={}", tc.libdevice.display()),
            ]
            .join("\x1f");
            let path = format!(
                "{}:{}",
                tc.llvm_bin.display(),
                std::env::var("PATH").unwrap_or_default()
            );
            let mut cmd = Command::new(&tc.cargo);
            // A nested cargo must not inherit the outer build's settings.
            for (k, _) in std::env::vars_os() {
                if let Some(k) = k.to_str() {
                    if (k.starts_with("CARGO") && k != "CARGO_HOME") || k.starts_with("RUST") {
                        cmd.env_remove(k);
                    }
                }
            }
            cmd.env("RUSTC", &tc.rustc)
                .env("RUSTC_BOOTSTRAP", "1")
                .env("CARGO_ENCODED_RUSTFLAGS", flags)
                .env("PATH", path)
                .arg("build")
                .arg("--release")
                .arg("--quiet")
                .args(["--target", "nvptx64-nvidia-cuda", "-Zbuild-std=core"])
                .arg("--manifest-path")
                .arg(self.crate_dir.join("Cargo.toml"))
                .arg("--target-dir")
                .arg(&target_dir)
                .args(PROFILE_FLAGS);
            let out = cmd.output()?;
            if !out.status.success() {
                return Err(BuildError::Compile {
                    sm,
                    stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                });
            }
            let built = target_dir.join(format!("nvptx64-nvidia-cuda/release/{name}.ptx"));
            let dest = out_dir.join(format!("sm_{sm}.ptx"));
            std::fs::copy(&built, &dest)?;
            files.push((sm, dest));
        }
        Ok(files)
    }

    /// Compiles and writes the snapshot: the body shared by the targets once
    /// (`body.ptx`), each target's header (`sm_NN.header`), and `FINGERPRINT`.
    pub fn refresh_snapshot(&self, tc: &Toolchain) -> Result<(), BuildError> {
        let files = self.compile(tc, &self.target_dir.join("refresh"))?;
        let fp = self.fingerprint()?;
        let out = PtxOutput {
            files,
            source: PtxSource::Compiled,
            fingerprint: fp.clone(),
        };
        std::fs::create_dir_all(&self.snapshot_dir)?;
        for entry in std::fs::read_dir(&self.snapshot_dir)? {
            let p = entry?.path();
            if p.extension().is_some_and(|e| e == "ptx" || e == "header") {
                std::fs::remove_file(p)?;
            }
        }
        let embedded = out.embed(&self.target_dir.join("refresh-split"))?;
        std::fs::copy(&embedded.body, self.snapshot_dir.join("body.ptx"))?;
        for (sm, header, shared) in &embedded.targets {
            let name = if *shared {
                format!("sm_{sm}.header")
            } else {
                format!("sm_{sm}.ptx")
            };
            std::fs::copy(header, self.snapshot_dir.join(name))?;
        }
        let archs: Vec<String> = out.files.iter().map(|(sm, _)| format!("sm_{sm}")).collect();
        std::fs::write(
            self.snapshot_dir.join("FINGERPRINT"),
            format!(
                "sources {fp}\ntoolchain {}\ntargets {}\n",
                tc.version,
                archs.join(" ")
            ),
        )?;
        Ok(())
    }

    /// Compiles into a scratch folder and compares with the snapshot: `Ok(vec![])` when
    /// fresh, else the stale files.
    pub fn check_snapshot(
        &self,
        tc: &Toolchain,
        scratch: &Path,
    ) -> Result<Vec<String>, BuildError> {
        let mut stale = Vec::new();
        if self.snapshot_fingerprint() != Some(self.fingerprint()?) {
            stale.push("FINGERPRINT".to_string());
        }
        let committed = self.materialize(&scratch.join("committed"))?;
        for ((sm, fresh), (_, committed)) in self.compile(tc, scratch)?.into_iter().zip(committed) {
            if std::fs::read(&committed).ok() != Some(std::fs::read(&fresh)?) {
                stale.push(format!("sm_{sm}.ptx"));
            }
        }
        Ok(stale)
    }
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let p = entry?.path();
        if p.is_dir() {
            collect_rs(&p, out)?;
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
    Ok(())
}

/// PTX prepared for embedding: the per-target texts usually differ only in their
/// `.version` / `.target` header, so the body is stored once.
#[derive(Clone, Debug)]
pub struct Embedded {
    /// The body shared by the targets marked `shared`.
    pub body: PathBuf,
    /// `(sm, header file, shared)`: the text for `sm` is `header + body` when `shared`,
    /// else the header file holds the whole text.
    pub targets: Vec<(u32, PathBuf, bool)>,
}

fn split_header(ptx: &str) -> (&str, &str) {
    match ptx.find(".address_size") {
        Some(i) => {
            let end = ptx[i..].find('\n').map_or(ptx.len(), |n| i + n + 1);
            ptx.split_at(end)
        }
        None => ("", ptx),
    }
}

impl PtxOutput {
    /// Writes `<out_dir>/module.rs`, defining `pub const MODULE: <host>::ModuleImage` for
    /// kernel crate `module` (its package name) with this PTX embedded by `include_str!`.
    /// `host` is the path of the host library (`strided_apply`). Returns the file's path.
    pub fn write_module_rs(
        &self,
        out_dir: &Path,
        module: &str,
        host: &str,
    ) -> Result<PathBuf, BuildError> {
        let e = self.embed(&out_dir.join("ptx-embed"))?;
        let lit = |p: &Path| format!("{:?}", p.display().to_string());
        let mut text = format!(
            "/// PTX of kernel crate `{module}`, one text per SM target (strided-apply-builder).\n\
             pub const MODULE: {host}::ModuleImage = {host}::ModuleImage {{\n    \
             name: {module:?},\n    ptx: &[\n"
        );
        for (sm, header, shared) in &e.targets {
            let body = if *shared {
                format!("include_str!({})", lit(&e.body))
            } else {
                "\"\"".to_string()
            };
            text += &format!(
                "        {host}::PtxText {{ sm: {sm}, header: include_str!({}), body: {body} }},\n",
                lit(header)
            );
        }
        text += "    ],\n};\n";
        let path = out_dir.join("module.rs");
        std::fs::write(&path, text)?;
        Ok(path)
    }

    /// Writes `ptx_body.ptx` and one `ptx_header_sm_NN.ptx` per target into `out_dir`.
    pub fn embed(&self, out_dir: &Path) -> Result<Embedded, BuildError> {
        std::fs::create_dir_all(out_dir)?;
        let texts: Vec<(u32, String)> = self
            .files
            .iter()
            .map(|(sm, p)| std::fs::read_to_string(p).map(|t| (*sm, t)))
            .collect::<Result<_, _>>()?;
        let shared_body = texts
            .first()
            .map(|(_, t)| split_header(t).1.to_string())
            .unwrap_or_default();
        let body = out_dir.join("ptx_body.ptx");
        std::fs::write(&body, &shared_body)?;
        let mut targets = Vec::new();
        for (sm, text) in &texts {
            let (header, b) = split_header(text);
            let shared = b == shared_body;
            let path = out_dir.join(format!("ptx_header_sm_{sm}.ptx"));
            std::fs::write(&path, if shared { header } else { text.as_str() })?;
            targets.push((*sm, path, shared));
        }
        Ok(Embedded { body, targets })
    }
}
