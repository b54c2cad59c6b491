//! Helpers for the integration tests: they run the real `tracer` binary (loading the real eBPF programs)
//! against real processes built with hipcc on the real HIP runtime, and read back what it recorded.
//!
//! `cargo xtask test` sets `TRACER_BIN` and `TRACER_FIXTURES` and runs these as root, one at a time.
#![expect(
    unused_crate_dependencies,
    reason = "the integration tests share one dependency list; each file uses a part of it"
)]
#![expect(clippy::unwrap_used, reason = "a helper of the tests panics where a test would: that is how it speaks")]

use std::{
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

pub use tracer::testing::trace::{self, Line};

mod measure;
pub use measure::run_measured;

pub fn tracer_bin() -> PathBuf {
    PathBuf::from(std::env::var_os("TRACER_BIN").expect("TRACER_BIN is set by `cargo xtask test`"))
}

pub fn fixture(name: &str) -> PathBuf {
    let dir = std::env::var_os("TRACER_FIXTURES").expect("TRACER_FIXTURES is set by `cargo xtask test`");
    let p = Path::new(&dir).join(name);
    assert!(p.exists(), "fixture {} is not built (run `cargo xtask build`)", p.display());
    p
}

/// A fresh directory for one test's files.
pub fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tracer-it-{}-{test}", std::process::id()));
    drop(std::fs::remove_dir_all(&dir));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// A tmpfs of `size` (mount's `size=`) mounted over `dir` for one test, unmounted when dropped, however the
/// test ends: a small disk that fills.
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    pub fn mount(dir: &Path, size: &str) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tracer-test", dir.to_str().unwrap()])
            .status()
            .unwrap();
        assert!(ok.success(), "mount a tmpfs over {}", dir.display());
        Self(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        drop(Command::new("umount").arg(&self.0).status());
    }
}

/// The path of a trace named `t.jsonl` in a new scratch directory for `test`.
pub fn scratch_trace(test: &str) -> PathBuf {
    scratch(test).join("t.jsonl")
}

/// Runs `tracer ARGS` to completion.
pub fn tracer(args: &[&str]) -> Output {
    Command::new(tracer_bin()).args(args).output().expect("tracer runs")
}

/// `tracer record -q -o OUT ARGS`, asserted to end with status 0; the complete trace it wrote.
pub fn record_ok(out: &Path, args: &[&str]) -> Vec<Line> {
    let mut all = vec!["record", "-q", "-o", out.to_str().expect("UTF-8 path")];
    all.extend_from_slice(args);
    let o = tracer(&all);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    read_trace(out)
}

