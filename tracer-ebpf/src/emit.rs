//! Record emitters: every record but a call's own is reserved in the ring and written here, so that each
//! record's layout is filled in one place. A record that finds the ring full is counted, never waited
//! for.

use aya_ebpf::{
    helpers::{
        bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user, bpf_probe_read_user_buf,
        bpf_probe_read_user_str_bytes, generated::bpf_copy_from_user,
    },
    maps::ring_buf::RingBufEntry,
};
use tracer_common::{
    AQL_PACKET_BYTES, ARG_SLOTS, CODE_CHUNKS, CODE_HEAD, NAME_FAULT, NAME_MAX, NAME_TRUNCATED, NameRecord, PARAMS_ALL,
    PARAMS_MAX, ParamsRecord, PlanKey, ProcEvent, ProcRecord, QueueRecord, RecordHeader, RecordKind, code_chunk_flags,
    cookie,
};

use crate::maps::{FROM_START, LAST_INDEX, PARAM_PLANS, QueueKey, reserve, submit_flags};

/// The plan user space has set for `handle` in process `tgid` (see [`PARAM_PLANS`]), if it has.
#[inline(always)]
pub(crate) fn plan_of(tgid: u64, handle: u64) -> Option<u32> {
    // SAFETY: the value is copied out at once.
    unsafe { PARAM_PLANS.get(PlanKey { tgid, handle }) }.copied()
}

/// A launch's kernel parameters, as far as the plan for its function asks (every one up to
/// [`PARAMS_MAX`] before user space has set a plan; none for most named kernels): one read of the
/// parameter array, then one of 8 bytes per parameter asked for. Written before the launch's own record,
/// with its header. `plan`: the plan when the caller has looked it up already.
#[inline(always)]
pub(crate) fn emit_params(header: RecordHeader, c: u64, args: &[u64; ARG_SLOTS], plan: Option<u32>) {
    let handle = args.get(cookie::handle_arg(c)).copied().unwrap_or(0);
    let array = args.get(cookie::params_arg(c)).copied().unwrap_or(0);
    if array == 0 {
        return; // parameters passed through `extra`, or none
    }
    let Some((mut entry, wanted)) = reserve_params(header, handle, plan) else { return };
    let rec = entry.as_mut_ptr();
    // SAFETY: `rec` points at reserved ring memory whose header, handle and plan are written; the values
    // and read mask are written below, before submit. bpf_probe_read_user checks each address and never
    // faults the process.
    unsafe {
        let mut read = 0u32;
        // The array's slots land in `values` first (no room for them on the stack), each then replaced by
        // what it points to.
        let slots = core::slice::from_raw_parts_mut((&raw mut (*rec).values).cast::<u8>(), PARAMS_MAX * 8);
        if bpf_probe_read_user_buf(array as *const u8, slots).is_ok() {
            let mut i = 0;
            while i < PARAMS_MAX {
                let bit = 1u32 << i;
                let at = (*rec).values[i];
                (*rec).values[i] = 0;
                if wanted & bit != 0
                    && let Ok(v) = bpf_probe_read_user(at as *const u64)
                {
                    (*rec).values[i] = v;
                    read |= bit;
                }
                i += 1;
            }
        } else {
            (*rec).values = [0; PARAMS_MAX];
        }
        (*rec).read = read;
    }
    entry.submit(submit_flags());
}

/// A [`ParamsRecord`] reserved in the ring for `handle` (a launched function, or a dispatched kernel
/// object), its header, handle and plan written, with the plan: `plan`, else what the eBPF plan map holds
/// for the process and handle, or every slot before user space has set one. None when the plan asks for
/// nothing, or when the ring is full (counted).
#[inline(always)]
fn reserve_params(header: RecordHeader, handle: u64, plan: Option<u32>) -> Option<(RingBufEntry<ParamsRecord>, u32)> {
    let wanted = plan.or_else(|| plan_of(header.pid_tgid >> 32, handle)).unwrap_or(PARAMS_ALL);
    if wanted == 0 {
        return None;
    }
    let mut entry = reserve::<ParamsRecord>()?;
    let rec = entry.as_mut_ptr();
    // SAFETY: `rec` points at reserved ring memory of the right size; these plain fields are written
    // before the caller fills the rest and submits.
    unsafe {
        (*rec).header = RecordHeader { kind: RecordKind::Params as u16, ..header };
        (*rec).handle = handle;
        (*rec).wanted = wanted;
    }
    Some((entry, wanted))
}

