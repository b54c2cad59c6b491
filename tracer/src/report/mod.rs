//! `tracer report`: what a trace says, per process.
//!
//! Kernels launched (with shapes and failures), the
//! `<<<>>>` configurations pushed, API calls with their errors and time, memory traffic, what reached the
//! GPU queues and how it compares with the launches, phases, and losses.
//!
//! This module is the report's model; [`aggregate`] builds it from records in one streaming pass,
//! [`crosscheck`] joins API launches with queue dispatches, [`text`] renders it for a terminal.

mod aggregate;
mod crosscheck;
mod text;

use std::{collections::BTreeMap, path::Path};

pub use aggregate::ReportBuilder;
use anyhow::Result;
use serde::Serialize;
pub use text::TextOptions;

use crate::{
    event::{ApiFunc, GridUnit},
    trace::{self, Record},
};

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
    /// The eBPF programs' runs and time, when recorded with `--program-stats`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub programs: BTreeMap<String, trace::ProgramStat>,
}

#[derive(Debug, Default, Serialize)]
pub struct TraceInfo {
    pub path: String,
    pub schema: u32,
    pub tracer_version: String,
    pub host: String,
    pub kernel_release: String,
    pub duration_s: f64,
    pub stop: Option<trace::Stop>,
    /// Set when the file did not end normally.
    pub warning: Option<String>,
    /// Records of types this tracer does not know (from a newer tracer), skipped.
    pub unknown_records: u64,
    /// Records of known types this tracer could not read, skipped; the first one's line and why.
    pub unreadable_records: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_unreadable: Option<String>,
    /// Recorded with `--lean`: synchronizations and async copies to the device were not probed.
    pub lean: bool,
}

#[derive(Debug, Default, Serialize)]
pub struct ProcessReport {
    pub pid: u32,
    pub ppid: u32,
    pub comm: String,
    pub argv: Vec<String>,
    pub role: Option<trace::Role>,
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
    /// ggml MMQ kernels by where their exact column count (ne11) came from: "kernel parameter", "src1
    /// quantize grid", or "tile bound only" (not known). Counted in the view the phases use: launches, or
    /// the queue's dispatches when the process has any (a dispatch carries no launch parameters).
    pub mmq_widths: BTreeMap<&'static str, u64>,
    pub exit_code: Option<i32>,
    pub exit_signal: Option<i32>,
    pub exited: bool,
    pub kernels: Vec<KernelReport>,
    pub configs: ConfigReport,
    pub api: Vec<ApiReport>,
    pub memory: MemoryReport,
    /// Library ids whose probes fired for this process.
    pub libraries: Vec<u32>,
    /// Whether the process did anything on a GPU that tracer saw: an API call, a dispatch, a queue, a
    /// driver ioctl, or mapped a runtime whose calls tracer may not have seen. The text report folds the
    /// others into one line.
    pub gpu_activity: bool,
    /// A runtime copy it mapped was probed late or not at all: some of its calls were not seen.
    pub incomplete: bool,
}

#[derive(Debug, Serialize)]
pub struct MappedReport {
    pub path: String,
    /// The probed library id, when tracer probes this copy.
    pub lib: Option<u32>,
    pub status: MapStatus,
    /// The probed copy's origin.
    pub origin: Option<trace::LibOrigin>,
    /// Probed after this process had loaded it: its calls before this many seconds into the recording
    /// were not seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unseen_before_s: Option<f64>,
    /// A runtime tracer probes, but this copy could not be probed: none of its calls were seen.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub runtime_not_probed: bool,
}

/// Whether a process called a GPU library it maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MapStatus {
    /// Probes on it fired for this process.
    Called,
    /// Probed, never called.
    MappedOnly,
    /// A library tracer does not instrument.
    NotProbed,
}

impl MapStatus {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Called => "called",
            Self::MappedOnly => "mapped-only",
            Self::NotProbed => "not-probed",
        }
    }
}

