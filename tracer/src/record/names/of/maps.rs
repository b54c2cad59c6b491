//! A process's file mappings as its naming reads and holds them: the snapshot taken (and taken again when
//! an address is not in it), the files behind them opened once ([`crate::record::names::maps`]).

use crate::trace::counted::Counted;
use std::sync::Arc;

use crate::{
    os::files::CodeFile,
    record::names::{
        Of, ProcessNames,
        budget::{self, MAX_UNNAMED_PER_PROCESS},
        maps::{HeldMappings, MAX_OPEN_FILES, Mapping, Snapshot, mappings, refusal},
    },
};

impl Of<'_> {
    /// Reads the process's file mappings now, so that its handles can still be named after it exits (the
    /// reader may decode a launch after its process is gone), and opens each file it maps not opened yet.
    pub(crate) fn snapshot(&mut self) {
        use crate::os::proc::Procs as _;
        self.snapshot_from(crate::os::proc::LIVE.maps(self.pid));
    }

    /// [`Of::snapshot`] from a listing of the process's maps read just now (None: it could not be read).
    pub(crate) fn snapshot_from(&mut self, listing: Option<Vec<crate::os::proc::MapsEntry>>) {
        let taken = crate::os::clock::monotonic_ns();
        // A process that has exited but is not reaped yet shows empty maps: keep what was seen before.
        let Some(maps) = listing.map(mappings).filter(|m| !m.is_empty()) else {
            self.proc.gone = true;
            // Ended before this look: the early look at this image, if newer than what was seen (its files
            // could not be opened any more: they count as unopened).
            let early = self.names.early.as_ref().and_then(|e| e.take(self.pid, self.proc.since));
            if let Some(look) = early.filter(|l| self.proc.maps.as_ref().is_none_or(|s| l.taken > s.taken)) {
                self.names.count(Counted::MapsFromEarlyLook);
                for m in &look.maps {
                    // The files the early look opened while the process lived; the others cannot be
                    // opened any more.
                    if !self.names.files.contains_key(&m.file) {
                        let opened = self.names.early.as_ref().and_then(|e| e.take_file(m.file));
                        if opened.is_none() {
                            self.names.count(Counted::FilesUnopened);
                        }
                        self.names.files.insert(m.file, opened);
                    }
                }
                self.proc.maps = Some(look);
            }
            return;
        };
        if let Some(e) = &self.names.early {
            e.forget(self.pid);
        }
        for m in &maps {
            if self.names.files.contains_key(&m.file) {
                continue;
            }
            if self.names.files.len() >= MAX_OPEN_FILES {
                self.names.count(Counted::FilesNotOpenedLimit);
                continue;
            }
            let early = self.names.early.as_ref().and_then(|e| e.take_file(m.file));
            let opened = match early.map_or_else(|| m.open(self.pid).map(Arc::new), Ok) {
                Ok(f) => Some(f),
                Err(e) => {
                    self.names.count(refusal(&e));
                    None
                }
            };
            self.names.files.insert(m.file, opened);
        }
        self.proc.maps = Some(Snapshot { taken, maps });
    }

    /// The file mappings of the last snapshot (taken now if there is none).
    pub(in crate::record::names) fn mappings(&mut self) -> &[Mapping] {
        if self.proc.maps.is_none() {
            self.snapshot();
        }
        self.proc.maps.as_ref().map_or(&[], |s| s.maps.as_slice())
    }

    /// The file mappings naming holds of the process (read now if it has none), each with its file as
    /// opened (None: not opened). For a process that has ended: its last look taken while it lived,
    /// naming's own or the early look's.
    pub(crate) fn held_mappings(&mut self) -> HeldMappings {
        self.mappings();
        let Some(snapshot) = &self.proc.maps else { return Vec::new() };
        snapshot
            .maps
            .iter()
            .map(|m| {
                let entry = crate::os::proc::MapsEntry {
                    start: m.start,
                    end: m.end,
                    offset: m.offset,
                    dev: m.file.0,
                    inode: m.file.1,
                    path: m.path.clone(),
                };
                (entry, self.names.files.get(&m.file).cloned().flatten())
            })
            .collect()
    }

    /// The file behind a mapping, as opened when its process was looked at.
    pub(in crate::record::names) fn file(&self, m: &Mapping) -> Option<Arc<CodeFile>> {
        self.names.files.get(&m.file).cloned().flatten()
    }

    /// The file and offset an address of the process falls in, from its maps snapshot.
    pub(crate) fn file_of(&mut self, addr: u64, ts: u64) -> Option<(String, u64)> {
        let m = self.mapping_at(addr, ts)?;
        Some((m.path.clone(), m.file_offset(addr)))
    }

    /// The file mapping of the process that held `addr` at time `ts`: from the snapshot, read again when
    /// it was taken before `ts` (it may not cover the address, the process having mapped something since,
    /// or hold another file there by then: the dynamic loader maps and unmaps its cache and libraries at
    /// the same addresses). A snapshot taken after `ts` that covers
    /// no mapping there is the answer: nothing was mapped there at `ts` that a read now would show (a
    /// process inventing addresses made tracer read its maps once for each, one system call and a lock of
    /// its address space per launch). A process that has ended keeps its last snapshot.
    pub(in crate::record::names) fn mapping_at(&mut self, addr: u64, ts: u64) -> Option<&Mapping> {
        let covered = |p: &ProcessNames| p.maps.as_ref().is_some_and(|s| s.maps.iter().any(|m| m.holds(addr)));
        let fresh = |p: &ProcessNames| p.maps.as_ref().is_some_and(|s| s.taken >= ts);
        if !(covered(self.proc) && fresh(self.proc)) {
            if fresh(self.proc) {
                return None;
            }
            // An address seen outside every file mapping (a heap handle) is not looked for again: a maps
            // read per launch would stall the target (it takes the target's mmap lock).
            if self.proc.outside_files.contains(&addr) {
                return None;
            }
            // Nor past as many such addresses as unnamed handles are held, in the process or for its user
            // (or the recording): a process inventing addresses would make tracer read its maps once for
            // each.
            if self.proc.outside_files.len() >= MAX_UNNAMED_PER_PROCESS {
                self.names.count(Counted::MapsReadsOverLimit);
                return None;
            }
            if !self.charge().room(budget::Kind::Outside) {
                self.names.count(Counted::MapsReadsOverLimit);
                return None;
            }
            // An ended process is looked at again only while nothing is held of it: the early look may
            // come later than the first look that found it ended (the library watch's, at its exec).
            if !self.proc.gone || self.proc.maps.is_none() {
                self.snapshot();
            }
            if !covered(self.proc) {
                if fresh(self.proc) && self.proc.outside_files.insert(addr) {
                    self.charge().add(budget::Kind::Outside);
                }
                return None;
            }
        }
        self.proc.maps.as_ref()?.maps.iter().find(|m| m.holds(addr))
    }
}
