//! Every record that crosses the ring buffer, defined once and shared by both sides.
//!
//! Rules kept here: `#[repr(C)]`, no implicit padding (every struct is a multiple of 8 bytes with fields
//! laid out largest-first or explicitly padded), stable numeric kinds that never change meaning once a
//! trace holds them. The eBPF side fills these records; user space decodes them in one place
//! (`tracer::decode`).
#![no_std]

pub mod api;

pub use api::ApiFunc;

/// Longest kernel name kept in one [`NameRecord`]; longer names are cut and flagged
/// ([`NAME_TRUNCATED`]), never silently.
pub const NAME_MAX: usize = 480;

/// Argument slots captured at a call's entry: the six integer argument registers of the x86-64 `SysV` ABI,
/// then the first [`STACK_ARGS`] 8-byte stack slots above the return address.
pub const ARG_SLOTS: usize = 10;
/// Stack argument slots read at entry (`[rsp+8]`, `[rsp+16]`, ...) when the probe asks for them.
pub const STACK_ARGS: usize = 4;
/// Words of a [`cookie::CONFIG`] structure kept, in argument slots `ARG_SLOTS - CONFIG_SLOTS..`.
pub const CONFIG_SLOTS: usize = 5;

/// What kind of record follows the header.
#[repr(u16)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    /// A completed API call: entry arguments, return value, duration ([`CallRecord`]).
    Call = 1,
    /// A name bound to a handle: kernel registration or module function lookup ([`NameRecord`]).
    Name = 2,
    /// A process event: fork, exec, exit ([`ProcRecord`]).
    Proc = 3,
    /// An ioctl on a GPU driver: KFD ('K') or DRM amdgpu ('d', nr >= 0x40) ([`IoctlRecord`]).
    Ioctl = 4,
    /// An HSA queue created ([`QueueRecord`]).
    Queue = 5,
    /// An AQL packet read at a doorbell ([`DispatchRecord`]).
    Dispatch = 6,
    /// A launch's kernel parameters, read at its entry ([`ParamsRecord`]).
    Params = 7,
    /// A traced process opening a GPU runtime library ([`OpenRecord`]).
    Open = 8,
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
    /// [`ApiFunc`] for call and name records, [`ProcEvent`] for process records.
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
    pub const fn pid(&self) -> u32 {
        (self.pid_tgid >> 32) as u32
    }
    pub const fn tid(&self) -> u32 {
        self.pid_tgid as u32
    }
}

/// A completed call, written at return. The meaning of each argument slot is the function's signature
/// (see [`api`]); user space decodes it.
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallRecord {
    pub header: RecordHeader,
    /// Return minus entry time.
    pub duration_ns: u64,
    /// `rax` at return (the `hipError_t` for HIP calls; the module handle for `__hipRegisterFatBinary`).
    pub ret: u64,
    /// `*arg0` read at return for calls that write an out-parameter through their first argument
    /// (`hipMalloc`, `hipModuleLoadData`, `hipModuleGetFunction`), when the call succeeded.
    pub out: u64,
    /// [`CALL_OUT_VALID`], [`CALL_STACK_FAULT`], ...
    pub flags: u64,
    /// The return address at entry (`[rsp]`: where in which library the call was made), read by one-trap
    /// probes of launches; 0 otherwise or when it could not be read.
    pub caller: u64,
    /// Registers rdi, rsi, rdx, rcx, r8, r9, then stack slots `[rsp+8]`, `[rsp+16]`, ...
    pub args: [u64; ARG_SLOTS],
}

/// `out` holds the value read through the first argument at return.
pub const CALL_OUT_VALID: u64 = 1 << 0;
/// The stack arguments could not be read at entry (their slots are zero).
pub const CALL_STACK_FAULT: u64 = 1 << 1;
/// The out-parameter could not be read at return.
pub const CALL_OUT_FAULT: u64 = 1 << 2;
/// Written at entry by a one-trap probe ([`api::ProbeShape::OneTrap`]): `duration_ns` and `ret` are not
/// known (zero).
pub const CALL_ENTRY_ONLY: u64 = 1 << 3;
/// The structure the first argument points to ([`cookie::CONFIG`], [`cookie::WRAPPER`]) could not be read.
pub const CALL_CONFIG_FAULT: u64 = 1 << 4;

