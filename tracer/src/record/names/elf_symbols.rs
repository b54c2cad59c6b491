//! Names from the ELF file that maps a handle: on a late attach, the handle `__hipRegisterFunction`
//! received is an 8-byte host object whose symbol is the mangled kernel name (unstripped files), and a
//! stripped file's registration calls still carry the name ([`super::registration`], decoded on the finders'
//! thread: [`super::finder`]). The name a handle has in its file, for one process: `of/elf_symbols.rs`.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
};

use crate::{
    os::{elf::Segments, files::CodeFile},
    trace::Source,
};

/// Symbols of one ELF file by virtual address, and how file offsets map to addresses.
#[derive(Debug, Default)]
pub(super) struct ElfSymbols {
    by_addr: BTreeMap<u64, String>,
    segments: Segments,
}

/// The kernel handles a file's registration calls name (for a stripped file), and why its code was not read
/// in full (None: it was).
pub(super) type Registered = (HashMap<u64, String>, Option<&'static str>);

impl ElfSymbols {
    pub(super) fn parse(file: &CodeFile) -> Option<Self> {
        let view = file.elf();
        let elf = crate::os::elf::parse(&view)?;
        Some(Self { by_addr: crate::os::elf::symbols_by_address(&elf), segments: crate::os::elf::segments(&elf) })
    }

    /// The names a file's registration calls give, within a file's budget (run on the finders' thread).
    pub(super) fn registered(file: &CodeFile) -> Arc<Registered> {
        let found = super::registration::decode(file);
        Arc::new(found.map(|r| (r.by_handle, r.cut)).unwrap_or_default())
    }

    /// The name at a file offset: its symbol, else the kernel name its registration call gives (`registered`,
    /// when read).
    pub(super) fn name_at_file_offset<'a>(
        &'a self,
        off: u64,
        registered: Option<&'a HashMap<u64, String>>,
    ) -> Option<(&'a str, Source)> {
        let vaddr = self
            .segments
            .iter()
            .find(|(o, size, _)| off >= *o && off - o < *size)
            .map(|(o, _, vaddr)| (off - o).wrapping_add(*vaddr))?;
        // The registered name is the device's: where the host symbol spells it otherwise (nvcc's `_ZL`
        // host stubs of static kernels, its renamed internal entities), the registration wins.
        match (self.by_addr.get(&vaddr), registered.and_then(|r| r.get(&vaddr))) {
            (Some(symbol), Some(registered)) if symbol != registered => Some((registered, Source::RegisterCall)),
            (Some(symbol), _) => Some((symbol, Source::Elf)),
            (None, Some(registered)) => Some((registered, Source::RegisterCall)),
            (None, None) => None,
        }
    }
}
