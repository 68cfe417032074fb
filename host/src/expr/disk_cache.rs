//! Tier 1's disk cache: one file per compiled kernel, each verified before the driver sees it.
//!
//! `cuModuleLoadData` takes a pointer and no length: it trusts the image's own headers, so
//! a cubin cut short (or emptied) makes the driver read past the buffer and the process
//! crash, and a flipped byte loads as damaged machine code. An entry is therefore a header
//! (magic and format version, the cubin's length, its XXH64) and the cubin; [`read`] hands
//! out the cubin only when the header, the length and the checksum agree, and deletes a file
//! that fails them (reported once per process), so the caller compiles it again. [`store`]
//! writes through a temporary file of its own name and a rename, so that a reader sees
//! either no file or a whole one, whatever other processes share the folder.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The first bytes of every entry: the format's name and version (`1`).
const MAGIC: [u8; 8] = *b"SAT1CUB1";
/// Magic, the cubin's length (`u64`, little-endian), its XXH64 (seed 0, little-endian).
const HEADER: usize = 24;
/// A file larger than this is not an entry (a kernel's cubin is tens of kilobytes): it is
/// never read into memory.
const MAX_ENTRY: u64 = 64 << 20;
/// A temporary file older than this was left by a process that died while writing it.
const STALE_TMP: std::time::Duration = std::time::Duration::from_secs(600);

/// Why a cache file is not a valid entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Damage {
    /// Shorter than the header (an emptied file among them).
    Short(usize),
    /// The header's magic is not this format's (another version's, or not an entry at all).
    Magic,
    /// The header's length is not the file's.
    Length { header: u64, file: u64 },
    /// The cubin's checksum is not the header's.
    Checksum,
    /// The cubin is not an ELF image.
    NotElf,
    /// Not a regular file, or too large to be an entry.
    NotAFile,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::Short(n) => write!(f, "{n} bytes, shorter than an entry's header"),
            Damage::Magic => write!(f, "not an entry of this cache's format"),
            Damage::Length { header, file } => {
                write!(
                    f,
                    "its header says {header} bytes of cubin, the file holds {file}"
                )
            }
            Damage::Checksum => write!(f, "its checksum does not match its contents"),
            Damage::NotElf => write!(f, "its contents are not a cubin"),
            Damage::NotAFile => write!(f, "not a regular file of an entry's size"),
        }
    }
}

fn checksum(cubin: &[u8]) -> u64 {
    twox_hash::XxHash64::oneshot(0, cubin)
}

/// Whether `b` starts as an ELF image does (every cubin the driver's linker writes).
fn is_elf(b: &[u8]) -> bool {
    b.starts_with(b"\x7fELF")
}

/// The entry that holds `cubin`.
pub(crate) fn encode(cubin: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(HEADER + cubin.len());
    v.extend_from_slice(&MAGIC);
    v.extend_from_slice(&(cubin.len() as u64).to_le_bytes());
    v.extend_from_slice(&checksum(cubin).to_le_bytes());
    v.extend_from_slice(cubin);
    v
}

/// The cubin of entry `bytes`, if it is a whole, unchanged one.
pub(crate) fn decode(bytes: &[u8]) -> Result<&[u8], Damage> {
    if bytes.len() < HEADER {
        return Err(Damage::Short(bytes.len()));
    }
    let (head, cubin) = bytes.split_at(HEADER);
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&head[i..i + 8]);
        u64::from_le_bytes(w)
    };
    if head[..8] != MAGIC {
        return Err(Damage::Magic);
    }
    if word(8) != cubin.len() as u64 {
        return Err(Damage::Length {
            header: word(8),
            file: cubin.len() as u64,
        });
    }
    if word(16) != checksum(cubin) {
        return Err(Damage::Checksum);
    }
    if !is_elf(cubin) {
        return Err(Damage::NotElf);
    }
    Ok(cubin)
}

/// What the cache holds for one kernel.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Read {
    /// No entry (or none readable: a folder without read permission).
    Missing,
    /// A verified cubin.
    Hit(Vec<u8>),
    /// A damaged file: deleted where it could be (reported once per process).
    Damaged(Damage),
}

static DAMAGED: AtomicU64 = AtomicU64::new(0);

/// Damaged cache files this process found (and deleted where it could): a diagnostic for
/// tests.
pub fn damaged_entries() -> u64 {
    DAMAGED.load(Ordering::Relaxed)
}

