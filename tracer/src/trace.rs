//! The trace file: JSON Lines, one [`Record`] per line, optionally zstd-compressed.
//!
//! A header comes first, then events in the order they were seen, then a footer with counts and losses.
//! The writer flushes often (and closes the zstd block each time), so a tracer killed mid-recording
//! leaves a file whose every complete record reads back; the reader reports how much was cut.
//! Documented for users in `docs/trace-format.md`; [`SCHEMA`] changes whenever a field changes meaning.

use std::{
    borrow::Cow,
    collections::BTreeMap,
    fs::File,
    io::{self, BufRead, BufReader, Read, Write},
    path::Path,
    sync::{Arc, Mutex, mpsc},
};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

/// The value of the header's `format` field.
pub const FORMAT: &str = "tracer-trace";
/// Version of the record schema this build writes and reads.
pub const SCHEMA: u32 = 1;
/// A line longer than this is not a record: the reader stops there instead of buffering without bound.
pub const MAX_LINE: usize = 1 << 20;

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Text that is usually a constant (API names, units, copy kinds): borrowed when written, owned when read.
pub type Text = Cow<'static, str>;

/// One line of a trace file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    Header(Header),
    Library(Library),
    Probe(Probe),
    Process(Process),
    Kernel(Kernel),
    Launch(Launch),
    Config(Config),
    Call(Call),
    Ioctl(Ioctl),
    Mapping(Mapping),
    Queue(Queue),
    Dispatch(Dispatch),
    Exit(Exit),
    Footer(Footer),
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Always [`FORMAT`].
    pub format: String,
    pub schema: u32,
    pub tracer_version: String,
    pub host: String,
    pub kernel_release: String,
    /// Wall-clock time at the start, Unix nanoseconds.
    pub start_unix_ns: u64,
    /// CLOCK_MONOTONIC at the same instant: every `ts` in the file is on this clock, in nanoseconds.
    pub start_mono_ns: u64,
    pub options: Options,
    /// Units of the numeric fields, spelled out.
    pub units: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Options {
    /// PIDs given with --pid (empty: see `command` and `filter`).
    pub pids: Vec<u32>,
    /// The command started with `-- COMMAND ARGS`, if any.
    pub command: Vec<String>,
    /// Libraries given with --lib.
    pub libs: Vec<String>,
    pub duration_s: Option<f64>,
    /// "pid" when the kernel filters by PID, "all" when every process is recorded.
    pub filter: String,
    pub ring_bytes: u32,
    /// --ollama: the `ollama serve` processes followed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ollama_servers: Vec<u32>,
    /// Kernel tracepoint groups tracer would use for the GPU scheduler view, and whether this kernel has
    /// them ("amdgpu", "gpu_scheduler").
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kernel_tracepoints: BTreeMap<String, bool>,
}

/// A library copy that probes are attached to. `id` is what events carry in `lib`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Library {
    pub id: u32,
    /// The path as the traced process sees it.
    pub path: String,
    pub dev: u64,
    pub inode: u64,
    pub build_id: Option<String>,
    /// "ollama-bundle", "system", or "user" (given with --lib).
    pub origin: String,
}

/// One attached probe, or one that could not be attached (`error`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    pub lib: u32,
    pub api: String,
    /// File offset of the probed instruction, when the symbol was found.
    pub offset: Option<u64>,
    /// "entry+return", "entry".
    pub kind: String,
    pub error: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Process {
    pub pid: u32,
    pub ppid: u32,
    /// Start time in clock ticks since boot (/proc/PID/stat field 22): with `pid`, names one process.
    pub start_time: u64,
    pub comm: String,
    pub argv: Vec<String>,
    /// Why this record was written: "start" (traced from the beginning), "fork", "exec", "seen".
    pub cause: String,
    pub ts: u64,
    /// "ollama-server", "runner", or absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// A runner's `--model` path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The model's `name:tag` when the path is a blob of the Ollama models directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
}