/// `tracer ARGS`, asserted to end with status 0; its standard output as JSON.
pub fn tracer_json(args: &[&str]) -> serde_json::Value {
    let o = tracer(args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("JSON on standard output")
}

/// Runs a Python `script` with the `DuckDB` the tests install (`TRACER_PYLIB`) over `file` (its `sys.argv[1]`);
/// what it prints, as JSON.
pub fn duckdb_json(script: &str, file: &Path) -> serde_json::Value {
    let o = Command::new("/usr/bin/python3")
        .args(["-c", script])
        .arg(file)
        .env("PYTHONPATH", std::env::var("TRACER_PYLIB").expect("TRACER_PYLIB (set by cargo xtask test)"))
        .output()
        .expect("python3");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("JSON from the script")
}

/// A recording of `mini_runner hang` into a scratch directory, once the runner has made its seven launches
/// and sleeps until killed: the trace's path and the recording, still running.
pub fn recording_a_hanging_runner(test: &str) -> (PathBuf, Recording) {
    let out = scratch_trace(test);
    let runner = fixture("mini_runner");
    let rec = Recording::start(&out, &["--", runner.to_str().expect("UTF-8 path"), "hang"]);
    wait_for_launches(&out, 7);
    (out, rec)
}

/// Reads a trace, asserting it is complete.
pub fn read_trace(path: &Path) -> Vec<Line> {
    let (records, status) = trace::read_file(path).expect("trace reads");
    assert!(status.has_footer, "trace {} has no footer", path.display());
    assert_eq!(status.cut_bytes, 0);
    records
}

/// A `tracer record` running in the background, started once its probes are live: it waits for the
/// readiness file (`--ready-file`), the signal a script uses, never for a time.
pub struct Recording {
    pub child: Child,
    stderr: Option<std::thread::JoinHandle<String>>,
    pub output: PathBuf,
    /// The readiness file's `key=value` lines (`pid`, `trace`, `metrics`).
    pub ready: String,
}

impl Recording {
    pub fn start(output: &Path, args: &[&str]) -> Self {
        let ready = output.with_extension("ready");
        drop(std::fs::remove_file(&ready));
        let mut child = Command::new(tracer_bin())
            .arg("record")
            .arg("-o")
            .arg(output)
            .arg("--ready-file")
            .arg(&ready)
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .expect("tracer starts");
        let mut stderr = child.stderr.take().expect("piped");
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            drop(std::io::Read::read_to_string(&mut stderr, &mut text));
            text
        });
        let deadline = Instant::now() + Duration::from_mins(1);
        let said = wait_for_file(&ready, deadline, &mut child);
        let mut stderr = Some(stderr);
        if said.is_err() {
            let why = stderr.take().and_then(|t| t.join().ok()).unwrap_or_default();
            assert_eq!(said.as_ref().err(), None, "tracer exited before its probes were live: {why}");
        }
        Self { child, stderr, output: output.to_path_buf(), ready: said.unwrap_or_default() }
    }

    /// A `key=` line of the readiness file.
    pub fn ready_value(&self, key: &str) -> Option<&str> {
        self.ready.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: signalling our own child.
        unsafe {
            libc::kill(self.pid(), sig);
        }
    }

    /// Waits for the tracer to end; returns its exit status and its stderr.
    pub fn wait(mut self) -> (std::process::ExitStatus, String) {
        let status = self.child.wait().expect("tracer waits");
        let said = self.stderr.take().and_then(|t| t.join().ok()).unwrap_or_default();
        (status, said)
    }
}

/// Waits until `path` exists and returns its text, or the child's exit status if it ends first; fails the
/// test past `deadline`.
pub fn wait_for_file(path: &Path, deadline: Instant, child: &mut Child) -> Result<String, std::process::ExitStatus> {
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return Ok(text);
        }
        if let Some(status) = child.try_wait().expect("child status") {
            return Err(status);
        }
        assert!(Instant::now() < deadline, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A test that fails before it stops its recording leaves no tracer running behind it.
impl Drop for Recording {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            drop(self.child.kill());
            drop(self.child.wait());
        }
    }
}

/// A fixture process started in `late` mode: it has registered its kernels once it prints "ready",
/// and launches when `go` is called.
pub struct Waiting {
    pub child: Child,
}

impl Waiting {
    pub fn start(bin: &Path, mode: &str) -> Self {
        Self::start_with(bin, &[mode])
    }

