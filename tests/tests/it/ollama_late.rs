//! Attaching to an Ollama that already serves (issue 78): `--ollama-pid SERVER` while its runner has resolved
//! its kernels and waits, as most people start tracer. Each running runner is traced as `--pid RUNNER` traces
//! its target: every launch after the attach named, from what the runner's files and memory say. The
//! server is the shim of `ollama.rs` (a TEST DOUBLE of the Go server only); the runners are the real HIP
//! program on Debian's HIP runtime and the CUDA program on the CUDA TEST DOUBLES, started with the argv
//! Ollama 0.30+ gives `llama-server`.

use std::{
    io::{BufRead as _, Write as _},
    path::Path,
    process::ChildStdin,
    time::{Duration, Instant},
};

use integration_tests::*;

use crate::ollama::{Install, Server, processes, stop};

/// How a runner of the test shows it has made its kernels known and waits, and how it is let go.
#[derive(Clone, Copy)]
enum Runner {
    /// `cuda_driver`: prints "ready" once its kernels are resolved, then reads a line.
    Cuda,
    /// `mini_runner`: registers its kernels at its start, then sleeps until `<root>/go` exists.
    Hip,
}

/// A server whose only child is `llama-server --model BLOB ...` (the program `runner` copied there), let go
/// so that it starts it, and waited for until the runner has made its kernels known; returns the server,
/// the stdin the runner reads its own `go` from, and its PID.
fn serving(install: &Install, program: &Path, runner: Runner) -> (Server, ChildStdin, u32) {
    std::fs::copy(program, install.root.join("lib/ollama/llama-server")).unwrap();
    let child = install.new_runner(0, 40_011, &install.blob());
    let wait = install.root.join("go");
    let mut server = install.serve_with(&[child], ("TRACER_TEST_RUNNER_WAIT_FILE", wait.to_str().unwrap()));
    let mut stdin = server.child.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    stdin.flush().unwrap();
    let runner_pid = wait_for_child(server.child.id());
    match runner {
        Runner::Cuda => {
            let mut line = String::new();
            server.out.read_line(&mut line).unwrap();
            assert_eq!(line.trim(), "ready", "the runner said {line:?}");
        }
        Runner::Hip => wait_for_sleep(runner_pid),
    }
    (server, stdin, runner_pid)
}

