//! Ahead-of-time machine code for kernel crates written in Rust.
//!
//! A `build.rs` calls [`PtxBuild::run`]: when the crate's committed snapshot
//! (`<crate>/image/kernels.img` + `FINGERPRINT`) matches the hash of the kernel sources and
//! builder settings, the snapshot is used and no GPU toolchain is needed (stable Rust is
//! enough). Otherwise the crate is compiled to PTX with rustc's NVPTX backend,
//!
//! ```text
//! RUSTC_BOOTSTRAP=1 cargo build --release --target nvptx64-nvidia-cuda -Zbuild-std=core
//!   -C target-cpu=sm_NN -C linker=llvm-bitcode-linker -C link-arg=libdevice.10.bc
//! ```
//!
//! the PTX is split into one small module per kernel family (`add_f32`: `add_f32_v`,
//! `add_f32_d1`, …), `ptxas` compiles every family for every cubin target
//! ([`DEFAULT_CUBINS`]: sm_90), and everything is stored as one zstd frame per family and
//! target ([`strided_apply_image`]), with the sm_70 PTX kept for every other GPU (the
//! driver compiles a family's PTX on its first launch and keeps it in its cache).
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

mod assemble;
pub mod split;

pub use assemble::{TargetStats, NO_SPILL};
pub use strided_apply_image as image;

/// PTX targets built by default (one nvptx build each).
pub const DEFAULT_ARCHS: [u32; 2] = [70, 90];

/// Cubin targets built by default, as `(sm, PTX target compiled from)`: one cubin runs on
/// every device of its major version at or above its minor version. Only sm_90 (H100,
/// H200: the GPUs the library is measured on) has machine code; every other device runs
/// the stored sm_70 PTX. A cubin costs 1.5–2.4 MB of image per target (sm_70, sm_80,
/// sm_100 and sm_120 were 9.7 MB of the op library's 11.8 MB and 3.4 of the interpreter's
/// 5.2; benches/NOTES.md, "The kernel image and machine code size").
pub const DEFAULT_CUBINS: [(u32, u32); 1] = [(90, 90)];

/// PTX targets stored in the image by default: sm_70, which the driver compiles for every
/// device of compute capability 7.0 and later without a cubin (and for
/// `STRIDED_APPLY_FORCE_PTX`), keeping the result in its compute cache.
pub const DEFAULT_PTX_STORED: [u32; 1] = [70];

/// The image file inside a snapshot folder.
pub const IMAGE_FILE: &str = "kernels.img";

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
    /// `ptxas` refused a family's PTX.
    Ptxas {
        sm: u32,
        family: String,
        output: String,
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
            BuildError::Ptxas { sm, family, output } => {
                write!(
                    f,
                    "ptxas -arch=sm_{sm} failed on family `{family}`:\n{output}"
                )
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
    /// `ptxas` (PTX to cubin).
    pub ptxas: PathBuf,
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

/// A file of the pip wheel `nvidia-cuda-nvcc-cu12` (libdevice, ptxas), unless `var` names one.
fn find_nvcc_file(var: &str, rel: &str) -> Result<PathBuf, String> {
    if let Some(p) = env_path(var) {
        return Ok(p);
    }
    let py = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let dir = run_stdout(Command::new(py).args([
        "-c",
        "import nvidia.cuda_nvcc as m; print(list(m.__path__)[0])",
    ]))
    .ok_or_else(|| {
        format!("{rel} not found: pip package nvidia-cuda-nvcc-cu12 is not installed")
    })?;
    let p = Path::new(&dir).join(rel);
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!("{} is missing", p.display()))
    }
}

fn find_libdevice() -> Result<PathBuf, String> {
    find_nvcc_file("STRIDED_APPLY_LIBDEVICE", "nvvm/libdevice/libdevice.10.bc")
}

/// `ptxas`: `STRIDED_APPLY_PTXAS`, else the one of the pip wheel `nvidia-cuda-nvcc-cu12`.
pub fn find_ptxas() -> Result<PathBuf, String> {
    find_nvcc_file("STRIDED_APPLY_PTXAS", "bin/ptxas")
}

