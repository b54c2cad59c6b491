//! `tracer export --format parquet`: one row per kernel execution, the columnar form `DuckDB`, Polars,
//! Spark and `ClickHouse` read, for analysing many machines' traces together.
//!
//! An execution is what the report's steps count ([`crate::read::phase::Feeder`]): a launch outside a graph
//! capture, each kernel run of a graph replay (a replay running a captured kernel three times gives three
//! rows), or a queue dispatch. Each row carries its process (pid, comm, Ollama role, model name), the
//! inference phase and step it ran in (ggml processes; null elsewhere), the kernel, its family, the file
//! its code came from, the exact column count (ne11) of a ggml matrix kernel where known, its launch
//! geometry, stream or queue, times, and a launch's return code (a failed launch is a row with `ret` not
//! 0: the steps count it, the report's executions do not). The file is read twice: first for the steps (their spans are
//! known only once they end), then for the rows, written in row groups of [`ROW_GROUP`] rows, so memory
//! stays bounded by the row group, the kernels, the processes and the steps, not by the trace.
//!
//! Unsigned counts and handles are stored as Parquet's unsigned integer types (`UBIGINT`/`UINTEGER` in
//! `DuckDB`). Written with the `parquet` crate (Apache Arrow's Rust implementation, the reference writer
//! most readers are tested against) without its Arrow layer: the rows are typed columns already, and the
//! Arrow crates would double the build.

use std::{collections::HashMap, io::Write, sync::Arc};

use anyhow::{Context as _, Result};
use parquet::{
    basic::{Compression, ZstdLevel},
    data_type::{ByteArray, ByteArrayType, Int32Type, Int64Type},
    file::{properties::WriterProperties, writer::SerializedFileWriter},
    schema::parser::parse_message_type,
};

use crate::{
    read::phase::{Execution, FamilyKey, Feeder, StepSpan, View},
    trace::event::GridUnit,
    trace::{
        self, Kernel, Launch, Line, Process,
        model::{Index, Visitor},
    },
};

/// Rows per row group: about 100 bytes each while buffered.
pub(super) const ROW_GROUP: usize = 1 << 18;

/// The table's schema, in Parquet's message syntax; the columns in this order.
const SCHEMA: &str = "message kernel_execution {
    REQUIRED INT64 ts_ns (INTEGER(64,false));
    REQUIRED INT32 pid (INTEGER(32,false));
    REQUIRED INT32 tid (INTEGER(32,false));
    REQUIRED BYTE_ARRAY comm (UTF8);
    OPTIONAL BYTE_ARRAY role (UTF8);
    OPTIONAL BYTE_ARRAY model (UTF8);
    REQUIRED BYTE_ARRAY view (UTF8);
    OPTIONAL BYTE_ARRAY phase (UTF8);
    OPTIONAL INT64 step (INTEGER(64,false));
    OPTIONAL INT32 kernel_id (INTEGER(32,false));
    OPTIONAL BYTE_ARRAY kernel (UTF8);
    REQUIRED BYTE_ARRAY family (UTF8);
    OPTIONAL BYTE_ARRAY library (UTF8);
    OPTIONAL INT32 ne11 (INTEGER(32,false));
    OPTIONAL INT32 grid_x (INTEGER(32,false));
    OPTIONAL INT32 grid_y (INTEGER(32,false));
    OPTIONAL INT32 grid_z (INTEGER(32,false));
    OPTIONAL BYTE_ARRAY grid_unit (UTF8);
    OPTIONAL INT32 block_x (INTEGER(32,false));
    OPTIONAL INT32 block_y (INTEGER(32,false));
    OPTIONAL INT32 block_z (INTEGER(32,false));
    OPTIONAL INT64 shmem (INTEGER(64,false));
    OPTIONAL INT64 stream (INTEGER(64,false));
    OPTIONAL INT64 queue (INTEGER(64,false));
    OPTIONAL BYTE_ARRAY api (UTF8);
    OPTIONAL INT64 dur_ns (INTEGER(64,false));
    OPTIONAL INT32 ret;
    OPTIONAL BYTE_ARRAY composition (UTF8);
}";

/// One column's values while a row group fills: the present values and, for an optional column, each
/// row's definition level (1 present, 0 null).
struct Values<T> {
    values: Vec<T>,
    levels: Option<Vec<i16>>,
}

