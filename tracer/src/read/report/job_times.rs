//! A process's GPU scheduler jobs: each job's stages joined by its fence, the time it waited for the
//! hardware ring and the time the GPU spent on it, per ring and per phase.
//!
//! A ring runs its jobs in order, so a job's GPU time is from when the ring could start it (its run stage,
//! or the previous recorded job's done on that ring if later) to its done stage. That is exact when the
//! recorded processes are the ring's only users; another process's jobs between them are counted in.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use crate::{
    read::phase::{Phase, StepSpan},
    trace::event::{Job, JobStage, gpu_time},
};

/// Most jobs held per process while a report is built; later ones are counted, not joined.
const MAX_JOBS: usize = 1 << 20;

/// One job's stages, as read.
#[derive(Default)]
struct Stages {
    queue: Option<u64>,
    run: Option<u64>,
    done: Option<u64>,
    ring: Option<String>,
}

/// A process's job records, joined by (context, seqno).
///
/// A key names one job at a time only: before Linux 6.17 it is the fence's address, which a later job gets
/// again once the memory is freed. So a job is closed at its done stage, and a queue stage for a key still
/// open closes the job that held it (its done stage unseen) and opens a new one.
#[derive(Default)]
pub(super) struct JobsAcc {
    open: HashMap<(u64, u64), Stages>,
    closed: Vec<Stages>,
    clients: BTreeSet<u64>,
    over_limit: u64,
}

impl JobsAcc {
    pub(super) fn add(&mut self, j: &Job) {
        let key = (j.context, j.seqno);
        self.clients.extend(j.client);
        match j.stage {
            JobStage::Queue => {
                if let Some(held) = self.open.remove(&key) {
                    self.close(held);
                }
                if self.held() >= MAX_JOBS {
                    self.over_limit += 1;
                    return;
                }
                self.open.insert(key, Stages { queue: Some(j.ts), ring: j.ring.clone(), ..Stages::default() });
            }
            JobStage::Run => {
                if !self.open.contains_key(&key) && self.held() >= MAX_JOBS {
                    self.over_limit += 1;
                    return;
                }
                self.open.entry(key).or_default().run.get_or_insert(j.ts);
            }
            JobStage::Done => {
                let mut s = self.open.remove(&key).unwrap_or_default();
                s.done = Some(j.ts);
                self.close(s);
            }
        }
    }

    /// Jobs held, open or closed.
    fn held(&self) -> usize {
        self.open.len() + self.closed.len()
    }

    fn close(&mut self, s: Stages) {
        if self.held() >= MAX_JOBS {
            self.over_limit += 1;
        } else {
            self.closed.push(s);
        }
    }

    /// The jobs' report, with each job's phase from the step its queue stage fell in; none for a process
    /// with no job.
    pub(super) fn finish(self, spans: &[StepSpan]) -> Option<JobsReport> {
        if self.held() == 0 && self.over_limit == 0 {
            return None;
        }
        let mut r = JobsReport {
            clients: self.clients.into_iter().collect(),
            over_limit: self.over_limit,
            ..JobsReport::default()
        };
        // Jobs handed to a ring, by ring, in the order it ran them.
        let mut by_ring: BTreeMap<String, Vec<(u64, Option<u64>, u64)>> = BTreeMap::new();
        for s in self.closed.into_iter().chain(self.open.into_values()) {
            let Some(queue) = s.queue else {
                r.without_queue += 1;
                continue;
            };
            r.jobs += 1;
            match s.run {
                Some(run) => by_ring.entry(s.ring.unwrap_or_default()).or_default().push((run, s.done, queue)),
                None => r.unfinished += 1,
            }
        }
        for (ring, mut jobs) in by_ring {
            jobs.sort_unstable();
            // A ring finishes its jobs in order: a job without a done stage before the last one done on its
            // ring did finish, its done stage unseen (the kernel skipped the program, see `write_missed`).
            let last_done = jobs.iter().rposition(|j| j.1.is_some()).map_or(0, |i| i + 1);
            r.unfinished += (jobs.len() - last_done) as u64;
            let (mut ring_report, mut waits, mut gpu) = (RingJobs { ring, ..RingJobs::default() }, vec![], vec![]);
            let mut ring_free = 0u64;
            for (run, done, queue) in jobs.into_iter().take(last_done) {
                let Some(done) = done else {
                    r.done_unseen += 1;
                    continue;
                };
                let busy = gpu_time(run, done, &mut ring_free);
                ring_report.jobs += 1;
                ring_report.busy_ns = ring_report.busy_ns.saturating_add(busy);
                waits.push(run.saturating_sub(queue));
                gpu.push(busy);
                let phase = phase_at(spans, queue);
                let p = r.phases.entry(phase.map_or("outside steps", Phase::as_str)).or_default();
                p.jobs += 1;
                p.busy_ns = p.busy_ns.saturating_add(busy);
            }
            ring_report.wait_ns_median = median(&mut waits);
            ring_report.busy_ns_median = median(&mut gpu);
            r.finished += ring_report.jobs;
            r.busy_ns = r.busy_ns.saturating_add(ring_report.busy_ns);
            r.rings.push(ring_report);
        }
        if spans.is_empty() {
            r.phases.clear();
        }
        Some(r)
    }
}

