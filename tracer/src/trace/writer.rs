//! The trace writer: JSON Lines, one [`Record`] per line, optionally zstd-compressed.
//!
//! A header comes first, then events in the order they were seen, then a footer with counts and losses.
//! The writer flushes often (and closes the zstd block each time), so a tracer killed mid-recording
//! leaves a file whose every complete record reads back.

use std::{
    collections::BTreeMap,
    fs::File,
    io::{self, Write as _},
};

use anyhow::{Context as _, Result};

use super::schema::{Footer, Record};

/// Writes records to a file, batching lines and counting them by type.
pub struct Writer {
    out: Sink,
    buf: Vec<u8>,
    counts: BTreeMap<String, u64>,
    tap: Option<Box<dyn Tap>>,
}

/// Sees every record written, in order (a recording's live metrics).
pub trait Tap: Send {
    fn record(&mut self, record: &Record);
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
        Ok(Self { out, buf: Vec::with_capacity(1 << 17), counts: BTreeMap::new(), tap: None })
    }

    /// Shows every record written from now on to `tap` too.
    pub fn set_tap(&mut self, tap: Box<dyn Tap>) {
        self.tap = Some(tap);
    }

    pub fn write(&mut self, record: &Record) -> Result<()> {
        *self.counts.entry(record.type_name().to_owned()).or_default() += 1;
        if let Some(tap) = &mut self.tap {
            tap.record(record);
        }
        serde_json::to_writer(&mut self.buf, record)?;
        self.buf.push(b'\n');
        if self.buf.len() >= 1 << 16 {
            self.drain()?;
        }
        Ok(())
    }

    pub const fn counts(&self) -> &BTreeMap<String, u64> {
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
        // A file is synced; a pipe or terminal (`-o -`) has nothing to sync (fsync says EINVAL there).
        if file.metadata().is_ok_and(|m| m.is_file()) {
            file.sync_all().map_err(write_error)?;
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