/// `ptxas --version`, last line (`Cuda compilation tools, release 12.9, V12.9.86`).
pub fn ptxas_version(ptxas: &Path) -> String {
    run_stdout(Command::new(ptxas).arg("--version"))
        .and_then(|v| {
            v.lines()
                .rfind(|l| l.contains("release"))
                .map(str::to_string)
        })
        .unwrap_or_else(|| "unknown ptxas".into())
}

impl Toolchain {
    /// Finds a toolchain: environment overrides, rustup nightly, Debian packages.
    pub fn detect() -> Result<Toolchain, String> {
        let libdevice = find_libdevice()?;
        let ptxas = find_ptxas()?;
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
                ptxas,
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
                    ptxas,
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
            ptxas,
            version,
        })
    }
}

/// Where a build's image came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtxSource {
    Snapshot,
    Compiled,
}

/// The kernel image of one kernel crate.
#[derive(Clone, Debug)]
pub struct ImageOutput {
    /// The image file (the snapshot's, or a fresh one under `OUT_DIR`).
    pub image: PathBuf,
    pub source: PtxSource,
    pub fingerprint: String,
    /// Per target, what ptxas reported and the compressed size (fresh builds only).
    pub stats: Vec<TargetStats>,
}

/// One kernel crate to compile.
#[derive(Clone, Debug)]
pub struct PtxBuild {
    /// The kernel crate's folder (with its Cargo.toml).
    pub crate_dir: PathBuf,
    /// Extra folders whose sources the PTX depends on (e.g. `gpu-kernels` for a user crate).
    pub extra_sources: Vec<PathBuf>,
    /// PTX targets (one nvptx build each).
    pub archs: Vec<u32>,
    /// Cubin targets as `(sm, PTX target compiled from)`.
    pub cubins: Vec<(u32, u32)>,
    /// PTX targets whose text the image stores (a subset of `archs`).
    pub ptx_stored: Vec<u32>,
    /// Where the nested nvptx builds keep their target folders.
    pub target_dir: PathBuf,
    /// Where the committed snapshot lives (default `<crate_dir>/image`).
    pub snapshot_dir: PathBuf,
}

/// What [`PtxBuild::check_snapshot`] found.
#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    /// What differs between the snapshot and a fresh build (empty: fresh).
    pub stale: Vec<String>,
    /// What could not be compared, and why.
    pub notes: Vec<String>,
    /// The fresh build's per-target statistics.
    pub stats: Vec<TargetStats>,
}

impl PtxBuild {
    pub fn new(crate_dir: impl Into<PathBuf>) -> Self {
        let crate_dir = crate_dir.into();
        let target_dir = env_path("STRIDED_APPLY_PTX_TARGET_DIR")
            .unwrap_or_else(|| crate_dir.join("../target/ptx-build"));
        let mut build = PtxBuild {
            snapshot_dir: crate_dir.join("image"),
            crate_dir,
            extra_sources: Vec::new(),
            archs: DEFAULT_ARCHS.to_vec(),
            cubins: DEFAULT_CUBINS.to_vec(),
            ptx_stored: DEFAULT_PTX_STORED.to_vec(),
            target_dir,
        };
        // Development only (`STRIDED_APPLY_DEV_CUBINS=90`, comma-separated): the listed
        // cubins and the PTX they are made from, to try a kernel change on one GPU in a
        // fraction of the image's build time. The targets are part of the fingerprint, so
        // such an image never passes for the committed one (its build goes to `OUT_DIR`;
        // `scripts/ptx --check` fails). A list naming no default cubin is ignored.
        if let Ok(list) = std::env::var("STRIDED_APPLY_DEV_CUBINS") {
            let wanted: Vec<u32> = list
                .split(',')
                .filter_map(|a| a.trim().parse().ok())
                .collect();
            if !build.only_cubins(&wanted) {
                println!("cargo:warning=STRIDED_APPLY_DEV_CUBINS=`{list}` names none of the cubins {:?}: ignored", build.cubins);
            }
        }
        build
    }

