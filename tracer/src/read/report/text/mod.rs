//! The report as text for a terminal.
#![expect(
    clippy::float_arithmetic,
    clippy::cast_precision_loss,
    reason = "durations and rates are shown as decimal fractions of nanosecond counts"
)]

use std::fmt::Write as _;

use std::collections::BTreeMap;

mod budgets;
mod code_dirs;
mod cuts;
mod jobs;
mod kernels;
mod losses;
mod phases;
mod words;

use code_dirs::write_code_dirs;
use kernels::{all_exact, code_text, columns_text, display_name, shape_text, write_kernels};
use phases::write_phases;
pub(crate) use words::TextOptions;
use words::plural;

use super::{DispatchShape, MemoryReport, ProcessReport, Report};
use tracer_common::Counter;

use crate::{trace, trace::event::ApiFunc};

/// What the trace says of launches that came as exact repeats, if any.
fn repeats_note(t: &super::TraceInfo, s: &mut String) -> std::fmt::Result {
    if t.launches_repeated == 0 {
        return Ok(());
    }
    writeln!(
        s,
        "note: {} launches came as exact repeats of earlier ones on their thread, in {} runs: each is counted as \
         the launch it repeats, but its own time was not recorded (placed evenly between its run's first and \
         last; `record --every-launch` keeps every time)",
        t.launches_repeated, t.repeat_runs
    )
}

impl Report {
    pub(crate) fn to_text(&self, opts: &TextOptions) -> String {
        let mut s = String::new();
        self.write_text(&mut s, opts).expect("writing to a String cannot fail");
        s
    }

    fn write_text(&self, s: &mut String, opts: &TextOptions) -> std::fmt::Result {
        self.write_header(s)?;
        let (active, idle): (Vec<_>, Vec<_>) = self.processes.iter().partition(|p| p.gpu_activity);
        for p in active {
            write_process(s, p, self.trace.lean, opts)?;
        }
        write_idle(s, &idle)?;
        self.write_footer(s)
    }

    /// The trace, its warnings, the libraries and their unprobed functions.
    fn write_header(&self, s: &mut String) -> std::fmt::Result {
        let t = &self.trace;
        writeln!(s, "trace {} — tracer {}, host {}, kernel {}", t.path, t.tracer_version, t.host, t.kernel_release)?;
        writeln!(
            s,
            "recorded {:.3} s, stopped by {}",
            t.duration_s,
            t.stop.map_or("(no footer)", trace::Stop::as_str)
        )?;
        for w in t.warnings() {
            writeln!(s, "warning: {w}")?;
        }
        if t.unreadable_records > 0 {
            writeln!(
                s,
                "note: {} records this tracer cannot read were skipped ({})",
                t.unreadable_records,
                t.first_unreadable.as_deref().unwrap_or_default()
            )?;
        }
        if t.unknown_records > 0 {
            writeln!(s, "note: {} records of types this tracer does not know were skipped", t.unknown_records)?;
        }
        if t.launch_results_unread > 0 {
            writeln!(
                s,
                "note: {} launches were probed at entry only (one trap each): their results were not read, so a \
                 launch that failed counts as made (`record --all-calls` reads them)",
                t.launch_results_unread
            )?;
        }
        repeats_note(t, s)?;
        cuts::write_repeats_cut(t, s)?;
        if t.launches_at_doorbell {
            writeln!(
                s,
                "note: HIP's launch functions were not probed (an AMD GPU was present): each kernel dispatch was read \
                 at its queue's doorbell alone, one trap, and counts as the kernel's execution; launch sites and \
                 failed launches are not known (`record --hip-launches` probes them, a second trap per dispatch)"
            )?;
        }
        jobs::write_coverage(s, &t.gpu_jobs)?;
        writeln!(s, "\nlibraries")?;
        for l in &self.libraries {
            let root = l.root.as_deref().map(|r| format!(", in root {r}")).unwrap_or_default();
            writeln!(s, "  [{}] {} ({}, inode {}{root})", l.id, l.path, l.origin, l.inode)?;
        }
        // Functions left unprobed on purpose (counted only with --all-calls; HIP's launches where the doorbell
        // is read): one line per library and reason.
        let (lean, missing): (Vec<_>, Vec<_>) =
            self.probes_missing.iter().partition(|p| trace::left_unprobed(p.error.as_deref()));
        let (doorbell, missing): (Vec<_>, Vec<_>) =
            missing.into_iter().partition(|p| p.error.as_deref() == Some(trace::DOORBELL_READS));
        for (probes, why) in [
            (lean, "not probed, so not counted (`record --all-calls` counts them)"),
            (
                doorbell,
                "not probed, each dispatch read at its queue's doorbell instead (`record --hip-launches` probes them)",
            ),
        ] {
            let mut by_lib: BTreeMap<u32, Vec<String>> = BTreeMap::new();
            for p in probes {
                by_lib.entry(p.lib).or_default().push(probe_label(&p.api));
            }
            for (lib, names) in by_lib {
                writeln!(s, "  [{lib}] {why}: {}", names.join(", "))?;
            }
        }
        for p in missing {
            writeln!(
                s,
                "  [{}] not probed: {}: {}",
                p.lib,
                probe_label(&p.api),
                p.error.as_deref().unwrap_or_default()
            )?;
        }
        Ok(())
    }

