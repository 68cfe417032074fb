//! The kernel-image format of strided-apply: machine code (cubins) and PTX of one kernel
//! crate for several GPU targets, split by kernel family and compressed frame by frame, so
//! that a process decodes and loads only the families it launches.
//!
//! - [`Writer`] (used by `strided-apply-builder`) assembles an image from zstd frames.
//! - [`Image::parse`] reads one without copying; [`Image::choose`] picks the target for a
//!   device; [`Image::decode`] decompresses one family for one target, checking the
//!   frame's content checksum and length.
//! - [`family_of`] is the one rule that maps a kernel name to its family.
//!
//! ```
//! use strided_apply_image::{family_of, Image, Target, Writer};
//! // An image with one family and one target, no dictionary, stored frames.
//! let frame = strided_apply_image::store_frame(b"// ptx of add_f32");
//! let mut w = Writer::new("module demo");
//! let t = w.add_target(Target::ptx(90), ".target sm_90\n", None);
//! w.add_frame("add_f32", t, frame, 17);
//! let bytes = w.finish();
//! let image = Image::parse(&bytes)?;
//! let t = image.choose((9, 0), false).expect("sm_90 PTX runs on 9.0");
//! let fam = image.family(family_of("add_f32_d2")).expect("present");
//! assert_eq!(image.decode(fam, t, None)?, b"// ptx of add_f32");
//! # Ok::<(), strided_apply_image::ImageError>(())
//! ```
//!
//! Layout (little-endian):
//!
//! ```text
//! preamble  magic "SAIMAGE1" | u32 index length | u32 FNV-1a of the index
//! index     u16 targets | u16 0 | u32 families | u32 strings length | u32 meta offset | u32 meta length
//!           per target:  u8 kind (0 cubin, 1 PTX) | u8 0 | u16 sm | u32 header offset | u32 header length
//!                        | frame of its zstd dictionary (u32 offset, u32 length, u32 raw length; length 0: none)
//!           per family:  u32 name offset | u32 name length | per target: frame (length 0: absent)
//!           strings      UTF-8; family names sorted, unique
//! data      zstd frames (with content checksums); frame offsets count from here
//! ```

use std::fmt;

/// First bytes of every image.
pub const MAGIC: [u8; 8] = *b"SAIMAGE1";
const PREAMBLE: usize = 16;
const INDEX_HEAD: usize = 20;
const TARGET_REC: usize = 24;
const FRAME_REC: usize = 12;

/// What a target's frames hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Machine code (`ptxas` output) for one SM version.
    Cubin,
    /// PTX text for the driver to compile (any device at or above its SM version).
    Ptx,
}

/// One code target of an image: a cubin or PTX for `sm_NN`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    pub kind: Kind,
    /// SM version as `10 * major + minor` (`90` for sm_90, `120` for sm_120).
    pub sm: u32,
}

impl Target {
    pub const fn cubin(sm: u32) -> Target {
        Target {
            kind: Kind::Cubin,
            sm,
        }
    }
    pub const fn ptx(sm: u32) -> Target {
        Target {
            kind: Kind::Ptx,
            sm,
        }
    }

    /// Whether this target's code runs on a device of compute capability `cc`: a cubin on
    /// devices of its major version with at least its minor version, PTX on every device
    /// at or above its SM version (the driver compiles it).
    pub fn runs_on(&self, cc: (u32, u32)) -> bool {
        let (major, minor) = (self.sm / 10, self.sm % 10);
        match self.kind {
            Kind::Cubin => major == cc.0 && minor <= cc.1,
            Kind::Ptx => (major, minor) <= cc,
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            Kind::Cubin => write!(f, "sm_{} cubin", self.sm),
            Kind::Ptx => write!(f, "sm_{} PTX", self.sm),
        }
    }
}

