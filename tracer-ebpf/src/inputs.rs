//! ggml's `ggml_backend_tensor_set`: a pass's inputs as the scheduler copies them to the device. One trap
//! a tensor set; the tensor's name is read and only llama.cpp's token positions and output rows
//! (`BACKEND#inp_pos#N`, `BACKEND#out_ids#N`) go on: their values, up to
//! [`INPUT_VALUES_MAX`], in an [`InputRecord`] built in a per-CPU scratch value and written with its used
//! length. Every other tensor (the weights as they load, the other inputs) costs the trap and nothing more.

use aya_ebpf::{
    EbpfContext as _,
    cty::c_void,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user, generated},
    macros::{map, uprobe},
    maps::PerCpuArray,
    programs::ProbeContext,
};
use tracer_common::{
    Counter, GGML_TENSOR_NAME, INPUT_FAULT, INPUT_NAME_BYTES, INPUT_VALUES_MAX, InputRecord, RecordHeader, RecordKind,
    input_of_name,
};

use crate::maps::{count, output_bytes, submit_flags, traced};

/// Where an input record is built before it is written with its used length.
#[map]
pub(crate) static INPUT_SCRATCH: PerCpuArray<InputScratch> = PerCpuArray::with_max_entries(1, 0);

/// The scratch an input record is built in: its head, then its values.
#[repr(C)]
pub(crate) struct InputScratch {
    rec: InputRecord,
    values: [u8; 4 * INPUT_VALUES_MAX],
}

#[uprobe]
pub(crate) fn graph_input(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !traced((pid_tgid >> 32) as u32) {
        return 0;
    }
    let arg = |n: usize| ctx.arg::<u64>(n).unwrap_or(0);
    let tensor = arg(0);
    // SAFETY: bpf_probe_read_user checks the address and never faults the process.
    let name = unsafe { bpf_probe_read_user((tensor + GGML_TENSOR_NAME) as *const [u8; INPUT_NAME_BYTES]) };
    let Some(which) = name.ok().and_then(|n| input_of_name(&n)) else {
        count(Counter::TensorSetOther);
        return 0;
    };
    let Some(s) = INPUT_SCRATCH.get_ptr_mut(0) else { return 0 };
    // SAFETY: the context pointer is the probe's own pt_regs.
    let c = unsafe { generated::bpf_get_attach_cookie(ctx.as_ptr()) };
    let (data, offset, size) = (arg(1), arg(2), arg(3));
    let values = (size / 4).min(INPUT_VALUES_MAX as u64) as u32;
    // SAFETY: `s` points at this CPU's scratch value, used by this program alone, without preemption; the
    // helper checks the user address and writes at most the values array's size into it.
    let read = unsafe {
        let rec = &mut (*s).rec;
        // SAFETY: helper call without preconditions.
        rec.header = RecordHeader::of_probe(RecordKind::Input, c, pid_tgid, bpf_ktime_get_ns());
        rec.tensor = tensor;
        rec.size = size;
        rec.offset = offset;
        rec.which = which;
        rec.read = values;
        // Read back volatile, so that the verifier sees the bound checked (see `batch::bounded`).
        let n = core::ptr::read_volatile(&raw const rec.read) as usize;
        if n > INPUT_VALUES_MAX {
            return 0;
        }
        let ok = n == 0
            || generated::bpf_probe_read_user(
                (&raw mut (*s).values).cast::<c_void>(),
                (4 * n) as u32,
                data as *const c_void,
            ) == 0;
        if ok {
            n
        } else {
            rec.which |= INPUT_FAULT;
            rec.read = 0;
            0
        }
    };
    let size = size_of::<InputRecord>() + 4 * read;
    if size > size_of::<InputScratch>() {
        return 0;
    }
    // SAFETY: the record and its values lie at the start of the scratch value, `size` bytes of it.
    let bytes = unsafe { core::slice::from_raw_parts(s.cast::<u8>(), size) };
    output_bytes::<InputRecord>(bytes, submit_flags());
    0
}
