//! The trace writer: JSON Lines, one [`Line`] per line, optionally zstd-compressed.
//!
//! A header comes first, then events in the order they were seen, then a footer with counts and losses.
//! The writer flushes often (and closes the zstd block each time), so a tracer killed mid-recording
//! leaves a file whose every complete record reads back.
//!
//! A rotated recording ([`Rotation`]) is a sequence of such files, `NAME.0000.jsonl.zst`,
//! `NAME.0001.jsonl.zst`, ...: at a flush past the size or age limit the part ends with a footer (stop
//! `rotated`) and the next begins with the header (its `part`), then restates what a reader needs to read
//! it alone: the libraries, probes and counted libraries, and of each process still running its process,
//! kernel, mapping and queue records ([`Restate`], dropped at the process's exit, so memory stays flat over
//! runner churn). Reading the parts in order as one recording skips the restatements.
//!
//! A part's name is never taken over: a file or link already there (planted by another user) makes the
//! part take the next free number, said on stderr and counted in the footer (`rotation_names_taken`); its
//! header's index, not its name, says where it goes. A part that cannot be written (the disk full) is cut
//! back to its last flush, or removed when that leaves nothing, and the recording ends naming it.

use crate::os::messages::warning;
use std::{
    collections::BTreeMap,
    fs::File,
    io::{self, Seek as _, Write as _},
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, anyhow, bail};

use super::{
    counted::{Counted, Counts},
    live::Tap,
    schema::{Footer, Header, Launch, Line, Part, Repeat, Stop},
};

/// Writes records to a file, batching lines and counting them by type.
pub struct Writer {
    out: Sink,
    buf: Vec<u8>,
    /// Records written, by type (restatements not counted).
    counts: BTreeMap<&'static str, u64>,
    /// Launch lines, counted apart (one each, the most common line: not looked up by name).
    launches: u64,
    tap: Option<Box<dyn Tap>>,
    parts: Option<Parts>,
    /// Bytes of records handed to the current file (before compression), restatements not counted.
    written: u64,
    /// Recent launch lines' spelled rest, by their fields.
    tails: super::scan::LaunchTails,
    /// Runs of exact repeats, where the header says the recording counts them (`options.repeats`).
    runs: Option<super::runs::Collapse>,
}

/// When a recording starts a new file, and where.
#[derive(Clone, Debug)]
pub(crate) struct Rotation {
    /// The first part's path (`NAME.0000.jsonl.zst`); the others differ in the number.
    pub first: PathBuf,
    pub max_bytes: Option<u64>,
    pub every: Option<Duration>,
    /// Replace parts that exist (`--force`).
    pub force: bool,
    /// `--keep-size`: the parts in the output's directory hold at most this many bytes, the oldest removed
    /// as new ones start.
    pub keep: Option<u64>,
}

impl Rotation {
    /// The path of part `index` of a recording whose `-o` is `output`: the number goes before the
    /// extensions (`run.jsonl.zst` -> `run.0003.jsonl.zst`).
    pub(crate) fn part_path(output: &Path, index: u32) -> PathBuf {
        let name = output.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let (stem, ext) = super::parts::split_trace_name(&name);
        output.with_file_name(format!("{stem}.{index:04}{ext}"))
    }

    /// Parts of an earlier recording under `output`'s names (`NAME.0001.jsonl.zst`, ...) in its directory:
    /// regular files, part 0 aside (the output's own check refuses it). A new recording would skip past
    /// their names and leave two recordings' parts mixed. (A link there is no earlier part: its name is
    /// skipped when its turn comes.)
    pub(crate) fn earlier_parts(output: &Path) -> Vec<PathBuf> {
        let dir = crate::os::output::dir_of(output);
        let first = Self::part_path(output, 0);
        let Some(first) = first.file_name().map(|n| n.to_string_lossy().into_owned()) else { return Vec::new() };
        // "NAME.0000.jsonl.zst" -> ("NAME.", ".jsonl.zst")
        let Some((before, after)) = first.split_once(".0000") else { return Vec::new() };
        let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
        let mut found: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| !t.is_dir() && !t.is_symlink()))
            .filter(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.strip_prefix(before)
                    .and_then(|rest| rest.strip_prefix('.'))
                    .and_then(|rest| rest.strip_suffix(after))
                    .is_some_and(|digits| {
                        digits.len() == 4 && digits != "0000" && digits.bytes().all(|b| b.is_ascii_digit())
                    })
            })
            .map(|e| e.path())
            .collect();
        found.sort();
        found
    }
}

