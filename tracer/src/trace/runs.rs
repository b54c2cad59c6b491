//! Runs of exact repeats in the trace file: the writer collapses a thread's launches that each equal the
//! launch a period before them into one `repeat` line ([`Collapse`]); readers expand the line back into the
//! launches it stands for ([`Expand`]), so every reader takes runs as launches.
//!
//! Both keep, per thread, its last [`RUN_HISTORY`] launches, and both are bounded: at most [`MAX_THREADS`]
//! threads are kept (more start the table afresh: a repeat of a thread no longer kept cannot be expanded,
//! and is counted).

use std::{collections::VecDeque, rc::Rc};

use tracer_common::{RUN_HISTORY, RUN_MAX};

use super::schema::{Launch, Repeat};

/// Threads whose last launches are kept at most (about 150 KiB each), as many as the kernel keeps.
pub(crate) const MAX_THREADS: usize = 256;

/// A launch as runs compare it: every field but its times and what is not written.
fn key(l: &Launch) -> Launch {
    Launch { ts: 0, dur: 0, caller: 0, in_runs: false, ..l.clone() }
}

/// One thread's last launches, oldest first. A repeat shares the launch it copies (its own times are not
/// kept here): placing it copies no launch.
#[derive(Default)]
pub(crate) struct History(VecDeque<Rc<Launch>>);

impl History {
    /// Places a launch at the end.
    pub(crate) fn push(&mut self, l: Launch) {
        self.place(Rc::new(l));
    }

    /// Places a repeat of the launch `period` places back, if held, and gives it with its own times.
    pub(crate) fn repeat(&mut self, period: u32, ts: u64, dur: u64) -> Option<Launch> {
        let source = Rc::clone(self.shared_back(period)?);
        let copy = Launch { ts, dur, ..(*source).clone() };
        self.place(source);
        Some(copy)
    }

    fn place(&mut self, l: Rc<Launch>) {
        if self.0.len() == RUN_HISTORY {
            self.0.pop_front();
        }
        self.0.push_back(l);
    }

    fn shared_back(&self, period: u32) -> Option<&Rc<Launch>> {
        let p = usize::try_from(period).ok().filter(|&p| p >= 1)?;
        let at = self.0.len().checked_sub(p)?;
        self.0.get(at)
    }

    /// The launch `period` places back (1: the last), if held.
    pub(crate) fn back(&self, period: u32) -> Option<&Launch> {
        self.shared_back(period).map(AsRef::as_ref)
    }
}

/// Per thread `(pid, tid)`, bounded by [`MAX_THREADS`].
pub(crate) struct Threads<T>(crate::FastMap<(u32, u32), T>);

impl<T> Default for Threads<T> {
    fn default() -> Self {
        Self(crate::FastMap::default())
    }
}

impl<T: Default> Threads<T> {
    /// The thread's entry, made when new (the table started afresh when full).
    pub(crate) fn of(&mut self, pid: u32, tid: u32) -> &mut T {
        if self.0.len() >= MAX_THREADS && !self.0.contains_key(&(pid, tid)) {
            self.0.clear();
        }
        self.0.entry((pid, tid)).or_default()
    }

    /// The thread's entry, if kept.
    pub(crate) fn get(&mut self, pid: u32, tid: u32) -> Option<&mut T> {
        self.0.get_mut(&(pid, tid))
    }

    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.0.values_mut()
    }
}

/// Why a `repeat` line cannot be expanded.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unexpandable {
    /// Its count or period is outside what a writer writes.
    Malformed,
    /// Its thread's launches that far back are not held (never written, or past the bounds).
    NoHistory,
}

impl std::fmt::Display for Unexpandable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Malformed => "a repeat of 0 or more than 2^20 launches, or from 0 or more than 1024 launches back",
            Self::NoHistory => "a repeat of launches its thread does not have that far back",
        })
    }
}

/// Checks a run's count and period.
pub(crate) const fn well_formed(r: &Repeat) -> bool {
    r.count >= 1 && r.count <= RUN_MAX && r.period >= 1 && r.period as usize <= RUN_HISTORY
}

/// The launches `r` stands for, each placed in `history` as it is made (a run may repeat its own
/// launches), handed to `each`; `history` is the one [`Expand::history_for`] gave (it holds the launch
/// `r.period` back, and placing keeps it so).
pub(crate) fn expand(r: &Repeat, history: &mut History, mut each: impl FnMut(&Launch)) {
    for i in 0..r.count {
        let (ts, dur) = r.times_of(i);
        let Some(l) = history.repeat(r.period, ts, dur) else { return };
        each(&l);
    }
}

/// A reader's expansion of `repeat` lines: each thread's last launches as read.
#[derive(Default)]
pub(crate) struct Expand {
    threads: Threads<History>,
}

