//! Beside a service for days: the live metrics endpoint (scraped by hand and by a real Prometheus server),
//! the Parquet export read back by `DuckDB`, and memory over hundreds of short GPU processes.

use std::{
    collections::BTreeMap,
    io::{Read as _, Write as _},
    net::TcpStream,
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use integration_tests::*;

/// `GET path` on 127.0.0.1:port; the body.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1);
    (status == Some("200")).then(|| body.to_owned())
}

/// The port a recording serves metrics on, from its readiness file.
fn metrics_port(rec: &Recording) -> u16 {
    let addr = rec.ready_value("metrics").expect("the readiness file says where metrics are served");
    addr.rsplit(':').next().unwrap().parse().unwrap()
}

/// Sample lines of a metric: labels (as written) -> value.
fn samples(text: &str, name: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            let (labels, value) = rest.rsplit_once(' ')?;
            Some((labels.to_owned(), value.parse().ok()?))
        })
        .collect()
}

fn label<'a>(labels: &'a str, key: &str) -> Option<&'a str> {
    labels.split(&format!("{key}=\"")).nth(1)?.split('"').next()
}

/// A shell command running `ggml_steps microbatch` (a 513-token prompt in two passes, then a decode step),
/// then waiting, so the recording outlives the GPU process.
fn ggml_then_wait(secs: u32) -> String {
    format!("{} microbatch; sleep {secs}", fixture("ggml_steps").display())
}

/// The report of the `ggml_steps` process in a trace.
fn ggml_report(trace: &Path) -> serde_json::Value {
    let v = tracer_json(&["report", "--json", trace.to_str().unwrap()]);
    v["processes"].as_array().unwrap().iter().find(|p| p["comm"] == "ggml_steps").expect("its process").clone()
}

