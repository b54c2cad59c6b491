//! The kernel table: which name each launch handle stands for, per process.
//!
//! Sources, in order of trust: names seen live (`__hipRegisterFunction`, `hipModuleGetFunction`), then
//! the ELF symbol table of the file that maps the handle (a late attach to an unstripped program: the
//! handle `__hipRegisterFunction` receives is an 8-byte object whose symbol is the mangled kernel name),
//! then "unnamed" with the raw handle. Never a guess.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::Arc,
};

use crate::{
    bundle::{FatBinary, NameIndex},
    elf::Segments,
    files::{CodeFile, Root},
    trace,
};

pub use crate::demangle::demangle;
pub use crate::trace::Source;

/// Symbols of one ELF file by virtual address, the kernel handles its registration calls name (for a
/// stripped file), and how file offsets map to addresses.
#[derive(Debug, Default)]
struct ElfSymbols {
    by_addr: BTreeMap<u64, String>,
    registered: HashMap<u64, String>,
    segments: Segments,
}

impl ElfSymbols {
    fn parse(file: &CodeFile) -> Option<Self> {
        let (by_addr, segments) = {
            let view = file.elf();
            let elf = crate::elf::parse(&view)?;
            (crate::elf::symbols_by_address(&elf), crate::elf::segments(&elf))
        };
        let registered = crate::registration::decode(file).map(|r| r.by_handle).unwrap_or_default();
        Some(Self { by_addr, registered, segments })
    }

    /// The name at a file offset: its symbol, else the kernel name its registration call gives.
    fn name_at_file_offset(&self, off: u64) -> Option<(&str, Source)> {
        let vaddr = self
            .segments
            .iter()
            .find(|(o, size, _)| off >= *o && off - o < *size)
            .map(|(o, _, vaddr)| (off - o).wrapping_add(*vaddr))?;
        // The registered name is the device's: where the host symbol spells it otherwise (nvcc's `_ZL`
        // host stubs of static kernels, its renamed internal entities), the registration wins.
        match (self.by_addr.get(&vaddr), self.registered.get(&vaddr)) {
            (Some(symbol), Some(registered)) if symbol != registered => Some((registered, Source::RegisterCall)),
            (Some(symbol), _) => Some((symbol, Source::Elf)),
            (None, Some(registered)) => Some((registered, Source::RegisterCall)),
            (None, None) => None,
        }
    }
}

/// A kernel of a loaded code object: its name and the file the code object came from.
type LoadedKernel = (Arc<str>, Option<Arc<str>>);

/// The `NAME.kd` symbols of a code object: (NAME, `st_value`).
type KernelSymbols = Vec<(String, u64)>;

/// Where a registered fat binary's code lies: the file as the process sees it, the bundle's offset in it
/// and its number ("0042"), when the file's fat binary holds one there.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FatBinaryCode {
    pub file: String,
    pub offset: u64,
    pub bundle: Option<String>,
}

/// One process's view of a kernel handle.
#[derive(Clone, Debug)]
pub struct Entry {
    pub id: u32,
    pub source: Source,
    /// The kernel parameters its launches need read ([`crate::classify::Class::param_plan`]).
    pub param_plan: u32,
    /// For a kernel object: the words of a dispatch's argument segment it needs read
    /// ([`crate::classify::Class::kernarg_plan`]).
    pub kernarg_plan: u32,
    /// Whether the plan was handed to the eBPF side since the handle was bound.
    pub plan_sent: bool,
}

