//! What the probing side found, as values for attribution to say ([`Found`]): the way
//! [`crate::record::attribute::Effects`] travels the other way. The library watch places probes and reads
//! maps, the kernel's maps count calls; what the trace says of a process, and once only, is attribution's
//! (its `Said`), so attribution is the write side's one producer of lines.

use crate::trace;

/// What the trace has said of a process's mappings, as the watch may ask it (attribution's `Said` answers): a
/// look skips a mapping said already, reading no file for it.
pub(crate) trait MappingsSaid {
    /// Whether the mapping of `file` (device, inode) needs no record now: written already, and not as a
    /// runtime copy not probed that is `probed` now (written again, with its library).
    fn said(&self, file: (u64, u64), probed: bool) -> bool;
}

/// One thing found for the trace.
#[derive(Debug)]
pub(crate) enum Found {
    /// A runtime copy probed: its library record, then its probes' records.
    Probed(trace::Library, Vec<trace::Probe>),
    /// A library of interest a process maps, as a look at its maps or an open found it: said once per
    /// process and file, and again once a runtime copy said not probed has been probed.
    Mapped(trace::Mapping),
    /// A probed copy's initializer ran in the process after its probes were placed: its mapping, said
    /// before as probed late, is said again at the next look (the later record supersedes the earlier).
    Unsaid {
        pid: u32,
        /// The copy, as (device, inode).
        file: (u64, u64),
    },
    /// A library built on a runtime whose entry points are counted from now on.
    Counting(trace::EntryLibrary),
    /// The calls of a process's last step, by library.
    Steps(trace::StepCalls),
    /// A process's counted calls of a library's entry point.
    Calls(trace::EntryCalls),
    /// Calls of one API function the kernel counted instead of writing them one by one.
    Tally(trace::Tally),
    /// The command tracer started ended.
    Exit(trace::Exit),
}
