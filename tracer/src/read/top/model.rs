//! `tracer top`'s fold: the records a recording writes, in order, into per-process figures that the view
//! draws ([`Model::snapshot`]).
//!
//! The counting is the report's: the processes and kernels from [`Index`], kernel executions by family and
//! quantization type and the steps of each phase from the step feeder ([`Feeder`], the one the report,
//! the export and the metrics share). A process that exits has its steps finished there, as the report
//! finishes them ([`crate::read::phase::Phases::finish_with_spans`]), and the recording's end (its footer)
//! finishes every other process's: the figures of an ended process, and the final screen's, are the
//! report's. Memory stays bounded over runner churn: the index forgets exited processes, and at most
//! [`MAX_EXITED`] exited processes are kept as rows (older ones counted, never silently).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use crate::{
    read::phase::{Feeder, PhaseReport, PhaseTotals, family_key},
    trace::{
        Call, Checkpoint, Config, Dispatch, EntryCalls, EntryLibrary, Exit, Footer, Launch, Library, Line, Mapping,
        Probe, Process, StepBatch, Stop,
        model::{Index, Visitor},
    },
};

/// Exited processes kept as rows; the oldest go past it (counted in [`Snapshot::exited_not_shown`]).
pub(crate) const MAX_EXITED: usize = 64;
/// Distinct library names kept (runtime copies and counted GPU libraries); past them a library is named
/// by its id.
const MAX_LIBRARY_NAMES: usize = 4096;

/// One phase's figures: its steps, tokens and the traps its calls cost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PhaseFigures {
    pub(crate) phase: &'static str,
    pub(crate) steps: u64,
    pub(crate) tokens: u64,
    pub(crate) traps: u64,
}

impl PhaseFigures {
    const fn of_totals(t: &PhaseTotals) -> Self {
        Self { phase: t.phase.as_str(), steps: t.steps, tokens: t.tokens, traps: t.traps }
    }

    const fn of_report(r: &PhaseReport) -> Self {
        Self { phase: r.phase.as_str(), steps: r.steps, tokens: r.tokens, traps: r.traps }
    }
}

/// A process as the view shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Row {
    pub(crate) pid: u32,
    pub(crate) comm: String,
    /// Ollama's role (`runner`, `ollama-server`), and a runner's model (`name:tag`, else its file).
    pub(crate) role: Option<&'static str>,
    pub(crate) model: Option<String>,
    /// Kernel executions (launches that succeeded, graph replays' kernels, queue dispatches), as the
    /// report's kernel rows count them, by family and quant type ("MMVQ `Q4_K`").
    pub(crate) families: BTreeMap<String, u64>,
    pub(crate) phases: Vec<PhaseFigures>,
    /// File names of the GPU libraries whose probes fired for it (runtime copies, counted GPU libraries).
    pub(crate) libraries: BTreeSet<String>,
    /// Runtime copies it maps that were probed after it mapped them (some calls may have gone unseen).
    pub(crate) probed_late: u64,
    pub(crate) exited: bool,
    /// Its figures are final: its steps were finished as the report finishes them.
    pub(crate) final_figures: bool,
}

impl Row {
    pub(crate) fn executions(&self) -> u64 {
        self.families.values().fold(0u64, |s, n| s.saturating_add(*n))
    }

    pub(crate) fn tokens(&self) -> u64 {
        self.phases.iter().fold(0u64, |s, p| s.saturating_add(p.tokens))
    }

    pub(crate) fn traps(&self) -> u64 {
        self.phases.iter().fold(0u64, |s, p| s.saturating_add(p.traps))
    }

    /// Whether it did anything on a GPU that tracer saw (the others are counted in one line).
    pub(crate) fn gpu_activity(&self) -> bool {
        !self.families.is_empty() || !self.libraries.is_empty() || !self.phases.is_empty() || self.probed_late > 0
    }
}