#[derive(Default)]
pub struct KernelTable {
    by_handle: HashMap<(u32, u64), Entry>,
    next_id: u32,
    elf_cache: HashMap<(u64, u64), Option<Arc<ElfSymbols>>>,
    maps: HashMap<u32, Snapshot>,
    /// Processes whose maps could not be read any more (ended): their last snapshot stands.
    gone: HashSet<u32>,
    /// Mapped files opened when a process was first looked at (through its `map_files`, checked to be
    /// the regular file mapped), by (device, inode): they can still be read after the process exits, or
    /// from another mount namespace.
    files: HashMap<(u64, u64), Option<Arc<CodeFile>>>,
    /// The offload bundles of each file with a fat binary, indexed by their headers, one index per file
    /// for every process.
    fat_binaries: HashMap<(u64, u64), Option<Arc<FatBinary>>>,
    /// Kernel name -> bundles, per file, for kernels named from the file rather than registered (late
    /// attach): built once, the first time one is needed.
    name_indexes: HashMap<(u64, u64), Arc<NameIndex>>,
    /// Fat binaries registered, per (process, module handle): where their code lies.
    modules: HashMap<(u32, u64), FatBinaryCode>,
    /// Kernel objects named by `ROCr`'s loaded code-object list, per process: object -> (name, file the
    /// code object came from). Read again whenever a dispatch names an object not in it.
    loaded: HashMap<u32, HashMap<u64, LoadedKernel>>,
    /// `NAME.kd` symbols of each code object read, by URI (prefixed with the pid where the URI means
    /// something only in that process); None when it could not be read.
    code_objects: HashMap<String, Option<Arc<KernelSymbols>>>,
    /// Per libhsa-runtime64 file: the address of `_amdgpu_r_debug` and the `PT_LOAD` segments.
    r_debug_files: HashMap<(u64, u64), Option<(u64, Segments)>>,
    /// Addresses found in no file mapping of their process when its maps were read again for them.
    outside_files: HashSet<(u32, u64)>,
    /// Counts for the footer: launches whose handle had no name anywhere.
    pub unnamed: u64,
    /// Counts for the footer: the loader list (lists or code objects that could not be read, lists cut
    /// short), files not read and why, fat binaries registered from no file.
    pub counts: BTreeMap<&'static str, u64>,
    /// What could not be read in a file a process registered code from, one sentence each (once per file
    /// and cause), for the session to tell its user.
    pub warnings: Vec<String>,
    /// Files already warned about.
    warned: HashSet<(u64, u64)>,
}

impl KernelTable {
    /// Binds a name seen live. Returns the kernel record to write.
    #[expect(clippy::too_many_arguments, reason = "a kernel record's fields, each from a different source")]
    pub fn bind(
        &mut self,
        pid: u32,
        handle: u64,
        module: u64,
        name: &str,
        source: Source,
        truncated: bool,
        ts: u64,
    ) -> trace::Kernel {
        let id = self.next_id();
        let demangled = demangle(name);
        let (param_plan, kernarg_plan) = if name.is_empty() {
            (0, 0)
        } else {
            let class = crate::classify::classify_demangled(name, &demangled);
            (class.param_plan(), class.kernarg_plan())
        };
        self.by_handle.insert((pid, handle), Entry { id, source, param_plan, kernarg_plan, plan_sent: false });
        let (code_file, bundles) = match source {
            _ if name.is_empty() => (None, Vec::new()),
            // A registration names its module: the fat binary registered under it holds the code.
            Source::Register => match self.modules.get(&(pid, module)) {
                Some(code) => (Some(code.file.clone()), code.bundle.iter().cloned().collect()),
                None => (self.code_file_at(pid, handle, ts), Vec::new()),
            },
            // A host stub named from its file lies in the file that carries the kernel's code.
            Source::Elf | Source::RegisterCall => self.bundles_of(pid, handle, name, ts),
            _ => (None, Vec::new()),
        };
        trace::Kernel {
            id,
            pid,
            handle,
            module,
            name: name.to_owned(),
            demangled,
            source,
            truncated,
            ts,
            code_file,
            bundles,
            caller: None,
        }
    }

    /// One sentence for the user about a file, the first time something is wrong with it.
    fn warn(&mut self, file: (u64, u64), sentence: String) {
        if self.warned.insert(file) {
            self.warnings.push(sentence);
        }
    }

    fn count(&mut self, what: &'static str) {
        *self.counts.entry(what).or_default() += 1;
    }

    /// The file behind a mapping, as opened when its process was looked at.
    fn file(&self, m: &Mapping) -> Option<Arc<CodeFile>> {
        self.files.get(&m.file).cloned().flatten()
    }