/// A kernel name bound to a handle.
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NameRecord {
    pub header: RecordHeader,
    /// The host-side handle (`__hipRegisterFunction`'s host function) or the `hipFunction_t` written by
    /// `hipModuleGetFunction`.
    pub handle: u64,
    /// The module: `__hipRegisterFunction`'s modules pointer, `hipModuleGetFunction`'s module.
    pub module: u64,
    /// Bytes of `name` in use (without the terminating NUL).
    pub len: u32,
    /// [`NAME_TRUNCATED`], [`NAME_FAULT`].
    pub flags: u32,
    pub name: [u8; NAME_MAX],
}

/// The name was longer than [`NAME_MAX`] - 1 bytes and was cut.
pub const NAME_TRUNCATED: u32 = 1 << 0;
/// The name could not be read from the process (its page was not resident even after a fault-in).
pub const NAME_FAULT: u32 = 1 << 1;

/// Process events observed through the scheduler tracepoints.
#[repr(u16)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcEvent {
    /// A traced process created a new process (not a thread); the child joined the filter.
    Fork = 1,
    /// A traced process called exec.
    Exec = 2,
    /// A traced process ended (its last thread exited).
    Exit = 3,
}

impl ProcEvent {
    pub const fn from_u16(v: u16) -> Option<Self> {
        match v {
            1 => Some(Self::Fork),
            2 => Some(Self::Exec),
            3 => Some(Self::Exit),
            _ => None,
        }
    }
}

#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcRecord {
    pub header: RecordHeader,
    /// Fork: the new process's pid. Exec, exit: the process's pid.
    pub pid: u32,
    /// Fork: the parent's pid. Otherwise 0.
    pub parent: u32,
    /// `comm` of the current task at the event.
    pub comm: [u8; 16],
}

/// Bytes of an ioctl's argument struct copied at return (enough for every KFD/amdgpu field decoded).
pub const IOCTL_ARG_BYTES: usize = 64;

/// An ioctl on a GPU driver, written at the syscall's exit.
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoctlRecord {
    pub header: RecordHeader,
    pub fd: u32,
    /// The full request number: direction, size, type ('K' = 0x4b, 'd' = 0x64) and number.
    pub cmd: u32,
    pub arg: u64,
    /// The syscall's return value (negative errno on failure).
    pub ret: i64,
    pub duration_ns: u64,
    /// [`IOCTL_ARG_READ`] when `argbuf` holds the argument struct as it was at return.
    pub flags: u64,
    pub argbuf: [u8; IOCTL_ARG_BYTES],
}

pub const IOCTL_ARG_READ: u64 = 1 << 0;

/// The ioctl request types tracer records: KFD, and DRM driver-specific numbers (amdgpu).
pub mod ioctl {
    pub const KFD_TYPE: u32 = 0x4b; // 'K'
    pub const DRM_TYPE: u32 = 0x64; // 'd'
    pub const DRM_COMMAND_BASE: u32 = 0x40;

    pub const fn request_type(cmd: u32) -> u32 {
        (cmd >> 8) & 0xff
    }
    pub const fn number(cmd: u32) -> u32 {
        cmd & 0xff
    }
    /// Whether tracer records this request (decided by type and number only: struct sizes change
    /// between driver versions, so the full request number is not a stable key).
    pub const fn is_gpu(cmd: u32) -> bool {
        let t = request_type(cmd);
        t == KFD_TYPE || (t == DRM_TYPE && number(cmd) >= DRM_COMMAND_BASE)
    }
}

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
    /// Packets between the last index seen and the doorbell value beyond [`MAX_PACKETS_PER_DOORBELL`].
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
}

/// Number of [`Counter`] slots.
pub const COUNTERS: u32 = 13;

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
        }
    }
}

