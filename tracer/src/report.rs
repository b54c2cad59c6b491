//! `tracer report`: what a trace says, per process: kernels launched (with shapes and failures), the
//! `<<<>>>` configurations pushed, API calls with their errors and time, memory traffic, and losses.

use std::{
    collections::{BTreeMap, HashMap},
    fmt::Write as _,
    path::Path,
};

use anyhow::Result;
use serde::Serialize;

use crate::trace::{self, Record};

#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub trace: TraceInfo,
    pub libraries: Vec<trace::Library>,
    /// Probes that could not be attached, with the reason.
    pub probes_missing: Vec<trace::Probe>,
    pub processes: Vec<ProcessReport>,
    pub drops: BTreeMap<String, u64>,
    pub drops_total: u64,
    pub counters: BTreeMap<String, u64>,
}

#[derive(Debug, Default, Serialize)]
pub struct TraceInfo {
    pub path: String,
    pub schema: u32,
    pub tracer_version: String,
    pub host: String,
    pub kernel_release: String,
    pub duration_s: f64,
    pub stop: Option<String>,
    /// Set when the file did not end normally.
    pub warning: Option<String>,
    /// Records of types this tracer does not know (from a newer tracer), skipped.
    pub unknown_records: u64,
}

#[derive(Debug, Default, Serialize)]
pub struct ProcessReport {
    pub pid: u32,
    pub ppid: u32,
    pub comm: String,
    pub argv: Vec<String>,
    /// "ollama-server", "runner", or null.
    pub role: Option<String>,
    pub model: Option<String>,
    pub model_name: Option<String>,
    /// GPU libraries this process mapped, and whether it called the ones tracer probes.
    pub mapped: Vec<MappedReport>,
    /// GPU driver ioctls by name.
    pub ioctls: Vec<IoctlReport>,
    /// HSA queues the process created.
    pub queues: Vec<trace::Queue>,
    /// What reached the GPU queues, per kernel (AQL kernel dispatch packets), and barrier packets.
    pub dispatches: Vec<DispatchReport>,
    pub barrier_packets: u64,
    /// Graph replays (hipGraphLaunch, cuGraphLaunch), and those of an executable whose capture tracer
    /// did not see (its kernels' executions cannot be counted).
    pub graph_replays: u64,
    pub graph_replays_unresolved: u64,
    /// The HIP API launches and the queue dispatches joined by kernel name, differences explained.
    pub crosscheck: Vec<CrossRow>,
    /// Steps (graph evaluations) by phase: prefill, decode, other.
    pub phases: Vec<crate::phase::PhaseReport>,
    pub exit_code: Option<i32>,
    pub exit_signal: Option<i32>,
    pub exited: bool,
    pub kernels: Vec<KernelReport>,
    pub configs: ConfigReport,
    pub api: Vec<ApiReport>,
    pub memory: MemoryReport,
    /// Library ids whose probes fired for this process.
    pub libraries: Vec<u32>,
}

#[derive(Debug, Default, Serialize)]
pub struct MappedReport {
    pub path: String,
    /// The probed library id, when tracer probes this copy.
    pub lib: Option<u32>,
    /// "called" (probes on it fired for this process), "mapped-only" (probed, never called), or
    /// "not-probed" (a library tracer does not instrument).
    pub status: String,
    /// The probed copy's origin ("ollama-bundle", "system", "user").
    pub origin: Option<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct DispatchReport {
    pub kernel: Option<u32>,
    pub name: String,
    pub demangled: String,
    pub class: KernelClass,
    pub source: String,
    pub kernel_object: u64,
    pub dispatches: u64,
    /// (workgroup, grid in work-items, group segment bytes) with counts.
    pub shapes: Vec<DispatchShape>,
    /// The file and offload bundles holding the kernel's code, from the process's registration of the
    /// same kernel name (see `KernelReport`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_file: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bundles: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct DispatchShape {
    pub workgroup: [u16; 3],
    pub grid: [u32; 3],
    pub group_segment: u32,
    pub count: u64,
}

#[derive(Debug, Default, Serialize)]
pub struct CrossRow {
    /// The kernel's mangled name, or `kernel_object 0x...` when the queue saw an unnamed object.
    pub kernel: String,
    pub demangled: String,
    /// Launch calls at the HIP API (all of them).
    pub api_launches: u64,
    pub api_failed: u64,
    /// Launches made while their stream was capturing a graph (graph nodes, not dispatches).
    pub api_captured: u64,
    /// Kernel dispatch packets seen at the queues.
    pub queue_dispatches: u64,
    /// Why the two counts differ; empty when they agree.
    pub explanation: String,
}

#[derive(Debug, Default, Serialize)]
pub struct IoctlReport {
    pub name: String,
    pub device: Option<String>,
    pub calls: u64,
    pub errors: u64,
    /// Failed calls by errno name.
    pub errnos: BTreeMap<String, u64>,
    pub total_ns: u64,
}

/// What a kernel's name says it does (see `classify`).
#[derive(Debug, Default, Serialize)]
pub struct KernelClass {
    pub family: String,
    pub quant: Option<String>,
    /// "1" (exact columns, MMVQ) or "<=128" (MMQ tile width, from the name alone).
    pub batch: Option<String>,
}

impl KernelClass {
    fn of(name: &str) -> KernelClass {
        KernelClass::from(crate::classify::classify(name))
    }

    fn of_shape(name: &str, sh: &Shape) -> KernelClass {
        KernelClass::from(crate::classify::classify(name).with_shape(sh.grid, sh.block, sh.grid_unit == "work-items"))
    }

    fn from(c: crate::classify::Class) -> KernelClass {
        KernelClass {
            family: c.family.name().to_owned(),
            quant: c.quant.map(str::to_owned),
            batch: c.batch.map(crate::classify::Batch::label),
        }
    }

