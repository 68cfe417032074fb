//! From PTX to a kernel image: split each target's PTX by family, run `ptxas` on every
//! family for every cubin target (in parallel), train one zstd dictionary per target, and
//! compress every family as its own frame ([`strided_apply_image::Writer`]).

use crate::split::{families, header_directives, split_header, FamilyPtx};
use crate::BuildError;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use strided_apply_image::{Target, Writer};

/// zstd level of every frame: the images are built once and decoded many times.
const LEVEL: i32 = 19;
/// Dictionary size per target. Measured on the built-in kernels (347 families, level 19):
/// sm_90 cubins without a dictionary 3.4 MB; with 512 KiB 0.83 MB of frames + 0.10 MB of
/// compressed dictionary; with 1 MiB 0.62 + 0.16 MB. sm_100: 1.40 + 0.10 against
/// 1.07 + 0.17 MB. With 531 families (`benches/NOTES.md`, "The kernel image and machine code size"), frames + dictionary:
/// sm_100 1.70 MB with 1 MiB, 1.41 with 2 MiB, 1.31 with 4 MiB; sm_120 1.58, 1.30, 1.20;
/// level 22 instead of 19 saves under 0.5 %. A larger dictionary costs its decoding once
/// per process, on the first family's load.
const DICT_BYTES: usize = 2 * 1024 * 1024;
/// Cubin targets on which any register spill fails the check.
pub const NO_SPILL: [u32; 1] = [90];

/// What `ptxas -v` reported for one cubin target, and the target's compressed size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetStats {
    pub target: Target,
    pub families: usize,
    pub kernels: usize,
    pub max_registers: u32,
    pub max_registers_kernel: String,
    /// Kernels with a stack frame.
    pub with_stack: usize,
    pub spill_stores: u64,
    pub spill_loads: u64,
    /// Functions (kernels or device functions) that spill.
    pub spilling: Vec<String>,
    pub raw_bytes: u64,
    pub compressed_bytes: u64,
}

impl TargetStats {
    fn new(target: Target) -> TargetStats {
        TargetStats {
            target,
            families: 0,
            kernels: 0,
            max_registers: 0,
            max_registers_kernel: String::new(),
            with_stack: 0,
            spill_stores: 0,
            spill_loads: 0,
            spilling: Vec::new(),
            raw_bytes: 0,
            compressed_bytes: 0,
        }
    }

    /// Whether this target spills where no spill is allowed ([`NO_SPILL`]).
    pub fn forbidden_spills(&self) -> bool {
        self.target.kind == strided_apply_image::Kind::Cubin
            && NO_SPILL.contains(&self.target.sm)
            && !self.spilling.is_empty()
    }
}

impl std::fmt::Display for TargetStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} families, {} B",
            self.target, self.families, self.raw_bytes
        )?;
        // A check builds the code without compressing it.
        if self.compressed_bytes > 0 {
            write!(f, " -> {} B compressed", self.compressed_bytes)?;
        }
        if self.kernels > 0 {
            write!(
                f,
                "; {} kernels, max {} registers ({}), {} with a stack frame, spills {} B stored / {} B loaded",
                self.kernels,
                self.max_registers,
                self.max_registers_kernel,
                self.with_stack,
                self.spill_stores,
                self.spill_loads
            )?;
            if !self.spilling.is_empty() {
                write!(f, " in {}", self.spilling.join(", "))?;
            }
        }
        Ok(())
    }
}

/// Runs `f` over `jobs` on every core, keeping the jobs' order.
fn parallel<T: Sync, R: Send>(jobs: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    parallel_with(jobs, || (), |_, job| f(job))
}

/// [`parallel`] with a state of each worker's own, made once by `init` and passed to every
/// job the worker runs (a compressor whose dictionary is loaded once, not once per job).
fn parallel_with<T: Sync, S, R: Send>(
    jobs: &[T],
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, &T) -> R + Sync,
) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let next = AtomicUsize::new(0);
    let mut out: Vec<(usize, R)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads.min(jobs.len()).max(1))
            .map(|_| {
                s.spawn(|| {
                    let mut state = init();
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(job) = jobs.get(i) else { break };
                        done.push((i, f(&mut state, job)));
                    }
                    done
                })
            })
            .collect();
        workers
            .into_iter()
            // A worker's panic is the builder's: no job's result may go missing.
            .flat_map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}

struct Ptxas<'a> {
    exe: &'a Path,
    scratch: &'a Path,
}

/// Parsed `ptxas -v` lines of one run.
#[derive(Default)]
struct Report {
    /// (kernel, registers)
    registers: Vec<(String, u32)>,
    /// (function, stack frame, spill stores, spill loads)
    frames: Vec<(String, u64, u64, u64)>,
}