    /// Keeps only the cubins of the SM versions in `sms` and the PTX they are made from (a
    /// build for the GPUs at hand); `false`, changing nothing, when `sms` names none of them.
    /// A crate without a committed snapshot can take it from its build script (the
    /// `custom-op` example does, from `STRIDED_APPLY_EXAMPLE_CUBINS`); with a snapshot, the
    /// targets are part of the fingerprint, so the snapshot no longer matches.
    pub fn only_cubins(&mut self, sms: &[u32]) -> bool {
        if !self.cubins.iter().any(|(sm, _)| sms.contains(sm)) {
            return false;
        }
        self.keep_cubins(|sm, _| sms.contains(&sm));
        true
    }

    /// Keeps the cubins `(sm, from)` for which `keep` holds, the PTX targets they are made
    /// from, and the stored PTX among those; when none of the stored PTX is left, the PTX
    /// of the newest remaining source is stored (the expression compiler reads its library
    /// from the stored PTX).
    fn keep_cubins(&mut self, keep: impl Fn(u32, u32) -> bool) {
        self.cubins.retain(|&(sm, from)| keep(sm, from));
        let sources: Vec<u32> = self.cubins.iter().map(|&(_, from)| from).collect();
        self.archs.retain(|a| sources.contains(a));
        self.ptx_stored.retain(|a| sources.contains(a));
        if self.ptx_stored.is_empty() {
            self.ptx_stored.extend(sources.iter().max());
        }
    }

