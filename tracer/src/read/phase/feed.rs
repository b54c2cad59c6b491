//! The step feeder: a trace's records, in order, fed to each process's [`Phases`] the one way both the
//! report and the export count them.
//!
//! Launches are classified once per kernel and refined by their shape; MMQ's exact column count comes
//! from its own parameter where read, else from the src1 quantization before it on the same stream or
//! queue. A launch made while a stream captures a graph does not run then: it runs in the replays of
//! the executables instantiated from that graph, and each replay adds its kernels (with the widths they
//! had when captured) to the step it runs in. An executable made before the attach runs the kernels
//! read from the driver's objects (a `graph_exec` record), where they were read. Dispatches are fed as the queue's view. API calls end steps
//! (a copy toward the host, then a sync; the copy alone in a lean recording). Tallies (calls counted in
//! the kernel, never recorded one by one) carry no time and cut nothing.

use std::collections::{BTreeMap, HashMap, HashSet};

use tracer_common::api::Op;

use super::Phases;
use crate::{
    trace::classify::{Batch, Class, Family, classify},
    trace::event::{Call, Dispatch, GridUnit, Launch},
    trace::model::{Index, Visitor},
    trace::{Exit, GraphExec, GraphInput, Kernel, StepBatch, StepCalls},
};

/// Feeds every process's steps from a trace's records, in trace order.
#[derive(Default)]
pub(crate) struct Feeder {
    classes: Classes,
    procs: BTreeMap<u32, ProcessSteps>,
    /// When set ([`Feeder::listing_executions`]), each kernel execution the last record made, as the steps
    /// counted it (the Parquet export's rows).
    pub(crate) executions: Option<Vec<Execution>>,
}

/// Kernel executions one record made, as the steps count them: a launch (outside a capture), the kernels
/// of a graph replay (`count` runs each), or a queue dispatch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Execution {
    pub(crate) pid: u32,
    pub(crate) ts: u64,
    pub(crate) kernel: Option<u32>,
    pub(crate) view: View,
    /// Runs of the kernel (more than one only for a replay of a graph that captured it several times).
    pub(crate) count: u64,
    /// Its family, with the ggml quantization type where the name has one (see [`Execution::family_name`]).
    pub(crate) family: FamilyKey,
    /// The exact column count (ne11) of a ggml matrix kernel, where known.
    pub(crate) ne11: Option<u32>,
    /// The launch returned success (always, for a replay or a dispatch): the report's executions count
    /// only these; steps count every launch (a failed launch still shows what the program ran).
    pub(crate) ok: bool,
}

/// Where an execution was seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum View {
    Launch,
    GraphReplay,
    Dispatch,
}

impl View {
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::Launch => "launch",
            Self::GraphReplay => "graph-replay",
            Self::Dispatch => "dispatch",
        }
    }
}

/// An execution's family and exact column count, from its class.
const fn execution(
    pid: u32,
    ts: u64,
    kernel: Option<u32>,
    view: View,
    count: u64,
    class: &Class,
    ok: bool,
) -> Execution {
    let ne11 = match class.batch {
        Some(Batch::Exact(n)) if matches!(class.family, Family::Mmq | Family::Mmvq) => Some(n),
        _ => None,
    };
    Execution { pid, ts, kernel, view, count, family: (class.family, class.quant), ne11, ok }
}

