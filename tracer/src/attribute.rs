//! Attribution: decoded events become trace records naming the process, the library copy and the
//! kernel. Holds the process table and the kernel table of the recording.

use std::collections::{BTreeMap, HashMap, HashSet};

use tracer_common::{
    ProcEvent,
    api::{Library, Op},
};

use crate::{
    decode::{Event, Name, Params, Proc},
    event::{Call, Launch, PacketType},
    proc::{LIVE, Procs},
    process::ProcessTable,
    symbols::{KernelTable, Source},
    trace::{self, Cause, Record},
};

pub struct Attributor {
    pub processes: ProcessTable,
    pub kernels: KernelTable,
    /// Counted oddities for the footer.
    pub counters: BTreeMap<String, u64>,
    /// A process whose exit the caller records itself (with its exit status): the command it started.
    pub own_child: Option<u32>,
    /// Processes first seen (or exec'd) since the caller last took this list: it looks at their maps.
    pub newly_seen: Vec<u32>,
    procs: &'static (dyn Procs + Sync),
    /// What each (pid, fd) of an ioctl points to, read once.
    fds: HashMap<(u32, u32), Option<String>>,
    /// HSA symbol handle -> kernel name (without `.kd`), per process, until its `KERNEL_OBJECT` is asked.
    hsa_symbols: HashMap<(u32, u64), String>,
    /// Streams capturing a graph, per process.
    capturing: HashSet<(u32, u64)>,
    /// Library kernel handles (`CUkernel`) -> name, per process: a context's function is named after them.
    library_kernels: HashMap<(u32, u64), (String, bool)>,
    /// Processes whose maps were looked at after one of their API events (their libraries are loaded by
    /// then); the last one, to skip the set on the hot path.
    scanned: HashSet<u32>,
    last_scanned: u32,
    /// Write the CUDA runtime's own launches (`--cuda-runtime`); otherwise they only name the driver
    /// function of the launch they make.
    pub runtime_view: bool,
    /// Per thread: the name of the `cudaLaunchKernel` host stub whose driver launch comes next (None:
    /// the stub has no name either).
    runtime_pending: HashMap<u32, Option<String>>,
    /// The name behind each runtime launch handle, per (pid, handle), looked up once.
    runtime_names: HashMap<(u32, u64), Option<String>>,
    /// Per process: functions named another way whose driver object gave the same name, and those whose
    /// object gave another or none ([`Attributor::driver_name`]).
    driver_agreement: HashMap<u32, (u64, u64)>,
    /// Driver functions whose object was read for a name, per (pid, handle): once each.
    driver_tried: HashSet<(u32, u64)>,
    /// Per thread: the kernel parameters read at the entry of its launch in progress.
    pending_params: HashMap<u32, Params>,
    /// Plans to write into the eBPF plan map (pid, function, plan): the caller takes them.
    pub new_plans: Vec<(u32, u64, u32)>,
    /// Runtime libraries traced processes opened since the caller last took this list: copies it may
    /// have to probe now.
    pub opened: Vec<crate::decode::Opened>,
}

impl Default for Attributor {
    fn default() -> Self {
        Self {
            processes: ProcessTable::default(),
            kernels: KernelTable::default(),
            counters: BTreeMap::new(),
            own_child: None,
            newly_seen: Vec::new(),
            procs: &LIVE,
            fds: HashMap::new(),
            hsa_symbols: HashMap::new(),
            capturing: HashSet::new(),
            library_kernels: HashMap::new(),
            scanned: HashSet::new(),
            last_scanned: 0,
            runtime_view: false,
            runtime_pending: HashMap::new(),
            runtime_names: HashMap::new(),
            driver_agreement: HashMap::new(),
            driver_tried: HashSet::new(),
            pending_params: HashMap::new(),
            new_plans: Vec::new(),
            opened: Vec::new(),
        }
    }
}

impl Attributor {
    fn bump(&mut self, name: &str) {
        // Some counters move on every launch: no allocation once the key is there.
        match self.counters.get_mut(name) {
            Some(n) => *n += 1,
            None => {
                self.counters.insert(name.to_owned(), 1);
            }
        }
    }

    /// Processes whose events reached the trace so far.
    pub fn processes_seen(&self) -> usize {
        self.scanned.len()
    }

    /// Records for a process being traced from now on (before any of its events).
    pub fn start_process(&mut self, pid: u32, ts: u64, out: &mut Vec<Record>) {
        self.kernels.snapshot(pid);
        if let Some(p) = self.processes.observe(pid, Cause::Start, ts, "") {
            out.push(Record::Process(p));
        }
    }

