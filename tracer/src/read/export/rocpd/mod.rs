//! `tracer export --format rocpd -o FILE.db`: the trace as a rocpd database, the `SQLite` file rocprofv3
//! writes (rocprofiler-sdk's schema 3), so that rocpd's views and tools read it.
//!
//! The format was read, as a format, from ROCm/rocprofiler-sdk at these commits (our statements are our own):
//! `source/share/rocprofiler-sdk-rocpd/rocpd_tables.sql` (50c89cbd: the tables, `start`/`end` in each
//! row), `rocpd_views.sql` (ad31aebb: a plain view of each table), `data_views.sql` (fbb1b80d: `kernels`,
//! `regions`, `samples`, ...), `summary_views.sql` (58f76c7b: `top_kernels`, `top`, `busy`),
//! `rocpd_metadata.sql` (25cd7e5b), `source/lib/output/generateRocpd.cpp` (ac2b8768: how rocprofv3 fills
//! them: a process's row id is its pid, a thread's its tid, the empty string names a dispatch with no
//! region) and `source/lib/python/rocpd/importer.py` (00cbe60a: rocpd reads `rocpd_metadata`'s `uuid`,
//! takes every `rocpd_%` table whose name holds it, and selects from its bare-named view).
//!
//! What is written (docs/trace-format.md, "Exports", says it for users):
//! - `rocpd_kernel_dispatch`: one row per kernel execution the report counts (a launch that neither
//!   failed nor was captured into a graph, each kernel run of a graph replay, and, where HIP's launches
//!   were left to the doorbell, each queue dispatch), so `top_kernels` gives the report's counts. `start`
//!   and `end` are both tracer's time of the execution (the launch call's entry, the graph launch's, the
//!   doorbell store), on the trace's `CLOCK_MONOTONIC` nanoseconds: tracer does not see kernels run, so
//!   every duration is 0 and `top_kernels`' percentage is null. Grid sizes are in work-items, as rocpd's;
//!   a replayed kernel's geometry is not in the trace (0).
//! - `rocpd_region` / `rocpd_sample`: every API call recorded (launches and calls); a call timed from
//!   entry to return is a region, one recorded at entry alone a sample, as rocprofv3 writes calls whose
//!   start is their end. A launch's region and the kernel it ran share `stack_id`.
//! - the info tables: the node (the host, its kernel release; `/etc/machine-id` is not recorded, the host
//!   name stands in), processes (id = pid), threads, the GPU agents (one per process and vendor, by the
//!   runtime called: which device is not recorded), queues (HSA queues; one "not recorded" per process
//!   for launches), streams, code objects (a kernel's file) and kernel symbols (each kernel once).
mod schema;

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, anyhow};
use rusqlite::{Connection, OpenFlags};

use crate::{
    os::output,
    read::phase::Feeder,
    trace::{
        self, Call, Config, Dispatch, Exit, Header, Kernel, Launch, Line, Process, Queue,
        event::GridUnit,
        model::{Index, Visitor},
    },
};

/// Writes the trace at `input` as a rocpd database at `dest`: built beside it under a temporary name and
/// renamed once complete, so a failed export leaves no file. Returns what reading found wrong with the
/// input, and what could not be stored as it was.
pub(crate) fn rocpd(input: &trace::Input, dest: &Path, force: bool, inputs: &[&Path]) -> Result<Vec<String>> {
    output::check(dest, force, inputs)?;
    let mut tmp = Temporary(Some(output::staged_name(dest)?));
    let path = tmp.0.clone().unwrap_or_default();
    drop(output::create_new(&path)?);
    let conn = Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .with_context(|| format!("cannot open {} as an SQLite database", path.display()))?;
    // No journal: a failed export is removed whole, never rolled back; a file beside it would outlive a kill.
    conn.execute_batch("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;")?;
    let warnings = fill(&conn, input).with_context(|| format!("writing the rocpd database {}", dest.display()))?;
    conn.close().map_err(|(_, e)| anyhow!("writing the rocpd database {} failed ({e})", dest.display()))?;
    std::fs::File::open(&path)
        .and_then(|f| f.sync_all())
        .map_err(|e| anyhow!("writing {} failed ({e})", dest.display()))?;
    // The destination was checked before; look again, since the export took time.
    output::check(dest, true, &[])?;
    std::fs::rename(&path, dest).map_err(|e| anyhow!("cannot move the finished file to {} ({e})", dest.display()))?;
    tmp.0 = None;
    Ok(warnings)
}

/// A file removed when dropped (an export that did not complete); None once it took its name.
struct Temporary(Option<PathBuf>);

impl Drop for Temporary {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            drop(std::fs::remove_file(path));
        }
    }
}

/// The database's UUID-shaped id, version 7 (the time in its first 48 bits, then random ones): its tables'
/// suffix and every row's `guid`, so that rocpd can merge it with other databases.
fn new_guid() -> String {
    use std::hash::{BuildHasher as _, Hasher as _};
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let random = |n: u64| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(n);
        h.finish()
    };
    let (a, b) = (random(1), random(2));
    let ms = u64::try_from(ms & 0xffff_ffff_ffff).unwrap_or(0);
    format!(
        "{:08x}-{:04x}-7{:03x}-{:04x}-{:012x}",
        ms >> 16,
        ms & 0xffff,
        a & 0xfff,
        0x8000 | ((b >> 48) & 0x3fff),
        b & 0xffff_ffff_ffff
    )
}

