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

/// Where a copy's direction comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyDirection {
    /// An argument slot holding a hipMemcpyKind.
    Arg(u8),
    /// Fixed by the function (a [`memcpy_kind`] value).
    Fixed(u32),
}

/// How a function's arguments are laid out (x86-64 `SysV`: six registers, then 8-byte stack slots). The
/// decoder has one arm per layout; [`Layout::cookie_flags`] tells the probe what to read for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Nothing beyond the return value.
    Nothing,
    /// `(f, dim3 grid, dim3 block, args, shmem, stream)`: each dim3 by value in two registers; shared
    /// memory is 32-bit when `shmem32`.
    LaunchDim3 { shmem32: bool },
    /// `(f, gx, gy, gz, bx, by, bz, shmem, stream, ...)`: six scalars; the grid counts work-items when
    /// `work_items`, else blocks.
    LaunchScalars { shmem32: bool, work_items: bool },
    /// `(const CUlaunchConfig* config, f, ...)`: grid, block, shared memory and stream read from the
    /// structure at entry.
    LaunchConfig,
    /// `(dim3 grid, dim3 block, shmem, stream)`.
    PushConfig,
    /// `(stream, ...)`.
    Stream,
    /// `(stream, T* out)`: the out value is the call's handle (a captured graph).
    StreamHandleOut,
    /// `(T* out, graph, ...)`: the graph is the handle, the out value the executable.
    InstantiateOut,
    /// `(executable, graph, ...)`: the graph is the handle, the executable the value (as
    /// [`Layout::InstantiateOut`] gives them).
    ExecGraph,
    /// `(handle, stream)`.
    HandleStream,
    /// `(T* out, size)` or `(pool, size, flags, T* out)`: the size, and the pointer written at `out`.
    AllocOut { out: u8 },
    /// `(ptr)`.
    Ptr,
    /// `(dst, src, size, ...)`, its direction from [`CopyDirection`], the stream at `stream` when given.
    Memcpy { direction: CopyDirection, stream: Option<u8> },
    /// `(const void* wrapper)`: the return value is the module handle; the wrapper (`{u32 magic, u32
    /// version, void* binary, ...}`) is read at entry for the offload bundle it points to.
    FatBinary,
    /// `(T* out, const void* image, ...)`: the module written at `out`.
    ModuleOut,
    /// `(T* out, module, const char* name)`: the function written at `out`, bound to the name.
    FunctionOut,
    /// `(T* out, kernel)`: the function written at `out`.
    KernelFunctionOut,
    /// `(executable, const char* name, agent*, T* out)`: the symbol written at `out`, bound to the name.
    SymbolByName,
    /// `(symbol, attribute, void* value)`.
    SymbolInfo,
    /// `(ptr, size, T* out)`.
    CodeObjectFromMemory,
    /// `(T* out, const char* path)`: the module written at `out`; the path is read at entry (a
    /// [`crate::NameRecord`] with the call's own header), so a load that fails still names its file.
    ModulePath,
    /// `(hsa_file_t fd, T* out)`: the reader written at `out`; the file is the descriptor's, read from
    /// `/proc/PID/fd` by user space as soon as it sees the call.
    CodeObjectFromFile,
    /// `(agent, size, type, callback, data, private, group, hsa_queue_t** out)`.
    QueueCreate,
    /// `(modules, host stub, device function, const char* name, ...)`: read by the registration program.
    Register,
    /// `(signal, value)`: read by the doorbell program.
    Doorbell,
    /// `(ctx, struct llama_batch by value)`: the structure on the stack, read by the batch program.
    LlamaBatch,
    /// `(ctx, type, struct llama_batch_ext*)`: the C++ batch behind the pointer, read by the batch program.
    LlamaBatchExt,
    /// `(device, const VkShaderModuleCreateInfo* info, allocator, VkShaderModule* out)`: the info's
    /// `codeSize` and `pCode` (bytes 24..40) read at entry; at return the module, and the code's last
    /// bytes in a [`crate::NameRecord`] flagged [`crate::NAME_CODE`].
    ShaderModuleOut,
    /// `(device, cache, count, const VkComputePipelineCreateInfo* infos, allocator, VkPipeline* out)`: the
    /// first info's shader module and entry-point name (bytes 48..64) read at entry, the first pipeline at
    /// return.
    PipelinesOut,
    /// `(command buffer, bind point, pipeline)`.
    BindPipeline,
    /// `(command buffer, ...)`: a compute dispatch recorded; its workgroup counts at argument slot `grid`
    /// (1 for `vkCmdDispatch`, 4 after `vkCmdDispatchBase`'s base), None when they lie in a device buffer
    /// (`vkCmdDispatchIndirect`).
    VkDispatch { grid: Option<u8> },
    /// `(queue, submit count, submits, fence)`.
    QueueSubmit,
    /// `(device, const char* name)`: the name read at entry (a [`crate::NameRecord`] with the call's own
    /// header); the return value is the function's address.
    ProcAddr,
    /// `(vk_device&, vk_pipeline& pipeline, size_t spv_size, const void* spv_data, ...)`: ggml-vulkan's
    /// pipeline maker; the name (`pipeline->name`, the `std::string` that begins the `vk_pipeline_struct`
    /// the shared pointer holds) read by the pipeline-name program, the SPIR-V's size and address beside it.
    PipelineName,
}

