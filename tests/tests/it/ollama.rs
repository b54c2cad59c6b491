//! Following Ollama: an Ollama-shaped process tree built from real programs. The server is a test double
//! (`fixtures/c/ollama_shim.c`, named `ollama`, started as `ollama serve`); the runners it starts are real
//! HIP programs (`mini_runner`) started with the argv Ollama gives them — `ollama runner --model P --port
//! N` (older releases) and `llama-server --model P --port N` (newer) — loading libamdhip64 from a
//! bundle-style directory `<tmp>/lib/ollama/rocm/`, as Ollama's own copy.
#![expect(
    clippy::many_single_char_names,
    reason = "short names for a record, a footer, an output and a value read in one test"
)]

use std::{
    io::{BufRead as _, BufReader, Write as _},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use integration_tests::*;

const BLOB_HEX: &str = "5f1e0c2e9d5a1b6a7c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9";
const DEBIAN_HIP: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";

/// `<tmp>/bin/ollama`, `<tmp>/lib/ollama/rocm/libamdhip64.so.5` (a copy: its own inode), a
/// `<tmp>/lib/ollama/llama-server`, and a models directory whose manifest names the blob.
pub(crate) struct Install {
    pub(crate) root: PathBuf,
}

impl Install {
    pub(crate) fn new(test: &str) -> Self {
        let root = scratch(test);
        std::fs::create_dir_all(root.join("bin")).unwrap();
        std::fs::create_dir_all(root.join("lib/ollama/rocm")).unwrap();
        std::fs::copy(fixture("ollama_shim"), root.join("bin/ollama")).unwrap();
        std::fs::copy(fixture("mini_runner"), root.join("lib/ollama/llama-server")).unwrap();
        std::fs::copy(std::fs::canonicalize(DEBIAN_HIP).unwrap(), root.join("lib/ollama/rocm/libamdhip64.so.5"))
            .unwrap();
        let manifests = root.join("models/manifests/registry.ollama.ai/library/tinyllama");
        std::fs::create_dir_all(&manifests).unwrap();
        std::fs::write(
            manifests.join("1b"),
            format!(
                r#"{{"schemaVersion":2,"layers":[{{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:{BLOB_HEX}","size":4}}]}}"#
            ),
        )
        .unwrap();
        std::fs::create_dir_all(root.join("models/blobs")).unwrap();
        std::fs::write(root.join(format!("models/blobs/sha256-{BLOB_HEX}")), b"GGUF").unwrap();
        Self { root }
    }

    pub(crate) fn bundle(&self) -> PathBuf {
        self.root.join("lib/ollama/rocm")
    }

    pub(crate) fn blob(&self) -> String {
        self.root.join(format!("models/blobs/sha256-{BLOB_HEX}")).display().to_string()
    }

    /// A child spec for the shim: `delay|parallel|path|argv...`.
    fn old_runner(&self, delay_ms: u32, port: u32) -> String {
        // The old runner is the `ollama` binary itself; here the real HIP program stands in, exec'd with
        // Ollama's argv.
        format!(
            "{delay_ms}|0|{}|ollama|runner|--ollama-engine|--model|{}|--port|{port}",
            fixture("mini_runner").display(),
            self.blob()
        )
    }

    pub(crate) fn new_runner(&self, delay_ms: u32, port: u32, model: &str) -> String {
        format!(
            "{delay_ms}|0|{}|llama-server|--model|{model}|--port|{port}|--host|127.0.0.1",
            self.root.join("lib/ollama/llama-server").display()
        )
    }

    /// Starts `ollama serve`; it waits for `go`. `delay_ms`: how long each runner waits before launching,
    /// as a runner loading its model would.
    pub(crate) fn serve(&self, children: &[String], delay_ms: u32) -> Server {
        self.serve_with(children, ("TRACER_TEST_RUNNER_DELAY_MS", &delay_ms.to_string()))
    }

    /// The same with one variable of the runners' (`TRACER_TEST_RUNNER_WAIT_FILE`: they wait for the file).
    pub(crate) fn serve_with(&self, children: &[String], (key, value): (&str, &str)) -> Server {
        let mut child = Command::new(self.root.join("bin/ollama"))
            .arg("serve")
            .env(key, value)
            .env("OLLAMA_SHIM_CHILDREN", children.join(";"))
            .env("LD_LIBRARY_PATH", self.bundle())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready");
        Server { child, out }
    }
}

pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) out: BufReader<std::process::ChildStdout>,
}

