//! Readiness: a script that starts `tracer record -q` knows when to send work (the `--ready-file`), and a
//! service manager is told `READY=1` through systemd's notify socket once the probes are live.

use std::{
    os::unix::net::UnixDatagram,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use integration_tests::*;

/// `record -q --pid`: silent, so the readiness file is the only sign; the runner is told to launch only once
/// the file is there, and every one of its launches is recorded.
#[test]
fn a_quiet_recording_by_pid_says_it_is_ready_and_then_sees_every_launch() {
    let out = scratch_trace("ready-quiet");
    let target = Waiting::start(&fixture("mini_runner"), "late");
    let pid = target.pid();
    let rec = Recording::start(&out, &["-q", "--pid", &pid.to_string()]);
    assert_eq!(rec.ready_value("pid"), Some(rec.child.id().to_string().as_str()), "{}", rec.ready);
    assert_eq!(rec.ready_value("trace"), out.to_str());
    let ready_file = out.with_extension("ready");
    assert!(target.go().success());
    let (status, stderr) = rec.wait();
    assert!(status.success(), "{stderr}");
    assert_eq!(stderr, "", "-q prints nothing");
    assert!(!ready_file.exists(), "the readiness file goes when the recording stops");
    let records = read_trace(&out);
    let mine: Vec<_> = launches(&records).into_iter().filter(|l| l.pid == pid).collect();
    assert_eq!(mine.len(), 7, "every launch after readiness is recorded: {mine:?}");
}

/// Under systemd (`Type=notify`): READY=1 comes once the probes are live (the readiness file is already
/// there), STOPPING=1 at the stop, on the socket named by `NOTIFY_SOCKET`.
#[test]
fn a_service_manager_is_told_ready_then_stopping() {
    let dir = scratch("ready-notify");
    let socket_path = dir.join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    socket.set_read_timeout(Some(Duration::from_mins(1))).unwrap();
    let ready_file = dir.join("ready");
    let out = dir.join("t.jsonl");
    let mut child = Command::new(tracer_bin())
        .args(["record", "-q", "-d", "1s", "--ready-file"])
        .arg(&ready_file)
        .arg("-o")
        .arg(&out)
        .args(["--", "/bin/sleep", "5"])
        .env("NOTIFY_SOCKET", &socket_path)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 4096];
    let n = socket.recv(&mut buf).expect("a notification");
    let first = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(first.lines().any(|l| l == "READY=1"), "{first}");
    assert!(first.contains("STATUS=recording to"), "{first}");
    assert!(ready_file.exists(), "READY=1 comes once the probes are live, with the readiness file");
    let n = socket.recv(&mut buf).expect("a notification at the stop");
    assert_eq!(String::from_utf8_lossy(&buf[..n]).trim(), "STOPPING=1");
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "tracer did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
    read_trace(&out);
}

/// A user who may write the readiness file's directory (a world-writable one) plants a directory at the name
/// tracer staged the file under before (`.NAME.tracer-PID.tmp`, known from its PID): the file still appears
/// (its staged name cannot be foreseen now), and the recording runs to its end with its footer.
#[test]
fn a_directory_planted_beside_the_readiness_file_does_not_stop_the_recording() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = scratch("ready-planted");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let (ready, out) = (dir.join("ready"), dir.join("t.jsonl"));
    let mut child = Command::new(tracer_bin())
        .args(["record", "-q", "-o"])
        .arg(&out)
        .arg("--ready-file")
        .arg(&ready)
        .args(["--", "/bin/sleep", "1"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::fs::create_dir_all(dir.join(format!(".ready.tracer-{}.tmp", child.id()))).unwrap();
    let said = wait_for_file(&ready, Instant::now() + Duration::from_mins(1), &mut child);
    assert!(said.as_ref().is_ok_and(|t| t.contains("pid=")), "{said:?}");
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let records = read_trace(&out);
    assert_eq!(footer(&records).stop, trace::Stop::CommandExited, "the recording ran to its end");
}

/// A notify socket whose reader never reads (its queue full: any process of the service may bind the path
/// `NOTIFY_SOCKET` names): tracer says READY=1 could not be sent within its second, records, and stops at
/// SIGTERM with its footer. Before, the send blocked for good and tracer ignored SIGTERM and SIGINT.
#[test]
fn a_notify_socket_that_never_reads_neither_hangs_tracer_nor_deafens_it() {
    let dir = scratch("notify-stuck");
    let socket_path = dir.join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    // Fill its queue: the next send blocks.
    let filler = UnixDatagram::unbound().unwrap();
    filler.set_nonblocking(true).unwrap();
    while filler.send_to(&[0u8; 1024], &socket_path).is_ok() {}
    let (ready, out) = (dir.join("ready"), dir.join("t.jsonl"));
    let mut child = Command::new(tracer_bin())
        .args(["record", "-o"])
        .arg(&out)
        .arg("--ready-file")
        .arg(&ready)
        .args(["--", "/bin/sleep", "120"])
        .env("NOTIFY_SOCKET", &socket_path)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let said = wait_for_file(&ready, Instant::now() + Duration::from_mins(1), &mut child);
    assert!(said.is_ok(), "{said:?}");
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            drop(child.kill());
            panic!("tracer did not stop at SIGTERM with a notify socket that never reads");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out_text = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out_text.stderr);
    assert!(stderr.contains("notify socket did not take a notification"), "{stderr}");
    let records = read_trace(&out);
    assert_eq!(footer(&records).stop, trace::Stop::Signal, "{stderr}");
    drop(socket);
}
