//! The code-object ledger of the text report: per directory a process loaded code-object files from (rocBLAS's
//! Tensile `library/`), the files present, loaded and with dispatches.

use std::fmt::Write as _;

use super::words::{error_text, plural};
use crate::read::report::ProcessReport;

/// Files not loaded named at most, per directory.
const NOT_LOADED_SHOWN: usize = 8;

/// The code-object ledger: per directory, files present, loaded and with dispatches, then each file
/// loaded with its loads' results and the kernels looked up in it.
pub(super) fn write_code_dirs(s: &mut String, p: &ProcessReport) -> std::fmt::Result {
    if p.code_dirs.is_empty() {
        return Ok(());
    }
    writeln!(s, "  code-object files loaded by path (present, loaded, with dispatches):")?;
    for d in &p.code_dirs {
        let present = match (d.present, &d.listing_error) {
            (Some(n), _) => format!("{n}{} files present", if d.listing_cut { "+" } else { "" }),
            (None, Some(why)) => format!("not listed ({why})"),
            (None, None) => "not listed".to_owned(),
        };
        let failed = d.loaded.saturating_sub(d.loaded_ok);
        let failed = if failed > 0 { format!(" ({failed} failed)") } else { String::new() };
        writeln!(
            s,
            "    {}: {present}, {} loaded{failed}, {} with dispatches",
            short_dir(&d.path),
            d.loaded,
            d.with_dispatches
        )?;
        writeln!(s, "      in {}", d.path)?;
        for f in &d.files {
            let name = f.path.rsplit('/').next().unwrap_or(&f.path);
            let status = if f.loads == f.failed { "failed" } else { "loaded" };
            let results: Vec<String> = f
                .results
                .iter()
                .map(|(&code, &n)| {
                    let what = if code == 0 { "ok".to_owned() } else { error_text(Some(f.api.library()), code) };
                    if n > 1 { format!("{what} x{n}") } else { what }
                })
                .collect();
            let absent = if f.present == Some(false) { " [not in the listing]" } else { "" };
            let ran = if f.executions + f.dispatches > 0 {
                format!(", {} executions, {} dispatches", f.executions, f.dispatches)
            } else {
                String::new()
            };
            writeln!(
                s,
                "      {status:<7} {name}{absent}  {} load{}: {}{ran}",
                f.loads,
                plural(f.loads),
                results.join(", ")
            )?;
            if !f.kernels.is_empty() {
                let shown: Vec<String> = f
                    .kernels
                    .iter()
                    .take(6)
                    .map(|k| crate::os::demangle::short_name(&crate::os::demangle::demangle(k)))
                    .collect();
                let more = f.kernels.len().saturating_sub(6);
                let more = if more > 0 { format!(", and {more} more") } else { String::new() };
                writeln!(s, "              kernels: {}{more}", shown.join(", "))?;
            }
        }
        if !d.not_loaded.is_empty() {
            let shown: Vec<&str> = d.not_loaded.iter().take(NOT_LOADED_SHOWN).map(String::as_str).collect();
            let more = d.not_loaded.len().saturating_sub(NOT_LOADED_SHOWN);
            let more = if more > 0 { format!(", and {more} more") } else { String::new() };
            writeln!(s, "      not loaded: {}{more}", shown.join(", "))?;
        }
    }
    Ok(())
}

/// A directory by its last two components (`rocblas/library`), as a library's code directory is known.
fn short_dir(path: &str) -> &str {
    let trimmed = path.trim_end_matches('/');
    match trimmed.rmatch_indices('/').nth(1) {
        Some((at, _)) => &trimmed[at + 1..],
        None => trimmed.trim_start_matches('/'),
    }
}

#[cfg(test)]
mod tests {
    use super::short_dir;

    #[test]
    fn code_directories_by_their_last_two_components() {
        assert_eq!(short_dir("/opt/rocm/lib/rocblas/library"), "rocblas/library");
        assert_eq!(short_dir("/library/"), "library");
        assert_eq!(short_dir("/"), "");
    }
}