    /// Called for every event: the first event of a process (or the first after its exec) has its maps
    /// looked at — its libraries are loaded by then — and writes its process record if it is new.
    fn see(&mut self, pid: u32, ts: u64, out: &mut Vec<Record>) {
        if pid == self.last_scanned {
            return; // the hot path: the same process as the last event
        }
        self.last_scanned = pid;
        if !self.scanned.insert(pid) {
            return;
        }
        self.newly_seen.push(pid);
        self.kernels.snapshot(pid);
        if !self.processes.knows(pid)
            && let Some(p) = self.processes.observe(pid, Cause::Seen, ts, "")
        {
            out.push(Record::Process(p));
        }
    }

    pub fn event(&mut self, ev: Event, out: &mut Vec<Record>) {
        match ev {
            Event::Launch(mut l) => {
                self.see(l.pid, l.ts, out);
                match l.api.library() {
                    Library::CudaRuntime => {
                        // Its host stub's name goes to the driver launch it makes next on this thread.
                        let name = self.runtime_name(l.pid, l.handle, l.ts);
                        self.runtime_pending.insert(l.tid, name);
                        if !self.runtime_view {
                            self.bump("runtime_launches_for_names");
                            // Its parameters are read at the driver launch it makes (its plan, none, was
                            // given when its handle was first looked up).
                            self.pending_params.remove(&l.tid);
                            return;
                        }
                    }
                    Library::Cuda => {
                        self.learn_from_runtime(&l, out);
                        self.name_from_driver(&l, out);
                    }
                    _ => {}
                }
                let (kernel, new) = self.kernels.resolve(l.pid, l.handle, l.ts);
                if let Some(mut k) = new {
                    if k.source == Source::Unnamed && l.caller != 0 {
                        k.caller = self.kernels.file_of(l.pid, l.caller, l.ts).map(|(file, _)| file);
                    }
                    out.push(Record::Kernel(k));
                }
                l.kernel = Some(kernel);
                l.captured = self.capturing.contains(&(l.pid, l.stream));
                let (plan, new_plan) = self.kernels.param_plan(l.pid, l.handle);
                if new_plan {
                    // From now on the eBPF side reads only these parameters of this function's launches.
                    self.new_plans.push((l.pid, l.handle, plan));
                }
                self.join_params(&mut l, plan);
                out.push(Record::Launch(l));
            }
            Event::Config(c) => {
                self.see(c.pid, c.ts, out);
                out.push(Record::Config(c));
            }
            Event::Call(c) => self.call(c, out),
            Event::Name(n) => self.name(n, out),
            Event::Queue(q) => {
                self.see(q.pid, q.ts, out);
                out.push(Record::Queue(q));
            }
            Event::Dispatch(mut d) => {
                self.see(d.pid, d.ts, out);
                if d.packet == PacketType::KernelDispatch {
                    d.kernel = Some(if let Some(id) = self.kernels.lookup(d.pid, d.kernel_object) {
                        id
                    } else if let Some((name, file)) = self.kernels.loaded_name(d.pid, d.kernel_object) {
                        // Loaded before the tracer attached: named from ROCr's code-object list.
                        let mut rec = self.kernels.bind(d.pid, d.kernel_object, 0, &name, Source::Loader, false, d.ts);
                        rec.code_file = file;
                        let id = rec.id;
                        out.push(Record::Kernel(rec));
                        id
                    } else {
                        // In no list tracer can read: never named, but one id per object.
                        self.bump("dispatch_unnamed_objects");
                        let rec = self.kernels.bind(d.pid, d.kernel_object, 0, "", Source::Unnamed, false, d.ts);
                        let id = rec.id;
                        out.push(Record::Kernel(rec));
                        id
                    });
                    let (plan, new_plan) = self.kernels.kernarg_plan(d.pid, d.kernel_object);
                    if new_plan {
                        // From now on the doorbell reads only these words of this kernel's arguments.
                        self.new_plans.push((d.pid, d.kernel_object, plan));
                    }
                    if let Some(words) = self.take_params(d.tid, d.ts, d.kernel_object, plan) {
                        d.params = words;
                    }
                }
                out.push(Record::Dispatch(d));
            }
            Event::Ioctl(mut i) => {
                self.see(i.pid, i.ts, out);
                let procs = self.procs;
                i.device.clone_from(self.fds.entry((i.pid, i.fd)).or_insert_with(|| procs.fd_target(i.pid, i.fd)));
                if !crate::ioctl::is_known(i.cmd) {
                    self.bump("ioctl_unknown");
                }
                out.push(Record::Ioctl(i));
            }
            Event::Proc(p) => self.proc(p, out),
            Event::Open(o) => {
                self.see(o.origin.pid, o.origin.ts, out);
                self.opened.push(o);
            }
            Event::Params(p) => {
                if self.pending_params.insert(p.origin.tid, p).is_some() {
                    self.bump("params_without_launch");
                }
            }
        }
    }

