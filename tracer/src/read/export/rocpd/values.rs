//! The values rows are made of: ids given once per key, thread row ids, a call's category and vendor, an
//! INTEGER column's value, and which executions the export counts. Below the visitor and the rows.

use std::collections::{HashMap, HashSet, hash_map::Entry};

use anyhow::Result;
use rusqlite::{Statement, ToSql};
use tracer_common::api::Library;

use crate::read::phase::{Execution, View};

/// The vendor of the GPU behind a runtime's calls, where the runtime says it.
pub(super) const fn vendor(lib: Library) -> Option<&'static str> {
    match lib {
        Library::Cuda | Library::CudaRuntime => Some("NVIDIA"),
        Library::Hip | Library::Hsa => Some("AMD"),
        _ => None,
    }
}

/// An API call's `category`, by its library (rocprofv3's names where it has the library).
pub(super) const fn category(lib: Library) -> &'static str {
    match lib {
        Library::Hip => "HIP_RUNTIME_API",
        Library::Hsa => "HSA_CORE_API",
        Library::Cuda => "CUDA_DRIVER_API",
        Library::CudaRuntime => "CUDA_RUNTIME_API",
        Library::Llama => "LLAMA_API",
        Library::Ggml => "GGML_API",
        Library::GgmlVulkan => "GGML_VULKAN_API",
        Library::Vulkan => "VULKAN_API",
    }
}

/// Ids given to rows that stand for what the trace does not hold (a kernel with no record, a thread id
/// taken by another process) start here, past every id the trace uses (32 bits).
pub(super) const OWN_IDS: i64 = 1 << 32;

/// A value for an INTEGER column, as `SQLite` holds them.
pub(super) const fn handle(v: u64) -> i64 {
    // Handles and addresses bit for bit (a value past 2^63 reads negative), as the Parquet export stores them.
    i64::from_ne_bytes(v.to_ne_bytes())
}

/// Whether an execution is one the report counts (see the module's documentation).
pub(super) const fn counted(e: &Execution, at_doorbell: bool) -> bool {
    match e.view {
        View::Launch => e.ok,
        View::GraphReplay => true,
        View::Dispatch => at_doorbell,
    }
}

/// A statement prepared once, run for each row.
pub(super) fn run(stmt: &mut Statement<'_>, values: &[&dyn ToSql]) -> Result<()> {
    stmt.execute(values)?;
    Ok(())
}

/// Ids by key, each new key given the next (from 1), told whether it is new.
#[derive(Default)]
pub(super) struct Ids<K> {
    ids: HashMap<K, i64>,
}

impl<K: std::hash::Hash + Eq> Ids<K> {
    pub(super) fn get(&mut self, key: K) -> (i64, bool) {
        let next = i64::try_from(self.ids.len()).unwrap_or(i64::MAX).saturating_add(1);
        match self.ids.entry(key) {
            Entry::Occupied(e) => (*e.get(), false),
            Entry::Vacant(e) => (*e.insert(next), true),
        }
    }
}

/// Thread row ids: a thread's own id, unless another process had a thread of that id (the ids came back).
#[derive(Default)]
pub(super) struct Threads {
    ids: HashMap<(u32, u32), i64>,
    taken: HashSet<u32>,
    own: i64,
}

impl Threads {
    pub(super) fn get(&mut self, pid: u32, tid: u32) -> (i64, bool) {
        if let Some(&id) = self.ids.get(&(pid, tid)) {
            return (id, false);
        }
        let id = if self.taken.insert(tid) {
            i64::from(tid)
        } else {
            self.own = self.own.saturating_add(1);
            OWN_IDS.saturating_add(self.own)
        };
        self.ids.insert((pid, tid), id);
        (id, true)
    }
}
