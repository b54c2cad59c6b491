//! Finding the library copies to probe: where a traced process maps them, where the user says, or the
//! usual places (Ollama's bundles first, then /opt/rocm, then the system library path).
//!
//! A copy is identified by (device, inode) of the file, so the same file reached by two paths is probed
//! once, and two copies of the same version (Ollama's bundle and /opt/rocm) are probed separately.

use std::{collections::BTreeSet, fs, path::PathBuf, sync::Arc};

use anyhow::{Result, bail};

use crate::os::files::{CodeFile, Root};

pub(crate) use crate::trace::LibOrigin as Origin;
use crate::trace::{
    GpuLibrary,
    runtimes::{self, runtime_of},
};

fn origin_of_path(path: &str) -> Origin {
    if path.contains("/lib/ollama/") { Origin::OllamaBundle } else { Origin::System }
}

/// GPU runtimes and the driver libraries under them, by file-name prefix: what a GPU library is built
/// on. A mapped file is a GPU library when it is one of these, holds GPU code (a fat binary), or needs
/// one of the runtimes (`DT_NEEDED`): rocSPARSE, hipBLASLt, cuDNN, ggml's backends, `PyTorch`'s CUDA
/// libraries are found by what they are, not by a list of their names.
const GPU_RUNTIMES: [&str; 9] = [
    "libamdhip64.so",
    runtimes::VULKAN_LOADER,
    "libhsa-runtime64.so",
    "libhsakmt.so",
    "libdrm_amdgpu.so",
    "libamd_comgr.so",
    "libcuda.so",
    "libcudart.so",
    "libnvidia-",
];

/// The runtimes whose users are GPU libraries (a library that needs libdrm only is not one).
const RUNTIMES_USED: [&str; 6] = [
    "libamdhip64.so",
    "libhsa-runtime64.so",
    "libcuda.so",
    "libcudart.so",
    runtimes::VULKAN_LOADER,
    runtimes::OPENCL_LOADER,
];

/// Why a mapped file is a GPU library, if it is one.
pub(crate) fn gpu_library(file_name: &str, file: Option<&CodeFile>) -> Option<GpuLibrary> {
    if GPU_RUNTIMES.iter().any(|r| file_name.starts_with(r)) || runtimes::unobserved_api(file_name).is_some() {
        return Some(GpuLibrary::Runtime);
    }
    let deps = crate::os::elf::dependencies(file?)?;
    if !deps.code_sections.is_empty() {
        return Some(GpuLibrary::Code);
    }
    deps.needed.iter().any(|n| RUNTIMES_USED.iter().any(|r| n.starts_with(r))).then_some(GpuLibrary::UsesRuntime)
}

/// One library file to attach probes to: opened and checked (a regular file; for a mapping, the file
/// mapped), and kept open, so that its probes go on the very file that was checked.
#[derive(Clone, Debug)]
pub(crate) struct LibCopy {
    /// The path as the traced process sees it (inside its mount namespace).
    pub(crate) path: String,
    pub(crate) file: Arc<CodeFile>,
    pub(crate) dev: u64,
    pub(crate) inode: u64,
    pub(crate) origin: Origin,
    /// The root `path` is in, when it is not tracer's own (a chroot's, a container's).
    pub(crate) root: Option<String>,
}

impl LibCopy {
    /// Which runtime this copy is, from its file name.
    pub(crate) fn runtime(&self) -> tracer_common::api::Library {
        runtime_of(&self.path)
    }

    fn new(path: String, file: CodeFile, origin: Origin) -> Self {
        let (dev, inode) = file.id();
        Self { path, file: Arc::new(file), dev, inode, origin, root: None }
    }

    /// The same copy, said to be in `root` (None: tracer's own).
    fn in_root(self, root: Option<&str>) -> Self {
        Self { root: root.map(str::to_owned), ..self }
    }

    /// A path the kernel resolves to this very file when a probe is attached (`/proc/self/fd/N` of the
    /// descriptor tracer checked), whatever became of the path since.
    pub(crate) fn attach_path(&self) -> PathBuf {
        self.file.proc_path()
    }
}

/// Keeps the first copy of each (dev, inode).
fn dedupe(copies: Vec<LibCopy>) -> Vec<LibCopy> {
    let mut seen = BTreeSet::new();
    copies.into_iter().filter(|c| seen.insert((c.dev, c.inode))).collect()
}

