//! Hostile code in front of a root tracer: offload bundles any local user can write and register (an
//! entry offset that wraps around, a length that loops the walk, zstd and zlib bombs), a FIFO bind-mounted
//! over a mapped file, `/dev/zero`. Each ends in one clear error within seconds and in bounded memory, in
//! `inspect` and in a root `record` of a process (`fixtures/hip/hostile_register.hip`) that registers
//! them with the real HIP runtime. A trace any user can hand to `report` or `export`: a header, then
//! gigabytes of newlines in a few KiB of zstd.

use std::{
    io::Read as _,
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use integration_tests::*;

/// What tracer may take reading a hostile file: its own few MiB plus the one bundle it opens at most
/// (256 MiB decompressed), far from the gigabytes such files took before.
const BOUNDED_KIB: u64 = 384 << 10;

#[test]
fn inspect_ends_each_hostile_bundle_in_one_clear_error() {
    let dir = scratch("hostile-inspect");
    for (name, path, says) in hostile_bundles(&dir) {
        let (status, rss_kib, out) =
            run_measured(Command::new(tracer_bin()).arg("inspect").arg(&path), Duration::from_mins(1));
        // The listing ends, its one bundle says in one line why it was not opened.
        assert!(status.success(), "{name}: {out}");
        let errors: Vec<&str> = out.lines().filter(|l| l.contains("not opened:")).collect();
        assert_eq!(errors.len(), 1, "{name}: {out}");
        assert!(errors[0].contains(says), "{name}: {out}");
        assert!(rss_kib < BOUNDED_KIB, "{name}: inspect took {rss_kib} KiB");
        println!("inspect {name}: {rss_kib} KiB: {}", errors[0].trim());
    }
    for special in ["/dev/zero", "/dev/null"] {
        let (status, rss_kib, out) =
            run_measured(Command::new(tracer_bin()).args(["inspect", special]), Duration::from_secs(10));
        assert_eq!(status.code(), Some(1), "{out}");
        assert!(out.contains("is a character device, not a regular file"), "{out}");
        assert!(rss_kib < 64 << 10);
    }
    // A FIFO is refused without being opened (opening it for reading would wait for a writer).
    let fifo = dir.join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let (status, _, out) = run_measured(Command::new(tracer_bin()).arg("inspect").arg(&fifo), Duration::from_secs(10));
    assert_eq!(status.code(), Some(1));
    assert!(out.contains("is a FIFO, not a regular file"), "{out}");
    drop(std::fs::remove_dir_all(dir));
}

/// Records `hostile_register MODE FILE` from its start; returns the trace and tracer's stderr.
fn record_registration(dir: &Path, mode: &str, file: &Path) -> (Vec<Line>, String) {
    let out = dir.join(format!("{mode}-{}.jsonl", file.file_name().unwrap().to_string_lossy()));
    let (status, _, said) = run_measured(
        Command::new(tracer_bin())
            .args(["record", "-o"])
            .arg(&out)
            .arg("--")
            .arg(fixture("hostile_register"))
            .arg(mode)
            .arg(file),
        Duration::from_mins(2),
    );
    assert!(status.success(), "{mode} {}: {said}", file.display());
    (read_trace(&out), said)
}

#[test]
fn a_recording_of_a_process_registering_hostile_bundles_ends_normally_and_says_what_was_wrong() {
    let dir = scratch("hostile-record");
    for (name, path, says) in hostile_bundles(&dir) {
        let (records, said) = record_registration(&dir, "map", &path);
        // The fat binary and the kernel are recorded, with the bundle they point at.
        let fat = calls(&records).into_iter().find(|c| c.api.name() == "__hipRegisterFatBinary").expect("recorded");
        assert_eq!(
            (fat.file.as_deref(), fat.file_offset, fat.bundle.as_deref()),
            (path.to_str(), Some(0), Some("0000")),
            "{name}"
        );
        let k = kernels(&records).into_iter().find(|k| k.name == "_Z14hostile_kernelv").expect("named");
        assert_eq!((k.code_file.as_deref(), k.bundles.as_slice()), (path.to_str(), &["0000".to_owned()][..]));
        // A header that is wrong: counted in the footer, and one sentence on stderr naming the file. A bomb
        // behind a plausible header is harmless here: a recording reads headers only (the registration
        // names the bundle), and nothing is decompressed.
        let f = footer(&records);
        let warning = said.lines().find(|l| l.contains("warning:")).unwrap_or_default();
        if says.contains("decompresses to more than") {
            assert_eq!(f.counters.get("fat_binaries_with_corrupt_bundle"), None, "{name}: {:?}", f.counters);
            assert!(warning.is_empty(), "{name}: {said}");
        } else {
            assert_eq!(f.counters.get("fat_binaries_with_corrupt_bundle"), Some(&1), "{name}: {:?}", f.counters);
            assert!(warning.contains(path.to_str().unwrap()) && warning.contains(says), "{name}: {said}");
        }
        let rss = f.counters["tracer_max_rss_kib"];
        assert!(rss < BOUNDED_KIB, "{name}: tracer took {rss} KiB");
        println!("record {name}: tracer {rss} KiB; {warning}");
    }
    drop(std::fs::remove_dir_all(dir));
}

#[test]
fn a_fifo_over_a_mapped_files_path_and_dev_zero_never_stall_a_recording() {
    let dir = scratch("hostile-fifo");
    let (_, path, _) = hostile_bundles(&dir).into_iter().next().unwrap();
    // The process binds a FIFO over its mapped file's path in its own mount namespace: tracer reads the
    // mapping's file through /proc/PID/map_files, never the path, so it neither waits nor misses it.
    let (records, said) = record_registration(&dir, "fifo", &path);
    let fat = calls(&records).into_iter().find(|c| c.api.name() == "__hipRegisterFatBinary").expect("recorded");
    assert_eq!(fat.bundle.as_deref(), Some("0000"), "{said}");
    // A fat binary "in" /dev/zero: the device is refused before it is opened, and counted.
    let (records, _) = record_registration(&dir, "zero", &path);
    let f = footer(&records);
    assert!(f.counters.get("files_refused_not_regular").is_some_and(|n| *n >= 1), "{:?}", f.counters);
    assert_eq!(f.counters.get("fat_binaries_without_bundle"), Some(&1), "{:?}", f.counters);
    drop(std::fs::remove_dir_all(dir));
}

/// A trace file of `header`, then 2 GiB of newlines: 32 zstd frames of 64 MiB each, a few KiB in all.
fn newline_bomb(path: &Path, header: &trace::Header) {
    let mut line = serde_json::to_vec(&Line::Header(Box::new(header.clone()))).unwrap();
    line.push(b'\n');
    let mut bytes = zstd::encode_all(line.as_slice(), 3).unwrap();
    let frame = zstd::encode_all(std::io::repeat(b'\n').take(64 << 20), 3).unwrap();
    for _ in 0..32 {
        bytes.extend_from_slice(&frame);
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_newline_bomb_is_refused_in_one_sentence_by_report_and_export_alone_or_as_a_part() {
    let dir = scratch("newline-bomb");
    let header = trace::Header {
        format: trace::FORMAT.into(),
        schema: trace::SCHEMA,
        host: "h".into(),
        start_unix_ns: 7,
        ..trace::Header::default()
    };
    let bomb = dir.join("bomb.jsonl.zst");
    newline_bomb(&bomb, &header);
    // The same as part 1 of a rotated recording, beside its part 0.
    let parts = dir.join("parts");
    std::fs::create_dir_all(&parts).unwrap();
    let part = |index| trace::Header { part: Some(trace::Part { index, restated: 0 }), ..header.clone() };
    let first = parts.join("run.0000.jsonl.zst");
    let mut w = trace::Writer::new(std::fs::File::create(&first).unwrap(), true).unwrap();
    w.write(&Line::Header(Box::new(part(0)))).unwrap();
    w.finish(trace::Footer { stop: trace::Stop::Rotated, ..trace::Footer::default() }).unwrap();
    let bomb_part = parts.join("run.0001.jsonl.zst");
    newline_bomb(&bomb_part, &part(1));
    println!("{} bytes of zstd, 2 GiB of newlines", std::fs::metadata(&bomb).unwrap().len());
    for (input, named) in [(&bomb, &bomb), (&parts, &bomb_part)] {
        let out = dir.join("out.parquet");
        let commands: [&[&str]; 2] = [
            &["report", input.to_str().unwrap()],
            &["export", "--format", "parquet", "-o", out.to_str().unwrap(), input.to_str().unwrap()],
        ];
        for args in commands {
            let started = Instant::now();
            let (status, rss_kib, said) = run_measured(Command::new(tracer_bin()).args(args), Duration::from_mins(1));
            let took = started.elapsed();
            assert_eq!(status.code(), Some(1), "{args:?}: {said}");
            assert_eq!(
                said.trim(),
                format!(
                    "tracer: error: {}: more than 1024 blank lines in a row at line 2; this is not a tracer trace",
                    named.display()
                ),
                "{args:?}"
            );
            assert!(!out.exists(), "a refused export left {}", out.display());
            println!("tracer {} {}: refused in {took:?}, {rss_kib} KiB", args[0], input.display());
        }
    }
    drop(std::fs::remove_dir_all(dir));
}

/// A process inventing a million kernel handles (`hipLaunchKernel` of a million distinct function pointers
/// never registered, on Debian's HIP runtime): tracer binds no more than its per-process limits, counts the
/// rest, keeps its own memory flat, and `report` reads the trace in bounded memory. Before the limits: 447
/// MB for tracer, 2.64 GB for `report`.
#[test]
fn a_million_invented_kernel_handles_cost_tracer_and_report_bounded_memory() {
    const HANDLES: u64 = 1_000_000;
    let out = scratch_trace("hostile-handles");
    let runner = fixture("mini_runner");
    let (status, _, said) = run_measured(
        Command::new(tracer_bin())
            .args(["record", "-o"])
            .arg(&out)
            .arg("--")
            .arg(&runner)
            .args(["handles", &HANDLES.to_string()]),
        Duration::from_mins(8),
    );
    assert!(status.success(), "{said}");
    // Counted by grep in a child, the footer parsed alone: a million records read in this process would stay in
    // its memory, and a later test's child starts from it (a child's peak counts its parent's pages until exec).
    let count = |pattern: &str| -> u64 {
        let o = Command::new("grep").args(["-c", pattern]).arg(&out).output().unwrap();
        String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
    };
    let launches = count(r#"^{"type":"launch""#);
    let without_id = count(r#"^{"type":"launch".*"kernel":null"#);
    let unnamed = count(r#"^{"type":"kernel".*"source":"unnamed""#) as usize;
    let o = Command::new("tail").args(["-n", "1"]).arg(&out).output().unwrap();
    let f = match serde_json::from_slice::<Line>(&o.stdout) {
        Ok(Line::Footer(f)) => Some(f),
        _ => None,
    };
    let f = f.expect("a footer");
    let counter = |name: &str| f.counters.get(name).copied().unwrap_or(0);
    // Every launch recorded, none lost; kernels bound up to the unnamed limit, the rest counted.
    assert_eq!(launches, HANDLES, "{said}");
    assert_eq!(f.total_drops(), 0, "{said}");
    assert_eq!(unnamed, trace::MAX_UNNAMED_PER_PROCESS, "{:?}", f.counters);
    assert_eq!(counter("kernel_handles_over_limit"), without_id, "{:?}", f.counters);
    assert_eq!(without_id, HANDLES - unnamed as u64);
    // tracer's own peak, as it measured itself: at most 150 MiB.
    let rss_kib = counter("tracer_max_rss_kib");
    assert!(rss_kib > 0 && rss_kib <= 150 << 10, "tracer peaked at {rss_kib} KiB");
    // report over the trace: at most 512 MiB, the over-limit launches in one row that says so.
    let (status, report_kib, text) =
        run_measured(Command::new(tracer_bin()).arg("report").arg(&out), Duration::from_mins(3));
    assert!(status.success(), "{text}");
    assert!(report_kib <= 512 << 10, "report peaked at {report_kib} KiB");
    let row = text.lines().find(|l| l.contains("no kernel id: handles past the per-process kernel limit"));
    assert!(row.is_some_and(|r| r.contains(&without_id.to_string())), "{text}");
    drop(std::fs::remove_file(out));
}
