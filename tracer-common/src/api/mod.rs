//! The API functions tracer probes: one row each, and nothing about a function is written anywhere else.
//!
//! A row gives the function's stable number (it appears in attach cookies and in records, so a number
//! never changes meaning), its library, its exported symbol, what it does ([`Op`], the only fact later
//! steps use), how its arguments are laid out ([`Layout`], which tells the probe what to read and the
//! decoder what each slot means) and which probe program it gets ([`ProbeShape`]).
//!
//! Adding a function is one row here; a new argument layout also needs one arm in the decoder.

use crate::cookie;

/// Which probe program a function gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeShape {
    /// Entry stash + return record: a [`crate::CallRecord`] with duration and return value.
    Call,
    /// Entry only, sleepable: a [`crate::NameRecord`] (the function returns nothing worth a second trap).
    RegisterName,
    /// Entry only: the doorbell store; AQL packets are read from the queue's ring.
    Doorbell,
    /// Entry only, one trap: a [`crate::CallRecord`] written at entry (no duration, no return value,
    /// flagged [`crate::CALL_ENTRY_ONLY`]). For hot paths where the arguments and the order are the news:
    /// driver launches, graph replays, and synchronizations (a decode loop calls one about 14 times per
    /// token; where it is in the sequence cuts the inference steps, its wait time is not needed).
    OneTrap,
    /// Entry only: the batch a model's step is given, read from the stack ([`crate::BatchRecord`]).
    Batch,
    /// Entry only: the name a runtime gives the pipeline it is about to make, read behind the pipeline
    /// argument (a [`crate::NameRecord`]).
    PipelineName,
    /// Entry only: a tensor set, filtered in the kernel by its name to a pass's inputs copied up; their
    /// values read ([`crate::InputRecord`]).
    Input,
}

/// Which runtime library exports a function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Library {
    /// libamdhip64 (HIP, CLR).
    Hip,
    /// libhsa-runtime64 (`ROCr`).
    Hsa,
    /// libcuda (the NVIDIA driver API): every CUDA launch passes here.
    Cuda,
    /// libcudart (the CUDA runtime API): probed only on request (`--cuda-runtime`).
    CudaRuntime,
    /// libllama (llama.cpp's model library, above ggml): where each step's batch is handed over.
    Llama,
    /// libggml-base (ggml's graph scheduler, under llama.cpp and Ollama's engine): where each matrix pass
    /// of a step is evaluated.
    Ggml,
    /// libggml-vulkan (ggml's Vulkan backend): where it names each pipeline it makes.
    GgmlVulkan,
    /// libvulkan (the Vulkan loader): every call an application makes through the instance's entry points
    /// passes its trampolines (ggml's Vulkan backend resolves its device calls there), whatever the driver.
    Vulkan,
}

