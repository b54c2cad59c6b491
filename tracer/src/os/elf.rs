//! What tracer reads of an ELF file another process maps or names.
//!
//! Through the bounded view of [`crate::os::files`]: section ranges, dynamic dependencies, symbols, segments,
//! the build-id. Each reads the headers and tables it needs, never the file whole, and answers None (or
//! empty) for a file that is not ELF or whose tables are corrupt.

use std::collections::BTreeMap;

use object::{
    Object as _, ObjectSection as _, ObjectSegment as _, ObjectSymbol as _,
    elf::FileHeader64,
    read::elf::{Dyn as _, FileHeader as _, SectionHeader as _},
};

use crate::os::files::{Bounded, CodeFile};

/// `PT_LOAD` segments: (file offset, file size, virtual address).
pub(crate) type Segments = Vec<(u64, u64, u64)>;

/// The file range of the section `name` (one with contents in the file).
pub(crate) fn section_range(file: &CodeFile, name: &str) -> Option<(u64, u64)> {
    let view = file.elf();
    let header = FileHeader64::<object::Endianness>::parse(&view).ok()?;
    let endian = header.endian().ok()?;
    let sections = header.sections(endian, &view).ok()?;
    let (_, section) = sections.section_by_name(endian, name.as_bytes())?;
    section.file_range(endian)
}

/// What marks a file as GPU code or a user of a GPU runtime: the fat-binary sections it holds and the
/// libraries it needs (`DT_NEEDED`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Dependencies {
    /// Names of the GPU code sections present (`.hip_fatbin`, `.nv_fatbin`, ...).
    pub(crate) code_sections: Vec<&'static str>,
    pub(crate) needed: Vec<String>,
    /// `DT_RPATH` and `DT_RUNPATH`, split at `:` (unexpanded: `$ORIGIN` as written).
    pub(crate) rpath: Vec<String>,
    pub(crate) runpath: Vec<String>,
    /// A 64-bit x86 object (what an x86-64 process's loader takes).
    pub(crate) x86_64: bool,
}

/// Sections that hold GPU code: HIP's offload bundles, CUDA's fat binaries.
pub(crate) const CODE_SECTIONS: [&str; 4] = [".hip_fatbin", ".nv_fatbin", "__nv_relfatbin", ".nvFatBinSegment"];

/// The GPU code sections and `DT_NEEDED` entries of an ELF file; None for a file that is not ELF.
pub(crate) fn dependencies(file: &CodeFile) -> Option<Dependencies> {
    let view = file.elf();
    let header = FileHeader64::<object::Endianness>::parse(&view).ok()?;
    let endian = header.endian().ok()?;
    let sections = header.sections(endian, &view).ok()?;
    let mut out = Dependencies::default();
    for name in CODE_SECTIONS {
        if sections.section_by_name(endian, name.as_bytes()).is_some() {
            out.code_sections.push(name);
        }
    }
    out.x86_64 = header.e_machine(endian) == object::elf::EM_X86_64;
    if let Ok(Some((entries, link))) = sections.dynamic(endian, &view)
        && let Ok(strings) = sections.strings(endian, &view, link)
    {
        for d in entries.iter().take(4096) {
            let Some(tag) = d.tag32(endian) else { continue };
            let list = match tag {
                object::elf::DT_NEEDED => &mut out.needed,
                object::elf::DT_RPATH => &mut out.rpath,
                object::elf::DT_RUNPATH => &mut out.runpath,
                _ => continue,
            };
            if let Ok(at) = u32::try_from(d.d_val(endian))
                && let Ok(text) = strings.get(at)
            {
                let text = String::from_utf8_lossy(text);
                if tag == object::elf::DT_NEEDED {
                    list.push(text.into_owned());
                } else {
                    list.extend(text.split(':').filter(|p| !p.is_empty()).map(str::to_owned));
                }
            }
        }
    }
    Some(out)
}