impl Expand {
    /// Takes in a launch line.
    pub(crate) fn launch(&mut self, l: &Launch) {
        self.threads.of(l.pid, l.tid).push(l.clone());
    }

    /// The history a `repeat` line copies from, checked whole before anything is made: its count and
    /// period, and that its thread holds the launch that far back.
    pub(crate) fn history_for(&mut self, r: &Repeat) -> Result<&mut History, Unexpandable> {
        if !well_formed(r) {
            return Err(Unexpandable::Malformed);
        }
        let history = self.threads.get(r.pid, r.tid).ok_or(Unexpandable::NoHistory)?;
        if history.back(r.period).is_none() {
            return Err(Unexpandable::NoHistory);
        }
        Ok(history)
    }

    /// The launches a `repeat` line stands for, handed to `each`.
    #[cfg(test)]
    pub(crate) fn repeat(&mut self, r: &Repeat, each: impl FnMut(&Launch)) -> Result<(), Unexpandable> {
        expand(r, self.history_for(r)?, each);
        Ok(())
    }
}

/// One thread as the writer sees it: its last launches (as compared, with a fold to find them by), where
/// each fold was last seen, its run under way and the period of its last run.
#[derive(Default)]
struct Written {
    /// Each with its fold; a launch that goes on a run shares the launch it repeats.
    last: VecDeque<(u64, Rc<Launch>)>,
    /// Launches taken so far (the next one's position).
    pos: u64,
    /// Fold -> the last position a launch of that fold was at (cleared past [`MAX_FOLDS`]).
    seen: crate::FastMap<u64, u64>,
    run: Option<Repeat>,
    last_period: u32,
}

/// Folds a thread's table of last positions holds at most: a few times the launches of a history.
const MAX_FOLDS: usize = 4 * RUN_HISTORY;

impl Written {
    /// The launch `period` places back (before the one being taken), with its fold.
    fn back(&self, period: u64) -> Option<&(u64, Rc<Launch>)> {
        let held = self.last.len() as u64;
        if period == 0 || period > held {
            return None;
        }
        self.last.get(usize::try_from(held - period).ok()?)
    }

    /// Whether the launch `period` places back is `k` (of fold `fold`).
    fn is_back(&self, period: u64, fold: u64, k: &Launch) -> bool {
        self.back(period).is_some_and(|(f, b)| *f == fold && **b == *k)
    }
}

/// The writer's side: a thread's launch that equals one within its last [`RUN_HISTORY`] (at the last run's
/// period back, else the nearest) begins a run, the launches that go on repeating at that period add to
/// it, and the run is written as one `repeat` line before any other line. A constant number of lookups a
/// launch: no search.
#[derive(Default)]
pub(crate) struct Collapse {
    threads: Threads<Written>,
    /// Threads with a run under way.
    pending: Vec<(u32, u32)>,
    hasher: foldhash::fast::FixedState,
}

impl Collapse {
    /// Takes a launch: true when it joins a run (the line is not written), false when the writer writes it
    /// (after the runs [`Collapse::take_runs`] gives).
    pub(crate) fn launch(&mut self, l: &Launch) -> bool {
        use std::hash::BuildHasher as _;
        let k = key(l);
        let t = self.threads.of(l.pid, l.tid);
        // A run going on (most launches, in a loop): the launch equal to the one a period back has its fold,
        // so the launch is not hashed.
        let going_on = t.run.as_ref().filter(|run| run.count < RUN_MAX).and_then(|run| {
            let (fold, b) = t.back(u64::from(run.period))?;
            (**b == k).then(|| (*fold, Rc::clone(b)))
        });
        let continuing = going_on.is_some();
        let (fold, k) = match going_on {
            Some((fold, b)) => (fold, b),
            None => (self.hasher.hash_one(&k), Rc::new(k)),
        };
        let counted = match (continuing, t.run.as_mut()) {
            (true, Some(run)) => {
                run.count += 1;
                run.last_ts = l.ts;
                run.dur = run.dur.saturating_add(l.dur);
                true
            }
            (_, Some(_)) => false,
            (_, None) => {
                let nearest = t.seen.get(&fold).map(|&at| t.pos - at);
                let period = [u64::from(t.last_period), nearest.unwrap_or(0)]
                    .into_iter()
                    .find(|&p| p <= RUN_HISTORY as u64 && t.is_back(p, fold, &k));
                if let Some(period) = period {
                    t.run = Some(Repeat {
                        ts: l.ts,
                        pid: l.pid,
                        tid: l.tid,
                        last_ts: l.ts,
                        count: 1,
                        period: period as u32,
                        dur: l.dur,
                    });
                    self.pending.push((l.pid, l.tid));
                }
                period.is_some()
            }
        };
        if t.last.len() == RUN_HISTORY {
            t.last.pop_front();
        }
        t.last.push_back((fold, k));
        if t.seen.len() >= MAX_FOLDS && !t.seen.contains_key(&fold) {
            t.seen.clear();
        }
        t.seen.insert(fold, t.pos);
        t.pos += 1;
        counted
    }

