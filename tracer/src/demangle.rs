//! C++ (Itanium) kernel names made readable. A leaf: `classify`, `symbols`, `inspect` and the report use
//! it.

/// Demangles a C++ (Itanium) name; other names, and names the demangler rejects, come back unchanged.
pub fn demangle(name: &str) -> String {
    if !name.starts_with("_Z") {
        return name.to_owned();
    }
    cpp_demangle::Symbol::new(name)
        .ok()
        .and_then(|s| s.demangle(&cpp_demangle::DemangleOptions::default()).ok())
        .unwrap_or_else(|| name.to_owned())
}

/// Wrapper kernels whose own name says nothing: their first template argument names the work
/// (`cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_tn_align1>`).
const WRAPPERS: &[&str] = &["Kernel", "Kernel2", "device_kernel", "kernel"];

/// The short name of a demangled kernel name, as Nsight and rocprofv3 show it.
///
/// The function's own name, without return type, namespaces, template arguments and parameter list
/// (`void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)` -> `vectorized_elementwise_kernel`).
/// A wrapper kernel keeps its first template argument when that is short. Plain C names come back whole.
pub fn short_name(demangled: &str) -> String {
    let s = demangled.replace("(anonymous namespace)", "anon");
    let (mut angle, mut brace) = (0i32, 0i32);
    let mut head = String::new();
    let mut first_arg = String::new();
    let mut first_done = false;
    for c in s.chars() {
        match c {
            '<' => {
                angle += 1;
                if angle == 1 {
                    first_arg.clear();
                    first_done = false;
                    continue;
                }
            }
            '>' => {
                angle -= 1;
                if angle == 0 {
                    first_done = true;
                    continue;
                }
            }
            '{' => brace += 1,
            '}' => brace -= 1,
            '(' if angle == 0 && brace == 0 => break,
            ',' if angle == 1 => first_done = true,
            _ => {}
        }
        if angle == 0 && brace == 0 {
            head.push(c);
        } else if angle >= 1 && !first_done {
            first_arg.push(c);
        }
    }
    let base = head.split_whitespace().last().unwrap_or("").rsplit("::").next().unwrap_or("");
    if base.is_empty() {
        return demangled.to_owned();
    }
    let arg = first_arg.trim();
    if WRAPPERS.contains(&base) && !arg.is_empty() && arg.len() <= 80 {
        return format!("{base}<{arg}>");
    }
    base.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles_kernel_names() {
        assert_eq!(demangle("_Z4axpyPfS_f"), "axpy(float*, float*, float)");
        assert_eq!(
            demangle("_Z13mul_mat_vec_qIL9ggml_type12ELi1EEvPKvS2_PKiPfjj"),
            "void mul_mat_vec_q<(ggml_type)12, 1>(void const*, void const*, int const*, float*, unsigned int, unsigned int)"
        );
        assert_eq!(demangle("plain_c_kernel"), "plain_c_kernel");
        assert_eq!(demangle("_Znot a name"), "_Znot a name");
    }

    #[test]
    fn short_names() {
        let cases = [
            (
                "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, std::array<char*, \
                 (unsigned long)1> >(int, at::native::FillFunctor<int>, std::array<char*, (unsigned long)1>)",
                "vectorized_elementwise_kernel",
            ),
            (
                "void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous \
                 namespace)::OpaqueType<(unsigned int)2>, unsigned int, 4, 64, 64>(char*, int)",
                "CatArrayBatchedCopy",
            ),
            (
                "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_tn_align1>(cutlass_80_simt_sgemm_128x32_8x5_\
                 tn_align1::Params)",
                "Kernel2<cutlass_80_simt_sgemm_128x32_8x5_tn_align1>",
            ),
            (
                "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::\
                 bfloat16_t, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
                "fmha_cutlassF_bf16_aligned_64x64_rf_sm80",
            ),
            (
                "void mul_mat_vec_q<(ggml_type)12, 1>(void const*, void const*, int const*, float*, unsigned int)",
                "mul_mat_vec_q",
            ),
            ("axpy(float*, float*, float)", "axpy"),
            ("nvjet_sm90_tst_8x64_64x16_4x1_v_bz_TNN", "nvjet_sm90_tst_8x64_64x16_4x1_v_bz_TNN"),
            ("triton_poi_fused__unsafe_view_mul_silu_8", "triton_poi_fused__unsafe_view_mul_silu_8"),
            ("", ""),
        ];
        for (long, short) in cases {
            assert_eq!(short_name(long), short, "{long}");
        }
    }
}
