//! The events a recording stores, one type each, from decode to the trace file.
//!
//! The recording's `decode` builds these from ring records, filling what the probe saw; its `attribute` only
//! adds its enrichment (the kernel a launch or dispatch names, whether a launch was captured into a
//! graph, the file a code object came from, the device an ioctl's fd points to); the trace writer stores
//! them as they are. Enumerations are serde enums, written as the strings `docs/trace-format.md` lists.
#![expect(
    clippy::little_endian_bytes,
    reason = "the formats read here (AQL packets, offload bundles, ELF notes, driver argument structs) are little-endian by definition"
)]

use std::{borrow::Cow, collections::BTreeMap};

use serde::{Deserialize, Serialize};
pub use tracer_common::ApiFunc;
#[cfg(test)]
mod for_test;
mod inputs;
mod job;
mod repeat;
pub use inputs::{GraphInput, InputKind};
pub(crate) use job::gpu_time;
pub use job::{Job, JobStage};
pub use repeat::Repeat;

/// Whether a launch's grid counts work-groups or work-items.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GridUnit {
    /// The grid counts work-groups (CUDA and HIP's usual form).
    #[default]
    Blocks,
    /// The grid counts work-items (`hipExtModuleLaunchKernel`, AQL packets).
    WorkItems,
    /// A unit this build does not know (a trace from a later build): the grid is kept as written.
    #[serde(other)]
    Unknown,
}

impl GridUnit {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Blocks => "blocks",
            Self::WorkItems => "work-items",
            Self::Unknown => "unknown",
        }
    }
}

/// An enumeration of raw values with an open case for values it does not know: each known variant is
/// one row (variant, raw value, the name a trace writes), and `Unknown(raw)` is written `unknown(raw)`.
macro_rules! raw_named_enum {
    ($(#[$meta:meta])* $name:ident($raw:ty) { $($(#[$vmeta:meta])* $variant:ident = $value:literal, $text:literal;)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
            Unknown($raw),
        }

        impl $name {
            pub(crate) const fn from_raw(v: $raw) -> Self {
                match v {
                    $($value => Self::$variant,)*
                    v => Self::Unknown(v),
                }
            }

            pub fn name(self) -> Cow<'static, str> {
                match self {
                    $(Self::$variant => $text.into(),)*
                    Self::Unknown(v) => format!("unknown({v})").into(),
                }
            }

            pub(crate) fn from_name(s: &str) -> Option<Self> {
                Some(match s {
                    $($text => Self::$variant,)*
                    s => Self::Unknown(s.strip_prefix("unknown(")?.strip_suffix(')')?.parse().ok()?),
                })
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.name())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <Cow<'de, str>>::deserialize(d)?;
                Self::from_name(&s)
                    .ok_or_else(|| serde::de::Error::custom(format!("not a {}: {s}", stringify!($name))))
            }
        }
    };
}

raw_named_enum! {
    /// A copy's direction (hipMemcpyKind's values; CUDA's copies map onto them).
    MemcpyKind(u32) {
        HostToHost = 0, "HostToHost";
        HostToDevice = 1, "HostToDevice";
        DeviceToHost = 2, "DeviceToHost";
        DeviceToDevice = 3, "DeviceToDevice";
        /// From the pointers (unified addressing).
        Default = 4, "Default";
        DeviceToDeviceNoCU = 1024, "DeviceToDeviceNoCU";
    }
}

raw_named_enum! {
    /// AQL packet types (`hsa_packet_type_t`).
    PacketType(u8) {
        VendorSpecific = 0, "vendor-specific";
        Invalid = 1, "invalid";
        KernelDispatch = 2, "kernel-dispatch";
        BarrierAnd = 3, "barrier-and";
        AgentDispatch = 4, "agent-dispatch";
        BarrierOr = 5, "barrier-or";
    }
}

