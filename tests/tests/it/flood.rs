//! Hostile neighbours, round four: one unprivileged user's many processes, each within its own limits, under
//! a recording of every process. 64 processes of `nobody` each launch 20 000 distinct function pointers never
//! registered (`mini_runner handles`, on Debian's HIP runtime: 1.28 million invented kernel handles) while a
//! canary of another user makes a known number of launches of a registered kernel. Before the budgets per
//! user, the recorder held a million unnamed kernels (413 MB, kept after the flood), its queue filled and
//! dropped 1 096 877 records, other users' process records among them, and `report` took 1.6 GB.

use std::{
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use integration_tests::*;

/// The flood: processes of one user, and the handles each invents.
const PROCESSES: usize = 64;
const HANDLES: u64 = 20_000;
/// The canary's launches (`mini_runner loop N`: N launches of `add_f32`, registered), as another user.
const CANARY_LAUNCHES: u64 = 1000;
const CANARY_UID: &str = "65533";

/// A command run as `uid`/`gid` without supplementary groups (util-linux's setpriv, on Debian 12).
fn as_user(uid: &str, gid: &str, args: &[&str]) -> Command {
    let mut c = Command::new("setpriv");
    c.args([&format!("--reuid={uid}"), &format!("--regid={gid}"), "--clear-groups"]);
    c.arg(fixture("mini_runner")).args(args).stdout(Stdio::null()).stderr(Stdio::null());
    c
}

/// A process's resident KiB now (`VmRSS`).
fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).unwrap_or_default();
    line.trim().trim_end_matches("kB").trim().parse().unwrap_or(0)
}

/// Lines of the trace matching an extended regular expression, counted by grep in a child (a million
/// records read in this process would stay in its memory for the tests after it).
fn count(trace: &std::path::Path, pattern: &str) -> u64 {
    let o = Command::new("grep").args(["-cE", pattern]).arg(trace).output().unwrap();
    String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
}

/// The launches `report --json` counts for process `pid` (at most 512 MiB of `report`).
fn canary_launches(out: &std::path::Path, pid: u32) -> u64 {
    let (status, report_kib, text) =
        run_measured(Command::new(tracer_bin()).args(["report", "--json"]).arg(out), Duration::from_mins(5));
    assert!(status.success(), "{text}");
    assert!(report_kib <= 512 << 10, "report --json peaked at {report_kib} KiB");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let p = v["processes"].as_array().unwrap().iter().find(|p| p["pid"].as_u64() == Some(u64::from(pid)));
    let p = p.expect("the canary is in the report");
    p["kernels"].as_array().unwrap().iter().map(|k| k["launches"].as_u64().unwrap_or(0)).sum()
}

#[test]
fn one_users_64_processes_inventing_handles_cost_only_that_users_budget() {
    let out = scratch("flood").join("t.jsonl");
    let rec = Recording::start(&out, &[]);
    let started = Instant::now();
    let handles = HANDLES.to_string();
    let flood: Vec<Child> =
        std::iter::repeat_with(|| as_user("nobody", "nogroup", &["handles", &handles]).spawn().unwrap())
            .take(PROCESSES)
            .collect();
    // The canary comes while the flood runs: its launches wait in the same queue as the flood's.
    std::thread::sleep(Duration::from_secs(2));
    let mut canary = as_user(CANARY_UID, CANARY_UID, &["loop", &CANARY_LAUNCHES.to_string()]).spawn().unwrap();
    let canary_pid = canary.id();
    assert!(canary.wait().unwrap().success());
    for mut p in flood {
        assert!(p.wait().unwrap().success());
    }
    let workload = started.elapsed();
    // The flood over and its processes let go: what the recorder still holds.
    std::thread::sleep(Duration::from_secs(3));
    let after_kib = rss_kib(rec.pid());
    rec.signal(libc::SIGINT);
    let (_, said) = rec.wait();
    let o = Command::new("tail").args(["-n", "1"]).arg(&out).output().unwrap();
    let Ok(Line::Footer(f)) = serde_json::from_slice::<Line>(&o.stdout) else { panic!("no footer: {said}") };
    let counter = |name: &str| f.counters.get(name).copied().unwrap_or(0);
    let drops = |kind: &str| f.drops.get(kind).map_or(0, |v| v.iter().sum::<u64>());
    let over_budget = counter("kernel_handles_over_budget_uid_65534");
    println!(
        "flood: {PROCESSES} processes x {HANDLES} handles in {workload:?}; tracer peak {} KiB, {after_kib} KiB after \
         the flood, {} us of CPU, queue peak {} bytes; {over_budget} handles of uid 65534 past its budget, \
         {} in all past a limit; {} records dropped ({} proc, {} queue:proc), {} process records in the reserve",
        counter("tracer_max_rss_kib"),
        counter("tracer_cpu_us"),
        counter("queue_peak_bytes"),
        counter("kernel_handles_over_limit"),
        f.total_drops(),
        drops("proc"),
        drops("queue:proc"),
        counter("queue_reserve_records"),
    );
    // No process record lost, in the ring or in the queue.
    assert_eq!(drops("proc") + drops("queue:proc"), 0, "{:?}", f.drops);
    // The flood's user was refused past its budget, in the footer by its uid; the canary's user never.
    assert!(over_budget >= PROCESSES as u64 * HANDLES / 2, "{:?}", f.counters);
    assert!(over_budget <= counter("kernel_handles_over_limit"), "{:?}", f.counters);
    assert_eq!(counter(&format!("kernel_handles_over_budget_uid_{CANARY_UID}")), 0, "{:?}", f.counters);
    // The recorder's own peak, and what it holds once the flood has ended: at most 150 MiB each.
    let peak = counter("tracer_max_rss_kib");
    assert!(peak > 0 && peak <= 150 << 10, "tracer peaked at {peak} KiB");
    assert!(after_kib > 0 && after_kib <= 150 << 10, "tracer held {after_kib} KiB after the flood");
    // The canary: its exec and exit records, and every launch (written one by one or within runs).
    let pid = canary_pid.to_string();
    assert!(count(&out, &format!(r#"^\{{"type":"process","pid":{pid},"#)) >= 1, "{said}");
    assert_eq!(count(&out, &format!(r#"^\{{"type":"exit","ts":[0-9]+,"pid":{pid},"#)), 1, "{said}");
    assert_eq!(canary_launches(&out, canary_pid), CANARY_LAUNCHES);
    // The report in words: at most 512 MiB, the user past its budget said in one line.
    let started = Instant::now();
    let (status, report_kib, text) =
        run_measured(Command::new(tracer_bin()).arg("report").arg(&out), Duration::from_mins(5));
    let took = started.elapsed();
    assert!(status.success(), "{text}");
    println!("report: {report_kib} KiB, {took:?}");
    assert!(report_kib <= 512 << 10, "report peaked at {report_kib} KiB");
    let line = text.lines().find(|l| l.starts_with("budget: uid 65534:")).unwrap_or_default();
    assert!(
        line.contains(&format!("{over_budget} kernel handles past the per-user budget, their launches recorded")),
        "{line}"
    );
    println!("{line}");
    drop(std::fs::remove_dir_all(out.parent().unwrap()));
}
