//! What `report` and `export` read: one trace file, or the parts of one rotated recording (given as
//! files, or as the directory that holds them), read in order as one recording.
//!
//! Parts are ordered by the index in their headers, never by their names, and must all come from one
//! recording (same host and start) with no part missing after the oldest given (the parts before it, removed
//! by `record --keep-size` or left out, are said). Each part after the first restates, after its
//! header, what earlier parts said (its header counts those records): they are skipped, as are the
//! headers after the first and the footers before the last (their stop is `rotated`), so the records
//! read are those of one unrotated file.
//!
//! What a directory holds besides the parts is skipped and said: a symbolic link (the writer never makes
//! one, another user may plant one), an empty file (a part the disk had no room for), a file whose first
//! line is not a tracer header. A part given twice (or a copy of it) is said to be one, not a missing
//! part; a last part that ends `rotated`, or has no footer, is said too (the recording went on past it,
//! or was cut short there).

use std::{
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result, bail};

use super::{
    reader::{ReadStatus, for_each_record, header_of},
    schema::{Line, Stop},
};

/// The most files one input may name (a directory's parts included).
pub(crate) const MAX_PARTS: usize = 100_000;

/// One trace, or the parts of one rotated recording in order.
#[derive(Clone, Debug)]
pub(crate) struct Input {
    /// (path, records its header says it restates).
    files: Vec<(PathBuf, u64)>,
    /// Several parts: the recording's name (the `-o` it was recorded with, in the first part's directory).
    recording: Option<String>,
    /// Files skipped, one sentence each.
    notes: Vec<String>,
}

impl Input {
    /// One file, as it is.
    pub(crate) fn file(path: &Path) -> Self {
        Self { files: vec![(path.to_path_buf(), 0)], recording: None, notes: Vec::new() }
    }

    /// Files and directories given by the user: a single file reads as it is; several files, or a
    /// directory, must be the parts of one rotated recording.
    pub(crate) fn new(paths: &[PathBuf]) -> Result<Self> {
        // (path, found in a directory)
        let mut files: Vec<(PathBuf, bool)> = Vec::new();
        let mut notes = Vec::new();
        for p in paths {
            if p.is_dir() {
                let mut entries: Vec<std::fs::DirEntry> =
                    std::fs::read_dir(p).with_context(|| format!("cannot list {}", p.display()))?.flatten().collect();
                entries.sort_by_key(std::fs::DirEntry::path);
                let mut found = Vec::new();
                for entry in entries {
                    let f = entry.path();
                    if !f.file_name().is_some_and(|n| n.to_string_lossy().contains(".jsonl")) {
                        continue;
                    }
                    // The entry itself, not what a link points to.
                    match entry.metadata() {
                        Ok(m) if m.file_type().is_symlink() => {
                            notes.push(format!("{} is a symbolic link, not a part: skipped", f.display()));
                        }
                        Ok(m) if m.is_file() => found.push(f),
                        _ => {}
                    }
                }
                if found.is_empty() {
                    bail!(
                        "{} holds no trace file (*.jsonl, *.jsonl.zst): give a trace file or a directory of parts",
                        p.display()
                    );
                }
                files.extend(found.into_iter().map(|f| (f, true)));
            } else {
                files.push((p.clone(), false));
            }
            if files.len() > MAX_PARTS {
                bail!("more than {MAX_PARTS} trace files: give fewer at once");
            }
        }
        // Of several files, or a directory's, an empty one is a part the disk had no room for.
        if files.len() > 1 || files.iter().any(|(_, in_dir)| *in_dir) {
            files.retain(|(f, _)| {
                let empty = std::fs::metadata(f).is_ok_and(|m| m.is_file() && m.len() == 0);
                if empty {
                    notes.push(format!("{} is empty (its recording's disk was full?): skipped", f.display()));
                }
                !empty
            });
        }
        // A directory's one part reads as a part too, named as the recording's.
        let one_part = matches!(files.as_slice(), [(f, true)] if header_of(f).is_ok_and(|h| h.part.is_some()));
        if files.len() > 1 || one_part {
            return Self::parts(files, notes);
        }
        match files.pop() {
            Some((one, _)) => Ok(Self { notes, ..Self::file(&one) }),
            None => bail!("every trace file given is empty ({}): give one that holds a recording", paths_shown(paths)),
        }
    }