    fn text(&self) -> String {
        let mut s = self.family.clone();
        if let Some(q) = &self.quant {
            s += &format!(" {q}");
        }
        if let Some(b) = &self.batch {
            s += &format!(" b{b}");
        }
        s
    }
}

#[derive(Debug, Default, Serialize)]
pub struct KernelReport {
    pub id: u32,
    pub name: String,
    pub demangled: String,
    pub class: KernelClass,
    pub source: String,
    pub handle: u64,
    /// The file holding the kernel's code and its offload bundles there (see `tracer inspect`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_file: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bundles: Vec<String>,
    pub launches: u64,
    /// Launches whose call returned an error.
    pub failed: u64,
    /// Times the kernel was submitted to run: launches that neither failed nor were captured into a
    /// graph, plus one per replay of each graph that captured it.
    pub executions: u64,
    /// Of those, the graph replays'.
    pub graph_executions: u64,
    /// Return codes seen, by value.
    pub returns: BTreeMap<i32, u64>,
    pub shapes: Vec<Shape>,
    pub apis: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Shape {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub grid_unit: String,
    pub shmem: u64,
    pub count: u64,
}

#[derive(Debug, Default, Serialize)]
pub struct ConfigReport {
    pub count: u64,
    pub failed: u64,
    pub shapes: Vec<Shape>,
}

#[derive(Debug, Default, Serialize)]
pub struct ApiReport {
    pub api: String,
    pub calls: u64,
    pub errors: u64,
    pub total_ns: u64,
    pub mean_ns: u64,
}

#[derive(Debug, Default, Serialize)]
pub struct MemoryReport {
    pub malloc_calls: u64,
    pub malloc_failed: u64,
    /// Bytes asked for by successful hipMalloc / cuMemAlloc calls.
    pub malloc_bytes: u64,
    /// Bytes asked for by all hipMalloc / cuMemAlloc calls, failed ones included.
    pub malloc_bytes_requested: u64,
    pub free_calls: u64,
    /// Per hipMemcpyKind: calls and bytes (all calls, failed ones included, as requested).
    pub memcpy: BTreeMap<String, MemcpyReport>,
}

#[derive(Debug, Default, Serialize)]
pub struct MemcpyReport {
    pub calls: u64,
    pub failed: u64,
    pub bytes: u64,
}

#[derive(Default)]
struct ProcAcc {
    info: trace::Process,
    exit: Option<trace::Exit>,
    kernels: BTreeMap<u32, KernelAcc>,
    configs: ConfigReport,
    config_shapes: HashMap<ShapeKey, u64>,
    api: BTreeMap<String, ApiReport>,
    memory: MemoryReport,
    libs: std::collections::BTreeSet<u32>,
    mapped: Vec<trace::Mapping>,
    ioctls: BTreeMap<String, IoctlReport>,
    queues: Vec<trace::Queue>,
    /// Per kernel object: kernel id, count, object, shapes.
    dispatches: DispatchAcc,
    barrier_packets: u64,
    /// Per kernel id: launches, failed, captured.
    launch_outcomes: BTreeMap<u32, (u64, u64, u64)>,
    graphs: GraphAcc,
    phases: crate::phase::Phases,
    /// Kernel id -> classification, computed once.
    classes: HashMap<u32, crate::classify::Class>,
}

/// Kernel id -> count.
type KernelBag = BTreeMap<u32, u64>;

/// What graph replays ran: launches captured per capturing stream, the graph each capture made, the
/// executables instantiated from them, and per kernel the executions their replays added.
#[derive(Default)]
struct GraphAcc {
    capturing: HashMap<u64, KernelBag>,
    graphs: HashMap<u64, KernelBag>,
    execs: HashMap<u64, KernelBag>,
    replayed: KernelBag,
    /// Successful graph launches (replays).
    replays: u64,
    /// Replays of an executable whose capture was not seen (made before tracer started).
    unknown_replays: u64,
}

impl GraphAcc {
    fn call(&mut self, c: &trace::Call) {
        let ok = c.ret == 0;
        match &*c.api {
            "hipStreamEndCapture" | "cuStreamEndCapture" | "cuStreamEndCapture_ptsz" => {
                let bag = self.capturing.remove(&c.stream.unwrap_or(0)).unwrap_or_default();
                if let (true, Some(graph)) = (ok, c.handle) {
                    self.graphs.insert(graph, bag);
                }
            }
            "hipGraphInstantiate"
            | "cuGraphInstantiateWithFlags"
            | "cuGraphInstantiateWithParams"
            | "cuGraphInstantiate_v2" => {
                if let (true, Some(graph), Some(exec)) = (ok, c.handle, c.value) {
                    self.execs.insert(exec, self.graphs.get(&graph).cloned().unwrap_or_default());
                }
            }
            api if ok && crate::phase::is_graph_launch(api) => {
                self.replays += 1;
                match c.handle.and_then(|e| self.execs.get(&e)) {
                    Some(bag) => {
                        for (id, n) in bag {
                            *self.replayed.entry(*id).or_default() += n;
                        }
                    }
                    None => self.unknown_replays += 1,
                }
            }
            _ => {}
        }
    }
}

/// (grid, block, grid counted in work-items, shmem).
type ShapeKey = ([u32; 3], [u32; 3], bool, u64);

#[derive(Default)]
struct KernelAcc {
    report: KernelReport,
    shapes: HashMap<ShapeKey, u64>,
}

fn shapes(m: HashMap<ShapeKey, u64>) -> Vec<Shape> {
    let mut v: Vec<Shape> = m
        .into_iter()
        .map(|((grid, block, work_items, shmem), count)| Shape {
            grid,
            block,
            grid_unit: if work_items { "work-items" } else { "blocks" }.to_owned(),
            shmem,
            count,
        })
        .collect();
    v.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.cmp(b)));
    v
}

