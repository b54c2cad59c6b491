//! tracer's user space: three wings around the trace format, over the leaves.
//!
//! - `trace`: the format. The events (one type each from decode to the file), the schema, the writer, the
//!   reader, a rotated recording read as one. Both wings meet here.
//! - `record`: the write wing, probes → ring → decode → attribute → writer, and the session that runs it.
//! - `read`: the read wing: phases, report, export, live metrics.
//! - `os`: the leaves: `/proc`, other processes' files, ELF, demangling, output files, clocks, ioctl numbers.
//!
//! Imports go one way: `record` and `read` use `trace` and `os`, `trace` uses `os`, `os` uses nothing of
//! ours (`cargo xtask test` checks it). [`cli`] defines the command line; `commands` ([`run`]) and `inspect`
//! are the commands' fronts. Only those are public, and [`testing`] for the tests, fuzz targets and
//! benchmarks.

/// The hash map of the per-event look-ups (a process by PID, a kernel by handle, a launch site by return
/// address, the drain's image per PID): foldhash, hashbrown's own default, hashes an integer key in a few
/// instructions where std's `SipHash` took 5 % of a recording's CPU at 60 000 launches/s; its seed is random
/// per map, so keys a traced process chooses (handles, addresses) cannot be aimed at one bucket in advance.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

pub mod cli;
mod commands;
mod inspect;
mod os;
mod read;
mod record;
mod trace;

pub use commands::run;

/// What the integration tests, the fuzz targets and the benchmarks reach inside tracer, in one place: not
/// an API (hidden from the docs; it changes with them). Each type a re-exported item hands out is
/// re-exported beside it, so that every reachable type can be named.
#[doc(hidden)]
pub mod testing {
    /// The trace format: every record type, the reader and the writer.
    pub mod trace {
        pub use crate::trace::{
            ApiFunc, Call, Cause, Checkpoint, CodeDir, Config, Dispatch, EntryCalls, EntryLibrary, ExecOutcome,
            ExecRoute, Exit, FORMAT, Filter, Footer, GpuLibrary, GraphExec, Header, Input, Ioctl, Job, JobStage,
            Kernel, Launch, LaunchSites, LibOrigin, Library, Line, MAX_UNNAMED_PER_PROCESS, Mapping, Options, Part,
            Probe, ProbeKind, Process, ProgramStat, Queue, ReadStatus, Role, Rotation, SCHEMA, SeqRun, Source,
            StepBatch, StepCalls, Stop, Tally, Tap, Writer, left_unprobed, read_file, read_from,
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
    /// ELF reading, as the fuzz targets drive it.
    pub mod elf {
        pub use crate::os::elf::{
            Dependencies, build_id, dependencies, dynamic_symbol, function_offsets, parse, section_range, segments,
            symbols_by_address,
        };
    }
    /// Other processes' files and /proc.
    pub mod os {
        pub use crate::os::{
            files::{Bounded, CodeFile, FileError},
            proc::{MapsEntry, Stat, parse_cmdline, parse_maps, parse_stat},
        };
    }
    /// Ring records decoded.
    pub mod decode {
        pub use crate::record::intake::decode::{CodeTail, DecodeError, Event, Name, Opened, Params, Proc, decode};
    }
    /// Kernel naming from code objects and process memory.
    pub mod names {
        pub use crate::record::names::{
            bundle::{self, Bundle, Bytes, CodeKernel, Entry, FatBinary, NameIndex, Region, open_all, open_bytes},
            graph_exec::{self, Copies, MAX_NODES, Node, Unread},
            memory::{Image, Memory},
            registration::{self, Registrations},
            rocr::{self, List, LoadedObject, Uri},
            spirv::{self, Shader, ShaderIndex, entry_points, preamble_end},
        };
    }
    pub use crate::{
        read::{
            metrics::{Metrics, Tap},
            phase::{Composition, Phase, PhaseReport, Sequences},
            report::{ProcessReport, Report, TextOptions, TraceInfo},
        },
        record::{attribute::Attributor, probes::ollama::uid_of},
    };
}