/// A kernel named in a process: a handle (host function, hipFunction_t) bound to its name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Kernel {
    pub id: u32,
    pub pid: u32,
    pub handle: u64,
    pub module: u64,
    /// The mangled name as the runtime saw it ("" when unnamed).
    pub name: String,
    pub demangled: String,
    /// "register" (__hipRegisterFunction), "module" (hipModuleGetFunction), "elf" (the mapped file's
    /// symbol table, on a late attach), "unnamed".
    pub source: String,
    /// True when the name was longer than the probe keeps and was cut.
    pub truncated: bool,
    pub ts: u64,
    /// The mapped file whose `.hip_fatbin` holds the kernel (a registered host stub lies in it), as the
    /// process saw its path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_file: Option<String>,
    /// The offload bundles of that file ("0042", numbered as `tracer inspect` numbers them) whose code
    /// objects define the kernel: one, or several when a header's static kernel is built into several.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bundles: Vec<String>,
}

/// A kernel launch at the HIP API.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Launch {
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub lib: u32,
    #[serde(deserialize_with = "interned")]
    pub api: Text,
    /// Kernel table id (see `kernel` records); null only when the handle could not be named at all.
    pub kernel: Option<u32>,
    pub handle: u64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// "blocks" (grid counts work-groups) or "work-items" (grid counts work-items).
    #[serde(deserialize_with = "interned")]
    pub grid_unit: Text,
    pub shmem: u64,
    pub stream: u64,
    pub ret: i32,
    pub dur: u64,
    /// The stream was capturing a graph: this launch became a graph node, not a dispatch.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub captured: bool,
    /// Recorded at entry by a one-trap probe (CUDA's driver launches): `ret` and `dur` are not known (0).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub entry_only: bool,
}

/// A `kernel<<<grid, block, shmem, stream>>>` configuration pushed by `__hipPushCallConfiguration`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub lib: u32,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shmem: u64,
    pub stream: u64,
    pub ret: i32,
    pub dur: u64,
}

/// Any other API call; fields that do not apply to the call are absent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Call {
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub lib: u32,
    #[serde(deserialize_with = "interned")]
    pub api: Text,
    /// The call's return value: hipError_t for HIP calls (0 = success).
    pub ret: i64,
    pub dur: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ptr: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<u64>,
    /// hipMemcpyKind by name ("HostToDevice", ...).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "interned_opt")]
    pub kind: Option<Text>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<u64>,
    /// Module handle (hipModuleLoadData, hipModuleGetFunction, __hipRegisterFatBinary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<u64>,
    /// Function handle (hipModuleGetFunction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<u64>,
    /// A handle the call is about: an HSA symbol, a graph or graph executable, a code-object reader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handle: Option<u64>,
    /// hsa_executable_symbol_get_info's attribute (22 = KERNEL_OBJECT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribute: Option<u32>,
    /// A value returned through an out-parameter (the kernel object for get_info, the executable for
    /// hipGraphInstantiate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<u64>,
    /// For code objects read from memory: the mapped file and offset the pointer falls in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_offset: Option<u64>,
    /// Recorded at entry by a one-trap probe (`cuGraphLaunch`): `ret` and `dur` are not known (0).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub entry_only: bool,
}

/// An HSA queue created by `hsa_queue_create`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Queue {
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub lib: u32,
    /// The `hsa_queue_t*`: what `dispatch.queue` refers to.
    pub queue: u64,
    pub id: u64,
    /// 0 multiple producers, 1 single, 2 cooperative.
    pub queue_type: u32,
    pub base_address: u64,
    /// Ring size in 64-byte packets.
    pub size: u32,
    pub doorbell_signal: u64,
}

/// An AQL packet as it reached a GPU queue (read from the ring when the doorbell was rung).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Dispatch {
    /// When the doorbell was rung.
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub lib: u32,
    pub queue: u64,
    /// The packet's index in the queue.
    pub index: u64,
    /// "kernel-dispatch", "barrier-and", "barrier-or", "agent-dispatch", "vendor-specific", "invalid".
    #[serde(deserialize_with = "interned")]
    pub packet: Text,
    pub barrier: bool,
    /// Kernel dispatches only (zero otherwise): work-items per work-group, grid in work-items.
    pub workgroup: [u16; 3],
    pub grid: [u32; 3],
    pub private_segment: u32,
    /// LDS bytes, dynamic shared memory included.
    pub group_segment: u32,
    pub kernel_object: u64,
    pub kernarg: u64,
    pub completion_signal: u64,
    /// Kernel table id (a `kernel` record with source "hsa", or "unnamed" for an object loaded before the
    /// tracer started); null for packets that are not kernel dispatches.
    pub kernel: Option<u32>,
}

