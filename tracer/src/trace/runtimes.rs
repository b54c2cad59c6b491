//! The libraries tracer knows, by file name.
//!
//! Which runtime a library record's path is, and which GPU APIs
//! tracer does not probe a mapping reveals. One table for both wings: the recording finds the copies to probe
//! by it, the report names what a process maps by it.

use tracer_common::api::Library;

/// The libraries tracer knows how to probe, by file-name prefix.
pub(crate) const HIP_RUNTIME: &str = "libamdhip64.so";
pub(crate) const HSA_RUNTIME: &str = "libhsa-runtime64.so";
/// The NVIDIA driver library (every CUDA launch passes through it).
pub(crate) const CUDA_DRIVER: &str = "libcuda.so";
/// The CUDA runtime library (probed on request only: `--cuda-runtime`).
pub(crate) const CUDA_RUNTIME: &str = "libcudart.so";
/// llama.cpp's model library: `llama_decode`, where each step's batch is read.
pub(crate) const LLAMA: &str = "libllama.so";
/// ggml's base library: its graph scheduler, where each matrix pass is handed over.
pub(crate) const GGML_BASE: &str = "libggml-base.so";
/// ggml's Vulkan backend: where it names each pipeline it makes.
pub(crate) const GGML_VULKAN: &str = "libggml-vulkan.so";
/// The Vulkan loader: every call through an instance's entry points passes its trampolines.
pub(crate) const VULKAN_LOADER: &str = "libvulkan.so";
/// The `OpenCL` ICD loader: a GPU API tracer does not probe, whose users are reported as such.
pub(crate) const OPENCL_LOADER: &str = "libOpenCL.so";
/// GPU APIs and ggml backends tracer does not probe, by the file-name prefix of their library, with the
/// name the report gives them: a process that maps one runs GPU work tracer does not count, and is said to.
const UNOBSERVED: [(&str, &str); 6] = [
    (OPENCL_LOADER, "OpenCL"),
    ("libggml-opencl.so", "ggml's OpenCL backend"),
    ("libggml-sycl.so", "ggml's SYCL backend"),
    ("libggml-cann.so", "ggml's CANN backend"),
    ("libggml-musa.so", "ggml's MUSA backend"),
    ("libggml-webgpu.so", "ggml's WebGPU backend"),
];

/// The GPU API or ggml backend tracer does not probe that a library with this file name is, if any.
pub(crate) fn unobserved_api(file_name: &str) -> Option<&'static str> {
    UNOBSERVED.iter().find(|(prefix, _)| file_name.starts_with(prefix)).map(|&(_, api)| api)
}
/// The libraries probed by default.
pub(crate) const RUNTIMES: [&str; 7] =
    [HIP_RUNTIME, HSA_RUNTIME, CUDA_DRIVER, LLAMA, GGML_BASE, GGML_VULKAN, VULKAN_LOADER];

/// Which runtime a probed copy at `path` is, from its file name.
pub(crate) fn runtime_of(path: &str) -> Library {
    let name = path.rsplit('/').next().unwrap_or(path);
    if name.starts_with(HSA_RUNTIME) {
        Library::Hsa
    } else if name.starts_with(CUDA_DRIVER) {
        Library::Cuda
    } else if name.starts_with(CUDA_RUNTIME) {
        Library::CudaRuntime
    } else if name.starts_with(LLAMA) {
        Library::Llama
    } else if name.starts_with(GGML_BASE) {
        Library::Ggml
    } else if name.starts_with(GGML_VULKAN) {
        Library::GgmlVulkan
    } else if name.starts_with(VULKAN_LOADER) {
        Library::Vulkan
    } else {
        Library::Hip
    }
}
