//! The name a handle has in the ELF file that maps it, for one process: its symbol, else its registration
//! call's ([`crate::record::names::elf_symbols`]).

use std::sync::Arc;

use crate::{
    record::names::{Of, elf_symbols::ElfSymbols},
    trace::Source,
};

impl Of<'_> {
    /// The name a handle has in the file that maps it (ELF symbol or registration call), without
    /// binding it.
    pub(crate) fn static_name(&mut self, addr: u64, ts: u64) -> Option<(String, Source)> {
        let m = self.mapping_at(addr, ts)?.clone();
        let syms = if let Some(s) = self.names.elf.get(&m.file) {
            s.clone()
        } else {
            let parsed = self.file(&m).and_then(|f| ElfSymbols::parse(&f)).map(Arc::new);
            self.names.elf.insert(m.file, parsed.clone());
            parsed
        }?;
        let registered = self.registered_in(&m);
        syms.name_at_file_offset(m.file_offset(addr), registered.as_deref().map(|r| &r.0))
            .map(|(n, s)| (n.to_owned(), s))
    }
}
