//! How each probed function's arguments are laid out, and what the probes read for each layout.

use super::ApiFunc;
use crate::cookie;

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
    /// `(struct ggml_tensor* tensor, const void* data, size_t offset, size_t size)`: the tensor's name, and
    /// where it is a pass's input copied up, the values at `data`, read by the input program.
    TensorSet,
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
            | Self::PipelineName
            | Self::TensorSet => 0,
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
