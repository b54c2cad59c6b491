//! Live counts from records: per process labels, families, phases; kept after a process exits.

use tracer_common::ApiFunc;

use super::*;
use crate::{
    trace::event::MemcpyKind,
    trace::{Exit, JobStage, Kernel},
};

const MMVQ1: &str = "_Z13mul_mat_vec_qIL9ggml_type12ELi1ELb0EEvPKvS2_PKiPfjjj";
const ROPE: &str = "_Z9rope_normILb1EEvPKfPfiiiii";

fn launch(pid: u32, kernel: u32, ts: u64) -> Line {
    Line::Launch(Launch::for_test(pid, Some(kernel), ts))
}

fn call(pid: u32, api: ApiFunc, kind: Option<MemcpyKind>, ts: u64) -> Line {
    let v = serde_json::json!({"ts": ts, "pid": pid, "tid": pid, "lib": 0, "api": api.name(), "ret": 0, "dur": 0, "kind": kind});
    Line::Call(Box::new(serde_json::from_value::<Call>(v).unwrap()))
}

/// The value of the sample line that starts with `series` (its name and labels).
fn sample(text: &str, series: &str) -> Option<u64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn counts_by_process_family_and_phase_and_keeps_them_after_exit() {
    let mut m = Metrics::new(true);
    let runner = |pid| {
        Line::Process(Process {
            pid,
            comm: "ollama".into(),
            role: Some(Role::Runner),
            model_name: Some("qwen3:8b".into()),
            ..Process::default()
        })
    };
    for r in [
        runner(10),
        Line::Kernel(Kernel { id: 1, pid: 10, name: MMVQ1.into(), ..Kernel::default() }),
        Line::Kernel(Kernel { id: 2, pid: 10, name: ROPE.into(), ..Kernel::default() }),
    ] {
        m.record(&r);
    }
    // Two decode tokens: each one MMVQ over one column and a RoPE, the logits copied down, a sync.
    for t in 0..2u64 {
        let ts = 100 * (t + 1);
        m.record(&launch(10, 1, ts));
        m.record(&launch(10, 2, ts + 1));
        m.record(&call(10, ApiFunc::HipMemcpy, Some(MemcpyKind::DeviceToHost), ts + 2));
        m.record(&call(10, ApiFunc::HipStreamSynchronize, None, ts + 3));
    }
    let labels = r#"comm="ollama",role="runner",model="qwen3:8b""#;
    let text =
        m.render(&Session { dropped: BTreeMap::from([("ring".into(), 3)]), processes_traced: 1, ..Session::default() });
    assert_eq!(sample(&text, &format!("tracer_kernel_launches_total{{{labels}}}")), Some(4), "{text}");
    assert_eq!(sample(&text, &format!("tracer_kernel_executions_total{{{labels},family=\"MMVQ Q4_K\"}}")), Some(2));
    assert_eq!(sample(&text, &format!("tracer_phase_steps_total{{{labels},phase=\"decode\"}}")), Some(2));
    assert_eq!(sample(&text, &format!("tracer_phase_tokens_total{{{labels},phase=\"decode\"}}")), Some(2));
    assert_eq!(sample(&text, &format!("tracer_api_calls_total{{{labels},category=\"sync\"}}")), Some(2));
    assert_eq!(sample(&text, "tracer_records_dropped_total{kind=\"ring\"}"), Some(3));
    assert!(text.trim_end().ends_with("# EOF"), "OpenMetrics text ends with # EOF");

    // The runner exits and another with the same model starts: counts add up under the same labels, and
    // the first one's state is gone.
    m.record(&Line::Exit(Exit { ts: 1000, pid: 10, code: Some(0), signal: None }));
    assert_eq!(m.processes_held(), 0);
    m.record(&runner(11));
    m.record(&Line::Kernel(Kernel { id: 3, pid: 11, name: ROPE.into(), ..Kernel::default() }));
    m.record(&launch(11, 3, 2000));
    let text = m.render(&Session::default());
    assert_eq!(sample(&text, &format!("tracer_kernel_launches_total{{{labels}}}")), Some(5), "{text}");
    assert_eq!(sample(&text, &format!("tracer_phase_steps_total{{{labels},phase=\"decode\"}}")), Some(2));
}

