//! Kernel names to what ggml (and the libraries under it) is doing: the family of a kernel, the
//! quantization type in its template arguments, and the batch width its name fixes. Rules from ggml's
//! CUDA/HIP sources (see `shared/reference` §4): match by prefix, never by full signature, since
//! parameters change between releases. Unknown stays unknown.

/// What a kernel does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// `mul_mat_vec_q`: quantized matrix × vector (token decode, up to 8 columns).
    Mmvq,
    /// `mul_mat_q` (and its stream-k fixup): quantized matrix × matrix (prompt batches).
    Mmq,
    /// `mul_mat_vec_f` / `mul_mat_f`: float matrix products.
    MatMulFloat,
    /// Tensile (`Cijk_*`) and hipBLASLt GEMMs: the hipBLAS/rocBLAS fallback.
    BlasGemm,
    FlashAttention,
    Rope,
    /// `dequantize_*`, `convert_*`, `cpy_*`, `k_get_rows*`, `k_set_rows*`.
    Convert,
    /// `quantize_q8_1`, `quantize_mmq_q8_1`: the activations repacked for MMVQ/MMQ.
    Quantize,
    Norm,
    Softmax,
    /// Other ggml element-wise and small kernels (`k_bin_bcast`, `unary_*`, `argmax`, ...).
    Elementwise,
    /// The HIP runtime's own kernels (`__amd_rocclr_*`: copies and fills).
    RuntimeInternal,
    Unknown,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Mmvq => "MMVQ",
            Family::Mmq => "MMQ",
            Family::MatMulFloat => "matmul-float",
            Family::BlasGemm => "BLAS-GEMM",
            Family::FlashAttention => "flash-attention",
            Family::Rope => "RoPE",
            Family::Convert => "dequantize/convert",
            Family::Quantize => "quantize",
            Family::Norm => "norm",
            Family::Softmax => "softmax",
            Family::Elementwise => "elementwise",
            Family::RuntimeInternal => "runtime-internal",
            Family::Unknown => "unknown",
        }
    }
}

/// How exactly the name fixes the batch width (columns of the right-hand matrix, ne11).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Batch {
    /// MMVQ's `ncols_dst`: exactly this many columns.
    Exact(u32),
    /// MMQ's tile width `mmq_x`: the batch is at most this per column tile (more tiles in the grid).
    TileUpTo(u32),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Class {
    pub family: Family,
    /// The ggml quantization type of the weights, from `(ggml_type)N` in the template arguments.
    pub quant: Option<&'static str>,
    pub batch: Option<Batch>,
}

/// `ggml_type` numbers (ggml.h) to names.
pub fn ggml_type_name(n: u32) -> Option<&'static str> {
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

/// The template arguments of a demangled name, split at the top level: `f<(ggml_type)12, 1, false>(…)`
/// gives `["(ggml_type)12", "1", "false"]`.
fn template_args(demangled: &str) -> Vec<&str> {
    let Some(start) = demangled.find('<') else { return Vec::new() };
    let mut depth = 0;
    let mut args = Vec::new();
    let mut from = start + 1;
    for (i, c) in demangled.char_indices().skip_while(|(i, _)| *i <= start) {
        match c {
            '<' | '(' => depth += 1,
            ')' => depth -= 1,
            '>' if depth == 0 => {
                args.push(demangled[from..i].trim());
                return args;
            }
            '>' => depth -= 1,
            ',' if depth == 0 => {
                args.push(demangled[from..i].trim());
                from = i + 1;
            }
            _ => {}
        }
    }
    args
}

/// The function's own name: `void mul_mat_vec_q<...>(...)` gives `mul_mat_vec_q`.
fn base_name(demangled: &str) -> &str {
    let head = demangled.split(['<', '(']).next().unwrap_or(demangled);
    head.rsplit([' ', ':']).next().unwrap_or(head)
}

/// Classifies a kernel by its mangled name (clang marks ggml's static kernels `_ZL`; both forms work).
pub fn classify(mangled: &str) -> Class {
    let normalized = mangled.strip_suffix(".kd").unwrap_or(mangled);
    let normalized = match normalized.strip_prefix("_ZL") {
        Some(rest) => format!("_Z{rest}"),
        None => normalized.to_owned(),
    };
    let demangled = crate::symbols::demangle(&normalized);
    let base = base_name(&demangled);
    let args = template_args(&demangled);
    let quant =
        args.iter().find_map(|a| a.strip_prefix("(ggml_type)").and_then(|n| n.parse().ok()).and_then(ggml_type_name));
    let second = args.get(1).and_then(|a| a.parse::<u32>().ok());
    let family = if normalized.starts_with("Cijk_") || base.starts_with("Cijk_") || normalized.contains("hipblaslt") {
        Family::BlasGemm
    } else if base.starts_with("__amd_rocclr_") {
        Family::RuntimeInternal
    } else if base == "mul_mat_vec_q" {
        Family::Mmvq
    } else if base.starts_with("mul_mat_q") {
        Family::Mmq
    } else if base.starts_with("mul_mat_vec_f") || base.starts_with("mul_mat_f") || base == "mul_mat_vec" {
        Family::MatMulFloat
    } else if base.starts_with("flash_attn") {
        Family::FlashAttention
    } else if base.starts_with("rope") {
        Family::Rope
    } else if base.starts_with("quantize_") {
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
    } else if base.starts_with("soft_max") {
        Family::Softmax
    } else if base.starts_with("k_bin_bcast")
        || base.starts_with("unary")
        || base.starts_with("argmax")
        || base.starts_with("add_")
        || base.starts_with("scale_f32")
        || base.starts_with("k_sum_rows")
        || base.starts_with("concat")
        || base.starts_with("topk")
        || base.starts_with("ssm_")
    {
        Family::Elementwise
    } else {
        Family::Unknown
    };
    let batch = match (family, second) {
        (Family::Mmvq, Some(n)) => Some(Batch::Exact(n)),
        (Family::Mmq, Some(n)) if base == "mul_mat_q" => Some(Batch::TileUpTo(n)),
        _ => None,
    };
    Class { family, quant, batch }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ggml_kernels_by_family_quant_and_batch() {
        // Names as ggml's HIP build emits them (static kernels: _ZL).
        let mmvq = classify(
            "_ZL13mul_mat_vec_qIL9ggml_type12ELi1ELb0EEvPKvS2_PKi31ggml_cuda_mm_fusion_args_devicePfj15HIP_vector_typeIjLj3EEjjjS8_jjjS8_jjj",
        );
        assert_eq!(mmvq, Class { family: Family::Mmvq, quant: Some("Q4_K"), batch: Some(Batch::Exact(1)) });
        let mmq = classify("_ZL9mul_mat_qIL9ggml_type12ELi128ELb0EEvPKcPKiS4_S4_PfS5_iiiiiiiiiiiiiiiii");
        assert_eq!(mmq, Class { family: Family::Mmq, quant: Some("Q4_K"), batch: Some(Batch::TileUpTo(128)) });
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
    fn template_arguments_split_at_top_level() {
        assert_eq!(template_args("void f<(ggml_type)12, 1, false>(int)"), ["(ggml_type)12", "1", "false"]);
        assert_eq!(template_args("void g<a<b, c>, 2>()"), ["a<b, c>", "2"]);
        assert!(template_args("h(int)").is_empty());
        assert_eq!(base_name("void mul_mat_vec_q<(ggml_type)12, 1>(void const*)"), "mul_mat_vec_q");
    }
}