/// Whether a rotated recording's part being written has reached its size.
fn parts_full(parts: Option<&Parts>, written: u64) -> bool {
    parts.is_some_and(|p| p.header.is_some() && p.rotation.max_bytes.is_some_and(|max| written >= max))
}

/// Names of parts found taken in a row, at most, before a rotation gives up.
const MAX_NAMES_TAKEN: usize = 1024;

/// A rotated recording's state: the part being written and what the next must restate.
struct Parts {
    rotation: Rotation,
    output: PathBuf,
    compress: bool,
    /// The part being written: its index (in its header), the number in its name (higher once names were
    /// found taken), its path.
    index: u32,
    name: u32,
    path: PathBuf,
    /// The part before it, complete.
    previous: Option<PathBuf>,
    /// Its bytes on disk after the last flush: what it is cut back to when a write fails.
    good: u64,
    /// Names found taken by a file or link already there, skipped.
    names_taken: u64,
    /// Parts removed by `--keep-size`, and their bytes.
    removed: super::retention::Removed,
    started: Instant,
    header: Option<Header>,
    restate: Restate,
}

/// What a part restates: records that later records refer to, kept while they can be referred to.
#[derive(Default)]
struct Restate {
    /// Library, probe and counted-library records, for the whole recording.
    global: Vec<Line>,
    /// Per process: its latest process record, its kernels, mappings and queues; gone at its exit.
    processes: BTreeMap<u32, Vec<Line>>,
}

impl Restate {
    fn see(&mut self, r: &Line) {
        match r {
            Line::Library(_) | Line::Probe(_) | Line::EntryLibrary(_) => self.global.push(r.clone()),
            Line::Process(p) => {
                let kept = self.processes.entry(p.pid).or_default();
                // An exec replaces the image: its kernels and mappings are the old program's.
                if p.cause == super::schema::Cause::Exec {
                    kept.clear();
                }
                kept.retain(|k| !matches!(k, Line::Process(_)));
                kept.insert(0, r.clone());
            }
            Line::Kernel(k) => self.processes.entry(k.pid).or_default().push(r.clone()),
            Line::Mapping(m) => self.processes.entry(m.pid).or_default().push(r.clone()),
            Line::Queue(q) => self.processes.entry(q.pid).or_default().push(r.clone()),
            Line::CodeDir(d) => self.processes.entry(d.pid).or_default().push(r.clone()),
            // An executable's kernels, read from the driver: its replays in later parts need them.
            Line::GraphExec(g) if g.outcome == super::schema::ExecOutcome::Named && !g.check => {
                self.processes.entry(g.pid).or_default().push(r.clone());
            }
            Line::Exit(e) => {
                self.processes.remove(&e.pid);
            }
            _ => {}
        }
    }

    fn records(&self) -> impl Iterator<Item = &Line> {
        self.global.iter().chain(self.processes.values().flatten())
    }
}

/// Compressed output is a sequence of zstd frames, one per flush and per MiB of lines between: a reader
/// decodes every complete frame of a file whose writer was killed, and a frame is written whole.
enum Sink {
    Plain(File),
    /// Each frame is compressed whole, from the buffer, by one compressor kept for the file: one pass over
    /// contiguous input, where a streaming encoder copied it into its own window first (15 % less of
    /// tracer's CPU at 60 000 launches/s, 2 interleaved rounds of 20 s, and slightly smaller files).
    Zstd {
        file: File,
        compressor: Box<zstd::bulk::Compressor<'static>>,
        frame: Vec<u8>,
    },
}

impl Sink {
    fn new(file: File, compress: bool) -> io::Result<Self> {
        Ok(if compress {
            Self::Zstd { file, compressor: Box::new(zstd::bulk::Compressor::new(ZSTD_LEVEL)?), frame: Vec::new() }
        } else {
            Self::Plain(file)
        })
    }

    const fn file(&self) -> &File {
        match self {
            Self::Plain(file) | Self::Zstd { file, .. } => file,
        }
    }

    /// How many bytes of lines the buffer gathers before they go out: a compressed frame holds at most
    /// this much (and ends at every flush besides).
    const fn gather(&self) -> usize {
        match self {
            Self::Plain(_) => 1 << 16,
            Self::Zstd { .. } => 1 << 20,
        }
    }
}

/// zstd's fastest level. On the stand-in launch loop at 60 000 launches/s (2 interleaved rounds of 20 s,
/// 1.2 M launch records each), level 1 took tracer 1.68 and 1.86 s of CPU against level 3's 2.00 and
/// 2.26 s, and its files came out smaller (6.1 MB against 6.7 MB): the records repeat in long runs, which
/// the fast strategy finds as well.
const ZSTD_LEVEL: i32 = 1;