/// Builds a [`Report`] one record at a time, so a trace of any length is summarized in bounded memory.
#[derive(Default)]
pub struct ReportBuilder {
    report: Report,
    procs: BTreeMap<u32, ProcAcc>,
    kernel_names: HashMap<u32, trace::Kernel>,
    start: u64,
    last_ts: u64,
}

impl ReportBuilder {
    pub fn add(&mut self, rec: Record) {
        let report = &mut self.report;
        let procs = &mut self.procs;
        let kernel_names = &mut self.kernel_names;
        let last_ts = &mut self.last_ts;
        match rec {
            Record::Header(h) => {
                self.start = h.start_mono_ns;
                report.trace.schema = h.schema;
                report.trace.tracer_version = h.tracer_version;
                report.trace.host = h.host;
                report.trace.kernel_release = h.kernel_release;
            }
            Record::Library(l) => report.libraries.push(l),
            Record::Probe(p) => {
                if p.error.is_some() {
                    report.probes_missing.push(p);
                }
            }
            Record::Process(p) => {
                let acc = procs.entry(p.pid).or_default();
                acc.info = p;
            }
            Record::Kernel(k) => {
                procs.entry(k.pid).or_default();
                kernel_names.insert(k.id, k);
            }
            Record::Launch(l) => {
                *last_ts = (*last_ts).max(l.ts);
                let acc = procs.entry(l.pid).or_default();
                acc.libs.insert(l.lib);
                api_stat(&mut acc.api, &l.api, l.ret as i64, l.dur);
                let id = l.kernel.unwrap_or(0);
                let k = acc.kernels.entry(id).or_insert_with(|| {
                    let mut k = KernelAcc::default();
                    k.report.id = id;
                    if let Some(n) = kernel_names.get(&id) {
                        k.report.name = n.name.clone();
                        k.report.demangled = n.demangled.clone();
                        k.report.source = n.source.clone();
                        k.report.handle = n.handle;
                        k.report.code_file = n.code_file.clone();
                        k.report.bundles = n.bundles.clone();
                    } else {
                        k.report.source = "unnamed".into();
                        k.report.handle = l.handle;
                    }
                    k
                });
                k.report.launches += 1;
                if l.ret != 0 {
                    k.report.failed += 1;
                }
                let class = class_of(&mut acc.classes, kernel_names, id);
                acc.phases.launch(class.with_shape(l.grid, l.block, &*l.grid_unit == "work-items"), l.ts);
                let o = acc.launch_outcomes.entry(id).or_default();
                o.0 += 1;
                o.1 += u64::from(l.ret != 0);
                o.2 += u64::from(l.captured);
                if l.captured {
                    *acc.graphs.capturing.entry(l.stream).or_default().entry(id).or_default() += 1;
                }
                *k.report.returns.entry(l.ret).or_default() += 1;
                if !k.report.apis.iter().any(|a| *a == l.api) {
                    k.report.apis.push(l.api.to_string());
                }
                *k.shapes.entry((l.grid, l.block, l.grid_unit == "work-items", l.shmem)).or_default() += 1;
            }
            Record::Config(c) => {
                *last_ts = (*last_ts).max(c.ts);
                let acc = procs.entry(c.pid).or_default();
                acc.libs.insert(c.lib);
                api_stat(&mut acc.api, "__hipPushCallConfiguration", c.ret as i64, c.dur);
                acc.configs.count += 1;
                if c.ret != 0 {
                    acc.configs.failed += 1;
                }
                *acc.config_shapes.entry((c.grid, c.block, false, c.shmem)).or_default() += 1;
            }
            Record::Call(c) => {
                *last_ts = (*last_ts).max(c.ts);
                let acc = procs.entry(c.pid).or_default();
                acc.libs.insert(c.lib);
                api_stat(&mut acc.api, &c.api, c.ret, c.dur);
                acc.graphs.call(&c);
                acc.phases.call(&c.api, c.kind.as_deref(), c.ts);
                let m = &mut acc.memory;
                match &*c.api {
                    "hipMalloc" | "cuMemAlloc_v2" => {
                        m.malloc_calls += 1;
                        m.malloc_bytes_requested += c.size.unwrap_or(0);
                        if c.ret == 0 {
                            m.malloc_bytes += c.size.unwrap_or(0);
                        } else {
                            m.malloc_failed += 1;
                        }
                    }
                    "hipFree" | "cuMemFree_v2" => m.free_calls += 1,
                    "hipMemcpy"
                    | "hipMemcpyAsync"
                    | "cuMemcpyDtoH_v2"
                    | "cuMemcpyHtoD_v2"
                    | "cuMemcpyDtoHAsync_v2"
                    | "cuMemcpyAsync" => {
                        let e = m.memcpy.entry(c.kind.as_deref().unwrap_or("unknown").to_owned()).or_default();
                        e.calls += 1;
                        e.bytes += c.size.unwrap_or(0);
                        if c.ret != 0 {
                            e.failed += 1;
                        }
                    }
                    _ => {}
                }
            }
            Record::Exit(e) => {
                let acc = procs.entry(e.pid).or_default();
                acc.exit = Some(e);
            }
            Record::Mapping(m) => procs.entry(m.pid).or_default().mapped.push(m),
            Record::Queue(q) => procs.entry(q.pid).or_default().queues.push(q),
            Record::Dispatch(d) => {
                *last_ts = (*last_ts).max(d.ts);
                let acc = procs.entry(d.pid).or_default();
                acc.libs.insert(d.lib);
                if d.kernel.is_none() {
                    acc.barrier_packets += 1;
                } else {
                    let id = d.kernel.unwrap_or(0);
                    let class = class_of(&mut acc.classes, kernel_names, id);
                    acc.phases.dispatch(class.with_shape(d.grid, d.workgroup.map(u32::from), true), d.ts);
                    let e = acc
                        .dispatches
                        .entry(d.kernel_object)
                        .or_insert_with(|| (d.kernel, 0, d.kernel_object, HashMap::new()));
                    e.1 += 1;
                    *e.3.entry((d.workgroup, d.grid, d.group_segment)).or_default() += 1;
                }
            }
            Record::Ioctl(i) => {
                *last_ts = (*last_ts).max(i.ts);
                let acc = procs.entry(i.pid).or_default();
                let e = acc.ioctls.entry(i.name.clone()).or_insert_with(|| IoctlReport {
                    name: i.name.clone(),
                    device: i.device.clone(),
                    ..Default::default()
                });
                e.calls += 1;
                e.total_ns += i.dur;
                if i.ret < 0 {
                    e.errors += 1;
                    let errno =
                        crate::ioctl::errno_name(i.ret).map_or_else(|| format!("errno {}", -i.ret), str::to_owned);
                    *e.errnos.entry(errno).or_default() += 1;
                }
            }
            Record::Footer(f) => {
                *last_ts = (*last_ts).max(f.end_mono_ns);
                report.trace.stop = Some(f.stop.clone());
                report.drops_total = f.total_drops();
                report.drops = f.drops.iter().map(|(k, v)| (k.clone(), v.iter().sum())).collect();
                report.counters = f.counters;
            }
        }
    }