impl<T> Values<T> {
    fn push(&mut self, v: Option<T>) {
        if let Some(l) = &mut self.levels {
            l.push(i16::from(v.is_some()));
        }
        self.values.extend(v);
    }

    fn clear(&mut self) {
        self.values.clear();
        if let Some(l) = &mut self.levels {
            l.clear();
        }
    }
}

/// A column by its physical type. Unsigned values are stored bit for bit in Parquet's signed physical types
/// (the column's logical type says unsigned).
enum Column {
    U64(Values<i64>),
    U32(Values<i32>),
    Text(Values<ByteArray>),
}

impl Column {
    fn new(physical: parquet::basic::Type, optional: bool) -> Self {
        let levels = optional.then(Vec::new);
        match physical {
            parquet::basic::Type::INT64 => Self::U64(Values { values: Vec::new(), levels }),
            parquet::basic::Type::INT32 => Self::U32(Values { values: Vec::new(), levels }),
            _ => Self::Text(Values { values: Vec::new(), levels }),
        }
    }

    fn u64(&mut self, v: Option<u64>) {
        if let Self::U64(c) = self {
            c.push(v.map(|v| i64::from_ne_bytes(v.to_ne_bytes())));
        }
    }

    fn u32(&mut self, v: Option<u32>) {
        if let Self::U32(c) = self {
            c.push(v.map(|v| i32::from_ne_bytes(v.to_ne_bytes())));
        }
    }

    fn text(&mut self, v: Option<&ByteArray>) {
        if let Self::Text(c) = self {
            c.push(v.cloned());
        }
    }

    fn clear(&mut self) {
        match self {
            Self::U64(c) => c.clear(),
            Self::U32(c) => c.clear(),
            Self::Text(c) => c.clear(),
        }
    }
}

/// A text value shared by many rows, made once (a `ByteArray` clone is a reference count).
fn text(s: &str) -> ByteArray {
    ByteArray::from(s.as_bytes().to_vec())
}

/// What a row says of its process.
#[derive(Clone)]
struct ProcessCols {
    comm: ByteArray,
    role: Option<ByteArray>,
    model: Option<ByteArray>,
}

/// What a row says of its kernel.
struct KernelCols {
    name: Option<ByteArray>,
    library: Option<ByteArray>,
}

/// The fields of the record behind a row that depend on where the execution was seen.
#[derive(Default)]
struct Shape {
    tid: u32,
    grid: Option<[u32; 3]>,
    block: Option<[u32; 3]>,
    grid_unit: Option<GridUnit>,
    shmem: Option<u64>,
    stream: Option<u64>,
    queue: Option<u64>,
    api: Option<&'static str>,
    dur: Option<u64>,
    ret: Option<i32>,
}

impl Shape {
    fn of(r: &Line) -> Self {
        match r {
            Line::Launch(l) => {
                // Every field named: one added to `Launch` does not build until its column is decided here
                // (time, process, kernel and its parameters come from the execution the row is of).
                let Launch {
                    ts: _,
                    pid: _,
                    tid,
                    lib: _,
                    api,
                    kernel: _,
                    handle: _,
                    grid,
                    block,
                    grid_unit,
                    shmem,
                    stream,
                    ret,
                    dur,
                    captured: _,
                    entry_only,
                    params: _,
                    caller: _,
                    in_runs: _,
                } = l;
                Self {
                    tid: *tid,
                    grid: Some(*grid),
                    block: Some(*block),
                    grid_unit: Some(*grid_unit),
                    shmem: Some(*shmem),
                    stream: Some(*stream),
                    api: Some(api.name()),
                    dur: (!entry_only).then_some(*dur),
                    ret: (!entry_only).then_some(*ret),
                    queue: None,
                }
            }
            Line::Call(c) => Self { tid: c.tid, stream: c.stream, api: Some(c.api.name()), ..Self::default() },
            Line::Dispatch(d) => Self {
                tid: d.tid,
                grid: Some(d.grid),
                block: Some(d.workgroup.map(u32::from)),
                grid_unit: Some(GridUnit::WorkItems),
                shmem: Some(u64::from(d.group_segment)),
                queue: Some(d.queue),
                ..Self::default()
            },
            _ => Self::default(),
        }
    }
}

