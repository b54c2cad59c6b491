//! The trace reader: every complete record of a file, plain or zstd (detected by its magic bytes), in
//! order, and how the file ended. A file cut at any byte reads up to its last complete record.

use std::{
    collections::BTreeMap,
    fs::File,
    io::{self, BufRead as _, BufReader, Read},
    path::Path,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
        mpsc,
    },
};

use anyhow::{Context as _, Result, bail};

pub(crate) use super::runs::RepeatsCut;
use super::{
    runs::{Bound, Expand, Unexpandable},
    schema::{FORMAT, Header, KNOWN_TYPES, Line, SCHEMA},
};

/// A line longer than this is not a record: the reader stops there instead of buffering without bound.
pub(crate) const MAX_LINE: usize = 1 << 20;

/// More blank lines than this in a row are not a trace.
///
/// Blank: empty or whitespace-only; more than [`MAX_LINE`] bytes of them in a row are refused too. The
/// reader stops there instead of reading a file of newlines (a few KiB compressed, gigabytes
/// decompressed) to its end.
pub(crate) const MAX_BLANK_LINES: u64 = 1024;

pub(super) const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// What reading a trace found besides its records.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ReadStatus {
    /// Bytes after the last complete record (a recording that was killed).
    pub cut_bytes: u64,
    /// The compressed stream ended in the middle of a frame.
    pub stream_cut: bool,
    /// Whether the file has its footer (false: the recording did not end normally).
    pub has_footer: bool,
    /// Records of a type this reader does not know (written by a newer tracer), skipped.
    pub unknown_records: u64,
    /// Records of a known type this reader cannot take (a field of another shape, a value no build
    /// wrote), skipped; the first one's line and why.
    pub unreadable_records: u64,
    pub first_unreadable: Option<String>,
    /// Complete lines read, and their bytes (decompressed).
    pub lines: u64,
    pub bytes: u64,
    /// For the parts of a rotated recording: the part whose ending this status tells (named in the warning).
    pub part: Option<String>,
    /// What reading the parts of a rotated recording found besides their records, one sentence each: files
    /// skipped, parts missing after the last one read, a part before the last that was cut.
    pub notes: Vec<String>,
    /// Launches that `repeat` lines stand for past what a file of its size may ([`super::runs::Bound`]):
    /// not made, counted.
    pub(crate) repeats_cut: RepeatsCut,
}

impl ReadStatus {
    /// One sentence for the user when the file was not closed normally, else None.
    pub fn warning(&self) -> Option<String> {
        if self.has_footer && self.cut_bytes == 0 && !self.stream_cut {
            return None;
        }
        let why = if self.stream_cut {
            let cut_record = if self.cut_bytes > 0 {
                format!(", and the {} bytes of the record it cuts ignored", self.cut_bytes)
            } else {
                String::new()
            };
            format!(
                "the file is cut in the middle of a compressed frame: the {} complete lines before the cut ({} bytes decompressed) were read{cut_record}",
                self.lines, self.bytes
            )
        } else if self.cut_bytes > 0 {
            format!("{} bytes after the last complete record were ignored", self.cut_bytes)
        } else {
            "it has no footer, so the recording was cut short there, and its losses after its last checkpoint (one a second) are unknown".to_owned()
        };
        let what = self.part.as_deref().unwrap_or("the trace");
        Some(format!("{what} was not closed normally (the tracer was killed, or its disk filled?): {why}"))
    }

    /// Every sentence the user should read about the input: [`Self::warning`], then the notes.
    pub(crate) fn warnings(&self) -> Vec<String> {
        self.warning().into_iter().chain(self.notes.iter().cloned()).chain(self.repeats_cut.sentence()).collect()
    }
}

/// Reads a whole trace file: every complete record, and how the file ended.
pub fn read_file(path: &Path) -> Result<(Vec<Line>, ReadStatus)> {
    let mut records = Vec::new();
    let status = for_each_record(path, |r| records.push(r))?;
    Ok((records, status))
}

