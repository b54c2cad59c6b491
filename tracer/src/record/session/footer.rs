//! The end of a recording: what the kernel counted instead of writing (the tally records) and the
//! footer, with every loss and counter the eBPF side, the drain, naming and the watch kept.

use std::{collections::BTreeMap, os::fd::AsFd as _};

use aya::maps::{MapData, PerCpuArray};
use tracer_common::{ApiFunc, Counter, RecordKind};

use super::Session;
use crate::{
    os::clock::monotonic_ns,
    record::probes::{attach, entries::Entries},
    trace::{self, Line, Stop},
};

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

impl Session<'_> {
    /// The calls the kernel counted instead of writing, summed over each process's threads, one record per
    /// process and function, in a stable order.
    pub(super) fn tallies(&self) -> Vec<Line> {
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
            .map(|((pid, api), (calls, bytes))| Line::Tally(trace::Tally { pid, api, calls, bytes }))
            .collect()
    }

    /// The footer: drops per CPU, every loss counter, the tracer's own cost.
    /// `shed`: the metrics endpoint's connections closed to make room and its waits for room before
    /// accepting (`--metrics`).
    /// `ended`: the processes that had ended before the ring's last read.
    pub(super) fn footer(&self, stop: Stop, shed: Option<(u64, u64)>, ended: &[u32]) -> trace::Footer {
        let mut footer = trace::Footer { end_mono_ns: monotonic_ns(), stop, ..Default::default() };
        if let Some((evicted, waits)) = shed {
            footer.counters.insert("metrics_connections_evicted".into(), evicted);
            footer.counters.insert("metrics_accept_waits".into(), waits);
        }
        for (kind, per_cpu) in self.counts.drops_per_cpu() {
            footer.drops.insert(kind.into(), per_cpu);
        }
        for &c in Counter::ALL {
            footer.counters.insert(c.name().into(), self.counts.counter(c));
        }
        footer.counters.insert("undecodable".into(), self.undecodable);
        footer.counters.insert("ring_records".into(), self.ring_records);
        // Records the drain thread could not keep (its queue full), by kind, beside the ring's own drops.
        for (kind, n) in self.ring.dropped() {
            footer.drops.insert(kind, vec![n]);
        }
        footer.counters.insert("queue_peak_bytes".into(), self.ring.peak_queued());
        footer.counters.insert("queue_reserve_records".into(), self.ring.reserve_records());
        let early_raised =
            self.attr.names.early.as_ref().is_none_or(|e| e.priority_raised.load(std::sync::atomic::Ordering::Relaxed));
        footer
            .counters
            .insert("recorder_priority_raised".into(), u64::from(self.ring.priority_raised() && early_raised));
        if self.filter_by_pid {
            footer.counters.insert("filter_entries_start".into(), self.filter_at_start);
            footer.counters.insert("filter_entries_end".into(), self.pids.keys().count() as u64);
        }
        footer.counters.insert("unnamed_kernels".into(), self.attr.names.unnamed);
        if self.attr.processes.argv_cut > 0 {
            footer.counters.insert("argv_cut".into(), self.attr.processes.argv_cut);
        }
        footer.counters.insert("maps_gone_before_look".into(), self.watch.maps_gone_count);
        if self.watch.links.as_ref().is_some_and(attach::RuntimeLinks::scoped) {
            footer.counters.insert("processes_ended_before_probes".into(), self.watch.ended_unlinked_count);
        }
        footer.counters.insert("processes_held_after_exit".into(), self.watch.processes_held_after_exit(ended));
        footer.counters.insert("maps_gone_listed_from_naming".into(), self.watch.maps_gone_listed_count);
        footer.counters.insert("opened_in_other_root_unresolved".into(), self.watch.opened_unresolved_count);
        if self.watch.roots_not_probed > 0 {
            footer.counters.insert("roots_not_probed".into(), self.watch.roots_not_probed);
        }
        if let Some(e) = &self.attr.names.early {
            footer.counters.extend(e.counters().map(|(name, n)| (name.to_owned(), n)));
        }
        for (cause, n) in &self.watch.unreadable {
            footer.counters.insert(format!("mapped_files_unread_{cause}"), *n);
        }
        for (k, v) in &self.attr.names.counts {
            footer.counters.insert((*k).into(), *v);
        }
        // What each user's processes presented past its budget, or the recording's.
        footer.counters.extend(self.attr.names.budgets.counters());
        for (k, v) in &self.attr.counters {
            footer.counters.insert(k.clone(), *v);
        }
        self.program_counts(&mut footer);
        // The tracer's own cost, for users and for `cargo xtask bench`.
        // SAFETY: rusage is plain data, for which all-zero bytes are valid.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointer to a rusage.
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &raw mut usage) } == 0 {
            let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
            footer.counters.insert("tracer_cpu_us".into(), us(usage.ru_utime) + us(usage.ru_stime));
        }
        // Peak RSS of this program image (VmHWM): ru_maxrss would also count the image of the process that
        // started tracer, inherited across fork and exec.
        if let Some(kib) = crate::os::proc::own_peak_rss_kib() {
            footer.counters.insert("tracer_max_rss_kib".into(), kib);
        }
        footer
    }

    /// What the kernel says of the programs: runs it skipped, and with `--program-stats` each program's runs
    /// and time.
    fn program_counts(&self, footer: &mut trace::Footer) {
        // Runs the kernel skipped: a tracepoint or probe that fired while another tracer program ran on its
        // CPU (a GPU job's done stage, in an interrupt, during a probe's program). Never silent.
        let (mut missed, mut jobs_missed) = (0u64, 0u64);
        for (name, program) in self.ebpf.programs() {
            let n = program.fd().map_or(0, |fd| attach::program_misses(fd.as_fd()));
            missed += n;
            if name.starts_with("job_") {
                jobs_missed += n;
            }
        }
        missed += self.watch.links.as_ref().map_or(0, attach::RuntimeLinks::misses);
        missed += self.watch.entries.as_ref().map_or(0, Entries::misses);
        for (key, n) in [("program_runs_missed", missed), ("job_stages_missed", jobs_missed)] {
            if n > 0 {
                footer.counters.insert(key.to_owned(), n);
            }
        }
        if self.args.program_stats {
            // What each program cost, timed by the kernel.
            for (name, program) in self.ebpf.programs() {
                if let Ok(info) = program.info()
                    && info.run_count() > 0
                {
                    let stat = trace::ProgramStat { runs: info.run_count(), ns: info.run_time().as_nanos() as u64 };
                    footer.programs.insert(name.to_owned(), stat);
                }
            }
            // The programs loaded for multi-point links (the runtime probes, the library entry counts): the
            // same programs by name, run through their links.
            let mut multi = self.watch.links.as_ref().map(attach::RuntimeLinks::stats).unwrap_or_default();
            let library = self.args.probe_mode.library_program();
            multi.extend(
                self.watch.entries.as_ref().and_then(|e| e.stats(library)).map(|(n, r, ns)| (n.to_owned(), r, ns)),
            );
            for (name, runs, ns) in multi.into_iter().filter(|(_, runs, _)| *runs > 0) {
                let stat = footer.programs.entry(name).or_default();
                stat.runs += runs;
                stat.ns += ns;
            }
        }
    }
}
