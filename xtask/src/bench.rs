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
            n => bail!("there is no row {n}: the rows are 1 to 17"),
        }
    }
    print_table(&rows.table);
    Ok(())
}

/// Row 1: the cost of one traced call against empty programs and no tracing.
fn row_1(d: &Dir, q: bool, rows: &mut Rows) -> Result<()> {
    let trace = d.trace();
    step("1/17 cost per traced call: none, empty programs, tracer (stand-in library)");
    let (n, reps) = (if q { "20000" } else { "100000" }, repeats(q));
    let modes = three_modes(d, &trace, reps, (&d.driver, &d.standin), &["count", n], "ns_per_call")?;
    // The real runtime beside it.
    let runner = fixtures_dir().join("mini_runner");
    let real_lib = fs::canonicalize("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5")?;
    let rn = if q { "3000" } else { "20000" };
    let real_none = field(&stdout_of(Command::new(&runner).args(["loop", rn]))?, "ns_per_call")?;
    let real_full =
        field(&traced(d, &trace, &[], &real_lib, &[runner.to_str().context("path")?, "loop", rn])?, "ns_per_call")?;
    let extra = json!({"calls_per_run": n, "repeats": reps,
        "real_libamdhip64_ns": {"none": real_none, "tracer": real_full}});
    rows.results.insert("cost_per_call".into(), modes.json(extra));
    rows.table.push((
        "1 cost per traced hipLaunchKernel".into(),
        format!("{} (real runtime: {real_none:.0} -> {real_full:.0} ns)", modes.measured()),
        format!("ratio <= {RATIO_GOAL}"),
        verdict(modes.ratio() <= RATIO_GOAL),
    ));
    Ok(())
}

/// Row 15: what a recording costs a process it does not record: the stand-in library's launch loop run
/// alone, and while tracer records another process (an idle one) by PID with probes on the same copy.
/// Recording by PID, the runtime probes are placed in the recorded process alone (a multi-point link with a
/// process filter, Linux 6.10 and later), so the neighbour's calls do not trap; before, each of them
/// trapped and the program filtered it.
fn row_15(d: &Dir, q: bool, rows: &mut Rows) -> Result<()> {
    step("15/17 an untraced process's call cost while tracer records another PID (stand-in library)");
    let (n, reps) = (if q { "20000" } else { "100000" }, repeats(q));
    let mut idle = Command::new("sleep").arg("3600").spawn().context("cannot run sleep")?;
    let measured = neighbour_runs(d, idle.id(), n, reps);
    drop(idle.kill());
    drop(idle.wait());
    let (alone, beside) = measured?;
    let ((alone_m, alone_lo, alone_hi), (beside_m, beside_lo, beside_hi)) = (stats(alone), stats(beside));
    let ratio = beside_m / alone_m;
    rows.results.insert(
        "neighbour_cost".into(),
        json!({
            "calls_per_run": n, "repeats": reps,
            "alone_ns": {"median": alone_m, "min": alone_lo, "max": alone_hi},
            "beside_recording_ns": {"median": beside_m, "min": beside_lo, "max": beside_hi},
            "ratio": ratio, "target": "equal to alone, within noise (ratio <= 1.1 or under 5 ns a call more)",
        }),
    );
    rows.table.push((
        "15 untraced neighbour's call".into(),
        format!(
            "alone {alone_m:.0} ns [{alone_lo:.0}-{alone_hi:.0}], beside a --pid recording {beside_m:.0} ns [{beside_lo:.0}-{beside_hi:.0}] ({:+.0} ns a call); ratio {ratio:.2}",
            beside_m - alone_m
        ),
        "within noise: ratio <= 1.1 or < 5 ns a call more".into(),
        verdict(ratio <= 1.1 || beside_m - alone_m < 5.0),
    ));
    Ok(())
}

