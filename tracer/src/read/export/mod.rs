//! `tracer export`: a trace in formats other tools open.
//! - `perfetto`: Chrome trace-event JSON (Perfetto UI, <chrome://tracing)>: a track per thread with its API
//!   calls, a track per GPU queue with its dispatches (at the doorbell time; the GPU's own execution time
//!   is not observable without touching the process), flow arrows from each launch to the dispatch it
//!   produced, process and thread names, and for ggml processes a track of inference steps (prefill,
//!   decode) as spans. Timestamps in microseconds, as the format requires.
//! - `csv`: rocprofv3's kernel-trace columns, one row per kernel dispatch; `End_Timestamp` is empty, since
//!   tracer does not see kernels end.
//! - `dot`: the GPU libraries each process mapped, their dependency edges, coloured by mapped, called and
//!   dispatched, with counts ([`dot`]).
//! - `parquet`: one row per kernel execution, for columnar analysis of many traces ([`parquet()`]).
#![expect(
    clippy::float_arithmetic,
    clippy::cast_precision_loss,
    reason = "durations and rates are shown as decimal fractions of nanosecond counts"
)]

mod dot;
mod parquet;
pub use self::parquet::parquet;
pub use dot::dot;

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    io::Write,
};

use anyhow::Result;
use serde_json::{Value, json};

use crate::trace::{self, Record};

/// Synthetic thread ids for queue tracks start here (real tids are below 2^22).
const QUEUE_TRACK_BASE: u64 = 1 << 30;
/// The synthetic thread id of each process's track of inference steps.
const PHASE_TRACK: u64 = QUEUE_TRACK_BASE - 1;

/// Launches waiting for their dispatch, per process and kernel name, at most this many each; beyond it
/// the oldest launch's arrow is given up (and counted), so memory stays bounded.
const MAX_PENDING_FLOWS: usize = 4096;

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

/// Streams a trace as Chrome trace-event JSON: memory stays bounded by the number of kernels, queues,
/// processes and inference steps, not by the number of events.
pub fn perfetto(input: &trace::Input, out: &mut dyn Write) -> Result<Vec<String>> {
    out.write_all(b"{\"traceEvents\":[")?;
    let mut events = EventStream { out, first: true, failure: None };
    let mut kernels: HashMap<u32, String> = HashMap::new();
    // Inference steps, fed the way the report feeds them.
    let mut steps = crate::read::phase::Feeder::default();
    let mut queues: BTreeMap<(u32, u64), u64> = BTreeMap::new();
    // Launches waiting for their dispatch, per (pid, kernel name): (tid, ts).
    let mut pending: HashMap<(u32, String), VecDeque<(u32, u64)>> = HashMap::new();
    let mut flows_given_up = 0u64;
    let mut next_flow = 1u64;
    let mut start = 0u64;
    let us = |ts: u64, start: u64| ts.saturating_sub(start) as f64 / 1000.0;
    let status = input.for_each_record(|r| {
        steps.record(&r);
        match r {
        Record::Header(h) => start = h.start_mono_ns,
        Record::Kernel(k) => {
            let name = if k.demangled.is_empty() { format!("unnamed {:#x}", k.handle) } else { k.demangled.clone() };
            kernels.insert(k.id, name);
        }
        Record::Launch(l) => {
            let name = l.kernel.and_then(|id| kernels.get(&id)).cloned().unwrap_or_default();
            events.emit(&json!({
                "ph": "X", "cat": "launch", "name": format!("{} {}", l.api.name(), name), "pid": l.pid, "tid": l.tid,
                "ts": us(l.ts, start), "dur": l.dur as f64 / 1000.0,
                "args": {"grid": l.grid, "block": l.block, "grid_unit": l.grid_unit, "shmem": l.shmem, "stream": l.stream, "ret": l.ret, "captured": l.captured},
            }));
            if l.ret == 0 && !l.captured {
                let q = pending.entry((l.pid, name)).or_default();
                if q.len() == MAX_PENDING_FLOWS {
                    q.pop_front();
                    flows_given_up += 1;
                }
                q.push_back((l.tid, l.ts));
            }
        }
        Record::Dispatch(d) => {
            let n = queues.len() as u64;
            let track = *queues.entry((d.pid, d.queue)).or_insert(QUEUE_TRACK_BASE + n);
            let name =
                d.kernel.and_then(|id| kernels.get(&id)).cloned().unwrap_or_else(|| d.packet.name().into_owned());
            events.emit(&json!({
                "ph": "i", "s": "t", "cat": "dispatch", "name": name, "pid": d.pid, "tid": track, "ts": us(d.ts, start),
                "args": {"index": d.index, "workgroup": d.workgroup, "grid_work_items": d.grid, "group_segment": d.group_segment,
                         "private_segment": d.private_segment, "kernel_object": format!("{:#x}", d.kernel_object)},
            }));
            // The launch that produced this dispatch, joined by an arrow: both ends are written now, so
            // none dangles.
            if let Some((tid, ts)) = pending.get_mut(&(d.pid, name)).and_then(VecDeque::pop_front) {
                let id = next_flow;
                next_flow += 1;
                events.emit(&json!({"ph": "s", "cat": "dispatch", "name": "launch\u{2192}dispatch", "id": id, "pid": d.pid, "tid": tid, "ts": us(ts, start)}));
                events.emit(&json!({"ph": "f", "bp": "e", "cat": "dispatch", "name": "launch\u{2192}dispatch", "id": id, "pid": d.pid, "tid": track, "ts": us(d.ts, start)}));
            }
        }
        other => {
            if let Some(e) = event_of(&other, start) {
                events.emit(&e);
            }
        }
        }
    })?;
    emit_tracks(&mut events, steps, &queues, start);
    if let Some(e) = events.failure {
        return Err(e.into());
    }
    let warnings = status.warnings();
    let warning = (!warnings.is_empty()).then(|| warnings.join("; "));
    let other = json!({"source": "tracer", "warning": warning, "flows_given_up": flows_given_up});
    write!(out, "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{other}}}\n")?;
    Ok(warnings)
}

