//! The report as text for a terminal.
#![expect(
    clippy::float_arithmetic,
    clippy::cast_precision_loss,
    reason = "durations and rates are shown as decimal fractions of nanosecond counts"
)]

use std::fmt::Write as _;

use super::{DispatchShape, Report, Shape};
use crate::{
    event::{ApiFunc, GridUnit},
    trace,
};

impl Report {
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        self.write_text(&mut s).expect("writing to a String cannot fail");
        s
    }

    fn write_text(&self, s: &mut String) -> std::fmt::Result {
        let t = &self.trace;
        writeln!(s, "trace {} — tracer {}, host {}, kernel {}", t.path, t.tracer_version, t.host, t.kernel_release)?;
        writeln!(
            s,
            "recorded {:.3} s, stopped by {}",
            t.duration_s,
            t.stop.map_or("(no footer)", trace::Stop::as_str)
        )?;
        if let Some(w) = &t.warning {
            writeln!(s, "warning: {w}")?;
        }
        if t.unknown_records > 0 {
            writeln!(s, "note: {} records of types this tracer does not know were skipped", t.unknown_records)?;
        }
        writeln!(s, "\nlibraries")?;
        for l in &self.libraries {
            writeln!(s, "  [{}] {} ({}, inode {})", l.id, l.path, l.origin, l.inode)?;
        }
        for p in &self.probes_missing {
            writeln!(
                s,
                "  [{}] not probed: {}: {}",
                p.lib,
                probe_label(&p.api),
                p.error.as_deref().unwrap_or_default()
            )?;
        }
        let (active, idle): (Vec<_>, Vec<_>) = self.processes.iter().partition(|p| p.gpu_activity);
        for p in active {
            writeln!(s, "\nprocess {} {} — {}", p.pid, p.comm, p.argv.join(" "))?;
            if let Some(role) = &p.role {
                let model = match (&p.model_name, &p.model) {
                    (Some(name), Some(path)) => format!(", model {name} ({path})"),
                    (None, Some(path)) => format!(", model {path}"),
                    _ => String::new(),
                };
                writeln!(s, "  role: {}{model}", role.as_str())?;
            }
            if !p.mapped.is_empty() {
                writeln!(s, "  GPU libraries (mapped vs called):")?;
                for m in &p.mapped {
                    let copy = m.origin.map(|o| format!(" [{}]", o.as_str())).unwrap_or_default();
                    writeln!(s, "    {:<12} {}{copy}", m.status.as_str(), m.path)?;
                }
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
            if !p.kernels.is_empty() {
                writeln!(s, "\n  kernels launched ({}):", p.kernels.len())?;
                writeln!(s, "  {:>8} {:>7}  {:<34} kernel", "launches", "failed", "grid x block (shmem) [count]")?;
            }
            for k in &p.kernels {
                let name = if k.demangled.is_empty() {
                    format!("unnamed handle {:#x}", k.handle)
                } else {
                    k.demangled.clone()
                };
                let first = k.shapes.first().map(shape_text).unwrap_or_default();
                writeln!(s, "  {:>8} {:>7}  {:<34} {:<22} {}", k.launches, k.failed, first, k.class.text(), name)?;
                for sh in k.shapes.iter().skip(1) {
                    writeln!(s, "  {:>8} {:>7}  {:<34}", "", "", shape_text(sh))?;
                }
                if k.source == trace::Source::Elf {
                    writeln!(s, "  {:>8} {:>7}  (name from {})", "", "", k.source.as_str())?;
                }
                if k.graph_executions > 0 {
                    writeln!(
                        s,
                        "  {:>8} {:>7}  (ran {} times: {} from graph replays)",
                        "", "", k.executions, k.graph_executions
                    )?;
                }
                if let Some(code) = code_text(k.code_file.as_deref(), &k.bundles) {
                    writeln!(s, "  {:>8} {:>7}  {code}", "", "")?;
                }
                let errors: Vec<String> = k
                    .returns
                    .iter()
                    .filter(|(code, _)| **code != 0)
                    .map(|(code, n)| format!("{} x{n}", error_text(i64::from(*code))))
                    .collect();
                if !errors.is_empty() {
                    writeln!(s, "  {:>8} {:>7}  returned {}", "", "", errors.join(", "))?;
                }
            }
            if p.configs.count > 0 {
                writeln!(
                    s,
                    "\n  kernel<<<>>> configurations pushed: {} ({} failed)",
                    p.configs.count, p.configs.failed
                )?;
                for sh in &p.configs.shapes {
                    writeln!(s, "    {}", shape_text(sh))?;
                }
            }
            if !p.api.is_empty() {
                writeln!(s, "\n  API calls:")?;
                writeln!(
                    s,
                    "  {:<42} {:>8} {:>8} {:>12} {:>10}",
                    "api", "calls", "errors", "total \u{b5}s", "mean \u{b5}s"
                )?;
            }
            for a in &p.api {
                writeln!(
                    s,
                    "  {:<42} {:>8} {:>8} {:>12.1} {:>10.2}",
                    a.api.name(),
                    a.calls,
                    a.errors,
                    a.total_ns as f64 / 1e3,
                    a.mean_ns as f64 / 1e3
                )?;
            }
            if p.phases.iter().any(|ph| ph.phase != crate::phase::Phase::Other) {
                writeln!(s, "\n  phases (a step ends at the sync after the logits copy, or at a graph replay):")?;
                writeln!(s, "  {:<8} {:>6}  {:<16} kernels", "phase", "steps", "batch widths")?;
                for ph in &p.phases {
                    let widths: Vec<&str> = ph.batch_widths.iter().map(String::as_str).collect();
                    let kernels: Vec<String> = ph.kernels.iter().map(|(k, n)| format!("{k} x{n}")).collect();
                    writeln!(
                        s,
                        "  {:<8} {:>6}  {:<16} {}",
                        ph.phase.as_str(),
                        ph.steps,
                        if widths.is_empty() { "-".to_owned() } else { widths.join(", ") },
                        kernels.join(", ")
                    )?;
                }
            }
            if !p.queues.is_empty() || !p.dispatches.is_empty() {
                writeln!(
                    s,
                    "\n  at the GPU queues ({} queue{}, {} barrier packet{}):",
                    p.queues.len(),
                    if p.queues.len() == 1 { "" } else { "s" },
                    p.barrier_packets,
                    if p.barrier_packets == 1 { "" } else { "s" }
                )?;
                writeln!(
                    s,
                    "  {:>10}  {:<38} {:<22} kernel",
                    "dispatches", "workgroup / grid work-items (LDS)", "family"
                )?;
                for d in &p.dispatches {
                    let name = if d.demangled.is_empty() {
                        format!("unnamed kernel_object {:#x} (loaded before the tracer started)", d.kernel_object)
                    } else {
                        d.demangled.clone()
                    };
                    let first = d.shapes.first().map(dispatch_shape_text).unwrap_or_default();
                    writeln!(s, "  {:>10}  {:<38} {:<22} {}", d.dispatches, first, d.class.text(), name)?;
                    for sh in d.shapes.iter().skip(1) {
                        writeln!(s, "  {:>10}  {:<38}", "", dispatch_shape_text(sh))?;
                    }
                    if let Some(code) = code_text(d.code_file.as_deref(), &d.bundles) {
                        writeln!(s, "  {:>10}  {code}", "")?;
                    }
                }
                writeln!(s, "\n  API launches vs queue dispatches:")?;
                writeln!(s, "  {:>8} {:>10}  {:<50} why they differ", "launches", "dispatches", "kernel")?;
                for r in &p.crosscheck {
                    let name = if r.demangled.is_empty() { &r.kernel } else { &r.demangled };
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
            let m = &p.memory;
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
                    writeln!(s, "    memcpy {kind}: {} calls ({} failed), {}", c.calls, c.failed, bytes(c.bytes))?;
                }
            }
        }
        if !idle.is_empty() {
            const SHOWN: usize = 20;
            let names: Vec<String> = idle.iter().take(SHOWN).map(|p| format!("{} {}", p.pid, p.comm)).collect();
            let more = idle.len().saturating_sub(SHOWN);
            let more = if more > 0 { format!(" and {more} more (all in --json)") } else { String::new() };
            writeln!(
                s,
                "\n{} process{} with no GPU activity: {}{more}",
                idle.len(),
                if idle.len() == 1 { "" } else { "es" },
                names.join(", ")
            )?;
        }
        writeln!(s, "\nlosses: {} records dropped (ring buffer full)", self.drops_total)?;
        let nonzero: Vec<String> =
            self.counters.iter().filter(|(_, v)| **v > 0).map(|(k, v)| format!("{k} {v}")).collect();
        if !nonzero.is_empty() {
            writeln!(s, "counted: {}", nonzero.join(", "))?;
        }
        Ok(())
    }
}

