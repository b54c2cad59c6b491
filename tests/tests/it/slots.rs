//! A server's steps as the runtime built them: `server_slots` hands a libllama (a test double,
//! `fixtures/hip/llama_double.hip`, whose `llama_decode` takes `struct llama_batch` by value as llama.h has
//! it) the batches a 2-slot llama-server builds, and launches ggml's kernels through the real HIP runtime.
//! It prints its own truth (each step's sequences, the phase token counts, the hipSPARSE calls it made in
//! each step) and the report must agree, step kinds, tokens and library calls per phase.

use integration_tests::*;
use serde_json::Value;

/// The truth `server_slots` printed and the report of its recording.
fn record_server_slots(name: &str) -> (Value, Value) {
    let out = scratch(name).join("t.jsonl");
    let prog = fixture("server_slots");
    let o = tracer(&["record", "-q", "-o", out.to_str().unwrap(), "--", prog.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let line = String::from_utf8_lossy(&o.stdout);
    let truth: Value = serde_json::from_str(line.lines().last().expect("server_slots prints its truth")).unwrap();
    let v = tracer_json(&["report", "--json", out.to_str().unwrap()]);
    let p = v["processes"].as_array().unwrap().iter().find(|p| p["comm"] == "server_slots").expect("the process");
    (truth, p.clone())
}

#[test]
fn a_two_slot_server_s_steps_are_labelled_by_their_sequences() {
    let (truth, p) = record_server_slots("slots");
    let totals = &truth["totals"];
    let phases = p["phases"].as_array().unwrap();
    let phase = |name: &str| phases.iter().find(|ph| ph["phase"] == name).unwrap_or_else(|| panic!("no {name}: {p}"));
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
