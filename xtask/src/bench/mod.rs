//! `cargo xtask bench`: tracer's cost, throughput and losses, measured side by side in one run and
//! printed as a table with the targets beside them; also written to `bench/results.json`.
//!
//! Probe costs are timed on a stand-in libamdhip64 (`bench/standin`, a test double whose entry points
//! return at once), because the real runtime spends ~30 µs failing each launch without a GPU, which would
//! drown the probes; the real library's figures are printed beside it.
#![expect(
    clippy::float_arithmetic,
    clippy::cast_precision_loss,
    clippy::print_stdout,
    reason = "a benchmark prints rates computed from timings"
)]

use std::{
    fs,
    os::unix::process::ExitStatusExt as _,
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use crate::{fixtures::fixtures_dir, root, run, stack, step, tracer_bin, verdict};

mod doorbell;
mod events;
mod launch;
mod tokens;

use doorbell::row_18;
use events::{row_2, row_3, row_5, row_6, row_7, row_8};
use launch::{row_1, row_4, row_12, row_13, row_14, row_15};
use tokens::{row_9, row_16, row_17, stack_rows};

pub(crate) struct Opts {
    /// Shorter runs, for checking the harness itself.
    pub quick: bool,
    /// Only the library-stack rows (10 and 11).
    pub stack_only: bool,
    /// Only these rows (none: every row); bench/results.json is then not written.
    pub only: Vec<u32>,
}

struct Dir {
    work: PathBuf,
    standin: PathBuf,
    driver: PathBuf,
}

impl Dir {
    /// The trace rows 1, 2, 4 and 9 record into (each run replaces it).
    fn trace(&self) -> PathBuf {
        self.work.join("bench.jsonl")
    }

    /// The 10 M- and 100 M-event traces row 3 writes and rows 6 and 7 read.
    fn big(&self) -> PathBuf {
        self.work.join("big.jsonl.zst")
    }

    fn huge(&self) -> PathBuf {
        self.work.join("huge.jsonl.zst")
    }
}

/// How many times rows 1 and 9 run each mode.
const fn repeats(quick: bool) -> usize {
    if quick { 3 } else { 7 }
}

fn build_tools() -> Result<Dir> {
    let dir = root().join("target/bench");
    fs::create_dir_all(&dir)?;
    let src = root().join("bench");
    let standin = dir.join("libamdhip64.so.5");
    // Unoptimised, every entry point begins `push %rbp`, as the real libamdhip64's do, and x86 uprobes emulate
    // a push. At -O2, GCC began hipLaunchKernel with a store (`mov %edx,-0x8(%rsp)`) and the others with a
    // `test`, `cmp` or `xor`, which a uprobe single-steps out of line: a second exception per call the real
    // runtime does not pay (figures before 2026-11-26 carry it). The bodies are a few instructions either way.
    run(Command::new("cc")
        .args(["-O0", "-shared", "-fPIC", "-Wl,-soname,libamdhip64.so.5"])
        .arg(format!("-Wl,--version-script={}", src.join("standin/hip_standin.map").display()))
        .arg("-o")
        .arg(&standin)
        .arg(src.join("standin/hip_standin.c")))?;
    let driver = dir.join("launch_loop");
    run(Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&driver)
        .arg(src.join("launch_loop.c"))
        .arg(format!("-L{}", dir.display()))
        .arg("-l:libamdhip64.so.5")
        .arg(format!("-Wl,-rpath,{}", dir.display()))
        .arg("-lpthread"))?;
    Ok(Dir { work: dir, standin, driver })
}

/// `key=value` pairs of a driver's output line.
fn field(out: &str, key: &str) -> Result<f64> {
    out.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no {key}= in {out:?}"))
}