fn parse_report(text: &str) -> Report {
    let mut r = Report::default();
    let (mut entry, mut props): (Option<String>, Option<String>) = (None, None);
    let quoted = |l: &str| l.split('\'').nth(1).map(str::to_string);
    let numbers = |l: &str| -> Vec<u64> {
        l.split(|c: char| !c.is_ascii_digit())
            .filter(|w| !w.is_empty())
            .filter_map(|w| w.parse().ok())
            .collect()
    };
    for line in text.lines() {
        if line.contains("Compiling entry function") {
            entry = quoted(line);
        } else if let Some(i) = line.find("Function properties for ") {
            props = Some(
                line[i + "Function properties for ".len()..]
                    .trim()
                    .to_string(),
            );
        } else if line.contains("bytes stack frame") {
            if let (Some(p), [stack, st, ld, ..]) = (props.take(), numbers(line).as_slice()) {
                r.frames.push((p, *stack, *st, *ld));
            }
        } else if let Some(i) = line.find("Used ") {
            if let (Some(k), Some(n)) = (entry.take(), numbers(&line[i..]).first()) {
                r.registers.push((k, *n as u32));
            }
        }
    }
    r
}

impl Ptxas<'_> {
    /// Compiles one family's PTX for `sm`; returns the cubin and the `-v` report.
    fn compile(&self, sm: u32, family: &str, ptx: &str) -> Result<(Vec<u8>, Report), BuildError> {
        let dir = self.scratch.join(format!("sm_{sm}"));
        std::fs::create_dir_all(&dir)?;
        let (src, cubin) = (
            dir.join(format!("{family}.ptx")),
            dir.join(format!("{family}.cubin")),
        );
        std::fs::write(&src, ptx)?;
        let out = Command::new(self.exe)
            .arg(format!("-arch=sm_{sm}"))
            .arg("-v")
            .arg(&src)
            .arg("-o")
            .arg(&cubin)
            .output()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            return Err(BuildError::Ptxas {
                sm,
                family: family.to_string(),
                output: text,
            });
        }
        Ok((std::fs::read(&cubin)?, parse_report(&text)))
    }
}

fn compressor(dict: Option<&[u8]>) -> Result<zstd::bulk::Compressor<'static>, BuildError> {
    let mut c = match dict {
        Some(d) => zstd::bulk::Compressor::with_dictionary(LEVEL, d)?,
        None => zstd::bulk::Compressor::new(LEVEL)?,
    };
    c.include_checksum(true)?;
    c.include_contentsize(true)?;
    Ok(c)
}

/// A dictionary for `samples`, or `None` when they are too few to train one.
///
/// zstd's fastCover trainer with the zstd command line's parameters (d = 8, f = 20) and a
/// fixed segment size k = 2000: on the built-in sm_90 cubins this gives 0.83 MB of frames
/// against 2.1 MB with `zstd::dict::from_samples` (whose defaults pick k = 50 and a 120 KB
/// dictionary). Training is deterministic. Its last stage (entropy statistics) compresses
/// every sample at level 19 on one thread, which takes minutes for a target's PTX.
fn train(samples: &[&[u8]]) -> Option<Vec<u8>> {
    let total: usize = samples.iter().map(|s| s.len()).sum();
    if samples.len() < 8 || total < 64 * 1024 {
        return None;
    }
    let capacity = DICT_BYTES.min(total / 8);
    let flat: Vec<u8> = samples.concat();
    let sizes: Vec<usize> = samples.iter().map(|s| s.len()).collect();
    let mut dict = vec![0u8; capacity];
    let params = zstd_sys::ZDICT_fastCover_params_t {
        k: 2000,
        d: 8,
        f: 20,
        steps: 0,
        nbThreads: 1,
        splitPoint: 0.75,
        accel: 1,
        shrinkDict: 0,
        shrinkDictMaxRegression: 0,
        zParams: zstd_sys::ZDICT_params_t {
            compressionLevel: LEVEL,
            notificationLevel: 0,
            // 0: derived from the dictionary's content (deterministic).
            dictID: 0,
        },
    };
    // SAFETY: `dict` is writable for `capacity` bytes; `flat` holds exactly the samples
    // whose lengths `sizes` lists, in order (`sizes.len()` of them, checked to fit a u32);
    // zstd reads and writes nothing else and keeps no pointer after returning.
    let n = unsafe {
        zstd_sys::ZDICT_trainFromBuffer_fastCover(
            dict.as_mut_ptr().cast(),
            capacity,
            flat.as_ptr().cast(),
            sizes.as_ptr(),
            u32::try_from(sizes.len()).ok()?,
            params,
        )
    };
    // SAFETY: a pure function of the returned code.
    if unsafe { zstd_sys::ZDICT_isError(n) } != 0 || n > capacity {
        return None;
    }
    dict.truncate(n);
    Some(dict)
}

