//! The API functions tracer probes, with their stable numbers (they appear in attach cookies and in
//! records, so a number never changes meaning).

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
    /// flagged [`crate::CALL_ENTRY_ONLY`]). For per-launch hot paths where the arguments are the news.
    Launch,
}

/// Which runtime library exports a function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Library {
    /// libamdhip64 (HIP, CLR).
    Hip,
    /// libhsa-runtime64 (ROCr).
    Hsa,
    /// libcuda (the NVIDIA driver API): every CUDA launch passes here.
    Cuda,
    /// libcudart (the CUDA runtime API): probed only on request (`--cuda-runtime`).
    CudaRuntime,
}

macro_rules! api_funcs {
    ($( $(#[$doc:meta])* $variant:ident = $num:literal, $lib:ident, $sym:literal, $flags:expr, $shape:ident; )*) => {
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

            /// Cookie flags telling the generic programs what to read.
            pub const fn cookie_flags(self) -> u64 {
                match self { $( ApiFunc::$variant => $flags, )* }
            }

            pub const fn shape(self) -> ProbeShape {
                match self { $( ApiFunc::$variant => ProbeShape::$shape, )* }
            }

            pub const fn library(self) -> Library {
                match self { $( ApiFunc::$variant => Library::$lib, )* }
            }
        }
    };
}

const NONE: u64 = 0;

api_funcs! {
    /// `void** __hipRegisterFatBinary(const void* wrapper)`: returns the module handle.
    HipRegisterFatBinary = 1, Hip, "__hipRegisterFatBinary", NONE, Call;
    /// `__hipRegisterFunction(modules, hostFunction, deviceFunction, deviceName, ...)`.
    HipRegisterFunction = 2, Hip, "__hipRegisterFunction", NONE, RegisterName;
    /// `__hipPushCallConfiguration(dim3 grid, dim3 block, size_t shmem, hipStream_t stream)`: the
    /// `kernel<<<...>>>` configuration, pushed before the launch stub runs.
    HipPushCallConfiguration = 3, Hip, "__hipPushCallConfiguration", NONE, Call;
    /// `hipLaunchKernel(f, dim3 grid, dim3 block, void** args, size_t shmem, hipStream_t stream)`.
    HipLaunchKernel = 4, Hip, "hipLaunchKernel", cookie::STACK, Call;
    /// `hipModuleLoadData(hipModule_t* out, const void* image)`.
    HipModuleLoadData = 5, Hip, "hipModuleLoadData", cookie::out(0), Call;
    /// `hipModuleGetFunction(hipFunction_t* out, hipModule_t module, const char* name)`.
    HipModuleGetFunction = 6, Hip, "hipModuleGetFunction", cookie::out(0) | cookie::name(2, 1), Call;
    /// `hipModuleLaunchKernel(f, gx, gy, gz, bx, by, [bz, shmem, stream, params, extra])`.
    HipModuleLaunchKernel = 7, Hip, "hipModuleLaunchKernel", cookie::STACK, Call;
    /// `hipExtModuleLaunchKernel(f, gwsX, gwsY, gwsZ, lwsX, lwsY, [lwsZ, shmem, stream, params, ...])`,
    /// the C export; sizes in work-items.
    HipExtModuleLaunchKernel = 8, Hip, "hipExtModuleLaunchKernel", cookie::STACK, Call;
    /// The C++-mangled export of `hipExtModuleLaunchKernel` (same arguments).
    HipExtModuleLaunchKernelCxx = 9, Hip,
        "_Z24hipExtModuleLaunchKernelP18ihipModuleSymbol_tjjjjjjmP12ihipStream_tPPvS4_P11ihipEvent_tS6_j",
        cookie::STACK, Call;
    /// `hipMalloc(void** out, size_t size)`.
    HipMalloc = 10, Hip, "hipMalloc", cookie::out(0), Call;
    /// `hipFree(void* ptr)`.
    HipFree = 11, Hip, "hipFree", NONE, Call;
    /// `hipMemcpy(dst, src, size, kind)`.
    HipMemcpy = 12, Hip, "hipMemcpy", NONE, Call;
    /// `hipMemcpyAsync(dst, src, size, kind, stream)`.
    HipMemcpyAsync = 13, Hip, "hipMemcpyAsync", NONE, Call;
    /// `hipStreamSynchronize(stream)`.
    HipStreamSynchronize = 14, Hip, "hipStreamSynchronize", NONE, Call;
    /// `hipDeviceSynchronize()`.
    HipDeviceSynchronize = 15, Hip, "hipDeviceSynchronize", NONE, Call;
    /// `hipExtLaunchKernel(f, dim3 grid, dim3 block, args, [shmem, stream, start, stop, flags])`.
    HipExtLaunchKernel = 16, Hip, "hipExtLaunchKernel", cookie::STACK, Call;
    /// `hipLaunchCooperativeKernel(f, dim3 grid, dim3 block, args, [shmem(u32), stream])`.
    HipLaunchCooperativeKernel = 17, Hip, "hipLaunchCooperativeKernel", cookie::STACK, Call;
    /// `hipStreamBeginCapture(stream, mode)`: launches on the stream are graph nodes until EndCapture.
    HipStreamBeginCapture = 18, Hip, "hipStreamBeginCapture", NONE, Call;
    /// `hipStreamEndCapture(stream, hipGraph_t* out)`.
    HipStreamEndCapture = 19, Hip, "hipStreamEndCapture", cookie::out(1), Call;
    /// `hipGraphInstantiate(hipGraphExec_t* out, graph, ...)`.
    HipGraphInstantiate = 20, Hip, "hipGraphInstantiate", cookie::out(0), Call;
    /// `hipGraphLaunch(graphExec, stream)`: one replay.
    HipGraphLaunch = 21, Hip, "hipGraphLaunch", NONE, Call;

    /// `hsa_init()`.
    HsaInit = 64, Hsa, "hsa_init", NONE, Call;
    /// `hsa_queue_create(agent, size, type, callback, data, private, group, hsa_queue_t** out)`.
    HsaQueueCreate = 65, Hsa, "hsa_queue_create", cookie::STACK | cookie::QUEUE, Call;
    /// `hsa_signal_store_screlease(signal, value)`: on a queue's doorbell, AQL packets were published.
    HsaSignalStoreScrelease = 66, Hsa, "hsa_signal_store_screlease", NONE, Doorbell;
    /// `hsa_signal_store_relaxed(signal, value)`.
    HsaSignalStoreRelaxed = 67, Hsa, "hsa_signal_store_relaxed", NONE, Doorbell;
    /// `hsa_executable_get_symbol_by_name(exec, name, agent*, symbol* out)`: a kernel symbol by name.
    HsaExecutableGetSymbolByName = 68, Hsa, "hsa_executable_get_symbol_by_name", cookie::out(3) | cookie::name(1, 0), Call;
    /// `hsa_executable_symbol_get_info(symbol, attribute, void* value)`: KERNEL_OBJECT (22) gives the
    /// address every dispatch packet of this kernel carries.
    HsaExecutableSymbolGetInfo = 69, Hsa, "hsa_executable_symbol_get_info", cookie::out(2), Call;
    /// `hsa_code_object_reader_create_from_memory(ptr, size, reader* out)`.
    HsaCodeObjectReaderCreateFromMemory = 70, Hsa, "hsa_code_object_reader_create_from_memory", cookie::out(2), Call;
    /// `hsa_amd_memory_pool_allocate(pool, size, flags, void** out)`.
    HsaAmdMemoryPoolAllocate = 71, Hsa, "hsa_amd_memory_pool_allocate", cookie::out(3), Call;
    /// `hsa_amd_memory_pool_free(ptr)`.
    HsaAmdMemoryPoolFree = 72, Hsa, "hsa_amd_memory_pool_free", NONE, Call;

    /// `cuLaunchKernel(f, gx, gy, gz, bx, by, [bz, shmem(u32), stream, params, extra])`: one trap.
    CuLaunchKernel = 128, Cuda, "cuLaunchKernel", cookie::STACK, Launch;
    /// The per-thread-default-stream variant (same arguments).
    CuLaunchKernelPtsz = 129, Cuda, "cuLaunchKernel_ptsz", cookie::STACK, Launch;
    /// `cuLaunchKernelEx(const CUlaunchConfig* config, f, params, extra)`: the config's grid, block,
    /// shared memory and stream are read at entry.
    CuLaunchKernelEx = 130, Cuda, "cuLaunchKernelEx", cookie::CONFIG, Launch;
    CuLaunchKernelExPtsz = 131, Cuda, "cuLaunchKernelEx_ptsz", cookie::CONFIG, Launch;
    /// `cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, [bz, shmem(u32), stream, params])`.
    CuLaunchCooperativeKernel = 132, Cuda, "cuLaunchCooperativeKernel", cookie::STACK, Launch;
    CuLaunchCooperativeKernelPtsz = 133, Cuda, "cuLaunchCooperativeKernel_ptsz", cookie::STACK, Launch;
    /// `cuGraphLaunch(graphExec, stream)`: one replay.
    CuGraphLaunch = 134, Cuda, "cuGraphLaunch", NONE, Launch;
    CuGraphLaunchPtsz = 135, Cuda, "cuGraphLaunch_ptsz", NONE, Launch;
    /// `cuModuleGetFunction(CUfunction* out, CUmodule module, const char* name)`.
    CuModuleGetFunction = 136, Cuda, "cuModuleGetFunction", cookie::out(0) | cookie::name(2, 1), Call;
    /// `cuLibraryGetKernel(CUkernel* out, CUlibrary library, const char* name)`.
    CuLibraryGetKernel = 137, Cuda, "cuLibraryGetKernel", cookie::out(0) | cookie::name(2, 1), Call;
    /// `cuKernelGetFunction(CUfunction* out, CUkernel kernel)`: the function a kernel has in the current
    /// context (named as the kernel).
    CuKernelGetFunction = 138, Cuda, "cuKernelGetFunction", cookie::out(0), Call;
    /// `cuModuleLoadData(CUmodule* out, const void* image)`.
    CuModuleLoadData = 139, Cuda, "cuModuleLoadData", cookie::out(0), Call;
    /// `cuModuleLoadDataEx(CUmodule* out, const void* image, n, options, values)`.
    CuModuleLoadDataEx = 140, Cuda, "cuModuleLoadDataEx", cookie::out(0), Call;
    /// `cuLibraryLoadData(CUlibrary* out, const void* code, ...)`.
    CuLibraryLoadData = 141, Cuda, "cuLibraryLoadData", cookie::out(0), Call;
    /// `cuMemAlloc_v2(CUdeviceptr* out, size_t size)`.
    CuMemAlloc = 142, Cuda, "cuMemAlloc_v2", cookie::out(0), Call;
    /// `cuMemFree_v2(CUdeviceptr ptr)`.
    CuMemFree = 143, Cuda, "cuMemFree_v2", NONE, Call;
    /// `cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t size)`.
    CuMemcpyDtoH = 144, Cuda, "cuMemcpyDtoH_v2", NONE, Call;
    /// `cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t size)`.
    CuMemcpyHtoD = 145, Cuda, "cuMemcpyHtoD_v2", NONE, Call;
    /// `cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t size, stream)`.
    CuMemcpyDtoHAsync = 146, Cuda, "cuMemcpyDtoHAsync_v2", NONE, Call;
    /// `cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t size, stream)`: unified addressing, the
    /// direction is the pointers'.
    CuMemcpyAsync = 147, Cuda, "cuMemcpyAsync", NONE, Call;
    /// `cuStreamSynchronize(stream)`.
    CuStreamSynchronize = 148, Cuda, "cuStreamSynchronize", NONE, Call;
    /// `cuCtxSynchronize()`.
    CuCtxSynchronize = 149, Cuda, "cuCtxSynchronize", NONE, Call;
    /// `cuStreamBeginCapture_v2(stream, mode)`: launches on the stream are graph nodes until EndCapture.
    CuStreamBeginCapture = 150, Cuda, "cuStreamBeginCapture_v2", NONE, Call;
    CuStreamBeginCapturePtsz = 151, Cuda, "cuStreamBeginCapture_v2_ptsz", NONE, Call;
    /// `cuStreamEndCapture(stream, CUgraph* out)`.
    CuStreamEndCapture = 152, Cuda, "cuStreamEndCapture", cookie::out(1), Call;
    CuStreamEndCapturePtsz = 153, Cuda, "cuStreamEndCapture_ptsz", cookie::out(1), Call;
    /// `cuGraphInstantiateWithFlags(CUgraphExec* out, graph, flags)`.
    CuGraphInstantiateWithFlags = 154, Cuda, "cuGraphInstantiateWithFlags", cookie::out(0), Call;
    /// `cuGraphInstantiateWithParams(CUgraphExec* out, graph, params)`.
    CuGraphInstantiateWithParams = 155, Cuda, "cuGraphInstantiateWithParams", cookie::out(0), Call;
    /// `cuGraphInstantiate_v2(CUgraphExec* out, graph, ...)`.
    CuGraphInstantiate = 156, Cuda, "cuGraphInstantiate_v2", cookie::out(0), Call;
    /// `cuStreamSynchronize_ptsz(stream)`.
    CuStreamSynchronizePtsz = 157, Cuda, "cuStreamSynchronize_ptsz", NONE, Call;

    /// `__cudaRegisterFunction(handle, hostFun, deviceFun, deviceName, ...)`: the runtime's name for a
    /// host stub (opt-in API view).
    CudaRegisterFunction = 192, CudaRuntime, "__cudaRegisterFunction", NONE, RegisterName;
    /// `cudaLaunchKernel(func, dim3 grid, dim3 block, args, shmem, stream)` (opt-in API view; it reaches
    /// cuLaunchKernel too, a second trap per launch).
    CudaLaunchKernel = 193, CudaRuntime, "cudaLaunchKernel", cookie::STACK, Launch;
}
