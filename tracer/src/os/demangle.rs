//! C++ (Itanium) kernel names made readable, and the parts of a demangled name (function name, template
//! arguments, parameter types). A leaf: `classify`, `symbols`, `inspect` and the report use it.

/// Demangles a C++ (Itanium) name; other names, and names the demangler rejects, come back unchanged.
pub(crate) fn demangle(name: &str) -> String {
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
pub(crate) fn short_name(demangled: &str) -> String {
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

/// The template arguments of a demangled name, split at the top level: `f<(ggml_type)12, 1, false>(…)`
/// gives `["(ggml_type)12", "1", "false"]`.
pub(crate) fn template_args(demangled: &str) -> Vec<&str> {
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
pub(crate) fn base_name(demangled: &str) -> &str {
    let head = demangled.split(['<', '(']).next().unwrap_or(demangled);
    head.rsplit([' ', ':']).next().unwrap_or(head)
}

/// The qualified source name of a mangled function read straight from its encoding (`_Z` <length>
/// <name>, or `_ZN` <length> <name> ... for names in namespaces), for names the demangler rejects (newer
/// manglings such as `Tn` template parameter declarations): `at::native::reduce_kernel`.
pub(crate) fn mangled_path(mangled: &str) -> Option<String> {
    let mut rest = mangled.strip_prefix("_Z")?;
    let nested = rest.starts_with('N');
    if nested {
        rest = rest[1..].trim_start_matches(['K', 'V', 'r']);
    }
    let mut parts: Vec<&str> = Vec::new();
    loop {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let Ok(len) = rest[..digits].parse::<usize>() else { break };
        parts.push(rest.get(digits..digits + len)?);
        rest = &rest[digits + len..];
        if !nested {
            break;
        }
    }
    (!parts.is_empty()).then(|| parts.join("::"))
}

/// The parameter types of a demangled function: the last top-level parenthesized list.
pub(crate) fn parameter_types(demangled: &str) -> Vec<String> {
    let Some(close) = demangled.rfind(')') else { return Vec::new() };
    let mut depth = 0usize;
    let mut open = None;
    for (i, c) in demangled[..close].char_indices().rev() {
        match c {
            ')' | '>' => depth += 1,
            '(' | '<' if depth > 0 => depth -= 1,
            '(' => {
                open = Some(i);
                break;
            }
            _ => {}
        }
    }
    let Some(open) = open else { return Vec::new() };
    let mut types = Vec::new();
    let (mut depth, mut from) = (0usize, open + 1);
    for (i, c) in demangled[open + 1..close].char_indices() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                types.push(demangled[from..open + 1 + i].trim().to_owned());
                from = open + 2 + i;
            }
            _ => {}
        }
    }
    let last = demangled[from..close].trim();
    if !last.is_empty() {
        types.push(last.to_owned());
    }
    types
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

    #[test]
    fn template_arguments_split_at_top_level() {
        assert_eq!(template_args("void f<(ggml_type)12, 1, false>(int)"), ["(ggml_type)12", "1", "false"]);
        assert_eq!(template_args("void g<a<b, c>, 2>()"), ["a<b, c>", "2"]);
        assert!(template_args("h(int)").is_empty());
        assert_eq!(base_name("void mul_mat_vec_q<(ggml_type)12, 1>(void const*)"), "mul_mat_vec_q");
    }

    #[test]
    fn names_read_from_the_encoding() {
        assert_eq!(mangled_path("_Z16k_set_rows_quantIi").as_deref(), Some("k_set_rows_quant"));
        assert_eq!(mangled_path("_ZN2at6native13reduce_kernelILi512E").as_deref(), Some("at::native::reduce_kernel"));
        assert_eq!(mangled_path("_Znot"), None);
    }
}