/// Streams a trace file (plain or zstd, detected by its magic bytes) through `each`.
pub(crate) fn for_each_record(path: &Path, each: impl FnMut(Line)) -> Result<ReadStatus> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    read_from(file, path, each)
}

/// Streams trace bytes from any reader (plain or zstd, detected by the magic bytes) through `each`;
/// `path` names the source in errors.
pub fn read_from(input: impl Read + Send, path: &Path, each: impl FnMut(Line)) -> Result<ReadStatus> {
    let stored = Arc::new(AtomicU64::new(0));
    let mut input = Counted { inner: input, n: Arc::clone(&stored) };
    let mut magic = [0u8; 4];
    let n = read_up_to(&mut input, &mut magic)?;
    let head = io::Cursor::new(magic[..n].to_vec());
    if n == 4 && magic == ZSTD_MAGIC {
        read_records(zstd::Decoder::new(head.chain(input))?, path, &stored, each)
    } else {
        read_records(head.chain(input), path, &stored, each)
    }
}

/// A reader that counts the bytes it gives: the file's bytes as stored, read so far.
struct Counted<R> {
    inner: R,
    n: Arc<AtomicU64>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let got = self.inner.read(buf)?;
        self.n.fetch_add(u64::try_from(got).unwrap_or(u64::MAX), Ordering::Relaxed);
        Ok(got)
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

/// The header of a trace file (its first line), read alone.
pub(super) fn header_of(path: &Path) -> Result<Header> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut magic = [0u8; 4];
    let mut head = BufReader::new(file);
    let n = head.fill_buf().map(|b| b.len().min(4))?;
    magic[..n].copy_from_slice(&head.buffer()[..n]);
    let input: Box<dyn Read> = if magic == ZSTD_MAGIC { Box::new(zstd::Decoder::new(head)?) } else { Box::new(head) };
    let mut line = Vec::new();
    BufReader::new(input.take(MAX_LINE as u64)).read_until(b'\n', &mut line)?;
    match serde_json::from_slice::<Line>(&line) {
        Ok(Line::Header(h)) => Ok(*h),
        _ => bail!("{}", super::scan::not_a_header(path, line.strip_suffix(b"\n").unwrap_or(&line))),
    }
}