/// What the view draws, taken under the lock.
#[derive(Clone, Debug, Default)]
pub(crate) struct Snapshot {
    pub(crate) rows: Vec<Row>,
    pub(crate) records: u64,
    /// Records lost before the trace file so far (the last checkpoint's, then the footer's).
    pub(crate) dropped: u64,
    pub(crate) probes_missing: u64,
    pub(crate) exited_not_shown: u64,
    /// Why the recording ended, once its footer was written.
    pub(crate) stop: Option<Stop>,
}

/// A process's own part of the fold (its steps live in the feeder).
#[derive(Default)]
struct Proc {
    row: Row,
    lib_ids: BTreeSet<u32>,
    entry_ids: BTreeSet<u32>,
    /// (dev, inode) of the copies it maps that were probed late.
    late: BTreeSet<(u64, u64)>,
}

impl Proc {
    fn lib(&mut self, id: u32) {
        self.lib_ids.insert(id);
    }
}

/// The records' side of the fold (a [`Visitor`] beside the feeder).
#[derive(Default)]
struct Live {
    procs: HashMap<u32, Proc>,
    libraries: HashMap<u32, String>,
    entry_libraries: HashMap<u32, String>,
    probes_missing: u64,
    dropped: u64,
    stop: Option<Stop>,
}

impl Live {
    /// A process's part, made at its first record.
    fn at(&mut self, pid: u32) -> &mut Proc {
        let p = self.procs.entry(pid).or_default();
        p.row.pid = pid;
        p
    }
}

/// A library's file name, from its path.
fn file_name(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_owned()
}

impl Visitor for Live {
    fn library(&mut self, _: &Index, l: &Library) {
        if self.libraries.len() < MAX_LIBRARY_NAMES {
            self.libraries.insert(l.id, file_name(&l.path));
        }
    }

    fn entry_library(&mut self, _: &Index, l: &EntryLibrary) {
        if self.entry_libraries.len() < MAX_LIBRARY_NAMES {
            self.entry_libraries.insert(l.id, file_name(&l.path));
        }
    }

    fn probe(&mut self, _: &Index, p: &Probe) {
        if p.error.is_some() {
            self.probes_missing += 1;
        }
    }

    fn process(&mut self, _: &Index, p: &Process) {
        let proc = self.at(p.pid);
        proc.row.pid = p.pid;
        proc.row.comm.clone_from(&p.comm);
        proc.row.role = p.role.map(crate::trace::Role::as_str);
        proc.row.model = p.model_name.clone().or_else(|| p.model.clone());
    }

    fn launch(&mut self, _: &Index, l: &Launch) {
        self.at(l.pid).lib(l.lib);
    }

    fn config(&mut self, _: &Index, c: &Config) {
        self.at(c.pid).lib(c.lib);
    }

    fn call(&mut self, _: &Index, c: &Call) {
        self.at(c.pid).lib(c.lib);
    }

    fn batch(&mut self, _: &Index, b: &StepBatch) {
        self.at(b.pid).lib(b.lib);
    }

    fn dispatch(&mut self, _: &Index, d: &Dispatch) {
        self.at(d.pid).lib(d.lib);
    }

    fn entry_calls(&mut self, _: &Index, c: &EntryCalls) {
        self.at(c.pid).entry_ids.insert(c.lib);
    }

    /// A copy probed late; a later mapping of the same copy that says otherwise supersedes it, as in the
    /// report.
    fn mapping(&mut self, _: &Index, m: &Mapping) {
        let late = &mut self.at(m.pid).late;
        if m.probed_late {
            late.insert((m.dev, m.inode));
        } else if m.lib.is_some() {
            late.remove(&(m.dev, m.inode));
        }
    }

    fn checkpoint(&mut self, _: &Index, c: &Checkpoint) {
        self.dropped = c.total_drops();
    }

    fn footer(&mut self, _: &Index, f: &Footer) {
        self.dropped = f.total_drops();
        self.stop = Some(f.stop);
    }
}