/// The best target of `targets` for a device of compute capability `cc`: the cubin of the
/// highest SM version that runs on it, else (or with `force_ptx`) the PTX of the highest
/// SM version at or below the device's. `None` when nothing runs on the device.
pub fn choose(targets: &[Target], cc: (u32, u32), force_ptx: bool) -> Option<usize> {
    let best = |kind: Kind| {
        targets
            .iter()
            .enumerate()
            .filter(|(_, t)| t.kind == kind && t.runs_on(cc))
            .max_by_key(|(_, t)| t.sm)
            .map(|(i, _)| i)
    };
    if force_ptx {
        best(Kind::Ptx)
    } else {
        best(Kind::Cubin).or_else(|| best(Kind::Ptx))
    }
}

/// The family of a kernel: its name up to the last `_` (`add_f32_d2` → `add_f32`), which
/// is how `kernels!` names an op's variants. A name without `_` is its own family.
pub fn family_of(kernel: &str) -> &str {
    kernel.rsplit_once('_').map_or(kernel, |(family, _)| family)
}

/// Why an image could not be read or a frame not decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ImageError {
    /// The bytes do not start with [`MAGIC`].
    BadMagic,
    /// The image ends before `what`.
    Truncated { what: &'static str },
    /// The index's checksum does not match (the image is corrupt).
    IndexChecksum,
    /// The index is inconsistent: `reason`.
    BadIndex { reason: String },
    /// A frame did not decode: `reason` (the frame is corrupt or truncated).
    Frame {
        family: String,
        target: Target,
        reason: String,
    },
}

impl fmt::Display for ImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageError::BadMagic => write!(f, "not a kernel image (bad magic number)"),
            ImageError::Truncated { what } => write!(f, "the image is truncated (in its {what})"),
            ImageError::IndexChecksum => write!(f, "the image's index fails its checksum"),
            ImageError::BadIndex { reason } => write!(f, "the image's index is invalid: {reason}"),
            ImageError::Frame {
                family,
                target,
                reason,
            } => write!(f, "family `{family}` ({target}) does not decode: {reason}"),
        }
    }
}

impl std::error::Error for ImageError {}

fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ b as u32).wrapping_mul(0x0100_0193)
    })
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// A compressed frame inside the image's data section.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Frame {
    pub offset: u32,
    /// Compressed length; 0 when absent.
    pub len: u32,
    /// Decompressed length.
    pub raw_len: u32,
}

impl Frame {
    fn read(b: &[u8], at: usize) -> Option<Frame> {
        Some(Frame {
            offset: u32_at(b, at)?,
            len: u32_at(b, at + 4)?,
            raw_len: u32_at(b, at + 8)?,
        })
    }
}

#[derive(Clone, Debug)]
struct TargetRec<'a> {
    target: Target,
    header: &'a str,
    dict: Frame,
}

/// A parsed image: borrowed bytes and their checked index.
#[derive(Clone, Debug)]
pub struct Image<'a> {
    index: &'a [u8],
    data: &'a [u8],
    strings: &'a str,
    meta: &'a str,
    targets: Vec<TargetRec<'a>>,
    target_list: Vec<Target>,
    n_families: usize,
    families_at: usize,
}

