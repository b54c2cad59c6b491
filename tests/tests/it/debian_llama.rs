//! llama.cpp as Debian unstable ships it (`libllama0` 0.7.0, its `llama-bench` and `llama-server`, in the root
//! `cargo xtask setup` makes), run here on the CPU (the host has no GPU: ggml's HIP backend loads and finds
//! none). Its tools hand each step to `llama_process` as a `llama_batch_ext`, whose layout this release
//! changed (112-byte tokens, not the pinned release's 96): tracer reads it where the library's own code
//! says, and each step's sequences, positions and outputs are the tools' own.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use integration_tests::*;
use serde_json::Value;

fn sid_root() -> PathBuf {
    PathBuf::from(std::env::var_os("TRACER_SID_ROOT").expect("TRACER_SID_ROOT is set by `cargo xtask test`"))
}

/// The `llama_process` batches of the process named `comm` (started or found), in order.
fn batches<'a>(records: &'a [Line], comm: &str) -> Vec<&'a trace::StepBatch> {
    // Every process of that name (Ollama's discovery child is a `llama-server` too, one that serves nothing).
    let pids: Vec<u32> = records
        .iter()
        .filter_map(|r| if let Line::Process(p) = r { (p.comm == comm).then_some(p.pid) } else { None })
        .collect();
    records
        .iter()
        .filter_map(|r| if let Line::Batch(b) = r { pids.contains(&b.pid).then_some(b) } else { None })
        .collect()
}

/// The probe of `llama_process` was attached (its layout read from the library's code).
fn assert_batch_probed(records: &[Line]) {
    let probe = records
        .iter()
        .find_map(|r| if let Line::Probe(p) = r { (p.api == "llama_process").then_some(p) } else { None })
        .expect("a llama_process probe record");
    assert_eq!(probe.error, None, "{probe:?}");
}

/// Per step: its tokens, its runs (sequence, first position, tokens, outputs, last one's output), a fault.
type Steps = Vec<(i32, Vec<(i32, Option<i32>, u32, u32, bool)>, bool)>;

/// `llama-bench -p 290 -n 4 -r 1` in the root, recorded with `args` (`--program-stats` among them): its steps
/// and the runs of each batch program the kernel counted (`llama_batch`, `llama_batch_bounded`).
fn bench_steps(root: &Path, test: &str, args: &[&str]) -> (Steps, [u64; 2]) {
    let model = ModelInRoot::new(root, "bench");
    let out = scratch(test).join("t.jsonl");
    let r = root.display().to_string();
    let bench = ["/usr/bin/llama-bench", "-m", &model.inside, "-p", "290", "-n", "4", "-r", "1"];
    let all: Vec<&str> = args.iter().copied().chain(["--", "/usr/sbin/chroot", &r]).chain(bench).collect();
    let records = record_ok(&out, &all);
    assert_eq!(footer(&records).total_drops(), 0);
    assert_batch_probed(&records);
    let seen = batches(&records, "llama-bench")
        .iter()
        .map(|b| {
            (b.n_tokens, b.runs.iter().map(|r| (r.seq, r.pos, r.tokens, r.outputs, r.last_output)).collect(), b.fault)
        })
        .collect();
    (seen, [program_runs(&records, "llama_batch"), program_runs(&records, "llama_batch_bounded")])
}

/// `llama-bench -p 290 -n 4 -r 1`: a warm-up and a measured run of each test, so two prompts of 290 tokens
/// (one step each: `n_batch` 2048, `n_ubatch` 512), then the generation warm-up's one token at position 0 and
/// the measured generation's 4 tokens at positions 0 to 3, each the last (output) token of sequence 0. The
/// batch program's tokens are read by `bpf_loop`; the program of kernels before Linux 5.17 (bounded loops,
/// `--probe-mode bounded-loops`) reads the same steps; the kernel's own count of each program's runs says
/// which one ran, once a step.
#[test]
fn debian_s_llama_bench_steps_are_read_where_its_own_libllama_lays_its_batch_out() {
    let root = sid_root();
    let (seen, runs) = bench_steps(&root, "debian-bench", &["--program-stats"]);
    let prompt = (290, vec![(0, Some(0), 290, 1, true)], false);
    let token = |pos: i32| (1, vec![(0, Some(pos), 1, 1, true)], false);
    assert_eq!(seen, vec![prompt.clone(), prompt, token(0), token(0), token(1), token(2), token(3)]);
    assert_eq!(runs, [7, 0]);
    let (bounded, runs) =
        bench_steps(&root, "debian-bench-bounded", &["--program-stats", "--probe-mode", "bounded-loops"]);
    assert_eq!(bounded, seen);
    assert_eq!(runs, [0, 7]);
}