/// `--lib PATH`: the file must exist and be a regular file.
pub(crate) fn from_user_paths(paths: &[PathBuf]) -> Result<Vec<LibCopy>> {
    let mut copies = Vec::new();
    for p in paths {
        let shown = fs::canonicalize(p).map_or_else(|_| p.display().to_string(), |c| c.display().to_string());
        match CodeFile::user(p) {
            Ok(file) => copies.push(LibCopy::new(shown, file, Origin::User)),
            Err(e) => bail!("{e}: give the path of libamdhip64.so with --lib"),
        }
    }
    Ok(dedupe(copies))
}

/// Mapped files of a process whose name starts with `prefix`, each opened as the file mapped.
pub(crate) fn mapped_by(pid: u32, prefix: &str) -> Vec<LibCopy> {
    use crate::os::proc::Procs as _;
    let Some(maps) = crate::os::proc::LIVE.maps(pid) else { return Vec::new() };
    let copies = maps.iter().filter(|e| e.file_name().starts_with(prefix)).filter_map(|e| copy_in(pid, e)).collect();
    dedupe(copies)
}

/// A copy found in a process's maps: the file mapped, opened through the process's `map_files` (a
/// process in a container is handled like any other).
pub(crate) fn copy_in(pid: u32, e: &crate::os::proc::MapsEntry) -> Option<LibCopy> {
    let file = CodeFile::mapped(pid, e.start, e.end, e.dev, e.inode, &e.path).ok()?;
    let root = crate::os::files::other_root(pid);
    Some(LibCopy::new(e.path.clone(), file, origin_of_path(&e.path)).in_root(root.as_deref()))
}

/// A library at a path tracer found itself (what a command will load): opened as given, labelled by
/// where it lies.
pub(crate) fn at_path(path: &std::path::Path) -> Option<LibCopy> {
    let file = CodeFile::user(path).ok()?;
    let shown = path.display().to_string();
    let origin = origin_of_path(&shown);
    Some(LibCopy::new(shown, file, origin))
}

/// A library at a path in `root` (a command's own root, a `chroot`'s), found by tracer itself: named as a
/// process in that root sees it.
pub(crate) fn in_root(root: &Root, path: &std::path::Path) -> Option<LibCopy> {
    let shown = path.display().to_string();
    let file = root.open(&shown).ok()?;
    let origin = origin_of_path(&shown);
    Some(LibCopy::new(shown, file, origin).in_root(root.described()))
}

/// A runtime library a process is opening by `path` (absolute, resolved in its root; or relative to its
/// working directory). None when it is not (yet) a regular file there: the open itself may fail.
pub(crate) fn opened_by(pid: u32, path: &str) -> Option<LibCopy> {
    let root = if path.starts_with('/') { Root::of(pid).ok()? } else { Root::cwd_of(pid).ok()? };
    let file = root.open(path).ok()?;
    Some(LibCopy::new(path.to_owned(), file, origin_of_path(path)).in_root(root.described()))
}

