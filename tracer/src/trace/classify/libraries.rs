//! What the vendor libraries' and frameworks' kernel names say: the library a name comes from (cuBLAS,
//! cuDNN, NCCL, Tensile, Inductor, ...) and the families only their names reveal (collectives,
//! convolutions, reductions and scans, cuBLAS GEMMs).

/// The library a kernel's name says it comes from.
pub(super) fn library_of(normalized: &str, base: &str, demangled: &str) -> Option<&'static str> {
    let lower = normalized.to_ascii_lowercase();
    if base.starts_with("triton_") {
        Some("Inductor")
    } else if base.starts_with("nvjet_") || demangled.contains("cublasLt") {
        Some("cuBLASLt")
    } else if base.starts_with("cudnn")
        || demangled.contains("cudnn::")
        || base.contains("xmma_fprop")
        || base.contains("xmma_dgrad")
        || base.contains("xmma_wgrad")
    {
        Some("cuDNN")
    } else if lower.contains("hipblaslt") {
        Some("hipBLASLt")
    } else if normalized.starts_with("Cijk_") || base.starts_with("Cijk_") {
        Some("Tensile")
    } else if base.starts_with("nccl") || demangled.contains("nccl") {
        Some("NCCL")
    } else if lower.contains("rccl") {
        Some("RCCL")
    } else if base.starts_with("miopen") || demangled.contains("miopen::") {
        Some("MIOpen")
    } else if base.starts_with("cutlass") || demangled.contains("cutlass_") {
        // cuBLAS ships CUTLASS-built kernels (`cutlass::Kernel2<cutlass_80_simt_sgemm_...>`); so can anyone.
        Some("CUTLASS")
    } else if is_cublas_gemm(base, demangled) {
        Some("cuBLAS")
    } else if demangled.contains("pytorch_flash::") || demangled.contains("PyTorchMemEffAttention") {
        Some("PyTorch")
    } else {
        None
    }
}

/// NCCL/RCCL kernels (`ncclDevKernel_AllReduce_Sum_f32_RING_LL`, the older `ncclKernel_*`) and NCCL's
/// one-rank reduction.
pub(super) fn is_collective(base: &str, demangled: &str) -> bool {
    base.starts_with("nccl")
        || base.starts_with("rccl")
        || base == "oneRankReduce"
        || demangled.contains("ncclDevKernel")
        || demangled.contains("rccl::")
}

/// Convolution kernels: cuDNN's implicit-GEMM forward/backward (`sm80_xmma_fprop_implicit_gemm_*`,
/// `*_dgrad_*`, `*_wgrad_*`), its named conv kernels, `MIOpen`'s.
pub(super) fn is_convolution(base: &str, demangled: &str) -> bool {
    let lower = base.to_ascii_lowercase();
    lower.contains("xmma_fprop")
        || lower.contains("xmma_dgrad")
        || lower.contains("xmma_wgrad")
        || lower.contains("implicit_convolve")
        || lower.contains("conv2d")
        || (demangled.contains("cudnn::") && lower.contains("conv"))
        || (lower.starts_with("miopen") && lower.contains("conv"))
}

/// CUB/hipCUB/rocPRIM/Thrust device algorithms and `PyTorch`'s reduction kernel.
pub(super) fn is_reduce_scan(base: &str, demangled: &str) -> bool {
    const NAMESPACES: &[&str] = &["cub::", "hipcub::", "rocprim::", "thrust::"];
    NAMESPACES.iter().any(|ns| demangled.contains(ns))
        && ["Scan", "Reduce", "Sort", "Select", "Histogram", "scan", "reduce", "sort"].iter().any(|w| base.contains(w))
        || (base == "reduce_kernel" && demangled.contains("at::native::"))
}

/// cuBLAS / cuBLASLt GEMM and GEMV kernels by their names' prefixes (nvjet for Hopper's generated
/// kernels, xmma/cutlass tile kernels named by architecture, the older `*gemm*`/`gemv*` kernels).
pub(super) fn is_cublas_gemm(base: &str, demangled: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "nvjet_",
        "sm100_xmma",
        "sm90_xmma",
        "sm89_xmma",
        "sm86_xmma",
        "sm80_xmma",
        "sm75_xmma",
        "sm70_xmma",
        "xmma_",
        "ampere_",
        "volta_",
        "turing_",
        "maxwell_",
        "hopper_",
        "gemv2",
        "gemvx",
        "gemmk1",
        "gemmSN",
        "splitKreduce",
        "cublasLt",
        "cublas",
    ];
    PREFIXES.iter().any(|p| base.starts_with(p))
        || demangled.contains("cublasLt::")
        || (demangled.contains("cutlass") && demangled.to_ascii_lowercase().contains("gemm"))
}

/// `PyTorch`'s own kernels (element-wise, reductions, indexing, RNG, copies): "elementwise/other" unless a
/// named family matched first (softmax, norm, flash attention).
pub(super) const PYTORCH_NAMESPACES: &[&str] = &["at::native::", "at::cuda::", "c10::cuda::"];
