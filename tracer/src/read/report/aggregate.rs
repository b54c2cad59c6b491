//! Builds a [`Report`] from records in one streaming pass: per process, per kernel, per API function.
#![expect(
    clippy::float_arithmetic,
    clippy::cast_precision_loss,
    reason = "durations and rates are shown as decimal fractions of nanosecond counts"
)]

use std::collections::{BTreeMap, HashMap};

use tracer_common::api::{Layout, Library, Op};

use super::kernel_rows::{KernelAcc, ShapeKey, code_of_name, kernel_acc, kernel_rows, shapes};
use super::{ApiReport, ConfigReport, IoctlReport, MemoryReport, ProcessReport, Report, crosscheck};
use crate::{
    read::phase::Feeder,
    trace::event::{ApiFunc, GridUnit, MemcpyKind, PacketType},
    trace::model::{Index, Visitor},
    trace::{self, Call, Config, Dispatch, Footer, Ioctl, Job, Launch, StepBatch},
};

#[derive(Default)]
struct ProcAcc {
    info: trace::Process,
    exit: Option<trace::Exit>,
    kernels: BTreeMap<u32, KernelAcc>,
    configs: ConfigReport,
    config_shapes: HashMap<ShapeKey, u64>,
    api: BTreeMap<ApiFunc, ApiReport>,
    memory: MemoryReport,
    libs: std::collections::BTreeSet<u32>,
    mapped: Vec<trace::Mapping>,
    ioctls: BTreeMap<String, IoctlReport>,
    queues: Vec<trace::Queue>,
    /// Queues KFD made (`AMDKFD_IOC_CREATE_QUEUE` that succeeded): (type, ring base address, ring size).
    kfd_queues: Vec<(u64, u64, u64)>,
    /// Per kernel object: kernel id, count, object, shapes.
    dispatches: crosscheck::DispatchAcc,
    barrier_packets: u64,
    /// Per queue: the first and last packet index read, and how many were read.
    packet_span: BTreeMap<u64, (u64, u64, u64)>,
    /// Per kernel id: launches, failed, captured (of those that succeeded).
    launch_outcomes: BTreeMap<u32, (u64, u64, u64)>,
    /// API calls per probed runtime copy (library id); tallied ones per function.
    lib_calls: BTreeMap<u32, u64>,
    /// Calls of counted libraries' functions: library id -> function -> calls.
    entry_calls: BTreeMap<u32, BTreeMap<String, u64>>,
    /// Launches by the file that made them.
    sites: BTreeMap<String, (u64, u64)>,
    /// Code-object files loaded by path, and their directories' listings.
    code: super::code_dirs::CodeAcc,
    jobs: super::job_times::JobsAcc,
}

/// The queues some of whose packets up to the last one read are missing: from index 0 for a queue made while
/// tracing (`made`), else from the first read (each index is read once: a doorbell store reads only the
/// packets after the last one read). A queue none of whose packets could be read has no span: its losses
/// are in the footer's counters alone.
fn packets_missing(spans: &BTreeMap<u64, (u64, u64, u64)>, made: &[trace::Queue]) -> Vec<super::QueueGap> {
    spans
        .iter()
        .filter_map(|(&queue, &(first, last, read))| {
            let first = if made.iter().any(|q| q.queue == queue) { 0 } else { first };
            let missing = (last - first).saturating_add(1).saturating_sub(read);
            (missing > 0).then_some(super::QueueGap { queue, first, last, read, missing })
        })
        .collect()
}

/// The queues KFD made that no `hsa_queue_create` made (an AQL queue's ring base is the HSA queue's).
fn queues_unread(kfd: &[(u64, u64, u64)], hsa: &[trace::Queue]) -> super::QueuesUnread {
    let mut out = super::QueuesUnread::default();
    for &(kind, ring, size) in kfd {
        match kind {
            // KFD_IOC_QUEUE_TYPE_COMPUTE_AQL
            2 if hsa.iter().any(|q| q.base_address == ring) => {}
            2 => out.aql_ring_bytes.push(size),
            // KFD_IOC_QUEUE_TYPE_SDMA, _SDMA_XGMI
            1 | 3 => out.sdma += 1,
            _ => out.other += 1,
        }
    }
    out
}

