//! The end of a recording: the footer, with every loss and every stage's counts (the kernel's maps, the
//! drain, attribution and naming, the watch), and the programs' own timings.

use std::os::fd::AsFd as _;

use super::Session;
use crate::{
    os::clock::monotonic_ns,
    record::probes::{attach, entries::Entries},
    trace::{
        self, Stop,
        counted::{Counted, Counting, Counts},
    },
};

impl Session<'_> {
    /// What every stage counted so far, asked of each in turn: the kernel's maps, the ring, attribution
    /// (with naming), the library watch; the programs' runs the kernel skipped, the tracer's own cost.
    pub(super) fn counted(&self) -> Counts {
        let mut counts = Counts::default();
        let stages: [&dyn Counting; 4] = [&self.kernel, &self.ring, &self.attr, &self.watch];
        for stage in stages {
            stage.counted(&mut counts);
        }
        self.missed_runs(&mut counts);
        own_cost(&mut counts);
        counts
    }

    /// The footer: drops per CPU, every stage's counts, the tracer's own cost.
    /// `shed`: the metrics endpoint's connections closed to make room and its waits for room before
    /// accepting (`--metrics`).
    pub(super) fn footer(&self, stop: Stop, shed: Option<(u64, u64)>) -> trace::Footer {
        let mut footer = trace::Footer { end_mono_ns: monotonic_ns(), stop, ..Default::default() };
        for (kind, per_cpu) in self.kernel.counts.drops_per_cpu() {
            footer.drops.insert(kind.into(), per_cpu);
        }
        // Records the drain thread could not keep (its queue full), by kind, beside the ring's own drops.
        for (kind, n) in self.ring.dropped() {
            footer.drops.insert(kind, vec![n]);
        }
        let mut counts = self.counted();
        if let Some((evicted, waits)) = shed {
            counts.set(Counted::MetricsConnectionsEvicted, evicted);
            counts.set(Counted::MetricsAcceptWaits, waits);
        }
        footer.counters.extend(counts.named());
        self.program_stats(&mut footer);
        footer
    }

    /// Runs the kernel skipped: a tracepoint or probe that fired while another tracer program ran on its
    /// CPU (a GPU job's done stage, in an interrupt, during a probe's program). Never silent.
    fn missed_runs(&self, out: &mut Counts) {
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
        out.set_nonzero(Counted::ProgramRunsMissed, missed);
        out.set_nonzero(Counted::JobStagesMissed, jobs_missed);
    }

    /// With `--program-stats`, each program's runs and time.
    fn program_stats(&self, footer: &mut trace::Footer) {
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

/// The tracer's own cost, for users and for `cargo xtask bench`.
fn own_cost(out: &mut Counts) {
    // SAFETY: rusage is plain data, for which all-zero bytes are valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &raw mut usage) } == 0 {
        let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
        out.set(Counted::TracerCpuUs, us(usage.ru_utime) + us(usage.ru_stime));
    }
    // Peak RSS of this program image (VmHWM): ru_maxrss would also count the image of the process that
    // started tracer, inherited across fork and exec.
    if let Some(kib) = crate::os::proc::own_peak_rss_kib() {
        out.set(Counted::TracerMaxRssKib, kib);
    }
}