/// An ioctl on a GPU driver (KFD or DRM amdgpu).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ioctl {
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub fd: u32,
    /// What the fd pointed to when the record was decoded (`/dev/kfd`, `/dev/dri/renderD128`), if known.
    pub device: Option<String>,
    /// The full request number.
    pub cmd: u32,
    /// Its name, by type and number (`AMDKFD_IOC_CREATE_QUEUE`).
    pub name: String,
    /// The syscall's return value: negative errno on failure.
    pub ret: i64,
    pub dur: u64,
    /// Key argument fields (see docs/trace-format.md), as the driver left them at return.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fields: BTreeMap<String, u64>,
}

/// A library of interest mapped by a traced process (the "loaded" side of loaded vs dispatched).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Mapping {
    pub ts: u64,
    pub pid: u32,
    pub path: String,
    pub dev: u64,
    pub inode: u64,
    /// The library id when tracer probes this copy; null for libraries it only sees mapped.
    pub lib: Option<u32>,
}

/// A traced process ended.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Exit {
    pub ts: u64,
    pub pid: u32,
    /// Exit status when the tracer started the process itself (`-- COMMAND`); otherwise null.
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Footer {
    pub end_mono_ns: u64,
    /// Records written, by type (this footer excluded).
    pub records: BTreeMap<String, u64>,
    /// Records lost because the ring buffer was full, by record kind, one count per CPU.
    pub drops: BTreeMap<String, Vec<u64>>,
    /// Other losses and oddities counted by the probes ("stash_full", "return_without_entry",
    /// "filter_full") and by user space ("undecodable", "name_truncated", "name_fault", ...).
    pub counters: BTreeMap<String, u64>,
    /// Why recording stopped: "signal", "duration", "command-exited" (the command after -- ended),
    /// "targets-exited" (every --pid process and its children ended).
    pub stop: String,
}

impl Footer {
    pub fn total_drops(&self) -> u64 {
        self.drops.values().flatten().sum()
    }
}

const KNOWN_TYPES: [&str; 14] = [
    "header", "library", "probe", "process", "kernel", "launch", "config", "call", "ioctl", "mapping", "queue",
    "dispatch", "exit", "footer",
];

impl Record {
    pub fn type_name(&self) -> &'static str {
        match self {
            Record::Header(_) => "header",
            Record::Library(_) => "library",
            Record::Probe(_) => "probe",
            Record::Process(_) => "process",
            Record::Kernel(_) => "kernel",
            Record::Launch(_) => "launch",
            Record::Config(_) => "config",
            Record::Call(_) => "call",
            Record::Ioctl(_) => "ioctl",
            Record::Mapping(_) => "mapping",
            Record::Queue(_) => "queue",
            Record::Dispatch(_) => "dispatch",
            Record::Exit(_) => "exit",
            Record::Footer(_) => "footer",
        }
    }
}

/// Writes records to a file, batching lines and counting them by type.
pub struct Writer {
    out: Sink,
    buf: Vec<u8>,
    counts: BTreeMap<String, u64>,
}

/// Compressed output is a sequence of zstd frames, one per flush: a reader decodes every complete
/// frame of a file whose writer was killed, and a frame is never left half-written by a clean flush.
enum Sink {
    Plain(File),
    Zstd { file: Option<File>, frame: Option<zstd::Encoder<'static, File>> },
}

const ZSTD_LEVEL: i32 = 3;

impl Writer {
    /// `compress`: write zstd frames (used when the file name ends in `.zst`).
    pub fn new(file: File, compress: bool) -> Result<Self> {
        let out = if compress { Sink::Zstd { file: Some(file), frame: None } } else { Sink::Plain(file) };
        Ok(Self { out, buf: Vec::with_capacity(1 << 17), counts: BTreeMap::new() })
    }

    pub fn write(&mut self, record: &Record) -> Result<()> {
        *self.counts.entry(record.type_name().to_owned()).or_default() += 1;
        serde_json::to_writer(&mut self.buf, record)?;
        self.buf.push(b'\n');
        if self.buf.len() >= 1 << 16 {
            self.drain()?;
        }
        Ok(())
    }