/// Row 15's runs, interleaved: the loop's ns per call alone, then while a recording of `idle` is live.
fn neighbour_runs(d: &Dir, idle: u32, n: &str, reps: usize) -> Result<(Vec<f64>, Vec<f64>)> {
    let ready = d.work.join("row15.ready");
    let (mut alone, mut beside) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        alone.push(field(&stdout_of(Command::new(&d.driver).args(["count", n]))?, "ns_per_call")?);
        drop(fs::remove_file(&ready));
        let mut rec = Command::new(tracer_bin())
            .args(["record", "-q", "--force", "--debug-sync-teardown", "--lib"])
            .arg(&d.standin)
            .arg("-o")
            .arg(d.trace())
            .args(["--pid", &idle.to_string(), "--ready-file"])
            .arg(&ready)
            .spawn()
            .context("cannot run tracer")?;
        let deadline = Instant::now() + std::time::Duration::from_mins(1);
        while !ready.exists() && Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let out = if ready.exists() {
            stdout_of(Command::new(&d.driver).args(["count", n]))
        } else {
            Err(anyhow::anyhow!("the recording of pid {idle} did not get ready"))
        };
        // SAFETY: signalling our own child.
        unsafe {
            libc::kill(rec.id() as libc::pid_t, libc::SIGINT);
        }
        rec.wait()?;
        beside.push(field(&out?, "ns_per_call")?);
    }
    Ok((alone, beside))
}

/// Row 12: a call into a counted GPU library entry point (rocSPARSE's, through its multi-point link): one
/// trap and one counter, against empty programs on the same points and no tracing.
fn row_12(d: &Dir, q: bool, rows: &mut Rows) -> Result<()> {
    step("12/17 cost per counted library entry call (real rocSPARSE): none, empty programs, tracer");
    let program = fixtures_dir().join("sparse_rand");
    let real_lib = fs::canonicalize("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5")?;
    let (n, reps) = (if q { "20000" } else { "100000" }, repeats(q));
    let trace = d.trace();
    let modes = three_modes(d, &trace, reps, (&program, &real_lib), &["loop", n], "ns_per_call")?;
    // The last run's recording: were all its calls counted?
    let counted = entry_calls(&trace, "librocsparse")?;
    let want = 2 * n.parse::<u64>()?;
    let extra = json!({"calls_per_run": want, "repeats": reps, "counted_calls_last_run": counted});
    rows.results.insert("cost_per_entry_call".into(), modes.json(extra));
    rows.table.push((
        "12 cost per counted library entry call".into(),
        format!("{}; {counted}/{want} counted", modes.measured()),
        format!("ratio <= {RATIO_GOAL}, all counted"),
        verdict(modes.ratio() <= RATIO_GOAL && counted == want),
    ));
    Ok(())
}

/// Calls counted into the entry points of the mapped library whose name starts with `lib`, summed over
/// the trace's processes (`tracer report --json`'s ledger).
fn entry_calls(trace: &Path, lib: &str) -> Result<u64> {
    let out = stdout_of(Command::new(tracer_bin()).args(["report", "--json"]).arg(trace))?;
    let v: Value = serde_json::from_str(&out)?;
    let mut sum = 0;
    for p in v["processes"].as_array().into_iter().flatten() {
        for l in p["mapped"].as_array().into_iter().flatten() {
            let name = l["path"].as_str().unwrap_or("").rsplit('/').next().unwrap_or("");
            if name.starts_with(lib) {
                sum += l["calls"].as_u64().unwrap_or(0);
            }
        }
    }
    Ok(sum)
}

/// Row 2: loss with both cores calling as fast as they can, tracer against bpftrace.
fn row_2(d: &Dir, q: bool, rows: &mut Rows) -> Result<()> {
    let trace = d.trace();
    let driver = d.driver.to_str().context("path")?;
    step("2/17 loss: both cores calling as fast as they can, tracer and bpftrace");
    let per_thread = if q { "100000" } else { "500000" };
    let calls = 2 * per_thread.parse::<u64>()?;
    traced(d, &trace, &[], &d.standin, &[driver, "count", per_thread, "2"])?;
    let (f, recorded) = footer(&trace)?;
    let drops: u64 = f["drops"].as_object().map_or(0, |m| {
        m.values().flat_map(|v| v.as_array().cloned().unwrap_or_default()).filter_map(|x| x.as_u64()).sum()
    });
    let tracer_cpu = f["counters"]["tracer_cpu_us"].as_f64().unwrap_or(0.0) / 1e6;
    let tracer_ns_per_event = tracer_cpu * 1e9 / recorded.max(1) as f64;
    let bpftrace = bpftrace_run(d, driver, per_thread)?;
    let bpf_ns_per_event = bpftrace.0 * 1e9 / bpftrace.1.max(1) as f64;
    let share = tracer_ns_per_event / bpf_ns_per_event;
    rows.results.insert(
        "loss".into(),
        json!({
            "calls": calls, "recorded": recorded, "dropped": drops,
            "tracer_cpu_s": tracer_cpu, "tracer_cpu_ns_per_event": tracer_ns_per_event,
            "bpftrace_lines": bpftrace.1, "bpftrace_cpu_s": bpftrace.0, "bpftrace_cpu_ns_per_event": bpf_ns_per_event,
            "cpu_share_of_bpftrace": share, "target": "zero loss, <= 1/3 of bpftrace's CPU per event",
        }),
    );
    rows.table.push((
        "2 loss at full speed (2 threads)".into(),
        format!(
            "{recorded}/{calls} recorded, {drops} dropped; tracer {tracer_ns_per_event:.0} ns CPU/event, bpftrace {bpf_ns_per_event:.0} ns/event ({} lines): {share:.2}x",
            bpftrace.1
        ),
        "0 lost, <= 0.33x bpftrace".into(),
        verdict(recorded == calls && drops == 0 && share <= 1.0 / 3.0),
    ));
    Ok(())
}