impl Writer {
    /// `compress`: write zstd frames (used when the file name ends in `.zst`).
    pub fn new(file: File, compress: bool) -> Result<Self> {
        let out = Sink::new(file, compress)?;
        Ok(Self {
            out,
            buf: Vec::with_capacity(1 << 17),
            counts: BTreeMap::new(),
            launches: 0,
            tap: None,
            parts: None,
            written: 0,
            tails: super::scan::LaunchTails::default(),
            runs: None,
        })
    }

    /// A rotated recording: `file` is its first part (at `rotation.first`), `output` the `-o` name the
    /// parts are named after.
    pub(crate) fn rotating(file: File, compress: bool, rotation: Rotation, output: &Path) -> Result<Self> {
        let mut w = Self::new(file, compress)?;
        w.parts = Some(Parts {
            path: rotation.first.clone(),
            previous: None,
            rotation,
            output: output.to_path_buf(),
            compress,
            index: 0,
            name: 0,
            good: 0,
            names_taken: 0,
            removed: super::retention::Removed::default(),
            started: Instant::now(),
            header: None,
            restate: Restate::default(),
        });
        Ok(w)
    }

    /// Shows every record written from now on to `tap` too.
    pub(crate) fn set_tap(&mut self, tap: Box<dyn Tap>) {
        self.tap = Some(tap);
    }

    /// Writes a record. A launch that repeats the one some places before it on its thread joins a run
    /// (counted under `launch` all the same); the runs under way are written before any other line.
    pub fn write(&mut self, record: &Line) -> Result<()> {
        if let Line::Launch(_) = record {
            self.launches += 1;
        } else {
            *self.counts.entry(record.type_name()).or_default() += 1;
        }
        if let Some(tap) = &mut self.tap {
            tap.record(record);
        }
        match (record, self.runs.as_mut()) {
            (Line::Launch(l), Some(runs)) => {
                if runs.launch(l) {
                    return Ok(());
                }
                self.write_runs()?;
            }
            (Line::Header(h), _) if self.parts.as_ref().is_none_or(|p| p.header.is_none()) => {
                self.runs = h.options.repeats.then(super::runs::Collapse::default);
            }
            _ => self.write_runs()?,
        }
        if let Some(parts) = &mut self.parts {
            match record {
                Line::Header(h) if parts.header.is_none() => {
                    let mut first = (**h).clone();
                    first.part = Some(Part { index: 0, restated: 0 });
                    parts.header = Some(first.clone());
                    self.line(&Line::Header(Box::new(first)))?;
                    // A recording's start is a part's: a service restarted more often than it rotates prunes.
                    self.flush()?;
                    self.prune_parts();
                    return Ok(());
                }
                r => parts.restate.see(r),
            }
            self.line(record)?;
            // Past its size, a part ends after any record (its age is looked at with each flush).
            let full = parts_full(self.parts.as_ref(), self.written);
            return if full { self.rotate() } else { Ok(()) };
        }
        self.line(record)
    }

    /// A run the kernel counted, written as it came (one `repeat` line) where a reader's expansion gives the
    /// launches it stands for: the thread's last launches written are `sources`, those its launches copy
    /// (as attributed, oldest first). False (nothing written) otherwise, or when a tap takes launches one by
    /// one: the caller then writes its launches.
    pub(crate) fn pass_run(&mut self, r: &Repeat, sources: &[std::rc::Rc<Launch>]) -> Result<bool> {
        if self.tap.is_some() || !self.runs.as_mut().is_some_and(|runs| runs.can_pass(r, sources)) {
            return Ok(false);
        }
        self.write_runs()?;
        if let Some(runs) = self.runs.as_mut() {
            runs.passed(r);
        }
        self.launches += u64::from(r.count);
        *self.counts.entry("repeat").or_default() += 1;
        self.line(&Line::Repeat(r.clone()))?;
        Ok(true)
    }

    /// The runs under way, each as one `repeat` line.
    fn write_runs(&mut self) -> Result<()> {
        let Some(runs) = self.runs.as_mut().filter(|r| r.has_runs()) else { return Ok(()) };
        for r in runs.take_runs() {
            *self.counts.entry("repeat").or_default() += 1;
            self.line(&Line::Repeat(r))?;
        }
        Ok(())
    }

