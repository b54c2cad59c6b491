//! `tracer inspect LIB`: what GPU code a library or program carries in its `.hip_fatbin` section — each
//! clang offload bundle in order (numbered 0000, 0001, … as extraction tools number them), its entries
//! (target triple, gfx target, size, compression) and, per AMDGPU code object, its kernels (from the
//! `<name>.kd` kernel descriptor symbols), with their classification.

use std::{fs, path::Path};

use anyhow::{Context, Result, bail};
use object::{Object, ObjectSection, ObjectSymbol};
use serde::Serialize;

const BUNDLE_MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";
const COMPRESSED_MAGIC: &[u8] = b"CCOB";

#[derive(Debug, Default, Serialize)]
pub struct Inspection {
    pub path: String,
    pub bundles: Vec<Bundle>,
}

#[derive(Debug, Default, Serialize)]
pub struct Bundle {
    /// "0000", "0001", …
    pub number: String,
    /// Offset of the bundle in the file.
    pub offset: u64,
    /// A compressed bundle ("CCOB") is listed but not opened.
    pub compressed: bool,
    pub entries: Vec<Entry>,
}

#[derive(Debug, Default, Serialize)]
pub struct Entry {
    pub triple: String,
    /// The gfx target of an AMDGPU entry (`gfx1030`, `gfx90a:xnack-`).
    pub target: Option<String>,
    pub size: u64,
    pub kernels: Vec<KernelInfo>,
}

#[derive(Debug, Default, Serialize)]
pub struct KernelInfo {
    pub name: String,
    pub demangled: String,
    pub family: String,
    pub quant: Option<String>,
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at + 8).map(|s| u64::from_le_bytes(s.try_into().expect("8 bytes")))
}

/// Reads the offload bundles of one `.hip_fatbin` section's bytes.
pub fn bundles(section: &[u8], file_offset: u64, target: Option<&str>) -> Vec<Bundle> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 4 <= section.len() {
        let rest = &section[at..];
        if rest.starts_with(COMPRESSED_MAGIC) {
            out.push(Bundle {
                number: format!("{:04}", out.len()),
                offset: file_offset + at as u64,
                compressed: true,
                entries: Vec::new(),
            });
            at += 4096; // compressed bundles are page-aligned too; find the next magic from there
            match section[at.min(section.len())..]
                .windows(BUNDLE_MAGIC.len())
                .position(|w| w == BUNDLE_MAGIC || w.starts_with(COMPRESSED_MAGIC))
            {
                Some(p) => at += p,
                None => break,
            }
            continue;
        }
        if !rest.starts_with(BUNDLE_MAGIC) {
            match rest.windows(BUNDLE_MAGIC.len()).position(|w| w == BUNDLE_MAGIC) {
                Some(p) => {
                    at += p;
                    continue;
                }
                None => break,
            }
        }
        let Some(n) = u64_at(rest, 24) else { break };
        let mut cursor = 32usize;
        let mut entries = Vec::new();
        let mut end = 32usize;
        for _ in 0..n.min(4096) {
            let (Some(off), Some(size), Some(len)) =
                (u64_at(rest, cursor), u64_at(rest, cursor + 8), u64_at(rest, cursor + 16))
            else {
                break;
            };
            cursor += 24;
            let Some(triple) = rest.get(cursor..cursor + len as usize) else { break };
            cursor += len as usize;
            let triple = String::from_utf8_lossy(triple).into_owned();
            let gfx = triple.rsplit("--").next().filter(|t| t.starts_with("gfx")).map(str::to_owned);
            end = end.max((off + size) as usize);
            if let Some(t) = target
                && gfx.as_deref().is_none_or(|g| !g.starts_with(t))
            {
                continue;
            }
            let kernels = rest
                .get(off as usize..(off + size) as usize)
                .filter(|_| gfx.is_some())
                .map(kernels_of)
                .unwrap_or_default();
            entries.push(Entry { triple, target: gfx, size, kernels });
        }
        out.push(Bundle {
            number: format!("{:04}", out.len()),
            offset: file_offset + at as u64,
            compressed: false,
            entries,
        });
        at += end.max(cursor).max(BUNDLE_MAGIC.len());
    }
    out
}

/// Kernels of an AMDGPU code object: its `<name>.kd` kernel descriptors.
fn kernels_of(code_object: &[u8]) -> Vec<KernelInfo> {
    let Ok(elf) = object::File::parse(code_object) else { return Vec::new() };
    let mut names: Vec<String> = elf
        .symbols()
        .chain(elf.dynamic_symbols())
        .filter_map(|s| s.name().ok().and_then(|n| n.strip_suffix(".kd")).map(str::to_owned))
        .collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|name| {
            let class = crate::classify::classify(&name);
            KernelInfo {
                demangled: crate::symbols::demangle(&name),
                family: class.family.name().to_owned(),
                quant: class.quant.map(str::to_owned),
                name,
            }
        })
        .collect()
}

pub fn inspect(path: &Path, target: Option<&str>) -> Result<Inspection> {
    let data = fs::read(path)
        .with_context(|| format!("cannot read {}: give the path of a library or program", path.display()))?;
    let file = object::File::parse(&*data).map_err(|_| {
        anyhow::anyhow!("{} is not an ELF file: give the path of a library or program built with HIP", path.display())
    })?;
    let Some(section) = file.section_by_name(".hip_fatbin") else {
        bail!("{} has no .hip_fatbin section: it carries no HIP GPU code", path.display());
    };
    let offset = section.file_range().map_or(0, |(o, _)| o);
    Ok(Inspection { path: path.display().to_string(), bundles: bundles(section.data()?, offset, target) })
}

impl Inspection {
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut s = format!("{}: {} offload bundle(s) in .hip_fatbin\n", self.path, self.bundles.len());
        for b in &self.bundles {
            let _ = writeln!(
                s,
                "\nbundle {} at {:#x}{}",
                b.number,
                b.offset,
                if b.compressed { " (compressed, not opened)" } else { "" }
            );
            for e in &b.entries {
                let _ = writeln!(s, "  {} ({} bytes){}", e.triple, e.size, if e.kernels.is_empty() { "" } else { ":" });
                for k in &e.kernels {
                    let q = k.quant.as_deref().map(|q| format!(" {q}")).unwrap_or_default();
                    let _ = writeln!(s, "    {:<22} {}", format!("{}{q}", k.family), k.demangled);
                }
            }
        }
        s
    }
}
