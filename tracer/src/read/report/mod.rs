//! `tracer report`: what a trace says, per process.
//!
//! Kernels launched (with shapes and failures), the
//! `<<<>>>` configurations pushed, API calls with their errors and time, memory traffic, what reached the
//! GPU queues and how it compares with the launches, phases, and losses.
//!
//! This module is the report's model; `aggregate` builds it from records in one streaming pass,
//! `crosscheck` joins API launches with queue dispatches, `text` renders it for a terminal.

mod aggregate;
mod code_dirs;
mod crosscheck;
mod job_times;
mod kernel_rows;
mod ledger;
mod merge;
mod text;

use std::collections::BTreeMap;

pub(crate) use aggregate::ReportBuilder;
use anyhow::Result;
pub(crate) use job_times::{Coverage, JobsReport};
use serde::Serialize;
pub(crate) use text::TextOptions;

use crate::{
    read::phase::Feeder,
    trace::event::{ApiFunc, GridUnit},
    trace::{self, Line},
};

#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub trace: TraceInfo,
    pub(crate) libraries: Vec<trace::Library>,
    /// GPU libraries (not runtimes) whose exported C functions were counted, or could not be.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) counted_libraries: Vec<trace::EntryLibrary>,
    /// Probes that could not be attached, with the reason.
    pub(crate) probes_missing: Vec<trace::Probe>,
    pub processes: Vec<ProcessReport>,
    pub(crate) drops: BTreeMap<String, u64>,
    pub(crate) drops_total: u64,
    pub(crate) counters: BTreeMap<String, u64>,
    /// The eBPF programs' runs and time, when recorded with `--program-stats`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) programs: BTreeMap<String, trace::ProgramStat>,
}

#[derive(Debug, Default, Serialize)]
pub struct TraceInfo {
    pub(crate) path: String,
    pub(crate) schema: u32,
    pub(crate) tracer_version: String,
    pub(crate) host: String,
    pub(crate) kernel_release: String,
    pub(crate) duration_s: f64,
    pub(crate) stop: Option<trace::Stop>,
    /// Set when the file did not end normally.
    pub(crate) warning: Option<String>,
    /// What reading a rotated recording's parts found besides: files skipped, parts missing after the
    /// last one read; one sentence each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) notes: Vec<String>,
    /// Records of types this tracer does not know (from a newer tracer), skipped.
    pub(crate) unknown_records: u64,
    /// Records of known types this tracer could not read, skipped; the first one's line and why.
    pub(crate) unreadable_records: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) first_unreadable: Option<String>,
    /// Synchronizations and async copies to the device were not probed (the default; `--lean` earlier).
    pub(crate) lean: bool,
    /// HIP's launch functions were left unprobed (an AMD GPU present): each dispatch was read at its queue's
    /// doorbell alone, and the kernel tables count dispatches as executions.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) launches_at_doorbell: bool,
    pub(crate) doorbell_reads_all: bool,
    /// Launches probed at entry only whose function has a result tracer reads with `record --all-calls`
    /// (HIP's): a launch that failed is counted as made.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) launch_results_unread: u64,
    /// Launches that came as exact repeats (`repeat` lines), and the lines: each is counted as the launch it
    /// repeats, its own time not recorded (placed evenly between its run's first and last).
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) launches_repeated: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) repeat_runs: u64,
    pub(crate) repeats_cut: trace::runs::RepeatsCut, // launches of `repeat` lines past the reader's bound
    /// Whether GPU job times were recorded, and from which tracepoints.
    pub(crate) gpu_jobs: Coverage,
}

impl TraceInfo {
    /// Every sentence the user should read about the input: the warning, then the notes.
    pub(crate) fn warnings(&self) -> Vec<String> {
        self.warning.iter().chain(&self.notes).cloned().collect()
    }
}

