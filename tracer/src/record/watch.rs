//! What the recording knows of the libraries its processes map: runtime copies to probe as they appear
//! (a dlopen after the start, a copy inside a container), and the GPU libraries each process maps.
#![expect(clippy::print_stderr, reason = "a recording tells its user on stderr that it started, warned or stopped")]

use anyhow::Result;

use crate::{
    attach::{self, ProbeMode},
    files::CodeFile,
    libs::{self, LibCopy},
    proc::{LIVE, Procs as _},
    trace::{self, GpuLibrary, Record},
};

/// GPU runtimes and the driver libraries under them, by file-name prefix: what a GPU library is built
/// on. A mapped file is a GPU library when it is one of these, holds GPU code (a fat binary), or needs
/// one of the runtimes (`DT_NEEDED`): rocSPARSE, hipBLASLt, cuDNN, ggml's backends, `PyTorch`'s CUDA
/// libraries are found by what they are, not by a list of their names.
const GPU_RUNTIMES: [&str; 8] = [
    "libamdhip64.so",
    "libhsa-runtime64.so",
    "libhsakmt.so",
    "libdrm_amdgpu.so",
    "libamd_comgr.so",
    "libcuda.so",
    "libcudart.so",
    "libnvidia-",
];

/// The runtimes whose users are GPU libraries (a library that needs libdrm only is not one).
const RUNTIMES_USED: [&str; 4] = ["libamdhip64.so", "libhsa-runtime64.so", "libcuda.so", "libcudart.so"];

/// Why a mapped file is a GPU library, if it is one.
fn gpu_library(file_name: &str, file: Option<&CodeFile>) -> Option<GpuLibrary> {
    if GPU_RUNTIMES.iter().any(|r| file_name.starts_with(r)) {
        return Some(GpuLibrary::Runtime);
    }
    let deps = crate::elf::dependencies(file?)?;
    if !deps.code_sections.is_empty() {
        return Some(GpuLibrary::Code);
    }
    deps.needed.iter().any(|n| RUNTIMES_USED.iter().any(|r| n.starts_with(r))).then_some(GpuLibrary::UsesRuntime)
}

/// What the recording knows of the libraries its processes map.
#[derive(Default)]
pub(super) struct LibraryWatch {
    /// File-name prefixes of the runtimes to probe.
    runtimes: Vec<&'static str>,
    /// Probed copies: (dev, inode) -> library id.
    pub(super) probed: std::collections::HashMap<(u64, u64), u32>,
    /// Mappings already written: (pid, dev, inode).
    written: std::collections::HashSet<(u32, u64, u64)>,
    /// Whether each file (dev, inode) seen mapped is a GPU library, and why: read once per file.
    gpu: std::collections::HashMap<(u64, u64), Option<GpuLibrary>>,
    /// Mapped files that could not be opened to tell, by cause (footer counters).
    pub(super) unreadable: std::collections::BTreeMap<&'static str, u64>,
}

impl LibraryWatch {
    pub(super) fn new(runtimes: Vec<&'static str>) -> Self {
        Self { runtimes, ..Default::default() }
    }

    /// Attaches to `copy` unless it is probed already; returns the records to write.
    pub(super) fn attach(&mut self, ebpf: &mut aya::Ebpf, copy: &LibCopy, mode: ProbeMode) -> Result<Vec<Record>> {
        if self.probed.contains_key(&(copy.dev, copy.inode)) {
            return Ok(Vec::new());
        }
        let id = self.probed.len() as u32 + 1;
        let probes = attach::attach_runtime(ebpf, id, copy, mode)?;
        self.probed.insert((copy.dev, copy.inode), id);
        let mut out = vec![Record::Library(trace::Library {
            id,
            path: copy.path.clone(),
            dev: copy.dev,
            inode: copy.inode,
            build_id: libs::build_id(copy),
            origin: copy.origin,
        })];
        out.extend(probes.into_iter().map(Record::Probe));
        Ok(out)
    }

    /// Looks at a traced process's maps (one read): probes a runtime copy it maps that is not probed yet
    /// (a dlopen after the start, a copy inside a container), and records the libraries of interest it
    /// maps. Known files cost no stat: maps give their device and inode.
    pub(super) fn scan(&mut self, ebpf: &mut aya::Ebpf, pid: u32, ts: u64, mode: ProbeMode) -> Vec<Record> {
        let mut out = Vec::new();
        let Some(entries) = LIVE.maps(pid) else { return out };
        for e in &entries {
            let file = e.file_name();
            if self.runtimes.iter().any(|r| file.starts_with(r)) && !self.probed.contains_key(&(e.dev, e.inode)) {
                match libs::copy_in(pid, e).map(|copy| self.attach(ebpf, &copy, mode).map_err(|err| (copy, err))) {
                    Some(Ok(recs)) => out.extend(recs),
                    Some(Err((copy, err))) => {
                        eprintln!("tracer: warning: cannot probe {} mapped by {pid}: {err:#}", copy.path)
                    }
                    None => {}
                }
            }
            if self.written.contains(&(pid, e.dev, e.inode)) {
                continue;
            }
            let gpu = if let Some(known) = self.gpu.get(&(e.dev, e.inode)) {
                *known
            } else {
                let opened = CodeFile::mapped(pid, e.start, e.end, e.dev, e.inode, &e.path);
                if let Err(err) = &opened {
                    *self.unreadable.entry(err.cause()).or_default() += 1;
                }
                let gpu = gpu_library(file, opened.as_ref().ok());
                self.gpu.insert((e.dev, e.inode), gpu);
                gpu
            };
            if let Some(gpu) = gpu {
                self.written.insert((pid, e.dev, e.inode));
                out.push(Record::Mapping(trace::Mapping {
                    ts,
                    pid,
                    path: e.path.clone(),
                    dev: e.dev,
                    inode: e.inode,
                    lib: self.probed.get(&(e.dev, e.inode)).copied(),
                    gpu: Some(gpu),
                }));
            }
        }
        out
    }

    pub(super) fn forget(&mut self, pid: u32) {
        self.written.retain(|(p, _, _)| *p != pid);
    }
}
