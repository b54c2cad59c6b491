//! HIP-specific probes (libamdhip64): kernel registration. The HIP API calls themselves go through the
//! generic programs in [`crate::calls`].

use aya_ebpf::{
    EbpfContext as _,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, generated::bpf_get_attach_cookie},
    macros::uprobe,
    programs::ProbeContext,
};
use tracer_common::{RecordHeader, RecordKind};

use crate::{emit::emit_name, maps::traced};

/// `__hipRegisterFunction(modules, hostFunction, deviceFunction, deviceName, ...)` (and libcudart's
/// `__cudaRegisterFunction`, the same arguments), at entry.
/// Sleepable, because the name may sit on a page the process has not touched yet (the first
/// registration of a program reads from a fresh page of .rodata): the program may fault it in.
#[uprobe(sleepable)]
pub(crate) fn register_function(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !traced((pid_tgid >> 32) as u32) {
        return 0;
    }
    // SAFETY: see call_entry.
    let c = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    // SAFETY: helper call without preconditions.
    let header = RecordHeader::of_probe(RecordKind::Name, c, pid_tgid, unsafe { bpf_ktime_get_ns() });
    let arg = |n: usize| ctx.arg::<u64>(n).unwrap_or(0);
    // (modules, host stub, device function, device name, ...)
    emit_name(header, arg(1), arg(0), arg(3) as *const u8, true);
    0
}
