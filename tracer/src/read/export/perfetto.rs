//! `tracer export --format perfetto`: Chrome trace-event JSON, streamed as the records are visited.
#![expect(
    clippy::float_arithmetic,
    clippy::cast_precision_loss,
    reason = "timestamps and durations are shown as decimal microseconds of nanosecond counts"
)]

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    io::Write,
};

use anyhow::Result;
use serde_json::{Value, json};

use crate::{
    read::phase::Feeder,
    trace::{
        self, Call, Checkpoint, Config, Dispatch, Exit, Ioctl, Job, JobStage, Launch, Process, StepBatch,
        model::{Index, Visitor},
    },
};

/// Synthetic thread ids for queue tracks start here (real tids are below 2^22).
const QUEUE_TRACK_BASE: u64 = 1 << 30;
/// The synthetic thread id of each process's track of inference steps.
const PHASE_TRACK: u64 = QUEUE_TRACK_BASE - 1;

/// Launches waiting for their dispatch, per process and kernel name, at most this many each; beyond it
/// the oldest launch's arrow is given up (and counted), so memory stays bounded.
const MAX_PENDING_FLOWS: usize = 4096;

/// Microseconds from the recording's start to `ts`.
fn us(ts: u64, index: &Index) -> f64 {
    ts.saturating_sub(index.start()) as f64 / 1000.0
}

/// Nanoseconds as microseconds.
fn dur(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// Writes trace events one by one, as the JSON array's elements.
struct EventStream<'a> {
    out: &'a mut dyn Write,
    first: bool,
    failure: Option<std::io::Error>,
}

impl EventStream<'_> {
    fn emit(&mut self, ev: &Value) {
        if self.failure.is_some() {
            return;
        }
        let sep: &[u8] = if self.first { b"\n" } else { b",\n" };
        self.first = false;
        if let Err(e) = self
            .out
            .write_all(sep)
            .and_then(|()| serde_json::to_writer(&mut *self.out, ev).map_err(std::io::Error::from))
        {
            self.failure = Some(e);
        }
    }
}

/// The events of each record, and what later ones join: queue tracks, launches waiting for their dispatch.
struct Perfetto<'a> {
    events: EventStream<'a>,
    /// Each GPU queue's synthetic track, by (pid, queue).
    queues: BTreeMap<(u32, u64), u64>,
    /// Launches waiting for their dispatch, per (pid, kernel name): (tid, ts).
    pending: HashMap<(u32, String), VecDeque<(u32, u64)>>,
    flows_given_up: u64,
    next_flow: u64,
    /// The recording's own track (its checkpoints) has its name.
    tracer_named: bool,
}

/// Streams a trace as Chrome trace-event JSON: memory stays bounded by the number of kernels, queues,
/// processes and inference steps, not by the number of events.
pub(crate) fn perfetto(input: &trace::Input, out: &mut dyn Write) -> Result<Vec<String>> {
    out.write_all(b"{\"traceEvents\":[")?;
    let events = EventStream { out, first: true, failure: None };
    let perfetto = Perfetto {
        events,
        queues: BTreeMap::new(),
        pending: HashMap::new(),
        flows_given_up: 0,
        next_flow: 1,
        tracer_named: false,
    };
    // Inference steps, fed the way the report feeds them.
    let mut pair = (Feeder::default(), perfetto);
    let (index, status) = trace::model::read(input, &mut pair)?;
    let (steps, mut p) = pair;
    p.tracks(steps, &index);
    if let Some(e) = p.events.failure {
        return Err(e.into());
    }
    let warnings = status.warnings();
    let warning = (!warnings.is_empty()).then(|| warnings.join("; "));
    let other = json!({"source": "tracer", "warning": warning, "flows_given_up": p.flows_given_up});
    write!(p.events.out, "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{other}}}\n")?;
    Ok(warnings)
}