/// A vendor-specific packet's format byte (`hsa_amd_packet_type8_t`, byte 2) for AMD's extended kernel
/// dispatch (`HSA_AMD_PACKET_TYPE_EXT_KERNEL_DISPATCH`, `hsa_ext_amd.h`).
const EXT_KERNEL_DISPATCH: u8 = 3;

#[expect(clippy::derivable_impls, reason = "the enum is made by a macro that takes no #[default]")]
impl Default for PacketType {
    fn default() -> Self {
        Self::Invalid
    }
}

/// A kernel launch at the programming API (HIP, CUDA driver or runtime).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Launch {
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub lib: u32,
    pub api: ApiFunc,
    /// Kernel table id (see `kernel` records); set by attribution, null for a handle its process presented
    /// past the per-process kernel limits (counted as `kernel_handles_over_limit`).
    pub kernel: Option<u32>,
    /// The host function (hipLaunchKernel & co.), `hipFunction_t` or `CUfunction` (module launches).
    pub handle: u64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub grid_unit: GridUnit,
    pub shmem: u64,
    pub stream: u64,
    pub ret: i32,
    pub dur: u64,
    /// The stream was capturing a graph: this launch became a graph node, not a dispatch (attribution).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub captured: bool,
    /// Recorded at entry by a one-trap probe (CUDA's driver launches): `ret` and `dur` are not known (0).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub entry_only: bool,
    /// Kernel parameters read at the launch: parameter index -> the 8 bytes at its address (a 4-byte
    /// `int` is the low half). Only those the kernel's family needs (ggml's MMQ: its column count) are
    /// kept.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<u8, u64>,
    /// The return address of the call (one-trap probes), for attribution only: a kernel that stays
    /// unnamed records the file whose code launched it. Not written per launch.
    #[serde(skip)]
    pub caller: u64,
    /// The probe placed the launch in its thread's history, which its repeats are counted against (see
    /// [`Repeat`]): attribution keeps the same history. Not written.
    #[serde(skip)]
    pub in_runs: bool,
}

impl Launch {
    /// The launch became a graph node: made while its stream was capturing, and it succeeded (one that
    /// failed was captured into nothing, and is counted as failed).
    pub(crate) const fn captured_into_graph(&self) -> bool {
        self.captured && self.ret == 0
    }
}

const fn push_config_api() -> ApiFunc {
    ApiFunc::HipPushCallConfiguration
}

/// A `kernel<<<grid, block, shmem, stream>>>` configuration pushed before the launch stub runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub lib: u32,
    #[serde(default = "push_config_api")]
    pub api: ApiFunc,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shmem: u64,
    pub stream: u64,
    pub ret: i32,
    pub dur: u64,
}

/// Any other API call; fields that do not apply to the call's layout are absent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub lib: u32,
    pub api: ApiFunc,
    /// The call's return value: `hipError_t` / `CUresult` / `hsa_status_t` (0 = success).
    pub ret: i64,
    pub dur: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ptr: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<u64>,
    /// A copy's direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<MemcpyKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<u64>,
    /// Module handle (module loads, function lookups, __hipRegisterFatBinary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<u64>,
    /// Function handle (function lookups).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<u64>,
    /// A handle the call is about: an HSA symbol, a graph or graph executable, a code-object reader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handle: Option<u64>,
    /// `hsa_executable_symbol_get_info`'s attribute (22 = `KERNEL_OBJECT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribute: Option<u32>,
    /// A value returned through an out-parameter (the kernel object for `get_info`, the executable for a
    /// graph instantiation), or read through an argument (the offload bundle a fat-binary wrapper points
    /// to, the descriptor of a code-object file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<u64>,
    /// For code objects read from memory and fat binaries registered: the mapped file and offset the
    /// code lies at; for a file loaded by path (`hipModuleLoad`, `cuModuleLoad`) or descriptor
    /// (`hsa_code_object_reader_create_from_file`): that file, whether or not the load succeeded
    /// (attribution).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_offset: Option<u64>,
    /// For a fat binary registered: the number of the offload bundle at that offset ("0042", as `tracer
    /// inspect` numbers them; attribution).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle: Option<String>,
    /// Recorded at entry by a one-trap probe (`cuGraphLaunch`): `ret` and `dur` are not known (0).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub entry_only: bool,
    /// A module load's return address (the code that loaded it), read while recording to place an image
    /// that lies outside every file; the trace keeps what it placed (`file`), not the address.
    #[serde(skip)]
    pub caller: u64,
}

