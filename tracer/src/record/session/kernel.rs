//! The kernel's maps user space reads and writes while recording: the PID filter, the parameter plans, the
//! calls tallied per thread, the runs of repeats under way, and the programs' per-CPU counts. One owner,
//! so that a process leaving the filter leaves every map at once.

use std::collections::BTreeMap;

use aya::maps::{HashMap as BpfHashMap, MapData, PerCpuArray};
use tracer_common::{ApiFunc, Counter, PlanKey, RecordKind, ThreadRuns, ThreadTally};

use crate::{
    record::probes::found::Found,
    trace::{
        self, Repeat,
        counted::{Counted, Counting, Counts},
    },
};

/// The maps, taken from the loaded object once the probes are attached.
pub(super) struct KernelMaps {
    /// The PID filter: processes whose calls are recorded.
    pub(super) pids: BpfHashMap<MapData, u32, u32>,
    /// Which kernel parameters each (process, function)'s launches read (see
    /// [`crate::record::attribute::Effects::plans`]).
    pub(super) param_plans: BpfHashMap<MapData, PlanKey, u32>,
    /// Calls the kernel counted instead of writing, per thread and tally slot.
    pub(super) threads: BpfHashMap<MapData, u64, ThreadTally>,
    /// Each launching thread's run of repeated launches under way.
    pub(super) runs: BpfHashMap<MapData, u64, ThreadRuns>,
    /// The programs' losses per kind, and errors.
    pub(super) counts: KernelCounts,
    /// Processes in the filter at the start (None: no filter, every process recorded).
    pub(super) filter_at_start: Option<u64>,
    /// What user space counted of them: plans that could not be written, run launches lost.
    pub(super) counted: Counts,
}

/// The programs' per-CPU counts, read at the end (and for the live status line).
pub(super) struct KernelCounts {
    /// One slot per [`Counter`].
    pub(super) counters: PerCpuArray<MapData, u64>,
    /// One slot per [`RecordKind`]: records the ring could not take.
    pub(super) drops: PerCpuArray<MapData, u64>,
}

impl KernelCounts {
    /// A counter, summed over the CPUs (0 if unreadable).
    fn counter(&self, c: Counter) -> u64 {
        self.counters.get(&(c as u32), 0).map_or(0, |v| v.iter().sum())
    }

    /// Records lost per CPU, under each kind's drop name (kinds that share a name, such as a queue and its
    /// dispatches, summed). Every name appears, lost or not.
    pub(super) fn drops_per_cpu(&self) -> BTreeMap<&'static str, Vec<u64>> {
        let mut drops: BTreeMap<&'static str, Vec<u64>> = BTreeMap::new();
        for &kind in RecordKind::ALL {
            let per_cpu: Vec<u64> =
                self.drops.get(&(kind as u32), 0).map(|v| v.iter().copied().collect()).unwrap_or_default();
            let sum = drops.entry(kind.drop_name()).or_default();
            if sum.len() < per_cpu.len() {
                sum.resize(per_cpu.len(), 0);
            }
            for (s, n) in sum.iter_mut().zip(per_cpu) {
                *s = s.saturating_add(n);
            }
        }
        drops
    }
}

impl KernelMaps {
    /// Whether the kernel filters by PID (targets, a command, Ollama): its filter's size at the start is kept.
    pub(super) const fn by_pid(&self) -> bool {
        self.filter_at_start.is_some()
    }

    /// Processes in the filter now.
    pub(super) fn filtered(&self) -> usize {
        self.pids.keys().count()
    }

    /// Whether a process is in the filter.
    pub(super) fn in_filter(&self, pid: u32) -> bool {
        self.pids.get(&pid, 0).is_ok()
    }

    /// Hands a function's parameter plan to the kernel. An LRU map makes room itself; a plan that cannot be
    /// written leaves the launches reading every parameter, which costs time, not records.
    pub(super) fn give_plan(&mut self, pid: u32, handle: u64, plan: u32) {
        if self.param_plans.insert(PlanKey { tgid: u64::from(pid), handle }, plan, 0).is_err() {
            self.counted.bump(Counted::ParamPlansUnwritten);
        }
    }