/// The cubin cached at `path`, verified ([`decode`]). A damaged file is deleted (a folder in
/// its place only if empty) and reported once per process; the caller compiles the kernel
/// again and [`store`]s it.
pub(crate) fn read(path: &Path) -> Read {
    let bytes = match std::fs::metadata(path) {
        Err(_) => return Read::Missing,
        Ok(m) if m.is_file() && m.len() <= MAX_ENTRY => match std::fs::read(path) {
            Ok(b) => decode(&b).map(<[u8]>::to_vec),
            Err(_) => return Read::Missing,
        },
        Ok(_) => Err(Damage::NotAFile),
    };
    match bytes {
        Ok(cubin) => Read::Hit(cubin),
        Err(damage) => {
            DAMAGED.fetch_add(1, Ordering::Relaxed);
            let removed = if path.is_dir() {
                std::fs::remove_dir(path)
            } else {
                std::fs::remove_file(path)
            };
            report_once(&format!(
                "the compiled-expression cache file {} is damaged ({damage}): {}, the kernel is compiled again",
                path.display(),
                if removed.is_ok() { "deleted" } else { "left in place (it could not be deleted)" },
            ));
            Read::Damaged(damage)
        }
    }
}

/// Reports a damaged entry once per process (the first; later ones are counted only).
fn report_once(what: &str) {
    static REPORTED: AtomicBool = AtomicBool::new(false);
    if !REPORTED.swap(true, Ordering::Relaxed) {
        eprintln!("strided-apply: {what} (reported once)");
    }
}

/// Where compiled expressions' cubins are kept: `STRIDED_APPLY_EXPR_CACHE` (a folder, or
/// `0` for none), else `$XDG_CACHE_HOME/strided-apply/tier1` or
/// `$HOME/.cache/strided-apply/tier1`. Bounded to `STRIDED_APPLY_EXPR_CACHE_MB` megabytes
/// (default 256; the oldest files go first); [`clear_cache`] empties it.
pub fn cache_dir() -> Option<PathBuf> {
    match std::env::var_os("STRIDED_APPLY_EXPR_CACHE") {
        Some(v) if v == "0" || v.is_empty() => None,
        Some(v) => Some(PathBuf::from(v)),
        None => std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .map(|d| d.join("strided-apply").join("tier1")),
    }
}

/// Deletes every cached cubin ([`cache_dir`]): how many.
pub fn clear_cache() -> std::io::Result<usize> {
    let Some(dir) = cache_dir() else { return Ok(0) };
    let mut n = 0;
    match std::fs::read_dir(&dir) {
        Ok(rd) => {
            for e in rd.flatten() {
                if e.path().extension().is_some_and(|x| x == "cubin") {
                    std::fs::remove_file(e.path())?;
                    n += 1;
                }
            }
            Ok(n)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e),
    }
}

fn cache_limit() -> u64 {
    std::env::var("STRIDED_APPLY_EXPR_CACHE_MB")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(256)
        << 20
}

/// A temporary name beside `path` that no other writer (thread or process) uses.
fn temporary(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    path.with_extension(format!("tmp{}-{n}", std::process::id()))
}

/// Writes `cubin` as the entry at `path` (through a temporary file and a rename, so a
/// reader never sees half an entry), then trims the folder to its bound: the oldest entries
/// first, and temporary files that dead writers left. An error means only that it is not
/// cached.
pub(crate) fn store(path: &Path, cubin: &[u8]) -> std::io::Result<()> {
    if !is_elf(cubin) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the linker's output is not a cubin",
        ));
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = temporary(path);
    let written = std::fs::write(&tmp, encode(cubin)).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return written;
    }
    let now = std::time::SystemTime::now();
    let mut files: Vec<(std::time::SystemTime, u64, PathBuf)> = Vec::new();
    for e in std::fs::read_dir(dir)?.flatten() {
        let (p, Ok(m)) = (e.path(), e.metadata()) else {
            continue;
        };
        let Ok(modified) = m.modified() else { continue };
        match p.extension().and_then(|x| x.to_str()) {
            Some("cubin") if m.is_file() => files.push((modified, m.len(), p)),
            // A temporary file a writer that died left behind.
            Some(x) if x.starts_with("tmp") && m.is_file() => {
                let stale = now
                    .duration_since(modified)
                    .is_ok_and(|age| age > STALE_TMP);
                if stale {
                    let _ = std::fs::remove_file(&p);
                }
            }
            _ => {}
        }
    }
    let mut total: u64 = files.iter().map(|f| f.1).sum();
    files.sort();
    for (_, len, f) in files {
        if total <= cache_limit() {
            break;
        }
        if std::fs::remove_file(&f).is_ok() {
            total -= len;
        }
    }
    Ok(())
}

