//! The header: the first line of every trace file, and the options the recording was made with.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The first line: what wrote the file, on which host, from when, with which options.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Always [`super::FORMAT`].
    pub format: String,
    pub schema: u32,
    pub tracer_version: String,
    pub host: String,
    pub kernel_release: String,
    /// Wall-clock time at the start, Unix nanoseconds.
    pub start_unix_ns: u64,
    /// `CLOCK_MONOTONIC` at the same instant: every `ts` in the file is on this clock, in nanoseconds.
    pub start_mono_ns: u64,
    pub options: Options,
    /// Units of the numeric fields, spelled out.
    pub units: BTreeMap<String, String>,
    /// A part of a rotated recording: which, and how many records after this header restate what earlier
    /// parts said (libraries, probes, live processes, their kernels, mappings and queues), so that the part
    /// reads alone; a reader of the whole recording skips them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<Part>,
}

/// Where a file lies in a rotated recording.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    /// 0 for the first file.
    pub index: u32,
    pub restated: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Options {
    /// PIDs given with --pid (empty: see `command` and `filter`).
    pub pids: Vec<u32>,
    /// The command started with `-- COMMAND ARGS`, if any.
    pub command: Vec<String>,
    /// Libraries given with --lib.
    pub libs: Vec<String>,
    pub duration_s: Option<f64>,
    /// "pid" when the kernel filters by PID, "all" when every process is recorded.
    pub filter: Filter,
    pub ring_bytes: u32,
    /// --ollama: the `ollama serve` processes followed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ollama_servers: Vec<u32>,
    /// Kernel tracepoint groups for the GPU scheduler view, and whether this kernel has them ("amdgpu",
    /// "`gpu_scheduler`").
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kernel_tracepoints: BTreeMap<String, bool>,
    /// The GPU scheduler tracepoints attached for job times (`gpu_scheduler`: queue, run and done, in that
    /// order); empty when this kernel has none tracer knows, and in traces before job times.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub job_tracepoints: Vec<String>,
    /// Synchronizations and async copies to the device were not probed (no records, no tallies): the
    /// default since `--all-calls` came (earlier, `--lean`); a step without a batch ends at the copy toward
    /// the host.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lean: bool,
    /// Processes tracer was not asked to follow were written with `argv[0]` alone (`--private-argv`, the
    /// default when recording every process); absent in traces before it was said.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub private_argv: bool,
    /// The runtime probes were placed in the recorded processes alone (a multi-point link per process,
    /// Linux 6.10 and later): other processes mapping the same copies did not trap. Absent: every process
    /// mapping a probed copy trapped, and the programs filtered.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub probes_per_process: bool,
    /// HIP's launch functions were left unprobed: an AMD GPU was present, and each dispatch was read at its
    /// queue's doorbell alone (one trap); launches, their sites and failures are not in the trace
    /// (`record --hip-launches` probes them too). Absent: they were probed where found.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub launches_at_doorbell: bool,
    /// A doorbell store's packets were read whole, up to the ring (`packets_cut`: only packets the ring had
    /// overwritten). Absent: a trace of a build that read at most 16 a store (`packets_cut`: the rest).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub doorbell_reads_all: bool,
    /// Launches that repeat exactly the launch some places before them on their thread were counted into
    /// runs, each written as one `repeat` line (the default since runs came; readers keep each thread's last
    /// launches to expand them). Absent: every launch has its own line (`record --every-launch`, earlier
    /// traces).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub repeats: bool,
}

/// Which processes a recording traces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Filter {
    /// The processes named (--pid, the command, Ollama's) and their children: a PID map in the kernel.
    Pid,
    /// Every process that calls a probed library, except the tracer.
    #[default]
    All,
    /// A value this build does not know (a trace from a later build).
    #[serde(other)]
    Unknown,
}

impl Filter {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pid => "pid",
            Self::All => "all",
            Self::Unknown => "unknown",
        }
    }
}
