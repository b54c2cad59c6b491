//! A server's steps as the runtime built them: `server_slots` hands a libllama (a test double,
//! `fixtures/hip/llama_double.hip`, whose `llama_decode` takes `struct llama_batch` by value as llama.h has
//! it) the batches a 2-slot llama-server builds, and launches ggml's kernels through the real HIP runtime.
//! It prints its own truth (each step's sequences, the phase token counts, the hipSPARSE calls it made in
//! each step) and the report must agree, step kinds, tokens and library calls per phase.

use integration_tests::*;
use serde_json::Value;

/// The truth `server_slots` printed, the report of its recording, and the trace.
fn record_server_slots(name: &str) -> (Value, Value, std::path::PathBuf) {
    record_server_slots_with(name, &[])
}

/// As [`record_server_slots`], recorded with `args`.
fn record_server_slots_with(name: &str, args: &[&str]) -> (Value, Value, std::path::PathBuf) {
    let out = scratch(name).join("t.jsonl");
    let prog = fixture("server_slots");
    let mut all = vec!["record", "-q", "-o", out.to_str().unwrap()];
    all.extend_from_slice(args);
    all.extend(["--", prog.to_str().unwrap()]);
    let o = tracer(&all);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let line = String::from_utf8_lossy(&o.stdout);
    let truth: Value = serde_json::from_str(line.lines().last().expect("server_slots prints its truth")).unwrap();
    let v = tracer_json(&["report", "--json", out.to_str().unwrap()]);
    let p = v["processes"].as_array().unwrap().iter().find(|p| p["comm"] == "server_slots").expect("the process");
    (truth, p.clone(), out)
}

/// Recorded with the batch program (its token loops run by `bpf_loop`) and with the program of kernels
/// before Linux 5.17 (bounded loops, `--probe-mode bounded-loops`): each agrees with the program's truth, and
/// the kernel's count of each program's runs says which one ran.
#[test]
fn a_two_slot_server_s_steps_are_labelled_by_their_sequences() {
    for (name, args, ran, not) in [
        ("slots", &["--program-stats"][..], "llama_batch", "llama_batch_bounded"),
        ("slots-bounded", &["--program-stats", "--probe-mode", "bounded-loops"], "llama_batch_bounded", "llama_batch"),
    ] {
        let (truth, p, out) = record_server_slots_with(name, args);
        check_steps(&truth, &p);
        let records = read_trace(&out);
        let batches = records.iter().filter(|r| matches!(r, Line::Batch(_))).count() as u64;
        assert!(batches > 0);
        assert_eq!((program_runs(&records, ran), program_runs(&records, not)), (batches, 0), "{name}");
    }
}

/// The steps, tokens and library calls of `p` (a process of the report) are the program's own.
fn check_steps(truth: &Value, p: &Value) {
    let totals = &truth["totals"];
    let phases = p["phases"].as_array().unwrap();
    let phase =
        |name: &str| phases.iter().find(|ph| ph["phase"] == name).ok_or_else(|| format!("no {name}: {p}")).unwrap();
    // Every step was cut by its batch, and each phase has the program's own count of steps.
    for label in ["prefill", "decode", "mixed"] {
        assert_eq!(phase(label)["steps"], totals["steps"][label], "{label}: {}", phase(label));
        assert_eq!(phase(label)["steps_from_batches"], totals["steps"][label], "{label}");
    }
    assert_eq!(phases.len(), 3, "{phases:?}");
    // Tokens by kind, as the program counted them (the decode steps of two sequences carry 2 tokens).
    let sum = |key: &str| phases.iter().map(|ph| ph[key].as_u64().unwrap_or(0)).sum::<u64>();
    assert_eq!(sum("prompt_tokens"), totals["prompt_tokens"].as_u64().unwrap());
    assert_eq!(sum("decode_tokens"), totals["decode_tokens"].as_u64().unwrap());
    assert_eq!(sum("unread_tokens"), 0);
    // The steps the issue names: two sequences decoding, a 23-token prompt beside a decode token, a prefill.
    assert_eq!(phase("decode")["compositions"]["decode 2 seq x 1"], 4, "{}", phase("decode"));
    assert_eq!(phase("mixed")["compositions"]["mixed: 1 prompt of 23 + 1 decode"], 1);
    assert_eq!(phase("mixed")["compositions"]["mixed: 1 prompt of 600 + 1 decode"], 1);
    assert_eq!(phase("prefill")["compositions"]["prefill: 1 prompt of 11"], 1);
    // Its llama_decode calls per phase, and the mixed step of 601 tokens still shows its three passes.
    assert_eq!(phase("decode")["api_calls"]["llama_decode"], totals["steps"]["decode"]);
    assert!(phase("mixed")["batch_widths"].as_array().unwrap().contains(&Value::from("601 = 1 + 512 + 88")));
    // hipSPARSE's entry calls per phase, each in the step it was made in.
    let libs = p["step_libraries"].as_object().unwrap();
    let hipsparse = libs.iter().find(|(_, path)| path.as_str().unwrap().contains("libhipsparse")).expect("hipSPARSE");
    let calls = |label: &str| phase(label)["library_calls"][hipsparse.0.as_str()].as_u64().unwrap_or(0);
    for label in ["prefill", "decode", "mixed"] {
        assert_eq!(calls(label), totals["sparse_calls"][label].as_u64().unwrap(), "{label}: {p}");
    }
}

