//! The kernel-driver layer: ioctls on the GPU drivers (KFD `/dev/kfd`, type 'K'; DRM amdgpu
//! `/dev/dri/*`, type 'd' with nr >= 0x40), from the raw syscall tracepoints, filtered by PID and request
//! type in the kernel. Entry and exit are paired per thread; one [`IoctlRecord`] at exit carries the
//! return value, the duration and the first bytes of the argument struct as the driver left them.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user},
    macros::tracepoint,
    programs::TracePointContext,
};
use tracer_common::{Counter, IOCTL_ARG_BYTES, IOCTL_ARG_READ, IoctlRecord, RecordHeader, RecordKind, ioctl::is_gpu};

use crate::maps::{IOCTLS, IoctlEntry, count, reserve, setting, submit_flags, traced};

/// `syscalls:sys_enter_ioctl` offsets of fd, cmd, arg; `sys_exit_ioctl` offset of ret.
#[unsafe(no_mangle)]
static IOCTL_FD_OFFSET: u32 = 16;
#[unsafe(no_mangle)]
static IOCTL_CMD_OFFSET: u32 = 24;
#[unsafe(no_mangle)]
static IOCTL_ARG_OFFSET: u32 = 32;
#[unsafe(no_mangle)]
static IOCTL_RET_OFFSET: u32 = 16;

#[tracepoint]
pub(crate) fn sys_enter_ioctl(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !traced((pid_tgid >> 32) as u32) {
        return 0;
    }
    // SAFETY: offsets come from this kernel's format file; read_at checks the access.
    let cmd = unsafe { ctx.read_at::<u64>(setting(&IOCTL_CMD_OFFSET) as usize) }.unwrap_or(0) as u32;
    if !is_gpu(cmd) {
        return 0;
    }
    // SAFETY: as above.
    let (fd, arg) = unsafe {
        (
            ctx.read_at::<u64>(setting(&IOCTL_FD_OFFSET) as usize).unwrap_or(u64::MAX) as u32,
            ctx.read_at::<u64>(setting(&IOCTL_ARG_OFFSET) as usize).unwrap_or(0),
        )
    };
    // SAFETY: helper call without preconditions.
    let entry = IoctlEntry { ts_ns: unsafe { bpf_ktime_get_ns() }, arg, fd, cmd };
    if IOCTLS.insert(pid_tgid, entry, 0).is_err() {
        count(Counter::StashFull);
    }
    0
}

#[tracepoint]
pub(crate) fn sys_exit_ioctl(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: the entry is copied out before it is removed.
    let Some(entry) = (unsafe { IOCTLS.get(pid_tgid) }).copied() else { return 0 };
    #[expect(clippy::let_underscore_must_use, reason = "an entry already gone (evicted) needs nothing done")]
    let _: Result<(), _> = IOCTLS.remove(pid_tgid);
    // SAFETY: offset from this kernel's format file.
    let ret = unsafe { ctx.read_at::<i64>(setting(&IOCTL_RET_OFFSET) as usize) }.unwrap_or(0);
    // SAFETY: helper call without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    let Some(mut slot) = reserve::<IoctlRecord>() else {
        return 0;
    };
    let rec = slot.as_mut_ptr();
    // SAFETY: `rec` points at reserved ring memory of the right size; every field is written.
    unsafe {
        (*rec).header = RecordHeader { kind: RecordKind::Ioctl as u16, func: 0, lib: 0, pid_tgid, ts_ns: entry.ts_ns };
        (*rec).fd = entry.fd;
        (*rec).cmd = entry.cmd;
        (*rec).arg = entry.arg;
        (*rec).ret = ret;
        (*rec).duration_ns = now.saturating_sub(entry.ts_ns);
        if let Ok(buf) = bpf_probe_read_user(entry.arg as *const [u8; IOCTL_ARG_BYTES]) {
            (*rec).argbuf = buf;
            (*rec).flags = IOCTL_ARG_READ;
        } else {
            (*rec).argbuf = [0; IOCTL_ARG_BYTES];
            (*rec).flags = 0;
        }
    }
    slot.submit(submit_flags());
    0
}
