//! Kernel names to what ggml (and the libraries under it) is doing.
//!
//! The family of a kernel, the quantization type in its template arguments, and the batch width its
//! name fixes. Rules from ggml's
//! CUDA/HIP sources (see `shared/reference` §4): match by prefix, never by full signature, since
//! parameters change between releases — except where a parameter is read (ggml's MMQ column count): there
//! the full list must be one tracer knows. Unknown stays unknown.

mod libraries;

use libraries::{PYTORCH_NAMESPACES, is_collective, is_convolution, is_cublas_gemm, is_reduce_scan, library_of};

use crate::demangle::{base_name, mangled_path, parameter_types, template_args};

/// What a kernel does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// `mul_mat_vec_q`: quantized matrix × vector (token decode, up to 8 columns).
    Mmvq,
    /// `mul_mat_q` (and its stream-k fixup): quantized matrix × matrix (prompt batches).
    Mmq,
    /// `mul_mat_vec_f` / `mul_mat_f`: float matrix products.
    MatMulFloat,
    /// Vendor GEMMs: Tensile (`Cijk_*`) and hipBLASLt on AMD (ggml's hipBLAS/rocBLAS fallback), cuBLAS
    /// and cuBLASLt on NVIDIA; [`Class::library`] says which.
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
    /// steps, ...), listed in [`OTHER_GGML_OPS`].
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
    pub const fn name(self) -> &'static str {
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

/// How exactly the name (and, where given, the launch shape) fixes the batch width: the columns of the
/// right-hand matrix, ggml's ne11.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Batch {
    /// Exactly this many columns: MMVQ's `ncols_dst` template argument, or the `MoE` MMVQ kernel's block
    /// height (one warp per token).
    Exact(u32),
    /// MMQ's tile width `mmq_x` (J) with no launch shape, or a grid one tile wide: at most this many.
    /// (ggml's stream-k MMQ launches one row of blocks whatever the batch; the name's bound is then per
    /// tile only.)
    TileUpTo(u32),
    /// MMQ launched with `ntx` > 1 column tiles of width J: between (ntx-1)·J+1 and ntx·J columns.
    Range(u32, u32),
}

