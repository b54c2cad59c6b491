//! What a trace file holds: each line, a [`Line`]. Events come from [`crate::trace::event`] as they are;
//! the other records describe the recording (header, libraries, probes, footer) and what attribution
//! learnt (processes, kernels, mappings, exits). Documented for users in `docs/trace-format.md`;
//! [`SCHEMA`] changes whenever a field changes meaning.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod footer;
mod header;
mod kernels;
mod role;
pub use footer::*;
pub use header::*;
pub use kernels::*;
pub use role::*;

pub use crate::trace::event::{
    ApiFunc, Call, Config, Dispatch, GraphInput, InputKind, Ioctl, Job, JobStage, Launch, Queue, Repeat, SeqRun,
    StepBatch,
};

/// The value of the header's `format` field.
pub const FORMAT: &str = "tracer-trace";
/// Version of the record schema this build writes and reads.
pub const SCHEMA: u32 = 1;

/// The record kinds, declared once: each variant, the type it holds, the `type` its lines carry, the
/// name of its method in the read model's `Visitor`, and, in brackets, what a reader must know of every
/// kind (no kind can be added without deciding them):
/// - its time: `spans(field)`, the moment of activity (a call, a launch, a dispatch...) the recording's span
///   reaches, or the footer's end; `describes`, a record that describes (a process, a name, a mapping, an
///   exit, a tally), whose time, if it has one, is when tracer noted it;
/// - its owner: `pid`, the process in its `pid` field; `recording`, the recording's own;
/// - `closes_steps` where a record of the kind may end its process's inference step (a call toward the host,
///   a batch), `steps_go_on` elsewhere.
///
/// Hands the table to the macro `$then`, which generates what every kind needs: here [`Line`], its tag
/// table and its row ([`Line::spans_to`], [`Line::pid`], [`Line::may_close_step`]), in `model` the visitor.
macro_rules! trace_lines {
    ($then:ident) => {
        $then! {
            Header(Header in Box) = "header" => header [describes, recording, steps_go_on],
            Library(Library) = "library" => library [describes, recording, steps_go_on],
            Probe(Probe) = "probe" => probe [describes, recording, steps_go_on],
            Process(Process) = "process" => process [describes, pid, steps_go_on],
            Kernel(Kernel) = "kernel" => kernel [describes, pid, steps_go_on],
            Launch(Launch) = "launch" => launch [spans(ts), pid, steps_go_on],
            Repeat(Repeat) = "repeat" => repeat [spans(last_ts), pid, steps_go_on],
            Config(Config) = "config" => config [spans(ts), pid, steps_go_on],
            Call(Call in Box) = "call" => call [spans(ts), pid, closes_steps],
            Ioctl(Ioctl) = "ioctl" => ioctl [spans(ts), pid, steps_go_on],
            Mapping(Mapping) = "mapping" => mapping [describes, pid, steps_go_on],
            Queue(Queue) = "queue" => queue [describes, pid, steps_go_on],
            Dispatch(Dispatch) = "dispatch" => dispatch [spans(ts), pid, steps_go_on],
            Exit(Exit) = "exit" => exit [describes, pid, steps_go_on],
            Tally(Tally) = "tally" => tally [describes, pid, steps_go_on],
            EntryLibrary(EntryLibrary) = "entry_library" => entry_library [describes, recording, steps_go_on],
            EntryCalls(EntryCalls) = "entry_calls" => entry_calls [describes, pid, steps_go_on],
            LaunchSites(LaunchSites) = "launch_sites" => launch_sites [describes, pid, steps_go_on],
            GraphExec(GraphExec) = "graph_exec" => graph_exec [describes, pid, steps_go_on],
            Batch(StepBatch) = "batch" => batch [spans(ts), pid, closes_steps],
            Job(Job) = "job" => job [spans(ts), pid, steps_go_on],
            StepCalls(StepCalls) = "step_calls" => step_calls [describes, pid, steps_go_on],
            GraphInput(GraphInput) = "graph_input" => graph_input [spans(ts), pid, steps_go_on],
            CodeDir(CodeDir) = "code_dir" => code_dir [describes, pid, steps_go_on],
            Checkpoint(Checkpoint) = "checkpoint" => checkpoint [describes, recording, steps_go_on],
            Footer(Footer) = "footer" => footer [spans(end_mono_ns), recording, steps_go_on],
        }
    };
}
pub(crate) use trace_lines;