#[derive(Debug, Default, Serialize)]
pub struct DispatchReport {
    pub kernel: Option<u32>,
    pub name: String,
    pub demangled: String,
    pub class: KernelClass,
    pub source: trace::Source,
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
    pub family: crate::classify::Family,
    pub quant: Option<String>,
    /// "1" (exact columns, MMVQ) or "<=128" (MMQ tile width, from the name alone).
    pub batch: Option<String>,
    /// The library the name says the kernel comes from (cuBLASLt, cuDNN, Tensile, Inductor, NCCL, ...).
    pub library: Option<String>,
}

impl KernelClass {
    fn of(name: &str) -> Self {
        Self::from(crate::classify::classify(name))
    }

    fn of_shape(name: &str, sh: &Shape) -> Self {
        let work_items = sh.grid_unit == GridUnit::WorkItems;
        Self::from(crate::classify::classify(name).with_shape(sh.grid, sh.block, work_items))
    }

    fn from(c: crate::classify::Class) -> Self {
        Self {
            family: c.family,
            quant: c.quant.map(str::to_owned),
            batch: c.batch.map(crate::classify::Batch::label),
            library: c.library.map(str::to_owned),
        }
    }

    pub(crate) fn text(&self) -> String {
        let quant = self.quant.as_deref().map(|q| format!(" {q}")).unwrap_or_default();
        let batch = self.batch.as_deref().map(|b| format!(" b{b}")).unwrap_or_default();
        let library = self.library.as_deref().map(|l| format!(" ({l})")).unwrap_or_default();
        format!("{}{quant}{batch}{library}", self.family.name())
    }
}

#[derive(Debug, Default, Serialize)]
pub struct KernelReport {
    /// The first kernel id of this name in the trace; `ids` lists all of them (one per handle: a name
    /// loaded more than once is one row).
    pub id: u32,
    pub ids: Vec<u32>,
    pub name: String,
    pub demangled: String,
    /// The function's own name, without namespaces, template arguments and parameters.
    pub short_name: String,
    pub class: KernelClass,
    pub source: trace::Source,
    pub handle: u64,
    /// The file holding the kernel's code and its offload bundles there (see `tracer inspect`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_file: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bundles: Vec<String>,
    /// For an unnamed kernel: the file whose code launched it (see the trace's `kernel` record).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
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
    pub apis: Vec<ApiFunc>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Shape {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub grid_unit: GridUnit,
    pub shmem: u64,
    pub count: u64,
}

impl Shape {
    /// Adds `sh`'s count to the entry of the same launch shape in `shapes`, or appends it: how the rows of
    /// one kernel name (across handles) and of one short name (across variants) merge their shapes.
    pub(crate) fn add_to(self, shapes: &mut Vec<Self>) {
        let key = |x: &Self| (x.grid, x.block, x.grid_unit, x.shmem);
        match shapes.iter_mut().find(|x| key(x) == key(&self)) {
            Some(x) => x.count += self.count,
            None => shapes.push(self),
        }
    }
}

#[derive(Debug, Default, Serialize)]
pub struct ConfigReport {
    pub count: u64,
    pub failed: u64,
    pub shapes: Vec<Shape>,
}

#[derive(Debug, Serialize)]
pub struct ApiReport {
    pub api: ApiFunc,
    pub calls: u64,
    /// Calls recorded at entry by a one-trap probe: their result and duration were not observed, so
    /// `errors`, `total_ns` and `mean_ns` count the other calls only.
    pub untimed: u64,
    /// Of the untimed calls, those counted in the kernel and not written one by one (synchronizations that
    /// end no step, async copies to the device).
    pub tallied: u64,
    pub errors: u64,
    pub total_ns: u64,
    /// Over the timed calls.
    pub mean_ns: u64,
}

impl ApiReport {
    /// A function with no call counted yet.
    pub const fn new(api: ApiFunc) -> Self {
        Self { api, calls: 0, untimed: 0, tallied: 0, errors: 0, total_ns: 0, mean_ns: 0 }
    }
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
    /// Calls recorded at entry by a one-trap probe (CUDA's async copies): whether they failed is not known.
    pub unchecked: u64,
    pub bytes: u64,
}

impl Report {
    /// Reads a trace file and summarizes it, streaming.
    pub fn from_file(path: &Path) -> Result<Self> {
        let mut b = ReportBuilder::default();
        let status = trace::for_each_record(path, |r| b.add(r))?;
        let mut r = b.finish();
        r.trace.path = path.display().to_string();
        r.trace.warning = status.warning();
        r.trace.unknown_records = status.unknown_records;
        r.trace.unreadable_records = status.unreadable_records;
        r.trace.first_unreadable.clone_from(&status.first_unreadable);
        Ok(r)
    }