/// A kernel family and the ggml quantization type its name gives.
pub(crate) type FamilyKey = (Family, Option<&'static str>);

impl Execution {
    /// The family as reports name it ("MMQ `Q4_K`").
    pub(crate) fn family_name(&self) -> String {
        super::family_key(self.family)
    }
}

/// One process's steps and what feeding them needs: the graphs its replays run and where its MMQ
/// kernels took their widths from.
#[derive(Default)]
pub(crate) struct ProcessSteps {
    pub(crate) phases: Phases,
    /// MMQ column counts in the launches' view (by stream) and in the queue's (by queue).
    launch_widths: MmqWidths,
    queue_widths: MmqWidths,
    pub(crate) graphs: Graphs,
    /// Per queue, the time of the last doorbell store read (its packets share it).
    doorbells: HashMap<u64, u64>,
}

impl ProcessSteps {
    /// Where the MMQ kernels of the view the phases count (the queue's when the process has dispatches)
    /// took their exact column count from.
    pub(crate) fn mmq_widths(&self) -> BTreeMap<&'static str, u64> {
        if self.phases.counts_dispatches() {
            self.queue_widths.sources.clone()
        } else {
            self.launch_widths.sources.clone()
        }
    }

    /// The exact column counts (ne11) each MMQ or MMVQ kernel id ran with, counted in executions: in the
    /// launches' view (launches and graph replays), or the queue's (dispatches).
    pub(crate) const fn columns(&self, queue: bool) -> &BTreeMap<u32, BTreeMap<u32, u64>> {
        if queue { &self.queue_widths.columns } else { &self.launch_widths.columns }
    }
}

impl Feeder {
    /// A feeder that also lists each record's kernel executions in [`Feeder::executions`].
    pub(crate) fn listing_executions() -> Self {
        Self { executions: Some(Vec::new()), ..Self::default() }
    }

    /// Kernel classifications held (each dropped when its process exits).
    #[cfg(test)]
    pub(crate) fn classes_held(&self) -> usize {
        self.classes.classes.len()
    }

    /// The steps of a process (empty for one with none).
    pub(crate) fn take(&mut self, pid: u32) -> ProcessSteps {
        self.procs.remove(&pid).unwrap_or_default()
    }

    /// A process's steps so far.
    pub(crate) fn process_mut(&mut self, pid: u32) -> Option<&mut ProcessSteps> {
        self.procs.get_mut(&pid)
    }

    /// Every process's steps.
    pub(crate) fn into_processes(self) -> BTreeMap<u32, ProcessSteps> {
        self.procs
    }
}

/// The records that make or cut steps, in trace order.
impl Visitor for Feeder {
    /// A kernel named again is classified again.
    fn kernel(&mut self, _: &Index, k: &Kernel) {
        self.classes.classes.remove(&k.id);
    }

    /// An exited process's kernels are classified no more (its steps stay, for whoever takes them).
    fn exit(&mut self, index: &Index, e: &Exit) {
        for k in index.kernels_of(e.pid) {
            self.classes.classes.remove(&k.id);
        }
    }

    fn launch(&mut self, index: &Index, l: &Launch) {
        let mut class =
            self.classes.of(index, l.kernel).with_shape(l.grid, l.block, l.grid_unit == GridUnit::WorkItems);
        let p = self.procs.entry(l.pid).or_default();
        p.phases.api(l.api, traps(l.entry_only));
        let exact = class.ne11_from_params(&l.params);
        p.launch_widths.settle(&mut class, l.stream, l.grid, exact);
        // A launch made while capturing runs only in the graph's replays (counted there, with the batch
        // width it had when captured). One that failed is a failed launch, as the report counts it.
        if l.captured_into_graph() {
            let k = p.graphs.capturing.entry(l.stream).or_default().entry(l.kernel.unwrap_or(0)).or_default();
            k.count += 1;
            if class.family == Family::Mmq {
                k.batch = class.batch;
            }
        } else {
            p.launch_widths.ran(l.kernel, &class, 1);
            if let Some(list) = &mut self.executions {
                list.push(execution(l.pid, l.ts, l.kernel, View::Launch, 1, &class, l.ret == 0));
            }
            p.phases.launch(class, l.ts);
        }
    }

