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

mod bound;
mod collapse;
pub(crate) use bound::Bound;
pub(crate) use bound::RepeatsCut;
pub(crate) use collapse::Collapse;

/// Threads whose last launches are kept at most (about 150 KiB each), as many as the kernel keeps.
pub(crate) const MAX_THREADS: usize = 256;

/// One thread's last launches, oldest first, each with what its keeper adds (`A`: nothing for a reader; the
/// launch as attributed for the recorder). A repeat shares the launch it copies (its own times are not
/// kept here): placing it copies no launch.
pub(crate) struct History<A = ()>(VecDeque<(Rc<Launch>, A)>);

impl<A> Default for History<A> {
    fn default() -> Self {
        Self(VecDeque::new())
    }
}

impl<A: Clone + Default> History<A> {
    /// Places a launch at the end.
    pub(crate) fn push(&mut self, l: Launch) {
        self.place((Rc::new(l), A::default()));
    }

    /// Places a repeat of the launch `period` places back, if held, and gives it with its own times.
    pub(crate) fn repeat(&mut self, period: u32, ts: u64, dur: u64) -> Option<Launch> {
        let source = self.shared_back(period)?.clone();
        let copy = Launch { ts, dur, ..(*source.0).clone() };
        self.place(source);
        Some(copy)
    }

    /// Places the `count` repeats of a run of `period` at once, as [`Self::repeat`] one by one would, and
    /// the launches they copy: the last `period` before them (oldest first), or None when not held. Only
    /// the last [`RUN_HISTORY`] repeats are placed (the ones before would fall out).
    pub(crate) fn repeat_all(&mut self, period: u32, count: u32) -> Option<Vec<(Rc<Launch>, A)>> {
        let (sources, placed) = run_placement(&self.0, period, count)?;
        for i in placed {
            self.place(sources[i % sources.len()].clone());
        }
        Some(sources)
    }

    /// What the keeper added to the last launch, set.
    pub(crate) fn set_last(&mut self, a: A) {
        if let Some(last) = self.0.back_mut() {
            last.1 = a;
        }
    }

    /// The last `period` launches, oldest first, with what the keeper added (none when fewer are held).
    pub(crate) fn last(&self, period: u32) -> Option<impl Iterator<Item = &(Rc<Launch>, A)>> {
        let p = usize::try_from(period).ok().filter(|&p| p >= 1)?;
        let from = self.0.len().checked_sub(p)?;
        Some(self.0.range(from..))
    }

    fn place(&mut self, l: (Rc<Launch>, A)) {
        if self.0.len() == RUN_HISTORY {
            self.0.pop_front();
        }
        self.0.push_back(l);
    }

    fn shared_back(&self, period: u32) -> Option<&(Rc<Launch>, A)> {
        let p = usize::try_from(period).ok().filter(|&p| p >= 1)?;
        let at = self.0.len().checked_sub(p)?;
        self.0.get(at)
    }

    /// The launch `period` places back (1: the last), if held.
    pub(crate) fn back(&self, period: u32) -> Option<&Launch> {
        self.shared_back(period).map(|(l, _)| l.as_ref())
    }
}

/// A run of `count` repeats at `period` placed at once after the launches `held`: the last `period` of them
/// (oldest first; the `i`th repeat copies `i % period`), and which repeats to place (the last [`RUN_HISTORY`]:
/// the ones before would fall out). None when fewer are held.
fn run_placement<T: Clone>(held: &VecDeque<T>, period: u32, count: u32) -> Option<(Vec<T>, std::ops::Range<usize>)> {
    let p = usize::try_from(period).ok().filter(|&p| p >= 1)?;
    let from = held.len().checked_sub(p)?;
    let n = usize::try_from(count).ok()?;
    Some((held.range(from..).cloned().collect(), n.saturating_sub(RUN_HISTORY)..n))
}

/// Per thread `(pid, tid)`, bounded by [`MAX_THREADS`].
pub(crate) struct Threads<T>(crate::os::FastMap<(u32, u32), T>);