/// How a [`Counter`] appears in the trace footer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Footer {
    Drop(&'static str),
    Count(&'static str),
}

/// Attach cookie layout: the library id in the upper 16 bits, probe flags in bits 16..48, the
/// [`ApiFunc`] in the low 16 bits.
pub mod cookie {
    /// Read [`crate::STACK_ARGS`] stack slots at entry.
    pub const STACK: u64 = 1 << 16;
    /// At return, when the call returned 0, read the u64 an out-parameter points to: the argument slot
    /// is [`out_arg`] (0..=7).
    pub const OUT: u64 = 1 << 17;
    const OUT_SHIFT: u32 = 18; // 3 bits
    /// At return, also emit a [`crate::NameRecord`] binding the out value to the string at argument
    /// [`name_arg`], with argument [`module_arg`] as its module.
    pub const NAME: u64 = 1 << 21;
    const NAME_SHIFT: u32 = 22; // 3 bits
    const MODULE_SHIFT: u32 = 25; // 3 bits
    /// `hsa_queue_create`: at return, read the `hsa_queue_t` the out-parameter points to and emit a
    /// [`crate::QueueRecord`].
    pub const QUEUE: u64 = 1 << 28;
    /// At entry, read [`crate::CONFIG_SLOTS`] u64 words from the structure argument 0 points to into the
    /// last argument slots (`cuLaunchKernelEx`'s `CUlaunchConfig`: grid, block, shared memory, stream).
    pub const CONFIG: u64 = 1 << 29;
    /// At entry, read the launch's kernel parameters ([`crate::ParamsRecord`]).
    ///
    /// The `void**` array is argument [`params_arg`], the function handle argument [`handle_arg`]; the
    /// plan for that handle says which parameters.
    pub const PARAMS: u64 = 1 << 30;
    /// At entry, read the first two words of the fat-binary wrapper argument 0 points to (magic and
    /// version, then the address of its offload bundle) into argument slots 6 and 7.
    pub const WRAPPER: u64 = 1 << 31;
    const PARAMS_SHIFT: u32 = 32; // 4 bits
    const HANDLE_SHIFT: u32 = 36; // 4 bits
    /// A synchronization: written only when its thread copied toward the host since its last written
    /// one (the sync that ends an inference step); otherwise tallied in the kernel ([`crate::ThreadTally`]).
    pub const GATED: u64 = 1 << 40;
    /// Tallied in the kernel, never written one by one: calls, and the bytes in argument 2.
    pub const TALLY: u64 = 1 << 41;
    /// A tallied or gated call's slot in its thread's [`crate::ThreadTally`] (3 bits). These bits are the
    /// parameter-array fields of a launch: a tallied call never reads parameters.
    const TALLY_SLOT_SHIFT: u32 = 32;
    /// A copy toward the host: marks its thread, so that the thread's next synchronization is written.
    pub const MARK: u64 = 1 << 42;
    /// A copy whose direction (a hipMemcpyKind) is argument [`mark_arg`]: marks its thread when that is
    /// device-to-host or from the pointers.
    pub const MARK_IF: u64 = 1 << 43;
    const MARK_SHIFT: u32 = 44; // 3 bits

    pub const fn mark_if(slot: u64) -> u64 {
        MARK_IF | ((slot & 7) << MARK_SHIFT)
    }
    pub const fn mark_arg(c: u64) -> usize {
        ((c >> MARK_SHIFT) & 7) as usize
    }

    /// Read `*arg[slot]` at return.
    pub const fn out(slot: u64) -> u64 {
        OUT | ((slot & 7) << OUT_SHIFT)
    }
    /// Bind the out value to the name at `name` with module `module` (argument slots).
    pub const fn name(name: u64, module: u64) -> u64 {
        NAME | ((name & 7) << NAME_SHIFT) | ((module & 7) << MODULE_SHIFT)
    }
    /// Read the kernel parameters whose array is argument `params` of a launch of the function at
    /// argument `handle` (argument slots).
    pub const fn params(params: u64, handle: u64) -> u64 {
        PARAMS | ((params & 15) << PARAMS_SHIFT) | ((handle & 15) << HANDLE_SHIFT)
    }
    pub const fn tally_slot(slot: usize) -> u64 {
        ((slot as u64) & 7) << TALLY_SLOT_SHIFT
    }
    pub const fn tally_slot_of(c: u64) -> usize {
        ((c >> TALLY_SLOT_SHIFT) & 7) as usize
    }
    pub const fn params_arg(c: u64) -> usize {
        ((c >> PARAMS_SHIFT) & 15) as usize
    }
    pub const fn handle_arg(c: u64) -> usize {
        ((c >> HANDLE_SHIFT) & 15) as usize
    }
    pub const fn out_arg(c: u64) -> usize {
        ((c >> OUT_SHIFT) & 7) as usize
    }
    pub const fn name_arg(c: u64) -> usize {
        ((c >> NAME_SHIFT) & 7) as usize
    }
    pub const fn module_arg(c: u64) -> usize {
        ((c >> MODULE_SHIFT) & 7) as usize
    }

    /// The library id must fit in 16 bits (tracer numbers its library copies from 1).
    pub const fn make(lib: u32, func: u16, flags: u64) -> u64 {
        ((lib as u64 & 0xffff) << 48) | (flags & 0xffff_ffff_0000) | func as u64
    }
    pub const fn func(c: u64) -> u16 {
        c as u16
    }
    pub const fn lib(c: u64) -> u32 {
        (c >> 48) as u32
    }
}

/// An HSA queue as `hsa_queue_create` returned it (the first 40 bytes of `hsa_queue_t`).
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueRecord {
    pub header: RecordHeader,
    /// The `hsa_queue_t*` (also the `amd_queue_t*` a doorbell signal points back to).
    pub queue: u64,
    /// u32 type, u32 features, u64 `base_address`, u64 `doorbell_signal`, u32 size, u32 reserved, u64 id.
    pub raw: [u64; 5],
}

/// Most AQL packets decoded per doorbell store; more are counted ([`Counter::PacketsCut`]), not read.
pub const MAX_PACKETS_PER_DOORBELL: u64 = 16;

/// One AQL packet read from a queue's ring when its doorbell was rung.
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DispatchRecord {
    pub header: RecordHeader,
    pub queue: u64,
    /// The packet's index (write index) in the queue.
    pub index: u64,
    /// The 64-byte packet as it was in the ring.
    pub packet: [u8; 64],
}

/// Kernel parameters a launch's [`ParamsRecord`] can hold (ggml's `mul_mat_q` has 24).
pub const PARAMS_MAX: usize = 24;
/// A plan asking for every parameter: what a launch of a function user space has not planned yet reads.
pub const PARAMS_ALL: u32 = (1 << PARAMS_MAX) - 1;

/// The parameters a launch passed to its kernel, read at the launch's entry, or a queue dispatch's
/// argument words, read at its doorbell.
///
/// From the `void**` array of `hipLaunchKernel`, `cuLaunchKernel`, ...: for each parameter asked for, the
/// 8 bytes at the address its array slot holds (a 4-byte `int` is the low half). From a kernel dispatch
/// packet's argument segment: word i is bytes 8i..8i+8. The header is the launch's or dispatch's own (same
/// thread, same time), so user space joins the two.
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamsRecord {
    pub header: RecordHeader,
    /// The launched function (host stub, `hipFunction_t` or `CUfunction`), or the dispatched kernel object.
    pub handle: u64,
    /// Bit i: parameter i was asked for (the plan user space set for the handle, [`PARAMS_ALL`] before it
    /// set one).
    pub wanted: u32,
    /// Bit i: `values[i]` was read.
    pub read: u32,
    pub values: [u64; PARAMS_MAX],
}

/// The key of the eBPF plan map: a process and a launched function or dispatched kernel object.
///
/// Its value says which parameters the launches read, or which argument words the dispatches read (a `u32`
/// bit mask, bit i for parameter or word i; 0 reads none).
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PlanKey {
    pub tgid: u64,
    pub handle: u64,
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
    /// Calls per tally slot.
    pub calls: [u64; TALLY_SLOTS],
    /// The sizes the calls passed (copies), summed, per tally slot.
    pub bytes: [u64; TALLY_SLOTS],
}

/// Longest path an [`OpenRecord`] keeps.
pub const OPEN_PATH_MAX: usize = 256;

/// File-name prefixes of the runtime libraries whose opening by a traced process is reported
/// ([`OpenRecord`]): the libraries tracer probes. The kernel compares a path's last component with them.
pub const RUNTIME_PREFIXES: [&[u8]; 4] = [b"libamdhip64.so", b"libhsa-runtime64.so", b"libcuda.so", b"libcudart.so"];

/// A traced process opening a file whose name is a GPU runtime's (`openat` at entry): a runtime copy it is
/// about to load, to probe before its code runs (a private copy tracer could not foresee).
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenRecord {
    pub header: RecordHeader,
    /// Bytes of `path` in use; [`NAME_TRUNCATED`] in `flags` when the path was longer.
    pub len: u32,
    pub flags: u32,
    pub path: [u8; OPEN_PATH_MAX],
}

/// Bytes of one AQL packet.
pub const AQL_PACKET_BYTES: usize = 64;

#[cfg(feature = "user")]
mod user {
    // SAFETY: plain old data, `#[repr(C)]`, no padding (bytemuck's Pod derive checks), every bit pattern
    // valid.
    unsafe impl aya::Pod for super::RecordHeader {}
    // SAFETY: as above: two u64 fields.
    unsafe impl aya::Pod for super::PlanKey {}
    // SAFETY: as above: u64 fields and arrays of them.
    unsafe impl aya::Pod for super::ThreadTally {}
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn layouts_have_no_padding() {
        assert_eq!(size_of::<RecordHeader>(), 24);
        assert_eq!(size_of::<CallRecord>(), 24 + 8 * 5 + 8 * ARG_SLOTS);
        assert_eq!(size_of::<NameRecord>(), 24 + 8 + 8 + 4 + 4 + NAME_MAX);
        assert_eq!(size_of::<ProcRecord>(), 24 + 4 + 4 + 16);
        assert_eq!(size_of::<IoctlRecord>(), 24 + 4 + 4 + 8 * 4 + IOCTL_ARG_BYTES);
        assert_eq!(size_of::<QueueRecord>(), 24 + 8 + 40);
        assert_eq!(size_of::<DispatchRecord>(), 24 + 16 + AQL_PACKET_BYTES);
        assert_eq!(size_of::<ParamsRecord>(), 24 + 16 + 8 * PARAMS_MAX);
        assert_eq!(size_of::<OpenRecord>(), 24 + 8 + OPEN_PATH_MAX);
        assert_eq!(size_of::<NameRecord>() % 8, 0);
        assert!(align_of::<CallRecord>() <= 8);
    }

    #[test]
    fn gpu_ioctls_by_type_and_number() {
        assert!(ioctl::is_gpu(0x80084b01)); // AMDKFD_IOC_GET_VERSION
        assert!(ioctl::is_gpu(0xc0206440)); // DRM_IOCTL_AMDGPU_GEM_CREATE
        assert!(!ioctl::is_gpu(0xc0106400)); // DRM_IOCTL_VERSION (core DRM, nr < 0x40)
        assert!(!ioctl::is_gpu(0x5401)); // TCGETS
    }

    #[test]
    fn every_counter_once_in_the_footer() {
        for (i, c) in Counter::ALL.iter().enumerate() {
            assert_eq!(*c as usize, i);
        }
        let names: [Footer; COUNTERS as usize] = Counter::ALL.map(Counter::footer);
        for (i, a) in names.iter().enumerate() {
            assert!(!names[i + 1..].contains(a), "{a:?}");
        }
    }

    #[test]
    fn cookie_round_trip() {
        let c = cookie::make(7, ApiFunc::HipLaunchKernel as u16, cookie::STACK);
        assert_eq!(cookie::lib(c), 7);
        assert_eq!(cookie::func(c), ApiFunc::HipLaunchKernel as u16);
        assert_ne!(c & cookie::STACK, 0);
        assert_eq!(c & cookie::OUT, 0);
        let c = cookie::make(1, 6, cookie::out(3) | cookie::name(1, 0));
        assert_eq!((cookie::out_arg(c), cookie::name_arg(c), cookie::module_arg(c)), (3, 1, 0));
        assert_ne!(c & cookie::NAME, 0);
        assert_eq!(cookie::func(c), 6);
        assert_eq!(c & cookie::QUEUE, 0);
        // Flags never reach the function or library fields.
        let all = cookie::make(
            0xffff,
            u16::MAX,
            cookie::STACK | cookie::out(7) | cookie::name(7, 7) | cookie::QUEUE | cookie::params(15, 15),
        );
        assert_eq!((cookie::func(all), cookie::lib(all)), (u16::MAX, 0xffff));
        let c = cookie::make(1, 12, cookie::mark_if(3) | cookie::GATED | cookie::TALLY | cookie::MARK);
        assert_eq!((cookie::mark_arg(c), cookie::lib(c), cookie::func(c)), (3, 1, 12));
        assert_ne!(c & cookie::MARK_IF, 0);
        let c = cookie::make(3, 128, cookie::STACK | cookie::params(9, 0));
        assert_eq!((cookie::params_arg(c), cookie::handle_arg(c), cookie::lib(c)), (9, 0, 3));
        assert_ne!(c & cookie::PARAMS, 0);
    }

    #[test]
    fn kinds_round_trip() {
        for k in [
            RecordKind::Call,
            RecordKind::Name,
            RecordKind::Proc,
            RecordKind::Ioctl,
            RecordKind::Queue,
            RecordKind::Dispatch,
            RecordKind::Params,
            RecordKind::Open,
        ] {
            assert_eq!(RecordKind::from_u16(k as u16), Some(k));
        }
        assert_eq!(RecordKind::from_u16(0), None);
        for f in ApiFunc::ALL {
            assert_eq!(ApiFunc::from_u16(*f as u16), Some(*f));
        }
    }
}