#[derive(Debug, Default, Serialize)]
pub struct ProcessReport {
    pub(crate) pid: u32,
    pub(crate) ppid: u32,
    pub comm: String,
    pub(crate) argv: Vec<String>,
    pub(crate) role: Option<trace::Role>,
    pub(crate) model: Option<String>,
    pub(crate) model_name: Option<String>,
    /// Its root, when it is not tracer's own (a chroot, a container): the paths of its libraries are that
    /// root's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) root: Option<String>,
    /// GPU libraries this process mapped, and whether it called the ones tracer probes.
    pub(crate) mapped: Vec<MappedReport>,
    /// Directories it loaded code-object files from by path: files present, loaded, with dispatches.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) code_dirs: Vec<CodeDirReport>,
    /// GPU driver ioctls by name.
    pub(crate) ioctls: Vec<IoctlReport>,
    /// HSA queues the process created.
    pub(crate) queues: Vec<trace::Queue>,
    /// Queues it had KFD make that no `hsa_queue_create` made (`ROCr`'s own AQL queues, SDMA engines' queues):
    /// tracer reads none of their packets.
    #[serde(skip_serializing_if = "QueuesUnread::is_empty")]
    pub(crate) queues_unread: QueuesUnread,
    /// Queues whose packets between the first and the last read are not all in the trace: the dispatches
    /// lost, per queue.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) packets_missing: Vec<QueueGap>,
    /// Its GPU scheduler jobs (work submitted through the kernel driver), where recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) gpu_jobs: Option<JobsReport>,
    /// What reached the GPU queues, per kernel (AQL kernel dispatch packets), and barrier packets.
    pub(crate) dispatches: Vec<DispatchReport>,
    pub(crate) barrier_packets: u64,
    /// Kernel records of a file past the per-process limits, not kept by the reader (0 for a file tracer
    /// wrote: the recorder binds none past them).
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) kernels_not_kept: u64,
    /// Graph replays (hipGraphLaunch, cuGraphLaunch), and those of an executable whose capture tracer
    /// did not see (its kernels' executions cannot be counted).
    pub(crate) graph_replays: u64,
    pub(crate) graph_replays_unresolved: u64,
    /// CUDA graph executables made before the attach, read from the driver's objects: what the reads
    /// gave and the replays they resolved.
    #[serde(skip_serializing_if = "crate::read::report::no_driver_reads")]
    pub(crate) graph_execs_from_driver: crate::read::phase::DriverReads,
    /// The HIP API launches and the queue dispatches joined by kernel name, differences explained.
    pub(crate) crosscheck: Vec<CrossRow>,
    /// Steps (graph evaluations) by phase: prefill, decode, mixed, other.
    pub phases: Vec<crate::read::phase::PhaseReport>,
    /// The entry libraries the phases' `library_calls` name, by id.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) step_libraries: BTreeMap<u32, String>,
    /// Sequences judged without their history (more than the most kept per process).
    #[serde(skip_serializing_if = "crate::read::report::is_zero")]
    pub(crate) sequences_untracked: u64,
    /// Kept outputs of steps judged from their inputs not held for their next token (more than the most
    /// held per process).
    #[serde(skip_serializing_if = "crate::read::report::is_zero")]
    pub(crate) outputs_unheld: u64,
    /// ggml MMQ kernels by where their exact column count (ne11) came from: "kernel parameter", "src1
    /// quantize grid", or "tile bound only" (not known). Counted in the view the phases use: launches, or
    /// the queue's dispatches when the process has any (a dispatch carries no launch parameters).
    pub(crate) mmq_widths: BTreeMap<&'static str, u64>,
    pub(crate) exit_code: Option<i32>,
    pub(crate) exit_signal: Option<i32>,
    pub(crate) exited: bool,
    pub(crate) kernels: Vec<KernelReport>,
    pub(crate) configs: ConfigReport,
    pub(crate) api: Vec<ApiReport>,
    pub(crate) memory: MemoryReport,
    /// Library ids whose probes fired for this process.
    pub(crate) libraries: Vec<u32>,
    /// Whether the process did anything on a GPU that tracer saw: an API call, a dispatch, a queue, a
    /// driver ioctl, or mapped a runtime whose calls tracer may not have seen. The text report folds the
    /// others into one line.
    pub(crate) gpu_activity: bool,
    /// A runtime copy it mapped was probed late or not at all: some of its calls were not seen.
    pub(crate) incomplete: bool,
    /// GPU APIs it mapped that tracer does not observe (`OpenCL (…/libOpenCL.so.1)`): their GPU work is not
    /// counted, and the process is not reported as having none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) unobserved: Vec<String>,
}

