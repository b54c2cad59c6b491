//! Kernel names: which kernel each launch handle stands for, per process, and where its code lies.
//!
//! A handle is what a launch passes: a HIP host stub or module function, a `CUfunction`, an HSA kernel
//! object. Sources, in order of trust: names seen live (a registration, a module or symbol lookup: the
//! record the decode step hands over), then what the process's own files and memory say (the ELF
//! symbol, or the registration call's string, of the file mapping the handle: `elf_symbols`,
//! [`registration`]; `ROCr`'s list of loaded code objects: [`rocr`]; the CUDA runtime's and driver's
//! objects: `cuda`), then "unnamed" with the raw handle. Never a guess.
//!
//! The rooms: `maps` (a process's file mappings, the files behind them opened once), `code` (which
//! file and offload [`bundle`] holds a kernel's code), [`memory`] (another process's memory, read
//! without stopping it), [`budget`] (what one process, one user and the recording may hold), [`reading`]
//! (what the code readers may read of a file), [`finder`] (the thread they run on). State shared by every
//! process (files, their symbols and bundle indexes) lives in [`Names`]; what holds for one process only
//! lives in its [`ProcessNames`], which the attribution step drops with the process. [`Names::of`] joins
//! the two for one process: [`Of`], whose binding is here and whose naming from each source lies in `of/`
//! (one file per source, beside that source's data: `of/maps.rs`, `of/cuda.rs`, ...). The data children
//! never name `of`, nor this file: what they share is in the leaves (`maps` the file ids, `budget` the
//! limits).

use crate::trace::counted::{Counted, Counting, Counts};
use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

pub(crate) mod budget;
pub(crate) mod bundle;
mod code;
mod cuda;
pub(crate) mod early;
mod elf_symbols;
pub(crate) mod finder;
pub(crate) mod graph_exec;
mod maps;
pub(crate) mod memory;
mod of;
pub(crate) mod pipelines;
pub(crate) mod reading;
pub(crate) mod registration;
pub(crate) mod rocr;
pub(crate) mod spirv;

pub(crate) use crate::trace::Source;
use crate::{
    os::{demangle::demangle, elf::Segments, files::CodeFile},
    record::names::{
        budget::{MAX_KERNELS_PER_PROCESS, MAX_UNNAMED_PER_PROCESS, room},
        bundle::{FatBinary, NameIndex},
        elf_symbols::ElfSymbols,
        maps::{FileId, Snapshot},
    },
    trace,
};
pub(crate) use code::FatBinaryCode;
pub(crate) use maps::HeldMappings;

/// A kernel of a loaded code object: its name and the file the code object came from.
type LoadedKernel = (Arc<str>, Option<Arc<str>>);

/// The `NAME.kd` symbols of a code object: (NAME, `st_value`).
type KernelSymbols = Vec<(String, u64)>;

/// One process's view of a kernel handle.
#[derive(Clone, Debug)]
struct Entry {
    id: u32,
    source: Source,
    /// The mangled name ("" when unnamed): graph executables read from the driver are checked against the
    /// names of the launches a capture made.
    name: Arc<str>,
    /// The kernel parameters its launches need read ([`trace::classify::Class::param_plan`]).
    param_plan: u32,
    /// For a kernel object: the words of a dispatch's argument segment it needs read
    /// ([`trace::classify::Class::kernarg_plan`]).
    kernarg_plan: u32,
    /// Whether the plan was handed to the eBPF side since the handle was bound.
    plan_sent: bool,
}

