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
}

/// Which runtime library exports a function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Library {
    /// libamdhip64 (HIP, CLR).
    Hip,
    /// libhsa-runtime64 (ROCr).
    Hsa,
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
}
