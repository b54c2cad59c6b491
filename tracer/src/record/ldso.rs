//! What a command tracer starts will load, predicted before it starts, as the dynamic loader would find it.
//!
//! So that a private runtime copy (`LD_LIBRARY_PATH`, an rpath build, a venv's wheel, a backend
//! dlopened from beside the program) is probed before the command's first instruction, not found late.
//!
//! From the program: its `DT_NEEDED` entries, each searched as ld.so searches (`DT_RPATH` when there is no
//! `DT_RUNPATH`, `LD_LIBRARY_PATH`, `DT_RUNPATH`, the directories of ld.so.conf, the system's), with
//! `$ORIGIN` expanded, recursively. Libraries a program dlopens are not in its `DT_NEEDED`: what lies beside
//! the program and its libraries outside the system's directories (ggml's backends, `libggml-*.so`, and
//! runtime copies themselves) is taken as a root too. An `env [-i] [-u NAME] [NAME=VALUE]... COMMAND`
//! wrapper is seen through. Every file is opened with the checks of [`crate::os::files`]; the walk is bounded.

use std::{
    collections::{BTreeSet, HashSet, VecDeque},
    path::{Path, PathBuf},
};

use crate::os::files::CodeFile;

/// Objects looked at, at most (a large Python stack maps a few hundred).
const MAX_OBJECTS: usize = 2048;

/// The system's library directories (after those of ld.so.conf).
const SYSTEM_DIRS: [&str; 6] =
    ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"];

/// File-name prefixes of dlopened backends looked for beside a program and its libraries.
const BACKENDS: [&str; 1] = ["libggml-"];

/// The program and environment a command really runs: through an `env` wrapper, if it is one.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Launch {
    pub(crate) program: PathBuf,
    /// `LD_LIBRARY_PATH` as the program will see it.
    pub(crate) ld_library_path: Option<String>,
}

/// Sees through `env [-i] [-u NAME]... [NAME=VALUE]... COMMAND ARGS`.
///
/// `program` is the command's resolved program, `args` its arguments; anything else is the program itself
/// with tracer's own environment, which the command inherits.
pub(crate) fn launch(
    program: &Path,
    args: &[String],
    resolve: impl Fn(&str, Option<&str>) -> Option<PathBuf>,
) -> Launch {
    let mut ld = std::env::var("LD_LIBRARY_PATH").ok();
    let mut path = std::env::var("PATH").ok();
    if program.file_name().is_none_or(|n| n != "env") {
        return Launch { program: program.to_path_buf(), ld_library_path: ld };
    }
    let mut rest = args.iter().skip(1);
    for a in rest.by_ref() {
        match a.as_str() {
            "-i" | "--ignore-environment" | "-" => {
                ld = None;
                path = None;
            }
            "-u" | "--unset" => {}
            "--" => {}
            s if s.starts_with("LD_LIBRARY_PATH=") => ld = Some(s["LD_LIBRARY_PATH=".len()..].to_owned()),
            s if s.starts_with("PATH=") => path = Some(s["PATH=".len()..].to_owned()),
            s if s.contains('=') || s.starts_with('-') => {}
            command => {
                return match resolve(command, path.as_deref()) {
                    Some(program) => Launch { program, ld_library_path: ld },
                    None => Launch { program: program.to_path_buf(), ld_library_path: ld },
                };
            }
        }
    }
    Launch { program: program.to_path_buf(), ld_library_path: ld }
}

/// What the walk found.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    /// Every object found (its path), the program first.
    pub(crate) objects: Vec<PathBuf>,
    /// Names in `DT_NEEDED` no directory held.
    pub(crate) missing: BTreeSet<String>,
    /// The walk stopped at [`MAX_OBJECTS`].
    pub(crate) cut: bool,
}

/// The objects a launch will load (the dependency closure of the program and of the backends beside it),
/// as paths that open from here.
pub(crate) fn closure(launch: &Launch) -> Loaded {
    let conf = ld_so_conf_dirs();
    let ld_library_path: Vec<String> = launch
        .ld_library_path
        .iter()
        .flat_map(|p| p.split([':', ';']))
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect();
    let mut out = Loaded::default();
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    let mut queue: VecDeque<(PathBuf, Vec<String>)> = VecDeque::new();
    queue.push_back((launch.program.clone(), Vec::new()));
    // Beside the program: its own directory and ../lib.
    let mut extra_dirs: BTreeSet<PathBuf> = BTreeSet::new();
    if let Some(dir) = launch.program.parent() {
        extra_dirs.insert(dir.to_path_buf());
        if let Some(up) = dir.parent() {
            extra_dirs.insert(up.join("lib"));
        }
    }
    let mut scanned_dirs: HashSet<PathBuf> = HashSet::new();
    loop {
        while let Some((path, loader_rpath)) = queue.pop_front() {
            if out.objects.len() >= MAX_OBJECTS {
                out.cut = true;
                return out;
            }
            let Ok(file) = CodeFile::user(&path) else { continue };
            if !seen.insert(file.id()) {
                continue;
            }
            let Some(deps) = crate::os::elf::dependencies(&file) else { continue };
            if !deps.x86_64 {
                continue;
            }
            out.objects.push(path.clone());
            let origin = path.parent().map(Path::to_path_buf).unwrap_or_default();
            if let Some(dir) = path.parent().filter(|d| !is_system(d, &conf)) {
                extra_dirs.insert(dir.to_path_buf());
            }
            let expand = |p: &String| expand_origin(p, &origin);
            // DT_RPATH applies when the object has no DT_RUNPATH, and is inherited by what it loads.
            let rpath: Vec<String> = if deps.runpath.is_empty() {
                deps.rpath.iter().map(expand).chain(loader_rpath.iter().cloned()).collect()
            } else {
                Vec::new()
            };
            let runpath: Vec<String> = deps.runpath.iter().map(expand).collect();
            for name in &deps.needed {
                match find(name, &rpath, &ld_library_path, &runpath, &conf) {
                    Some(found) => queue.push_back((found, rpath.clone())),
                    None => {
                        out.missing.insert(name.clone());
                    }
                }
            }
        }
        // Then what lies beside the program and its libraries: dlopened backends and runtime copies.
        let dirs: Vec<PathBuf> = extra_dirs.iter().filter(|d| !scanned_dirs.contains(*d)).cloned().collect();
        if dirs.is_empty() {
            return out;
        }
        for dir in dirs {
            scanned_dirs.insert(dir.clone());
            queue.extend(backends_in(&dir).into_iter().map(|p| (p, Vec::new())));
        }
    }
}

