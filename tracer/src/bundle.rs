//! clang offload bundles: the GPU code a HIP library or program carries, read as hostile input.
//!
//! A `.hip_fatbin` section (or a bundle file of its own) holds bundles one after another, numbered 0000,
//! 0001, … as extraction tools number them. [`FatBinary::walk`] indexes them by their headers alone: each
//! bundle's place and length, its entries (target triple, gfx target, code object range) when plain, its
//! method and sizes when compressed (clang's CCOB, zstd or zlib, versions 1–3). No code object is read and
//! nothing is decompressed until a kernel in that bundle is asked for ([`FatBinary::kernels`]); then one
//! bundle is opened, its code objects parsed for their `NAME.kd` kernel descriptors (and, when asked, the
//! resources the compiler recorded in the metadata note), and dropped.
//!
//! Every header is someone's claim: offsets and sizes are checked arithmetic against the bytes that are
//! there, each step of the walk moves forward, and the caps below end what no real file needs (each cut
//! says why). A leaf: names only, no classification.
#![expect(
    clippy::little_endian_bytes,
    reason = "the formats read here (offload bundles, zstd frames, ELF notes) are little-endian by definition"
)]

use std::{
    collections::HashMap,
    io::{self, Read as _},
};

use object::{Object as _, ObjectSymbol as _, ReadRef};
use serde::Serialize;

use crate::files::{Bounded, CodeFile, ELF_BUDGET};

pub const BUNDLE_MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";
pub const COMPRESSED_MAGIC: &[u8] = b"CCOB";

/// Bundles indexed per fat binary at most (Ollama's `libggml-hip.so` has about 130, rocSPARSE 111).
pub const MAX_BUNDLES: usize = 65_536;
/// Entries (target code objects) per bundle at most.
pub const MAX_ENTRIES: u64 = 4096;
/// Longest target triple.
const MAX_TRIPLE: u64 = 1024;
/// Most bytes one compressed bundle may decompress to (the largest real ones are tens of MiB).
pub const MAX_DECOMPRESSED: u64 = 256 << 20;
/// Largest code object read whole (from a bundle file region, or out of process memory).
pub const MAX_CODE_OBJECT: u64 = 256 << 20;
/// Blocks one zstd frame may have when a version-1 bundle's length is found by walking them.
const MAX_ZSTD_BLOCKS: u64 = 1 << 20;

/// Random access to the bytes a walk reads: a file's region, or a buffer (a decompressed bundle).
pub trait Bytes {
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
pub struct Region<'f> {
    pub file: &'f CodeFile,
    pub base: u64,
    pub len: u64,
}

/// `len` bytes of `data` from `offset`, when they are there.
fn slice(data: &[u8], offset: u64, len: u64) -> Option<&[u8]> {
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
pub enum Method {
    Zlib,
    Zstd,
}

impl Method {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Zlib => "zlib",
            Self::Zstd => "zstd",
        }
    }
}

/// One entry of a plain bundle's header: a target and where its code object lies in the bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryHeader {
    pub triple: String,
    /// The gfx target of an AMDGPU entry (`gfx1030`, `gfx90a:xnack-`).
    pub target: Option<String>,
    /// From the start of the bundle.
    pub offset: u64,
    pub size: u64,
}

/// What a bundle's header says, its code unread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
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
pub struct Header {
    pub number: u32,
    /// In the file (or buffer) the walk read.
    pub offset: u64,
    /// Bytes it takes, as far as its header tells.
    pub len: u64,
    pub body: Body,
    /// What is wrong with the header, when something is (its entries may then be partial).
    pub error: Option<String>,
}

impl Header {
    /// "0042".
    pub fn name(&self) -> String {
        format!("{:04}", self.number)
    }
}

/// The bundles of one fat binary, by their headers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FatBinary {
    /// Where the walk read: the section's offset in its file and its length.
    pub base: u64,
    pub len: u64,
    pub bundles: Vec<Header>,
    /// Why the walk stopped before the end of the section, when it did.
    pub cut: Option<String>,
}

impl FatBinary {
    /// The fat binary of a file: its `.hip_fatbin` section, or the whole file when it is an offload
    /// bundle of its own (`hipcc --genco`, an extracted `.hipfb`). None when it carries neither.
    pub fn of_file(file: &CodeFile) -> crate::files::Result<Option<Self>> {
        let Some((base, len)) = fat_binary_range(file)? else { return Ok(None) };
        Ok(Some(Self::walk(&Region { file, base, len }, base)))
    }