/// The type a [`Line`] variant holds: the kind's own, or, where the table says `in Box`, boxed (the
/// largest kinds, so that a record moved along the data path costs the size of a launch, not of a call).
macro_rules! held {
    ($ty:ident) => { $ty };
    ($ty:ident, $wrap:ident) => { $wrap<$ty> };
}

/// One column of a kind's row, spelled out (an unknown word in the table fails to build).
macro_rules! row {
    (time $r:ident, spans($at:ident)) => {
        Some($r.$at)
    };
    (time $r:ident, describes) => {
        None
    };
    (owner $r:ident, pid) => {
        Some($r.pid)
    };
    (owner $r:ident, recording) => {
        None
    };
    (steps closes_steps) => {
        true
    };
    (steps steps_go_on) => {
        false
    };
}

/// [`Line`], its `type` tags and its fast parse, from the table of kinds.
macro_rules! records {
    ($($variant:ident($ty:ident $(in $wrap:ident)?) = $tag:literal => $method:ident
        [$time:ident $(($at:ident))?, $owner:ident, $steps:ident],)*) => {
        /// One line of a trace file.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "type")]
        pub enum Line {
            $(#[serde(rename = $tag)] $variant(held!($ty $(, $wrap)?)),)*
        }

        /// The `type` of every record kind this build reads.
        pub(crate) const KNOWN_TYPES: &[&str] = &[$($tag,)*];

        impl Line {
            pub const fn type_name(&self) -> &'static str {
                match self {
                    $(Self::$variant(_) => $tag,)*
                }
            }

            /// The moment of activity this record brings the recording's span to (its footer's end, a
            /// repeat's last launch); None for a record that describes.
            pub(crate) fn spans_to(&self) -> Option<u64> {
                match self {
                    $(Self::$variant(_r) => row!(time _r, $time $(($at))?),)*
                }
            }

            /// The process the record belongs to; None for the recording's own (header, libraries, probes,
            /// checkpoints, footer).
            pub(crate) fn pid(&self) -> Option<u32> {
                match self {
                    $(Self::$variant(_r) => row!(owner _r, $owner),)*
                }
            }

            /// A record of this kind may end its process's inference step (a call, by its category; a batch).
            pub(crate) const fn may_close_step(&self) -> bool {
                match self {
                    $(Self::$variant(_) => row!(steps $steps),)*
                }
            }

            /// A line whose `type` is `tag`, read as that record's own type: faster than through the tagged
            /// enum (which buffers every field first), and the only way for records whose maps have number
            /// keys. None for a type this build does not know.
            pub(crate) fn parse_as(tag: &[u8], line: &[u8]) -> Option<serde_json::Result<Self>> {
                match std::str::from_utf8(tag).ok()? {
                    $($tag => Some(serde_json::from_slice::<held!($ty $(, $wrap)?)>(line).map(Self::$variant)),)*
                    _ => None,
                }
            }
        }
    };
}

trace_lines!(records);

/// Where a library copy came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LibOrigin {
    /// Ollama's own `ROCm` bundle (`.../lib/ollama/...`).
    OllamaBundle,
    /// A system install (/opt/rocm, the distribution's library path).
    #[default]
    System,
    /// Named with --lib.
    User,
    /// A value this build does not know (a trace from a later build).
    #[serde(other)]
    Unknown,
}

impl LibOrigin {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::OllamaBundle => "ollama-bundle",
            Self::System => "system",
            Self::User => "user",
            Self::Unknown => "unknown",
        }
    }
}

/// Which programs a probe runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProbeKind {
    /// Entry and return (duration, return value, out-parameters).
    #[default]
    #[serde(rename = "entry+return")]
    EntryReturn,
    /// Entry only (one trap).
    #[serde(rename = "entry")]
    Entry,
    /// Any other value: a probe that was not attached (builds before 2026-11-22 14:47 wrote `""` for a
    /// symbol the library did not export), or a kind from a later build.
    #[serde(other, rename = "unknown")]
    Unknown,
}

/// Why a process record was written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cause {
    /// Traced from the beginning of the recording (a --pid target, the command tracer started).
    #[default]
    Start,
    /// A traced process forked it.
    Fork,
    /// It called exec.
    Exec,
    /// First seen through one of its events.
    Seen,
    /// A value this build does not know (a trace from a later build).
    #[serde(other)]
    Unknown,
}

impl Cause {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::Fork => "fork",
            Self::Exec => "exec",
            Self::Seen => "seen",
            Self::Unknown => "unknown",
        }
    }
}