/// The file offset of the last initializer the dynamic loader runs for a library in a process.
///
/// That is the last function of its `DT_INIT_ARRAY` (its contents as the file holds them: the static linker
/// writes the addresses its relative relocations carry), else its `DT_INIT`. A library's exported functions
/// are called from outside only once its initializers have run (the loader runs a library's before those of
/// the libraries that need it). None when it has neither, or an address lies in no loaded segment.
pub(crate) fn last_initializer_offset(file: &CodeFile) -> Option<u64> {
    use object::read::elf::ProgramHeader as _;
    let view = file.elf();
    let header = FileHeader64::<object::Endianness>::parse(&view).ok()?;
    let endian = header.endian().ok()?;
    let sections = header.sections(endian, &view).ok()?;
    let (entries, _) = sections.dynamic(endian, &view).ok()??;
    let tag = |want: u32| {
        entries.iter().take(4096).find(|d| d.tag32(endian) == Some(want)).map(|d| d.d_val(endian)).filter(|&v| v != 0)
    };
    let loads: Vec<(u64, u64, u64, bool)> = header
        .program_headers(endian, &view)
        .ok()?
        .iter()
        .filter(|p| p.p_type(endian) == object::elf::PT_LOAD)
        .map(|p| {
            (p.p_vaddr(endian), p.p_offset(endian), p.p_filesz(endian), p.p_flags(endian) & object::elf::PF_X != 0)
        })
        .collect();
    // (file offset, executable) of an address.
    let at = |addr: u64| {
        loads.iter().find_map(|&(vaddr, off, size, exec)| {
            let delta = addr.checked_sub(vaddr)?;
            (delta < size).then(|| off.checked_add(delta).map(|o| (o, exec))).flatten()
        })
    };
    let last_in_array =
        tag(object::elf::DT_INIT_ARRAY).zip(tag(object::elf::DT_INIT_ARRAYSZ)).and_then(|(arr, size)| {
            let last = arr.checked_add(size.checked_sub(8)?)?;
            let (off, _) = at(last)?;
            let func =
                object::ReadRef::read_at::<object::endian::U64<object::Endianness>>(&view, off).ok()?.get(endian);
            (func != 0 && func != u64::MAX).then_some(func)
        });
    let func = last_in_array.or_else(|| tag(object::elf::DT_INIT))?;
    let (off, exec) = at(func)?;
    exec.then_some(off)
}

/// The GNU build-id, as hex.
pub(crate) fn build_id(file: &CodeFile) -> Option<String> {
    let view = file.elf();
    let elf = object::read::elf::ElfFile64::<object::Endianness, _>::parse(&view).ok()?;
    let id = elf.build_id().ok()??;
    use std::fmt::Write as _;
    id.iter().try_fold(String::new(), |mut s, b| write!(s, "{b:02x}").map(|()| s)).ok()
}

/// An ELF file parsed through a bounded view (symbol tables read, sections on demand).
pub(crate) fn parse<'v, 'f>(view: &'v Bounded<'f>) -> Option<object::File<'v, &'v Bounded<'f>>> {
    object::File::parse(view).ok()
}

/// An ELF file's `PT_LOAD` segments.
pub(crate) fn segments<'d, R: object::ReadRef<'d>>(file: &object::File<'d, R>) -> Segments {
    file.segments()
        .map(|s| {
            let (off, size) = s.file_range();
            (off, size, s.address())
        })
        .collect()
}

/// Symbols of an ELF file by virtual address (the first name at each address), symbol table and dynamic
/// symbols both.
pub(crate) fn symbols_by_address<'d, R: object::ReadRef<'d>>(file: &object::File<'d, R>) -> BTreeMap<u64, String> {
    let mut by_addr = BTreeMap::new();
    for sym in file.symbols().chain(file.dynamic_symbols()) {
        if sym.address() == 0 || sym.is_undefined() {
            continue;
        }
        if let Ok(name) = sym.name() {
            by_addr.entry(sym.address()).or_insert_with(|| name.to_owned());
        }
    }
    by_addr
}

/// Data objects of at least `min_size` bytes whose name ends with `suffix`: (name, address, size), symbol
/// table and dynamic symbols both, each address once.
pub(crate) fn data_symbols<'d, R: object::ReadRef<'d>>(
    file: &object::File<'d, R>,
    suffix: &str,
    min_size: u64,
) -> Vec<(String, u64, u64)> {
    let mut seen = std::collections::HashSet::new();
    file.symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| !s.is_undefined() && s.kind() == object::SymbolKind::Data && s.size() >= min_size)
        .filter_map(|s| Some((s.name().ok()?, s.address(), s.size())))
        .filter(|(name, addr, _)| name.ends_with(suffix) && seen.insert(*addr))
        .map(|(name, addr, size)| (name.to_owned(), addr, size))
        .collect()
}

/// The address of the exported (dynamic) symbol `name` and the file's segments.
pub(crate) fn dynamic_symbol(file: &CodeFile, name: &str) -> Option<(u64, Segments)> {
    let view = file.elf();
    let elf = parse(&view)?;
    let addr = elf.dynamic_symbols().find(|s| s.name().is_ok_and(|n| n == name))?.address();
    Some((addr, segments(&elf)))
}

