//! GPU scheduler jobs as text: whether the recording could see them, and each process's.
#![expect(clippy::float_arithmetic, clippy::cast_precision_loss, reason = "times are shown as decimal fractions")]

use std::fmt::Write as _;

use crate::read::report::{Coverage, ProcessReport};

/// One line saying where GPU job times apply (nothing for a trace written before they were recorded).
pub(super) fn write_coverage(s: &mut String, c: &Coverage) -> std::fmt::Result {
    match c {
        Coverage::Unknown => Ok(()),
        Coverage::NoTracepoints => writeln!(
            s,
            "gpu jobs: none recorded: this kernel has no gpu_scheduler tracepoints (the gpu-sched module comes with a \
             driver that uses the DRM scheduler, such as amdgpu)"
        ),
        Coverage::UnknownTracepoints => writeln!(
            s,
            "gpu jobs: none recorded: this kernel's gpu_scheduler tracepoints are of a kind this tracer does not know"
        ),
        Coverage::Recorded(tps) => writeln!(
            s,
            "gpu jobs: from the kernel's GPU scheduler ({}), for work submitted through the kernel driver (amdgpu \
             command submission: RADV and Mesa); HIP's user-mode queues bypass it. Untested on AMD hardware: \
             checked on Debian's 6.1 and 6.18 kernels with a test-double driver, until someone runs it on an AMD GPU",
            tps.join(", ")
        ),
    }
}

/// Job stages the kernel did not let tracer's programs see, where there were any.
pub(super) fn write_missed(s: &mut String, counters: &std::collections::BTreeMap<String, u64>) -> std::fmt::Result {
    let missed = crate::trace::counted::Counted::JobStagesMissed.in_footer(counters);
    if missed == 0 {
        return Ok(());
    }
    writeln!(
        s,
        "\ngpu jobs: {missed} job stages were not recorded: the kernel skips a tracer program that fires while another \
         runs on its CPU (a job's done stage comes in an interrupt), so as many jobs read as unfinished"
    )
}

/// A process's jobs: totals, per ring, per phase.
pub(super) fn write_jobs(s: &mut String, p: &ProcessReport) -> std::fmt::Result {
    let Some(j) = &p.gpu_jobs else { return Ok(()) };
    let ms = |ns: u64| ns as f64 / 1e6;
    let us = |ns: u64| ns as f64 / 1e3;
    writeln!(
        s,
        "\n  gpu jobs (kernel scheduler): {} queued, {} finished, {} unfinished; GPU time {:.3} ms",
        j.jobs,
        j.finished,
        j.unfinished,
        ms(j.busy_ns)
    )?;
    for r in &j.rings {
        let ring = if r.ring.is_empty() { "(unnamed)" } else { &r.ring };
        writeln!(
            s,
            "    ring {ring}: {} jobs, GPU {:.3} ms (median {:.1} \u{b5}s a job), waited median {:.1} \u{b5}s for the ring",
            r.jobs,
            ms(r.busy_ns),
            us(r.busy_ns_median),
            us(r.wait_ns_median)
        )?;
    }
    if !j.phases.is_empty() {
        let each: Vec<String> =
            j.phases.iter().map(|(ph, n)| format!("{ph} {} jobs {:.3} ms", n.jobs, ms(n.busy_ns))).collect();
        writeln!(s, "    by the phase they were queued in: {}", each.join(", "))?;
    }
    if j.done_unseen > 0 {
        writeln!(
            s,
            "    also finished, their done stage not recorded: {} (a later job on their ring was done; the kernel \
             skips tracer's program in an interrupt that comes while another runs): their GPU time is in the next \
             job's",
            j.done_unseen
        )?;
    }
    if j.without_queue > 0 {
        writeln!(s, "    {} jobs ran whose queueing was not recorded (not counted above)", j.without_queue)?;
    }
    if j.over_limit > 0 {
        writeln!(s, "    {} job records past the most a report joins per process (not counted above)", j.over_limit)?;
    }
    Ok(())
}