    pub fn counts(&self) -> &BTreeMap<String, u64> {
        &self.counts
    }

    fn drain(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        match &mut self.out {
            Sink::Plain(f) => f.write_all(&self.buf).map_err(write_error)?,
            Sink::Zstd { file, frame } => {
                if frame.is_none() {
                    let f = file.take().context("trace file already closed")?;
                    *frame = Some(zstd::Encoder::new(f, ZSTD_LEVEL)?);
                }
                frame.as_mut().expect("set above").write_all(&self.buf).map_err(write_error)?;
            }
        }
        self.buf.clear();
        Ok(())
    }

    /// Makes everything written so far readable from the file, even if the tracer dies next.
    pub fn flush(&mut self) -> Result<()> {
        self.drain()?;
        match &mut self.out {
            Sink::Plain(f) => f.flush().map_err(write_error)?,
            Sink::Zstd { file, frame } => {
                if let Some(enc) = frame.take() {
                    *file = Some(enc.finish().map_err(write_error)?);
                }
            }
        }
        Ok(())
    }

    /// Writes the footer, ends the stream and syncs the file.
    pub fn finish(mut self, mut footer: Footer) -> Result<()> {
        footer.records = self.counts.clone();
        self.write(&Record::Footer(footer))?;
        self.flush()?;
        let file = match &self.out {
            Sink::Plain(f) => f,
            Sink::Zstd { file, .. } => file.as_ref().context("trace file already closed")?,
        };
        file.sync_all().map_err(write_error)?;
        Ok(())
    }
}

fn write_error(e: io::Error) -> anyhow::Error {
    if e.raw_os_error() == Some(libc::ENOSPC) {
        anyhow::anyhow!(
            "the disk holding the trace is full; every record written before is readable: free space or record elsewhere with -o"
        )
    } else {
        anyhow::anyhow!("writing the trace file failed ({e}); every record written before is readable")
    }
}

/// What reading a trace found besides its records.
#[derive(Debug, Default, PartialEq)]
pub struct ReadStatus {
    /// Bytes after the last complete record (a recording that was killed).
    pub cut_bytes: u64,
    /// The compressed stream ended in the middle of a frame.
    pub stream_cut: bool,
    /// Whether the file has its footer (false: the recording did not end normally).
    pub has_footer: bool,
    /// Records of a type this reader does not know (written by a newer tracer), skipped.
    pub unknown_records: u64,
}

impl ReadStatus {
    /// One sentence for the user when the file was not closed normally, else None.
    pub fn warning(&self) -> Option<String> {
        if self.has_footer && self.cut_bytes == 0 && !self.stream_cut {
            return None;
        }
        let mut s = String::from("the trace was not closed normally (the tracer was killed?)");
        if self.cut_bytes > 0 {
            s += &format!(": {} bytes after the last complete record were ignored", self.cut_bytes);
        } else if self.stream_cut {
            s += ": the compressed stream ends early; every complete record before that was read";
        } else {
            s += ": it has no footer, so drop counts are unknown";
        }
        Some(s)
    }
}

/// Reads a whole trace file: every complete record, and how the file ended.
pub fn read_file(path: &Path) -> Result<(Vec<Record>, ReadStatus)> {
    let mut records = Vec::new();
    let status = for_each_record(path, |r| records.push(r))?;
    Ok((records, status))
}

/// Streams a trace file (plain or zstd, detected by its magic bytes) through `each`.
pub fn for_each_record(path: &Path, each: impl FnMut(Record)) -> Result<ReadStatus> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    read_from(file, path, each)
}

