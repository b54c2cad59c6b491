//! `tracer inspect LIB`: what GPU code a library or program carries.
//!
//! From its `.hip_fatbin` section: each
//! clang offload bundle in order (numbered 0000, 0001, … as extraction tools number them), its entries
//! (target triple, gfx target, size, compression) and, per AMDGPU code object, its kernels (from the
//! `<name>.kd` kernel descriptor symbols), with their classification. From a ggml Vulkan backend: its SPIR-V
//! shaders as a recording names them (by symbol, or from its code in a stripped copy), and where ggml's
//! pipeline maker is, at which a recording reads each pipeline's own name.

use std::path::Path;

use anyhow::{Result, anyhow, bail};
use serde::Serialize;

use crate::{
    os::files::CodeFile,
    record::names::bundle::{self, Bundle, FatBinary, Resources},
};

#[derive(Debug, Default, Serialize)]
pub(crate) struct Inspection {
    pub(crate) path: String,
    pub(crate) bundles: Vec<Bundle<KernelInfo>>,
    /// Why the bundles listed stop before the end of the fat binary, when they do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cut: Option<String>,
    /// A ggml Vulkan backend's shaders, for a file with SPIR-V arrays and no fat binary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) vulkan: Option<VulkanShaders>,
}

/// A ggml Vulkan backend's shaders, as `inspect` presents them.
#[derive(Debug, Default, Serialize)]
pub(crate) struct VulkanShaders {
    /// Where the shaders' names come from: `symbols` (the `NAME_data` arrays) or `code` (the calls in a
    /// stripped copy's code that create pipelines from them, several names joined by `|`).
    pub(crate) names_from: &'static str,
    /// The file offset of `ggml_vk_create_pipeline_func`, where a recording reads each pipeline's own name.
    pub(crate) pipeline_maker: Option<u64>,
    /// Why it was not found, when it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) pipeline_maker_missing: Option<&'static str>,
    pub(crate) shaders: Vec<ShaderInfo>,
    /// Arrays left out (past the index's cap, or unreadable).
    pub(crate) left_out: u64,
}

/// One SPIR-V shader: its name, size in bytes and classification.
#[derive(Debug, Default, Serialize)]
pub(crate) struct ShaderInfo {
    pub(crate) name: String,
    pub(crate) size: u64,
    pub(crate) family: crate::trace::classify::Family,
    pub(crate) quant: Option<String>,
}

/// The SPIR-V shaders of a ggml file and its pipeline maker; None when it has no shader.
fn vulkan_shaders(file: &CodeFile) -> Option<VulkanShaders> {
    let index = crate::record::names::spirv::ShaderIndex::parse(file)?;
    let (listed, from_code) = index.listing();
    if listed.is_empty() {
        return None;
    }
    let shaders = listed
        .into_iter()
        .map(|(name, size)| {
            // A module several pipelines are made from is classified by its first name.
            let class = crate::trace::classify::classify(name.split('|').next().unwrap_or(name));
            ShaderInfo { name: name.to_owned(), size, family: class.family, quant: class.quant.map(str::to_owned) }
        })
        .collect();
    let maker = crate::record::probes::ggml_vulkan::pipeline_maker(file);
    Some(VulkanShaders {
        names_from: if from_code { "code" } else { "symbols" },
        pipeline_maker: maker.ok(),
        pipeline_maker_missing: maker.err(),
        shaders,
        left_out: index.left_out(),
    })
}

/// A kernel of a code object as `inspect` presents it: named, classified, with its resources.
#[derive(Debug, Default, Serialize)]
pub(crate) struct KernelInfo {
    pub(crate) name: String,
    pub(crate) demangled: String,
    pub(crate) family: crate::trace::classify::Family,
    pub(crate) quant: Option<String>,
    /// From the code object's AMDGPU metadata note, where present.
    pub(crate) resources: Option<Resources>,
    /// For ggml's `mul_mat_q` with a known parameter list: the byte offset of its column count in the
    /// argument segment, as tracer reads it from a queue dispatch's kernarg.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ne11_kernarg: Option<u32>,
}

/// A bundle's kernels classified, as `inspect` shows them.
pub(crate) fn classified(b: Bundle) -> Bundle<KernelInfo> {
    b.map_kernels(|k| {
        let class = crate::trace::classify::classify(&k.name);
        KernelInfo {
            demangled: crate::os::demangle::demangle(&k.name),
            family: class.family,
            quant: class.quant.map(str::to_owned),
            resources: k.resources,
            ne11_kernarg: class.ne11_kernarg,
            name: k.name,
        }
    })
}

/// Reads a library's (or a bundle file's) offload bundles with the reader tracer uses on other processes'
/// files.
///
/// The file must be a regular file; its bundles are indexed by their headers and opened one at a time, so
/// a 1 GB fat binary never means 1 GB of memory.
pub(crate) fn inspect(path: &Path, target: Option<&str>) -> Result<Inspection> {
    let file = CodeFile::user(path).map_err(|e| anyhow!("{e}: give the path of a library or program"))?;
    let Some(fat) = FatBinary::of_file(&file)? else {
        if crate::os::elf::dependencies(&file).is_none() {
            bail!(
                "{} is neither an ELF file nor an offload bundle: give the path of a library or program built with HIP",
                path.display()
            );
        }
        if let Some(vulkan) = vulkan_shaders(&file) {
            return Ok(Inspection { path: path.display().to_string(), vulkan: Some(vulkan), ..Inspection::default() });
        }
        bail!(
            "{} has no .hip_fatbin section and no SPIR-V shaders: it carries no GPU code tracer reads",
            path.display()
        );
    };
    let bundles = bundle::open_all(&fat.region(&file), &fat, target).into_iter().map(classified).collect();
    Ok(Inspection { path: path.display().to_string(), bundles, cut: fat.cut, vulkan: None })
}

impl Inspection {
    pub(crate) fn to_text(&self) -> String {
        let mut s = String::new();
        self.write_text(&mut s).expect("writing to a String cannot fail");
        s
    }

    fn write_text(&self, s: &mut String) -> std::fmt::Result {
        use std::fmt::Write as _;
        if let Some(v) = &self.vulkan {
            let from = if v.names_from == "code" { "named from its code (no symbol table)" } else { "named by symbol" };
            writeln!(s, "{}: {} SPIR-V shaders, {from}", self.path, v.shaders.len())?;
            if v.left_out > 0 {
                writeln!(s, "({} arrays left out: past the index's cap, or unreadable)", v.left_out)?;
            }
            match (v.pipeline_maker, v.pipeline_maker_missing) {
                (Some(at), _) => writeln!(
                    s,
                    "ggml_vk_create_pipeline_func at file offset {at:#x}: a recording reads each pipeline's own name there"
                )?,
                (None, why) => writeln!(s, "ggml_vk_create_pipeline_func not found: {}", why.unwrap_or("-"))?,
            }
            writeln!(s, "\n  {:<24} {:>8}  shader", "family", "bytes")?;
            for sh in &v.shaders {
                let q = sh.quant.as_deref().map(|q| format!(" {q}")).unwrap_or_default();
                writeln!(s, "  {:<24} {:>8}  {}", format!("{}{q}", sh.family.name()), sh.size, sh.name)?;
            }
            return Ok(());
        }
        writeln!(s, "{}: {} offload bundle(s)", self.path, self.bundles.len())?;
        if let Some(cut) = &self.cut {
            writeln!(s, "(listing cut: {cut})")?;
        }
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