    /// The part of this build that a partial check rebuilds: the PTX targets in `archs`
    /// (all when `None`), the cubins made from them whose SM version is in `cubins` (all
    /// when `None`), and the stored PTX among those targets.
    fn subset(&self, archs: Option<&[u32]>, cubins: Option<&[u32]>) -> PtxBuild {
        let mut sub = self.clone();
        sub.archs.retain(|a| archs.is_none_or(|l| l.contains(a)));
        let kept = sub.archs.clone();
        sub.cubins
            .retain(|&(sm, from)| kept.contains(&from) && cubins.is_none_or(|c| c.contains(&sm)));
        sub.ptx_stored.retain(|a| kept.contains(a));
        sub
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

    /// Hash of every source file of the kernel crate (and `extra_sources`), of the
    /// builder's flags and targets, and of the image format's crate version.
    pub fn fingerprint(&self) -> Result<String, BuildError> {
        let mut files = Vec::new();
        for (i, dir) in std::iter::once(&self.crate_dir)
            .chain(&self.extra_sources)
            .enumerate()
        {
            // A crate unpacked from a registry has its manifest rewritten by `cargo package`
            // and the original beside it as `Cargo.toml.orig`: hash the original (under the
            // name `Cargo.toml`), so a published crate matches its committed snapshot.
            let orig = dir.join("Cargo.toml.orig");
            let manifest = if orig.is_file() {
                orig
            } else {
                dir.join("Cargo.toml")
            };
            let mut own = vec![manifest];
            collect_rs(&dir.join("src"), &mut own)?;
            // Paths relative to their crate, so the hash does not depend on the checkout.
            files.extend(own.into_iter().map(|f| {
                let rel = f
                    .strip_prefix(dir)
                    .unwrap_or(&f)
                    .to_string_lossy()
                    .replace('\\', "/")
                    .replace("Cargo.toml.orig", "Cargo.toml");
                (i, rel, f)
            }));
        }
        files.sort();
        let mut h = Sha256::new();
        for (i, rel, f) in &files {
            h.update(format!("{i} {rel}\n").as_bytes());
            h.update(std::fs::read(f)?);
        }
        h.update(
            format!(
                "{PROFILE_FLAGS:?} {:?} libdevice cubins {:?} ptx {:?} image {}",
                self.archs,
                self.cubins,
                self.ptx_stored,
                strided_apply_image::MAGIC.escape_ascii()
            )
            .as_bytes(),
        );
        Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
    }

    /// A line of the snapshot's FINGERPRINT file (`sources`, `toolchain`, `ptxas`, …).
    pub fn snapshot_field(&self, field: &str) -> Option<String> {
        let text = std::fs::read_to_string(self.snapshot_dir.join("FINGERPRINT")).ok()?;
        text.lines().find_map(|l| {
            l.strip_prefix(field)
                .and_then(|r| r.strip_prefix(' '))
                .map(str::to_string)
        })
    }

    /// Whether the committed `FINGERPRINT` names today's sources (and an image is there):
    /// when it does, build scripts use the committed image; when not, they compile it.
    pub fn snapshot_matches_sources(&self) -> Result<bool, BuildError> {
        let fp = self.fingerprint()?;
        Ok(
            self.snapshot_field("sources").as_deref() == Some(fp.as_str())
                && self.snapshot_image().is_file(),
        )
    }

    /// The committed image file.
    pub fn snapshot_image(&self) -> PathBuf {
        self.snapshot_dir.join(IMAGE_FILE)
    }

    /// The snapshot when it is fresh, else a fresh build into `out_dir`.
    pub fn run_into(&self, out_dir: &Path) -> Result<ImageOutput, BuildError> {
        let fingerprint = self.fingerprint()?;
        let forced = std::env::var_os("STRIDED_APPLY_PTX_REBUILD").is_some();
        let image = self.snapshot_image();
        if !forced && self.snapshot_matches_sources()? {
            return Ok(ImageOutput {
                image,
                source: PtxSource::Snapshot,
                fingerprint,
                stats: Vec::new(),
            });
        }
        // Development only: host code can be built and its CPU tests run against a stale
        // snapshot while a new image is being built elsewhere; kernels added since are
        // missing from it (their launches fail with `FamilyMissing`).
        if !forced && std::env::var_os("STRIDED_APPLY_PTX_STALE_OK").is_some() && image.is_file() {
            println!(
                "cargo:warning=STRIDED_APPLY_PTX_STALE_OK: using the stale kernel snapshot; kernels changed since are not in it"
            );
            return Ok(ImageOutput {
                image,
                source: PtxSource::Snapshot,
                fingerprint,
                stats: Vec::new(),
            });
        }
        let tc = Toolchain::detect().map_err(|reason| BuildError::NoToolchain {
            crate_dir: self.crate_dir.clone(),
            reason,
        })?;
        let (bytes, stats) = self.build_image(&tc, out_dir, &fingerprint)?;
        let image = out_dir.join(IMAGE_FILE);
        std::fs::write(&image, bytes)?;
        Ok(ImageOutput {
            image,
            source: PtxSource::Compiled,
            fingerprint,
            stats,
        })
    }

    /// [`run_into`](Self::run_into) with `$OUT_DIR`, printing `rerun-if-changed` lines.
    pub fn run(&self) -> Result<ImageOutput, BuildError> {
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
            "STRIDED_APPLY_PTX_STALE_OK",
            "STRIDED_APPLY_DEV_CUBINS",
            "STRIDED_APPLY_NVPTX_RUSTC",
            "STRIDED_APPLY_NVPTX_CARGO",
            "STRIDED_APPLY_BITCODE_LINKER",
            "STRIDED_APPLY_LLVM_BIN",
            "STRIDED_APPLY_LIBDEVICE",
            "STRIDED_APPLY_PTXAS",
        ] {
            println!("cargo:rerun-if-env-changed={v}");
        }
        let out = env_path("OUT_DIR").unwrap_or_else(|| self.target_dir.join("out"));
        self.run_into(&out)
    }

    /// Compiles every PTX arch with `tc`; returns `(sm, PTX text)` in the order of `archs`.
    /// One build at a time: the op library's LTO build takes about 11 GB of memory.
    pub fn compile(&self, tc: &Toolchain) -> Result<Vec<(u32, String)>, BuildError> {
        let name = self.package_name()?.replace('-', "_");
        self.archs
            .iter()
            .map(|&sm| self.compile_arch(tc, sm, &name).map(|t| (sm, t)))
            .collect()
    }