#[test]
fn metrics_scraped_while_recording_agree_with_the_report() {
    let out = scratch("metrics-scrape").join("t.jsonl");
    let cmd = ggml_then_wait(4);
    let rec = Recording::start(&out, &["--metrics", "127.0.0.1:0", "--", "sh", "-c", &cmd]);
    let port = metrics_port(&rec);
    // Scraped until the GPU process's steps have all closed and two scrapes agree.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = String::new();
    let text = loop {
        assert!(Instant::now() < deadline, "no settled scrape: {last}");
        std::thread::sleep(Duration::from_millis(300));
        let Some(body) = http_get(port, "/metrics") else { continue };
        let decode =
            samples(&body, "tracer_phase_steps_total").iter().any(|(l, _)| label(l, "phase") == Some("decode"));
        // Series come in no fixed order; the records and processes in the filter may still change.
        let counts = |t: &str| {
            let mut v: Vec<String> = t
                .lines()
                .filter(|l| !l.starts_with("tracer_trace_records") && !l.starts_with("tracer_processes_traced"))
                .map(str::to_owned)
                .collect();
            v.sort();
            v
        };
        let (body_counts, last_counts) = (counts(&body), counts(&last));
        if decode && body_counts == last_counts {
            break body;
        }
        last = body;
    };
    assert_eq!(http_get(port, "/other"), None, "only /metrics is served");
    let (status, said) = rec.wait();
    assert!(status.success(), "{said}");
    let p = ggml_report(&out);
    let ggml = |name: &str| -> BTreeMap<String, u64> {
        samples(&text, name).into_iter().filter(|(l, _)| label(l, "comm") == Some("ggml_steps")).collect()
    };
    // Launches and executions by family: what the report counts for that process.
    let launches: u64 = ggml("tracer_kernel_launches_total").values().sum();
    let report_launches = launches_in_report(&p);
    assert!(launches > 0, "{text}");
    assert_eq!(launches, report_launches, "{text}");
    let mut by_family: BTreeMap<String, u64> = BTreeMap::new();
    for (l, n) in ggml("tracer_kernel_executions_total") {
        *by_family.entry(label(&l, "family").unwrap().to_owned()).or_default() += n;
    }
    let mut report_family: BTreeMap<String, u64> = BTreeMap::new();
    for k in p["kernels"].as_array().unwrap().iter().filter(|k| k["executions"] != 0) {
        let family = k["class"]["family"].as_str().unwrap();
        let key = k["class"]["quant"].as_str().map_or_else(|| family.to_owned(), |q| format!("{family} {q}"));
        *report_family.entry(key).or_default() += k["executions"].as_u64().unwrap();
    }
    // (Without a GPU here every HIP launch fails, so both are empty: executions are launches that ran.)
    assert_eq!(by_family, report_family, "{text}");
    // Steps and tokens per phase: the report's phases (prefill: one step of 513 = 512 + 1 tokens).
    for ph in p["phases"].as_array().unwrap() {
        let phase = ph["phase"].as_str().unwrap();
        let of = |name: &str| ggml(name).into_iter().find(|(l, _)| label(l, "phase") == Some(phase)).map(|(_, n)| n);
        assert_eq!(of("tracer_phase_steps_total"), ph["steps"].as_u64(), "{phase}: {text}");
        assert_eq!(of("tracer_phase_tokens_total"), ph["tokens"].as_u64(), "{phase}: {text}");
        let kernels: BTreeMap<String, u64> = ggml("tracer_phase_kernel_executions_total")
            .into_iter()
            .filter(|(l, _)| label(l, "phase") == Some(phase))
            .map(|(l, n)| (label(&l, "family").unwrap().to_owned(), n))
            .collect();
        let want: BTreeMap<String, u64> =
            ph["kernels"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_u64().unwrap())).collect();
        assert!(!want.is_empty());
        assert_eq!(kernels, want, "{phase}: {text}");
    }
    assert_eq!(
        ggml("tracer_phase_tokens_total").iter().find(|(l, _)| label(l, "phase") == Some("prefill")).map(|(_, n)| *n),
        Some(513)
    );
    assert!(samples(&text, "tracer_probes_attached").values().all(|&n| n > 0), "{text}");
    assert!(text.contains("# TYPE tracer_kernel_launches counter"), "{text}");
}

/// The launches a process's report counts (its kernel rows').
fn launches_in_report(p: &serde_json::Value) -> u64 {
    p["kernels"].as_array().unwrap().iter().map(|k| k["launches"].as_u64().unwrap()).sum()
}

/// A port nobody listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Debian's Prometheus server, scraping `target` every second, on a port of its own.
struct Prometheus {
    child: Child,
    port: u16,
}

impl Prometheus {
    fn start(dir: &Path, target_port: u16) -> Self {
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: tracer\n    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("Debian's prometheus package (cargo xtask test installs it)");
        Self { child, port }
    }

    /// The value of an instant query's first result, once it has one.
    fn query(&self, promql: &str) -> Option<f64> {
        let encoded: String =
            promql
                .bytes()
                .map(|b| {
                    if b.is_ascii_alphanumeric() || b == b'_' { char::from(b).to_string() } else { format!("%{b:02X}") }
                })
                .collect();
        let body = http_get(self.port, &format!("/api/v1/query?query={encoded}"))?;
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        drop(self.child.kill());
        drop(self.child.wait());
    }
}

#[test]
fn a_real_prometheus_scrapes_the_recording_and_answers_a_query() {
    let dir = scratch("metrics-prometheus");
    let out = dir.join("t.jsonl");
    let cmd = ggml_then_wait(12);
    let rec = Recording::start(&out, &["--metrics", "127.0.0.1:0", "--", "sh", "-c", &cmd]);
    let prom = Prometheus::start(&dir, metrics_port(&rec));
    // The GPU process ends within a second; Prometheus scrapes every second from its start.
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut launches = None;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_secs(1));
        launches = prom.query("sum(tracer_kernel_launches_total{comm=\"ggml_steps\"})");
        if launches.is_some_and(|n| n > 0.0) && prom.query("sum(tracer_phase_steps_total{phase=\"decode\"})").is_some()
        {
            break;
        }
    }
    let (status, said) = rec.wait();
    assert!(status.success(), "{said}");
    let p = ggml_report(&out);
    let report_launches = launches_in_report(&p);
    // A count this small is exact in a float.
    let report_launches = f64::from(u32::try_from(report_launches).unwrap());
    assert_eq!(launches, Some(report_launches), "Prometheus's answer against the report");
}

