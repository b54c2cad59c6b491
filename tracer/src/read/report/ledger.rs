//! A process's ledger of GPU libraries: each library it mapped, whether it called it (how often, which
//! functions), dispatched kernels whose code it holds, and the launches made from it.
#![expect(
    clippy::float_arithmetic,
    clippy::cast_precision_loss,
    reason = "a time into the recording is shown as a decimal fraction of nanoseconds"
)]

use std::collections::{BTreeMap, BTreeSet, HashMap};

use tracer_common::api::Library;

use super::{FunctionCalls, KernelReport, MapStatus, MappedReport, Report};
use crate::trace;

/// What a process's GPU libraries did: mapped, called (how often, which functions), dispatched (kernels
/// whose code each holds, and their executions), and the launches each made.
pub(super) struct Ledger<'a> {
    pub(super) report: &'a Report,
    pub(super) start: u64,
    pub(super) kernels: &'a [KernelReport],
    pub(super) tallied: &'a HashMap<Library, u64>,
    pub(super) called: &'a BTreeSet<u32>,
    pub(super) lib_calls: &'a BTreeMap<u32, u64>,
    pub(super) entry_calls: &'a BTreeMap<u32, BTreeMap<String, u64>>,
    pub(super) sites: &'a BTreeMap<String, (u64, u64)>,
}

impl Ledger<'_> {
    pub(super) fn rows(&self, seen_maps: Vec<trace::Mapping>) -> Vec<MappedReport> {
        seen_maps.into_iter().map(|m| self.row(m)).collect()
    }

    fn row(&self, m: trace::Mapping) -> MappedReport {
        let probed = m.lib.and_then(|id| self.report.libraries.iter().find(|l| l.id == id));
        let counted = self.report.counted_libraries.iter().find(|l| (l.dev, l.inode) == (m.dev, m.inode));
        let mut functions: Vec<FunctionCalls> = Vec::new();
        let calls = if let Some(copy) = probed {
            let runtime = trace::runtimes::runtime_of(&copy.path);
            Some(self.lib_calls.get(&copy.id).copied().unwrap_or(0) + self.tallied.get(&runtime).copied().unwrap_or(0))
        } else if let Some(lib) = counted.filter(|l| l.attached_ts.is_some()) {
            if let Some(by_function) = self.entry_calls.get(&lib.id) {
                functions = by_function
                    .iter()
                    .map(|(function, &calls)| FunctionCalls { function: function.clone(), calls })
                    .collect();
                functions.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.function.cmp(&b.function)));
            }
            Some(functions.iter().map(|f| f.calls).sum())
        } else {
            None
        };
        let attached =
            [probed.and_then(|l| l.attached_ts), counted.and_then(|l| l.attached_ts)].into_iter().flatten().next();
        let (kernels, executions) = self
            .kernels
            .iter()
            .filter(|k| k.code_file.as_deref() == Some(m.path.as_str()))
            .fold((0, 0), |(n, e), k| (n + 1, e + k.executions));
        let (launches_from, launches_failed) = self.sites.get(&m.path).copied().unwrap_or((0, 0));
        let status = match (m.lib, calls) {
            (Some(id), _) if self.called.contains(&id) => MapStatus::Called,
            (_, Some(n)) if n > 0 => MapStatus::Called,
            _ if executions > 0 || launches_from > launches_failed => MapStatus::Dispatched,
            _ if launches_from > 0 => MapStatus::LaunchesFailed,
            (_, Some(_)) => MapStatus::MappedOnly,
            (_, None) => MapStatus::NotProbed,
        };
        MappedReport {
            status,
            origin: probed.map(|l| l.origin),
            // Seconds into the recording before which this process's calls of it were not seen.
            unseen_before_s: m
                .probed_at
                .or(attached)
                .filter(|_| m.probed_late)
                .map(|at| at.saturating_sub(self.start) as f64 / 1e9),
            runtime_not_probed: m.not_probed,
            lib: m.lib,
            calls,
            functions,
            kernels,
            executions,
            launches_from,
            launches_failed,
            root: m.root,
            path: m.path,
        }
    }
}

/// The libraries a process mapped: as its maps said, and each probed copy it called, which it mapped even
/// if it ended before its maps were read.
pub(super) fn seen_maps(
    mut mapped: Vec<trace::Mapping>,
    called: &BTreeSet<u32>,
    libraries: &[trace::Library],
    pid: u32,
) -> Vec<trace::Mapping> {
    for id in called {
        if !mapped.iter().any(|m| m.lib == Some(*id))
            && let Some(l) = libraries.iter().find(|l| l.id == *id)
        {
            mapped.push(trace::Mapping {
                ts: 0,
                pid,
                path: l.path.clone(),
                dev: l.dev,
                inode: l.inode,
                lib: Some(*id),
                gpu: Some(trace::GpuLibrary::Runtime),
                probed_late: false,
                probed_at: None,
                not_probed: false,
                root: l.root.clone(),
            });
        }
    }
    mapped
}