impl Layout {
    /// Cookie flags telling the generic programs what to read for this layout.
    pub const fn cookie_flags(self) -> u64 {
        match self {
            // The parameter array: after the two dim3s (r9), after the scalars, stream and shared memory
            // (the fourth stack slot), or after the config and the function.
            Self::LaunchDim3 { .. } => cookie::STACK | cookie::params(5, 0),
            Self::LaunchScalars { .. } => cookie::STACK | cookie::params(9, 0),
            Self::LaunchConfig => cookie::CONFIG | cookie::params(2, 1),
            Self::StreamHandleOut => cookie::out(1),
            Self::ModuleOut => cookie::out(0) | cookie::WAKE,
            Self::InstantiateOut | Self::KernelFunctionOut => cookie::out(0),
            Self::AllocOut { out } => cookie::out(out as u64),
            Self::FunctionOut => cookie::out(0) | cookie::name(2, 1),
            Self::SymbolByName => cookie::out(3) | cookie::name(1, 0),
            Self::SymbolInfo => cookie::out(2),
            Self::CodeObjectFromMemory => cookie::out(2),
            // Wakes the reader at once: the file's directory is listed while the process lives.
            Self::ModulePath => cookie::out(0) | cookie::path(1) | cookie::WAKE,
            Self::ProcAddr => cookie::path(1),
            // Wakes the reader at once: the descriptor is read while the process most likely holds it.
            Self::CodeObjectFromFile => cookie::out(1) | cookie::WAKE,
            Self::QueueCreate => cookie::STACK | cookie::QUEUE,
            // The batch program reads the structure on the stack, or (without the flag) behind argument 2.
            Self::LlamaBatch => cookie::STACK,
            Self::FatBinary => cookie::WRAPPER,
            // Wakes the reader at once, and takes an early look at the process's maps: the ggml file whose
            // arrays name the module is mapped now, and a short-lived program may be gone by naming's look.
            Self::ShaderModuleOut => cookie::out(3) | cookie::WAKE,
            Self::PipelinesOut => cookie::out(5),
            Self::Nothing
            | Self::PushConfig
            | Self::Stream
            | Self::HandleStream
            | Self::ExecGraph
            | Self::Ptr
            | Self::Memcpy { .. }
            | Self::Register
            | Self::Doorbell
            | Self::LlamaBatchExt
            | Self::BindPipeline
            | Self::VkDispatch { .. }
            | Self::QueueSubmit
            | Self::PipelineName => 0,
        }
    }

    /// A structure read at entry, beside the cookie's flags (which have no bit left): two 8-byte words at
    /// this byte offset of the structure the argument slot points to, into argument slots 6 and 7.
    pub const fn entry_struct(self) -> Option<(usize, u64)> {
        match self {
            Self::ShaderModuleOut => Some((1, 24)),
            Self::PipelinesOut => Some((3, 48)),
            _ => None,
        }
    }
}

/// What the call programs read beyond the cookie for the function numbered `func`.
///
/// The structure read at entry ([`Layout::entry_struct`]), and whether the code's end is read at return
/// ([`Layout::ShaderModuleOut`]). Two comparisons, for the eBPF programs (a match over the whole table is
/// more than the verifier should walk on every call); a test checks them against every row's layout.
pub const fn extra_reads(func: u16) -> (Option<(usize, u64)>, bool) {
    if func == ApiFunc::VkCreateShaderModule as u16 {
        (Layout::ShaderModuleOut.entry_struct(), true)
    } else if func == ApiFunc::VkCreateComputePipelines as u16 {
        (Layout::PipelinesOut.entry_struct(), false)
    } else {
        (None, false)
    }
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

mod results;
mod table;

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