impl<'a> Image<'a> {
    /// Reads and checks an image: magic, index checksum, every string in range, family
    /// names sorted and unique. Frames are checked when decoded (a truncated data section
    /// fails only the families it cut off, with the targets still known).
    pub fn parse(bytes: &'a [u8]) -> Result<Image<'a>, ImageError> {
        let trunc = |what| ImageError::Truncated { what };
        let bad = |reason: &str| ImageError::BadIndex {
            reason: reason.to_string(),
        };
        if bytes.len() < MAGIC.len() || bytes[..MAGIC.len()] != MAGIC {
            return Err(if MAGIC.starts_with(bytes) {
                trunc("preamble")
            } else {
                ImageError::BadMagic
            });
        }
        let index_len = u32_at(bytes, 8).ok_or(trunc("preamble"))? as usize;
        let hash = u32_at(bytes, 12).ok_or(trunc("preamble"))?;
        let index = bytes
            .get(PREAMBLE..PREAMBLE.saturating_add(index_len))
            .ok_or(trunc("index"))?;
        if fnv1a(index) != hash {
            return Err(ImageError::IndexChecksum);
        }
        let data = &bytes[PREAMBLE + index_len..];
        let field = |at| u32_at(index, at).ok_or(trunc("index")).map(|v| v as usize);
        let n_targets = u16_at(index, 0).ok_or(trunc("index"))? as usize;
        let n_families = field(4)?;
        let strings_len = field(8)?;
        let (meta_off, meta_len) = (field(12)?, field(16)?);
        let families_at = INDEX_HEAD + n_targets * TARGET_REC;
        let fam_rec = 8 + FRAME_REC * n_targets;
        let strings_at = n_families
            .checked_mul(fam_rec)
            .and_then(|f| f.checked_add(families_at))
            .ok_or(bad("sizes overflow"))?;
        if strings_at.checked_add(strings_len) != Some(index.len()) {
            return Err(bad("section sizes do not add up to the index length"));
        }
        let strings =
            std::str::from_utf8(&index[strings_at..]).map_err(|_| bad("strings are not UTF-8"))?;
        let string = |off: usize, len: usize| {
            strings
                .get(off..off.saturating_add(len))
                .ok_or(bad("a string is out of range"))
        };
        let meta = string(meta_off, meta_len)?;
        let mut targets = Vec::with_capacity(n_targets);
        for k in 0..n_targets {
            let at = INDEX_HEAD + k * TARGET_REC;
            let kind = match index[at] {
                0 => Kind::Cubin,
                1 => Kind::Ptx,
                _ => return Err(bad("unknown target kind")),
            };
            let sm = u16_at(index, at + 2).ok_or(trunc("index"))? as u32;
            let header = string(field(at + 4)?, field(at + 8)?)?;
            let dict = Frame::read(index, at + 12).ok_or(trunc("index"))?;
            targets.push(TargetRec {
                target: Target { kind, sm },
                header,
                dict,
            });
        }
        let image = Image {
            index,
            data,
            strings,
            meta,
            target_list: targets.iter().map(|t| t.target).collect(),
            targets,
            n_families,
            families_at,
        };
        let mut previous: Option<&str> = None;
        for f in 0..n_families {
            let name = image.family_name_checked(f)?;
            if previous.is_some_and(|p| p >= name) {
                return Err(bad("family names are not sorted and unique"));
            }
            previous = Some(name);
        }
        Ok(image)
    }

    /// The image's description (module, fingerprint, tools), as the builder wrote it.
    pub fn meta(&self) -> &'a str {
        self.meta
    }

    /// The targets, in the image's order (indices are target numbers).
    pub fn targets(&self) -> &[Target] {
        &self.target_list
    }

