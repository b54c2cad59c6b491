//! Attribution: decoded events become trace records naming the process, the library copy and the
//! kernel. Holds the process table and the kernel table of the recording.

use std::collections::{BTreeMap, HashMap};

use tracer_common::{ApiFunc, ProcEvent};

use crate::{
    decode::{Event, Name},
    process::ProcessTable,
    symbols::{KernelTable, Source},
    trace::{self, Record},
};

#[derive(Default)]
pub struct Attributor {
    pub processes: ProcessTable,
    pub kernels: KernelTable,
    /// Counted oddities for the footer.
    pub counters: BTreeMap<String, u64>,
    /// A process whose exit the caller records itself (with its exit status): the command it started.
    pub own_child: Option<u32>,
    /// What each (pid, fd) of an ioctl points to, read once.
    fds: HashMap<(u32, u32), Option<String>>,
    /// Processes first seen (or exec'd) since the caller last took this list: it looks at their maps.
    pub newly_seen: Vec<u32>,
    /// HSA symbol handle -> kernel name (without `.kd`), per process, until its KERNEL_OBJECT is asked.
    hsa_symbols: HashMap<(u32, u64), String>,
    /// Streams capturing a graph, per process.
    capturing: std::collections::HashSet<(u32, u64)>,
    /// CUDA kernel handles (`CUkernel`) -> name, per process: a `cuKernelGetFunction` names its function
    /// after them.
    cuda_kernels: HashMap<(u32, u64), (String, bool)>,
    /// Processes whose maps were looked at after one of their API events (their libraries are loaded by
    /// then); the last one, to skip the set on the hot path.
    scanned: std::collections::HashSet<u32>,
    last_scanned: u32,
}

impl Attributor {
    fn bump(&mut self, name: &str) {
        *self.counters.entry(name.to_owned()).or_default() += 1;
    }