/// Row 3: the user-space path alone (decode, attribute, write); also writes the traces rows 6 and 7 read.
fn row_3(d: &Dir, q: bool, rows: &mut Rows) -> Result<()> {
    step(
        "3/17 user-space path alone (decode -> attribute -> write), and the 10 M- and 100 M-event traces for 6/17 and 7/16",
    );
    let big = d.big();
    let mut c = Command::new("cargo");
    c.current_dir(root()).args(["bench", "-q", "-p", "tracer", "--bench", "pipeline", "--"]);
    let huge = d.huge();
    if !q {
        c.arg("--big").arg(&big).arg("--huge").arg(&huge);
    }
    let out = stdout_of(c.env("PATH", crate::path_with_cargo_bin()))?;
    let line = out.lines().find(|l| l.starts_with("pipeline")).context("no pipeline line")?;
    let eps = field(line, "events_per_s")?;
    let warm = out.lines().find(|l| l.starts_with("pipeline_warm")).context("no pipeline_warm line")?;
    let tap_ns = field(warm, "metrics_ns_per_event")?;
    rows.results.insert("pipeline_events_per_s".into(), json!({"value": eps, "target": 1_000_000}));
    rows.results.insert("metrics_tap_ns_per_event".into(), json!({"value": tap_ns}));
    rows.tap_ns = tap_ns;
    rows.table.push((
        "3 user-space path, one core".into(),
        format!("{:.2} M events/s", eps / 1e6),
        ">= 1 M/s".into(),
        verdict(eps >= 1e6),
    ));
    Ok(())
}

/// Row 4: a realistic load, 60 000 launches/s: tracer's CPU and peak memory.
/// Returns the bytes per launch of its plain trace, for row 5, and tracer's share of a core, for row 13.
fn row_4(d: &Dir, q: bool, rows: &mut Rows) -> Result<(f64, f64)> {
    let trace = d.trace();
    let secs = if q { "5" } else { "60" };
    step(&format!("4/17 realistic load: 60000 launches/s for {secs} s"));
    let Paced { pct, rss_mib, launches } = paced(d, &trace, &[], secs)?;
    let plain_bytes = fs::metadata(&trace)?.len() as f64 / launches.max(1) as f64;
    rows.results.insert(
        "realistic".into(),
        json!({"rate": 60000, "seconds": secs, "launches": launches, "tracer_cpu_percent": pct, "tracer_peak_rss_mib": rss_mib, "target": "<= 5 % of a core, <= 64 MiB"}),
    );
    rows.table.push((
        format!("4 60k launches/s for {secs} s"),
        format!("tracer {pct:.2} % of a core, peak RSS {rss_mib:.1} MiB ({launches} launches)"),
        "<= 5 %, <= 64 MiB".into(),
        verdict(pct <= 5.0 && rss_mib <= 64.0),
    ));
    Ok((plain_bytes, pct))
}

/// What a recording of the stand-in driver at 60 000 launches/s cost tracer.
struct Paced {
    /// Tracer's CPU time over the run's wall time, in percent of a core.
    pct: f64,
    rss_mib: f64,
    launches: u64,
}

