//! Attribution: decoded events become trace records naming the process, the library copy and the kernel.
//!
//! The dispatcher of the step: it keeps what it knows of each live process in one struct (dropped at
//! exit, replaced at exec) and asks [`crate::record::names`] for kernel names.

use std::rc::Rc;

use anyhow::Result;

use tracer_common::{
    ApiFunc, CODE_HEAD,
    api::{Layout, Library, Op},
};

use crate::{
    os::proc::{LIVE, Procs},
    record::{
        intake::decode::{CodeTail, Event, Name},
        names::{HeldMappings, Names, Source},
        probes::watch::Watched,
    },
    trace::event::{Call, Dispatch, Launch, PacketType, Repeat},
    trace::{
        Cause, Line, Sink,
        counted::{Counted, Counts},
    },
};

mod code_files;
mod config;
mod effects;
mod found;
mod graphs;
mod life;
mod params;
pub(crate) mod process;
mod runs;
mod vulkan;

use process::{ModuleCode, Process, ProcessRecords};
mod sites;

pub(crate) use config::Config;
pub(crate) use effects::Effects;
use params::{give_plan, take_params};

pub(crate) struct Attributor {
    /// How process records are written (what each says lives in its entry, [`Process::said`]).
    processes: ProcessRecords,
    /// Kernel names: what every process shares (files, symbols, ids given).
    names: Names,
    /// Counted oddities for the footer.
    counters: Counts,
    /// A process whose exit the caller records itself (with its exit status): the command it started.
    own_child: Option<u32>,
    /// Write the CUDA runtime's own launches (`--cuda-runtime`); otherwise they only name the driver
    /// function of the launch they make.
    runtime_view: bool,
    /// What the recording is asked to do since it last took them ([`Attributor::take_effects`]).
    effects: Effects,
    procs: &'static (dyn Procs + Sync),
    /// What the recording knows of each live process: dropped at its exit, replaced at its exec.
    live: crate::os::FastMap<u32, Process>,
    /// The process of the last event, known to be looked at (the hot path skips the table).
    last_scanned: u32,
    /// Directory entries code-directory listings may still read ([`code_files::LISTING_BUDGET`]).
    listing_budget: usize,
    /// A kernel run being expanded, and the index of its next launch ([`Attributor::expand_more`]).
    expanding: Option<(Repeat, u32)>,
    /// The lines of the event being taken, kept for the next ([`Attributor::take`]).
    lines: Vec<Line>,
    /// Processes that exited, until the library watch lets go of them ([`Effects::left`]): what it knows of
    /// each (None: it never looked at it).
    leaving: crate::os::FastMap<u32, Option<Watched>>,
    /// The processes the watch knew that had ended by the ring's last read ([`Attributor::stopping`]).
    ended_at_stop: Option<Vec<u32>>,
}

/// Threads of a process making a pipeline at once, at most (more are counted, named by their SPIR-V).
const MAX_MAKING: usize = 1 << 16;

impl Default for Attributor {
    fn default() -> Self {
        Self {
            processes: ProcessRecords::default(),
            names: Names::default(),
            counters: Counts::default(),
            own_child: None,
            runtime_view: false,
            effects: Effects::default(),
            procs: &LIVE,
            live: crate::os::FastMap::default(),
            last_scanned: 0,
            listing_budget: code_files::LISTING_BUDGET,
            expanding: None,
            lines: Vec::new(),
            leaving: crate::os::FastMap::default(),
            ended_at_stop: None,
        }
    }
}

impl Attributor {
    /// What naming has to tell the user since the last call, one sentence each.
    pub(crate) fn take_warnings(&mut self) -> Vec<String> {
        self.names.take_warnings()
    }

    /// The files naming's finders were still reading at the stop, counted, one sentence each.
    pub(crate) fn finders_unfinished(&mut self) -> Vec<String> {
        self.names.finders_unfinished()
    }

    /// What attributing asked of the recording since the last call.
    pub(crate) fn take_effects(&mut self) -> Effects {
        std::mem::take(&mut self.effects)
    }

    /// Whether the session must apply the effects before the next record ([`Effects::urgent`]).
    pub(crate) const fn effects_urgent(&self) -> bool {
        self.effects.urgent()
    }