    /// Incomplete processes, losses, counters and the eBPF programs' own timings.
    fn write_footer(&self, s: &mut String) -> std::fmt::Result {
        let incomplete: Vec<String> =
            self.processes.iter().filter(|p| p.incomplete).map(|p| format!("{} (pid {})", p.comm, p.pid)).collect();
        if !incomplete.is_empty() {
            writeln!(
                s,
                "\nincomplete: a GPU runtime copy was probed late or not at all in {}: calls before its probes were not seen (see their GPU libraries)",
                incomplete.join(", ")
            )?;
        }
        self.write_packet_losses(s)?;
        self.write_budgets(s)?;
        kernels::write_vulkan_notes(s, &self.counters)?;
        jobs::write_missed(s, &self.counters)?;
        let queue: u64 = self.drops.iter().filter(|(k, _)| k.starts_with("queue:")).map(|(_, v)| v).sum();
        if queue == 0 {
            writeln!(s, "\nlosses: {} records dropped (ring buffer full)", self.drops_total)?;
        } else {
            writeln!(
                s,
                "\nlosses: {} records dropped ({} ring buffer full, {queue} tracer's queue full)",
                self.drops_total,
                self.drops_total - queue
            )?;
        }
        let nonzero: Vec<String> =
            self.counters.iter().filter(|(_, v)| **v > 0).map(|(k, v)| format!("{k} {v}")).collect();
        if !nonzero.is_empty() {
            writeln!(s, "counted: {}", nonzero.join(", "))?;
        }
        if let Some(n) = self.counters.get(Counter::SymbolInfoOther.name()).filter(|n| **n > 0) {
            writeln!(
                s,
                "  ({n} hsa_executable_symbol_get_info calls asked for other attributes than KERNEL_OBJECT: counted in \
                 the kernel, every process together, and left out of the API calls above)"
            )?;
        }
        if let Some(n) = self.counters.get(Counter::TensorSetOther.name()).filter(|n| **n > 0) {
            writeln!(
                s,
                "  ({n} ggml_backend_tensor_set calls set other tensors than a pass's positions and output rows: a \
                 trap each, counted in the kernel, every process together, and left out of the phases' traps)"
            )?;
        }
        if !self.programs.is_empty() {
            let mut by_runs: Vec<_> = self.programs.iter().collect();
            by_runs.sort_by_key(|(_, p)| std::cmp::Reverse(p.runs));
            let each: Vec<String> = by_runs
                .iter()
                .map(|(name, p)| format!("{name} {} runs, {} ns per run", p.runs, p.ns / p.runs.max(1)))
                .collect();
            writeln!(s, "eBPF programs, as the kernel timed them (the traps not included): {}", each.join("; "))?;
        }
        Ok(())
    }
}