    /// The fat binary of the file behind a mapping, indexed by its bundle headers once per file.
    fn fat_binary(&mut self, m: &Mapping) -> Option<Arc<FatBinary>> {
        if let Some(fat) = self.fat_binaries.get(&m.file) {
            return fat.clone();
        }
        let fat = match self.file(m).map(|f| FatBinary::of_file(&f)) {
            Some(Ok(fat)) => fat.map(Arc::new),
            Some(Err(e)) => {
                self.count(refusal(&e));
                self.warn(m.file, format!("{e}"));
                None
            }
            None => None,
        };
        self.fat_binaries.insert(m.file, fat.clone());
        fat
    }

    /// A fat binary registered by a process (`__hipRegisterFatBinary`): the bundle its wrapper points to
    /// is found in the file that maps it, and kept for the registrations that name its module.
    pub fn register_fat_binary(&mut self, pid: u32, module: u64, bundle_addr: u64, ts: u64) -> Option<FatBinaryCode> {
        let Some(m) = self.mapping_at(pid, bundle_addr, ts).cloned() else {
            self.count("fat_binaries_outside_files");
            return None;
        };
        let offset = bundle_addr - m.start + m.offset;
        let fat = self.fat_binary(&m);
        let header = fat.as_ref().and_then(|fat| fat.bundle_at(offset));
        let bundle = header.map(crate::bundle::Header::name);
        match (header, &fat) {
            (None, _) => self.count("fat_binaries_without_bundle"),
            (Some(h), _) if h.error.is_some() => self.count("fat_binaries_with_corrupt_bundle"),
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
            self.warn(m.file, p);
        }
        let code = FatBinaryCode { file: m.path, offset, bundle };
        self.modules.insert((pid, module), code.clone());
        Some(code)
    }

    /// The file mapping `addr`, when it carries a fat binary (a host stub lies in its kernel's file).
    fn code_file_at(&mut self, pid: u32, addr: u64, ts: u64) -> Option<String> {
        let m = self.mapping_at(pid, addr, ts)?.clone();
        self.fat_binary(&m).map(|_| m.path)
    }

    /// The file mapping `addr` and the offload bundles of its fat binary that define `name` (the name
    /// index of the file, built the first time it is needed).
    fn bundles_of(&mut self, pid: u32, addr: u64, name: &str, ts: u64) -> (Option<String>, Vec<String>) {
        let Some(m) = self.mapping_at(pid, addr, ts).cloned() else { return (None, Vec::new()) };
        let Some(fat) = self.fat_binary(&m) else { return (None, Vec::new()) };
        let index = if let Some(i) = self.name_indexes.get(&m.file) {
            Arc::clone(i)
        } else {
            let index = match self.file(&m) {
                Some(f) => Arc::new(fat.name_index(&fat.region(&f))),
                None => Arc::new(NameIndex::default()),
            };
            for _ in 0..index.unreadable {
                self.count("bundles_unreadable");
            }
            self.name_indexes.insert(m.file, Arc::clone(&index));
            index
        };
        (Some(m.path), index.bundles_defining(name))
    }

    /// The kernel id for a launch handle, naming it from the ELF file that maps it when no live name was
    /// seen. Returns the id and, when the handle is new, the kernel record to write first.
    pub fn resolve(&mut self, pid: u32, handle: u64, ts: u64) -> (u32, Option<trace::Kernel>) {
        if let Some(e) = self.by_handle.get(&(pid, handle)) {
            return (e.id, None);
        }
        let (name, source) = if let Some(named) = self.static_name(pid, handle, ts) {
            named
        } else {
            self.unnamed += 1;
            (String::new(), Source::Unnamed)
        };
        let rec = self.bind(pid, handle, 0, &name, source, false, ts);
        (rec.id, Some(rec))
    }

    /// The kernel parameters a launch of this handle needs read (0 for an unknown handle), and whether this
    /// is the first time it is asked since the handle was bound (the eBPF side is then to be told).
    pub fn param_plan(&mut self, pid: u32, handle: u64) -> (u32, bool) {
        match self.by_handle.get_mut(&(pid, handle)) {
            Some(e) => (e.param_plan, !std::mem::replace(&mut e.plan_sent, true)),
            None => (0, false),
        }
    }