impl Call {
    /// A call with only its origin, function, result and duration set.
    pub(crate) const fn new(o: Origin, api: ApiFunc, ret: i64, dur: u64) -> Self {
        let Origin { ts, pid, tid, lib } = o;
        Self {
            ts,
            pid,
            tid,
            lib,
            api,
            ret,
            dur,
            size: None,
            ptr: None,
            dst: None,
            src: None,
            kind: None,
            stream: None,
            module: None,
            function: None,
            handle: None,
            attribute: None,
            value: None,
            file: None,
            file_offset: None,
            bundle: None,
            entry_only: false,
            caller: 0,
        }
    }

    /// The kernel object `hsa_executable_symbol_get_info` returned, when that is what it was asked for.
    pub(crate) fn kernel_object(&self) -> Option<u64> {
        (self.attribute == Some(tracer_common::api::HSA_SYMBOL_INFO_KERNEL_OBJECT)).then_some(self.value).flatten()
    }
}

/// An HSA queue created by `hsa_queue_create` (the first 40 bytes of `hsa_queue_t`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Queue {
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub lib: u32,
    /// The `hsa_queue_t*`: what `dispatch.queue` refers to.
    pub queue: u64,
    pub id: u64,
    /// 0 multiple producers, 1 single, 2 cooperative.
    pub queue_type: u32,
    #[serde(default)]
    pub features: u32,
    pub base_address: u64,
    /// Ring size in 64-byte packets.
    pub size: u32,
    pub doorbell_signal: u64,
}

/// An AQL packet as it reached a GPU queue (read from the ring when the doorbell was rung).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dispatch {
    /// When the doorbell was rung.
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub lib: u32,
    pub queue: u64,
    /// The packet's index in the queue.
    pub index: u64,
    pub packet: PacketType,
    /// AMD's extended kernel dispatch (a vendor-specific packet of format 3,
    /// `hsa_amd_ext_kernel_dispatch_packet_t`: gfx1250's clustered dispatches), decoded as a kernel dispatch:
    /// its grid is clusters x work-groups per cluster x work-items per work-group, per axis.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub extended: bool,
    /// The header's barrier bit.
    pub barrier: bool,
    /// Kernel dispatches only (zero otherwise): dimensions used (setup bits 0-1).
    #[serde(default)]
    pub dimensions: u16,
    /// Work-items per work-group.
    pub workgroup: [u16; 3],
    /// In work-items.
    pub grid: [u32; 3],
    pub private_segment: u32,
    /// LDS bytes, dynamic shared memory included.
    pub group_segment: u32,
    pub kernel_object: u64,
    pub kernarg: u64,
    pub completion_signal: u64,
    /// Kernel table id (a `kernel` record with source "hsa", or "unnamed" for an object loaded before the
    /// tracer started); set by attribution, null for packets that are not kernel dispatches and for a
    /// kernel object past the per-process kernel limits (counted as `kernel_handles_over_limit`).
    pub kernel: Option<u32>,
    /// Words of the argument segment read at the doorbell, by index (word i: bytes 8i..8i+8), as far as
    /// the kernel needs them (ggml's MMQ: the word holding its column count).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<u8, u64>,
}

/// Who and where, common to every event: when, which process and thread, which library copy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Origin {
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub lib: u32,
}