impl ProcAcc {
    /// A launch at the API: its kernel row, shape and outcome.
    fn launch(&mut self, l: &Launch, index: &Index) {
        self.libs.insert(l.lib);
        *self.lib_calls.entry(l.lib).or_default() += 1;
        api_stat(&mut self.api, l.api, (!l.entry_only).then_some((i64::from(l.ret), l.dur)));
        let id = index.shown_kernel(l.pid, l.kernel).unwrap_or(0);
        let k = self.kernels.entry(id).or_insert_with(|| kernel_acc(id, index, l.handle));
        k.report.launches += 1;
        if l.ret != 0 {
            k.report.failed += 1;
        }
        let o = self.launch_outcomes.entry(id).or_default();
        o.0 += 1;
        o.1 += u64::from(l.ret != 0);
        // A failed launch is counted once, as failed.
        o.2 += u64::from(l.captured_into_graph());
        *k.report.returns.entry(l.ret).or_default() += 1;
        if !k.report.apis.contains(&l.api) {
            k.report.apis.push(l.api);
        }
        *k.shapes.entry((l.grid, l.block, l.grid_unit, l.shmem)).or_default() += 1;
    }

    /// A `<<<>>>` configuration pushed: a call of its runtime, and a shape.
    fn config(&mut self, c: &Config) {
        self.libs.insert(c.lib);
        *self.lib_calls.entry(c.lib).or_default() += 1;
        api_stat(&mut self.api, c.api, Some((i64::from(c.ret), c.dur)));
        self.configs.count += 1;
        if c.ret != 0 {
            self.configs.failed += 1;
        }
        *self.config_shapes.entry((c.grid, c.block, GridUnit::Blocks, c.shmem)).or_default() += 1;
    }

    /// A step's batch: a call of libllama, recorded at entry.
    fn batch(&mut self, b: &StepBatch) {
        self.libs.insert(b.lib);
        *self.lib_calls.entry(b.lib).or_default() += 1;
        api_stat(&mut self.api, b.api, None);
    }

    /// The kernels of a graph executable read from the driver: in the kernel table even when only its
    /// replays ran them.
    fn graph_exec(&mut self, g: &trace::GraphExec, index: &Index) {
        if !g.check {
            for &id in &g.kernels {
                self.kernels.entry(id).or_insert_with(|| kernel_acc(id, index, 0));
            }
        }
    }

    /// Any other API call: its statistics, and for memory calls the bytes they moved.
    fn call(&mut self, c: &Call) {
        self.libs.insert(c.lib);
        *self.lib_calls.entry(c.lib).or_default() += 1;
        api_stat(&mut self.api, c.api, (!c.entry_only).then_some((c.ret, c.dur)));
        if let (Layout::ModulePath | Layout::CodeObjectFromFile, Some(file)) = (c.api.layout(), &c.file) {
            self.code.load(c, file);
        } else if let (Layout::ModuleOut, Some(file)) = (c.api.layout(), &c.file)
            && tracer_common::is_code_object(file.as_bytes())
        {
            // A module loaded from an image read out of a code-object file (rocBLAS's Tensile), not a library
            // whose embedded image was loaded.
            self.code.load(c, file);
        }
        let m = &mut self.memory;
        match c.api.op() {
            Op::Alloc => {
                m.malloc_calls += 1;
                m.malloc_bytes_requested += c.size.unwrap_or(0);
                if c.ret == 0 {
                    m.malloc_bytes += c.size.unwrap_or(0);
                } else {
                    m.malloc_failed += 1;
                }
            }
            Op::Free => m.free_calls += 1,
            Op::Memcpy => {
                let kind = c.kind.map_or_else(|| "unknown".into(), MemcpyKind::name);
                let e = m.memcpy.entry(kind.into_owned()).or_default();
                e.calls += 1;
                e.bytes += c.size.unwrap_or(0);
                if c.entry_only {
                    e.unchecked += 1;
                } else if c.ret != 0 {
                    e.failed += 1;
                }
            }
            _ => {}
        }
    }