    /// The same for a kernel object's queue dispatches: which words of the argument segment to read.
    pub fn kernarg_plan(&mut self, pid: u32, kernel_object: u64) -> (u32, bool) {
        match self.by_handle.get_mut(&(pid, kernel_object)) {
            Some(e) => (e.kernarg_plan, !std::mem::replace(&mut e.plan_sent, true)),
            None => (0, false),
        }
    }

    /// Whether no name is bound to the handle (unknown, or bound as unnamed).
    pub fn unnamed(&self, pid: u32, handle: u64) -> bool {
        self.by_handle.get(&(pid, handle)).is_none_or(|e| e.source == Source::Unnamed)
    }

    /// The kernel id already bound to a handle, without looking further.
    pub fn lookup(&self, pid: u32, handle: u64) -> Option<u32> {
        self.by_handle.get(&(pid, handle)).map(|e| e.id)
    }

    /// The file and offset an address of a process falls in, from its maps snapshot.
    pub fn file_of(&mut self, pid: u32, addr: u64, ts: u64) -> Option<(String, u64)> {
        let m = self.mapping_at(pid, addr, ts)?;
        Some((m.path.clone(), addr - m.start + m.offset))
    }

    /// The file mapping of a process that held `addr` at time `ts`: from the snapshot, read again when it
    /// does not cover the address (the process mapped something since) or was taken before `ts` (a
    /// mapping read earlier may hold another file by then: the dynamic loader maps and unmaps its cache
    /// and libraries at the same addresses). A process that has ended keeps its last snapshot.
    fn mapping_at(&mut self, pid: u32, addr: u64, ts: u64) -> Option<&Mapping> {
        let holds = |m: &&Mapping| addr >= m.start && addr < m.end;
        let covered = |t: &Self| t.maps.get(&pid).is_some_and(|s| s.maps.iter().any(|m| holds(&m)));
        let fresh = |t: &Self| t.maps.get(&pid).is_some_and(|s| s.taken >= ts);
        if !covered(self) || !fresh(self) {
            // An address seen outside every file mapping (a heap handle) is not looked for again: a maps
            // read per launch would stall the target (it takes the target's mmap lock).
            if self.outside_files.contains(&(pid, addr)) {
                return None;
            }
            if !self.gone.contains(&pid) {
                self.snapshot(pid);
            }
            if !covered(self) {
                if fresh(self) {
                    self.outside_files.insert((pid, addr));
                }
                return None;
            }
        }
        self.maps.get(&pid)?.maps.iter().find(holds)
    }

    /// Forgets a process's handles (it exited or exec'd another program).
    pub fn forget(&mut self, pid: u32) {
        self.by_handle.retain(|(p, _), _| *p != pid);
        self.maps.remove(&pid);
        self.gone.remove(&pid);
        self.loaded.remove(&pid);
        self.modules.retain(|(p, _), _| *p != pid);
        self.outside_files.retain(|(p, _)| *p != pid);
        let prefix = format!("{pid}:");
        self.code_objects.retain(|k, _| !k.starts_with(&prefix));
    }

    /// The kernel a dispatch's `kernel_object` stands for, from `ROCr`'s list of loaded code objects in
    /// the process (a code object loaded before tracer attached): its name and the file it came from.
    pub fn loaded_name(&mut self, pid: u32, object: u64) -> Option<(String, Option<String>)> {
        let hit =
            |t: &Self| t.loaded.get(&pid)?.get(&object).map(|(n, f)| (n.to_string(), f.as_deref().map(str::to_owned)));
        if let Some(found) = hit(self) {
            return Some(found);
        }
        // Not among the objects read so far: the list may have grown since.
        self.read_loader_list(pid);
        hit(self)
    }

