//! `tracer export --format dot`: the GPU libraries each process mapped as a Graphviz graph, one cluster
//! per process, with the dependency edges (`DT_NEEDED`) between them and each library coloured by what
//! the recording saw it do: dispatched (kernels of its code ran, or its code made launches), called, mapped
//! only, or not counted. Each label carries its counts. `dot -Tsvg` renders it.
//!
//! The edges are read from the library files at export time (bounded reads, as everywhere): a file no
//! longer there, or read on another machine, gives its node without edges (said in a comment).

use std::{io::Write, path::Path};

use anyhow::Result;

use crate::{
    os::files::CodeFile,
    read::report::{MapStatus, MappedReport, Report},
    trace,
};

/// Fill colour and style by what the library did.
const fn look(m: &MappedReport) -> (&'static str, &'static str, &'static str) {
    if m.executions > 0 || m.launches_from > m.launches_failed {
        ("dispatched", "#7bc96f", "filled")
    } else {
        match m.status {
            MapStatus::Called => ("called", "#f5d76e", "filled"),
            MapStatus::Dispatched => ("dispatched", "#7bc96f", "filled"),
            MapStatus::LaunchesFailed => ("launches failed", "#f4a6a6", "filled"),
            MapStatus::MappedOnly => ("mapped only", "#d9d9d9", "filled"),
            MapStatus::NotProbed => ("not counted", "#ffffff", "dashed"),
        }
    }
}

/// A string as a DOT quoted string's content.
fn quoted(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn label(m: &MappedReport) -> String {
    let name = m.path.rsplit('/').next().unwrap_or(&m.path);
    let (what, _, _) = look(m);
    let mut lines = vec![name.to_owned(), what.to_owned()];
    if let Some(n) = m.calls {
        lines.push(format!("{n} calls"));
    }
    if m.kernels > 0 {
        lines.push(format!("{} kernels, {} executions", m.kernels, m.executions));
    }
    if m.launches_from > 0 {
        lines.push(format!("{} launches made, {} failed", m.launches_from, m.launches_failed));
    }
    lines.iter().map(|l| quoted(l)).collect::<Vec<_>>().join("\\n")
}

/// Writes the graph of the trace at `input`.
pub(crate) fn dot(input: &trace::Input, out: &mut dyn Write) -> Result<Vec<String>> {
    let report = Report::from_input(input)?;
    writeln!(out, "digraph gpu_libraries {{")?;
    writeln!(out, "  rankdir=LR;")?;
    writeln!(out, "  node [shape=box, fontname=\"monospace\", fontsize=10];")?;
    for p in report.processes.iter().filter(|p| !p.mapped.is_empty()) {
        writeln!(out, "  subgraph cluster_{} {{", p.pid)?;
        writeln!(out, "    label=\"process {} {}\";", p.pid, quoted(&p.comm))?;
        for (i, m) in p.mapped.iter().enumerate() {
            let (_, fill, style) = look(m);
            writeln!(out, "    \"p{}_{i}\" [label=\"{}\", fillcolor=\"{fill}\", style=\"{style}\"];", p.pid, label(m))?;
        }
        for (i, m) in p.mapped.iter().enumerate() {
            let Some(deps) = CodeFile::user(Path::new(&m.path)).ok().and_then(|f| crate::os::elf::dependencies(&f))
            else {
                writeln!(
                    out,
                    "    // {}: not readable here, its dependencies are not drawn",
                    quoted(&m.path).replace('\n', " ")
                )?;
                continue;
            };
            for needed in &deps.needed {
                let target = p
                    .mapped
                    .iter()
                    .position(|t| t.path.rsplit('/').next().is_some_and(|n| n.starts_with(needed.as_str())));
                if let Some(j) = target.filter(|&j| j != i) {
                    writeln!(out, "    \"p{0}_{i}\" -> \"p{0}_{j}\";", p.pid)?;
                }
            }
        }
        writeln!(out, "  }}")?;
    }
    writeln!(out, "}}")?;
    Ok(report.trace.warnings().into_iter().chain(report.trace.repeats_cut.sentence()).collect())
}
