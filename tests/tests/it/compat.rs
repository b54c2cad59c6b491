//! Traces outlive the build that wrote them: `fixtures/traces/compat/` keeps traces written by earlier
//! builds of this repository (each file is named `DATE-COMMIT-WHAT`), recorded from the same fixtures; each
//! must read, with nothing skipped, and report what its recording saw. (`cf368ce`: the last build before
//! the redesign of 2026-11-22 14:47, which wrote `"kind":""` for a probe whose symbol was missing, a
//! trace the builds after it could not read; `1f05bb8`: main as it landed on 2026-11-23; `ef4bb2b`: the build
//! that began reading them all; `77a58eb`: the first to write `entry_library` and `launch_sites` records;
//! `17a875f`: the first with HIP launch sites, CUDA kernels' `code_file` and CUDA async copies toward the
//! device written as `call` records when they may start a pass; `1c2b61f`: the first that can rotate its
//! recordings, whose header may then carry `part` and whose footer may stop `rotated`; `8a5f83e`: the first
//! that reads CUDA graph executables from the driver, writing `graph_exec` records; `522a71f`: the first
//! whose `graph_exec` records carry their `route` and, for a check, the kernels read; `482366b`: the first
//! whose `launch_sites` say how many launches `failed`, and whose runtime probes are multi-point links;
//! `2894f98`: the first whose footer counts drops per record kind (`step_cut` among them) and
//! `step_tally_full`, and that can write `step_calls` cut at a pass and `spirv` kernels; its demo recorded
//! with `--all-calls`, as `cargo xtask demo` records it since launches are probed at entry only; `e609972`:
//! the first whose launches may come as `repeat` lines, runs of exact repeats that readers expand, said by
//! the header's `repeats`; with it a recording of `mini_runner layers 64`, mostly runs.)

use std::path::{Path, PathBuf};

use integration_tests::*;

fn compat(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/traces/compat").join(name)
}

/// The builds whose traces are kept, oldest first.
const BUILDS: [&str; 11] = [
    "2026-11-22-cf368ce",
    "2026-11-23-1f05bb8",
    "2026-11-23-ef4bb2b",
    "2026-11-24-77a58eb",
    "2026-11-24-17a875f",
    "2026-11-24-1c2b61f",
    "2026-11-24-8a5f83e",
    "2026-11-24-522a71f",
    "2026-11-25-482366b",
    "2026-11-28-2894f98",
    "2026-11-29-e609972",
];

/// Whether a kept build is `commit` or later (17a875f: HIP launch sites, CUDA kernels' code files).
fn from(build: &str, commit: &str) -> bool {
    BUILDS.iter().position(|b| *b == build) >= BUILDS.iter().position(|b| b.ends_with(commit))
}

/// Reads a kept trace: complete, nothing skipped; its report as JSON.
fn read(name: &str) -> (Vec<Line>, serde_json::Value) {
    let path = compat(name);
    let read = trace::read_file(&path);
    assert!(read.is_ok(), "{name} does not read: {:#}", read.as_ref().err().unwrap());
    let (records, status) = read.expect("checked");
    assert!(status.has_footer && status.cut_bytes == 0, "{name}: {status:?}");
    assert_eq!((status.unknown_records, status.unreadable_records), (0, 0), "{name}: {status:?}");
    let o = tracer(&["report", "--json", path.to_str().unwrap()]);
    assert!(o.status.success(), "{name}: {}", String::from_utf8_lossy(&o.stderr));
    let text = tracer(&["report", path.to_str().unwrap()]);
    assert!(text.status.success(), "{name}: {}", String::from_utf8_lossy(&text.stderr));
    (records, serde_json::from_slice(&o.stdout).unwrap())
}

/// The report of the one process that used the GPU (the fixture).
fn process<'a>(report: &'a serde_json::Value, comm: &str) -> &'a serde_json::Value {
    let found = report["processes"].as_array().unwrap().iter().find(|p| p["comm"] == comm);
    assert!(found.is_some(), "no {comm} process: {report}");
    found.expect("checked")
}

fn launches(p: &serde_json::Value) -> u64 {
    p["kernels"].as_array().unwrap().iter().map(|k| k["launches"].as_u64().unwrap()).sum()
}

fn api_calls(p: &serde_json::Value, api: &str) -> u64 {
    p["api"].as_array().unwrap().iter().find(|a| a["api"] == api).map_or(0, |a| a["calls"].as_u64().unwrap())
}