fn stdout_of(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("cannot run {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `tracer record` around a command; returns the command's stdout.
fn traced(d: &Dir, out: &Path, extra: &[&str], lib: &Path, cmd: &[&str]) -> Result<String> {
    let mut c = Command::new(tracer_bin());
    // Probes released before tracer exits: the next measurement must not meet the last run's probes.
    c.args(["record", "-q", "--force", "--debug-sync-teardown", "--ring-size", "16777216"]);
    c.arg("--lib").arg(lib).arg("-o").arg(out);
    c.args(extra).arg("--").args(cmd).current_dir(&d.work);
    stdout_of(&mut c)
}

fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// A three-mode row's figures, (median, min, max) of the printed value in each mode: without tracer, under
/// empty programs on the same attach points, under tracer.
struct Modes {
    none: (f64, f64, f64),
    empty: (f64, f64, f64),
    full: (f64, f64, f64),
}

impl Modes {
    /// What tracer's programs cost over the trap: (tracer − none) / (empty − none), on the medians.
    fn ratio(&self) -> f64 {
        (self.full.0 - self.none.0) / (self.empty.0 - self.none.0)
    }

    /// The row's `bench/results.json` entry: `extra`'s fields, then the three modes and the ratio.
    fn json(&self, extra: Value) -> Value {
        let stat = |(median, min, max): (f64, f64, f64)| json!({"median": median, "min": min, "max": max});
        let mut v = extra;
        v["none_ns"] = stat(self.none);
        v["empty_probes_ns"] = stat(self.empty);
        v["tracer_ns"] = stat(self.full);
        v["ratio"] = json!(self.ratio());
        v["target_ratio"] = json!(RATIO_GOAL);
        v
    }

    /// The table's "measured" text: each mode's median (and range), and the ratio.
    fn measured(&self) -> String {
        let ((none, ..), (empty, e_lo, e_hi), (full, f_lo, f_hi)) = (self.none, self.empty, self.full);
        let ratio = self.ratio();
        format!(
            "none {none:.0} ns, empty probes {empty:.0} ns [{e_lo:.0}-{e_hi:.0}], tracer {full:.0} ns [{f_lo:.0}-{f_hi:.0}]; ratio {ratio:.3}"
        )
    }
}

/// The goal of every three-mode row: tracer's programs at most 15 % over empty ones.
const RATIO_GOAL: f64 = 1.15;

/// A program (on the runtime copy `lib`) run `reps` times each without tracer, under empty programs and
/// under tracer (last, so `trace` then holds a tracer recording); the printed `key`'s figures in each.
fn three_modes(
    d: &Dir,
    trace: &Path,
    reps: usize,
    (program, lib): (&Path, &Path),
    args: &[&str],
    key: &str,
) -> Result<Modes> {
    let cmd: Vec<&str> = std::iter::once(program.to_str().context("path")?).chain(args.iter().copied()).collect();
    let (mut none, mut empty, mut full) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..reps {
        none.push(field(&stdout_of(Command::new(program).args(args))?, key)?);
        empty.push(field(&traced(d, trace, &["--probe-mode", "empty"], lib, &cmd)?, key)?);
        full.push(field(&traced(d, trace, &[], lib, &cmd)?, key)?);
    }
    Ok(Modes { none: stats(none), empty: stats(empty), full: stats(full) })
}

/// Runs a command to completion; returns its wall time and its own peak RSS in KiB (wait4's rusage).
fn measured(c: &mut Command) -> Result<(f64, u64)> {
    let t = Instant::now();
    let child = c.stdout(std::process::Stdio::null()).spawn()?;
    let mut status = 0;
    // SAFETY: rusage is plain data; all-zero bytes are a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waiting for our own child with valid pointers.
    let rc = unsafe { libc::wait4(child.id() as libc::pid_t, &raw mut status, 0, &raw mut usage) };
    anyhow::ensure!(rc > 0 && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "{c:?} failed");
    Ok((t.elapsed().as_secs_f64(), usage.ru_maxrss as u64))
}

#[expect(clippy::verbose_file_reads, reason = "only the tail after a seek is read, not the whole file")]
fn footer(path: &Path) -> Result<(Value, u64)> {
    // Only the end of the file: the benchmark's own memory must stay small, since the tracer it starts
    // next inherits its image until exec.
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut f = fs::File::open(path)?;
    let len = f.metadata()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)))?;
    let mut tail = String::new();
    f.read_to_string(&mut tail)?;
    let last = tail.lines().last().context("empty trace")?;
    let f: Value = serde_json::from_str(last)?;
    let launches = f["records"]["launch"].as_u64().unwrap_or(0);
    Ok((f, launches))
}