/// The live figures of a recording.
pub(crate) struct Model {
    index: Index,
    feeder: Feeder,
    live: Live,
    exited: VecDeque<Row>,
    exited_not_shown: u64,
    records: u64,
}

impl Default for Model {
    fn default() -> Self {
        Self {
            index: Index::forgetting_exited(),
            feeder: Feeder::listing_executions(),
            live: Live::default(),
            exited: VecDeque::new(),
            exited_not_shown: 0,
            records: 0,
        }
    }
}

impl Model {
    /// One record, as written.
    pub(crate) fn record(&mut self, r: &Line) {
        self.records += 1;
        self.index.feed(r, &mut (&mut self.feeder, &mut self.live));
        if let Some(list) = self.feeder.executions.as_mut() {
            for e in list.drain(..).filter(|e| e.ok) {
                let proc = self.live.at(e.pid);
                let n = proc.row.families.entry(family_key(e.family)).or_default();
                *n = n.saturating_add(e.count);
            }
        }
        match r {
            Line::Exit(Exit { pid, .. }) => self.retire(*pid),
            Line::Footer(_) => {
                let pids: Vec<u32> = self.live.procs.keys().copied().collect();
                for pid in pids {
                    self.finish(pid);
                }
            }
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

    /// A process's steps finished as the report finishes them: its figures are final.
    fn finish(&mut self, pid: u32) {
        let steps = self.feeder.take(pid);
        let phases = steps.phases.finish_with_spans().0;
        if let Some(p) = self.live.procs.get_mut(&pid) {
            p.row.phases = phases.iter().map(PhaseFigures::of_report).collect();
            p.row.final_figures = true;
        }
    }

    /// A process ended: its figures are finished, and it becomes one of the exited rows.
    fn retire(&mut self, pid: u32) {
        self.finish(pid);
        let Some(p) = self.live.procs.remove(&pid) else { return };
        let mut row = self.row_of(&p);
        row.exited = true;
        self.exited.push_back(row);
        while self.exited.len() > MAX_EXITED {
            self.exited.pop_front();
            self.exited_not_shown += 1;
        }
    }

    fn row_of(&self, p: &Proc) -> Row {
        let mut row = p.row.clone();
        let name = |names: &HashMap<u32, String>, id: u32| names.get(&id).cloned().unwrap_or_else(|| format!("#{id}"));
        row.libraries = p.lib_ids.iter().map(|&id| name(&self.live.libraries, id)).collect();
        row.libraries.extend(p.entry_ids.iter().map(|&id| name(&self.live.entry_libraries, id)));
        row.probed_late = p.late.len() as u64;
        row
    }

    /// Everything so far: the running processes (their closed steps), then the exited ones.
    pub(crate) fn snapshot(&mut self) -> Snapshot {
        let mut rows = Vec::with_capacity(self.live.procs.len() + self.exited.len());
        for (pid, p) in &self.live.procs {
            let mut row = self.row_of(p);
            if !row.final_figures
                && let Some(steps) = self.feeder.process_mut(*pid)
            {
                row.phases = steps.phases.totals().iter().map(PhaseFigures::of_totals).collect();
            }
            rows.push(row);
        }
        rows.extend(self.exited.iter().cloned());
        Snapshot {
            rows,
            records: self.records,
            dropped: self.live.dropped,
            probes_missing: self.live.probes_missing,
            exited_not_shown: self.exited_not_shown,
            stop: self.live.stop,
        }
    }
}

/// The model as the writer's tap and the view share it.
pub(crate) type Shared = std::sync::Arc<std::sync::Mutex<Model>>;

/// Runs `f` on the shared model (a poisoned lock still holds counts worth drawing).
pub(crate) fn with<T>(shared: &Shared, f: impl FnOnce(&mut Model) -> T) -> T {
    f(&mut shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
}

/// The writer's tap feeding the model.
pub(crate) struct Tap(pub(crate) Shared);

impl crate::trace::Tap for Tap {
    fn record(&mut self, record: &Line) {
        with(&self.0, |m| m.record(record));
    }
}