#[test]
fn parquet_export_reads_back_in_duckdb_one_row_per_launch() {
    let dir = scratch("parquet");
    let out = dir.join("t.jsonl");
    let o = tracer(&[
        "record",
        "-q",
        "-o",
        out.to_str().unwrap(),
        "--",
        fixture("ggml_steps").to_str().unwrap(),
        "microbatch",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let parquet = dir.join("t.parquet");
    let o = tracer(&["export", "--format", "parquet", "-o", parquet.to_str().unwrap(), out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let records = read_trace(&out);
    let launched = launches(&records).iter().filter(|l| !l.captured).count() as u64;
    let script = r#"
import duckdb, json, sys
f = sys.argv[1]
q = lambda sql: duckdb.sql(sql.replace("F", "'" + f + "'")).fetchall()
print(json.dumps({
    "launch_rows": q("select count(*) from F where view = 'launch'")[0][0],
    "steps": q("select phase, count(distinct step) from F where phase is not null group by phase order by phase"),
    "ne11": q("select family, ne11, count(*) from F where ne11 is not null group by all order by all"),
    "comm": q("select distinct comm from F"),
    "unnamed": q("select count(*) from F where kernel is null")[0][0],
}))
"#;
    let v = duckdb_json(script, &parquet);
    assert_eq!(v["launch_rows"], launched, "{v}");
    assert_eq!(v["comm"], serde_json::json!([["ggml_steps"]]), "{v}");
    assert_eq!(v["unnamed"], 0, "{v}");
    // The report's phases: one prefill step (two passes), one decode step.
    assert_eq!(v["steps"], serde_json::json!([["decode", 1], ["prefill", 1]]), "{v}");
    // The exact column counts: MMQ over 512, MMVQ over the last token twice (prefill's second pass, decode).
    assert_eq!(v["ne11"], serde_json::json!([["MMQ Q4_K", 512, 1], ["MMVQ Q4_K", 1, 2]]), "{v}");
}

/// Peak RSS (KiB) of a recording of `n` short GPU processes, metrics served.
fn peak_rss_over(n: u32, dir: &Path) -> u64 {
    let out = dir.join(format!("t{n}.jsonl.zst"));
    let cmd = format!("for i in $(seq {n}); do {} >/dev/null; done", fixture("mini_runner").display());
    let o = tracer(&["record", "-q", "--metrics", "127.0.0.1:0", "-o", out.to_str().unwrap(), "--", "sh", "-c", &cmd]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let records = read_trace(&out);
    let exits = records.iter().filter(|r| matches!(r, Line::Exit(_))).count() as u32;
    assert!(exits >= n, "{exits} exits for {n} processes");
    footer(&records).counters["tracer_max_rss_kib"]
}

#[test]
fn memory_stays_flat_over_hundreds_of_short_gpu_processes() {
    let dir = scratch("metrics-churn");
    let small = peak_rss_over(30, &dir);
    let large = peak_rss_over(300, &dir);
    eprintln!("tracer peak RSS: {small} KiB over 30 processes, {large} KiB over 300");
    assert!(large <= small + 4096, "{large} KiB after 300 processes, {small} KiB after 30");
}

/// The counts a report gives of a recording: per process (by comm), kernels named, launches, API calls,
/// libraries' calls, and the phases.
fn counts(report: &serde_json::Value) -> BTreeMap<String, serde_json::Value> {
    report["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["gpu_activity"] == true)
        .map(|p| {
            let kernels: Vec<(&str, u64)> = p["kernels"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| (k["name"].as_str().unwrap(), k["launches"].as_u64().unwrap()))
                .collect();
            let api: Vec<(&str, u64)> = p["api"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| (a["api"].as_str().unwrap(), a["calls"].as_u64().unwrap()))
                .collect();
            // (Libraries with equal counts come in the order they were found, which may differ.)
            let mut mapped: Vec<(&str, String, &str)> = p["mapped"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| (m["path"].as_str().unwrap(), m["calls"].to_string(), m["status"].as_str().unwrap()))
                .collect();
            mapped.sort_unstable();
            (
                p["comm"].as_str().unwrap().to_owned(),
                serde_json::json!({"kernels": kernels, "api": api, "mapped": mapped, "phases": p["phases"]}),
            )
        })
        .collect()
}

#[test]
fn a_rotated_recording_reads_with_the_counts_of_an_unrotated_one() {
    let dir = scratch("rotation");
    let program = fixture("sparse_rand");
    let whole = dir.join("whole.jsonl.zst");
    let o = tracer(&["record", "-q", "-o", whole.to_str().unwrap(), "--", program.to_str().unwrap(), "both"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // 12 424 kernel records and more, in parts of at most 256 KiB before compression.
    let parts_dir = dir.join("parts");
    std::fs::create_dir_all(&parts_dir).unwrap();
    let base = parts_dir.join("run.jsonl.zst");
    let o = tracer(&[
        "record",
        "-q",
        "--rotate-size",
        "256K",
        "-o",
        base.to_str().unwrap(),
        "--",
        program.to_str().unwrap(),
        "both",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let parts: Vec<_> = std::fs::read_dir(&parts_dir).unwrap().flatten().map(|e| e.path()).collect();
    assert!(parts.len() >= 3, "{parts:?}");
    let unrotated = tracer_json(&["report", "--json", whole.to_str().unwrap()]);
    let rotated = tracer_json(&["report", "--json", parts_dir.to_str().unwrap()]);
    let (a, b) = (counts(&unrotated), counts(&rotated));
    assert!(a.get("sparse_rand").is_some_and(|p| !p["mapped"].as_array().unwrap().is_empty()), "{a:?}");
    assert_eq!(a, b);
    // Every kernel named once in the recording, restatements not counted: the last part's footer.
    let mut sorted = parts.clone();
    sorted.sort();
    let kernels = |path: &Path| footer(&read_trace(path)).records["kernel"];
    assert!(kernels(&whole) > 12_000, "{}", kernels(&whole));
    assert_eq!(kernels(&whole), kernels(sorted.last().unwrap()));
    assert_eq!(rotated["drops_total"], 0);
    // Each part reads alone: its header restates the libraries, and the process its records refer to.
    for part in &parts {
        let alone = tracer_json(&["report", "--json", part.to_str().unwrap()]);
        assert!(!alone["libraries"].as_array().unwrap().is_empty(), "{}", part.display());
    }
    // The export reads the parts as one recording too: the library graph of both names the same libraries.
    let dot = |input: &Path| {
        let o = tracer(&["export", "--format", "dot", input.to_str().unwrap()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = String::from_utf8(o.stdout).unwrap();
        let mut libs: Vec<String> = text
            .lines()
            .filter(|l| l.contains("fillcolor="))
            .filter_map(|l| l.split("label=\"").nth(1)?.split("\\n").next().map(str::to_owned))
            .collect();
        libs.sort();
        libs
    };
    let (dot_whole, dot_parts) = (dot(&whole), dot(&parts_dir));
    assert!(dot_whole.iter().any(|l| l.contains("librocsparse")), "{dot_whole:?}");
    assert_eq!(dot_whole, dot_parts);
}
