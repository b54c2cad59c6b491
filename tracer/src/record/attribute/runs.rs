//! Runs of exact repeats the kernel counted: each expanded into the launches it stands for, copies of the
//! thread's launches a period back as the probe saw them (its history, kept here as the probe keeps it),
//! then attributed as any launch. The trace writer collapses what repeats again, by the launches as
//! attributed: a copy attributed differently (a kernel named since, a stream capturing since) is written
//! whole.

use crate::trace::{
    Line,
    event::{Launch, Repeat},
    runs::well_formed,
};

impl super::Attributor {
    /// Keeps a launch the probe placed in its thread's history (before attribution changes it).
    pub(super) fn keep_for_runs(&mut self, l: &Launch) {
        if l.in_runs {
            self.live.entry(l.pid).or_default().runs.of(l.pid, l.tid).push(l.clone());
        }
    }

    /// A run the kernel counted: its launches, attributed one by one. One whose launches this side does not
    /// hold (a bound passed, a record that could not be decoded) is counted with its launches, never
    /// guessed.
    pub(super) fn repeat(&mut self, r: &Repeat, out: &mut Vec<Line>) {
        if !well_formed(r) {
            super::bump(&mut self.counters, "repeats_malformed");
            return;
        }
        super::bump(&mut self.counters, "runs_counted_in_kernel");
        *self.counters.entry("launches_in_kernel_runs".to_owned()).or_default() += u64::from(r.count);
        for i in 0..r.count {
            let (ts, dur) = r.times_of(i);
            let source =
                self.live.get_mut(&r.pid).and_then(|p| p.runs.get(r.pid, r.tid)).and_then(|h| h.back(r.period));
            let Some(source) = source else {
                super::bump(&mut self.counters, "repeats_without_history");
                *self.counters.entry("launches_in_repeats_lost".to_owned()).or_default() += u64::from(r.count - i);
                return;
            };
            let l = Launch { ts, dur, ..source.clone() };
            self.launch(l, out);
        }
    }
}
