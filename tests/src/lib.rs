//! Helpers for the integration tests: they run the real `tracer` binary (loading the real eBPF programs)
//! against real processes built with hipcc on the real HIP runtime, and read back what it recorded.
//!
//! `cargo xtask test` sets `TRACER_BIN` and `TRACER_FIXTURES` and runs these as root, one at a time.
#![expect(
    unused_crate_dependencies,
    reason = "the integration tests share one dependency list; each file uses a part of it"
)]

use std::{
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Child, ChildStderr, Command, Output, Stdio},
    time::{Duration, Instant},
};

pub use tracer::trace::{self, Record};

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

/// Runs `tracer ARGS` to completion.
pub fn tracer(args: &[&str]) -> Output {
    Command::new(tracer_bin()).args(args).output().expect("tracer runs")
}

/// Reads a trace, asserting it is complete.
pub fn read_trace(path: &Path) -> Vec<Record> {
    let (records, status) = trace::read_file(path).expect("trace reads");
    assert!(status.has_footer, "trace {} has no footer", path.display());
    assert_eq!(status.cut_bytes, 0);
    records
}

/// A `tracer record` running in the background, started once it says it is recording.
pub struct Recording {
    pub child: Child,
    stderr: BufReader<ChildStderr>,
    pub output: PathBuf,
}

impl Recording {
    pub fn start(output: &Path, args: &[&str]) -> Self {
        let mut child = Command::new(tracer_bin())
            .arg("record")
            .arg("-o")
            .arg(output)
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .expect("tracer starts");
        let mut stderr = BufReader::new(child.stderr.take().expect("piped"));
        let mut line = String::new();
        let mut said = String::new();
        let deadline = Instant::now() + Duration::from_mins(1);
        loop {
            line.clear();
            let n = stderr.read_line(&mut line).expect("tracer stderr");
            assert!(n > 0, "tracer exited before recording: {:?}: {said}", child.wait());
            said.push_str(&line);
            if line.contains("recording to") {
                break;
            }
            assert!(Instant::now() < deadline, "tracer did not start recording");
        }
        Self { child, stderr, output: output.to_path_buf() }
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

    /// Waits for the tracer to end; returns its exit status and the rest of its stderr.
    pub fn wait(mut self) -> (std::process::ExitStatus, String) {
        let mut rest = String::new();
        drop(std::io::Read::read_to_string(&mut self.stderr, &mut rest));
        let status = self.child.wait().expect("tracer waits");
        (status, rest)
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
    pub fn traced_late(self, out: &Path) -> Vec<Record> {
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

pub fn launches(records: &[Record]) -> Vec<&trace::Launch> {
    records.iter().filter_map(|r| if let Record::Launch(l) = r { Some(l) } else { None }).collect()
}

pub fn kernels(records: &[Record]) -> Vec<&trace::Kernel> {
    records.iter().filter_map(|r| if let Record::Kernel(k) = r { Some(k) } else { None }).collect()
}

pub fn calls(records: &[Record]) -> Vec<&trace::Call> {
    records.iter().filter_map(|r| if let Record::Call(c) = r { Some(c) } else { None }).collect()
}

pub fn configs(records: &[Record]) -> Vec<&trace::Config> {
    records.iter().filter_map(|r| if let Record::Config(c) = r { Some(c) } else { None }).collect()
}

pub fn footer(records: &[Record]) -> &trace::Footer {
    records
        .last()
        .and_then(|r| if let Record::Footer(f) = r { Some(f) } else { None })
        .expect("the last record is the footer")
}

/// The name of the kernel a launch was attributed to.
pub fn kernel_name<'a>(records: &'a [Record], launch: &trace::Launch) -> &'a str {
    let id = launch.kernel.expect("every launch has a kernel id");
    kernels(records).into_iter().find(|k| k.id == id).map(|k| k.name.as_str()).expect("kernel record precedes launch")
}

/// Waits until `n` launch records have reached the file (the writer flushes every 100 ms).
pub fn wait_for_launches(path: &Path, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.matches("\"type\":\"launch\"").count() >= n {
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
    let o = Command::new("python3")
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
    let ok = Command::new("python3").args(["-c", extract]).arg(&archive).arg(&part).arg(member).status().unwrap();
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