/// `hsa_queue_create` returned: its out-parameter (stack slot `[rsp+16]`) points at the new queue.
#[inline(always)]
pub(crate) fn emit_queue(header: RecordHeader, out_param: u64) {
    // SAFETY: bpf_probe_read_user checks the addresses.
    let Ok(queue) = (unsafe { bpf_probe_read_user(out_param as *const u64) }) else { return };
    // SAFETY: as above: the helper checks the address and never faults the process.
    let Ok(raw) = (unsafe { bpf_probe_read_user(queue as *const [u64; 5]) }) else { return };
    let key = QueueKey { tgid: header.pid_tgid >> 32, queue };
    #[expect(
        clippy::let_underscore_must_use,
        reason = "an LRU map makes room itself; a failed insert only means the first doorbell reads from the ring state"
    )]
    let _: Result<(), _> = LAST_INDEX.insert(key, FROM_START, 0);
    if let Some(mut entry) = reserve::<QueueRecord>() {
        entry.write(QueueRecord { header, queue, raw });
        entry.submit(submit_flags());
    }
}

/// A [`NameRecord`] reserved in the ring (it is too big for the stack), its header, handle and module
/// written; the caller fills the name, length and flags and submits. None when the ring is full (counted).
#[inline(always)]
fn reserve_name(header: RecordHeader, handle: u64, module: u64) -> Option<RingBufEntry<NameRecord>> {
    let mut entry = reserve::<NameRecord>()?;
    let rec = entry.as_mut_ptr();
    // SAFETY: `rec` points at reserved ring memory of the right size; these plain fields are written before
    // the caller fills the rest and submits.
    unsafe {
        (*rec).header = header;
        (*rec).handle = handle;
        (*rec).module = module;
    }
    Some(entry)
}

/// Writes one [`NameRecord`] straight into the ring: the string at `name`.
#[inline(always)]
pub(crate) fn emit_name(header: RecordHeader, handle: u64, module: u64, name: *const u8, may_sleep: bool) {
    let Some(mut entry) = reserve_name(header, handle, module) else { return };
    let rec = entry.as_mut_ptr();
    // SAFETY: `rec` points at reserved ring memory whose header, handle and module are written; the name
    // buffer is filled by the helper or zeroed on failure below, before submit.
    unsafe {
        let buf = &mut (*rec).name;
        let mut result = bpf_probe_read_user_str_bytes(name, buf).map(<[u8]>::len);
        if result.is_err() && may_sleep {
            // Fault in the page holding the name's first byte, then the next page (a name may cross
            // into it), retrying the read after each.
            let mut byte = 0u8;
            let _: aya_ebpf::cty::c_long = bpf_copy_from_user((&raw mut byte).cast(), 1, name.cast());
            result = bpf_probe_read_user_str_bytes(name, buf).map(<[u8]>::len);
            if result.is_err() {
                let next = ((name as u64 | 0xfff) + 1) as *const u8;
                let _: aya_ebpf::cty::c_long = bpf_copy_from_user((&raw mut byte).cast(), 1, next.cast());
                result = bpf_probe_read_user_str_bytes(name, buf).map(<[u8]>::len);
            }
        }
        if let Ok(len) = result {
            (*rec).len = len as u32;
            // The helper stops at NAME_MAX - 1 bytes and a NUL; a full buffer means the name was cut.
            (*rec).flags = if len >= NAME_MAX - 1 { NAME_TRUNCATED } else { 0 };
        } else {
            (*rec).len = 0;
            (*rec).flags = NAME_FAULT;
            buf[0] = 0;
        }
    }
    // No wake-up of its own: a library's load registers thousands (rocSPARSE: 12 424), and a forced
    // wake-up is an interrupt for each; the drain looks at the ring every few milliseconds anyway.
    entry.submit(submit_flags());
}