    /// Joins the parameters read at a launch's entry (same thread, same entry time, same function) to it,
    /// keeping those its kernel needs.
    fn join_params(&mut self, l: &mut Launch, plan: u32) {
        if let Some(params) = self.take_params(l.tid, l.ts, l.handle, plan) {
            l.params = params;
        }
    }

    /// The parameters (or a dispatch's argument words) read just before the record of thread `tid` at
    /// `ts` for `handle`, keeping those the plan asks for; None when none were read for it.
    fn take_params(&mut self, tid: u32, ts: u64, handle: u64, plan: u32) -> Option<BTreeMap<u8, u64>> {
        if self.pending_params.is_empty() {
            return None;
        }
        let p = self.pending_params.remove(&tid)?;
        if p.origin.ts != ts || p.handle != handle {
            self.bump("params_without_launch");
            return None;
        }
        let params: BTreeMap<u8, u64> = p.values.into_iter().filter(|&(i, _)| plan & (1 << i) != 0).collect();
        if params.len() != plan.count_ones() as usize {
            // Needed but not read: an address that could not be read, or a plan set to none before the
            // function was named.
            self.bump("params_unread");
        }
        Some(params)
    }

    /// The name behind a `cudaLaunchKernel` handle, looked up once per handle: the host stub's name in
    /// the file that maps it (ELF symbol or registration call), else, for a handle in no file, the name
    /// CUDA 13's runtime keeps in the heap object it passes (word 0 is 2, word 1 points to the kernel's
    /// mangled name, as read on an H100 with `PyTorch`'s libcudart.so.13), taken only when the object has
    /// that shape and the name demangles as a C++ function; otherwise the launch stays unnamed.
    fn runtime_name(&mut self, pid: u32, handle: u64, ts: u64) -> Option<String> {
        if let Some(known) = self.runtime_names.get(&(pid, handle)) {
            return known.clone();
        }
        // First sight of this runtime handle: its launches need no parameters read (the driver launch it
        // makes reads them).
        self.new_plans.push((pid, handle, 0));
        let name = if let Some((name, _)) = self.kernels.static_name(pid, handle, ts) {
            Some(name)
        } else {
            let name = crate::loader::ProcMem::open(pid).and_then(|mem| {
                use crate::loader::{read_c_string, read_u64};
                (read_u64(&mem, handle)? == 2).then_some(())?;
                let name = read_c_string(&mem, read_u64(&mem, handle.checked_add(8)?)?)?;
                let mangled = name.starts_with("_Z") && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
                (mangled && cpp_demangle::Symbol::new(name.as_bytes()).is_ok()).then_some(name)
            });
            self.bump(if name.is_some() { "runtime_handles_named" } else { "runtime_handles_unnamed" });
            name
        };
        self.runtime_names.insert((pid, handle), name.clone());
        name
    }

    /// A driver launch of a function no name is bound to, made by the CUDA runtime's code right after
    /// a `cudaLaunchKernel` on the same thread: the function is that launch's kernel. The return address
    /// must lie in the runtime library, so a launch from elsewhere (cuBLAS's own) never takes the name.
    fn learn_from_runtime(&mut self, l: &Launch, out: &mut Vec<Record>) {
        let Some(pending) = self.runtime_pending.remove(&l.tid) else { return };
        let Some(name) = pending else { return };
        if self.kernels.lookup(l.pid, l.handle).is_some() {
            return;
        }
        let from_runtime = self
            .kernels
            .file_of(l.pid, l.caller, l.ts)
            .is_some_and(|(file, _)| file.rsplit('/').next().is_some_and(|n| n.starts_with(crate::libs::CUDA_RUNTIME)));
        if from_runtime {
            // A function named another way: does the driver's object agree?
            let agrees = driver_name(l.pid, l.handle).as_deref() == Some(name.as_str());
            let a = self.driver_agreement.entry(l.pid).or_default();
            if agrees {
                a.0 += 1
            } else {
                a.1 += 1
            }
            self.bump(if agrees { "driver_names_agreed" } else { "driver_names_disagreed" });
            let rec = self.kernels.bind(l.pid, l.handle, 0, &name, Source::RuntimeLaunch, false, l.ts);
            out.push(Record::Kernel(rec));
        }
    }

