//! The layout checks `cargo xtask test` runs beside clippy: imports between tracer's wings go one way, and no
//! source file grows past 600 lines. Function length is clippy's own `too_many_lines` (80, clippy.toml).
//!
//! The wings, lowest first: `os` (leaves), `trace` (the format), `read` (report, export, metrics), `record`
//! (the recording). A module may name its own wing and those below it, never one above: a cycle between
//! wings would need one such name. Inside a wing, no cycle between its modules, its own `mod.rs` counted
//! as one; none between tracer-ebpf's modules either.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

/// tracer's wings, lowest first.
const WINGS: [&str; 4] = ["os", "trace", "read", "record"];

/// The most lines a source file may have.
const MAX_FILE_LINES: usize = 600;

/// Where the workspace's own Rust sources are (fuzz's build output and the eBPF crate's target excluded).
const SOURCE_DIRS: [&str; 7] =
    ["tracer/src", "tracer/benches", "tracer-common/src", "tracer-ebpf/src", "xtask/src", "tests", "fuzz/fuzz_targets"];

/// Runs the checks over the workspace at `root`; every breach is listed, then the check fails.
pub(crate) fn check(root: &Path) -> Result<()> {
    let mut breaches = Vec::new();
    let mut tracer = Vec::new();
    let mut ebpf = Vec::new();
    for dir in SOURCE_DIRS {
        for file in rust_files(&root.join(dir))? {
            let text = std::fs::read_to_string(&file)?;
            let shown = file.strip_prefix(root).unwrap_or(&file).display().to_string();
            let lines = text.lines().count();
            if lines > MAX_FILE_LINES {
                breaches.push(format!("{shown} has {lines} lines (at most {MAX_FILE_LINES}): split it"));
            }
            if let Some(module) = module_of(&shown) {
                breaches.extend(wrong_imports(&module, &text).into_iter().map(|w| {
                    format!(
                        "{shown} (wing `{}`) names `crate::{w}`, a wing above it: move the shared part down",
                        module[0]
                    )
                }));
            }
            if shown.starts_with("tracer/src/") {
                tracer.push((shown, text));
            } else if shown.starts_with("tracer-ebpf/src/") {
                ebpf.push((shown, text));
            }
        }
    }
    breaches.extend(
        module_cycles(&tracer)
            .into_iter()
            .chain(ebpf_cycles(&ebpf))
            .map(|c| format!("an import cycle: {} (each reaches the others): break one edge", c.join(", "))),
    );
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

/// The wings above its own that `text`, the code of `module`, names (through `crate::` or `super::`); none
/// for a module outside the wings.
fn wrong_imports(module: &[String], text: &str) -> Vec<String> {
    let rank = |w: &str| WINGS.iter().position(|x| *x == w);
    let Some(own) = module.first().and_then(|w| rank(w)) else { return Vec::new() };
    let mut above: Vec<String> = named_paths(module, text)
        .into_iter()
        .filter_map(|p| p.into_iter().next())
        .filter(|r| rank(r).is_some_and(|n| n > own))
        .collect();
    above.sort();
    above.dedup();
    above
}

/// The module path of a source file of tracer's: `tracer/src/record/session/mod.rs` is `record::session`.
fn module_of(path: &str) -> Option<Vec<String>> {
    let rest = path.strip_prefix("tracer/src/")?.strip_suffix(".rs")?;
    let mut parts: Vec<String> = rest.split('/').map(str::to_owned).collect();
    if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
        parts.pop();
    }
    Some(parts)
}

