//! What the integration tests, the fuzz targets and the benchmarks reach inside tracer. The tests read
//! traces by type, so the trace format's types are re-exported whole (each type a re-exported item hands
//! out is re-exported beside it, so that every reachable type can be named). The code readers, `/proc`
//! parsers and the decoder stay private: a fuzz target calls its entry in [`fuzz`], the pipeline benchmark
//! drives [`bench::Pipeline`], and a test asks for plain values ([`code_objects`], [`registrations`]).

pub mod bench;
pub mod fuzz;

use std::{collections::BTreeMap, path::Path};

/// The trace format: every record type, the reader and the writer.
pub mod trace {
    pub use crate::trace::{
        ApiFunc, Call, Cause, Checkpoint, CodeDir, Config, Dispatch, EntryCalls, EntryLibrary, ExecOutcome, ExecRoute,
        Exit, FORMAT, Filter, Footer, GpuLibrary, GraphExec, GraphInput, Header, InputKind, Ioctl, Job, JobStage,
        Kernel, Launch, LaunchSites, LibOrigin, Library, Line, MAX_UNNAMED_PER_PROCESS, Mapping, Options, Part, Probe,
        ProbeKind, Process, ProgramStat, Queue, ReadStatus, Repeat, Role, SCHEMA, SeqRun, Source, StepBatch, StepCalls,
        Stop, Tally, Writer, left_unprobed, read_file, read_from,
    };
    /// The events' own types.
    pub mod event {
        pub use crate::trace::event::{ApiFunc, GridUnit, MemcpyKind, Origin, PacketType};
    }
    /// Kernel families.
    pub mod classify {
        pub use crate::trace::classify::{Class, classify};
    }
}

pub use crate::{
    read::{
        phase::{Phase, PhaseReport},
        report::{ProcessReport, Report, TraceInfo},
    },
    record::probes::ollama::uid_of,
};

/// One gfx code object of a `.hip_fatbin` section read as bytes (`at`: the section's file offset): its
/// target, file offset and size, and its kernels' names.
pub type CodeObject = (Option<String>, Option<u64>, u64, Vec<String>);

/// The code objects of a `.hip_fatbin` section's bytes, as tracer opens them for naming.
pub fn code_objects(fatbin: &[u8], at: u64) -> Vec<CodeObject> {
    crate::record::names::bundle::open_bytes(fatbin, at, None)
        .into_iter()
        .flat_map(|b| b.entries)
        .map(|e| (e.target, e.offset, e.size, e.kernels.into_iter().map(|k| k.name).collect()))
        .collect()
}

/// What a library's registration calls name, decoded from its code (a stripped library's only names).
#[derive(Debug)]
pub struct Registered {
    /// Launch handle (virtual address in the file) -> mangled kernel name.
    pub by_handle: BTreeMap<u64, String>,
    /// Calls to a registration function found in the code.
    pub calls: usize,
    /// The calls whose handle or name could not be read.
    pub unresolved: Vec<u64>,
}

/// The registration calls of the library at `path`; `None` where it cannot be read or imports no
/// registration function.
pub fn registrations(path: &Path) -> Option<Registered> {
    let file = crate::os::files::CodeFile::user(path).ok()?;
    let r = crate::record::names::registration::decode(&file)?;
    Some(Registered { by_handle: r.by_handle.into_iter().collect(), calls: r.calls, unresolved: r.unresolved })
}
