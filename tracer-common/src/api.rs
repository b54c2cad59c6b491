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
}

macro_rules! api_funcs {
    ($( $(#[$doc:meta])* $variant:ident = $num:literal, $sym:literal, $flags:expr, $shape:ident; )*) => {
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
        }
    };
}

const NONE: u64 = 0;

api_funcs! {
    /// `void** __hipRegisterFatBinary(const void* wrapper)`: returns the module handle.
    HipRegisterFatBinary = 1, "__hipRegisterFatBinary", NONE, Call;
    /// `__hipRegisterFunction(modules, hostFunction, deviceFunction, deviceName, ...)`.
    HipRegisterFunction = 2, "__hipRegisterFunction", NONE, RegisterName;
    /// `__hipPushCallConfiguration(dim3 grid, dim3 block, size_t shmem, hipStream_t stream)`: the
    /// `kernel<<<...>>>` configuration, pushed before the launch stub runs.
    HipPushCallConfiguration = 3, "__hipPushCallConfiguration", NONE, Call;
    /// `hipLaunchKernel(f, dim3 grid, dim3 block, void** args, size_t shmem, hipStream_t stream)`.
    HipLaunchKernel = 4, "hipLaunchKernel", cookie::STACK, Call;
    /// `hipModuleLoadData(hipModule_t* out, const void* image)`.
    HipModuleLoadData = 5, "hipModuleLoadData", cookie::OUT_ARG0, Call;
    /// `hipModuleGetFunction(hipFunction_t* out, hipModule_t module, const char* name)`.
    HipModuleGetFunction = 6, "hipModuleGetFunction", cookie::OUT_ARG0 | cookie::NAME_ARG2, Call;
    /// `hipModuleLaunchKernel(f, gx, gy, gz, bx, by, [bz, shmem, stream, params, extra])`.
    HipModuleLaunchKernel = 7, "hipModuleLaunchKernel", cookie::STACK, Call;
    /// `hipExtModuleLaunchKernel(f, gwsX, gwsY, gwsZ, lwsX, lwsY, [lwsZ, shmem, stream, params, ...])`,
    /// the C export; sizes in work-items.
    HipExtModuleLaunchKernel = 8, "hipExtModuleLaunchKernel", cookie::STACK, Call;
    /// The C++-mangled export of `hipExtModuleLaunchKernel` (same arguments).
    HipExtModuleLaunchKernelCxx = 9,
        "_Z24hipExtModuleLaunchKernelP18ihipModuleSymbol_tjjjjjjmP12ihipStream_tPPvS4_P11ihipEvent_tS6_j",
        cookie::STACK, Call;
    /// `hipMalloc(void** out, size_t size)`.
    HipMalloc = 10, "hipMalloc", cookie::OUT_ARG0, Call;
    /// `hipFree(void* ptr)`.
    HipFree = 11, "hipFree", NONE, Call;
    /// `hipMemcpy(dst, src, size, kind)`.
    HipMemcpy = 12, "hipMemcpy", NONE, Call;
    /// `hipMemcpyAsync(dst, src, size, kind, stream)`.
    HipMemcpyAsync = 13, "hipMemcpyAsync", NONE, Call;
    /// `hipStreamSynchronize(stream)`.
    HipStreamSynchronize = 14, "hipStreamSynchronize", NONE, Call;
    /// `hipDeviceSynchronize()`.
    HipDeviceSynchronize = 15, "hipDeviceSynchronize", NONE, Call;
    /// `hipExtLaunchKernel(f, dim3 grid, dim3 block, args, [shmem, stream, start, stop, flags])`.
    HipExtLaunchKernel = 16, "hipExtLaunchKernel", cookie::STACK, Call;
    /// `hipLaunchCooperativeKernel(f, dim3 grid, dim3 block, args, [shmem(u32), stream])`.
    HipLaunchCooperativeKernel = 17, "hipLaunchCooperativeKernel", cookie::STACK, Call;
}
