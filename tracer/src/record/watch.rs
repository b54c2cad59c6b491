//! What the recording knows of the libraries its processes map: runtime copies to probe as they appear
//! (a dlopen after the start, a copy inside a container), and the GPU libraries each process maps.
#![expect(clippy::print_stderr, reason = "a recording tells its user on stderr that it started, warned or stopped")]

use anyhow::Result;

use crate::{
    attach::{self, ProbeMode},
    libs::{self, LibCopy},
    proc::{LIVE, Procs as _},
    trace::{self, Record},
};

/// Libraries of interest in a process's maps: the runtimes tracer probes and the GPU libraries a runner
/// may load without calling them (the "loaded is not dispatched" table).
const LIBRARIES_OF_INTEREST: [&str; 20] = [
    "libcuda.so",
    "libcudart",
    "libcublas",
    "libggml-cuda",
    "libamdhip64",
    "libhsa-runtime64",
    "libhsakmt",
    "libamd_comgr",
    "librocblas",
    "libhipblas",
    "libhipblaslt",
    "librocsolver",
    "librocsparse",
    "libMIOpen",
    "libggml",
    "libllama",
    "librocprofiler",
    "libroctx64",
    "libdrm_amdgpu",
    "librocroller",
];

/// What the recording knows of the libraries its processes map.
#[derive(Default)]
pub(super) struct LibraryWatch {
    /// File-name prefixes of the runtimes to probe.
    runtimes: Vec<&'static str>,
    /// Probed copies: (dev, inode) -> library id.
    pub(super) probed: std::collections::HashMap<(u64, u64), u32>,
    /// Mappings already written: (pid, dev, inode).
    written: std::collections::HashSet<(u32, u64, u64)>,
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
            build_id: libs::build_id(&copy.open_path),
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
            if LIBRARIES_OF_INTEREST.iter().any(|p| file.starts_with(p)) && self.written.insert((pid, e.dev, e.inode)) {
                out.push(Record::Mapping(trace::Mapping {
                    ts,
                    pid,
                    path: e.path.clone(),
                    dev: e.dev,
                    inode: e.inode,
                    lib: self.probed.get(&(e.dev, e.inode)).copied(),
                }));
            }
        }
        out
    }

    pub(super) fn forget(&mut self, pid: u32) {
        self.written.retain(|(p, _, _)| *p != pid);
    }
}