impl Batch {
    pub fn label(self) -> String {
        match self {
            Self::Exact(n) => n.to_string(),
            Self::TileUpTo(n) => format!("<={n}"),
            Self::Range(lo, hi) => format!("{lo}-{hi}"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Class {
    pub family: Family,
    /// The ggml quantization type of the weights, from `(ggml_type)N` in the template arguments.
    pub quant: Option<&'static str>,
    pub batch: Option<Batch>,
    /// ggml's `MoE` MMVQ kernel (`mul_mat_vec_q_moe`): its batch comes from the block shape.
    pub moe: bool,
    /// The library the name says the kernel comes from, where it says so (cuBLASLt, cuDNN, Tensile,
    /// Inductor, NCCL, ...).
    pub library: Option<&'static str>,
    /// ggml's `quantize_mmq_q8_1`, which quantizes the src1 of the MMQ after it (see
    /// [`Class::mmq_columns`]).
    pub mmq_src1: bool,
    /// The kernel parameter that holds the exact column count (ne11): ggml's `mul_mat_q` with a parameter
    /// list of a ggml version tracer knows ([`MMQ_SIGNATURES`]).
    pub ne11_param: Option<u8>,
    /// Where that parameter lies in the kernel's argument segment (bytes): what a queue dispatch's
    /// kernarg holds, laid out as the C ABI lays out the parameter list.
    pub ne11_kernarg: Option<u32>,
}

/// ggml's `mul_mat_q` parameter lists tracer reads the column count from.
///
/// Each list as demangled, its types joined by ", " (`uint3` is HIP's `HIP_vector_type<unsigned int, 3>`
/// too), with the index of `ncols_y` (ne11 of src1) in it. Other lists (older or newer ggml) give no
/// parameter: their batch width stays a tile bound, never a guess.
pub const MMQ_SIGNATURES: &[(&str, u8)] = &[
    // cyllama 0.2.18's libggml-cuda.so: fast-division `uint3` parameters.
    (
        "char const*, int const*, int const*, int const*, float*, float*, uint3, int, int, int, int, int, uint3, \
         uint3, int, int, int, uint3, uint3, int, int, int, uint3",
        10,
    ),
    // llama.cpp as vendored by llama-cpp-python 0.3.36 (mmq.cuh): `y_scale` before the uint3 block.
    (
        "char const*, int const*, int const*, int const*, float*, float*, float const*, uint3, int, int, int, int, \
         int, uint3, uint3, int, int, int, uint3, uint3, int, int, int, uint3",
        11,
    ),
];

/// The index of ggml's `mul_mat_q` column-count parameter and its byte offset in the argument segment,
/// when its parameter list is one tracer knows.
fn mmq_ne11_param(demangled: &str) -> Option<(u8, u32)> {
    // HIP spells CUDA's vector type as its template: `HIP_vector_type<unsigned int, (unsigned int)3>`.
    let hip_uint3 = |t: &str| t.starts_with("HIP_vector_type<unsigned int,") && t.trim_end_matches('>').ends_with('3');
    let types: Vec<String> =
        parameter_types(demangled).into_iter().map(|t| if hip_uint3(&t) { "uint3".to_owned() } else { t }).collect();
    let list = types.join(", ");
    let &(_, index) = MMQ_SIGNATURES.iter().find(|(known, _)| *known == list)?;
    Some((index, kernarg_offset(&types, usize::from(index))?))
}

/// The byte offset of parameter `index` in a kernel's argument segment: the parameters in order, each at
/// its type's alignment (the layout hipcc's metadata records as `.args[].offset`; checked against it on
/// the fixtures' code objects). Only the types of the lists tracer reads are known.
fn kernarg_offset(types: &[String], index: usize) -> Option<u32> {
    let mut at = 0u32;
    for (i, t) in types.iter().enumerate() {
        let (size, align) = match t.as_str() {
            t if t.ends_with('*') => (8, 8),
            "int" | "unsigned int" | "float" => (4, 4),
            "uint3" => (12, 4),
            _ => return None,
        };
        at = at.next_multiple_of(align);
        if i == index {
            return Some(at);
        }
        at += size;
    }
    None
}

/// `ggml_type` numbers (ggml.h) to names.
pub const fn ggml_type_name(n: u32) -> Option<&'static str> {
    Some(match n {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        6 => "Q5_0",
        7 => "Q5_1",
        8 => "Q8_0",
        9 => "Q8_1",
        10 => "Q2_K",
        11 => "Q3_K",
        12 => "Q4_K",
        13 => "Q5_K",
        14 => "Q6_K",
        15 => "Q8_K",
        16 => "IQ2_XXS",
        17 => "IQ2_XS",
        18 => "IQ3_XXS",
        19 => "IQ1_S",
        20 => "IQ4_NL",
        21 => "IQ3_S",
        22 => "IQ2_S",
        23 => "IQ4_XS",
        24 => "I8",
        25 => "I16",
        26 => "I32",
        27 => "I64",
        28 => "F64",
        29 => "IQ1_M",
        30 => "BF16",
        34 => "TQ1_0",
        35 => "TQ2_0",
        39 => "MXFP4",
        _ => return None,
    })
}

/// ggml operator kernels that fall in none of the named families (from ggml-cuda's op sources, shared by
/// the HIP build): counted as "elementwise/other" rather than unknown. Matched as name prefixes.
pub const OTHER_GGML_OPS: &[&str] = &[
    "acc_f32",
    "add_",
    "arange_f32",
    "argmax",
    "k_argsort",
    "k_bin_bcast",
    "concat",
    "conv2d",
    "conv_transpose",
    "count_equal",
    "cross_entropy_loss",
    "cumsum",
    "diag_kernel",
    "diag_mask_inf",
    "fill_kernel",
    "gated_delta_net",
    "gated_linear_attn",
    "get_batch_pointers",
    "k_compute_batched_ptrs",
    "im2col",
    "init_indices",
    "init_offsets",
    "k_repeat_back",
    "leaky_relu",
    "mm_ids_helper",
    "op_clamp",
    "opt_step_",
    "pad_f32",
    "pad_reflect",
    "pool2d",
    "reduce_rows",
    "roll_f32",
    "rwkv_wkv",
    "scale_f32",
    "silu_back",
    "snake_kernel",
    "softcap",
    "solve_tri",
    "ssm_",
    "k_sum_rows",
    "swiglu",
    "timestep_embedding",
    "topk",
    "tri_kernel",
    "unary",
    "upscale_f32",
    "xielu",
];

/// Classifies a kernel by its mangled name (clang marks ggml's static kernels `_ZL`; both forms work).
pub fn classify(mangled: &str) -> Class {
    classify_demangled(mangled, &crate::demangle::demangle(mangled))
}

/// [`classify`] for a caller that has demangled the name already (`demangled` is
/// `demangle(mangled)`): one demangling instead of two.
pub fn classify_demangled(mangled: &str, demangled: &str) -> Class {
    let normalized = mangled.strip_suffix(".kd").unwrap_or(mangled);
    let normalized = match normalized.strip_prefix("_ZL") {
        Some(rest) => format!("_Z{rest}"),
        None => normalized.to_owned(),
    };
    let mut demangled =
        if normalized == mangled { demangled.to_owned() } else { crate::demangle::demangle(&normalized) };
    let base = match mangled_path(&demangled) {
        // Not demangled: classify by the qualified name, keeping the encoding for its arguments.
        Some(path) => {
            let base = path.rsplit("::").next().unwrap_or(&path).to_owned();
            demangled = format!("{path} {demangled}");
            base
        }
        None => base_name(&demangled.replace("(anonymous namespace)::", "")).to_owned(),
    };
    let base = base.as_str();
    let args = template_args(&demangled);
    let quant =
        args.iter().find_map(|a| a.strip_prefix("(ggml_type)").and_then(|n| n.parse().ok()).and_then(ggml_type_name));
    let second = args.get(1).and_then(|a| a.parse::<u32>().ok());
    let library = library_of(&normalized, base, &demangled);
    let family = if base.starts_with("triton_") {
        // Before the op names: Inductor names fused kernels after the ops they fuse
        // (`triton_poi_fused__scaled_dot_product_cudnn_attention_...`).
        Family::Triton
    } else if is_collective(base, &demangled) {
        Family::Collective
    } else if is_convolution(base, &demangled) {
        Family::Convolution
    } else if normalized.starts_with("Cijk_")
        || base.starts_with("Cijk_")
        || normalized.contains("hipblaslt")
        || is_cublas_gemm(base, &demangled)
    {
        Family::BlasGemm
    } else if base.starts_with("__amd_rocclr_") {
        Family::RuntimeInternal
    } else if base == "mul_mat_vec_q" || base == "mul_mat_vec_q_moe" {
        Family::Mmvq
    } else if base.starts_with("mul_mat_q") {
        Family::Mmq
    } else if base.starts_with("mul_mat_vec_f") || base.starts_with("mul_mat_f") || base == "mul_mat_vec" {
        Family::MatMulFloat
    } else if base.starts_with("flash_attn")
        || base.starts_with("flash_fwd")
        || base.starts_with("flash_bwd")
        || base.starts_with("fmha_")
        || demangled.contains("pytorch_flash::")
        || demangled.contains("fmha::")
        || (base.starts_with("cudnn_generated") && (base.contains("sdpa") || base.contains("flash")))
    {
        Family::FlashAttention
    } else if base.starts_with("rope") {
        Family::Rope
    } else if base.starts_with("quantize_") || base.starts_with("k_set_rows_quant") {
        // k_set_rows_quant: K/V rows quantized into a quantized cache
        Family::Quantize
    } else if base.starts_with("dequantize")
        || base.starts_with("convert")
        || base.starts_with("cpy")
        || base.starts_with("k_get_rows")
        || base.starts_with("k_set_rows")
    {
        Family::Convert
    } else if base.contains("norm") {
        Family::Norm
    } else if base.starts_with("soft_max") || base.to_ascii_lowercase().contains("softmax") {
        Family::Softmax
    } else if is_reduce_scan(base, &demangled) {
        Family::ReduceScan
    } else if base.contains("nchwToNhwc") || base.contains("nhwcToNchw") {
        // cuDNN's layout transforms
        Family::Convert
    } else if OTHER_GGML_OPS.iter().any(|op| base.starts_with(op))
        || PYTORCH_NAMESPACES.iter().any(|ns| demangled.contains(ns))
    {
        Family::Elementwise
    } else {
        Family::Unknown
    };
    let batch = match (family, second) {
        (Family::Mmvq, Some(n)) if base == "mul_mat_vec_q" => Some(Batch::Exact(n)),
        (Family::Mmq, Some(n)) if base == "mul_mat_q" => Some(Batch::TileUpTo(n)),
        _ => None,
    };
    let moe = base == "mul_mat_vec_q_moe";
    let quant = quant.or_else(|| block_quant(&demangled));
    let ne11 = if base == "mul_mat_q" { mmq_ne11_param(&demangled) } else { None };
    Class {
        family,
        quant,
        batch,
        moe,
        library,
        mmq_src1: base == "quantize_mmq_q8_1",
        ne11_param: ne11.map(|(i, _)| i),
        ne11_kernarg: ne11.map(|(_, at)| at),
    }
}

/// The quantization type a `block_q4_0`-style struct argument names (ggml's set-rows and copy kernels).
fn block_quant(demangled: &str) -> Option<&'static str> {
    const BLOCKS: &[(&str, &str)] = &[
        ("block_q4_0", "Q4_0"),
        ("block_q4_1", "Q4_1"),
        ("block_q5_0", "Q5_0"),
        ("block_q5_1", "Q5_1"),
        ("block_q8_0", "Q8_0"),
        ("block_iq4_nl", "IQ4_NL"),
    ];
    BLOCKS.iter().find(|(b, _)| demangled.contains(b)).map(|(_, q)| *q)
}

impl Class {
    /// The exact column count (ne11) of the MMQ that follows a launch of this kernel, when it is ggml's
    /// `quantize_mmq_q8_1`.
    ///
    /// That kernel quantizes the MMQ's src1, and ggml-cuda/ggml-hip launch it with a grid whose x is
    /// `ne1`, the column count ("ne1 tends to assume the highest values, therefore use it as the x
    /// dimension", `quantize_mmq_q8_1_cuda` in quantize.cu, llama.cpp as vendored by llama-cpp-python
    /// 0.3.36 and later). Older ggml put the rows in x: those builds are not supported (their launches
    /// carry the same name and would be misread).
    pub const fn mmq_columns(&self, grid: [u32; 3]) -> Option<u32> {
        if self.mmq_src1 { Some(grid[0]) } else { None }
    }

    /// Which kernel parameters a launch of this kernel needs read (bit i: parameter i): the column-count
    /// parameter of ggml's MMQ, else none.
    pub const fn param_plan(&self) -> u32 {
        match self.ne11_param {
            Some(i) => 1 << i,
            None => 0,
        }
    }

    /// Which 8-byte words of a queue dispatch's argument segment a dispatch of this kernel needs read (bit
    /// i: bytes 8i..8i+8): the one holding the column count of ggml's MMQ, else none.
    pub const fn kernarg_plan(&self) -> u32 {
        match self.ne11_kernarg {
            Some(at) if (at as usize) < tracer_common::PARAMS_MAX * 8 => 1 << (at / 8),
            _ => 0,
        }
    }

    /// The exact column count from a dispatch's argument-segment words (a C `int` at its offset).
    pub fn ne11_from_kernarg(&self, words: &std::collections::BTreeMap<u8, u64>) -> Option<u32> {
        let at = self.ne11_kernarg?;
        let word = *words.get(&u8::try_from(at / 8).ok()?)?;
        let v = (word >> (8 * (at % 8))) as u32;
        (v as i32 > 0).then_some(v)
    }

    /// The exact column count from a launch's kernel parameters, when this kernel has a known
    /// column-count parameter and the launch's value of it was read (a C `int`: the low 4 bytes).
    pub fn ne11_from_params(&self, params: &std::collections::BTreeMap<u8, u64>) -> Option<u32> {
        let v = *params.get(&self.ne11_param?)? as u32;
        (v as i32 > 0).then_some(v)
    }

    /// Refines the batch width from a launch's shape (the grid in blocks, or in work-items as AQL packets
    /// and hipExtModuleLaunchKernel count it; threads per block): MMQ's grid is (row tiles, column tiles,
    /// channels) with column tiles of the name's width J, and the `MoE` MMVQ kernel runs one warp row per
    /// token.
    #[must_use]
    pub fn with_shape(mut self, grid: [u32; 3], block: [u32; 3], grid_in_work_items: bool) -> Self {
        let grid_blocks: [u32; 3] =
            if grid_in_work_items { std::array::from_fn(|i| grid[i].div_ceil(block[i].max(1))) } else { grid };
        match (self.family, self.batch) {
            (Family::Mmq, Some(Batch::TileUpTo(j))) if grid_blocks[1] > 1 => {
                let ntx = grid_blocks[1];
                self.batch = Some(Batch::Range((ntx - 1) * j + 1, ntx * j));
            }
            (Family::Mmvq, None) if self.moe && block[1] > 0 => self.batch = Some(Batch::Exact(block[1])),
            _ => {}
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mmq_column_count_parameter_by_signature() {
        // Real names: cyllama 0.2.18's libggml-cuda.so, and llama.cpp of llama-cpp-python 0.3.36 (4 template
        // arguments, y_scale).
        let fastdiv =
            classify("_Z9mul_mat_qIL9ggml_type12ELi16ELb0EEvPKcPKiS4_S4_PfS5_5uint3iiiiiS6_S6_iiiS6_S6_iiiS6_");
        assert_eq!((fastdiv.family, fastdiv.ne11_param, fastdiv.param_plan()), (Family::Mmq, Some(10), 1 << 10));
        let y_scale = classify(
            "_Z9mul_mat_qIL9ggml_type12ELi16ELb0EL9ggml_prec30EEvPKcPKiS5_S5_PfS6_PKf5uint3iiiiiS9_S9_iiiS9_S9_iiiS9_",
        );
        assert_eq!(y_scale.ne11_param, Some(11));
        let params = std::collections::BTreeMap::from([(11u8, 0xdead_beef_0000_0122u64)]);
        assert_eq!(y_scale.ne11_from_params(&params), Some(290));
        assert_eq!(y_scale.ne11_from_params(&std::collections::BTreeMap::new()), None);
        // hipcc's spelling of the same lists (fixtures/hip/ggml_steps.hip).
        let hip = classify(
            "_Z9mul_mat_qIL9ggml_type12ELi16ELb0EL9ggml_prec30EEvPKcPKiS5_S5_PfS6_PKf15HIP_vector_typeIjLj3EEiiiiiSA_SA_iiiSA_SA_iiiSA_",
        );
        assert_eq!(hip.ne11_param, Some(11));
        let hip = classify(
            "_Z9mul_mat_qIL9ggml_type12ELi104ELb0EEvPKcPKiS4_S4_PfS5_15HIP_vector_typeIjLj3EEiiiiiS7_S7_iiiS7_S7_iiiS7_",
        );
        assert_eq!(hip.ne11_param, Some(10));
        // A list tracer does not know (older ggml): no parameter, no plan.
        let old = classify("_Z9mul_mat_qIL9ggml_type12ELi16ELb0EEvPKcPKiS4_S4_PfS5_iii");
        assert_eq!((old.ne11_param, old.param_plan()), (None, 0));
        assert_eq!(classify("_Z13mul_mat_vec_qIL9ggml_type12ELi1ELb0EEvPKvS2_PKiPfjjj").param_plan(), 0);
        // In a queue dispatch's argument segment: six or seven pointers, a uint3 (12 bytes, 4-aligned), then
        // ints; the column count at byte 72 (word 9, low half) and 80 (word 10, low half).
        assert_eq!((fastdiv.ne11_kernarg, fastdiv.kernarg_plan()), (Some(72), 1 << 9));
        assert_eq!((y_scale.ne11_kernarg, y_scale.kernarg_plan()), (Some(80), 1 << 10));
        let words = std::collections::BTreeMap::from([(9u8, 0x0000_0007_0000_000bu64)]);
        assert_eq!(fastdiv.ne11_from_kernarg(&words), Some(11));
        assert_eq!(y_scale.ne11_from_kernarg(&words), None);
        assert_eq!((old.ne11_kernarg, old.kernarg_plan()), (None, 0));
    }

    #[test]
    fn mmq_columns_from_the_src1_quantization_launch() {
        let quantize = classify("_Z17quantize_mmq_q8_1IL18mmq_q8_1_ds_layout1EEvPKfPKiPvlllllii");
        assert_eq!(quantize.mmq_columns([290, 1, 1]), Some(290));
        // quantize_q8_1 (MMVQ's) and the matrix kernel itself say nothing of it.
        assert_eq!(classify("_Z13quantize_q8_1PKfPvllllllll").mmq_columns([2, 1, 1]), None);
        let mmq = classify("_Z9mul_mat_qIL9ggml_type12ELi16ELb0EEvPKcPKiS4_S4_PfS5_iii");
        assert_eq!(mmq.mmq_columns([132, 1, 1]), None);
    }

    #[test]
    fn ggml_kernels_by_family_quant_and_batch() {
        // Names as ggml's HIP build emits them (static kernels: _ZL).
        let mmvq = classify(
            "_ZL13mul_mat_vec_qIL9ggml_type12ELi1ELb0EEvPKvS2_PKi31ggml_cuda_mm_fusion_args_devicePfj15HIP_vector_typeIjLj3EEjjjS8_jjjS8_jjj",
        );
        assert_eq!(
            mmvq,
            Class {
                family: Family::Mmvq,
                quant: Some("Q4_K"),
                batch: Some(Batch::Exact(1)),
                moe: false,
                library: None,
                mmq_src1: false,
                ne11_param: None,
                ne11_kernarg: None
            }
        );
        let mmq = classify("_ZL9mul_mat_qIL9ggml_type12ELi128ELb0EEvPKcPKiS4_S4_PfS5_iiiiiiiiiiiiiiiii");
        assert_eq!(
            mmq,
            Class {
                family: Family::Mmq,
                quant: Some("Q4_K"),
                batch: Some(Batch::TileUpTo(128)),
                moe: false,
                library: None,
                mmq_src1: false,
                ne11_param: None,
                ne11_kernarg: None
            }
        );
        assert_eq!(classify("_ZL13quantize_q8_1PKfPvlllllj15HIP_vector_typeIjLj3EE").family, Family::Quantize);
        assert_eq!(
            classify("_ZL17quantize_mmq_q8_1IL18mmq_q8_1_ds_layout1EEvPKfPKiPvlllllii").family,
            Family::Quantize
        );
        assert_eq!(classify("_ZL16k_get_rows_floatIffEvPKT_PKiPT0_lllmmmmmmmmmmm").family, Family::Convert);
        assert_eq!(classify("_Z13mul_mat_vec_qIL9ggml_type14ELi1EEvPKvS2_PKiPfjj").quant, Some("Q6_K"));
    }

    #[test]
    fn libraries_runtime_and_unknown() {
        assert_eq!(
            classify("Cijk_Ailk_Bljk_HHS_BH_MT64x64x32_MI16x16x16x1_SN_1LDSB0_APM1_ABV0").family,
            Family::BlasGemm
        );
        assert_eq!(classify("__amd_rocclr_copyBuffer").family, Family::RuntimeInternal);
        assert_eq!(classify("_Z12rms_norm_f32PKfPfif").family, Family::Norm);
        assert_eq!(classify("_Z8rope_f32PKfPfiPKif").family, Family::Rope);
        assert_eq!(classify("_Z12soft_max_f32PKfPfi").family, Family::Softmax);
        assert_eq!(classify("add_f32").family, Family::Elementwise);
        assert_eq!(classify("my_private_kernel").family, Family::Unknown);
        assert_eq!(classify("").family, Family::Unknown);
    }

    #[test]
    fn launch_shape_refines_batch() {
        // MMQ with J = 16: a grid of 3 column tiles holds 33..=48 columns; one tile, at most 16.
        let mmq = classify("_ZL9mul_mat_qIL9ggml_type12ELi16ELb0EEvPKcPKiS4_S4_PfS5_iiiiiiiiiiiiiiiii");
        assert_eq!(mmq.clone().with_shape([32, 3, 1], [64, 4, 1], false).batch, Some(Batch::Range(33, 48)));
        assert_eq!(mmq.clone().with_shape([32, 1, 1], [64, 4, 1], false).batch, Some(Batch::TileUpTo(16)));
        // The same 3-tile grid counted in work-items (an AQL packet): 32·64 x 3·4.
        assert_eq!(mmq.with_shape([2048, 12, 1], [64, 4, 1], true).batch, Some(Batch::Range(33, 48)));
        // MoE MMVQ: the second template argument is rows per block; the block's height is the tokens.
        let moe = classify("_ZL17mul_mat_vec_q_moeIL9ggml_type12ELi2EEvPKvS2_PKiPfj15HIP_vector_typeIjLj3EEjjjjjjjjj");
        assert_eq!((moe.family, moe.quant, moe.batch), (Family::Mmvq, Some("Q4_K"), None));
        assert_eq!(moe.with_shape([2048, 8, 1], [32, 5, 1], false).batch, Some(Batch::Exact(5)));
        // A plain MMVQ keeps its name's column count whatever the shape.
        let mmvq = classify("_Z13mul_mat_vec_qIL9ggml_type14ELi1EEvPKvS2_PKiPfjj");
        assert_eq!(mmvq.with_shape([4096, 1, 1], [32, 4, 1], false).batch, Some(Batch::Exact(1)));
        assert_eq!(Batch::Range(33, 48).label(), "33-48");
    }

    #[test]
    fn names_the_demangler_rejects_and_other_ops() {
        // `Tn` (a typed non-type template parameter) is newer than the demangler: read the name itself.
        let set_rows = "_ZL16k_set_rows_quantIi10block_q4_0Li32ETnPFvPKfPT0_EXadL_ZL23quantize_f32_q4_0_blockS2_PS0_EEEvS2_PKT_S4_llllllllllllll15HIP_vector_typeIjLj3EESC_SC_SC_SC_";
        assert_eq!((classify(set_rows).family, classify(set_rows).quant), (Family::Quantize, Some("Q4_0")));
        for other in [
            "_ZL10arange_f32Pfiff",
            "_ZL13im2col_kernelIfEvPKfPT_lllllllllllliiiiii",
            "_Z20gated_delta_net_cudaILi128ELb0ELb0EEvPKfS1_S1_S1_S1_S1_Pfllllllllllll15HIP_vector_typeIjLj3EES4_fi",
            "_ZL17k_argsort_f32_i32IL15ggml_sort_order0EEvPKfPiii",
        ] {
            assert_eq!(classify(other).family, Family::Elementwise, "{other}");
        }
    }

    #[test]
    fn cuda_kernel_names() {
        // cuBLAS on Hopper and Ampere, PyTorch's element-wise and reduction kernels, ggml-cuda's MMVQ.
        for gemm in [
            "nvjet_tst_128x64_64x8_2x1_v_bz_coopA_TNT",
            "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
            "ampere_sgemm_128x64_tn",
            "_ZN8cublasLt19splitKreduce_kernelILi32ELi16EifffLb0ELb1ELb0ELb0EEEv18cublasSplitKParamsIT4_EPKT2_PKT3_PS7_PKS4_SC_PKT1_PvlPS4_Pi",
        ] {
            assert_eq!(classify(gemm).family, Family::BlasGemm, "{gemm}");
        }
        // As PyTorch 2.11 (CUDA 13) launched them on an H100 (bench/gpu/cuda_check.sh).
        assert_eq!(
            classify("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x64x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas").family,
            Family::BlasGemm
        );
        for torch in [
            "_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_49_GLOBAL__N__d2ba64fb_16_TensorCompare_cu_71e06f4e19launch_clamp_scalarERNS_18TensorIteratorBaseEN3c106ScalarES6_NS0_6detail11ClampLimitsEENKUlvE_clEvENKUlvE5_clEvEUlfE_St5arrayIPcLm2EEEEviT0_T1_",
            "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_21CUDAFunctorOnSelf_addIfEESt5arrayIPcLm2EEEEviT0_T1_",
            "_ZN2at6native29vectorized_elementwise_kernelILi2ENS0_11FillFunctorIlEESt5arrayIPcLm1EEEEviT0_T1_",
        ] {
            assert_eq!(classify(torch).family, Family::Elementwise, "{torch}");
        }
        let reduce = "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_14func_wrapper_tIfNS0_15sum_functorIfffEEEEjfLi4E\
                      Li4EEEEEvT1_";
        assert_eq!(classify(reduce).family, Family::ReduceScan);
        let softmax = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, \
                       at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)";
        assert_eq!(classify(softmax).family, Family::Softmax);
        // nvcc mangles ggml's static kernels as clang does for HIP.
        let mmvq = classify("_ZL13mul_mat_vec_qIL9ggml_type12ELi1ELb0EEvPKvS2_PKiPfjjj");
        assert_eq!((mmvq.family, mmvq.quant, mmvq.batch), (Family::Mmvq, Some("Q4_K"), Some(Batch::Exact(1))));
    }

    #[test]
    fn real_pytorch_names_by_family_and_library() {
        // Names from a real PyTorch 2.11 / transformers / Inductor run on an H100 (fixtures/pytorch-mix).
        let cases: &[(&str, Family, Option<&str>)] = &[
            ("nvjet_sm90_tst_8x64_64x16_4x1_v_bz_TNN", Family::BlasGemm, Some("cuBLASLt")),
            (
                "_ZN7cutlass7Kernel2I42cutlass_80_simt_sgemm_128x32_8x5_tn_align1EEvNT_6ParamsE",
                Family::BlasGemm,
                Some("CUTLASS"),
            ),
            (
                "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0",
                Family::FlashAttention,
                Some("cuDNN"),
            ),
            (
                "sm80_xmma_fprop_implicit_gemm_indexed_wo_smem_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x32x64_\
                 stage1_warpsize4x1x1_g1_tensor16x8x16_alignc4_execute_kernel__5x_cudnn",
                Family::Convolution,
                Some("cuDNN"),
            ),
            ("triton_poi_fused__unsafe_view_mul_silu_8", Family::Triton, Some("Inductor")),
            (
                "triton_poi_fused__scaled_dot_product_cudnn_attention__to_copy__unsafe_view_add_arange_bmm_cat_0",
                Family::Triton,
                Some("Inductor"),
            ),
            ("triton_per_fused__to_copy__unsafe_view_add_mean_mul_pow_rsqrt_11", Family::Triton, Some("Inductor")),
            ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", Family::Collective, Some("NCCL")),
            ("Cijk_Ailk_Bljk_HHS_BH_MT64x64x32_MI16x16x16x1_SN_1LDSB0", Family::BlasGemm, Some("Tensile")),
            (
                "_ZN5cudnn19engines_precompiled16nchwToNhwcKernelI6__halfS2_fLb0ELb1EL21cudnnKernelDataType_t0EEEvNS0_\
                 18nchw2nhwc_params_tIT1_EEPKT_PT0_",
                Family::Convert,
                Some("cuDNN"),
            ),
            (
                "_ZN14at_cuda_detail3cub6detail4scan16DeviceScanKernelINS2_10policy_hubIllljSt4plusIlEE10Policy1000EPKlPlNS0\
                 _13ScanTileStateIlLb1EEES6_NS0_8NullTypeEjlLb0ESE_EEvT0_T1_T2_iT3_T4_T5_",
                Family::ReduceScan,
                None,
            ),
        ];
        for (name, family, library) in cases {
            let c = classify(name);
            assert_eq!((c.family, c.library), (*family, *library), "{name}");
        }
    }
}
