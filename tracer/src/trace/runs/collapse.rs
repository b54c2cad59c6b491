//! The writer's side of runs: a thread's launches that repeat the one a period before them, collapsed into one
//! `repeat` line ([`Collapse`]).

use std::{collections::VecDeque, rc::Rc};

use tracer_common::{RUN_HISTORY, RUN_MAX};

use super::{Launch, Repeat, Threads, run_placement};

/// The fields runs compare, borrowed: every field of a launch but its times and what is not written.
/// (Destructured whole: a field added to [`Launch`] must be placed here, compared or not.)
#[derive(PartialEq, Eq, Hash)]
struct Compared<'a> {
    pid: u32,
    tid: u32,
    lib: u32,
    api: tracer_common::ApiFunc,
    kernel: Option<u32>,
    handle: u64,
    grid: [u32; 3],
    block: [u32; 3],
    grid_unit: crate::trace::event::GridUnit,
    shmem: u64,
    stream: u64,
    ret: i32,
    captured: bool,
    entry_only: bool,
    params: &'a std::collections::BTreeMap<u8, u64>,
}

impl<'a> Compared<'a> {
    const fn of(l: &'a Launch) -> Self {
        let Launch {
            ts: _,
            pid,
            tid,
            lib,
            api,
            kernel,
            handle,
            grid,
            block,
            grid_unit,
            shmem,
            stream,
            ret,
            dur: _,
            captured,
            entry_only,
            params,
            caller: _,
            in_runs: _,
        } = l;
        Self {
            pid: *pid,
            tid: *tid,
            lib: *lib,
            api: *api,
            kernel: *kernel,
            handle: *handle,
            grid: *grid,
            block: *block,
            grid_unit: *grid_unit,
            shmem: *shmem,
            stream: *stream,
            ret: *ret,
            captured: *captured,
            entry_only: *entry_only,
            params,
        }
    }
}

/// One thread as the writer sees it: its last launches (with the fold of what runs compare), where
/// each fold was last seen, its run under way and the period of its last run.
#[derive(Default)]
struct Written {
    /// Each with its fold; a launch that goes on a run shares the launch it repeats.
    last: VecDeque<(u64, Rc<Launch>)>,
    /// Launches taken so far (the next one's position).
    pos: u64,
    /// Fold -> the last position a launch of that fold was at (cleared past [`MAX_FOLDS`]).
    seen: crate::os::FastMap<u64, u64>,
    run: Option<Repeat>,
    /// The position after the run's last launch.
    run_end: u64,
    last_period: u32,
}

/// Folds a thread's table of last positions holds at most: a few times the launches of a history.
const MAX_FOLDS: usize = 4 * RUN_HISTORY;

/// The launch `period` places back in `last` (before the one being taken), with its fold.
fn back(last: &VecDeque<(u64, Rc<Launch>)>, period: u64) -> Option<&(u64, Rc<Launch>)> {
    let held = last.len() as u64;
    if period == 0 || period > held {
        return None;
    }
    last.get(usize::try_from(held - period).ok()?)
}

impl Written {
    /// Whether the launch `period` places back compares as `k` (of fold `fold`).
    fn is_back(&self, period: u64, fold: u64, k: &Compared<'_>) -> bool {
        back(&self.last, period).is_some_and(|(f, b)| *f == fold && Compared::of(b) == *k)
    }

    /// Places the launch taken (with its fold) last; where its fold was seen is kept when `seen`.
    fn take(&mut self, launch: (u64, Rc<Launch>), seen: bool) {
        if seen {
            self.saw(launch.0, self.pos);
        }
        if self.last.len() == RUN_HISTORY {
            self.last.pop_front();
        }
        self.last.push_back(launch);
        self.pos += 1;
    }

    fn saw(&mut self, fold: u64, at: u64) {
        if self.seen.len() >= MAX_FOLDS && !self.seen.contains_key(&fold) {
            self.seen.clear();
        }
        self.seen.insert(fold, at);
    }