/// A server's steps from its batches: a mixed step and a decode step of two sequences, counted by phase,
/// and their tokens by kind.
#[test]
fn steps_from_batches_count_prompt_and_decode_tokens() {
    let mut m = Metrics::new(true);
    m.record(&Line::Process(Process { pid: 20, comm: "llama-server".into(), ..Process::default() }));
    let batch = |ts: u64, runs: &[(i32, i32, u32)]| {
        Line::Batch(StepBatch {
            ts,
            pid: 20,
            tid: 20,
            runs: runs
                .iter()
                .map(|&(seq, pos, tokens)| crate::trace::event::SeqRun {
                    seq,
                    pos: Some(pos),
                    tokens,
                    outputs: 1,
                    last_output: true,
                    shared: 0,
                })
                .collect(),
            positions: true,
            seq_ids: true,
            ..StepBatch::default()
        })
    };
    m.record(&batch(100, &[(0, 0, 11)]));
    m.record(&batch(200, &[(0, 11, 1), (1, 0, 23)]));
    m.record(&batch(300, &[(0, 12, 1), (1, 23, 1)]));
    m.record(&batch(400, &[(0, 13, 1)]));
    let labels = r#"comm="llama-server",role="",model="""#;
    let text = m.render(&Session::default());
    let steps = |phase: &str| sample(&text, &format!("tracer_phase_steps_total{{{labels},phase=\"{phase}\"}}"));
    assert_eq!((steps("prefill"), steps("mixed"), steps("decode")), (Some(1), Some(1), Some(1)), "{text}");
    let tokens = |kind: &str| sample(&text, &format!("tracer_batch_tokens_total{{{labels},kind=\"{kind}\"}}"));
    assert_eq!((tokens("prompt"), tokens("decode")), (Some(34), Some(3)), "{text}");
    // A batch that claims two trillion tokens past the one read, with no kernel confirming any: the phase's
    // tokens count what was read.
    let before = sample(&text, &format!("tracer_phase_tokens_total{{{labels},phase=\"decode\"}}"));
    let claim = |ts: u64| {
        let mut r = batch(ts, &[(0, 14, 1)]);
        if let Line::Batch(b) = &mut r {
            b.n_tokens = i32::MAX;
            b.unread = 2_000_000_000;
        }
        r
    };
    m.record(&claim(500));
    m.record(&batch(600, &[(0, 15, 1)]));
    let text = m.render(&Session::default());
    let after = sample(&text, &format!("tracer_phase_tokens_total{{{labels},phase=\"decode\"}}"));
    // Two more decode steps closed (the one before the claim, and the claim's own): one token each.
    assert_eq!(after, before.map(|n| n + 2), "{text}");
}