    /// Calls counted in the kernel: no result or duration; a copy's bytes by direction.
    fn tally(&mut self, t: &trace::Tally) {
        // Counted in the kernel: calls without a result or duration; a copy's bytes by direction.
        let a = self.api.entry(t.api).or_insert_with(|| ApiReport::new(t.api));
        a.calls += t.calls;
        a.untimed += t.calls;
        a.tallied += t.calls;
        if t.api.op() == Op::Memcpy
            && let Layout::Memcpy { direction: tracer_common::api::CopyDirection::Fixed(k), .. } = t.api.layout()
        {
            let e = self.memory.memcpy.entry(MemcpyKind::from_raw(k).name().into_owned()).or_default();
            e.calls += t.calls;
            e.unchecked += t.calls;
            e.bytes += t.bytes;
        }
    }

    /// A packet at a GPU queue: a kernel dispatch or a barrier. Where HIP's launches were left to the
    /// doorbell (`at_doorbell`), a named kernel's dispatch is also its execution in the kernel table.
    fn dispatch(&mut self, d: &Dispatch, index: &Index, at_doorbell: bool) {
        self.libs.insert(d.lib);
        let span = self.packet_span.entry(d.queue).or_insert((d.index, d.index, 0));
        (span.0, span.1, span.2) = (span.0.min(d.index), span.1.max(d.index), span.2.saturating_add(1));
        if d.packet == PacketType::KernelDispatch {
            // Kernel objects with no kernel shown (past the per-process limits) are one row.
            let kernel = index.shown_kernel(d.pid, d.kernel);
            if let (true, Some(id)) = (at_doorbell, kernel) {
                let k = self.kernels.entry(id).or_insert_with(|| {
                    let mut k = kernel_acc(id, index, 0);
                    if k.report.code_file.is_none() {
                        (k.report.code_file, k.report.bundles) = code_of_name(index, d.pid, &k.report.name);
                    }
                    k
                });
                k.dispatched += 1;
                k.report.from_dispatches = true;
                let shape = (d.grid, d.workgroup.map(u32::from), GridUnit::WorkItems, u64::from(d.group_segment));
                *k.shapes.entry(shape).or_default() += 1;
            }
            let object = if kernel.is_some() { d.kernel_object } else { 0 };
            let e = self.dispatches.entry(object).or_insert_with(|| (kernel, 0, object, HashMap::new()));
            e.1 += 1;
            *e.3.entry((d.workgroup, d.grid, d.group_segment)).or_default() += 1;
        } else {
            self.barrier_packets += 1;
        }
    }

    /// A GPU driver ioctl: calls, time and errors by errno.
    fn ioctl(&mut self, i: &Ioctl) {
        let e = self.ioctls.entry(i.name.clone()).or_insert_with(|| IoctlReport {
            name: i.name.clone(),
            device: i.device.clone(),
            ..Default::default()
        });
        e.calls += 1;
        e.total_ns += i.dur;
        if i.name == "AMDKFD_IOC_CREATE_QUEUE" && i.ret == 0 {
            let field = |k: &str| i.fields.get(k).copied().unwrap_or(0);
            self.kfd_queues.push((field("queue_type"), field("ring_base_address"), field("ring_size")));
        }
        if i.ret < 0 {
            e.errors += 1;
            let errno = crate::os::ioctl::errno_name(i.ret).map_or_else(|| format!("errno {}", -i.ret), str::to_owned);
            *e.errnos.entry(errno).or_default() += 1;
        }
    }
}

/// Builds a [`Report`] one record at a time, so a trace of any length is summarized in bounded memory.
#[derive(Default)]
pub(crate) struct ReportBuilder {
    report: Report,
    procs: BTreeMap<u32, ProcAcc>,
    /// The losses the recording last wrote down before its footer, if any.
    checkpoint: Option<trace::Checkpoint>,
}

