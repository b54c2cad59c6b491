//! The layout checks `cargo xtask test` runs beside clippy: imports between tracer's wings go one way, and no
//! source file grows past 600 lines, and docs/internals.md's file map names every source file and nothing
//! else ([`crate::internals_map`]). Function length is clippy's own `too_many_lines` (80, clippy.toml).
//!
//! The wings, lowest first: `os` (leaves), `trace` (the format), `read` (report, export, metrics), `record`
//! (the recording). A module may name its own wing and those below it, never one above: a cycle between
//! wings would need one such name. At every depth (the crate root, a wing, a module with children), no
//! cycle between a module's children, its own file (`mod.rs`, `lib.rs`) counted as one; none between
//! tracer-ebpf's modules either.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

/// tracer's wings, lowest first.
const WINGS: [&str; 4] = ["os", "trace", "read", "record"];

/// The cycles between a parent module's own file and its children (the parent defines what its children
/// share and calls them) that the check at every depth found when it came, before the session and
/// attribution were taken apart (issue 79): each still there is let pass, listed here; a new one fails the
/// check, and so does a listed one that is gone, so the list only shrinks. It is empty now (the last one,
/// `record::names`'s, was broken: the data children below, `Of`'s behaviour in `names/of/` above them), and
/// stays so: a new cycle is broken, not listed.
const KNOWN_CYCLES: [&str; 0] = [];

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
    // The trees docs/internals.md's map covers, for its check.
    let mut covered = std::collections::BTreeMap::new();
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
            if crate::internals_map::COVERED.iter().any(|t| shown.starts_with(&format!("{t}/"))) {
                covered.insert(shown.clone(), text.clone());
            }
            if shown.starts_with("tracer/src/") {
                tracer.push((shown, text));
            } else if shown.starts_with("tracer-ebpf/src/") {
                ebpf.push((shown, text));
            }
        }
    }
    let graph = module_graph(&tracer);
    let found = cycles(&graph.edges);
    breaches.extend(
        KNOWN_CYCLES
            .iter()
            .filter(|k| !found.iter().any(|c| c.join(", ") == **k))
            .map(|k| format!("the import cycle {k} is no longer there (or changed): take it off KNOWN_CYCLES")),
    );
    breaches.extend(found.into_iter().filter(|c| !KNOWN_CYCLES.contains(&c.join(", ").as_str())).map(|c| {
        // Each edge inside the cycle, with the file and path that make it.
        let inside: Vec<String> = graph
            .why
            .iter()
            .filter(|((from, to), _)| c.contains(from) && c.contains(to))
            .map(|((from, to), why)| format!("{from} -> {to} ({why})"))
            .collect();
        format!(
            "an import cycle: {} (each reaches the others): break one edge of\n      {}",
            c.join(", "),
            inside.join("\n      ")
        )
    }));
    breaches.extend(
        ebpf_cycles(&ebpf)
            .into_iter()
            .map(|c| format!("an import cycle: {} (each reaches the others): break one edge", c.join(", "))),
    );
    breaches.extend(crate::internals_map::breaches(root, &covered)?);
    if breaches.is_empty() {
        return Ok(());
    }
    bail!("{} layout breaches:\n  {}", breaches.len(), breaches.join("\n  "))
}