/// A 128-bit hash of `parts` (two FNV-1a passes of different seeds, each part ended by a
/// byte no UTF-8 text holds), as 32 hex digits: the name of a kernel's entry.
pub(crate) fn hash128(parts: &[&[u8]]) -> String {
    let hash = |seed: u64| {
        parts.iter().fold(seed, |h, p| {
            p.iter().chain(&[0xffu8]).fold(h, |h, &b| {
                (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
            })
        })
    };
    format!(
        "{:016x}{:016x}",
        hash(0xcbf2_9ce4_8422_2325),
        hash(0x6c62_272e_07bb_0142)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in cubin: an ELF header's first bytes, then varied content.
    fn cubin(n: usize) -> Vec<u8> {
        let mut v = b"\x7fELF\x02\x01\x01".to_vec();
        v.extend((0..n).map(|i| (i * 131 % 251) as u8));
        v
    }

    fn folder(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sa-disk-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn an_entry_round_trips_and_every_damage_is_caught() {
        let c = cubin(4000);
        let e = encode(&c);
        assert_eq!(decode(&e), Ok(&c[..]));
        assert_eq!(decode(&[]), Err(Damage::Short(0)));
        assert_eq!(decode(&e[..10]), Err(Damage::Short(10)));
        assert!(matches!(
            decode(&e[..e.len() / 2]),
            Err(Damage::Length { .. })
        ));
        assert!(matches!(
            decode(&e[..e.len() - 1]),
            Err(Damage::Length { .. })
        ));
        let mut long = e.clone();
        long.push(0);
        assert!(matches!(decode(&long), Err(Damage::Length { .. })));
        // Every single-bit flip of the cubin, and of the header, is caught.
        for i in 0..e.len() {
            for bit in 0..8 {
                let mut f = e.clone();
                f[i] ^= 1 << bit;
                assert!(
                    decode(&f).is_err(),
                    "flip of bit {bit} of byte {i} not caught"
                );
            }
        }
        // A raw cubin (the format before entries had headers) is not an entry.
        assert_eq!(decode(&c), Err(Damage::Magic));
        // Bytes that pass the header's checks but are no cubin.
        assert_eq!(decode(&encode(b"not a cubin")), Err(Damage::NotElf));
        // Random bytes of several lengths.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for len in [1usize, 23, 24, 25, 333, 5000] {
            let r: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            assert!(decode(&r).is_err(), "{len} random bytes taken for an entry");
        }
    }

    #[test]
    fn damaged_files_are_deleted_and_good_ones_read() {
        let d = folder("read");
        let p = d.join("k.cubin");
        assert_eq!(read(&p), Read::Missing);
        let c = cubin(3000);
        store(&p, &c).unwrap();
        assert_eq!(read(&p), Read::Hit(c.clone()));
        let entry = std::fs::read(&p).unwrap();
        // Each damage: written, read (refused), gone; then stored again and read back.
        let mut flipped = entry.clone();
        flipped[entry.len() / 2] ^= 0x40;
        let damages: [(&str, Vec<u8>); 4] = [
            ("empty", Vec::new()),
            ("half", entry[..entry.len() / 2].to_vec()),
            ("flipped", flipped),
            ("random", (0..333).map(|i| (i * 97 % 256) as u8).collect()),
        ];
        let before = damaged_entries();
        for (what, bytes) in &damages {
            std::fs::write(&p, bytes).unwrap();
            assert!(matches!(read(&p), Read::Damaged(_)), "{what}");
            assert!(!p.exists(), "{what}: the damaged file stays");
            store(&p, &c).unwrap();
            assert_eq!(read(&p), Read::Hit(c.clone()), "{what}");
        }
        assert_eq!(damaged_entries() - before, 4);
        // A folder in the entry's place: refused, removed when empty, then stored again.
        std::fs::remove_file(&p).unwrap();
        std::fs::create_dir(&p).unwrap();
        assert_eq!(read(&p), Read::Damaged(Damage::NotAFile));
        assert!(!p.exists());
        // One that is not empty stays: storing over it fails, and reading refuses it.
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("x"), b"x").unwrap();
        assert_eq!(read(&p), Read::Damaged(Damage::NotAFile));
        assert!(store(&p, &c).is_err());
        assert!(p.join("x").exists());
        // No temporary file is left behind by the failed store.
        let left: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("k.cubin")]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn concurrent_writers_and_readers_see_whole_entries() {
        let d = folder("concurrent");
        let p = d.join("k.cubin");
        let c = cubin(200_000);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..25 {
                        store(&p, &c).unwrap();
                    }
                });
            }
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..50 {
                        match read(&p) {
                            Read::Missing => {}
                            Read::Hit(h) => assert_eq!(h, c),
                            Read::Damaged(x) => panic!("a reader saw a damaged entry: {x}"),
                        }
                    }
                });
            }
        });
        assert_eq!(read(&p), Read::Hit(c));
        let files = std::fs::read_dir(&d).unwrap().count();
        assert_eq!(files, 1, "temporary files left behind");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn non_elf_output_is_not_stored() {
        let d = folder("non-elf");
        let p = d.join("k.cubin");
        assert!(store(&p, b"").is_err());
        assert!(store(&p, b"ptx text").is_err());
        assert!(!p.exists());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
