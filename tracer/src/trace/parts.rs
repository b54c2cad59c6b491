//! What `report` and `export` read: one trace file, or the parts of one rotated recording (given as
//! files, or as the directory that holds them), read in order as one recording.
//!
//! Parts are ordered by the index in their headers, never by their names, and must all come from one
//! recording (same host and start) with no part missing. Each part after the first restates, after its
//! header, what earlier parts said (its header counts those records): they are skipped, as are the
//! headers after the first and the footers before the last (their stop is `rotated`), so the records
//! read are those of one unrotated file.

use std::{
    fs::File,
    io::{BufRead as _, BufReader, Read},
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result, bail};

use super::{
    reader::{MAX_LINE, ReadStatus, ZSTD_MAGIC, for_each_record},
    schema::{Header, Record},
};

/// The most files one input may name (a directory's parts included).
pub const MAX_PARTS: usize = 100_000;

/// One trace, or the parts of one rotated recording in order.
#[derive(Clone, Debug)]
pub struct Input {
    /// (path, records its header says it restates).
    files: Vec<(PathBuf, u64)>,
}

impl Input {
    /// One file, as it is.
    pub fn file(path: &Path) -> Self {
        Self { files: vec![(path.to_path_buf(), 0)] }
    }

    /// Files and directories given by the user: a single file reads as it is; several files, or a
    /// directory, must be the parts of one rotated recording.
    pub fn new(paths: &[PathBuf]) -> Result<Self> {
        let mut files = Vec::new();
        for p in paths {
            if p.is_dir() {
                let mut found: Vec<PathBuf> = std::fs::read_dir(p)
                    .with_context(|| format!("cannot list {}", p.display()))?
                    .flatten()
                    .map(|e| e.path())
                    .filter(|f| f.is_file() && f.file_name().is_some_and(|n| n.to_string_lossy().contains(".jsonl")))
                    .collect();
                if found.is_empty() {
                    bail!(
                        "{} holds no trace file (*.jsonl, *.jsonl.zst): give a trace file or a directory of parts",
                        p.display()
                    );
                }
                found.sort();
                files.extend(found);
            } else {
                files.push(p.clone());
            }
            if files.len() > MAX_PARTS {
                bail!("more than {MAX_PARTS} trace files: give fewer at once");
            }
        }
        match files.as_slice() {
            [] => bail!("no trace file given"),
            [one] => return Ok(Self::file(one)),
            _ => {}
        }
        let mut parts = Vec::with_capacity(files.len());
        for f in files {
            let h = header_of(&f)?;
            let Some(part) = h.part else {
                bail!(
                    "{} is a whole recording, not a part of a rotated one: give it alone, or only the parts of one recording",
                    f.display()
                );
            };
            parts.push((part.index, (h.host.clone(), h.start_unix_ns), f, part.restated));
        }
        parts.sort_by_key(|p| p.0);
        let first = &parts[0];
        for (i, p) in parts.iter().enumerate() {
            if p.1 != first.1 {
                bail!(
                    "{} and {} are parts of different recordings: give the parts of one",
                    first.2.display(),
                    p.2.display()
                );
            }
            if usize::try_from(p.0).ok() != Some(i) {
                bail!(
                    "part {i} of the recording is missing (found part {} in {}): give every part from the first on",
                    p.0,
                    p.2.display()
                );
            }
        }
        Ok(Self { files: parts.into_iter().map(|(_, _, f, restated)| (f, restated)).collect() })
    }

    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.files.iter().map(|(p, _)| p.as_path())
    }

    /// The input as the user would name it: the file, or the first part and how many.
    pub fn display(&self) -> String {
        match self.files.as_slice() {
            [(one, _)] => one.display().to_string(),
            [(first, _), ..] => format!("{} (+{} parts)", first.display(), self.files.len() - 1),
            [] => String::new(),
        }
    }

    /// Streams the records of the recording through `each`, in order: a single file's all; of parts, one
    /// header, no restatement, the last footer only. The status is the last part's ending, with every
    /// part's skipped and cut records added up.
    pub fn for_each_record(&self, mut each: impl FnMut(Record)) -> Result<ReadStatus> {
        if let [(one, _)] = self.files.as_slice() {
            return for_each_record(one, each);
        }
        let mut total = ReadStatus::default();
        let last = self.files.len() - 1;
        for (i, (path, restated)) in self.files.iter().enumerate() {
            // The header of a later part and what it restates.
            let mut skip = if i == 0 { 0 } else { restated.saturating_add(1) };
            let status = for_each_record(path, |r| {
                if skip > 0 {
                    skip -= 1;
                    return;
                }
                if i != last && matches!(r, Record::Footer(_)) {
                    return;
                }
                each(r);
            })?;
            total.cut_bytes = total.cut_bytes.saturating_add(status.cut_bytes);
            total.stream_cut |= status.stream_cut;
            total.unknown_records = total.unknown_records.saturating_add(status.unknown_records);
            total.unreadable_records = total.unreadable_records.saturating_add(status.unreadable_records);
            if total.first_unreadable.is_none() {
                total.first_unreadable = status.first_unreadable.map(|w| format!("{}: {w}", path.display()));
            }
            if i == last {
                total.has_footer = status.has_footer;
            }
        }
        Ok(total)
    }
}