pub(crate) fn rust_files(dir: &Path) -> Result<Vec<PathBuf>> {
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
            if segment == "super" {
                prefix.pop();
            } else if segment != "self" {
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
    let code = text.find("#[cfg(test)]\nmod ").map_or(text, |at| &text[..at]);
    // Comments aside: a doc link (`[`super::multi`]`) is no use of the module.
    Some(code.lines().map(|l| l.find("//").map_or(l, |at| &l[..at])).fold(String::new(), |mut t, l| {
        t.push_str(l);
        t.push('\n');
        t
    }))
}

/// Cycles among tracer's modules at every depth: under each module with children (the crate root, a wing,
/// `record::probes`, `record::probes::attach`, ...), between its children and its own file (a `mod.rs`, the
/// node `PARENT (mod.rs)`: what it defines itself and the children its own code uses, re-exports aside). A
/// path from one module to another is an edge between the two siblings that hold them under their nearest
/// common parent; a test's code is not counted. Each cycle as the modules in it, sorted.
#[cfg(test)]
fn module_cycles(files: &[(String, String)]) -> Vec<Vec<String>> {
    cycles(&module_graph(files).edges)
}

/// The edges between tracer's modules that [`module_cycles`] looks for cycles in.
struct Graph {
    edges: std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
    /// For each edge, the first file and path found making it.
    why: std::collections::BTreeMap<(String, String), String>,
}

fn module_graph(files: &[(String, String)]) -> Graph {
    use std::collections::{BTreeMap, BTreeSet};
    // Modules declared `#[cfg(test)] mod NAME;`: test code, which may reach anywhere.
    let tests: BTreeSet<Vec<String>> = files
        .iter()
        .filter_map(|(f, t)| Some((module_of(f)?, t)))
        .flat_map(|(m, t)| {
            t.split("#[cfg(test)]\n").skip(1).filter_map(move |after| {
                let decl = after.lines().next()?.trim();
                let decl =
                    ["pub(crate) ", "pub(super) ", "pub "].iter().find_map(|v| decl.strip_prefix(v)).unwrap_or(decl);
                let name = decl.strip_prefix("mod ")?.strip_suffix(';')?;
                let mut child = m.clone();
                child.push(name.to_owned());
                Some(child)
            })
        })
        .collect();
    let files: Vec<&(String, String)> =
        files.iter().filter(|(f, _)| module_of(f).is_none_or(|m| !tests.contains(&m))).collect();
    let modules: Vec<Vec<String>> = files.iter().filter_map(|(f, _)| module_of(f)).collect();
    let texts: BTreeMap<Vec<String>, String> =
        files.iter().filter_map(|(f, t)| Some((module_of(f)?, non_test_code(f, t)?))).collect();
    // Every module a file is or lies under, and those with children.
    let known: BTreeSet<Vec<String>> = modules.iter().flat_map(|m| (0..=m.len()).map(|n| m[..n].to_vec())).collect();
    let has_children: BTreeSet<Vec<String>> =
        modules.iter().flat_map(|m| (0..m.len()).map(|n| m[..n].to_vec())).collect();
    // The module a path reaches: its longest prefix that is a module, or, for an item a module's file
    // re-exports (`pub use child::Item`), the module the re-export names. An item neither defined nor
    // re-exported there as this check reads them (one a macro defines) is the module's own.
    let resolve = |p: &[String]| -> Option<Vec<String>> {
        let mut p = p.to_vec();
        for _ in 0..8 {
            let target = (0..=p.len()).rev().map(|n| p[..n].to_vec()).find(|m| known.contains(m))?;
            let Some(item) = p.get(target.len()) else { return Some(target) };
            let text = texts.get(&target).map_or("", String::as_str);
            if defined_items(text).contains(item) {
                return Some(target);
            }
            match reexports(&target, text).into_iter().find(|r| r.last() == Some(item)) {
                Some(r) => p = r,
                None => return Some(target),
            }
        }
        None
    };
    let show = |m: &[String]| if m.is_empty() { "crate".to_owned() } else { m.join("::") };
    // The node holding module `m` among the children of `parent` (`m` lies in or is `parent`).
    let node = |parent: &[String], m: &[String]| {
        if m.len() == parent.len() { format!("{} (mod.rs)", show(parent)) } else { show(&m[..=parent.len()]) }
    };
    let mut graph = Graph { edges: BTreeMap::new(), why: BTreeMap::new() };
    let mut edge = |from: &[String], to: &[String], why: String| {
        let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
        if common == from.len() && common == to.len() {
            return;
        }
        let parent = &from[..common];
        let (a, b) = (node(parent, from), node(parent, to));
        graph.edges.entry(a.clone()).or_default().insert(b.clone());
        graph.why.entry((a, b)).or_insert(why);
    };
    for (path, text) in files {
        let Some(module) = module_of(path) else { continue };
        let Some(code) = non_test_code(path, text) else { continue };
        for p in named_paths(&module, &code) {
            // A path that names the module holding this one, and nothing in it (`crate::record` in `use
            // crate::record::{self, ...}`), is no use of its file.
            if let Some(target) = resolve(&p).filter(|t| !(t.len() == p.len() && module.starts_with(t))) {
                edge(&module, &target, format!("{path}: {}", p.join("::")));
            }
        }
        if has_children.contains(&module) {
            for child in children_used(&code) {
                let mut target = module.clone();
                target.push(child.clone());
                if known.contains(&target) {
                    edge(&module, &target, format!("{path}: {child}::"));
                }
            }
        }
    }
    graph
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

/// The paths a module's file brings in at its top level (`pub use a::b::{C, D}`: `a::b::C`, `a::b::D`; a
/// private `use` too, which its children reach through `super::`), from the crate root.
fn reexports(module: &[String], text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    // A child reaches its parent's private `use`s through `super::` as well.
    for vis in ["pub use ", "pub(crate) use ", "pub(super) use ", "use "] {
        for (at, _) in text.match_indices(vis) {
            let free = at == 0 || text.as_bytes()[at - 1] == b'\n';
            let rest = &text[at + vis.len()..];
            if !free {
                continue;
            }
            if rest.starts_with("crate::") || rest.starts_with("super::") {
                let end = rest.find(';').unwrap_or(rest.len());
                out.extend(named_paths(module, &rest[..end]));
            } else {
                // Relative to the module itself: `pub use child::X`.
                use_tree(rest, 0, module.to_vec(), &mut out);
            }
        }
    }
    out
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
        .filter(|c| names_path_from(&own, c))
        .collect()
}

/// Whether `code` has a path beginning with the module `child` (`child::x`; not `other::child::x`, nor
/// `grandchild::x`).
fn names_path_from(code: &str, child: &str) -> bool {
    let at = format!("{child}::");
    code.match_indices(&at)
        .any(|(i, _)| code[..i].chars().next_back().is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':')))
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
            file("tracer/src/read/report/mod.rs", "use crate::read::phase::P;\npub use crate::read::phase::Q;"),
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
            // Through a re-export: the module the item is in.
            file("tracer/src/read/x.rs", "use crate::read::report::Q;"),
            file("tracer/src/read/phase/mod.rs", "pub struct Q;\nfn f() { crate::read::x::g() }"),
        ];
        assert_eq!(module_cycles(&files), [vec!["record (mod.rs)", "record::session"]]);
        // Two levels down, between two files of one directory, and between a file and its parent's mod.rs.
        let files = [
            file("tracer/src/record/probes/attach/multi.rs", "use super::points::P;"),
            file("tracer/src/record/probes/attach/points.rs", "fn f() { crate::record::probes::attach::multi::m() }"),
            file("tracer/src/record/probes/mod.rs", "mod attach;\nfn g() { attach::go() }"),
            file("tracer/src/record/probes/attach/mod.rs", "use crate::record::probes::Watch;\nuse super::Other;"),
        ];
        assert_eq!(
            module_cycles(&files),
            [
                vec!["record::probes (mod.rs)", "record::probes::attach"],
                vec!["record::probes::attach::multi", "record::probes::attach::points"],
            ]
        );
        // A crate-root item (lib.rs's) is the root's own file.
        let files = [
            file("tracer/src/lib.rs", "mod os;\npub struct FastMap;\nfn main() { os::run() }"),
            file("tracer/src/os/proc.rs", "use crate::FastMap;"),
        ];
        assert_eq!(module_cycles(&files), [vec!["crate (mod.rs)", "os"]]);
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