    /// Processes whose events reached the trace so far (and are still running).
    pub(crate) fn processes_seen(&self) -> usize {
        self.live.values().filter(|p| p.scanned).count()
    }

    /// The process's state and its kernel names, borrowed together.
    fn process(&mut self, pid: u32) -> (&mut Process, &mut Names) {
        (self.live.entry(pid).or_default(), &mut self.names)
    }

    /// Writes the launch sites of every process still running (the end of the recording).
    pub(crate) fn launch_sites(&self, sink: &mut impl Sink) -> Result<()> {
        let mut pids: Vec<&u32> = self.live.keys().collect();
        pids.sort_unstable();
        for line in pids.into_iter().flat_map(|pid| self.live[pid].sites.records(*pid)) {
            sink.line(&line)?;
        }
        Ok(())
    }

    /// Reads a process's maps now (see [`crate::record::names::Of::snapshot`]).
    pub(crate) fn snapshot(&mut self, pid: u32) {
        let (p, names) = self.process(pid);
        names.of(pid, &mut p.names).snapshot();
    }

    /// [`Attributor::snapshot`] from a listing of the process's maps read just now (None: unreadable).
    pub(crate) fn snapshot_from(&mut self, pid: u32, listing: Option<Vec<crate::os::proc::MapsEntry>>) {
        let (p, names) = self.process(pid);
        names.of(pid, &mut p.names).snapshot_from(listing);
    }

    /// The file mappings naming holds of a process (see [`crate::record::names::Of::held_mappings`]); none for
    /// a process it no longer knows. (The library watch looks at a new process before any later record
    /// of it, its exit included, is attributed: the session applies the effects of each record before the next.)
    pub(crate) fn held_mappings(&mut self, pid: u32) -> HeldMappings {
        let Some(p) = self.live.get_mut(&pid) else { return Vec::new() };
        self.names.of(pid, &mut p.names).held_mappings()
    }

    /// Records for a process being traced from now on (before any of its events).
    pub(crate) fn start_process(
        &mut self,
        pid: u32,
        ts: u64,
        listing: Option<Vec<crate::os::proc::MapsEntry>>,
        sink: &mut impl Sink,
    ) -> Result<()> {
        self.snapshot_from(pid, listing);
        let said = &mut self.live.entry(pid).or_default().said;
        match self.processes.observe(said, pid, Cause::Start, ts, 0, "") {
            Some(p) => sink.line(&Line::Process(p)),
            None => Ok(()),
        }
    }

    /// Called for every event: the first event of a process (or the first after its exec) has its maps
    /// looked at — its libraries are loaded by then — and writes its process record if it is new.
    fn see(&mut self, pid: u32, ts: u64, out: &mut Vec<Line>) {
        if pid == self.last_scanned {
            return; // the hot path: the same process as the last event
        }
        self.last_scanned = pid;
        let p = self.live.entry(pid).or_default();
        if std::mem::replace(&mut p.scanned, true) {
            return;
        }
        self.names.of(pid, &mut p.names).snapshot();
        let image = p.names.image();
        self.effects.seen.push(pid);
        if !p.said.knows()
            && let Some(p) = self.processes.observe(&mut p.said, pid, Cause::Seen, ts, image, "")
        {
            out.push(Line::Process(p));
        }
    }

    /// Attributes an event and hands its lines to `sink`, a run's launches part by part, each part given
    /// before the next is made (or the run whole, where [`Self::whole`] finds it can be).
    pub(crate) fn take(&mut self, ev: Event, sink: &mut impl Sink) -> Result<()> {
        if let Event::Repeat(r) = &ev
            && self.whole(r, sink)?
        {
            return Ok(());
        }
        let mut out = std::mem::take(&mut self.lines);
        self.event(ev, &mut out);
        loop {
            #[expect(clippy::iter_with_drain, reason = "the one buffer, kept for the next event's lines")]
            for line in out.drain(..) {
                sink.line(&line)?;
            }
            if !self.expand_more(&mut out) {
                break;
            }
        }
        self.lines = out;
        Ok(())
    }