/// Every path `text` (the code of module `module`) names through `crate::` or `super::`, from the crate root:
/// `crate::a::{b::C, d}` gives `a::b::C` and `a::d`; `super::x` in `a::b` gives `a::x`.
fn named_paths(module: &[String], text: &str) -> Vec<Vec<String>> {
    let bytes = text.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut paths = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let rest = &bytes[at..];
        let starts = rest.starts_with(b"crate::") || rest.starts_with(b"super::");
        let free = at == 0 || !(ident(bytes[at - 1]) || bytes[at - 1] == b':' || bytes[at - 1] == b'$');
        if !(starts && free) {
            at += 1;
            continue;
        }
        let mut base = Vec::new();
        if rest.starts_with(b"crate::") {
            at += "crate::".len();
        } else {
            base = module.to_vec();
            while bytes[at..].starts_with(b"super::") {
                base.pop();
                at += "super::".len();
            }
        }
        at = use_tree(text, at, base, &mut paths);
    }
    paths
}

/// Reads one use tree (`a::b`, `a::{b, c::d}`, `self`, `*`) at `at` under `prefix`; returns where it ends.
fn use_tree(text: &str, mut at: usize, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let bytes = text.as_bytes();
    loop {
        let start = at;
        while at < bytes.len() && (bytes[at].is_ascii_alphanumeric() || bytes[at] == b'_') {
            at += 1;
        }
        if at > start {
            let segment = &text[start..at];
            if segment != "self" {
                prefix.push(segment.to_owned());
            }
            if bytes[at..].starts_with(b"::") {
                at += 2;
                continue;
            }
            out.push(prefix);
            return at;
        }
        if bytes.get(at) != Some(&b'{') {
            out.push(prefix);
            return at;
        }
        at += 1;
        loop {
            while bytes.get(at).is_some_and(u8::is_ascii_whitespace) {
                at += 1;
            }
            match bytes.get(at) {
                None => return at,
                Some(b'}') => return at + 1,
                Some(b',') => at += 1,
                Some(_) => {
                    let before = at;
                    at = use_tree(text, at, prefix.clone(), out);
                    if at == before {
                        at += 1; // not a path (a glob, a comment): skipped
                    }
                }
            }
        }
    }
}

/// The code of a file that is not a test's: a test module (`tests.rs`, `for_test.rs`, or from a file's
/// `#[cfg(test)]` module on) may reach anywhere.
fn non_test_code(path: &str, text: &str) -> Option<String> {
    if path.ends_with("/tests.rs") || path.ends_with("/for_test.rs") {
        return None;
    }
    Some(text.find("#[cfg(test)]\nmod ").map_or(text, |at| &text[..at]).to_owned())
}

/// Cycles among tracer's modules one level inside each wing (`record::attach`, `record::names`, ...), each
/// wing's own `mod.rs` among them (the node `record`: what it defines itself and the child modules its own
/// code uses, re-exports aside): each as the modules in it, sorted.
fn module_cycles(files: &[(String, String)]) -> Vec<Vec<String>> {
    use std::collections::{BTreeMap, BTreeSet};
    let node = |m: &[String]| -> Option<String> {
        let wing = m.first().filter(|w| WINGS.contains(&w.as_str()))?;
        Some(if m.len() >= 2 { m[..2].join("::") } else { wing.clone() })
    };
    let known: BTreeSet<String> = files.iter().filter_map(|(f, _)| module_of(f)).filter_map(|m| node(&m)).collect();
    // What each wing's `mod.rs` defines itself (a path to one of them is an edge to the wing's node).
    let defined: BTreeMap<String, BTreeSet<String>> = files
        .iter()
        .filter_map(|(f, t)| Some((module_of(f).filter(|m| m.len() == 1)?.remove(0), defined_items(t))))
        .collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in files {
        let Some(module) = module_of(path) else { continue };
        let Some(code) = non_test_code(path, text) else { continue };
        let Some(from) = node(&module) else { continue };
        let to = edges.entry(from.clone()).or_default();
        for p in named_paths(&module, &code) {
            let Some(wing) = p.first().filter(|w| p.len() >= 2 && WINGS.contains(&w.as_str())) else { continue };
            let target = if known.contains(&p[..2].join("::")) {
                p[..2].join("::")
            } else if defined.get(wing).is_some_and(|d| d.contains(&p[1])) {
                wing.clone()
            } else {
                continue;
            };
            if target != from {
                to.insert(target);
            }
        }
        if module.len() == 1 {
            for child in children_used(&code) {
                let target = format!("{from}::{child}");
                if known.contains(&target) {
                    to.insert(target);
                }
            }
        }
    }
    cycles(&edges)
}

