//! `tracer top` as a person uses it: in a terminal (tmux, 200 x 50), on real programs on Debian's HIP
//! runtime (`ggml_steps`: a prefill and three decode steps; `mini_runner hang`: the known launches, then
//! it waits), the screen read back (`tmux capture-pane`), keys sent, the exit status taken; and the
//! figures on the screen set beside `tracer report --json` of the trace it wrote.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use integration_tests::*;

/// A tmux server of its own, killed when dropped (however the test ends).
struct Tmux(String);

impl Tmux {
    /// Starts `script` (a shell command line) in a detached 200 x 50 session.
    fn start(name: &str, script: &str) -> Self {
        let t = Self(format!("tracer-top-{}-{name}", std::process::id()));
        let ok = t.cmd().args(["new-session", "-d", "-x", "200", "-y", "50", "-s", "top", script]).status().unwrap();
        assert!(ok.success(), "tmux starts");
        t
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.0]);
        c
    }

    /// The screen as text, once two captures 100 ms apart agree: a capture can meet a frame half drawn.
    fn screen(&self) -> String {
        let capture = || {
            let o = self.cmd().args(["capture-pane", "-p", "-t", "top"]).output().unwrap();
            String::from_utf8_lossy(&o.stdout).into_owned()
        };
        let mut last = capture();
        for _ in 0..50 {
            std::thread::sleep(Duration::from_millis(100));
            let now = capture();
            if now == last {
                break;
            }
            last = now;
        }
        last
    }

    fn keys(&self, keys: &str) {
        assert!(self.cmd().args(["send-keys", "-t", "top", keys]).status().unwrap().success());
    }

    /// The screen, once `ready` holds for it (every 200 ms, at most 90 s: the probes attach in seconds).
    fn wait(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let s = self.screen();
            if ready(&s) {
                return s;
            }
            assert!(Instant::now() < deadline, "never {what}; the screen:\n{s}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        drop(self.cmd().arg("kill-server").stderr(std::process::Stdio::null()).status());
    }
}

/// The columns of the row of the process named `comm` (its first line: PID COMM ROLE MODEL KERNELS K/S
/// PHASE TRAPS/TOK LATE ...), and the line it is on.
fn row(screen: &str, comm: &str) -> Option<(usize, Vec<String>)> {
    screen.lines().enumerate().find_map(|(i, l)| {
        let cols: Vec<String> = l.split_whitespace().map(str::to_owned).collect();
        (cols.len() > 8 && cols[0].parse::<u32>().is_ok() && cols[1] == comm).then_some((i, cols))
    })
}

fn kernels_on(screen: &str, comm: &str) -> u64 {
    let r = row(screen, comm);
    assert!(r.is_some(), "no row of {comm}:\n{screen}");
    r.unwrap().1[4].parse().unwrap()
}