    /// The runs under way, ended: the writer writes them before any line but a launch that joins a run.
    pub(crate) fn take_runs(&mut self) -> Vec<Repeat> {
        let mut runs = Vec::new();
        for (pid, tid) in self.pending.drain(..) {
            if let Some(t) = self.threads.get(pid, tid)
                && let Some(run) = t.run.take()
            {
                t.last_period = run.period;
                runs.push(run);
            }
        }
        runs
    }

    /// Whether a run is under way.
    pub(crate) const fn has_runs(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Forgets every thread's launches: a new part of a rotated recording reads alone. (Runs under way
    /// are taken first.)
    pub(crate) fn clear(&mut self) {
        for t in self.threads.values_mut() {
            t.run = None;
        }
        self.pending.clear();
        self.threads.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(tid: u32, handle: u64, ts: u64) -> Launch {
        Launch { tid, handle, dur: 3, ..Launch::for_test(7, Some(1), ts) }
    }

    /// What the writer writes for a sequence: launches, and repeats where their runs end.
    fn written(seq: &[Launch]) -> Vec<Result<Launch, Repeat>> {
        let mut c = Collapse::default();
        let mut out = Vec::new();
        for l in seq {
            if !c.launch(l) {
                out.extend(c.take_runs().into_iter().map(Err));
                out.push(Ok(l.clone()));
            }
        }
        out.extend(c.take_runs().into_iter().map(Err));
        out
    }

    /// What a reader makes of it.
    fn read(lines: &[Result<Launch, Repeat>]) -> Vec<Launch> {
        let mut e = Expand::default();
        let mut out = Vec::new();
        for line in lines {
            match line {
                Ok(l) => {
                    e.launch(l);
                    out.push(l.clone());
                }
                Err(r) => e.repeat(r, |l| out.push(l.clone())).unwrap(),
            }
        }
        out
    }

    #[test]
    fn a_loop_of_layers_is_written_as_its_first_layer_and_one_repeat_and_read_back_exactly() {
        // Four layers of three kernels, then a different kernel, on one thread; another thread between.
        let mut seq = Vec::new();
        let mut ts = 0;
        for _ in 0..4 {
            for h in [10, 11, 12] {
                ts += 10;
                seq.push(launch(1, h, ts));
            }
        }
        seq.push(launch(1, 99, 1000));
        let lines = written(&seq);
        assert_eq!(lines.len(), 5, "{lines:#?}");
        let Err(run) = &lines[3] else { panic!("{lines:#?}") };
        assert_eq!((run.count, run.period, run.ts, run.last_ts, run.dur), (9, 3, 40, 120, 27));
        let back = read(&lines);
        // Every launch back, in order, fields exact; the repeats' times placed evenly (here, as they were).
        assert_eq!(back, seq);
    }

    #[test]
    fn a_launch_differing_in_any_field_ends_the_run_and_threads_stay_apart() {
        let a = launch(1, 10, 1);
        let seq = vec![
            a.clone(),
            Launch { ts: 2, ..a.clone() },
            Launch { ts: 3, grid: [2, 1, 1], ..a.clone() },
            Launch { ts: 4, tid: 2, ..a.clone() },
            Launch { ts: 5, ..a },
        ];
        let lines = written(&seq);
        // The second repeats the first (a run of one, ended by the third); the third and the other thread's
        // are new; the fifth repeats the second back on its thread... after the third: period 2.
        let kinds: Vec<bool> = lines.iter().map(Result::is_ok).collect();
        assert_eq!(kinds, [true, false, true, true, false], "{lines:#?}");
        assert_eq!(read(&lines), seq);
    }

    #[test]
    fn a_repeat_without_its_history_or_out_of_bounds_is_refused() {
        let r = Repeat { ts: 1, pid: 7, tid: 7, last_ts: 2, count: 2, period: 1, dur: 0 };
        let mut e = Expand::default();
        assert_eq!(e.repeat(&r, |_| ()), Err(Unexpandable::NoHistory));
        e.launch(&launch(7, 1, 0));
        assert_eq!(e.repeat(&Repeat { period: 2, ..r.clone() }, |_| ()), Err(Unexpandable::NoHistory));
        assert_eq!(e.repeat(&Repeat { count: RUN_MAX + 1, ..r.clone() }, |_| ()), Err(Unexpandable::Malformed));
        assert_eq!(e.repeat(&Repeat { period: 1025, ..r.clone() }, |_| ()), Err(Unexpandable::Malformed));
        let mut n = 0;
        assert_eq!(e.repeat(&r, |_| n += 1), Ok(()));
        assert_eq!(n, 2);
    }
}
