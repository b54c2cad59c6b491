//! Opening one offload bundle: its code objects read (or decompressed, within the cap) and parsed for
//! their kernels and the resources the compiler recorded.

use std::{
    collections::HashMap,
    io::{self, Read as _},
};

use serde::Serialize;

use super::{
    code_object::CodeKernel,
    walk::{Body, Bytes, EntryHeader, FatBinary, Header, MAX_DECOMPRESSED, Method, plain_header, wanted},
};

impl FatBinary {
    /// The entries of one bundle with their kernels, opened now: a plain bundle's code objects are read
    /// from `src` (what [`FatBinary::walk`] read), a compressed bundle is decompressed (at most
    /// [`MAX_DECOMPRESSED`] bytes). Only entries for `target` when given; kernel resources when `detail`.
    /// An error says why the bundle could not be opened.
    pub(crate) fn kernels(
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
    pub(crate) fn name_index(&self, src: &(impl Bytes + ?Sized)) -> NameIndex {
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
pub(crate) struct Bundle<K = CodeKernel> {
    /// "0000", "0001", …
    pub(crate) number: String,
    /// Offset of the bundle in the file.
    pub(crate) offset: u64,
    /// A compressed bundle ("CCOB"): "zstd" or "zlib"; null for a plain one.
    pub(crate) compressed: Option<String>,
    /// Why the bundle could not be opened (unknown method, corrupt data, a cap); its entries are then
    /// empty or partial.
    pub(crate) error: Option<String>,
    pub entries: Vec<Entry<K>>,
}

#[derive(Debug, Default, Serialize)]
pub(crate) struct Entry<K = CodeKernel> {
    pub(crate) triple: String,
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
    pub(crate) fn map_kernels<L>(self, mut f: impl FnMut(K) -> L) -> Bundle<L> {
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
pub(crate) fn open_all(src: &(impl Bytes + ?Sized), fat: &FatBinary, target: Option<&str>) -> Vec<Bundle> {
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
pub(crate) fn open_bytes(data: &[u8], base: u64, target: Option<&str>) -> Vec<Bundle> {
    open_all(data, &FatBinary::walk(data, base), target)
}

/// Which offload bundles of a file define each kernel name.
#[derive(Debug, Default)]
pub(crate) struct NameIndex {
    by_name: HashMap<Box<str>, Vec<u32>>,
    /// Bundles that could not be opened (corrupt, over a cap): their kernels are in no list.
    pub(crate) unreadable: u32,
}

impl NameIndex {
    /// The bundle numbers ("0042") that define `name`, in order.
    pub(crate) fn bundles_defining(&self, name: &str) -> Vec<String> {
        self.by_name.get(name).into_iter().flatten().map(|n| format!("{n:04}")).collect()
    }
}