/// The unobserved GPU APIs among a process's mapped libraries ([`crate::trace::runtimes::unobserved_api`]), each with
/// the file that shows it.
fn unobserved(mapped: &[MappedReport]) -> Vec<String> {
    mapped
        .iter()
        .filter_map(|m| {
            let api = trace::runtimes::unobserved_api(m.path.rsplit('/').next().unwrap_or(&m.path))?;
            Some(format!("{api} ({})", m.path))
        })
        .collect()
}

#[derive(Debug, Serialize)]
pub(crate) struct MappedReport {
    pub(crate) path: String,
    /// The process's root, when it is not tracer's own (said once per process, in its report).
    #[serde(skip)]
    pub(crate) root: Option<String>,
    /// The probed library id, when tracer probes this copy.
    pub(crate) lib: Option<u32>,
    pub(crate) status: MapStatus,
    /// The probed copy's origin.
    pub(crate) origin: Option<trace::LibOrigin>,
    /// Probed after this process had loaded it: its calls before this many seconds into the recording
    /// were not seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) unseen_before_s: Option<f64>,
    /// A runtime tracer probes, but this copy was not probed (it could not be, or `--lib` named others): none
    /// of its calls were seen.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) runtime_not_probed: bool,
    /// Calls of it by this process that tracer saw: a runtime's API calls, or calls of another GPU
    /// library's exported C functions (counted in the kernel). Null when its calls were not counted.
    pub(crate) calls: Option<u64>,
    /// Its functions this process called, most called first (a counted library).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) functions: Vec<FunctionCalls>,
    /// Kernels whose code this file holds that the process launched (rows of `kernels` whose `code_file`
    /// is this path), and their executions.
    pub(crate) kernels: u64,
    pub(crate) executions: u64,
    /// Launches whose return address lay in this file: the code that made them.
    pub(crate) launches_from: u64,
    /// Of those, the launches that returned an error (none of them ran).
    pub(crate) launches_failed: u64,
}

/// Queues made through KFD (`AMDKFD_IOC_CREATE_QUEUE` that succeeded) that no `hsa_queue_create` made, by type.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct QueuesUnread {
    /// AQL queues (`KFD_IOC_QUEUE_TYPE_COMPUTE_AQL`): the ring size of each, in creation order.
    pub(crate) aql_ring_bytes: Vec<u64>,
    /// SDMA queues (plain or XGMI): copy engines, which run no kernel.
    pub(crate) sdma: u64,
    /// Queues of any other type.
    pub(crate) other: u64,
}

impl QueuesUnread {
    pub(crate) const fn is_empty(&self) -> bool {
        self.aql_ring_bytes.is_empty() && self.sdma == 0 && self.other == 0
    }
}

/// A queue (`hsa_queue_t` address) some of whose packets up to the last one read are missing: overwritten in
/// the ring before their store was read (`packets_cut`), unreadable (`packet_fault`), or dropped by the ring.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct QueueGap {
    pub(crate) queue: u64,
    /// The first index counted (0 on a queue made while recording) and the last read; packets read, missing.
    pub(crate) first: u64,
    pub(crate) last: u64,
    pub(crate) read: u64,
    pub(crate) missing: u64,
}