    pub fn finish(self) -> Report {
        let mut report = self.report;
        report.trace.duration_s = self.last_ts.saturating_sub(self.start) as f64 / 1e9;
        for (pid, acc) in self.procs {
            let mut kernels: Vec<KernelReport> = acc
                .kernels
                .into_values()
                .map(|k| {
                    let shapes = shapes(k.shapes);
                    // The batch from the most frequent launch shape where the shape refines it (MMQ's grid).
                    let class = match shapes.first() {
                        Some(sh) => KernelClass::of_shape(&k.report.name, sh),
                        None => KernelClass::of(&k.report.name),
                    };
                    let (launched, failed, captured) =
                        acc.launch_outcomes.get(&k.report.id).copied().unwrap_or_default();
                    let replayed = acc.graphs.replayed.get(&k.report.id).copied().unwrap_or(0);
                    let executions = launched - failed - captured + replayed;
                    KernelReport { shapes, class, executions, graph_executions: replayed, ..k.report }
                })
                .collect();
            kernels.sort_by(|a, b| b.launches.cmp(&a.launches).then(a.id.cmp(&b.id)));
            let mut api: Vec<ApiReport> = acc
                .api
                .into_values()
                .map(|mut a| {
                    a.mean_ns = a.total_ns / a.calls.max(1);
                    a
                })
                .collect();
            api.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.api.cmp(&b.api)));
            let origins: HashMap<u32, String> = report.libraries.iter().map(|l| (l.id, l.origin.clone())).collect();
            // A probed copy this process called is mapped by it, even if it ended before its maps were read.
            let mut seen_maps: Vec<trace::Mapping> = acc.mapped;
            for id in &acc.libs {
                if !seen_maps.iter().any(|m| m.lib == Some(*id))
                    && let Some(l) = report.libraries.iter().find(|l| l.id == *id)
                {
                    seen_maps.push(trace::Mapping {
                        ts: 0,
                        pid,
                        path: l.path.clone(),
                        dev: l.dev,
                        inode: l.inode,
                        lib: Some(*id),
                    });
                }
            }
            let mapped = seen_maps
                .into_iter()
                .map(|m| MappedReport {
                    status: match m.lib {
                        Some(id) if acc.libs.contains(&id) => "called",
                        Some(_) => "mapped-only",
                        None => "not-probed",
                    }
                    .to_owned(),
                    origin: m.lib.and_then(|id| origins.get(&id).cloned()),
                    lib: m.lib,
                    path: m.path,
                })
                .collect();
            let (dispatches, crosscheck) =
                queue_view(&self.kernel_names, acc.dispatches, &acc.launch_outcomes, acc.graphs.replays);
            let mut ioctls: Vec<IoctlReport> = acc.ioctls.into_values().collect();
            ioctls.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.name.cmp(&b.name)));
            report.processes.push(ProcessReport {
                pid,
                ppid: acc.info.ppid,
                comm: acc.info.comm,
                argv: acc.info.argv,
                role: acc.info.role,
                model: acc.info.model,
                model_name: acc.info.model_name,
                mapped,
                ioctls,
                queues: acc.queues,
                phases: acc.phases.finish(),
                dispatches,
                barrier_packets: acc.barrier_packets,
                graph_replays: acc.graphs.replays,
                graph_replays_unresolved: acc.graphs.unknown_replays,
                crosscheck,
                exit_code: acc.exit.as_ref().and_then(|e| e.code),
                exit_signal: acc.exit.as_ref().and_then(|e| e.signal),
                exited: acc.exit.is_some(),
                kernels,
                configs: ConfigReport { shapes: shapes(acc.config_shapes), ..acc.configs },
                api,
                memory: acc.memory,
                libraries: acc.libs.into_iter().collect(),
            });
        }
        report
    }
}

/// "(code: FILE bundle 0042)" for a kernel whose code file and bundles are known.
fn code_text(file: Option<&str>, bundles: &[String]) -> Option<String> {
    let file = file.filter(|_| !bundles.is_empty())?;
    let which = if bundles.len() == 1 { "bundle" } else { "bundles" };
    Some(format!("(code: {file} {which} {})", bundles.join(", ")))
}