/// A process or kernel named again has its columns made again.
impl<W: Write + Send> Visitor for Table<W> {
    fn process(&mut self, _: &Index, p: &Process) {
        self.processes.remove(&p.pid);
    }

    fn kernel(&mut self, _: &Index, k: &Kernel) {
        self.kernels.remove(&k.id);
    }
}

/// The row writer: columns filling, and the columns of the processes and kernels rows name.
struct Table<W: Write + Send> {
    writer: SerializedFileWriter<W>,
    columns: Vec<Column>,
    rows: usize,
    written: u64,
    processes: HashMap<u32, ProcessCols>,
    kernels: HashMap<u32, KernelCols>,
    /// Each process's steps, in order (from the first reading).
    steps: HashMap<u32, Vec<StepSpan>>,
    views: [ByteArray; 3],
    phases: HashMap<&'static str, ByteArray>,
    families: HashMap<FamilyKey, ByteArray>,
    apis: HashMap<&'static str, ByteArray>,
    units: [ByteArray; 2],
    unknown_process: ProcessCols,
}

impl<W: Write + Send> Table<W> {
    /// A table writing to `out`, its steps read already.
    fn new(out: W, steps: HashMap<u32, Vec<StepSpan>>) -> Result<Self> {
        let schema = Arc::new(parse_message_type(SCHEMA).context("the Parquet schema")?);
        let columns = schema
            .get_fields()
            .iter()
            .map(|f| {
                let optional = f.get_basic_info().repetition() == parquet::basic::Repetition::OPTIONAL;
                Column::new(f.get_physical_type(), optional)
            })
            .collect();
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
            .set_created_by(format!("tracer {}", env!("CARGO_PKG_VERSION")))
            .build();
        Ok(Self {
            writer: SerializedFileWriter::new(out, schema, Arc::new(props))?,
            columns,
            rows: 0,
            written: 0,
            processes: HashMap::new(),
            kernels: HashMap::new(),
            steps,
            views: [View::Launch, View::GraphReplay, View::Dispatch].map(|v| text(v.as_str())),
            phases: HashMap::new(),
            families: HashMap::new(),
            apis: HashMap::new(),
            units: [text("blocks"), text("work-items")],
            unknown_process: ProcessCols { comm: text(""), role: None, model: None },
        })
    }

    /// A process's columns, made once per process record.
    fn process_cols(&mut self, index: &Index, pid: u32) -> ProcessCols {
        let Some(p) = index.process(pid) else { return self.unknown_process.clone() };
        self.processes
            .entry(pid)
            .or_insert_with(|| ProcessCols {
                comm: text(&p.comm),
                role: p.role.map(|role| text(role.as_str())),
                model: p.model_name.as_deref().or(p.model.as_deref()).map(text),
            })
            .clone()
    }

    /// A kernel's columns, made once per kernel record.
    fn kernel_cols(&mut self, index: &Index, id: Option<u32>) -> Option<&KernelCols> {
        let k = index.kernel(id?)?;
        let name = index.kernel_name(id);
        Some(self.kernels.entry(k.id).or_insert_with(|| KernelCols {
            name: (!name.is_empty()).then(|| text(name)),
            library: k.code_file.as_deref().map(text),
        }))
    }