    pub(crate) fn event(&mut self, ev: Event, out: &mut Vec<Line>) {
        // A caller that did not take a run's launches part by part takes the rest now, in order.
        while self.expand_more(out) {}
        match ev {
            Event::Launch(l) => self.launch(l, out),
            Event::Repeat(r) => self.repeat(r, out),
            Event::Call(c) => self.call(c, out),
            Event::Name(n) => self.name(n, out),
            Event::Dispatch(d) => self.dispatch(d, out),
            Event::Ioctl(mut i) => {
                self.see(i.pid, i.ts, out);
                let procs = self.procs;
                let p = self.live.entry(i.pid).or_default();
                i.device.clone_from(p.fds.entry(i.fd).or_insert_with(|| procs.fd_target(i.pid, i.fd)));
                if !crate::os::ioctl::is_known(i.cmd) {
                    self.counters.bump(Counted::IoctlUnknown);
                }
                out.push(Line::Ioctl(i));
            }
            Event::Proc(p) => self.proc(p, out),
            Event::Open(o) => {
                // The dynamic loader is still mapping the process's libraries: its kernel names take the
                // maps at its first API event, not now (a look now would miss what it maps next). The
                // recording lists the GPU libraries mapped so far at once (`apply_effects`): a short-lived
                // program may be gone by its first API event.
                let pid = o.origin.pid;
                let p = self.live.entry(pid).or_default();
                let image = p.names.image();
                if !p.said.knows()
                    && let Some(p) = self.processes.observe(&mut p.said, pid, Cause::Seen, o.origin.ts, image, "")
                {
                    out.push(Line::Process(p));
                }
                if tracer_common::is_code_object(o.path.as_bytes()) {
                    // A code-object file about to be read into memory (rocBLAS's Tensile files).
                    let at = (pid, o.origin.tid, o.origin.ts);
                    p.code_files.code_object_opened(at, &o.path, o.truncated, self.procs, &mut self.counters);
                } else {
                    self.effects.opened.push(o);
                }
            }
            Event::Plain { pid, ts, record } => {
                self.see(pid, ts, out);
                out.push(record);
            }
            Event::Code(code) => self.code(code, out),
            Event::Params(params) => {
                let p = self.live.entry(params.origin.pid).or_default();
                if p.pending_params.insert(params.origin.tid, params).is_some() {
                    self.counters.bump(Counted::ParamsWithoutLaunch);
                }
            }
        }
    }

    fn launch(&mut self, l: Launch, out: &mut Vec<Line>) {
        self.see(l.pid, l.ts, out);
        let (pid, tid) = (l.pid, l.tid);
        self.keep_for_runs(&l);
        // Given only for a launch kept in its thread's history (kept with nothing beside it).
        if let Some(attributed) = self.attribute_launch(l, out)
            && let Some(h) = self.live.get_mut(&pid).and_then(|p| p.runs.get(pid, tid))
        {
            h.set_last(Some(attributed));
        }
    }