impl Dispatch {
    /// Decodes a 64-byte AQL packet (`hsa_kernel_dispatch_packet_t` for kernel dispatches; AMD's extended
    /// kernel dispatch, `hsa_amd_ext_kernel_dispatch_packet_t`, as one).
    pub(crate) fn from_packet(o: Origin, queue: u64, index: u64, p: &[u8; 64]) -> Self {
        let Origin { ts, pid, tid, lib } = o;
        let u16_at = |o: usize| u16::from_le_bytes([p[o], p[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes([p[o], p[o + 1], p[o + 2], p[o + 3]]);
        let u64_at = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&p[o..o + 8]);
            u64::from_le_bytes(b)
        };
        let header = u16_at(0);
        let extended = PacketType::from_raw(header as u8) == PacketType::VendorSpecific && p[2] == EXT_KERNEL_DISPATCH;
        let packet = if extended { PacketType::KernelDispatch } else { PacketType::from_raw(header as u8) };
        let kernel = packet == PacketType::KernelDispatch;
        let when = |v| if kernel { v } else { Default::default() };
        let workgroup = if kernel { [u16_at(4), u16_at(6), u16_at(8)] } else { [0; 3] };
        let grid = if extended {
            // Per axis: clusters (32 bits in x, 16 in y and z) x work-groups per cluster (8 bits; 0 is
            // read as 1, as the runtime does) x work-items per work-group; past u32, the most it holds.
            let clusters = [u32_at(12), u32::from(u16_at(16)), u32::from(u16_at(18))];
            let sizes = [p[20], p[21], p[22]].map(|s| u32::from(s.max(1)));
            [0, 1, 2].map(|i| clusters[i].saturating_mul(sizes[i]).saturating_mul(u32::from(workgroup[i])))
        } else if kernel {
            [u32_at(12), u32_at(16), u32_at(20)]
        } else {
            [0; 3]
        };
        Self {
            ts,
            pid,
            tid,
            lib,
            queue,
            index,
            packet,
            extended,
            barrier: (header >> 8) & 1 != 0,
            // The extended packet's setup is its byte 3 (byte 2 is its format).
            dimensions: match (extended, kernel) {
                (true, _) => u16::from(p[3] & 3),
                (false, true) => u16_at(2) & 3,
                (false, false) => 0,
            },
            workgroup,
            grid,
            private_segment: when(u32_at(24)),
            group_segment: when(u32_at(28)),
            kernel_object: if kernel { u64_at(32) } else { 0 },
            kernarg: if kernel { u64_at(40) } else { 0 },
            completion_signal: u64_at(56),
            kernel: None,
            params: BTreeMap::new(),
        }
    }
}

/// An ioctl on a GPU driver (KFD or DRM amdgpu).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ioctl {
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub fd: u32,
    /// What the fd pointed to when the record was attributed (`/dev/kfd`, `/dev/dri/renderD128`).
    pub device: Option<String>,
    /// The full request number.
    pub cmd: u32,
    /// Its name, by type and number (`AMDKFD_IOC_CREATE_QUEUE`).
    pub name: String,
    /// The syscall's return value: negative errno on failure.
    pub ret: i64,
    pub dur: u64,
    /// Key argument fields (see docs/trace-format.md), as the driver left them at return.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fields: BTreeMap<String, u64>,
}

