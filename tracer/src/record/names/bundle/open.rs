//! Opening one offload bundle: its code objects read (or decompressed, within the cap) and parsed for
//! their kernels and the resources the compiler recorded.

use std::{
    collections::HashMap,
    io::{self, Read as _},
};

use object::{Object as _, ObjectSymbol as _, ReadRef};
use serde::Serialize;

use super::{Body, Bytes, EntryHeader, FatBinary, Header, MAX_DECOMPRESSED, Method, plain_header, wanted};

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

/// A kernel of a code object.
#[derive(Debug, Default, Serialize)]
pub(crate) struct CodeKernel {
    pub name: String,
    /// From the code object's AMDGPU metadata note, where present (and asked for).
    pub(crate) resources: Option<Resources>,
}

/// A kernel's resource use as the compiler recorded it (`amdhsa.kernels` in the `NT_AMDGPU_METADATA` note).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Resources {
    pub(crate) sgprs: Option<u64>,
    pub(crate) vgprs: Option<u64>,
    /// Accumulation registers (CDNA's MFMA), 0 elsewhere.
    pub(crate) agprs: Option<u64>,
    /// LDS bytes a work-group needs before dynamic shared memory (`.group_segment_fixed_size`).
    pub(crate) lds: Option<u64>,
    /// Scratch bytes per work-item (`.private_segment_fixed_size`).
    pub(crate) scratch: Option<u64>,
    pub(crate) wavefront_size: Option<u64>,
    pub(crate) max_workgroup_size: Option<u64>,
    pub(crate) sgpr_spills: Option<u64>,
    pub(crate) vgpr_spills: Option<u64>,
    /// Each argument's byte offset in the argument segment (`.args[].offset`), hidden ones included.
    pub(crate) arg_offsets: Vec<u64>,
}

/// The kernels of an AMDGPU code object: its `NAME.kd` symbols (kernel descriptors), as (NAME, address
/// of the descriptor in the code object), sorted.
pub(crate) fn kernel_symbols<'d, R: ReadRef<'d>>(elf: &object::File<'d, R>) -> Vec<(String, u64)> {
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
pub(super) fn kernels_of<'d, R: ReadRef<'d>>(code_object: R, detail: bool) -> Vec<CodeKernel> {
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
