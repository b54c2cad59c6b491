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

use crate::trace::counted::Counted;
use std::rc::Rc;

use tracer_common::api::Library;

use anyhow::Result;

use crate::trace::{
    Line, Sink,
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
            self.counters.bump(Counted::RepeatsMalformed);
            return;
        }
        self.count_run(&r);
        self.expanding = Some((r, 0));
        self.expand_more(out);
    }

    /// Counts a run the kernel counted, and its launches (made one by one or written as counted).
    fn count_run(&mut self, r: &Repeat) {
        self.counters.bump(Counted::RunsCountedInKernel);
        self.counters.add(Counted::LaunchesInKernelRuns, u64::from(r.count));
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
                self.counters.bump(Counted::RepeatsWithoutHistory);
                self.counters.add(Counted::LaunchesInRepeatsLost, u64::from(r.count - i));
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
    /// A run's fate, decided here alone: written whole where its copies would each be attributed as the
    /// launches they copy were ([`Self::passable`]) and the sink's last launches of the thread are those
    /// ([`Sink::whole_run`]); otherwise (false) it is to be expanded ([`Self::repeat`]).
    pub(super) fn whole(&mut self, r: &Repeat, sink: &mut impl Sink) -> Result<bool> {
        let Some(sources) = self.passable(r) else { return Ok(false) };
        if !sink.whole_run(r, &sources)? {
            return Ok(false);
        }
        self.passed(r);
        Ok(true)
    }

    /// The launches a run the kernel counted copies, as attributed (oldest first), when its copies would
    /// each be attributed as those were (nothing changed since, no part of another run pending, its
    /// process looked at, no kernel parameters waiting for a launch of it): the run can then be written
    /// as counted, and [`Self::passed`] takes it. None: its launches are to be made one by one.
    pub(crate) fn passable(&mut self, r: &Repeat) -> Option<Vec<Rc<Launch>>> {
        // A run of fewer launches than half its period is made launch by launch: checking and placing a
        // period's launches would cost more than making its few.
        if self.expanding.is_some() || !well_formed(r) || u64::from(r.count) * 2 < u64::from(r.period) {
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
        self.count_run(r);
        self.counters.bump(Counted::RunsWrittenWhole);
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

#[cfg(test)]
mod tests {
    use tracer_common::ApiFunc;

    use super::{
        super::{Attributor, tests::*},
        *,
    };
    use crate::{
        record::intake::decode::{Event, Params},
        trace::event::Call,
    };

    /// An attributor that saw two launches placed in their thread's history: a registered kernel's, and
    /// one of a handle nothing names.
    fn two_kept() -> (Attributor, Vec<Line>) {
        let mut a = Attributor::default();
        let mut out = Vec::new();
        a.event(register(0x1000, "_Z4axpyPfS_f"), &mut out);
        a.event(kept(0x1000, 10), &mut out);
        a.event(kept(0x2000, 20), &mut out);
        (a, out)
    }

    fn kept(handle: u64, ts: u64) -> Event {
        Event::Launch(Launch { ts, in_runs: true, ..launch_of(handle) })
    }

    #[test]
    fn a_run_the_kernel_counted_becomes_the_launches_it_repeats_attributed_as_any() {
        let (mut a, mut out) = two_kept();
        // A launch the probe did not place in its history (it read parameters): not repeated.
        a.event(Event::Launch(Launch { ts: 25, grid: [9, 9, 9], ..launch_of(0x1000) }), &mut out);
        let o = origin(30);
        let run = |tid, count| Repeat { ts: 30, pid: o.pid, tid, last_ts: 60, count, period: 2, dur: 8 };
        a.event(Event::Repeat(run(o.tid, 4)), &mut out);
        let launches: Vec<&Launch> =
            out.iter().filter_map(|r| if let Line::Launch(l) = r { Some(l) } else { None }).collect();
        let seen: Vec<(u64, u64, u64, [u32; 3])> = launches.iter().map(|l| (l.handle, l.ts, l.dur, l.grid)).collect();
        assert_eq!(
            seen,
            [
                (0x1000, 10, 3, [4, 1, 1]),
                (0x2000, 20, 3, [4, 1, 1]),
                (0x1000, 25, 3, [9, 9, 9]),
                (0x1000, 30, 2, [4, 1, 1]),
                (0x2000, 40, 2, [4, 1, 1]),
                (0x1000, 50, 2, [4, 1, 1]),
                (0x2000, 60, 2, [4, 1, 1]),
            ]
        );
        // Named as the launches they copy.
        assert!(launches.iter().filter(|l| l.handle == 0x1000).all(|l| l.kernel == launches[0].kernel));
        assert_ne!(launches[1].kernel, launches[0].kernel);
        // A run of a thread whose launches this side does not hold: counted with its launches, nothing made.
        let before = out.len();
        a.event(Event::Repeat(run(o.tid + 1, 3)), &mut out);
        assert_eq!(out.len(), before);
        assert_eq!((a.counters["repeats_without_history"], a.counters["launches_in_repeats_lost"]), (1, 3));
        assert_eq!((a.counters["runs_counted_in_kernel"], a.counters["launches_in_kernel_runs"]), (2, 7));
    }

    /// A sink that keeps its lines, taking runs whole or not, and how many lines each hand-over was.
    struct Kept {
        lines: Vec<Line>,
        takes_whole: bool,
    }

    impl Sink for Kept {
        fn line(&mut self, line: &Line) -> Result<()> {
            self.lines.push(line.clone());
            Ok(())
        }

        fn whole_run(&mut self, r: &Repeat, _: &[Rc<Launch>]) -> Result<bool> {
            if self.takes_whole {
                self.lines.push(Line::Repeat(r.clone()));
            }
            Ok(self.takes_whole)
        }
    }

    #[test]
    fn a_runs_fate_is_decided_once_whole_where_the_sink_takes_it_expanded_where_not() {
        let o = origin(30);
        let run = Repeat { ts: 30, pid: o.pid, tid: o.tid, last_ts: 60, count: 4, period: 2, dur: 8 };
        for takes_whole in [true, false] {
            let (mut a, out) = two_kept();
            let mut sink = Kept { lines: Vec::new(), takes_whole };
            for l in &out {
                sink.line(l).unwrap();
            }
            a.take(Event::Repeat(run.clone()), &mut sink).unwrap();
            let after: Vec<&Line> = sink.lines[out.len()..].iter().collect();
            let launches = after.iter().filter(|l| matches!(l, Line::Launch(_))).count();
            let repeats = after.iter().filter(|l| matches!(l, Line::Repeat(_))).count();
            // Whole: one repeat line, no launch made; expanded: its four launches, no repeat line.
            assert_eq!((repeats, launches), if takes_whole { (1, 0) } else { (0, 4) }, "whole: {takes_whole}");
            let whole = a.counters.get("runs_written_as_counted").copied();
            assert_eq!(whole, takes_whole.then_some(1));
            assert_eq!(a.counters.get("launches_in_kernel_runs"), Some(&4));
        }
    }

    #[test]
    fn a_long_run_is_made_part_by_part_each_part_bounded() {
        let mut a = Attributor::default();
        let mut out = Vec::new();
        a.event(Event::Launch(Launch { ts: 10, in_runs: true, ..launch_of(0x1000) }), &mut out);
        out.clear();
        let o = origin(20);
        let count = 3 * REPEAT_PART + 5;
        let run = Repeat { ts: 20, pid: o.pid, tid: o.tid, last_ts: 20 + u64::from(count), count, period: 1, dur: 0 };
        a.event(Event::Repeat(run.clone()), &mut out);
        let (mut parts, mut made, mut last_ts) = (0, 0, 0);
        loop {
            assert!(out.len() <= REPEAT_PART as usize + 1, "a part of {} lines", out.len());
            #[expect(clippy::iter_with_drain, reason = "the one buffer the attributor fills again")]
            for l in out.drain(..) {
                if let Line::Launch(l) = l {
                    assert!(l.ts > last_ts, "in order");
                    last_ts = l.ts;
                    made += 1;
                }
            }
            parts += 1;
            if !a.expand_more(&mut out) {
                break;
            }
        }
        assert_eq!((made, parts), (count, 4), "three whole parts and one of 5");
        // A caller that does not take the parts gets the rest at its next event, before that event's lines.
        a.event(Event::Repeat(Repeat { ts: 10_000, last_ts: 20_000, ..run }), &mut out);
        a.event(Event::Launch(Launch { ts: 30_000, in_runs: true, ..launch_of(0x1000) }), &mut out);
        let ts: Vec<u64> = out.iter().filter_map(|l| if let Line::Launch(l) = l { Some(l.ts) } else { None }).collect();
        assert_eq!((ts.len(), ts.last()), (count as usize + 1, Some(&30_000)));
        assert!(ts.is_sorted());
    }

    #[test]
    fn a_run_whose_copies_would_be_attributed_alike_is_taken_whole_and_its_thread_goes_on() {
        let (mut a, mut out) = two_kept();
        let o = origin(30);
        // Longer than a history: only its last launches are placed.
        let run = Repeat { ts: 30, pid: o.pid, tid: o.tid, last_ts: 3030, count: 3001, period: 2, dur: 0 };
        let sources = a.passable(&run).expect("copies attributed alike");
        let written: Vec<&Launch> =
            out.iter().filter_map(|r| if let Line::Launch(l) = r { Some(l) } else { None }).collect();
        let sources: Vec<&Launch> = sources.iter().map(AsRef::as_ref).collect();
        assert_eq!(sources, written, "the launches as written");
        a.passed(&run);
        // The history went on as if the 3 001 copies had been made: its last is a copy of 0x1000.
        out.clear();
        a.event(Event::Repeat(Repeat { ts: 4000, last_ts: 4001, count: 2, period: 1, ..run.clone() }), &mut out);
        let handles: Vec<u64> =
            out.iter().filter_map(|r| if let Line::Launch(l) = r { Some(l.handle) } else { None }).collect();
        assert_eq!(handles, [0x1000, 0x1000]);
        let c = |k: &str| a.counters.get(k).copied().unwrap_or(0);
        assert_eq!(
            (c("runs_counted_in_kernel"), c("runs_written_as_counted"), c("launches_in_kernel_runs")),
            (2, 1, 3003)
        );
    }

    #[test]
    fn a_run_is_made_launch_by_launch_where_a_copy_could_be_attributed_otherwise() {
        let o = origin(30);
        let run = Repeat { ts: 30, pid: o.pid, tid: o.tid, last_ts: 60, count: 4, period: 1, dur: 0 };
        let capture =
            Event::call(Call { stream: Some(0), ..Call::new(origin(25), ApiFunc::HipStreamBeginCapture, 0, 0) });
        let params = Event::Params(Params {
            origin: origin(25),
            handle: 0x1000,
            wanted: tracer_common::PARAMS_ALL,
            values: vec![(11, 290)],
        });
        let not_kept = Event::Launch(Launch { ts: 10, ..launch_of(0x1000) });
        for (why, before, last) in [
            ("its stream began capturing since", Some(capture), kept(0x1000, 10)),
            ("kernel parameters wait for a launch of its thread", Some(params), kept(0x1000, 10)),
            ("the launch it copies was not placed in the history", None, not_kept),
            ("its period reaches past what its thread has launched", None, kept(0x1000, 10)),
        ] {
            let mut a = Attributor::default();
            let mut out = Vec::new();
            a.event(last, &mut out);
            if let Some(ev) = before {
                assert!(a.passable(&run).is_some(), "{why}: alike before");
                a.event(ev, &mut out);
            }
            let r = if why.starts_with("its period") { Repeat { period: 2, ..run.clone() } } else { run.clone() };
            assert!(a.passable(&r).is_none(), "{why}");
        }
        // A run shorter than half its period: made launch by launch (cheaper than checking a period's launches).
        let mut a = Attributor::default();
        let mut out = Vec::new();
        for (handle, ts) in [(0x1000, 10), (0x2000, 11), (0x3000, 12)] {
            a.event(kept(handle, ts), &mut out);
        }
        assert!(a.passable(&Repeat { count: 2, period: 3, ..run }).is_some());
        assert!(a.passable(&Repeat { count: 1, period: 3, ..run }).is_none());
    }
}
