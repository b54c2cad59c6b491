//! Live metrics while recording (`tracer record --metrics ADDR`), served over HTTP ([`Server`]).
//!
//! What the trace says so far, counted from the same records the writer writes, as Prometheus counters.
//!
//! Counted per process, under the labels `comm`, `role` (Ollama's server or runner) and `model` (a
//! runner's model name; `comm` may be left out, `--metrics-no-comm`): kernel executions by family (launches, graph replays' kernels and queue
//! dispatches, as the report's steps count them: [`crate::read::phase::Feeder`]), launches, graph replays
//! (and those whose kernels are unknown), API calls by category, and per inference phase the closed
//! steps, their tokens and kernels by family. Label values are bounded sets: a kernel's family, never its
//! name; Ollama's role and model come from trusted sources (the followed server's argv and manifests); a
//! process's name, which any user chooses (`prctl(PR_SET_NAME)`), is a label for at most [`MAX_COMMS`]
//! distinct names, the processes of any other name counting under `comm="other"` (the cap and how many
//! were folded are in the scrape). A process that exits has its counts folded into its labels' totals and its state dropped, so
//! memory stays flat over days of runner churn. Records dropped and probes attached or missing come
//! from the session ([`Session`]).
//!
//! The exposition format is written by `prometheus-client` (the Prometheus project's own Rust client):
//! escaping, `# TYPE`/`# HELP`/`# UNIT` lines and the `_total` suffix as the `OpenMetrics` text format
//! wants them.

mod live_jobs;
mod serve;
pub(crate) use serve::Server;

/// Starts the metrics endpoint at `addr` on the current runtime (`record --metrics`): the server, and the
/// writer's tap that feeds it ([`crate::trace::Serve`]).
pub(crate) fn serve(
    addr: std::net::SocketAddr,
    comm_label: bool,
) -> anyhow::Result<(Box<dyn crate::trace::Endpoint>, Box<dyn crate::trace::Tap>)> {
    let live = Arc::new(Mutex::new(Metrics::new(comm_label)));
    let server = Server::start(addr, Arc::clone(&live))?;
    Ok((Box::new(server), Box::new(Tap(live))))
}

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex, PoisonError},
};

