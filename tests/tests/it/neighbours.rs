//! Hostile neighbours: root runs tracer, and a local user tries to starve its metrics, inflate their
//! labels, fill the disk with command lines, or make a new recording wait without a word.

use std::{
    io::{Read as _, Write as _},
    net::TcpStream,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use integration_tests::*;

/// The port a recording serves metrics on, from its readiness file.
fn metrics_port(rec: &Recording) -> u16 {
    let addr = rec.ready_value("metrics").expect("the readiness file says where metrics are served");
    addr.rsplit(':').next().unwrap().parse().unwrap()
}

/// A scrape: the body of `GET /metrics`, or None (a guard of 30 s against a hang, not a speed check).
fn scrape(port: u16) -> Option<String> {
    scrape_within(port, Duration::from_secs(30))
}

/// A scrape that waits at most `limit` for each read, as a scraper's timeout would.
fn scrape_within(port: u16, limit: Duration) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), limit).ok()?;
    s.set_read_timeout(Some(limit)).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
}

/// The value of the sample line that starts with `series`.
fn sample(text: &str, series: &str) -> Option<u64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// 600 clients that connect and send their request one byte at a time, reconnecting whenever they are
/// closed, for as long as the test runs (a slowloris, past the endpoint's 512 connections): every real scrape
/// is still answered, and the footer counts the slow connections closed to make room.
#[test]
fn scrapes_are_answered_while_600_slow_clients_crowd_the_endpoint() {
    let out = scratch_trace("slowloris");
    let rec = Recording::start(&out, &["--metrics", "127.0.0.1:0", "--", "/bin/sleep", "120"]);
    let port = metrics_port(&rec);
    let stop = Arc::new(AtomicBool::new(false));
    let mut attackers = Vec::new();
    for _ in 0..600 {
        let stop = Arc::clone(&stop);
        attackers.push(std::thread::spawn(move || {
            let request = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX: ";
            let mut connections = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { continue };
                connections += 1;
                for byte in request.iter().cycle() {
                    if stop.load(Ordering::Relaxed) || s.write_all(&[*byte]).is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            connections
        }));
    }
    // Let the attack take hold, then scrape as Prometheus would.
    std::thread::sleep(Duration::from_secs(1));
    let mut slowest = Duration::ZERO;
    for _ in 0..10 {
        let t = Instant::now();
        let body = scrape(port);
        slowest = slowest.max(t.elapsed());
        assert!(body.is_some_and(|b| b.contains("# EOF")), "a scrape was not answered during the attack");
        std::thread::sleep(Duration::from_millis(300));
    }
    stop.store(true, Ordering::Relaxed);
    let connections: u64 = attackers.into_iter().map(|a| a.join().unwrap()).sum();
    eprintln!(
        "10 of 10 scrapes answered during the attack, the slowest in {slowest:?}; {connections} slow connections"
    );
    rec.signal(libc::SIGINT);
    let (status, stderr) = rec.wait();
    assert_eq!(status.code(), Some(130), "{stderr}");
    let records = read_trace(&out);
    let f = footer(&records);
    let (evicted, refused) = (f.counters["metrics_connections_evicted"], f.counters["metrics_accept_waits"]);
    eprintln!("{evicted} slow connections closed to make room, {refused} waits of 5 ms for room");
    assert!(evicted > 0, "600 slow clients, and none closed to make room");
}

/// The kernel names a neighbour registers to inflate the scrape: 12 ggml operators x 32 quantization types,
/// each a family label of its own.
fn family_names() -> String {
    let ops = [
        "mul_mat_vec_q",
        "mul_mat_q",
        "mul_mat_vec_f",
        "flash_attn_ext",
        "rope_f32",
        "quantize_q8_1",
        "dequantize_block",
        "rms_norm_f32",
        "soft_max_f32",
        "argmax_f32",
        "k_get_rows",
        "scan_sum",
    ];
    let types = [
        0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 34,
        35, 39,
    ];
    ops.iter().flat_map(|op| types.iter().map(move |t| format!("_Z{}{op}IL9ggml_type{t}EEvv\n", op.len()))).collect()
}

/// A neighbour first inflates the scrape within the label caps (64 process names x 384 kernel families, about
/// 2 MB before the body had a byte bound; now folded to at most 256 KiB, the fold said in the scrape), then
/// keeps 6 000 connections that ask for it and never read the answer: at least 95 % of the scrapes made
/// meanwhile (each read given 10 s, Prometheus's default timeout) are answered whole, and the footer counts
/// the connections closed to make room. Before the endpoint bounded answers in bytes and closed the ones that
/// stall, a non-reader held its connection for 5 s and most scrapes failed.
#[test]
fn scrapes_are_answered_while_6000_clients_ask_for_a_large_body_and_never_read() {
    let dir = scratch("non-readers");
    let (names, out) = (dir.join("names"), dir.join("t.jsonl.zst"));
    std::fs::write(&names, family_names()).unwrap();
    let stop_file = dir.join("stop");
    let script = format!(
        "exec {} families {} 64 {}",
        fixture("hostile_register").display(),
        names.display(),
        stop_file.display()
    );
    let rec = Recording::start(&out, &["--metrics", "127.0.0.1:0", "--", "/bin/sh", "-c", &script]);
    let port = metrics_port(&rec);
    let deadline = Instant::now() + Duration::from_mins(3);
    let size = loop {
        assert!(Instant::now() < deadline, "the neighbour's families never all reached the metrics");
        std::thread::sleep(Duration::from_secs(1));
        // Every family reached: past the body's bound, label sets are folded and the scrape says so.
        if let Some(body) = scrape(port).filter(|b| sample(b, "tracer_metrics_label_sets_folded_total") > Some(0)) {
            assert!((128 << 10..=256 << 10).contains(&body.len()), "a scrape of {} bytes", body.len());
            break body.len();
        }
    };
    // Room for 6 000 descriptors in this test.
    // SAFETY: rlimit is plain data, filled by getrlimit before it is read.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut lim);
        lim.rlim_cur = lim.rlim_max.max(lim.rlim_cur);
        libc::setrlimit(libc::RLIMIT_NOFILE, &raw const lim);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let asked = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let attackers: Vec<_> = std::iter::repeat_n((), 4)
        .map(|()| {
            let (stop, asked) = (Arc::clone(&stop), Arc::clone(&asked));
            std::thread::spawn(move || {
                let mut held = std::collections::VecDeque::new();
                while !stop.load(Ordering::Relaxed) {
                    let addr = ([127, 0, 0, 1], port).into();
                    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else { continue };
                    if s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").is_ok() {
                        asked.fetch_add(1, Ordering::Relaxed);
                        held.push_back(s);
                    }
                    if held.len() > 1500 {
                        held.pop_front();
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    // Scrapes every 250 ms until 41 were made and the attack has asked 6 000 times.
    let (mut answered, mut scrapes) = (0u64, 0u64);
    let deadline = Instant::now() + Duration::from_mins(4);
    while (scrapes < 41 || asked.load(Ordering::Relaxed) < 6000) && Instant::now() < deadline {
        scrapes += 1;
        answered += u64::from(scrape_within(port, Duration::from_secs(10)).is_some_and(|b| b.ends_with("# EOF\n")));
        std::thread::sleep(Duration::from_millis(250));
    }
    stop.store(true, Ordering::Relaxed);
    for a in attackers {
        a.join().unwrap();
    }
    let asked = asked.load(Ordering::Relaxed);
    eprintln!("{answered} of {scrapes} scrapes of {size} bytes answered; {asked} requests never read");
    // The neighbour's processes end, and with them the recording of its command.
    std::fs::write(&stop_file, "").unwrap();
    let (status, stderr) = rec.wait();
    assert!(status.success(), "{stderr}");
    let records = read_trace(&out);
    let f = footer(&records);
    let (evicted, waits) = (f.counters["metrics_connections_evicted"], f.counters["metrics_accept_waits"]);
    // An answer within the body's bound fits in the kernel's buffers of a connection that never reads (128 KiB
    // to send, as much to receive), so non-readers no longer stall the endpoint: no eviction is needed (a
    // 2 MB body needed them; the slowloris test still makes them).
    eprintln!("{evicted} connections closed to make room, {waits} waits of 5 ms for room");
    assert!(asked >= 6000, "the attack made {asked} requests");
    assert!(answered * 100 >= scrapes * 95, "{answered} of {scrapes} scrapes answered");
    drop(std::fs::remove_dir_all(dir));
}

/// 20 000 processes of distinct names (any user picks a process's name): the scrape keeps 64 of them as
/// labels and counts the others under `comm="other"`, stays small, and so does tracer, through a flood of
/// scrapes.
#[test]
fn a_storm_of_process_names_keeps_the_scrape_and_tracer_small() {
    let dir = scratch("comm-storm");
    let out = dir.join("t.jsonl.zst");
    let names = 20_000u64;
    let script = format!("{} {names} {}; sleep 120", fixture("comm_storm").display(), dir.join("names").display());
    let rec = Recording::start(&out, &["--metrics", "127.0.0.1:0", "--", "/bin/sh", "-c", &script]);
    let port = metrics_port(&rec);
    let deadline = Instant::now() + Duration::from_mins(5);
    let body = loop {
        assert!(Instant::now() < deadline, "the storm's processes never all reached the metrics");
        std::thread::sleep(Duration::from_secs(1));
        let Some(body) = scrape(port) else { continue };
        if sample(&body, "tracer_metrics_comm_folded_total").is_some_and(|n| n + 64 >= names) {
            break body;
        }
    };
    let series = body.lines().filter(|l| l.starts_with("tracer_kernel_launches_total{")).count();
    assert!(series <= 64 + 2, "{series} label sets");
    assert!(body.len() < 100_000, "a scrape of {} bytes", body.len());
    // A flood of scrapes: 8 clients, 50 each.
    let mut flood = Vec::new();
    for _ in 0..8 {
        flood.push(std::thread::spawn(move || (0..50).filter(|_| scrape(port).is_some()).count()));
    }
    let answered: usize = flood.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(answered, 400);
    rec.signal(libc::SIGINT);
    let (status, stderr) = rec.wait();
    assert_eq!(status.code(), Some(130), "{stderr}");
    let records = read_trace(&out);
    let rss_kib = footer(&records).counters["tracer_max_rss_kib"];
    eprintln!("{names} names: a scrape of {} bytes, {series} label sets; tracer's peak RSS {rss_kib} KiB", body.len());
    assert!(rss_kib < 64 << 10, "tracer's peak RSS {rss_kib} KiB");
}

/// A thousand short GPU processes (`mini_runner launches`: registrations, launches, exit) under a recording of
/// every process: tracer lets go of each at its exit (before, the library watch kept what it knew of every
/// process it had looked at until the recording ended, since only a recording by PID let go of them). Its
/// memory after 1 000 is what it was after 100, within 4 MiB, and at the end it holds no process that has
/// ended (a live process another test left is held rightly).
#[test]
fn a_thousand_short_gpu_processes_leave_a_system_wide_recording_flat() {
    let dir = scratch("gpu-churn");
    let out = dir.join("t.jsonl.zst");
    let rec = Recording::start(&out, &[]);
    let rss_kib = || {
        let status = std::fs::read_to_string(format!("/proc/{}/status", rec.pid())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap().to_owned();
        line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap()
    };
    let runner = fixture("mini_runner");
    let mut after = Vec::new();
    for i in 1..=1000 {
        let st = std::process::Command::new(&runner).arg("launches").output().unwrap().status;
        assert!(st.success(), "run {i}");
        if i == 100 || i == 1000 {
            // Let the recording take this run's exit before the look.
            std::thread::sleep(Duration::from_millis(300));
            after.push(rss_kib());
        }
    }
    rec.signal(libc::SIGINT);
    let (status, stderr) = rec.wait();
    assert_eq!(status.code(), Some(130), "{stderr}");
    let records = read_trace(&out);
    let f = footer(&records);
    let runners = records
        .iter()
        .filter(|r| matches!(r, Line::Process(p) if p.comm == "mini_runner" && p.cause.as_str() != "exit"))
        .count();
    eprintln!(
        "1 000 short GPU processes: tracer's RSS {} KiB after 100, {} KiB after 1 000, peak {} KiB",
        after[0], after[1], f.counters["tracer_max_rss_kib"]
    );
    assert!(runners >= 1000, "{runners} runner records");
    assert_eq!(f.counters["processes_held_after_exit"], 0);
    assert!(after[1] < after[0] + 4096, "RSS {} KiB after 100, {} KiB after 1 000", after[0], after[1]);
    assert_eq!(f.total_drops(), 0);
}

/// A 1 MB command line (ten arguments of 100 000 bytes) costs at most the 64 KiB cap in the trace, and
/// the cut is counted.
#[test]
fn a_megabyte_command_line_costs_at_most_the_cap_on_disk() {
    let out = scratch_trace("argv-bomb");
    // The process lives half a second, so its command line is read while it runs.
    let script =
        "a=$(head -c 100000 /dev/zero | tr '\\0' x); exec /bin/sh -c 'sleep 0.5' $a $a $a $a $a $a $a $a $a $a";
    let records = record_ok(&out, &["--", "/bin/sh", "-c", script]);
    let sleeper = records.iter().find_map(|r| match r {
        Line::Process(p) if p.argv.iter().any(|a| a == "sleep 0.5") => Some(p),
        _ => None,
    });
    let p = sleeper.expect("the exec of the long command line is recorded");
    assert_eq!(p.argv, ["/bin/sh", "-c", "sleep 0.5"], "whole arguments kept while they fit");
    let bytes: usize = p.argv.iter().map(|a| a.len() + 1).sum();
    assert!(bytes <= 64 << 10, "{bytes} bytes of argv kept");
    let f = footer(&records);
    let cut =
        f.counters.get("argv_cut").copied().unwrap_or(0) + f.counters.get("early_look_argv_cut").copied().unwrap_or(0);
    assert!(cut >= 1, "the cut is not counted: {:?}", f.counters);
    let size = std::fs::metadata(&out).unwrap().len();
    assert!(size < 128 << 10, "a trace of {size} bytes for one 1 MB command line");
}

/// Recording every process, a command line is `argv[0]` alone unless asked (`--full-argv`): the trace
/// says so in its header.
#[test]
fn recording_every_process_keeps_argv0_alone_by_default() {
    let dir = scratch("argv-system-wide");
    let out = dir.join("t.jsonl");
    // A program of a name of its own, living long enough for its command line to be read.
    let probe = dir.join("argv-probe");
    std::fs::copy("/bin/sleep", &probe).unwrap();
    let rec = Recording::start(&out, &["-q", "-d", "2s"]);
    let o = std::process::Command::new(&probe).arg("0.5").output().unwrap();
    assert!(o.status.success());
    let (status, stderr) = rec.wait();
    assert!(status.success(), "{stderr}");
    let records = read_trace(&out);
    let Some(Line::Header(h)) = records.first() else { panic!("no header") };
    assert!(h.options.private_argv);
    let seen: Vec<&trace::Process> = records
        .iter()
        .filter_map(|r| match r {
            Line::Process(p) if p.comm == "argv-probe" => Some(p),
            _ => None,
        })
        .collect();
    assert!(!seen.is_empty(), "the exec of argv-probe is recorded");
    assert!(seen.iter().all(|p| p.argv.len() == 1), "{seen:?}");
}

/// Five recordings back to back leave their probes releasing in the background; a sixth started at once
/// says that its attaching may wait for them.
#[test]
fn a_start_behind_earlier_releases_says_why_it_may_wait() {
    let dir = scratch("releases");
    let runner = fixture("mini_runner");
    for i in 0..5 {
        let out = dir.join(format!("t{i}.jsonl"));
        record_ok(&out, &["--", runner.to_str().unwrap(), "launches"]);
    }
    let releasing = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .filter(|c| c.trim() == "tracer-release")
        .count();
    let t = Instant::now();
    let out = dir.join("t5.jsonl");
    let o = tracer(&["record", "-o", out.to_str().unwrap(), "--", runner.to_str().unwrap(), "launches"]);
    let took = t.elapsed();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    eprintln!("{releasing} releases in progress at the sixth start; it took {took:?}");
    if releasing > 0 {
        assert!(stderr.contains("still releasing"), "{releasing} releases in progress, and no word: {stderr}");
    }
}

/// Recording a running process by PID, the runtime probes are placed in it alone (a multi-point link per
/// process): another process calling the same libamdhip64, untraced, runs none of tracer's programs (the
/// kernel counts every run, `--program-stats`), so it pays no trap, while every call of the traced one is
/// recorded. Before, each of its calls trapped and was filtered in the program (4 111 ms instead of 304 ms
/// for 340 000 calls, measured in issue 39; `cargo xtask bench --rows 15` times it).
#[test]
fn an_untraced_process_on_the_same_runtime_runs_none_of_tracers_programs() {
    let out = scratch_trace("neighbour-scoped");
    let target = Waiting::start(&fixture("mini_runner"), "late");
    let pid = target.pid();
    let rec = Recording::start(&out, &["--program-stats", "--pid", &pid.to_string()]);
    let neighbour = std::process::Command::new(fixture("mini_runner")).args(["loop", "5000"]).output().unwrap();
    assert!(neighbour.status.success(), "{}", String::from_utf8_lossy(&neighbour.stderr));
    assert!(target.go().success());
    let (status, stderr) = rec.wait();
    assert!(status.success(), "{stderr}");
    let records = read_trace(&out);
    let options = records.iter().find_map(|r| if let Line::Header(h) = r { Some(h.options.clone()) } else { None });
    assert!(options.expect("a header").probes_per_process);
    // Each call that recurs the target made after the attach ran its program once (the entry program for a
    // call probed at entry and return, the one-trap program for a launch); nothing else ran them: the
    // neighbour's 5 000 launches and configuration pushes would have.
    let (own, own_one_trap) = recurring_runs(&records);
    assert!(own > 0 && own_one_trap > 0, "the target's calls are recorded");
    let runs = |name: &str| footer(&records).programs.get(name).map_or(0, |p| p.runs);
    assert_eq!(runs("call_entry"), own, "{:?}", footer(&records).programs);
    assert_eq!(runs("one_trap_entry"), own_one_trap, "{:?}", footer(&records).programs);
    assert!(launches(&records).iter().all(|l| l.pid == pid));
}

/// The runs the recorded calls that recur (`Op::recurs`) took of the entry program (calls
/// probed at entry and return, configuration pushes) and of the one-trap program (calls probed at entry
/// only).
fn recurring_runs(records: &[Line]) -> (u64, u64) {
    let recurring: Vec<_> = calls(records).into_iter().filter(|c| c.api.op().recurs()).collect();
    let entry = launches(records).iter().filter(|l| !l.entry_only).count()
        + recurring.iter().filter(|c| !c.entry_only).count()
        + configs(records).len();
    let one_trap =
        launches(records).iter().filter(|l| l.entry_only).count() + recurring.iter().filter(|c| c.entry_only).count();
    (entry as u64, one_trap as u64)
}

/// A child that a process recorded by PID starts at once (no pause before it loads the runtime) keeps every
/// name: registrations are probed in every process, filtered by the program, so the child's are recorded
/// before its own links exist. Its launches are recorded whole, or its copy is marked late with the time
/// its links came (said, never silent). A neighbour's 5 000 launches meanwhile run none of the programs of
/// the calls that recur, and its registrations run the programs linked in every process, unrecorded.
#[test]
fn a_child_started_at_once_by_a_process_recorded_by_pid_keeps_every_name() {
    let dir = scratch("pid-child-at-once");
    let runner = fixture("mini_runner");
    // What the runner registers, recorded from its first instruction.
    let registered = |records: &[Line], pid: Option<u32>| -> std::collections::BTreeSet<String> {
        kernels(records)
            .into_iter()
            .filter(|k| k.source.as_str() == "register" && pid.is_none_or(|p| k.pid == p))
            .map(|k| k.name.clone())
            .collect()
    };
    let reference = registered(&record_ok(&dir.join("ref.jsonl"), &["--", runner.to_str().unwrap(), "launches"]), None);
    assert!(reference.len() >= 4, "{reference:?}");
    let script = dir.join("parent.sh");
    std::fs::write(&script, format!("#!/bin/sh\necho ready\nread go\n{} launches\ntrue\n", runner.display())).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let parent = Waiting::start_with(&script, &[]);
    let out = dir.join("t.jsonl");
    let rec = Recording::start(&out, &["--program-stats", "--pid", &parent.pid().to_string()]);
    let neighbour = std::process::Command::new(&runner).args(["loop", "5000"]).output().unwrap();
    assert!(neighbour.status.success(), "{}", String::from_utf8_lossy(&neighbour.stderr));
    assert!(parent.go().success());
    let (status, stderr) = rec.wait();
    assert!(status.success(), "{stderr}");
    let records = read_trace(&out);
    let child = exec_of(&records, "mini_runner").expect("the child's exec record").pid;
    assert_eq!(registered(&records, Some(child)), reference);
    let late = records
        .iter()
        .any(|r| matches!(r, Line::Mapping(m) if m.pid == child && m.probed_late && m.probed_at.is_some()));
    let n = launches(&records).len();
    eprintln!("{n} of the child's 7 launches recorded; its copy marked late: {late}");
    assert!(
        n == 7 || late,
        "{n} of the 7 launches recorded, and the child's copy not marked late; tracer said: {stderr}"
    );
    assert!(launches(&records).iter().all(|l| l.pid == child));
    let (own, own_one_trap) = recurring_runs(&records);
    let programs = &footer(&records).programs;
    let runs = |name: &str| programs.get(name).map_or(0, |p| p.runs);
    // A call the child made while its links were being placed may have run the entry program before its
    // return was probed (no record then): a few at most, and only when its copy is marked late. The
    // neighbour's 5 000 launches would each have added a run (HIP retries `hsa_init` at each without a GPU).
    if late {
        assert!((own..=own + 3).contains(&runs("call_entry")), "{own} recorded: {programs:?}");
    } else {
        assert_eq!(runs("call_entry"), own, "{programs:?}");
    }
    assert_eq!(runs("one_trap_entry"), own_one_trap, "{programs:?}");
    let names = kernels(&records).len() as u64;
    assert!(runs("register_function (every process)") > names, "{names} names recorded: {programs:?}");
}

/// Children of a process recorded by PID, started while tracer lags behind the ring (left unread for 3 s):
/// the GPU child is linked by the periodic look at the filter's processes, before its fork is read, and its
/// launches are recorded whole or its copy is marked late with the time its links came; the short children
/// (`/bin/true`) that end before any look are counted as ended before their probes, never skipped without a word.
/// (Before, a process gone by the time its links were placed was skipped silently: once in a full run of the
/// suite, `a_child_started_at_once_...` saw 0 of 7 launches and no late mark.)
#[test]
fn children_that_outrun_their_probes_are_said_to_be_late_or_unseen() {
    let dir = scratch("pid-child-gone");
    let runner = fixture("mini_runner");
    let script = dir.join("parent.sh");
    let body = format!(
        "#!/bin/sh\necho ready\nread go\n{} launches\n/bin/true\n/bin/true\n/bin/true\n/bin/true\n/bin/true\n",
        runner.display()
    );
    std::fs::write(&script, body).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let parent = Waiting::start_with(&script, &[]);
    let out = dir.join("t.jsonl");
    let rec = Recording::start(&out, &["--debug-read-delay-ms", "3000", "--pid", &parent.pid().to_string()]);
    assert!(parent.go().success());
    let (status, stderr) = rec.wait();
    assert!(status.success(), "{stderr}");
    let records = read_trace(&out);
    let child = exec_of(&records, "mini_runner").expect("the child's exec record").pid;
    let f = footer(&records);
    let late = records
        .iter()
        .any(|r| matches!(r, Line::Mapping(m) if m.pid == child && m.probed_late && m.probed_at.is_some()));
    let n = launches(&records).iter().filter(|l| l.pid == child).count();
    let gone = f.counters["processes_ended_before_probes"];
    eprintln!(
        "{n} of the child's 7 launches recorded; its copy marked late: {late}; {gone} processes ended before their probes"
    );
    assert!(
        n == 7 || late,
        "{n} of the 7 launches recorded, and the child's copy not marked late; tracer said: {stderr}"
    );
    assert!(gone >= 1, "five short children, none counted: {:?}", f.counters);
}