    /// A launch, its process seen and its thread's history kept: named, its parameters joined, written.
    /// Gives the launch as written where a run's copies of it may be written alike (see
    /// [`Attributor::passable`]).
    fn attribute_launch(&mut self, mut l: Launch, out: &mut Vec<Line>) -> Option<Rc<Launch>> {
        let runtime_view = self.runtime_view;
        let p = self.live.entry(l.pid).or_default();
        if let Layout::VkDispatch { .. } = l.api.layout() {
            // A Vulkan dispatch runs the compute pipeline bound on its command buffer (its stream).
            match p.bound.get(&l.stream) {
                Some(&pipeline) => l.handle = pipeline,
                None => self.counters.bump(Counted::DispatchesWithoutBoundPipeline),
            }
        }
        let mut names = self.names.of(l.pid, &mut p.names);
        // The code that made the launch: for CUDA, the runtime launch's caller (its driver launch is made
        // from libcudart).
        p.sites.count(&mut names, &l);
        match l.api.library() {
            Library::CudaRuntime => {
                // Its host stub's name goes to the driver launch it makes next on this thread.
                if names.runtime_launch(&l) {
                    // First sight of this runtime handle: its launches need no parameters read (the
                    // driver launch it makes reads them).
                    give_plan(&mut p.planned, &mut self.effects.plans, l.pid, l.handle, 0);
                }
                if !runtime_view {
                    self.counters.bump(Counted::RuntimeLaunchesForNames);
                    // Its parameters are read at the driver launch it makes (its plan, none, was given
                    // when its handle was first looked up).
                    p.pending_params.remove(&l.tid);
                    return None;
                }
            }
            Library::Cuda => {
                if let Some(k) = names.driver_launch(&l) {
                    out.push(Line::Kernel(k));
                }
            }
            _ => {}
        }
        let (kernel, new) = names.resolve(l.handle, l.ts);
        if let Some(mut k) = new {
            if k.source == Source::Unnamed && l.caller != 0 {
                // Looked up when the launch was counted by its site.
                k.caller = p.sites.file(l.caller);
            }
            out.push(Line::Kernel(k));
        }
        l.kernel = kernel;
        l.captured = p.graphs.is_capturing(l.stream);
        if l.captured && l.api.library() == Library::Cuda {
            p.graphs.captured_launch(l.stream, l.handle);
        }
        let plan = names.param_plan(l.handle);
        let key = (l.tid, l.ts, l.handle);
        l.params = take_params(p, &mut self.counters, &mut self.effects.plans, l.pid, key, plan).unwrap_or_default();
        // What its copies may be written as: a launch with a kernel id, no parameters joined, not a graph
        // node, no pipeline looked up ([`Attributor::passable`] checks the rest when a run comes).
        let alike = l.in_runs
            && l.kernel.is_some()
            && l.params.is_empty()
            && !l.captured
            && l.api.library() != Library::CudaRuntime
            && !matches!(l.api.layout(), Layout::VkDispatch { .. });
        let attributed = alike.then(|| Rc::new(l.clone()));
        out.push(Line::Launch(l));
        attributed
    }

    /// A chunk of a shader module's code, counted from its end: the module is named at its last chunk
    /// (chunk 0) from the chunks its thread sent before it, farthest first.
    fn code(&mut self, code: CodeTail, out: &mut Vec<Line>) {
        let o = code.origin;
        self.see(o.pid, o.ts, out);
        let (p, names) = self.process(o.pid);
        let fresh = || ModuleCode { handle: code.handle, head: None, tail: Some(Vec::new()) };
        let entry = p.code.entry(o.tid).or_insert_with(fresh);
        if entry.handle != code.handle {
            *entry = fresh();
        }
        if code.chunk == CODE_HEAD {
            entry.head = (!code.bytes.is_empty()).then_some(code.bytes);
            return;
        }
        match (&mut entry.tail, code.bytes.is_empty()) {
            (Some(bytes), false) => bytes.extend_from_slice(&code.bytes),
            (slot, _) => *slot = None,
        }
        if code.chunk == 0 {
            let m = p.code.remove(&o.tid).unwrap_or_default();
            let tail = m.tail.unwrap_or_default();
            // The pipeline its thread is making: its module holds the SPIR-V given, maybe with words added
            // (ggml inserts float-control modes); a smaller module is not that pipeline's.
            let making = p.making.remove(&o.tid);
            let unbound = making.as_ref().is_some_and(|&(_, spv_size, _)| code.size < spv_size);
            let given = making.filter(|_| !unbound).map(|(name, _, spirv)| (name, spirv));
            let code_ends = (m.head.as_deref(), tail.as_slice());
            names.of(o.pid, &mut p.names).shader_module(code.handle, code.size, code_ends, given, o.ts);
            if unbound {
                self.counters.bump(Counted::PipelineNamesUnbound);
            }
        }
    }

    fn dispatch(&mut self, mut d: Dispatch, out: &mut Vec<Line>) {
        self.see(d.pid, d.ts, out);
        if d.packet == PacketType::KernelDispatch {
            let p = self.live.entry(d.pid).or_default();
            let mut names = self.names.of(d.pid, &mut p.names);
            let (id, new) = names.kernel_object(d.kernel_object, d.ts);
            if let Some(k) = new {
                out.push(Line::Kernel(k));
            }
            d.kernel = id;
            let plan = names.kernarg_plan(d.kernel_object);
            let key = (d.tid, d.ts, d.kernel_object);
            d.params =
                take_params(p, &mut self.counters, &mut self.effects.plans, d.pid, key, plan).unwrap_or_default();
        }
        out.push(Line::Dispatch(d));
    }

