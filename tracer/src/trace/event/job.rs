//! A GPU scheduler job's stage, from the kernel's `gpu_scheduler` tracepoints to the trace file.

use serde::{Deserialize, Serialize};

/// A stage of a GPU scheduler job: one type from the ring to the trace file.
pub use tracer_common::JobStage;

/// A GPU scheduler job of a traced process at one stage (the kernel's `gpu_scheduler` tracepoints).
///
/// `pid` and `tid` are the submitting thread's at every stage; `ts` is when the stage was reached. The
/// stages of one job share (`context`, `seqno`): its finished fence's context and sequence number (Linux
/// 6.17 on), or its address and 0 (before).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub stage: JobStage,
    pub context: u64,
    pub seqno: u64,
    /// The submitting file's DRM client id (queue stage, Linux 6.17 on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<u64>,
    /// The scheduler's ring (`gfx_0.0.0`, `comp_1.0.0`; queue stage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ring: Option<String>,
}

/// A job's GPU time on a ring that runs its jobs in order.
///
/// From when the ring could start it (its run stage, or the ring's previous job done, if that is later) to
/// its done stage. `ring_free` (that previous done) moves on to this one's.
pub(crate) fn gpu_time(run: u64, done: u64, ring_free: &mut u64) -> u64 {
    let busy = done.saturating_sub(run.max(*ring_free));
    *ring_free = (*ring_free).max(done);
    busy
}
