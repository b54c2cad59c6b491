//! What a command tracer starts will load, predicted before it starts, as the dynamic loader would find it.
//!
//! So that a private runtime copy (`LD_LIBRARY_PATH`, an rpath build, a venv's wheel, a backend
//! dlopened from beside the program) is probed before the command's first instruction, not found late.
//!
//! From the program: its `DT_NEEDED` entries, each searched as ld.so searches (`DT_RPATH` when there is no
//! `DT_RUNPATH`, `LD_LIBRARY_PATH`, `DT_RUNPATH`, the directories of ld.so.conf, the system's), with
//! `$ORIGIN` expanded, recursively. Libraries a program dlopens are not in its `DT_NEEDED`: what lies beside
//! the program and its libraries outside the system's directories (ggml's backends, `libggml-*.so`, and
//! runtime copies themselves, and a ggml's `ggml/backends*` directory beside it, where distributions put
//! its backends) is taken as a root too. An `env [-i] [-u NAME] [NAME=VALUE]... COMMAND` and a `chroot
//! NEWROOT COMMAND` wrapper are seen through: under `chroot`, every path is the new root's (a container's
//! own `ROCm`), resolved inside it. Every file is opened with the checks of [`crate::os::files`]; the walk is
//! bounded.

use std::{
    collections::{BTreeSet, HashSet, VecDeque},
    path::{Path, PathBuf},
};

use crate::os::files::Root;

/// Objects looked at, at most (a large Python stack maps a few hundred).
const MAX_OBJECTS: usize = 2048;

/// The system's library directories (after those of ld.so.conf).
const SYSTEM_DIRS: [&str; 6] =
    ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"];

/// File-name prefixes of dlopened backends looked for beside a program and its libraries.
const BACKENDS: [&str; 1] = ["libggml-"];

/// The program and environment a command really runs: through an `env` or `chroot` wrapper, if it is one.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Launch {
    /// The program, as a path in `root`.
    pub(crate) program: PathBuf,
    /// `LD_LIBRARY_PATH` as the program will see it.
    pub(crate) ld_library_path: Option<String>,
    /// The root it runs in, as tracer sees that directory (`chroot NEWROOT`); None: tracer's own.
    pub(crate) root: Option<PathBuf>,
}

/// Sees through `env [-i] [-u NAME]... [NAME=VALUE]... COMMAND ARGS` and `chroot [OPTION]... NEWROOT COMMAND
/// ARGS`, one inside the other as well (`chroot ROOT env VAR=1 runner`), up to [`MAX_WRAPPERS`] deep.
///
/// `program` is the command's resolved program, `args` its arguments; anything else is the program itself
/// with tracer's own environment, which the command inherits.
pub(crate) fn launch(
    program: &Path,
    args: &[String],
    resolve: impl Fn(&str, Option<&str>) -> Option<PathBuf>,
) -> Launch {
    let env = Env { ld: std::env::var("LD_LIBRARY_PATH").ok(), path: std::env::var("PATH").ok() };
    wrapped(program, args, env, &resolve, None, 0)
}

/// Wrappers seen through one inside the other, at most.
const MAX_WRAPPERS: usize = 4;

/// The variables a wrapper can change that the walk needs.
#[derive(Clone)]
struct Env {
    ld: Option<String>,
    path: Option<String>,
}

/// The launch of `program` with `args`, in `root` (None: tracer's own, where `resolve` looks a command up).
fn wrapped(
    program: &Path,
    args: &[String],
    mut env: Env,
    resolve: &dyn Fn(&str, Option<&str>) -> Option<PathBuf>,
    root: Option<(PathBuf, Root)>,
    depth: usize,
) -> Launch {
    let itself = |env: Env, root: Option<(PathBuf, Root)>| Launch {
        program: program.to_path_buf(),
        ld_library_path: env.ld,
        root: root.map(|(dir, _)| dir),
    };
    let name = program.file_name();
    if depth >= MAX_WRAPPERS {
        return itself(env, root);
    }
    if name.is_some_and(|n| n == "chroot") && root.is_none() {
        // `chroot [OPTION]... NEWROOT COMMAND [ARG]...` (coreutils'): COMMAND is looked up in NEWROOT, on `PATH`
        // when it names no directory. Without a COMMAND (a shell), or a NEWROOT that does not open, it is
        // `chroot` itself.
        let mut rest = args.iter().enumerate().skip(1).skip_while(|(_, a)| a.starts_with('-'));
        let (Some((_, new_root)), Some((at, command))) = (rest.next(), rest.next()) else { return itself(env, root) };
        let Ok(inside) = Root::at(new_root) else { return itself(env, root) };
        let Some(found) = find_in(&inside, command, env.path.as_deref()) else { return itself(env, root) };
        return wrapped(&found, &args[at..], env, resolve, Some((PathBuf::from(new_root), inside)), depth + 1);
    }
    if name.is_none_or(|n| n != "env") {
        return itself(env, root);
    }
    for (at, a) in args.iter().enumerate().skip(1) {
        match a.as_str() {
            "-i" | "--ignore-environment" | "-" => env = Env { ld: None, path: None },
            "-u" | "--unset" | "--" => {}
            s if s.starts_with("LD_LIBRARY_PATH=") => env.ld = Some(s["LD_LIBRARY_PATH=".len()..].to_owned()),
            s if s.starts_with("PATH=") => env.path = Some(s["PATH=".len()..].to_owned()),
            s if s.contains('=') || s.starts_with('-') => {}
            command => {
                let found = match &root {
                    Some((_, inside)) => find_in(inside, command, env.path.as_deref()),
                    None => resolve(command, env.path.as_deref()),
                };
                return match found {
                    Some(found) => wrapped(&found, &args[at..], env, resolve, root, depth + 1),
                    None => itself(env, root),
                };
            }
        }
    }
    itself(env, root)
}