    /// Takes a plan back: a plan found tells a launch its process is traced. One the LRU map evicted
    /// already is not there to take.
    pub(super) fn take_plan(&mut self, pid: u32, handle: u64) {
        drop(self.param_plans.remove(&PlanKey { tgid: u64::from(pid), handle }));
    }

    /// Takes a process out of the filter, with its plans (`plans`), and marks its threads' tally entries
    /// ended: a live entry lets a thread's tallied calls skip the filter (the eBPF hot path), so it must
    /// not outlive the process's place in the filter. The counts stay for the end. (A read-modify-write:
    /// an increment the thread makes in between would be lost, but a process leaves the filter alive only
    /// when it is an `ollama` command other than a server, which makes no GPU calls.) Its threads' runs go
    /// too: a live entry lets its launches skip the filter; a run under way there (none is expected: such a
    /// command launches nothing) is counted lost with its launches.
    pub(super) fn leave(&mut self, pid: u32, plans: Vec<u64>) {
        drop(self.pids.remove(&pid));
        for handle in plans {
            self.take_plan(pid, handle);
        }
        let mine: Vec<(u64, ThreadTally)> = self
            .threads
            .iter()
            .filter_map(Result::ok)
            .filter(|(k, t)| (k >> 32) as u32 == pid && t.ended == 0)
            .collect();
        for (key, t) in mine {
            drop(self.threads.insert(key, ThreadTally { ended: 1, ..t }, 0));
        }
        // By key first: an entry is 36 KiB, read only for the process's own threads.
        let runs: Vec<u64> = self.runs.keys().filter_map(Result::ok).filter(|k| (k >> 32) as u32 == pid).collect();
        for key in runs {
            let count = self.runs.get(&key, 0).map_or(0, |r| r.count);
            drop(self.runs.remove(&key));
            if count > 0 {
                self.counted.add(Counted::LaunchesInRepeatsLost, count);
            }
        }
    }

    /// The runs under way in the kernel's map after the ring's last read, oldest first: each is the last
    /// of its thread's launches (any later record of the thread would have written it).
    pub(super) fn runs_under_way(&self) -> Vec<Repeat> {
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
        under_way
    }

    /// The calls the kernel counted instead of writing, summed over each process's threads, one record per
    /// process and function, in a stable order.
    pub(super) fn tallies(&self) -> Vec<Found> {
        let mut tallies: BTreeMap<(u32, ApiFunc), (u64, u64)> = BTreeMap::new();
        // Slot -> function, looked up once (each lookup walks the API table).
        let slots: [Option<ApiFunc>; tracer_common::TALLY_SLOTS] = std::array::from_fn(ApiFunc::from_tally_slot);
        for (pid_tgid, t) in self.threads.iter().filter_map(Result::ok) {
            for ((&calls, &bytes), &api) in t.calls.iter().zip(&t.bytes).zip(&slots) {
                if let Some(api) = api.filter(|_| calls > 0) {
                    let sum = tallies.entry(((pid_tgid >> 32) as u32, api)).or_default();
                    sum.0 += calls;
                    sum.1 += bytes;
                }
            }
        }
        tallies
            .into_iter()
            .map(|((pid, api), (calls, bytes))| Found::Tally(trace::Tally { pid, api, calls, bytes }))
            .collect()
    }
}

impl Counting for KernelMaps {
    /// Every kernel-side counter (said at 0 too), the filter's size at the start and now (with a filter),
    /// and what user space counted of the maps.
    fn counted(&self, out: &mut Counts) {
        for &c in Counter::ALL {
            out.kernel(c, self.counts.counter(c));
        }
        if let Some(start) = self.filter_at_start {
            out.set(Counted::FilterEntriesStart, start);
            out.set(Counted::FilterEntriesEnd, self.filtered() as u64);
        }
        out.merge(&self.counted);
    }
}
