//! API launches joined with queue dispatches by kernel name, each difference explained.

use std::collections::{BTreeMap, HashMap};

use super::{CrossRow, DispatchReport, DispatchShape, KernelClass};
use crate::trace::{self, model::Index};

/// (workgroup, grid, group segment) -> count.
type DispatchShapes = HashMap<([u16; 3], [u32; 3], u32), u64>;
/// kernel object -> (kernel id, dispatches, kernel object, shapes).
pub(super) type DispatchAcc = BTreeMap<u64, (Option<u32>, u64, u64, DispatchShapes)>;

/// The queue's view of one process, and its join with the API's launches by kernel name.
pub(super) fn queue_view(
    index: &Index,
    dispatches: DispatchAcc,
    launches: &BTreeMap<u32, (u64, u64, u64)>,
    graph_launches: u64,
) -> (Vec<DispatchReport>, Vec<CrossRow>) {
    let mut rows: BTreeMap<String, CrossRow> = BTreeMap::new();
    let name_of = |id: u32| index.kernel(id).filter(|k| !k.name.is_empty());
    for (&id, &(n, failed, captured)) in launches {
        let Some(k) = name_of(id) else { continue };
        let r = rows.entry(k.name.clone()).or_insert_with(|| CrossRow {
            kernel: k.name.clone(),
            demangled: k.demangled.clone(),
            ..Default::default()
        });
        r.api_launches += n;
        r.api_failed += failed;
        r.api_captured += captured;
    }
    let mut reports = Vec::new();
    for (object, (kernel, count, _, shapes)) in dispatches {
        let k = kernel.and_then(name_of);
        let key = k.map_or_else(|| format!("kernel_object {object:#x}"), |k| k.name.clone());
        let r = rows.entry(key.clone()).or_insert_with(|| CrossRow {
            kernel: key.clone(),
            demangled: k.map(|k| k.demangled.clone()).unwrap_or_default(),
            ..Default::default()
        });
        r.queue_dispatches += count;
        let mut shapes: Vec<DispatchShape> = shapes
            .into_iter()
            .map(|((workgroup, grid, group_segment), count)| DispatchShape { workgroup, grid, group_segment, count })
            .collect();
        shapes.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.cmp(b)));
        // The queue names a kernel object; the process's registration or module of the same name knows its file.
        let (code_file, bundles) =
            k.map(|k| super::kernel_rows::code_of_name(index, k.pid, &k.name)).unwrap_or_default();
        reports.push(DispatchReport {
            code_file,
            bundles,
            kernel,
            class: KernelClass::of(k.map_or("", |k| k.name.as_str())),
            name: k.map(|k| k.name.clone()).unwrap_or_default(),
            demangled: k.map(|k| k.demangled.clone()).unwrap_or_default(),
            source: kernel.and_then(|id| index.kernel(id)).map_or(trace::Source::Unnamed, |k| k.source),
            kernel_object: object,
            dispatches: count,
            shapes,
            ne11: BTreeMap::new(),
        });
    }
    reports.sort_by(|a, b| b.dispatches.cmp(&a.dispatches).then(a.kernel_object.cmp(&b.kernel_object)));
    let any_dispatch = !reports.is_empty();
    let mut out: Vec<CrossRow> = rows.into_values().collect();
    for r in &mut out {
        r.explanation = explain(r, graph_launches, any_dispatch);
    }
    out.sort_by_key(|r| std::cmp::Reverse(r.queue_dispatches.max(r.api_launches)));
    (reports, out)
}

fn explain(r: &CrossRow, graph_launches: u64, queue_seen: bool) -> String {
    let expected = r.api_launches.saturating_sub(r.api_failed + r.api_captured);
    if expected == r.queue_dispatches {
        let mut notes = Vec::new();
        if r.api_failed > 0 {
            notes.push(format!("{} launches failed and reached no queue", r.api_failed));
        }
        if r.api_captured > 0 {
            notes.push(format!("{} launches were captured into a graph", r.api_captured));
        }
        return notes.join("; ");
    }
    let mut why = Vec::new();
    if r.api_failed > 0 {
        why.push(format!("{} launches failed and reached no queue", r.api_failed));
    }
    if r.api_captured > 0 {
        why.push(format!("{} launches were captured into a graph (dispatched at replay)", r.api_captured));
    }
    if r.queue_dispatches > expected {
        let extra = r.queue_dispatches - expected;
        if r.kernel.starts_with("kernel_object ") {
            why.push(format!("{extra} dispatches of an object loaded before the tracer started: unnamed"));
        } else if r.kernel.starts_with("__amd_rocclr_") {
            why.push(format!("{extra} runtime-internal (copy/fill) dispatches, never a HIP launch"));
        } else if graph_launches > 0 {
            why.push(format!("{extra} dispatches from graph replays ({graph_launches} graph launches)"));
        } else if r.kernel.starts_with("Cijk_") || r.kernel.contains("hipblaslt") || r.api_launches == 0 {
            why.push(format!(
                "{extra} dispatches with no HIP launch probed: a library kernel or an unprobed entry point"
            ));
        } else {
            why.push(format!("{extra} dispatches more than launches"));
        }
    } else if !queue_seen {
        why.push("no queue dispatch seen at all: no HSA runtime probed, or no GPU".to_owned());
    } else {
        why.push(format!("{} launches reached no queue", expected - r.queue_dispatches));
    }
    why.join("; ")
}
