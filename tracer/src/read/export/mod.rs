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
//! - `rocpd`: rocprofiler-sdk's `SQLite` database, one kernel dispatch row per kernel execution, with
//!   rocpd's own views ([`rocpd()`]).
mod csv;
mod dot;
mod parquet;
mod perfetto;
mod rocpd;
pub(crate) use self::csv::csv;
pub(crate) use self::parquet::parquet;
pub(crate) use self::rocpd::rocpd;
pub(crate) use dot::dot;
pub(crate) use perfetto::perfetto;

use std::io::{Seek as _, Write};

/// An export's bytes held until it has ended well, then copied to standard output: a trace refused halfway
/// (a corrupt line, a second header) leaves standard output empty, not half a document. The first
/// [`SPOOL_IN_MEMORY`] bytes are kept in memory, the rest in an unnamed file in the temporary directory.
pub(crate) struct Spool {
    memory: Vec<u8>,
    file: Option<std::io::BufWriter<std::fs::File>>,
}

/// Bytes of an export a [`Spool`] keeps in memory before it writes to a file.
const SPOOL_IN_MEMORY: usize = 16 << 20;

impl Spool {
    pub(crate) const fn new() -> Self {
        Self { memory: Vec::new(), file: None }
    }

    fn spill(&mut self) -> std::io::Result<&mut std::io::BufWriter<std::fs::File>> {
        if self.file.is_none() {
            let dir = std::env::temp_dir();
            let file = open_unnamed(&dir).map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "cannot hold the export in {} ({e}) until it is complete: give `-o FILE`, or TMPDIR a directory with room",
                        dir.display()
                    ),
                )
            })?;
            self.file = Some(std::io::BufWriter::with_capacity(1 << 20, file));
        }
        let file = self.file.as_mut().ok_or_else(|| std::io::Error::other("no spool file"))?;
        file.write_all(&self.memory)?;
        self.memory.clear();
        Ok(file)
    }

    /// Copies what was written, in order, to `out`.
    pub(crate) fn copy_to(mut self, out: &mut dyn Write) -> std::io::Result<()> {
        if let Some(mut spilled) = self.file.take() {
            spilled.write_all(&self.memory)?;
            let mut file = spilled.into_inner().map_err(std::io::IntoInnerError::into_error)?;
            file.rewind()?;
            std::io::copy(&mut file, out)?;
        } else {
            out.write_all(&self.memory)?;
        }
        out.flush()
    }
}

impl Write for Spool {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.file.is_none() && self.memory.len().saturating_add(buf.len()) <= SPOOL_IN_MEMORY {
            self.memory.extend_from_slice(buf);
            return Ok(buf.len());
        }
        self.spill()?.write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A file in `dir` that no name reaches (`O_TMPFILE`; where the file system has none, one made and unlinked).
fn open_unnamed(dir: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let tmp = std::fs::OpenOptions::new().read(true).write(true).mode(0o600).custom_flags(libc::O_TMPFILE).open(dir);
    if let Ok(f) = tmp {
        return Ok(f);
    }
    let path = dir.join(format!("tracer-export-{}-{:x}", std::process::id(), rand_suffix()));
    let f = std::fs::OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(f)
}

/// A name suffix unlikely to be taken: the clock's nanoseconds.
fn rand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::{csv::CSV_COLUMNS, *};
    use crate::{
        trace::event::PacketType,
        trace::{self, Line},
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
            Line::Kernel(Kernel {
                id,
                pid: 7,
                name: "_Z1kv".into(),
                demangled: "k()".into(),
                source,
                ..Default::default()
            })
        };
        let launch = |ts, ret| {
            Line::Launch(Launch {
                tid: 8,
                grid: [0; 3],
                block: [0; 3],
                ret,
                dur: 2000,
                ..Launch::for_test(7, Some(1), ts)
            })
        };
        for r in [
            Line::Header(Box::new(Header {
                format: trace::FORMAT.into(),
                schema: trace::SCHEMA,
                start_mono_ns: 1_000,
                ..Default::default()
            })),
            k(1, Source::Register),
            k(2, Source::Hsa),
            launch(10_000, 101),
            launch(20_000, 0),
            Line::Checkpoint(trace::Checkpoint { ts: 21_000, drops: [("call".to_owned(), 4)].into() }),
            Line::Dispatch(Dispatch {
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
        // The losses so far, on the recording's own counter track.
        let counters: Vec<&Value> = ev.iter().filter(|e| e["ph"] == "C").collect();
        assert_eq!(counters.len(), 1);
        assert_eq!((&counters[0]["ts"], &counters[0]["args"]["dropped"]), (&20.0.into(), &4.into()));
        let mut csv_out = Vec::new();
        csv(&trace::Input::file(&path), &mut csv_out).unwrap();
        let text = String::from_utf8(csv_out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], CSV_COLUMNS.join(","));
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1].split(',').count(), CSV_COLUMNS.len());
        assert!(lines[1].starts_with("KERNEL_DISPATCH,,0,,8,1,2,k(),,25000,,0,0,,,,"), "{}", lines[1]);
    }

    /// An export refused halfway leaves standard output empty: its bytes are spooled and copied only once it
    /// ended well; a spool past its memory part copies back every byte in order.
    #[test]
    fn a_refused_export_writes_nothing_and_a_spool_copies_back_in_order() {
        let dir = std::env::temp_dir().join(format!("tracer-export-spool-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.jsonl");
        let header = Line::Header(Box::new(Header {
            format: trace::FORMAT.into(),
            schema: trace::SCHEMA,
            ..Default::default()
        }));
        let launch = Line::Launch(Launch::for_test(7, Some(1), 5));
        let good = [&header, &launch].map(|l| serde_json::to_string(l).unwrap()).join("\n");
        std::fs::write(&path, format!("{good}\n{{\"type\":\"launch\",\"garbage\n")).unwrap();
        let mut stdout = Vec::new();
        let mut spool = Spool::new();
        perfetto(&trace::Input::file(&path), &mut spool).unwrap_err();
        drop(spool);
        assert!(stdout.is_empty());
        let mut spool = Spool::new();
        let bytes: Vec<u8> = (0..(40u32 << 20) / 4).flat_map(u32::to_le_bytes).collect();
        for part in bytes.chunks(1000) {
            spool.write_all(part).unwrap();
        }
        spool.copy_to(&mut stdout).unwrap();
        assert!(stdout == bytes, "{} bytes back of {}", stdout.len(), bytes.len());
        drop(std::fs::remove_dir_all(dir));
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