/// Streams trace bytes from any reader (plain or zstd, detected by the magic bytes) through `each`;
/// `path` names the source in errors.
pub fn read_from(mut input: impl Read + Send, path: &Path, each: impl FnMut(Record)) -> Result<ReadStatus> {
    let mut magic = [0u8; 4];
    let n = read_up_to(&mut input, &mut magic)?;
    let head = io::Cursor::new(magic[..n].to_vec());
    if n == 4 && magic == ZSTD_MAGIC {
        let dec = zstd::Decoder::new(head.chain(input))?;
        read_records(BufReader::with_capacity(1 << 16, dec), path, each)
    } else {
        read_records(BufReader::with_capacity(1 << 16, head.chain(input)), path, each)
    }
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// Reads records from a line stream, calling `each` for every one, in order, after validating the header.
pub fn read_records(input: impl BufRead + Send, path: &Path, mut each: impl FnMut(Record)) -> Result<ReadStatus> {
    // Three stages on their own threads: split lines (and decompress), parse (two workers), then, here,
    // check and hand over the records in file order.
    const BATCH: usize = 4096;
    const WORKERS: usize = 2;
    std::thread::scope(|scope| {
        let (line_tx, line_rx) = mpsc::sync_channel::<(u64, u64, Vec<Vec<u8>>)>(2 * WORKERS);
        let (rec_tx, rec_rx) = mpsc::sync_channel::<(u64, u64, Vec<(Vec<u8>, Parsed)>)>(2 * WORKERS);
        let reader = scope.spawn(move || split_lines(input, path, BATCH, line_tx));
        let line_rx = Arc::new(Mutex::new(line_rx));
        for _ in 0..WORKERS {
            let rx = Arc::clone(&line_rx);
            let tx = rec_tx.clone();
            scope.spawn(move || {
                loop {
                    let next = rx.lock().map(|r| r.recv());
                    let Ok(Ok((seq, first, lines))) = next else { return };
                    let parsed = lines.into_iter().map(|l| {
                        let p = parse_line(&l);
                        (l, p)
                    });
                    if tx.send((seq, first, parsed.collect())).is_err() {
                        return;
                    }
                }
            });
        }
        drop(rec_tx);
        let mut status = ReadStatus::default();
        let mut pending = BTreeMap::new();
        let mut next_seq = 0u64;
        let mut lines = 0u64;
        for (seq, first, batch) in rec_rx {
            pending.insert(seq, (first, batch));
            while let Some((first, batch)) = pending.remove(&next_seq) {
                next_seq += 1;
                for (i, (line, parsed)) in batch.into_iter().enumerate() {
                    let lineno = first + i as u64;
                    lines = lineno;
                    let record = match parsed {
                        Parsed::Record(r) => r,
                        Parsed::Unknown if lineno > 1 => {
                            status.unknown_records += 1;
                            continue;
                        }
                        Parsed::Unknown | Parsed::Bad(_) if lineno == 1 => bail!(
                            "{} is not a tracer trace file (its first line is not a tracer header); record one with `tracer record -o FILE`",
                            path.display()
                        ),
                        Parsed::Unknown => unreachable!("handled above"),
                        Parsed::Bad(e) => {
                            drop(line);
                            bail!(
                                "{}: line {lineno} is not a valid trace record ({e}); the file is corrupted",
                                path.display()
                            )
                        }
                    };
                    if lineno == 1 {
                        check_header(&record, path)?;
                    }
                    if matches!(record, Record::Footer(_)) {
                        status.has_footer = true;
                    }
                    each(record);
                }
            }
        }
        let tail = reader.join().map_err(|_| anyhow::anyhow!("the trace reader thread failed"))??;
        status.cut_bytes = tail.cut_bytes;
        status.stream_cut = tail.stream_cut;
        if lines == 0 && status.cut_bytes == 0 {
            bail!("{} is empty: it holds no trace (record one with `tracer record -o FILE`)", path.display());
        }
        if lines == 0 {
            bail!(
                "{} holds no complete record: it is not a tracer trace, or was cut before its header",
                path.display()
            );
        }
        Ok(status)
    })
}

// Records are built once and moved once, in batches: boxing them would add an allocation per line.
#[allow(clippy::large_enum_variant)]
enum Parsed {
    Record(Record),
    /// A record type this reader does not know.
    Unknown,
    Bad(serde_json::Error),
}

fn parse_line(line: &[u8]) -> Parsed {
    match parse_record(line) {
        Ok(r) => Parsed::Record(r),
        Err(e) => {
            // A record type from a newer tracer is skipped and counted; anything else is corruption.
            if let Ok(serde_json::Value::Object(obj)) = serde_json::from_slice::<serde_json::Value>(line)
                && let Some(serde_json::Value::String(t)) = obj.get("type")
                && !KNOWN_TYPES.contains(&t.as_str())
            {
                Parsed::Unknown
            } else {
                Parsed::Bad(e)
            }
        }
    }
}

fn check_header(record: &Record, path: &Path) -> Result<()> {
    match record {
        Record::Header(h) if h.format == FORMAT => {
            if h.schema > SCHEMA {
                bail!(
                    "{} was written with trace schema {} but this tracer reads up to {SCHEMA}; use a newer tracer",
                    path.display(),
                    h.schema
                );
            }
            Ok(())
        }
        _ => bail!(
            "{} is not a tracer trace file (its first line is not a tracer header); record one with `tracer record -o FILE`",
            path.display()
        ),
    }
}

/// Splits the input into batches of complete lines, numbered from 1; returns how the input ended.
fn split_lines(
    mut input: impl BufRead,
    path: &Path,
    batch_size: usize,
    tx: mpsc::SyncSender<(u64, u64, Vec<Vec<u8>>)>,
) -> Result<ReadStatus> {
    let mut status = ReadStatus::default();
    let mut lineno = 0u64;
    let mut seq = 0u64;
    let mut batch: Vec<Vec<u8>> = Vec::with_capacity(batch_size);
    let mut first = 1u64;
    let mut send = |batch: &mut Vec<Vec<u8>>, first: u64| -> bool {
        let full = std::mem::replace(batch, Vec::with_capacity(batch_size));
        let ok = tx.send((seq, first, full)).is_ok();
        seq += 1;
        ok
    };
    loop {
        let mut line = Vec::with_capacity(256);
        let got = match read_line_bounded(&mut input, &mut line) {
            Ok(got) => got,
            // A compressed stream that stops mid-frame: keep what was decoded.
            Err(e) if lineno > 0 && is_cut_stream(&e) => {
                status.stream_cut = true;
                status.cut_bytes += line.len() as u64;
                break;
            }
            Err(e) if e.kind() == io::ErrorKind::InvalidData && line.len() >= MAX_LINE => {
                send(&mut batch, first);
                bail!(
                    "{}: line {} is longer than {} bytes; this is not a tracer trace",
                    path.display(),
                    lineno + 1,
                    MAX_LINE
                )
            }
            Err(e) if lineno == 0 => {
                bail!("{} is not a tracer trace file ({e}); record one with `tracer record -o FILE`", path.display())
            }
            Err(e) => {
                send(&mut batch, first);
                return Err(e).with_context(|| format!("reading {}", path.display()));
            }
        };
        if got == 0 {
            break;
        }
        if line.last() != Some(&b'\n') {
            // The last line has no newline: a record cut by a killed writer.
            status.cut_bytes += line.len() as u64;
            break;
        }
        lineno += 1;
        batch.push(line);
        if batch.len() == batch_size {
            if !send(&mut batch, first) {
                return Ok(status);
            }
            first = lineno + 1;
        }
    }
    if !batch.is_empty() {
        send(&mut batch, first);
    }
    Ok(status)
}

/// Parses one line. Lines as the writer makes them start with their type, so the record is read straight
/// into its struct (the `type` key is ignored there); serde's tagged-enum path, which first buffers the
/// whole object, is kept for other spellings of the same JSON.
fn parse_record(line: &[u8]) -> serde_json::Result<Record> {
    const PREFIX: &[u8] = b"{\"type\":\"";
    if let Some(rest) = line.strip_prefix(PREFIX)
        && let Some(end) = rest.iter().position(|&b| b == b'"')
    {
        return Ok(match &rest[..end] {
            b"launch" => Record::Launch(serde_json::from_slice(line)?),
            b"call" => Record::Call(serde_json::from_slice(line)?),
            b"ioctl" => Record::Ioctl(serde_json::from_slice(line)?),
            b"mapping" => Record::Mapping(serde_json::from_slice(line)?),
            b"dispatch" => Record::Dispatch(serde_json::from_slice(line)?),
            b"queue" => Record::Queue(serde_json::from_slice(line)?),
            b"config" => Record::Config(serde_json::from_slice(line)?),
            b"kernel" => Record::Kernel(serde_json::from_slice(line)?),
            b"process" => Record::Process(serde_json::from_slice(line)?),
            b"exit" => Record::Exit(serde_json::from_slice(line)?),
            b"probe" => Record::Probe(serde_json::from_slice(line)?),
            b"library" => Record::Library(serde_json::from_slice(line)?),
            b"header" => Record::Header(serde_json::from_slice(line)?),
            b"footer" => Record::Footer(serde_json::from_slice(line)?),
            _ => serde_json::from_slice(line)?,
        });
    }
    serde_json::from_slice(line)
}

fn is_cut_stream(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::UnexpectedEof | io::ErrorKind::Other)
}

