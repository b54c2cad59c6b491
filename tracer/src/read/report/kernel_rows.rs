//! A process's kernel table: each kernel's launches, graph replays and (where HIP's launches were left to the
//! doorbell) dispatches, classified by name and shape, one row per name.

use std::collections::{BTreeMap, HashMap};

use super::{KernelClass, KernelReport, Shape};
use crate::{trace, trace::event::GridUnit, trace::model::Index};

/// (grid, block, grid unit, shmem).
pub(super) type ShapeKey = ([u32; 3], [u32; 3], GridUnit, u64);

#[derive(Default)]
pub(super) struct KernelAcc {
    pub(super) report: KernelReport,
    pub(super) shapes: HashMap<ShapeKey, u64>,
    /// Dispatches read at a doorbell that count as its executions (HIP's launches left unprobed).
    pub(super) dispatched: u64,
}

pub(super) fn shapes(m: HashMap<ShapeKey, u64>) -> Vec<Shape> {
    let mut v: Vec<Shape> = m
        .into_iter()
        .map(|((grid, block, grid_unit, shmem), count)| Shape { grid, block, grid_unit, shmem, count })
        .collect();
    v.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.cmp(b)));
    v
}

/// A process's kernel rows: classified by name and shape, executions counted (launches that neither failed
/// nor were captured, graph replays', and the dispatches that stand for HIP's launches where those were left
/// to the doorbell), one row per name, most executions first.
pub(super) fn kernel_rows(
    kernels: BTreeMap<u32, KernelAcc>,
    outcomes: &BTreeMap<u32, (u64, u64, u64)>,
    steps: &crate::read::phase::ProcessSteps,
) -> Vec<KernelReport> {
    let kernels: Vec<KernelReport> = kernels
        .into_values()
        .map(|k| {
            let shapes = shapes(k.shapes);
            // The batch from the most frequent launch shape where the shape refines it (MMQ's grid).
            let class = match shapes.first() {
                Some(sh) => KernelClass::of_shape(&k.report.name, sh),
                None => KernelClass::of(&k.report.name),
            };
            let (launched, failed, captured) = outcomes.get(&k.report.id).copied().unwrap_or_default();
            let replayed = steps.graphs.replayed.get(&k.report.id).copied().unwrap_or(0);
            // Saturating: the counts come from a file.
            let executions = launched
                .saturating_sub(failed)
                .saturating_sub(captured)
                .saturating_add(replayed)
                .saturating_add(k.dispatched);
            // A kernel's exact column counts in the view its executions come from.
            let ne11 = steps.columns(k.report.from_dispatches).get(&k.report.id).cloned().unwrap_or_default();
            KernelReport { shapes, class, executions, graph_executions: replayed, ne11, ..k.report }
        })
        .collect();
    let mut kernels = super::merge::merge_by_name(kernels);
    kernels.sort_by(|a, b| b.executions.cmp(&a.executions).then(b.launches.cmp(&a.launches)).then(a.id.cmp(&b.id)));
    kernels
}

/// Where a kernel named from the loader's list keeps its code: the file (and offload bundles) of the process's
/// other records of the same name, from its registration or its module's load (rocBLAS's Tensile files), when
/// they agree; none when there is none, or when two files define that name.
pub(super) fn code_of_name(index: &Index, pid: u32, name: &str) -> (Option<String>, Vec<String>) {
    if name.is_empty() {
        return (None, Vec::new());
    }
    let mut known = index.kernels_of(pid).filter(|r| r.name == name && r.code_file.is_some());
    let Some(first) = known.next() else { return (None, Vec::new()) };
    let mut best = first;
    for r in known {
        if r.code_file != first.code_file {
            return (None, Vec::new());
        }
        if best.bundles.is_empty() {
            best = r;
        }
    }
    (best.code_file.clone(), best.bundles.clone())
}

/// A kernel's entry in a process's table, named from its kernel record (unnamed, with the handle
/// launched, when there is none).
pub(super) fn kernel_acc(id: u32, index: &Index, handle: u64) -> KernelAcc {
    let mut k = KernelAcc::default();
    k.report.id = id;
    if let Some(n) = index.kernel(id) {
        k.report.name.clone_from(&n.name);
        k.report.demangled.clone_from(&n.demangled);
        k.report.source = n.source;
        k.report.handle = n.handle;
        k.report.code_file.clone_from(&n.code_file);
        k.report.bundles.clone_from(&n.bundles);
        k.report.caller.clone_from(&n.caller);
    } else {
        k.report.source = trace::Source::Unnamed;
        k.report.handle = handle;
    }
    k
}
