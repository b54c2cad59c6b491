//! The events tests start from.

use std::collections::BTreeMap;

use super::{ApiFunc, GridUnit, Launch};

impl Launch {
    /// The launch tests start from: a `hipLaunchKernel` by `pid` (on thread `pid`) at `ts`, of `kernel`, one
    /// block of one thread, that returned 0; tests change what they look at (`Launch { grid, ..base }`).
    pub(crate) fn for_test(pid: u32, kernel: Option<u32>, ts: u64) -> Self {
        Self {
            ts,
            pid,
            tid: pid,
            lib: 0,
            api: ApiFunc::HipLaunchKernel,
            kernel,
            handle: 0,
            grid: [1; 3],
            block: [1; 3],
            grid_unit: GridUnit::Blocks,
            shmem: 0,
            stream: 0,
            ret: 0,
            dur: 0,
            captured: false,
            entry_only: false,
            params: BTreeMap::new(),
            caller: 0,
            in_runs: false,
        }
    }
}