    /// One nvptx build for `sm_{sm}`: the crate's PTX text.
    fn compile_arch(&self, tc: &Toolchain, sm: u32, name: &str) -> Result<String, BuildError> {
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
            // `cargo rustc` names the crate types (a cdylib links the kernels into one PTX
            // module), so kernel crates need not declare a cdylib: declared, it is every
            // host build's type too, and a cdylib's file name carries no hash of the
            // features, so host builds with other features overwrote each other's
            // artifacts and rebuilt everything above them (benches/NOTES.md, "CI").
            .arg("rustc")
            .args(["--crate-type", "cdylib,rlib"])
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
        Ok(std::fs::read_to_string(&built)?)
    }

    /// The image's description: module, fingerprint, tools and targets.
    fn meta(&self, tc: &Toolchain, fingerprint: &str) -> Result<String, BuildError> {
        Ok(format!(
            "module {}\nsources {fingerprint}\ntoolchain {}\nptxas {}\n",
            self.package_name()?,
            tc.version,
            ptxas_version(&tc.ptxas)
        ))
    }

    /// Compiles to PTX, splits it by family, runs ptxas per cubin target and compresses:
    /// the image's bytes and per-target statistics. `scratch` holds the per-family files.
    pub fn build_image(
        &self,
        tc: &Toolchain,
        scratch: &Path,
        fingerprint: &str,
    ) -> Result<(Vec<u8>, Vec<TargetStats>), BuildError> {
        let mut code = self.build_code(tc, scratch)?;
        let bytes = assemble::compress(&mut code, &self.meta(tc, fingerprint)?)?;
        Ok((bytes, code.into_iter().map(|c| c.stats).collect()))
    }

    /// Compiles to PTX, splits it by family and runs ptxas per family and cubin target:
    /// every target's code, uncompressed. `scratch` holds the per-family files.
    pub fn build_code(
        &self,
        tc: &Toolchain,
        scratch: &Path,
    ) -> Result<Vec<assemble::TargetCode>, BuildError> {
        let ptx = self.compile(tc)?;
        assemble::build_code(
            &ptx,
            &self.cubins,
            &self.ptx_stored,
            &tc.ptxas,
            &scratch.join("families"),
        )
    }

    /// Compiles and writes the snapshot: `kernels.img`, `FINGERPRINT` and a readable
    /// `MANIFEST` (per target: families, sizes, registers, spills).
    pub fn refresh_snapshot(&self, tc: &Toolchain) -> Result<Vec<TargetStats>, BuildError> {
        let fp = self.fingerprint()?;
        let (bytes, stats) = self.build_image(tc, &self.target_dir.join("refresh"), &fp)?;
        std::fs::create_dir_all(&self.snapshot_dir)?;
        std::fs::write(self.snapshot_image(), &bytes)?;
        let targets: Vec<String> = strided_apply_image::Image::parse(&bytes)
            .map_err(|e| BuildError::Io(std::io::Error::other(e.to_string())))?
            .targets()
            .iter()
            .map(|t| t.to_string().replace(' ', "-"))
            .collect();
        std::fs::write(
            self.snapshot_dir.join("FINGERPRINT"),
            format!(
                "sources {fp}\ntoolchain {}\nptxas {}\ntargets {}\n",
                tc.version,
                ptxas_version(&tc.ptxas),
                targets.join(" ")
            ),
        )?;
        let mut manifest = format!(
            "# {} ({} bytes): written by scripts/ptx, checked by scripts/ptx --check\n",
            IMAGE_FILE,
            bytes.len()
        );
        for s in &stats {
            manifest += &format!("{s}\n");
        }
        std::fs::write(self.snapshot_dir.join("MANIFEST"), manifest)?;
        Ok(stats)
    }

    /// Builds into a scratch folder and compares with the snapshot, family by family and
    /// target by target, on the decompressed contents (compression is not part of the
    /// promise, the code is; the fresh build is not compressed at all). Cubins are compared
    /// byte for byte when the local ptxas is the one that made the snapshot; otherwise the
    /// difference is a note, not a failure.
    pub fn check_snapshot(
        &self,
        tc: &Toolchain,
        scratch: &Path,
    ) -> Result<CheckReport, BuildError> {
        self.check_snapshot_archs(tc, scratch, None, None)
    }