    pub fn build(records: Vec<Record>) -> Self {
        let mut b = ReportBuilder::default();
        for r in records {
            b.add(r);
        }
        b.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        event::{Call, Config, MemcpyKind, Origin},
        trace::{Footer, Header, Kernel, Launch, Process, Source, Stop},
    };

    fn launch(kernel: u32, grid: [u32; 3], ret: i32) -> Record {
        Record::Launch(Launch {
            ts: 2_000_000_000,
            pid: 7,
            tid: 7,
            lib: 1,
            api: ApiFunc::HipLaunchKernel,
            kernel: Some(kernel),
            handle: 0x100 * u64::from(kernel),
            grid,
            block: [256, 1, 1],
            grid_unit: GridUnit::Blocks,
            shmem: 0,
            stream: 0,
            ret,
            dur: 1000,
            captured: false,
            entry_only: false,
            params: Default::default(),
            caller: 0,
        })
    }

    #[test]
    fn aggregates_per_process() {
        let o = Origin { ts: 0, pid: 7, tid: 0, lib: 1 };
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
                source: Source::Register,
                ..Default::default()
            }),
            launch(1, [4, 1, 1], 101),
            launch(1, [4, 1, 1], 101),
            launch(1, [8, 1, 1], 0),
            Record::Config(Config {
                ts: 0,
                pid: 7,
                tid: 0,
                lib: 1,
                api: ApiFunc::HipPushCallConfiguration,
                grid: [2, 1, 1],
                block: [64, 1, 1],
                shmem: 0,
                stream: 0,
                ret: 101,
                dur: 500,
            }),
            Record::Call(Call { size: Some(4096), ..Call::new(o, ApiFunc::HipMalloc, 0, 100) }),
            Record::Call(Call { size: Some(1 << 30), ..Call::new(o, ApiFunc::HipMalloc, 2, 100) }),
            Record::Call(Call {
                size: Some(64),
                kind: Some(MemcpyKind::DeviceToHost),
                ..Call::new(o, ApiFunc::HipMemcpy, 0, 300)
            }),
            Record::Footer(Footer {
                end_mono_ns: 3_000_000_000,
                drops: [("call".to_owned(), vec![1, 2])].into(),
                stop: Stop::Signal,
                ..Default::default()
            }),
        ];
        let r = Report::build(records);
        assert_eq!(r.trace.duration_s.to_bits(), 2.0f64.to_bits(), "exactly 2 s of integer nanoseconds");
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
        let launch_api = p.api.iter().find(|a| a.api == ApiFunc::HipLaunchKernel).unwrap();
        assert_eq!((launch_api.calls, launch_api.errors, launch_api.mean_ns), (3, 2, 1000));
        let text = r.to_text(&TextOptions::default());
        assert!(text.contains("unknown                        a\n"), "{text}");
        assert!(text.contains("3 records dropped"), "{text}");
        let full = r.to_text(&TextOptions { full_names: true, top: 0 });
        assert!(full.contains("unknown                        a()\n"), "{full}");
    }

    /// A graph executable instantiated from one capture and updated in place with a later one (ggml's
    /// way): replays before the update run the first capture's kernels, after it the second's; an
    /// executable whose capture was never seen stays unresolved.
    #[test]
    fn graph_replays_follow_in_place_updates_of_the_executable() {
        let o = Origin { ts: 0, pid: 7, tid: 0, lib: 1 };
        let captured = |kernel: u32| {
            let mut r = launch(kernel, [1, 1, 1], 0);
            if let Record::Launch(l) = &mut r {
                (l.captured, l.stream) = (true, 0x5);
            }
            r
        };
        let call = |api: ApiFunc, handle: u64, value: Option<u64>| {
            Record::Call(Call { handle: Some(handle), value, stream: Some(0x5), ..Call::new(o, api, 0, 10) })
        };
        let replay = || call(ApiFunc::CuGraphLaunch, 0xE, None);
        let records = vec![
            captured(1),
            call(ApiFunc::CuStreamEndCapture, 0x61, None),
            call(ApiFunc::CuGraphInstantiateWithFlags, 0x61, Some(0xE)),
            replay(),
            replay(),
            captured(2),
            captured(2),
            call(ApiFunc::CuStreamEndCapture, 0x62, None),
            call(ApiFunc::CuGraphExecUpdate, 0x62, Some(0xE)),
            replay(),
            call(ApiFunc::CuGraphLaunch, 0xF, None),
        ];
        let r = Report::build(records);
        let p = &r.processes[0];
        assert_eq!((p.graph_replays, p.graph_replays_unresolved), (4, 1));
        let runs = |id: u32| p.kernels.iter().find(|k| k.id == id).map(|k| (k.graph_executions, k.executions));
        // Kernel 1: in 2 replays; kernel 2: twice in the one replay after the update.
        assert_eq!((runs(1), runs(2)), (Some((2, 2)), Some((2, 2))));
    }

    #[test]
    fn processes_with_no_gpu_activity_fold_into_one_line() {
        let process = |pid: u32, comm: &str| Record::Process(Process { pid, comm: comm.into(), ..Default::default() });
        let records = vec![process(7, "runner"), launch(1, [1, 1, 1], 0), process(8, "gcc"), process(9, "ld")];
        let r = Report::build(records);
        let active: Vec<u32> = r.processes.iter().filter(|p| p.gpu_activity).map(|p| p.pid).collect();
        assert_eq!((active, r.processes.len()), (vec![7], 3));
        let text = r.to_text(&TextOptions::default());
        assert!(text.contains("process 7 runner"), "{text}");
        assert!(!text.contains("process 8 gcc"), "{text}");
        assert!(text.contains("2 processes with no GPU activity (all in --json): gcc (pid 8), ld (pid 9)"), "{text}");
    }

    /// On a queue, as on a stream: ggml's src1 quantization dispatch (grid x = ne1 blocks; the packet
    /// counts work-items) gives the MMQ dispatch after it its exact column count, on the same queue only.
    #[test]
    fn mmq_dispatches_take_their_width_from_the_src1_quantization_on_their_queue() {
        const QUANTIZE: &str = "_Z17quantize_mmq_q8_1IL18mmq_q8_1_ds_layout1EEvPKfPKiPvlllllii";
        const MMQ16: &str = "_Z9mul_mat_qIL9ggml_type12ELi16ELb0EEvPKcPKiS4_S4_PfS5_iii";
        let kernel = |pid: u32, id: u32, name: &str| {
            Record::Kernel(Kernel { id, pid, handle: u64::from(id), name: name.into(), ..Default::default() })
        };
        let dispatch = |pid: u32, kernel: u32, queue: u64, grid: [u32; 3], workgroup: [u16; 3]| {
            Record::Dispatch(trace::Dispatch {
                pid,
                queue,
                packet: crate::event::PacketType::KernelDispatch,
                workgroup,
                grid,
                kernel_object: u64::from(kernel),
                kernel: Some(kernel),
                ..Default::default()
            })
        };
        let quantize = |pid: u32, id: u32, queue: u64| dispatch(pid, id, queue, [11 * 128, 1, 1], [128, 1, 1]);
        let mmq = |pid: u32, id: u32, queue: u64| dispatch(pid, id, queue, [132 * 256, 1, 1], [256, 1, 1]);
        // A parameter list tracer knows: its column count read from the argument segment wins.
        const MMQ_KNOWN: &str =
            "_Z9mul_mat_qIL9ggml_type12ELi16ELb0EEvPKcPKiS4_S4_PfS5_5uint3iiiiiS6_S6_iiiS6_S6_iiiS6_";
        let mut read = mmq(9, 6, 0xA);
        if let Record::Dispatch(d) = &mut read {
            d.params = BTreeMap::from([(9, 0x0000_0001_0000_0122)]); // byte 72: 290
        }
        let records = vec![
            kernel(7, 1, QUANTIZE),
            kernel(7, 2, MMQ16),
            kernel(8, 3, QUANTIZE),
            kernel(8, 4, MMQ16),
            kernel(9, 5, QUANTIZE),
            kernel(9, 6, MMQ_KNOWN),
            quantize(7, 1, 0xA),
            mmq(7, 2, 0xA),
            // In another process: the quantization on one queue, the MMQ on another.
            quantize(8, 3, 0xA),
            mmq(8, 4, 0xB),
            quantize(9, 5, 0xA),
            read,
        ];
        let r = Report::build(records);
        let by_pid = |pid: u32| r.processes.iter().find(|p| p.pid == pid).unwrap();
        let widths = |pid: u32| by_pid(pid).mmq_widths.clone().into_iter().collect::<Vec<_>>();
        assert_eq!((widths(7), widths(8)), (vec![("src1 quantize grid", 1)], vec![("tile bound only", 1)]));
        assert_eq!(widths(9), vec![("kernel parameter", 1)]);
        let prefill = |pid: u32| {
            let p = by_pid(pid).phases.iter().find(|ph| ph.phase == crate::phase::Phase::Prefill).unwrap();
            p.batch_widths.iter().cloned().collect::<Vec<_>>()
        };
        assert_eq!((prefill(7), prefill(8)), (vec!["11".to_owned()], vec!["<=16".to_owned()]));
        assert_eq!(prefill(9), vec!["290".to_owned()]);
    }

    #[test]
    fn dispatches_name_the_bundle_of_the_registered_kernel() {
        let kernel = |id: u32, source: Source, bundles: Vec<String>| {
            Record::Kernel(Kernel {
                id,
                pid: 7,
                handle: 0x100 * u64::from(id),
                name: "_Z1av".into(),
                demangled: "a()".into(),
                source,
                code_file: (!bundles.is_empty()).then(|| "/lib/libggml-hip.so".to_owned()),
                bundles,
                caller: None,
                ..Default::default()
            })
        };
        let dispatch = Record::Dispatch(trace::Dispatch {
            pid: 7,
            packet: crate::event::PacketType::KernelDispatch,
            workgroup: [64, 1, 1],
            grid: [256, 1, 1],
            kernel_object: 0xabc,
            kernel: Some(2),
            ..Default::default()
        });
        let records = vec![
            Record::Process(Process { pid: 7, comm: "runner".into(), ..Default::default() }),
            kernel(1, Source::Register, vec!["0042".into()]),
            kernel(2, Source::Hsa, Vec::new()),
            dispatch,
        ];
        let r = Report::build(records);
        let d = &r.processes[0].dispatches[0];
        assert_eq!(
            (d.code_file.as_deref(), d.bundles.as_slice()),
            (Some("/lib/libggml-hip.so"), ["0042".to_owned()].as_slice())
        );
    }
}