    /// An API call: capture state, names bound by the call, the file a code object comes from.
    fn call(&mut self, mut c: Box<Call>, out: &mut Vec<Line>) {
        self.see(c.pid, c.ts, out);
        if matches!(c.api.layout(), Layout::ModulePath | Layout::CodeObjectFromFile) {
            self.file_call(c, out);
            return;
        }
        let ok = c.ret == 0;
        let p = self.live.entry(c.pid).or_default();
        let mut names = self.names.of(c.pid, &mut p.names);
        match c.api.op() {
            Op::CaptureBegin if ok => p.graphs.begin_capture(c.stream.unwrap_or(0)),
            Op::CaptureEnd => p.graphs.end_capture(c.stream.unwrap_or(0), c.handle.filter(|_| ok)),
            Op::GraphInstantiate | Op::GraphUpdate if ok => {
                if let (Some(graph), Some(exec)) = (c.handle, c.value) {
                    p.graphs.made(graph, exec);
                }
            }
            // A CUDA replay: an executable tracer did not see made is read from the driver's objects.
            Op::GraphLaunch if ok && c.api.library() == Library::Cuda => {
                if let Some(exec) = c.handle
                    && p.graphs.replayed(exec, c.ts, &mut names, out)
                {
                    self.counters.bump(Counted::GraphExecsUntracked);
                }
            }
            // The function a CUDA library kernel has in the current context: named as the kernel.
            Op::KernelFunction if ok => {
                if let (Some(kernel), Some(function)) = (c.handle, c.function)
                    && let Some(k) = names.kernel_function(kernel, function, c.ts)
                {
                    out.push(Line::Kernel(k));
                }
            }
            // KERNEL_OBJECT of a symbol named earlier: what every dispatch of it will carry.
            Op::SymbolInfo if ok => {
                if let (Some(symbol), Some(object)) = (c.handle, c.kernel_object())
                    && let Some(k) = names.hsa_kernel_object(symbol, object, c.ts)
                {
                    out.push(Line::Kernel(k));
                }
            }
            // A fat binary registered: where its offload bundle lies, for the registrations under its module.
            Op::ModuleLoad => {
                if let (Some(module), Some(addr)) = (c.module, c.value)
                    && let Some(code) = names.register_fat_binary(module, addr, c.ts)
                {
                    c.file = Some(code.file);
                    c.file_offset = Some(code.offset);
                    c.bundle = code.bundle;
                } else if let (true, Some(module), Some(file)) =
                    (ok, c.module, c.ptr.and_then(|image| p.code_files.image_file(image)))
                {
                    // An image read from a code-object file (see `code_files`): its functions carry that file.
                    names.module_file(module, &file);
                    c.file = Some(file);
                    c.file_offset = Some(0);
                } else if let (true, Some(module), Some(image)) = (ok, c.module, c.ptr)
                    && let Some((file, offset)) = names.module_image(module, image, c.caller, c.ts)
                {
                    // Loaded from an image: the file holding it holds the code of its functions (no
                    // offset: an image in memory, placed in the file whose code loaded it).
                    c.file = Some(file);
                    c.file_offset = offset;
                }
            }
            // Vulkan: a pipeline named after its module's shader; the pipeline a command buffer runs.
            Op::PipelineCreate | Op::Bind => vulkan::call(&c, &mut names, &mut p.bound, &mut self.counters, out),
            Op::ShaderModule | Op::CodeObjectRead => {
                if let Some((file, offset)) = c.ptr.and_then(|ptr| names.file_of(ptr, c.ts)) {
                    c.file = Some(file);
                    c.file_offset = Some(offset);
                } else if c.api.op() == Op::CodeObjectRead
                    && ok
                    && let Some((file, dir)) =
                        p.code_files.image_read(&c, self.procs, &mut self.listing_budget, &mut self.counters)
                {
                    // Read into memory from a code-object file (rocBLAS's Tensile).
                    out.extend(dir.map(Line::CodeDir));
                    (c.file, c.file_offset) = (Some(file), Some(0));
                }
            }
            _ => {}
        }
        out.push(Line::Call(c));
    }

