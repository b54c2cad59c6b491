//! `tracer export --format rocpd`: real recordings under `fixtures/traces/` exported as rocpd databases and
//! read back with the `sqlite3` command-line tool through the views the database carries (`top_kernels`,
//! `kernels`): per kernel, the executions `tracer report --json` counts.

use std::{collections::BTreeMap, path::Path, process::Command};

use integration_tests::*;

fn recorded(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/traces").join(name)
}

/// `sqlite3 -json DB SQL`: the rows, as JSON.
fn sqlite(db: &Path, sql: &str) -> Vec<serde_json::Value> {
    let o = Command::new("sqlite3").arg("-json").arg(db).arg(sql).output().expect("sqlite3 (Debian's sqlite3)");
    assert!(o.status.success(), "{sql}: {}", String::from_utf8_lossy(&o.stderr));
    if o.stdout.iter().all(u8::is_ascii_whitespace) {
        return Vec::new();
    }
    serde_json::from_slice::<Vec<serde_json::Value>>(&o.stdout).unwrap()
}

/// Name -> count, from rows of (name, count) under the given column names.
fn counts(rows: &[serde_json::Value], count: &str) -> BTreeMap<String, u64> {
    rows.iter().map(|r| (r["name"].as_str().unwrap().to_owned(), r[count].as_u64().unwrap())).collect()
}

/// Exports `name` as rocpd and checks its views against the report: per kernel name (every process
/// together), `top_kernels`' calls and `kernels`' rows equal the report's executions; returns their total.
fn exported_counts_equal_the_report(name: &str) -> u64 {
    let trace = recorded(name);
    let db = scratch(&format!("rocpd-{name}")).join("t.db");
    let o = tracer(&["export", trace.to_str().unwrap(), "--format", "rocpd", "-o", db.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report = tracer_json(&["report", "--json", trace.to_str().unwrap()]);
    let mut from_report = BTreeMap::<String, u64>::new();
    for p in report["processes"].as_array().unwrap() {
        for k in p["kernels"].as_array().unwrap() {
            let label = k["demangled"].as_str().filter(|d| !d.is_empty()).or_else(|| k["name"].as_str()).unwrap();
            *from_report.entry(label.to_owned()).or_default() += k["executions"].as_u64().unwrap();
        }
    }
    from_report.retain(|_, n| *n > 0);
    let top = counts(&sqlite(&db, "SELECT name, total_calls FROM top_kernels"), "total_calls");
    let kernels = counts(&sqlite(&db, "SELECT name, count(*) AS n FROM kernels GROUP BY name"), "n");
    assert_eq!(top, from_report, "{name}: top_kernels");
    assert_eq!(kernels, from_report, "{name}: kernels");
    let meta = sqlite(&db, "SELECT value FROM rocpd_metadata WHERE tag = 'schema_version'");
    assert_eq!(meta[0]["value"], "3");
    // rocpd's reader takes the tables whose names hold the database's uuid, and reads their bare-named views.
    let uuid =
        sqlite(&db, "SELECT value FROM rocpd_metadata WHERE tag = 'uuid'")[0]["value"].as_str().unwrap().to_owned();
    let tables = sqlite(
        &db,
        &format!("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name LIKE 'rocpd_%{uuid}'"),
    );
    assert_eq!(tables[0]["n"], 20, "{name}: every table of schema 3");
    assert!(sqlite(&db, "PRAGMA foreign_key_check").is_empty(), "{name}: every row's references resolve");
    let regions = sqlite(&db, "SELECT count(*) AS n FROM regions_and_samples")[0]["n"].as_u64().unwrap();
    assert!(regions > 0, "{name}: the API calls");
    from_report.values().sum()
}

/// The H100 recordings (CUDA launches and graph replays; their executions equalled CUPTI's), Debian's
/// Vulkan llama-bench, and the null GPU's AMD recording, whose executions are the dispatches read at the
/// doorbells: each kernel's count in rocpd's views is the report's.
#[test]
fn rocpd_views_count_each_kernel_as_the_report_does() {
    assert_eq!(exported_counts_equal_the_report("h100-llama-bench-q4_k_m-p513.jsonl.zst"), 796);
    assert_eq!(exported_counts_equal_the_report("h100-llama-bench-f16-p513.jsonl.zst"), 621);
    assert_eq!(exported_counts_equal_the_report("null-gpu-llama-bench-q4_k_m.jsonl.zst"), 395);
    assert!(exported_counts_equal_the_report("debian-vulkan-llama-bench-q4_k_m.jsonl.zst") > 0);
}

/// rocpd to standard output is refused in one sentence, and an existing file is kept without `--force`.
#[test]
fn rocpd_needs_a_file_and_keeps_an_existing_one() {
    let trace = recorded("h100-llama-bench-q4_k_m-p513.jsonl.zst");
    let o = tracer(&["export", trace.to_str().unwrap(), "--format", "rocpd"]);
    assert!(!o.status.success() && o.stdout.is_empty());
    assert_eq!(String::from_utf8_lossy(&o.stderr).trim(), "tracer: error: rocpd is an SQLite file: give -o FILE.db");
    let dir = scratch("rocpd-existing");
    let db = dir.join("t.db");
    std::fs::write(&db, "kept").unwrap();
    let o = tracer(&["export", trace.to_str().unwrap(), "--format", "rocpd", "-o", db.to_str().unwrap()]);
    assert!(!o.status.success());
    assert_eq!(std::fs::read(&db).unwrap(), b"kept");
    let o = tracer(&["export", trace.to_str().unwrap(), "--format", "rocpd", "-o", db.to_str().unwrap(), "--force"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(sqlite(&db, "SELECT count(*) AS n FROM rocpd_kernel_dispatch")[0]["n"], 796);
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 1, "no temporary file left: {left:?}");
}