    /// The same with any arguments.
    pub fn start_with(bin: &Path, args: &[&str]) -> Self {
        let mut child =
            Command::new(bin).args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("fixture starts");
        let mut out = BufReader::new(child.stdout.take().expect("piped"));
        let mut line = String::new();
        out.read_line(&mut line).expect("fixture stdout");
        assert_eq!(line.trim(), "ready", "fixture did not get ready");
        Self { child }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Attaches tracer to it by PID (recording to `out`), lets it run, and returns what tracer wrote
    /// once it stopped by itself (its target exited).
    pub fn traced_late(self, out: &Path) -> Vec<Line> {
        let rec = Recording::start(out, &["--pid", &self.pid().to_string()]);
        assert!(self.go().success());
        let (status, stderr) = rec.wait();
        assert!(status.success(), "{stderr}");
        read_trace(out)
    }

    /// Lets it run its launches and waits for it to exit.
    pub fn go(mut self) -> std::process::ExitStatus {
        use std::io::Write as _;
        let mut stdin = self.child.stdin.take().expect("piped");
        stdin.write_all(b"go\n").expect("fixture stdin");
        drop(stdin);
        self.child.wait().expect("fixture waits")
    }
}

pub fn launches(records: &[Line]) -> Vec<&trace::Launch> {
    records.iter().filter_map(|r| if let Line::Launch(l) = r { Some(l) } else { None }).collect()
}

pub fn kernels(records: &[Line]) -> Vec<&trace::Kernel> {
    records.iter().filter_map(|r| if let Line::Kernel(k) = r { Some(k) } else { None }).collect()
}

pub fn calls(records: &[Line]) -> Vec<&trace::Call> {
    records.iter().filter_map(|r| if let Line::Call(c) = r { Some(&**c) } else { None }).collect()
}

pub fn configs(records: &[Line]) -> Vec<&trace::Config> {
    records.iter().filter_map(|r| if let Line::Config(c) = r { Some(c) } else { None }).collect()
}

pub fn footer(records: &[Line]) -> &trace::Footer {
    records
        .last()
        .and_then(|r| if let Line::Footer(f) = r { Some(f) } else { None })
        .expect("the last record is the footer")
}

/// The runs the kernel counted of program `prog` (`record --program-stats`), over all its link sets: placed per
/// process, the one linked in every process is named `NAME (every process)`.
pub fn program_runs(records: &[Line], prog: &str) -> u64 {
    let programs = &footer(records).programs;
    programs.iter().filter(|(name, _)| name.split(' ').next() == Some(prog)).map(|(_, s)| s.runs).sum()
}

/// The `process` record of the exec that made a process `comm` (the first such exec recorded).
pub fn exec_of<'a>(records: &'a [Line], comm: &str) -> Option<&'a trace::Process> {
    records.iter().find_map(|r| match r {
        Line::Process(p) if p.cause.as_str() == "exec" && p.comm == comm => Some(p),
        _ => None,
    })
}

/// The name of the kernel a launch was attributed to.
pub fn kernel_name<'a>(records: &'a [Line], launch: &trace::Launch) -> &'a str {
    let id = launch.kernel.expect("every launch has a kernel id");
    kernels(records).into_iter().find(|k| k.id == id).map(|k| k.name.as_str()).expect("kernel record precedes launch")
}