/// Reads one line, at most [`MAX_LINE`] bytes; returns the bytes read (0 at the end).
fn read_line_bounded(input: &mut impl BufRead, line: &mut Vec<u8>) -> io::Result<usize> {
    // read_until finds the newline with a vectorized search; take() bounds what one line may buffer.
    let n = input.take(MAX_LINE as u64 + 1).read_until(b'\n', line)?;
    if line.len() > MAX_LINE {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "line too long"));
    }
    Ok(n)
}

/// Deserializes text that is nearly always one of a few constants without allocating for those.
fn interned<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Text, D::Error> {
    const KNOWN: [&str; 17] = [
        "kernel-dispatch",
        "hipLaunchKernel",
        "hipModuleLaunchKernel",
        "hipExtModuleLaunchKernel",
        "hipExtLaunchKernel",
        "hipLaunchCooperativeKernel",
        "blocks",
        "work-items",
        "hipMalloc",
        "hipFree",
        "hipMemcpy",
        "hipMemcpyAsync",
        "hipStreamSynchronize",
        "hipDeviceSynchronize",
        "HostToDevice",
        "DeviceToHost",
        "DeviceToDevice",
    ];
    let s = <Cow<'de, str>>::deserialize(d)?;
    Ok(match KNOWN.iter().find(|k| **k == s) {
        Some(k) => Cow::Borrowed(k),
        None => Cow::Owned(s.into_owned()),
    })
}