/// A kernel's classification, computed once per kernel id.
fn class_of(
    classes: &mut HashMap<u32, crate::classify::Class>,
    names: &HashMap<u32, trace::Kernel>,
    id: u32,
) -> crate::classify::Class {
    classes
        .entry(id)
        .or_insert_with(|| crate::classify::classify(names.get(&id).map_or("", |k| k.name.as_str())))
        .clone()
}

/// (workgroup, grid, group segment) -> count.
type DispatchShapes = HashMap<([u16; 3], [u32; 3], u32), u64>;
/// kernel object -> (kernel id, dispatches, kernel object, shapes).
type DispatchAcc = BTreeMap<u64, (Option<u32>, u64, u64, DispatchShapes)>;

/// The queue's view of one process, and its join with the API's launches by kernel name.
fn queue_view(
    names: &HashMap<u32, trace::Kernel>,
    dispatches: DispatchAcc,
    launches: &BTreeMap<u32, (u64, u64, u64)>,
    graph_launches: u64,
) -> (Vec<DispatchReport>, Vec<CrossRow>) {
    let mut rows: BTreeMap<String, CrossRow> = BTreeMap::new();
    let name_of = |id: u32| names.get(&id).filter(|k| !k.name.is_empty());
    for (&id, &(n, failed, captured)) in launches {
        let Some(k) = name_of(id) else { continue };
        let r = rows.entry(k.name.clone()).or_insert_with(|| CrossRow {
            kernel: k.name.clone(),
            demangled: k.demangled.clone(),
            ..Default::default()
        });
        r.api_launches += n;
        r.api_failed += failed;
        r.api_captured += captured;
    }
    let mut reports = Vec::new();
    for (object, (kernel, count, _, shapes)) in dispatches {
        let k = kernel.and_then(name_of);
        let key = k.map_or_else(|| format!("kernel_object {object:#x}"), |k| k.name.clone());
        let r = rows.entry(key.clone()).or_insert_with(|| CrossRow {
            kernel: key.clone(),
            demangled: k.map(|k| k.demangled.clone()).unwrap_or_default(),
            ..Default::default()
        });
        r.queue_dispatches += count;
        let mut shapes: Vec<DispatchShape> = shapes
            .into_iter()
            .map(|((workgroup, grid, group_segment), count)| DispatchShape { workgroup, grid, group_segment, count })
            .collect();
        shapes.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.cmp(b)));
        // The queue names a kernel object; the process's registration of the same name knows its bundle.
        let code = k.and_then(|k| names.values().find(|r| r.pid == k.pid && r.name == k.name && !r.bundles.is_empty()));
        reports.push(DispatchReport {
            code_file: code.and_then(|c| c.code_file.clone()),
            bundles: code.map(|c| c.bundles.clone()).unwrap_or_default(),
            kernel,
            class: KernelClass::of(k.map_or("", |k| k.name.as_str())),
            name: k.map(|k| k.name.clone()).unwrap_or_default(),
            demangled: k.map(|k| k.demangled.clone()).unwrap_or_default(),
            source: kernel.and_then(|id| names.get(&id)).map_or_else(|| "unnamed".to_owned(), |k| k.source.clone()),
            kernel_object: object,
            dispatches: count,
            shapes,
        });
    }
    reports.sort_by(|a, b| b.dispatches.cmp(&a.dispatches).then(a.kernel_object.cmp(&b.kernel_object)));
    let any_dispatch = !reports.is_empty();
    let mut out: Vec<CrossRow> = rows.into_values().collect();
    for r in &mut out {
        r.explanation = explain(r, graph_launches, any_dispatch);
    }
    out.sort_by_key(|r| std::cmp::Reverse(r.queue_dispatches.max(r.api_launches)));
    (reports, out)
}

fn explain(r: &CrossRow, graph_launches: u64, queue_seen: bool) -> String {
    let expected = r.api_launches.saturating_sub(r.api_failed + r.api_captured);
    if expected == r.queue_dispatches {
        let mut notes = Vec::new();
        if r.api_failed > 0 {
            notes.push(format!("{} launches failed and reached no queue", r.api_failed));
        }
        if r.api_captured > 0 {
            notes.push(format!("{} launches were captured into a graph", r.api_captured));
        }
        return notes.join("; ");
    }
    let mut why = Vec::new();
    if r.api_failed > 0 {
        why.push(format!("{} launches failed and reached no queue", r.api_failed));
    }
    if r.api_captured > 0 {
        why.push(format!("{} launches were captured into a graph (dispatched at replay)", r.api_captured));
    }
    if r.queue_dispatches > expected {
        let extra = r.queue_dispatches - expected;
        if r.kernel.starts_with("kernel_object ") {
            why.push(format!("{extra} dispatches of an object loaded before the tracer started: unnamed"));
        } else if r.kernel.starts_with("__amd_rocclr_") {
            why.push(format!("{extra} runtime-internal (copy/fill) dispatches, never a HIP launch"));
        } else if graph_launches > 0 {
            why.push(format!("{extra} dispatches from graph replays ({graph_launches} hipGraphLaunch)"));
        } else if r.kernel.starts_with("Cijk_") || r.kernel.contains("hipblaslt") || r.api_launches == 0 {
            why.push(format!(
                "{extra} dispatches with no HIP launch probed: a library kernel or an unprobed entry point"
            ));
        } else {
            why.push(format!("{extra} dispatches more than launches"));
        }
    } else if !queue_seen {
        why.push("no queue dispatch seen at all: no HSA runtime probed, or no GPU".to_owned());
    } else {
        why.push(format!("{} launches reached no queue", expected - r.queue_dispatches));
    }
    why.join("; ")
}

