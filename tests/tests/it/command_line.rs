//! The command line as a new user meets it: durations past any sense, a misspelled or unrunnable command,
//! `--force` over a trace a failed recording must not destroy, `-o -` with a command that prints, a signal
//! during the set-up, a command still running at `--duration`, exit statuses in every mode, the command's
//! open-files limit.

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use integration_tests::*;

#[test]
fn durations_past_a_year_are_a_usage_error_not_a_panic() {
    for d in ["1e20", "1e300", "18446744073709551616", "1e19"] {
        let o = tracer(&["record", "-d", d, "--", "/bin/true"]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "-d {d}: {stderr}");
        assert!(stderr.contains("at most 365 days") && !stderr.contains("panicked"), "-d {d}: {stderr}");
    }
}

/// `tracer ARGS`: exit code, stderr.
fn fails(args: &[&str]) -> (Option<i32>, String) {
    let o = tracer(args);
    (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn a_command_is_checked_before_anything_is_attached_or_replaced() {
    let dir = scratch("command-checks");
    let out = dir.join("old.jsonl");
    std::fs::write(&out, "an earlier trace").unwrap();
    let o = out.to_str().unwrap();
    // Each is refused in one sentence before any probe is attached, and the old trace stays as it was.
    let script = dir.join("script.sh");
    std::fs::write(&script, "#!/nonexistent/interpreter\necho hi\n").unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    for (cmd, says) in [
        ("/nonexistent/cmd", "does not exist"),
        ("no-such-command-anywhere", "command not found on PATH"),
        (script.to_str().unwrap(), "interpreter /nonexistent/interpreter does not exist"),
    ] {
        let (code, stderr) = fails(&["record", "--force", "-o", o, "--", cmd]);
        assert_eq!(code, Some(1), "{cmd}: {stderr}");
        assert!(stderr.contains(says), "{cmd}: {stderr}");
        assert!(!stderr.contains("recording to"), "{cmd}: it started: {stderr}");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "an earlier trace", "{cmd} replaced the old trace");
    }
    // One whose exec fails only when it runs (an executable file that is neither a program nor a
    // script): the recording says why, and answers 127 as a shell would.
    let junk = dir.join("junk");
    std::fs::write(&junk, "plain text, no #! line\n").unwrap();
    std::fs::set_permissions(&junk, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (code, stderr) = fails(&["record", "--force", "-o", o, "--", junk.to_str().unwrap()]);
    assert_eq!(code, Some(127), "{stderr}");
    assert!(stderr.contains("cannot run") && stderr.contains("Exec format error"), "{stderr}");
    // That recording started, so its trace replaced the old one.
    assert_eq!(footer(&read_trace(&out)).stop.as_str(), "command-exited");
    drop(std::fs::remove_dir_all(dir));
}

#[test]
fn with_the_trace_on_standard_output_the_commands_output_goes_to_standard_error() {
    let o = Command::new(tracer_bin())
        .args(["record", "-o", "-", "--", "/bin/echo", "printed by the command"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("printed by the command"), "{stderr}");
    assert!(stderr.contains("the command's standard output goes to standard error"), "{stderr}");
    // Standard output is a trace and nothing else.
    let status = trace::read_from(std::io::Cursor::new(o.stdout), std::path::Path::new("stdout"), |_| {}).unwrap();
    assert!(status.has_footer && status.unreadable_records == 0 && status.unknown_records == 0, "{status:?}");
}

/// tracer raises its own open-files limit to the hard one before it places a probe (on a kernel without
/// multi-point links every exported function of a counted library takes a descriptor), and the command it starts
/// gets the limit tracer was given back: it sees 512, while its parent, tracer, holds soft = hard.
#[test]
fn the_command_keeps_the_open_files_limit_tracer_was_given() {
    let script = format!(
        "ulimit -Sn 512; exec {} record -o - -- /bin/sh -c 'echo limit $(ulimit -n); grep \"open files\" /proc/$PPID/limits'",
        tracer_bin().display()
    );
    let o = Command::new("/bin/sh").args(["-c", &script]).output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.lines().any(|l| l == "limit 512"), "the command's own limit: {stderr}");
    let tracer_line = stderr.lines().find(|l| l.starts_with("Max open files")).expect("tracer's limits");
    let numbers: Vec<&str> = tracer_line.split_whitespace().skip(3).take(2).collect();
    assert!(
        numbers.len() == 2 && numbers[0] == numbers[1] && numbers[0] != "512",
        "tracer's soft and hard: {tracer_line}"
    );
}

/// Whether process `pid` catches `sig` (its handler is installed): `SigCgt` of /proc/PID/status.
fn catches(pid: u32, sig: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (sig - 1)) != 0)
}

#[test]
fn a_signal_during_the_set_up_ends_it_with_a_sentence_and_no_file() {
    let dir = scratch("setup-signal");
    for (sig, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let out = dir.join(format!("t{sig}.jsonl"));
        let child = Command::new(tracer_bin())
            .arg("record")
            .arg("-o")
            .arg(&out)
            .args(["--", "/bin/sleep", "5"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // As soon as tracer has its handlers (its very first step), before it has loaded or attached.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !catches(child.id(), sig) {
            assert!(Instant::now() < deadline, "tracer never installed its signal handlers");
            std::thread::sleep(Duration::from_millis(1));
        }
        // SAFETY: signalling our own child.
        unsafe {
            libc::kill(child.id() as i32, sig);
        }
        let o = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{stderr}");
        if stderr.contains("interrupted while setting up") {
            assert!(!out.exists(), "an interrupted set-up left {}", out.display());
        } else {
            // The signal came after the set-up: a recording that stopped at once, with its footer.
            assert_eq!(footer(&read_trace(&out)).stop.as_str(), "signal", "{stderr}");
        }
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    drop(std::fs::remove_dir_all(dir));
}

#[test]
fn a_command_still_running_at_the_duration_is_named() {
    let dir = scratch("still-running");
    let out = dir.join("t.jsonl");
    let o = tracer(&["record", "-o", out.to_str().unwrap(), "-d", "300ms", "--", "/bin/sleep", "3"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("was still running when the recording stopped (duration)"), "{stderr}");
    assert_eq!(footer(&read_trace(&out)).stop.as_str(), "duration");
    drop(std::fs::remove_dir_all(dir));
}

#[test]
fn a_system_wide_recording_answers_a_signal_as_the_signal_would() {
    let dir = scratch("system-wide-signal");
    for (sig, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let out = dir.join(format!("t{sig}.jsonl"));
        let rec = Recording::start(&out, &[]);
        rec.signal(sig);
        let (status, stderr) = rec.wait();
        assert_eq!(status.code(), Some(code), "{stderr}");
        assert_eq!(footer(&read_trace(&out)).stop.as_str(), "signal");
    }
    drop(std::fs::remove_dir_all(dir));
}