/// Cycles among tracer-ebpf's modules (`tracer-ebpf/src/NAME.rs`, reaching each other through `crate::`).
fn ebpf_cycles(files: &[(String, String)]) -> Vec<Vec<String>> {
    use std::collections::{BTreeMap, BTreeSet};
    let module = |f: &str| {
        let name = f.strip_prefix("tracer-ebpf/src/")?.strip_suffix(".rs")?;
        (!name.contains('/') && name != "main" && name != "lib").then(|| name.to_owned())
    };
    let known: BTreeSet<String> = files.iter().filter_map(|(f, _)| module(f)).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in files {
        let Some(from) = module(path) else { continue };
        let Some(code) = non_test_code(path, text) else { continue };
        let to = edges.entry(format!("tracer-ebpf::{from}")).or_default();
        for p in named_paths(std::slice::from_ref(&from), &code) {
            if let Some(target) = p.first().filter(|t| known.contains(*t) && **t != from) {
                to.insert(format!("tracer-ebpf::{target}"));
            }
        }
    }
    cycles(&edges)
}

/// The items a file defines at its top level (functions, types, constants, statics, traits, macros).
fn defined_items(text: &str) -> std::collections::BTreeSet<String> {
    const KINDS: [&str; 10] =
        ["fn ", "const fn ", "async fn ", "unsafe fn ", "struct ", "enum ", "const ", "static ", "type ", "trait "];
    text.lines()
        .filter(|l| !l.starts_with(char::is_whitespace))
        .filter_map(|l| {
            let l = ["pub(crate) ", "pub(super) ", "pub "].iter().find_map(|v| l.strip_prefix(v)).unwrap_or(l);
            let rest = KINDS.iter().find_map(|k| l.strip_prefix(k)).or_else(|| l.strip_prefix("macro_rules! "))?;
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

/// The child modules a wing's `mod.rs` declares and its own code uses (`NAME::`, its declarations and its
/// re-exports aside).
fn children_used(code: &str) -> Vec<String> {
    let is_decl = |l: &str| {
        let l = l.trim_start();
        let l = ["pub(crate) ", "pub(super) ", "pub "].iter().find_map(|v| l.strip_prefix(v)).unwrap_or(l);
        l.starts_with("mod ") || l.starts_with("use ")
    };
    // Private `use child::...` is a use; `pub use` a re-export.
    let own =
        code.lines().filter(|l| !is_decl(l) || l.trim_start().starts_with("use ")).fold(String::new(), |mut t, l| {
            t.push_str(l);
            t.push('\n');
            t
        });
    code.lines()
        .filter(|l| is_decl(l) && l.trim_end().ends_with(';') && l.contains("mod "))
        .filter_map(|l| l.trim_end().trim_end_matches(';').rsplit(' ').next().map(str::to_owned))
        .filter(|c| own.contains(&format!("{c}::")))
        .collect()
}

/// The sets of nodes that each reach the others along `edges`, each sorted.
fn cycles(edges: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>) -> Vec<Vec<String>> {
    use std::collections::{BTreeMap, BTreeSet};
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for n in edges.get(&m).into_iter().flatten() {
                if seen.insert(n.clone()) {
                    todo.push(n.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> = edges.keys().map(|m| (m, reach(m))).collect();
    let mut cycles: Vec<Vec<String>> = Vec::new();
    for (m, r) in &reaches {
        if !r.contains(*m) {
            continue;
        }
        let mut cycle: Vec<String> =
            r.iter().filter(|n| reaches.get(n).is_some_and(|back| back.contains(*m))).cloned().collect();
        cycle.sort();
        if !cycles.contains(&cycle) {
            cycles.push(cycle);
        }
    }
    cycles
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(module: &[&str], text: &str) -> Vec<String> {
        let module: Vec<String> = module.iter().map(|m| (*m).to_owned()).collect();
        named_paths(&module, text).into_iter().map(|p| p.join("::")).collect()
    }

    #[test]
    fn groups_nested_paths_and_super_resolve_from_the_root() {
        let text =
            "use crate::{os::{proc, files::X}, trace::{self, Record},\n read::phase};\nlet a = crate::record::x();";
        assert_eq!(
            paths(&[], text),
            ["os::proc", "os::files::X", "trace", "trace::Record", "read::phase", "record::x"]
        );
        assert_eq!(
            paths(&["record", "session", "footer"], "super::super::entries::E; super::Session"),
            ["record::entries::E", "record::session::Session"]
        );
        assert!(paths(&[], "$crate::x; my_crate::y; a::super::z").is_empty());
    }

    #[test]
    fn a_wing_may_name_those_below_it_only() {
        let text = "use crate::{os::proc, trace::Record};\nfn f() { crate::record::names::x(); crate::read::y(); }";
        let module = |path: &str| module_of(path).unwrap();
        assert_eq!(wrong_imports(&module("tracer/src/read/report/mod.rs"), text), ["record"]);
        assert_eq!(wrong_imports(&module("tracer/src/trace/reader.rs"), text), ["read", "record"]);
        assert!(wrong_imports(&module("tracer/src/record/ring.rs"), text).is_empty());
        assert!(wrong_imports(&module("tracer/src/cli.rs"), text).is_empty());
        // Through `super::` too: from `os::files::elf`, three levels up is the crate root.
        assert_eq!(
            wrong_imports(&module("tracer/src/os/files/elf.rs"), "use super::super::super::trace::X;"),
            ["trace"]
        );
    }

    #[test]
    fn a_cycle_between_modules_is_found_and_test_code_is_not_counted() {
        let file = |p: &str, t: &str| (p.to_owned(), t.to_owned());
        let files = [
            file("tracer/src/os/proc.rs", "use crate::os::files::Root;"),
            file("tracer/src/os/files/mod.rs", "fn f() {}\n#[cfg(test)]\nmod tests { use crate::os::proc::X; }"),
            file("tracer/src/read/report/mod.rs", "use crate::read::phase::P;"),
            file("tracer/src/read/phase/mod.rs", "use crate::read::classify::C;"),
            file("tracer/src/read/classify/mod.rs", "use super::report::R;"),
        ];
        assert_eq!(module_cycles(&files), [vec!["read::classify", "read::phase", "read::report"]]);
        // A wing's own mod.rs is a node: what it defines, and the children its code uses (not re-exports).
        let files = [
            file(
                "tracer/src/record/mod.rs",
                "mod session;\npub use session::X;\npub struct Args;\nfn run() { session::go() }",
            ),
            file("tracer/src/record/session/mod.rs", "use super::Args;"),
            file("tracer/src/trace/mod.rs", "mod writer;\npub use writer::Writer;"),
            file("tracer/src/trace/writer.rs", "use crate::trace::Record;"),
        ];
        assert_eq!(module_cycles(&files), [vec!["record", "record::session"]]);
        let ebpf = [
            file("tracer-ebpf/src/maps.rs", "static S: X<crate::batch::Scratch>;"),
            file("tracer-ebpf/src/batch.rs", "use crate::maps::{EVENTS, count};"),
            file("tracer-ebpf/src/hip.rs", "use crate::maps::EVENTS;"),
        ];
        assert_eq!(ebpf_cycles(&ebpf), [vec!["tracer-ebpf::batch", "tracer-ebpf::maps"]]);
    }

    #[test]
    fn the_workspace_keeps_its_layout() {
        check(&Path::new(env!("CARGO_MANIFEST_DIR")).join("..")).unwrap();
    }
}
