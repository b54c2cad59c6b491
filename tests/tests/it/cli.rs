//! A command line that never surprises the root user running it: where it writes, what its exit status
//! says, how it stops, and how it behaves at the end of a pipe.

use std::{
    io::Read as _,
    os::unix::fs::FileTypeExt as _,
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use integration_tests::*;

/// A small real trace: the demo runner on the real HIP runtime.
fn small_trace(dir: &Path) -> std::path::PathBuf {
    let out = dir.join("t.jsonl");
    let runner = fixture("mini_runner");
    let o = tracer(&["record", "-q", "-o", out.to_str().unwrap(), "--", runner.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

fn stderr_of(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A character device made for the test (the null device's numbers), standing where an output would go.
fn device_node(path: &Path) {
    drop(std::fs::remove_file(path));
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path; root may make device nodes.
    let rc = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 3)) };
    assert_eq!(rc, 0, "mknod: {}", std::io::Error::last_os_error());
}

fn is_char_device(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_char_device())
}

#[test]
fn outputs_are_only_new_or_forced_regular_files_never_the_input() {
    let dir = scratch("cli-outputs");
    let trace = small_trace(&dir);
    let t = trace.to_str().unwrap();
    let original = std::fs::read(&trace).unwrap();

    // The input itself, with or without --force: refused, the trace intact.
    for force in [false, true] {
        let mut args = vec!["export", t, "--format", "perfetto", "-o", t];
        if force {
            args.push("--force");
        }
        let o = tracer(&args);
        assert!(!o.status.success());
        assert!(stderr_of(&o).contains("is the file being read"), "{}", stderr_of(&o));
        assert_eq!(std::fs::read(&trace).unwrap(), original);
    }
    // An existing file: refused without --force, replaced with it.
    let existing = dir.join("out.json");
    std::fs::write(&existing, "keep").unwrap();
    let o = tracer(&["export", t, "--format", "csv", "-o", existing.to_str().unwrap()]);
    assert!(!o.status.success() && stderr_of(&o).contains("--force"), "{}", stderr_of(&o));
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "keep");
    let o = tracer(&["export", t, "--format", "csv", "-o", existing.to_str().unwrap(), "--force"]);
    assert!(o.status.success(), "{}", stderr_of(&o));
    assert!(std::fs::read_to_string(&existing).unwrap().starts_with("Kind,Agent_Id,"));
    // A link: refused, its target untouched.
    let link = dir.join("link.json");
    std::os::unix::fs::symlink(&existing, &link).unwrap();
    let o = tracer(&["export", t, "--format", "csv", "-o", link.to_str().unwrap(), "--force"]);
    assert!(stderr_of(&o).contains("symbolic link"), "{}", stderr_of(&o));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    // A device node: refused by export and by record, even with --force; it stays a device.
    let dev = dir.join("null-copy");
    device_node(&dev);
    let o = tracer(&["export", t, "--format", "csv", "-o", dev.to_str().unwrap(), "--force"]);
    assert!(stderr_of(&o).contains("not a regular file"), "{}", stderr_of(&o));
    let o = tracer(&["record", "-q", "--force", "-o", dev.to_str().unwrap(), "--", "/bin/true"]);
    assert!(stderr_of(&o).contains("not a regular file"), "{}", stderr_of(&o));
    assert!(is_char_device(&dev));
    // `-o -` is standard output.
    let o = tracer(&["export", t, "--format", "csv", "-o", "-"]);
    assert!(o.status.success() && o.stdout.starts_with(b"Kind,Agent_Id,"), "{}", stderr_of(&o));
    // A failed export leaves no file, and no temporary file either.
    std::fs::write(dir.join("not-a-trace.jsonl"), "hello\n").unwrap();
    let failed = dir.join("failed.json");
    let o = tracer(&[
        "export",
        dir.join("not-a-trace.jsonl").to_str().unwrap(),
        "--format",
        "perfetto",
        "-o",
        failed.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(!failed.exists());
    let leftovers: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tracer-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn the_exit_status_is_the_commands_and_the_command_is_recorded_as_itself() {
    let out = scratch_trace("cli-status");
    let o = tracer(&["record", "-q", "-o", out.to_str().unwrap(), "--", "sh", "-c", "exit 3"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr_of(&o));
    let records = read_trace(&out);
    let procs: Vec<&trace::Process> =
        records.iter().filter_map(|r| if let Line::Process(p) = r { Some(p) } else { None }).collect();
    assert!(!procs.is_empty());
    for p in &procs {
        assert_eq!(p.argv, ["sh", "-c", "exit 3"], "{p:?}");
    }
    let exit = records.iter().find_map(|r| if let Line::Exit(e) = r { Some(e) } else { None }).unwrap();
    assert_eq!((exit.code, exit.signal), (Some(3), None));

    let o = tracer(&["record", "-q", "--force", "-o", out.to_str().unwrap(), "--", "sh", "-c", "kill -SEGV $$"]);
    assert_eq!(o.status.code(), Some(128 + libc::SIGSEGV), "{}", stderr_of(&o));

    let o = tracer(&["record", "-q", "--force", "-o", out.to_str().unwrap(), "--", "/nonexistent/cmd"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr_of(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("/nonexistent/cmd does not exist"), "{err}");
}

#[test]
fn a_signal_stops_the_recording_without_waiting_for_the_command() {
    let dir = scratch("cli-signal");
    for (n, signals) in [(1, vec![libc::SIGTERM]), (2, vec![libc::SIGINT, libc::SIGINT])] {
        let out = dir.join(format!("t{n}.jsonl"));
        let rec = Recording::start(&out, &["--", "sleep", "600"]);
        let sleeper = exec_pid(&out);
        for sig in &signals {
            rec.signal(*sig);
        }
        let (status, stderr) = rec.wait();
        // The command got the signal too: it is gone (reaped by init once orphaned).
        let deadline = Instant::now() + Duration::from_secs(30);
        while Path::new(&format!("/proc/{sleeper}")).exists() {
            assert!(Instant::now() < deadline, "the command outlived the recording");
            std::thread::sleep(Duration::from_millis(50));
        }
        use std::os::unix::process::ExitStatusExt as _;
        if signals.len() == 1 {
            // The first signal: the file is finished, and tracer answers as the signal would have.
            assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{stderr}");
            assert_eq!(footer(&read_trace(&out)).stop.as_str(), "signal");
        } else {
            // A second signal may end tracer at once: by the signal, or having finished anyway.
            assert!(status.signal() == Some(libc::SIGINT) || status.code() == Some(128 + libc::SIGINT), "{status:?}");
            let (records, _) = trace::read_file(&out).expect("every record written so far reads");
            assert!(!records.is_empty());
        }
    }
}

#[test]
fn a_closed_pipe_ends_quietly() {
    let dir = scratch("cli-pipe");
    let trace = small_trace(&dir);
    for args in [vec!["report"], vec!["report", "--json"], vec!["export", "--format", "perfetto"]] {
        let mut child = Command::new(tracer_bin())
            .args(&args)
            .arg(&trace)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut head = [0u8; 100];
        child.stdout.take().unwrap().read_exact(&mut head).unwrap(); // then the pipe closes
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{args:?}: {:?} {}", o.status, stderr_of(&o));
        assert!(o.stderr.is_empty(), "{args:?}: {}", stderr_of(&o));
    }
}

#[test]
fn kernel_threads_are_refused_in_one_sentence() {
    // kthreadd: pid 2 on a machine, absent from a PID namespace's view.
    let Some(kthreadd) = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .find(|p| std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "kthreadd"))
    else {
        eprintln!("SKIPPED: no kernel thread is visible in this PID namespace");
        return;
    };
    let out = scratch_trace("cli-kthread");
    let o = tracer(&["record", "-q", "-o", out.to_str().unwrap(), "--pid", &kthreadd.to_string()]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr_of(&o);
    assert!(err.contains("kernel thread") && err.lines().count() == 1, "{err}");
    assert!(!out.exists());
}

#[test]
fn default_output_is_compressed_and_a_plain_name_gives_plain_lines() {
    let dir = scratch("default-output");
    let runner = fixture("mini_runner");
    let o = Command::new(tracer_bin())
        .args(["record", "-q", "--", runner.to_str().unwrap(), "launches"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr_of(&o));
    let raw = std::fs::read(dir.join("trace.jsonl.zst")).unwrap();
    assert_eq!(&raw[..4], &[0x28, 0xb5, 0x2f, 0xfd], "not a zstd stream");
    assert_eq!(launches(&read_trace(&dir.join("trace.jsonl.zst"))).len(), 7, "the known launches of mini_runner");
    let plain = small_trace(&dir);
    assert!(std::fs::read_to_string(plain).unwrap().starts_with("{\"type\":\"header\""));
}

/// The live line shows on a terminal only (util-linux's `script` gives the recording one), and never
/// with -q; the final summary shows on a terminal and in a pipe.
#[test]
fn live_status_on_a_terminal_only() {
    let dir = scratch("live");
    let runner = fixture("mini_runner");
    let record = |out: &str, quiet: bool| -> String {
        let cmd = format!(
            "{} record {}-o {} -- {} runner",
            tracer_bin().display(),
            if quiet { "-q " } else { "" },
            dir.join(out).display(),
            runner.display()
        );
        let o = Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .env("TRACER_TEST_RUNNER_DELAY_MS", "2500")
            .output()
            .expect("script (util-linux) runs");
        assert!(o.status.success(), "{}", stderr_of(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let tty = record("tty.jsonl", false);
    let live = tty.split("\r\x1b[K").find(|l| l.contains("launches/s")).expect("a live line");
    assert!(
        live.starts_with("tracer: ") && live.ends_with(" s, 1 process, 0 launches/s, 0 dispatches/s, 0 dropped"),
        "{tty:?}"
    );
    assert!(tty.contains("\r\x1b[Ktracer: stopped (command-exited); wrote 7 launches"), "{tty:?}");
    let quiet = record("quiet.jsonl", true);
    assert!(!quiet.contains("launches/s") && !quiet.contains("stopped"), "{quiet:?}");
    let o = Command::new(tracer_bin())
        .args(["record", "-o", dir.join("pipe.jsonl").to_str().unwrap(), "--", runner.to_str().unwrap(), "runner"])
        .env("TRACER_TEST_RUNNER_DELAY_MS", "1500")
        .output()
        .unwrap();
    let piped = stderr_of(&o);
    assert!(!piped.contains("launches/s") && piped.contains("stopped (command-exited)"), "{piped}");
}
