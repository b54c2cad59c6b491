//! Finding the library copies to probe: where a traced process maps them, where the user says, or the
//! usual places (Ollama's bundles first, then /opt/rocm, then the system library path).
//!
//! A copy is identified by (device, inode) of the file, so the same file reached by two paths is probed
//! once, and two copies of the same version (Ollama's bundle and /opt/rocm) are probed separately.

use std::{
    collections::BTreeSet,
    fs,
    os::unix::fs::MetadataExt,
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

/// Where a copy came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Origin {
    /// Ollama's own ROCm bundle (`.../lib/ollama/...`).
    OllamaBundle,
    /// A system install (/opt/rocm, the distribution's library path).
    System,
    /// Named with --lib.
    User,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::OllamaBundle => "ollama-bundle",
            Origin::System => "system",
            Origin::User => "user",
        }
    }

    fn of_path(path: &str) -> Self {
        if path.contains("/lib/ollama/") { Origin::OllamaBundle } else { Origin::System }
    }
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
        meta.is_file().then(|| LibCopy { path, open_path, dev: meta.dev(), inode: meta.ino(), origin })
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
    let Ok(maps) = fs::read_to_string(format!("/proc/{pid}/maps")) else { return Vec::new() };
    let copies = parse_maps(&maps)
        .iter()
        .filter(|e| e.path.rsplit('/').next().unwrap_or(e.path).starts_with(prefix))
        .filter_map(|e| copy_in(pid, e))
        .collect();
    dedupe(copies)
}

/// One file mapping from /proc/PID/maps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapsEntry<'a> {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    /// The file's device as `st_dev` encodes it, and its inode: no stat needed.
    pub dev: u64,
    pub inode: u64,
    pub path: &'a str,
}

/// File mappings of a /proc/PID/maps text (anonymous and deleted mappings left out).
pub fn parse_maps(maps: &str) -> Vec<MapsEntry<'_>> {
    maps.lines()
        .filter_map(|l| {
            let mut it = l.splitn(6, ' ');
            let (range, _perms, offset, dev, inode) = (it.next()?, it.next()?, it.next()?, it.next()?, it.next()?);
            let path = it.next()?.trim_start();
            if !path.starts_with('/') || path.ends_with(" (deleted)") {
                return None;
            }
            let (s, e) = range.split_once('-')?;
            let (major, minor) = dev.split_once(':')?;
            let (major, minor) = (u64::from_str_radix(major, 16).ok()?, u64::from_str_radix(minor, 16).ok()?);
            Some(MapsEntry {
                start: u64::from_str_radix(s, 16).ok()?,
                end: u64::from_str_radix(e, 16).ok()?,
                offset: u64::from_str_radix(offset, 16).ok()?,
                // glibc's makedev.
                dev: (major & 0xfff) << 8 | (major & !0xfff) << 32 | (minor & 0xff) | (minor & !0xff) << 12,
                inode: inode.parse().ok()?,
                path,
            })
        })
        .collect()
}

/// A copy found in a process's maps, reached through /proc/PID/root.
pub fn copy_in(pid: u32, e: &MapsEntry<'_>) -> Option<LibCopy> {
    let open = PathBuf::from(format!("/proc/{pid}/root{}", e.path));
    LibCopy::stat(e.path.to_owned(), open, Origin::of_path(e.path))
}

/// The usual places, most specific first: Ollama bundles (next to an `ollama` on PATH and the standard
/// install prefixes), LD_LIBRARY_PATH (a command we start inherits it), /opt/rocm*, the system path.
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
            LibCopy::stat(s.clone(), real, Origin::of_path(&s))
        })
        .collect()
}

/// The GNU build-id of an ELF file, as hex, when it has one.
pub fn build_id(path: &Path) -> Option<String> {
    use object::{Object, read::elf::ElfFile64};
    let data = fs::read(path).ok()?;
    let elf = ElfFile64::<object::Endianness>::parse(&*data).ok()?;
    let id = elf.build_id().ok()??;
    Some(id.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_paths_are_parsed() {
        let maps = "\
55d0c0000000-55d0c0001000 r--p 00000000 08:01 123 /usr/bin/prog
7f0000000000-7f0000100000 r-xp 00010000 08:01 456 /home/u/lib/ollama/rocm/libamdhip64.so.6.1
7f0000200000-7f0000300000 rw-p 00000000 00:00 0
7f0000300000-7f0000400000 r--p 00000000 00:00 0 [heap]
7f0000400000-7f0000500000 r--p 00000000 08:01 789 /tmp/with space/libx.so
7f0000500000-7f0000600000 r--p 00000000 08:01 790 /tmp/gone.so (deleted)
";
        let paths: Vec<&str> = parse_maps(maps).iter().map(|e| e.path).collect::<BTreeSet<_>>().into_iter().collect();
        assert_eq!(paths, ["/home/u/lib/ollama/rocm/libamdhip64.so.6.1", "/tmp/with space/libx.so", "/usr/bin/prog"]);
    }

    #[test]
    fn maps_devices_match_stat() {
        use std::os::unix::fs::MetadataExt;
        let maps = fs::read_to_string("/proc/self/maps").unwrap();
        let exe = fs::canonicalize("/proc/self/exe").unwrap();
        let meta = fs::metadata(&exe).unwrap();
        let entries = parse_maps(&maps);
        let e = entries.iter().find(|e| e.path == exe.to_str().unwrap()).expect("own executable mapped");
        assert_eq!((e.dev, e.inode), (meta.dev(), meta.ino()));
        assert!(e.end > e.start);
    }

    #[test]
    fn origin_from_path() {
        assert_eq!(Origin::of_path("/usr/lib/ollama/rocm/libamdhip64.so.6"), Origin::OllamaBundle);
        assert_eq!(Origin::of_path("/opt/rocm/lib/libamdhip64.so.6"), Origin::System);
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
