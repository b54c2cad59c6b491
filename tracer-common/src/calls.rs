//! Records of API calls: a completed call, a name bound to a handle, a launch's kernel parameters, and
//! the key of the parameter plans.

use crate::RecordHeader;

/// Longest kernel name kept in one [`NameRecord`]; longer names are cut and flagged
/// ([`NAME_TRUNCATED`]), never silently.
pub const NAME_MAX: usize = 480;

/// Argument slots captured at a call's entry: the six integer argument registers of the x86-64 `SysV` ABI,
/// then the first [`STACK_ARGS`] 8-byte stack slots above the return address.
pub const ARG_SLOTS: usize = 10;
/// Stack argument slots read at entry (`[rsp+8]`, `[rsp+16]`, ...) when the probe asks for them.
pub const STACK_ARGS: usize = 4;
/// Words of a [`cookie::CONFIG`](crate::cookie::CONFIG) structure kept, in argument slots `ARG_SLOTS - CONFIG_SLOTS..`.
pub const CONFIG_SLOTS: usize = 5;

/// A completed call, written at return. The meaning of each argument slot is the function's signature
/// (see [`api`](crate::api)); user space decodes it.
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
/// Written at entry by a one-trap probe ([`api::ProbeShape::OneTrap`](crate::api::ProbeShape::OneTrap)): `duration_ns` and `ret` are not
/// known (zero).
pub const CALL_ENTRY_ONLY: u64 = 1 << 3;
/// The structure the first argument points to ([`cookie::CONFIG`](crate::cookie::CONFIG), [`cookie::WRAPPER`](crate::cookie::WRAPPER)) could not be read.
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
/// Not a string: `name` holds `len` bytes of the code the handle was made from (a shader module's SPIR-V).
///
/// They are chunk [`code_chunk`] counted from the code's end (chunk 0 is its last [`NAME_MAX`] bytes,
/// chunk 1 the ones before, ...), and `module` is the code's size in bytes. A module's chunks come
/// farthest first, chunk 0 last; chunks before the code's start are not written. Its head ([`CODE_HEAD`])
/// comes before them.
pub const NAME_CODE: u32 = 1 << 2;
/// Chunks of a shader module's code read from its end, at most.
pub const CODE_CHUNKS: u32 = 4;
/// The chunk number of a module's head: its first [`NAME_MAX`] bytes (its header, capabilities and entry
/// points), written before the chunks of its end.
pub const CODE_HEAD: u32 = 0xff;
const CODE_CHUNK_SHIFT: u32 = 8;

/// The flags of a code chunk numbered `chunk` from the end.
pub const fn code_chunk_flags(chunk: u32) -> u32 {
    NAME_CODE | (chunk << CODE_CHUNK_SHIFT)
}

/// Which chunk from the end a [`NAME_CODE`] record holds.
pub const fn code_chunk(flags: u32) -> u32 {
    (flags >> CODE_CHUNK_SHIFT) & 0xff
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
