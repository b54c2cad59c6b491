//! The words the text report is written in, shared by its sections: how kernels are shown, a plural, a
//! return value by its name. Below every section.

/// How the text report shows kernels.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TextOptions {
    /// Whole demangled names, one row per name; else short names, variants of one function folded.
    pub full_names: bool,
    /// Kernel rows per process, most executions first; 0 for all.
    pub top: usize,
}

impl Default for TextOptions {
    fn default() -> Self {
        Self { full_names: false, top: 25 }
    }
}

/// "s" for a count other than one.
pub(super) const fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// A return value by its name in the runtime's result type, else its number.
pub(super) fn error_text(library: Option<tracer_common::api::Library>, code: i64) -> String {
    match library.and_then(|l| l.result_name(code)) {
        Some(name) => format!("{name} ({code})"),
        None => format!("error {code}"),
    }
}