/// The first child of `pid`, once it has exec'd (its name is no longer the shim's).
fn wait_for_child(pid: u32) -> u32 {
    let deadline = Instant::now() + Duration::from_mins(1);
    loop {
        let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        if let Some(child) = children.split_whitespace().next().and_then(|c| c.parse::<u32>().ok()) {
            let comm = std::fs::read_to_string(format!("/proc/{child}/comm")).unwrap_or_default();
            if comm.trim() == "llama-server" {
                return child;
            }
        }
        assert!(Instant::now() < deadline, "the server started no runner");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Until `pid`'s main thread sleeps in `clock_nanosleep` (230 on x86-64) with libamdhip64 mapped: past its
/// registrations, in the loop that waits for its file.
fn wait_for_sleep(pid: u32) {
    let deadline = Instant::now() + Duration::from_mins(1);
    loop {
        let syscall = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        if syscall.split_whitespace().next() == Some("230") && maps.contains("libamdhip64") {
            return;
        }
        assert!(Instant::now() < deadline, "runner {pid} never waited for its file");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The names of the runner's launches, in order ("" for unnamed ones), and the trace: recorded late, by
/// `--ollama-pid SERVER` (`by_server`) or `--pid RUNNER`, after the runner made its kernels known.
fn late_names(test: &str, program: &Path, runner: Runner, by_server: bool) -> (Vec<String>, Vec<Line>) {
    let install = Install::new(test);
    let out = install.root.join("t.jsonl");
    let (mut server, mut stdin, runner_pid) = serving(&install, program, runner);
    let models = install.root.join("models");
    let (flag, target) = if by_server { ("--ollama-pid", server.child.id()) } else { ("--pid", runner_pid) };
    let rec = Recording::start(&out, &[flag, &target.to_string(), "--models-dir", models.to_str().unwrap()]);
    match runner {
        Runner::Cuda => stdin.write_all(b"go\n").unwrap(),
        Runner::Hip => std::fs::write(install.root.join("go"), b"").unwrap(),
    }
    drop(stdin);
    let mut line = String::new();
    server.out.read_line(&mut line).unwrap();
    assert!(line.starts_with("children done"), "server said {line:?}");
    let records = if by_server {
        stop(rec)
    } else {
        // The only target exited: tracer stops by itself.
        let (status, stderr) = rec.wait();
        assert!(status.success(), "{stderr}");
        read_trace(&out)
    };
    let names = launches(&records)
        .into_iter()
        .filter(|l| l.pid == runner_pid)
        .map(|l| kernel_name(&records, l).to_owned())
        .collect();
    if by_server {
        let procs = processes(&records);
        let p = procs.iter().find(|p| p.pid == runner_pid);
        assert!(p.is_some(), "the runner has no process record: {procs:#?}");
        let p = p.unwrap();
        assert_eq!(p.role.map(trace::Role::as_str), Some("runner"), "{p:?}");
        assert_eq!(p.model_name.as_deref(), Some("tinyllama:1b"), "{p:?}");
    }
    drop(std::fs::remove_dir_all(&install.root));
    (names, records)
}

/// CUDA: the runner resolved its kernels to driver functions before tracer attached, as a loaded model's
/// runner has. Attached through its server, its launches are named exactly as `--pid RUNNER` names them:
/// from its runtime launches and the driver's function objects (`cuda.rs`'s late attach).
#[test]
fn late_attach_to_a_serving_ollama_names_a_cuda_runner_as_pid_does() {
    let driver = fixture("cuda_driver");
    let (by_pid, _) = late_names("ollama-late-cuda-pid", &driver, Runner::Cuda, false);
    let (by_server, records) = late_names("ollama-late-cuda-server", &driver, Runner::Cuda, true);
    // cuda_driver's late launches: five of add, the module function, one of a handle nothing names (0xBAD0).
    let want: Vec<&str> = ["_Z8late_addPfS_i"; 5].into_iter().chain(["_Z11blas_kernelPfi", ""]).collect();
    assert_eq!(by_pid, want);
    assert_eq!(by_server, by_pid);
    let f = footer(&records);
    assert_eq!(f.counters["unnamed_kernels"], 1, "only the handle nothing names: {:?}", f.counters);
}

/// HIP: the runner registered its kernels at its start, before tracer attached through its server; every
/// launch after the attach is named from its files, as `--pid RUNNER` names them.
#[test]
fn late_attach_to_a_serving_ollama_names_a_hip_runner_as_pid_does() {
    let runner = fixture("mini_runner");
    let (by_pid, _) = late_names("ollama-late-hip-pid", &runner, Runner::Hip, false);
    let (by_server, records) = late_names("ollama-late-hip-server", &runner, Runner::Hip, true);
    // mini_runner's known launches: five named, then two of a module that failed to load (null handles).
    assert_eq!(by_pid.len(), 7, "{by_pid:?}");
    assert_eq!(by_pid.iter().filter(|n| n.is_empty()).count(), 2, "{by_pid:?}");
    assert_eq!(by_server, by_pid);
    // Named from the runner's file: its registrations came before the attach, unseen.
    let ks = kernels(&records);
    assert!(ks.iter().all(|k| k.handle == 0 || (!k.name.is_empty() && k.source.as_str() != "register")), "{ks:#?}");
}

/// Ollama's GPU discovery starts `llama-server --list-devices` (and `llama-server --port N` without a model):
/// followed as the server's child, never labelled a runner; the runner after it is.
#[test]
fn the_discovery_child_is_followed_but_not_a_runner() {
    let install = Install::new("ollama-discovery");
    let out = install.root.join("t.jsonl");
    let server_bin = install.root.join("lib/ollama/llama-server");
    let discovery = format!("0|0|{}|llama-server|--list-devices|--offline|--verbose", server_bin.display());
    let probe = format!("0|0|{}|llama-server|--port|40012|--host|127.0.0.1|--no-webui|--offline", server_bin.display());
    let runner = install.new_runner(0, 40_013, &install.blob());
    let mut server = install.serve(&[discovery, probe, runner], 0);
    let models = install.root.join("models");
    let rec = Recording::start(
        &out,
        &["--ollama-pid", &server.child.id().to_string(), "--models-dir", models.to_str().unwrap()],
    );
    server.go_and_wait();
    let records = stop(rec);
    let execs: Vec<&trace::Process> =
        processes(&records).into_iter().filter(|p| p.cause.as_str() == "exec" && p.comm == "llama-server").collect();
    assert_eq!(execs.len(), 3, "{execs:#?}");
    let roles: Vec<Option<&str>> = execs.iter().map(|p| p.role.map(trace::Role::as_str)).collect();
    assert_eq!(roles, [None, None, Some("runner")], "{execs:#?}");
    let v = tracer_json(&["report", "--json", out.to_str().unwrap()]);
    let runners: Vec<&serde_json::Value> =
        v["processes"].as_array().unwrap().iter().filter(|p| p["role"] == "runner").collect();
    assert_eq!(runners.len(), 1, "{runners:#?}");
    assert_eq!(runners[0]["model_name"], "tinyllama:1b");
    drop(std::fs::remove_dir_all(&install.root));
}
