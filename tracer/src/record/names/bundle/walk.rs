//! The walk over a fat binary's bundles by their headers alone ([`FatBinary::walk`]), and the bytes it
//! reads ([`Bytes`]): a file's region or a buffer.
#![expect(
    clippy::little_endian_bytes,
    reason = "the formats read here (offload bundles, zstd frames, ELF notes) are little-endian by definition"
)]

use super::code_object::{CodeKernel, kernels_of};

use std::io;

use crate::os::files::{Bounded, CodeFile, ELF_BUDGET};

pub(crate) const BUNDLE_MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";
pub(crate) const COMPRESSED_MAGIC: &[u8] = b"CCOB";

/// Bundles indexed per fat binary at most (Ollama's `libggml-hip.so` has about 130, rocSPARSE 111).
pub(crate) const MAX_BUNDLES: usize = 65_536;
/// Entries (target code objects) per bundle at most.
pub(crate) const MAX_ENTRIES: u64 = 4096;
/// Longest target triple.
const MAX_TRIPLE: u64 = 1024;
/// Most bytes one compressed bundle may decompress to (the largest real ones are tens of MiB).
pub(crate) const MAX_DECOMPRESSED: u64 = 256 << 20;
/// Largest code object read whole (from a bundle file region, or out of process memory).
pub(crate) const MAX_CODE_OBJECT: u64 = 256 << 20;
/// Blocks one zstd frame may have when a version-1 bundle's length is found by walking them.
const MAX_ZSTD_BLOCKS: u64 = 1 << 20;

/// Random access to the bytes a walk reads: a file's region, or a buffer (a decompressed bundle).
pub(crate) trait Bytes {
    fn size(&self) -> u64;
    /// Fills `buf` from `offset`; false when those bytes are not all there.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> bool;

    /// Up to `buf.len()` bytes from `offset` (fewer at the end).
    fn read_most(&self, offset: u64, buf: &mut [u8]) -> usize {
        let n = self.size().saturating_sub(offset).min(buf.len() as u64) as usize;
        if self.read_at(offset, &mut buf[..n]) { n } else { 0 }
    }

    fn u64_at(&self, offset: u64) -> Option<u64> {
        let mut b = [0; 8];
        self.read_at(offset, &mut b).then(|| u64::from_le_bytes(b))
    }

    /// `len` bytes from `offset` as a stream (a compressed bundle's data, for its decompressor).
    fn stream(&self, offset: u64, len: u64) -> Option<Box<dyn io::Read + '_>>;

    /// The kernels of the code object at `offset` (`len` bytes), with their resources when `detail`.
    fn code_object(&self, offset: u64, len: u64, detail: bool) -> Vec<CodeKernel>;
}

impl Bytes for [u8] {
    fn size(&self) -> u64 {
        self.len() as u64
    }

    fn stream(&self, offset: u64, len: u64) -> Option<Box<dyn io::Read + '_>> {
        Some(Box::new(slice(self, offset, len)?))
    }

    fn code_object(&self, offset: u64, len: u64, detail: bool) -> Vec<CodeKernel> {
        slice(self, offset, len).map(|code| kernels_of(code, detail)).unwrap_or_default()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> bool {
        let Ok(start) = usize::try_from(offset) else { return false };
        match start.checked_add(buf.len()).and_then(|end| self.get(start..end)) {
            Some(src) => {
                buf.copy_from_slice(src);
                true
            }
            None => false,
        }
    }
}

/// `len` bytes of a file from `base`.
pub(crate) struct Region<'f> {
    pub(crate) file: &'f CodeFile,
    pub(crate) base: u64,
    pub(crate) len: u64,
}

/// `len` bytes of `data` from `offset`, when they are there.
pub(super) fn slice(data: &[u8], offset: u64, len: u64) -> Option<&[u8]> {
    let start = usize::try_from(offset).ok()?;
    data.get(start..start.checked_add(usize::try_from(len).ok()?)?)
}

impl Bytes for Region<'_> {
    fn size(&self) -> u64 {
        self.len
    }

    fn stream(&self, offset: u64, len: u64) -> Option<Box<dyn io::Read + '_>> {
        fits(self.len, offset, len).then_some(())?;
        Some(Box::new(self.file.stream(self.base + offset, len).ok()?))
    }

    fn code_object(&self, offset: u64, len: u64, detail: bool) -> Vec<CodeKernel> {
        if !fits(self.len, offset, len) {
            return Vec::new();
        }
        kernels_of(&Bounded::new(self.file, self.base + offset, len, ELF_BUDGET), detail)
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> bool {
        match offset.checked_add(buf.len() as u64) {
            Some(end) if end <= self.len => self.file.read_exact_at(self.base + offset, buf).is_ok(),
            _ => false,
        }
    }
}

