//! docs/internals.md's file map kept true to the tree: the `## Layout` table's names, checked both ways.
//!
//! How the table is read. Each row is `| wing | where |`; a name is a backticked `NAME.rs` or `NAME/` (other
//! backticked text, `Op`, `/proc`, `trace::Serve`, is prose). A name lies in the directory the nesting puts it
//! in, exactly (not anywhere below): a row starts at tracer/src/WING when its first cell names a wing (`record/`),
//! at the repository's root otherwise; `dir/ (...)` puts what the parentheses name in `dir/`; `dir/: ...` puts
//! what follows in `dir/` until the parentheses around it close (or the row ends); a name with a `/` inside it
//! (`tracer-common/src/api/`, `bench/gpu/`) is a path from the repository's root.
//!
//! The rules. Every name is in the tree, where the table puts it. Every source file of tracer/src,
//! tracer-ebpf/src and tracer-common/src (the table lists each whole) is named, by its file name where it lies,
//! or by a directory above it that the table names with nothing listed in it (`decode/`, `event/`: the table
//! leaves their files to the code); a directory the table lists something in must have its every file listed.
//! Not counted: `mod.rs`, `lib.rs`, `main.rs`, test code (a `tests.rs`, a file under a `tests/` directory, a
//! module its parent declares under `#[cfg(test)]`).

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

use anyhow::{Context as _, Result};

/// The file whose table is checked, from the repository's root.
const DOC: &str = "docs/internals.md";

/// The source trees every file of which the table names.
pub(crate) const COVERED: [&str; 3] = ["tracer/src", "tracer-ebpf/src", "tracer-common/src"];

/// Files the rule that every file is named leaves out: a module's own file and the crates' roots.
const UNLISTED: [&str; 4] = ["mod.rs", "lib.rs", "main.rs", "tests.rs"];

/// One name the table gives.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Named {
    /// From the repository's root, no trailing `/`.
    path: String,
    dir: bool,
    /// The name as the table spells it.
    shown: String,
    /// The row's first cell.
    row: String,
}

/// The breaches of docs/internals.md's file map in the workspace at `root`, one sentence each: `sources`,
/// the [`COVERED`] trees' files (from the root) with their code, as the layout check read them.
pub(crate) fn breaches(root: &Path, sources: &BTreeMap<String, String>) -> Result<Vec<String>> {
    let doc = std::fs::read_to_string(root.join(DOC)).with_context(|| format!("reading {DOC}"))?;
    let exists = |path: &str, dir: bool| {
        let at = root.join(path);
        if dir { at.is_dir() } else { at.is_file() }
    };
    Ok(breaches_in(&doc, sources, &exists))
}

/// The breaches of the table in `doc` against `sources` (the covered trees' files, from the root, with their
/// code) and `exists` (whether a path from the root is a directory, `true`, or a file).
fn breaches_in(doc: &str, sources: &BTreeMap<String, String>, exists: &dyn Fn(&str, bool) -> bool) -> Vec<String> {
    let rows = layout_rows(doc);
    if rows.is_empty() {
        return vec![format!("{DOC} has no `## Layout` table of `| wing | where |` rows: put the file map back")];
    }
    let names: BTreeSet<Named> = rows.iter().flat_map(|(wing, place)| names_in(wing, place)).collect();
    let mut out: Vec<String> = names
        .iter()
        .filter(|n| !exists(&n.path, n.dir))
        .map(|n| {
            let under = n
                .path
                .rsplit_once('/')
                .map_or_else(|| "the repository's root".to_owned(), |(dir, _)| format!("{dir}/"));
            format!(
                "{DOC}'s Layout table names `{}` under {under} (row \"{}\"), which is not in the tree: take it out or \
                 fix its place",
                n.shown,
                n.row.replace('`', "")
            )
        })
        .collect();
    let files: BTreeSet<&str> = names.iter().filter(|n| !n.dir).map(|n| n.path.as_str()).collect();
    // A directory named with nothing named inside it stands for every file below it.
    let bare: Vec<&str> = names
        .iter()
        .filter(|d| d.dir && !names.iter().any(|n| n.path.starts_with(&format!("{}/", d.path))))
        .map(|d| d.path.as_str())
        .collect();
    for path in sources.keys().filter(|p| listed(p, sources)) {
        if files.contains(path.as_str()) || bare.iter().any(|d| path.starts_with(&format!("{d}/"))) {
            continue;
        }
        let (dir, file) = path.rsplit_once('/').unwrap_or(("", path));
        out.push(format!(
            "{path} is not in {DOC}'s Layout table: name `{file}` where the table lists {dir}/ (or the directory \
             alone, with nothing listed in it)"
        ));
    }
    out
}

