//! What a function's return value is called, per runtime: the result type each library's functions
//! return (`hipError_t`, `hsa_status_t`, `CUresult`, `cudaError_t`), for the values a launch, copy,
//! allocation or queue call returns. Values from the runtimes' headers (`hip_runtime_api.h`, `hsa.h`,
//! `cuda.h`, `driver_types.h`, `vulkan_core.h`); a value not listed is shown as a number, never guessed.

use super::{ApiFunc, Library};

impl ApiFunc {
    /// The name of a value this function returned, in its runtime's result type.
    pub const fn result_name(self, code: i64) -> Option<&'static str> {
        self.library().result_name(code)
    }
}

impl Library {
    /// The name of a value of the result type this library's functions return.
    pub const fn result_name(self, code: i64) -> Option<&'static str> {
        match self {
            Self::Hip => hip(code),
            Self::Hsa => hsa(code),
            Self::Cuda => cuda_driver(code),
            Self::CudaRuntime => cuda_runtime(code),
            // llama_decode's, ggml's scheduler's and ggml-vulkan's pipeline maker's results are never read
            // (one trap, at entry).
            Self::Llama | Self::Ggml | Self::GgmlVulkan => None,
            Self::Vulkan => vulkan(code),
        }
    }
}

/// `VkResult` (`vulkan_core.h`): the creation calls' results (dispatches and binds return nothing).
const fn vulkan(code: i64) -> Option<&'static str> {
    Some(match code {
        0 => "VK_SUCCESS",
        -1 => "VK_ERROR_OUT_OF_HOST_MEMORY",
        -2 => "VK_ERROR_OUT_OF_DEVICE_MEMORY",
        -3 => "VK_ERROR_INITIALIZATION_FAILED",
        -4 => "VK_ERROR_DEVICE_LOST",
        -13 => "VK_ERROR_UNKNOWN",
        -1_000_012_000 => "VK_ERROR_INVALID_SHADER_NV",
        1_000_297_000 => "VK_PIPELINE_COMPILE_REQUIRED",
        _ => return None,
    })
}

/// `hipError_t`.
const fn hip(code: i64) -> Option<&'static str> {
    Some(match code {
        0 => "hipSuccess",
        1 => "hipErrorInvalidValue",
        2 => "hipErrorOutOfMemory",
        3 => "hipErrorNotInitialized",
        9 => "hipErrorInvalidConfiguration",
        13 => "hipErrorInvalidSymbol",
        17 => "hipErrorInvalidDevicePointer",
        21 => "hipErrorInvalidMemcpyDirection",
        35 => "hipErrorInsufficientDriver",
        52 => "hipErrorMissingConfiguration",
        98 => "hipErrorInvalidDeviceFunction",
        100 => "hipErrorNoDevice",
        101 => "hipErrorInvalidDevice",
        200 => "hipErrorInvalidImage",
        201 => "hipErrorInvalidContext",
        209 => "hipErrorNoBinaryForGpu",
        301 => "hipErrorFileNotFound",
        400 => "hipErrorInvalidHandle",
        500 => "hipErrorNotFound",
        600 => "hipErrorNotReady",
        700 => "hipErrorIllegalAddress",
        701 => "hipErrorLaunchOutOfResources",
        719 => "hipErrorLaunchFailure",
        _ => return None,
    })
}