/// The exit status the script wrote, once it did.
fn status(file: &Path) -> String {
    let deadline = Instant::now() + Duration::from_mins(1);
    loop {
        if let Ok(s) = std::fs::read_to_string(file)
            && s.ends_with('\n')
        {
            return s.trim().to_owned();
        }
        assert!(Instant::now() < deadline, "tracer top did not exit");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `tracer top ARGS; echo $? > STATUS`, as a shell line.
fn script(args: &str, status: &Path) -> String {
    format!("{} top {args}; echo $? > {}", tracer_bin().display(), status.display())
}

/// Each process's kernel executions in the report, and each phase's "PHASE N steps M tok" as the screen
/// writes it.
fn reported(trace: &Path, comm: &str) -> (u64, Vec<String>) {
    let v = tracer_json(&["report", "--json", trace.to_str().unwrap()]);
    let p = v["processes"].as_array().unwrap().iter().find(|p| p["comm"] == comm);
    assert!(p.is_some(), "no {comm} in the report");
    let p = p.unwrap();
    let kernels = p["kernels"].as_array().unwrap().iter().map(|k| k["executions"].as_u64().unwrap()).sum();
    let phases = p["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|ph| format!("{} {} steps {} tok", ph["phase"].as_str().unwrap(), ph["steps"], ph["tokens"]))
        .collect();
    (kernels, phases)
}

#[test]
fn top_shows_each_process_sorts_on_a_key_quits_on_q_and_its_figures_are_the_report_s() {
    let dir = scratch("top-keys");
    let (trace, st) = (dir.join("t.jsonl"), dir.join("status"));
    // ggml_steps runs and exits (a child of the shell, a higher pid); then the shell becomes mini_runner,
    // which launches and waits: two rows, the one with more kernels on the higher pid.
    let workload = format!("{}; exec {} hang", fixture("ggml_steps").display(), fixture("mini_runner").display());
    let tmux = Tmux::start("keys", &script(&format!("-o {} -- sh -c '{workload}'", trace.display()), &st));
    let screen = tmux.wait("both processes with their kernels", |s| {
        row(s, "ggml_steps").is_some_and(|(_, c)| c[6] == "exited")
            && row(s, "mini_runner").is_some()
            && s.contains("done")
    });
    // The counts settle (records reach the view a moment after the calls): two screens a second apart agree.
    let mut last = screen;
    let screen = loop {
        std::thread::sleep(Duration::from_secs(1));
        let now = tmux.screen();
        let counts = |s: &str| (kernels_on(s, "ggml_steps"), kernels_on(s, "mini_runner"));
        if counts(&now) == counts(&last) {
            break now;
        }
        last = now;
    };
    assert!(screen.contains("tracer top - recording to"), "{screen}");
    assert!(screen.contains("sort: kernels"), "{screen}");
    let line = |s: &str, comm| row(s, comm).unwrap().0;
    assert!(line(&screen, "ggml_steps") < line(&screen, "mini_runner"), "most kernels first:\n{screen}");
    // s three times: kernels/s, tokens, pid: the shell's pid (mini_runner) is the lower.
    tmux.keys("s");
    tmux.keys("s");
    tmux.keys("s");
    let sorted = tmux.wait("sorted by pid", |s| s.contains("sort: pid"));
    assert!(line(&sorted, "mini_runner") < line(&sorted, "ggml_steps"), "by pid:\n{sorted}");
    tmux.keys("q");
    assert_eq!(status(&st), "0", "q ends the recording, exit 0");
    for comm in ["ggml_steps", "mini_runner"] {
        let (kernels, phases) = reported(&trace, comm);
        assert_eq!(kernels_on(&screen, comm), kernels, "{comm}'s kernels:\n{screen}");
        for ph in &phases {
            assert!(screen.contains(ph.as_str()), "{comm}: {ph} not on the screen:\n{screen}");
        }
        eprintln!("{comm}: {kernels} kernels, phases {phases:?}, on the screen and in the report");
    }
    let (_, phases) = reported(&trace, "ggml_steps");
    assert!(phases.iter().any(|p| p.starts_with("prefill")) && phases.iter().any(|p| p.starts_with("decode")));
    let records = read_trace(&trace);
    assert_eq!(footer(&records).stop, trace::Stop::Signal, "q ends it as SIGINT does: the footer written");
}

#[test]
fn top_keeps_the_last_screen_until_q_then_exits_with_the_command_s_status_and_leaves_no_temporary_trace() {
    let dir = scratch("top-done");
    let (trace, st) = (dir.join("t.jsonl.zst"), dir.join("status"));
    let prog = fixture("ggml_steps");
    let tmux = Tmux::start("done", &script(&format!("-o {} -- {}", trace.display(), prog.display()), &st));
    tmux.wait("the recording's end", |s| s.contains("recording ended (command-exited)"));
    let (kernels, phases) = reported(&trace, "ggml_steps");
    assert_eq!(phases.len(), 2, "{phases:?}");
    // A capture can meet a frame half drawn: the final figures are waited for, never taken from one capture.
    let screen = tmux.wait("the report's figures", |s| {
        let row_kernels = row(s, "ggml_steps").and_then(|(_, cols)| cols[4].parse::<u64>().ok());
        row_kernels == Some(kernels) && phases.iter().all(|p| s.contains(p.as_str()))
    });
    assert_eq!(kernels_on(&screen, "ggml_steps"), kernels, "{screen}");
    eprintln!("final screen: ggml_steps {kernels} kernels, {phases:?}, as the report");
    // Still there a second later: the last screen stays until q.
    std::thread::sleep(Duration::from_secs(1));
    assert!(tmux.screen().contains("recording ended"), "the last screen stays");
    tmux.keys("q");
    assert_eq!(status(&st), "0", "the command's status");

    // --exit-when-done, no -o: it ends by itself, and its temporary trace goes with it.
    let tmp: PathBuf = dir.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let st2 = dir.join("status2");
    let line = format!("TMPDIR={} {}", tmp.display(), script(&format!("--exit-when-done -- {}", prog.display()), &st2));
    let _tmux = Tmux::start("exit", &line);
    assert_eq!(status(&st2), "0");
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0, "no file stays behind");

    // Not a terminal: one sentence.
    let o = tracer(&["top", "--", "/bin/true"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("tracer top needs a terminal: use tracer record"), "{err}");
}