    /// Several files: the parts of one recording, in order, each once, none missing.
    fn parts(files: Vec<(PathBuf, bool)>, mut notes: Vec<String>) -> Result<Self> {
        let mut parts = Vec::with_capacity(files.len());
        for (f, in_dir) in files {
            let h = match header_of(&f) {
                Ok(h) => h,
                Err(_) if in_dir => {
                    notes.push(format!(
                        "{} is not a tracer trace (its first line is not a tracer header): skipped",
                        f.display()
                    ));
                    continue;
                }
                Err(e) => return Err(e),
            };
            let Some(part) = h.part else {
                bail!(
                    "{} is a whole recording, not a part of a rotated one: give it alone, or only the parts of one recording",
                    f.display()
                );
            };
            let id = std::fs::metadata(&f).map(|m| (m.dev(), m.ino())).ok();
            parts.push((part.index, (h.host.clone(), h.start_unix_ns), f, part.restated, id));
        }
        parts.sort_by_key(|p| p.0);
        let Some(first) = parts.first() else {
            bail!("no part of a tracer recording given: give its parts, or their directory")
        };
        for (i, p) in parts.iter().enumerate() {
            if p.1 != first.1 {
                bail!(
                    "{} and {} are parts of different recordings: give the parts of one",
                    first.2.display(),
                    p.2.display()
                );
            }
            if let Some(before) = i.checked_sub(1).map(|b| &parts[b])
                && before.0 == p.0
            {
                if before.4.is_some() && before.4 == p.4 {
                    bail!("{} is given twice: give each part once", p.2.display());
                }
                bail!(
                    "{} and {} are both part {} of the recording (one is a copy?): give each part once",
                    before.2.display(),
                    p.2.display(),
                    p.0
                );
            }
            let want = usize::try_from(first.0).ok().and_then(|f| f.checked_add(i));
            if usize::try_from(p.0).ok() != want {
                let i = want.unwrap_or(i);
                bail!(
                    "part {i} of the recording is missing (found part {} in {}): give every part from the oldest kept on",
                    p.0,
                    p.2.display()
                );
            }
        }
        if first.0 > 0 {
            // Removed by --keep-size (or not given): the oldest part read restates what they named.
            notes.push(format!(
                "parts 0000-{:04} of the recording are not here (removed by --keep-size, or not given): what they recorded is not counted; part {:04} restates the processes, libraries and kernels they named",
                first.0 - 1,
                first.0
            ));
        }
        let recording = Some(recording_name(&first.2));
        Ok(Self { files: parts.into_iter().map(|(_, _, f, restated, _)| (f, restated)).collect(), recording, notes })
    }

    pub(crate) fn paths(&self) -> impl Iterator<Item = &Path> {
        self.files.iter().map(|(p, _)| p.as_path())
    }

    /// The input as the user would name it: the file, or which parts of which recording (`parts 0000-0003
    /// of DIR/run.jsonl.zst`).
    pub(crate) fn display(&self) -> String {
        match (self.files.as_slice(), &self.recording) {
            (files, Some(name)) => format!("{} of {name}", parts_read(files.len())),
            ([(one, _), ..], None) => one.display().to_string(),
            ([], None) => String::new(),
        }
    }