    /// [`check_snapshot`](Self::check_snapshot), rebuilding only the PTX targets in
    /// `archs` (all when `None`) and, of the cubins made from them, those of the SM versions
    /// in `cubins` (all when `None`); those targets are compared with the committed image's,
    /// the fingerprint in full.
    pub fn check_snapshot_archs(
        &self,
        tc: &Toolchain,
        scratch: &Path,
        archs: Option<&[u32]>,
        cubins: Option<&[u32]>,
    ) -> Result<CheckReport, BuildError> {
        use strided_apply_image::{Image, Kind};
        let mut report = CheckReport::default();
        let fp = self.fingerprint()?;
        if self.snapshot_field("sources").as_deref() != Some(fp.as_str()) {
            report.stale.push("FINGERPRINT (sources changed)".into());
        }
        let committed_bytes = std::fs::read(self.snapshot_image())?;
        let fresh = match (archs, cubins) {
            (None, None) => self.build_code(tc, scratch)?,
            _ => {
                let sub = self.subset(archs, cubins);
                report.notes.push(format!(
                    "only the PTX targets {:?} and their cubins {:?} were rebuilt and compared",
                    sub.archs, sub.cubins
                ));
                sub.build_code(tc, scratch)?
            }
        };
        report.stats = fresh.iter().map(|c| c.stats.clone()).collect();
        let committed = match Image::parse(&committed_bytes) {
            Ok(i) => i,
            Err(e) => {
                report
                    .stale
                    .push(format!("{IMAGE_FILE} does not parse: {e}"));
                return Ok(report);
            }
        };
        // The committed index of each fresh target (all of them, in order, for a full check).
        let mut index = Vec::with_capacity(fresh.len());
        for c in &fresh {
            match committed.targets().iter().position(|t| *t == c.target) {
                Some(t) => index.push(t),
                None => {
                    report.stale.push(format!(
                        "targets: committed {:?}, fresh {:?}",
                        committed.targets(),
                        fresh.iter().map(|c| c.target).collect::<Vec<_>>()
                    ));
                    return Ok(report);
                }
            }
        }
        if archs.is_none() && cubins.is_none() && committed.targets().len() != fresh.len() {
            report.stale.push(format!(
                "targets: committed {:?}, fresh {:?}",
                committed.targets(),
                fresh.iter().map(|c| c.target).collect::<Vec<_>>()
            ));
            return Ok(report);
        }
        let local = ptxas_version(&tc.ptxas);
        let same_ptxas = self.snapshot_field("ptxas").as_deref() == Some(local.as_str());
        if !same_ptxas {
            report.notes.push(format!(
                "the snapshot's cubins were made by {:?}, this machine has {local:?}: cubins \
                 cannot be byte-equal, so only their family lists are compared (PTX is \
                 compared in full)",
                self.snapshot_field("ptxas").unwrap_or_default(),
            ));
        }
        let names: Vec<&str> = (0..committed.len())
            .map(|f| committed.family_name(f))
            .collect();
        for (code, &t) in fresh.iter().zip(&index) {
            let target = code.target;
            let fresh_names: Vec<&str> = code.frames.iter().map(|(n, _)| n.as_str()).collect();
            if fresh_names != names {
                report
                    .stale
                    .push(format!("{target}: the family lists differ"));
                continue;
            }
            if target.kind == Kind::Cubin && !same_ptxas {
                continue;
            }
            if committed.header(t) != code.header {
                report.stale.push(format!("{target}: PTX header"));
            }
            let dict = match committed.dictionary(t) {
                Ok(d) => d,
                Err(e) => {
                    report.stale.push(format!("{target}: {e}"));
                    continue;
                }
            };
            let differing: Vec<&str> = code
                .frames
                .iter()
                .enumerate()
                .filter(|(f, (_, raw))| {
                    committed.decode(*f, t, dict.as_deref()).ok().as_ref() != Some(raw)
                })
                .map(|(_, (name, _))| name.as_str())
                .collect();
            if !differing.is_empty() {
                let shown: Vec<&str> = differing.iter().take(5).copied().collect();
                report.stale.push(format!(
                    "{target}: {} families differ ({}{})",
                    differing.len(),
                    shown.join(", "),
                    if differing.len() > 5 { ", …" } else { "" }
                ));
            }
        }
        Ok(report)
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

impl ImageOutput {
    /// Writes `<out_dir>/module.rs`, defining `pub const MODULE: <host>::ModuleImage` for
    /// kernel crate `module` (its package name) with the image embedded by
    /// `include_bytes!`. `host` is the path of the host library (`strided_apply`).
    pub fn write_module_rs(
        &self,
        out_dir: &Path,
        module: &str,
        host: &str,
    ) -> Result<PathBuf, BuildError> {
        let image = self.image.canonicalize()?;
        let text = format!(
            "/// Kernel image of crate `{module}`: cubins and PTX per family, compressed \
             (strided-apply-builder).\n\
             pub const MODULE: {host}::ModuleImage = {host}::ModuleImage {{\n    \
             name: {module:?},\n    bytes: include_bytes!({:?}),\n}};\n",
            image.display().to_string()
        );
        let path = out_dir.join("module.rs");
        std::fs::write(&path, text)?;
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A committed fingerprint matches its sources until one of them changes (or the
    /// image is gone): the fast check CI runs before any build.
    #[test]
    fn snapshot_goes_stale_when_a_source_changes() {
        let dir = std::env::temp_dir().join(format!("sa-fingerprint-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::create_dir_all(dir.join("image")).unwrap();
        std::fs::write(dir.join("Cargo.toml"), "[package]\nname = \"k\"\n").unwrap();
        std::fs::write(dir.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
        let b = PtxBuild::new(&dir);
        let fp = b.fingerprint().unwrap();
        std::fs::write(dir.join("image/FINGERPRINT"), format!("sources {fp}\n")).unwrap();
        assert!(!b.snapshot_matches_sources().unwrap(), "no image file yet");
        std::fs::write(b.snapshot_image(), b"image").unwrap();
        assert!(b.snapshot_matches_sources().unwrap());
        std::fs::write(dir.join("src/lib.rs"), "pub fn f() {} // edited\n").unwrap();
        assert!(!b.snapshot_matches_sources().unwrap(), "a source changed");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The default targets, a build for the GPUs at hand, and the parts a partial check
    /// rebuilds: the stored PTX follows the targets kept.
    #[test]
    fn targets_kept_by_a_dev_build_and_a_partial_check() {
        let b = PtxBuild::new("no-such-crate");
        if std::env::var_os("STRIDED_APPLY_DEV_CUBINS").is_some() {
            return;
        }
        assert_eq!(
            (b.archs.as_slice(), b.ptx_stored.as_slice()),
            (&[70, 90][..], &[70][..])
        );
        assert_eq!(b.cubins, [(90, 90)]);

        let mut dev = b.clone();
        assert!(dev.only_cubins(&[90]));
        assert_eq!(
            (dev.archs.as_slice(), dev.ptx_stored.as_slice()),
            (&[90][..], &[90][..])
        );
        assert!(
            !dev.clone().only_cubins(&[80]),
            "names no cubin: nothing changes"
        );

        let ptx70 = b.subset(Some(&[70]), None);
        assert_eq!(
            (ptx70.archs, ptx70.cubins, ptx70.ptx_stored),
            (vec![70], vec![], vec![70])
        );
        let sm90 = b.subset(Some(&[90]), Some(&[90]));
        assert_eq!(
            (sm90.archs, sm90.cubins, sm90.ptx_stored),
            (vec![90], vec![(90, 90)], vec![])
        );
        let all = b.subset(None, None);
        assert_eq!(
            (all.archs, all.cubins, all.ptx_stored),
            (b.archs, b.cubins, b.ptx_stored)
        );
    }
}