/// "(code: FILE bundle 0042)" for a kernel whose code file and bundles are known.
fn code_text(file: Option<&str>, bundles: &[String]) -> Option<String> {
    let file = file.filter(|_| !bundles.is_empty())?;
    let which = if bundles.len() == 1 { "bundle" } else { "bundles" };
    Some(format!("(code: {file} {which} {})", bundles.join(", ")))
}

fn dispatch_shape_text(s: &DispatchShape) -> String {
    format!(
        "({},{},{}) / ({},{},{}) ({}) [{}]",
        s.workgroup[0], s.workgroup[1], s.workgroup[2], s.grid[0], s.grid[1], s.grid[2], s.group_segment, s.count
    )
}

fn error_text(code: i64) -> String {
    match hip_error_name(code) {
        Some(name) => format!("{name} ({code})"),
        None => format!("error {code}"),
    }
}

/// How a probe's symbol is shown: the function's name, "(C++ export)" when the symbol is its mangled twin.
fn probe_label(symbol: &str) -> String {
    match ApiFunc::from_symbol(symbol) {
        Some(f) if f.name() != f.symbol() => format!("{} (C++ export)", f.name()),
        Some(f) => f.name().to_owned(),
        None => symbol.to_owned(),
    }
}

fn shape_text(s: &Shape) -> String {
    let unit = if s.grid_unit == GridUnit::WorkItems { " wi" } else { "" };
    format!(
        "({},{},{}){unit} x ({},{},{}) ({}) [{}]",
        s.grid[0], s.grid[1], s.grid[2], s.block[0], s.block[1], s.block[2], s.shmem, s.count
    )
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

/// The name of a `hipError_t` value (the subset a launch, copy or allocation returns).
const fn hip_error_name(code: i64) -> Option<&'static str> {
    Some(match code {
        0 => "hipSuccess",
        1 => "hipErrorInvalidValue",
        2 => "hipErrorOutOfMemory",
        3 => "hipErrorNotInitialized",
        9 => "hipErrorInvalidConfiguration",
        13 => "hipErrorInvalidSymbol",
        17 => "hipErrorInvalidDevicePointer",
        21 => "hipErrorInvalidMemcpyDirection",
        35 => "hipErrorInsufficientDriver",
        52 => "hipErrorMissingConfiguration",
        98 => "hipErrorInvalidDeviceFunction",
        100 => "hipErrorNoDevice",
        101 => "hipErrorInvalidDevice",
        200 => "hipErrorInvalidImage",
        201 => "hipErrorInvalidContext",
        209 => "hipErrorNoBinaryForGpu",
        400 => "hipErrorInvalidHandle",
        500 => "hipErrorNotFound",
        600 => "hipErrorNotReady",
        700 => "hipErrorIllegalAddress",
        701 => "hipErrorLaunchOutOfResources",
        719 => "hipErrorLaunchFailure",
        _ => return None,
    })
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