/// Function symbols of a library: name -> file offset of the first instruction (where a uprobe goes).
pub(crate) fn function_offsets(file: &CodeFile) -> Option<BTreeMap<String, u64>> {
    let view = file.elf();
    let elf = parse(&view)?;
    let mut out = BTreeMap::new();
    for sym in elf.dynamic_symbols().chain(elf.symbols()) {
        if sym.is_undefined() || sym.kind() != object::SymbolKind::Text {
            continue;
        }
        let (Ok(name), Some(index)) = (sym.name(), sym.section_index()) else { continue };
        let Ok(section) = elf.section_by_index(index) else { continue };
        let Some((sec_off, _)) = section.file_range() else { continue };
        let Some(off) = sym.address().checked_sub(section.address()).and_then(|d| d.checked_add(sec_off)) else {
            continue;
        };
        out.entry(name.to_owned()).or_insert(off);
    }
    Some(out)
}

/// A library's exported C functions, where a uprobe goes: what tracer counts calls of.
#[derive(Debug, Default)]
pub(crate) struct EntryPoints {
    /// (name, file offset of the first instruction), one per address (an alias is left under the first
    /// name in symbol order), by offset.
    pub(crate) functions: Vec<(String, u64)>,
    /// Exported functions left out: C++ symbols (`_Z...`) and reserved names (`_init`, `__*`), and aliases.
    pub(crate) left_out: u32,
}

/// The exported (dynamic, defined, global) C functions of a library.
pub(crate) fn entry_points(file: &CodeFile) -> Option<EntryPoints> {
    let view = file.elf();
    let elf = parse(&view)?;
    let mut by_offset: BTreeMap<u64, String> = BTreeMap::new();
    let mut left_out = 0u32;
    for sym in elf.dynamic_symbols() {
        if sym.is_undefined() || sym.kind() != object::SymbolKind::Text || !sym.is_global() {
            continue;
        }
        let (Ok(name), Some(index)) = (sym.name(), sym.section_index()) else { continue };
        if name.starts_with('_') || name.is_empty() {
            left_out = left_out.saturating_add(1);
            continue;
        }
        let Ok(section) = elf.section_by_index(index) else { continue };
        let Some((sec_off, _)) = section.file_range() else { continue };
        let Some(off) = sym.address().checked_sub(section.address()).and_then(|d| d.checked_add(sec_off)) else {
            continue;
        };
        match by_offset.entry(off) {
            std::collections::btree_map::Entry::Occupied(_) => left_out = left_out.saturating_add(1),
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(name.to_owned());
            }
        }
    }
    Some(EntryPoints { functions: by_offset.into_iter().map(|(off, name)| (name, off)).collect(), left_out })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_points_of_libc_are_its_exported_c_functions() {
        let Ok(f) = CodeFile::user(std::path::Path::new("/lib/x86_64-linux-gnu/libc.so.6")) else { return };
        let e = entry_points(&f).unwrap();
        assert!(e.functions.iter().any(|(n, _)| n == "malloc"), "{} functions", e.functions.len());
        assert!(e.functions.iter().all(|(n, _)| !n.starts_with('_')));
        // One probe per address: aliases (`free` / `cfree`, versioned names) are left out, and counted.
        let mut offsets: Vec<u64> = e.functions.iter().map(|(_, o)| *o).collect();
        offsets.dedup();
        assert_eq!(offsets.len(), e.functions.len());
        assert!(e.left_out > 0);
    }

    #[test]
    fn reads_this_test_binary() {
        let f = CodeFile::user(&std::env::current_exe().unwrap()).unwrap();
        let (off, len) = section_range(&f, ".text").unwrap();
        assert!(off > 0 && len > 0 && off + len <= f.len());
        let deps = dependencies(&f).unwrap();
        assert!(deps.code_sections.is_empty());
        assert!(deps.needed.iter().any(|n| n.starts_with("libc.so")), "{deps:?}");
        assert!(function_offsets(&f).unwrap().contains_key("main"));
        let view = f.elf();
        let elf = parse(&view).unwrap();
        assert!(!segments(&elf).is_empty());
        assert!(symbols_by_address(&elf).values().any(|n| n == "main"));
        // Its last initializer is code of its own, inside the file (a Rust test binary has an init array).
        let init = last_initializer_offset(&f).expect("an initializer");
        let (text, text_len) = section_range(&f, ".text").unwrap();
        let (init_sec, init_len) = section_range(&f, ".init").unwrap_or((text, text_len));
        assert!(
            (text..text + text_len).contains(&init) || (init_sec..init_sec + init_len).contains(&init),
            "{init:#x}"
        );
        // Not ELF at all: nothing, no error.
        let dir = std::env::temp_dir().join(format!("tracer-elf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("x"), b"\x7fELF but not really").unwrap();
        let junk = CodeFile::user(&dir.join("x")).unwrap();
        assert_eq!(dependencies(&junk), None);
        assert_eq!(section_range(&junk, ".text"), None);
        drop(std::fs::remove_dir_all(&dir));
    }
}
