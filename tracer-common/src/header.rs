//! The header every record begins with, and the kinds of record.

/// Declares [`RecordKind`] once: each kind's number, the record type it heads, and the name its losses
/// are counted under. Each record type gets its [`Record`] impl from its row.
macro_rules! record_kinds {
    ($($(#[$doc:meta])* $kind:ident = $number:literal, $ty:ident, drops as $drops:literal;)*) => {
        crate::wire::wire_enum! {
            /// What kind of record follows the header.
            pub enum RecordKind {
                $($(#[$doc])* $kind = $number,)*
            }
        }

        impl RecordKind {
            /// The name the kind's records lost are counted under in the footer's `drops` (a queue's
            /// creation counts with the dispatches read from it).
            pub const fn drop_name(self) -> &'static str {
                match self {
                    $(Self::$kind => $drops,)*
                }
            }
        }

        $(impl Record for crate::$ty {
            const KIND: RecordKind = RecordKind::$kind;
        })*
    };
}

/// A record that crosses the ring.
///
/// A `#[repr(C)]` struct that begins with a [`RecordHeader`] of its [`KIND`](Self::KIND). The eBPF side
/// reserves records by this type and counts a full ring under its kind.
pub trait Record: Sized + 'static {
    const KIND: RecordKind;
}

record_kinds! {
    /// A completed API call: entry arguments, return value, duration ([`CallRecord`](crate::CallRecord)).
    Call = 1, CallRecord, drops as "call";
    /// A name bound to a handle: kernel registration or module function lookup ([`NameRecord`](crate::NameRecord)).
    Name = 2, NameRecord, drops as "name";
    /// A process event: fork, exec, exit ([`ProcRecord`](crate::ProcRecord)).
    Proc = 3, ProcRecord, drops as "proc";
    /// An ioctl on a GPU driver: KFD ('K') or DRM amdgpu ('d', nr >= 0x40) ([`IoctlRecord`](crate::IoctlRecord)).
    Ioctl = 4, IoctlRecord, drops as "ioctl";
    /// An HSA queue created ([`QueueRecord`](crate::QueueRecord)).
    Queue = 5, QueueRecord, drops as "dispatch";
    /// An AQL packet read at a doorbell ([`DispatchRecord`](crate::DispatchRecord)).
    Dispatch = 6, DispatchRecord, drops as "dispatch";
    /// A launch's kernel parameters, read at its entry ([`ParamsRecord`](crate::ParamsRecord)).
    Params = 7, ParamsRecord, drops as "params";
    /// A traced process opening a GPU runtime library ([`OpenRecord`](crate::OpenRecord)).
    Open = 8, OpenRecord, drops as "open";
    /// A model's step began: the batch `llama_decode` was given ([`BatchRecord`](crate::BatchRecord)).
    Batch = 9, BatchRecord, drops as "batch";
    /// A job of the kernel's GPU scheduler at one stage ([`JobRecord`](crate::JobRecord)).
    Job = 10, JobRecord, drops as "job";
    /// The library calls of a process's last pass, cut at its next pass where it has no batches
    /// ([`StepCutRecord`](crate::StepCutRecord)).
    StepCut = 11, StepCutRecord, drops as "step_cut";
    /// A pass's graph input copied up: its token positions or output rows ([`InputRecord`](crate::InputRecord)).
    Input = 12, InputRecord, drops as "input";
    /// Launches that each repeat the one a period before them on their thread ([`RepeatRecord`](crate::RepeatRecord)).
    Repeat = 13, RepeatRecord, drops as "repeat";
}

impl RecordKind {
    /// One more than the largest kind number: the size of a table indexed by kind (0: a kind not known).
    pub const LIMIT: usize = {
        let (mut max, mut i) = (0, 0);
        while i < Self::ALL.len() {
            if Self::ALL[i] as usize > max {
                max = Self::ALL[i] as usize;
            }
            i += 1;
        }
        max + 1
    };
}

/// The first 24 bytes of every record.
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordHeader {
    /// [`RecordKind`] as a number.
    pub kind: u16,
    /// [`ApiFunc`](crate::ApiFunc) for call and name records, [`ProcEvent`](crate::ProcEvent) for process records.
    pub func: u16,
    /// The library copy the probe was attached to (index into the tracer's library table); 0 for
    /// records that come from no library (process events).
    pub lib: u32,
    /// `bpf_get_current_pid_tgid()`: tgid in the upper 32 bits, thread id in the lower.
    pub pid_tgid: u64,
    /// `CLOCK_MONOTONIC` nanoseconds (`bpf_ktime_get_ns`) at the call's entry or the event.
    pub ts_ns: u64,
}

impl RecordHeader {
    /// The header of a record written by a probe: its function and library from the attach cookie.
    pub const fn of_probe(kind: RecordKind, cookie: u64, pid_tgid: u64, ts_ns: u64) -> Self {
        Self { kind: kind as u16, func: crate::cookie::func(cookie), lib: crate::cookie::lib(cookie), pid_tgid, ts_ns }
    }

    pub const fn pid(&self) -> u32 {
        (self.pid_tgid >> 32) as u32
    }
    pub const fn tid(&self) -> u32 {
        self.pid_tgid as u32
    }
}
