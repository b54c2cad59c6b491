//! How recording ends (signals, duration, a killed tracer) and what a user sees when something is wrong.

use integration_tests::*;

#[test]
fn sigint_and_sigterm_write_the_footer() {
    let runner = fixture("mini_runner");
    for (sig, name) in [(libc::SIGINT, "int"), (libc::SIGTERM, "term")] {
        let out = scratch_trace(&format!("sig{name}"));
        let target = Waiting::start(&runner, "late");
        let rec = Recording::start(&out, &["--pid", &target.pid().to_string()]);
        rec.signal(sig);
        let (status, stderr) = rec.wait();
        // Answered as the signal would have been (128 + N), whatever was recorded.
        assert_eq!(status.code(), Some(128 + sig), "{stderr}");
        assert!(target.go().success());
        let records = read_trace(&out);
        let f = footer(&records);
        assert_eq!(f.stop.as_str(), "signal");
        // Counts in the footer equal the records in the file.
        let mut counts = std::collections::BTreeMap::<String, u64>::new();
        for r in &records[..records.len() - 1] {
            *counts.entry(r.type_name().to_owned()).or_default() += 1;
        }
        assert_eq!(f.records, counts);
    }
}

#[test]
fn duration_stops_the_recording() {
    let out = scratch_trace("duration");
    let runner = fixture("mini_runner");
    let target = Waiting::start(&runner, "late");
    let o = tracer(&[
        "record",
        "-q",
        "-o",
        out.to_str().unwrap(),
        "--pid",
        &target.pid().to_string(),
        "--duration",
        "300ms",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(target.go().success());
    assert_eq!(footer(&read_trace(&out)).stop.as_str(), "duration");
}

#[test]
fn sigkill_leaves_every_complete_record_readable() {
    // The runner launches, then sleeps until killed: the tracer is still recording when it is killed.
    let (out, rec) = recording_a_hanging_runner("sigkill");
    // Its losses so far are written every second: killed after the first checkpoint reached the file.
    let has_checkpoint = |path: &std::path::Path| {
        trace::read_file(path).is_ok_and(|(r, _)| r.iter().any(|r| matches!(r, Line::Checkpoint(_))))
    };
    let waited = std::time::Instant::now();
    while !has_checkpoint(&out) && waited.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    rec.signal(libc::SIGKILL);
    let runner_pid = exec_pid(&out);
    // SAFETY: ending the test's own grandchild, orphaned by the killed tracer (it holds the tracer's
    // stderr open, so it must end before the tracer's output can be read to its end).
    unsafe {
        libc::kill(runner_pid as i32, libc::SIGKILL);
    }
    drop(rec.wait());
    let (records, status) = trace::read_file(&out).expect("a killed recording still reads");
    assert!(!status.has_footer);
    assert!(status.warning().is_some());
    assert_eq!(launches(&records).len(), 7);
    assert!(matches!(records[0], Line::Header(_)));
    // The report works on it and says it was not closed normally.
    let o = tracer(&["report", out.to_str().unwrap()]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not closed normally"));
    // ... and gives the losses its last checkpoint counted, as such.
    let checkpoints = records.iter().filter(|r| matches!(r, Line::Checkpoint(_))).count();
    assert!(checkpoints >= 1, "no checkpoint in {} records", records.len());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("records dropped by the last checkpoint"), "{text}");
}

fn assert_fails(args: &[&str], sentence: &str) {
    let o = tracer(args);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {stderr}");
    assert!(stderr.contains(sentence), "{args:?}: expected {sentence:?} in {stderr:?}");
    assert!(!stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one sentence, not more: {stderr}");
}

#[test]
fn user_errors_are_one_clear_sentence() {
    let dir = scratch("errors");
    let out = dir.join("t.jsonl");
    let o = out.to_str().unwrap();
    assert_fails(&["record", "-o", o, "--pid", "999999"], "process 999999 is not running");
    assert!(!out.exists(), "a failed recording left a file");
    assert_fails(
        &["record", "-o", o, "--lib", "/nonexistent/libamdhip64.so", "--", "true"],
        "give the path of libamdhip64.so with --lib",
    );
    assert!(!out.exists());
    assert_fails(&["record", "-o", "/nonexistent-dir/t.jsonl", "--", "true"], "choose a writable path with -o");

    std::fs::write(&out, "keep me").unwrap();
    assert_fails(&["record", "-o", o, "--", "true"], "already exists");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "keep me");
    let link = dir.join("link.jsonl");
    std::os::unix::fs::symlink(&out, &link).unwrap();
    // A link is refused as a link (tracer never writes through one), and its target is untouched.
    assert_fails(&["record", "-o", link.to_str().unwrap(), "--", "true"], "symbolic link");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "keep me");

    let not_trace = dir.join("notes.txt");
    std::fs::write(&not_trace, "hello\n").unwrap();
    assert_fails(&["report", not_trace.to_str().unwrap()], "is not a tracer trace file");
    assert_fails(&["report", dir.join("missing.jsonl").to_str().unwrap()], "cannot open");

    // A usage error exits 2 (clap).
    assert_eq!(tracer(&["record", "--ring-size", "100"]).status.code(), Some(2));
}

#[test]
fn forced_output_replaces_the_file_and_is_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let out = scratch_trace("force");
    std::fs::write(&out, "old").unwrap();
    let o = tracer(&["record", "-q", "--force", "-o", out.to_str().unwrap(), "--", "true"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::metadata(&out).unwrap().permissions().mode() & 0o777, 0o600);
    let records = read_trace(&out);
    assert_eq!(footer(&records).stop.as_str(), "command-exited");
}
