//! A trace any user can hand to `report` or `export`: a valid header, a kernel and a few launches, then
//! 100 000 `repeat` lines that each pass the reader's checks (2^20 launches of period 1): 10^11 launches
//! in about 170 KB of zstd, a day of `tracer report` and terabytes of export before the reader's bound. Each
//! reader ends within its time, in bounded memory and output, and says how many launches it did not make.
//! Then an export refused halfway (a corrupt line after a few records) leaves standard output empty.

use std::{fmt::Write as _, process::Command, time::Duration};

use integration_tests::*;

/// Repeat lines in the bomb, each of 2^20 launches.
const LINES: u64 = 100_000;
/// What any reader may take of time over the bomb: seconds of work (the bound's 2.7 M launches), far from
/// the hours it took before.
const LIMIT: Duration = Duration::from_mins(2);

/// The bomb: a header that says the file has runs, a kernel, three launches, the repeat lines; zstd.
fn repeat_bomb() -> Vec<u8> {
    let header = trace::Header {
        format: trace::FORMAT.into(),
        schema: trace::SCHEMA,
        host: "h".into(),
        options: trace::Options { repeats: true, ..trace::Options::default() },
        ..trace::Header::default()
    };
    let mut text = serde_json::to_string(&Line::Header(Box::new(header))).unwrap();
    text += "\n{\"type\":\"kernel\",\"id\":1,\"pid\":7,\"handle\":4096,\"module\":0,\"name\":\"_Z4stepv\",\"demangled\":\"step()\",\"source\":\"register\",\"truncated\":false,\"ts\":1}\n";
    for ts in 2..5 {
        writeln!(
            text,
            "{{\"type\":\"launch\",\"ts\":{ts},\"pid\":7,\"tid\":7,\"lib\":1,\"api\":\"hipLaunchKernel\",\"kernel\":1,\"handle\":4096,\"grid\":[1,1,1],\"block\":[64,1,1],\"grid_unit\":\"blocks\",\"shmem\":0,\"stream\":0,\"ret\":0,\"dur\":100}}"
        )
        .unwrap();
    }
    for i in 0..LINES {
        let ts = 10 + 2 * i;
        writeln!(
            text,
            "{{\"type\":\"repeat\",\"ts\":{ts},\"pid\":7,\"tid\":7,\"last_ts\":{},\"count\":1048576,\"period\":1}}",
            ts + 1
        )
        .unwrap();
    }
    zstd::encode_all(text.as_bytes(), 19).unwrap()
}

#[test]
fn a_repeat_line_bomb_costs_every_reader_seconds_and_each_says_the_launches_it_did_not_make() {
    let dir = scratch("repeat-bomb");
    let bomb = dir.join("bomb.jsonl.zst");
    std::fs::write(&bomb, repeat_bomb()).unwrap();
    let stored = std::fs::metadata(&bomb).unwrap().len();
    println!("{stored} bytes of zstd, {LINES} repeat lines of 2^20 launches each");
    let b = bomb.to_str().unwrap();
    // The report, text and JSON: it names the launches not made.
    let (status, rss_kib, out, secs) = measured(&["report", b]);
    assert!(status.success(), "{out}");
    let said: Vec<&str> = out.lines().filter(|l| l.contains("launches that") && l.contains("were not made")).collect();
    assert_eq!(said.len(), 1, "{out}");
    println!("report: {secs:.1} s, {rss_kib} KiB: {}", said[0]);
    let (status, rss_kib, out, secs) = measured(&["report", "--json", b]);
    assert!(status.success(), "{out}");
    let json_start = out.find('{').unwrap();
    let v: serde_json::Value = serde_json::from_str(&out[json_start..]).unwrap();
    let cut = &v["trace"]["repeats_cut"];
    let (not_made, allowance) = (cut["launches"].as_u64().unwrap(), cut["allowance"].as_u64().unwrap());
    assert_eq!(not_made + allowance, LINES * (1 << 20), "{cut}");
    assert!(allowance <= stored * 16 && allowance < 1 << 32, "{cut}");
    println!("report --json: {secs:.1} s, {rss_kib} KiB: {cut}");
    // Each export, to a file: it ends, says the cut on stderr, and writes a bounded output.
    for (format, most) in [("perfetto", 2u64 << 30), ("csv", 64 << 20), ("parquet", 64 << 20), ("dot", 64 << 20)] {
        let out_path = dir.join(format!("out.{format}"));
        let (status, rss_kib, said, secs) =
            measured(&["export", "--format", format, "-o", out_path.to_str().unwrap(), b]);
        assert!(status.success(), "{format}: {said}");
        assert!(said.contains("were not made"), "{format}: {said}");
        let size = std::fs::metadata(&out_path).unwrap().len();
        println!("export {format}: {secs:.1} s, {rss_kib} KiB, {size} bytes written");
        assert!(size < most, "{format}: {size} bytes");
        drop(std::fs::remove_file(&out_path));
    }
    drop(std::fs::remove_dir_all(dir));
}

#[test]
fn an_export_refused_halfway_writes_nothing_to_standard_output() {
    let dir = scratch("export-refused");
    let bad = dir.join("bad.jsonl");
    let header = trace::Header { format: trace::FORMAT.into(), schema: trace::SCHEMA, ..trace::Header::default() };
    let mut text = serde_json::to_string(&Line::Header(Box::new(header))).unwrap();
    text += "\n{\"type\":\"kernel\",\"id\":1,\"pid\":7,\"handle\":4096,\"module\":0,\"name\":\"_Z4stepv\",\"demangled\":\"step()\",\"source\":\"register\",\"truncated\":false,\"ts\":1}\n";
    text += "{\"type\":\"launch\",\"garbage\n";
    std::fs::write(&bad, text).unwrap();
    for format in ["perfetto", "csv", "parquet", "dot"] {
        let o = Command::new(tracer_bin()).args(["export", "--format", format]).arg(&bad).output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{format}: {stderr}");
        assert!(o.stdout.is_empty(), "{format}: {} bytes on stdout", o.stdout.len());
        assert!(stderr.contains("line 3 is not a valid trace record"), "{format}: {stderr}");
        println!("export {format}: nothing on stdout; {}", stderr.trim());
    }
    drop(std::fs::remove_dir_all(dir));
}

/// `tracer ARGS` measured: status, peak KiB, stdout and stderr, seconds.
fn measured(args: &[&str]) -> (std::process::ExitStatus, u64, String, f64) {
    let start = std::time::Instant::now();
    let (status, rss_kib, out) = run_measured(Command::new(tracer_bin()).args(args), LIMIT);
    (status, rss_kib, out, start.elapsed().as_secs_f64())
}