/// Creates the schema, then reads the trace into it in one transaction; the views last.
fn fill(conn: &Connection, input: &trace::Input) -> Result<Vec<String>> {
    let guid = new_guid();
    let uuid = format!("_{}", guid.replace('-', "_"));
    conn.execute_batch("BEGIN")?;
    for t in schema::tables(&uuid, &guid) {
        conn.execute(&t, [])?;
    }
    let mut db = Db::new(conn, &uuid)?;
    for (tag, value) in [
        ("schema_version", schema::SCHEMA_VERSION.to_owned()),
        ("uuid", uuid.clone()),
        ("guid", guid),
        ("tracer.version", env!("CARGO_PKG_VERSION").to_owned()),
        ("tracer.source", input.display()),
    ] {
        db.metadata(tag, &value)?;
    }
    let mut feeder = Feeder::listing_executions();
    let mut index = Index::default();
    let status = input.for_each_record(|r| {
        if db.failure.is_some() {
            return;
        }
        index.feed(&r, &mut (&mut feeder, &mut db));
        let Some(list) = feeder.executions.as_mut() else { return };
        for e in std::mem::take(list) {
            let result = db.execution(&e, &r);
            db.keep(result);
        }
    })?;
    if let Some(e) = db.failure.take() {
        return Err(e);
    }
    let mut warnings = status.warnings();
    warnings.extend(db.finish());
    for v in schema::view_statements(&uuid) {
        conn.execute(&v, [])?;
    }
    conn.execute_batch("COMMIT")?;
    Ok(warnings)
}

mod rows;
mod values;

use rows::{Db, Shape};

impl Visitor for Db<'_> {
    fn header(&mut self, _: &Index, h: &Header) {
        self.at_doorbell = h.options.launches_at_doorbell;
        let result = self.node(h);
        self.keep(result);
    }

    fn process(&mut self, _: &Index, p: &Process) {
        let result = self.process_row(p);
        self.keep(result);
    }

    fn exit(&mut self, _: &Index, e: &Exit) {
        let result = self.exit_row(e);
        self.keep(result);
    }

    fn kernel(&mut self, index: &Index, k: &Kernel) {
        // Only the kernels the index kept: the executions of others are shown as their process's unknown one.
        if index.kernel(k.id).is_some() {
            let result = self.kernel_symbol(index, k);
            self.keep(result);
        }
    }

    fn queue(&mut self, _: &Index, q: &Queue) {
        let result = self.queue_id(q.pid, Some(q.queue), Some(q.id)).map(drop);
        self.keep(result);
    }

    fn launch(&mut self, _: &Index, l: &Launch) {
        let result = self.api_call(l.pid, l.tid, l.api.library(), l.api.name(), l.ts, (!l.entry_only).then_some(l.dur));
        self.keep(result);
    }

    fn config(&mut self, _: &Index, c: &Config) {
        let result = self.api_call(c.pid, c.tid, c.api.library(), c.api.name(), c.ts, Some(c.dur));
        self.keep(result);
    }

    fn call(&mut self, _: &Index, c: &Call) {
        let result = self.api_call(c.pid, c.tid, c.api.library(), c.api.name(), c.ts, (!c.entry_only).then_some(c.dur));
        self.keep(result);
    }
}

impl Shape {
    /// What the record behind an execution says of it: its thread, geometry, queue or stream, runtime.
    fn of(r: &Line) -> Self {
        match r {
            Line::Launch(l) => {
                // A grid in blocks is made work-items (rocpd's unit); one past `SQLite`'s integers is counted.
                let grid = std::array::from_fn(|i| {
                    let g = u64::from(l.grid[i]);
                    if l.grid_unit == GridUnit::Blocks { g.saturating_mul(u64::from(l.block[i])) } else { g }
                });
                Self {
                    tid: l.tid,
                    grid,
                    workgroup: l.block.map(u64::from),
                    lds: None,
                    scratch: None,
                    stream: Some(l.stream),
                    queue: None,
                    lib: Some(l.api.library()),
                    api: Some(l.api.name()),
                }
            }
            Line::Call(c) => Self {
                tid: c.tid,
                stream: c.stream,
                lib: Some(c.api.library()),
                api: Some(c.api.name()),
                ..Self::default()
            },
            Line::Dispatch(d) => Self::of_dispatch(d),
            _ => Self::default(),
        }
    }

    fn of_dispatch(d: &Dispatch) -> Self {
        Self {
            tid: d.tid,
            grid: d.grid.map(u64::from),
            workgroup: d.workgroup.map(u64::from),
            lds: Some(d.group_segment),
            scratch: Some(d.private_segment),
            stream: None,
            queue: Some(d.queue),
            lib: None,
            api: None,
        }
    }
}

#[cfg(test)]
mod tests;
