//! C++ (Itanium) kernel names made readable. A leaf: `classify`, `symbols` and `inspect` use it.

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
}