    /// One line into the buffer.
    fn line(&mut self, record: &Line) -> Result<()> {
        let before = self.buf.len();
        let spelled = match record {
            Line::Launch(l) => super::scan::spell_launch(l, &mut self.buf, &mut self.tails),
            Line::Call(c) => super::scan::spell_call(c, &mut self.buf),
            _ => false,
        };
        if !spelled {
            serde_json::to_writer(&mut self.buf, record)?;
        }
        self.buf.push(b'\n');
        self.written += (self.buf.len() - before) as u64;
        if self.buf.len() >= self.out.gather() {
            self.drain()?;
        }
        Ok(())
    }

    /// Whether the part being written has reached its size or age (a footer or a flush ends it).
    fn due(&self) -> bool {
        parts_full(self.parts.as_ref(), self.written)
            || self.parts.as_ref().is_some_and(|p| {
                p.header.is_some() && p.rotation.every.is_some_and(|every| p.started.elapsed() >= every)
            })
    }

    /// Ends the part being written (a footer saying `rotated`) and starts the next: header, then what it
    /// restates.
    fn rotate(&mut self) -> Result<()> {
        self.write_runs()?;
        let Some(parts) = self.parts.as_ref() else { return Ok(()) };
        let header = parts.header.clone().context("rotating before the header")?;
        let index = parts.index.checked_add(1).context("too many parts")?;
        // The part ends: its footer (counts so far; losses are in the last part's).
        let footer = Footer { records: self.footer_counts(), stop: Stop::Rotated, ..Footer::default() };
        self.line(&Line::Footer(footer))?;
        self.flush()?;
        self.sync()?;
        let (path, file) = self.next_part(index)?;
        let Some(parts) = self.parts.as_mut() else { return Ok(()) };
        parts.index = index;
        parts.previous = Some(std::mem::replace(&mut parts.path, path));
        parts.good = 0;
        parts.started = Instant::now();
        let restated: Vec<Line> = parts.restate.records().cloned().collect();
        self.out = Sink::new(file, parts.compress)?;
        self.written = 0;
        // A part reads alone: no run in it repeats launches of the part before.
        if let Some(runs) = self.runs.as_mut() {
            runs.clear();
        }
        let header = Header { part: Some(Part { index, restated: restated.len() as u64 }), ..header };
        self.line(&Line::Header(Box::new(header)))?;
        for r in &restated {
            self.line(r)?;
        }
        // A part's size counts its own records: what it restates could exceed any limit by itself.
        self.written = 0;
        self.flush()?;
        self.prune_parts();
        Ok(())
    }

    /// `--keep-size`, once a part has started: the oldest parts in its directory go while past the bound.
    fn prune_parts(&mut self) {
        if let Some(parts) = self.parts.as_mut()
            && let Some(keep) = parts.rotation.keep
        {
            super::retention::prune_beside(&parts.path, keep, &mut parts.removed);
        }
    }

    /// Creates the file of part `index` under the next free name: a name taken by a file or link already
    /// there (planted by another user) is skipped, said and counted.
    fn next_part(&mut self, index: u32) -> Result<(PathBuf, File)> {
        let parts = self.parts.as_mut().context("not a rotated recording")?;
        let previous = parts.path.display().to_string();
        let mut taken: Vec<PathBuf> = Vec::new();
        while taken.len() < MAX_NAMES_TAKEN {
            parts.name = parts.name.checked_add(1).context("too many parts")?;
            let path = Rotation::part_path(&parts.output, parts.name);
            match crate::os::output::create_part(&path, parts.rotation.force) {
                Ok(Some(file)) => {
                    if let Some(first) = taken.first() {
                        parts.names_taken += taken.len() as u64;
                        let what = match taken.len() {
                            1 => format!("{} is taken by a file or link already there", first.display()),
                            n => format!(
                                "the {n} names from {} on are taken by files or links already there",
                                first.display()
                            ),
                        };
                        warning!("{what}: part {index} is written to {}", path.display());
                    }
                    return Ok((path, file));
                }
                Ok(None) => taken.push(path),
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => bail!(
                    "the disk holding the trace is full: {} cannot be created, so the recording ends with {previous}; free space or record elsewhere with -o",
                    path.display()
                ),
                Err(e) => bail!(
                    "cannot create {} ({e}), so the recording ends with {previous}: record into a directory tracer can write",
                    path.display()
                ),
            }
        }
        bail!(
            "the next {MAX_NAMES_TAKEN} part names from {} are all taken by files or links already there, so the recording ends with {previous}: record into a directory only you can write",
            taken.first().map(|p| p.display().to_string()).unwrap_or_default()
        )
    }