use prometheus_client::{
    encoding::text::encode,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

use live_jobs::{Labels, LiveJobs};

use crate::{
    read::phase::{FamilyKey, Feeder, family_key},
    trace::{
        Call, Job, Launch, Line, Probe, Process, Role, StepBatch,
        model::{Index, Visitor},
    },
};

/// Distinct process names (`comm`) kept as label values; past them, `other`.
pub(crate) const MAX_COMMS: usize = 64;
/// The `comm` label value of the processes whose name came past [`MAX_COMMS`].
const OTHER_COMM: &str = "other";
/// The most bytes a metrics body holds (a scrape's answer): about 2 000 series, far more than a host's GPU
/// processes need, while every label set any user can make within the label bounds reached 573 KB.
pub(crate) const MAX_BODY: usize = 256 << 10;

/// Folds the half of the label sets (at least one) with the fewest kernel executions into one set,
/// `comm="other"` with no role or model. Returns how many were folded.
fn fold_fewest(all: &mut BTreeMap<Labels, Counts>) -> u64 {
    let other: Labels = (OTHER_COMM.to_owned(), String::new(), String::new());
    let mut by_size: Vec<(u64, Labels)> = all
        .iter()
        .filter(|(l, _)| **l != other)
        .map(|(l, c)| (c.executions.values().sum::<u64>() + c.launches, l.clone()))
        .collect();
    by_size.sort_unstable();
    let n = (by_size.len() / 2).max(1);
    let mut into = all.remove(&other).unwrap_or_default();
    let mut folded = 0u64;
    for (_, labels) in by_size.into_iter().take(n) {
        if let Some(c) = all.remove(&labels) {
            into.add(&c);
            folded += 1;
        }
    }
    all.insert(other, into);
    folded
}

/// One process's counts (or the totals of the exited processes of one label set).
#[derive(Clone, Default)]
struct Counts {
    launches: u64,
    replays: u64,
    replays_unknown: u64,
    /// Family -> kernel executions.
    executions: BTreeMap<FamilyKey, u64>,
    /// API category -> calls.
    calls: BTreeMap<&'static str, u64>,
    /// (phase, family) -> kernel executions in closed steps; phase -> (steps, tokens).
    phase_kernels: BTreeMap<(&'static str, String), u64>,
    phase_steps: BTreeMap<&'static str, (u64, u64)>,
    /// Tokens of closed steps with batches: (prompt, decode).
    batch_tokens: (u64, u64),
    /// GPU scheduler ring -> (jobs done, GPU nanoseconds).
    gpu_jobs: BTreeMap<String, (u64, u64)>,
}

impl Counts {
    fn add(&mut self, o: &Self) {
        self.launches += o.launches;
        self.replays += o.replays;
        self.replays_unknown += o.replays_unknown;
        for (k, v) in &o.executions {
            *self.executions.entry(*k).or_default() += v;
        }
        for (k, v) in &o.calls {
            *self.calls.entry(k).or_default() += v;
        }
        for (k, v) in &o.phase_kernels {
            *self.phase_kernels.entry(k.clone()).or_default() += v;
        }
        for (ring, (n, ns)) in &o.gpu_jobs {
            let e = self.gpu_jobs.entry(ring.clone()).or_default();
            e.0 += n;
            e.1 += ns;
        }
        self.batch_tokens.0 += o.batch_tokens.0;
        self.batch_tokens.1 += o.batch_tokens.1;
        for (k, (s, t)) in &o.phase_steps {
            let e = self.phase_steps.entry(k).or_default();
            e.0 += s;
            e.1 += t;
        }
    }
}

/// What the session knows besides the records: drops and probes.
#[derive(Clone, Debug, Default)]
pub(crate) struct Session {
    /// Drop kind -> records dropped.
    pub(crate) dropped: BTreeMap<String, u64>,
    pub(crate) processes_traced: u64,
    /// The footer's counters so far, by name (`trace::counted`'s table and tracer-common's).
    pub(crate) counted: BTreeMap<String, u64>,
}

/// The live counts of a recording.
#[derive(Default)]
pub(crate) struct Metrics {
    /// The processes and kernels of the records so far, each dropped after its process exits.
    index: Index,
    feeder: Feeder,
    count: Counting,
    records: u64,
}

/// What the records add up to, per process and, once it exited, per label set.
#[derive(Default)]
struct Counting {
    /// Whether processes are labelled by their name (`comm`).
    comm_label: bool,
    /// The names admitted as `comm` values, at most [`MAX_COMMS`] besides those of Ollama's processes.
    comms: std::collections::HashSet<String>,
    /// Processes whose name was counted under `other`.
    comms_folded: u64,
    labels: HashMap<u32, Labels>,
    live: HashMap<u32, Counts>,
    /// Exited processes' counts, by labels.
    retired: BTreeMap<Labels, Counts>,
    probes_attached: u64,
    probes_missing: u64,
    jobs: LiveJobs,
}

impl Counting {
    /// The `comm` label value of a process: its name while fewer than [`MAX_COMMS`] names are labels (or
    /// it is one of Ollama's processes, whose role is trusted), else `other`; empty without the label.
    fn comm_value(&mut self, comm: &str, trusted: bool) -> String {
        if !self.comm_label {
            return String::new();
        }
        if self.comms.contains(comm) {
            return comm.to_owned();
        }
        if trusted || self.comms.len() < MAX_COMMS {
            self.comms.insert(comm.to_owned());
            return comm.to_owned();
        }
        self.comms_folded += 1;
        OTHER_COMM.to_owned()
    }
}

impl Visitor for Counting {
    fn process(&mut self, _: &Index, p: &Process) {
        let role = p.role.map_or("", Role::as_str).to_owned();
        let model = p.model_name.clone().or_else(|| p.model.clone()).unwrap_or_default();
        let comm = self.comm_value(&p.comm, p.role.is_some());
        self.labels.insert(p.pid, (comm, role, model));
    }

    fn probe(&mut self, _: &Index, p: &Probe) {
        if p.error.is_none() {
            self.probes_attached += 1;
        } else {
            self.probes_missing += 1;
        }
    }

    fn launch(&mut self, _: &Index, l: &Launch) {
        self.live.entry(l.pid).or_default().launches += 1;
    }

    /// A process whose steps are its batches (llama.cpp on the CPU too) is counted from its first.
    fn batch(&mut self, _: &Index, b: &StepBatch) {
        self.live.entry(b.pid).or_default();
    }

    fn call(&mut self, _: &Index, c: &Call) {
        let counts = self.live.entry(c.pid).or_default();
        *counts.calls.entry(c.api.op().name()).or_default() += 1;
    }

    /// A job done after its process exited counts under that process's labels.
    fn job(&mut self, _: &Index, j: &Job) {
        if let Some(done) = self.jobs.stage(j, self.labels.get(&j.pid)) {
            let counts = match self.live.get_mut(&done.pid) {
                Some(c) => c,
                None => self.retired.entry(done.labels).or_default(),
            };
            let e = counts.gpu_jobs.entry(done.ring).or_default();
            e.0 += 1;
            e.1 += done.busy_ns;
        }
    }
}

impl Metrics {
    /// Counts labelled by process name too when `comm_label`.
    pub(crate) fn new(comm_label: bool) -> Self {
        Self {
            index: Index::forgetting_exited(),
            feeder: Feeder::listing_executions(),
            count: Counting { comm_label, ..Counting::default() },
            records: 0,
        }
    }

    /// One record, as written.
    pub(crate) fn record(&mut self, r: &Line) {
        self.records += 1;
        self.index.feed(r, &mut (&mut self.feeder, &mut self.count));
        if let Some(list) = self.feeder.executions.as_mut() {
            for e in list.drain(..).filter(|e| e.ok) {
                *self.count.live.entry(e.pid).or_default().executions.entry(e.family).or_default() += e.count;
            }
        }
        match r {
            Line::Exit(e) => self.retire(e.pid),
            // Totals are kept; the spans of the steps a record closed are not (memory stays flat).
            _ => {
                if r.may_close_step()
                    && let Some(pid) = r.pid()
                {
                    self.forget_spans(pid);
                }
            }
        }
    }

    /// Lets go of the spans of the steps a process's record just closed; their totals stay.
    fn forget_spans(&mut self, pid: u32) {
        if let Some(p) = self.feeder.process_mut(pid) {
            p.phases.forget_spans();
        }
    }

    /// A process ended: its counts join its labels' totals, its state goes.
    fn retire(&mut self, pid: u32) {
        let mut counts = self.count.live.remove(&pid).unwrap_or_default();
        let steps = self.feeder.take(pid);
        step_counts(&mut counts, &steps);
        let labels = self.count.labels.remove(&pid).unwrap_or_default();
        self.count.retired.entry(labels).or_default().add(&counts);
    }

    /// Processes whose state is held (not yet exited).
    #[cfg(test)]
    pub(crate) fn processes_held(&self) -> usize {
        let (processes, kernels) = self.index.held();
        self.count.live.len().max(self.count.labels.len()).max(processes).max(kernels).max(self.feeder.classes_held())
    }

    /// The `OpenMetrics` text of everything so far, at most [`MAX_BODY`] bytes: past it, the label sets with
    /// the fewest kernel executions are folded into one (`comm="other"`, no role or model), half of those
    /// left each time, until it fits; the folded ones are counted (`metrics_label_sets_folded`).
    pub(crate) fn render(&mut self, session: &Session) -> String {
        let mut all: BTreeMap<Labels, Counts> = self.count.retired.clone();
        for (pid, counts) in &self.count.live {
            let mut c = counts.clone();
            if let Some(p) = self.feeder.process_mut(*pid) {
                step_counts(&mut c, p);
            }
            all.entry(self.count.labels.get(pid).cloned().unwrap_or_default()).or_default().add(&c);
        }
        let mut folded = 0u64;
        loop {
            let out = self.encode(&all, session, folded);
            if out.len() <= MAX_BODY || all.len() <= 1 {
                return out;
            }
            folded += fold_fewest(&mut all);
        }
    }

    fn encode(&self, all: &BTreeMap<Labels, Counts>, session: &Session, folded: u64) -> String {
        let mut reg = Registry::with_prefix("tracer");
        self.process_metrics(&mut reg, all);
        self.job_metrics(&mut reg, all);
        self.session_metrics(&mut reg, session);
        let folds = Counter::<u64>::default();
        folds.inc_by(folded);
        reg.register(
            "metrics_label_sets_folded",
            "Label sets (comm, role, model) folded into comm=\"other\" to keep this body within its byte bound",
            folds,
        );
        let mut out = String::new();
        if encode(&mut out, &reg).is_err() {
            // Writing to a String fails only if a value's formatting does: an empty exposition instead.
            "# EOF\n".clone_into(&mut out);
        }
        out
    }

    /// Per process label set: executions, launches, replays, calls, steps, tokens.
    fn process_metrics(&self, reg: &mut Registry, all: &BTreeMap<Labels, Counts>) {
        let proc_family = |reg: &mut Registry, name: &str, help: &str| {
            let f = Family::<Vec<(String, String)>, Counter>::default();
            reg.register(name, help, f.clone());
            f
        };
        let executions = proc_family(
            reg,
            "kernel_executions",
            "Kernel executions (launches that succeeded, graph replays' kernels, queue dispatches), by kernel family",
        );
        let launches = proc_family(reg, "kernel_launches", "Kernel launch calls");
        let replays = proc_family(reg, "graph_replays", "Graph replays (hipGraphLaunch, cuGraphLaunch)");
        let unknown = proc_family(
            reg,
            "graph_replays_unresolved",
            "Graph replays of executables whose capture tracer did not see (their kernels are not counted)",
        );
        let calls = proc_family(reg, "api_calls", "GPU API calls recorded one by one, by category");
        let steps = proc_family(reg, "phase_steps", "Closed inference steps (graph evaluations), by phase");
        let tokens = proc_family(reg, "phase_tokens", "Tokens evaluated in closed steps with exact widths, by phase");
        let phase_kernels =
            proc_family(reg, "phase_kernel_executions", "Kernel executions in closed steps, by phase and family");
        let batch_tokens = proc_family(
            reg,
            "batch_tokens",
            "Tokens of closed steps whose batch llama_decode gave, by kind (prompt, decode)",
        );
        let comm_label = self.count.comm_label;
        for ((comm, role, model), c) in all {
            let base = || {
                let mut l = Vec::with_capacity(5);
                if comm_label {
                    l.push(("comm".to_owned(), comm.clone()));
                }
                l.push(("role".to_owned(), role.clone()));
                l.push(("model".to_owned(), model.clone()));
                l
            };
            let with = |extra: &[(&str, &str)]| {
                let mut l = base();
                l.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
                l
            };
            launches.get_or_create(&base()).inc_by(c.launches);
            replays.get_or_create(&base()).inc_by(c.replays);
            unknown.get_or_create(&base()).inc_by(c.replays_unknown);
            for (family, n) in &c.executions {
                executions.get_or_create(&with(&[("family", &family_key(*family))])).inc_by(*n);
            }
            for (category, n) in &c.calls {
                calls.get_or_create(&with(&[("category", category)])).inc_by(*n);
            }
            for (phase, (s, t)) in &c.phase_steps {
                steps.get_or_create(&with(&[("phase", phase)])).inc_by(*s);
                tokens.get_or_create(&with(&[("phase", phase)])).inc_by(*t);
            }
            if c.batch_tokens != (0, 0) {
                batch_tokens.get_or_create(&with(&[("kind", "prompt")])).inc_by(c.batch_tokens.0);
                batch_tokens.get_or_create(&with(&[("kind", "decode")])).inc_by(c.batch_tokens.1);
            }
            for ((phase, family), n) in &c.phase_kernels {
                phase_kernels.get_or_create(&with(&[("phase", phase), ("family", family)])).inc_by(*n);
            }
        }
    }

    /// Per process label set and ring: GPU scheduler jobs done and their GPU time.
    fn job_metrics(&self, reg: &mut Registry, all: &BTreeMap<Labels, Counts>) {
        let gpu_jobs = Family::<Vec<(String, String)>, Counter>::default();
        reg.register(
            "gpu_jobs",
            "GPU scheduler jobs done (work submitted through the kernel driver), by ring",
            gpu_jobs.clone(),
        );
        let gpu_time = Family::<Vec<(String, String)>, Counter<f64, std::sync::atomic::AtomicU64>>::default();
        reg.register(
            "gpu_job_seconds",
            "GPU time of the scheduler jobs done, by ring (from when the ring could start each job to its fence)",
            gpu_time.clone(),
        );
        for ((comm, role, model), c) in all {
            let mut labels = Vec::with_capacity(4);
            if self.count.comm_label {
                labels.push(("comm".to_owned(), comm.clone()));
            }
            labels.push(("role".to_owned(), role.clone()));
            labels.push(("model".to_owned(), model.clone()));
            let with = |ring: &str| {
                let mut l = labels.clone();
                l.push(("ring".to_owned(), ring.to_owned()));
                l
            };
            for (ring, (n, ns)) in &c.gpu_jobs {
                gpu_jobs.get_or_create(&with(ring)).inc_by(*n);
                #[expect(
                    clippy::float_arithmetic,
                    clippy::cast_precision_loss,
                    reason = "Prometheus counts time in seconds, as a float"
                )]
                let seconds = *ns as f64 / 1e9;
                gpu_time.get_or_create(&with(ring)).inc_by(seconds);
            }
        }
    }

    /// The recording's own: records dropped and written, probes, processes traced, label folding.
    fn session_metrics(&self, reg: &mut Registry, session: &Session) {
        let dropped = Family::<Vec<(String, String)>, Counter>::default();
        reg.register("records_dropped", "Records lost before the trace file, by kind", dropped.clone());
        for (kind, n) in &session.dropped {
            dropped.get_or_create(&vec![("kind".to_owned(), kind.clone())]).inc_by(*n);
        }
        let gauge = |reg: &mut Registry, name: &str, help: &str, v: u64| {
            let g = Gauge::<i64>::default();
            g.set(i64::try_from(v).unwrap_or(i64::MAX));
            reg.register(name, help, g);
        };
        gauge(reg, "probes_attached", "Runtime functions probed", self.count.probes_attached);
        gauge(
            reg,
            "metrics_comm_values_max",
            "Distinct process names (comm) kept as label values; processes of further names count under comm=\"other\"",
            MAX_COMMS as u64,
        );
        let folded = Counter::<u64>::default();
        folded.inc_by(self.count.comms_folded);
        reg.register(
            "metrics_comm_folded",
            "Processes counted under comm=\"other\": their name came past the distinct names kept",
            folded,
        );
        gauge(reg, "probes_missing", "Runtime functions that could not be probed", self.count.probes_missing);
        gauge(
            reg,
            "processes_traced",
            "Processes in the kernel's filter (or seen, without one)",
            session.processes_traced,
        );
        let counted = Family::<Vec<(String, String)>, Gauge<i64>>::default();
        reg.register(
            "counted",
            "The trace footer's counters so far, by name (docs/trace-format.md says each): losses, refusals, the tracer's own cost",
            counted.clone(),
        );
        for (name, n) in &session.counted {
            counted.get_or_create(&vec![("name".to_owned(), name.clone())]).set(i64::try_from(*n).unwrap_or(i64::MAX));
        }
        let records = Counter::<u64>::default();
        records.inc_by(self.records);
        reg.register("trace_lines", "Records written to the trace file", records);
        let untimed = Counter::<u64>::default();
        untimed.inc_by(self.count.jobs.untimed);
        reg.register(
            "gpu_jobs_untimed",
            "GPU scheduler jobs done but not counted in gpu_jobs: their queue stage was not seen, or past the jobs and rings held",
            untimed,
        );
    }
}