/// What a call does, whatever library it comes from. Attribution, phases and the report decide by this,
/// never by a function's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// A kernel launch: grid, block, shared memory, stream.
    Launch,
    /// A `kernel<<<...>>>` configuration pushed before the launch stub runs.
    PushConfig,
    /// One replay of an instantiated graph.
    GraphLaunch,
    /// Launches on the stream become graph nodes from here...
    CaptureBegin,
    /// ...to here, which returns the graph.
    CaptureEnd,
    /// A graph made executable (graph -> executable).
    GraphInstantiate,
    /// An executable made to run another graph's nodes in place (graph -> the same executable).
    GraphUpdate,
    /// Device memory asked for at the programming API.
    Alloc,
    /// Device memory given back at the programming API.
    Free,
    /// The HSA runtime's pool allocation, below the HIP API (HIP's own allocations pass here too).
    PoolAlloc,
    /// The HSA runtime's pool free.
    PoolFree,
    /// A copy; its direction is the event's memcpy kind.
    Memcpy,
    /// The host waits for a stream, a device or a context.
    Sync,
    /// Code loaded: a fat binary registered, a module or library loaded from an image or a file.
    ModuleLoad,
    /// A function handle looked up by name in a module (the name is recorded too).
    FunctionLookup,
    /// A library kernel looked up by name: context-independent, a context's function is named after it
    /// (the name is recorded too).
    KernelLookup,
    /// The function a library kernel has in the current context (`cuKernelGetFunction`).
    KernelFunction,
    /// A kernel registered with its host stub (a name record, sleepable program).
    Register,
    /// A code-object symbol looked up by name (`<kernel>.kd`).
    SymbolLookup,
    /// A code-object symbol's attribute read (`KERNEL_OBJECT` names what dispatch packets carry).
    SymbolInfo,
    /// A code object handed to the loader from memory or from an open file.
    CodeObjectRead,
    /// A GPU queue created.
    QueueCreate,
    /// A queue's doorbell rung: AQL packets were published.
    Doorbell,
    /// The runtime initialised.
    Init,
    /// A batch of tokens handed to a model (`llama_decode`, `llama_process`): one inference step begins.
    Batch,
    /// A graph handed to ggml's scheduler: one matrix pass of a step begins (llama.cpp evaluates each
    /// micro-batch of a step as one; Ollama's engine each forward).
    Pass,
    /// A tensor of a pass's inputs set (ggml's `ggml_backend_tensor_set`): where the scheduler copies a
    /// graph's token positions or output rows to the device, they are read.
    Input,
    /// A shader module made from SPIR-V (its code's last bytes are read, to name it).
    ShaderModule,
    /// A compute pipeline made from a shader module: what a dispatch runs.
    PipelineCreate,
    /// A pipeline about to be made, under the name its runtime gives it (ggml-vulkan's `pipeline->name`):
    /// the next shader module its thread makes is that pipeline's.
    PipelineName,
    /// A pipeline bound on a command buffer: its next dispatches run it.
    Bind,
    /// Command buffers submitted to a queue: what they recorded runs.
    Submit,
    /// An entry point looked up by name past the probed library (`vkGetDeviceProcAddr` returns the driver's
    /// own function): calls through it are not seen (the name is recorded, and counted when it is one tracer
    /// probes).
    ProcAddr,
}

impl Op {
    /// The category's name in reports and metrics labels (kebab-case).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Launch => "launch",
            Self::PushConfig => "push-config",
            Self::GraphLaunch => "graph-launch",
            Self::CaptureBegin => "capture-begin",
            Self::CaptureEnd => "capture-end",
            Self::GraphInstantiate => "graph-instantiate",
            Self::GraphUpdate => "graph-update",
            Self::Alloc => "alloc",
            Self::Free => "free",
            Self::PoolAlloc => "pool-alloc",
            Self::PoolFree => "pool-free",
            Self::Memcpy => "memcpy",
            Self::Sync => "sync",
            Self::ModuleLoad => "module-load",
            Self::FunctionLookup => "function-lookup",
            Self::KernelLookup => "kernel-lookup",
            Self::KernelFunction => "kernel-function",
            Self::Register => "register",
            Self::SymbolLookup => "symbol-lookup",
            Self::SymbolInfo => "symbol-info",
            Self::CodeObjectRead => "code-object-read",
            Self::QueueCreate => "queue-create",
            Self::Doorbell => "doorbell",
            Self::Init => "init",
            Self::Batch => "batch",
            Self::Pass => "pass",
            Self::Input => "input",
            Self::ShaderModule => "shader-module",
            Self::PipelineCreate => "pipeline-create",
            Self::PipelineName => "pipeline-name",
            Self::Bind => "bind",
            Self::Submit => "submit",
            Self::ProcAddr => "proc-addr",
        }
    }

    /// Whether calls of this category recur step after step: launches, graph capture and replay, copies,
    /// allocations, synchronizations, doorbells, submissions, the step and pass markers, and the runtime's
    /// start (HIP retries `hsa_init` at every launch when it found no GPU; nothing later refers to it).
    /// Recording chosen processes, these are probed in those processes alone, so that nobody else traps on
    /// them.
    ///
    /// The others build what later calls refer to (code loaded, kernels registered or looked up by name,
    /// queues, shader modules and pipelines) and are made mostly once, as a library
    /// loads: they stay probed in every process mapping the copy, filtered by the program, so that a
    /// process joining the recording before tracer has placed its own probes (a runner forked by a server)
    /// loses none of its names.
    pub const fn recurs(self) -> bool {
        match self {
            Self::Launch
            | Self::PushConfig
            | Self::GraphLaunch
            | Self::CaptureBegin
            | Self::CaptureEnd
            | Self::GraphInstantiate
            | Self::GraphUpdate
            | Self::Alloc
            | Self::Free
            | Self::PoolAlloc
            | Self::PoolFree
            | Self::Memcpy
            | Self::Sync
            | Self::Doorbell
            | Self::Batch
            | Self::Pass
            | Self::Input
            | Self::Bind
            | Self::Submit
            | Self::Init => true,
            Self::ModuleLoad
            | Self::FunctionLookup
            | Self::KernelLookup
            | Self::KernelFunction
            | Self::Register
            | Self::SymbolLookup
            | Self::SymbolInfo
            | Self::CodeObjectRead
            | Self::QueueCreate
            | Self::ShaderModule
            | Self::PipelineCreate
            | Self::PipelineName
            | Self::ProcAddr => false,
        }
    }
}