/// Reads records from a line stream, calling `each` for every one, in order, after validating the header.
///
/// `stored` counts the bytes of the file as stored read so far (the reading thread stamps each chunk with it):
/// it bounds the launches its `repeat` lines are expanded into ([`Bound`]).
pub(crate) fn read_records(
    input: impl Read + Send,
    path: &Path,
    stored: &AtomicU64,
    mut each: impl FnMut(Line),
) -> Result<ReadStatus> {
    // Three stages on their own threads: cut the (decompressed) bytes into chunks of whole lines, parse
    // them (two workers), then, here, check and hand over the records in file order. A chunk is one
    // buffer: no allocation or copy per line, and a blank line costs no parsed entry.
    const WORKERS: usize = 2;
    std::thread::scope(|scope| {
        let (chunk_tx, chunk_rx) = mpsc::sync_channel::<Chunk>(2 * WORKERS);
        let (rec_tx, rec_rx) = mpsc::sync_channel::<Batch>(2 * WORKERS);
        let reader = scope.spawn(move || split_chunks(input, (path, stored), chunk_tx));
        let chunk_rx = Arc::new(Mutex::new(chunk_rx));
        for _ in 0..WORKERS {
            let rx = Arc::clone(&chunk_rx);
            let tx = rec_tx.clone();
            scope.spawn(move || {
                loop {
                    let Ok(guard) = rx.lock() else { return };
                    let next = guard.recv();
                    drop(guard);
                    let Ok(chunk) = next else { return };
                    if tx.send(parse_chunk(&chunk)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(rec_tx);
        let mut status = ReadStatus::default();
        let mut pending = BTreeMap::new();
        let mut next_seq = 0u64;
        let mut runs = Runs::default();
        for batch in rec_rx {
            pending.insert(batch.seq, batch);
            while let Some(batch) = pending.remove(&next_seq) {
                next_seq += 1;
                hand_over(batch, path, (&mut status, &mut runs), &mut each)?;
            }
        }
        status.repeats_cut = runs.bound.finish(stored.load(Ordering::Relaxed));
        let tail = reader.join().map_err(|panic| anyhow::anyhow!("the trace reader thread failed: {panic:?}"))??;
        status.cut_bytes = tail.cut_bytes;
        status.stream_cut = tail.stream_cut;
        status.bytes = tail.bytes;
        if status.lines == 0 && status.cut_bytes == 0 {
            bail!("{} is empty: it holds no trace (record one with `tracer record -o FILE`)", path.display());
        }
        if status.lines == 0 {
            bail!(
                "{} holds no complete record: it is not a tracer trace, or was cut before its header",
                path.display()
            );
        }
        Ok(status)
    })
}

/// What expanding `repeat` lines keeps: each thread's last launches, kept where the header says the file
/// has runs, and the launches made so far against the file's allowance.
#[derive(Default)]
struct Runs {
    expand: Option<Expand>,
    bound: Bound,
}

/// A parsed chunk's records handed over in order: the first line must be a header; unknown and unreadable
/// records are counted, a corrupted one ends the reading. A `repeat` line is handed over, then the launches
/// it stands for, within the file's allowance ([`Bound`]).
fn hand_over(
    batch: Batch,
    path: &Path,
    (status, runs): (&mut ReadStatus, &mut Runs),
    each: &mut impl FnMut(Line),
) -> Result<()> {
    status.lines = batch.last_line;
    for (lineno, parsed) in batch.parsed {
        let record = match parsed {
            Parsed::Line(r) => r,
            Parsed::Unknown | Parsed::Bad(_) | Parsed::Blank | Parsed::Unreadable(_) if lineno == 1 => {
                bail!("{}", super::scan::not_a_header(path, batch.first_bytes.as_deref().unwrap_or_default()))
            }
            Parsed::Unknown => {
                status.unknown_records += 1;
                continue;
            }
            Parsed::Blank => continue,
            Parsed::Unreadable(e) => {
                status.unreadable_records += 1;
                if status.first_unreadable.is_none() {
                    status.first_unreadable = Some(format!("line {lineno}: {e}"));
                }
                continue;
            }
            Parsed::Bad(e) => {
                bail!("{}: line {lineno} is not a valid trace record ({e}); the file is corrupted", path.display())
            }
        };
        if lineno == 1 {
            check_header(&record, path)?;
            if let Line::Header(h) = &record {
                runs.expand = h.options.repeats.then(Expand::default);
            }
        } else if matches!(record, Line::Header(_)) {
            bail!(
                "{}: line {lineno} is a second tracer header: two traces joined into one file (as `cat a b` makes) are not one recording; give each trace alone, or a rotated recording's parts as files",
                path.display()
            );
        }
        match (&record, runs.expand.as_mut()) {
            (Line::Footer(_), _) => status.has_footer = true,
            (Line::Launch(l), Some(expand)) => expand.launch(l),
            (Line::Repeat(r), expand) => {
                // Checked whole before anything is handed over: the line, then its launches as they are made.
                let r = r.clone();
                match expand.ok_or(Unexpandable::NoHistory).and_then(|e| e.history_for(&r)) {
                    Ok(history) => {
                        each(record);
                        runs.bound.expand((&r, lineno), history, batch.stored, |l| each(Line::Launch(l.clone())));
                    }
                    Err(e) => {
                        status.unreadable_records += 1;
                        if status.first_unreadable.is_none() {
                            status.first_unreadable = Some(format!("line {lineno}: {e}"));
                        }
                    }
                }
                continue;
            }
            _ => {}
        }
        each(record);
    }
    Ok(())
}

/// A chunk's lines parsed: the blank ones left out, but for the file's first line (which must be the
/// header).
struct Batch {
    seq: u64,
    /// The number of the chunk's last line.
    last_line: u64,
    /// (line number, what it holds).
    parsed: Vec<(u64, Parsed)>,
    /// The file's bytes as stored, read when the chunk was cut.
    stored: u64,
    /// The file's first line, where it is in this chunk and is not a record (to say why).
    first_bytes: Option<Vec<u8>>,
}

fn parse_chunk(chunk: &Chunk) -> Batch {
    let mut parsed = Vec::new();
    let mut first_bytes = None;
    let mut start = 0;
    let mut lineno = chunk.first_line;
    for end in memchr::memchr_iter(b'\n', &chunk.bytes) {
        let line = &chunk.bytes[start..end];
        start = end + 1;
        if lineno == 1 || !is_blank(line) {
            let p = parse_line(line);
            if lineno == 1 && !matches!(p, Parsed::Line(_)) {
                first_bytes = Some(line.to_vec());
            }
            parsed.push((lineno, p));
        }
        lineno += 1;
    }
    Batch { seq: chunk.seq, last_line: lineno - 1, parsed, stored: chunk.stored, first_bytes }
}

/// An empty line, or one of whitespace only.
fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

/// Whole lines, each ending in a newline, in one buffer.
struct Chunk {
    /// The chunk's place in the file (records are handed over in this order).
    seq: u64,
    /// The number of its first line (from 1).
    first_line: u64,
    bytes: Vec<u8>,
    /// The file's bytes as stored, read when the chunk was cut.
    stored: u64,
}

enum Parsed {
    Line(Line),
    /// A record type this reader does not know.
    Unknown,
    /// A record of a known type this reader cannot take: skipped and counted.
    Unreadable(serde_json::Error),
    /// An empty line (or one of spaces): nothing to read.
    Blank,
    /// Not JSON, or not a record: the file is corrupted.
    Bad(serde_json::Error),
}

fn parse_line(line: &[u8]) -> Parsed {
    if is_blank(line) {
        return Parsed::Blank;
    }
    match parse_record(line) {
        Ok(r) => Parsed::Line(r),
        Err(e) => {
            // A record type from a newer tracer, or a record naming an API function this build does not
            // know, is skipped and counted as unknown; a record of a known type this build cannot take (a
            // field of another shape, a second `type`, a string that is not valid JSON alone) is skipped
            // and counted as unreadable. A line that is not a JSON object with a type is corruption.
            let emptied = super::scan::bad_strings_emptied(line);
            match serde_json::from_slice::<serde_json::Value>(emptied.as_deref().unwrap_or(line)) {
                Ok(serde_json::Value::Object(obj)) => match obj.get("type") {
                    Some(serde_json::Value::String(t))
                        if !KNOWN_TYPES.contains(&t.as_str())
                            || e.to_string().contains(tracer_common::api::UNKNOWN_API) =>
                    {
                        Parsed::Unknown
                    }
                    Some(serde_json::Value::String(_)) => Parsed::Unreadable(e),
                    _ => Parsed::Bad(e),
                },
                _ => Parsed::Bad(e),
            }
        }
    }
}

fn check_header(record: &Line, path: &Path) -> Result<()> {
    match record {
        Line::Header(h) if h.format == FORMAT => {
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

/// Bytes read per chunk (less than [`MAX_LINE`], so only a chunk's first line, begun in the chunk
/// before, can be too long).
const CHUNK: usize = 256 << 10;

/// Cuts the input into chunks of whole lines (about [`CHUNK`] bytes each); returns how the input ended.
/// A line longer than [`MAX_LINE`], or a run of blank lines past [`MAX_BLANK_LINES`], ends the reading
/// with an error as soon as it is seen: no chunk holding it is parsed.
fn split_chunks(
    mut input: impl Read,
    (path, stored): (&Path, &AtomicU64),
    tx: mpsc::SyncSender<Chunk>,
) -> Result<ReadStatus> {
    let mut status = ReadStatus::default();
    let mut lines = 0u64;
    let mut seq = 0u64;
    // The blank lines just read, in a row: where the run began, how many, their bytes.
    let (mut blank_from, mut blank_lines, mut blank_bytes) = (0u64, 0u64, 0usize);
    // The bytes after the last newline so far: the start of a line that a later read completes.
    let mut carry: Vec<u8> = Vec::new();
    loop {
        let mut bytes = Vec::with_capacity(CHUNK + carry.len());
        bytes.append(&mut carry);
        let end = match (&mut input).take(CHUNK as u64).read_to_end(&mut bytes) {
            Ok(got) => got == 0,
            // A compressed stream that stops mid-frame: keep what was decoded.
            Err(e) if is_cut_stream(&e) && (lines > 0 || memchr::memchr(b'\n', &bytes).is_some()) => {
                status.stream_cut = true;
                true
            }
            Err(e) if lines == 0 => {
                bail!("{} is not a tracer trace file ({e}); record one with `tracer record -o FILE`", path.display())
            }
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let first_line_len = memchr::memchr(b'\n', &bytes).unwrap_or(bytes.len());
        if first_line_len > MAX_LINE {
            bail!("{}: line {} is longer than {MAX_LINE} bytes; this is not a tracer trace", path.display(), lines + 1)
        }
        if let Some(last) = memchr::memrchr(b'\n', &bytes) {
            carry = bytes.split_off(last + 1);
        } else {
            carry = std::mem::take(&mut bytes);
        }
        if !bytes.is_empty() {
            let first_line = lines + 1;
            let mut start = 0;
            for nl in memchr::memchr_iter(b'\n', &bytes) {
                lines += 1;
                let line = &bytes[start..nl];
                start = nl + 1;
                if !is_blank(line) {
                    blank_lines = 0;
                    blank_bytes = 0;
                    continue;
                }
                if blank_lines == 0 {
                    blank_from = lines;
                }
                blank_lines += 1;
                blank_bytes = blank_bytes.saturating_add(line.len());
                if blank_lines > MAX_BLANK_LINES || blank_bytes > MAX_LINE {
                    bail!(
                        "{}: more than {} in a row at line {blank_from}; this is not a tracer trace",
                        path.display(),
                        if blank_lines > MAX_BLANK_LINES {
                            format!("{MAX_BLANK_LINES} blank lines")
                        } else {
                            format!("{MAX_LINE} bytes of blank lines")
                        }
                    )
                }
            }
            status.bytes += bytes.len() as u64;
            let stored = stored.load(Ordering::Relaxed);
            if tx.send(Chunk { seq, first_line, bytes, stored }).is_err() {
                return Ok(status);
            }
            seq += 1;
        }
        if end {
            // A last line with no newline: a record cut by a killed writer.
            status.cut_bytes += carry.len() as u64;
            break;
        }
    }
    Ok(status)
}

/// Parses one line. Lines as the writer makes them start with their type, so the record is read straight
/// into its struct (the `type` key is ignored there); serde's tagged-enum path, which first buffers the
/// whole object, is kept for other spellings of the same JSON.
#[cfg(test)]
pub(super) fn parse_line_for_tests(line: &[u8]) -> serde_json::Result<Line> {
    parse_record(line)
}

fn parse_record(line: &[u8]) -> serde_json::Result<Line> {
    const PREFIX: &[u8] = b"{\"type\":\"";
    if let Some(rest) = line.strip_prefix(PREFIX)
        && let Some(end) = rest.iter().position(|&b| b == b'"')
    {
        let tag = &rest[..end];
        // The two records most of a trace is made of, scanned without serde where their line has the shape
        // this build writes.
        let scanned = match tag {
            b"launch" => super::scan::launch(line).map(Line::Launch),
            b"call" => super::scan::call(line).map(|c| Line::Call(Box::new(c))),
            _ => None,
        };
        if let Some(record) = scanned {
            return Ok(record);
        }
        // The scanner walks the writer's keys exactly; any other line may say a second `type`.
        if super::scan::second_type_key(line, PREFIX.len()) {
            return Err(super::scan::second_type_error());
        }
        if let Some(parsed) = Line::parse_as(tag, line) {
            return parsed;
        }
    }
    // Another spelling of the same JSON (its `type` not first), or a type this build does not know: serde's
    // tagged enum reads it, or says why not.
    if super::scan::second_type_key(line, 0) {
        return Err(super::scan::second_type_error());
    }
    serde_json::from_slice(line)
}

fn is_cut_stream(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::UnexpectedEof | io::ErrorKind::Other)
}