/// Records the stand-in driver launching 60 000 times a second for `secs` (with `extra` record options).
fn paced(d: &Dir, trace: &Path, extra: &[&str], secs: &str) -> Result<Paced> {
    let driver = d.driver.to_str().context("path")?;
    let t = Instant::now();
    traced(d, trace, extra, &d.standin, &[driver, "paced", "60000", secs])?;
    let wall = t.elapsed().as_secs_f64();
    let (f, launches) = footer(trace)?;
    let cpu = f["counters"]["tracer_cpu_us"].as_f64().unwrap_or(0.0) / 1e6;
    let rss_mib = f["counters"]["tracer_max_rss_kib"].as_f64().unwrap_or(0.0) / 1024.0;
    Ok(Paced { pct: 100.0 * cpu / wall, rss_mib, launches })
}

/// The port row 13's recording serves metrics on.
const METRICS_PORT: u16 = 19_464;

/// Row 13: row 4's load with the metrics endpoint served and scraped every second (as Prometheus would):
/// tracer's CPU, beside row 4's `plain_pct` (one run each: their difference is within the runs' noise, about
/// half a point), and what the tap costs per event measured alone (row 3's warm runs), as a share of a core
/// at the same rate: the figure the target is on.
fn row_13(d: &Dir, q: bool, plain_pct: f64, rows: &mut Rows) -> Result<()> {
    use std::io::{Read as _, Write as _};
    let trace = d.trace();
    let secs = if q { "5" } else { "60" };
    step(&format!("13/17 the same load with --metrics served and scraped every second, {secs} s"));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Scrapes start once the recording says its probes (and its endpoint) are live.
    let ready = trace.with_extension("ready");
    drop(fs::remove_file(&ready));
    let scraper = {
        let done = std::sync::Arc::clone(&done);
        let ready = ready.clone();
        std::thread::spawn(move || {
            let (mut scrapes, mut bytes) = (0u64, 0u64);
            while !ready.exists() && !done.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_secs(1));
                let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", METRICS_PORT)) else { continue };
                let mut body = Vec::new();
                if s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").is_ok() && s.read_to_end(&mut body).is_ok() {
                    scrapes += 1;
                    bytes += body.len() as u64;
                }
            }
            (scrapes, bytes)
        })
    };
    let addr = format!("127.0.0.1:{METRICS_PORT}");
    let ready_arg = ready.to_str().context("a UTF-8 path")?;
    let ran = paced(d, &trace, &["--metrics", &addr, "--ready-file", ready_arg], secs);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let (scrapes, bytes) = scraper.join().map_err(|panic| anyhow::anyhow!("the scraper thread failed: {panic:?}"))?;
    let Paced { pct, rss_mib, launches } = ran?;
    let tap_pct = 100.0 * 60_000.0 * rows.tap_ns / 1e9;
    rows.results.insert(
        "metrics_endpoint".into(),
        json!({"rate": 60000, "seconds": secs, "launches": launches, "scrapes": scrapes, "scrape_bytes": bytes,
               "tracer_cpu_percent": pct, "without_metrics_cpu_percent": plain_pct, "tracer_peak_rss_mib": rss_mib,
               "tap_ns_per_event": rows.tap_ns, "tap_percent_at_60k": tap_pct,
               "target": "tap <= 1 % of a core at 60 000 launches/s"}),
    );
    rows.table.push((
        "13 60k launches/s, --metrics scraped 1/s".into(),
        format!(
            "tracer {pct:.2} % of a core (row 4: {plain_pct:.2} %), peak RSS {rss_mib:.1} MiB; {scrapes} scrapes of {} B; the tap alone {:.0} ns/event = {tap_pct:.2} % of a core",
            bytes / scrapes.max(1),
            rows.tap_ns
        ),
        "tap <= 1 %".into(),
        verdict(tap_pct <= 1.0 && scrapes > 0),
    ));
    Ok(())
}