/// What naming learns once for every process: the files mapped, their symbols and bundle indexes, the
/// kernel ids given so far, and the counts and warnings for the user.
#[derive(Default)]
pub(crate) struct Names {
    next_id: u32,
    /// Counts for the footer: launches whose handle had no name anywhere.
    pub(crate) unnamed: u64,
    /// Counts for the footer: the loader list (lists or code objects that could not be read, lists cut
    /// short), files not read and why, fat binaries registered from no file, CUDA objects read for names.
    pub(crate) counts: Counts,
    /// What could not be read in a file a process registered code from, one sentence each (once per file
    /// and cause), for the session to tell its user.
    pub(crate) warnings: Vec<String>,
    /// Files already warned about.
    warned: HashSet<FileId>,
    /// Mapped files opened when a process was first looked at (through its `map_files`, checked to be
    /// the regular file mapped): they can still be read after the process exits, or from another mount
    /// namespace.
    files: HashMap<FileId, Option<Arc<CodeFile>>>,
    /// The symbols of each ELF file read for a name.
    elf: HashMap<FileId, Option<Arc<ElfSymbols>>>,
    /// The offload bundles of each file with a fat binary, indexed by their headers.
    fat_binaries: HashMap<FileId, Option<Arc<FatBinary>>>,
    /// Kernel name -> bundles, per file, for kernels named from the file rather than registered (late
    /// attach): built once, the first time one is needed.
    name_indexes: HashMap<FileId, Arc<NameIndex>>,
    /// `NAME.kd` symbols of code-object files read, by URI (one that means the same file in tracer's
    /// mount namespace); None when it could not be read.
    code_objects: HashMap<String, Option<Arc<KernelSymbols>>>,
    /// The SPIR-V arrays of each ggml file read for a Vulkan shader's name.
    shaders: HashMap<FileId, Option<Arc<spirv::ShaderIndex>>>,
    /// Per libhsa-runtime64 file: the address of `_amdgpu_r_debug` and the `PT_LOAD` segments.
    r_debug_files: HashMap<FileId, Option<(u64, Segments)>>,
    /// The code-reading finders' thread and what it has read ([`finder`]).
    finders: finder::Finders,
    /// The early looks at new processes' maps, taken for one that ended before its first record was
    /// named ([`early`]); None when no drain posts them (tests, reading a trace).
    pub(crate) early: Option<Arc<early::EarlyLooks>>,
    /// What each user's process images hold, and the recording's ([`budget`]).
    pub(crate) budgets: budget::Budgets,
}

/// What naming knows of one process: dropped whole when it exits, replaced when it execs.
#[derive(Default)]
pub(crate) struct ProcessNames {
    by_handle: crate::os::FastMap<u64, Entry>,
    /// How many of `by_handle` are bound as unnamed.
    unnamed_held: usize,
    /// Its file mappings, as last read.
    maps: Option<Snapshot>,
    /// Its maps could not be read any more (it ended): the last snapshot stands.
    gone: bool,
    /// `CLOCK_MONOTONIC` of the exec that started its image (0: no exec seen).
    since: u64,
    /// Addresses found in no file mapping when its maps were read again for them.
    outside_files: HashSet<u64>,
    /// Fat binaries registered, by module handle: where their code lies.
    modules: HashMap<u64, FatBinaryCode>,
    /// Kernel objects named by `ROCr`'s loaded code-object list: object -> (name, file the code object
    /// came from). Read again whenever a dispatch names an object not in it.
    loaded: HashMap<u64, LoadedKernel>,
    /// Code objects read whose URI means something only in this process (its memory, or a file in its
    /// own mount namespace).
    code_objects: HashMap<String, Option<Arc<KernelSymbols>>>,
    /// HSA symbol handle -> kernel name (without `.kd`), until its `KERNEL_OBJECT` is asked.
    hsa_symbols: HashMap<u64, (String, bool)>,
    /// Library kernel handles (`CUkernel`) -> (name, truncated): a context's function is named after them.
    library_kernels: HashMap<u64, (String, bool, u64)>,
    /// The CUDA runtime's and driver's names.
    cuda: cuda::CudaNames,
    /// Vulkan shader modules it made, and the shader each was made from.
    shader_modules: HashMap<u64, spirv::ModuleShader>,
    /// What it holds against its user's budget and the recording's (None until it first binds something):
    /// given back when it is dropped.
    charge: Option<budget::Charge>,
}

impl ProcessNames {
    /// A process image that its exec started at `ts`.
    pub(crate) fn since(ts: u64) -> Self {
        Self { since: ts, ..Self::default() }
    }

