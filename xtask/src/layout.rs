//! The layout checks `cargo xtask test` runs beside clippy: imports between tracer's wings go one way, and no
//! source file grows past 600 lines. Function length is clippy's own `too_many_lines` (80, clippy.toml).
//!
//! The wings, lowest first: `os` (leaves), `trace` (the format), `read` (report, export, metrics), `record`
//! (the recording). A module may name its own wing and those below it, never one above: a cycle between
//! wings would need one such name.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

/// tracer's wings, lowest first.
const WINGS: [&str; 4] = ["os", "trace", "read", "record"];

/// The most lines a source file may have.
const MAX_FILE_LINES: usize = 600;

/// Where the workspace's own Rust sources are (fuzz's build output and the eBPF crate's target excluded).
const SOURCE_DIRS: [&str; 7] =
    ["tracer/src", "tracer/benches", "tracer-common/src", "tracer-ebpf/src", "xtask/src", "tests", "fuzz/fuzz_targets"];

/// Runs both checks over the workspace at `root`; every breach is listed, then the check fails.
pub(crate) fn check(root: &Path) -> Result<()> {
    let mut breaches = Vec::new();
    for dir in SOURCE_DIRS {
        for file in rust_files(&root.join(dir))? {
            let text = std::fs::read_to_string(&file)?;
            let shown = file.strip_prefix(root).unwrap_or(&file).display().to_string();
            let lines = text.lines().count();
            if lines > MAX_FILE_LINES {
                breaches.push(format!("{shown} has {lines} lines (at most {MAX_FILE_LINES}): split it"));
            }
            if let Some(wing) = wing_of(&shown) {
                breaches.extend(wrong_imports(wing, &text).into_iter().map(|w| {
                    format!("{shown} (wing `{wing}`) names `crate::{w}`, a wing above it: move the shared part down")
                }));
            }
        }
    }
    if breaches.is_empty() {
        return Ok(());
    }
    bail!("{} layout breaches:\n  {}", breaches.len(), breaches.join("\n  "))
}

fn rust_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d)? {
            let path = entry?.path();
            if path.is_dir() {
                if path.file_name().is_none_or(|n| n != "target") {
                    todo.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The wing a source file of tracer's belongs to, from its path.
fn wing_of(path: &str) -> Option<&'static str> {
    let rest = path.strip_prefix("tracer/src/")?;
    WINGS.into_iter().find(|w| rest.starts_with(&format!("{w}/")))
}

/// The wings above `wing` that `text` names through `crate::`.
fn wrong_imports(wing: &str, text: &str) -> Vec<String> {
    let rank = |w: &str| WINGS.iter().position(|x| *x == w);
    let Some(own) = rank(wing) else { return Vec::new() };
    let mut above: Vec<String> = crate_roots(text).into_iter().filter(|r| rank(r).is_some_and(|n| n > own)).collect();
    above.sort();
    above.dedup();
    above
}

/// The first segment of every path `text` names from the crate root: `crate::a::b` gives `a`, and
/// `crate::{a::{x, y}, b}` gives `a` and `b`.
fn crate_roots(text: &str) -> Vec<String> {
    let mut roots = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // The group's top-level items, up to its closing brace.
            let (mut depth, mut item) = (0usize, String::new());
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        roots.push(first_segment(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            roots.push(first_segment(&item));
        } else {
            roots.push(first_segment(rest));
        }
    }
    roots.retain(|r| !r.is_empty());
    roots
}

fn first_segment(path: &str) -> String {
    path.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_and_paths_give_their_first_segments() {
        let text =
            "use crate::{os::{proc, files::X}, trace::{self, Record},\n read::phase};\nlet a = crate::record::x();";
        assert_eq!(crate_roots(text), ["os", "trace", "read", "record"]);
        assert_eq!(crate_roots("$crate::x; my_crate::y"), Vec::<String>::new());
    }

    #[test]
    fn a_wing_may_name_those_below_it_only() {
        let text = "use crate::{os::proc, trace::Record};\nfn f() { crate::record::names::x(); crate::read::y(); }";
        assert_eq!(wrong_imports("read", text), ["record"]);
        assert_eq!(wrong_imports("trace", text), ["read", "record"]);
        assert!(wrong_imports("record", text).is_empty());
        assert_eq!(wing_of("tracer/src/read/report/mod.rs"), Some("read"));
        assert_eq!(wing_of("tracer/src/cli.rs"), None);
    }

    #[test]
    fn the_workspace_keeps_its_layout() {
        check(&Path::new(env!("CARGO_MANIFEST_DIR")).join("..")).unwrap();
    }
}
