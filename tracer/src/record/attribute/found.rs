//! What the probing side found ([`Found`]), said in the trace: attribution writes these lines as it writes
//! those of events, so that what the trace has said of a process (its [`super::process::Said`]) has one
//! owner, and the write side one producer of lines. What the library watch knows of a process
//! ([`Watched`]) is kept in the same entry, lent to the watch for each call that concerns the process.

use anyhow::Result;

use super::Attributor;
use crate::{
    os::proc::{LIVE, Procs as _},
    record::probes::{
        found::{Found, MappingsSaid},
        watch::Watched,
    },
    trace::{Line, Sink},
};

impl Attributor {
    /// Writes what was found to `sink`, in order: a process's mapping once per file (again once a copy said
    /// not probed is probed, or its initializer has superseded a late record).
    pub(crate) fn found(&mut self, found: impl IntoIterator<Item = Found>, sink: &mut impl Sink) -> Result<()> {
        for f in found {
            let line = match f {
                Found::Probed(library, probes) => {
                    sink.line(&Line::Library(library))?;
                    for p in probes {
                        sink.line(&Line::Probe(p))?;
                    }
                    continue;
                }
                Found::Mapped(m) => {
                    // A process attribution no longer holds (none is looked at after its exit is taken):
                    // nothing said of it is known, so the mapping is written.
                    if self.live.get_mut(&m.pid).is_some_and(|p| !p.said.first_mapping(&m)) {
                        continue;
                    }
                    Line::Mapping(m)
                }
                Found::Unsaid { pid, file } => {
                    if let Some(p) = self.live.get_mut(&pid) {
                        p.said.unsay_mapping(file);
                    }
                    continue;
                }
                Found::Counting(e) => Line::EntryLibrary(e),
                Found::Steps(s) => Line::StepCalls(s),
                Found::Calls(c) => Line::EntryCalls(c),
                Found::Tally(t) => Line::Tally(t),
                Found::Exit(e) => Line::Exit(e),
            };
            sink.line(&line)?;
        }
        Ok(())
    }

    /// What the library watch knows of a process, for a call that concerns it: a process that exited
    /// keeps it until the watch lets go ([`Self::let_go_watched`]); a process attribution has not met yet
    /// gets its entry now (a look at a child whose fork the ring has not brought yet).
    pub(crate) fn watched(&mut self, pid: u32) -> &mut Watched {
        self.lend(pid).0
    }

    /// [`Self::watched`], with what the trace has said of the process's mappings (None for one that exited:
    /// nothing more is said of it), for a look at its maps.
    pub(crate) fn lend(&mut self, pid: u32) -> (&mut Watched, Option<&dyn MappingsSaid>) {
        if !self.live.contains_key(&pid)
            && let Some(w) = self.leaving.get_mut(&pid)
        {
            return (w.get_or_insert_with(Watched::default), None);
        }
        let p = self.live.entry(pid).or_default();
        (p.watched.get_or_insert_with(Watched::default), Some(&p.said))
    }

    /// The watch lets go of a process (it exited, or left the recording alive): what it knew, given back
    /// (None: it never looked at it).
    pub(crate) fn let_go_watched(&mut self, pid: u32) -> Option<Watched> {
        match self.leaving.remove(&pid) {
            Some(exited) => exited,
            None => self.live.get_mut(&pid)?.watched.take(),
        }
    }

    /// Whether the watch still holds something of a process.
    pub(super) fn watch_holds(&self, pid: u32) -> bool {
        self.leaving.get(&pid).is_some_and(Option::is_some) || self.live.get(&pid).is_some_and(|p| p.watched.is_some())
    }

    /// The ring is about to be read a last time: the processes that have ended by now have their exits in
    /// it, so the watch must hold none of them once it is read (footer `processes_held_after_exit`). A
    /// process that ends after this is not among them: its exit is never read.
    pub(crate) fn stopping(&mut self) {
        let leaving = self.leaving.iter().filter(|(_, w)| w.is_some()).map(|(pid, _)| *pid);
        let live = self.live.iter().filter(|(_, p)| p.watched.is_some()).map(|(pid, _)| *pid);
        self.ended_at_stop = Some(leaving.chain(live).filter(|&pid| !LIVE.is_running(pid)).collect());
    }
}
