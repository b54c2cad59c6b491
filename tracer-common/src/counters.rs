//! What the kernel side counts instead of writing: losses and errors per CPU, and calls tallied per
//! thread.

/// Counters the eBPF side keeps per CPU (a `PerCpuArray<u64>` indexed by these), read by user space at
/// the end of a recording and written into the trace footer. Nothing is dropped without a count here.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// A call record could not be reserved in the ring buffer (ring full).
    DropCall = 0,
    /// A name record could not be reserved.
    DropName = 1,
    /// A process record could not be reserved.
    DropProc = 2,
    /// A call's entry could not be stashed (stash map full): that call produces no record.
    StashFull = 3,
    /// A return probe fired without a stashed entry (the tracer attached while the call was running).
    ReturnWithoutEntry = 4,
    /// A process could not be added to the PID filter (map full): its calls are not recorded.
    FilterFull = 5,
    /// An ioctl record could not be reserved.
    DropIoctl = 6,
    /// A queue or dispatch record could not be reserved.
    DropDispatch = 7,
    /// Packets between the last index seen and the doorbell value beyond [`MAX_PACKETS_PER_DOORBELL`](crate::MAX_PACKETS_PER_DOORBELL).
    PacketsCut = 8,
    /// Packets whose ring slot could not be read.
    PacketFault = 9,
    /// A kernel-parameters record could not be reserved.
    DropParams = 10,
    /// A call to tally in the kernel found no room for its thread in the tally map: it was neither tallied
    /// nor written.
    TallyLost = 11,
    /// An open record could not be reserved (a runtime copy opened then, if it was new, is found by the
    /// next look at the process's maps).
    DropOpen = 12,
    /// A call into a library's entry point found no room for its (process, entry point) in the entry-call
    /// map: it was not counted.
    EntryCallLost = 13,
    /// A batch record (`llama_decode`) could not be reserved: that step's composition is unknown.
    DropBatch = 14,
    /// A GPU scheduler job record could not be reserved.
    DropJob = 15,
}

/// Number of [`Counter`] slots.
pub const COUNTERS: u32 = 16;

impl Counter {
    pub const ALL: [Self; COUNTERS as usize] = [
        Self::DropCall,
        Self::DropName,
        Self::DropProc,
        Self::StashFull,
        Self::ReturnWithoutEntry,
        Self::FilterFull,
        Self::DropIoctl,
        Self::DropDispatch,
        Self::PacketsCut,
        Self::PacketFault,
        Self::DropParams,
        Self::TallyLost,
        Self::DropOpen,
        Self::EntryCallLost,
        Self::DropBatch,
        Self::DropJob,
    ];

    /// Where the trace footer reports this counter: `Drop(kind)` in `drops`, per CPU, under the record
    /// kind that was lost; `Count(name)` in `counters`, summed.
    pub const fn footer(self) -> Footer {
        match self {
            Self::DropCall => Footer::Drop("call"),
            Self::DropName => Footer::Drop("name"),
            Self::DropProc => Footer::Drop("proc"),
            Self::DropIoctl => Footer::Drop("ioctl"),
            Self::DropDispatch => Footer::Drop("dispatch"),
            Self::DropParams => Footer::Drop("params"),
            Self::StashFull => Footer::Count("stash_full"),
            Self::ReturnWithoutEntry => Footer::Count("return_without_entry"),
            Self::FilterFull => Footer::Count("filter_full"),
            Self::PacketsCut => Footer::Count("packets_cut"),
            Self::PacketFault => Footer::Count("packet_fault"),
            Self::TallyLost => Footer::Count("tally_lost"),
            Self::DropOpen => Footer::Drop("open"),
            Self::EntryCallLost => Footer::Count("entry_calls_lost"),
            Self::DropBatch => Footer::Drop("batch"),
            Self::DropJob => Footer::Drop("job"),
        }
    }
}

/// How a [`Counter`] appears in the trace footer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Footer {
    Drop(&'static str),
    Count(&'static str),
}

/// Functions that can be tallied in the kernel: the rows of the API table with a tally slot
/// ([`crate::api::ApiFunc::tally_slot`]).
pub const TALLY_SLOTS: usize = 8;

/// One thread's calls counted in the kernel instead of written one by one, and its sync gate.
///
/// The value of the eBPF map keyed by `pid_tgid`: one entry serves both, so a tallied call costs one
/// lookup.
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadTally {
    /// 1 when the thread copied toward the host since its last written synchronization.
    pub host_copied: u32,
    /// 1 once the thread has exited or its process has left the filter: the entry keeps its counts, but no
    /// longer vouches that the thread is traced (a recycled thread id checks the filter again).
    pub ended: u32,
    /// The ring's producer position just past the last copy toward the device this thread wrote: a copy
    /// that finds the ring there (nothing written since) is tallied.
    pub ring_at_copy: u64,
    /// Calls per tally slot.
    pub calls: [u64; TALLY_SLOTS],
    /// The sizes the calls passed (copies), summed, per tally slot.
    pub bytes: [u64; TALLY_SLOTS],
}

/// The key of the entry-call map: one process, one exported function of a GPU library.
///
/// The value is the number of calls, counted in the kernel. `point` is the attach cookie user space gave
/// the function's probe: an index into its table of (library, function).
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EntryKey {
    pub tgid: u32,
    pub point: u32,
}