/// Whether a recording could see GPU scheduler jobs.
#[derive(Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "status", content = "tracepoints")]
pub(crate) enum Coverage {
    /// The trace does not say (written before job times).
    #[default]
    Unknown,
    /// The kernel had no `gpu_scheduler` tracepoints (no DRM-scheduler driver loaded).
    NoTracepoints,
    /// It had them, of a kind this tracer does not know.
    UnknownTracepoints,
    /// Recorded from these tracepoints (queue, run, done).
    Recorded(Vec<String>),
}

impl Coverage {
    pub(super) fn of(o: &crate::trace::Options) -> Self {
        if !o.job_tracepoints.is_empty() {
            return Self::Recorded(o.job_tracepoints.clone());
        }
        match o.kernel_tracepoints.get("gpu_scheduler") {
            Some(true) => Self::UnknownTracepoints,
            Some(false) => Self::NoTracepoints,
            None => Self::Unknown,
        }
    }
}

/// The phase of the step whose span holds `ts` (spans are in time order and do not overlap).
fn phase_at(spans: &[StepSpan], ts: u64) -> Option<Phase> {
    let i = spans.partition_point(|s| s.start <= ts);
    let s = spans.get(i.checked_sub(1)?)?;
    (ts <= s.end).then_some(s.phase)
}

fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// A process's GPU scheduler jobs.
#[derive(Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct JobsReport {
    /// Jobs whose queue stage was recorded.
    pub(crate) jobs: u64,
    /// Of those, the ones whose run and done stages were recorded too (timed).
    pub(crate) finished: u64,
    /// Finished, their done stage not recorded: a later job on the same ring was done (a ring finishes its
    /// jobs in order). Their GPU time after the next job's run stage is counted in that job's.
    pub(crate) done_unseen: u64,
    /// Queued but not done when the recording ended (or their other stages were lost).
    pub(crate) unfinished: u64,
    /// Run or done stages of jobs whose queue stage was not read.
    pub(crate) without_queue: u64,
    /// GPU time of the finished jobs, summed over rings (rings run at once, so it can exceed wall time).
    pub(crate) busy_ns: u64,
    pub(crate) rings: Vec<RingJobs>,
    /// Jobs and GPU time by the phase of the step each was queued in (empty for a process without steps).
    pub(crate) phases: BTreeMap<&'static str, PhaseJobs>,
    /// The DRM client ids the jobs were submitted through (Linux 6.17 on).
    pub(crate) clients: Vec<u64>,
    /// Job records past the most a report holds per process, not joined.
    pub(crate) over_limit: u64,
}

/// Finished jobs on one hardware ring.
#[derive(Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct RingJobs {
    /// The scheduler's name (`gfx_0.0.0`, `comp_1.0.0`); empty where it was not read.
    pub(crate) ring: String,
    pub(crate) jobs: u64,
    pub(crate) busy_ns: u64,
    /// Median time from queued to handed to the ring.
    pub(crate) wait_ns_median: u64,
    /// Median GPU time of a job.
    pub(crate) busy_ns_median: u64,
}

