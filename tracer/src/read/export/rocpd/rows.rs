//! The rows of a rocpd database as the trace's records arrive: prepared statements, and the ids each
//! process, thread, agent, queue, stream, code object, kernel and string was given.

use std::collections::{HashMap, HashSet};

use anyhow::Result;
use rusqlite::{Connection, Statement};
use serde_json::json;
use tracer_common::api::Library;

use super::{
    schema::UUID,
    values::{Ids, OWN_IDS, Threads, category, counted, handle, run, vendor},
};
use crate::{
    read::phase::{Execution, View},
    trace::{Exit, Header, Kernel, Line, Process, model::Index},
};

/// The node every row is of: one per trace.
const NODE: i64 = 1;

/// What an execution's record says of it (see `Shape::of`).
#[derive(Default)]
pub(super) struct Shape {
    pub(super) tid: u32,
    /// Work-items per axis (0: not recorded); `u64::MAX` past 64 bits.
    pub(super) grid: [u64; 3],
    pub(super) workgroup: [u64; 3],
    pub(super) lds: Option<u32>,
    pub(super) scratch: Option<u32>,
    pub(super) stream: Option<u64>,
    pub(super) queue: Option<u64>,
    pub(super) lib: Option<Library>,
    pub(super) api: Option<&'static str>,
}

/// The statements, prepared once.
struct Stmts<'c> {
    string: Statement<'c>,
    event: Statement<'c>,
    region: Statement<'c>,
    sample: Statement<'c>,
    track: Statement<'c>,
    dispatch: Statement<'c>,
    thread: Statement<'c>,
    process: Statement<'c>,
    bare_process: Statement<'c>,
    exit: Statement<'c>,
    symbol: Statement<'c>,
    code_object: Statement<'c>,
    agent: Statement<'c>,
    queue: Statement<'c>,
    stream: Statement<'c>,
    metadata: Statement<'c>,
}