/// A directory a process loaded code-object files from by path (rocBLAS's Tensile `library/`).
#[derive(Debug, Default, Serialize)]
pub(crate) struct CodeDirReport {
    /// The directory as the process saw it.
    pub(crate) path: String,
    /// Regular files in it when the recording listed it (at the first load from it); null when it was
    /// not listed (`listing_error`, or a trace without the listing).
    pub(crate) present: Option<u64>,
    /// The listing was cut: `present` is a lower bound, or `present_files` holds the first names only.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) listing_cut: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) listing_error: Option<String>,
    /// Files of it the process loaded (at least one load call, failed ones included), and of those, the
    /// files a load of which succeeded.
    pub(crate) loaded: u64,
    pub(crate) loaded_ok: u64,
    /// Files whose kernels ran: executions of their kernels, or queue dispatches.
    pub(crate) with_dispatches: u64,
    /// The files loaded, by path.
    pub(crate) files: Vec<CodeFileReport>,
    /// Files present that were not loaded.
    pub(crate) not_loaded: Vec<String>,
    /// Every file present, as listed.
    pub(crate) present_files: Vec<String>,
}

/// A code-object file loaded by path: its loads, their results, the kernels looked up in it.
#[derive(Debug, Serialize)]
pub(crate) struct CodeFileReport {
    pub(crate) path: String,
    /// The function that loaded it first.
    pub(crate) api: ApiFunc,
    pub(crate) loads: u64,
    /// Loads that returned an error.
    pub(crate) failed: u64,
    /// Loads by return value (0: success).
    pub(crate) results: BTreeMap<i64, u64>,
    /// Whether the directory's listing held it (null when the directory was not listed).
    pub(crate) present: Option<bool>,
    /// Kernels looked up in its module (mangled names), in the order they were.
    pub(crate) kernels: Vec<String>,
    /// Launches and executions of those kernels, and their dispatches at the GPU queues.
    pub(crate) launches: u64,
    pub(crate) executions: u64,
    pub(crate) dispatches: u64,
}

#[derive(Debug, Default, Serialize)]
pub(crate) struct FunctionCalls {
    pub(crate) function: String,
    pub(crate) calls: u64,
}

/// Whether a process called a GPU library it maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum MapStatus {
    /// Probes on it fired for this process.
    Called,
    /// None of its calls counted (none made, or it is not probed), but its code ran: kernels whose code it
    /// holds executed, or launches were made from its code (cuDNN's engine libraries, entered through
    /// C++ only; the program itself).
    Dispatched,
    /// None of its calls counted, and its code made launches, every one of which failed: nothing of it ran
    /// (a program launching on a machine without a usable GPU).
    LaunchesFailed,
    /// Probed, never called.
    MappedOnly,
    /// A library tracer does not instrument.
    NotProbed,
}

impl MapStatus {
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::Called => "called",
            Self::Dispatched => "dispatched",
            Self::LaunchesFailed => "launches-failed",
            Self::MappedOnly => "mapped-only",
            Self::NotProbed => "not-probed",
        }
    }
}

#[derive(Debug, Default, Serialize)]
pub(crate) struct DispatchReport {
    pub(crate) kernel: Option<u32>,
    pub(crate) name: String,
    pub(crate) demangled: String,
    pub(crate) class: KernelClass,
    pub(crate) source: trace::Source,
    pub(crate) kernel_object: u64,
    pub(crate) dispatches: u64,
    /// (workgroup, grid in work-items, group segment bytes) with counts.
    pub(crate) shapes: Vec<DispatchShape>,
    /// A ggml MMQ or MMVQ kernel: its dispatches by exact column count (ne11), where known.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) ne11: BTreeMap<u32, u64>,
    /// The file and offload bundles holding the kernel's code, from the process's registration of the
    /// same kernel name (see `KernelReport`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) code_file: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) bundles: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub(crate) struct DispatchShape {
    pub(crate) workgroup: [u16; 3],
    pub(crate) grid: [u32; 3],
    pub(crate) group_segment: u32,
    pub(crate) count: u64,
}

#[derive(Debug, Default, Serialize)]
pub(crate) struct CrossRow {
    /// The kernel's mangled name, or `kernel_object 0x...` when the queue saw an unnamed object.
    pub(crate) kernel: String,
    pub(crate) demangled: String,
    /// Launch calls at the HIP API (all of them).
    pub(crate) api_launches: u64,
    pub(crate) api_failed: u64,
    /// Launches made while their stream was capturing a graph (graph nodes, not dispatches).
    pub(crate) api_captured: u64,
    /// Kernel dispatch packets seen at the queues.
    pub(crate) queue_dispatches: u64,
    /// Why the two counts differ; empty when they agree.
    pub(crate) explanation: String,
}

