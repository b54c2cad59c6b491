//! Finding the library copies to probe: where a traced process maps them, where the user says, or the
//! usual places (Ollama's bundles first, then /opt/rocm, then the system library path).
//!
//! A copy is identified by (device, inode) of the file, so the same file reached by two paths is probed
//! once, and two copies of the same version (Ollama's bundle and /opt/rocm) are probed separately.

use std::{
    collections::BTreeSet,
    fs,
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
};

use anyhow::{Result, bail};

/// The libraries tracer knows how to probe, by file-name prefix.
pub const HIP_RUNTIME: &str = "libamdhip64.so";
pub const HSA_RUNTIME: &str = "libhsa-runtime64.so";
/// The NVIDIA driver library (every CUDA launch passes through it).
pub const CUDA_DRIVER: &str = "libcuda.so";
/// The CUDA runtime library (probed on request only: `--cuda-runtime`).
pub const CUDA_RUNTIME: &str = "libcudart.so";
/// The runtimes probed by default.
pub const RUNTIMES: [&str; 3] = [HIP_RUNTIME, HSA_RUNTIME, CUDA_DRIVER];

pub use crate::trace::LibOrigin as Origin;

fn origin_of_path(path: &str) -> Origin {
    if path.contains("/lib/ollama/") { Origin::OllamaBundle } else { Origin::System }
}

/// One library file to attach probes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LibCopy {
    /// The path as the traced process sees it (inside its mount namespace).
    pub path: String,
    /// A path this process can open (`/proc/PID/root/...` for a process in another mount namespace).
    pub open_path: PathBuf,
    pub dev: u64,
    pub inode: u64,
    pub origin: Origin,
}

impl LibCopy {
    /// Which runtime this copy is, from its file name.
    pub fn runtime(&self) -> tracer_common::api::Library {
        use tracer_common::api::Library;
        let name = self.path.rsplit('/').next().unwrap_or(&self.path);
        if name.starts_with(HSA_RUNTIME) {
            Library::Hsa
        } else if name.starts_with(CUDA_DRIVER) {
            Library::Cuda
        } else if name.starts_with(CUDA_RUNTIME) {
            Library::CudaRuntime
        } else {
            Library::Hip
        }
    }

    fn stat(path: String, open_path: PathBuf, origin: Origin) -> Option<Self> {
        let meta = fs::metadata(&open_path).ok()?;
        meta.is_file().then(|| Self { path, open_path, dev: meta.dev(), inode: meta.ino(), origin })
    }
}

/// Keeps the first copy of each (dev, inode).
fn dedupe(copies: Vec<LibCopy>) -> Vec<LibCopy> {
    let mut seen = BTreeSet::new();
    copies.into_iter().filter(|c| seen.insert((c.dev, c.inode))).collect()
}

/// `--lib PATH`: the file must exist.
pub fn from_user_paths(paths: &[PathBuf]) -> Result<Vec<LibCopy>> {
    let mut copies = Vec::new();
    for p in paths {
        let canon = fs::canonicalize(p).ok();
        let Some(c) = canon.and_then(|c| {
            let s = c.to_string_lossy().into_owned();
            LibCopy::stat(s, c, Origin::User)
        }) else {
            bail!(
                "library {} does not exist or is not a file: give the path of libamdhip64.so with --lib",
                p.display()
            );
        };
        copies.push(c);
    }
    Ok(dedupe(copies))
}

/// Mapped files of a process whose name starts with `prefix`, reached through /proc/PID/root so that a
/// process in a container is handled like any other.
pub fn mapped_by(pid: u32, prefix: &str) -> Vec<LibCopy> {
    use crate::proc::Procs as _;
    let Some(maps) = crate::proc::LIVE.maps(pid) else { return Vec::new() };
    let copies = maps.iter().filter(|e| e.file_name().starts_with(prefix)).filter_map(|e| copy_in(pid, e)).collect();
    dedupe(copies)
}

/// A copy found in a process's maps, reached through /proc/PID/root.
pub fn copy_in(pid: u32, e: &crate::proc::MapsEntry) -> Option<LibCopy> {
    let open = PathBuf::from(format!("/proc/{pid}/root{}", e.path));
    LibCopy::stat(e.path.clone(), open, origin_of_path(&e.path))
}

/// The usual places, most specific first: Ollama bundles (next to an `ollama` on PATH and the standard
/// install prefixes), `LD_LIBRARY_PATH` (a command we start inherits it), /opt/rocm*, the system path.
pub fn usual_places(prefix: &str) -> Vec<LibCopy> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut ollama_roots: Vec<PathBuf> =
        ["/usr/lib/ollama", "/usr/local/lib/ollama", "/opt/ollama/lib/ollama"].iter().map(PathBuf::from).collect();
    if let Some(path) = std::env::var_os("PATH") {
        for d in std::env::split_paths(&path) {
            if d.join("ollama").is_file()
                && let Some(prefix_dir) = d.parent()
            {
                ollama_roots.push(prefix_dir.join("lib/ollama"));
            }
        }
    }
    for root in ollama_roots {
        if let Ok(entries) = fs::read_dir(&root) {
            let mut subs: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("rocm")))
                .collect();
            subs.sort();
            dirs.extend(subs);
            dirs.push(root);
        }
    }
    if let Some(ld) = std::env::var_os("LD_LIBRARY_PATH") {
        dirs.extend(std::env::split_paths(&ld));
    }
    let mut rocm: Vec<PathBuf> = fs::read_dir("/opt")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("rocm")))
        .map(|p| p.join("lib"))
        .collect();
    rocm.sort();
    dirs.extend(rocm);
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
        .iter()
        .map(PathBuf::from),
    );
    let mut copies = Vec::new();
    for dir in dirs {
        copies.extend(in_dir(&dir, prefix));
    }
    dedupe(copies)
}

/// Library files in `dir` whose names start with `prefix` (the real files behind the symlinks).
pub fn in_dir(dir: &Path, prefix: &str) -> Vec<LibCopy> {
    let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
    let mut names: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(prefix)))
        .collect();
    names.sort();
    names
        .into_iter()
        .filter_map(|p| {
            let real = fs::canonicalize(&p).ok()?;
            let s = real.to_string_lossy().into_owned();
            LibCopy::stat(s.clone(), real, origin_of_path(&s))
        })
        .collect()
}

/// The GNU build-id of an ELF file, as hex, when it has one.
pub fn build_id(path: &Path) -> Option<String> {
    use object::{Object as _, read::elf::ElfFile64};
    let data = fs::read(path).ok()?;
    let elf = ElfFile64::<object::Endianness>::parse(&*data).ok()?;
    let id = elf.build_id().ok()??;
    use std::fmt::Write as _;
    id.iter().try_fold(String::new(), |mut s, b| write!(s, "{b:02x}").map(|()| s)).ok()
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
    fn user_path_must_exist() {
        let err = from_user_paths(&[PathBuf::from("/nonexistent/libamdhip64.so")]).unwrap_err();
        assert!(err.to_string().contains("--lib"), "{err}");
    }

    #[test]
    fn same_file_twice_is_one_copy() {
        let exe = std::env::current_exe().unwrap();
        let copies = from_user_paths(&[exe.clone(), exe]).unwrap();
        assert_eq!(copies.len(), 1);
    }
}
