//! clang offload bundles: the GPU code a HIP library or program carries.
//!
//! The `.hip_fatbin` section (or a bundle file of its own) is read bundle by bundle, in order, numbered
//! 0000, 0001, … as extraction tools number them; each
//! bundle's entries (target triple, gfx target, size), compressed ones (CCOB, zstd or zlib) opened; and
//! per AMDGPU code object, its kernels (the `<name>.kd` kernel descriptor symbols) with the resources
//! the compiler recorded in its metadata note. A leaf: names only, no classification.
#![expect(
    clippy::little_endian_bytes,
    reason = "the formats read here (AQL packets, offload bundles, ELF notes, driver argument structs) are little-endian by definition"
)]

use std::collections::HashMap;

use object::{Object as _, ObjectSection as _, ObjectSymbol as _, read::elf::ElfFile64};
use serde::Serialize;

pub const BUNDLE_MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";
pub const COMPRESSED_MAGIC: &[u8] = b"CCOB";

/// One offload bundle; `K` is what a kernel is described by (a [`CodeKernel`] here).
#[derive(Debug, Default, Serialize)]
pub struct Bundle<K = CodeKernel> {
    /// "0000", "0001", …
    pub number: String,
    /// Offset of the bundle in the file.
    pub offset: u64,
    /// A compressed bundle ("CCOB"): "zstd" or "zlib"; null for a plain one.
    pub compressed: Option<String>,
    /// Why a compressed bundle could not be opened (unknown method, corrupt data); its entries are then
    /// empty.
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

/// Whether these bytes are an offload bundle file of their own (`hipcc --genco`, an extracted `.hipfb`).
pub fn is_bundle_file(data: &[u8]) -> bool {
    data.starts_with(BUNDLE_MAGIC) || data.starts_with(COMPRESSED_MAGIC)
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at + 8).map(|s| u64::from_le_bytes(s.try_into().expect("8 bytes")))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4).map(|s| u32::from_le_bytes(s.try_into().expect("4 bytes")))
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at + 2).map(|s| u16::from_le_bytes(s.try_into().expect("2 bytes")))
}

/// Reads the offload bundles of one `.hip_fatbin` section's bytes (or of a bundle file), with each
/// kernel's resources when `detail`.
pub fn walk(section: &[u8], file_offset: u64, target: Option<&str>, detail: bool) -> Vec<Bundle> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 4 <= section.len() {
        let rest = &section[at..];
        let number = format!("{:04}", out.len());
        let offset = file_offset + at as u64;
        if rest.starts_with(COMPRESSED_MAGIC) {
            let (compressed, len) = compressed_bundle(rest);
            let (method, entries, error) = match compressed {
                Ok((method, inner)) => (Some(method), plain_bundle(&inner, None, target, detail).map(|(e, _)| e), None),
                Err((method, why)) => (method, None, Some(why)),
            };
            let error = error.or_else(|| entries.is_none().then(|| "no offload bundle inside".to_owned()));
            out.push(Bundle {
                number,
                offset,
                compressed: Some(method.unwrap_or("unknown").to_owned()),
                error,
                entries: entries.unwrap_or_default(),
            });
            at += len.max(COMPRESSED_MAGIC.len());
            continue;
        }
        if !rest.starts_with(BUNDLE_MAGIC) {
            match rest.windows(BUNDLE_MAGIC.len()).position(|w| w == BUNDLE_MAGIC || w.starts_with(COMPRESSED_MAGIC)) {
                Some(p) => {
                    at += p;
                    continue;
                }
                None => break,
            }
        }
        let Some((entries, end)) = plain_bundle(rest, Some(offset), target, detail) else { break };
        out.push(Bundle { number, offset, compressed: None, error: None, entries });
        at += end.max(BUNDLE_MAGIC.len());
    }
    out
}

/// One uncompressed bundle (at `file_offset` in the file, when it lies there as it is): its entries and
/// its length.
fn plain_bundle(b: &[u8], file_offset: Option<u64>, target: Option<&str>, detail: bool) -> Option<(Vec<Entry>, usize)> {
    if !b.starts_with(BUNDLE_MAGIC) {
        return None;
    }
    let n = u64_at(b, 24)?;
    let mut cursor = 32usize;
    let mut entries = Vec::new();
    let mut end = 32usize;
    for _ in 0..n.min(4096) {
        let (Some(off), Some(size), Some(len)) = (u64_at(b, cursor), u64_at(b, cursor + 8), u64_at(b, cursor + 16))
        else {
            break;
        };
        cursor += 24;
        let Some(triple) = b.get(cursor..cursor.saturating_add(len as usize)) else { break };
        cursor += len as usize;
        let triple = String::from_utf8_lossy(triple).into_owned();
        let gfx = triple.rsplit("--").next().filter(|t| t.starts_with("gfx")).map(str::to_owned);
        end = end.max(off.saturating_add(size) as usize);
        if let Some(t) = target
            && gfx.as_deref().is_none_or(|g| !g.starts_with(t))
        {
            continue;
        }
        let kernels = b
            .get(off as usize..off.saturating_add(size) as usize)
            .filter(|_| gfx.is_some())
            .map(|co| kernels_of(co, detail))
            .unwrap_or_default();
        entries.push(Entry { triple, target: gfx, offset: file_offset.map(|f| f + off), size, kernels });
    }
    Some((entries, end.max(cursor)))
}