/// Why recording stopped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stop {
    /// SIGINT or SIGTERM.
    #[default]
    Signal,
    /// `--duration` ran out.
    Duration,
    /// The command after `--` ended.
    CommandExited,
    /// Every --pid process and its children ended.
    TargetsExited,
    /// A part of a rotated recording ended here (`--rotate-size`, `--rotate-every`); the recording goes
    /// on in the next part.
    Rotated,
    /// A value this build does not know (a trace from a later build).
    #[serde(other)]
    Unknown,
}

impl Stop {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Signal => "signal",
            Self::Duration => "duration",
            Self::CommandExited => "command-exited",
            Self::TargetsExited => "targets-exited",
            Self::Rotated => "rotated",
            Self::Unknown => "unknown",
        }
    }
}

/// The enumerations above print as they are written in a trace.
macro_rules! display_as_str {
    ($($t:ty),*) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    )*};
}
display_as_str!(LibOrigin, Role, Source, Stop);

/// A library copy that probes are attached to. `id` is what events carry in `lib`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Library {
    pub id: u32,
    /// The path as the traced process sees it.
    pub path: String,
    pub dev: u64,
    pub inode: u64,
    pub build_id: Option<String>,
    pub origin: LibOrigin,
    /// When its probes were attached (`ts` clock; after `start_mono_ns`: found later; absent in old traces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached_ts: Option<u64>,
    /// The root `path` is in when not tracer's own (a chroot's directory; a container's namespace and root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
}

/// A probe's `error` for a function the default recording leaves out (`record --all-calls` probes it).
pub(crate) const LEAN_UNPROBED: &str = "left unprobed: counted only with --all-calls";

/// A probe's `error` for a HIP launch function left unprobed where each dispatch is read at its doorbell.
pub(crate) const DOORBELL_READS: &str = "left unprobed: an AMD GPU is present, each dispatch is read at its queue's doorbell (--hip-launches probes it too)";

/// Whether a probe's `error` says the recording left its function out on purpose (this spelling, or the
/// `--lean` option's of earlier traces).
pub fn left_unprobed(error: Option<&str>) -> bool {
    matches!(error, Some(LEAN_UNPROBED | "left unprobed by --lean"))
}

/// One attached probe, or one that could not be attached (`error`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probe {
    pub lib: u32,
    pub api: String,
    /// File offset of the probed instruction, when the symbol was found.
    pub offset: Option<u64>,
    pub kind: ProbeKind,
    pub error: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Process {
    pub pid: u32,
    pub ppid: u32,
    /// Start time in clock ticks since boot (/proc/PID/stat field 22): with `pid`, names one process.
    pub start_time: u64,
    pub comm: String,
    pub argv: Vec<String>,
    /// Why this record was written.
    pub cause: Cause,
    pub ts: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    /// A runner's `--model` path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The model's `name:tag` when the path is a blob of the Ollama models directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
}

/// A GPU library mapped by a traced process (the "loaded" side of loaded vs dispatched).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mapping {
    pub ts: u64,
    pub pid: u32,
    pub path: String,
    pub dev: u64,
    pub inode: u64,
    /// The library id when tracer probes this copy; null for libraries it only sees mapped.
    pub lib: Option<u32>,
    /// Why it is a GPU library (absent in traces written before tracer said).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuLibrary>,
    /// This probed copy's probes were attached after this process had loaded it: its calls before the
    /// library's `attached_ts` were not seen.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub probed_late: bool,
    /// When this process's own probes on the copy were placed (probes per process, `probes_per_process`):
    /// with `probed_late`, its calls before then were not seen. Absent: the copy's `attached_ts` holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probed_at: Option<u64>,
    /// A runtime tracer probes, but this copy was not probed (it could not be, or `--lib` named others): none
    /// of its calls were seen.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_probed: bool,
    /// The process's root when not tracer's own ([`Library::root`]): `path` names that root's file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
}

/// Why a mapped file counts among a process's GPU libraries: by what it is, not by its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GpuLibrary {
    /// A GPU runtime or the driver library under one (libamdhip64, libhsa-runtime64, libhsakmt, libcuda,
    /// libcudart, ...).
    Runtime,
    /// It holds GPU code: a fat binary section (`.hip_fatbin`, `.nv_fatbin`, ...).
    Code,
    /// It needs a GPU runtime (`DT_NEEDED` libamdhip64, libhsa-runtime64, libcuda or libcudart).
    UsesRuntime,
    /// A value this build does not know (a trace from a later build).
    #[serde(other)]
    Unknown,
}