    /// The PTX header (`.version`, `.target`, `.address_size`) of PTX target `t`, which
    /// goes in front of each family's PTX body; empty for cubins.
    pub fn header(&self, t: usize) -> &'a str {
        self.targets.get(t).map_or("", |r| r.header)
    }

    /// Number of families.
    pub fn len(&self) -> usize {
        self.n_families
    }
    pub fn is_empty(&self) -> bool {
        self.n_families == 0
    }

    fn family_rec(&self, f: usize) -> usize {
        self.families_at + f * (8 + FRAME_REC * self.targets.len())
    }

    fn family_name_checked(&self, f: usize) -> Result<&'a str, ImageError> {
        let at = self.family_rec(f);
        let err = || ImageError::BadIndex {
            reason: "a family name is out of range".into(),
        };
        let off = u32_at(self.index, at).ok_or_else(err)? as usize;
        let len = u32_at(self.index, at + 4).ok_or_else(err)? as usize;
        self.strings
            .get(off..off.saturating_add(len))
            .ok_or_else(err)
    }

    /// Name of family `f` (`f < len()`; checked by `parse`).
    pub fn family_name(&self, f: usize) -> &'a str {
        self.family_name_checked(f).unwrap_or("")
    }

    /// The family's number, by binary search over the sorted names.
    pub fn family(&self, name: &str) -> Option<usize> {
        let (mut lo, mut hi) = (0, self.n_families);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.family_name(mid).cmp(name) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    /// The frame of family `f` for target `t` (length 0 when absent).
    pub fn frame(&self, f: usize, t: usize) -> Frame {
        Frame::read(self.index, self.family_rec(f) + 8 + FRAME_REC * t).unwrap_or_default()
    }

    /// Compressed bytes of every frame (dictionary included) per target; shared frames are
    /// counted for each target that uses them.
    pub fn compressed_bytes(&self, t: usize) -> u64 {
        let dict = self.targets.get(t).map_or(0, |r| r.dict.len as u64);
        dict + (0..self.n_families)
            .map(|f| self.frame(f, t).len as u64)
            .sum::<u64>()
    }

    /// [`choose`] over this image's targets.
    pub fn choose(&self, cc: (u32, u32), force_ptx: bool) -> Option<usize> {
        choose(&self.target_list, cc, force_ptx)
    }

    /// Decompresses target `t`'s dictionary (`None` when it has none). Decode it once and
    /// pass it to every [`decode`](Self::decode) of that target.
    pub fn dictionary(&self, t: usize) -> Result<Option<Vec<u8>>, ImageError> {
        let Some(rec) = self.targets.get(t) else {
            return Ok(None);
        };
        if rec.dict.len == 0 {
            return Ok(None);
        }
        self.slice(rec.dict)
            .and_then(|b| decode_frame(b, rec.dict.raw_len, &mut Decoder::new(None)?))
            .map(Some)
            .map_err(|reason| ImageError::Frame {
                family: "(dictionary)".into(),
                target: rec.target,
                reason,
            })
    }

    /// Where frame `f`'s bytes lie in the whole image (for tools and tests).
    pub fn frame_range(&self, f: Frame) -> std::ops::Range<usize> {
        let start = PREAMBLE + self.index.len() + f.offset as usize;
        start..start + f.len as usize
    }

    fn slice(&self, f: Frame) -> Result<&'a [u8], String> {
        let start = f.offset as usize;
        start
            .checked_add(f.len as usize)
            .and_then(|end| self.data.get(start..end))
            .ok_or_else(|| "the frame lies past the end of the image (truncated)".to_string())
    }

    /// Decompresses family `f` for target `t` with that target's `dictionary`, checking
    /// the frame's content checksum and length. Empty when the family lacks the target.
    /// Parses the dictionary on every call: a caller that decodes several families of a
    /// target keeps a [`Decoder`] ([`Image::decoder`], [`Image::decode_with`]) instead.
    pub fn decode(
        &self,
        f: usize,
        t: usize,
        dictionary: Option<&[u8]>,
    ) -> Result<Vec<u8>, ImageError> {
        let target = self.target_list.get(t).copied().unwrap_or(Target::ptx(0));
        let mut dec = Decoder::new(dictionary).map_err(|reason| ImageError::Frame {
            family: "(dictionary)".into(),
            target,
            reason,
        })?;
        self.decode_with(f, t, &mut dec)
    }

    /// A decoder for target `t`'s frames, its dictionary decompressed and parsed once.
    pub fn decoder(&self, t: usize) -> Result<Decoder, ImageError> {
        let target = self.target_list.get(t).copied().unwrap_or(Target::ptx(0));
        let dict = self.dictionary(t)?;
        Decoder::new(dict.as_deref()).map_err(|reason| ImageError::Frame {
            family: "(dictionary)".into(),
            target,
            reason,
        })
    }

    /// [`decode`](Self::decode) with a target's [`Decoder`] (from [`Image::decoder`] for
    /// the same `t`).
    pub fn decode_with(
        &self,
        f: usize,
        t: usize,
        dec: &mut Decoder,
    ) -> Result<Vec<u8>, ImageError> {
        let frame = self.frame(f, t);
        let target = self.target_list.get(t).copied().unwrap_or(Target::ptx(0));
        if frame.len == 0 {
            return Ok(Vec::new());
        }
        self.slice(frame)
            .and_then(|b| decode_frame(b, frame.raw_len, dec))
            .map_err(|reason| ImageError::Frame {
                family: self.family_name(f).to_string(),
                target,
                reason,
            })
    }
}