    /// A driver launch of a function with no name (loaded before the attach, by cuBLAS, cuDNN or a
    /// module): named from the driver's function object, once that source has agreed with the names
    /// tracer learned another way in this process (at least one, and ten times as many agreements as
    /// disagreements). Before that, or when the object does not hold a name, it stays unnamed.
    fn name_from_driver(&mut self, l: &Launch, out: &mut Vec<Record>) {
        // The process's agreement first: a small map, empty for a process traced from its start, so
        // those launches skip the kernel table.
        let (agreed, disagreed) = self.driver_agreement.get(&l.pid).copied().unwrap_or_default();
        if agreed == 0
            || agreed < 10 * disagreed
            || !self.kernels.unnamed(l.pid, l.handle)
            || !self.driver_tried.insert((l.pid, l.handle))
        {
            return;
        }
        match driver_name(l.pid, l.handle) {
            Some(name) => {
                self.bump("driver_functions_named");
                let rec = self.kernels.bind(l.pid, l.handle, 0, &name, Source::DriverFunction, false, l.ts);
                out.push(Record::Kernel(rec));
            }
            None => self.bump("driver_functions_unnamed"),
        }
    }

    /// An API call: capture state, names bound by the call, the file a code object comes from.
    fn call(&mut self, mut c: Call, out: &mut Vec<Record>) {
        self.see(c.pid, c.ts, out);
        let ok = c.ret == 0;
        match c.api.op() {
            Op::CaptureBegin if ok => {
                self.capturing.insert((c.pid, c.stream.unwrap_or(0)));
            }
            Op::CaptureEnd => {
                self.capturing.remove(&(c.pid, c.stream.unwrap_or(0)));
            }
            // The function a CUDA library kernel has in the current context: named as the kernel.
            Op::KernelFunction if ok => {
                if let (Some(kernel), Some(function)) = (c.handle, c.function)
                    && self.kernels.lookup(c.pid, function).is_none()
                    && let Some((name, truncated)) = self.library_kernels.get(&(c.pid, kernel)).cloned()
                {
                    let rec = self.kernels.bind(c.pid, function, kernel, &name, Source::Library, truncated, c.ts);
                    out.push(Record::Kernel(rec));
                }
            }
            // KERNEL_OBJECT of a symbol named earlier: what every dispatch of it will carry.
            Op::SymbolInfo if ok => {
                if let (Some(symbol), Some(object)) = (c.handle, c.kernel_object())
                    && let Some(name) = self.hsa_symbols.get(&(c.pid, symbol)).cloned()
                {
                    let rec = self.kernels.bind(c.pid, object, symbol, &name, Source::Hsa, false, c.ts);
                    out.push(Record::Kernel(rec));
                }
            }
            // A fat binary registered: where its offload bundle lies, for the registrations under its module.
            Op::ModuleLoad => {
                if let (Some(module), Some(addr)) = (c.module, c.value)
                    && let Some(code) = self.kernels.register_fat_binary(c.pid, module, addr, c.ts)
                {
                    c.file = Some(code.file);
                    c.file_offset = Some(code.offset);
                    c.bundle = code.bundle;
                }
            }
            Op::CodeObjectRead => {
                if let Some((file, offset)) = c.ptr.and_then(|ptr| self.kernels.file_of(c.pid, ptr, c.ts)) {
                    c.file = Some(file);
                    c.file_offset = Some(offset);
                }
            }
            _ => {}
        }
        out.push(Record::Call(c));
    }