    fn call(&mut self, index: &Index, c: &Call) {
        let p = self.procs.entry(c.pid).or_default();
        match p.graphs.call(c) {
            Ran::Replay(bag) => {
                for (&id, k) in bag {
                    let mut class = self.classes.of(index, Some(id));
                    if k.batch.is_some() {
                        class.batch = k.batch;
                    }
                    p.launch_widths.ran(Some(id), &class, k.count);
                    if let Some(list) = &mut self.executions {
                        list.push(execution(c.pid, c.ts, Some(id), View::GraphReplay, k.count, &class, true));
                    }
                    p.phases.replay(&class, k.count, c.ts);
                }
            }
            Ran::UnknownReplay => p.phases.unknown_replay(c.ts),
            Ran::Nothing => {}
        }
        // A call that ends a step is one of it (a copy toward the host); a pass may begin one, and is its.
        if c.api.op() == Op::Pass {
            p.phases.call(c.api.op(), c.kind, c.ts, index.lean());
            p.phases.api(c.api, traps(c.entry_only));
        } else {
            p.phases.api(c.api, traps(c.entry_only));
            p.phases.call(c.api.op(), c.kind, c.ts, index.lean());
        }
    }

    fn dispatch(&mut self, index: &Index, d: &Dispatch) {
        let p = self.procs.entry(d.pid).or_default();
        // One trap a doorbell store: the packets it read carry its time, on its queue.
        if p.doorbells.insert(d.queue, d.ts) != Some(d.ts) {
            p.phases.doorbell();
        }
        if d.kernel.is_none() {
            return; // a barrier packet
        }
        let workgroup = d.workgroup.map(u32::from);
        let mut class = self.classes.of(index, d.kernel).with_shape(d.grid, workgroup, true);
        // A packet's grid counts work-items; ggml's src1 quantization puts ne1 in the x of its grid in
        // blocks, and the MMQ after it on the queue uses it (as for launches, by stream).
        let blocks = std::array::from_fn(|i| d.grid[i].div_ceil(workgroup[i].max(1)));
        // The kernel's own argument where the doorbell read it.
        let exact = class.ne11_from_kernarg(&d.params);
        p.queue_widths.settle(&mut class, d.queue, blocks, exact);
        p.queue_widths.ran(d.kernel, &class, 1);
        if let Some(list) = &mut self.executions {
            list.push(execution(d.pid, d.ts, d.kernel, View::Dispatch, 1, &class, true));
        }
        p.phases.dispatch(class, d.ts);
    }

    fn graph_exec(&mut self, _: &Index, g: &GraphExec) {
        self.procs.entry(g.pid).or_default().graphs.driver_read(g);
    }

    fn batch(&mut self, _: &Index, b: &StepBatch) {
        self.procs.entry(b.pid).or_default().phases.batch(b);
    }

    /// A pass's input read: one trap (those on other tensors are counted for the whole recording only).
    fn graph_input(&mut self, _: &Index, g: &GraphInput) {
        self.procs.entry(g.pid).or_default().phases.graph_input(g);
    }

    fn step_calls(&mut self, _: &Index, c: &StepCalls) {
        let phases = &mut self.procs.entry(c.pid).or_default().phases;
        // Step 0: a process without batches, its calls cut at passes.
        if c.at_pass.is_some() || c.step == 0 {
            phases.pass_calls(&c.calls);
        } else {
            phases.last_step_calls(c.step, &c.calls);
        }
    }
}

/// Kernels' classifications, computed once per kernel id, the first time one is launched or dispatched.
#[derive(Default)]
struct Classes {
    classes: HashMap<u32, Class>,
}

impl Classes {
    /// The classification of a kernel id (an unknown one, or none, as an unnamed kernel).
    fn of(&mut self, index: &Index, id: Option<u32>) -> Class {
        let Some(id) = id else { return classify("") };
        if let Some(c) = self.classes.get(&id) {
            return c.clone();
        }
        let class = classify(index.kernel(id).map_or("", |k| k.name.as_str()));
        self.classes.insert(id, class.clone());
        class
    }
}