impl Visitor for ReportBuilder {
    fn header(&mut self, _: &Index, h: &trace::Header) {
        header(&mut self.report.trace, h);
    }

    fn library(&mut self, _: &Index, l: &trace::Library) {
        self.report.libraries.push(l.clone());
    }

    fn probe(&mut self, _: &Index, p: &trace::Probe) {
        if p.error.is_some() {
            self.report.probes_missing.push(p.clone());
        }
    }

    fn process(&mut self, _: &Index, p: &trace::Process) {
        self.procs.entry(p.pid).or_default().info = p.clone();
    }

    fn kernel(&mut self, _: &Index, k: &trace::Kernel) {
        self.procs.entry(k.pid).or_default();
    }

    fn launch(&mut self, index: &Index, l: &Launch) {
        // A launch that could have been probed at its return too (HIP's), read at entry only.
        if l.entry_only && l.api.entry_only_by_default() {
            self.report.trace.launch_results_unread += 1;
        }
        self.procs.entry(l.pid).or_default().launch(l, index);
    }

    fn repeat(&mut self, _: &Index, r: &trace::Repeat) {
        self.report.trace.launches_repeated = self.report.trace.launches_repeated.saturating_add(u64::from(r.count));
        self.report.trace.repeat_runs += 1;
    }

    fn config(&mut self, _: &Index, c: &Config) {
        self.procs.entry(c.pid).or_default().config(c);
    }

    fn call(&mut self, _: &Index, c: &Call) {
        self.procs.entry(c.pid).or_default().call(c);
    }

    fn exit(&mut self, _: &Index, e: &trace::Exit) {
        self.procs.entry(e.pid).or_default().exit = Some(e.clone());
    }

    fn tally(&mut self, _: &Index, t: &trace::Tally) {
        self.procs.entry(t.pid).or_default().tally(t);
    }

    fn entry_library(&mut self, _: &Index, l: &trace::EntryLibrary) {
        self.report.counted_libraries.push(l.clone());
    }

    fn entry_calls(&mut self, _: &Index, c: &trace::EntryCalls) {
        let acc = self.procs.entry(c.pid).or_default();
        *acc.entry_calls.entry(c.lib).or_default().entry(c.function.clone()).or_default() += c.calls;
    }

    fn launch_sites(&mut self, _: &Index, l: &trace::LaunchSites) {
        let site = self.procs.entry(l.pid).or_default().sites.entry(l.path.clone()).or_default();
        site.0 += l.launches;
        site.1 += l.failed;
    }

    /// A file mapped; a runtime copy's mapping written again supersedes the one before: once the copy was
    /// probed (the one before said it was not), or once its initializer's witness showed the probes in place
    /// before its first call (the one before said probed late).
    fn mapping(&mut self, _: &Index, m: &trace::Mapping) {
        let mapped = &mut self.procs.entry(m.pid).or_default().mapped;
        match mapped.iter_mut().find(|old| (old.dev, old.inode) == (m.dev, m.inode)) {
            Some(old) if m.lib.is_some() && (old.lib.is_none() || (old.probed_late && !m.probed_late)) => {
                m.clone_into(old);
            }
            Some(_) => {}
            None => mapped.push(m.clone()),
        }
    }

    /// The step feeder took the executable's kernels for its replays; here they join the kernel table.
    fn graph_exec(&mut self, index: &Index, g: &trace::GraphExec) {
        self.procs.entry(g.pid).or_default().graph_exec(g, index);
    }

    fn code_dir(&mut self, _: &Index, d: &trace::CodeDir) {
        self.procs.entry(d.pid).or_default().code.dir(d.clone());
    }

    fn queue(&mut self, _: &Index, q: &trace::Queue) {
        self.procs.entry(q.pid).or_default().queues.push(q.clone());
    }

    fn dispatch(&mut self, index: &Index, d: &Dispatch) {
        let at_doorbell = self.report.trace.launches_at_doorbell;
        self.procs.entry(d.pid).or_default().dispatch(d, index, at_doorbell);
    }