/// Whether the table must name the source file `path`: not a module's own file, nor test code.
fn listed(path: &str, sources: &BTreeMap<String, String>) -> bool {
    let (dir, file) = path.rsplit_once('/').unwrap_or(("", path));
    if UNLISTED.contains(&file) || path.split('/').any(|part| part == "tests") {
        return false;
    }
    let Some(module) = file.strip_suffix(".rs") else { return false };
    // The files that may declare it: its directory's own file (`mod.rs`, a crate root) or `DIR.rs` beside it.
    let parents = ["mod.rs", "lib.rs", "main.rs"].map(|own| format!("{dir}/{own}"));
    !parents
        .iter()
        .map(String::as_str)
        .chain([format!("{dir}.rs").as_str()])
        .filter_map(|p| sources.get(p))
        .any(|text| declared_for_tests(text, module))
}

/// Whether `text` declares `mod NAME;` under `#[cfg(test)]` (other attributes between them allowed).
fn declared_for_tests(text: &str, name: &str) -> bool {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    lines.iter().enumerate().any(|(at, line)| {
        let decl = ["pub(crate) ", "pub(super) ", "pub "].iter().find_map(|v| line.strip_prefix(v)).unwrap_or(line);
        decl.strip_prefix("mod ").and_then(|d| d.strip_suffix(';')) == Some(name)
            && lines[..at].iter().rev().take_while(|l| l.starts_with("#[")).any(|l| *l == "#[cfg(test)]")
    })
}

/// The `| wing | where |` rows of the table under `## Layout` (the header and the `|---|` line left out).
fn layout_rows(doc: &str) -> Vec<(String, String)> {
    doc.lines()
        .skip_while(|l| l.trim_end() != "## Layout")
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .filter(|l| l.starts_with('|'))
        .filter_map(|l| {
            let cells = cells(l);
            let [wing, place] = cells.as_slice() else { return None };
            let header = wing == "wing" || wing.chars().all(|c| c == '-' || c == ':' || c == ' ');
            (!header).then(|| (wing.clone(), place.clone()))
        })
        .collect()
}

/// A table line's cells, trimmed: split at each `|` outside backticks.
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|');
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut out = vec![String::new()];
    let mut quoted = false;
    for c in inner.chars() {
        match c {
            '`' => quoted = !quoted,
            '|' if !quoted => {
                out.push(String::new());
                continue;
            }
            _ => {}
        }
        if let Some(cell) = out.last_mut() {
            cell.push(c);
        }
    }
    out.into_iter().map(|c| c.trim().to_owned()).collect()
}