#[test]
fn the_demo_recorded_by_every_kept_build_reads_the_same() {
    for build in BUILDS {
        let (records, report) = read(&format!("{build}-mini_runner-demo.jsonl"));
        let p = process(&report, "mini_runner");
        assert_eq!(launches(p), 16, "{build}");
        assert_eq!(api_calls(p, "hipLaunchKernel"), 16, "{build}");
        assert_eq!(api_calls(p, "__hipPushCallConfiguration"), 4, "{build}");
        // From 17a875f, HIP's launches carry their return address: all 16 made by the program's code.
        if from(build, "17a875f") {
            let sites: u64 = p["mapped"].as_array().unwrap().iter().map(|m| m["launches_from"].as_u64().unwrap()).sum();
            assert_eq!(sites, 16, "{build}");
            // From 482366b the sites say their 16 launches all failed (no GPU here): the program's own code
            // ran nothing. Before, the failures were not counted there, and the program read as dispatched.
            let program =
                p["mapped"].as_array().unwrap().iter().find(|m| m["path"].as_str().unwrap().ends_with("mini_runner"));
            let status = program.map(|m| m["status"].as_str().unwrap());
            let want = if from(build, "482366b") { "launches-failed" } else { "dispatched" };
            assert_eq!(status, Some(want), "{build}");
        }
        let names: Vec<&str> = kernels(&records).iter().map(|k| k.name.as_str()).collect();
        for k in ["_Z12rms_norm_f32PKfPfif", "_Z11mul_mat_vecILi1EfEvPKT0_PKfPfi", "_Z8rope_f32PKfPfiPKif"] {
            assert!(names.contains(&k), "{build}: {k} not among {names:?}");
        }
        // The probe for the symbol Debian's runtime lacks: written as "kind":"" before the redesign.
        let missing = records.iter().find_map(|r| match r {
            Line::Probe(p) if p.api == "hipExtModuleLaunchKernel" => Some(p),
            _ => None,
        });
        let missing = missing.unwrap_or_else(|| panic!("{build}: no probe record for hipExtModuleLaunchKernel"));
        assert!(missing.error.as_deref().is_some_and(|e| e.contains("not exported")), "{build}: {missing:?}");
        if build.contains("cf368ce") {
            assert_eq!(missing.kind, trace::ProbeKind::Unknown, "{build}");
        }
    }
}

#[test]
fn the_queue_and_cuda_recordings_of_every_kept_build_read_the_same() {
    for build in BUILDS {
        let (records, report) = read(&format!("{build}-hsa-queue.jsonl"));
        let p = process(&report, "hsa_driver");
        let dispatched: u64 =
            p["dispatches"].as_array().unwrap().iter().map(|d| d["dispatches"].as_u64().unwrap()).sum();
        // 29 kernel dispatches and a barrier packet.
        assert_eq!((dispatched, p["barrier_packets"].as_u64()), (29, Some(1)), "{build}");
        assert_eq!(records.iter().filter(|r| matches!(r, Line::Dispatch(_))).count(), 30, "{build}");
        let (records, report) = read(&format!("{build}-cuda.jsonl"));
        let p = process(&report, "cuda_driver");
        // From 17a875f, CUDA kernels carry the file their module's image lay in.
        if from(build, "17a875f") {
            assert!(kernels(&records).iter().all(|k| k.code_file.is_some()), "{build}");
        }
        assert_eq!(launches(p), 9, "{build}");
        assert_eq!(api_calls(p, "cuGraphLaunch"), 5, "{build}");
        // From 8a5f83e, the first replay's executable is read from the driver to check the layout: it agrees.
        let checks: Vec<&trace::GraphExec> =
            records.iter().filter_map(|r| if let Line::GraphExec(g) = r { Some(g) } else { None }).collect();
        let agrees: Vec<Option<bool>> = checks.iter().map(|g| g.agrees).collect();
        let want: &[Option<bool>] = if from(build, "8a5f83e") { &[Some(true)] } else { &[] };
        assert_eq!(agrees, want, "{build}");
        if from(build, "8a5f83e") {
            assert_eq!(p["graph_execs_from_driver"]["checks_agreed"].as_u64(), Some(1), "{build}");
        }
        // From 522a71f, the check says its route and lists the two kernels it read.
        let routes: Vec<(Option<&str>, usize)> =
            checks.iter().map(|g| (g.route.map(trace::ExecRoute::as_str), g.kernels.len())).collect();
        let want: &[(Option<&str>, usize)] = match build {
            b if from(b, "522a71f") => &[(Some("graph"), 2)],
            b if from(b, "8a5f83e") => &[(None, 0)],
            _ => &[],
        };
        assert_eq!(routes, want, "{build}");
    }
}

#[test]
fn a_recording_written_as_runs_of_repeats_reads_as_every_launch() {
    let (records, report) = read("2026-11-29-e609972-mini_runner-layers.jsonl");
    let Line::Header(h) = &records[0] else { panic!("no header") };
    assert!(h.options.repeats);
    let p = process(&report, "mini_runner");
    // 64 layers of four launches, every one counted, from 19 `launch` lines and 15 `repeat` lines.
    assert_eq!((launches(p), api_calls(p, "hipLaunchKernel")), (256, 256));
    let repeats: Vec<&trace::Repeat> =
        records.iter().filter_map(|r| if let Line::Repeat(x) = r { Some(x) } else { None }).collect();
    assert_eq!(repeats.len(), 15);
    assert_eq!(repeats.iter().map(|r| u64::from(r.count)).sum::<u64>(), 256 - 19);
    assert_eq!(report["trace"]["launches_repeated"].as_u64(), Some(237));
    // The reader hands each `repeat` line over before the launches it stands for: 256 launches in all.
    assert_eq!(records.iter().filter(|r| matches!(r, Line::Launch(_))).count(), 256);
}