/// A zstd frame decoder with a target's dictionary already parsed: the dictionary's tables
/// and content are built once, not once per family (with 2 MiB dictionaries that halves
/// the decoding time of a small family).
pub struct Decoder {
    dec: ruzstd::decoding::FrameDecoder,
}

impl Decoder {
    fn new(dict: Option<&[u8]>) -> Result<Decoder, String> {
        use ruzstd::decoding::{Dictionary, FrameDecoder};
        let mut dec = FrameDecoder::new();
        if let Some(raw) = dict {
            let d = Dictionary::decode_dict(raw).map_err(|e| format!("dictionary: {e}"))?;
            dec.add_dict(d).map_err(|e| format!("dictionary: {e}"))?;
        }
        Ok(Decoder { dec })
    }
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Decoder")
    }
}

fn decode_frame(frame: &[u8], raw_len: u32, decoder: &mut Decoder) -> Result<Vec<u8>, String> {
    // The decoder reports corrupt input as errors; the unwind guard turns any internal
    // assertion it might still hit on hostile bytes into an error as well (the decoder
    // starts every frame from a fresh state, so it stays usable afterwards).
    let dec = std::panic::AssertUnwindSafe(&mut decoder.dec);
    let run = move || -> Result<Vec<u8>, String> {
        let dec = dec;
        let dec: &mut ruzstd::decoding::FrameDecoder = dec.0;
        let mut out = vec![0u8; raw_len as usize];
        let n = dec.decode_all(frame, &mut out).map_err(|e| e.to_string())?;
        if n != raw_len as usize {
            return Err(format!("{n} bytes decoded, {raw_len} expected"));
        }
        match (dec.get_checksum_from_data(), dec.get_calculated_checksum()) {
            (Some(stored), Some(computed)) if stored == computed => Ok(out),
            (Some(_), Some(_)) => Err("content checksum mismatch".into()),
            _ => Err("the frame has no content checksum".into()),
        }
    };
    std::panic::catch_unwind(run).unwrap_or_else(|_| Err("the decoder failed".into()))
}

/// A zstd frame that stores `bytes` uncompressed ("raw" blocks) with a content checksum:
/// for tests and tools that build images without a compressor.
pub fn store_frame(bytes: &[u8]) -> Vec<u8> {
    use std::hash::Hasher;
    let mut out = vec![0x28, 0xB5, 0x2F, 0xFD];
    // Frame header: single segment, 8-byte content size, checksum flag.
    out.push(0b1110_0100);
    out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    let chunks: Vec<&[u8]> = if bytes.is_empty() {
        vec![&[]]
    } else {
        bytes.chunks(128 * 1024).collect()
    };
    for (i, c) in chunks.iter().enumerate() {
        let last = (i + 1 == chunks.len()) as u32;
        // Raw block: type 0, size in bits 3.., last-block flag in bit 0.
        let header = last | ((c.len() as u32) << 3);
        out.extend_from_slice(&header.to_le_bytes()[..3]);
        out.extend_from_slice(c);
    }
    let mut h = twox_hash::XxHash64::with_seed(0);
    h.write(bytes);
    out.extend_from_slice(&(h.finish() as u32).to_le_bytes());
    out
}