    fn row(&mut self, index: &Index, e: &Execution, shape: &Shape) -> Result<()> {
        let process = self.process_cols(index, e.pid);
        let step = self.steps.get(&e.pid).and_then(|spans| {
            let n = spans.partition_point(|s| s.start <= e.ts).checked_sub(1)?;
            spans.get(n).filter(|s| e.ts <= s.end).map(|s| (n, s.phase, s.composition.as_deref().map(text)))
        });
        let phase =
            step.as_ref().map(|(_, p, _)| self.phases.entry(p.as_str()).or_insert_with(|| text(p.as_str())).clone());
        let composition = step.as_ref().and_then(|(_, _, c)| c.clone());
        let family = self.families.entry(e.family).or_insert_with(|| text(&e.family_name())).clone();
        let api = shape.api.map(|a| self.apis.entry(a).or_insert_with(|| text(a)).clone());
        let kernel = self.kernel_cols(index, e.kernel);
        let (name, library) = (kernel.and_then(|k| k.name.clone()), kernel.and_then(|k| k.library.clone()));
        let view = self.views[match e.view {
            View::Launch => 0,
            View::GraphReplay => 1,
            View::Dispatch => 2,
        }]
        .clone();
        let unit = shape.grid_unit.map(|u| self.units[usize::from(u == GridUnit::WorkItems)].clone());
        let axis = |v: Option<[u32; 3]>, i: usize| v?.get(i).copied();
        for _ in 0..e.count {
            let c = &mut self.columns;
            c[0].u64(Some(e.ts));
            c[1].u32(Some(e.pid));
            c[2].u32(Some(shape.tid));
            c[3].text(Some(&process.comm));
            c[4].text(process.role.as_ref());
            c[5].text(process.model.as_ref());
            c[6].text(Some(&view));
            c[7].text(phase.as_ref());
            c[8].u64(step.as_ref().map(|(n, _, _)| *n as u64));
            c[9].u32(e.kernel);
            c[10].text(name.as_ref());
            c[11].text(Some(&family));
            c[12].text(library.as_ref());
            c[13].u32(e.ne11);
            for i in 0..3 {
                c[14 + i].u32(axis(shape.grid, i));
            }
            c[17].text(unit.as_ref());
            for i in 0..3 {
                c[18 + i].u32(axis(shape.block, i));
            }
            c[21].u64(shape.shmem);
            c[22].u64(shape.stream);
            c[23].u64(shape.queue);
            c[24].text(api.as_ref());
            c[25].u64(shape.dur);
            c[26].u32(shape.ret.map(|r| u32::from_ne_bytes(r.to_ne_bytes())));
            c[27].text(composition.as_ref());
            self.rows += 1;
            if self.rows == ROW_GROUP {
                self.flush()?;
            }
        }
        Ok(())
    }

    /// Writes the rows gathered so far as one row group.
    fn flush(&mut self) -> Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        let mut group = self.writer.next_row_group()?;
        let mut columns = self.columns.iter_mut();
        while let Some(mut w) = group.next_column()? {
            let col = columns.next().context("the schema has more columns than the rows")?;
            match col {
                Column::U64(c) => w.typed::<Int64Type>().write_batch(&c.values, c.levels.as_deref(), None)?,
                Column::U32(c) => w.typed::<Int32Type>().write_batch(&c.values, c.levels.as_deref(), None)?,
                Column::Text(c) => w.typed::<ByteArrayType>().write_batch(&c.values, c.levels.as_deref(), None)?,
            };
            w.close()?;
            col.clear();
        }
        group.close()?;
        self.written += self.rows as u64;
        self.rows = 0;
        Ok(())
    }
}

/// Writes the kernel executions of the trace at `input` as a Parquet file to `out`; returns what reading
/// it found wrong (a cut file, parts missing), also kept in the file's metadata (`tracer.warning`).
pub(crate) fn parquet(input: &trace::Input, out: &mut (dyn Write + Send)) -> Result<Vec<String>> {
    // First reading: each process's steps.
    let mut feeder = Feeder::default();
    trace::model::read(input, &mut feeder)?;
    let steps = feeder.into_processes().into_iter().map(|(pid, p)| (pid, p.phases.spans())).collect();

    let mut table = Table::new(out, steps)?;

    // Second reading: the rows, one per execution the step feeder lists.
    let mut feeder = Feeder::listing_executions();
    let mut index = Index::default();
    let mut failure = None;
    let status = input.for_each_record(|r| {
        if failure.is_some() {
            return;
        }
        index.feed(&r, &mut (&mut feeder, &mut table));
        let Some(list) = feeder.executions.as_mut() else { return };
        if list.is_empty() {
            return;
        }
        let shape = Shape::of(&r);
        for e in std::mem::take(list) {
            if let Err(err) = table.row(&index, &e, &shape) {
                failure = Some(err);
                return;
            }
        }
    })?;
    if let Some(e) = failure {
        return Err(e);
    }
    table.flush()?;
    let mut kv = vec![parquet::file::metadata::KeyValue::new("tracer.source".to_owned(), input.display())];
    let warnings = status.warnings();
    if !warnings.is_empty() {
        kv.push(parquet::file::metadata::KeyValue::new("tracer.warning".to_owned(), warnings.join("; ")));
    }
    for item in kv {
        table.writer.append_key_value_metadata(item);
    }
    table.writer.close()?;
    Ok(warnings)
}