/// A compressed bundle (clang-offload-bundler's "CCOB"): magic, u16 version, u16 method (0 zlib, 1 zstd),
/// then by version: v1 u32 uncompressed size; v2 u32 total size, u32 uncompressed size; v3 u64 total
/// size, u64 uncompressed size; then a u64 hash and the compressed bytes. Gives the decompressed bundle
/// (or why not) and the bytes the compressed one takes.
#[expect(
    clippy::type_complexity,
    reason = "the decompressed bytes, or the method and why not, and the length either way"
)]
fn compressed_bundle(b: &[u8]) -> (Result<(&'static str, Vec<u8>), (Option<&'static str>, String)>, usize) {
    let version = u16_at(b, 4).unwrap_or(0);
    let method = match u16_at(b, 6) {
        Some(0) => Some("zlib"),
        Some(1) => Some("zstd"),
        _ => None,
    };
    let (total, uncompressed, header) = match version {
        1 => (None, u32_at(b, 8).map(u64::from), 20),
        2 => (u32_at(b, 8).map(u64::from), u32_at(b, 12).map(u64::from), 24),
        3 => (u64_at(b, 8), u64_at(b, 16), 32),
        v => {
            let next =
                b[4..].windows(BUNDLE_MAGIC.len()).position(|w| w == BUNDLE_MAGIC || w.starts_with(COMPRESSED_MAGIC));
            return (
                Err((method, format!("compressed bundle version {v} is not known"))),
                next.map_or(b.len(), |p| p + 4),
            );
        }
    };
    let Some(method) = method else {
        let len = total.map_or(b.len(), |t| t as usize);
        return (Err((None, format!("compression method {} is not known", u16_at(b, 6).unwrap_or(0)))), len);
    };
    let capacity = uncompressed.unwrap_or(0).min(1 << 32) as usize;
    let data = &b[header.min(b.len())..total.map_or(b.len(), |t| (t as usize).clamp(header, b.len()))];
    let decoded = if method == "zstd" {
        // v1 gives no total size: the frame says how long it is.
        let data = match total {
            Some(_) => data,
            None => &data[..zstd::zstd_safe::find_frame_compressed_size(data).unwrap_or(data.len()).min(data.len())],
        };
        let len = header + data.len();
        (zstd::bulk::decompress(data, capacity).map_err(|e| e.to_string()), len)
    } else {
        use std::io::Read as _;
        let mut z = flate2::read::ZlibDecoder::new(data);
        let mut inner = Vec::with_capacity(capacity);
        let r = z.read_to_end(&mut inner).map(|_| inner).map_err(|e| e.to_string());
        let len = header + z.total_in() as usize;
        (r, total.map_or(len, |t| t as usize))
    };
    let (result, len) = decoded;
    (result.map(|inner| (method, inner)).map_err(|e| (Some(method), format!("cannot decompress ({method}): {e}"))), len)
}

/// Which offload bundles of a file define each kernel name: what a trace records for a kernel whose host
/// stub lies in the file.
#[derive(Debug, Default)]
pub struct BundleIndex {
    by_name: HashMap<String, Vec<u32>>,
}

impl BundleIndex {
    /// The index of an ELF file's `.hip_fatbin`; None when it has none.
    pub fn of_elf(data: &[u8]) -> Option<Self> {
        let file = object::File::parse(data).ok()?;
        let section = file.section_by_name(".hip_fatbin")?;
        let mut index = Self::default();
        for (number, bundle) in walk(section.data().ok()?, 0, None, false).into_iter().enumerate() {
            for name in bundle.entries.into_iter().flat_map(|e| e.kernels).map(|k| k.name) {
                let numbers = index.by_name.entry(name).or_default();
                if numbers.last() != Some(&(number as u32)) {
                    numbers.push(number as u32);
                }
            }
        }
        Some(index)
    }

    /// The bundle numbers ("0042") that define `name`, in order.
    pub fn bundles_defining(&self, name: &str) -> Vec<String> {
        self.by_name.get(name).into_iter().flatten().map(|n| format!("{n:04}")).collect()
    }
}

/// Names of an AMDGPU code object's kernels: its `<name>.kd` kernel descriptor symbols.
fn kernel_names(elf: &object::File<'_>) -> Vec<String> {
    let mut names: Vec<String> = kernel_symbols(elf).into_iter().map(|(name, _)| name).collect();
    names.dedup();
    names
}

/// The kernels of an AMDGPU code object: its `NAME.kd` symbols (kernel descriptors), as (NAME, address
/// of the descriptor in the code object), sorted.
pub fn kernel_symbols(elf: &object::File<'_>) -> Vec<(String, u64)> {
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
fn kernels_of(code_object: &[u8], detail: bool) -> Vec<CodeKernel> {
    let Ok(elf) = object::File::parse(code_object) else { return Vec::new() };
    let names = kernel_names(&elf);
    let mut resources = if detail { metadata(code_object) } else { HashMap::new() };
    names.into_iter().map(|name| CodeKernel { resources: resources.remove(&name), name }).collect()
}

const NT_AMDGPU_METADATA: u32 = 32;

/// Kernel resources by name from the `NT_AMDGPU_METADATA` note (owner "AMDGPU", `MessagePack`; code objects
/// v3 and later), found with `object`'s note iterator.
fn metadata(code_object: &[u8]) -> HashMap<String, Resources> {
    use object::read::elf::{FileHeader as _, SectionHeader as _};
    let mut out = HashMap::new();
    let Ok(elf) = ElfFile64::<object::LittleEndian>::parse(code_object) else { return out };
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