/// The tracks named after the records: inference steps (ggml processes only) as spans on a track of
/// their own, and each GPU queue's track.
fn emit_tracks(
    events: &mut EventStream<'_>,
    steps: crate::read::phase::Feeder,
    queues: &BTreeMap<(u32, u64), u64>,
    start: u64,
) {
    let us = |ts: u64, start: u64| ts.saturating_sub(start) as f64 / 1000.0;
    for (pid, p) in steps.into_processes() {
        let spans = p.phases.spans();
        if spans.is_empty() {
            continue;
        }
        events.emit(&json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": PHASE_TRACK, "args": {"name": "inference steps"}}));
        for (n, sp) in spans.iter().enumerate() {
            events.emit(&json!({
                "ph": "X", "cat": "phase", "name": sp.phase.as_str(), "pid": pid, "tid": PHASE_TRACK,
                "ts": us(sp.start, start), "dur": sp.end.saturating_sub(sp.start) as f64 / 1000.0,
                "args": {"step": n, "kernels": sp.kernels, "composition": sp.composition},
            }));
        }
    }
    for ((pid, queue), track) in queues {
        events.emit(&json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": track, "args": {"name": format!("GPU queue {queue:#x}")}}));
    }
}

/// The one Perfetto event a record of these kinds makes, from that record alone (`start`: the trace's start
/// on the monotonic clock); None for the kinds that make none, or that need what came before (launches,
/// dispatches, kernels).
fn event_of(r: &Record, start: u64) -> Option<Value> {
    let us = |ts: u64| ts.saturating_sub(start) as f64 / 1000.0;
    match r {
        Record::Process(p) => {
            let name = if p.argv.is_empty() { p.comm.clone() } else { p.argv.join(" ") };
            let label = match (&p.role, &p.model_name) {
                (Some(role), Some(m)) => format!("{name} [{role} {m}]"),
                (Some(role), None) => format!("{name} [{role}]"),
                _ => name,
            };
            Some(json!({"ph": "M", "name": "process_name", "pid": p.pid, "tid": p.pid, "args": {"name": label}}))
        }
        Record::Config(c) => Some(json!({
            "ph": "X", "cat": "api", "name": c.api.name(), "pid": c.pid, "tid": c.tid,
            "ts": us(c.ts), "dur": c.dur as f64 / 1000.0,
            "args": {"grid": c.grid, "block": c.block, "shmem": c.shmem, "ret": c.ret},
        })),
        Record::Call(c) => Some(json!({
            "ph": "X", "cat": "api", "name": c.api.name(), "pid": c.pid, "tid": c.tid,
            "ts": us(c.ts), "dur": c.dur as f64 / 1000.0, "args": {"ret": c.ret},
        })),
        Record::Ioctl(i) => Some(json!({
            "ph": "X", "cat": "ioctl", "name": i.name, "pid": i.pid, "tid": i.tid,
            "ts": us(i.ts), "dur": i.dur as f64 / 1000.0, "args": {"ret": i.ret, "fields": i.fields},
        })),
        Record::Exit(e) => Some(json!({
            "ph": "i", "s": "p", "cat": "process", "name": "exit", "pid": e.pid, "tid": e.pid, "ts": us(e.ts),
            "args": {"code": e.code, "signal": e.signal},
        })),
        Record::Batch(b) => Some(json!({
            "ph": "i", "s": "t", "cat": "batch", "name": "llama_decode", "pid": b.pid, "tid": b.tid,
            "ts": us(b.ts), "args": {"n_tokens": b.n_tokens, "runs": b.runs},
        })),
        // A job is an async slice from the ring taking it to its fence signalling, on the submitting thread;
        // its queueing an instant.
        Record::Job(j) => {
            let (ph, name) = match j.stage {
                trace::JobStage::Queue => ("n", "gpu job queued"),
                trace::JobStage::Run => ("b", "gpu job"),
                trace::JobStage::Done => ("e", "gpu job"),
            };
            Some(json!({
                "ph": ph, "cat": "gpu_job", "name": name, "id": format!("{:x}.{:x}", j.context, j.seqno),
                "pid": j.pid, "tid": j.tid, "ts": us(j.ts), "args": {"ring": j.ring, "client": j.client},
            }))
        }
        _ => None,
    }
}

/// rocprofv3's kernel-trace CSV columns, in its order.
///
/// As rocprofiler-sdk's `generateCSV.cpp` writes the kernel trace with streams. Empty where tracer cannot know the value without touching the process: the agent and
/// stream (not in an AQL packet), the correlation id and end time (the GPU's side), and the register
/// counts (the code object the device ran is one of several per-target ones; `tracer inspect --target`
/// lists them).
pub(crate) const CSV_COLUMNS: [&str; 22] = [
    "Kind",
    "Agent_Id",
    "Queue_Id",
    "Stream_Id",
    "Thread_Id",
    "Dispatch_Id",
    "Kernel_Id",
    "Kernel_Name",
    "Correlation_Id",
    "Start_Timestamp",
    "End_Timestamp",
    "LDS_Block_Size",
    "Scratch_Size",
    "VGPR_Count",
    "Accum_VGPR_Count",
    "SGPR_Count",
    "Workgroup_Size_X",
    "Workgroup_Size_Y",
    "Workgroup_Size_Z",
    "Grid_Size_X",
    "Grid_Size_Y",
    "Grid_Size_Z",
];

pub fn csv(input: &trace::Input, out: &mut dyn Write) -> Result<Vec<String>> {
    let mut w = ::csv::Writer::from_writer(out);
    w.write_record(CSV_COLUMNS)?;
    let mut kernels: HashMap<u32, String> = HashMap::new();
    let mut queues: BTreeMap<(u32, u64), u64> = BTreeMap::new();
    let mut dispatch_id = 0u64;
    let mut failure = None;
    let status = input.for_each_record(|r| match r {
        Record::Kernel(k) => {
            let name = if k.demangled.is_empty() { k.name } else { k.demangled };
            kernels.insert(k.id, name);
        }
        Record::Queue(q) => {
            queues.insert((q.pid, q.queue), q.id);
        }
        Record::Dispatch(d) if d.kernel.is_some() && failure.is_none() => {
            dispatch_id += 1;
            let n = queues.len() as u64;
            let queue_id = *queues.entry((d.pid, d.queue)).or_insert(n);
            let name = d.kernel.and_then(|id| kernels.get(&id)).cloned().unwrap_or_default();
            let num = |v: u64| v.to_string();
            // See CSV_COLUMNS for what stays empty and why. LDS is the packet's group segment (dynamic
            // shared memory included, not rounded to the allocation granule as rocprofv3 rounds the
            // kernel's static size).
            let row = [
                "KERNEL_DISPATCH".to_owned(),
                String::new(),
                num(queue_id),
                String::new(),
                num(d.tid.into()),
                num(dispatch_id),
                num(d.kernel.unwrap_or(0).into()),
                name,
                String::new(),
                num(d.ts),
                String::new(),
                num(d.group_segment.into()),
                num(d.private_segment.into()),
                String::new(),
                String::new(),
                String::new(),
                num(d.workgroup[0].into()),
                num(d.workgroup[1].into()),
                num(d.workgroup[2].into()),
                num(d.grid[0].into()),
                num(d.grid[1].into()),
                num(d.grid[2].into()),
            ];
            if let Err(e) = w.write_record(&row) {
                failure = Some(e);
            }
        }
        _ => {}
    })?;
    if let Some(e) = failure {
        return Err(e.into());
    }
    w.flush()?;
    Ok(status.warnings())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        trace::event::PacketType,
        trace::{Dispatch, Header, Kernel, Launch, Source, Writer},
    };

    /// A launch at the API and the dispatch it produced at the queue, joined by an arrow; a failed launch
    /// gets none, and nothing dangles.
    #[test]
    fn perfetto_links_launches_to_dispatches() {
        let dir = std::env::temp_dir().join(format!("tracer-export-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.jsonl");
        let mut w = Writer::new(std::fs::File::create(&path).unwrap(), false).unwrap();
        let k = |id, source: Source| {
            Record::Kernel(Kernel {
                id,
                pid: 7,
                name: "_Z1kv".into(),
                demangled: "k()".into(),
                source,
                ..Default::default()
            })
        };
        let launch = |ts, ret| {
            Record::Launch(Launch {
                tid: 8,
                grid: [0; 3],
                block: [0; 3],
                ret,
                dur: 2000,
                ..Launch::for_test(7, Some(1), ts)
            })
        };
        for r in [
            Record::Header(Header {
                format: trace::FORMAT.into(),
                schema: trace::SCHEMA,
                start_mono_ns: 1_000,
                ..Default::default()
            }),
            k(1, Source::Register),
            k(2, Source::Hsa),
            launch(10_000, 101),
            launch(20_000, 0),
            Record::Dispatch(Dispatch {
                ts: 25_000,
                pid: 7,
                tid: 8,
                queue: 0x99,
                packet: PacketType::KernelDispatch,
                kernel: Some(2),
                ..Default::default()
            }),
        ] {
            w.write(&r).unwrap();
        }
        w.finish(trace::Footer::default()).unwrap();
        let mut out = Vec::new();
        perfetto(&trace::Input::file(&path), &mut out).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        let ev = v["traceEvents"].as_array().unwrap();
        let starts: Vec<&Value> = ev.iter().filter(|e| e["ph"] == "s").collect();
        let ends: Vec<&Value> = ev.iter().filter(|e| e["ph"] == "f").collect();
        assert_eq!((starts.len(), ends.len()), (1, 1));
        assert_eq!(starts[0]["id"], ends[0]["id"]);
        assert_eq!(starts[0]["ts"], 19.0); // µs from the start
        assert_eq!(ends[0]["ts"], 24.0);
        let launches: Vec<&Value> = ev.iter().filter(|e| e["cat"] == "launch").collect();
        assert_eq!(launches.len(), 2);
        assert_eq!(launches[0]["dur"], 2.0);
        assert!(
            ev.iter().any(|e| e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == "GPU queue 0x99")
        );
        let mut csv_out = Vec::new();
        csv(&trace::Input::file(&path), &mut csv_out).unwrap();
        let text = String::from_utf8(csv_out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], CSV_COLUMNS.join(","));
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1].split(',').count(), CSV_COLUMNS.len());
        assert!(lines[1].starts_with("KERNEL_DISPATCH,,0,,8,1,2,k(),,25000,,0,0,,,,"), "{}", lines[1]);
    }

    #[test]
    fn csv_quotes_names_with_commas() {
        let mut out = Vec::new();
        let mut w = ::csv::Writer::from_writer(&mut out);
        w.write_record(["plain", "f<1, 2>(int, int)", "a\"b"]).unwrap();
        drop(w);
        assert_eq!(String::from_utf8(out).unwrap(), "plain,\"f<1, 2>(int, int)\",\"a\"\"b\"\n");
    }
}