/// A compression method of clang's compressed bundles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Method {
    Zlib,
    Zstd,
}

impl Method {
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::Zlib => "zlib",
            Self::Zstd => "zstd",
        }
    }
}

/// One entry of a plain bundle's header: a target and where its code object lies in the bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EntryHeader {
    pub(crate) triple: String,
    /// The gfx target of an AMDGPU entry (`gfx1030`, `gfx90a:xnack-`).
    pub(crate) target: Option<String>,
    /// From the start of the bundle.
    pub(crate) offset: u64,
    pub(crate) size: u64,
}

/// What a bundle's header says, its code unread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Body {
    Plain(Vec<EntryHeader>),
    /// Compressed: the method (None: a method number not known), the size it says it decompresses to,
    /// and where its compressed bytes lie, from the start of the bundle.
    Compressed {
        method: Option<Method>,
        version: u16,
        uncompressed: u64,
        data: u64,
        data_len: u64,
    },
}

/// One bundle, indexed by its header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) number: u32,
    /// In the file (or buffer) the walk read.
    pub offset: u64,
    /// Bytes it takes, as far as its header tells.
    pub(crate) len: u64,
    pub(crate) body: Body,
    /// What is wrong with the header, when something is (its entries may then be partial).
    pub(crate) error: Option<String>,
}

impl Header {
    /// "0042".
    pub(crate) fn name(&self) -> String {
        format!("{:04}", self.number)
    }
}

/// The bundles of one fat binary, by their headers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FatBinary {
    /// Where the walk read: the section's offset in its file and its length.
    pub(crate) base: u64,
    pub(crate) len: u64,
    pub bundles: Vec<Header>,
    /// Why the walk stopped before the end of the section, when it did.
    pub(crate) cut: Option<String>,
}

impl FatBinary {
    /// The fat binary of a file: its `.hip_fatbin` section, or the whole file when it is an offload
    /// bundle of its own (`hipcc --genco`, an extracted `.hipfb`). None when it carries neither.
    pub(crate) fn of_file(file: &CodeFile) -> crate::os::files::Result<Option<Self>> {
        let Some((base, len)) = fat_binary_range(file)? else { return Ok(None) };
        Ok(Some(Self::walk(&Region { file, base, len }, base)))
    }

    /// The bytes the walk read, in `file` (the file it was made from).
    pub(crate) const fn region<'f>(&self, file: &'f CodeFile) -> Region<'f> {
        Region { file, base: self.base, len: self.len }
    }

    /// Indexes the bundles in `src`, whose byte 0 is at `base` in its file. Total: whatever the bytes,
    /// it ends (every step moves forward) and reads headers only.
    pub(crate) fn walk(src: &(impl Bytes + ?Sized), base: u64) -> Self {
        let end = src.size();
        let mut out = Self { base, len: end, ..Self::default() };
        let mut at = 0u64;
        while at.checked_add(4).is_some_and(|e| e <= end) {
            if out.bundles.len() >= MAX_BUNDLES {
                out.cut = Some(format!("more than {MAX_BUNDLES} bundles: the rest is not indexed"));
                break;
            }
            let mut head = [0u8; 32];
            let n = src.read_most(at, &mut head);
            let head = &head[..n];
            let number = out.bundles.len() as u32;
            let (body, len, error) = if head.starts_with(COMPRESSED_MAGIC) {
                compressed_header(src, at)
            } else if head.starts_with(BUNDLE_MAGIC) {
                plain_header(src, at)
            } else {
                match find_magic(src, at) {
                    Some(next) => {
                        at = next;
                        continue;
                    }
                    None => break,
                }
            };
            out.bundles.push(Header { number, offset: base + at, len, body, error });
            // Every bundle takes at least its magic: the walk always moves on.
            match at.checked_add(len.max(4)) {
                Some(next) => at = next,
                None => break,
            }
        }
        out
    }

    /// The bundle that holds byte `offset` of the file (a registered fat binary points at its start).
    pub(crate) fn bundle_at(&self, offset: u64) -> Option<&Header> {
        let i = self.bundles.partition_point(|b| b.offset <= offset);
        let b = self.bundles.get(i.checked_sub(1)?)?;
        (offset - b.offset < b.len.max(1)).then_some(b)
    }
}