/// Waits until `n` launches have reached the file (the writer flushes every 100 ms): `launch` lines, and the
/// launches each `repeat` line stands for.
pub fn wait_for_launches(path: &Path, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let repeated: usize = text
            .lines()
            .filter(|l| l.contains("\"type\":\"repeat\""))
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?["count"].as_u64())
            .map(|c| c as usize)
            .sum();
        if text.matches("\"type\":\"launch\"").count() + repeated >= n {
            return;
        }
        assert!(Instant::now() < deadline, "{n} launches never reached {}", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The PID of the command a recording exec'd (its `process` record with cause "exec"), read from a
/// trace still being written: waits until the recording has flushed it.
pub fn exec_pid(path: &Path) -> u32 {
    let deadline = Instant::now() + Duration::from_mins(1);
    loop {
        let found = std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["type"] == "process" && v["cause"] == "exec")
            .and_then(|v| v["pid"].as_u64());
        if let Some(pid) = found {
            return pid as u32;
        }
        assert!(Instant::now() < deadline, "no exec record in {}", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A library out of a real wheel on the package registry, fetched with pip once and cached under
/// target/cache/WHEEL (as `file`); None (the test says it skipped) only when pip cannot reach the registry.
pub fn wheel_library(wheel: &str, member: &str, file: &str) -> Option<PathBuf> {
    let fixtures = PathBuf::from(std::env::var_os("TRACER_FIXTURES").expect("set by `cargo xtask test`"));
    let cache = fixtures.parent().unwrap().join("cache").join(wheel.replace("==", "-"));
    let lib = cache.join(file);
    if lib.exists() {
        return Some(lib);
    }
    std::fs::create_dir_all(&cache).unwrap();
    let o = Command::new("/usr/bin/python3")
        .args(["-m", "pip", "download", "--no-deps", "--timeout", "30", "--retries", "2", "-d"])
        .arg(&cache)
        .arg(wheel)
        .output()
        .expect("python3 runs (`cargo xtask setup` installs python3-pip)");
    if !o.status.success() {
        let why = String::from_utf8_lossy(&o.stderr);
        assert!(!why.contains("No module named pip"), "pip is missing: run `cargo xtask setup`");
        #[expect(clippy::print_stderr, reason = "a skipped test says so")]
        let () = eprintln!(
            "SKIPPED: pip could not fetch {wheel} (no package registry reachable?): {}",
            why.lines().last().unwrap_or("")
        );
        return None;
    }
    let archive = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .expect("pip left the wheel");
    let part = cache.join(format!("{file}.part"));
    let extract = "import shutil, sys, zipfile\n\
        z = zipfile.ZipFile(sys.argv[1])\n\
        name = next(n for n in z.namelist() if sys.argv[3] in n)\n\
        shutil.copyfileobj(z.open(name), open(sys.argv[2], 'wb'))";
    let ok =
        Command::new("/usr/bin/python3").args(["-c", extract]).arg(&archive).arg(&part).arg(member).status().unwrap();
    assert!(ok.success(), "cannot extract {member} from {}", archive.display());
    std::fs::rename(&part, &lib).unwrap();
    drop(std::fs::remove_file(archive));
    Some(lib)
}

/// The real `libggml-hip.so` of a llama.cpp `ROCm` build (the `cyllama-rocm` wheel).
pub fn real_ggml_hip() -> Option<PathBuf> {
    wheel_library("cyllama-rocm==0.2.18", "/libggml-hip", "libggml-hip.so")
}

/// The real `libggml-cuda.so` of a llama.cpp CUDA 12 build (the `cyllama-cuda12` wheel, 88 MB).
pub fn real_ggml_cuda() -> Option<PathBuf> {
    wheel_library("cyllama-cuda12==0.2.18", "/libggml-cuda", "libggml-cuda.so")
}

/// Offload bundle files of the kinds any local user can put in front of a root tracer.
///
/// Written into `dir`: (name, path, what its first bundle's error says). Each must end in a clear error,
/// in bounded time and memory.
#[expect(clippy::little_endian_bytes, reason = "offload bundle headers are little-endian")]
pub fn hostile_bundles(dir: &Path) -> Vec<(&'static str, PathBuf, &'static str)> {
    use std::io::Write as _;
    const MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";
    let plain = |offset: u64, size: u64| {
        let mut b = MAGIC.to_vec();
        b.extend(1u64.to_le_bytes());
        b.extend(offset.to_le_bytes());
        b.extend(size.to_le_bytes());
        b.extend(1u64.to_le_bytes());
        b.push(b'x');
        b
    };
    let ccob = |method: u16, total: u64, uncompressed: u64, data: &[u8]| {
        let mut b = b"CCOB".to_vec();
        b.extend(3u16.to_le_bytes());
        b.extend(method.to_le_bytes());
        b.extend(total.to_le_bytes());
        b.extend(uncompressed.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        b.extend(data);
        b
    };
    let zeros = vec![0u8; 1 << 20];
    // 320 MiB of zeros: more than the 256 MiB tracer opens.
    let mut z = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    for _ in 0..320 {
        z.write_all(&zeros).unwrap();
    }
    let zstd_bomb = z.finish().unwrap();
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    for _ in 0..320 {
        z.write_all(&zeros).unwrap();
    }
    let zlib_bomb = z.finish().unwrap();
    let files: [(&'static str, Vec<u8>, &'static str); 5] = [
        // 57 bytes: an entry whose offset + size wraps around u64 (a panic before).
        ("wrap", plain(u64::MAX - 8, 16), "lies beyond the section"),
        // A compressed bundle that says it takes u64::MAX bytes (an endless loop before).
        ("loop", ccob(1, u64::MAX, 10, &[0; 8]), "are left in the section"),
        // Says it decompresses to 1 KiB, decompresses to 320 MiB (4.2 GB taken before).
        ("zstd-bomb", ccob(1, 32 + zstd_bomb.len() as u64, 1024, &zstd_bomb), "decompresses to more than"),
        // Says it decompresses to 4 GiB: not opened at all.
        ("zlib-bomb-declared", ccob(0, 32 + zlib_bomb.len() as u64, 4 << 30, &zlib_bomb), "more than tracer opens"),
        // Says 1 KiB, inflates to 320 MiB (6.4 GB taken before).
        ("zlib-bomb", ccob(0, 32 + zlib_bomb.len() as u64, 1024, &zlib_bomb), "decompresses to more than"),
    ];
    files
        .into_iter()
        .map(|(name, bytes, says)| {
            let path = dir.join(format!("{name}.hipfb"));
            std::fs::write(&path, bytes).unwrap();
            (name, path, says)
        })
        .collect()
}

/// A TCP port for a test's server, `20 000 + n`.
///
/// It is below the kernel's ephemeral range (`ip_local_port_range`, 32 768-60 999 by default), so that no connection another test makes meanwhile holds it as its own port when
/// the server binds it (a server that cannot bind exits at once, and its recording with it).
pub fn server_port(n: u16) -> u16 {
    let port = 20_000 + n;
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let low: u16 = range.split_whitespace().next().and_then(|l| l.parse().ok()).unwrap_or(32_768);
    assert!(port < low, "port {port} is in this machine's ephemeral range ({range}): choose a lower one");
    port
}

/// Runs `script` as root in a qemu guest of Debian 12's kernel, with tracer at `/guest/bin/tracer`.
///
/// `fixtures/kmod/guest.sh` boots it, with `envs` for its knobs; what the guest printed is returned, asserted to
/// have ended with status 0.
pub fn guest(script: &str, envs: &[(&str, &str)]) -> String {
    let script_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/kmod/guest.sh");
    let o = Command::new(&script_path)
        .env("GUEST_ELFS", tracer_bin())
        .env("GUEST_CMD", script)
        .envs(envs.iter().copied())
        .output()
        .expect("guest.sh runs");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "guest.sh failed: {out}\n{}", String::from_utf8_lossy(&o.stderr));
    out
}

/// The text a guest printed between `@@BEGIN name` and `@@END name`.
pub fn section<'a>(out: &'a str, name: &str) -> &'a str {
    let begin = format!("@@BEGIN {name}\n");
    let start = out.find(&begin).map(|i| i + begin.len());
    assert!(start.is_some(), "no section {name} in: {out}");
    let start = start.expect("checked");
    let len = out[start..].find(&format!("@@END {name}")).expect("section ends");
    &out[start..start + len]
}

/// A trace a guest printed as section `name`, written to a scratch file here: its path.
pub fn guest_trace_file(out: &str, name: &str) -> PathBuf {
    let path = scratch(&format!("guest-{name}")).join("t.jsonl");
    std::fs::write(&path, section(out, name)).expect("scratch file");
    path
}

/// A trace a guest printed as section `name`, read back here.
pub fn guest_trace(out: &str, name: &str) -> Vec<Line> {
    read_trace(&guest_trace_file(out, name))
}

/// `tracer report --json` of the trace a guest printed as section `name`: the process named `comm`.
pub fn guest_report(out: &str, name: &str, comm: &str) -> serde_json::Value {
    let path = guest_trace_file(out, name);
    let mut v = tracer_json(&["report", "--json", path.to_str().expect("UTF-8 path")]);
    let processes = v["processes"].as_array_mut().expect("processes");
    let i = processes.iter().position(|p| p["comm"] == comm);
    assert!(i.is_some(), "no process {comm} in {name}");
    processes.swap_remove(i.expect("checked"))
}

/// A tiny random F16 llama model written to `path` by `fixtures/kmod/tiny_llama.py` (numpy and gguf from
/// `TRACER_PYLIB`, which `cargo xtask test` sets).
pub fn tiny_llama(path: &Path) {
    let o = Command::new("/usr/bin/python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/kmod/tiny_llama.py"))
        .arg(path)
        .env("PYTHONPATH", std::env::var("TRACER_PYLIB").expect("TRACER_PYLIB (set by cargo xtask test)"))
        .output()
        .expect("python3 runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A tiny random F16 llama model ([`tiny_llama`]) written into a root's /tmp, removed on drop; `inside` is
/// its path as the root's programs see it.
pub struct ModelInRoot {
    pub host: PathBuf,
    pub inside: String,
}

impl ModelInRoot {
    pub fn new(root: &Path, name: &str) -> Self {
        let inside = format!("/tmp/tracer-it-{}-{name}.gguf", std::process::id());
        let host = root.join(inside.trim_start_matches('/'));
        tiny_llama(&host);
        Self { host, inside }
    }
}

impl Drop for ModelInRoot {
    fn drop(&mut self) {
        drop(std::fs::remove_file(&self.host));
    }
}