impl Report {
    /// Reads a trace file and summarizes it, streaming.
    pub fn from_file(path: &Path) -> Result<Report> {
        let mut b = ReportBuilder::default();
        let status = trace::for_each_record(path, |r| b.add(r))?;
        let mut r = b.finish();
        r.trace.path = path.display().to_string();
        r.trace.warning = status.warning();
        r.trace.unknown_records = status.unknown_records;
        Ok(r)
    }

    pub fn build(records: Vec<Record>) -> Report {
        let mut b = ReportBuilder::default();
        for r in records {
            b.add(r);
        }
        b.finish()
    }

    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let t = &self.trace;
        let _ =
            writeln!(s, "trace {} — tracer {}, host {}, kernel {}", t.path, t.tracer_version, t.host, t.kernel_release);
        let _ =
            writeln!(s, "recorded {:.3} s, stopped by {}", t.duration_s, t.stop.as_deref().unwrap_or("(no footer)"));
        if let Some(w) = &t.warning {
            let _ = writeln!(s, "warning: {w}");
        }
        if t.unknown_records > 0 {
            let _ = writeln!(s, "note: {} records of types this tracer does not know were skipped", t.unknown_records);
        }
        let _ = writeln!(s, "\nlibraries");
        for l in &self.libraries {
            let _ = writeln!(s, "  [{}] {} ({}, inode {})", l.id, l.path, l.origin, l.inode);
        }
        for p in &self.probes_missing {
            let _ = writeln!(
                s,
                "  [{}] not probed: {}: {}",
                p.lib,
                short_api(&p.api),
                p.error.as_deref().unwrap_or_default()
            );
        }
        for p in &self.processes {
            let _ = writeln!(s, "\nprocess {} {} — {}", p.pid, p.comm, p.argv.join(" "));
            if let Some(role) = &p.role {
                let model = match (&p.model_name, &p.model) {
                    (Some(name), Some(path)) => format!(", model {name} ({path})"),
                    (None, Some(path)) => format!(", model {path}"),
                    _ => String::new(),
                };
                let _ = writeln!(s, "  role: {role}{model}");
            }
            if !p.mapped.is_empty() {
                let _ = writeln!(s, "  GPU libraries (mapped vs called):");
                for m in &p.mapped {
                    let copy = m.origin.as_deref().map(|o| format!(" [{o}]")).unwrap_or_default();
                    let _ = writeln!(s, "    {:<12} {}{copy}", m.status, m.path);
                }
            }
            if p.exited {
                match (p.exit_code, p.exit_signal) {
                    (Some(c), _) => {
                        let _ = writeln!(s, "  exited with status {c}");
                    }
                    (_, Some(sig)) => {
                        let _ = writeln!(s, "  killed by signal {sig}");
                    }
                    _ => {
                        let _ = writeln!(s, "  exited");
                    }
                }
            }
            if !p.kernels.is_empty() {
                let _ = writeln!(s, "\n  kernels launched ({}):", p.kernels.len());
                let _ =
                    writeln!(s, "  {:>8} {:>7}  {:<34} kernel", "launches", "failed", "grid x block (shmem) [count]");
            }
            for k in &p.kernels {
                let name = if k.demangled.is_empty() {
                    format!("unnamed handle {:#x}", k.handle)
                } else {
                    k.demangled.clone()
                };
                let first = k.shapes.first().map(shape_text).unwrap_or_default();
                let _ =
                    writeln!(s, "  {:>8} {:>7}  {:<34} {:<22} {}", k.launches, k.failed, first, k.class.text(), name);
                for sh in k.shapes.iter().skip(1) {
                    let _ = writeln!(s, "  {:>8} {:>7}  {:<34}", "", "", shape_text(sh));
                }
                if k.source == "elf" {
                    let _ = writeln!(s, "  {:>8} {:>7}  (name from {})", "", "", k.source);
                }
                if k.graph_executions > 0 {
                    let _ = writeln!(
                        s,
                        "  {:>8} {:>7}  (ran {} times: {} from graph replays)",
                        "", "", k.executions, k.graph_executions
                    );
                }
                if let Some(code) = code_text(k.code_file.as_deref(), &k.bundles) {
                    let _ = writeln!(s, "  {:>8} {:>7}  {code}", "", "");
                }
                let errors: Vec<String> = k
                    .returns
                    .iter()
                    .filter(|(code, _)| **code != 0)
                    .map(|(code, n)| format!("{} x{n}", error_text(*code as i64)))
                    .collect();
                if !errors.is_empty() {
                    let _ = writeln!(s, "  {:>8} {:>7}  returned {}", "", "", errors.join(", "));
                }
            }
            if p.configs.count > 0 {
                let _ = writeln!(
                    s,
                    "\n  kernel<<<>>> configurations pushed: {} ({} failed)",
                    p.configs.count, p.configs.failed
                );
                for sh in &p.configs.shapes {
                    let _ = writeln!(s, "    {}", shape_text(sh));
                }
            }
            if !p.api.is_empty() {
                let _ = writeln!(s, "\n  API calls:");
                let _ =
                    writeln!(s, "  {:<42} {:>8} {:>8} {:>12} {:>10}", "api", "calls", "errors", "total µs", "mean µs");
            }
            for a in &p.api {
                let _ = writeln!(
                    s,
                    "  {:<42} {:>8} {:>8} {:>12.1} {:>10.2}",
                    a.api,
                    a.calls,
                    a.errors,
                    a.total_ns as f64 / 1e3,
                    a.mean_ns as f64 / 1e3
                );
            }
            if p.phases.iter().any(|ph| ph.phase != "other") {
                let _ =
                    writeln!(s, "\n  phases (a step ends at the sync after the logits copy, or at a graph replay):");
                let _ = writeln!(s, "  {:<8} {:>6}  {:<16} kernels", "phase", "steps", "batch widths");
                for ph in &p.phases {
                    let widths: Vec<&str> = ph.batch_widths.iter().map(String::as_str).collect();
                    let kernels: Vec<String> = ph.kernels.iter().map(|(k, n)| format!("{k} x{n}")).collect();
                    let _ = writeln!(
                        s,
                        "  {:<8} {:>6}  {:<16} {}",
                        ph.phase,
                        ph.steps,
                        if widths.is_empty() { "-".to_owned() } else { widths.join(", ") },
                        kernels.join(", ")
                    );
                }
            }
            if !p.queues.is_empty() || !p.dispatches.is_empty() {
                let _ = writeln!(
                    s,
                    "\n  at the GPU queues ({} queue{}, {} barrier packet{}):",
                    p.queues.len(),
                    if p.queues.len() == 1 { "" } else { "s" },
                    p.barrier_packets,
                    if p.barrier_packets == 1 { "" } else { "s" }
                );
                let _ = writeln!(
                    s,
                    "  {:>10}  {:<38} {:<22} kernel",
                    "dispatches", "workgroup / grid work-items (LDS)", "family"
                );
                for d in &p.dispatches {
                    let name = if d.demangled.is_empty() {
                        format!("unnamed kernel_object {:#x} (loaded before the tracer started)", d.kernel_object)
                    } else {
                        d.demangled.clone()
                    };
                    let first = d.shapes.first().map(dispatch_shape_text).unwrap_or_default();
                    let _ = writeln!(s, "  {:>10}  {:<38} {:<22} {}", d.dispatches, first, d.class.text(), name);
                    for sh in d.shapes.iter().skip(1) {
                        let _ = writeln!(s, "  {:>10}  {:<38}", "", dispatch_shape_text(sh));
                    }
                    if let Some(code) = code_text(d.code_file.as_deref(), &d.bundles) {
                        let _ = writeln!(s, "  {:>10}  {code}", "");
                    }
                }
                let _ = writeln!(s, "\n  API launches vs queue dispatches:");
                let _ = writeln!(s, "  {:>8} {:>10}  {:<50} why they differ", "launches", "dispatches", "kernel");
                for r in &p.crosscheck {
                    let name = if r.demangled.is_empty() { &r.kernel } else { &r.demangled };
                    let _ = writeln!(
                        s,
                        "  {:>8} {:>10}  {:<50} {}",
                        r.api_launches,
                        r.queue_dispatches,
                        name,
                        if r.explanation.is_empty() { "-" } else { &r.explanation }
                    );
                }
            }
            if !p.ioctls.is_empty() {
                let _ = writeln!(s, "\n  GPU driver ioctls:");
                let _ = writeln!(s, "  {:<40} {:>8} {:>8} {:>12}  errors", "ioctl", "calls", "failed", "total µs");
                for i in &p.ioctls {
                    let errs: Vec<String> = i.errnos.iter().map(|(k, v)| format!("{k} x{v}")).collect();
                    let _ = writeln!(
                        s,
                        "  {:<40} {:>8} {:>8} {:>12.1}  {}",
                        i.name,
                        i.calls,
                        i.errors,
                        i.total_ns as f64 / 1e3,
                        errs.join(", ")
                    );
                }
            }
            let m = &p.memory;
            if m.malloc_calls + m.free_calls > 0 || !m.memcpy.is_empty() {
                let _ = writeln!(s, "\n  memory:");
                let _ = writeln!(
                    s,
                    "    allocations (hipMalloc, cuMemAlloc) {} calls ({} failed), {} allocated of {} requested; frees {} calls",
                    m.malloc_calls,
                    m.malloc_failed,
                    bytes(m.malloc_bytes),
                    bytes(m.malloc_bytes_requested),
                    m.free_calls
                );
                for (kind, c) in &m.memcpy {
                    let _ =
                        writeln!(s, "    memcpy {kind}: {} calls ({} failed), {}", c.calls, c.failed, bytes(c.bytes));
                }
            }
        }
        let _ = writeln!(s, "\nlosses: {} records dropped (ring buffer full)", self.drops_total);
        let nonzero: Vec<String> =
            self.counters.iter().filter(|(_, v)| **v > 0).map(|(k, v)| format!("{k} {v}")).collect();
        if !nonzero.is_empty() {
            let _ = writeln!(s, "counted: {}", nonzero.join(", "));
        }
        s
    }
}