/// The header of a trace file (its first line), read alone.
fn header_of(path: &Path) -> Result<Header> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut magic = [0u8; 4];
    let mut head = BufReader::new(file);
    let n = head.fill_buf().map(|b| b.len().min(4))?;
    magic[..n].copy_from_slice(&head.buffer()[..n]);
    let input: Box<dyn Read> = if magic == ZSTD_MAGIC { Box::new(zstd::Decoder::new(head)?) } else { Box::new(head) };
    let mut line = Vec::new();
    BufReader::new(input.take(MAX_LINE as u64)).read_until(b'\n', &mut line)?;
    match serde_json::from_slice::<Record>(&line) {
        Ok(Record::Header(h)) => Ok(h),
        _ => bail!(
            "{} is not a tracer trace file (its first line is not a tracer header); record one with `tracer record -o FILE`",
            path.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::trace::{
        FORMAT, Footer, Kernel, Library, Process, Rotation, SCHEMA, Writer,
        schema::{Exit, Stop},
    };

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tracer-parts-{name}-{}", std::process::id()));
        drop(std::fs::remove_dir_all(&d));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// The recording both ways: (records of the unrotated file, the parts' paths).
    fn recorded(d: &Path, compress: bool) -> (Vec<Record>, Vec<PathBuf>) {
        let ext = if compress { "jsonl.zst" } else { "jsonl" };
        let events: Vec<Record> = vec![
            Record::Header(Header {
                format: FORMAT.into(),
                schema: SCHEMA,
                host: "h".into(),
                start_unix_ns: 7,
                ..Header::default()
            }),
            Record::Library(Library { id: 1, path: "/lib/libamdhip64.so".into(), ..Library::default() }),
            Record::Process(Process { pid: 5, comm: "runner".into(), ..Process::default() }),
            Record::Process(Process { pid: 6, comm: "short".into(), ..Process::default() }),
            Record::Kernel(Kernel { id: 1, pid: 5, name: "_Z1kv".into(), ..Kernel::default() }),
            Record::Kernel(Kernel { id: 2, pid: 6, name: "_Z1jv".into(), ..Kernel::default() }),
            Record::Exit(Exit { ts: 10, pid: 6, code: None, signal: None }),
            Record::Kernel(Kernel { id: 3, pid: 5, name: "_Z1lv".into(), ..Kernel::default() }),
        ];
        // Unrotated.
        let whole = d.join(format!("whole.{ext}"));
        let mut w = Writer::new(File::create(&whole).unwrap(), compress).unwrap();
        for r in &events {
            w.write(r).unwrap();
        }
        w.finish(Footer { stop: Stop::CommandExited, ..Footer::default() }).unwrap();
        // Rotated after every two events (a part is always old enough).
        let out = d.join(format!("run.{ext}"));
        let rotation = Rotation {
            first: Rotation::part_path(&out, 0),
            max_bytes: None,
            every: Some(Duration::ZERO),
            force: false,
        };
        let mut w = Writer::rotating(File::create(&rotation.first).unwrap(), compress, rotation, &out).unwrap();
        for pair in events.chunks(2) {
            for r in pair {
                w.write(r).unwrap();
            }
            w.flush_and_rotate().unwrap();
        }
        w.finish(Footer { stop: Stop::CommandExited, ..Footer::default() }).unwrap();
        let mut parts: Vec<PathBuf> = (0..5).map(|i| Rotation::part_path(&out, i)).collect();
        assert!(parts.iter().all(|p| p.exists()), "{parts:?}");
        assert!(!Rotation::part_path(&out, 5).exists());
        parts.reverse(); // the order given does not matter
        let (records, _) = crate::trace::read_file(&whole).unwrap();
        (records, parts)
    }

    /// A header without its part number (the rest must be equal).
    fn plain(r: Record) -> Record {
        match r {
            Record::Header(h) => Record::Header(Header { part: None, ..h }),
            r => r,
        }
    }

    #[test]
    fn parts_read_as_the_unrotated_file_and_each_alone() {
        for compress in [false, true] {
            let d = dir(if compress { "zst" } else { "plain" });
            let (whole, parts) = recorded(&d, compress);
            let mut read = Vec::new();
            let status = Input::new(&parts).unwrap().for_each_record(|r| read.push(plain(r))).unwrap();
            assert!(status.has_footer);
            assert_eq!(read, whole);
            // The directory reads the same... once the unrotated file is not in it.
            std::fs::remove_file(d.join(if compress { "whole.jsonl.zst" } else { "whole.jsonl" })).unwrap();
            let mut from_dir = Vec::new();
            Input::new(std::slice::from_ref(&d)).unwrap().for_each_record(|r| from_dir.push(plain(r))).unwrap();
            assert_eq!(from_dir, whole);
            // Part 3 alone: its header, then what it restates (the library, both processes and their
            // kernels), then its own events; part 4 no longer restates the process that exited in part 3.
            let names = |path: &Path| -> Vec<String> {
                let (alone, status) = crate::trace::read_file(path).unwrap();
                assert!(status.has_footer);
                alone
                    .iter()
                    .map(|r| match r {
                        Record::Header(h) => format!("header {:?}", h.part.map(|p| (p.index, p.restated))),
                        Record::Library(_) => "library".into(),
                        Record::Process(p) => format!("process {}", p.pid),
                        Record::Kernel(k) => format!("kernel {}", k.id),
                        Record::Exit(e) => format!("exit {}", e.pid),
                        Record::Footer(f) => format!("footer {}", f.stop),
                        _ => "other".into(),
                    })
                    .collect()
            };
            assert_eq!(
                names(&parts[1]),
                [
                    "header Some((3, 5))",
                    "library",
                    "process 5",
                    "kernel 1",
                    "process 6",
                    "kernel 2",
                    "exit 6",
                    "kernel 3",
                    "footer rotated"
                ]
            );
            assert_eq!(
                names(&parts[0]),
                ["header Some((4, 4))", "library", "process 5", "kernel 1", "kernel 3", "footer command-exited"]
            );
        }
    }

    #[test]
    fn parts_of_other_recordings_or_with_gaps_are_refused() {
        let d = dir("refused");
        let (_, mut parts) = recorded(&d, false);
        parts.sort();
        let err = Input::new(&[parts[0].clone(), parts[2].clone()]).unwrap_err().to_string();
        assert!(err.contains("part 1 of the recording is missing"), "{err}");
        let err = Input::new(&[parts[0].clone(), d.join("whole.jsonl")]).unwrap_err().to_string();
        assert!(err.contains("is a whole recording"), "{err}");
    }
}