    fn ioctl(&mut self, _: &Index, i: &Ioctl) {
        self.procs.entry(i.pid).or_default().ioctl(i);
    }

    fn job(&mut self, _: &Index, j: &Job) {
        self.procs.entry(j.pid).or_default().jobs.add(j);
    }

    fn batch(&mut self, _: &Index, b: &StepBatch) {
        self.procs.entry(b.pid).or_default().batch(b);
    }

    fn checkpoint(&mut self, _: &Index, c: &trace::Checkpoint) {
        self.checkpoint = Some(c.clone());
    }

    fn footer(&mut self, _: &Index, f: &Footer) {
        let report = &mut self.report;
        report.trace.stop = Some(f.stop);
        report.drops_total = f.total_drops();
        report.drops = f.drops.iter().map(|(k, v)| (k.clone(), v.iter().sum())).collect();
        (report.counters, report.programs) = (f.counters.clone(), f.programs.clone());
    }
}

impl ReportBuilder {
    /// The report, with each process's steps as `feeder` counted them from the same records.
    pub(crate) fn finish(self, mut feeder: Feeder, index: &Index) -> Report {
        let mut report = self.report;
        report.trace.duration_s = index.last_ts().saturating_sub(index.start()) as f64 / 1e9;
        if let (None, Some(c)) = (report.trace.stop, self.checkpoint) {
            checkpoint_losses(&mut report, c, index.start());
        }
        for (pid, acc) in self.procs {
            let mut steps = feeder.take(pid);
            let mmq_widths = steps.mmq_widths();
            let (sequences_untracked, outputs_unheld) = (steps.phases.sequences.untracked, steps.phases.inputs.dropped);
            let (phases, spans) = std::mem::take(&mut steps.phases).finish_with_spans();
            let kernels = kernel_rows(acc.kernels, &acc.launch_outcomes, &steps);
            let (api, tallied) = api_rows(acc.api);
            let seen_maps = super::ledger::seen_maps(acc.mapped, &acc.libs, &report.libraries, pid);
            let mapped = super::ledger::Ledger {
                report: &report,
                start: index.start(),
                kernels: &kernels,
                tallied: &tallied,
                called: &acc.libs,
                lib_calls: &acc.lib_calls,
                entry_calls: &acc.entry_calls,
                sites: &acc.sites,
            }
            .rows(seen_maps);
            let incomplete = mapped.iter().any(|m| m.unseen_before_s.is_some() || m.runtime_not_probed);
            let unobserved = super::unobserved(&mapped);
            let (mut dispatches, mut crosscheck) =
                crosscheck::queue_view(index, acc.dispatches, &acc.launch_outcomes, steps.graphs.replays);
            // Where HIP's launches were left to the doorbell, no launch was probed to set beside the dispatches.
            crosscheck.retain(|_| !report.trace.launches_at_doorbell);
            for d in &mut dispatches {
                d.ne11 = d.kernel.and_then(|id| steps.columns(true).get(&id)).cloned().unwrap_or_default();
            }
            let code_dirs = acc.code.finish(&index.kernels_of(pid).collect::<Vec<_>>(), &kernels, &dispatches);
            let mut ioctls: Vec<IoctlReport> = acc.ioctls.into_values().collect();
            ioctls.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.name.cmp(&b.name)));
            let gpu_jobs = acc.jobs.finish(&spans);
            let (has_ioctls, has_queues) = (!ioctls.is_empty() || gpu_jobs.is_some(), !acc.queues.is_empty());
            report.processes.push(ProcessReport {
                pid,
                ppid: acc.info.ppid,
                comm: acc.info.comm,
                argv: acc.info.argv,
                role: acc.info.role,
                model: acc.info.model,
                model_name: acc.info.model_name,
                root: mapped.iter().find_map(|m| m.root.clone()),
                mapped,
                code_dirs,
                ioctls,
                queues_unread: queues_unread(&acc.kfd_queues, &acc.queues),
                packets_missing: packets_missing(&acc.packet_span, &acc.queues),
                queues: acc.queues,
                gpu_jobs,
                mmq_widths,
                step_libraries: step_libraries(&phases, &report.counted_libraries),
                sequences_untracked,
                outputs_unheld,
                phases,
                dispatches,
                barrier_packets: acc.barrier_packets,
                kernels_not_kept: index.kernels_not_kept(pid),
                graph_replays: steps.graphs.replays,
                graph_replays_unresolved: steps.graphs.unknown_replays,
                graph_execs_from_driver: steps.graphs.driver.clone(),
                crosscheck,
                exit_code: acc.exit.as_ref().and_then(|e| e.code),
                exit_signal: acc.exit.as_ref().and_then(|e| e.signal),
                exited: acc.exit.is_some(),
                kernels,
                configs: ConfigReport { shapes: shapes(acc.config_shapes), ..acc.configs },
                api,
                memory: acc.memory,
                // A runtime probed late or not at all may have been called unseen: never "no activity".
                gpu_activity: !acc.libs.is_empty() || has_ioctls || has_queues || incomplete || !unobserved.is_empty(),
                incomplete,
                unobserved,
                libraries: acc.libs.into_iter().collect(),
            });
        }
        report
    }
}

