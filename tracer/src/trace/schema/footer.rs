//! The end of a recording and its losses: the footer, the checkpoints written every second, the eBPF
//! programs' own time.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Stop;

/// The last line: what was written and lost, why the recording stopped.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Footer {
    pub end_mono_ns: u64,
    /// Records written, by type (this footer excluded).
    pub records: BTreeMap<String, u64>,
    /// Records lost because the ring buffer was full, by record kind, one count per CPU.
    pub drops: BTreeMap<String, Vec<u64>>,
    /// Other losses and oddities counted by the probes ("`stash_full`", "`return_without_entry`",
    /// "`filter_full`") and by user space ("undecodable", "`name_truncated`", "`name_fault`", ...).
    pub counters: BTreeMap<String, u64>,
    /// With `record --program-stats`: each eBPF program that ran, by name, as the kernel timed it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub programs: BTreeMap<String, ProgramStat>,
    pub stop: Stop,
}

/// The recording's losses so far, written every second: a recording that ends without its footer (killed,
/// its disk full) still says how many records it had lost by its last checkpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub ts: u64,
    /// Records lost since the start, by kind (the ring buffer's and tracer's queue's, as the footer names
    /// them), summed over CPUs; kinds with none left out.
    pub drops: BTreeMap<String, u64>,
}

impl Checkpoint {
    /// Every record lost by then, in all (saturating, as [`Footer::total_drops`]).
    pub(crate) fn total_drops(&self) -> u64 {
        self.drops.values().fold(0u64, |sum, &n| sum.saturating_add(n))
    }
}

/// One eBPF program's runs and the time the kernel measured them taking, in all (the trap that ran it
/// is not included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramStat {
    pub runs: u64,
    pub ns: u64,
}

impl Footer {
    /// Every record lost, in all (saturating: a footer is read from a file, whatever its counts say).
    pub fn total_drops(&self) -> u64 {
        self.drops.values().flatten().fold(0u64, |sum, &n| sum.saturating_add(n))
    }
}
