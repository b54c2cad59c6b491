//! GPU job times from the kernel's GPU scheduler, on a real kernel: Debian 12's 6.1, booted under qemu with
//! its own `gpu-sched` module, where the test double `fixtures/kmod/sched_double.c` (a GPU driver without a
//! GPU: one ring, each job's fence signalled a fixed time after the ring could start it) takes jobs that
//! `submit_jobs` writes. tracer runs inside the guest, with its real eBPF programs on the real
//! `gpu_scheduler` tracepoints. `cargo xtask build` prepares the kernel and the module
//! (`fixtures/kmod/guest.sh --prepare`).

use std::collections::BTreeMap;

use integration_tests::*;

/// The simulated GPU time of one job (the module's `gpu_us`).
const GPU_US: u64 = 300;

/// Runs `script` in the guest as root, with tracer at `/guest/bin/tracer`; what it printed.
fn in_guest(script: &str) -> String {
    guest(script, &[("GUEST_GPU_US", &GPU_US.to_string())])
}

fn jobs(records: &[Line]) -> Vec<&trace::Job> {
    records.iter().filter_map(|r| if let Line::Job(j) = r { Some(j) } else { None }).collect()
}

/// A command's jobs are recorded at each stage with the submitting process, joined by fence, and timed by
/// the ring's order; a recording of another process, beside it, records none of them (the programs filter
/// in the kernel); the live metrics count the jobs done.
#[test]
fn a_process_s_gpu_scheduler_jobs_are_recorded_and_timed_on_a_real_kernel() {
    let out = in_guest(
        "tracer record -q -o /tmp/a.jsonl -- /submit_jobs 8 2 || exit 1
         tracer record -q -o /tmp/b.jsonl -- sleep 3 & rec=$!
         sleep 1.5; /submit_jobs 4 1; wait $rec || exit 1
         ip link set lo up
         tracer record -q --metrics 127.0.0.1:9464 -o /tmp/m.jsonl -- sh -c \
           '/submit_jobs 8 2; sleep 0.5; wget -qO- http://127.0.0.1:9464/metrics > /tmp/metrics.txt' || exit 1
         for t in a b m; do echo \"@@BEGIN $t\"; cat /tmp/$t.jsonl; echo \"@@END $t\"; done
         echo '@@BEGIN metrics'; cat /tmp/metrics.txt; echo '@@END metrics'
         echo '@@BEGIN report'; tracer report --json /tmp/a.jsonl; echo '@@END report'",
    );
    let a = guest_trace(&out, "a");
    let header = a.iter().find_map(|r| if let Line::Header(h) = r { Some(h) } else { None }).expect("header");
    assert_eq!(header.options.job_tracepoints, ["drm_sched_job", "drm_run_job", "drm_sched_process_job"]);
    assert!(header.kernel_release.starts_with("6.1."), "Debian 12's kernel: {}", header.kernel_release);
    let submitter = a
        .iter()
        .find_map(|r| if let Line::Process(p) = r { (p.comm == "submit_jobs").then_some(p.pid) } else { None })
        .expect("submit_jobs was recorded");
    // The queue and run stages fire in process context, every one recorded. A done stage fires in an
    // interrupt: one that comes while another tracer program runs on its CPU is skipped by the kernel
    // (counted by kernels from 6.7 on; this one, 6.1, does not count it).
    let missed = footer(&a).counters.get("job_stages_missed").copied().unwrap_or(0);
    let jobs_a = jobs(&a);
    let stage = |st: trace::JobStage| jobs_a.iter().filter(|j| j.stage == st).count();
    assert_eq!((stage(trace::JobStage::Queue), stage(trace::JobStage::Run)), (8, 8), "{jobs_a:#?}");
    // Per job (its fence), the three stages in order, all with the submitting process; the ring named at
    // the queue stage.
    let mut by_fence: BTreeMap<(u64, u64), Vec<&trace::Job>> = BTreeMap::new();
    for j in &jobs_a {
        assert_eq!(j.pid, submitter, "{j:?}");
        by_fence.entry((j.context, j.seqno)).or_default().push(j);
    }
    assert_eq!(by_fence.len(), 8);
    let mut done = 0;
    for stages in by_fence.values() {
        let s: Vec<trace::JobStage> = stages.iter().map(|j| j.stage).collect();
        assert_eq!(s[..2], [trace::JobStage::Queue, trace::JobStage::Run], "{stages:?}");
        assert!(stages[0].ts <= stages[1].ts, "{stages:?}");
        assert_eq!(stages[0].ring.as_deref(), Some("double_ring"));
        if let Some(d) = stages.get(2) {
            assert_eq!(d.stage, trace::JobStage::Done);
            assert!(stages[1].ts < d.ts, "{stages:?}");
            // In interrupt context: its process is the submitter's, not whoever ran then.
            assert_eq!(d.tid, stages[0].tid);
            done += 1;
        }
    }
    // On kernels that count a skipped program run (6.7 on), each missing done stage is counted.
    assert!(missed == 0 || done + missed == 8, "{done} done, {missed} counted missed");
    // Another recording, of a command that submits nothing, beside jobs of a process it does not trace.
    let b = guest_trace(&out, "b");
    assert!(jobs(&b).is_empty(), "jobs of an untraced process were recorded: {:#?}", jobs(&b));

    let report: serde_json::Value = serde_json::from_str(section(&out, "report")).expect("report JSON");
    assert_eq!(report["trace"]["gpu_jobs"]["status"], "recorded");
    let p = report["processes"].as_array().unwrap().iter().find(|p| p["comm"] == "submit_jobs").expect("process");
    let g = &p["gpu_jobs"];
    let count = |key: &str| g[key].as_u64().unwrap_or(u64::MAX);
    assert_eq!((count("jobs"), count("finished")), (8, done), "{g}");
    // A job whose done stage was skipped finished all the same when a later job on its ring was done (the
    // ring runs them in order): only the last job's can stay unknown.
    assert_eq!(count("done_unseen") + count("unfinished"), 8 - done, "{g}");
    assert!(count("unfinished") <= 1, "{g}");
    let rings = g["rings"].as_array().unwrap();
    assert_eq!(rings.len(), 1);
    assert_eq!(rings[0]["ring"], "double_ring");
    // The ring runs one job at a time, each for at least GPU_US (its timer never fires early): every
    // job's GPU time, counted from when the ring could start it, is at least that.
    assert!(rings[0]["busy_ns_median"].as_u64().unwrap() >= GPU_US * 1000, "{g}");
    assert!(g["busy_ns"].as_u64().unwrap() >= done * GPU_US * 1000, "{g}");

    // The live metrics count the same jobs done as the recording's own trace holds.
    let metered = guest_trace(&out, "m");
    let done_m = jobs(&metered).iter().filter(|j| j.stage == trace::JobStage::Done).count() as u64;
    let metrics = section(&out, "metrics");
    let series = r#"tracer_gpu_jobs_total{comm="submit_jobs",role="",model="",ring="double_ring"} "#;
    let counted = metrics.lines().find_map(|l| l.strip_prefix(series)).and_then(|v| v.parse::<u64>().ok());
    assert_eq!(counted, Some(done_m), "{metrics}");
    assert!(metrics.contains("tracer_gpu_job_seconds_total{"), "{metrics}");
}