impl Server {
    pub(crate) fn go_and_wait(&mut self) {
        let mut stdin = self.child.stdin.take().unwrap();
        stdin.write_all(b"go\n").unwrap();
        drop(stdin);
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        assert!(line.starts_with("children done"), "server said {line:?}");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.child.kill());
        drop(self.child.wait());
    }
}

pub(crate) fn stop(rec: Recording) -> Vec<Line> {
    // Let the last events reach the file, then stop as a user would.
    std::thread::sleep(Duration::from_millis(300));
    rec.signal(libc::SIGINT);
    let out = rec.output.clone();
    let (status, stderr) = rec.wait();
    // Stopped by SIGINT: tracer answers as the signal would have (128 + 2).
    assert_eq!(status.code(), Some(130), "{stderr}");
    read_trace(&out)
}

pub(crate) fn processes(records: &[Line]) -> Vec<&trace::Process> {
    records.iter().filter_map(|r| if let Line::Process(p) = r { Some(p) } else { None }).collect()
}

fn library(records: &[Line], id: u32) -> &trace::Library {
    records.iter().find_map(|r| if let Line::Library(l) = r { (l.id == id).then_some(l) } else { None }).unwrap()
}

#[test]
fn ollama_runners_are_found_labelled_and_traced_from_their_first_call() {
    let install = Install::new("ollama-tree");
    let out = install.root.join("t.jsonl");
    let gguf = install.root.join("models/plain.gguf").display().to_string();
    let mut server = install.serve(&[install.old_runner(200, 40001), install.new_runner(300, 40002, &gguf)], 300);
    let server_pid = server.child.id();
    // An unrelated process using the same bundle library at the same time.
    let mut unrelated = Command::new(fixture("mini_runner"))
        .arg("late")
        .env("LD_LIBRARY_PATH", install.bundle())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(unrelated.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    let models = install.root.join("models");
    let rec =
        Recording::start(&out, &["--ollama-pid", &server_pid.to_string(), "--models-dir", models.to_str().unwrap()]);
    server.go_and_wait();
    unrelated.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(unrelated.wait().unwrap().success());
    let records = stop(rec);

    let Line::Header(h) = &records[0] else { panic!() };
    assert_eq!(h.options.ollama_servers, vec![server_pid]);
    let procs = processes(&records);
    let server_rec = procs.iter().find(|p| p.pid == server_pid).unwrap();
    assert_eq!(server_rec.role.map(trace::Role::as_str), Some("ollama-server"));
    let runners: Vec<&&trace::Process> = procs
        .iter()
        .filter(|p| p.cause.as_str() == "exec" && p.role.map(trace::Role::as_str) == Some("runner"))
        .collect();
    assert_eq!(runners.len(), 2, "{procs:#?}");
    let old = runners.iter().find(|p| p.argv[0] == "ollama").unwrap();
    assert_eq!(old.model.as_deref(), Some(install.blob().as_str()));
    assert_eq!(old.model_name.as_deref(), Some("tinyllama:1b"));
    let new = runners.iter().find(|p| p.argv[0] == "llama-server").unwrap();
    assert_eq!((new.model.as_deref(), new.model_name.as_deref()), (Some(gguf.as_str()), None));

    let unrelated_pid = unrelated.id();
    for runner in [old, new] {
        // Traced from its first call: registration was seen live.
        let named: Vec<&trace::Kernel> =
            kernels(&records).into_iter().filter(|k| k.pid == runner.pid && k.source.as_str() == "register").collect();
        assert_eq!(named.len(), 6, "runner {}: {named:?}", runner.pid);
        let ls: Vec<&trace::Launch> = launches(&records).into_iter().filter(|l| l.pid == runner.pid).collect();
        assert_eq!(ls.len(), 7);
        for l in ls {
            let lib = library(&records, l.lib);
            assert_eq!(lib.origin.as_str(), "ollama-bundle", "{lib:?}");
            assert!(lib.path.ends_with("lib/ollama/rocm/libamdhip64.so.5"), "{lib:?}");
        }
    }
    assert!(launches(&records).iter().all(|l| l.pid != unrelated_pid), "unrelated process recorded");
    // Exited runners left the filter: only the server remains.
    let f = footer(&records);
    assert_eq!((f.counters["filter_entries_start"], f.counters["filter_entries_end"]), (1, 1));

    // The report names each runner with its model and its library copies, mapped vs called.
    let o = tracer(&["report", "--json", out.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let p = v["processes"].as_array().unwrap().iter().find(|p| p["pid"] == old.pid).unwrap();
    assert_eq!(p["model_name"], "tinyllama:1b");
    let mapped = p["mapped"].as_array().unwrap();
    let hip = mapped.iter().find(|m| m["path"].as_str().unwrap().ends_with("rocm/libamdhip64.so.5")).unwrap();
    assert_eq!((hip["status"].as_str(), hip["origin"].as_str()), (Some("called"), Some("ollama-bundle")));
    // The HSA runtime is probed too (the HIP runtime calls it); the thunk library is mapped, not probed.
    assert!(
        mapped.iter().any(|m| m["path"].as_str().unwrap().contains("libhsa-runtime64") && m["status"] == "called"),
        "{mapped:?}"
    );
    assert!(
        mapped.iter().any(|m| m["path"].as_str().unwrap().contains("libhsakmt") && m["status"] == "not-probed"),
        "{mapped:?}"
    );
}

#[test]
fn runner_in_its_own_mount_namespace_is_traced_through_proc_root() {
    let install = Install::new("ollama-ns");
    let out = install.root.join("t.jsonl");
    // The runner mounts a private tmpfs, copies the runtime there and runs from it: that copy exists only
    // in its mount namespace. It waits before launching, as a runner loading a model would, until the
    // trace shows that copy probed (how long attaching takes is not what this test is about).
    let private = install.root.join("private");
    let go_file = install.root.join("runner-may-launch");
    std::fs::create_dir_all(&private).unwrap();
    let script = format!(
        "mount -t tmpfs none {p} && cp {lib} {p}/libamdhip64.so.5 && LD_LIBRARY_PATH={p} \
         TRACER_TEST_RUNNER_WAIT_FILE={go} exec -a llama-server {runner} --model /m.gguf --port 40003",
        p = private.display(),
        go = go_file.display(),
        lib = std::fs::canonicalize(DEBIAN_HIP).unwrap().display(),
        runner = fixture("mini_runner").display(),
    );
    let child = format!("0|0|/usr/bin/unshare|unshare|-m|/bin/bash|-c|{script}");
    let mut server = install.serve(&[child], 0);
    let rec = Recording::start(&out, &["--ollama-pid", &server.child.id().to_string()]);
    let private_lib = format!("\"path\":\"{}/libamdhip64.so.5\"", private.display());
    let trace = out;
    let opener = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_mins(1);
        while Instant::now() < deadline {
            let text = std::fs::read_to_string(&trace).unwrap_or_default();
            if text.find(&private_lib).is_some_and(|at| text[at..].contains("\"api\":\"hipLaunchKernel\"")) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        std::fs::write(&go_file, b"").unwrap();
    });
    server.go_and_wait();
    opener.join().unwrap();
    let records = stop(rec);
    let runner = processes(&records)
        .into_iter()
        .find(|p| p.role.map(trace::Role::as_str) == Some("runner"))
        .map(|p| p.pid)
        .expect("runner process");
    let ls: Vec<&trace::Launch> = launches(&records).into_iter().filter(|l| l.pid == runner).collect();
    assert_eq!(ls.len(), 7, "{records:#?}");
    let lib = library(&records, ls[0].lib);
    assert_eq!(lib.path, format!("{}/libamdhip64.so.5", private.display()));
    // Not visible outside the runner's namespace: the host path holds no such file.
    assert!(!Path::new(&lib.path).exists());
    // Registration happened before the copy was found; names come from the runner's ELF symbols.
    let named = ls.iter().filter(|l| kernel_name(&records, l) == "_Z12rms_norm_f32PKfPfif").count();
    assert_eq!(named, 1);
}

#[test]
fn churn_of_short_lived_runners_loses_nothing_and_leaves_the_filter_as_it_was() {
    let install = Install::new("ollama-churn");
    let out = install.root.join("t.jsonl");
    const RUNNERS: usize = 200;
    // Four at a time, each one launch: `llama-server --model ... loop 1` runs `known_launches`.
    let children: Vec<String> = (0..RUNNERS)
        .map(|i| {
            let parallel = i32::from(i % 4 != 3);
            format!(
                "0|{parallel}|{}|llama-server|--model|/m{i}.gguf|--port|{}",
                install.root.join("lib/ollama/llama-server").display(),
                41000 + i
            )
        })
        .collect();
    let mut server = install.serve(&children, 0);
    let rec = Recording::start(&out, &["--ollama-pid", &server.child.id().to_string()]);
    let t = Instant::now();
    server.go_and_wait();
    eprintln!("{RUNNERS} runners in {:?}", t.elapsed());
    let records = stop(rec);
    let runners: std::collections::BTreeSet<u32> = processes(&records)
        .iter()
        .filter(|p| p.role.map(trace::Role::as_str) == Some("runner"))
        .map(|p| p.pid)
        .collect();
    assert_eq!(runners.len(), RUNNERS);
    for pid in &runners {
        let n = launches(&records).iter().filter(|l| l.pid == *pid).count();
        assert_eq!(n, 7, "runner {pid} has {n} launches");
    }
    let f = footer(&records);
    assert_eq!(f.total_drops(), 0);
    assert_eq!((f.counters["filter_entries_start"], f.counters["filter_entries_end"]), (1, 1));
    assert_eq!(f.counters["filter_full"], 0);
}

/// Waits until the trace file holds every one of `needles` (the writer flushes every 100 ms).
fn wait_for_trace_text(path: &Path, needles: &[&str]) {
    let deadline = Instant::now() + Duration::from_mins(1);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if needles.iter().all(|n| text.contains(n)) {
            return;
        }
        assert!(Instant::now() < deadline, "{needles:?} never reached {}", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ollama_started_after_tracer_and_restarted_is_followed_from_its_exec() {
    let install = Install::new("ollama-late-start");
    let out = install.root.join("t.jsonl");
    // No server yet: tracer says it waits, and records nothing of the unrelated processes meanwhile.
    let rec = Recording::start(&out, &["--ollama"]);
    let bundle_copy = format!("\"path\":\"{}/libamdhip64.so.5\"", install.bundle().display());
    let mut pids = Vec::new();
    for port in [40011, 40012] {
        let mut server = install.serve(&[install.old_runner(0, port)], 0);
        pids.push(server.child.id());
        // Ollama starts its runners seconds after its own start; here, once tracer has probed the bundle.
        wait_for_trace_text(
            &out,
            &[&format!("\"pid\":{},", server.child.id()), "\"role\":\"ollama-server\"", &bundle_copy],
        );
        server.go_and_wait();
        drop(server); // killed: the next round is a restart
    }
    // An `ollama` client command (not a server, not started by one) leaves the filter.
    let client = Command::new(install.root.join("bin/ollama")).arg("list").output().unwrap();
    let records = stop(rec);
    let procs = processes(&records);
    for server in &pids {
        let s = procs.iter().find(|p| p.pid == *server).expect("each server recorded");
        assert_eq!((s.cause.as_str(), s.role.map(trace::Role::as_str)), ("exec", Some("ollama-server")));
        let runner = procs
            .iter()
            .find(|p| p.ppid == *server && p.role.map(trace::Role::as_str) == Some("runner"))
            .expect("the server's runner");
        // Traced from its first call: its kernels were registered while tracer watched.
        let ls: Vec<&trace::Launch> = launches(&records).into_iter().filter(|l| l.pid == runner.pid).collect();
        assert_eq!(ls.len(), 7, "runner {}", runner.pid);
        assert!(kernels(&records).iter().any(|k| k.pid == runner.pid && k.source.as_str() == "register"));
        assert!(library(&records, ls[0].lib).path.starts_with(install.bundle().to_str().unwrap()));
    }
    assert_eq!(client.status.code(), Some(2), "the double answers `ollama list` with its usage");
    // The client was seen from its exec (by its name), then let go: no role, nothing recorded for it.
    // (Its argv may be gone by the time tracer reads it: it is told by its exec, its name and no role.)
    let seen = procs
        .iter()
        .filter(|p| p.cause.as_str() == "exec" && p.comm == "ollama" && p.role.is_none() && !pids.contains(&p.pid))
        .count();
    assert_eq!(seen, 1, "{procs:#?}");
    // The client and the killed servers left the filter; only a server found running at the start (a
    // process another test left behind, if any) may still be in it.
    let Line::Header(h) = &records[0] else { panic!() };
    let f = footer(&records);
    assert!(f.counters["filter_entries_end"] <= h.options.ollama_servers.len() as u64, "{:?}", f.counters);
}

/// `cmd` started with its standard output piped, once it has printed `ready`.
fn spawn_ready(cmd: &mut Command) -> Child {
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    child
}

/// Runs `tracer ARGS` under strace; returns tracer's exit status, its stderr and the paths it opened.
fn traced_opens(args: &[&str], log: &Path) -> (std::process::ExitStatus, String, String) {
    let o = Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=open,openat,openat2", "-o"])
        .arg(log)
        .arg(tracer_bin())
        .args(args)
        .output()
        .expect("strace runs (`cargo xtask setup` installs it)");
    (o.status, String::from_utf8_lossy(&o.stderr).into_owned(), std::fs::read_to_string(log).unwrap_or_default())
}

/// A user who is not root runs a program called `ollama` as `ollama serve`, beside a `lib/ollama` whose
/// runtime copies are links to a root-only file: root tracer must neither open that file nor probe
/// anything of that install.
#[test]
fn an_impostor_ollama_serve_run_by_nobody_gets_no_open_and_no_probe() {
    use std::os::unix::fs::{chown, symlink};
    let install = Install::new("ollama-impostor");
    std::fs::remove_file(install.bundle().join("libamdhip64.so.5")).unwrap();
    symlink("/etc/shadow", install.bundle().join("libamdhip64.so.5")).unwrap();
    symlink("/etc/shadow", install.root.join("lib/ollama/libhsa-runtime64.so.1")).unwrap();
    let nobody = tracer::testing::uid_of("nobody").expect("a nobody user");
    for entry in ["", "bin", "bin/ollama", "lib", "lib/ollama", "lib/ollama/rocm"] {
        chown(install.root.join(entry), Some(nobody), Some(nobody)).unwrap();
    }
    let mut server = spawn_ready(
        Command::new("setpriv")
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
            .arg(install.root.join("bin/ollama"))
            .arg("serve")
            .stdin(Stdio::piped()),
    );
    let out = install.root.join("t.jsonl");
    let log = install.root.join("strace.log");
    // Not trusted by default: refused, with why.
    let args = ["record", "--ollama", "-d", "1", "-o", out.to_str().unwrap()];
    let (status, stderr, opens) = traced_opens(&args, &log);
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains(&format!("not following `ollama serve` pid {}", server.id())), "{stderr}");
    assert!(stderr.contains("not root"), "{stderr}");
    assert!(!opens.contains("shadow"), "tracer opened the root-only file:\n{opens}");
    let records = read_trace(&out);
    let mine = install.root.to_str().unwrap();
    assert!(!records.iter().any(|r| matches!(r, Line::Library(l) if l.path.starts_with(mine))));
    assert!(records.iter().any(|r| matches!(r, Line::Library(l) if l.path.starts_with("/usr/lib"))));
    // Trusted by name: followed, but its links out of its install tree are not: still no open of the
    // root-only file, and the system's copies stay probed beside any of the bundle's.
    std::fs::remove_file(&out).unwrap();
    let args = ["record", "--ollama", "--ollama-user", "nobody", "-d", "1", "-o", out.to_str().unwrap()];
    let (status, stderr, opens) = traced_opens(&args, &log);
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("following `ollama serve`") && !stderr.contains("not following"), "{stderr}");
    assert!(!opens.contains("shadow"), "tracer opened the root-only file:\n{opens}");
    let records = read_trace(&out);
    assert!(!records.iter().any(|r| matches!(r, Line::Library(l) if l.path.starts_with(mine))));
    assert!(records.iter().any(|r| matches!(r, Line::Library(l) if l.path.starts_with("/usr/lib"))));
    drop(server.kill());
    drop(server.wait());
}

/// A user who is not root makes root's own `/usr/bin/python3` show the argv `ollama serve` (`exec -a ollama
/// python3 serve`, `serve` a script of theirs): root owns the executable, yet it is no Ollama, and `--ollama`
/// neither follows it nor labels it a server.
#[test]
fn a_root_owned_interpreter_exec_d_as_ollama_serve_is_not_followed() {
    let dir = scratch("ollama-exec-a");
    std::fs::write(dir.join("serve"), "import sys, time\nprint('ready', flush=True)\ntime.sleep(60)\n").unwrap();
    let mut perms = std::fs::metadata(&dir).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&dir, perms).unwrap();
    let mut server = spawn_ready(
        Command::new("setpriv")
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", "bash", "-c"])
            .arg("exec -a ollama /usr/bin/python3 serve")
            .current_dir(&dir),
    );
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", server.id())).unwrap();
    assert_eq!(cmdline, b"ollama\0serve\0", "the impostor shows Ollama's argv");
    let out = dir.join("t.jsonl");
    let o = Command::new(tracer_bin())
        .args(["record", "--ollama", "-d", "1", "-o", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("not following `ollama serve` pid {}", server.id())), "{stderr}");
    assert!(stderr.contains("not a file named ollama"), "{stderr}");
    let records = read_trace(&out);
    let h = records.iter().find_map(|r| if let Line::Header(h) = r { Some(h) } else { None }).unwrap();
    assert!(!h.options.ollama_servers.contains(&server.id()), "{:?}", h.options.ollama_servers);
    assert!(!records.iter().any(|r| matches!(r, Line::Process(p) if p.pid == server.id() && p.role.is_some())));
    drop(server.kill());
    drop(server.wait());
    drop(std::fs::remove_dir_all(dir));
}

/// Under `--ollama`, servers that start a thousand short runners one after the other leave tracer's memory
/// flat: its memory after the last 900 runners is what it was after the first 100, within 4 MiB, and at the
/// end it holds no process that has ended.
#[test]
fn a_thousand_short_runners_leave_an_ollama_recording_flat() {
    let install = Install::new("ollama-churn");
    let out = install.root.join("t.jsonl");
    let rec = Recording::start(&out, &["--ollama"]);
    let rss_kib = || {
        let status = std::fs::read_to_string(format!("/proc/{}/status", rec.pid())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap().to_owned();
        line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap()
    };
    let runner = install.root.join("lib/ollama/llama-server").display().to_string();
    let mut after = Vec::new();
    for (round, n) in [100u32, 900].into_iter().enumerate() {
        let children: Vec<String> =
            (0..n).map(|i| format!("0|0|{runner}|llama-server|--model|m|--port|{}", 41000 + i)).collect();
        let mut server = install.serve(&children, 0);
        wait_for_trace_text(&out, &[&format!("\"pid\":{},", server.child.id()), "\"role\":\"ollama-server\""]);
        server.go_and_wait();
        drop(server);
        // Let the recording take the last runner's exit and the server's before the look.
        std::thread::sleep(Duration::from_millis(300));
        after.push(rss_kib());
        eprintln!("round {round}: {n} runners, tracer's RSS {} KiB", after[round]);
    }
    let records = stop(rec);
    let f = footer(&records);
    let runners = processes(&records)
        .iter()
        .filter(|p| p.cause.as_str() == "exec" && p.role.map(trace::Role::as_str) == Some("runner"))
        .count();
    eprintln!(
        "1 000 short runners under --ollama: tracer's RSS {} KiB after 100, {} KiB after 1 000, peak {} KiB",
        after[0], after[1], f.counters["tracer_max_rss_kib"]
    );
    assert_eq!(runners, 1000);
    assert_eq!(f.counters["processes_held_after_exit"], 0);
    assert!(after[1] < after[0] + 4096, "RSS {} KiB after 100, {} KiB after 1 000", after[0], after[1]);
    assert_eq!(f.total_drops(), 0);
}
