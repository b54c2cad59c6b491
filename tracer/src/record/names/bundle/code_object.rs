//! The kernels of one AMDGPU code object: its `NAME.kd` descriptors, and the resources the compiler recorded
//! in its metadata note. A leaf below the walk and the opening of bundles.

use std::collections::HashMap;

use object::{Object as _, ObjectSymbol as _, ReadRef};
use serde::Serialize;

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
