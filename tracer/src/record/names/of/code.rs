//! Where a kernel's code lies, found for one process: a registered fat binary's bundle, a module's image or
//! file, the file and offload bundles of a kernel named from its file ([`crate::record::names::code`] holds
//! what is kept of it).

use crate::trace::counted::Counted;
use std::sync::Arc;

use crate::record::names::{
    Of,
    bundle::{FatBinary, Header, NameIndex},
    code::FatBinaryCode,
    maps::{Mapping, refusal},
};

impl Of<'_> {
    /// The fat binary of the file behind a mapping, indexed by its bundle headers once per file.
    fn fat_binary(&mut self, m: &Mapping) -> Option<Arc<FatBinary>> {
        if let Some(fat) = self.names.fat_binaries.get(&m.file) {
            return fat.clone();
        }
        let fat = match self.file(m).map(|f| FatBinary::of_file(&f)) {
            Some(Ok(fat)) => fat.map(Arc::new),
            Some(Err(e)) => {
                self.names.count(refusal(&e));
                self.names.warn(m.file, format!("{e}"));
                None
            }
            None => None,
        };
        self.names.fat_binaries.insert(m.file, fat.clone());
        fat
    }

    /// A fat binary registered by the process (`__hipRegisterFatBinary`): the bundle its wrapper points
    /// to is found in the file that maps it, and kept for the registrations that name its module.
    pub(crate) fn register_fat_binary(&mut self, module: u64, bundle_addr: u64, ts: u64) -> Option<FatBinaryCode> {
        let Some(m) = self.mapping_at(bundle_addr, ts).cloned() else {
            self.names.count(Counted::FatBinariesOutsideFiles);
            return None;
        };
        let offset = m.file_offset(bundle_addr);
        let fat = self.fat_binary(&m);
        let header = fat.as_ref().and_then(|fat| fat.bundle_at(offset));
        let bundle = header.map(Header::name);
        match header {
            None => self.names.count(Counted::FatBinariesWithoutBundle),
            Some(h) if h.error.is_some() => self.names.count(Counted::FatBinariesWithCorruptBundle),
            _ => {}
        }
        let problem = match (header, &fat) {
            (Some(h), _) => h.error.as_ref().map(|e| format!("{}: offload bundle {}: {e}", m.path, h.name())),
            (None, Some(fat)) => Some(format!(
                "{}: a fat binary registered at offset {offset} is in no offload bundle of its {} found{}",
                m.path,
                fat.bundles.len(),
                fat.cut.as_ref().map(|c| format!(" ({c})")).unwrap_or_default()
            )),
            (None, None) => None,
        };
        if let Some(p) = problem {
            self.names.warn(m.file, p);
        }
        let code = FatBinaryCode { file: m.path, offset, bundle };
        self.proc.modules.insert(module, code.clone());
        Some(code)
    }

    /// A module or library loaded from an image in memory (`cuModuleLoadData`, `cuLibraryLoadData`,
    /// `hipModuleLoadData`): the file mapping the image (a library's embedded fat binary: `libcublasLt`,
    /// `libtorch_cuda`), kept for the functions looked up in it. An image outside every file (decompressed
    /// or compiled at run time: cuBLASLt's compressed kernels, Triton, NVRTC) is placed in the file whose
    /// code loaded it (`caller`, the load's return address), with no offset, and counted.
    pub(crate) fn module_image(
        &mut self,
        module: u64,
        image: u64,
        caller: u64,
        ts: u64,
    ) -> Option<(String, Option<u64>)> {
        let (path, offset) = if let Some(m) = self.mapping_at(image, ts).cloned() {
            let offset = m.file_offset(image);
            (m.path, Some(offset))
        } else if let Some(m) = (caller != 0).then(|| self.mapping_at(caller, ts).cloned()).flatten() {
            self.names.count(Counted::ModuleImagesPlacedByLoader);
            (m.path, None)
        } else {
            let why = if self.proc.gone { Counted::ModuleImagesMapsGone } else { Counted::ModuleImagesOutsideFiles };
            self.names.count(why);
            return None;
        };
        self.proc
            .modules
            .insert(module, FatBinaryCode { file: path.clone(), offset: offset.unwrap_or(0), bundle: None });
        Some((path, offset))
    }

    /// A module loaded from a file by path (`hipModuleLoad`, `cuModuleLoad`): the functions looked up in
    /// it carry that file.
    pub(crate) fn module_file(&mut self, module: u64, file: &str) {
        self.proc.modules.insert(module, FatBinaryCode { file: file.to_owned(), offset: 0, bundle: None });
    }

    /// The file mapping `addr`, when it carries a fat binary (a host stub lies in its kernel's file).
    pub(in crate::record::names) fn code_file_at(&mut self, addr: u64, ts: u64) -> Option<String> {
        let m = self.mapping_at(addr, ts)?.clone();
        self.fat_binary(&m).map(|_| m.path)
    }

    /// The file mapping `addr` and the offload bundles of its fat binary that define `name` (the name
    /// index of the file, built the first time it is needed).
    pub(in crate::record::names) fn bundles_of(
        &mut self,
        addr: u64,
        name: &str,
        ts: u64,
    ) -> (Option<String>, Vec<String>) {
        let Some(m) = self.mapping_at(addr, ts).cloned() else { return (None, Vec::new()) };
        let Some(fat) = self.fat_binary(&m) else { return (None, Vec::new()) };
        let index = if let Some(i) = self.names.name_indexes.get(&m.file) {
            Arc::clone(i)
        } else {
            let index = match self.file(&m) {
                Some(f) => Arc::new(fat.name_index(&fat.region(&f))),
                None => Arc::new(NameIndex::default()),
            };
            for _ in 0..index.unreadable {
                self.names.count(Counted::BundlesUnreadable);
            }
            self.names.name_indexes.insert(m.file, Arc::clone(&index));
            index
        };
        (Some(m.path), index.bundles_defining(name))
    }
}
