//! GPU scheduler jobs for the live metrics: each job's stages joined as they arrive, its GPU time by its
//! ring's order (as the report counts it), bounded in memory.

use std::collections::HashMap;

use crate::{
    trace::event::gpu_time,
    trace::{Job, JobStage},
};

/// A process's labels: (comm, role, model).
pub(super) type Labels = (String, String, String);

/// Jobs queued and not yet done held at once; more are counted, not timed.
const MAX_OPEN: usize = 65_536;
/// Rings whose last done time is kept (a machine has tens); more are not timed.
const MAX_RINGS: usize = 1024;

/// A queued job: its process and its labels then, its ring, and when the ring took it.
struct Open {
    pid: u32,
    labels: Labels,
    ring: String,
    run: Option<u64>,
}

/// A job done: its process and labels, its ring and GPU time in nanoseconds.
pub(super) struct Done {
    pub(crate) pid: u32,
    pub(crate) labels: Labels,
    pub(crate) ring: String,
    pub(crate) busy_ns: u64,
}

#[derive(Default)]
pub(super) struct LiveJobs {
    open: HashMap<(u64, u64), Open>,
    /// Per ring, when its last job was done: the next one's GPU time starts no earlier.
    ring_free: HashMap<String, u64>,
    /// Jobs not timed: past [`MAX_OPEN`] or [`MAX_RINGS`], whose queue stage was not seen, or whose done
    /// stage was not (known when a later job gets its fence address; until then it stays open).
    pub(crate) untimed: u64,
}

impl LiveJobs {
    /// One stage (`labels`: its process's, at the queue stage); a job's done stage gives it back with its GPU
    /// time.
    pub(super) fn stage(&mut self, j: &Job, labels: Option<&Labels>) -> Option<Done> {
        let key = (j.context, j.seqno);
        match j.stage {
            JobStage::Queue => {
                // Not held: its done stage finds nothing, and counts it untimed.
                if self.open.len() >= MAX_OPEN && !self.open.contains_key(&key) {
                    return None;
                }
                // A key still open names a job whose done stage went unseen (a fence address reused): untimed.
                let ring = j.ring.clone().unwrap_or_default();
                let labels = labels.cloned().unwrap_or_default();
                if self.open.insert(key, Open { pid: j.pid, labels, ring, run: None }).is_some() {
                    self.untimed += 1;
                }
                None
            }
            JobStage::Run => {
                if let Some(o) = self.open.get_mut(&key) {
                    o.run.get_or_insert(j.ts);
                }
                None
            }
            JobStage::Done => {
                let Some(o) = self.open.remove(&key) else {
                    self.untimed += 1;
                    return None;
                };
                if self.ring_free.len() >= MAX_RINGS && !self.ring_free.contains_key(&o.ring) {
                    self.untimed += 1;
                    return None;
                }
                let free = self.ring_free.entry(o.ring.clone()).or_default();
                let busy_ns = gpu_time(o.run.unwrap_or(j.ts), j.ts, free);
                Some(Done { pid: o.pid, labels: o.labels, ring: o.ring, busy_ns })
            }
        }
    }
}