    /// The bytes the walk read, in `file` (the file it was made from).
    pub const fn region<'f>(&self, file: &'f CodeFile) -> Region<'f> {
        Region { file, base: self.base, len: self.len }
    }

    /// Indexes the bundles in `src`, whose byte 0 is at `base` in its file. Total: whatever the bytes,
    /// it ends (every step moves forward) and reads headers only.
    pub fn walk(src: &(impl Bytes + ?Sized), base: u64) -> Self {
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
    pub fn bundle_at(&self, offset: u64) -> Option<&Header> {
        let i = self.bundles.partition_point(|b| b.offset <= offset);
        let b = self.bundles.get(i.checked_sub(1)?)?;
        (offset - b.offset < b.len.max(1)).then_some(b)
    }

    /// The entries of one bundle with their kernels, opened now: a plain bundle's code objects are read
    /// from `src` (what [`FatBinary::walk`] read), a compressed bundle is decompressed (at most
    /// [`MAX_DECOMPRESSED`] bytes). Only entries for `target` when given; kernel resources when `detail`.
    /// An error says why the bundle could not be opened.
    pub fn kernels(
        &self,
        src: &(impl Bytes + ?Sized),
        bundle: &Header,
        target: Option<&str>,
        detail: bool,
    ) -> Result<Vec<Entry>, String> {
        let start = bundle.offset.checked_sub(self.base).ok_or("bundle outside its section")?;
        match &bundle.body {
            Body::Plain(entries) => Ok(entries
                .iter()
                .filter(|e| wanted(e, target))
                .map(|e| {
                    let at = start.saturating_add(e.offset);
                    let kernels = if e.target.is_some() { src.code_object(at, e.size, detail) } else { Vec::new() };
                    Entry::new(e, Some(self.base + at), kernels)
                })
                .collect()),
            Body::Compressed { method, uncompressed, data, data_len, .. } => {
                // A header that is wrong (sizes beyond the section, over the cap, a method not known) is
                // not opened at all.
                if let Some(e) = &bundle.error {
                    return Err(e.clone());
                }
                let method = method.ok_or("compression method not known")?;
                let stream = start
                    .checked_add(*data)
                    .and_then(|at| src.stream(at, *data_len))
                    .ok_or("compressed data outside the section")?;
                let inner = decompress(method, stream, *uncompressed)?;
                let (body, _, error) = plain_header(inner.as_slice(), 0);
                if let Some(e) = error {
                    return Err(format!("inside the compressed bundle: {e}"));
                }
                let Body::Plain(entries) = body else { return Err("no offload bundle inside".to_owned()) };
                Ok(entries
                    .iter()
                    .filter(|e| wanted(e, target))
                    .map(|e| {
                        let kernels =
                            if e.target.is_some() { inner.code_object(e.offset, e.size, detail) } else { Vec::new() };
                        Entry::new(e, None, kernels)
                    })
                    .collect())
            }
        }
    }

    /// Which bundles define each kernel name, for kernels named from a file's symbols rather than by
    /// their registration (a late attach): every bundle opened once, one at a time.
    pub fn name_index(&self, src: &(impl Bytes + ?Sized)) -> NameIndex {
        let mut index = NameIndex::default();
        for b in &self.bundles {
            match self.kernels(src, b, None, false) {
                Ok(entries) => {
                    for name in entries.into_iter().flat_map(|e| e.kernels).map(|k| k.name) {
                        let numbers = index.by_name.entry(name.into_boxed_str()).or_default();
                        if numbers.last() != Some(&b.number) {
                            numbers.push(b.number);
                        }
                    }
                }
                Err(_) => index.unreadable += 1,
            }
        }
        index
    }
}

fn wanted(e: &EntryHeader, target: Option<&str>) -> bool {
    target.is_none_or(|t| e.target.as_deref().is_some_and(|g| g.starts_with(t)))
}

/// Whether `len` bytes at `at` lie in `size`.
fn fits(size: u64, at: u64, len: u64) -> bool {
    at.checked_add(len).is_some_and(|end| end <= size)
}

