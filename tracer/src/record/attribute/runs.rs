//! Runs of exact repeats the kernel counted: each expanded into the launches it stands for, copies of the
//! thread's launches a period back as the probe saw them (its history, kept here as the probe keeps it),
//! then attributed as any launch. The trace writer collapses what repeats again, by the launches as
//! attributed: a copy attributed differently (a kernel named since, a stream capturing since) is written
//! whole.
//!
//! A run stands for up to 2^20 launches: it is expanded [`REPEAT_PART`] launches at a time, each part
//! written before the next is made ([`Attributor::expand_more`](super::Attributor::expand_more)), so that
//! memory does not grow with a run's length (made whole, a run of the stand-in's 600 000 launches took
//! tracer's peak RSS to 141 MiB, against 45 MiB written launch by launch).

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
        for i in from..to {
            let (ts, dur) = r.times_of(i);
            // The copy, placed in the thread's history (sharing the launch it repeats).
            let copy = self
                .live
                .get_mut(&r.pid)
                .and_then(|p| p.runs.get(r.pid, r.tid))
                .and_then(|h| h.repeat(r.period, ts, dur));
            let Some(l) = copy else {
                super::bump(&mut self.counters, "repeats_without_history");
                *self.counters.entry("launches_in_repeats_lost".to_owned()).or_default() += u64::from(r.count - i);
                return true;
            };
            self.see(l.pid, l.ts, out);
            self.attribute_launch(l, out);
        }
        if to < r.count {
            self.expanding = Some((r, to));
        }
        true
    }
}