fn interned_opt<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Text>, D::Error> {
    #[derive(Deserialize)]
    struct W(#[serde(deserialize_with = "interned")] Text);
    Ok(Option::<W>::deserialize(d)?.map(|w| w.0))
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn header() -> Record {
        Record::Header(Header { format: FORMAT.into(), schema: SCHEMA, ..Default::default() })
    }

    fn launch(i: u32) -> Record {
        Record::Launch(Launch {
            ts: 1000 + i as u64,
            pid: 42,
            tid: 43,
            lib: 1,
            api: "hipLaunchKernel".into(),
            kernel: Some(i),
            handle: 0x5555_0000 + i as u64,
            grid: [i, 2, 3],
            block: [64, 1, 1],
            grid_unit: "blocks".into(),
            shmem: 128,
            stream: 0,
            ret: 101,
            dur: 5000,
            captured: false,
            entry_only: i.is_multiple_of(2),
        })
    }

    fn write_trace(path: &Path, compress: bool, n: u32, footer: bool) -> Vec<Record> {
        let file = File::create(path).unwrap();
        let mut w = Writer::new(file, compress).unwrap();
        let mut all = vec![header()];
        w.write(&all[0]).unwrap();
        for i in 0..n {
            let r = launch(i);
            w.write(&r).unwrap();
            all.push(r);
        }
        if footer {
            w.finish(Footer { stop: "signal".into(), ..Default::default() }).unwrap();
        } else {
            w.flush().unwrap();
        }
        all
    }

    fn tmp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("tracer-trace-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    #[test]
    fn round_trip_plain_and_compressed() {
        for compress in [false, true] {
            let path = tmp(&format!("rt-{compress}.jsonl"));
            let written = write_trace(&path, compress, 100, true);
            let (read, status) = read_file(&path).unwrap();
            assert_eq!(&read[..written.len()], &written[..]);
            let Some(Record::Footer(f)) = read.last() else { panic!("no footer") };
            assert_eq!(f.records["launch"], 100);
            assert_eq!(f.records["header"], 1);
            assert_eq!(status, ReadStatus { has_footer: true, ..Default::default() });
            assert!(status.warning().is_none());
        }
    }

    #[test]
    fn cut_at_every_byte_reads_complete_records() {
        let path = tmp("cut-src.jsonl");
        write_trace(&path, false, 5, true);
        let bytes = std::fs::read(&path).unwrap();
        let line_ends: Vec<usize> =
            bytes.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i + 1).collect();
        let cut = tmp("cut.jsonl");
        for at in 1..bytes.len() {
            std::fs::write(&cut, &bytes[..at]).unwrap();
            let complete = line_ends.iter().filter(|&&e| e <= at).count();
            match read_file(&cut) {
                Ok((records, status)) => {
                    assert_eq!(records.len(), complete, "cut at {at}");
                    let last_end = line_ends.iter().rfind(|&&e| e <= at).copied().unwrap_or(0);
                    assert_eq!(status.cut_bytes, (at - last_end) as u64, "cut at {at}");
                    assert_eq!(status.has_footer, complete == line_ends.len());
                }
                Err(e) => {
                    assert_eq!(complete, 0, "cut at {at}: {e}");
                    assert!(e.to_string().contains("no complete record"), "{e}");
                }
            }
        }
    }

    #[test]
    fn killed_compressed_writer_keeps_flushed_records() {
        let path = tmp("killed.jsonl.zst");
        let written = write_trace(&path, true, 50, false);
        // Append half a zstd block, as a writer killed mid-write would leave.
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[0x10, 0x20, 0x30]).unwrap();
        let (read, status) = read_file(&path).unwrap();
        assert_eq!(read, written);
        assert!(!status.has_footer);
        assert!(status.warning().is_some());
    }

    #[test]
    fn rejects_files_that_are_not_traces() {
        let cases: [(&str, &[u8], &str); 5] = [
            ("empty", b"", "is empty"),
            ("text", b"hello world\n", "not a tracer trace file"),
            ("json", b"{\"type\":\"launch\"}\n", "not a tracer trace file"),
            ("other-header", b"{\"type\":\"header\",\"format\":\"other\",\"schema\":1,\"tracer_version\":\"\",\"host\":\"\",\"kernel_release\":\"\",\"start_unix_ns\":0,\"start_mono_ns\":0,\"options\":{\"pids\":[],\"command\":[],\"libs\":[],\"duration_s\":null,\"filter\":\"\",\"ring_bytes\":0},\"units\":{}}\n", "not a tracer trace file"),
            ("binary", &[0u8, 159, 146, 150, b'\n'], "not a tracer trace file"),
        ];
        for (name, bytes, want) in cases {
            let p = tmp(name);
            std::fs::write(&p, bytes).unwrap();
            let err = read_file(&p).unwrap_err().to_string();
            assert!(err.contains(want), "{name}: {err}");
        }
    }

    #[test]
    fn rejects_newer_schema_and_corrupt_lines() {
        let p = tmp("newer.jsonl");
        let mut h = Header { format: FORMAT.into(), schema: SCHEMA + 1, ..Default::default() };
        std::fs::write(&p, serde_json::to_string(&Record::Header(h.clone())).unwrap() + "\n").unwrap();
        let err = read_file(&p).unwrap_err().to_string();
        assert!(err.contains("use a newer tracer"), "{err}");

        h.schema = SCHEMA;
        let mut text = serde_json::to_string(&Record::Header(h)).unwrap() + "\n";
        text += "{\"type\":\"launch\",\"garbage\n";
        text += &(serde_json::to_string(&launch(1)).unwrap() + "\n");
        std::fs::write(&p, &text).unwrap();
        let err = read_file(&p).unwrap_err().to_string();
        assert!(err.contains("line 2 is not a valid trace record"), "{err}");

        // A record type from a newer tracer is skipped and counted, not an error.
        let text = text.replace("{\"type\":\"launch\",\"garbage\n", "{\"type\":\"future_record\",\"queue\":1}\n");
        std::fs::write(&p, &text).unwrap();
        let (records, status) = read_file(&p).unwrap();
        assert_eq!((records.len(), status.unknown_records), (2, 1));
    }

    #[test]
    fn huge_line_is_refused_without_buffering_it_all() {
        let p = tmp("huge.jsonl");
        let mut text = serde_json::to_string(&header()).unwrap() + "\n";
        text += &"x".repeat(MAX_LINE + 10);
        text += "\n";
        std::fs::write(&p, text).unwrap();
        let err = read_file(&p).unwrap_err().to_string();
        assert!(err.contains("longer than"), "{err}");
    }
}