/// The names a row gives, each placed where its nesting puts it (see the module's doc).
fn names_in(wing: &str, place: &str) -> Vec<Named> {
    let base = backticked(wing)
        .into_iter()
        .find(|t| is_name(t) && t.ends_with('/'))
        .map_or(String::new(), |t| format!("tracer/src/{}", t.trim_end_matches('/')));
    let mut out = Vec::new();
    // The directory each open parenthesis lies in (the row's own first); a `dir/:` changes the innermost.
    let mut scopes = vec![base];
    // The directory the last name gave, while nothing but blanks followed it.
    let mut opening: Option<String> = None;
    let mut at = 0;
    let bytes = place.as_bytes();
    while at < bytes.len() {
        match bytes[at] {
            b'`' => {
                let end = place[at + 1..].find('`').map_or(place.len(), |e| at + 1 + e);
                let token = &place[at + 1..end];
                at = end + 1;
                opening = None;
                if !is_name(token) {
                    continue;
                }
                let scope = scopes.last().map_or("", String::as_str);
                let path = placed(scope, token);
                let dir = token.ends_with('/');
                out.push(Named { path: path.clone(), dir, shown: token.to_owned(), row: wing.to_owned() });
                if dir && bytes.get(at) == Some(&b':') {
                    if let Some(s) = scopes.last_mut() {
                        *s = path;
                    }
                } else if dir {
                    opening = Some(path);
                }
                continue;
            }
            b'(' => {
                let inner = opening.take().unwrap_or_else(|| scopes.last().cloned().unwrap_or_default());
                scopes.push(inner);
            }
            b')' => {
                opening = None;
                if scopes.len() > 1 {
                    scopes.pop();
                }
            }
            c if c.is_ascii_whitespace() => {}
            _ => opening = None,
        }
        at += 1;
    }
    out
}

/// The backticked spans of `text`.
fn backticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// Whether backticked `token` is a name of the map: `NAME.rs` or `NAME/`, path segments of plain characters.
fn is_name(token: &str) -> bool {
    let body = token.strip_suffix('/').or_else(|| token.strip_suffix(".rs").filter(|b| !b.ends_with('/')));
    body.is_some_and(|b| {
        !b.is_empty()
            && b.split('/').all(|seg| {
                !seg.is_empty()
                    && !seg.starts_with(['.', '-'])
                    && seg.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            })
    })
}