    /// A code-object file loaded by path or descriptor: the call and, when it succeeded, its module's
    /// functions carry the file; its directory is listed once.
    fn file_call(&mut self, mut c: Box<Call>, out: &mut Vec<Line>) {
        let ok = c.ret == 0;
        let procs = self.procs;
        let p = self.live.entry(c.pid).or_default();
        let held = self.names.early.as_ref().and_then(|e| e.root(c.pid, p.names.image()));
        let mut names = self.names.of(c.pid, &mut p.names);
        match c.api.layout() {
            // A file loaded by path: the call and, when it succeeded, its module's functions carry it.
            Layout::ModulePath => {
                if let Some((file, truncated)) = p.code_files.path_of(&c, procs, &mut self.counters) {
                    if let (true, Some(module)) = (ok, c.module) {
                        names.module_file(module, &file);
                    }
                    let at = (c.pid, c.ts);
                    let how: (&dyn Procs, _) = (procs, held.as_deref());
                    if let Some(dir) =
                        p.code_files.list_dir(&file, truncated, at, how, &mut self.listing_budget, &mut self.counters)
                    {
                        out.push(Line::CodeDir(dir));
                    }
                    c.file = Some(file);
                }
            }
            Layout::CodeObjectFromFile => {
                if let Some(file) = code_files::CodeFiles::fd_file(&c, procs, &mut self.counters) {
                    let at = (c.pid, c.ts);
                    let how: (&dyn Procs, _) = (procs, held.as_deref());
                    if let Some(dir) =
                        p.code_files.list_dir(&file, false, at, how, &mut self.listing_budget, &mut self.counters)
                    {
                        out.push(Line::CodeDir(dir));
                    }
                    c.file = Some(file);
                }
            }
            _ => {}
        }
        out.push(Line::Call(c));
    }

    fn name(&mut self, n: Name, out: &mut Vec<Line>) {
        let o = n.origin;
        self.see(o.pid, o.ts, out);
        if n.truncated {
            self.counters.bump(Counted::NameTruncated);
        }
        if n.fault {
            self.counters.bump(Counted::NameFault);
        }
        let p = self.live.entry(o.pid).or_default();
        if n.api.layout() == Layout::ModulePath {
            // The path a load names, read at its entry: its call record follows.
            p.code_files.path_named(n, &mut self.counters);
            return;
        }
        if n.api.op() == Op::PipelineName {
            // A pipeline its runtime is making: the thread's next shader module is its own. One per thread:
            // a name its thread made no module for is replaced, and counted.
            if n.fault || n.truncated {
                self.counters.bump(Counted::PipelineNamesUnread);
            } else if p.making.len() >= MAX_MAKING && !p.making.contains_key(&o.tid) {
                self.counters.bump(Counted::PipelineNamesOverLimit);
            } else if p.making.insert(o.tid, (n.name, n.module, n.handle)).is_some() {
                self.counters.bump(Counted::PipelineNamesUnbound);
            }
            return;
        }
        if n.api.op() == Op::ProcAddr {
            // A Vulkan device entry point taken past the loader: if tracer probes it there, the process's
            // calls through this address are not seen. Counted, never guessed.
            if ApiFunc::from_symbol(&n.name).is_some_and(|f| f.library() == n.api.library() && f.op() != Op::ProcAddr) {
                self.counters.bump(Counted::VulkanEntryPointsPastLoader);
            }
            return;
        }
        let mut names = self.names.of(o.pid, &mut p.names);
        let source = match n.api.op() {
            // A code-object symbol (`<kernel>.kd`): named now, bound to its kernel object by get_info.
            Op::SymbolLookup => {
                names.hsa_symbol(n.handle, &n.name, n.truncated);
                return;
            }
            // A library kernel: a context's function is named after it (`cuKernelGetFunction`).
            Op::KernelLookup => {
                names.library_kernel(n.handle, n.module, &n.name, n.truncated);
                Source::Library
            }
            Op::FunctionLookup => Source::Module,
            _ => Source::Register,
        };
        let source = if n.fault { Source::Unnamed } else { source };
        out.extend(names.bind(n.handle, n.module, &n.name, source, n.truncated, o.ts).map(Line::Kernel));
    }
}

#[cfg(test)]
mod tests;