fn dispatch_shape_text(s: &DispatchShape) -> String {
    format!(
        "({},{},{}) / ({},{},{}) ({}) [{}]",
        s.workgroup[0], s.workgroup[1], s.workgroup[2], s.grid[0], s.grid[1], s.grid[2], s.group_segment, s.count
    )
}

fn error_text(code: i64) -> String {
    match crate::decode::hip_error_name(code) {
        Some(name) => format!("{name} ({code})"),
        None => format!("error {code}"),
    }
}

fn short_api(api: &str) -> &str {
    if api.starts_with("_Z24hipExtModuleLaunchKernel") {
        "hipExtModuleLaunchKernel (C++ export)"
    } else if api == "hipExtModuleLaunchKernel" {
        "hipExtModuleLaunchKernel (C export)"
    } else {
        api
    }
}

fn api_stat(api: &mut BTreeMap<String, ApiReport>, name: &str, ret: i64, dur: u64) {
    if !api.contains_key(name) {
        api.insert(name.to_owned(), ApiReport { api: name.to_owned(), ..Default::default() });
    }
    let a = api.get_mut(name).expect("inserted above");
    a.calls += 1;
    if ret != 0 {
        a.errors += 1;
    }
    a.total_ns += dur;
}

fn shape_text(s: &Shape) -> String {
    let unit = if s.grid_unit == "work-items" { " wi" } else { "" };
    format!(
        "({},{},{}){unit} x ({},{},{}) ({}) [{}]",
        s.grid[0], s.grid[1], s.grid[2], s.block[0], s.block[1], s.block[2], s.shmem, s.count
    )
}