impl<T> Default for Threads<T> {
    fn default() -> Self {
        Self(crate::os::FastMap::default())
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
pub(crate) fn expand(r: &Repeat, history: &mut History, each: impl FnMut(&Launch)) {
    expand_first(r, r.count, history, each);
}

/// The first `n` launches `r` stands for, as [`expand`] makes them (each at its own time in the whole run).
pub(crate) fn expand_first(r: &Repeat, n: u32, history: &mut History, mut each: impl FnMut(&Launch)) {
    for i in 0..n.min(r.count) {
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
    fn a_run_ended_leaves_where_its_launches_were_last_seen_for_the_next_run_to_find() {
        // A loop of three kernels a hundred times, then a fourth: the loop goes on with the fourth in it,
        // a period of four found by where its first kernel was last seen (in the run's last period).
        let mut seq = Vec::new();
        let mut ts = 0;
        let mut push = |h: u64, seq: &mut Vec<Launch>| {
            ts += 10;
            seq.push(launch(1, h, ts));
        };
        for _ in 0..100 {
            for h in [10, 11, 12] {
                push(h, &mut seq);
            }
        }
        for _ in 0..50 {
            for h in [13, 10, 11, 12] {
                push(h, &mut seq);
            }
        }
        let lines = written(&seq);
        let shape: Vec<String> = lines
            .iter()
            .map(|l| match l {
                Ok(l) => format!("{}", l.handle),
                Err(r) => format!("{}x{}", r.count, r.period),
            })
            .collect();
        assert_eq!(shape, ["10", "11", "12", "297x3", "13", "199x4"]);
        assert_eq!(read(&lines), seq);
    }

    #[test]
    fn mixed_loops_on_two_threads_are_read_back_exactly() {
        // Loops of varying length and period, broken by odd launches, on two interleaved threads.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let mut seq = Vec::new();
        // Per thread: its loop's first kernel, period and launches left, and its place in the loop.
        let mut loops = [(0, 1, 0, 0); 2];
        for ts in 0..20_000 {
            let tid = 1 + u32::from(next(4) == 0);
            let (base, period, left, at) = &mut loops[tid as usize - 1];
            if *left == 0 {
                (*base, *period, *left, *at) = (next(100) * 10, 1 + next(12), 20 + next(400), 0);
            }
            let handle = if next(50) == 0 { 5000 + next(1000) } else { *base + *at % *period };
            (*left, *at) = (*left - 1, *at + 1);
            let mut l = launch(tid, handle, ts * 10);
            l.grid[0] = u32::from(next(200) == 0);
            seq.push(l);
        }
        let lines = written(&seq);
        assert!(lines.len() < seq.len() / 4, "{} lines for {} launches", lines.len(), seq.len());
        // Each thread's launches back, in order, every field but the times (a run's are placed evenly;
        // threads' runs are written when they end, not interleaved).
        let untimed = |tid: u32, seq: &[Launch]| -> Vec<Launch> {
            seq.iter().filter(|l| l.tid == tid).map(|l| Launch { ts: 0, dur: 0, ..l.clone() }).collect()
        };
        let back = read(&lines);
        for tid in [1, 2] {
            assert_eq!(untimed(tid, &back), untimed(tid, &seq), "thread {tid}");
        }
    }

    #[test]
    fn a_run_written_as_counted_reads_back_as_its_launches_and_the_launches_after_go_on_repeating() {
        // A layer of three kernels written, then a run of ten repeats of it written as a recorder passes a
        // kernel's run, then the layer goes on: the writer's own run continues at the run's period.
        let mut c = Collapse::default();
        let mut lines = Vec::new();
        let layer: Vec<Launch> = [10, 11, 12].into_iter().map(|h| launch(1, h, h)).collect();
        for l in &layer {
            assert!(!c.launch(l));
            lines.push(Ok(l.clone()));
        }
        let r = Repeat { ts: 100, pid: 7, tid: 1, last_ts: 190, count: 10, period: 3, dur: 30 };
        let sources: Vec<Rc<Launch>> = layer.iter().cloned().map(Rc::new).collect();
        // Refused where the thread's last launches are not the ones the run copies, or another thread's.
        let mut other = sources.clone();
        other[1] = Rc::new(Launch { grid: [2, 1, 1], ..layer[1].clone() });
        assert!(!c.can_pass(&r, &other));
        assert!(!c.can_pass(&Repeat { period: 4, ..r.clone() }, &sources));
        assert!(!c.can_pass(&Repeat { tid: 2, ..r.clone() }, &sources));
        assert!(c.can_pass(&r, &sources));
        c.passed(&r);
        lines.push(Err(r));
        // Then 11, 12, 10, 11 (the run ended on 10): each repeats the launch three back.
        let after: Vec<Launch> = [11, 12, 10, 11].into_iter().zip(200..).map(|(h, ts)| launch(1, h, ts)).collect();
        for l in &after {
            assert!(c.launch(l), "{l:?} goes on a run");
        }
        let ran = c.take_runs();
        assert_eq!(ran.iter().map(|r| (r.count, r.period)).collect::<Vec<_>>(), [(4, 3)]);
        lines.extend(ran.into_iter().map(Err));
        let handles: Vec<u64> = read(&lines).iter().map(|l| l.handle).collect();
        assert_eq!(handles, [10, 11, 12, 10, 11, 12, 10, 11, 12, 10, 11, 12, 10, 11, 12, 10, 11]);
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

#[cfg(test)]
mod bound_tests;