    /// Records for a process being traced from now on (before any of its events).
    pub fn start_process(&mut self, pid: u32, ts: u64, out: &mut Vec<Record>) {
        self.kernels.snapshot(pid);
        if let Some(p) = self.processes.observe(pid, "start", ts, "") {
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
            && let Some(p) = self.processes.observe(pid, "seen", ts, "")
        {
            out.push(Record::Process(p));
        }
    }

    pub fn event(&mut self, ev: Event, out: &mut Vec<Record>) {
        match ev {
            Event::Launch(l) => {
                let o = l.origin;
                self.see(o.pid, o.ts, out);
                let (kernel, new) = self.kernels.resolve(o.pid, l.handle, o.ts);
                if let Some(k) = new {
                    out.push(Record::Kernel(k));
                }
                let captured = self.capturing.contains(&(o.pid, l.stream));
                out.push(Record::Launch(trace::Launch {
                    ts: o.ts,
                    pid: o.pid,
                    tid: o.tid,
                    lib: o.lib,
                    api: l.api.symbol_name().into(),
                    kernel: Some(kernel),
                    handle: l.handle,
                    grid: l.grid,
                    block: l.block,
                    grid_unit: l.grid_unit.as_str().into(),
                    shmem: l.shmem,
                    stream: l.stream,
                    ret: l.ret,
                    dur: l.dur,
                    captured,
                    entry_only: l.entry_only,
                }));
            }
            Event::Config(c) => {
                let o = c.origin;
                self.see(o.pid, o.ts, out);
                out.push(Record::Config(trace::Config {
                    ts: o.ts,
                    pid: o.pid,
                    tid: o.tid,
                    lib: o.lib,
                    grid: c.grid,
                    block: c.block,
                    shmem: c.shmem,
                    stream: c.stream,
                    ret: c.ret,
                    dur: c.dur,
                }));
            }
            Event::Call(c) => {
                let o = c.origin;
                self.see(o.pid, o.ts, out);
                let ok = c.ret == 0;
                match c.api {
                    Some(
                        ApiFunc::HipStreamBeginCapture
                        | ApiFunc::CuStreamBeginCapture
                        | ApiFunc::CuStreamBeginCapturePtsz,
                    ) if ok => {
                        self.capturing.insert((o.pid, c.stream.unwrap_or(0)));
                    }
                    Some(
                        ApiFunc::HipStreamEndCapture | ApiFunc::CuStreamEndCapture | ApiFunc::CuStreamEndCapturePtsz,
                    ) => {
                        self.capturing.remove(&(o.pid, c.stream.unwrap_or(0)));
                    }
                    // The function a CUDA library kernel has in the current context: named as the kernel.
                    Some(ApiFunc::CuKernelGetFunction) if ok => {
                        if let (Some(kernel), Some(function)) = (c.handle, c.function)
                            && self.kernels.lookup(o.pid, function).is_none()
                            && let Some((name, truncated)) = self.cuda_kernels.get(&(o.pid, kernel)).cloned()
                        {
                            let rec =
                                self.kernels.bind(o.pid, function, kernel, &name, Source::Library, truncated, o.ts);
                            out.push(Record::Kernel(rec));
                        }
                    }
                    // KERNEL_OBJECT of a symbol named earlier: what every dispatch of it will carry.
                    Some(ApiFunc::HsaExecutableSymbolGetInfo) if ok && c.attribute == Some(22) => {
                        if let (Some(symbol), Some(object)) = (c.handle, c.value)
                            && let Some(name) = self.hsa_symbols.get(&(o.pid, symbol)).cloned()
                        {
                            let rec = self.kernels.bind(o.pid, object, symbol, &name, Source::Hsa, false, o.ts);
                            out.push(Record::Kernel(rec));
                        }
                    }
                    _ => {}
                }
                let (file, file_offset) = match (c.api, c.ptr) {
                    (Some(ApiFunc::HsaCodeObjectReaderCreateFromMemory), Some(ptr)) => {
                        self.kernels.file_of(o.pid, ptr).map_or((None, None), |(f, off)| (Some(f), Some(off)))
                    }
                    _ => (None, None),
                };
                out.push(Record::Call(trace::Call {
                    ts: o.ts,
                    pid: o.pid,
                    tid: o.tid,
                    lib: o.lib,
                    api: c.api.map_or("unknown", |a| a.symbol_name()).into(),
                    ret: c.ret,
                    dur: c.dur,
                    size: c.size,
                    ptr: c.ptr,
                    dst: c.dst,
                    src: c.src,
                    kind: c.kind.map(|k| k.name()),
                    stream: c.stream,
                    module: c.module,
                    function: c.function,
                    handle: c.handle,
                    attribute: c.attribute,
                    value: c.value,
                    file,
                    file_offset,
                    entry_only: c.entry_only,
                }));
            }
            Event::Name(n) => self.name(n, out),
            Event::Queue(q) => {
                let o = q.origin;
                self.see(o.pid, o.ts, out);
                out.push(Record::Queue(trace::Queue {
                    ts: o.ts,
                    pid: o.pid,
                    tid: o.tid,
                    lib: o.lib,
                    queue: q.queue,
                    id: q.id,
                    queue_type: q.queue_type,
                    base_address: q.base_address,
                    size: q.size,
                    doorbell_signal: q.doorbell_signal,
                }));
            }
            Event::Dispatch(d) => {
                let o = d.origin;
                self.see(o.pid, o.ts, out);
                let kernel = if d.packet_type == crate::decode::PacketType::KernelDispatch {
                    Some(match self.kernels.lookup(o.pid, d.kernel_object) {
                        Some(id) => id,
                        None => {
                            // Loaded before the tracer started: never named, but one id per object.
                            self.bump("dispatch_unnamed_objects");
                            let rec = self.kernels.bind(o.pid, d.kernel_object, 0, "", Source::Unnamed, false, o.ts);
                            let id = rec.id;
                            out.push(Record::Kernel(rec));
                            id
                        }
                    })
                } else {
                    None
                };
                out.push(Record::Dispatch(trace::Dispatch {
                    ts: o.ts,
                    pid: o.pid,
                    tid: o.tid,
                    lib: o.lib,
                    queue: d.queue,
                    index: d.index,
                    packet: d.packet_type.name(),
                    barrier: d.barrier,
                    workgroup: d.workgroup,
                    grid: d.grid,
                    private_segment: d.private_segment,
                    group_segment: d.group_segment,
                    kernel_object: d.kernel_object,
                    kernarg: d.kernarg,
                    completion_signal: d.completion_signal,
                    kernel,
                }));
            }
            Event::Ioctl(i) => {
                let o = i.origin;
                self.see(o.pid, o.ts, out);
                let device = self
                    .fds
                    .entry((o.pid, i.fd))
                    .or_insert_with(|| {
                        std::fs::read_link(format!("/proc/{}/fd/{}", o.pid, i.fd)).ok().map(|p| p.display().to_string())
                    })
                    .clone();
                if !crate::ioctl::is_known(i.cmd) {
                    self.bump("ioctl_unknown");
                }
                let fields = i
                    .argbuf
                    .map(|b: [u8; tracer_common::IOCTL_ARG_BYTES]| {
                        crate::ioctl::fields(i.cmd, &b[..]).into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
                    })
                    .unwrap_or_default();
                out.push(Record::Ioctl(trace::Ioctl {
                    ts: o.ts,
                    pid: o.pid,
                    tid: o.tid,
                    fd: i.fd,
                    device,
                    cmd: i.cmd,
                    name: crate::ioctl::name(i.cmd),
                    ret: i.ret,
                    dur: i.dur,
                    fields,
                }));
            }
            Event::Proc(p) => {
                let ts = p.origin.ts;
                match p.event {
                    ProcEvent::Fork => {
                        self.kernels.snapshot(p.pid);
                        if let Some(rec) = self.processes.observe(p.pid, "fork", ts, &p.comm) {
                            out.push(Record::Process(trace::Process { ppid: p.parent, ..rec }));
                        }
                    }
                    ProcEvent::Exec => {
                        // A new program: handles of the old image mean nothing now.
                        self.kernels.forget(p.pid);
                        self.kernels.snapshot(p.pid);
                        self.newly_seen.push(p.pid);
                        // Its libraries load after exec: look again at its first API event.
                        self.scanned.remove(&p.pid);
                        self.last_scanned = 0;
                        if let Some(rec) = self.processes.observe(p.pid, "exec", ts, &p.comm) {
                            out.push(Record::Process(rec));
                        }
                    }
                    ProcEvent::Exit => {
                        self.kernels.forget(p.pid);
                        self.hsa_symbols.retain(|(pid, _), _| *pid != p.pid);
                        self.scanned.remove(&p.pid);
                        self.last_scanned = 0;
                        self.capturing.retain(|(pid, _)| *pid != p.pid);
                        self.cuda_kernels.retain(|(pid, _), _| *pid != p.pid);
                        self.fds.retain(|(pid, _), _| *pid != p.pid);
                        self.processes.forget(p.pid);
                        if self.own_child != Some(p.pid) {
                            out.push(Record::Exit(trace::Exit { ts, pid: p.pid, code: None, signal: None }));
                        }
                    }
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
        if n.api == ApiFunc::HsaExecutableGetSymbolByName {
            // A code-object symbol (`<kernel>.kd`): named now, bound to its kernel object by get_info.
            let name = n.name.strip_suffix(".kd").unwrap_or(&n.name).to_owned();
            self.hsa_symbols.insert((o.pid, n.handle), name);
            return;
        }
        let source = match n.api {
            ApiFunc::HipModuleGetFunction | ApiFunc::CuModuleGetFunction => Source::Module,
            ApiFunc::CuLibraryGetKernel => {
                self.cuda_kernels.insert((o.pid, n.handle), (n.name.clone(), n.truncated));
                Source::Library
            }
            _ => Source::Register,
        };
        let source = if n.fault { Source::Unnamed } else { source };
        let rec = self.kernels.bind(o.pid, n.handle, n.module, &n.name, source, n.truncated, o.ts);
        out.push(Record::Kernel(rec));
    }
}

/// The API name as users know it (the C++ export of hipExtModuleLaunchKernel is reported under its C
/// name, with the mangled form kept in the probe records).
trait SymbolName {
    fn symbol_name(self) -> &'static str;
}

impl SymbolName for ApiFunc {
    fn symbol_name(self) -> &'static str {
        match self {
            ApiFunc::HipExtModuleLaunchKernelCxx => "hipExtModuleLaunchKernel",
            f => f.symbol(),
        }
    }
}

#[cfg(test)]
mod tests {
    use tracer_common::ApiFunc;

    use super::*;
    use crate::decode::{GridUnit, Launch, Origin};

    fn origin(ts: u64) -> Origin {
        // A PID that cannot exist, so /proc lookups find nothing and only the events speak.
        Origin { pid: 0x3fff_fff0, tid: 1, lib: 1, ts }
    }

    fn launch(handle: u64, ret: i32) -> Event {
        Event::Launch(Launch {
            origin: origin(10),
            api: ApiFunc::HipLaunchKernel,
            handle,
            grid: [4, 1, 1],
            block: [64, 1, 1],
            grid_unit: GridUnit::Blocks,
            shmem: 0,
            stream: 0,
            ret,
            dur: 3,
            entry_only: false,
        })
    }

    #[test]
    fn launches_on_a_capturing_stream_are_graph_nodes() {
        let mut a = Attributor::default();
        let mut out = Vec::new();
        let capture = |api, ret| {
            Event::Call(crate::decode::Call {
                origin: origin(1),
                api: Some(api),
                ret,
                stream: Some(0),
                ..Default::default()
            })
        };
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
        let launches: Vec<&trace::Launch> =
            out.iter().filter_map(|r| if let Record::Launch(l) = r { Some(l) } else { None }).collect();
        assert_eq!(kernels.len(), 2);
        assert_eq!(
            (kernels[0].demangled.as_str(), kernels[0].source.as_str()),
            ("axpy(float*, float*, float)", "register")
        );
        assert_eq!(kernels[1].source, "unnamed");
        assert_eq!(launches[0].kernel, Some(kernels[0].id));
        assert_eq!(launches[1].kernel, Some(kernels[1].id));
        assert_eq!(launches[0].ret, 101);
        assert_eq!(a.kernels.unnamed, 1);
    }
}