pub(super) fn wanted(e: &EntryHeader, target: Option<&str>) -> bool {
    target.is_none_or(|t| e.target.as_deref().is_some_and(|g| g.starts_with(t)))
}

/// Whether `len` bytes at `at` lie in `size`.
pub(super) fn fits(size: u64, at: u64, len: u64) -> bool {
    at.checked_add(len).is_some_and(|end| end <= size)
}

/// Where a file's fat binary lies: its `.hip_fatbin` section, or the whole of a bundle file.
fn fat_binary_range(file: &CodeFile) -> crate::os::files::Result<Option<(u64, u64)>> {
    let mut head = [0u8; 24];
    let n = file.read_at_most(0, &mut head)?;
    if head[..n].starts_with(BUNDLE_MAGIC) || head[..n].starts_with(COMPRESSED_MAGIC) {
        return Ok(Some((0, file.len())));
    }
    Ok(crate::os::elf::section_range(file, ".hip_fatbin").filter(|&(_, len)| len > 0))
}

/// The next place at or after `from` where a bundle magic starts.
fn find_magic(src: &(impl Bytes + ?Sized), from: u64) -> Option<u64> {
    const CHUNK: u64 = 1 << 16;
    let overlap = BUNDLE_MAGIC.len() as u64 - 1;
    let plain = memchr::memmem::Finder::new(BUNDLE_MAGIC);
    let compressed = memchr::memmem::Finder::new(COMPRESSED_MAGIC);
    let mut buf = vec![0u8; CHUNK as usize];
    let mut at = from;
    while at < src.size() {
        let n = src.read_most(at, &mut buf);
        if n == 0 {
            return None;
        }
        let hit = [plain.find(&buf[..n]), compressed.find(&buf[..n])].into_iter().flatten().min();
        if let Some(p) = hit {
            return Some(at + p as u64);
        }
        if (n as u64) < CHUNK {
            return None;
        }
        at += CHUNK - overlap;
    }
    None
}

/// A plain bundle's header at `at`: its entries, its length (the end of its furthest code object), and
/// what is wrong with it.
pub(super) fn plain_header(src: &(impl Bytes + ?Sized), at: u64) -> (Body, u64, Option<String>) {
    let room = src.size().saturating_sub(at);
    let mut entries = Vec::new();
    let Some(count) = at.checked_add(24).and_then(|p| src.u64_at(p)) else {
        return (Body::Plain(entries), room.min(32), Some("header cut short".to_owned()));
    };
    if count > MAX_ENTRIES {
        return (Body::Plain(entries), 32, Some(format!("{count} entries: more than {MAX_ENTRIES}")));
    }
    let mut cursor = 32u64;
    let mut len = cursor;
    for i in 0..count {
        let mut fixed = [0u8; 24];
        if !src.read_at(at + cursor, &mut fixed) {
            return (Body::Plain(entries), len.max(cursor), Some(format!("entry {i} cut short")));
        }
        let word = |k: usize| u64::from_le_bytes(fixed[k * 8..k * 8 + 8].try_into().expect("8 bytes"));
        let (offset, size, triple_len) = (word(0), word(1), word(2));
        if triple_len > MAX_TRIPLE {
            return (Body::Plain(entries), len.max(cursor), Some(format!("entry {i}: a {triple_len}-byte triple")));
        }
        let mut triple = vec![0u8; triple_len as usize];
        cursor += 24;
        if !src.read_at(at + cursor, &mut triple) {
            return (Body::Plain(entries), len.max(cursor), Some(format!("entry {i} cut short")));
        }
        cursor += triple_len;
        let triple = String::from_utf8_lossy(&triple).into_owned();
        let target = triple.rsplit("--").next().filter(|t| t.starts_with("gfx")).map(str::to_owned);
        match offset.checked_add(size) {
            Some(end) if end <= room => len = len.max(end),
            _ => {
                return (
                    Body::Plain(entries),
                    len.max(cursor),
                    Some(format!("entry {i} ({triple}) lies beyond the section: offset {offset}, size {size}")),
                );
            }
        }
        entries.push(EntryHeader { triple, target, offset, size });
    }
    (Body::Plain(entries), len.max(cursor), None)
}