    /// `CLOCK_MONOTONIC` of the exec that started its image (0: no exec seen).
    pub(crate) const fn image(&self) -> u64 {
        self.since
    }

    /// Kernel handles and addresses outside its mappings it holds: what letting it go gives back.
    pub(crate) fn held(&self) -> usize {
        self.by_handle.len() + self.outside_files.len()
    }
}

impl Names {
    /// Naming for one process.
    pub(crate) const fn of<'a>(&'a mut self, pid: u32, proc: &'a mut ProcessNames) -> Of<'a> {
        Of { names: self, proc, pid }
    }

    /// One sentence for the user about a file, the first time something is wrong with it.
    fn warn(&mut self, file: FileId, sentence: String) {
        if self.warned.insert(file) {
            self.warnings.push(sentence);
        }
    }

    fn count(&mut self, what: Counted) {
        self.counts.bump(what);
    }

    const fn next_id(&mut self) -> u32 {
        self.next_id += 1;
        self.next_id
    }
}

/// Naming for one process: the shared state and the process's own.
pub(crate) struct Of<'a> {
    names: &'a mut Names,
    proc: &'a mut ProcessNames,
    pid: u32,
}

impl Of<'_> {
    /// What the process holds against its user's budget: its uid read the first time (once per image).
    fn charge(&mut self) -> &mut budget::Charge {
        let (budgets, pid) = (&self.names.budgets, self.pid);
        self.proc.charge.get_or_insert_with(|| budgets.charge(crate::os::proc::real_uid(pid)))
    }

    /// Whether a new handle, named or not, may still be bound in this process (its own limits, its
    /// user's budget and the recording's); counted when not.
    fn has_room(&mut self, handle: u64, unnamed: bool) -> bool {
        let by_handle = &self.proc.by_handle;
        if by_handle.contains_key(&handle) {
            return true;
        }
        let room = by_handle.len() < MAX_KERNELS_PER_PROCESS
            && (!unnamed || self.proc.unnamed_held < MAX_UNNAMED_PER_PROCESS)
            && self.charge().room(budget::Kind::Kernels)
            && (!unnamed || self.charge().room(budget::Kind::Unnamed));
        if !room {
            self.names.count(Counted::KernelHandlesOverLimit);
        }
        room
    }

    /// The same for a name waiting for its handle (a symbol, a library kernel) in a table of the process;
    /// charged when it fits.
    fn name_room(&mut self, fits: bool, held: bool) -> bool {
        if held {
            return true;
        }
        if fits && self.charge().room(budget::Kind::Kernels) {
            self.charge().add(budget::Kind::Kernels);
            return true;
        }
        self.names.count(Counted::KernelHandlesOverLimit);
        false
    }

    /// Binds a name to a handle. Returns the kernel record to write; None, counted, for a new handle past
    /// the process's limits ([`MAX_KERNELS_PER_PROCESS`], [`MAX_UNNAMED_PER_PROCESS`]).
    pub(crate) fn bind(
        &mut self,
        handle: u64,
        module: u64,
        name: &str,
        source: Source,
        truncated: bool,
        ts: u64,
    ) -> Option<trace::Kernel> {
        let unnamed = source == Source::Unnamed;
        if !self.has_room(handle, unnamed) {
            return None;
        }
        let id = self.names.next_id();
        let demangled = demangle(name);
        let (param_plan, kernarg_plan) = if name.is_empty() {
            (0, 0)
        } else {
            let class = trace::classify::classify_demangled(name, &demangled);
            (class.param_plan(), class.kernarg_plan())
        };
        let entry = Entry { id, source, name: name.into(), param_plan, kernarg_plan, plan_sent: false };
        let was_unnamed = self.proc.by_handle.insert(handle, entry).map(|was| was.source == Source::Unnamed);
        let charge = self.charge();
        match (was_unnamed, unnamed) {
            (None, _) => charge.add(budget::Kind::Kernels),
            (Some(true), false) => charge.sub(budget::Kind::Unnamed),
            _ => {}
        }
        if unnamed && was_unnamed != Some(true) {
            charge.add(budget::Kind::Unnamed);
        }
        self.proc.unnamed_held -= usize::from(was_unnamed == Some(true));
        self.proc.unnamed_held += usize::from(unnamed);
        let (code_file, bundles) = match source {
            _ if name.is_empty() => (None, Vec::new()),
            // A registration names its module: the fat binary registered under it holds the code.
            Source::Register => match self.proc.modules.get(&module) {
                Some(code) => (Some(code.file.clone()), code.bundle.iter().cloned().collect()),
                None => (self.code_file_at(handle, ts), Vec::new()),
            },
            // A host stub named from its file lies in the file that carries the kernel's code.
            Source::Elf | Source::RegisterCall => self.bundles_of(handle, name, ts),
            // A function looked up in a module or library loaded from an image or a file: that file.
            Source::Module | Source::Library => (self.proc.modules.get(&module).map(|c| c.file.clone()), Vec::new()),
            _ => (None, Vec::new()),
        };
        Some(trace::Kernel {
            id,
            pid: self.pid,
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
        })
    }

    /// The kernel id for a launch handle, naming it from the ELF file that maps it when no live name was
    /// seen. Returns the id (None for a new handle past the process's limits) and, when the handle is new,
    /// the kernel record to write first.
    pub(crate) fn resolve(&mut self, handle: u64, ts: u64) -> (Option<u32>, Option<trace::Kernel>) {
        if let Some(e) = self.proc.by_handle.get(&handle) {
            return (Some(e.id), None);
        }
        if !self.has_room(handle, false) {
            return (None, None);
        }
        let (name, source) = if let Some(named) = self.static_name(handle, ts) {
            named
        } else {
            self.names.unnamed += 1;
            (String::new(), Source::Unnamed)
        };
        let rec = self.bind(handle, 0, &name, source, false, ts);
        (rec.as_ref().map(|k| k.id), rec)
    }

    /// The kernel parameters a launch of this handle needs read (0 for an unknown handle), and whether this
    /// is the first time it is asked since the handle was bound (the eBPF side is then to be told).
    pub(crate) fn param_plan(&mut self, handle: u64) -> (u32, bool) {
        match self.proc.by_handle.get_mut(&handle) {
            Some(e) => (e.param_plan, !std::mem::replace(&mut e.plan_sent, true)),
            None => (0, false),
        }
    }

    /// The same for a kernel object's queue dispatches: which words of the argument segment to read.
    pub(crate) fn kernarg_plan(&mut self, kernel_object: u64) -> (u32, bool) {
        match self.proc.by_handle.get_mut(&kernel_object) {
            Some(e) => (e.kernarg_plan, !std::mem::replace(&mut e.plan_sent, true)),
            None => (0, false),
        }
    }

    /// Whether the handle is bound and its parameter plan was asked for since ([`Self::param_plan`]).
    pub(crate) fn plan_given(&self, handle: u64) -> bool {
        self.proc.by_handle.get(&handle).is_some_and(|e| e.plan_sent)
    }

    /// Whether no name is bound to the handle (unknown, or bound as unnamed).
    pub(crate) fn unnamed(&self, handle: u64) -> bool {
        self.proc.by_handle.get(&handle).is_none_or(|e| e.source == Source::Unnamed)
    }

    /// The name bound to a handle ("" for an unnamed one), without looking further.
    pub(crate) fn name_of(&self, handle: u64) -> Option<&str> {
        self.proc.by_handle.get(&handle).map(|e| &*e.name)
    }

    /// The kernel id already bound to a handle, without looking further.
    pub(crate) fn lookup(&self, handle: u64) -> Option<u32> {
        self.proc.by_handle.get(&handle).map(|e| e.id)
    }

    /// A code-object symbol (`<kernel>.kd`) looked up: its kernel object is bound when asked for.
    pub(crate) fn hsa_symbol(&mut self, symbol: u64, name: &str, truncated: bool) {
        let name = name.strip_suffix(".kd").unwrap_or(name);
        let (fits, held) = (room(&self.proc.hsa_symbols, &symbol), self.proc.hsa_symbols.contains_key(&symbol));
        if self.name_room(fits, held) {
            self.proc.hsa_symbols.insert(symbol, (name.to_owned(), truncated));
        }
    }

    /// The `KERNEL_OBJECT` of a symbol named earlier: what every dispatch of it will carry.
    pub(crate) fn hsa_kernel_object(&mut self, symbol: u64, object: u64, ts: u64) -> Option<trace::Kernel> {
        let (name, truncated) = self.proc.hsa_symbols.get(&symbol)?.clone();
        self.bind(object, symbol, &name, Source::Hsa, truncated, ts)
    }

    /// A library kernel (`CUkernel`) looked up by name in `library`: kept for the functions made from it.
    pub(crate) fn library_kernel(&mut self, kernel: u64, library: u64, name: &str, truncated: bool) {
        let (fits, held) = (room(&self.proc.library_kernels, &kernel), self.proc.library_kernels.contains_key(&kernel));
        if self.name_room(fits, held) {
            self.proc.library_kernels.insert(kernel, (name.to_owned(), truncated, library));
        }
    }

    /// The function a library kernel has in the current context (`cuKernelGetFunction`): named as the
    /// kernel, unless it has a name already.
    pub(crate) fn kernel_function(&mut self, kernel: u64, function: u64, ts: u64) -> Option<trace::Kernel> {
        if self.lookup(function).is_some() {
            return None;
        }
        let (name, truncated, library) = self.proc.library_kernels.get(&kernel)?.clone();
        let mut rec = self.bind(function, kernel, &name, Source::Library, truncated, ts)?;
        rec.code_file = self.proc.modules.get(&library).map(|c| c.file.clone());
        Some(rec)
    }

    /// A dispatch's kernel object: its id, bound first (the record to write) from `ROCr`'s code-object
    /// list when it was loaded before tracer attached, or as unnamed (one id per object) when no list
    /// tracer can read holds it. None for a new object past the process's limits.
    pub(crate) fn kernel_object(&mut self, object: u64, ts: u64) -> (Option<u32>, Option<trace::Kernel>) {
        if let Some(id) = self.lookup(object) {
            return (Some(id), None);
        }
        if !self.has_room(object, false) {
            return (None, None);
        }
        let rec = if let Some((name, file)) = self.loaded_name(object) {
            self.bind(object, 0, &name, Source::Loader, false, ts).map(|mut rec| {
                rec.code_file = file;
                rec
            })
        } else {
            self.names.count(Counted::DispatchUnnamedObjects);
            self.bind(object, 0, "", Source::Unnamed, false, ts)
        };
        (rec.as_ref().map(|k| k.id), rec)
    }
}