/// Where a file's fat binary lies: its `.hip_fatbin` section, or the whole of a bundle file.
fn fat_binary_range(file: &CodeFile) -> crate::files::Result<Option<(u64, u64)>> {
    let mut head = [0u8; 24];
    let n = file.read_at_most(0, &mut head)?;
    if head[..n].starts_with(BUNDLE_MAGIC) || head[..n].starts_with(COMPRESSED_MAGIC) {
        return Ok(Some((0, file.len())));
    }
    Ok(crate::elf::section_range(file, ".hip_fatbin").filter(|&(_, len)| len > 0))
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
fn plain_header(src: &(impl Bytes + ?Sized), at: u64) -> (Body, u64, Option<String>) {
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

/// Decompresses one bundle, refusing more than [`MAX_DECOMPRESSED`] bytes whatever the header claims.
fn decompress(method: Method, stream: Box<dyn io::Read + '_>, declared: u64) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(declared.min(MAX_DECOMPRESSED) as usize);
    let limit = MAX_DECOMPRESSED + 1;
    let read = match method {
        Method::Zstd => zstd::stream::read::Decoder::new(stream)
            .map(zstd::stream::read::Decoder::single_frame)
            .and_then(|d| d.take(limit).read_to_end(&mut out)),
        Method::Zlib => flate2::read::ZlibDecoder::new(stream).take(limit).read_to_end(&mut out),
    };
    read.map_err(|e| format!("cannot decompress ({}): {e}", method.as_str()))?;
    if out.len() as u64 > MAX_DECOMPRESSED {
        return Err(format!("decompresses to more than {MAX_DECOMPRESSED} bytes ({}): not opened", method.as_str()));
    }
    Ok(out)
}

/// One offload bundle as `inspect` shows it; `K` is what a kernel is described by.
#[derive(Debug, Default, Serialize)]
pub struct Bundle<K = CodeKernel> {
    /// "0000", "0001", …
    pub number: String,
    /// Offset of the bundle in the file.
    pub offset: u64,
    /// A compressed bundle ("CCOB"): "zstd" or "zlib"; null for a plain one.
    pub compressed: Option<String>,
    /// Why the bundle could not be opened (unknown method, corrupt data, a cap); its entries are then
    /// empty or partial.
    pub error: Option<String>,
    pub entries: Vec<Entry<K>>,
}

#[derive(Debug, Default, Serialize)]
pub struct Entry<K = CodeKernel> {
    pub triple: String,
    /// The gfx target of an AMDGPU entry (`gfx1030`, `gfx90a:xnack-`).
    pub target: Option<String>,
    /// Offset of the code object in the file (absent inside a compressed bundle): with `size`, what a
    /// loader's `file://PATH#offset=O&size=S` names.
    pub offset: Option<u64>,
    pub size: u64,
    pub kernels: Vec<K>,
}

impl Entry {
    fn new(e: &EntryHeader, offset: Option<u64>, kernels: Vec<CodeKernel>) -> Self {
        Self { triple: e.triple.clone(), target: e.target.clone(), offset, size: e.size, kernels }
    }
}

impl<K> Bundle<K> {
    /// The same bundle with each kernel described another way.
    pub fn map_kernels<L>(self, mut f: impl FnMut(K) -> L) -> Bundle<L> {
        Bundle {
            number: self.number,
            offset: self.offset,
            compressed: self.compressed,
            error: self.error,
            entries: self
                .entries
                .into_iter()
                .map(|e| Entry {
                    triple: e.triple,
                    target: e.target,
                    offset: e.offset,
                    size: e.size,
                    kernels: e.kernels.into_iter().map(&mut f).collect(),
                })
                .collect(),
        }
    }
}

/// Every bundle of a fat binary opened in turn, for `inspect`: one bundle's code in memory at a time.
pub fn open_all(src: &(impl Bytes + ?Sized), fat: &FatBinary, target: Option<&str>) -> Vec<Bundle> {
    fat.bundles
        .iter()
        .map(|h| {
            let compressed = match &h.body {
                Body::Compressed { method, .. } => Some(method.map_or("unknown", Method::as_str).to_owned()),
                Body::Plain(_) => None,
            };
            let (entries, error) = match fat.kernels(src, h, target, true) {
                Ok(entries) => (entries, h.error.clone()),
                Err(e) if h.error.as_ref() == Some(&e) => (Vec::new(), Some(e)),
                Err(e) => (Vec::new(), Some(h.error.as_ref().map_or_else(|| e.clone(), |h| format!("{h}; {e}")))),
            };
            Bundle { number: h.name(), offset: h.offset, compressed, error, entries }
        })
        .collect()
}

/// The bundles in a buffer (a `.hip_fatbin` section's bytes, at `base` in its file), every one opened:
/// what `inspect` shows of them, for bytes already in memory.
pub fn open_bytes(data: &[u8], base: u64, target: Option<&str>) -> Vec<Bundle> {
    open_all(data, &FatBinary::walk(data, base), target)
}

/// Which offload bundles of a file define each kernel name.
#[derive(Debug, Default)]
pub struct NameIndex {
    by_name: HashMap<Box<str>, Vec<u32>>,
    /// Bundles that could not be opened (corrupt, over a cap): their kernels are in no list.
    pub unreadable: u32,
}

impl NameIndex {
    /// The bundle numbers ("0042") that define `name`, in order.
    pub fn bundles_defining(&self, name: &str) -> Vec<String> {
        self.by_name.get(name).into_iter().flatten().map(|n| format!("{n:04}")).collect()
    }
}

/// A kernel of a code object.
#[derive(Debug, Default, Serialize)]
pub struct CodeKernel {
    pub name: String,
    /// From the code object's AMDGPU metadata note, where present (and asked for).
    pub resources: Option<Resources>,
}

/// A kernel's resource use as the compiler recorded it (`amdhsa.kernels` in the `NT_AMDGPU_METADATA` note).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Resources {
    pub sgprs: Option<u64>,
    pub vgprs: Option<u64>,
    /// Accumulation registers (CDNA's MFMA), 0 elsewhere.
    pub agprs: Option<u64>,
    /// LDS bytes a work-group needs before dynamic shared memory (`.group_segment_fixed_size`).
    pub lds: Option<u64>,
    /// Scratch bytes per work-item (`.private_segment_fixed_size`).
    pub scratch: Option<u64>,
    pub wavefront_size: Option<u64>,
    pub max_workgroup_size: Option<u64>,
    pub sgpr_spills: Option<u64>,
    pub vgpr_spills: Option<u64>,
    /// Each argument's byte offset in the argument segment (`.args[].offset`), hidden ones included.
    pub arg_offsets: Vec<u64>,
}

/// The kernels of an AMDGPU code object: its `NAME.kd` symbols (kernel descriptors), as (NAME, address
/// of the descriptor in the code object), sorted.
pub fn kernel_symbols<'d, R: ReadRef<'d>>(elf: &object::File<'d, R>) -> Vec<(String, u64)> {
    let mut kernels: Vec<(String, u64)> = elf
        .symbols()
        .chain(elf.dynamic_symbols())
        .filter_map(|s| Some((s.name().ok()?.strip_suffix(".kd")?.to_owned(), s.address())))
        .collect();
    kernels.sort();
    kernels.dedup();
    kernels
}

/// Kernels of an AMDGPU code object, with their resources from the metadata note when `detail`.
fn kernels_of<'d, R: ReadRef<'d>>(code_object: R, detail: bool) -> Vec<CodeKernel> {
    let Ok(elf) = object::File::parse(code_object) else { return Vec::new() };
    let mut names: Vec<String> = kernel_symbols(&elf).into_iter().map(|(name, _)| name).collect();
    names.dedup();
    let mut resources = if detail { metadata(code_object) } else { HashMap::new() };
    names.into_iter().map(|name| CodeKernel { resources: resources.remove(&name), name }).collect()
}

const NT_AMDGPU_METADATA: u32 = 32;

/// Kernel resources by name from the `NT_AMDGPU_METADATA` note (owner "AMDGPU", `MessagePack`; code objects
/// v3 and later), found with `object`'s note iterator.
fn metadata<'d, R: ReadRef<'d>>(code_object: R) -> HashMap<String, Resources> {
    use object::read::elf::{ElfFile64, FileHeader as _, SectionHeader as _};
    let mut out = HashMap::new();
    let Ok(elf) = ElfFile64::<object::LittleEndian, R>::parse(code_object) else { return out };
    let endian = elf.endian();
    let Ok(sections) = elf.elf_header().sections(endian, code_object) else { return out };
    for section in sections.iter() {
        let Ok(Some(mut notes)) = section.notes(endian, code_object) else { continue };
        while let Ok(Some(note)) = notes.next() {
            if note.n_type(endian) == NT_AMDGPU_METADATA
                && note.name() == b"AMDGPU"
                && let Ok(value) = rmpv::decode::read_value(&mut note.desc())
            {
                kernel_resources(&value, &mut out);
            }
        }
    }
    out
}

fn kernel_resources(doc: &rmpv::Value, out: &mut HashMap<String, Resources>) {
    let get = |m: &rmpv::Value, key: &str| -> Option<rmpv::Value> {
        m.as_map()?.iter().find(|(k, _)| k.as_str() == Some(key)).map(|(_, v)| v.clone())
    };
    let Some(kernels) = get(doc, "amdhsa.kernels") else { return };
    for k in kernels.as_array().into_iter().flatten() {
        let Some(name) = get(k, ".name").and_then(|v| v.as_str().map(str::to_owned)) else { continue };
        let n = |key: &str| {
            let v = get(k, key)?;
            v.as_u64()
        };
        out.insert(
            name,
            Resources {
                sgprs: n(".sgpr_count"),
                vgprs: n(".vgpr_count"),
                agprs: n(".agpr_count"),
                lds: n(".group_segment_fixed_size"),
                scratch: n(".private_segment_fixed_size"),
                wavefront_size: n(".wavefront_size"),
                max_workgroup_size: n(".max_flat_workgroup_size"),
                sgpr_spills: n(".sgpr_spill_count"),
                vgpr_spills: n(".vgpr_spill_count"),
                arg_offsets: get(k, ".args")
                    .and_then(|a| a.as_array().map(|a| a.iter().filter_map(|x| get(x, ".offset")?.as_u64()).collect()))
                    .unwrap_or_default(),
            },
        );
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::io::Write as _;

    use super::*;

    /// A plain bundle's header with one entry (`offset`, `size`, `triple`), code object bytes after it.
    pub(crate) fn plain(offset: u64, size: u64, triple: &[u8]) -> Vec<u8> {
        let mut b = BUNDLE_MAGIC.to_vec();
        b.extend(1u64.to_le_bytes());
        b.extend(offset.to_le_bytes());
        b.extend(size.to_le_bytes());
        b.extend((triple.len() as u64).to_le_bytes());
        b.extend(triple);
        b
    }

    /// clang's compressed bundle (v2 or v3) around `data`, claiming `uncompressed` bytes inside.
    pub(crate) fn ccob(version: u16, method: u16, data: &[u8], uncompressed: u64) -> Vec<u8> {
        let mut b = COMPRESSED_MAGIC.to_vec();
        b.extend(version.to_le_bytes());
        b.extend(method.to_le_bytes());
        let header = if version == 2 { 24u64 } else { 32 };
        let total = header + data.len() as u64;
        if version == 2 {
            b.extend((total as u32).to_le_bytes());
            b.extend((uncompressed as u32).to_le_bytes());
        } else {
            b.extend(total.to_le_bytes());
            b.extend(uncompressed.to_le_bytes());
        }
        b.extend(0u64.to_le_bytes());
        b.extend(data);
        b
    }

    #[test]
    fn an_entry_offset_that_wraps_around_is_an_error_not_a_panic() {
        // 57 bytes: the entry's offset + size overflows u64.
        let b = plain(u64::MAX - 8, 16, b"x");
        assert_eq!(b.len(), 57);
        let fat = FatBinary::walk(b.as_slice(), 0);
        assert_eq!(fat.bundles.len(), 1);
        assert!(fat.bundles[0].error.as_deref().is_some_and(|e| e.contains("beyond the section")), "{fat:?}");
        let opened = open_all(b.as_slice(), &fat, None);
        assert!(opened[0].entries.is_empty());
    }

    #[test]
    fn lengths_that_would_wrap_the_walk_around_end_it() {
        // A compressed bundle whose total size is u64::MAX, then one whose total is 0, then a plain bundle
        // whose code object claims to end at u64::MAX: each step moves forward or the walk ends.
        let mut b = ccob(3, 1, &[0; 8], 10);
        b[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        let fat = FatBinary::walk(b.as_slice(), 0);
        assert_eq!(fat.bundles.len(), 1);
        assert!(fat.bundles[0].error.as_deref().is_some_and(|e| e.contains("are left in the section")), "{fat:?}");
        let mut zero = ccob(3, 1, &[0; 8], 10);
        zero[8..16].copy_from_slice(&0u64.to_le_bytes());
        zero.extend(plain(0, u64::MAX, b"hipv4-amdgcn-amd-amdhsa--gfx1030"));
        let fat = FatBinary::walk(zero.as_slice(), 0);
        assert_eq!(fat.bundles.len(), 2, "{fat:?}");
        // A section of nothing but magics: one bundle per magic, never more than the bytes allow.
        let magics = BUNDLE_MAGIC.repeat(1000);
        let fat = FatBinary::walk(magics.as_slice(), 0);
        assert!(fat.bundles.len() <= 1000);
    }

    #[test]
    fn entry_counts_and_triples_are_capped() {
        let mut b = plain(0, 0, b"x");
        b[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
        let fat = FatBinary::walk(b.as_slice(), 0);
        assert!(fat.bundles[0].error.as_deref().is_some_and(|e| e.contains("more than 4096")), "{fat:?}");
        let mut b = plain(0, 0, b"x");
        b[48..56].copy_from_slice(&(1u64 << 40).to_le_bytes());
        let fat = FatBinary::walk(b.as_slice(), 0);
        assert!(fat.bundles[0].error.as_deref().is_some_and(|e| e.contains("triple")), "{fat:?}");
    }

    /// Zeros compressed: `n` bytes inside, a small file outside.
    fn bomb(method: u16, n: usize) -> Vec<u8> {
        let zeros = vec![0u8; 1 << 20];
        if method == 1 {
            let mut z = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
            for _ in 0..n >> 20 {
                z.write_all(&zeros).unwrap();
            }
            z.finish().unwrap()
        } else {
            let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            for _ in 0..n >> 20 {
                z.write_all(&zeros).unwrap();
            }
            z.finish().unwrap()
        }
    }

    #[test]
    fn decompression_bombs_stop_at_the_cap_whatever_the_header_says() {
        for (method, name) in [(1, "zstd"), (0, "zlib")] {
            let inner = bomb(method, (MAX_DECOMPRESSED as usize) + (16 << 20));
            // The header claims a small size: the decompressor is not trusted to stop there either.
            for claimed in [1024, MAX_DECOMPRESSED + (16 << 20), u64::from(u32::MAX)] {
                let b = ccob(3, method, &inner, claimed);
                let fat = FatBinary::walk(b.as_slice(), 0);
                let e = fat.kernels(b.as_slice(), &fat.bundles[0], None, false).unwrap_err();
                assert!(e.contains("more than"), "{name}: {e}");
            }
        }
    }

    #[test]
    fn zstd_frames_are_measured_from_their_block_headers() {
        let frame = zstd::bulk::compress(&vec![7u8; 300_000], 1).unwrap();
        let mut data = frame.clone();
        data.extend(b"trailing");
        assert_eq!(zstd_frame_len(data.as_slice(), 0), Some(frame.len() as u64));
        // Cut short: no length.
        assert_eq!(zstd_frame_len(&frame[..frame.len() - 1], 0), None);
        assert_eq!(zstd_frame_len(&b"not zstd"[..], 0), None);
    }

    #[test]
    fn a_registered_offset_finds_its_bundle() {
        let mut b = plain(64, 0, b"host-x86_64-unknown-linux");
        b.resize(4096, 0);
        b.extend(plain(64, 0, b"host-x86_64-unknown-linux"));
        let fat = FatBinary::walk(b.as_slice(), 0x1000);
        assert_eq!(fat.bundles.len(), 2);
        assert_eq!(fat.bundle_at(0x1000).map(Header::name).as_deref(), Some("0000"));
        assert_eq!(fat.bundle_at(0x2000).map(Header::name).as_deref(), Some("0001"));
        assert_eq!(fat.bundle_at(0x1800), None, "padding between bundles is in no bundle");
        assert_eq!(fat.bundle_at(0x10), None);
    }
}