    /// Streams the records of the recording through `each`, in order: a single file's all; of parts, one
    /// header, no restatement, the last footer only. The status is the last part's ending, with every
    /// part's skipped records added up; its notes say what else was found: files skipped, a part before
    /// the last that was cut, parts missing after the last (it ends `rotated`).
    pub(crate) fn for_each_record(&self, mut each: impl FnMut(Line)) -> Result<ReadStatus> {
        let mut total = ReadStatus { notes: self.notes.clone(), ..ReadStatus::default() };
        let last = self.files.len().saturating_sub(1);
        for (i, (path, restated)) in self.files.iter().enumerate() {
            // The header of a later part and what it restates.
            let mut skip = if i == 0 { 0 } else { restated.saturating_add(1) };
            let (mut index, mut stop) = (None, None);
            let mut status = for_each_record(path, |r| {
                match &r {
                    Line::Header(h) => index = h.part.map(|p| p.index),
                    Line::Footer(f) => stop = Some(f.stop),
                    _ => {}
                }
                if skip > 0 {
                    skip -= 1;
                    return;
                }
                if i != last && matches!(r, Line::Footer(_)) {
                    return;
                }
                each(r);
            })?;
            total.unknown_records = total.unknown_records.saturating_add(status.unknown_records);
            total.unreadable_records = total.unreadable_records.saturating_add(status.unreadable_records);
            total.repeats_cut.add(&status.repeats_cut);
            if total.first_unreadable.is_none() {
                total.first_unreadable = status.first_unreadable.take().map(|w| format!("{}: {w}", path.display()));
            }
            if self.recording.is_some() {
                status.part = Some(format!("part {:04} ({})", index.unwrap_or_default(), path.display()));
            }
            if i != last {
                total.notes.extend(status.warning());
                continue;
            }
            (total.cut_bytes, total.stream_cut, total.has_footer) =
                (status.cut_bytes, status.stream_cut, status.has_footer);
            (total.lines, total.bytes, total.part) = (status.lines, status.bytes, status.part);
            if let (Some(n), Some(Stop::Rotated)) = (index, stop) {
                let read = match &self.recording {
                    Some(name) => format!("read {} of {name}", parts_read(self.files.len())),
                    None => format!("read part {n:04} of a rotated recording alone ({})", path.display()),
                };
                total.notes.push(format!(
                    "{read}, but the recording continued after part {n:04}: its later parts are missing (give them too, or the directory that holds them; if its disk filled, they were never written)"
                ));
            }
        }
        Ok(total)
    }
}

/// The name a rotated recording was recorded under (`-o`), from its first part's: `run.0000.jsonl.zst`
/// -> `run.jsonl.zst`.
fn recording_name(first: &Path) -> String {
    let name = first.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let (stem, ext) = split_trace_name(&name);
    let stem = match stem.rsplit_once('.') {
        Some((s, n)) if n.len() >= 4 && n.bytes().all(|b| b.is_ascii_digit()) => s,
        _ => stem,
    };
    first.with_file_name(format!("{stem}{ext}")).display().to_string()
}

/// The first `n` parts: `part 0000`, `parts 0000-0003`.
fn parts_read(n: usize) -> String {
    match n {
        0 | 1 => "part 0000".to_owned(),
        n => format!("parts 0000-{:04}", n - 1),
    }
}

fn paths_shown(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}

/// A trace's file name as (stem, extension from `.jsonl` on): `run.jsonl.zst` -> (`run`, `.jsonl.zst`); a
/// name without `.jsonl` is all stem.
pub(super) fn split_trace_name(name: &str) -> (&str, &str) {
    match name.find(".jsonl") {
        Some(at) => name.split_at(at),
        None => (name, ""),
    }
}

#[cfg(test)]
mod tests {
    use std::{fs::File, time::Duration};

    use super::*;
    use crate::trace::{FORMAT, Footer, Header, Kernel, Library, Process, Rotation, SCHEMA, Writer, schema::Exit};

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tracer-parts-{name}-{}", std::process::id()));
        drop(std::fs::remove_dir_all(&d));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// The recording both ways: (records of the unrotated file, the parts' paths).
    fn recorded(d: &Path, compress: bool) -> (Vec<Line>, Vec<PathBuf>) {
        recorded_beside(d, compress, &[])
    }

