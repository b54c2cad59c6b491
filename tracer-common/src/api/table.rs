//! The rows: every probed function, once.

use super::{
    CopyDirection::{Arg, Fixed},
    Layout, Library, Op, ProbeShape, memcpy_kind,
};
use Layout::{
    AllocOut, CodeObjectFromFile, CodeObjectFromMemory, Doorbell, ExecGraph, FatBinary, FunctionOut, HandleStream,
    InstantiateOut, KernelFunctionOut, LaunchConfig, LaunchDim3, LaunchScalars, LlamaBatch, LlamaBatchExt, Memcpy,
    ModuleOut, ModulePath, Nothing, Ptr, PushConfig, QueueCreate, Register, Stream, StreamHandleOut, SymbolByName,
    SymbolInfo, TensorSet,
};
use Layout::{BindPipeline, PipelineName, PipelinesOut, ProcAddr, QueueSubmit, ShaderModuleOut, VkDispatch};

const DIM3: Layout = LaunchDim3 { shmem32: false };
const BLOCKS32: Layout = LaunchScalars { shmem32: true, work_items: false };

api_funcs! {
    /// `void** __hipRegisterFatBinary(const void* wrapper)`: returns the module handle.
    HipRegisterFatBinary = 1, Hip, "__hipRegisterFatBinary", ModuleLoad, FatBinary, Call;
    /// `__hipRegisterFunction(modules, hostFunction, deviceFunction, deviceName, ...)`.
    HipRegisterFunction = 2, Hip, "__hipRegisterFunction", Register, Register, RegisterName;
    /// `__hipPushCallConfiguration(dim3 grid, dim3 block, size_t shmem, hipStream_t stream)`: the
    /// `kernel<<<...>>>` configuration, pushed before the launch stub runs.
    HipPushCallConfiguration = 3, Hip, "__hipPushCallConfiguration", PushConfig, PushConfig, Call;
    /// `hipLaunchKernel(f, dim3 grid, dim3 block, void** args, size_t shmem, hipStream_t stream)`.
    HipLaunchKernel = 4, Hip, "hipLaunchKernel", Launch, DIM3, Call;
    /// `hipModuleLoadData(hipModule_t* out, const void* image)`.
    HipModuleLoadData = 5, Hip, "hipModuleLoadData", ModuleLoad, ModuleOut, Call;
    /// `hipModuleGetFunction(hipFunction_t* out, hipModule_t module, const char* name)`.
    HipModuleGetFunction = 6, Hip, "hipModuleGetFunction", FunctionLookup, FunctionOut, Call;
    /// `hipModuleLaunchKernel(f, gx, gy, gz, bx, by, [bz, unsigned shmem, stream, params, extra])`.
    HipModuleLaunchKernel = 7, Hip, "hipModuleLaunchKernel", Launch, BLOCKS32, Call;
    /// `hipExtModuleLaunchKernel(f, gwsX, gwsY, gwsZ, lwsX, lwsY, [lwsZ, size_t shmem, stream, ...])`,
    /// the C export; sizes in work-items.
    HipExtModuleLaunchKernel = 8, Hip, "hipExtModuleLaunchKernel", Launch,
        LaunchScalars { shmem32: false, work_items: true }, Call;
    /// The C++-mangled export of `hipExtModuleLaunchKernel` (same arguments).
    HipExtModuleLaunchKernelCxx = 9, Hip,
        "_Z24hipExtModuleLaunchKernelP18ihipModuleSymbol_tjjjjjjmP12ihipStream_tPPvS4_P11ihipEvent_tS6_j"
        as "hipExtModuleLaunchKernel", Launch, LaunchScalars { shmem32: false, work_items: true }, Call;
    /// `hipMalloc(void** out, size_t size)`.
    HipMalloc = 10, Hip, "hipMalloc", Alloc, AllocOut { out: 0 }, Call;
    /// `hipFree(void* ptr)`.
    HipFree = 11, Hip, "hipFree", Free, Ptr, Call;
    /// `hipMemcpy(dst, src, size, kind)`.
    HipMemcpy = 12, Hip, "hipMemcpy", Memcpy, Memcpy { direction: Arg(3), stream: None }, Call;
    /// `hipMemcpyAsync(dst, src, size, kind, stream)`.
    HipMemcpyAsync = 13, Hip, "hipMemcpyAsync", Memcpy, Memcpy { direction: Arg(3), stream: Some(4) }, Call;
    /// `hipStreamSynchronize(stream)`.
    HipStreamSynchronize = 14, Hip, "hipStreamSynchronize", Sync, Stream, OneTrap;
    /// `hipDeviceSynchronize()`.
    HipDeviceSynchronize = 15, Hip, "hipDeviceSynchronize", Sync, Nothing, OneTrap;
    /// `hipExtLaunchKernel(f, dim3 grid, dim3 block, args, [shmem, stream, start, stop, flags])`.
    HipExtLaunchKernel = 16, Hip, "hipExtLaunchKernel", Launch, DIM3, Call;
    /// `hipLaunchCooperativeKernel(f, dim3 grid, dim3 block, args, [unsigned shmem, stream])`.
    HipLaunchCooperativeKernel = 17, Hip, "hipLaunchCooperativeKernel", Launch, LaunchDim3 { shmem32: true }, Call;
    /// `hipStreamBeginCapture(stream, mode)`: launches on the stream are graph nodes until `EndCapture`.
    HipStreamBeginCapture = 18, Hip, "hipStreamBeginCapture", CaptureBegin, Stream, Call;
    /// `hipStreamEndCapture(stream, hipGraph_t* out)`.
    HipStreamEndCapture = 19, Hip, "hipStreamEndCapture", CaptureEnd, StreamHandleOut, Call;
    /// `hipGraphInstantiate(hipGraphExec_t* out, graph, ...)`.
    HipGraphInstantiate = 20, Hip, "hipGraphInstantiate", GraphInstantiate, InstantiateOut, Call;
    /// `hipGraphLaunch(graphExec, stream)`: one replay.
    HipGraphLaunch = 21, Hip, "hipGraphLaunch", GraphLaunch, HandleStream, Call;
    /// `hipGraphExecUpdate(graphExec, graph, ...)`: the executable now runs the graph's nodes (ggml
    /// updates its executable in place when a recaptured graph has the same topology).
    HipGraphExecUpdate = 22, Hip, "hipGraphExecUpdate", GraphUpdate, ExecGraph, Call;
    /// `hipModuleLoad(hipModule_t* out, const char* fname)`: a code-object file loaded by path (rocBLAS's
    /// Tensile library files).
    HipModuleLoad = 23, Hip, "hipModuleLoad", ModuleLoad, ModulePath, Call;

    /// `hsa_init()`.
    HsaInit = 64, Hsa, "hsa_init", Init, Nothing, Call;
    /// `hsa_queue_create(agent, size, type, callback, data, private, group, hsa_queue_t** out)`.
    HsaQueueCreate = 65, Hsa, "hsa_queue_create", QueueCreate, QueueCreate, Call;
    /// `hsa_signal_store_screlease(signal, value)`: on a queue's doorbell, AQL packets were published.
    HsaSignalStoreScrelease = 66, Hsa, "hsa_signal_store_screlease", Doorbell, Doorbell, Doorbell;
    /// `hsa_signal_store_relaxed(signal, value)`.
    HsaSignalStoreRelaxed = 67, Hsa, "hsa_signal_store_relaxed", Doorbell, Doorbell, Doorbell;
    /// `hsa_executable_get_symbol_by_name(exec, name, agent*, symbol* out)`: a kernel symbol by name.
    HsaExecutableGetSymbolByName = 68, Hsa, "hsa_executable_get_symbol_by_name", SymbolLookup, SymbolByName, Call;
    /// `hsa_executable_symbol_get_info(symbol, attribute, void* value)`: `KERNEL_OBJECT`
    /// ([`HSA_SYMBOL_INFO_KERNEL_OBJECT`](super::HSA_SYMBOL_INFO_KERNEL_OBJECT)) gives the address every dispatch packet of this kernel carries.
    HsaExecutableSymbolGetInfo = 69, Hsa, "hsa_executable_symbol_get_info", SymbolInfo, SymbolInfo, Call;
    /// `hsa_code_object_reader_create_from_memory(ptr, size, reader* out)`.
    HsaCodeObjectReaderCreateFromMemory = 70, Hsa, "hsa_code_object_reader_create_from_memory", CodeObjectRead,
        CodeObjectFromMemory, Call;
    /// `hsa_amd_memory_pool_allocate(pool, size, flags, void** out)`.
    HsaAmdMemoryPoolAllocate = 71, Hsa, "hsa_amd_memory_pool_allocate", PoolAlloc, AllocOut { out: 3 }, Call;
    /// `hsa_amd_memory_pool_free(ptr)`.
    HsaAmdMemoryPoolFree = 72, Hsa, "hsa_amd_memory_pool_free", PoolFree, Ptr, Call;
    /// `hsa_code_object_reader_create_from_file(hsa_file_t fd, reader* out)`.
    HsaCodeObjectReaderCreateFromFile = 73, Hsa, "hsa_code_object_reader_create_from_file", CodeObjectRead,
        CodeObjectFromFile, Call;

    /// `cuLaunchKernel(f, gx, gy, gz, bx, by, [bz, unsigned shmem, stream, params, extra])`: one trap.
    CuLaunchKernel = 128, Cuda, "cuLaunchKernel", Launch, BLOCKS32, OneTrap;
    /// The per-thread-default-stream variant (same arguments).
    CuLaunchKernelPtsz = 129, Cuda, "cuLaunchKernel_ptsz", Launch, BLOCKS32, OneTrap;
    /// `cuLaunchKernelEx(const CUlaunchConfig* config, f, params, extra)`: the config's grid, block,
    /// shared memory and stream are read at entry.
    CuLaunchKernelEx = 130, Cuda, "cuLaunchKernelEx", Launch, LaunchConfig, OneTrap;
    CuLaunchKernelExPtsz = 131, Cuda, "cuLaunchKernelEx_ptsz", Launch, LaunchConfig, OneTrap;
    /// `cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, [bz, unsigned shmem, stream, params])`.
    CuLaunchCooperativeKernel = 132, Cuda, "cuLaunchCooperativeKernel", Launch, BLOCKS32, OneTrap;
    CuLaunchCooperativeKernelPtsz = 133, Cuda, "cuLaunchCooperativeKernel_ptsz", Launch, BLOCKS32, OneTrap;
    /// `cuGraphLaunch(graphExec, stream)`: one replay.
    CuGraphLaunch = 134, Cuda, "cuGraphLaunch", GraphLaunch, HandleStream, OneTrap;
    CuGraphLaunchPtsz = 135, Cuda, "cuGraphLaunch_ptsz", GraphLaunch, HandleStream, OneTrap;
    /// `cuModuleGetFunction(CUfunction* out, CUmodule module, const char* name)`.
    CuModuleGetFunction = 136, Cuda, "cuModuleGetFunction", FunctionLookup, FunctionOut, Call;
    /// `cuLibraryGetKernel(CUkernel* out, CUlibrary library, const char* name)`.
    CuLibraryGetKernel = 137, Cuda, "cuLibraryGetKernel", KernelLookup, FunctionOut, Call;
    /// `cuKernelGetFunction(CUfunction* out, CUkernel kernel)`: the function a kernel has in the current
    /// context (named as the kernel).
    CuKernelGetFunction = 138, Cuda, "cuKernelGetFunction", KernelFunction, KernelFunctionOut, Call;
    /// `cuModuleLoadData(CUmodule* out, const void* image)`.
    CuModuleLoadData = 139, Cuda, "cuModuleLoadData", ModuleLoad, ModuleOut, Call;
    /// `cuModuleLoadDataEx(CUmodule* out, const void* image, n, options, values)`.
    CuModuleLoadDataEx = 140, Cuda, "cuModuleLoadDataEx", ModuleLoad, ModuleOut, Call;
    /// `cuLibraryLoadData(CUlibrary* out, const void* code, ...)`.
    CuLibraryLoadData = 141, Cuda, "cuLibraryLoadData", ModuleLoad, ModuleOut, Call;
    /// `cuMemAlloc_v2(CUdeviceptr* out, size_t size)`.
    CuMemAlloc = 142, Cuda, "cuMemAlloc_v2", Alloc, AllocOut { out: 0 }, Call;
    /// `cuMemFree_v2(CUdeviceptr ptr)`.
    CuMemFree = 143, Cuda, "cuMemFree_v2", Free, Ptr, Call;
    /// `cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t size)`.
    CuMemcpyDtoH = 144, Cuda, "cuMemcpyDtoH_v2", Memcpy,
        Memcpy { direction: Fixed(memcpy_kind::DEVICE_TO_HOST), stream: None }, Call;
    /// `cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t size)`.
    CuMemcpyHtoD = 145, Cuda, "cuMemcpyHtoD_v2", Memcpy,
        Memcpy { direction: Fixed(memcpy_kind::HOST_TO_DEVICE), stream: None }, Call;
    /// `cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t size, stream)`. The async copies take one
    /// trap (ggml's token loop makes ~7 a token): what they copy is known at entry; an enqueue's result and
    /// duration are not kept.
    CuMemcpyDtoHAsync = 146, Cuda, "cuMemcpyDtoHAsync_v2", Memcpy,
        Memcpy { direction: Fixed(memcpy_kind::DEVICE_TO_HOST), stream: Some(3) }, OneTrap;
    /// `cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t size, stream)`: unified addressing, the
    /// direction is the pointers'.
    CuMemcpyAsync = 147, Cuda, "cuMemcpyAsync", Memcpy,
        Memcpy { direction: Fixed(memcpy_kind::DEFAULT), stream: Some(3) }, OneTrap;
    /// `cuStreamSynchronize(stream)`.
    CuStreamSynchronize = 148, Cuda, "cuStreamSynchronize", Sync, Stream, OneTrap;
    /// `cuCtxSynchronize()`.
    CuCtxSynchronize = 149, Cuda, "cuCtxSynchronize", Sync, Nothing, OneTrap;
    /// `cuStreamBeginCapture_v2(stream, mode)`: launches on the stream are graph nodes until `EndCapture`.
    CuStreamBeginCapture = 150, Cuda, "cuStreamBeginCapture_v2", CaptureBegin, Stream, Call;
    CuStreamBeginCapturePtsz = 151, Cuda, "cuStreamBeginCapture_v2_ptsz", CaptureBegin, Stream, Call;
    /// `cuStreamEndCapture(stream, CUgraph* out)`.
    CuStreamEndCapture = 152, Cuda, "cuStreamEndCapture", CaptureEnd, StreamHandleOut, Call;
    CuStreamEndCapturePtsz = 153, Cuda, "cuStreamEndCapture_ptsz", CaptureEnd, StreamHandleOut, Call;
    /// `cuGraphInstantiateWithFlags(CUgraphExec* out, graph, flags)`.
    CuGraphInstantiateWithFlags = 154, Cuda, "cuGraphInstantiateWithFlags", GraphInstantiate, InstantiateOut, Call;
    /// `cuGraphInstantiateWithParams(CUgraphExec* out, graph, params)`.
    CuGraphInstantiateWithParams = 155, Cuda, "cuGraphInstantiateWithParams", GraphInstantiate, InstantiateOut,
        Call;
    /// `cuGraphInstantiate_v2(CUgraphExec* out, graph, ...)`.
    CuGraphInstantiate = 156, Cuda, "cuGraphInstantiate_v2", GraphInstantiate, InstantiateOut, Call;
    /// `cuStreamSynchronize_ptsz(stream)`.
    CuStreamSynchronizePtsz = 157, Cuda, "cuStreamSynchronize_ptsz", Sync, Stream, OneTrap;
    /// `cuGraphExecUpdate_v2(graphExec, graph, CUgraphExecUpdateResultInfo*)`: see `hipGraphExecUpdate`.
    CuGraphExecUpdate = 159, Cuda, "cuGraphExecUpdate_v2", GraphUpdate, ExecGraph, Call;
    /// `cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t size, stream)`.
    CuMemcpyHtoDAsync = 158, Cuda, "cuMemcpyHtoDAsync_v2", Memcpy,
        Memcpy { direction: Fixed(memcpy_kind::HOST_TO_DEVICE), stream: Some(3) }, OneTrap;
    /// `cuModuleLoad(CUmodule* out, const char* fname)`: a cubin, fatbin or PTX file loaded by path.
    CuModuleLoad = 160, Cuda, "cuModuleLoad", ModuleLoad, ModulePath, Call;

    /// `__cudaRegisterFunction(handle, hostFun, deviceFun, deviceName, ...)`: the runtime's name for a
    /// host stub (opt-in API view).
    CudaRegisterFunction = 192, CudaRuntime, "__cudaRegisterFunction", Register, Register, RegisterName;
    /// `cudaLaunchKernel(func, dim3 grid, dim3 block, args, shmem, stream)` (opt-in API view; it reaches
    /// cuLaunchKernel too, a second trap per launch).
    CudaLaunchKernel = 193, CudaRuntime, "cudaLaunchKernel", Launch, DIM3, OneTrap;
    /// `cudaLaunchKernelExC(const cudaLaunchConfig_t* config, func, args)`: the config's dim3 grid and
    /// block, `size_t` shared memory and stream lie where `CUlaunchConfig` has them (ggml-cuda launches
    /// through it).
    CudaLaunchKernelExC = 194, CudaRuntime, "cudaLaunchKernelExC", Launch, LaunchConfig, OneTrap;

    /// `int32_t llama_decode(llama_context* ctx, struct llama_batch batch)`: a step's batch, read at entry
    /// (one trap a step; each sequence's tokens, positions and outputs, and the library calls of the step
    /// before).
    LlamaDecode = 224, Llama, "llama_decode", Batch, LlamaBatch, Batch;
    /// `int32_t llama_process(llama_context* ctx, enum llama_process_type type, struct llama_batch_ext*
    /// batch)`: the same, for llama.cpp's extended batch (its tools call this since it came).
    LlamaProcess = 225, Llama, "llama_process", Batch, LlamaBatchExt, Batch;

    /// `enum ggml_status ggml_backend_sched_graph_compute_async(ggml_backend_sched_t sched, struct
    /// ggml_cgraph* graph)`: one graph evaluated, where a step's next matrix pass begins (llama.cpp's
    /// `graph_compute` calls it once per micro-batch, Ollama's engine once per forward). One trap a pass
    /// replaces the synchronizations and copies toward the device that used to cut passes.
    GgmlSchedGraphCompute = 226, Ggml, "ggml_backend_sched_graph_compute_async", Pass, Nothing, OneTrap;
    /// `void ggml_backend_tensor_set(struct ggml_tensor* tensor, const void* data, size_t offset, size_t
    /// size)`: the scheduler copies each graph input to the device through it (`BACKEND#NAME#N`); the
    /// program reads llama.cpp's token positions (`inp_pos`) and output rows (`out_ids`) of each pass, and
    /// nothing of any other tensor. One trap a tensor set (about eight a pass); where a model library's
    /// batch is read (`llama_decode`), they check it.
    GgmlBackendTensorSet = 227, Ggml, "ggml_backend_tensor_set", Input, TensorSet, Input;

    /// `VkResult vkCreateShaderModule(VkDevice, const VkShaderModuleCreateInfo*, const VkAllocationCallbacks*,
    /// VkShaderModule* out)`: SPIR-V handed to the driver; its last bytes name it (ggml's Vulkan backend
    /// embeds every shader in `libggml-vulkan.so` under a named array).
    VkCreateShaderModule = 256, Vulkan, "vkCreateShaderModule", ShaderModule, ShaderModuleOut, Call;
    /// `VkResult vkCreateComputePipelines(VkDevice, VkPipelineCache, uint32_t count, const
    /// VkComputePipelineCreateInfo*, const VkAllocationCallbacks*, VkPipeline* out)`.
    VkCreateComputePipelines = 257, Vulkan, "vkCreateComputePipelines", PipelineCreate, PipelinesOut, Call;
    /// `void vkCmdBindPipeline(VkCommandBuffer, VkPipelineBindPoint, VkPipeline)`: one trap; a dispatch
    /// runs the compute pipeline last bound on its command buffer.
    VkCmdBindPipeline = 258, Vulkan, "vkCmdBindPipeline", Bind, BindPipeline, OneTrap;
    /// `void vkCmdDispatch(VkCommandBuffer, uint32_t x, uint32_t y, uint32_t z)`: one trap.
    VkCmdDispatch = 259, Vulkan, "vkCmdDispatch", Launch, VkDispatch { grid: Some(1) }, OneTrap;
    /// `void vkCmdDispatchBase(VkCommandBuffer, baseX, baseY, baseZ, uint32_t x, uint32_t y, uint32_t z)`.
    VkCmdDispatchBase = 260, Vulkan, "vkCmdDispatchBase", Launch, VkDispatch { grid: Some(4) }, OneTrap;
    /// `void vkCmdDispatchIndirect(VkCommandBuffer, VkBuffer, VkDeviceSize offset)`: counts in a buffer.
    VkCmdDispatchIndirect = 261, Vulkan, "vkCmdDispatchIndirect", Launch, VkDispatch { grid: None }, OneTrap;
    /// `VkResult vkQueueSubmit(VkQueue, uint32_t count, const VkSubmitInfo*, VkFence)`: one trap.
    VkQueueSubmit = 262, Vulkan, "vkQueueSubmit", Submit, QueueSubmit, OneTrap;
    /// `VkResult vkQueueSubmit2(VkQueue, uint32_t count, const VkSubmitInfo2*, VkFence)`.
    VkQueueSubmit2 = 263, Vulkan, "vkQueueSubmit2", Submit, QueueSubmit, OneTrap;
    /// `PFN_vkVoidFunction vkGetDeviceProcAddr(VkDevice, const char* name)`: a device entry point taken from
    /// the driver (or the first layer) directly, past the loader's trampolines and so past the probes above.
    VkGetDeviceProcAddr = 264, Vulkan, "vkGetDeviceProcAddr", ProcAddr, ProcAddr, Call;

    /// `static void ggml_vk_create_pipeline_func(vk_device&, vk_pipeline& pipeline, size_t spv_size, const
    /// void* spv_data, const std::string entrypoint, ...)`: ggml-vulkan makes each pipeline here, its shader
    /// module then its compute pipeline, on the calling thread. A function of the library's own, with no
    /// exported symbol: found by its code (`record::probes::ggml_vulkan`), in a stripped copy too.
    GgmlVkCreatePipeline = 288, GgmlVulkan, "ggml_vk_create_pipeline_func", PipelineName, PipelineName,
        PipelineName;
}