/// Row 14: `tracer export --format parquet` over the 100 M-event trace: time, memory, size (row 6 reads the
/// trace first; it is removed here).
fn row_14(d: &Dir, q: bool, rows: &mut Rows) -> Result<()> {
    let huge = d.huge();
    if q {
        rows.table.push((
            "14 export parquet, 100 M events".into(),
            "skipped (--quick)".into(),
            "bounded memory".into(),
            "-".into(),
        ));
        return Ok(());
    }
    step("14/17 tracer export --format parquet over the 100 M-event trace (to a file)");
    let out = d.work.join("huge.parquet");
    let mut c = Command::new(tracer_bin());
    let (s, rss_kib) = measured(c.args(["export", "--format", "parquet", "--force", "-o"]).arg(&out).arg(&huge))?;
    let size_mib = fs::metadata(&out).map_or(0, |m| m.len()) as f64 / f64::from(1u32 << 20);
    let trace_mib = fs::metadata(&huge).map_or(0, |m| m.len()) as f64 / f64::from(1u32 << 20);
    drop(fs::remove_file(&out));
    drop(fs::remove_file(&huge));
    let rss_mib = rss_kib as f64 / 1024.0;
    rows.results.insert(
        "export_parquet_100m".into(),
        json!({"seconds": s, "peak_rss_mib": rss_mib, "output_mib": size_mib, "trace_mib": trace_mib, "target": "memory bounded (<= 256 MiB)"}),
    );
    rows.table.push((
        "14 export parquet, 100 M events".into(),
        format!("{s:.1} s, peak RSS {rss_mib:.0} MiB, {size_mib:.0} MiB written (trace {trace_mib:.0} MiB zstd)"),
        "<= 256 MiB".into(),
        verdict(rss_mib <= 256.0),
    ));
    Ok(())
}

/// Row 5: bytes per dispatch on disk, plain and compressed.
fn row_5(d: &Dir, q: bool, plain_bytes: f64, rows: &mut Rows) -> Result<()> {
    let driver = d.driver.to_str().context("path")?;
    step("5/17 bytes per dispatch on disk, plain and compressed");
    let zst = d.work.join("bench.jsonl.zst");
    let zsecs = if q { "2" } else { "10" };
    traced(d, &zst, &[], &d.standin, &[driver, "paced", "60000", zsecs])?;
    let zlaunches = launches_in(&zst)?;
    let z_bytes = fs::metadata(&zst)?.len() as f64 / zlaunches.max(1) as f64;
    rows.results.insert("bytes_per_dispatch".into(), json!({"plain": plain_bytes, "zstd": z_bytes, "target_zstd": 24}));
    rows.table.push((
        "5 size per dispatch".into(),
        format!("{plain_bytes:.0} B plain, {z_bytes:.1} B zstd"),
        "<= 24 B compressed".into(),
        verdict(z_bytes <= 24.0),
    ));
    Ok(())
}

/// Row 6: `tracer report` over 10 M and 100 M events (an hour at ~28 000 launches/s): time and peak memory.
fn row_6(d: &Dir, q: bool, rows: &mut Rows) -> Result<()> {
    let big = d.big();
    let huge = d.huge();
    if q {
        rows.table.push((
            "6 report over 10 M / 100 M events".into(),
            "skipped (--quick)".into(),
            "<= 5 s / <= 30 s".into(),
            "-".into(),
        ));
    } else {
        step("6/17 tracer report over the 10 M- and the 100 M-event traces");
        let mut c = Command::new(tracer_bin());
        let (s10, rss10) = measured(c.arg("report").arg(&big))?;
        let mut c = Command::new(tracer_bin());
        let (s100, rss100) = measured(c.arg("report").arg(&huge))?;
        let huge_mib = fs::metadata(&huge).map_or(0, |m| m.len()) / (1 << 20);
        let (rss10, rss100) = (rss10 as f64 / 1024.0, rss100 as f64 / 1024.0);
        rows.results.insert("report_10m_s".into(), json!({"value": s10, "peak_rss_mib": rss10, "target": 5}));
        rows.results.insert(
            "report_100m_s".into(),
            json!({"value": s100, "peak_rss_mib": rss100, "trace_mib": huge_mib, "target": 30}),
        );
        rows.table.push((
            "6 report over 10 M / 100 M events".into(),
            format!(
                "{s10:.2} s (peak RSS {rss10:.0} MiB) / {s100:.1} s (peak RSS {rss100:.0} MiB, {huge_mib} MiB zstd)"
            ),
            "<= 5 s / <= 30 s".into(),
            verdict(s10 <= 5.0 && s100 <= 30.0),
        ));
    }
    Ok(())
}