/// A compressed frame and its decompressed length.
pub type RawFrame = (Vec<u8>, u32);

/// Assembles an image from already compressed frames.
#[derive(Debug, Default)]
pub struct Writer {
    meta: String,
    /// (target, PTX header, dictionary)
    targets: Vec<(Target, String, Option<RawFrame>)>,
    families: std::collections::BTreeMap<String, Vec<Option<RawFrame>>>,
}

impl Writer {
    /// A new image described by `meta` (free text: module, fingerprint, tools).
    pub fn new(meta: &str) -> Writer {
        Writer {
            meta: meta.to_string(),
            ..Writer::default()
        }
    }

    /// Adds a target with its PTX `header` (empty for cubins) and its dictionary as
    /// `(zstd frame, raw length)`; returns its number.
    pub fn add_target(
        &mut self,
        target: Target,
        header: &str,
        dictionary: Option<RawFrame>,
    ) -> usize {
        self.targets.push((target, header.to_string(), dictionary));
        for frames in self.families.values_mut() {
            frames.push(None);
        }
        self.targets.len() - 1
    }

    /// Sets family `family`'s frame for target `t` (a zstd frame with a content checksum,
    /// compressed with target `t`'s dictionary).
    pub fn add_frame(&mut self, family: &str, t: usize, frame: Vec<u8>, raw_len: u32) {
        let n = self.targets.len();
        let frames = self
            .families
            .entry(family.to_string())
            .or_insert_with(|| vec![None; n]);
        frames[t] = Some((frame, raw_len));
    }

    /// The image's bytes. Identical frames (PTX targets that share a body and a
    /// dictionary) are stored once.
    pub fn finish(self) -> Vec<u8> {
        let mut data: Vec<u8> = Vec::new();
        let mut seen: std::collections::HashMap<Vec<u8>, u32> = Default::default();
        let mut put = |f: &Option<RawFrame>| -> [u32; 3] {
            let Some((bytes, raw)) = f else {
                return [0; 3];
            };
            let offset = *seen.entry(bytes.clone()).or_insert_with(|| {
                data.extend_from_slice(bytes);
                (data.len() - bytes.len()) as u32
            });
            [offset, bytes.len() as u32, *raw]
        };
        let mut strings = String::new();
        let mut string = |s: &str| {
            strings.push_str(s);
            [(strings.len() - s.len()) as u32, s.len() as u32]
        };
        let meta = string(&self.meta);
        let mut recs: Vec<u8> = Vec::new();
        for (target, header, dict) in &self.targets {
            recs.push(match target.kind {
                Kind::Cubin => 0,
                Kind::Ptx => 1,
            });
            recs.push(0);
            recs.extend_from_slice(&(target.sm as u16).to_le_bytes());
            for v in string(header).into_iter().chain(put(dict)) {
                recs.extend_from_slice(&v.to_le_bytes());
            }
        }
        for (name, frames) in &self.families {
            for v in string(name) {
                recs.extend_from_slice(&v.to_le_bytes());
            }
            for f in frames {
                for v in put(f) {
                    recs.extend_from_slice(&v.to_le_bytes());
                }
            }
        }
        let mut index = Vec::new();
        index.extend_from_slice(&(self.targets.len() as u16).to_le_bytes());
        index.extend_from_slice(&[0, 0]);
        for v in [
            self.families.len() as u32,
            strings.len() as u32,
            meta[0],
            meta[1],
        ] {
            index.extend_from_slice(&v.to_le_bytes());
        }
        index.extend_from_slice(&recs);
        index.extend_from_slice(strings.as_bytes());
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&(index.len() as u32).to_le_bytes());
        out.extend_from_slice(&fnv1a(&index).to_le_bytes());
        out.extend_from_slice(&index);
        out.extend_from_slice(&data);
        out
    }
}

#[cfg(test)]
mod tests;