/// One process with GPU activity: its role, libraries, kernels, API calls, phases, queues, ioctls and memory.
fn write_process(s: &mut String, p: &ProcessReport, lean: bool, opts: &TextOptions) -> std::fmt::Result {
    writeln!(s, "\nprocess {} {} — {}", p.pid, p.comm, p.argv.join(" "))?;
    if let Some(role) = &p.role {
        let model = match (&p.model_name, &p.model) {
            (Some(name), Some(path)) => format!(", model {name} ({path})"),
            (None, Some(path)) => format!(", model {path}"),
            _ => String::new(),
        };
        writeln!(s, "  role: {}{model}", role.as_str())?;
    }
    write_mapped(s, p)?;
    write_code_dirs(s, p)?;
    for api in &p.unobserved {
        writeln!(
            s,
            "  not observed: {api} is mapped; tracer probes HIP, HSA, CUDA and Vulkan only: its GPU work is not counted"
        )?;
    }
    if p.exited {
        match (p.exit_code, p.exit_signal) {
            (Some(c), _) => {
                writeln!(s, "  exited with status {c}")?;
            }
            (_, Some(sig)) => {
                writeln!(s, "  killed by signal {sig}")?;
            }
            _ => {
                writeln!(s, "  exited")?;
            }
        }
    }
    write_kernels(s, &p.kernels, opts)?;
    if p.kernels_not_kept > 0 {
        writeln!(
            s,
            "  {} kernel records past the per-process limits were not kept: their launches are shown as without a kernel id",
            p.kernels_not_kept
        )?;
    }
    if p.configs.count > 0 {
        writeln!(s, "\n  kernel<<<>>> configurations pushed: {} ({} failed)", p.configs.count, p.configs.failed)?;
        for sh in &p.configs.shapes {
            writeln!(s, "    {}", shape_text(sh))?;
        }
    }
    write_api(s, p)?;
    write_phases(s, p, lean)?;
    write_queues(s, p, opts)?;
    jobs::write_jobs(s, p)?;
    write_ioctls(s, p)?;
    write_memory(s, &p.memory)
}

/// The GPU libraries a process mapped: whether it called them, what their code ran, and any gap in what
/// tracer saw.
fn write_mapped(s: &mut String, p: &ProcessReport) -> std::fmt::Result {
    if !p.mapped.is_empty() {
        if let Some(root) = &p.root {
            writeln!(s, "  root: {root} (its own: the paths below are that root's files)")?;
        }
        writeln!(s, "  GPU libraries (mapped, called, dispatched):")?;
        for m in &p.mapped {
            let copy = m.origin.map(|o| format!(" [{}]", o.as_str())).unwrap_or_default();
            let gap = match (m.unseen_before_s, m.runtime_not_probed) {
                (Some(t), _) => format!(" \u{2014} probed late: its calls before {t:.3} s were not seen"),
                (None, true) => {
                    " \u{2014} not probed (it could not be, or --lib named others): none of its calls were seen"
                        .to_owned()
                }
                _ => String::new(),
            };
            let mut facts = Vec::new();
            if let Some(n) = m.calls {
                facts.push(format!("{n} calls"));
            }
            if m.kernels > 0 {
                facts.push(format!("{} kernels of its code, {} executions", m.kernels, m.executions));
            }
            if m.launches_from > 0 {
                let failed = match m.launches_failed {
                    0 => String::new(),
                    n if n == m.launches_from => ", every one failed".to_owned(),
                    n => format!(", {n} failed"),
                };
                facts.push(format!("{} launches made from its code{failed}", m.launches_from));
            }
            let facts = if facts.is_empty() { String::new() } else { format!(" ({})", facts.join(", ")) };
            writeln!(s, "    {:<12} {}{copy}{facts}{gap}", m.status.as_str(), m.path)?;
            if !m.functions.is_empty() {
                let top: Vec<String> =
                    m.functions.iter().take(6).map(|f| format!("{} {}", f.function, f.calls)).collect();
                let more = m.functions.len().saturating_sub(6);
                let more = if more > 0 { format!(", and {more} more functions") } else { String::new() };
                writeln!(s, "                 {}{more}", top.join(", "))?;
            }
        }
    }
    Ok(())
}

