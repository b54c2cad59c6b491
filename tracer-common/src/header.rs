//! The header every record begins with, and the kinds of record.

/// What kind of record follows the header.
#[repr(u16)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    /// A completed API call: entry arguments, return value, duration ([`CallRecord`](crate::CallRecord)).
    Call = 1,
    /// A name bound to a handle: kernel registration or module function lookup ([`NameRecord`](crate::NameRecord)).
    Name = 2,
    /// A process event: fork, exec, exit ([`ProcRecord`](crate::ProcRecord)).
    Proc = 3,
    /// An ioctl on a GPU driver: KFD ('K') or DRM amdgpu ('d', nr >= 0x40) ([`IoctlRecord`](crate::IoctlRecord)).
    Ioctl = 4,
    /// An HSA queue created ([`QueueRecord`](crate::QueueRecord)).
    Queue = 5,
    /// An AQL packet read at a doorbell ([`DispatchRecord`](crate::DispatchRecord)).
    Dispatch = 6,
    /// A launch's kernel parameters, read at its entry ([`ParamsRecord`](crate::ParamsRecord)).
    Params = 7,
    /// A traced process opening a GPU runtime library ([`OpenRecord`](crate::OpenRecord)).
    Open = 8,
    /// A model's step began: the batch `llama_decode` was given ([`BatchRecord`](crate::BatchRecord)).
    Batch = 9,
    /// A job of the kernel's GPU scheduler at one stage ([`JobRecord`](crate::JobRecord)).
    Job = 10,
}

impl RecordKind {
    pub const fn from_u16(v: u16) -> Option<Self> {
        match v {
            1 => Some(Self::Call),
            2 => Some(Self::Name),
            3 => Some(Self::Proc),
            4 => Some(Self::Ioctl),
            5 => Some(Self::Queue),
            6 => Some(Self::Dispatch),
            7 => Some(Self::Params),
            8 => Some(Self::Open),
            9 => Some(Self::Batch),
            10 => Some(Self::Job),
            _ => None,
        }
    }
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