    /// A write to the trace failed: a rotated recording's part is cut back to its last flush (every record
    /// before it complete), or removed when that leaves nothing; the error names it.
    fn fail(&self, e: io::Error) -> anyhow::Error {
        let Some(parts) = &self.parts else { return write_error(e) };
        let file = Some(self.out.file());
        let (why, remedy) = if e.raw_os_error() == Some(libc::ENOSPC) {
            ("the disk holding the trace is full".to_owned(), "free space or record elsewhere with -o")
        } else {
            (format!("writing the trace failed ({e})"), "record elsewhere with -o")
        };
        let shown = parts.path.display();
        let cut = file.is_some_and(|f| f.set_len(parts.good).is_ok());
        // Removed only while the name is still this file's.
        let ours = file.and_then(|f| f.metadata().ok()).is_some_and(|m| {
            std::fs::symlink_metadata(&parts.path).is_ok_and(|at| (at.dev(), at.ino()) == (m.dev(), m.ino()))
        });
        if cut && parts.good == 0 && ours && std::fs::remove_file(&parts.path).is_ok() {
            let before = parts.previous.as_ref().map_or_else(String::new, |p| format!(" with {}", p.display()));
            return anyhow!(
                "{why}: part {} could not be written and {shown} was removed, so the recording ends{before}; {remedy}",
                parts.index
            );
        }
        anyhow!("{why}: the recording ends in {shown}, which keeps every record written before; {remedy}")
    }

    /// Lines written so far, by type.
    pub(crate) fn counts(&self) -> BTreeMap<&'static str, u64> {
        let mut counts = self.counts.clone();
        if self.launches > 0 {
            counts.insert("launch", self.launches);
        }
        counts
    }

    /// The counts as a footer holds them.
    fn footer_counts(&self) -> BTreeMap<String, u64> {
        self.counts().into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
    }

    fn drain(&mut self) -> Result<()> {
        self.drain_io().map_err(|e| self.fail(e))
    }

    fn drain_io(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        match &mut self.out {
            Sink::Plain(f) => f.write_all(&self.buf)?,
            Sink::Zstd { file, compressor, frame } => {
                frame.clear();
                frame.reserve(zstd::zstd_safe::compress_bound(self.buf.len()));
                compressor.compress_to_buffer(&self.buf, frame)?;
                file.write_all(frame)?;
            }
        }
        self.buf.clear();
        Ok(())
    }

    /// Makes everything written so far readable, and starts the next part of a rotated recording when
    /// this one has reached its size or age.
    pub(crate) fn flush_and_rotate(&mut self) -> Result<()> {
        self.flush()?;
        if self.due() { self.rotate() } else { Ok(()) }
    }

    /// Makes everything written so far readable from the file, even if the tracer dies next.
    pub(crate) fn flush(&mut self) -> Result<()> {
        self.write_runs()?;
        self.flush_io().map_err(|e| self.fail(e))?;
        // Where a part is cut back to if a later write fails.
        let mut file = self.out.file();
        if let Some(parts) = self.parts.as_mut()
            && let Ok(at) = file.stream_position()
        {
            parts.good = at;
        }
        Ok(())
    }

    fn flush_io(&mut self) -> io::Result<()> {
        // The lines gathered become a frame of their own (a compressed file), written whole.
        self.drain_io()?;
        self.out.file().flush()
    }

    /// Writes the footer, ends the stream and syncs the file. A rotated recording's footer counts the parts
    /// removed (bytes with them) and part names found taken, if any; a tap (`tracer top`) sees the footer too.
    pub fn finish(mut self, mut footer: Footer) -> Result<()> {
        self.write_runs()?;
        footer.records = self.footer_counts();
        if let Some(p) = &self.parts {
            let mut counts = Counts::default();
            counts.set_nonzero(Counted::PartsRemovedByKeepSize, p.removed.parts);
            counts.set_nonzero(Counted::PartsRemovedBytes, p.removed.bytes);
            counts.set_nonzero(Counted::RotationNamesTaken, p.names_taken);
            footer.counters.extend(counts.named());
        }
        if let Some(tap) = &mut self.tap {
            tap.record(&Line::Footer(footer.clone()));
        }
        self.line(&Line::Footer(footer))?;
        self.flush()?;
        self.sync()
    }

    /// Syncs the file being written.
    fn sync(&self) -> Result<()> {
        let file = self.out.file();
        // A file is synced; a pipe or terminal (`-o -`) has nothing to sync (fsync says EINVAL there).
        if file.metadata().is_ok_and(|m| m.is_file()) {
            file.sync_all().map_err(|e| self.fail(e))?;
        }
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