/// Debian's `llama-server -np 2` (two slots) on the CPU, answering two requests sent at once: prompts of 11
/// and 23 token ids, 8 and 12 tokens generated (greedy, EOS ignored, no prompt cache). Its phases' tokens
/// equal the server's own timings: prompt tokens the sum of `prompt_n` (plus, from its start, the 4 of its
/// two start-up decodes), decode tokens the sum of `predicted_n - 1` (the last sampled token is never
/// decoded); the two slots' sequences share steps. Recorded from its start, then attached late (`--pid`).
#[test]
fn debian_s_llama_server_with_two_slots_has_the_server_s_own_tokens_from_its_start_and_attached_late() {
    let root = sid_root();
    let model = ModelInRoot::new(&root, "server");
    let r = root.display().to_string();
    let server = |port: u16| -> Vec<String> {
        let args =
            format!("/usr/sbin/chroot {r} /usr/bin/llama-server -m {} -np 2 -c 2048 --port {port}", model.inside);
        args.split(' ').map(str::to_owned).collect()
    };

    // From its start.
    let out = scratch("debian-server").join("t.jsonl");
    let mut args: Vec<String> = vec!["-q".into(), "--".into()];
    let port = server_port(141);
    args.extend(server(port));
    let rec = Recording::start(&out, &args.iter().map(String::as_str).collect::<Vec<_>>());
    let timings = ask_two(port);
    let pid = exec_pid(&out);
    stop(pid);
    let (status, said) = rec.wait();
    assert!(status.success(), "{said}");
    check_server(&read_trace(&out), &out, &timings, 4);

    // Attached late: the start-up decodes are not seen.
    let port = server_port(142);
    let cmd = server(port);
    let mut child: Child = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("llama-server starts");
    wait_healthy(port, &mut child);
    let out = scratch("debian-server-late").join("t.jsonl");
    let rec = Recording::start(&out, &["-q", "--pid", &child.id().to_string()]);
    let timings = ask_two(port);
    stop(child.id());
    drop(child.wait());
    let (status, said) = rec.wait();
    assert!(status.success(), "{said}");
    check_server(&read_trace(&out), &out, &timings, 0);
}

/// Two completions sent at once to the server on port `argv[1]` (waiting for its `/health` first): prompts of 11
/// and 23 token ids, 8 and 12 tokens generated; prints each one's `[prompt_n, predicted_n]` from the server's
/// timings as JSON. Run by the host's Python here, by the root's own in the null GPU's guest.
pub(crate) const ASK_TWO: &str = r#"
import json, sys, threading, time, urllib.request
port = int(sys.argv[1])
for _ in range(6000):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/health"); break
    except Exception:
        time.sleep(0.1)
asks = ((11, 8), (23, 12))
done = [None] * len(asks)
def one(i, n, predict):
    body = {"prompt": list(range(100, 100 + n)), "n_predict": predict, "temperature": 0, "ignore_eos": True,
            "cache_prompt": False}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    t = json.load(urllib.request.urlopen(req, timeout=600))["timings"]
    done[i] = [t["prompt_n"], t["predicted_n"]]
threads = [threading.Thread(target=one, args=(i, n, p)) for i, (n, p) in enumerate(asks)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps(done))
"#;

/// [`ASK_TWO`]'s output: each answer's `(prompt_n, predicted_n)`.
pub(crate) fn timings_of(printed: &[u8]) -> Vec<(u64, u64)> {
    let v: Value = serde_json::from_slice(printed).expect("the timings");
    v.as_array()
        .expect("two answers")
        .iter()
        .map(|t| (t[0].as_u64().expect("prompt_n"), t[1].as_u64().expect("predicted_n")))
        .collect()
}

/// Two completions sent at once ([`ASK_TWO`]); each one's `(prompt_n, predicted_n)` from the server's timings.
pub(crate) fn ask_two(port: u16) -> Vec<(u64, u64)> {
    let o = Command::new("/usr/bin/python3").args(["-c", ASK_TWO, &port.to_string()]).output().expect("python3 runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    timings_of(&o.stdout)
}

fn wait_healthy(port: u16, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_mins(1);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(child.try_wait().expect("the server").is_none(), "llama-server ended");
        assert!(Instant::now() < deadline, "llama-server never listened on {port}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Listening comes before the model is loaded: the requests' script waits for /health itself.
}

pub(crate) fn stop(pid: u32) {
    // SAFETY: signalling a process this test started.
    unsafe {
        libc::kill(pid as i32, libc::SIGTERM);
    }
}

/// The report's `llama-server` that ran phases (not Ollama's discovery child, also a `llama-server`).
pub(crate) fn server_phases(v: &Value) -> &Value {
    let mut servers = v["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .filter(|p| p["comm"] == "llama-server" && p["phases"].as_array().is_some_and(|phases| !phases.is_empty()));
    let p = servers.next().expect("a llama-server with phases");
    assert!(servers.next().is_none(), "one llama-server ran phases");
    p
}

/// The server's phases against its own timings (plus `startup_prompt` tokens of its start-up decodes), and both
/// slots in one step.
pub(crate) fn check_server(records: &[Line], out: &Path, timings: &[(u64, u64)], startup_prompt: u64) {
    assert_eq!(footer(records).total_drops(), 0);
    assert_batch_probed(records);
    let both = batches(records, "llama-server")
        .iter()
        .filter(|b| b.runs.iter().any(|r| r.seq == 0) && b.runs.iter().any(|r| r.seq == 1))
        .count();
    assert!(both > 0, "the two slots' sequences share steps");
    let v = tracer_json(&["report", "--json", out.to_str().expect("UTF-8 path")]);
    let p = server_phases(&v);
    let phases = p["phases"].as_array().expect("phases");
    let sum = |key: &str| phases.iter().map(|ph| ph[key].as_u64().unwrap_or(0)).sum::<u64>();
    let prompt: u64 = timings.iter().map(|t| t.0).sum::<u64>() + startup_prompt;
    let decode: u64 = timings.iter().map(|t| t.1 - 1).sum();
    assert_eq!(
        (sum("prompt_tokens"), sum("decode_tokens"), sum("unread_tokens")),
        (prompt, decode, 0),
        "{timings:?}: {p}"
    );
}
