//! The report's words on AQL packets a doorbell released that are not in the trace: by cause, and per queue.

use std::fmt::Write as _;

use tracer_common::Counter;

use super::plural;
use crate::{read::report::Report, trace::counted::kernel_in_footer};

impl Report {
    /// The AQL packets a doorbell store released that tracer could not read, by cause, and per queue; what
    /// their loss means where HIP's launches were left to the doorbell (nothing else saw them).
    pub(super) fn write_packet_losses(&self, s: &mut String) -> std::fmt::Result {
        let counter = |c: Counter| kernel_in_footer(c, &self.counters);
        let (unread, cut, forged) =
            (counter(Counter::PacketFault), counter(Counter::PacketsCut), counter(Counter::DoorbellImplausible));
        let missing: Vec<String> = self
            .processes
            .iter()
            .flat_map(|p| p.packets_missing.iter().map(move |g| (p, g)))
            .map(|(p, g)| format!("{} on queue {:#x} of {} (pid {})", g.missing, g.queue, p.comm, p.pid))
            .collect();
        if unread == 0 && cut == 0 && forged == 0 && missing.is_empty() {
            return Ok(());
        }
        writeln!(s)?;
        if forged > 0 {
            writeln!(
                s,
                "queues: {forged} doorbell store{} claimed an index more than two rings past the last packet read (no \
                 producer writes so many unread: forged or garbage); the last ring of packets before each was read, \
                 and how many were skipped is not known",
                plural(forged)
            )?;
        }
        if unread > 0 {
            writeln!(
                s,
                "queues: {unread} AQL packet{} could not be read from their queue's ring when its doorbell rang (a \
                 ring in device memory, or unmapped): their dispatches are missing from the queue's view",
                plural(unread)
            )?;
        }
        if cut > 0 {
            let why = if self.trace.doorbell_reads_all {
                "had been overwritten in the ring before tracer read the store (more than a ring's packets after the \
                 last store it read)"
            } else {
                "were not read: this trace's tracer read at most 16 a store (today's reads every one)"
            };
            writeln!(
                s,
                "queues: {cut} AQL packet{} a doorbell store released {why}: their dispatches are missing from the \
                 queue's view",
                plural(cut)
            )?;
        }
        if !missing.is_empty() {
            writeln!(s, "  packets missing between the first and the last read, per queue: {}", missing.join("; "))?;
        }
        if self.trace.launches_at_doorbell {
            writeln!(
                s,
                "  HIP's launch functions were left to the doorbell, so nothing else counted those dispatches: \
                 `record --hip-launches` counts every launch and graph replay at the API as well"
            )
        } else {
            writeln!(s, "  the launches that made them are counted in the API's (the kernel table's launches)")
        }
    }
}
