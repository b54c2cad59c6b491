//! Rows of the launch path: a traced launch's cost (1), an untraced neighbour's call (15), counted library
//! calls (12), tracer's CPU at a launch rate (4), the metrics endpoint's cost (13), a rotated recording (14).

use anyhow::Context as _;

use super::{
    Command, Dir, Instant, Path, RATIO_GOAL, Result, Rows, Value, field, fixtures_dir, footer, fs, json, measured,
    repeats, stats, stdout_of, step, three_modes, traced, tracer_bin, verdict,
};

/// Row 1's goal (issue 60, which reset it from [`RATIO_GOAL`]): exact per-launch truth reads each launch's
/// arguments and its user stack, about 1.18x the empty programs by itself on the H100.
const LAUNCH_RATIO_GOAL: f64 = 1.25;

/// Row 1: the cost of one traced call against empty programs and no tracing.
pub(super) fn row_1(d: &Dir, q: bool, rows: &mut Rows) -> Result<()> {
    let trace = d.trace();
    step("1/18 cost per traced call: none, empty programs, tracer (stand-in library)");
    let (n, reps) = (if q { "20000" } else { "100000" }, repeats(q));
    let modes = three_modes(d, &trace, reps, (&d.driver, &d.standin), &["count", n], "ns_per_call")?;
    // The loop launches one kernel the same way again and again: the kernel counts the repeats into runs, so
    // the ring carries a few records for all of them (the last tracer run's footer).
    let (f, launches) = footer(&trace)?;
    let per_launch = f["counters"]["ring_records"].as_u64().unwrap_or(u64::MAX) as f64 / launches.max(1) as f64;
    // The real runtime beside it.
    let runner = fixtures_dir().join("mini_runner");
    let real_lib = fs::canonicalize("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5")?;
    let rn = if q { "3000" } else { "20000" };
    let real_none = field(&stdout_of(Command::new(&runner).args(["loop", rn]))?, "ns_per_call")?;
    let real_full =
        field(&traced(d, &trace, &[], &real_lib, &[runner.to_str().context("path")?, "loop", rn])?, "ns_per_call")?;
    let extra = json!({"calls_per_run": n, "repeats": reps,
        "ring_records_per_launch": per_launch, "launches_last_run": launches,
        "real_libamdhip64_ns": {"none": real_none, "tracer": real_full}});
    let mut entry = modes.json(extra);
    entry["target_ratio"] = json!(LAUNCH_RATIO_GOAL);
    rows.results.insert("cost_per_call".into(), entry);
    rows.table.push((
        "1 cost per traced hipLaunchKernel".into(),
        format!(
            "{}; {per_launch:.4} ring records a launch (real runtime: {real_none:.0} -> {real_full:.0} ns)",
            modes.measured()
        ),
        format!("ratio <= {LAUNCH_RATIO_GOAL}, < 0.1 records a launch"),
        verdict(modes.ratio() <= LAUNCH_RATIO_GOAL && per_launch < 0.1),
    ));
    Ok(())
}

/// Row 15: what a recording costs a process it does not record: the stand-in library's launch loop run
/// alone, and while tracer records another process (an idle one) by PID with probes on the same copy.
/// Recording by PID, the runtime probes are placed in the recorded process alone (a multi-point link with a
/// process filter, Linux 6.10 and later), so the neighbour's calls do not trap; before, each of them
/// trapped and the program filtered it.
pub(super) fn row_15(d: &Dir, q: bool, rows: &mut Rows) -> Result<()> {
    step("15/18 an untraced process's call cost while tracer records another PID (stand-in library)");
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
pub(super) fn row_12(d: &Dir, q: bool, rows: &mut Rows) -> Result<()> {
    step("12/18 cost per counted library entry call (real rocSPARSE): none, empty programs, tracer");
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

/// Row 4: a realistic load, 60 000 launches/s: tracer's CPU and peak memory.
/// Returns the bytes per launch of its plain trace, for row 5, and tracer's share of a core, for row 13.
pub(super) fn row_4(d: &Dir, q: bool, rows: &mut Rows) -> Result<(f64, f64)> {
    let trace = d.trace();
    let secs = if q { "5" } else { "60" };
    step(&format!("4/18 realistic load: 60000 launches/s for {secs} s"));
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
pub(super) fn row_13(d: &Dir, q: bool, plain_pct: f64, rows: &mut Rows) -> Result<()> {
    use std::io::{Read as _, Write as _};
    let trace = d.trace();
    let secs = if q { "5" } else { "60" };
    step(&format!("13/18 the same load with --metrics served and scraped every second, {secs} s"));
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
pub(super) fn row_14(d: &Dir, q: bool, rows: &mut Rows) -> Result<()> {
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
    step("14/18 tracer export --format parquet over the 100 M-event trace (to a file)");
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