/// Where the MMQ kernels of one view (launches on streams, or dispatches on queues) took their exact column
/// count from.
#[derive(Default)]
struct MmqWidths {
    /// Per stream or queue: the column count the last `quantize_mmq_q8_1` there gave (the MMQ after it
    /// uses it).
    quantized: HashMap<u64, u32>,
    /// MMQ kernels by the source of their column count.
    sources: BTreeMap<&'static str, u64>,
    /// Kernel id -> exact column count -> executions, of MMQ and MMVQ kernels whose count is known.
    columns: BTreeMap<u32, BTreeMap<u32, u64>>,
}

impl MmqWidths {
    /// `n` executions of kernel `id`: counted under its exact column count when it is a ggml matrix
    /// kernel whose count is known.
    fn ran(&mut self, id: Option<u32>, class: &Class, n: u64) {
        if let (Some(id), Family::Mmq | Family::Mmvq, Some(Batch::Exact(columns))) = (id, class.family, class.batch) {
            *self.columns.entry(id).or_default().entry(columns).or_default() += n;
        }
    }

    /// One kernel run on stream or queue `lane` with a grid of `grid` blocks: a src1 quantization is
    /// remembered; an MMQ takes its exact column count from its own parameter (`exact`) where that was
    /// read, else from the quantization before it there, else keeps its tile bound.
    fn settle(&mut self, class: &mut Class, lane: u64, grid: [u32; 3], exact: Option<u32>) {
        if let Some(columns) = class.mmq_columns(grid) {
            self.quantized.insert(lane, columns);
        }
        if class.family != Family::Mmq {
            return;
        }
        let (columns, source) = match exact {
            Some(n) => (Some(n), "kernel parameter"),
            None => match self.quantized.get(&lane) {
                Some(&n) => (Some(n), "src1 quantize grid"),
                None => (None, "tile bound only"),
            },
        };
        if let Some(n) = columns {
            class.batch = Some(Batch::Exact(n));
        }
        *self.sources.entry(source).or_default() += 1;
    }
}

/// A kernel's launches in one capture: how many, and the batch width they had then (MMQ's exact
/// column count), which its replays keep.
#[derive(Clone, Copy, Default)]
struct Captured {
    count: u64,
    batch: Option<Batch>,
}

/// Kernel id -> its launches in one capture.
type CaptureBag = BTreeMap<u32, Captured>;

/// What graph replays ran: launches captured per capturing stream, the graph each capture made, the
/// executables instantiated from them, and per kernel the executions their replays added.
#[derive(Default)]
pub(crate) struct Graphs {
    /// Per capturing stream: the launches captured so far.
    capturing: HashMap<u64, CaptureBag>,
    /// Per graph a capture made: its launches.
    captured: HashMap<u64, CaptureBag>,
    /// Per executable: the launches its replays run.
    execs: HashMap<u64, CaptureBag>,
    /// Kernel id -> executions its replays added.
    pub(crate) replayed: BTreeMap<u32, u64>,
    /// Successful graph launches (replays).
    pub(crate) replays: u64,
    /// Replays of an executable whose capture was not seen (made before tracer started) and whose
    /// kernels were not read from the driver.
    pub(crate) unknown_replays: u64,
    /// Executables whose kernels were read from the driver (until made again from a graph).
    driver_execs: HashSet<u64>,
    /// What reading executables from the driver gave.
    pub(crate) driver: DriverReads,
}

/// Graph executables read from the driver's objects in one process (`graph_exec` records), and the
/// replays they resolved.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub(crate) struct DriverReads {
    /// Executables made before the attach whose kernels were read.
    pub(crate) named: u64,
    /// Of them, read through their own node copies (their source graph destroyed).
    pub(crate) named_from_copies: u64,
    /// Their kernel nodes.
    pub(crate) kernel_nodes: u64,
    /// Replays that ran them.
    pub(crate) replays: u64,
    /// Executables not read: their source graph was destroyed (the count reads 0); the layout did not
    /// hold; refused (checks disagreed, or none and a driver the layout was not measured on).
    pub(crate) source_gone: u64,
    pub(crate) layout: u64,
    pub(crate) refused: u64,
    /// Executables not read because the process had ended by then.
    pub(crate) process_gone: u64,
    /// Executables of graphs tracer saw captured, read to check the layout: agreed, disagreed.
    pub(crate) checks_agreed: u64,
    pub(crate) checks_disagreed: u64,
    /// Checks not made: the executable could not be read by then (its graph changed or gone: a loop that
    /// captures at every step), or a captured launch had no name.
    pub(crate) checks_unread: u64,
    /// The driver's version, from its file name.
    pub(crate) driver: Option<String>,
}

