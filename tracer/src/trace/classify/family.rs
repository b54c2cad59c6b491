//! The families a kernel's name puts it in (what it does), and the name each is written as: their own
//! module, below the rules that choose one ([`super`] for ggml's CUDA/HIP names, [`super::vulkan`] for its
//! Vulkan pipelines).

/// What a kernel does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Family {
    /// `mul_mat_vec_q`: quantized matrix × vector (token decode, up to 8 columns).
    Mmvq,
    /// `mul_mat_q` (and its stream-k fixup): quantized matrix × matrix (prompt batches).
    Mmq,
    /// `mul_mat_vec_f` / `mul_mat_f`: float matrix products.
    MatMulFloat,
    /// Vendor GEMMs: Tensile (`Cijk_*`) and hipBLASLt on AMD (ggml's hipBLAS/rocBLAS fallback), cuBLAS
    /// and cuBLASLt on NVIDIA; [`Class::library`](super::Class::library) says which.
    BlasGemm,
    /// Attention kernels of any library: ggml's, `PyTorch`'s flash and memory-efficient ones, cuDNN's
    /// generated SDPA kernels.
    FlashAttention,
    /// Convolutions (cuDNN's implicit-GEMM and other conv kernels, `MIOpen`'s).
    Convolution,
    /// Triton kernels; Inductor's generated ones are named `triton_{poi,per,red,tem,for}_*`.
    Triton,
    /// Reductions, scans and sorts of the CUB/hipCUB/rocPRIM/Thrust kind and `PyTorch`'s `reduce_kernel`.
    ReduceScan,
    /// NCCL/RCCL collectives.
    Collective,
    Rope,
    /// `dequantize_*`, `convert_*`, `cpy_*`, `k_get_rows*`, `k_set_rows*`.
    Convert,
    /// `quantize_q8_1`, `quantize_mmq_q8_1`: the activations repacked for MMVQ/MMQ.
    Quantize,
    Norm,
    Softmax,
    /// Other ggml operators: element-wise and small kernels (`k_bin_bcast`, `unary_*`, `argmax`, ...) and
    /// the rest of ggml's op set (convolutions, pooling, sorting, scans, recurrent-state ops, optimizer
    /// steps, ...), listed in [`OTHER_GGML_OPS`](super::OTHER_GGML_OPS).
    Elementwise,
    /// The HIP runtime's own kernels (`__amd_rocclr_*`: copies and fills).
    RuntimeInternal,
    #[default]
    Unknown,
}

/// A trace's report and `inspect` write a family as its name.
impl serde::Serialize for Family {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl Family {
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Self::Mmvq => "MMVQ",
            Self::Mmq => "MMQ",
            Self::MatMulFloat => "matmul-float",
            Self::BlasGemm => "BLAS-GEMM",
            Self::FlashAttention => "flash-attention",
            Self::Convolution => "convolution",
            Self::Triton => "triton",
            Self::ReduceScan => "reduce/scan/sort",
            Self::Collective => "collective",
            Self::Rope => "RoPE",
            Self::Convert => "dequantize/convert",
            Self::Quantize => "quantize",
            Self::Norm => "norm",
            Self::Softmax => "softmax",
            Self::Elementwise => "elementwise/other",
            Self::RuntimeInternal => "runtime-internal",
            Self::Unknown => "unknown",
        }
    }
}