/// Runs a command, returning its own CPU seconds (user + system, its children included) and wall time.
fn cpu_of(cmd: &mut Command) -> Result<(f64, f64, String)> {
    let t = Instant::now();
    let child = cmd.stdout(std::process::Stdio::piped()).spawn().with_context(|| format!("cannot run {cmd:?}"))?;
    let pid = child.id() as libc::pid_t;
    let mut stdout = child.stdout.expect("piped");
    let mut text = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut text)?;
    let mut status = 0;
    // SAFETY: rusage is plain data; valid pointers; waiting for our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let rc = unsafe { libc::wait4(pid, &raw mut status, 0, &raw mut ru) };
    if rc != pid || std::process::ExitStatus::from_raw(status).code() != Some(0) {
        bail!("{cmd:?} failed (status {status})");
    }
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok((s(ru.ru_utime) + s(ru.ru_stime), t.elapsed().as_secs_f64(), text))
}

/// The figures of a run: `bench/results.json`'s entries and the printed table's rows (benchmark,
/// measured, target, met).
#[derive(Default)]
struct Rows {
    results: serde_json::Map<String, Value>,
    table: Vec<(String, String, String, String)>,
    /// What the metrics tap adds per event, from row 3's warm runs (row 13 uses it).
    tap_ns: f64,
}

/// Runs every row, prints the table and writes `bench/results.json`.
pub(crate) fn bench(opts: Opts) -> Result<()> {
    let d = build_tools()?;
    let q = opts.quick;
    let mut rows = Rows::default();
    if opts.stack_only {
        stack_rows(&d, q, &mut rows)?;
        print_table(&rows.table);
        return Ok(());
    }
    if !opts.only.is_empty() {
        return some_rows(&d, q, &opts.only, &mut rows);
    }
    row_1(&d, q, &mut rows)?;
    row_2(&d, q, &mut rows)?;
    row_3(&d, q, &mut rows)?;
    let (plain_bytes, cpu_pct) = row_4(&d, q, &mut rows)?;
    row_13(&d, q, cpu_pct, &mut rows)?;
    row_5(&d, q, plain_bytes, &mut rows)?;
    row_6(&d, q, &mut rows)?;
    row_14(&d, q, &mut rows)?;
    row_7(&d, q, &mut rows)?;
    row_8(&d, q, &mut rows)?;
    row_9(&d, q, &mut rows)?;
    stack_rows(&d, q, &mut rows)?;
    row_12(&d, q, &mut rows)?;
    row_15(&d, q, &mut rows)?;
    row_16(&d, q, &mut rows)?;
    row_17(&d, q, &mut rows)?;
    row_18(&d, q, &mut rows)?;
    print_table(&rows.table);
    let host = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    rows.results.insert("machine".into(), json!({"kernel": host.trim(), "cpus": std::thread::available_parallelism().map_or(0, std::num::NonZero::get), "quick": q}));
    let path = root().join("bench/results.json");
    fs::write(&path, format!("{}\n", serde_json::to_string_pretty(&Value::Object(rows.results))?))?;
    step(&format!("wrote {}", path.display()));
    Ok(())
}

/// The rows asked for, in their order; the table is printed, bench/results.json not written (a partial run
/// would replace the figures of a whole one).
fn some_rows(d: &Dir, q: bool, only: &[u32], rows: &mut Rows) -> Result<()> {
    let mut cpu_pct = None;
    let mut plain_bytes = None;
    for &row in only {
        match row {
            1 => row_1(d, q, rows)?,
            2 => row_2(d, q, rows)?,
            3 => row_3(d, q, rows)?,
            4 => {
                let (bytes, pct) = row_4(d, q, rows)?;
                (plain_bytes, cpu_pct) = (Some(bytes), Some(pct));
            }
            5 => match plain_bytes {
                Some(bytes) => row_5(d, q, bytes, rows)?,
                None => bail!("row 5 compares with row 4's trace: ask for --rows 4,5"),
            },
            6 => row_6(d, q, rows)?,
            7 => row_7(d, q, rows)?,
            8 => row_8(d, q, rows)?,
            9 => row_9(d, q, rows)?,
            10 | 11 => stack_rows(d, q, rows)?,
            12 => row_12(d, q, rows)?,
            13 => match cpu_pct {
                Some(pct) => row_13(d, q, pct, rows)?,
                None => bail!("row 13 compares with row 4's load: ask for --rows 4,13"),
            },
            14 => row_14(d, q, rows)?,
            15 => row_15(d, q, rows)?,
            16 => row_16(d, q, rows)?,
            17 => row_17(d, q, rows)?,
            18 => row_18(d, q, rows)?,
            n => bail!("there is no row {n}: the rows are 1 to 18"),
        }
    }
    print_table(&rows.table);
    Ok(())
}