/// Any user names their processes: past 64 distinct names, processes count under `comm="other"`, and the
/// scrape says the cap and how many were folded. Ollama's processes keep their name. Without the label,
/// processes are told apart by role and model alone.
#[test]
fn process_names_chosen_by_users_are_bounded_label_values() {
    let mut m = Metrics::new(true);
    for pid in 0..2000u32 {
        m.record(&Line::Process(Process { pid, comm: format!("name{pid}"), ..Process::default() }));
        m.record(&launch(pid, 1, u64::from(pid)));
        m.record(&Line::Exit(Exit { ts: u64::from(pid) + 1, pid, code: Some(0), signal: None }));
    }
    m.record(&Line::Process(Process {
        pid: 9000,
        comm: "ollama".into(),
        role: Some(Role::Runner),
        ..Process::default()
    }));
    m.record(&launch(9000, 1, 5000));
    let text = m.render(&Session::default());
    let series: Vec<&str> = text.lines().filter(|l| l.starts_with("tracer_kernel_launches_total{")).collect();
    assert_eq!(series.len(), MAX_COMMS + 2, "{series:?}");
    assert_eq!(sample(&text, r#"tracer_kernel_launches_total{comm="other",role="",model=""}"#), Some(2000 - 64));
    assert_eq!(sample(&text, r#"tracer_kernel_launches_total{comm="ollama",role="runner",model=""}"#), Some(1));
    assert_eq!(sample(&text, "tracer_metrics_comm_folded_total"), Some(2000 - 64), "{text}");
    assert_eq!(sample(&text, "tracer_metrics_comm_values_max"), Some(64));
    assert!(text.len() < 100_000, "{} bytes", text.len());

    let mut m = Metrics::new(false);
    m.record(&Line::Process(Process { pid: 1, comm: "anything".into(), ..Process::default() }));
    m.record(&launch(1, 1, 1));
    let text = m.render(&Session::default());
    assert_eq!(sample(&text, r#"tracer_kernel_launches_total{role="",model=""}"#), Some(1), "{text}");
}

#[test]
fn gpu_jobs_count_per_ring_with_their_ring_ordered_time_also_after_exit() {
    use JobStage::{Done, Queue, Run};
    let mut m = Metrics::new(true);
    m.record(&Line::Process(Process { pid: 5, comm: "vk".into(), ..Process::default() }));
    let job = |stage, ts, seqno| {
        Line::Job(Job {
            ts,
            pid: 5,
            tid: 5,
            stage,
            context: 1,
            seqno,
            client: None,
            ring: (stage == Queue).then(|| "gfx_0.0.0".to_owned()),
        })
    };
    // Job 2 was handed to the ring while job 1 ran: its time starts at job 1's done.
    for r in [job(Queue, 0, 1), job(Run, 1_000, 1), job(Queue, 2_000, 2), job(Run, 3_000, 2), job(Done, 500_001_000, 1)]
    {
        m.record(&r);
    }
    // The process exits before its last job is done: the job still counts under its labels.
    m.record(&Line::Exit(Exit { ts: 600_000_000, pid: 5, code: Some(0), signal: None }));
    m.record(&job(Done, 1_500_001_000, 2));
    let text = m.render(&Session::default());
    let series = r#"{comm="vk",role="",model="",ring="gfx_0.0.0"}"#;
    assert_eq!(sample(&text, &format!("tracer_gpu_jobs_total{series}")), Some(2), "{text}");
    let seconds = text.lines().find_map(|l| l.strip_prefix(&format!("tracer_gpu_job_seconds_total{series} ")));
    assert_eq!(seconds, Some("1.5"), "{text}");
    assert_eq!(sample(&text, "tracer_gpu_jobs_untimed_total"), Some(0));
    // A job whose done stage went unseen is known when a later job gets its key: untimed, not lost.
    for r in [job(Queue, 2_000_000_000, 3), job(Run, 2_000_001_000, 3), job(Queue, 2_100_000_000, 3)] {
        m.record(&r);
    }
    assert_eq!(sample(&m.render(&Session::default()), "tracer_gpu_jobs_untimed_total"), Some(1));
}

/// A body past its byte bound folds the label sets with the fewest executions into `comm="other"`, says how
/// many, and keeps the busiest set's own series and every total.
#[test]
fn a_body_past_its_byte_bound_folds_the_smallest_label_sets() {
    let mut m = Metrics::new(true);
    let runners = 3_000u32;
    for pid in 1..=runners {
        m.record(&Line::Process(Process {
            pid,
            comm: "ollama".into(),
            role: Some(Role::Runner),
            model_name: Some(format!("model{pid}:latest")),
            ..Process::default()
        }));
        m.record(&Line::Kernel(Kernel { id: pid, pid, name: ROPE.into(), ..Kernel::default() }));
        // The last runner is the busiest.
        for t in 0..if pid == runners { 50u64 } else { 1 } {
            m.record(&launch(pid, pid, t + 1));
        }
    }
    let text = m.render(&Session::default());
    assert!(text.len() <= MAX_BODY, "{} bytes", text.len());
    assert!(text.trim_end().ends_with("# EOF"));
    let folded = sample(&text, "tracer_metrics_label_sets_folded_total").unwrap();
    assert!(folded > 0 && folded < u64::from(runners), "{folded}");
    let busiest =
        format!(r#"tracer_kernel_launches_total{{comm="ollama",role="runner",model="model{runners}:latest"}}"#);
    assert_eq!(sample(&text, &busiest), Some(50), "{text}");
    let other = sample(&text, r#"tracer_kernel_launches_total{comm="other",role="",model=""}"#).unwrap();
    let kept: u64 = text
        .lines()
        .filter(|l| l.starts_with("tracer_kernel_launches_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert_eq!(kept, u64::from(runners) - 1 + 50, "every launch counted once, folded ({other}) or not");
}

#[test]
fn the_recordings_counters_so_far_are_one_series_each_by_name() {
    let mut m = Metrics::new(true);
    let counted = BTreeMap::from([("ring_records".to_owned(), 93), ("kernel_handles_over_budget_uid_0".to_owned(), 2)]);
    let text = m.render(&Session { counted, ..Session::default() });
    assert_eq!(sample(&text, "tracer_counted{name=\"ring_records\"}"), Some(93), "{text}");
    assert_eq!(sample(&text, "tracer_counted{name=\"kernel_handles_over_budget_uid_0\"}"), Some(2));
    assert!(text.contains("# TYPE tracer_counted gauge"));
}