/// Where `command` is in `root`: itself when it names a directory, else the first directory of `path` (or
/// `/usr/bin:/bin`) that holds it.
fn find_in(root: &Root, command: &str, path: Option<&str>) -> Option<PathBuf> {
    if command.contains('/') {
        return Some(PathBuf::from(command));
    }
    path.unwrap_or("/usr/bin:/bin")
        .split(':')
        .filter(|d| d.starts_with('/'))
        .map(|d| Path::new(d).join(command))
        .find(|p| root.open(&p.to_string_lossy()).is_ok())
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

/// What process `pid`'s program will load, read at its exec: its closure in the process's own root, under
/// the `LD_LIBRARY_PATH` it was started with. None when the process has gone.
pub(crate) fn of_process(pid: u32) -> Option<(Root, Loaded)> {
    let root = Root::of(pid).ok()?;
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    let root_link = std::fs::read_link(format!("/proc/{pid}/root")).ok()?;
    // The program as the process sees it: the link reads from tracer's root.
    let program = exe.strip_prefix(&root_link).map_or_else(|_| exe.clone(), |p| Path::new("/").join(p));
    let launch = Launch { program, ld_library_path: crate::os::proc::env_var(pid, "LD_LIBRARY_PATH"), root: None };
    let loaded = closure(&launch, &root);
    Some((root, loaded))
}

/// The objects a launch will load (the dependency closure of the program and of the backends beside it),
/// as paths in its root (`root`: that root, opened).
pub(crate) fn closure(launch: &Launch, root: &Root) -> Loaded {
    let conf = ld_so_conf_dirs(root);
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
            let Ok(file) = root.open(&path.to_string_lossy()) else { continue };
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
            // ggml's backends, where a distribution puts them (`<libdir>/ggml/backends0`).
            if let (Some(dir), Some(name)) = (path.parent(), path.file_name())
                && name.to_string_lossy().starts_with("libggml")
            {
                let ggml = dir.join("ggml");
                for sub in root.list(&ggml.to_string_lossy()).unwrap_or_default() {
                    if sub.starts_with("backends") {
                        extra_dirs.insert(ggml.join(sub));
                    }
                }
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
                match find(root, name, &rpath, &ld_library_path, &runpath, &conf) {
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
            queue.extend(backends_in(root, &dir).into_iter().map(|p| (p, Vec::new())));
        }
    }
}

/// The GPU backends and runtime copies a directory holds (at most its first `MAX_DIR_ENTRIES` entries), by
/// file name, in name order.
fn backends_in(root: &Root, dir: &Path) -> Vec<PathBuf> {
    let Ok(names) = root.list(&dir.to_string_lossy()) else { return Vec::new() };
    let mut names: Vec<PathBuf> = names
        .into_iter()
        .filter(|n| {
            BACKENDS
                .iter()
                .chain(crate::trace::runtimes::RUNTIMES.iter())
                .chain(std::iter::once(&crate::trace::runtimes::CUDA_RUNTIME))
                .any(|b| n.starts_with(b))
        })
        .map(|n| dir.join(n))
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
fn find(
    root: &Root,
    name: &str,
    rpath: &[String],
    ld: &[String],
    runpath: &[String],
    conf: &[PathBuf],
) -> Option<PathBuf> {
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
        .find(|p| {
            root.open(&p.to_string_lossy())
                .ok()
                .and_then(|f| crate::os::elf::dependencies(&f))
                .is_some_and(|d| d.x86_64)
        })
}

fn is_system(dir: &Path, conf: &[PathBuf]) -> bool {
    SYSTEM_DIRS.iter().any(|s| dir == Path::new(s)) || conf.iter().any(|c| c == dir)
}

/// The directories the root's `/etc/ld.so.conf` names (with its `include` globs of one level of `*.conf`).
fn ld_so_conf_dirs(root: &Root) -> Vec<PathBuf> {
    let mut out = Vec::new();
    read_conf(root, "/etc/ld.so.conf", &mut out, 0);
    out
}

/// A configuration file's text, at most 64 KiB of it.
fn read_text(root: &Root, path: &str) -> Option<String> {
    let file = root.open(path).ok()?;
    let mut buf = vec![0u8; 64 << 10];
    let n = file.read_at_most(0, &mut buf).ok()?;
    buf.truncate(n);
    Some(String::from_utf8_lossy(&buf).into_owned())
}

fn read_conf(root: &Root, path: &str, out: &mut Vec<PathBuf>, depth: usize) {
    if depth > 4 {
        return;
    }
    let Some(text) = read_text(root, path) else { return };
    for line in text.lines().map(|l| l.split('#').next().unwrap_or("").trim()).filter(|l| !l.is_empty()) {
        if let Some(pattern) = line.strip_prefix("include").map(str::trim) {
            // `include /etc/ld.so.conf.d/*.conf`: the directory's .conf files, in order.
            let (dir, suffix) = pattern.rsplit_once("/*").unwrap_or((pattern, ""));
            let mut files: Vec<String> = root.list(dir).unwrap_or_default();
            files.retain(|f| f.ends_with(suffix));
            files.sort();
            for f in files.iter().take(256) {
                read_conf(root, &format!("{dir}/{f}"), out, depth + 1);
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
        assert_eq!(l, Launch { program: "/bin/runner".into(), ld_library_path: Some("/opt/x".into()), root: None });
        let l = launch(Path::new("/usr/bin/env"), &args("env -i runner"), resolve);
        assert_eq!(l, Launch { program: "/bin/runner".into(), ld_library_path: None, root: None });
        let l = launch(Path::new("/usr/bin/python3"), &args("python3 app.py"), resolve);
        assert_eq!(l.program, PathBuf::from("/usr/bin/python3"));
    }

    #[test]
    fn the_closure_of_this_test_binary_holds_libc() {
        let me = std::env::current_exe().unwrap();
        let l = closure(&Launch { program: me.clone(), ld_library_path: None, root: None }, &Root::host().unwrap());
        assert_eq!(l.objects.first(), Some(&me));
        assert!(
            l.objects.iter().any(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("libc.so"))),
            "{l:?}"
        );
        assert!(!l.cut);
        assert_eq!(expand_origin("$ORIGIN/../lib:${ORIGIN}", Path::new("/a/b")), "/a/b/../lib:/a/b");
    }

    #[test]
    fn a_chroot_wrapper_is_seen_through_into_its_root() {
        let args = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        let resolve = |_: &str, _: Option<&str>| None;
        // `/` as the new root: `sh` is found on PATH inside it.
        let l = launch(Path::new("/usr/sbin/chroot"), &args("chroot --skip-chdir / sh -c true"), resolve);
        assert_eq!(l.root, Some(PathBuf::from("/")));
        assert!(l.program.ends_with("sh"), "{l:?}");
        // No command (an interactive shell) or a root that does not open: `chroot` itself.
        let l = launch(Path::new("/usr/sbin/chroot"), &args("chroot /"), resolve);
        assert_eq!((l.program, l.root), (PathBuf::from("/usr/sbin/chroot"), None));
        let l = launch(Path::new("/usr/sbin/chroot"), &args("chroot /nonexistent-root sh"), resolve);
        assert_eq!(l.root, None);
        // One wrapper inside the other: `env` inside the root (found on its PATH), a `chroot` under `env`.
        let l =
            launch(Path::new("/usr/sbin/chroot"), &args("chroot / env LD_LIBRARY_PATH=/opt/y A=1 sh -c true"), resolve);
        assert_eq!(l.root, Some(PathBuf::from("/")));
        assert!(l.program.ends_with("sh") && l.ld_library_path.as_deref() == Some("/opt/y"), "{l:?}");
        let host = |c: &str, _: Option<&str>| Some(PathBuf::from(format!("/usr/sbin/{c}")));
        let l = launch(Path::new("/usr/bin/env"), &args("env -i chroot / sh"), host);
        assert!(l.program.ends_with("sh"), "{l:?}");
        assert_eq!((l.root, l.ld_library_path), (Some(PathBuf::from("/")), None));
    }
}