/// One target's uncompressed code: its PTX header (empty for cubins) and `(family, bytes)`
/// in name order, with what ptxas reported.
#[derive(Clone, Debug)]
pub struct TargetCode {
    pub target: Target,
    pub header: String,
    pub frames: Vec<(String, Vec<u8>)>,
    pub stats: TargetStats,
}

/// Compresses every target's frames with a dictionary of its own into an image described
/// by `meta`; fills each target's compressed size.
pub fn compress(code: &mut [TargetCode], meta: &str) -> Result<Vec<u8>, BuildError> {
    let mut w = Writer::new(meta);
    // The targets' dictionaries train in parallel: each training runs on one thread, and
    // its last stage compresses every sample at level 19.
    let dicts = parallel(code, |tc| {
        let samples: Vec<&[u8]> = tc.frames.iter().map(|(_, b)| b.as_slice()).collect();
        train(&samples)
    });
    for (tc, dict) in code.iter_mut().zip(dicts) {
        let dict_frame = match &dict {
            Some(d) => Some((compressor(None)?.compress(d)?, d.len() as u32)),
            None => None,
        };
        tc.stats.compressed_bytes = dict_frame.as_ref().map_or(0, |(f, _)| f.len() as u64);
        let t = w.add_target(tc.target, &tc.header, dict_frame);
        // One compressor per worker: zstd builds its level-19 tables over the dictionary
        // when a compressor first uses it (most of a second for 2 MiB) and keeps them for
        // the compressor's later frames, which come out the same as from a fresh one.
        let compressed = parallel_with(
            &tc.frames,
            || compressor(dict.as_deref()),
            |c, (_, raw)| match c {
                Ok(c) => Ok(c.compress(raw)?),
                Err(e) => Err(BuildError::from(std::io::Error::other(e.to_string()))),
            },
        );
        for ((family, raw), frame) in tc.frames.iter().zip(compressed) {
            let frame = frame?;
            tc.stats.compressed_bytes += frame.len() as u64;
            w.add_frame(family, t, frame, raw.len() as u32);
        }
    }
    Ok(w.finish())
}

fn target_code(
    target: Target,
    header: &str,
    frames: Vec<(String, Vec<u8>)>,
    mut stats: TargetStats,
) -> TargetCode {
    stats.families = frames.len();
    stats.raw_bytes = frames.iter().map(|(_, b)| b.len() as u64).sum();
    TargetCode {
        target,
        header: header.to_string(),
        frames,
        stats,
    }
}