/// The usual places, most specific first: Ollama bundles (next to an `ollama` on PATH and the standard
/// install prefixes), `LD_LIBRARY_PATH` (a command we start inherits it), /opt/rocm*, the system path.
pub(crate) fn usual_places(prefix: &str) -> Vec<LibCopy> {
    let Ok(host) = Root::host() else { return Vec::new() };
    let mut ollama: Vec<String> = Vec::new();
    if let Some(path) = std::env::var_os("PATH") {
        for d in std::env::split_paths(&path) {
            if d.join("ollama").is_file()
                && let Some(prefix_dir) = d.parent()
            {
                ollama.push(prefix_dir.join("lib/ollama").to_string_lossy().into_owned());
            }
        }
    }
    let ld: Vec<String> = std::env::var_os("LD_LIBRARY_PATH")
        .map(|ld| std::env::split_paths(&ld).map(|d| d.to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    places_in(&host, prefix, &ollama, &ld)
}

/// The usual places inside another root (a container's, a chroot's): as on the host, but nothing of
/// tracer's own environment (`PATH`, `LD_LIBRARY_PATH`) applies there.
pub(crate) fn usual_places_in(root: &Root, prefix: &str) -> Vec<LibCopy> {
    places_in(root, prefix, &[], &[])
}

/// The copies of `prefix` in `root`'s usual places, most specific first: Ollama's bundles (`rocm*` under
/// its install prefixes and `more_ollama`), the directories `ld`, /opt/rocm*/lib, the system path.
fn places_in(root: &Root, prefix: &str, more_ollama: &[String], ld: &[String]) -> Vec<LibCopy> {
    // `dir`'s entries named `rocm*`, in name order, each followed by `under`.
    let rocm_in = |dir: &str, under: &str| -> Vec<String> {
        let mut found: Vec<String> = root
            .list(dir)
            .unwrap_or_default()
            .into_iter()
            .filter(|n| n.starts_with("rocm"))
            .map(|n| format!("{dir}/{n}{under}"))
            .collect();
        found.sort();
        found
    };
    let mut dirs: Vec<String> = Vec::new();
    let ollama = ["/usr/lib/ollama", "/usr/local/lib/ollama", "/opt/ollama/lib/ollama"].map(str::to_owned);
    for bundle in ollama.iter().chain(more_ollama) {
        dirs.extend(rocm_in(bundle, ""));
        dirs.push(bundle.clone());
    }
    dirs.extend(ld.iter().cloned());
    dirs.extend(rocm_in("/opt", "/lib"));
    dirs.extend(
        [
            "/usr/local/nvidia/lib64",
            "/usr/local/cuda/lib64",
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib64",
            "/usr/lib",
            "/usr/local/lib",
            "/lib/x86_64-linux-gnu",
        ]
        .map(str::to_owned),
    );
    dedupe(dirs.iter().flat_map(|dir| in_dir(root, dir, prefix)).collect())
}

/// Library files in `dir` (as seen from `root`: the host's, or a process's) whose names start with
/// `prefix`.
///
/// Each is opened inside that root (a symbolic link is followed there, never onto the host) and named by
/// the file it reaches when that file is in the same directory (`libamdhip64.so` ->
/// `libamdhip64.so.6.1.2`).
pub(crate) fn in_dir(root: &Root, dir: &str, prefix: &str) -> Vec<LibCopy> {
    let Ok(names) = root.list(dir) else { return Vec::new() };
    let mut names: Vec<String> = names.into_iter().filter(|n| n.starts_with(prefix)).collect();
    names.sort();
    let dir = dir.trim_end_matches('/');
    let mut copies: Vec<LibCopy> = names
        .into_iter()
        .filter_map(|name| {
            let path = if dir == "." { name } else { format!("{dir}/{name}") };
            let file = root.open(&path).ok()?;
            Some(LibCopy::new(root.shown(&path), file, Origin::System).in_root(root.described()))
        })
        .collect();
    // Versioned names first (the real file of `libx.so -> libx.so.6 -> libx.so.6.1.2`), so the copy is
    // shown by the name of its file.
    copies.sort_by_key(|c| std::cmp::Reverse(c.path.len()));
    let mut copies = dedupe(copies);
    copies.sort_by(|a, b| a.path.cmp(&b.path));
    for c in &mut copies {
        c.origin = origin_of_path(&c.path);
    }
    copies
}

/// The GNU build-id of a library copy, as hex, when it has one.
pub(crate) fn build_id(copy: &LibCopy) -> Option<String> {
    crate::os::elf::build_id(&copy.file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_from_path() {
        assert_eq!(origin_of_path("/usr/lib/ollama/rocm/libamdhip64.so.6"), Origin::OllamaBundle);
        assert_eq!(origin_of_path("/opt/rocm/lib/libamdhip64.so.6"), Origin::System);
    }

    #[test]
    fn user_path_must_exist_and_be_a_file() {
        let err = from_user_paths(&[PathBuf::from("/nonexistent/libamdhip64.so")]).unwrap_err();
        assert!(err.to_string().contains("--lib"), "{err}");
        let err = from_user_paths(&[PathBuf::from("/dev/zero")]).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }

    #[test]
    fn a_directory_lists_each_file_once_by_its_real_name() {
        let dir = std::env::temp_dir().join(format!("tracer-libs-{}", std::process::id()));
        drop(fs::remove_dir_all(&dir));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("libamdhip64.so.6.1.2"), b"x").unwrap();
        std::os::unix::fs::symlink("libamdhip64.so.6.1.2", dir.join("libamdhip64.so.6")).unwrap();
        std::os::unix::fs::symlink("libamdhip64.so.6", dir.join("libamdhip64.so")).unwrap();
        // A link out of the directory to a file the test made elsewhere: opened as the host sees it only
        // because this root is the host's.
        let copies = in_dir(&Root::host().unwrap(), &dir.to_string_lossy(), "libamdhip64");
        let names: Vec<&str> = copies.iter().map(|c| c.path.rsplit('/').next().unwrap()).collect();
        assert_eq!(names, ["libamdhip64.so.6.1.2"]);
        drop(fs::remove_dir_all(&dir));
    }

    #[test]
    fn same_file_twice_is_one_copy() {
        let exe = std::env::current_exe().unwrap();
        let copies = from_user_paths(&[exe.clone(), exe]).unwrap();
        assert_eq!(copies.len(), 1);
    }
}