impl Counting for Names {
    /// What naming counted, the kernels left unnamed (said at 0 too), the early look's and the budgets'.
    fn counted(&self, out: &mut Counts) {
        out.merge(&self.counts);
        out.add(Counted::UnnamedKernels, self.unnamed);
        if let Some(e) = &self.early {
            e.counted(out);
        }
        self.budgets.counted(out);
    }
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
        let mut names = Names::default();
        let mut proc = ProcessNames::default();
        #[expect(clippy::fn_to_numeric_cast_any, reason = "the function's address is the handle to name")]
        let addr = tracer_symbols_test_marker as *const () as u64;
        let pid = std::process::id();
        let (id, rec) = names.of(pid, &mut proc).resolve(addr, 1);
        let rec = rec.unwrap();
        assert_eq!((rec.name.as_str(), rec.source), ("tracer_symbols_test_marker", Source::Elf));
        // Known now: same id, no second record.
        assert_eq!(names.of(pid, &mut proc).resolve(addr, 2), (id, None));
        assert!(id.is_some());
        let (_, rec) = names.of(pid, &mut proc).resolve(8, 3);
        assert_eq!(rec.unwrap().source, Source::Unnamed);
        assert_eq!(names.unnamed, 1);
        // The process gone, its state with it: the handle is new again.
        let mut proc = ProcessNames::default();
        assert!(names.of(pid, &mut proc).resolve(addr, 4).1.is_some());
    }
}