/// The head and end of the `size` bytes of code at `code`, bound to `handle`: its first [`NAME_MAX`] bytes
/// ([`CODE_HEAD`]: a shader module's entry points), then up to [`CODE_CHUNKS`] [`NameRecord`]s of
/// [`NAME_MAX`] bytes counted from the end, farthest first (chunk 0, the last bytes, always last). A shader
/// module's SPIR-V: everything after its head is the same in the copy a runtime patched (ggml inserts
/// float-control modes there), and names it; a module of no ggml file is named by its own entry points.
#[inline(always)]
pub(crate) fn emit_code(header: RecordHeader, handle: u64, size: u64, code: u64) {
    if size >= NAME_MAX as u64 && !emit_code_chunk(header, handle, size, Some(code), CODE_HEAD) {
        return;
    }
    let mut k = 0u32;
    while k < CODE_CHUNKS {
        let chunk = CODE_CHUNKS - 1 - k;
        k += 1;
        let back = NAME_MAX as u64 * (u64::from(chunk) + 1);
        if size < back && chunk > 0 {
            continue; // before the code's start
        }
        // Code shorter than one chunk is not read (no variable-length read): user space counts it.
        let at = (size >= back).then(|| code + size - back);
        if !emit_code_chunk(header, handle, size, at, chunk) {
            return;
        }
    }
}

/// One code chunk: the [`NAME_MAX`] bytes at `at` (None: not read), flagged as chunk `chunk`. False when the
/// ring is full (counted).
#[inline(always)]
fn emit_code_chunk(header: RecordHeader, handle: u64, size: u64, at: Option<u64>, chunk: u32) -> bool {
    let Some(mut entry) = reserve_name(header, handle, size) else { return false };
    let rec = entry.as_mut_ptr();
    // SAFETY: `rec` points at reserved ring memory whose header, handle and module are written; the rest is
    // written below, before submit. bpf_probe_read_user_buf checks the address and never faults the process.
    unsafe {
        let buf = &mut (*rec).name;
        if let Some(at) = at
            && bpf_probe_read_user_buf(at as *const u8, buf).is_ok()
        {
            (*rec).len = NAME_MAX as u32;
            (*rec).flags = code_chunk_flags(chunk);
        } else {
            (*rec).len = 0;
            (*rec).flags = code_chunk_flags(chunk) | NAME_FAULT;
            *buf = [0; NAME_MAX];
        }
    }
    entry.submit(submit_flags());
    true
}

/// A kernel dispatch's argument segment, as far as the plan for its kernel object asks (user space sets
/// it: ggml's MMQ, the word holding its column count; other kernels none; before it has, the first
/// [`PARAMS_MAX`] words): one read of the words, written before the dispatch's own record with its header.
/// Values are 8-byte words of the segment (word i at byte 8i), not parameters.
#[inline(always)]
pub(crate) fn emit_kernarg(header: RecordHeader, packet: &[u8; AQL_PACKET_BYTES]) {
    let word = |at: usize| {
        let mut v = [0u8; 8];
        v.copy_from_slice(&packet[at..at + 8]);
        u64::from_ne_bytes(v)
    };
    let (kernel_object, kernarg) = (word(32), word(40));
    if kernarg == 0 {
        return;
    }
    let Some((mut entry, wanted)) = reserve_params(header, kernel_object, None) else { return };
    let rec = entry.as_mut_ptr();
    // SAFETY: `rec` points at reserved ring memory whose header, handle and plan are written; the values
    // and read mask are written below, before submit. bpf_probe_read_user checks the address and never
    // faults the process.
    unsafe {
        let words = core::slice::from_raw_parts_mut((&raw mut (*rec).values).cast::<u8>(), PARAMS_MAX * 8);
        if bpf_probe_read_user_buf(kernarg as *const u8, words).is_ok() {
            (*rec).read = wanted;
        } else {
            (*rec).values = [0; PARAMS_MAX];
            (*rec).read = 0;
        }
    }
    entry.submit(submit_flags());
}

#[inline(always)]
pub(crate) fn emit_proc(event: ProcEvent, pid: u32, parent: u32) {
    emit_proc_of(event, pid, parent, 0);
}

/// A process event about library `lib` (0: none).
pub(crate) fn emit_proc_of(event: ProcEvent, pid: u32, parent: u32, lib: u32) {
    let Some(mut entry) = reserve::<ProcRecord>() else {
        return;
    };
    entry.write(ProcRecord {
        header: RecordHeader {
            kind: RecordKind::Proc as u16,
            func: event as u16,
            lib,
            pid_tgid: bpf_get_current_pid_tgid(),
            // SAFETY: helper call without preconditions.
            ts_ns: unsafe { bpf_ktime_get_ns() },
        },
        pid,
        parent,
        comm: bpf_get_current_comm().unwrap_or([0; 16]),
    });
    // Process events are rare and user space must read /proc/PID while the process lives (argv, maps):
    // wake the reader now.
    entry.submit(u64::from(aya_ebpf::bindings::BPF_RB_FORCE_WAKEUP));
}