/// Splits each PTX target's text (`(sm, ptx)`) by family and compiles every family for
/// every cubin target `(sm, from PTX sm)` with `ptxas`, using `scratch` for the
/// per-family files: the cubin targets, then the PTX targets in `ptx_stored`, uncompressed.
pub fn build_code(
    ptx: &[(u32, String)],
    cubins: &[(u32, u32)],
    ptx_stored: &[u32],
    ptxas: &Path,
    scratch: &Path,
) -> Result<Vec<TargetCode>, BuildError> {
    let split: BTreeMap<u32, (String, BTreeMap<String, FamilyPtx>)> = ptx
        .iter()
        .map(|(sm, text)| {
            let (header, body) = split_header(text);
            (*sm, (header_directives(header), families(body)))
        })
        .collect();
    let runner = Ptxas {
        exe: ptxas,
        scratch,
    };
    let mut code = Vec::new();
    for &(sm, from) in cubins {
        let (header, fams) = split.get(&from).ok_or_else(|| {
            BuildError::Io(std::io::Error::other(format!(
                "cubin sm_{sm} needs PTX for sm_{from}, which is not built"
            )))
        })?;
        let jobs: Vec<(&String, &FamilyPtx)> = fams.iter().collect();
        let built = parallel(&jobs, |(name, fam)| {
            runner.compile(sm, name, &format!("{header}{}", fam.body))
        });
        let mut stats = TargetStats::new(Target::cubin(sm));
        let mut frames = Vec::new();
        for ((name, _), result) in jobs.iter().zip(built) {
            let (cubin, report) = result?;
            for (kernel, regs) in report.registers {
                stats.kernels += 1;
                if regs > stats.max_registers {
                    (stats.max_registers, stats.max_registers_kernel) = (regs, kernel.clone());
                }
                let stack = report
                    .frames
                    .iter()
                    .find(|f| f.0 == kernel)
                    .map_or(0, |f| f.1);
                stats.with_stack += (stack > 0) as usize;
            }
            for (function, _, st, ld) in report.frames {
                if (st > 0 || ld > 0) && !stats.spilling.contains(&function) {
                    stats.spill_stores += st;
                    stats.spill_loads += ld;
                    stats.spilling.push(function);
                }
            }
            frames.push((name.to_string(), cubin));
        }
        code.push(target_code(Target::cubin(sm), "", frames, stats));
    }
    for (sm, (header, fams)) in split {
        if !ptx_stored.contains(&sm) {
            continue;
        }
        let frames = fams
            .into_iter()
            .map(|(name, f)| (name, f.body.into_bytes()))
            .collect();
        code.push(target_code(
            Target::ptx(sm),
            &header,
            frames,
            TargetStats::new(Target::ptx(sm)),
        ));
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use strided_apply_image::Image;

    #[test]
    fn ptxas_reports_are_read() {
        let text = "ptxas info    : 272 bytes gmem\n\
            ptxas info    : Compiling entry function 'sin_f64_v' for 'sm_90'\n\
            ptxas info    : Function properties for sin_f64_v\n    \
            40 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n\
            ptxas info    : Used 44 registers, used 0 barriers, 40 bytes cumulative stack size\n\
            ptxas info    : Function properties for __internal_trig_reduction_slowpathd\n    \
            0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n";
        let r = parse_report(text);
        assert_eq!(r.registers, [("sin_f64_v".to_string(), 44)]);
        assert_eq!(
            r.frames,
            [
                ("sin_f64_v".to_string(), 40, 8, 4),
                ("__internal_trig_reduction_slowpathd".to_string(), 0, 0, 0)
            ]
        );
    }

    /// A kernel-like sample: `lines` lines of a shared vocabulary, line `j` of sample `i`
    /// taking word `(i * a + j * b) % 5`.
    fn kernel_like(i: u32, lines: u32, a: u32, b: u32) -> Vec<u8> {
        let words = [
            "ld.global.v4.u32",
            "add.s32",
            "st.shared.f32",
            "bar.sync 0;",
            "fma.rn",
        ];
        (0..lines)
            .map(|j| format!("{} %r{};\n", words[((i * a + j * b) % 5) as usize], i ^ j))
            .collect::<String>()
            .into_bytes()
    }

    #[test]
    fn a_reused_compressor_writes_the_frames_of_fresh_ones() {
        let samples: Vec<Vec<u8>> = (0..40u32).map(|i| kernel_like(i, 400, 7, 3)).collect();
        let refs: Vec<&[u8]> = samples.iter().map(|v| v.as_slice()).collect();
        let dict = train(&refs).expect("enough samples for a dictionary");
        let fresh: Vec<Vec<u8>> = refs
            .iter()
            .map(|raw| {
                compressor(Some(&dict))
                    .and_then(|mut c| Ok(c.compress(raw)?))
                    .expect("compress")
            })
            .collect();
        let reused = parallel_with(
            &refs,
            || compressor(Some(&dict)).expect("compressor"),
            |c, raw| c.compress(raw).expect("compress"),
        );
        assert_eq!(fresh, reused);
    }

    #[test]
    fn compress_decodes_to_every_targets_frames_and_repeats_itself() {
        let frames = |t: u32| -> Vec<(String, Vec<u8>)> {
            (0..24u32)
                .map(|i| (format!("fam{i:02}"), kernel_like(i, 300, t, 1)))
                .collect()
        };
        let code = || {
            [Target::cubin(90), Target::ptx(90), Target::cubin(80)]
                .into_iter()
                .zip([3, 5, 7])
                .map(|(target, t)| target_code(target, "", frames(t), TargetStats::new(target)))
                .collect::<Vec<_>>()
        };
        let bytes = compress(&mut code(), "meta").expect("compress");
        assert_eq!(compress(&mut code(), "meta").expect("compress"), bytes);
        let image = Image::parse(&bytes).expect("parse");
        for (ti, t) in [3u32, 5, 7].into_iter().enumerate() {
            let dict = image.dictionary(ti).expect("dictionary");
            assert!(dict.is_some(), "target {ti} trained a dictionary");
            for (name, raw) in frames(t) {
                let f = image.family(&name).expect("family");
                assert_eq!(image.decode(f, ti, dict.as_deref()).expect("decode"), raw);
            }
        }
    }

    #[test]
    fn parallel_keeps_order() {
        let jobs: Vec<u32> = (0..100).collect();
        assert_eq!(
            parallel(&jobs, |x| x * 2),
            (0..100).map(|x| x * 2).collect::<Vec<_>>()
        );
        assert!(parallel(&[] as &[u32], |x| *x).is_empty());
    }
}
