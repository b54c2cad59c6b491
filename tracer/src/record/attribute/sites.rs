//! Launch sites: which file's code made each launch of a process (the return address the one-trap launch
//! probe read), looked up once per address, written as `launch_sites` records when the process ends.

use std::collections::BTreeMap;

use tracer_common::api::Library;

use crate::{
    record::names::Of,
    trace::event::Launch,
    trace::{self, Line},
};

/// One process's launches by return address.
#[derive(Default)]
pub(super) struct Sites(crate::os::FastMap<u64, Site>);

/// The launches made from one return address.
struct Site {
    /// The file holding the address (None: not found).
    file: Option<String>,
    /// That file is the CUDA runtime: the driver launches it makes are counted as the runtime's.
    cuda_runtime: bool,
    launches: u64,
    failed: u64,
}

impl Sites {
    /// Counts a launch by its return address (0: not read). A CUDA driver launch made by libcudart is not
    /// counted: the runtime launch that made it was, from the code that called the runtime.
    pub(super) fn count(&mut self, names: &mut Of<'_>, l: &Launch) {
        self.count_n(names, l, 1);
    }

    /// Counts `n` launches like `l` (a run's copies of it).
    pub(super) fn count_n(&mut self, names: &mut Of<'_>, l: &Launch, n: u32) {
        if l.caller == 0 || n == 0 {
            return;
        }
        // The file is looked up, and named a runtime or not, once per address.
        let site = self.0.entry(l.caller).or_insert_with(|| {
            let file = names.file_of(l.caller, l.ts).map(|(file, _)| file);
            let cuda_runtime = file.as_deref().is_some_and(|f| trace::runtimes::runtime_of(f) == Library::CudaRuntime);
            Site { file, cuda_runtime, launches: 0, failed: 0 }
        });
        if !(l.api.library() == Library::Cuda && site.cuda_runtime) {
            site.launches += u64::from(n);
            // A one-trap launch has no return value: it is counted as made, never as failed.
            if !l.entry_only && l.ret != 0 {
                site.failed += u64::from(n);
            }
        }
    }

    /// The file holding a return address counted before.
    pub(super) fn file(&self, caller: u64) -> Option<String> {
        self.0.get(&caller)?.file.clone()
    }

    /// The process's launches by the file that made them.
    pub(super) fn records(&self, pid: u32) -> Vec<Line> {
        let mut by_file: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        for site in self.0.values().filter(|s| s.launches > 0) {
            let e = by_file.entry(site.file.as_deref().unwrap_or("")).or_default();
            e.0 += site.launches;
            e.1 += site.failed;
        }
        by_file
            .into_iter()
            .map(|(path, (launches, failed))| {
                Line::LaunchSites(trace::LaunchSites { pid, path: path.to_owned(), launches, failed })
            })
            .collect()
    }
}
