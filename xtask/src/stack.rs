//! Benchmarks 10 and 11: tracer beside a real `ROCm` library stack. A process maps gigabytes of GPU code and
//! registers ten thousand kernels at load; tracer must drop nothing, stay small and cost little per
//! registration.
//!
//! - 10: `fixtures/hip/sparse_rand` on Debian's hipSPARSE, rocSPARSE (1.3 GB, a 1.25 GB fat binary) and
//!   rocRAND;
//! - 11: the real `libggml-hip.so` of a llama.cpp `ROCm` build (the `cyllama-rocm` wheel the tests fetch)
//!   mapped into `bench/register_replay.c`, which replays its constructor's registrations (every bundle,
//!   every kernel) against Debian's real HIP runtime: the library itself needs `ROCm` 6 and cannot load here.
#![expect(
    clippy::float_arithmetic,
    clippy::cast_precision_loss,
    reason = "a benchmark prints rates computed from counts"
)]

use std::{
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use crate::{fixtures::fixtures_dir, root, run, step, tracer_bin, verdict};

/// What a recording of a registering program cost tracer, medians over the runs.
pub(crate) struct StackRun {
    pub kernels: u64,
    pub drops: u64,
    pub cpu_s: f64,
    pub rss_mib: f64,
    pub queue_peak_mib: f64,
}

/// `tracer record` (default ring, default output) around `cmd`, `runs` times.
fn record(work: &Path, name: &str, cmd: &[&str], runs: usize) -> Result<StackRun> {
    let trace = work.join(format!("{name}.jsonl.zst"));
    let mut all = Vec::new();
    for _ in 0..runs {
        let st = Command::new(tracer_bin())
            .args(["record", "-q", "--force", "--debug-sync-teardown", "-o"])
            .arg(&trace)
            .arg("--")
            .args(cmd)
            .stdout(std::process::Stdio::null())
            .status()?;
        anyhow::ensure!(st.success(), "tracer record -- {cmd:?} failed");
        let out = Command::new(tracer_bin()).arg("report").arg("--json").arg(&trace).output()?;
        anyhow::ensure!(out.status.success(), "tracer report failed");
        let v: Value = serde_json::from_slice(&out.stdout)?;
        let footer = zstd_footer(&trace)?;
        let counter = |k: &str| footer["counters"][k].as_f64().unwrap_or(0.0);
        all.push(StackRun {
            kernels: footer["records"]["kernel"].as_u64().unwrap_or(0),
            drops: v["drops_total"].as_u64().unwrap_or(u64::MAX),
            cpu_s: counter("tracer_cpu_us") / 1e6,
            rss_mib: counter("tracer_max_rss_kib") / 1024.0,
            queue_peak_mib: counter("queue_peak_bytes") / f64::from(1u32 << 20),
        });
    }
    let median = |f: fn(&StackRun) -> f64| {
        let mut v: Vec<f64> = all.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Ok(StackRun {
        kernels: all.iter().map(|r| r.kernels).min().unwrap_or(0),
        drops: all.iter().map(|r| r.drops).max().unwrap_or(0),
        cpu_s: median(|r| r.cpu_s),
        rss_mib: median(|r| r.rss_mib),
        queue_peak_mib: median(|r| r.queue_peak_mib),
    })
}

/// The footer of a compressed trace (its last line).
fn zstd_footer(trace: &Path) -> Result<Value> {
    let out = Command::new("zstdcat").arg(trace).output().context("zstdcat (Debian's zstd) runs")?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(serde_json::from_str(text.lines().last().context("empty trace")?)?)
}

/// tracer's CPU for a recording of nothing (loading its programs, attaching, releasing): the fixed cost.
fn fixed_cost(work: &Path, runs: usize) -> Result<f64> {
    let r = record(work, "true", &["/bin/true"], runs)?;
    Ok(r.cpu_s)
}

/// One table row: (name, measured, target, verdict), and the JSON figures.
pub(crate) type Row = ((String, String, String, String), Value);

fn row(label: &str, what: &str, r: &StackRun, fixed_s: f64, registrations: u64) -> Row {
    let n = registrations.max(1) as f64;
    let per_all_us = r.cpu_s * 1e6 / n;
    let per_more_us = (r.cpu_s - fixed_s).max(0.0) * 1e6 / n;
    let ok = r.drops == 0 && r.kernels >= registrations && r.rss_mib <= 100.0 && r.cpu_s <= 0.5 && per_more_us <= 20.0;
    let measured = format!(
        "{what}: {} of {registrations} named, {} dropped; peak RSS {:.1} MiB; tracer CPU {:.3} s in all ({:.1} us per registration; {:.1} us beyond the {:.3} s any recording takes to start); queue peak {:.1} MiB",
        r.kernels, r.drops, r.rss_mib, r.cpu_s, per_all_us, per_more_us, fixed_s, r.queue_peak_mib
    );
    let figures = json!({
        "registrations": registrations, "kernels_named": r.kernels, "dropped": r.drops,
        "tracer_peak_rss_mib": r.rss_mib, "tracer_cpu_s": r.cpu_s, "start_cost_cpu_s": fixed_s,
        "cpu_us_per_registration": per_all_us, "cpu_us_per_registration_beyond_start": per_more_us,
        "queue_peak_mib": r.queue_peak_mib,
        "target": "0 dropped, every registration named, peak RSS <= 100 MiB, CPU <= 0.5 s, <= 20 us per registration",
    });
    ((label.into(), measured, "0 lost, <= 100 MiB, <= 0.5 s, <= 20 us/reg".into(), verdict(ok)), figures)
}

/// Row 10: rocSPARSE and rocRAND.
pub(crate) fn rocsparse(work: &Path, quick: bool) -> Result<Row> {
    let runs = if quick { 1 } else { 5 };
    let fixed = fixed_cost(work, runs)?;
    let prog = fixtures_dir().join("sparse_rand");
    let prog = prog.to_str().context("path")?;
    let registrations = bpftrace_registrations(prog)?;
    let r = record(work, "sparse_rand", &[prog, "both"], runs)?;
    let what = format!(
        "{registrations} registrations (bpftrace's count) from a 1.25 GB fat binary (November: tracer CPU 0.34 s; \
         issue 81 found 1.76 s)"
    );
    Ok(row("10 rocSPARSE + rocRAND stack", &what, &r, fixed, registrations))
}

/// `__hipRegisterFunction` calls of `PROG both`, counted by bpftrace: the count tracer is held to.
fn bpftrace_registrations(prog: &str) -> Result<u64> {
    let script = "uprobe:/usr/lib/x86_64-linux-gnu/libamdhip64.so.5:__hipRegisterFunction /comm == \"sparse_rand\"/ { @n = count(); }";
    let out = Command::new("bpftrace").args(["-q", "-e", script, "-c", &format!("{prog} both")]).output()?;
    anyhow::ensure!(out.status.success(), "bpftrace failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("@n: ")?.trim().parse().ok())
        .context("bpftrace printed no count")
}

/// Row 11: the real libggml-hip.so, its registrations replayed.
pub(crate) fn ggml_hip(work: &Path, quick: bool) -> Result<Row> {
    let lib = real_ggml_hip()?;
    let replay = work.join("register_replay");
    run(Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&replay)
        .arg(root().join("bench/register_replay.c"))
        .arg("-l:libamdhip64.so.5"))?;
    // The plan: each bundle of its fat binary registered, then the kernels its code objects define.
    let out = Command::new(tracer_bin()).args(["inspect", "--json"]).arg(&lib).output()?;
    anyhow::ensure!(out.status.success(), "tracer inspect {} failed", lib.display());
    let inspection: Value = serde_json::from_slice(&out.stdout)?;
    let mut plan = String::new();
    let mut registrations = 0u64;
    for b in inspection["bundles"].as_array().context("bundles")? {
        writeln!(plan, "F {}", b["offset"].as_u64().context("offset")?)?;
        let mut names: Vec<String> = b["entries"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|e| e["kernels"].as_array().cloned().unwrap_or_default())
            .filter_map(|k| k["name"].as_str().map(str::to_owned))
            .collect();
        names.sort_unstable();
        names.dedup();
        for n in names {
            writeln!(plan, "K {n}")?;
            registrations += 1;
        }
    }
    let plan_path = work.join("ggml-hip.plan");
    fs::write(&plan_path, plan)?;
    let runs = if quick { 1 } else { 5 };
    let fixed = fixed_cost(work, runs)?;
    let r = record(
        work,
        "ggml_hip",
        &[replay.to_str().context("path")?, lib.to_str().context("path")?, plan_path.to_str().context("path")?],
        runs,
    )?;
    let mib = fs::metadata(&lib)?.len() / (1 << 20);
    let what = format!(
        "real libggml-hip.so ({mib} MiB, {} bundles) mapped, {registrations} registrations replayed",
        inspection["bundles"].as_array().map_or(0, Vec::len)
    );
    Ok(row("11 real libggml-hip.so mapped", &what, &r, fixed, registrations))
}

/// The real libggml-hip.so, fetched with pip once and cached where the tests cache it.
fn real_ggml_hip() -> Result<PathBuf> {
    let cache = root().join("target/cache/cyllama-rocm-0.2.18");
    let lib = cache.join("libggml-hip.so");
    if lib.exists() {
        return Ok(lib);
    }
    step("fetching the cyllama-rocm 0.2.18 wheel (a real llama.cpp ROCm build) with pip");
    fs::create_dir_all(&cache)?;
    run(Command::new("/usr/bin/python3")
        .args(["-m", "pip", "download", "--no-deps", "--timeout", "30", "-d"])
        .arg(&cache)
        .arg("cyllama-rocm==0.2.18"))?;
    let wheel = fs::read_dir(&cache)?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .context("pip left no wheel")?;
    let extract = "import shutil, sys, zipfile\n\
        z = zipfile.ZipFile(sys.argv[1])\n\
        name = next(n for n in z.namelist() if '/libggml-hip' in n)\n\
        shutil.copyfileobj(z.open(name), open(sys.argv[2], 'wb'))";
    let part = cache.join("libggml-hip.so.part");
    run(Command::new("/usr/bin/python3").args(["-c", extract]).arg(&wheel).arg(&part))?;
    fs::rename(&part, &lib)?;
    drop(fs::remove_file(wheel));
    if !lib.exists() {
        bail!("could not extract libggml-hip.so");
    }
    Ok(lib)
}