    /// Where `_amdgpu_r_debug` is in a process: in the libhsa-runtime64 it maps.
    fn r_debug_of(&mut self, pid: u32) -> Option<u64> {
        if !self.maps.contains_key(&pid) {
            self.snapshot(pid);
        }
        let runtimes: Vec<Mapping> = self
            .maps
            .get(&pid)?
            .maps
            .iter()
            .filter(|m| m.path.rsplit('/').next().is_some_and(|n| n.starts_with(crate::libs::HSA_RUNTIME)))
            .cloned()
            .collect();
        for m in &runtimes {
            let at = if let Some(at) = self.r_debug_files.get(&m.file) {
                at.clone()
            } else {
                let at = self.file(m).and_then(|f| crate::elf::dynamic_symbol(&f, crate::loader::R_DEBUG_SYMBOL));
                self.r_debug_files.insert(m.file, at.clone());
                at
            };
            let Some((vaddr, segments)) = at else { continue };
            // The load bias, from a mapping that starts a segment: its address minus the segment's page.
            for r in runtimes.iter().filter(|r| r.file == m.file) {
                if let Some(&(_, _, seg_vaddr)) = segments.iter().find(|(off, _, _)| off & !0xfff == r.offset) {
                    return Some(r.start.wrapping_sub(seg_vaddr & !0xfff).wrapping_add(vaddr));
                }
            }
        }
        None
    }

    /// Walks the process's loaded code-object list and names every kernel object of it.
    fn read_loader_list(&mut self, pid: u32) {
        let Some(r_debug) = self.r_debug_of(pid) else { return };
        let Some(list) = crate::loader::ProcMem::open(pid).and_then(|mem| crate::loader::walk(&mem, r_debug)) else {
            self.count("loader_list_unreadable");
            return;
        };
        if list.truncated {
            self.count("loader_list_truncated");
        }
        for _ in 0..list.unreadable {
            self.count("loader_uri_unreadable");
        }
        let same_ns = {
            use crate::proc::Procs as _;
            crate::proc::LIVE.same_mount_ns(pid)
        };
        let mut named = HashMap::new();
        for o in list.objects {
            let uri = crate::loader::parse_uri(&o.uri);
            let key = match &uri {
                Some(crate::loader::Uri::File { .. }) if same_ns => o.uri.clone(),
                _ => format!("{pid}:{}", o.uri),
            };
            let kernels = if let Some(k) = self.code_objects.get(&key) {
                k.clone()
            } else {
                let k = uri.as_ref().and_then(|u| code_object_kernels(pid, u)).map(Arc::new);
                if k.is_none() {
                    self.count("loader_code_object_unreadable");
                }
                self.code_objects.insert(key, k.clone());
                k
            };
            let file: Option<Arc<str>> = match uri {
                Some(crate::loader::Uri::File { path, .. }) => Some(path.into()),
                _ => None,
            };
            for (name, value) in kernels.iter().flat_map(|k| k.iter()) {
                named.insert(o.load_delta.wrapping_add(*value), (Arc::from(name.as_str()), file.clone()));
            }
        }
        self.loaded.insert(pid, named);
    }

    const fn next_id(&mut self) -> u32 {
        self.next_id += 1;
        self.next_id
    }

    /// Reads a process's file mappings now, so that its handles can still be named after it exits (the
    /// reader may decode a launch after its process is gone), and opens each file it maps not opened yet.
    pub fn snapshot(&mut self, pid: u32) {
        let taken = crate::record::monotonic_ns();
        // A process that has exited but is not reaped yet shows empty maps: keep what was seen before.
        let Some(maps) = read_mappings(pid).filter(|m| !m.is_empty()) else {
            self.gone.insert(pid);
            return;
        };
        {
            for m in &maps {
                if self.files.contains_key(&m.file) {
                    continue;
                }
                if self.files.len() >= MAX_OPEN_FILES {
                    self.count("files_not_opened_limit");
                    continue;
                }
                let opened = match CodeFile::mapped(pid, m.start, m.end, m.file.0, m.file.1, &m.path) {
                    Ok(f) => Some(Arc::new(f)),
                    Err(e) => {
                        self.count(refusal(&e));
                        None
                    }
                };
                self.files.insert(m.file, opened);
            }
            self.maps.insert(pid, Snapshot { taken, maps });
        }
    }

    /// The name a handle has in the file that maps it (ELF symbol or registration call), without
    /// binding it.
    pub fn static_name(&mut self, pid: u32, addr: u64, ts: u64) -> Option<(String, Source)> {
        let m = self.mapping_at(pid, addr, ts)?.clone();
        let syms = if let Some(s) = self.elf_cache.get(&m.file) {
            s.clone()
        } else {
            let parsed = self.file(&m).and_then(|f| ElfSymbols::parse(&f)).map(Arc::new);
            self.elf_cache.insert(m.file, parsed.clone());
            parsed
        }?;
        syms.name_at_file_offset(addr - m.start + m.offset).map(|(n, s)| (n.to_owned(), s))
    }
}