/// Jobs queued in one phase's steps.
#[derive(Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct PhaseJobs {
    pub(crate) jobs: u64,
    pub(crate) busy_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(stage: JobStage, ts: u64, seqno: u64) -> Job {
        Job {
            ts,
            pid: 7,
            tid: 7,
            stage,
            context: 40,
            seqno,
            client: (stage == JobStage::Queue).then_some(3),
            ring: (stage == JobStage::Queue).then(|| "gfx_0.0.0".to_owned()),
        }
    }

    fn span(phase: Phase, start: u64, end: u64) -> StepSpan {
        StepSpan { phase, start, end, kernels: 1, composition: None }
    }

    #[test]
    fn stages_join_by_fence_and_a_ring_runs_its_jobs_in_order() {
        let mut acc = JobsAcc::default();
        // Job 1: queued at 100, run at 110, done at 200. Job 2: queued at 150, run at 160 (while job 1 is
        // on the GPU), done at 260: its GPU time starts when job 1 is done. Job 3: queued, never done.
        for j in [
            job(JobStage::Queue, 100, 1),
            job(JobStage::Run, 110, 1),
            job(JobStage::Queue, 150, 2),
            job(JobStage::Run, 160, 2),
            job(JobStage::Done, 200, 1),
            job(JobStage::Done, 260, 2),
            job(JobStage::Queue, 300, 3),
            job(JobStage::Done, 500, 9),
            // Job 4 ran, its done stage unseen; job 5 after it on the ring was done: 4 finished too.
            job(JobStage::Queue, 400, 4),
            job(JobStage::Run, 410, 4),
            job(JobStage::Queue, 420, 5),
            job(JobStage::Run, 430, 5),
            job(JobStage::Done, 700, 5),
            // Job 6 ran last on the ring, no done stage: unfinished.
            job(JobStage::Queue, 800, 6),
            job(JobStage::Run, 810, 6),
        ] {
            acc.add(&j);
        }
        let spans = [span(Phase::Prefill, 90, 120), span(Phase::Decode, 140, 180)];
        let r = acc.finish(&spans).unwrap();
        assert_eq!((r.jobs, r.finished, r.done_unseen, r.unfinished, r.without_queue), (6, 3, 1, 2, 1));
        // Job 5's GPU time runs from its run stage (job 4's done is unseen): it holds the rest of job 4's.
        assert_eq!(r.busy_ns, 90 + 60 + 270);
        assert_eq!(r.clients, [3]);
        assert_eq!(
            r.rings,
            [RingJobs { ring: "gfx_0.0.0".into(), jobs: 3, busy_ns: 420, wait_ns_median: 10, busy_ns_median: 90 }]
        );
        assert_eq!(r.phases["prefill"], PhaseJobs { jobs: 1, busy_ns: 90 });
        assert_eq!(r.phases["decode"], PhaseJobs { jobs: 1, busy_ns: 60 });
        assert_eq!(r.phases["outside steps"], PhaseJobs { jobs: 1, busy_ns: 270 });
    }

    #[test]
    fn a_fence_address_a_later_job_gets_again_names_two_jobs() {
        // Before 6.17 the key is the fence's address: job 2 gets job 1's once job 1 is done, and job 3 gets
        // job 2's while job 2's done stage went unseen.
        let mut acc = JobsAcc::default();
        for j in [
            job(JobStage::Queue, 10, 0),
            job(JobStage::Run, 20, 0),
            job(JobStage::Done, 30, 0),
            job(JobStage::Queue, 40, 0),
            job(JobStage::Run, 50, 0),
            job(JobStage::Queue, 60, 0),
            job(JobStage::Run, 70, 0),
            job(JobStage::Done, 90, 0),
        ] {
            acc.add(&j);
        }
        let r = acc.finish(&[]).unwrap();
        assert_eq!((r.jobs, r.finished, r.done_unseen, r.unfinished), (3, 2, 1, 0));
        assert_eq!(r.busy_ns, 10 + 20);
    }

    #[test]
    fn a_job_outside_every_step_is_said_so() {
        let mut acc = JobsAcc::default();
        for j in [job(JobStage::Queue, 10, 1), job(JobStage::Run, 20, 1), job(JobStage::Done, 30, 1)] {
            acc.add(&j);
        }
        let r = acc.finish(&[span(Phase::Decode, 100, 200)]).unwrap();
        assert_eq!(r.phases["outside steps"], PhaseJobs { jobs: 1, busy_ns: 10 });
        assert_eq!(phase_at(&[span(Phase::Decode, 100, 200)], 150), Some(Phase::Decode));
        assert_eq!(phase_at(&[span(Phase::Decode, 100, 200)], 201), None);
        assert!(JobsAcc::default().finish(&[]).is_none());
    }
}