/// Row 7: export of a long trace, streamed, so memory stays flat.
fn row_7(d: &Dir, q: bool, rows: &mut Rows) -> Result<()> {
    let big = d.big();
    if q {
        rows.table.push((
            "7 export over 10 M events".into(),
            "skipped (--quick)".into(),
            "bounded memory".into(),
            "-".into(),
        ));
    } else {
        step("7/17 tracer export --format perfetto over the 10 M-launch trace (to a file)");
        let out = d.work.join("big.perfetto.json");
        drop(fs::remove_file(&out));
        let mut c = Command::new(tracer_bin());
        c.arg("export").arg(&big).args(["--format", "perfetto", "-o"]).arg(&out);
        let (s, rss_kib) = measured(&mut c)?;
        let size_mib = fs::metadata(&out).map_or(0, |m| m.len()) / (1 << 20);
        drop(fs::remove_file(&out));
        let rss_mib = rss_kib as f64 / 1024.0;
        rows.results.insert("export_perfetto_10m".into(), json!({"seconds": s, "peak_rss_mib": rss_mib, "output_mib": size_mib, "target": "memory bounded (<= 256 MiB)"}));
        rows.table.push((
            "7 export perfetto, 10 M events".into(),
            format!("{s:.1} s, peak RSS {rss_mib:.0} MiB, {size_mib} MiB written"),
            "<= 256 MiB".into(),
            verdict(rss_mib <= 256.0),
        ));
    }
    Ok(())
}

/// Row 8: how long a recording of nothing takes from start to exit.
fn row_8(d: &Dir, _q: bool, rows: &mut Rows) -> Result<()> {
    step("8/17 tracer record -- /bin/true, start to exit (attach, record, detach)");
    let trace_true = d.work.join("true.jsonl");
    let mut walls = Vec::new();
    for _ in 0..5 {
        drop(fs::remove_file(&trace_true));
        let t = Instant::now();
        let st = Command::new(tracer_bin())
            .arg("record")
            .arg("-q")
            .arg("-o")
            .arg(&trace_true)
            .args(["--", "/bin/true"])
            .status()?;
        walls.push(t.elapsed().as_secs_f64());
        anyhow::ensure!(st.success(), "tracer record -- /bin/true failed");
    }
    walls.sort_by(f64::total_cmp);
    let median = walls[walls.len() / 2];
    rows.results.insert("record_true_wall_s".into(), json!({"median": median, "runs": walls, "target": "< 0.5 s"}));
    rows.table.push((
        "8 record -- /bin/true, start to exit".into(),
        format!("median {median:.3} s of 5"),
        "< 0.5 s".into(),
        verdict(median < 0.5),
    ));
    Ok(())
}

/// A decode-token row: the stand-in's token loop of one shape, run without tracer, under empty programs and
/// under tracer; the traps a token costs, from the probes the last recording lists (one for an entry probe,
/// two for entry+return, none for a function left unprobed).
struct TokenRow {
    /// The loop's mode and its tokens per run (quick, full).
    mode: &'static str,
    tokens: (&'static str, &'static str),
    /// Per token, how many calls of each function.
    calls: &'static [(u64, &'static str)],
    /// The results key and the table's label.
    key: &'static str,
    label: &'static str,
    /// Launches a token makes, where the row's goal is at most launches + 2 traps.
    launches: Option<u64>,
}

fn token_row(d: &Dir, q: bool, rows: &mut Rows, row: &TokenRow) -> Result<()> {
    let trace = d.trace();
    let reps = repeats(q);
    let tokens = if q { row.tokens.0 } else { row.tokens.1 };
    let modes = three_modes(d, &trace, reps, (&d.driver, &d.standin), &[row.mode, tokens], "ns_per_token")?;
    let mut traps = 0;
    for &(n, api) in row.calls {
        traps += n * traps_per_call(&trace, api)?;
    }
    let mut result = modes.json(json!({"tokens_per_run": tokens, "repeats": reps, "traps_per_token": traps}));
    let (launches, target, traps_met) = match row.launches {
        Some(n) => {
            result["launches_per_token"] = json!(n);
            result["target_traps"] = json!(n + 2);
            (format!(" ({n} launches)"), format!("ratio <= {RATIO_GOAL}, traps <= {}", n + 2), traps <= n + 2)
        }
        None => (String::new(), format!("ratio <= {RATIO_GOAL}"), true),
    };
    rows.results.insert(row.key.into(), result);
    rows.table.push((
        row.label.into(),
        format!("{}; {traps} traps per token{launches}", modes.measured()),
        target,
        verdict(modes.ratio() <= RATIO_GOAL && traps_met),
    ));
    Ok(())
}