    fn proc(&mut self, p: Proc, out: &mut Vec<Record>) {
        let ts = p.origin.ts;
        match p.event {
            ProcEvent::Fork => {
                self.kernels.snapshot(p.pid);
                if let Some(rec) = self.processes.observe(p.pid, Cause::Fork, ts, &p.comm) {
                    out.push(Record::Process(trace::Process { ppid: p.parent, ..rec }));
                }
            }
            ProcEvent::Exec => {
                // A new program: handles of the old image mean nothing now.
                self.kernels.forget(p.pid);
                self.runtime_names.retain(|(pid, _), _| *pid != p.pid);
                // No maps read now: the dynamic loader is still mapping and unmapping (its cache, its
                // libraries), and a mapping read now may hold another file by the time an address in
                // it is looked up. The first API event reads them.
                self.newly_seen.push(p.pid);
                // Its libraries load after exec: look again at its first API event.
                self.scanned.remove(&p.pid);
                self.last_scanned = 0;
                if let Some(rec) = self.processes.observe(p.pid, Cause::Exec, ts, &p.comm) {
                    out.push(Record::Process(rec));
                }
            }
            ProcEvent::Exit => {
                self.kernels.forget(p.pid);
                self.hsa_symbols.retain(|(pid, _), _| *pid != p.pid);
                self.scanned.remove(&p.pid);
                self.last_scanned = 0;
                self.capturing.retain(|(pid, _)| *pid != p.pid);
                self.runtime_pending.remove(&p.pid);
                self.runtime_names.retain(|(pid, _), _| *pid != p.pid);
                self.library_kernels.retain(|(pid, _), _| *pid != p.pid);
                self.fds.retain(|(pid, _), _| *pid != p.pid);
                self.processes.forget(p.pid);
                if self.own_child != Some(p.pid) {
                    out.push(Record::Exit(trace::Exit { ts, pid: p.pid, code: None, signal: None }));
                }
            }
        }
    }

    fn name(&mut self, n: Name, out: &mut Vec<Record>) {
        let o = n.origin;
        self.see(o.pid, o.ts, out);
        if n.truncated {
            self.bump("name_truncated");
        }
        if n.fault {
            self.bump("name_fault");
        }
        let source = match n.api.op() {
            // A code-object symbol (`<kernel>.kd`): named now, bound to its kernel object by get_info.
            Op::SymbolLookup => {
                let name = n.name.strip_suffix(".kd").unwrap_or(&n.name).to_owned();
                self.hsa_symbols.insert((o.pid, n.handle), name);
                return;
            }
            // A library kernel: a context's function is named after it (`cuKernelGetFunction`).
            Op::KernelLookup => {
                self.library_kernels.insert((o.pid, n.handle), (n.name.clone(), n.truncated));
                Source::Library
            }
            Op::FunctionLookup => Source::Module,
            _ => Source::Register,
        };
        let source = if n.fault { Source::Unnamed } else { source };
        let rec = self.kernels.bind(o.pid, n.handle, n.module, &n.name, source, n.truncated, o.ts);
        out.push(Record::Kernel(rec));
    }
}

/// The name the CUDA driver keeps in its function object: a pointer to it at byte 8 of the
/// `CUfunction` (read on an H100, driver API 13.0, for functions of the runtime and of modules loaded
/// through the driver: `bench/gpu/cufunc_layout.cu`). Taken only when it reads as a symbol name (a
/// C identifier; a C++ one must demangle).
fn driver_name(pid: u32, handle: u64) -> Option<String> {
    use crate::loader::{read_c_string, read_u64};
    let mem = crate::loader::ProcMem::open(pid)?;
    let name = read_c_string(&mem, read_u64(&mem, handle.checked_add(8)?)?)?;
    let identifier = name.len() > 1
        && name.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b == b'.');
    let cxx_ok = !name.starts_with("_Z") || cpp_demangle::Symbol::new(name.as_bytes()).is_ok();
    (identifier && cxx_ok).then_some(name)
}

#[cfg(test)]
mod tests {
    use tracer_common::ApiFunc;

    use super::*;
    use crate::event::{GridUnit, Origin};

    fn origin(ts: u64) -> Origin {
        // A PID that cannot exist, so /proc lookups find nothing and only the events speak.
        Origin { pid: 0x3fff_fff0, tid: 1, lib: 1, ts }
    }

    fn launch(handle: u64, ret: i32) -> Event {
        let o = origin(10);
        Event::Launch(Launch {
            ts: o.ts,
            pid: o.pid,
            tid: o.tid,
            lib: o.lib,
            api: ApiFunc::HipLaunchKernel,
            kernel: None,
            handle,
            grid: [4, 1, 1],
            block: [64, 1, 1],
            grid_unit: GridUnit::Blocks,
            shmem: 0,
            stream: 0,
            ret,
            dur: 3,
            captured: false,
            entry_only: false,
            params: Default::default(),
            caller: 0,
        })
    }