/// Where name `token` lies, from the root, given the directory `scope` it is named in.
fn placed(scope: &str, token: &str) -> String {
    let name = token.trim_end_matches('/');
    if name.contains('/') || scope.is_empty() { name.to_owned() } else { format!("{scope}/{name}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A made-up workspace: `files` (from the root), every directory above them existing too.
    fn run(doc: &str, files: &[&str]) -> Vec<String> {
        let sources: BTreeMap<String, String> = files
            .iter()
            .map(|f| {
                let text = if f.ends_with("/mod.rs") { "#[cfg(test)]\n#[path = \"x\"]\nmod for_test;\n" } else { "" };
                ((*f).to_owned(), text.to_owned())
            })
            .collect();
        let exists = |path: &str, dir: bool| {
            if dir { files.iter().any(|f| f.starts_with(&format!("{path}/"))) } else { files.contains(&path) }
        };
        breaches_in(doc, &sources, &exists)
    }

    const DOC_TEXT: &str = "# x\n\n## Layout\n\nThe wings:\n\n| wing | where |\n|---|---|\n\
        | `record/`: the write side | `names/` (kernel names: `maps.rs`, `bundle/` (`walk.rs`, the headers), \
        `early.rs`), `intake/` (`ring.rs`: a thread; `decode/`: bytes \u{2192} events), `mod.rs` starts it; not `read` |\n\
        | probes | `tracer-ebpf/src/`: `calls.rs` (entry/return, `Op`), `maps.rs`; `tracer-common/src/` (`#[repr(C)]`, \
        `header.rs`) |\n\n## Next\n\n| `x/` | `gone.rs` |\n";

    const TREE: [&str; 14] = [
        "tracer/src/lib.rs",
        "tracer/src/record/mod.rs",
        "tracer/src/record/names/mod.rs",
        "tracer/src/record/names/maps.rs",
        "tracer/src/record/names/early.rs",
        "tracer/src/record/names/bundle/walk.rs",
        "tracer/src/record/names/bundle/tests.rs",
        "tracer/src/record/intake/ring.rs",
        "tracer/src/record/intake/decode/mod.rs",
        "tracer/src/record/intake/decode/bytes.rs",
        "tracer-ebpf/src/calls.rs",
        "tracer-ebpf/src/maps.rs",
        "tracer-common/src/header.rs",
        "tracer-common/src/api/mod.rs",
    ];

    #[test]
    fn names_are_placed_by_their_nesting() {
        let (wing, place) = layout_rows(DOC_TEXT).remove(0);
        let names: Vec<String> = names_in(&wing, &place).into_iter().map(|n| n.path).collect();
        let under = |p: &str| format!("tracer/src/record/{p}");
        let expected =
            ["names", "names/maps.rs", "names/bundle", "names/bundle/walk.rs", "names/early.rs", "intake"].map(under);
        assert_eq!(names[..6], expected);
        assert_eq!(names[6..], ["intake/ring.rs", "intake/decode", "mod.rs"].map(under));
        let (wing, place) = layout_rows(DOC_TEXT).remove(1);
        let names: Vec<String> = names_in(&wing, &place).into_iter().map(|n| n.path).collect();
        let expected = ["tracer-ebpf/src", "tracer-ebpf/src/calls.rs", "tracer-ebpf/src/maps.rs", "tracer-common/src"];
        assert_eq!(names[..4], expected);
        assert_eq!(names[4..], ["tracer-common/src/header.rs"]);
    }

    #[test]
    fn a_table_true_to_the_tree_passes() {
        assert_eq!(run(DOC_TEXT, &TREE), Vec::<String>::new());
        // A module declared for tests only needs no row.
        let mut tree = TREE.to_vec();
        tree.push("tracer/src/record/names/for_test.rs");
        assert_eq!(run(DOC_TEXT, &tree), Vec::<String>::new());
    }

    #[test]
    fn a_table_naming_a_missing_file_fails() {
        let tree: Vec<&str> = TREE.iter().copied().filter(|f| !f.ends_with("/early.rs")).collect();
        assert_eq!(
            run(DOC_TEXT, &tree),
            ["docs/internals.md's Layout table names `early.rs` under tracer/src/record/names/ (row \"record/: the \
              write side\"), which is not in the tree: take it out or fix its place"]
        );
        // Named in the wrong directory: `walk.rs` lies in bundle/, not in names/ itself.
        let doc = DOC_TEXT.replace("`bundle/` (`walk.rs`, the headers)", "`walk.rs`, `bundle/` (the headers)");
        let found = run(&doc, &TREE);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("names `walk.rs` under tracer/src/record/names/ "), "{found:?}");
    }

    #[test]
    fn a_file_missing_from_the_table_fails() {
        let mut tree = TREE.to_vec();
        tree.extend(["tracer/src/record/names/cuda.rs", "tracer-common/src/api/table.rs", "tracer/src/tests/a.rs"]);
        // Inside a directory named alone (`decode/`), any file is covered.
        tree.push("tracer/src/record/intake/decode/more.rs");
        assert_eq!(
            run(DOC_TEXT, &tree),
            [
                "tracer-common/src/api/table.rs is not in docs/internals.md's Layout table: name `table.rs` where the \
                 table lists tracer-common/src/api/ (or the directory alone, with nothing listed in it)",
                "tracer/src/record/names/cuda.rs is not in docs/internals.md's Layout table: name `cuda.rs` where the \
                 table lists tracer/src/record/names/ (or the directory alone, with nothing listed in it)",
            ]
        );
        assert_eq!(run("## Layout\n\nno table\n", &TREE).len(), 1);
    }

    #[test]
    fn the_real_table_maps_the_real_tree() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut sources = BTreeMap::new();
        for tree in COVERED {
            for file in crate::layout::rust_files(&root.join(tree)).unwrap() {
                let shown = file.strip_prefix(&root).unwrap().display().to_string();
                sources.insert(shown, std::fs::read_to_string(&file).unwrap());
            }
        }
        let breaches = breaches(&root, &sources).unwrap();
        assert!(breaches.is_empty(), "{} breaches:\n  {}", breaches.len(), breaches.join("\n  "));
    }
}
