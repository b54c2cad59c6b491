//! The GPU scheduler layer: the kernel's DRM GPU scheduler tracepoints (`gpu_scheduler`, module
//! `gpu-sched`), where they exist. A job queued by a traced process (in its own ioctl) is remembered by
//! its fence; its run and done stages, which fire in the scheduler's worker and in interrupt context, are
//! recorded only for jobs remembered, and carry the submitter's thread. Field offsets come from this
//! kernel's format files ([`JOB_FORMAT`]).

use aya_ebpf::{
    EbpfContext as _,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_kernel_str_bytes},
    macros::tracepoint,
    programs::TracePointContext,
};
use tracer_common::{JOB_RING_BYTES, JobFields, JobFormat, JobKey, JobRecord, JobStage, RecordHeader, RecordKind};

use crate::maps::{JOBS, reserve, setting, submit_flags, traced};

/// Where each stage's tracepoint keeps the fields read, set at load.
#[unsafe(no_mangle)]
static JOB_FORMAT: JobFormat = [JobFields::ABSENT; 3];

#[tracepoint]
pub(crate) fn job_queue(ctx: TracePointContext) -> u32 {
    job(&ctx, JobStage::Queue);
    0
}

#[tracepoint]
pub(crate) fn job_run(ctx: TracePointContext) -> u32 {
    job(&ctx, JobStage::Run);
    0
}

#[tracepoint]
pub(crate) fn job_done(ctx: TracePointContext) -> u32 {
    job(&ctx, JobStage::Done);
    0
}

#[inline(always)]
fn field(ctx: &TracePointContext, offset: u32) -> u64 {
    if offset == JobFields::NONE {
        return 0;
    }
    // SAFETY: the offset comes from this kernel's format file; read_at checks the access.
    unsafe { ctx.read_at::<u64>(offset as usize) }.unwrap_or(0)
}

#[inline(always)]
fn job(ctx: &TracePointContext, stage: JobStage) {
    let f = &JOB_FORMAT[stage as usize - 1];
    let f = JobFields {
        context: setting(&f.context),
        seqno: setting(&f.seqno),
        client: setting(&f.client),
        ring: setting(&f.ring),
    };
    let key = JobKey { context: field(ctx, f.context), seqno: field(ctx, f.seqno) };
    let pid_tgid = match stage {
        JobStage::Queue => {
            let pid_tgid = bpf_get_current_pid_tgid();
            if !traced((pid_tgid >> 32) as u32) {
                return;
            }
            #[expect(clippy::let_underscore_must_use, reason = "an LRU map makes room; it does not refuse")]
            let _: Result<(), _> = JOBS.insert(key, pid_tgid, 0);
            pid_tgid
        }
        JobStage::Run | JobStage::Done => {
            // SAFETY: the value is copied out before the entry may be removed.
            let Some(pid_tgid) = (unsafe { JOBS.get(key) }).copied() else { return };
            if stage == JobStage::Done {
                #[expect(clippy::let_underscore_must_use, reason = "an entry already evicted needs nothing done")]
                let _: Result<(), _> = JOBS.remove(key);
            }
            pid_tgid
        }
    };
    let Some(mut slot) = reserve::<JobRecord>() else {
        return;
    };
    let rec = slot.as_mut_ptr();
    // SAFETY: `rec` points at reserved ring memory of the right size; every field is written.
    unsafe {
        (*rec).header = RecordHeader {
            kind: RecordKind::Job as u16,
            func: stage as u16,
            lib: 0,
            pid_tgid,
            ts_ns: bpf_ktime_get_ns(),
        };
        (*rec).context = key.context;
        (*rec).seqno = key.seqno;
        (*rec).client = field(ctx, f.client);
        (*rec).ring = [0; JOB_RING_BYTES];
        if f.ring != JobFields::NONE {
            // A `__data_loc` field: the string's offset in the record in the low 16 bits.
            let loc = ctx.read_at::<u32>(f.ring as usize).unwrap_or(0);
            let at = (loc & 0xffff) as usize;
            if at != 0 {
                let src = ctx.as_ptr().cast::<u8>().wrapping_add(at);
                #[expect(clippy::let_underscore_must_use, reason = "an unread name stays empty, and reads as unnamed")]
                let _: Result<&[u8], _> = bpf_probe_read_kernel_str_bytes(src, &mut (*rec).ring);
            }
        }
    }
    slot.submit(submit_flags());
}