/// A compressed bundle's header at `at` (clang-offload-bundler's "CCOB"): magic, u16 version, u16
/// method (0 zlib, 1 zstd), then by version: v1 u32 uncompressed size; v2 u32 total size, u32
/// uncompressed size; v3 u64 total size, u64 uncompressed size; then a u64 hash and the compressed
/// bytes. Version 1 gives no total size: a zstd frame's length is found by walking its block headers, a
/// zlib stream's by the next bundle's magic.
fn compressed_header(src: &(impl Bytes + ?Sized), at: u64) -> (Body, u64, Option<String>) {
    let room = src.size().saturating_sub(at);
    let mut h = [0u8; 32];
    let n = src.read_most(at, &mut h);
    let u16_at = |o: usize| (o + 2 <= n).then(|| u16::from_le_bytes([h[o], h[o + 1]]));
    let u32_at = |o: usize| (o + 4 <= n).then(|| u64::from(u32::from_le_bytes(h[o..o + 4].try_into().expect("4"))));
    let u64_at = |o: usize| (o + 8 <= n).then(|| u64::from_le_bytes(h[o..o + 8].try_into().expect("8")));
    let version = u16_at(4).unwrap_or(0);
    let method = match u16_at(6) {
        Some(0) => Some(Method::Zlib),
        Some(1) => Some(Method::Zstd),
        _ => None,
    };
    let (total, uncompressed, header) = match version {
        1 => (None, u32_at(8), 20u64),
        2 => (u32_at(8), u32_at(12), 24),
        3 => (u64_at(8), u64_at(16), 32),
        v => {
            let len = find_magic(src, at + 4).map_or(room, |next| next - at);
            let body = Body::Compressed { method, version: v, uncompressed: 0, data: 0, data_len: 0 };
            return (body, len, Some(format!("compressed bundle version {v} is not known")));
        }
    };
    let body = |data_len| Body::Compressed {
        method,
        version,
        uncompressed: uncompressed.unwrap_or(0),
        data: header,
        data_len,
    };
    let Some(uncompressed) = uncompressed.filter(|_| header <= room) else {
        return (body(0), room, Some("header cut short".to_owned()));
    };
    let len = match total {
        Some(t) if t >= header && t <= room => t,
        Some(t) => {
            return (body(0), header, Some(format!("says it takes {t} bytes, {room} are left in the section")));
        }
        None => match method {
            Some(Method::Zstd) => match zstd_frame_len(src, at + header) {
                Some(frame) => header + frame,
                None => return (body(0), header, Some("its zstd frame is cut short or corrupt".to_owned())),
            },
            _ => find_magic(src, at + header).map_or(room, |next| next - at),
        },
    };
    let error = method.is_none().then(|| format!("compression method {} is not known", u16_at(6).unwrap_or(0)));
    let error = error.or_else(|| {
        (uncompressed > MAX_DECOMPRESSED).then(|| {
            format!("says it decompresses to {uncompressed} bytes, more than tracer opens ({MAX_DECOMPRESSED})")
        })
    });
    (body(len - header), len, error)
}

/// The length of the zstd frame at `at`, from its frame header and block headers (RFC 8878), reading no
/// block content.
fn zstd_frame_len(src: &(impl Bytes + ?Sized), at: u64) -> Option<u64> {
    let mut h = [0u8; 5];
    if !src.read_at(at, &mut h) || h[..4] != 0xFD2F_B528u32.to_le_bytes() {
        return None;
    }
    let fhd = h[4];
    let single = fhd & 0x20 != 0;
    let fcs = match fhd >> 6 {
        0 => u64::from(single),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let dict = [0, 1, 2, 4][usize::from(fhd & 3)];
    let mut pos = at + 5 + u64::from(!single) + dict + fcs;
    for _ in 0..MAX_ZSTD_BLOCKS {
        let mut b = [0u8; 3];
        if !src.read_at(pos, &mut b) {
            return None;
        }
        let word = u32::from_le_bytes([b[0], b[1], b[2], 0]);
        let (last, kind, size) = (word & 1 != 0, (word >> 1) & 3, u64::from(word >> 3));
        pos = pos.checked_add(
            3 + match kind {
                0 | 2 => size,
                1 => 1,
                _ => return None,
            },
        )?;
        if pos > src.size() {
            return None;
        }
        if last {
            let checksum = if fhd & 4 != 0 { 4 } else { 0 };
            let end = pos.checked_add(checksum).filter(|&e| e <= src.size())?;
            return Some(end - at);
        }
    }
    None
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