/// The metrics as the writer's tap and the endpoint share them (on the recording's one thread: the lock
/// is never contended).
pub(crate) type Shared = Arc<Mutex<Metrics>>;

/// Runs `f` on the shared metrics.
pub(crate) fn with<T>(shared: &Shared, f: impl FnOnce(&mut Metrics) -> T) -> T {
    f(&mut shared.lock().unwrap_or_else(PoisonError::into_inner))
}

/// The writer's tap feeding the metrics.
pub(crate) struct Tap(pub(crate) Shared);

impl crate::trace::Tap for Tap {
    fn record(&mut self, record: &Line) {
        with(&self.0, |m| m.record(record));
    }
}

/// Adds what a process's steps hold to its counts: its graph replays, and its closed steps' totals.
fn step_counts(counts: &mut Counts, steps: &crate::read::phase::ProcessSteps) {
    counts.replays += steps.graphs.replays;
    counts.replays_unknown += steps.graphs.unknown_replays;
    for t in steps.phases.totals() {
        let phase = t.phase.metric_name();
        let e = counts.phase_steps.entry(phase).or_default();
        e.0 += t.steps;
        e.1 += t.tokens;
        counts.batch_tokens.0 += t.prompt_tokens;
        counts.batch_tokens.1 += t.decode_tokens;
        for (family, n) in t.kernels {
            *counts.phase_kernels.entry((phase, family)).or_default() += n;
        }
    }
}

#[cfg(test)]
mod tests;