fn write_api(s: &mut String, p: &ProcessReport) -> std::fmt::Result {
    if !p.api.is_empty() {
        writeln!(s, "\n  API calls:")?;
        writeln!(s, "  {:<42} {:>8} {:>8} {:>12} {:>10}", "api", "calls", "errors", "total \u{b5}s", "mean \u{b5}s")?;
    }
    for a in &p.api {
        if a.untimed == a.calls {
            // One-trap probes: no result or duration observed.
            let part = if a.tallied > 0 { format!(" ({} tallied in the kernel)", a.tallied) } else { String::new() };
            writeln!(s, "  {:<42} {:>8} {:>8} {:>12} {:>10}{part}", a.api.name(), a.calls, "-", "-", "-")?;
            continue;
        }
        let part = if a.untimed > 0 { format!(" ({} at entry only)", a.untimed) } else { String::new() };
        writeln!(
            s,
            "  {:<42} {:>8} {:>8} {:>12.1} {:>10.2}{part}",
            a.api.name(),
            a.calls,
            a.errors,
            a.total_ns as f64 / 1e3,
            a.mean_ns as f64 / 1e3
        )?;
    }
    if p.api.iter().any(|a| a.untimed > 0) {
        writeln!(s, "  (-: recorded at entry by a one-trap probe: counted, result and duration not observed)")?;
        if p.api.iter().any(|a| a.tallied > 0) {
            writeln!(
                s,
                "  (tallied: counted in the kernel, not written one by one: synchronizations that end no step, async copies to the device)"
            )?;
        }
    }
    Ok(())
}

fn write_queues(s: &mut String, p: &ProcessReport, opts: &TextOptions) -> std::fmt::Result {
    if !p.queues.is_empty() || !p.dispatches.is_empty() {
        writeln!(
            s,
            "\n  at the GPU queues ({} queue{}, {} barrier packet{}):",
            p.queues.len(),
            plural(p.queues.len() as u64),
            p.barrier_packets,
            plural(p.barrier_packets)
        )?;
        let u = &p.queues_unread;
        if !u.is_empty() {
            let rings: Vec<String> = u.aql_ring_bytes.iter().map(u64::to_string).collect();
            writeln!(
                s,
                "  ({} more queues made through KFD without hsa_queue_create, none of whose packets tracer reads: {} AQL \
                 (ROCr's own; rings of {} bytes), {} SDMA, {} other)",
                u.aql_ring_bytes.len() as u64 + u.sdma + u.other,
                u.aql_ring_bytes.len(),
                rings.join(", "),
                u.sdma,
                u.other
            )?;
        }
        for g in &p.packets_missing {
            writeln!(
                s,
                "  (queue {:#x}: {} of the {} packets from index {} to {} not read: their dispatches are missing below; \
                 see `queues:` at the end)",
                g.queue,
                g.missing,
                g.last - g.first + 1,
                g.first,
                g.last
            )?;
        }
        writeln!(s, "  {:>10}  {:<38} {:<22} kernel", "dispatches", "workgroup / grid work-items (LDS)", "family")?;
        for d in &p.dispatches {
            let name = if d.demangled.is_empty() {
                format!("unnamed kernel_object {:#x} (loaded before the tracer started)", d.kernel_object)
            } else {
                display_name(&d.demangled, opts)
            };
            let first = d.shapes.first().map(dispatch_shape_text).unwrap_or_default();
            let class = d.class.text_with(!all_exact(&d.ne11, d.dispatches));
            writeln!(s, "  {:>10}  {:<38} {:<22} {}", d.dispatches, first, class, name)?;
            for sh in d.shapes.iter().skip(1) {
                writeln!(s, "  {:>10}  {:<38}", "", dispatch_shape_text(sh))?;
            }
            if let Some(line) = columns_text(&d.ne11, d.dispatches) {
                writeln!(s, "  {:>10}  {line}", "")?;
            }
            if let Some(code) = code_text(d.code_file.as_deref(), &d.bundles) {
                writeln!(s, "  {:>10}  {code}", "")?;
            }
        }
        // None where HIP's launches were left to the doorbell: no launch to set beside a dispatch.
        if !p.crosscheck.is_empty() {
            writeln!(s, "\n  API launches vs queue dispatches:")?;
            writeln!(s, "  {:>8} {:>10}  {:<50} why they differ", "launches", "dispatches", "kernel")?;
        }
        for r in &p.crosscheck {
            let name = if r.demangled.is_empty() { r.kernel.clone() } else { display_name(&r.demangled, opts) };
            writeln!(
                s,
                "  {:>8} {:>10}  {:<50} {}",
                r.api_launches,
                r.queue_dispatches,
                name,
                if r.explanation.is_empty() { "-" } else { &r.explanation }
            )?;
        }
    }
    Ok(())
}