/// The GPU backends and runtime copies a directory holds (at most its first `MAX_DIR_ENTRIES` entries), by
/// file name, in name order.
fn backends_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut names: Vec<PathBuf> = entries
        .flatten()
        .take(crate::os::files::MAX_DIR_ENTRIES)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().is_some_and(|n| {
                let n = n.to_string_lossy();
                BACKENDS
                    .iter()
                    .chain(crate::trace::runtimes::RUNTIMES.iter())
                    .chain(std::iter::once(&crate::trace::runtimes::CUDA_RUNTIME))
                    .any(|b| n.starts_with(b))
            })
        })
        .collect();
    names.sort();
    names
}

/// `$ORIGIN` (and `${ORIGIN}`) as the directory of the object whose path list it is in.
fn expand_origin(p: &str, origin: &Path) -> String {
    let o = origin.display().to_string();
    p.replace("${ORIGIN}", &o).replace("$ORIGIN", &o)
}

/// Where ld.so finds `name` for an object: a path as it is; else `DT_RPATH`, `LD_LIBRARY_PATH`,
/// `DT_RUNPATH`, the directories of ld.so.conf, the system's. A file of another architecture is passed
/// over, as ld.so passes it.
fn find(name: &str, rpath: &[String], ld: &[String], runpath: &[String], conf: &[PathBuf]) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(PathBuf::from(name));
    }
    let system = SYSTEM_DIRS.iter().map(PathBuf::from);
    rpath
        .iter()
        .chain(ld)
        .chain(runpath)
        .map(PathBuf::from)
        .chain(conf.iter().cloned())
        .chain(system)
        .map(|d| d.join(name))
        .find(|p| CodeFile::user(p).ok().and_then(|f| crate::os::elf::dependencies(&f)).is_some_and(|d| d.x86_64))
}

fn is_system(dir: &Path, conf: &[PathBuf]) -> bool {
    SYSTEM_DIRS.iter().any(|s| dir == Path::new(s)) || conf.iter().any(|c| c == dir)
}

/// The directories `/etc/ld.so.conf` names (with its `include` globs of one level of `*.conf`).
fn ld_so_conf_dirs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    read_conf(Path::new("/etc/ld.so.conf"), &mut out, 0);
    out
}

fn read_conf(path: &Path, out: &mut Vec<PathBuf>, depth: usize) {
    if depth > 4 {
        return;
    }
    let Ok(text) = std::fs::read_to_string(path) else { return };
    for line in text.lines().map(|l| l.split('#').next().unwrap_or("").trim()).filter(|l| !l.is_empty()) {
        if let Some(pattern) = line.strip_prefix("include").map(str::trim) {
            // `include /etc/ld.so.conf.d/*.conf`: the directory's .conf files, in order.
            let (dir, suffix) = pattern.rsplit_once("/*").unwrap_or((pattern, ""));
            if let Ok(entries) = std::fs::read_dir(dir) {
                let mut files: Vec<PathBuf> =
                    entries.flatten().map(|e| e.path()).filter(|p| p.to_string_lossy().ends_with(suffix)).collect();
                files.sort();
                for f in files {
                    read_conf(&f, out, depth + 1);
                }
            }
        } else if line.starts_with('/') {
            out.push(PathBuf::from(line));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_env_wrapper_is_seen_through() {
        let resolve = |c: &str, _: Option<&str>| Some(PathBuf::from(format!("/bin/{c}")));
        let args = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        let l = launch(Path::new("/usr/bin/env"), &args("env LD_LIBRARY_PATH=/opt/x A=1 runner demo"), resolve);
        assert_eq!(l, Launch { program: "/bin/runner".into(), ld_library_path: Some("/opt/x".into()) });
        let l = launch(Path::new("/usr/bin/env"), &args("env -i runner"), resolve);
        assert_eq!(l, Launch { program: "/bin/runner".into(), ld_library_path: None });
        let l = launch(Path::new("/usr/bin/python3"), &args("python3 app.py"), resolve);
        assert_eq!(l.program, PathBuf::from("/usr/bin/python3"));
    }

    #[test]
    fn the_closure_of_this_test_binary_holds_libc() {
        let me = std::env::current_exe().unwrap();
        let l = closure(&Launch { program: me.clone(), ld_library_path: None });
        assert_eq!(l.objects.first(), Some(&me));
        assert!(
            l.objects.iter().any(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("libc.so"))),
            "{l:?}"
        );
        assert!(!l.cut);
        assert_eq!(expand_origin("$ORIGIN/../lib:${ORIGIN}", Path::new("/a/b")), "/a/b/../lib:/a/b");
    }
}