/// `hsa_executable_symbol_get_info`'s attribute that gives the kernel object dispatch packets carry.
pub const HSA_SYMBOL_INFO_KERNEL_OBJECT: u32 = 22;

/// hipMemcpyKind values, the direction every copy event carries (CUDA's copies have theirs fixed).
pub mod memcpy_kind {
    pub const HOST_TO_DEVICE: u32 = 1;
    pub const DEVICE_TO_HOST: u32 = 2;
    /// Direction from the pointers (unified addressing).
    pub const DEFAULT: u32 = 4;
}

macro_rules! api_funcs {
    ($( $(#[$doc:meta])* $variant:ident = $num:literal, $lib:ident, $sym:literal $(as $name:literal)?,
        $op:ident, $layout:expr, $shape:ident; )*) => {
        /// A probed API function.
        #[repr(u16)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ApiFunc {
            $( $(#[$doc])* $variant = $num, )*
        }

        impl ApiFunc {
            pub const ALL: &'static [ApiFunc] = &[$(ApiFunc::$variant,)*];

            pub const fn from_u16(v: u16) -> Option<Self> {
                match v {
                    $( $num => Some(ApiFunc::$variant), )*
                    _ => None,
                }
            }

            /// The exported symbol the probe is attached to.
            pub const fn symbol(self) -> &'static str {
                match self { $( ApiFunc::$variant => $sym, )* }
            }

            /// The name users know the function by (the symbol, except for C++-mangled exports); the
            /// trace file spells the function this way.
            pub const fn name(self) -> &'static str {
                match self { $( ApiFunc::$variant => api_funcs!(@name $sym $(, $name)?), )* }
            }

            /// The function a trace names: the first row of that name (a C++ export reads back as its C
            /// twin, which has the same operation and layout).
            #[expect(unreachable_patterns, reason = "a C++ export shares its name with its C twin, which comes first")]
            pub fn from_name(name: &str) -> Option<Self> {
                match name {
                    $( api_funcs!(@name $sym $(, $name)?) => Some(ApiFunc::$variant), )*
                    _ => None,
                }
            }

            /// The function exported under this symbol.
            pub fn from_symbol(symbol: &str) -> Option<Self> {
                match symbol {
                    $( $sym => Some(ApiFunc::$variant), )*
                    _ => None,
                }
            }

            pub const fn op(self) -> Op {
                match self { $( ApiFunc::$variant => Op::$op, )* }
            }

            pub const fn layout(self) -> Layout {
                match self { $( ApiFunc::$variant => $layout, )* }
            }

            /// Cookie flags telling the generic programs what to read, and what to tally or gate.
            pub const fn cookie_flags(self) -> u64 {
                self.layout().cookie_flags() | self.step_flags()
            }

            pub const fn shape(self) -> ProbeShape {
                match self { $( ApiFunc::$variant => ProbeShape::$shape, )* }
            }

            pub const fn library(self) -> Library {
                match self { $( ApiFunc::$variant => Library::$lib, )* }
            }
        }
    };
    (@name $sym:literal) => { $sym };
    (@name $sym:literal, $name:literal) => { $name };
}

mod layout;
mod results;
mod table;

pub use layout::{CopyDirection, Layout, extra_reads};
pub use table::ApiFunc;

use CopyDirection::{Arg, Fixed};
use Layout::Memcpy;

/// Every function that can be tallied has a slot in a thread's tally.
const _: () = {
    let mut i = 0;
    while i < ApiFunc::ALL.len() {
        if let Some(slot) = ApiFunc::ALL[i].tally_slot() {
            assert!(slot < crate::TALLY_SLOTS, "more tallied functions than TALLY_SLOTS");
        }
        i += 1;
    }
};

