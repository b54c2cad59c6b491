//! `tracer inspect LIB`: what GPU code a library or program carries.
//!
//! From its `.hip_fatbin` section: each
//! clang offload bundle in order (numbered 0000, 0001, … as extraction tools number them), its entries
//! (target triple, gfx target, size, compression) and, per AMDGPU code object, its kernels (from the
//! `<name>.kd` kernel descriptor symbols), with their classification.

use std::{fs, path::Path};

use anyhow::{Context as _, Result, bail};
use object::{Object as _, ObjectSection as _};
use serde::Serialize;

use crate::bundle::{self, Bundle, Resources};

#[derive(Debug, Default, Serialize)]
pub struct Inspection {
    pub path: String,
    pub bundles: Vec<Bundle<KernelInfo>>,
}

/// A kernel of a code object as `inspect` presents it: named, classified, with its resources.
#[derive(Debug, Default, Serialize)]
pub struct KernelInfo {
    pub name: String,
    pub demangled: String,
    pub family: crate::classify::Family,
    pub quant: Option<String>,
    /// From the code object's AMDGPU metadata note, where present.
    pub resources: Option<Resources>,
    /// For ggml's `mul_mat_q` with a known parameter list: the byte offset of its column count in the
    /// argument segment, as tracer reads it from a queue dispatch's kernarg.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ne11_kernarg: Option<u32>,
}

/// The offload bundles of one `.hip_fatbin` section's bytes (or of a bundle file), kernels classified.
pub fn bundles(section: &[u8], file_offset: u64, target: Option<&str>) -> Vec<Bundle<KernelInfo>> {
    bundle::walk(section, file_offset, target, true)
        .into_iter()
        .map(|b| {
            b.map_kernels(|k| {
                let class = crate::classify::classify(&k.name);
                KernelInfo {
                    demangled: crate::demangle::demangle(&k.name),
                    family: class.family,
                    quant: class.quant.map(str::to_owned),
                    resources: k.resources,
                    ne11_kernarg: class.ne11_kernarg,
                    name: k.name,
                }
            })
        })
        .collect()
}

pub fn inspect(path: &Path, target: Option<&str>) -> Result<Inspection> {
    let data = fs::read(path)
        .with_context(|| format!("cannot read {}: give the path of a library or program", path.display()))?;
    // A bundle file of its own (`hipcc --genco`, an extracted `.hipfb`): the bundles start at byte 0.
    if bundle::is_bundle_file(&data) {
        return Ok(Inspection { path: path.display().to_string(), bundles: bundles(&data, 0, target) });
    }
    let file = object::File::parse(&*data).map_err(|e| {
        anyhow::anyhow!(
            "{} is neither an ELF file nor an offload bundle ({e}): give the path of a library or program built with HIP",
            path.display()
        )
    })?;
    let Some(section) = file.section_by_name(".hip_fatbin") else {
        bail!("{} has no .hip_fatbin section: it carries no HIP GPU code", path.display());
    };
    let offset = section.file_range().map_or(0, |(o, _)| o);
    Ok(Inspection { path: path.display().to_string(), bundles: bundles(section.data()?, offset, target) })
}

impl Inspection {
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        self.write_text(&mut s).expect("writing to a String cannot fail");
        s
    }

    fn write_text(&self, s: &mut String) -> std::fmt::Result {
        use std::fmt::Write as _;
        writeln!(s, "{}: {} offload bundle(s)", self.path, self.bundles.len())?;
        for b in &self.bundles {
            let how = match (&b.compressed, &b.error) {
                (_, Some(e)) => format!(" (not opened: {e})"),
                (Some(m), None) => format!(" ({m}-compressed)"),
                (None, None) => String::new(),
            };
            writeln!(s, "\nbundle {} at {:#x}{how}", b.number, b.offset)?;
            for e in &b.entries {
                writeln!(s, "  {} ({} bytes){}", e.triple, e.size, if e.kernels.is_empty() { "" } else { ":" })?;
                if !e.kernels.is_empty() {
                    writeln!(
                        s,
                        "    {:<22} {:>5} {:>5} {:>6} {:>7}  kernel",
                        "family", "sgpr", "vgpr", "lds", "scratch"
                    )?;
                }
                for k in &e.kernels {
                    let q = k.quant.as_deref().map(|q| format!(" {q}")).unwrap_or_default();
                    let r = k.resources.clone().unwrap_or_default();
                    let f = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
                    writeln!(
                        s,
                        "    {:<22} {:>5} {:>5} {:>6} {:>7}  {}",
                        format!("{}{q}", k.family.name()),
                        f(r.sgprs),
                        f(r.vgprs),
                        f(r.lds),
                        f(r.scratch),
                        k.demangled
                    )?;
                }
            }
        }
        Ok(())
    }
}
