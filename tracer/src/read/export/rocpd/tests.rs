//! The rocpd export's own tests: a small trace written, exported, and read back through rocpd's views.

use rusqlite::Connection;

use crate::trace::{self, Header, Kernel, Launch, Line, Process, Writer};

fn trace_of(dir: &std::path::Path, records: &[Line]) -> std::path::PathBuf {
    let path = dir.join("t.jsonl");
    let mut w = Writer::new(std::fs::File::create(&path).unwrap(), false).unwrap();
    let header = Header { format: trace::FORMAT.into(), schema: trace::SCHEMA, host: "h".into(), ..Default::default() };
    w.write(&Line::Header(Box::new(header))).unwrap();
    for r in records {
        w.write(r).unwrap();
    }
    w.finish(trace::Footer::default()).unwrap();
    path
}

/// Launches that ran are kernel dispatches (a failed one is not), in work-items; each launch is an API
/// region, or a sample when recorded at entry alone; the dispatch shares its launch's `stack_id`; a launch of
/// no kernel record is its process's unknown kernel; `top_kernels` counts them.
#[test]
fn launches_become_dispatches_regions_and_samples() {
    let dir = std::env::temp_dir().join(format!("tracer-rocpd-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let launch = |ts, ret, entry_only, kernel| {
        Line::Launch(Launch {
            grid: [4, 1, 1],
            block: [64, 1, 1],
            ret,
            entry_only,
            dur: 500,
            ..Launch::for_test(7, kernel, ts)
        })
    };
    let path = trace_of(
        &dir,
        &[
            Line::Process(Process {
                pid: 7,
                ppid: 1,
                comm: "app".into(),
                argv: vec!["app".into(), "-x".into()],
                ts: 5,
                ..Default::default()
            }),
            Line::Kernel(Kernel { id: 1, pid: 7, name: "_Z1kv".into(), demangled: "k()".into(), ..Default::default() }),
            launch(10, 0, false, Some(1)),
            launch(20, 101, false, Some(1)),
            launch(30, 0, true, Some(1)),
            launch(40, 0, false, None),
        ],
    );
    let db = dir.join("t.db");
    drop(std::fs::remove_file(&db));
    let warnings = super::rocpd(&trace::Input::file(&path), &db, false, &[&path]).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let c = Connection::open(&db).unwrap();
    let rows = |sql: &str| -> Vec<(String, i64)> {
        c.prepare(sql).unwrap().query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect()
    };
    assert_eq!(
        rows("SELECT name, total_calls FROM top_kernels ORDER BY name"),
        [("k()".to_owned(), 2), ("unknown kernel (no kernel record)".to_owned(), 1)]
    );
    assert_eq!(
        rows("SELECT name, grid_x FROM kernels ORDER BY start"),
        [("k()".to_owned(), 256), ("k()".to_owned(), 256), ("unknown kernel (no kernel record)".to_owned(), 256)]
    );
    assert_eq!(rows("SELECT name, duration FROM regions ORDER BY start"), vec![("hipLaunchKernel".to_owned(), 500); 3]);
    assert_eq!(rows("SELECT name, count(*) FROM samples GROUP BY name"), [("HIP_RUNTIME_API".to_owned(), 1)]);
    // The dispatch at 10 and its launch's region share a stack id.
    let shared: i64 = c
        .query_row(
            "SELECT count(*) FROM kernels K JOIN regions R ON R.stack_id = K.stack_id WHERE K.start = 10 AND R.start = 10",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(shared, 1);
    assert_eq!(rows("SELECT command, pid FROM processes"), [("app -x".to_owned(), 7)]);
    let version: String =
        c.query_row("SELECT value FROM rocpd_metadata WHERE tag = 'schema_version'", [], |r| r.get(0)).unwrap();
    assert_eq!(version, "3");
    assert!(c.prepare("PRAGMA foreign_key_check").unwrap().query([]).unwrap().next().unwrap().is_none());
    // An existing file is kept without --force.
    super::rocpd(&trace::Input::file(&path), &db, false, &[&path]).unwrap_err();
    drop(std::fs::remove_dir_all(dir));
}