fn print_table(table: &[(String, String, String, String)]) {
    println!("\n{:<36} {:<110} {:<28} met", "benchmark", "measured", "target");
    for (a, b, c, v) in table {
        println!("{a:<36} {b:<110} {c:<28} {v}");
    }
}

/// How many traps one call of `api` costs under the probes a trace lists (its `probe` records).
fn traps_per_call(trace: &Path, api: &str) -> Result<u64> {
    use std::io::BufRead as _;
    // Probe records come before the events: read only up to the first event, not the whole trace.
    let probes: Vec<Value> = std::io::BufReader::new(fs::File::open(trace)?)
        .lines()
        .map_while(Result::ok)
        .take_while(|l| !l.contains("\"type\":\"launch\"") && !l.contains("\"type\":\"call\""))
        .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
        .filter(|v| v["type"] == "probe" && v["api"] == api)
        .collect();
    // A function the recording left unprobed on purpose costs no trap.
    if probes.iter().any(|v| v["error"].as_str().is_some_and(|e| e.starts_with("left unprobed"))) {
        return Ok(0);
    }
    let probe = probes
        .iter()
        .find(|v| v["error"].is_null())
        .with_context(|| format!("no attached probe for {api} in {}", trace.display()))?;
    Ok(if probe["kind"] == "entry" { 1 } else { 2 })
}

pub(crate) fn launches_in(path: &Path) -> Result<u64> {
    let out = stdout_of(Command::new(tracer_bin()).arg("report").arg("--json").arg(path))?;
    let v: Value = serde_json::from_str(&out)?;
    Ok(v["processes"].as_array().map_or(0, |ps| {
        ps.iter()
            .flat_map(|p| p["kernels"].as_array().cloned().unwrap_or_default())
            .filter_map(|k| k["launches"].as_u64())
            .sum()
    }))
}

/// bpftrace with the same probes (entry + return on hipLaunchKernel) printing the same fields; returns
/// its CPU seconds (the driver's own subtracted) and the lines it printed.
fn bpftrace_run(d: &Dir, driver: &str, per_thread: &str) -> Result<(f64, u64)> {
    if Command::new("bpftrace").arg("--version").output().is_err() {
        step("installing bpftrace (Debian package) for the comparison");
        run(Command::new("apt-get")
            .args(["install", "-y", "-q", "bpftrace"])
            .env("DEBIAN_FRONTEND", "noninteractive"))?;
    }
    let lib = d.standin.display();
    let script = format!(
        "uprobe:{lib}:hipLaunchKernel {{ @t[tid] = nsecs; @f[tid] = arg0; @g[tid] = arg1; @b[tid] = arg3; }}
         uretprobe:{lib}:hipLaunchKernel /@t[tid]/ {{
           printf(\"%d %d %lx %lx %lx %d %d\\n\", pid, tid, @f[tid], @g[tid], @b[tid], retval, nsecs - @t[tid]);
           delete(@t[tid]); delete(@f[tid]); delete(@g[tid]); delete(@b[tid]); }}"
    );
    let out = d.work.join("bpftrace.out");
    let (cpu, _wall, stdout) = cpu_of(
        Command::new("bpftrace")
            .arg("-o")
            .arg(&out)
            .arg("-c")
            .arg(format!("{driver} count {per_thread} 2"))
            .arg("-e")
            .arg(&script)
            .env("BPFTRACE_STRLEN", "64"),
    )?;
    let text = fs::read_to_string(&out)?;
    let lines = text.lines().filter(|l| l.split_whitespace().count() == 7).count() as u64;
    // The driver, bpftrace's child, prints its own CPU time on the shared stdout.
    let driver_cpu = field(&stdout, "cpu_s")?;
    Ok(((cpu - driver_cpu).max(0.0), lines))
}