    #[test]
    fn launches_on_a_capturing_stream_are_graph_nodes() {
        let mut a = Attributor::default();
        let mut out = Vec::new();
        let capture = |api, ret| Event::Call(Call { stream: Some(0), ..Call::new(origin(1), api, ret, 0) });
        a.event(capture(ApiFunc::HipStreamBeginCapture, 0), &mut out);
        a.event(launch(0x1000, 0), &mut out);
        a.event(capture(ApiFunc::HipStreamEndCapture, 0), &mut out);
        a.event(launch(0x1000, 0), &mut out);
        // A capture that failed to begin captures nothing.
        a.event(capture(ApiFunc::HipStreamBeginCapture, 101), &mut out);
        a.event(launch(0x1000, 0), &mut out);
        let captured: Vec<bool> =
            out.iter().filter_map(|r| if let Record::Launch(l) = r { Some(l.captured) } else { None }).collect();
        assert_eq!(captured, [true, false, false]);
    }

    #[test]
    fn kernel_parameters_join_their_launch_and_plans_follow_the_name() {
        const MMQ: &str =
            "_Z9mul_mat_qIL9ggml_type12ELi16ELb0EL9ggml_prec30EEvPKcPKiS5_S5_PfS6_PKf5uint3iiiiiS9_S9_iiiS9_S9_iiiS9_";
        let mut a = Attributor::default();
        let mut out = Vec::new();
        let name = |handle, n: &str| {
            Event::Name(Name {
                origin: origin(1),
                api: ApiFunc::HipRegisterFunction,
                handle,
                module: 0x20,
                name: n.into(),
                truncated: false,
                fault: false,
            })
        };
        a.event(name(0x1000, MMQ), &mut out);
        a.event(name(0x2000, "_Z4axpyPfS_f"), &mut out);
        // Read before any plan: every parameter; the launch keeps the one its kernel needs.
        let params = |handle, ts| {
            Event::Params(Params {
                origin: origin(ts),
                handle,
                wanted: tracer_common::PARAMS_ALL,
                values: vec![(0, 5), (11, 290), (12, 4096)],
            })
        };
        a.event(params(0x1000, 10), &mut out);
        a.event(launch(0x1000, 0), &mut out);
        a.event(params(0x2000, 10), &mut out);
        a.event(launch(0x2000, 0), &mut out);
        // Parameters of another launch (an earlier entry) join nothing, and are counted.
        a.event(params(0x1000, 9), &mut out);
        a.event(launch(0x1000, 0), &mut out);
        let launches: Vec<&Launch> =
            out.iter().filter_map(|r| if let Record::Launch(l) = r { Some(l) } else { None }).collect();
        assert_eq!(launches[0].params, BTreeMap::from([(11, 290)]));
        assert!(launches[1].params.is_empty() && launches[2].params.is_empty());
        assert_eq!(a.counters.get("params_without_launch"), Some(&1));
        // One plan per function, given once: MMQ's ncols_y, nothing for the other.
        assert_eq!(a.new_plans, [(origin(0).pid, 0x1000, 1 << 11), (origin(0).pid, 0x2000, 0)]);
    }

    #[test]
    fn registered_names_attribute_launches() {
        let mut a = Attributor::default();
        let mut out = Vec::new();
        a.event(
            Event::Name(Name {
                origin: origin(1),
                api: ApiFunc::HipRegisterFunction,
                handle: 0x1000,
                module: 0x20,
                name: "_Z4axpyPfS_f".into(),
                truncated: false,
                fault: false,
            }),
            &mut out,
        );
        a.event(launch(0x1000, 101), &mut out);
        a.event(launch(0x2000, 0), &mut out);
        let kernels: Vec<&trace::Kernel> =
            out.iter().filter_map(|r| if let Record::Kernel(k) = r { Some(k) } else { None }).collect();
        let launches: Vec<&Launch> =
            out.iter().filter_map(|r| if let Record::Launch(l) = r { Some(l) } else { None }).collect();
        assert_eq!(kernels.len(), 2);
        assert_eq!(
            (kernels[0].demangled.as_str(), kernels[0].source),
            ("axpy(float*, float*, float)", Source::Register)
        );
        assert_eq!(kernels[1].source, Source::Unnamed);
        assert_eq!(launches[0].kernel, Some(kernels[0].id));
        assert_eq!(launches[1].kernel, Some(kernels[1].id));
        assert_eq!(launches[0].ret, 101);
        assert_eq!(a.kernels.unnamed, 1);
    }
}
