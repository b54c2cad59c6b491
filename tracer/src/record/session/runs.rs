//! The runs of repeated launches the kernel holds: those still under way at the end of the recording are
//! read from its map and written (each is the last of its thread's launches: any later record of the thread
//! would have written it); a process leaving the filter has its threads' entries taken.

use anyhow::Result;

use super::Session;
use crate::{
    record::intake::decode::Event,
    trace::{Line, Repeat},
};

impl Session<'_> {
    /// Writes the runs under way in the kernel's map, after the ring's last read.
    pub(super) fn runs_under_way(&mut self) -> Result<()> {
        let mut under_way: Vec<Repeat> = self
            .runs
            .iter()
            .filter_map(Result::ok)
            .filter(|(_, r)| r.count > 0)
            .map(|(pid_tgid, r)| Repeat {
                ts: r.first_ns,
                pid: (pid_tgid >> 32) as u32,
                tid: pid_tgid as u32,
                last_ts: r.last_ns,
                count: u32::try_from(r.count).unwrap_or(u32::MAX),
                period: u32::try_from(r.period).unwrap_or(u32::MAX),
                dur: r.dur_ns,
            })
            .collect();
        under_way.sort_by_key(|r| r.ts);
        let mut out = Vec::new();
        for r in under_way {
            self.attribute(Event::Repeat(r), &mut out)?;
        }
        Ok(())
    }

    /// Attributes an event and writes its lines (`out`: an empty buffer, left empty); a run's launches
    /// part by part, each part written before the next is made.
    pub(super) fn attribute(&mut self, ev: Event, out: &mut Vec<Line>) -> Result<()> {
        // A run whose copies would be attributed as the launches they copy, which the writer just wrote
        // for its thread: written as the kernel counted it (one line, no launch made).
        if let Event::Repeat(r) = &ev
            && let Some(sources) = self.attr.passable(r)
            && self.writer.pass_run(r, &sources)?
        {
            self.attr.passed(r);
            return Ok(());
        }
        self.attr.event(ev, out);
        loop {
            for line in out.drain(..) {
                self.writer.write(&line)?;
            }
            if !self.attr.expand_more(out) {
                return Ok(());
            }
        }
    }

    /// Takes the run entries of a process leaving the filter alive: a live entry lets its launches skip the
    /// filter. A run under way there (none is expected: a process leaves alive only when it is an `ollama`
    /// command other than a server, which launches nothing) is counted lost with its launches.
    pub(super) fn forget_runs(&mut self, pid: u32) {
        // By key first: an entry is 36 KiB, read only for the process's own threads.
        let mine: Vec<u64> = self.runs.keys().filter_map(Result::ok).filter(|k| (k >> 32) as u32 == pid).collect();
        for key in mine {
            let count = self.runs.get(&key, 0).map_or(0, |r| r.count);
            drop(self.runs.remove(&key));
            if count > 0 {
                *self.attr.counters.entry("launches_in_repeats_lost".to_owned()).or_default() += count;
            }
        }
    }
}
