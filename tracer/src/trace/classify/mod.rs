//! Kernel names to what ggml (and the libraries under it) is doing.
//!
//! The family of a kernel, the quantization type in its template arguments, and the batch width its
//! name fixes. Rules from ggml's
//! CUDA/HIP sources (see `shared/reference` §4): match by prefix, never by full signature, since
//! parameters change between releases — except where a parameter is read (ggml's MMQ column count): there
//! the full list must be one tracer knows. Unknown stays unknown.

mod family;
mod libraries;
mod vulkan;

pub(crate) use family::Family;

use libraries::{PYTORCH_NAMESPACES, is_collective, is_convolution, is_cublas_gemm, is_reduce_scan, library_of};
use vulkan::{shader_quant, vulkan_family};

use crate::os::demangle::{base_name, mangled_path, parameter_types, template_args};

/// How exactly the name (and, where given, the launch shape) fixes the batch width: the columns of the
/// right-hand matrix, ggml's ne11.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Batch {
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
    pub(crate) fn label(self) -> String {
        match self {
            Self::Exact(n) => n.to_string(),
            Self::TileUpTo(n) => format!("<={n}"),
            Self::Range(lo, hi) => format!("{lo}-{hi}"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Class {
    pub(crate) family: Family,
    /// The ggml quantization type of the weights, from `(ggml_type)N` in the template arguments.
    pub(crate) quant: Option<&'static str>,
    pub(crate) batch: Option<Batch>,
    /// ggml's `MoE` MMVQ kernel (`mul_mat_vec_q_moe`): its batch comes from the block shape.
    pub(crate) moe: bool,
    /// The library the name says the kernel comes from, where it says so (cuBLASLt, cuDNN, Tensile,
    /// Inductor, NCCL, ...).
    pub(crate) library: Option<&'static str>,
    /// ggml's `quantize_mmq_q8_1`, which quantizes the src1 of the MMQ after it (see
    /// [`Class::mmq_columns`]).
    pub(crate) mmq_src1: bool,
    /// The kernel parameter that holds the exact column count (ne11): ggml's `mul_mat_q` with a parameter
    /// list of a ggml version tracer knows ([`MMQ_SIGNATURES`]).
    pub(crate) ne11_param: Option<u8>,
    /// Where that parameter lies in the kernel's argument segment (bytes): what a queue dispatch's
    /// kernarg holds, laid out as the C ABI lays out the parameter list.
    pub ne11_kernarg: Option<u32>,
}

/// ggml's `mul_mat_q` parameter lists tracer reads the column count from.
///
/// Each list as demangled, its types joined by ", " (`uint3` is HIP's `HIP_vector_type<unsigned int, 3>`
/// too), with the index of `ncols_y` (ne11 of src1) in it. Other lists (older or newer ggml) give no
/// parameter: their batch width stays a tile bound, never a guess.
pub(crate) const MMQ_SIGNATURES: &[(&str, u8)] = &[
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
pub(crate) const fn ggml_type_name(n: u32) -> Option<&'static str> {
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
pub(crate) const OTHER_GGML_OPS: &[&str] = &[
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
    classify_demangled(mangled, &crate::os::demangle::demangle(mangled))
}

/// [`classify`] for a caller that has demangled the name already (`demangled` is
/// `demangle(mangled)`): one demangling instead of two.
pub(crate) fn classify_demangled(mangled: &str, demangled: &str) -> Class {
    let normalized = mangled.strip_suffix(".kd").unwrap_or(mangled);
    let normalized = match normalized.strip_prefix("_ZL") {
        Some(rest) => format!("_Z{rest}"),
        None => normalized.to_owned(),
    };
    let mut demangled =
        if normalized == mangled { demangled.to_owned() } else { crate::os::demangle::demangle(&normalized) };
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
    let family = family_of(&normalized, base, &demangled);
    let batch = match (family, second) {
        (Family::Mmvq, Some(n)) if base == "mul_mat_vec_q" => Some(Batch::Exact(n)),
        (Family::Mmq, Some(n)) if base == "mul_mat_q" => Some(Batch::TileUpTo(n)),
        _ => None,
    };
    let moe = base == "mul_mat_vec_q_moe";
    let quant = quant.or_else(|| block_quant(&demangled)).or_else(|| shader_quant(&normalized));
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

/// A kernel's family from its names: the mangled one without `.kd` and local-symbol prefixes, the base
/// (unqualified function) name, and the demangled one. The first rule that matches decides.
fn family_of(normalized: &str, base: &str, demangled: &str) -> Family {
    if base.starts_with("triton_") {
        // Before the op names: Inductor names fused kernels after the ops they fuse
        // (`triton_poi_fused__scaled_dot_product_cudnn_attention_...`).
        Family::Triton
    } else if is_collective(base, demangled) {
        Family::Collective
    } else if is_convolution(base, demangled) {
        Family::Convolution
    } else if normalized.starts_with("Cijk_")
        || base.starts_with("Cijk_")
        || normalized.contains("hipblaslt")
        || is_cublas_gemm(base, demangled)
    {
        Family::BlasGemm
    } else if base.starts_with("__amd_rocclr_") {
        Family::RuntimeInternal
    } else if base == "mul_mat_vec_q" || base == "mul_mat_vec_q_moe" {
        Family::Mmvq
    } else if let Some(family) = vulkan_family(normalized, base) {
        family
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
    } else if is_reduce_scan(base, demangled) {
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
    pub(crate) const fn mmq_columns(&self, grid: [u32; 3]) -> Option<u32> {
        if self.mmq_src1 { Some(grid[0]) } else { None }
    }

    /// Which kernel parameters a launch of this kernel needs read (bit i: parameter i): the column-count
    /// parameter of ggml's MMQ, else none.
    pub(crate) const fn param_plan(&self) -> u32 {
        match self.ne11_param {
            Some(i) => 1 << i,
            None => 0,
        }
    }

    /// Which 8-byte words of a queue dispatch's argument segment a dispatch of this kernel needs read (bit
    /// i: bytes 8i..8i+8): the one holding the column count of ggml's MMQ, else none.
    pub(crate) const fn kernarg_plan(&self) -> u32 {
        match self.ne11_kernarg {
            Some(at) if (at as usize) < tracer_common::PARAMS_MAX * 8 => 1 << (at / 8),
            _ => 0,
        }
    }

    /// The exact column count from a dispatch's argument-segment words (a C `int` at its offset).
    pub(crate) fn ne11_from_kernarg(&self, words: &std::collections::BTreeMap<u8, u64>) -> Option<u32> {
        let at = self.ne11_kernarg?;
        let word = *words.get(&u8::try_from(at / 8).ok()?)?;
        let v = (word >> (8 * (at % 8))) as u32;
        (v as i32 > 0).then_some(v)
    }

    /// The exact column count from a launch's kernel parameters, when this kernel has a known
    /// column-count parameter and the launch's value of it was read (a C `int`: the low 4 bytes).
    pub(crate) fn ne11_from_params(&self, params: &std::collections::BTreeMap<u8, u64>) -> Option<u32> {
        let v = *params.get(&self.ne11_param?)? as u32;
        (v as i32 > 0).then_some(v)
    }

    /// Refines the batch width from a launch's shape (the grid in blocks, or in work-items as AQL packets
    /// and hipExtModuleLaunchKernel count it; threads per block): MMQ's grid is (row tiles, column tiles,
    /// channels) with column tiles of the name's width J, and the `MoE` MMVQ kernel runs one warp row per
    /// token.
    #[must_use]
    pub(crate) fn with_shape(mut self, grid: [u32; 3], block: [u32; 3], grid_in_work_items: bool) -> Self {
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
mod tests;