/// The footer counter for a file tracer did not read.
fn refusal(e: &crate::files::FileError) -> &'static str {
    match e.cause() {
        "not_regular" => "files_refused_not_regular",
        "changed" => "files_refused_changed",
        "out_of_bounds" => "files_refused_out_of_bounds",
        "too_big" => "files_refused_too_big",
        "open_failed" => "files_unopened",
        "fuse" => "files_refused_fuse",
        _ => "files_unreadable",
    }
}

/// The `NAME.kd` symbols of a code object, from where its URI says: a file the process sees (resolved
/// in its root, only the code object's range read), or the memory of a process.
fn code_object_kernels(pid: u32, uri: &crate::loader::Uri) -> Option<KernelSymbols> {
    match uri {
        crate::loader::Uri::File { path, offset, size } => {
            let file = Root::of(pid).and_then(|root| root.open(path)).ok()?;
            let len = size.unwrap_or_else(|| file.len().saturating_sub(*offset));
            if len == 0 || len > crate::bundle::MAX_CODE_OBJECT {
                return None;
            }
            file.check_range(*offset, len).ok()?;
            let view = crate::files::Bounded::new(&file, *offset, len, crate::files::ELF_BUDGET);
            crate::loader::kernel_descriptors(&view)
        }
        &crate::loader::Uri::Memory { pid: owner, addr, size } => {
            if size == 0 || size > crate::bundle::MAX_CODE_OBJECT {
                return None;
            }
            let mem = crate::loader::ProcMem::open(owner)?;
            let mut buf = vec![0; size as usize];
            crate::loader::Memory::read(&mem, addr, &mut buf).then_some(())?;
            crate::loader::kernel_descriptors(buf.as_slice())
        }
    }
}

/// Files kept open for naming (one descriptor each, shared by every process that maps the file).
const MAX_OPEN_FILES: usize = 4096;

/// A process's file mappings, and when they were read.
#[derive(Debug)]
struct Snapshot {
    /// `CLOCK_MONOTONIC` when they were read: they hold for events up to then.
    taken: u64,
    maps: Vec<Mapping>,
}

/// One file mapping of a process.
#[derive(Clone, Debug)]
struct Mapping {
    start: u64,
    end: u64,
    offset: u64,
    /// (device, inode) of the file.
    file: (u64, u64),
    /// The path as the process sees it.
    path: String,
}

fn read_mappings(pid: u32) -> Option<Vec<Mapping>> {
    use crate::proc::Procs as _;
    let maps = crate::proc::LIVE.maps(pid)?;
    Some(
        maps.into_iter()
            .map(|e| Mapping { start: e.start, end: e.end, offset: e.offset, file: (e.dev, e.inode), path: e.path })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names this test binary's own function through the maps + ELF path used on a late attach.
    #[inline(never)]
    #[unsafe(no_mangle)]
    pub(super) extern "C" fn tracer_symbols_test_marker() -> u64 {
        std::hint::black_box(42)
    }

    #[test]
    fn names_a_handle_from_the_mapped_file() {
        let mut t = KernelTable::default();
        #[expect(clippy::fn_to_numeric_cast_any, reason = "the function's address is the handle to name")]
        let addr = tracer_symbols_test_marker as *const () as u64;
        let pid = std::process::id();
        let (id, rec) = t.resolve(pid, addr, 1);
        let rec = rec.unwrap();
        assert_eq!((rec.name.as_str(), rec.source), ("tracer_symbols_test_marker", Source::Elf));
        // Known now: same id, no second record.
        assert_eq!(t.resolve(pid, addr, 2), (id, None));
        let (_, rec) = t.resolve(pid, 8, 3);
        assert_eq!(rec.unwrap().source, Source::Unnamed);
        assert_eq!(t.unnamed, 1);
        t.forget(pid);
        assert!(t.resolve(pid, addr, 4).1.is_some());
    }
}