/// `hsa_status_t`.
const fn hsa(code: i64) -> Option<&'static str> {
    Some(match code {
        0 => "HSA_STATUS_SUCCESS",
        0x1 => "HSA_STATUS_INFO_BREAK",
        0x1000 => "HSA_STATUS_ERROR",
        0x1001 => "HSA_STATUS_ERROR_INVALID_ARGUMENT",
        0x1002 => "HSA_STATUS_ERROR_INVALID_QUEUE_CREATION",
        0x1003 => "HSA_STATUS_ERROR_INVALID_ALLOCATION",
        0x1004 => "HSA_STATUS_ERROR_INVALID_AGENT",
        0x1005 => "HSA_STATUS_ERROR_INVALID_REGION",
        0x1006 => "HSA_STATUS_ERROR_INVALID_SIGNAL",
        0x1007 => "HSA_STATUS_ERROR_INVALID_QUEUE",
        0x1008 => "HSA_STATUS_ERROR_OUT_OF_RESOURCES",
        0x1009 => "HSA_STATUS_ERROR_INVALID_PACKET_FORMAT",
        0x100A => "HSA_STATUS_ERROR_RESOURCE_FREE",
        0x100B => "HSA_STATUS_ERROR_NOT_INITIALIZED",
        0x100F => "HSA_STATUS_ERROR_INVALID_ISA",
        0x1010 => "HSA_STATUS_ERROR_INVALID_CODE_OBJECT",
        0x1011 => "HSA_STATUS_ERROR_INVALID_EXECUTABLE",
        0x1013 => "HSA_STATUS_ERROR_INVALID_SYMBOL_NAME",
        0x1016 => "HSA_STATUS_ERROR_EXCEPTION",
        0x1020 => "HSA_STATUS_ERROR_INVALID_FILE",
        0x1026 => "HSA_STATUS_ERROR_FATAL",
        _ => return None,
    })
}

/// `CUresult`.
const fn cuda_driver(code: i64) -> Option<&'static str> {
    Some(match code {
        0 => "CUDA_SUCCESS",
        1 => "CUDA_ERROR_INVALID_VALUE",
        2 => "CUDA_ERROR_OUT_OF_MEMORY",
        3 => "CUDA_ERROR_NOT_INITIALIZED",
        4 => "CUDA_ERROR_DEINITIALIZED",
        34 => "CUDA_ERROR_STUB_LIBRARY",
        100 => "CUDA_ERROR_NO_DEVICE",
        101 => "CUDA_ERROR_INVALID_DEVICE",
        200 => "CUDA_ERROR_INVALID_IMAGE",
        201 => "CUDA_ERROR_INVALID_CONTEXT",
        209 => "CUDA_ERROR_NO_BINARY_FOR_GPU",
        218 => "CUDA_ERROR_INVALID_PTX",
        300 => "CUDA_ERROR_INVALID_SOURCE",
        301 => "CUDA_ERROR_FILE_NOT_FOUND",
        400 => "CUDA_ERROR_INVALID_HANDLE",
        500 => "CUDA_ERROR_NOT_FOUND",
        600 => "CUDA_ERROR_NOT_READY",
        700 => "CUDA_ERROR_ILLEGAL_ADDRESS",
        701 => "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
        702 => "CUDA_ERROR_LAUNCH_TIMEOUT",
        719 => "CUDA_ERROR_LAUNCH_FAILED",
        999 => "CUDA_ERROR_UNKNOWN",
        _ => return None,
    })
}

/// `cudaError_t`.
const fn cuda_runtime(code: i64) -> Option<&'static str> {
    Some(match code {
        0 => "cudaSuccess",
        1 => "cudaErrorInvalidValue",
        2 => "cudaErrorMemoryAllocation",
        3 => "cudaErrorInitializationError",
        9 => "cudaErrorInvalidConfiguration",
        17 => "cudaErrorInvalidDevicePointer",
        21 => "cudaErrorInvalidMemcpyDirection",
        34 => "cudaErrorStubLibrary",
        35 => "cudaErrorInsufficientDriver",
        52 => "cudaErrorMissingConfiguration",
        98 => "cudaErrorInvalidDeviceFunction",
        100 => "cudaErrorNoDevice",
        101 => "cudaErrorInvalidDevice",
        200 => "cudaErrorInvalidKernelImage",
        209 => "cudaErrorNoKernelImageForDevice",
        400 => "cudaErrorInvalidResourceHandle",
        500 => "cudaErrorSymbolNotFound",
        600 => "cudaErrorNotReady",
        700 => "cudaErrorIllegalAddress",
        701 => "cudaErrorLaunchOutOfResources",
        702 => "cudaErrorLaunchTimeout",
        719 => "cudaErrorLaunchFailure",
        999 => "cudaErrorUnknown",
        _ => return None,
    })
}