impl DriverReads {
    /// Whether any executable was read or refused (the report says so only then).
    pub(crate) fn any(&self) -> bool {
        *self != Self { driver: self.driver.clone(), ..Self::default() }
    }
}

/// What a call ran: nothing, a replay of a known graph (its launches), or a replay of an executable whose
/// capture was not seen.
enum Ran<'a> {
    Nothing,
    Replay(&'a CaptureBag),
    UnknownReplay,
}

impl Graphs {
    /// A call: captures end, executables are made, replays run. Returns what a replay ran.
    fn call(&mut self, c: &Call) -> Ran<'_> {
        let ok = c.ret == 0;
        match c.api.op() {
            Op::CaptureEnd => {
                let bag = self.capturing.remove(&c.stream.unwrap_or(0)).unwrap_or_default();
                if let (true, Some(graph)) = (ok, c.handle) {
                    self.captured.insert(graph, bag);
                }
            }
            // Instantiated from a graph, or updated in place to run another one's nodes: the replays of
            // the executable run the graph's launches from then on.
            Op::GraphInstantiate | Op::GraphUpdate => {
                if let (true, Some(graph), Some(exec)) = (ok, c.handle, c.value) {
                    self.driver_execs.remove(&exec);
                    self.execs.insert(exec, self.captured.get(&graph).cloned().unwrap_or_default());
                }
            }
            Op::GraphLaunch if ok => {
                self.replays += 1;
                let Some((exec, bag)) = c.handle.and_then(|e| Some((e, self.execs.get(&e)?))) else {
                    self.unknown_replays += 1;
                    return Ran::UnknownReplay;
                };
                if self.driver_execs.contains(&exec) {
                    self.driver.replays += 1;
                }
                for (id, k) in bag {
                    *self.replayed.entry(*id).or_default() += k.count;
                }
                return Ran::Replay(bag);
            }
            _ => {}
        }
        Ran::Nothing
    }

    /// A graph executable read from the driver: one made before the attach runs the kernels read from
    /// then on (unless made again from a graph); one read to check the layout is counted.
    fn driver_read(&mut self, g: &GraphExec) {
        use crate::trace::ExecOutcome;
        let d = &mut self.driver;
        if g.driver.is_some() {
            d.driver.clone_from(&g.driver);
        }
        match (g.check, g.agrees, g.outcome) {
            (true, Some(true), _) => d.checks_agreed += 1,
            (true, Some(false), _) => d.checks_disagreed += 1,
            (true, None, _) => d.checks_unread += 1,
            (false, _, ExecOutcome::Named) => {
                d.named += 1;
                if g.route == Some(crate::trace::ExecRoute::Copies) {
                    d.named_from_copies += 1;
                }
                d.kernel_nodes += g.kernels.len() as u64;
                let mut bag = CaptureBag::new();
                for &id in &g.kernels {
                    bag.entry(id).or_default().count += 1;
                }
                self.execs.insert(g.exec, bag);
                self.driver_execs.insert(g.exec);
            }
            (false, _, ExecOutcome::SourceGone) => d.source_gone += 1,
            (false, _, ExecOutcome::Layout) => d.layout += 1,
            (false, _, ExecOutcome::ProcessGone) => d.process_gone += 1,
            (false, _, ExecOutcome::Refused | ExecOutcome::Unknown) => d.refused += 1,
        }
    }
}

/// What a call seen one by one cost its thread: one trap at entry, a second at the return where it was
/// probed there too.
const fn traps(entry_only: bool) -> u64 {
    if entry_only { 1 } else { 2 }
}
