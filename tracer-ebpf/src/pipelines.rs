//! ggml-vulkan's pipeline maker (`ggml_vk_create_pipeline_func`): the name ggml gives each pipeline, read
//! as it is made, before its shader module.

use aya_ebpf::{
    EbpfContext as _,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user, generated::bpf_get_attach_cookie},
    macros::uprobe,
    programs::ProbeContext,
};
use tracer_common::{RecordHeader, RecordKind};

use crate::{emit::emit_name, maps::traced};

/// `(vk_device&, vk_pipeline& pipeline, size_t spv_size, const void* spv_data, ...)`, at entry: the
/// `std::shared_ptr` at `pipeline` holds the `vk_pipeline_struct`, which begins with its `std::string
/// name` (libstdc++: the characters' address first, always NUL-terminated). One [`tracer_common::NameRecord`]
/// binding the name to the SPIR-V's address (handle) and size (module); a pointer that cannot be read
/// gives a record flagged as a fault, which user space counts.
#[uprobe]
pub(crate) fn pipeline_name(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !traced((pid_tgid >> 32) as u32) {
        return 0;
    }
    // SAFETY: see call_entry.
    let c = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    let arg = |n: usize| ctx.arg::<u64>(n).unwrap_or(0);
    // SAFETY: bpf_probe_read_user checks each address and never faults the process.
    let name = unsafe { bpf_probe_read_user(arg(1) as *const u64) }
        .and_then(|pipeline| unsafe { bpf_probe_read_user(pipeline as *const u64) })
        .unwrap_or(0);
    // SAFETY: helper call without preconditions.
    let header = RecordHeader::of_probe(RecordKind::Name, c, pid_tgid, unsafe { bpf_ktime_get_ns() });
    emit_name(header, arg(3), arg(2), name as *const u8, false);
    0
}
