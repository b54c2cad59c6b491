//! The GPU scheduler layer: a job of the kernel's DRM GPU scheduler (`gpu_scheduler` tracepoints), at the
//! stage it reached, and where this kernel's tracepoints keep the fields read from it.
//!
//! Drivers that submit through the DRM scheduler (amdgpu command submission, which is what RADV and
//! Mesa's other drivers use) queue each job from the submitting process's ioctl, hand it to the hardware
//! ring later from the scheduler's worker, and see its fence signal when the GPU is done. HIP's user-mode
//! queues bypass it.

use crate::RecordHeader;

crate::wire::wire_enum! {
    /// The stages of a job tracer records: [`RecordHeader::func`] of a [`JobRecord`] on the ring, and a
    /// `job` record's `stage` in the trace (its name, kebab-case).
    #[cfg_attr(feature = "user", derive(serde::Serialize, serde::Deserialize))]
    #[cfg_attr(feature = "user", serde(rename_all = "kebab-case"))]
    pub enum JobStage {
        /// Pushed to its entity by the submitting process (`drm_sched_job_queue`; before 6.17 `drm_sched_job`).
        Queue = 1,
        /// Handed to the hardware ring by the scheduler (`drm_sched_job_run`; before 6.17 `drm_run_job`).
        Run = 2,
        /// Its fence signalled: the GPU finished it (`drm_sched_job_done`; before 6.17 `drm_sched_process_job`).
        Done = 3,
    }
}

/// Bytes of the ring's name kept from a queued job (`gfx_0.0.0`, `comp_1.0.0`, `sdma0`).
pub const JOB_RING_BYTES: usize = 32;

/// A job of a traced process at one stage.
///
/// The header's `pid_tgid` is the submitting thread's at every stage: the run and done stages fire in
/// the scheduler's worker and in interrupt context, and take it from the queued job.
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobRecord {
    pub header: RecordHeader,
    /// The job's key: its finished fence's context (6.17 on) or address (before).
    pub context: u64,
    /// Its finished fence's sequence number (6.17 on), else 0.
    pub seqno: u64,
    /// The DRM client id of the submitting file (6.17 on, queue stage), else 0.
    pub client: u64,
    /// The scheduler's (ring's) name at the queue stage, NUL-padded; empty at the other stages.
    pub ring: [u8; JOB_RING_BYTES],
}

/// The key the kernel joins a job's stages by: (context, seqno) of [`JobRecord`].
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct JobKey {
    pub context: u64,
    pub seqno: u64,
}

/// Where one stage's tracepoint keeps the fields tracer reads: byte offsets into its record, or
/// [`JobFields::NONE`] for a field this kernel's tracepoint lacks.
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobFields {
    /// A u64 (6.17 on: `fence_context`) or a pointer (before: `fence`).
    pub context: u32,
    pub seqno: u32,
    pub client: u32,
    /// A `__data_loc char[]` field: a u32 whose low half is the string's offset in the record.
    pub ring: u32,
}

impl JobFields {
    pub const NONE: u32 = u32::MAX;
    /// A stage tracer does not attach.
    pub const ABSENT: Self = Self { context: Self::NONE, seqno: Self::NONE, client: Self::NONE, ring: Self::NONE };
}

/// Where this kernel's three stage tracepoints keep their fields, indexed by [`JobStage`] less one: set
/// at load from the tracepoints' format files.
pub type JobFormat = [JobFields; 3];