/// A traced process ended.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exit {
    pub ts: u64,
    pub pid: u32,
    /// Exit status when the tracer started the process itself (`-- COMMAND`); otherwise null.
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

/// Calls of one function by one process that the kernel counted instead of writing one by one
/// (synchronizations that end no step, async copies to the device), written at the end of the recording.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    pub pid: u32,
    pub api: ApiFunc,
    pub calls: u64,
    /// The sizes the calls passed, summed (copies; 0 otherwise).
    pub bytes: u64,
}

/// A GPU library (not a probed runtime) whose exported C functions tracer counts calls of: each one a
/// uprobe of one multi-point link, counted per process in the kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryLibrary {
    pub id: u32,
    /// The path as the process that led tracer to it saw it.
    pub path: String,
    pub dev: u64,
    pub inode: u64,
    /// Exported functions probed (one per address: aliases are counted under the first name).
    pub functions: u32,
    /// Exported functions not probed: C++ symbols (`_Z...`) and reserved names (`_init`, `__*`), whose calls
    /// inside the library would cost a trap each without naming an entry point of its API.
    pub not_probed: u32,
    /// When the link was created; null when it could not be (see `error`).
    pub attached_ts: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Calls of one exported function of an [`EntryLibrary`] by one process since the link was created,
/// counted in the kernel, written when the process ends or at the end of the recording.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryCalls {
    pub pid: u32,
    /// The [`EntryLibrary`] id.
    pub lib: u32,
    pub function: String,
    pub calls: u64,
}

/// Kernel launches of one process whose return address lay in one file (the code that made them),
/// written when the process ends or at the end of the recording.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchSites {
    pub pid: u32,
    /// The file as the process saw its path; empty for return addresses outside every file mapping.
    pub path: String,
    pub launches: u64,
    /// Of those, the launches whose call returned an error (none of them ran); absent in traces before it
    /// was counted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed: u64,
}

/// A directory a process loaded code-object files from by path, and its regular files.
///
/// Written for `hipModuleLoad`, `cuModuleLoad`, an HSA reader of a file and an image read from a code-object
/// file into memory (rocBLAS's Tensile), when the first load from the directory was attributed: listed inside
/// the process's root, once per process and directory. The analysis is offline: what was present is known
/// only from this record.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeDir {
    pub ts: u64,
    pub pid: u32,
    /// The directory as the process sees it.
    pub path: String,
    /// Regular files counted in it.
    pub count: u64,
    /// Their names, sorted; at most [`CODE_DIR_NAMES_MAX`] of them and [`CODE_DIR_BYTES_MAX`] bytes of
    /// names.
    pub files: Vec<String>,
    /// The listing was cut: more entries than tracer reads from a directory (`count` is then a lower
    /// bound), or more names than a record keeps (`files` holds the first).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
    /// Why it could not be listed (`count` and `files` are then empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Names one [`CodeDir`] record keeps at most.
pub(crate) const CODE_DIR_NAMES_MAX: usize = 4096;
/// Bytes of names one [`CodeDir`] record keeps at most (a trace line stays far under the reader's 1 MiB).
pub(crate) const CODE_DIR_BYTES_MAX: usize = 256 << 10;

/// Serde's test for leaving a zero count out.
#[expect(clippy::trivially_copy_pass_by_ref, reason = "serde's skip_serializing_if passes a reference")]
pub(crate) const fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Calls into GPU libraries' entry points a process made during its last step, or its last pass.
///
/// That is, since its last `llama_decode`: read from the kernel when it ended or the recording did, by
/// entry library id, as a batch's `previous_calls`. In a process without batches (`step` 0), since its last
/// pass (a graph handed to ggml's scheduler): cut by the kernel at its next pass (`at_pass`), or read at its
/// end.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepCalls {
    pub pid: u32,
    /// Its `llama_decode` calls the kernel saw.
    pub step: u64,
    #[serde(with = "crate::trace::event::id_pairs")]
    pub calls: BTreeMap<u32, u64>,
    /// Cut at the process's next pass, when it began (the line comes before that pass's `call`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_pass: Option<u64>,
}

impl StepCalls {
    /// A step tally's counters (one slot per entry library id) as calls by library, the slots with none left
    /// out.
    pub(crate) fn by_library(slots: &[u64]) -> BTreeMap<u32, u64> {
        slots.iter().enumerate().filter(|&(_, &n)| n > 0).map(|(slot, &n)| (slot as u32, n)).collect()
    }
}