    /// Ends the run under way: where its launches' folds were last seen is kept now. Each launch of a run
    /// repeats the one a period before it, so its last `period` launches hold every fold it took, each at
    /// its last place.
    fn end_run(&mut self) -> Option<Repeat> {
        let run = self.run.take()?;
        self.last_period = run.period;
        // Its first launch was seen as taken (it was not known to go on a run); launches of the thread
        // taken after its end (the one that ended it) were seen too.
        self.saw_before(self.run_end, u64::from(run.count - 1).min(u64::from(run.period)));
        Some(run)
    }

    /// Keeps where the `n` launches taken before position `end` were seen (those still held).
    fn saw_before(&mut self, end: u64, n: u64) {
        for at in end.saturating_sub(n)..end {
            let back = usize::try_from(self.pos - at).unwrap_or(usize::MAX);
            if let Some(&(fold, _)) = self.last.len().checked_sub(back).and_then(|i| self.last.get(i)) {
                self.saw(fold, at);
            }
        }
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
        let compared = Compared::of(l);
        let t = self.threads.of(l.pid, l.tid);
        // A run going on (most launches, in a loop): the launch equal to the one a period back takes its
        // fold and shares it, so the launch is neither hashed nor copied, and where each fold was last seen
        // is left to the run's end.
        if let Some(run) = t.run.as_mut().filter(|run| run.count < RUN_MAX)
            && let Some((fold, b)) = back(&t.last, u64::from(run.period))
            && Compared::of(b) == compared
        {
            let shared = (*fold, Rc::clone(b));
            run.count += 1;
            run.last_ts = l.ts;
            run.dur = run.dur.saturating_add(l.dur);
            t.take(shared, false);
            t.run_end = t.pos;
            return true;
        }
        let fold = self.hasher.hash_one(&compared);
        // A run under way that this launch does not go on with ends (the writer takes it); otherwise the
        // launch begins one where it equals the launch the last run's period back, or the nearest of its fold.
        let mut counted = false;
        if t.run.is_none() {
            let nearest = t.seen.get(&fold).map(|&at| t.pos - at);
            let period = [u64::from(t.last_period), nearest.unwrap_or(0)]
                .into_iter()
                .find(|&p| p <= RUN_HISTORY as u64 && t.is_back(p, fold, &compared));
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
                counted = true;
            }
        }
        t.take((fold, Rc::new(l.clone())), true);
        if counted {
            t.run_end = t.pos;
        }
        counted
    }

    /// The runs under way, ended: the writer writes them before any line but a launch that joins a run.
    pub(crate) fn take_runs(&mut self) -> Vec<Repeat> {
        let mut runs = Vec::new();
        for (pid, tid) in self.pending.drain(..) {
            if let Some(run) = self.threads.get(pid, tid).and_then(Written::end_run) {
                runs.push(run);
            }
        }
        runs
    }

    /// Whether a run the kernel counted, of launches that copy `sources` (the launches a period back, as
    /// attributed, oldest first), can be written as one `repeat` line: the thread's last launches taken
    /// are those (so a reader's expansion copies them).
    pub(crate) fn can_pass(&mut self, r: &Repeat, sources: &[Rc<Launch>]) -> bool {
        let Some(t) = self.threads.get(r.pid, r.tid) else { return false };
        let p = sources.len();
        p >= 1
            && p == r.period as usize
            && t.last.len() >= p
            && t.last.range(t.last.len() - p..).zip(sources).all(|((_, b), s)| Compared::of(b) == Compared::of(s))
    }

    /// Takes a run [`Self::can_pass`] allowed, written as one line: its thread's launches go on as if each
    /// of its launches had been taken (runs under way are taken first).
    pub(crate) fn passed(&mut self, r: &Repeat) {
        let Some(t) = self.threads.get(r.pid, r.tid) else { return };
        let Some((sources, placed)) = run_placement(&t.last, r.period, r.count) else { return };
        t.pos += placed.start as u64;
        for i in placed {
            t.take(sources[i % sources.len()].clone(), false);
        }
        // Its last `period` launches hold every fold it took, each at its last place.
        t.saw_before(t.pos, u64::from(r.count.min(r.period)));
        t.last_period = r.period;
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