#[derive(Debug, Default, Serialize)]
pub(crate) struct IoctlReport {
    pub(crate) name: String,
    pub(crate) device: Option<String>,
    pub(crate) calls: u64,
    pub(crate) errors: u64,
    /// Failed calls by errno name.
    pub(crate) errnos: BTreeMap<String, u64>,
    pub(crate) total_ns: u64,
}

/// What a kernel's name says it does (see `classify`).
#[derive(Debug, Default, Serialize)]
pub(crate) struct KernelClass {
    pub(crate) family: trace::classify::Family,
    pub(crate) quant: Option<String>,
    /// "1" (exact columns, MMVQ) or "<=128" (MMQ tile width, from the name alone).
    pub(crate) batch: Option<String>,
    /// The library the name says the kernel comes from (cuBLASLt, cuDNN, Tensile, Inductor, NCCL, ...).
    pub(crate) library: Option<String>,
}

impl KernelClass {
    fn of(name: &str) -> Self {
        Self::from(trace::classify::classify(name))
    }

    fn of_shape(name: &str, sh: &Shape) -> Self {
        let work_items = sh.grid_unit == GridUnit::WorkItems;
        Self::from(trace::classify::classify(name).with_shape(sh.grid, sh.block, work_items))
    }

    fn from(c: trace::classify::Class) -> Self {
        Self {
            family: c.family,
            quant: c.quant.map(str::to_owned),
            batch: c.batch.map(trace::classify::Batch::label),
            library: c.library.map(str::to_owned),
        }
    }

    /// The family text, with the batch bound the name or shape gives (`b<=128`), or without it (a row
    /// whose exact column counts are listed instead).
    pub(crate) fn text_with(&self, batch: bool) -> String {
        let quant = self.quant.as_deref().map(|q| format!(" {q}")).unwrap_or_default();
        let batch = self.batch.as_deref().filter(|_| batch).map(|b| format!(" b{b}")).unwrap_or_default();
        let library = self.library.as_deref().map(|l| format!(" ({l})")).unwrap_or_default();
        format!("{}{quant}{batch}{library}", self.family.name())
    }
}