impl Perfetto<'_> {
    /// The tracks named after the records: inference steps (ggml processes only) as spans on a track of
    /// their own, and each GPU queue's track.
    fn tracks(&mut self, steps: Feeder, index: &Index) {
        for (pid, p) in steps.into_processes() {
            let spans = p.phases.spans();
            if spans.is_empty() {
                continue;
            }
            self.events.emit(&json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": PHASE_TRACK, "args": {"name": "inference steps"}}));
            for (n, sp) in spans.iter().enumerate() {
                self.events.emit(&json!({
                    "ph": "X", "cat": "phase", "name": sp.phase.as_str(), "pid": pid, "tid": PHASE_TRACK,
                    "ts": us(sp.start, index), "dur": dur(sp.end.saturating_sub(sp.start)),
                    "args": {"step": n, "kernels": sp.kernels, "composition": sp.composition},
                }));
            }
        }
        for ((pid, queue), track) in &self.queues {
            self.events.emit(&json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": track, "args": {"name": format!("GPU queue {queue:#x}")}}));
        }
    }
}

impl Visitor for Perfetto<'_> {
    fn process(&mut self, _: &Index, p: &Process) {
        let name = if p.argv.is_empty() { p.comm.clone() } else { p.argv.join(" ") };
        let label = match (&p.role, &p.model_name) {
            (Some(role), Some(m)) => format!("{name} [{role} {m}]"),
            (Some(role), None) => format!("{name} [{role}]"),
            _ => name,
        };
        self.events
            .emit(&json!({"ph": "M", "name": "process_name", "pid": p.pid, "tid": p.pid, "args": {"name": label}}));
    }

    fn launch(&mut self, index: &Index, l: &Launch) {
        let name = index.kernel_label(l.kernel).unwrap_or_default().into_owned();
        self.events.emit(&json!({
            "ph": "X", "cat": "launch", "name": format!("{} {}", l.api.name(), name), "pid": l.pid, "tid": l.tid,
            "ts": us(l.ts, index), "dur": dur(l.dur),
            "args": {"grid": l.grid, "block": l.block, "grid_unit": l.grid_unit, "shmem": l.shmem, "stream": l.stream, "ret": l.ret, "captured": l.captured},
        }));
        if l.ret == 0 && !l.captured_into_graph() {
            let q = self.pending.entry((l.pid, name)).or_default();
            if q.len() == MAX_PENDING_FLOWS {
                q.pop_front();
                self.flows_given_up += 1;
            }
            q.push_back((l.tid, l.ts));
        }
    }

    fn dispatch(&mut self, index: &Index, d: &Dispatch) {
        let n = self.queues.len() as u64;
        let track = *self.queues.entry((d.pid, d.queue)).or_insert(QUEUE_TRACK_BASE + n);
        let name = index.kernel_label(d.kernel).unwrap_or_else(|| d.packet.name()).into_owned();
        self.events.emit(&json!({
            "ph": "i", "s": "t", "cat": "dispatch", "name": name, "pid": d.pid, "tid": track, "ts": us(d.ts, index),
            "args": {"index": d.index, "workgroup": d.workgroup, "grid_work_items": d.grid, "group_segment": d.group_segment,
                     "private_segment": d.private_segment, "kernel_object": format!("{:#x}", d.kernel_object)},
        }));
        // The launch that produced this dispatch, joined by an arrow: both ends are written now, so none
        // dangles.
        if let Some((tid, ts)) = self.pending.get_mut(&(d.pid, name)).and_then(VecDeque::pop_front) {
            let id = self.next_flow;
            self.next_flow += 1;
            self.events.emit(&json!({"ph": "s", "cat": "dispatch", "name": "launch\u{2192}dispatch", "id": id, "pid": d.pid, "tid": tid, "ts": us(ts, index)}));
            self.events.emit(&json!({"ph": "f", "bp": "e", "cat": "dispatch", "name": "launch\u{2192}dispatch", "id": id, "pid": d.pid, "tid": track, "ts": us(d.ts, index)}));
        }
    }

    fn config(&mut self, index: &Index, c: &Config) {
        self.events.emit(&json!({
            "ph": "X", "cat": "api", "name": c.api.name(), "pid": c.pid, "tid": c.tid,
            "ts": us(c.ts, index), "dur": dur(c.dur),
            "args": {"grid": c.grid, "block": c.block, "shmem": c.shmem, "ret": c.ret},
        }));
    }

    fn call(&mut self, index: &Index, c: &Call) {
        self.events.emit(&json!({
            "ph": "X", "cat": "api", "name": c.api.name(), "pid": c.pid, "tid": c.tid,
            "ts": us(c.ts, index), "dur": dur(c.dur), "args": {"ret": c.ret},
        }));
    }

    fn ioctl(&mut self, index: &Index, i: &Ioctl) {
        self.events.emit(&json!({
            "ph": "X", "cat": "ioctl", "name": i.name, "pid": i.pid, "tid": i.tid,
            "ts": us(i.ts, index), "dur": dur(i.dur), "args": {"ret": i.ret, "fields": i.fields},
        }));
    }

    fn exit(&mut self, index: &Index, e: &Exit) {
        self.events.emit(&json!({
            "ph": "i", "s": "p", "cat": "process", "name": "exit", "pid": e.pid, "tid": e.pid, "ts": us(e.ts, index),
            "args": {"code": e.code, "signal": e.signal},
        }));
    }

    fn batch(&mut self, index: &Index, b: &StepBatch) {
        self.events.emit(&json!({
            "ph": "i", "s": "t", "cat": "batch", "name": "llama_decode", "pid": b.pid, "tid": b.tid,
            "ts": us(b.ts, index), "args": {"n_tokens": b.n_tokens, "runs": b.runs},
        }));
    }

    /// The losses so far, as a counter track of the recording's own (its process id 0, named "tracer").
    fn checkpoint(&mut self, index: &Index, c: &Checkpoint) {
        if !std::mem::replace(&mut self.tracer_named, true) {
            self.events
                .emit(&json!({"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "tracer"}}));
        }
        let dropped = c.total_drops();
        self.events.emit(&json!({
            "ph": "C", "name": "records dropped", "pid": 0, "tid": 0, "ts": us(c.ts, index), "args": {"dropped": dropped},
        }));
    }

    /// A job is an async slice from the ring taking it to its fence signalling, on the submitting thread;
    /// its queueing an instant.
    fn job(&mut self, index: &Index, j: &Job) {
        let (ph, name) = match j.stage {
            JobStage::Queue => ("n", "gpu job queued"),
            JobStage::Run => ("b", "gpu job"),
            JobStage::Done => ("e", "gpu job"),
        };
        self.events.emit(&json!({
            "ph": ph, "cat": "gpu_job", "name": name, "id": format!("{:x}.{:x}", j.context, j.seqno),
            "pid": j.pid, "tid": j.tid, "ts": us(j.ts, index), "args": {"ring": j.ring, "client": j.client},
        }));
    }
}