/// The Perfetto steps and the Parquet rows take the steps from the same feeder: the same phases, and each
/// step's composition.
#[test]
fn exports_carry_each_step_s_composition() {
    let (truth, _, trace) = record_server_slots("slots-export");
    let dir = trace.parent().unwrap().to_owned();
    let perfetto = dir.join("t.json");
    let o = tracer(&["export", "--format", "perfetto", "-o", perfetto.to_str().unwrap(), trace.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&perfetto).unwrap()).unwrap();
    let steps: Vec<&Value> = v["traceEvents"].as_array().unwrap().iter().filter(|e| e["cat"] == "phase").collect();
    let calls = truth["calls"].as_array().unwrap();
    assert_eq!(steps.len(), calls.len());
    for (step, call) in steps.iter().zip(calls) {
        assert_eq!(step["name"], call["label"], "{step} {call}");
    }
    assert_eq!(steps[3]["args"]["composition"], "mixed: 1 prompt of 23 + 1 decode", "{}", steps[3]);
    let parquet = dir.join("t.parquet");
    let o = tracer(&["export", "--format", "parquet", "-o", parquet.to_str().unwrap(), trace.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let script = r#"
import duckdb, json, sys
rows = duckdb.sql("select phase, composition, count(distinct step) from '" + sys.argv[1] + "' group by all order by all").fetchall()
print(json.dumps(rows))
"#;
    let rows = duckdb_json(script, &parquet);
    assert_eq!(
        rows,
        serde_json::json!([
            ["decode", "decode 1 seq x 1", 2],
            ["decode", "decode 2 seq x 1", 4],
            ["mixed", "mixed: 1 prompt of 23 + 1 decode", 1],
            ["mixed", "mixed: 1 prompt of 600 + 1 decode", 1],
            ["prefill", "prefill: 1 prompt of 11", 1],
            ["prefill", "prefill: 1 prompt of 2", 1],
        ]),
        "{rows}"
    );
}

/// A libllama met only once the recording runs (a shell execs the server, so the copy is found at the exec,
/// after tracer has taken its filter, counters and ring out of aya): the batch program, loaded then for its
/// multi-point link, must point at the maps every other program uses. It once did not: its references fell
/// on whichever map of the section aya-obj met last, the verifier refused the program, and each function
/// fell back to a uprobe of its own.
#[test]
fn a_libllama_found_during_the_recording_gets_its_batch_program_linked() {
    let out = scratch("slots-late").join("t.jsonl");
    let exec = format!("exec {}", fixture("server_slots").display());
    let o = tracer(&["record", "-q", "-o", out.to_str().unwrap(), "--", "sh", "-c", &exec]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(!stderr.contains("refused"), "{stderr}");
    let records = read_trace(&out);
    let probe = records
        .iter()
        .find_map(|r| if let Line::Probe(p) = r { (p.api == "llama_decode").then_some(p) } else { None })
        .expect("a probe record for llama_decode");
    assert_eq!(probe.error, None, "{probe:?}");
}
