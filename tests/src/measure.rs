//! A command run to its end with its own peak memory measured.

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

/// Runs a command to its end: (status, its own peak resident KiB, its stdout and stderr). Fails the test
/// past `limit`.
///
/// The command is started by a small Python process ([`MEASURE`]) that reports its `ru_maxrss`: a child
/// spawned by this process itself would take the test process's own peak (`VmHWM`, raised by whatever test
/// ran before in it, 320 MiB seen) as its `ru_maxrss` when it execs (Linux keeps the larger of the images a
/// process had). Python's own peak (about 10 MiB) is the least the figure can be.
#[expect(clippy::zombie_processes, reason = "reaped by wait4")]
pub fn run_measured(cmd: &mut Command, limit: Duration) -> (std::process::ExitStatus, u64, String) {
    use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
    fn reader(mut stream: impl std::io::Read + Send + 'static) -> std::thread::JoinHandle<String> {
        std::thread::spawn(move || {
            let mut text = String::new();
            drop(stream.read_to_string(&mut text));
            text
        })
    }
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let rss_file = std::env::temp_dir().join(format!("tracer-it-{}-rss-{n}", std::process::id()));
    let mut measured = Command::new("/usr/bin/python3");
    measured.args(["-c", MEASURE]).arg(&rss_file).arg(cmd.get_program()).args(cmd.get_args());
    for (key, value) in cmd.get_envs() {
        match value {
            Some(v) => measured.env(key, v),
            None => measured.env_remove(key),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        measured.current_dir(dir);
    }
    let mut child =
        measured.process_group(0).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("python3 starts");
    let pid = child.id() as i32;
    let readers = [child.stdout.take().map(reader), child.stderr.take().map(reader)];
    let deadline = Instant::now() + limit;
    let mut status = 0;
    loop {
        // SAFETY: our own child; WNOHANG returns at once.
        let r = unsafe { libc::waitpid(pid, &raw mut status, libc::WNOHANG) };
        if r == pid {
            break;
        }
        if Instant::now() > deadline {
            // SAFETY: killing our own child's process group (it and the command it started).
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
        assert!(Instant::now() <= deadline, "{cmd:?} did not end within {limit:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
    let out: String = readers.into_iter().flatten().map(|r| r.join().unwrap_or_default()).collect();
    let rss = std::fs::read_to_string(&rss_file).unwrap_or_default();
    drop(std::fs::remove_file(&rss_file));
    let rss_kib = rss.trim().parse();
    assert!(rss_kib.is_ok(), "{cmd:?}: no peak RSS measured: {out}");
    (std::process::ExitStatus::from_raw(status), rss_kib.unwrap_or_default(), out)
}

/// Starts `argv[2:]`, writes its `ru_maxrss` (KiB) to `argv[1]` and ends as it ended (its exit code, or killed by
/// its signal).
const MEASURE: &str = r#"
import os, signal, sys
pid = os.posix_spawnp(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"#;
