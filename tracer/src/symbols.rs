//! The kernel table: which name each launch handle stands for, per process.
//!
//! Sources, in order of trust: names seen live (`__hipRegisterFunction`, `hipModuleGetFunction`), then
//! the ELF symbol table of the file that maps the handle (a late attach to an unstripped program: the
//! handle `__hipRegisterFunction` receives is an 8-byte object whose symbol is the mangled kernel name),
//! then "unnamed" with the raw handle. Never a guess.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    fs,
    sync::Arc,
};

use object::{Object as _, ObjectSegment as _, ObjectSymbol as _};

use crate::trace;

pub use crate::demangle::demangle;
pub use crate::trace::Source;

/// Symbols of one ELF file by virtual address, the kernel handles its registration calls name (for a
/// stripped file), and how file offsets map to addresses.
#[derive(Debug, Default)]
struct ElfSymbols {
    by_addr: BTreeMap<u64, String>,
    registered: HashMap<u64, String>,
    /// `PT_LOAD` segments: (file offset, file size, virtual address).
    segments: Segments,
}

impl ElfSymbols {
    fn parse(data: &[u8]) -> Option<Self> {
        let file = object::File::parse(data).ok()?;
        let mut by_addr = BTreeMap::new();
        for sym in file.symbols().chain(file.dynamic_symbols()) {
            if sym.address() == 0 || sym.is_undefined() {
                continue;
            }
            if let Ok(name) = sym.name() {
                by_addr.entry(sym.address()).or_insert_with(|| name.to_owned());
            }
        }
        let segments = segments(&file);
        let registered = crate::registration::decode(data).map(|r| r.by_handle).unwrap_or_default();
        Some(Self { by_addr, registered, segments })
    }

    /// The name at a file offset: its symbol, else the kernel name its registration call gives.
    fn name_at_file_offset(&self, off: u64) -> Option<(&str, Source)> {
        let vaddr = self
            .segments
            .iter()
            .find(|(o, size, _)| off >= *o && off < o + size)
            .map(|(o, _, vaddr)| off - o + vaddr)?;
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

/// `PT_LOAD` segments: (file offset, file size, virtual address).
type Segments = Vec<(u64, u64, u64)>;

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
    maps: HashMap<u32, Vec<Mapping>>,
    /// Mapped files opened when a process was first looked at, by (device, inode): they can still be
    /// read after the process exits, or from another mount namespace.
    files: HashMap<(u64, u64), Option<Arc<fs::File>>>,
    /// Kernel name -> offload bundle numbers, per file with a `.hip_fatbin`.
    bundle_index: HashMap<(u64, u64), Option<Arc<crate::bundle::BundleIndex>>>,
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
    /// Counts for the footer about the loader list: lists or code objects that could not be read,
    /// lists cut short.
    pub loader_counts: BTreeMap<&'static str, u64>,
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
        let (param_plan, kernarg_plan) = if name.is_empty() {
            (0, 0)
        } else {
            let class = crate::classify::classify(name);
            (class.param_plan(), class.kernarg_plan())
        };
        self.by_handle.insert((pid, handle), Entry { id, source, param_plan, kernarg_plan, plan_sent: false });
        // A host stub (registered, or named from the ELF) lies in the file that carries the kernel's code.
        let (code_file, bundles) = match source {
            Source::Register | Source::Elf | Source::RegisterCall if !name.is_empty() => {
                self.bundles_of(pid, handle, name)
            }
            _ => (None, Vec::new()),
        };
        trace::Kernel {
            id,
            pid,
            handle,
            module,
            name: name.to_owned(),
            demangled: demangle(name),
            source,
            truncated,
            ts,
            code_file,
            bundles,
            caller: None,
        }
    }

    /// The whole file behind a mapping: through the descriptor kept open for it, else by its path.
    fn read_mapped(&self, m: &Mapping) -> Option<Vec<u8>> {
        match self.files.get(&m.file) {
            Some(Some(f)) => read_whole(f),
            _ => fs::read(&m.open_path).ok(),
        }
    }