fn bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 { format!("{b} B") } else { format!("{v:.1} {}", UNITS[i]) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Call, Config, Footer, Header, Kernel, Launch, Process};

    fn launch(kernel: u32, grid: [u32; 3], ret: i32) -> Record {
        Record::Launch(Launch {
            ts: 2_000_000_000,
            pid: 7,
            tid: 7,
            lib: 1,
            api: "hipLaunchKernel".into(),
            kernel: Some(kernel),
            handle: 0x100 * kernel as u64,
            grid,
            block: [256, 1, 1],
            grid_unit: "blocks".into(),
            shmem: 0,
            stream: 0,
            ret,
            dur: 1000,
            captured: false,
            entry_only: false,
        })
    }

    #[test]
    fn aggregates_per_process() {
        let records = vec![
            Record::Header(Header {
                format: trace::FORMAT.into(),
                schema: 1,
                start_mono_ns: 1_000_000_000,
                ..Default::default()
            }),
            Record::Process(Process {
                pid: 7,
                comm: "runner".into(),
                argv: vec!["runner".into()],
                ..Default::default()
            }),
            Record::Kernel(Kernel {
                id: 1,
                pid: 7,
                handle: 0x100,
                name: "_Z1av".into(),
                demangled: "a()".into(),
                source: "register".into(),
                ..Default::default()
            }),
            launch(1, [4, 1, 1], 101),
            launch(1, [4, 1, 1], 101),
            launch(1, [8, 1, 1], 0),
            Record::Config(Config {
                pid: 7,
                lib: 1,
                grid: [2, 1, 1],
                block: [64, 1, 1],
                ret: 101,
                dur: 500,
                ..Default::default()
            }),
            Record::Call(Call {
                pid: 7,
                lib: 1,
                api: "hipMalloc".into(),
                ret: 0,
                dur: 100,
                size: Some(4096),
                ..Default::default()
            }),
            Record::Call(Call {
                pid: 7,
                lib: 1,
                api: "hipMalloc".into(),
                ret: 2,
                dur: 100,
                size: Some(1 << 30),
                ..Default::default()
            }),
            Record::Call(Call {
                pid: 7,
                lib: 1,
                api: "hipMemcpy".into(),
                ret: 0,
                dur: 300,
                size: Some(64),
                kind: Some("DeviceToHost".into()),
                ..Default::default()
            }),
            Record::Footer(Footer {
                end_mono_ns: 3_000_000_000,
                drops: [("call".to_owned(), vec![1, 2])].into(),
                stop: "signal".into(),
                ..Default::default()
            }),
        ];
        let r = Report::build(records);
        assert_eq!(r.trace.duration_s, 2.0);
        assert_eq!(r.drops_total, 3);
        let p = &r.processes[0];
        assert_eq!(p.comm, "runner");
        let k = &p.kernels[0];
        assert_eq!((k.launches, k.failed, k.demangled.as_str()), (3, 2, "a()"));
        assert_eq!(k.returns, [(0, 1), (101, 2)].into());
        assert_eq!(k.shapes[0].grid, [4, 1, 1]);
        assert_eq!(k.shapes[0].count, 2);
        assert_eq!((p.configs.count, p.configs.failed), (1, 1));
        assert_eq!((p.memory.malloc_calls, p.memory.malloc_failed, p.memory.malloc_bytes), (2, 1, 4096));
        assert_eq!(p.memory.memcpy["DeviceToHost"].bytes, 64);
        let launch_api = p.api.iter().find(|a| a.api == "hipLaunchKernel").unwrap();
        assert_eq!((launch_api.calls, launch_api.errors, launch_api.mean_ns), (3, 2, 1000));
        let text = r.to_text();
        assert!(text.contains("a()"), "{text}");
        assert!(text.contains("3 records dropped"), "{text}");
    }

    #[test]
    fn dispatches_name_the_bundle_of_the_registered_kernel() {
        let kernel = |id: u32, source: &str, bundles: Vec<String>| {
            Record::Kernel(Kernel {
                id,
                pid: 7,
                handle: 0x100 * id as u64,
                name: "_Z1av".into(),
                demangled: "a()".into(),
                source: source.into(),
                code_file: (!bundles.is_empty()).then(|| "/lib/libggml-hip.so".to_owned()),
                bundles,
                ..Default::default()
            })
        };
        let dispatch = Record::Dispatch(trace::Dispatch {
            pid: 7,
            packet: "kernel-dispatch".into(),
            workgroup: [64, 1, 1],
            grid: [256, 1, 1],
            kernel_object: 0xabc,
            kernel: Some(2),
            ..Default::default()
        });
        let records = vec![
            Record::Process(Process { pid: 7, comm: "runner".into(), ..Default::default() }),
            kernel(1, "register", vec!["0042".into()]),
            kernel(2, "hsa", Vec::new()),
            dispatch,
        ];
        let r = Report::build(records);
        let d = &r.processes[0].dispatches[0];
        assert_eq!(
            (d.code_file.as_deref(), d.bundles.as_slice()),
            (Some("/lib/libggml-hip.so"), ["0042".to_owned()].as_slice())
        );
    }

    #[test]
    fn byte_units() {
        assert_eq!(bytes(12), "12 B");
        assert_eq!(bytes(4096), "4.0 KiB");
        assert_eq!(bytes(3 << 30), "3.0 GiB");
    }
}