/// The database being filled.
pub(super) struct Db<'c> {
    conn: &'c Connection,
    uuid: String,
    stmts: Stmts<'c>,
    /// The first error; the rest of the trace is skipped.
    pub(super) failure: Option<anyhow::Error>,
    /// Dispatches stand for HIP's launches (the header's `launches_at_doorbell`).
    pub(super) at_doorbell: bool,
    strings: HashMap<String, i64>,
    processes: HashSet<u32>,
    threads: Threads,
    agents: Ids<(u32, Option<&'static str>)>,
    queues: Ids<(u32, Option<u64>)>,
    streams: Ids<(u32, Option<u64>)>,
    code_objects: Ids<(u32, Option<String>)>,
    tracks: Ids<(u32, u32, &'static str)>,
    /// Kernel symbol rows written (tracer's kernel ids, and each process's unknown one).
    symbols: HashSet<i64>,
    events: i64,
    dispatches: i64,
    /// The `stack_id` of the API call the latest record was: the kernels it ran share it.
    last_call: Option<i64>,
    /// Grid sizes past `SQLite`'s 64-bit integers, stored as 0.
    grids_cut: u64,
    /// Times past 2^63 ns, stored as 2^63 - 1.
    times_cut: u64,
}

impl<'c> Db<'c> {
    pub(super) fn new(conn: &'c Connection, uuid: &str) -> Result<Self> {
        let prep = |sql: &str| conn.prepare(&sql.replace(UUID, uuid));
        let stmts = Stmts {
            string: prep("INSERT INTO `rocpd_string@UUID@` (string) VALUES (?1)")?,
            event: prep(
                "INSERT INTO `rocpd_event@UUID@` (id, category_id, stack_id, parent_stack_id, correlation_id, extdata)
                 VALUES (?1, ?2, ?3, ?4, 0, ?5)",
            )?,
            region: prep(
                "INSERT INTO `rocpd_region@UUID@` (nid, pid, tid, start, end, name_id, event_id)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?,
            sample: prep("INSERT INTO `rocpd_sample@UUID@` (track_id, timestamp, event_id) VALUES (?1, ?2, ?3)")?,
            track: prep("INSERT INTO `rocpd_track@UUID@` (id, nid, pid, tid, name_id) VALUES (?1, ?2, ?3, ?4, ?5)")?,
            dispatch: prep(
                "INSERT INTO `rocpd_kernel_dispatch@UUID@` (id, nid, pid, tid, agent_id, kernel_id, dispatch_id,
                 queue_id, stream_id, start, end, private_segment_size, group_segment_size, workgroup_size_x,
                 workgroup_size_y, workgroup_size_z, grid_size_x, grid_size_y, grid_size_z, region_name_id,
                 event_id, extdata)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?1, ?7, ?8, ?9, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,
                 ?19, ?20)",
            )?,
            thread: prep("INSERT INTO `rocpd_info_thread@UUID@` (id, nid, pid, tid) VALUES (?1, ?2, ?3, ?4)")?,
            process: prep(
                "INSERT INTO `rocpd_info_process@UUID@` (id, nid, ppid, pid, start, command, extdata)
                 VALUES (?1, ?2, ?3, ?1, ?4, ?5, ?6) ON CONFLICT (id) DO UPDATE SET ppid = excluded.ppid,
                 command = excluded.command, extdata = excluded.extdata, start = COALESCE(start, excluded.start)",
            )?,
            bare_process: prep("INSERT OR IGNORE INTO `rocpd_info_process@UUID@` (id, nid, pid) VALUES (?1, ?2, ?1)")?,
            exit: prep("UPDATE `rocpd_info_process@UUID@` SET end = ?2 WHERE id = ?1")?,
            symbol: prep(
                "INSERT INTO `rocpd_info_kernel_symbol@UUID@` (id, nid, pid, code_object_id, kernel_name,
                 display_name, kernel_object, extdata) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (id) DO UPDATE SET code_object_id = excluded.code_object_id,
                 kernel_name = excluded.kernel_name, display_name = excluded.display_name,
                 kernel_object = excluded.kernel_object, extdata = excluded.extdata",
            )?,
            code_object: prep(
                "INSERT INTO `rocpd_info_code_object@UUID@` (id, nid, pid, uri, storage_type, extdata)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?,
            agent: prep(
                "INSERT INTO `rocpd_info_agent@UUID@` (id, nid, pid, type, name, vendor_name, extdata)
                 VALUES (?1, ?2, ?3, 'GPU', ?4, ?5, ?6)",
            )?,
            queue: prep(
                "INSERT INTO `rocpd_info_queue@UUID@` (id, nid, pid, name, extdata) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?,
            stream: prep(
                "INSERT INTO `rocpd_info_stream@UUID@` (id, nid, pid, name, extdata) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?,
            metadata: prep("INSERT INTO `rocpd_metadata@UUID@` (tag, value) VALUES (?1, ?2)")?,
        };
        let mut db = Self {
            conn,
            uuid: uuid.to_owned(),
            stmts,
            failure: None,
            at_doorbell: false,
            strings: HashMap::new(),
            processes: HashSet::new(),
            threads: Threads::default(),
            agents: Ids::default(),
            queues: Ids::default(),
            streams: Ids::default(),
            code_objects: Ids::default(),
            tracks: Ids::default(),
            symbols: HashSet::new(),
            events: 0,
            dispatches: 0,
            last_call: None,
            grids_cut: 0,
            times_cut: 0,
        };
        // The empty string first, as rocprofv3 writes it: the region name of a dispatch with none.
        db.string("")?;
        Ok(db)
    }

    /// Keeps the first error.
    pub(super) fn keep(&mut self, result: Result<()>) {
        if let (Err(e), None) = (result, &self.failure) {
            self.failure = Some(e);
        }
    }

    pub(super) fn metadata(&mut self, tag: &str, value: &str) -> Result<()> {
        run(&mut self.stmts.metadata, &[&tag, &value])
    }

    /// A time, in nanoseconds; one past `SQLite`'s integers is counted and stored as the largest.
    fn time(&mut self, ts: u64) -> i64 {
        i64::try_from(ts).unwrap_or_else(|_| {
            self.times_cut += 1;
            i64::MAX
        })
    }

    fn string(&mut self, s: &str) -> Result<i64> {
        if let Some(&id) = self.strings.get(s) {
            return Ok(id);
        }
        self.stmts.string.execute([s])?;
        let id = self.conn.last_insert_rowid();
        self.strings.insert(s.to_owned(), id);
        Ok(id)
    }

    fn event(&mut self, category: &str, stack: i64, parent: i64, extdata: &str) -> Result<i64> {
        let category = self.string(category)?;
        self.events += 1;
        let id = self.events;
        run(&mut self.stmts.event, &[&id, &category, &stack, &parent, &extdata])?;
        Ok(id)
    }

    pub(super) fn node(&mut self, h: &Header) -> Result<()> {
        use std::hash::{DefaultHasher, Hash as _, Hasher as _};
        let mut hasher = DefaultHasher::new();
        h.host.hash(&mut hasher);
        let hash = i64::try_from(hasher.finish() >> 1).unwrap_or(0);
        self.conn.execute(
            &"INSERT INTO `rocpd_info_node@UUID@` (id, hash, machine_id, system_name, hostname, release)
              VALUES (?1, ?2, ?3, 'Linux', ?3, ?4)"
                .replace(UUID, &self.uuid),
            rusqlite::params![NODE, hash, h.host, h.kernel_release],
        )?;
        let start = h.start_unix_ns.to_string();
        self.metadata("tracer.start_unix_ns", &start)?;
        self.metadata("tracer.start_mono_ns", &h.start_mono_ns.to_string())
    }

    pub(super) fn process_row(&mut self, p: &Process) -> Result<()> {
        self.processes.insert(p.pid);
        let extdata = json!({
            "comm": p.comm,
            "role": p.role.map(crate::trace::Role::as_str),
            "model": p.model_name.as_deref().or(p.model.as_deref()),
        })
        .to_string();
        let start = self.time(p.ts);
        let command = p.argv.join(" ");
        run(&mut self.stmts.process, &[&p.pid, &NODE, &p.ppid, &start, &command, &extdata])
    }

    fn ensure_process(&mut self, pid: u32) -> Result<()> {
        if self.processes.insert(pid) {
            run(&mut self.stmts.bare_process, &[&pid, &NODE])?;
        }
        Ok(())
    }

    pub(super) fn exit_row(&mut self, e: &Exit) -> Result<()> {
        let end = self.time(e.ts);
        run(&mut self.stmts.exit, &[&e.pid, &end])
    }

    fn thread_id(&mut self, pid: u32, tid: u32) -> Result<i64> {
        self.ensure_process(pid)?;
        let (id, new) = self.threads.get(pid, tid);
        if new {
            run(&mut self.stmts.thread, &[&id, &NODE, &pid, &tid])?;
        }
        Ok(id)
    }

    /// The agent of a process's kernels run through a runtime of `vendor`'s (None: not said by the runtime).
    fn agent_id(&mut self, pid: u32, vendor: Option<&'static str>) -> Result<i64> {
        let (id, new) = self.agents.get((pid, vendor));
        if new {
            let extdata = json!({ "device_recorded": false }).to_string();
            let name = format!("{} GPU (which device is not recorded)", vendor.unwrap_or("unknown"));
            run(&mut self.stmts.agent, &[&id, &NODE, &pid, &name, &vendor, &extdata])?;
        }
        Ok(id)
    }

    /// A process's HSA queue by its `hsa_queue_t*` (None: the executions seen at the API, not at a queue).
    pub(super) fn queue_id(&mut self, pid: u32, queue: Option<u64>, number: Option<u64>) -> Result<i64> {
        self.ensure_process(pid)?;
        let (id, new) = self.queues.get((pid, queue));
        if new {
            let (name, extdata) = match queue {
                Some(q) => (format!("Queue {q:#x}"), json!({ "handle": q, "queue_id": number }).to_string()),
                None => ("queue not recorded".to_owned(), "{}".to_owned()),
            };
            run(&mut self.stmts.queue, &[&id, &NODE, &pid, &name, &extdata])?;
        }
        Ok(id)
    }

    /// A process's stream by its handle (None: executions seen at a queue, whose stream is not recorded).
    fn stream_id(&mut self, pid: u32, stream: Option<u64>) -> Result<i64> {
        let (id, new) = self.streams.get((pid, stream));
        if new {
            let (name, extdata) = match stream {
                Some(0) => ("Default Stream".to_owned(), json!({ "handle": 0 }).to_string()),
                Some(s) => (format!("Stream {s:#x}"), json!({ "handle": s }).to_string()),
                None => ("stream not recorded".to_owned(), "{}".to_owned()),
            };
            run(&mut self.stmts.stream, &[&id, &NODE, &pid, &name, &extdata])?;
        }
        Ok(id)
    }

    /// The code object a kernel's code came from: its file, or the process's unknown one.
    fn code_object_id(&mut self, pid: u32, file: Option<&str>) -> Result<i64> {
        let (id, new) = self.code_objects.get((pid, file.map(str::to_owned)));
        if new {
            let uri = file.map(|f| format!("file://{f}"));
            let storage = file.map(|_| "FILE");
            let extdata = if file.is_some() { "{}" } else { r#"{"recorded":false}"# };
            run(&mut self.stmts.code_object, &[&id, &NODE, &pid, &uri, &storage, &extdata])?;
        }
        Ok(id)
    }

    pub(super) fn kernel_symbol(&mut self, index: &Index, k: &Kernel) -> Result<()> {
        self.ensure_process(k.pid)?;
        let code_object = self.code_object_id(k.pid, k.code_file.as_deref())?;
        let display = index.kernel_label(Some(k.id)).unwrap_or_default().into_owned();
        let extdata = json!({
            "kernel_id": k.id,
            "formatted_kernel_name": display,
            "demangled_kernel_name": k.demangled,
            "kernel_address": { "handle": k.handle },
            "source": k.source.as_str(),
        })
        .to_string();
        let id = i64::from(k.id);
        self.symbols.insert(id);
        run(&mut self.stmts.symbol, &[&id, &NODE, &k.pid, &code_object, &k.name, &display, &handle(k.handle), &extdata])
    }

    /// The symbol a process's executions of no kept kernel are shown under.
    fn unknown_symbol(&mut self, pid: u32) -> Result<i64> {
        let id = OWN_IDS.saturating_add(i64::from(pid));
        if self.symbols.insert(id) {
            let code_object = self.code_object_id(pid, None)?;
            let name = "unknown kernel (no kernel record)";
            run(&mut self.stmts.symbol, &[&id, &NODE, &pid, &code_object, &name, &name, &None::<i64>, &"{}"])?;
        }
        Ok(id)
    }

    /// An API call: a region when timed, else a sample on its thread's track of its category.
    pub(super) fn api_call(
        &mut self,
        pid: u32,
        tid: u32,
        lib: Library,
        name: &str,
        ts: u64,
        dur: Option<u64>,
    ) -> Result<()> {
        let thread = self.thread_id(pid, tid)?;
        let category = category(lib);
        let stack = self.events + 1;
        let event = self.event(category, stack, stack, "{}")?;
        self.last_call = Some(stack);
        let name_id = self.string(name)?;
        let start = self.time(ts);
        if let Some(dur) = dur {
            let end = self.time(ts.saturating_add(dur));
            return run(&mut self.stmts.region, &[&NODE, &pid, &thread, &start, &end, &name_id, &event]);
        }
        let (track, new) = self.tracks.get((pid, tid, category));
        if new {
            let track_name = self.string(category)?;
            run(&mut self.stmts.track, &[&track, &NODE, &pid, &thread, &track_name])?;
        }
        run(&mut self.stmts.sample, &[&track, &start, &event])
    }

    /// The kernel dispatch rows of one execution the report counts (`count` of them for a replay).
    pub(super) fn execution(&mut self, e: &Execution, r: &Line) -> Result<()> {
        if !counted(e, self.at_doorbell) {
            return Ok(());
        }
        let shape = Shape::of(r);
        let thread = self.thread_id(e.pid, shape.tid)?;
        let agent =
            self.agent_id(e.pid, if e.view == View::Dispatch { Some("AMD") } else { shape.lib.and_then(vendor) })?;
        let queue = self.queue_id(e.pid, shape.queue, None)?;
        let stream = self.stream_id(e.pid, shape.stream)?;
        let kernel = match e.kernel.map(i64::from) {
            Some(id) if self.symbols.contains(&id) => id,
            _ => self.unknown_symbol(e.pid)?,
        };
        let start = self.time(e.ts);
        let grid = shape.grid.map(|g| {
            i64::try_from(g).unwrap_or_else(|_| {
                self.grids_cut += 1;
                0
            })
        });
        let workgroup = shape.workgroup.map(|w| i64::try_from(w).unwrap_or(0));
        let parent = if matches!(r, Line::Launch(_) | Line::Call(_)) { self.last_call } else { None };
        let region = self.string("")?;
        let extdata = json!({ "view": e.view.as_str(), "family": e.family_name(), "api": shape.api }).to_string();
        for _ in 0..e.count {
            self.dispatches += 1;
            let id = self.dispatches;
            let stack = parent.unwrap_or(self.events + 1);
            let event = self.event("KERNEL_DISPATCH", stack, stack, "{}")?;
            run(
                &mut self.stmts.dispatch,
                &[
                    &id,
                    &NODE,
                    &e.pid,
                    &thread,
                    &agent,
                    &kernel,
                    &queue,
                    &stream,
                    &start,
                    &shape.scratch,
                    &shape.lds,
                    &workgroup[0],
                    &workgroup[1],
                    &workgroup[2],
                    &grid[0],
                    &grid[1],
                    &grid[2],
                    &region,
                    &event,
                    &extdata,
                ],
            )?;
        }
        Ok(())
    }

    /// What could not be stored as the trace said it, in words.
    pub(super) fn finish(&self) -> Vec<String> {
        let mut said = Vec::new();
        if self.grids_cut > 0 {
            said.push(format!("rocpd: {} grid sizes past SQLite's 64-bit integers were stored as 0", self.grids_cut));
        }
        if self.times_cut > 0 {
            said.push(format!(
                "rocpd: {} times past SQLite's 64-bit integers were stored as {}",
                self.times_cut,
                i64::MAX
            ));
        }
        said
    }
}
