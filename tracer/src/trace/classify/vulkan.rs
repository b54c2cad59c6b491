//! ggml-vulkan's shaders by name: their family and the weights' type, from the SPIR-V array names of
//! llama.cpp's vulkan-shaders-gen (`matmul_q4_k_f32`, `mul_mat_vec_q6_k_f32_f32_subgroup`, ...), which name a
//! Vulkan pipeline (source `shader`). Plain names only: a mangled C++ name is never one of these.

use super::family::Family;

/// ggml type names as ggml-vulkan spells them in its shader names (lower case, `matmul_q4_k_f32`), each
/// with ggml's own name; the first one in a name is the weights' type.
const SHADER_TYPES: &[(&str, &str)] = &[
    ("q4_0", "Q4_0"),
    ("q4_1", "Q4_1"),
    ("q5_0", "Q5_0"),
    ("q5_1", "Q5_1"),
    ("q8_0", "Q8_0"),
    ("q2_k", "Q2_K"),
    ("q3_k", "Q3_K"),
    ("q4_k", "Q4_K"),
    ("q5_k", "Q5_K"),
    ("q6_k", "Q6_K"),
    ("iq1_s", "IQ1_S"),
    ("iq1_m", "IQ1_M"),
    ("iq2_xxs", "IQ2_XXS"),
    ("iq2_xs", "IQ2_XS"),
    ("iq2_s", "IQ2_S"),
    ("iq3_xxs", "IQ3_XXS"),
    ("iq3_s", "IQ3_S"),
    ("iq4_nl", "IQ4_NL"),
    ("iq4_xs", "IQ4_XS"),
    ("mxfp4", "MXFP4"),
    ("tq1_0", "TQ1_0"),
    ("tq2_0", "TQ2_0"),
    ("bf16", "BF16"),
    ("f16", "F16"),
    ("f32", "F32"),
];

/// The weights' type a ggml-vulkan shader name gives (`mul_mat_vec_q4_k_q8_1_f32`: `Q4_K`): the type
/// named first, as a whole `_`-separated word. None for a mangled (C++) name.
pub(super) fn shader_quant(name: &str) -> Option<&'static str> {
    // `matmul_quant_*`: the weights' type is a specialization constant, not in the name.
    if name.starts_with("_Z") || name.contains("_quant") {
        return None;
    }
    let padded = format!("_{name}_");
    SHADER_TYPES
        .iter()
        .filter_map(|(word, ggml)| padded.find(&format!("_{word}_")).map(|at| (at, *ggml)))
        .min_by_key(|&(at, _)| at)
        .map(|(_, ggml)| ggml)
}

/// ggml-vulkan's element-wise and other small shaders, by the op their name begins with (a whole `_`-word:
/// `mul` is `mul_f32_f32_f32`, never `mul_mat_vec_*`, which is matched before), from the arrays of
/// llama.cpp's vulkan-shaders-gen as vendored by llama-cpp-python 0.3.36.
const VULKAN_OTHER_OPS: &[&str] = &[
    "abs",
    "acc",
    "add",
    "add1",
    "add_id",
    "add_rms",
    "arange",
    "argmax",
    "argsort",
    "argsort_large",
    "ceil",
    "clamp",
    "col2im_1d",
    "concat",
    "conv2d",
    "conv2d_dw",
    "conv3d",
    "conv_transpose_1d",
    "conv_transpose_2d",
    "cos",
    "count_equal",
    "count_experts",
    "cross_entropy_loss",
    "cumsum",
    "diag",
    "diag_mask_inf",
    "div",
    "dsv4",
    "elu",
    "exp",
    "expm1",
    "fill",
    "floor",
    "fwht",
    "gated_delta_net",
    "gated_linear_attn",
    "geglu",
    "geglu_erf",
    "geglu_quick",
    "gelu",
    "gelu_erf",
    "gelu_mul",
    "gelu_quick",
    "hardsigmoid",
    "hardswish",
    "im2col",
    "im2col_3d",
    "leaky_relu",
    "lightning_indexer",
    "log",
    "mul",
    "multi_add",
    "multi_add_rms",
    "neg",
    "opt_step_adamw",
    "opt_step_sgd",
    "out_prod",
    "pad",
    "pad_reflect_1d",
    "pool1d",
    "pool2d",
    "reglu",
    "relu",
    "repeat",
    "repeat_back",
    "roll",
    "round",
    "rwkv_wkv6",
    "rwkv_wkv7",
    "scale",
    "sgn",
    "sigmoid",
    "sigmoid_mul",
    "silu",
    "silu_back",
    "silu_mul",
    "sin",
    "snake",
    "softplus",
    "softplus_mul",
    "solve_tri",
    "split_k_reduce",
    "sqr",
    "sqrt",
    "ssm_conv",
    "ssm_scan",
    "step",
    "sub",
    "sum_rows",
    "swiglu",
    "swiglu_clamp",
    "swiglu_oai",
    "tanh",
    "timestep_embedding",
    "topk_argsort",
    "topk_moe",
    "topk_nary_search",
    "topk_radix_select",
    "tri",
    "trunc",
    "upscale",
    "xielu",
];

/// The family of a ggml-vulkan shader (a plain name, never mangled): `matmul_*` (`mul_mm`, `mul_mmq`:
/// matrix × matrix; `matmul_quant_*` takes its weights' type as a specialization constant, so the name
/// gives none) and `mul_mat_vec_*` (matrix × vector), quantized or float by their weights' type;
/// `dequant_*`, `get_rows_*`, `set_rows_*`, copies; flash attention's helpers (`fa_*`); the element-wise and
/// other small ops ([`VULKAN_OTHER_OPS`]). Other shaders share their names with ggml-cuda's kernels
/// (`rms_norm_f32`, `rope_*`, `soft_max_*`, `flash_attn_*`, `quantize_*`) and are classified as those are.
pub(super) fn vulkan_family(name: &str, base: &str) -> Option<Family> {
    if name.starts_with("_Z") || name != base {
        return None;
    }
    let word = |op: &str| base == op || base.strip_prefix(op).is_some_and(|rest| rest.starts_with('_'));
    let quantized = || !matches!(shader_quant(name), None | Some("F32" | "F16" | "BF16"));
    if base.starts_with("matmul_") {
        Some(if quantized() || base.contains("_quant") || base.contains("nvfp4") {
            Family::Mmq
        } else {
            Family::MatMulFloat
        })
    } else if base.starts_with("mul_mat_vec_") {
        Some(if quantized() || base.contains("nvfp4") { Family::Mmvq } else { Family::MatMulFloat })
    } else if ["dequant", "get_rows", "get_rows_back", "set_rows", "cpy", "contig_cpy"].iter().any(|op| word(op)) {
        Some(Family::Convert)
    } else if base.starts_with("fa_") {
        Some(Family::FlashAttention)
    } else if base.starts_with("rope_") {
        Some(Family::Rope)
    } else if base.contains("norm") {
        Some(Family::Norm)
    } else if VULKAN_OTHER_OPS.iter().any(|op| word(op)) {
        Some(Family::Elementwise)
    } else {
        None
    }
}