    /// The same, with a symbolic link planted at each of the part names numbered `planted` before.
    fn recorded_beside(d: &Path, compress: bool, planted: &[u32]) -> (Vec<Line>, Vec<PathBuf>) {
        let ext = if compress { "jsonl.zst" } else { "jsonl" };
        let events: Vec<Line> = vec![
            Line::Header(Box::new(Header {
                format: FORMAT.into(),
                schema: SCHEMA,
                host: "h".into(),
                start_unix_ns: 7,
                ..Header::default()
            })),
            Line::Library(Library { id: 1, path: "/lib/libamdhip64.so".into(), ..Library::default() }),
            Line::Process(Process { pid: 5, comm: "runner".into(), ..Process::default() }),
            Line::Process(Process { pid: 6, comm: "short".into(), ..Process::default() }),
            Line::Kernel(Kernel { id: 1, pid: 5, name: "_Z1kv".into(), ..Kernel::default() }),
            Line::Kernel(Kernel { id: 2, pid: 6, name: "_Z1jv".into(), ..Kernel::default() }),
            Line::Exit(Exit { ts: 10, pid: 6, code: None, signal: None }),
            Line::Kernel(Kernel { id: 3, pid: 5, name: "_Z1lv".into(), ..Kernel::default() }),
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
        for &n in planted {
            std::os::unix::fs::symlink(d.join("elsewhere"), Rotation::part_path(&out, n)).unwrap();
        }
        let rotation = Rotation {
            first: Rotation::part_path(&out, 0),
            max_bytes: None,
            every: Some(Duration::ZERO),
            force: false,
            keep: None,
        };
        let mut w = Writer::rotating(File::create(&rotation.first).unwrap(), compress, rotation, &out).unwrap();
        for pair in events.chunks(2) {
            for r in pair {
                w.write(r).unwrap();
            }
            w.flush_and_rotate().unwrap();
        }
        w.finish(Footer { stop: Stop::CommandExited, ..Footer::default() }).unwrap();
        let names = 5 + planted.len() as u32;
        let mut parts: Vec<PathBuf> =
            (0..names).filter(|n| !planted.contains(n)).map(|i| Rotation::part_path(&out, i)).collect();
        assert!(parts.iter().all(|p| p.is_file()), "{parts:?}");
        assert!(!Rotation::part_path(&out, names).exists());
        parts.reverse(); // the order given does not matter
        let (records, _) = crate::trace::read_file(&whole).unwrap();
        (records, parts)
    }

    /// A header without its part number (the rest must be equal).
    fn plain(r: Line) -> Line {
        match r {
            Line::Header(h) => Line::Header(Box::new(Header { part: None, ..*h })),
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
                        Line::Header(h) => format!("header {:?}", h.part.map(|p| (p.index, p.restated))),
                        Line::Library(_) => "library".into(),
                        Line::Process(p) => format!("process {}", p.pid),
                        Line::Kernel(k) => format!("kernel {}", k.id),
                        Line::Exit(e) => format!("exit {}", e.pid),
                        Line::Footer(f) => format!("footer {}", f.stop),
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
        // The oldest parts removed (--keep-size): the rest reads from the oldest kept, and says so.
        let (read, status) = read_input(&parts[2..]);
        assert!(matches!(read.first(), Some(Line::Header(_))));
        assert!(
            status.notes.iter().any(|n| n.starts_with("parts 0000-0001 of the recording are not here")),
            "{status:?}"
        );
        let err = Input::new(&[parts[1].clone(), parts[3].clone()]).unwrap_err().to_string();
        assert!(err.contains("part 2 of the recording is missing"), "{err}");
    }

    /// Reads `paths` as one input: the records (headers without their part number), the status.
    fn read_input(paths: &[PathBuf]) -> (Vec<Line>, ReadStatus) {
        let mut read = Vec::new();
        let status = Input::new(paths).unwrap().for_each_record(|r| read.push(plain(r))).unwrap();
        (read, status)
    }

    #[test]
    fn a_name_taken_by_a_planted_link_moves_the_part_to_the_next_one() {
        let d = dir("planted");
        std::fs::write(d.join("elsewhere"), "not tracer's").unwrap();
        // Names 2 and 3 are taken: parts 2, 3 and 4 are written as names 4, 5 and 6, each with its footer.
        let (whole, mut parts) = recorded_beside(&d, true, &[2, 3]);
        parts.sort();
        assert_eq!(std::fs::read_to_string(d.join("elsewhere")).unwrap(), "not tracer's");
        for (i, part) in parts.iter().enumerate() {
            let (records, status) = crate::trace::read_file(part).unwrap();
            assert!(status.has_footer, "{}", part.display());
            assert!(matches!(&records[0], Line::Header(h) if h.part.map(|p| p.index) == Some(i as u32)));
        }
        let (last, _) = crate::trace::read_file(&parts[4]).unwrap();
        let Some(Line::Footer(f)) = last.last() else { panic!("no footer") };
        assert_eq!(f.counters.get("rotation_names_taken"), Some(&2));
        // The directory reads as the unrotated file, the links skipped and said.
        std::fs::remove_file(d.join("whole.jsonl.zst")).unwrap();
        std::fs::remove_file(d.join("elsewhere")).unwrap();
        let (read, status) = read_input(std::slice::from_ref(&d));
        let mut want = whole;
        if let Some(Line::Footer(f)) = want.last_mut() {
            f.counters.insert("rotation_names_taken".into(), 2);
        }
        assert_eq!(read, want);
        assert!(status.warning().is_none());
        assert_eq!(
            status.notes,
            [2, 3].map(|n| format!(
                "{} is a symbolic link, not a part: skipped",
                d.join(format!("run.000{n}.jsonl.zst")).display()
            ))
        );
    }

    #[test]
    fn an_empty_part_is_skipped_and_parts_missing_after_the_last_are_said() {
        let d = dir("empty");
        let (_, mut parts) = recorded(&d, false);
        parts.sort();
        std::fs::remove_file(d.join("whole.jsonl")).unwrap();
        let name = d.join("run.jsonl").display().to_string();
        // The disk had no room for the last part.
        std::fs::write(&parts[4], b"").unwrap();
        let input = Input::new(std::slice::from_ref(&d)).unwrap();
        assert_eq!(input.display(), format!("parts 0000-0003 of {name}"));
        let (read, status) = read_input(std::slice::from_ref(&d));
        assert!(matches!(read.last(), Some(Line::Footer(f)) if f.stop == Stop::Rotated), "{read:?}");
        assert_eq!(
            status.notes,
            [
                format!("{} is empty (its recording's disk was full?): skipped", parts[4].display()),
                format!(
                    "read parts 0000-0003 of {name}, but the recording continued after part 0003: its later parts are missing (give them too, or the directory that holds them; if its disk filled, they were never written)"
                )
            ]
        );
        // Earlier parts given by hand, or one alone, say the same.
        let (_, status) = read_input(&parts[..3]);
        assert!(
            status.notes[0]
                .starts_with(&format!("read parts 0000-0002 of {name}, but the recording continued after part 0002")),
            "{status:?}"
        );
        let (_, status) = read_input(&parts[1..2]);
        assert!(
            status.notes[0].starts_with(&format!(
                "read part 0001 of a rotated recording alone ({}), but the recording continued after part 0001",
                parts[1].display()
            )),
            "{status:?}"
        );
        // A last part cut short: no footer.
        let (_, whole) = recorded(&dir("empty-again"), false);
        let mut whole = whole;
        whole.sort();
        let text = std::fs::read_to_string(&whole[4]).unwrap();
        let cut = format!("{}\n", text.trim_end().rsplit_once('\n').unwrap().0);
        std::fs::write(&whole[4], cut).unwrap();
        let (_, status) = read_input(&whole);
        assert_eq!(
            status.warning().unwrap(),
            format!(
                "part 0004 ({}) was not closed normally (the tracer was killed, or its disk filled?): it has no footer, so the recording was cut short there, and its losses after its last checkpoint (one a second) are unknown",
                whole[4].display()
            )
        );
        assert!(status.notes.is_empty(), "{status:?}");
    }

    #[test]
    fn a_part_twice_is_said_to_be_a_duplicate_and_what_is_not_a_part_is_skipped() {
        let d = dir("twice");
        let (_, mut parts) = recorded(&d, false);
        parts.sort();
        std::fs::remove_file(d.join("whole.jsonl")).unwrap();
        let err = Input::new(&[parts[0].clone(), parts[1].clone(), parts[1].clone()]).unwrap_err().to_string();
        assert_eq!(err, format!("{} is given twice: give each part once", parts[1].display()));
        let copy = d.join("copy.run.0001.jsonl");
        std::fs::copy(&parts[1], &copy).unwrap();
        let err = Input::new(std::slice::from_ref(&d)).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "{} and {} are both part 1 of the recording (one is a copy?): give each part once",
                copy.display(),
                parts[1].display()
            )
        );
        std::fs::remove_file(&copy).unwrap();
        // A file of the directory that is not a trace is skipped and said; the others read.
        let stray = d.join("notes.jsonl");
        std::fs::write(&stray, "hello\n").unwrap();
        let (read, status) = read_input(std::slice::from_ref(&d));
        assert!(matches!(read.last(), Some(Line::Footer(f)) if f.stop == Stop::CommandExited));
        assert_eq!(
            status.notes,
            [format!("{} is not a tracer trace (its first line is not a tracer header): skipped", stray.display())]
        );
    }
}