/// Without a footer, the losses are the last checkpoint's: a floor, said to be one.
fn checkpoint_losses(report: &mut Report, c: trace::Checkpoint, start: u64) {
    report.drops_total = c.total_drops();
    let at = c.ts.saturating_sub(start) as f64 / 1e9;
    report.trace.notes.push(format!(
        "losses: {} records dropped by the last checkpoint, {at:.1} s into the recording; those after it are unknown",
        report.drops_total
    ));
    report.drops = c.drops;
}

/// A process's API rows, most calls first, and the calls tallied in the kernel by runtime (they count as
/// calls of the runtime's copy).
fn api_rows(api: BTreeMap<ApiFunc, ApiReport>) -> (Vec<ApiReport>, HashMap<Library, u64>) {
    let mut tallied: HashMap<Library, u64> = HashMap::new();
    for a in api.values() {
        *tallied.entry(a.api.library()).or_default() += a.tallied;
    }
    let mut api: Vec<ApiReport> = api
        .into_values()
        .map(|mut a| {
            a.mean_ns = a.total_ns / (a.calls - a.untimed).max(1);
            a
        })
        .collect();
    api.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.api.name().cmp(b.api.name())));
    (api, tallied)
}

/// What the header says that the report shows.
fn header(t: &mut super::TraceInfo, h: &trace::Header) {
    t.lean = h.options.lean;
    t.launches_at_doorbell = h.options.launches_at_doorbell;
    t.doorbell_reads_all = h.options.doorbell_reads_all;
    t.gpu_jobs = super::job_times::Coverage::of(&h.options);
    (t.schema, t.tracer_version) = (h.schema, h.tracer_version.clone());
    (t.host, t.kernel_release) = (h.host.clone(), h.kernel_release.clone());
}

/// Counts one call; `timed` is its result and duration, None for a call recorded at entry only.
/// The names of the entry libraries whose calls the phases count (the last id stands for itself and every
/// later one).
fn step_libraries(phases: &[crate::read::phase::PhaseReport], libs: &[trace::EntryLibrary]) -> BTreeMap<u32, String> {
    let merged = trace::event::STEP_LIBRARIES_MERGED;
    phases
        .iter()
        .flat_map(|ph| ph.library_calls.keys())
        .map(|&id| {
            let name = libs.iter().find(|l| l.id == id).map_or_else(|| format!("library {id}"), |l| l.path.clone());
            let name = if id == merged { format!("{name} and every later library") } else { name };
            (id, name)
        })
        .collect()
}

fn api_stat(api: &mut BTreeMap<ApiFunc, ApiReport>, func: ApiFunc, timed: Option<(i64, u64)>) {
    let a = api.entry(func).or_insert_with(|| ApiReport::new(func));
    a.calls += 1;
    match timed {
        Some((ret, dur)) => {
            if ret != 0 {
                a.errors += 1;
            }
            a.total_ns += dur;
        }
        None => a.untimed += 1,
    }
}