impl ApiFunc {
    /// What the kernel does with a call beyond reading it: the two facts phases need from a token's loop
    /// (a copy toward the host, then the synchronization that waits for it) are written; the other
    /// one-trap synchronizations (a decode loop makes about 14 a token) and the async copies to the device
    /// (about 7 a token) are tallied in the kernel, per thread and function (summed per process by user
    /// space), and written once at the end.
    pub const fn step_flags(self) -> u64 {
        let kind = self.step_kind();
        match self.tally_slot() {
            Some(slot) => kind | cookie::tally_slot(slot),
            None => kind,
        }
    }

    /// The function's slot in a thread's [`crate::ThreadTally`]: its rank among the rows that can be
    /// tallied (gated synchronizations and tallied copies), in table order.
    pub const fn tally_slot(self) -> Option<usize> {
        if !self.tallied() {
            return None;
        }
        let mut i = 0;
        let mut slot = 0;
        while i < Self::ALL.len() {
            let f = Self::ALL[i];
            if f as u16 == self as u16 {
                return Some(slot);
            }
            if f.tallied() {
                slot += 1;
            }
            i += 1;
        }
        None
    }

    /// The function whose tallies a thread keeps in `slot`.
    pub fn from_tally_slot(slot: usize) -> Option<Self> {
        Self::ALL.iter().copied().find(|f| f.tally_slot() == Some(slot))
    }

    /// A call-shaped function on a decode loop's hot path whose result and duration the default recording
    /// does without: a kernel launch or a graph replay (its arguments are the news; one that fails is
    /// counted as made) and an async copy (it returns before the copy runs). Probed at entry only, one
    /// trap, unless every call is recorded whole (`record --all-calls`).
    pub const fn entry_only_by_default(self) -> bool {
        matches!(self.shape(), ProbeShape::Call)
            && matches!(
                (self.op(), self.layout()),
                (Op::Launch | Op::GraphLaunch, _) | (Op::Memcpy, Memcpy { stream: Some(_), .. })
            )
    }

    /// Counted in the kernel (synchronizations that end no step, async copies to the device): what the
    /// default recording leaves unprobed (`record --all-calls` probes them).
    pub const fn tallied(self) -> bool {
        self.step_kind() & (cookie::GATED | cookie::TALLY) != 0
    }

    const fn step_kind(self) -> u64 {
        match (self.op(), self.layout(), self.shape()) {
            (Op::Sync, _, ProbeShape::OneTrap) => cookie::GATED,
            (
                Op::Memcpy,
                Memcpy { direction: Fixed(memcpy_kind::HOST_TO_DEVICE), stream: Some(_) },
                ProbeShape::OneTrap,
            ) => cookie::TALLY,
            (Op::Memcpy, Memcpy { direction: Fixed(memcpy_kind::DEVICE_TO_HOST | memcpy_kind::DEFAULT), .. }, _) => {
                cookie::MARK
            }
            (Op::Memcpy, Memcpy { direction: Arg(slot), .. }, _) => cookie::mark_if(slot as u64),
            _ => 0,
        }
    }
}
#[cfg(feature = "user")]
mod serde_impls {
    use super::ApiFunc;

    /// A trace spells a function by its [`ApiFunc::name`].
    impl serde::Serialize for ApiFunc {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.serialize_str(self.name())
        }
    }

    impl<'de> serde::Deserialize<'de> for ApiFunc {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct Name;
            impl serde::de::Visitor<'_> for Name {
                type Value = ApiFunc;
                fn expecting(&self, formatter: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                    formatter.write_str("the name of an API function tracer probes")
                }
                fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ApiFunc, E> {
                    ApiFunc::from_name(v).ok_or_else(|| E::custom(UnknownApi))
                }
            }
            deserializer.deserialize_str(Name)
        }
    }

    /// The message of a deserialization error for a function this build does not know (a newer
    /// tracer's): the trace reader skips such records and counts them instead of failing.
    pub(super) struct UnknownApi;

    impl core::fmt::Display for UnknownApi {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.write_str(super::UNKNOWN_API)
        }
    }
}

/// The text of the error a trace reader gets for an API name this build does not know.
pub const UNKNOWN_API: &str = "an API function this tracer does not know";

#[cfg(test)]
mod tests;