    /// The file mapping `addr` and the offload bundles of its `.hip_fatbin` that define `name`.
    fn bundles_of(&mut self, pid: u32, addr: u64, name: &str) -> (Option<String>, Vec<String>) {
        let Some(m) = self.mapping_at(pid, addr).cloned() else { return (None, Vec::new()) };
        let index = if let Some(i) = self.bundle_index.get(&m.file) {
            i.clone()
        } else {
            let data = self.read_mapped(&m);
            let index = data.and_then(|d| crate::bundle::BundleIndex::of_elf(&d)).map(Arc::new);
            self.bundle_index.insert(m.file, index.clone());
            index
        };
        match index {
            Some(i) => (Some(m.path), i.bundles_defining(name)),
            None => (None, Vec::new()),
        }
    }

    /// The kernel id for a launch handle, naming it from the ELF file that maps it when no live name was
    /// seen. Returns the id and, when the handle is new, the kernel record to write first.
    pub fn resolve(&mut self, pid: u32, handle: u64, ts: u64) -> (u32, Option<trace::Kernel>) {
        if let Some(e) = self.by_handle.get(&(pid, handle)) {
            return (e.id, None);
        }
        let (name, source) = if let Some(named) = self.static_name(pid, handle) {
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
    pub fn file_of(&mut self, pid: u32, addr: u64) -> Option<(String, u64)> {
        let m = self.mapping_at(pid, addr)?;
        Some((m.path.clone(), addr - m.start + m.offset))
    }

    /// The file mapping of a process that holds `addr`: from the snapshot, refreshed when it does not
    /// cover the address (the process mapped something since).
    fn mapping_at(&mut self, pid: u32, addr: u64) -> Option<&Mapping> {
        let holds = |m: &&Mapping| addr >= m.start && addr < m.end;
        if !self.maps.get(&pid).is_some_and(|maps| maps.iter().any(|m| holds(&m))) {
            // An address seen outside every file mapping (a heap handle) is not looked for again: a maps
            // read per launch would stall the target (it takes the target's mmap lock).
            if self.outside_files.contains(&(pid, addr)) {
                return None;
            }
            self.snapshot(pid);
            if !self.maps.get(&pid).is_some_and(|maps| maps.iter().any(|m| holds(&m))) {
                self.outside_files.insert((pid, addr));
                return None;
            }
        }
        self.maps.get(&pid)?.iter().find(holds)
    }

    /// Forgets a process's handles (it exited or exec'd another program).
    pub fn forget(&mut self, pid: u32) {
        self.by_handle.retain(|(p, _), _| *p != pid);
        self.maps.remove(&pid);
        self.loaded.remove(&pid);
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

    fn bump(&mut self, counter: &'static str) {
        *self.loader_counts.entry(counter).or_default() += 1;
    }

    /// Where `_amdgpu_r_debug` is in a process: in the libhsa-runtime64 it maps.
    fn r_debug_of(&mut self, pid: u32) -> Option<u64> {
        if !self.maps.contains_key(&pid) {
            self.snapshot(pid);
        }
        let runtimes: Vec<Mapping> = self
            .maps
            .get(&pid)?
            .iter()
            .filter(|m| m.path.rsplit('/').next().is_some_and(|n| n.starts_with(crate::libs::HSA_RUNTIME)))
            .cloned()
            .collect();
        for m in &runtimes {
            let at = if let Some(at) = self.r_debug_files.get(&m.file) {
                at.clone()
            } else {
                let at = self.read_mapped(m).and_then(|d| r_debug_symbol(&d));
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
            self.bump("loader_list_unreadable");
            return;
        };
        if list.truncated {
            self.bump("loader_list_truncated");
        }
        for _ in 0..list.unreadable {
            self.bump("loader_uri_unreadable");
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
                let k = uri
                    .as_ref()
                    .and_then(|u| read_code_object(pid, u))
                    .and_then(|d| crate::loader::kernel_descriptors(&d).map(Arc::new));
                if k.is_none() {
                    self.bump("loader_code_object_unreadable");
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
    /// reader may decode a launch after its process is gone).
    pub fn snapshot(&mut self, pid: u32) {
        // A process that has exited but is not reaped yet shows empty maps: keep what was seen before.
        if let Some(maps) = read_mappings(pid).filter(|m| !m.is_empty()) {
            for m in &maps {
                if !self.files.contains_key(&m.file) && self.files.len() < MAX_OPEN_FILES {
                    self.files.insert(m.file, fs::File::open(&m.open_path).ok().map(Arc::new));
                }
            }
            self.maps.insert(pid, maps);
        }
    }

    /// The name a handle has in the file that maps it (ELF symbol or registration call), without
    /// binding it.
    pub fn static_name(&mut self, pid: u32, addr: u64) -> Option<(String, Source)> {
        let m = self.mapping_at(pid, addr)?.clone();
        let syms = if let Some(s) = self.elf_cache.get(&m.file) {
            s.clone()
        } else {
            let data = self.read_mapped(&m);
            let parsed = data.and_then(|d| ElfSymbols::parse(&d)).map(Arc::new);
            self.elf_cache.insert(m.file, parsed.clone());
            parsed
        }?;
        syms.name_at_file_offset(addr - m.start + m.offset).map(|(n, s)| (n.to_owned(), s))
    }
}

/// The virtual address of `_amdgpu_r_debug` in a libhsa-runtime64 file, and its `PT_LOAD` segments.
fn r_debug_symbol(data: &[u8]) -> Option<(u64, Segments)> {
    let file = object::File::parse(data).ok()?;
    let vaddr = file.dynamic_symbols().find(|s| s.name().is_ok_and(|n| n == crate::loader::R_DEBUG_SYMBOL))?.address();
    Some((vaddr, segments(&file)))
}

/// An ELF file's `PT_LOAD` segments.
fn segments(file: &object::File<'_>) -> Segments {
    file.segments()
        .map(|s| {
            let (off, size) = s.file_range();
            (off, size, s.address())
        })
        .collect()
}

/// A code object's bytes, from where its URI says: a file the process sees (through its root), or the
/// memory of a process.
fn read_code_object(pid: u32, uri: &crate::loader::Uri) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt as _;
    match uri {
        crate::loader::Uri::File { path, offset, size } => {
            let (offset, size) = (*offset, *size);
            let f = fs::File::open(format!("/proc/{pid}/root{path}")).or_else(|_| fs::File::open(path)).ok()?;
            let len = size.unwrap_or_else(|| f.metadata().map_or(0, |m| m.len()).saturating_sub(offset));
            if len == 0 || len > crate::loader::MAX_CODE_OBJECT {
                return None;
            }
            let mut buf = vec![0; len as usize];
            f.read_exact_at(&mut buf, offset).ok()?;
            Some(buf)
        }
        &crate::loader::Uri::Memory { pid: owner, addr, size } => {
            if size == 0 || size > crate::loader::MAX_CODE_OBJECT {
                return None;
            }
            let mem = crate::loader::ProcMem::open(owner)?;
            let mut buf = vec![0; size as usize];
            crate::loader::Memory::read(&mem, addr, &mut buf).then_some(buf)
        }
    }
}

/// Files kept open for naming (one descriptor each, shared by every process that maps the file).
const MAX_OPEN_FILES: usize = 2048;

fn read_whole(f: &fs::File) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt as _;
    let len = f.metadata().ok()?.len() as usize;
    let mut buf = vec![0; len];
    f.read_exact_at(&mut buf, 0).ok()?;
    Some(buf)
}

/// One file mapping of a process.
#[derive(Clone, Debug)]
struct Mapping {
    start: u64,
    end: u64,
    offset: u64,
    /// (device, inode) of the file.
    file: (u64, u64),
    /// A path that reaches the file from here: the target's own path when it shares our mount namespace
    /// (still valid after the process exits), else through /proc/PID/root.
    open_path: String,
    /// The path as the process sees it.
    path: String,
}

fn read_mappings(pid: u32) -> Option<Vec<Mapping>> {
    use crate::proc::Procs as _;
    let maps = crate::proc::LIVE.maps(pid)?;
    let same_ns = crate::proc::LIVE.same_mount_ns(pid);
    Some(
        maps.into_iter()
            .map(|e| Mapping {
                start: e.start,
                end: e.end,
                offset: e.offset,
                file: (e.dev, e.inode),
                open_path: if same_ns { e.path.clone() } else { format!("/proc/{pid}/root{}", e.path) },
                path: e.path,
            })
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