/// A step's batch, as llama.cpp's `llama_decode` was given it (read at its entry): its tokens grouped into
/// runs, in batch order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepBatch {
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub lib: u32,
    /// `llama_decode` or `llama_process`.
    pub api: ApiFunc,
    /// `llama_process` was asked to encode (an encoder model's pass), not to decode.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub encode: bool,
    /// The `llama_context*` (a process may run several: a draft model, an embedding context).
    pub ctx: u64,
    /// The process's `llama_decode` calls the kernel saw so far, this one included (0: not counted).
    pub step: u64,
    /// `n_tokens` as given.
    pub n_tokens: i32,
    /// Consecutive tokens of one sequence at consecutive positions, in batch order.
    pub runs: Vec<SeqRun>,
    /// Tokens whose sequence was not read: beyond the most a probe reads
    /// ([`tracer_common::BATCH_TOKENS_MAX`]), or after an array that could not be read.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub unread: u32,
    /// The batch gave positions (else the context numbers tokens itself, `llama_batch_get_one`).
    pub positions: bool,
    /// The batch gave sequence ids (else every token is sequence 0's).
    pub seq_ids: bool,
    /// The batch carries embeddings instead of token ids.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub embd: bool,
    /// The batch structure or one of its arrays could not be read.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fault: bool,
    /// Calls into GPU libraries' entry points during the process's previous step (since its previous
    /// `llama_decode`), by entry library id (`entry_library` records; the last id counts that library and
    /// every later one, see [`STEP_LIBRARIES_MERGED`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty", with = "id_pairs")]
    pub previous_calls: BTreeMap<u32, u64>,
    /// The kernel had no room to count the process's library calls per step.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub calls_uncounted: bool,
}

impl Default for StepBatch {
    fn default() -> Self {
        Self {
            ts: 0,
            pid: 0,
            tid: 0,
            lib: 0,
            api: ApiFunc::LlamaDecode,
            encode: false,
            ctx: 0,
            step: 0,
            n_tokens: 0,
            runs: Vec::new(),
            unread: 0,
            positions: false,
            seq_ids: false,
            embd: false,
            fault: false,
            previous_calls: BTreeMap::new(),
            calls_uncounted: false,
        }
    }
}

/// Counts by id, written as `[[id, count], ...]`: a JSON object's keys are strings, which serde's
/// tagged-enum path (a trace line whose `type` is not first) cannot read back as numbers.
pub(crate) mod id_pairs {
    use std::collections::BTreeMap;

    use serde::{Deserialize as _, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(map: &BTreeMap<u32, u64>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(map.iter())
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<u32, u64>, D::Error> {
        Ok(Vec::<(u32, u64)>::deserialize(d)?.into_iter().collect())
    }
}

/// The entry library id from which step counts are merged into one (see [`StepBatch::previous_calls`]).
pub(crate) const STEP_LIBRARIES_MERGED: u32 = (tracer_common::STEP_SLOTS - 1) as u32;

/// Tokens of one sequence at consecutive positions in a batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeqRun {
    /// The sequence id (a token's first, when it belongs to several).
    pub seq: i32,
    /// The first token's position, where the batch gave positions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pos: Option<i32>,
    pub tokens: u32,
    /// Tokens whose output (logits) was asked for.
    pub outputs: u32,
    /// The run's last token's output was asked for.
    pub last_output: bool,
    /// Tokens that belong to more than one sequence.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub shared: u32,
}

#[expect(clippy::trivially_copy_pass_by_ref, reason = "serde's skip_serializing_if passes a reference")]
const fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

impl StepBatch {
    /// Groups a batch's tokens into runs: `seq[i]`, `pos[i]` (when given), `n_seq[i]` and `output[i]` of
    /// each token read, in order.
    pub(crate) fn group(tokens: impl Iterator<Item = (i32, Option<i32>, i32, bool)>) -> Vec<SeqRun> {
        let mut runs: Vec<SeqRun> = Vec::new();
        for (seq, pos, n_seq, output) in tokens {
            let follows = runs.last().is_some_and(|r| {
                r.seq == seq
                    && match (r.pos, pos) {
                        (Some(first), Some(p)) => i64::from(first) + i64::from(r.tokens) == i64::from(p),
                        (None, None) => true,
                        _ => false,
                    }
            });
            if !follows {
                runs.push(SeqRun { seq, pos, ..SeqRun::default() });
            }
            if let Some(r) = runs.last_mut() {
                r.tokens += 1;
                r.outputs += u32::from(output);
                r.last_output = output;
                r.shared += u32::from(n_seq > 1);
            }
        }
        runs
    }
}

#[cfg(test)]
mod tests;