fn write_ioctls(s: &mut String, p: &ProcessReport) -> std::fmt::Result {
    if !p.ioctls.is_empty() {
        writeln!(s, "\n  GPU driver ioctls:")?;
        writeln!(s, "  {:<40} {:>8} {:>8} {:>12}  errors", "ioctl", "calls", "failed", "total \u{b5}s")?;
        for i in &p.ioctls {
            let errs: Vec<String> = i.errnos.iter().map(|(k, v)| format!("{k} x{v}")).collect();
            writeln!(
                s,
                "  {:<40} {:>8} {:>8} {:>12.1}  {}",
                i.name,
                i.calls,
                i.errors,
                i.total_ns as f64 / 1e3,
                errs.join(", ")
            )?;
        }
    }
    Ok(())
}

fn write_memory(s: &mut String, m: &MemoryReport) -> std::fmt::Result {
    if m.malloc_calls + m.free_calls > 0 || !m.memcpy.is_empty() {
        writeln!(s, "\n  memory:")?;
        writeln!(
            s,
            "    allocations (hipMalloc, cuMemAlloc) {} calls ({} failed), {} allocated of {} requested; frees {} calls",
            m.malloc_calls,
            m.malloc_failed,
            bytes(m.malloc_bytes),
            bytes(m.malloc_bytes_requested),
            m.free_calls
        )?;
        for (kind, c) in &m.memcpy {
            let unchecked =
                if c.unchecked > 0 { format!(", {} result not observed", c.unchecked) } else { String::new() };
            writeln!(s, "    memcpy {kind}: {} calls ({} failed{unchecked}), {}", c.calls, c.failed, bytes(c.bytes))?;
        }
    }
    Ok(())
}

/// The processes without GPU activity, by command name, most first: "60 ptxas, 31 ldconfig.real, 1 nvcc (pid 517)".
fn write_idle(s: &mut String, idle: &[&ProcessReport]) -> std::fmt::Result {
    if !idle.is_empty() {
        // By command name, most first: "60 ptxas, 31 ldconfig.real, 1 nvcc (pid 517)".
        let mut by_comm: Vec<(&str, Vec<u32>)> = Vec::new();
        for p in idle {
            match by_comm.iter_mut().find(|(c, _)| *c == p.comm) {
                Some((_, pids)) => pids.push(p.pid),
                None => by_comm.push((&p.comm, vec![p.pid])),
            }
        }
        by_comm.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
        let names: Vec<String> = by_comm
            .iter()
            // A process of which only the exit was recorded (it began before the recording, or its start
            // was lost) has no name: said so, not left blank.
            .map(|(comm, pids)| (if comm.is_empty() { "[exit only, name unknown]" } else { comm }, pids))
            .map(|(comm, pids)| match pids.as_slice() {
                [one] => format!("{comm} (pid {one})"),
                many => format!("{} {comm}", many.len()),
            })
            .collect();
        writeln!(
            s,
            "\n{} process{} with no GPU activity (all in --json): {}",
            idle.len(),
            if idle.len() == 1 { "" } else { "es" },
            names.join(", ")
        )?;
    }
    Ok(())
}

fn dispatch_shape_text(s: &DispatchShape) -> String {
    format!(
        "({},{},{}) / ({},{},{}) ({}) [{}]",
        s.workgroup[0], s.workgroup[1], s.workgroup[2], s.grid[0], s.grid[1], s.grid[2], s.group_segment, s.count
    )
}

/// How a probe's symbol is shown: the function's name, "(C++ export)" when the symbol is its mangled twin.
fn probe_label(symbol: &str) -> String {
    match ApiFunc::from_symbol(symbol) {
        Some(f) if f.name() != f.symbol() => format!("{} (C++ export)", f.name()),
        Some(f) => f.name().to_owned(),
        None => symbol.to_owned(),
    }
}

fn bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 { format!("{b} B") } else { format!("{v:.1} {}", UNITS[i]) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_units() {
        assert_eq!(bytes(12), "12 B");
        assert_eq!(bytes(4096), "4.0 KiB");
        assert_eq!(bytes(3 << 30), "3.0 GiB");
    }

    #[test]
    fn probe_labels() {
        assert_eq!(probe_label(ApiFunc::HipExtModuleLaunchKernelCxx.symbol()), "hipExtModuleLaunchKernel (C++ export)");
        assert_eq!(probe_label("hipLaunchKernel"), "hipLaunchKernel");
    }
}
