//! Runs of exact repeats the kernel counted. Where each copy would be attributed as the launch it copies
//! was (nothing its attribution reads has changed: [`Attributor::passable`](super::Attributor::passable)) and
//! the writer's last launches of the thread are those, the run is written as it came, one `repeat` line, and
//! its thread's history goes on as if its launches had been made ([`Attributor::passed`](super::Attributor::passed)):
//! no launch made, named or collapsed again (in the stand-in's steady decode, 18.1 -> 5.5 µs of tracer's CPU
//! a token). Otherwise it is expanded into the launches it stands for, copies of the thread's launches a
//! period back as the probe saw them (its history, kept here as the probe keeps it), then attributed as any
//! launch; the trace writer collapses what repeats again, by the launches as attributed: a copy attributed
//! differently (a kernel named since, a stream capturing since) is written whole.
//!
//! A run stands for up to 2^20 launches: it is expanded [`REPEAT_PART`] launches at a time, each part
//! written before the next is made ([`Attributor::expand_more`](super::Attributor::expand_more)), so that
//! memory does not grow with a run's length (made whole, a run of the stand-in's 600 000 launches took
//! tracer's peak RSS to 141 MiB, against 45 MiB written launch by launch).

use std::rc::Rc;

use tracer_common::api::Library;

use crate::trace::{
    Line,
    event::{Launch, Repeat},
    runs::well_formed,
};

/// Launches of a run made at a time.
pub(crate) const REPEAT_PART: u32 = 1024;

impl super::Attributor {
    /// Keeps a launch the probe placed in its thread's history (before attribution changes it).
    pub(super) fn keep_for_runs(&mut self, l: &Launch) {
        if l.in_runs {
            self.live.entry(l.pid).or_default().runs.of(l.pid, l.tid).push(l.clone());
        }
    }

    /// A run the kernel counted: its first launches, attributed one by one (the rest by
    /// [`Self::expand_more`]). One whose launches this side does not hold (a bound passed, a record that
    /// could not be decoded) is counted with its launches, never guessed.
    pub(super) fn repeat(&mut self, r: Repeat, out: &mut Vec<Line>) {
        if !well_formed(&r) {
            super::bump(&mut self.counters, "repeats_malformed");
            return;
        }
        super::bump(&mut self.counters, "runs_counted_in_kernel");
        *self.counters.entry("launches_in_kernel_runs".to_owned()).or_default() += u64::from(r.count);
        self.expanding = Some((r, 0));
        self.expand_more(out);
    }

    /// The next part of the run being expanded, attributed into `out`; false when no run was being
    /// expanded (nothing was made). The caller writes `out` and calls again until false.
    pub(crate) fn expand_more(&mut self, out: &mut Vec<Line>) -> bool {
        let Some((r, from)) = self.expanding.take() else { return false };
        let to = from.saturating_add(REPEAT_PART).min(r.count);
        // The thread's history, taken out for the part (attribution does not touch it) and put back after.
        let mut history = self.live.get_mut(&r.pid).and_then(|p| p.runs.get(r.pid, r.tid)).map(std::mem::take);
        let mut lost = false;
        for i in from..to {
            let (ts, dur) = r.times_of(i);
            // The copy, placed in the thread's history (sharing the launch it repeats).
            let Some(l) = history.as_mut().and_then(|h| h.repeat(r.period, ts, dur)) else {
                super::bump(&mut self.counters, "repeats_without_history");
                *self.counters.entry("launches_in_repeats_lost".to_owned()).or_default() += u64::from(r.count - i);
                lost = true;
                break;
            };
            self.see(l.pid, l.ts, out);
            let attributed = self.attribute_launch(l, out);
            if let Some(h) = history.as_mut() {
                h.set_last(attributed);
            }
        }
        if let Some(h) = history
            && let Some(p) = self.live.get_mut(&r.pid)
        {
            *p.runs.of(r.pid, r.tid) = h;
        }
        if to < r.count && !lost {
            self.expanding = Some((r, to));
        }
        true
    }
}

impl super::Attributor {
    /// The launches a run the kernel counted copies, as attributed (oldest first), when its copies would
    /// each be attributed as those were (nothing changed since, no part of another run pending, its
    /// process looked at, no kernel parameters waiting for a launch of it): the run can then be written
    /// as counted, and [`Self::passed`] takes it. None: its launches are to be made one by one.
    pub(crate) fn passable(&mut self, r: &Repeat) -> Option<Vec<Rc<Launch>>> {
        if self.expanding.is_some() || !well_formed(r) {
            return None;
        }
        let p = self.live.get_mut(&r.pid).filter(|p| p.scanned && p.pending_params.is_empty())?;
        let sources: Vec<Rc<Launch>> =
            p.runs.get(r.pid, r.tid)?.last(r.period)?.map(|(_, a)| a.clone()).collect::<Option<_>>()?;
        // What attributing a copy reads, as it was for the launch it copies: its kernel bound to the same
        // id (and its plan given), its stream not capturing; a driver launch's function named, and no
        // runtime launch's name waiting for its thread's next.
        let names = self.names.of(r.pid, &mut p.names);
        let alike = sources.iter().all(|s| {
            names.lookup(s.handle) == s.kernel
                && names.plan_given(s.handle)
                && !p.graphs.is_capturing(s.stream)
                && (s.api.library() != Library::Cuda || !(names.unnamed(s.handle) || names.runtime_name_waits(r.tid)))
        });
        alike.then_some(sources)
    }

    /// A run [`Self::passable`] allowed and the writer wrote as counted: its thread's history goes on as if
    /// its launches had been made, each counted by the code that made it.
    pub(crate) fn passed(&mut self, r: &Repeat) {
        super::bump(&mut self.counters, "runs_counted_in_kernel");
        super::bump(&mut self.counters, "runs_written_as_counted");
        *self.counters.entry("launches_in_kernel_runs".to_owned()).or_default() += u64::from(r.count);
        self.last_scanned = r.pid;
        let Some(p) = self.live.get_mut(&r.pid) else { return };
        let Some(sources) = p.runs.get(r.pid, r.tid).and_then(|h| h.repeat_all(r.period, r.count)) else { return };
        let mut names = self.names.of(r.pid, &mut p.names);
        let (each, more) = (r.count / r.period, r.count % r.period);
        for (j, (launch, _)) in (0..).zip(&sources) {
            p.sites.count_n(&mut names, launch, each + u32::from(j < more));
        }
    }
}