#[derive(Debug, Default, Serialize)]
pub(crate) struct KernelReport {
    /// The first kernel id of this name in the trace; `ids` lists all of them (one per handle: a name
    /// loaded more than once is one row).
    pub(crate) id: u32,
    pub(crate) ids: Vec<u32>,
    pub(crate) name: String,
    pub(crate) demangled: String,
    /// The function's own name, without namespaces, template arguments and parameters.
    pub(crate) short_name: String,
    pub(crate) class: KernelClass,
    pub(crate) source: trace::Source,
    pub(crate) handle: u64,
    /// The file holding the kernel's code and its offload bundles there (see `tracer inspect`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) code_file: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) bundles: Vec<String>,
    /// For an unnamed kernel: the file whose code launched it (see the trace's `kernel` record).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) caller: Option<String>,
    pub(crate) launches: u64,
    /// Launches whose call returned an error.
    pub(crate) failed: u64,
    /// Times the kernel was submitted to run: launches that neither failed nor were captured into a
    /// graph, plus one per replay of each graph that captured it.
    pub(crate) executions: u64,
    /// Of those, the graph replays'.
    pub(crate) graph_executions: u64,
    /// Its executions include the dispatches read at its queues' doorbells, where HIP's launch functions
    /// were left unprobed (the trace's `launches_at_doorbell`): each such dispatch counts as one execution,
    /// its shape in work-items.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) from_dispatches: bool,
    /// A ggml MMQ or MMVQ kernel: its executions by exact column count (ne11: the tokens of the matrix
    /// pass), where known; executions not counted here ran with a column count only bounded (`class.batch`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) ne11: BTreeMap<u32, u64>,
    /// Return codes seen, by value.
    pub(crate) returns: BTreeMap<i32, u64>,
    pub(crate) shapes: Vec<Shape>,
    pub(crate) apis: Vec<ApiFunc>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub(crate) struct Shape {
    pub(crate) grid: [u32; 3],
    pub(crate) block: [u32; 3],
    pub(crate) grid_unit: GridUnit,
    pub(crate) shmem: u64,
    pub(crate) count: u64,
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
pub(crate) struct ConfigReport {
    pub(crate) count: u64,
    pub(crate) failed: u64,
    pub(crate) shapes: Vec<Shape>,
}

#[derive(Debug, Serialize)]
pub(crate) struct ApiReport {
    pub(crate) api: ApiFunc,
    pub(crate) calls: u64,
    /// Calls recorded at entry by a one-trap probe: their result and duration were not observed, so
    /// `errors`, `total_ns` and `mean_ns` count the other calls only.
    pub(crate) untimed: u64,
    /// Of the untimed calls, those counted in the kernel and not written one by one (synchronizations that
    /// end no step, async copies to the device).
    pub(crate) tallied: u64,
    pub(crate) errors: u64,
    pub(crate) total_ns: u64,
    /// Over the timed calls.
    pub(crate) mean_ns: u64,
}

impl ApiReport {
    /// A function with no call counted yet.
    pub(crate) const fn new(api: ApiFunc) -> Self {
        Self { api, calls: 0, untimed: 0, tallied: 0, errors: 0, total_ns: 0, mean_ns: 0 }
    }
}

#[derive(Debug, Default, Serialize)]
pub(crate) struct MemoryReport {
    pub(crate) malloc_calls: u64,
    pub(crate) malloc_failed: u64,
    /// Bytes asked for by successful hipMalloc / cuMemAlloc calls.
    pub(crate) malloc_bytes: u64,
    /// Bytes asked for by all hipMalloc / cuMemAlloc calls, failed ones included.
    pub(crate) malloc_bytes_requested: u64,
    pub(crate) free_calls: u64,
    /// Per hipMemcpyKind: calls and bytes (all calls, failed ones included, as requested).
    pub(crate) memcpy: BTreeMap<String, MemcpyReport>,
}

#[derive(Debug, Default, Serialize)]
pub(crate) struct MemcpyReport {
    pub(crate) calls: u64,
    pub(crate) failed: u64,
    /// Calls recorded at entry by a one-trap probe (CUDA's async copies): whether they failed is not known.
    pub(crate) unchecked: u64,
    pub(crate) bytes: u64,
}

impl Report {
    /// Reads a trace, or the parts of a rotated recording as one, and summarizes it, streaming.
    pub(crate) fn from_input(input: &trace::Input) -> Result<Self> {
        let mut pair = (Feeder::default(), ReportBuilder::default());
        let (index, status) = trace::model::read(input, &mut pair)?;
        let mut r = pair.1.finish(pair.0, &index);
        r.trace.path = input.display();
        r.trace.warning = status.warning();
        // What reading found first, then what the records said.
        r.trace.notes.splice(0..0, status.notes.iter().cloned());
        (r.trace.unknown_records, r.trace.unreadable_records) = (status.unknown_records, status.unreadable_records);
        (r.trace.first_unreadable, r.trace.repeats_cut) = (status.first_unreadable, status.repeats_cut);
        Ok(r)
    }

    pub fn build(records: Vec<Line>) -> Self {
        let mut pair = (Feeder::default(), ReportBuilder::default());
        let mut index = trace::model::Index::default();
        for r in records {
            index.feed(&r, &mut pair);
        }
        pair.1.finish(pair.0, &index)
    }
}

#[cfg(test)]
mod tests;

/// Whether a process had no graph executable read from the driver (the JSON report then leaves the
/// field out).
fn no_driver_reads(d: &crate::read::phase::DriverReads) -> bool {
    !d.any()
}

#[expect(clippy::trivially_copy_pass_by_ref, reason = "serde's skip_serializing_if passes a reference")]
const fn is_zero(n: &u64) -> bool {
    *n == 0
}