/// Row 9: the decode loop's call pattern (ggml with graphs): per token one graph launch and 14 syncs.
fn row_9(d: &Dir, q: bool, rows: &mut Rows) -> Result<()> {
    step("9/17 ggml-shaped decode token (1 hipGraphLaunch + 14 hipStreamSynchronize): none, empty programs, tracer");
    token_row(
        d,
        q,
        rows,
        &TokenRow {
            mode: "tokens",
            tokens: ("5000", "20000"),
            calls: &[(14, "hipStreamSynchronize"), (1, "hipGraphLaunch")],
            key: "ggml_token",
            label: "9 ggml-shaped token, 15 calls",
            launches: None,
        },
    )
}

/// Row 16: a decode token where every kernel is a launch (llama.cpp's CUDA decode with graphs off, the
/// stand-in for HIP builds without graphs and batched decode): 82 launches, 15 syncs, 7 async copies
/// toward the device and the logits copy back, each token. Traps per token from the probes the recording
/// lists, against the goal of launches + 2.
fn row_16(d: &Dir, q: bool, rows: &mut Rows) -> Result<()> {
    step("16/17 decode token without graphs (82 hipLaunchKernel, 15 syncs, 8 hipMemcpyAsync): none, empty, tracer");
    token_row(
        d,
        q,
        rows,
        &TokenRow {
            mode: "eager",
            tokens: ("500", "2000"),
            calls: &[(82, "hipLaunchKernel"), (15, "hipStreamSynchronize"), (8, "hipMemcpyAsync")],
            key: "eager_token",
            label: "16 token without graphs, 105 calls",
            launches: Some(82),
        },
    )
}

/// Row 17: a Vulkan dispatch as ggml records it, a pipeline bound then a dispatch (two traps), into one
/// command buffer never submitted, on Debian's real loader and Mesa's lavapipe (`vk_runner loop`): none,
/// empty programs, tracer. The loader's trampolines begin `test; je`, probed on the jump (one exception each).
fn row_17(d: &Dir, q: bool, rows: &mut Rows) -> Result<()> {
    let trace = d.trace();
    step("17/17 a Vulkan bind and dispatch pair (the real loader, lavapipe): none, empty programs, tracer");
    let (n, reps) = (if q { "20000" } else { "100000" }, repeats(q));
    let loader = fs::canonicalize("/usr/lib/x86_64-linux-gnu/libvulkan.so.1")?;
    let runner = fixtures_dir().join("vk_runner");
    let modes = three_modes(d, &trace, reps, (&runner, &loader), &["loop", n], "ns_per_pair")?;
    let traps = traps_per_call(&trace, "vkCmdBindPipeline")? + traps_per_call(&trace, "vkCmdDispatch")?;
    let extra = json!({"pairs_per_run": n, "repeats": reps, "traps_per_pair": traps});
    rows.results.insert("vulkan_dispatch".into(), modes.json(extra));
    rows.table.push((
        "17 Vulkan bind + dispatch".into(),
        format!("{}; {traps} traps a pair", modes.measured()),
        format!("ratio <= {RATIO_GOAL}"),
        verdict(modes.ratio() <= RATIO_GOAL),
    ));
    Ok(())
}

/// Rows 10 and 11: a real `ROCm` library stack, thousands of registrations at load, gigabytes of GPU code.
fn stack_rows(d: &Dir, q: bool, rows: &mut Rows) -> Result<()> {
    step("10/17 a real ROCm library stack: sparse_rand on hipSPARSE, rocSPARSE (1.3 GB) and rocRAND");
    let (r, v) = stack::rocsparse(&d.work, q)?;
    rows.results.insert("rocsparse_stack".into(), v);
    rows.table.push(r);
    step("11/17 the real libggml-hip.so mapped, its registrations replayed on the real HIP runtime");
    let (r, v) = stack::ggml_hip(&d.work, q)?;
    rows.results.insert("ggml_hip_mapped".into(), v);
    rows.table.push(r);
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
