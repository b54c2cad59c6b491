//! A process's file mappings, read from `/proc/PID/maps` and kept as a snapshot with the time it was
//! taken; the files behind them opened once (through the process's `map_files`, checked to be the
//! regular file mapped) and shared by every process that maps them. Read and kept for one process by its
//! naming: `of/maps.rs`.

use crate::trace::counted::Counted;
use std::sync::Arc;

use crate::os::files::{CodeFile, FileError};

/// A file, by (device, inode): the same file for every process that maps it.
pub(super) type FileId = (u64, u64);

/// A process's file mappings as naming holds them, each with its file as opened (None: not opened).
pub(crate) type HeldMappings = Vec<(crate::os::proc::MapsEntry, Option<Arc<CodeFile>>)>;

/// Files kept open for naming (one descriptor each, shared by every process that maps the file).
pub(super) const MAX_OPEN_FILES: usize = 4096;

/// A process's file mappings, and when they were read.
#[derive(Debug)]
pub(super) struct Snapshot {
    /// `CLOCK_MONOTONIC` when they were read: they hold for events up to then.
    pub(super) taken: u64,
    pub(super) maps: Vec<Mapping>,
}

/// One file mapping of a process.
#[derive(Clone, Debug)]
pub(super) struct Mapping {
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) offset: u64,
    pub(super) file: FileId,
    /// The path as the process sees it.
    pub(super) path: String,
}

impl Mapping {
    pub(super) const fn holds(&self, addr: u64) -> bool {
        addr >= self.start && addr < self.end
    }

    /// The file it maps, opened through the process's `map_files` and checked to be that file.
    pub(super) fn open(&self, pid: u32) -> crate::os::files::Result<CodeFile> {
        CodeFile::mapped(pid, self.start, self.end, self.file.0, self.file.1, &self.path)
    }

    /// The file offset of an address it holds.
    pub(super) const fn file_offset(&self, addr: u64) -> u64 {
        addr - self.start + self.offset
    }
}

pub(super) fn read_mappings(pid: u32) -> Option<Vec<Mapping>> {
    use crate::os::proc::Procs as _;
    crate::os::proc::LIVE.maps(pid).map(mappings)
}

/// The file mappings of a maps listing.
pub(super) fn mappings(maps: Vec<crate::os::proc::MapsEntry>) -> Vec<Mapping> {
    maps.into_iter()
        .map(|e| Mapping { start: e.start, end: e.end, offset: e.offset, file: (e.dev, e.inode), path: e.path })
        .collect()
}

/// The footer counter for a file tracer did not read.
pub(super) fn refusal(e: &FileError) -> Counted {
    match e.cause() {
        "not_regular" => Counted::FilesRefusedNotRegular,
        "changed" => Counted::FilesRefusedChanged,
        "out_of_bounds" => Counted::FilesRefusedOutOfBounds,
        "too_big" => Counted::FilesRefusedTooBig,
        "open_failed" => Counted::FilesUnopened,
        "fuse" => Counted::FilesRefusedFuse,
        _ => Counted::FilesUnreadable,
    }
}
