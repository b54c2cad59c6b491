//! The seeds' question on a ggml-shaped workload: kernels named as ggml names them, launched on the real HIP
//! runtime in a prefill step and three decode steps (`fixtures/hip/ggml_steps.hip`).

use std::path::PathBuf;

use integration_tests::*;

/// Records `ggml_steps` with `flags` into a fresh scratch folder; the trace's path and its process's report.
fn record_ggml_steps(scratch_name: &str, flags: &[&str]) -> (PathBuf, serde_json::Value) {
    record_ggml_steps_mode(scratch_name, flags, &[])
}

/// The same, with the program's own arguments (`microbatch`).
fn record_ggml_steps_mode(scratch_name: &str, flags: &[&str], mode: &[&str]) -> (PathBuf, serde_json::Value) {
    let out = scratch(scratch_name).join("t.jsonl");
    let prog = fixture("ggml_steps");
    let mut args = vec!["record", "-q", "-o", out.to_str().unwrap()];
    args.extend_from_slice(flags);
    args.extend(["--", prog.to_str().unwrap()]);
    args.extend_from_slice(mode);
    let o = tracer(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = tracer_json(&["report", "--json", out.to_str().unwrap()]);
    let p = v["processes"].as_array().unwrap().iter().find(|p| p["comm"] == "ggml_steps").expect("the process");
    (out, p.clone())
}

#[test]
fn prefill_and_decode_steps_with_families_quant_types_and_batch_widths() {
    let (out, p) = record_ggml_steps("phases", &[]);
    let phases = p["phases"].as_array().unwrap();
    let phase =
        |name: &str| phases.iter().find(|ph| ph["phase"] == name).unwrap_or_else(|| panic!("no {name}: {phases:?}"));
    assert_eq!(phases.len(), 2, "{phases:?}");
    let prefill = phase("prefill");
    assert_eq!(prefill["steps"], 2);
    assert_eq!(
        prefill["kernels"],
        serde_json::json!({"MMQ Q4_K": 2, "RoPE": 2, "flash-attention": 2, "quantize": 2, "softmax": 2})
    );
    // Exact: the column counts (11 and 300 tokens), not the MMQ tiles' bounds, read from the MMQ kernels' own
    // ncols_y parameter (parameter 11 in one ggml version's list, 10 in the other's).
    assert_eq!(prefill["batch_widths"], serde_json::json!(["11", "300"]));
    assert_eq!(p["mmq_widths"], serde_json::json!({"kernel parameter": 2}));
    let text = std::fs::read_to_string(&out).unwrap();
    let params: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["type"] == "launch" && r.get("params").is_some())
        .map(|r| r["params"].clone())
        .collect();
    let low = |v: &serde_json::Value| v.as_u64().unwrap() as u32;
    assert_eq!(params.len(), 2, "only the MMQ launches keep a parameter: {params:?}");
    assert_eq!((low(&params[0]["11"]), low(&params[1]["10"])), (11, 300), "{params:?}");
    let decode = phase("decode");
    assert_eq!(decode["steps"], 3);
    assert_eq!(
        decode["kernels"],
        serde_json::json!({"MMVQ Q4_K": 3, "RoPE": 3, "flash-attention F16": 3, "quantize": 3})
    );
    assert_eq!(decode["batch_widths"], serde_json::json!(["1"]));
    // Every kernel is classified: nothing left unknown.
    let kernels = p["kernels"].as_array().unwrap();
    assert_eq!(kernels.len(), 9);
    assert!(kernels.iter().all(|k| k["class"]["family"] != "unknown"), "{kernels:?}");
    // The Perfetto export shows the steps as spans on their own track, in order.
    let doc = tracer_json(&["export", out.to_str().unwrap(), "--format", "perfetto"]);
    let steps: Vec<&serde_json::Value> =
        doc["traceEvents"].as_array().unwrap().iter().filter(|e| e["cat"] == "phase").collect();
    let labels: Vec<&str> = steps.iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(labels, ["prefill", "prefill", "decode", "decode", "decode"]);
    assert!(steps.windows(2).all(|w| matches!(w, [a, b] if a["ts"].as_f64() < b["ts"].as_f64())));
    assert!(steps.iter().all(|e| e["ph"] == "X" && e["dur"].as_f64().unwrap() > 0.0));
    // Each kernel's code: the program's own .hip_fatbin, its one bundle (the footer's counters say why not).
    let records = read_trace(&out);
    let counters = &footer(&records).counters;
    for k in kernels {
        assert!(k["code_file"].as_str().is_some_and(|f| f.ends_with("/ggml_steps")), "{k} {counters:?}");
        assert_eq!(k["bundles"], serde_json::json!(["0000"]), "{k} {counters:?}");
    }
    let mmvq = kernels.iter().find(|k| k["class"]["family"] == "MMVQ").unwrap();
    assert_eq!((mmvq["class"]["quant"].as_str(), mmvq["class"]["batch"].as_str()), (Some("Q4_K"), Some("1")));
}

/// The default recording leaves the calls tracer would only count unprobed (the trace and the report say so,
/// and hold none); `record --all-calls` probes and counts them. Both cut the same steps: the logits copy
/// ends a step in the default recording, the sync after it with every call probed.
#[test]
fn the_default_recording_leaves_synchronizations_unprobed_and_cuts_the_same_steps_as_all_calls() {
    let (_, full) = record_ggml_steps("phases-full", &["--all-calls"]);
    let (out, lean) = record_ggml_steps("phases-lean", &[]);
    let (full_api, lean_api) = (&full["api"], &lean["api"]);
    let calls = |api: &serde_json::Value, name: &str| {
        api.as_array().unwrap().iter().find(|a| a["api"] == name).map(|a| a["calls"].as_u64().unwrap())
    };
    assert_eq!(calls(full_api, "hipStreamSynchronize"), Some(5));
    assert_eq!(calls(lean_api, "hipStreamSynchronize"), None);
    assert_eq!(calls(lean_api, "hipMemcpy"), calls(full_api, "hipMemcpy"));
    // One pass a step, each begun by ggml's scheduler, in both.
    assert_eq!(calls(lean_api, "ggml_backend_sched_graph_compute_async"), Some(5));
    assert_eq!(calls(full_api, "ggml_backend_sched_graph_compute_async"), Some(5));
    // The same steps; only the per-phase API table and its traps differ, by the calls left unprobed.
    let phases = |p: &serde_json::Value| {
        let mut v = p["phases"].clone();
        for ph in v.as_array_mut().unwrap() {
            ph.as_object_mut().unwrap().remove("api_calls");
            ph.as_object_mut().unwrap().remove("traps");
        }
        v
    };
    assert_eq!(phases(&lean), phases(&full));
    let traps = |p: &serde_json::Value| -> u64 {
        p["phases"].as_array().unwrap().iter().map(|ph| ph["traps"].as_u64().unwrap()).sum()
    };
    // Five synchronizations fewer, one trap each, and one trap fewer a launch (probed at entry only).
    let launches = |p: &serde_json::Value| -> u64 {
        p["phases"].as_array().unwrap().iter().map(|ph| ph["api_calls"]["hipLaunchKernel"].as_u64().unwrap()).sum()
    };
    assert_eq!(launches(&full), 22);
    assert_eq!(traps(&full) - traps(&lean), 5 + 22);
    let records = read_trace(&out);
    assert!(records.iter().any(|r| matches!(r, Line::Header(h) if h.options.lean)));
    let unprobed: Vec<&str> = records
        .iter()
        .filter_map(|r| match r {
            Line::Probe(p) if trace::left_unprobed(p.error.as_deref()) => Some(p.api.as_str()),
            _ => None,
        })
        .collect();
    assert!(unprobed.contains(&"hipStreamSynchronize") && unprobed.contains(&"hipDeviceSynchronize"), "{unprobed:?}");
    let text = String::from_utf8(tracer(&["report", out.to_str().unwrap()]).stdout).unwrap();
    assert!(text.contains("not probed, so not counted (`record --all-calls` counts them): "), "{text}");
    assert!(text.contains("it ends at the logits copy"), "{text}");
}

/// A 513-token prompt with `n_ubatch` 512, as `llama_decode` runs it on the real HIP runtime: one step (one
/// logits copy) of two matrix passes, each after its inputs' upload: ggml's `mul_mat_q` with its real
/// parameter list over 512 columns, then `mul_mat_vec_q` over the last token. The step shows both, in
/// order, with the kernels of each; each matrix kernel row gives its exact column counts. Each pass begins at
/// ggml's scheduler call (the libggml-base test double); where the program makes none (`static`, as where
/// ggml is linked in statically), the copy toward the device after a matrix kernel cuts the same passes.
#[test]
fn a_prompt_longer_than_one_micro_batch_is_one_step_of_two_passes() {
    let (_, linked_in) = record_ggml_steps_mode("microbatch-static", &[], &["microbatch", "static"]);
    let (out, p) = record_ggml_steps_mode("microbatch", &[], &["microbatch"]);
    let prefill_calls = |p: &serde_json::Value| p["phases"][0]["api_calls"].clone();
    assert_eq!(prefill_calls(&p)["ggml_backend_sched_graph_compute_async"], 2, "{p}");
    assert!(prefill_calls(&linked_in).get("ggml_backend_sched_graph_compute_async").is_none(), "{linked_in}");
    assert_eq!(linked_in["phases"][0]["micro_batched"], p["phases"][0]["micro_batched"]);
    let phases = p["phases"].as_array().unwrap();
    let phase =
        |name: &str| phases.iter().find(|ph| ph["phase"] == name).unwrap_or_else(|| panic!("no {name}: {phases:?}"));
    let prefill = phase("prefill");
    assert_eq!(prefill["steps"], 1);
    assert_eq!(prefill["batch_widths"], serde_json::json!(["513 = 512 + 1"]));
    assert_eq!(
        prefill["micro_batched"],
        serde_json::json!([{
            "label": "513 = 512 + 1",
            "steps": 1,
            "passes": [
                {"width": "512", "kernels": {"MMQ Q4_K": 1, "RoPE": 1, "flash-attention": 1, "quantize": 1}},
                {"width": "1", "kernels": {"MMVQ Q4_K": 1, "RoPE": 1, "flash-attention F16": 1, "quantize": 1}}
            ]
        }])
    );
    let decode = phase("decode");
    assert_eq!((decode["steps"].as_u64(), &decode["batch_widths"]), (Some(1), &serde_json::json!(["1"])));
    assert!(decode.get("micro_batched").is_none(), "{decode}");
    // Exact column counts per kernel row: MMQ's from its own ncols_y parameter, MMVQ's from its name.
    let kernels = p["kernels"].as_array().unwrap();
    let row = |family: &str| kernels.iter().find(|k| k["class"]["family"] == family).unwrap();
    assert_eq!(row("MMQ")["ne11"], serde_json::json!({"512": 1}));
    assert_eq!(row("MMVQ")["ne11"], serde_json::json!({"1": 2}));
    let text = String::from_utf8(tracer(&["report", out.to_str().unwrap()]).stdout).unwrap();
    assert!(text.contains("ne11 (columns): 512 x1"), "{text}");
    assert!(
        text.contains(
            "513 = 512 + 1 (1 step), passes in order: [512] MMQ Q4_K x1, RoPE x1, flash-attention x1, quantize x1; \
             [1] MMVQ Q4_K x1, RoPE x1, flash-attention F16 x1, quantize x1"
        ),
        "{text}"
    );
    // The MMQ row shows its exact count, not the name's tile bound.
    let mmq_line = text.lines().find(|l| l.contains("mul_mat_q")).unwrap();
    assert!(mmq_line.contains("MMQ Q4_K ") && !mmq_line.contains("b<="), "{mmq_line}");
}

/// A ggml-shaped program without libllama (as Ollama's runners map none) calls Debian's real hipSPARSE in its
/// steps (`fixtures/hip/ggml_pass_calls.hip`): the kernel cuts its library-call tally at each pass, so each
/// phase gets the calls made in its steps, as the program counted them; the call made before any step is in
/// none.
#[test]
fn library_calls_land_in_their_phase_without_libllama() {
    let out = scratch("pass-calls").join("t.jsonl");
    let prog = fixture("ggml_pass_calls");
    let o = tracer(&["record", "-q", "-o", out.to_str().unwrap(), "--", prog.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let said = |key: &str| -> u64 {
        let at = stdout.find(key).unwrap_or_else(|| panic!("{key} in {stdout}")) + key.len();
        stdout[at..].split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
    };
    let (prefill, decode) = (said("prefill="), said("decode="));
    assert_eq!((prefill, decode), (1, 6), "{stdout}");
    let v = tracer_json(&["report", "--json", out.to_str().unwrap()]);
    let p = v["processes"].as_array().unwrap().iter().find(|p| p["comm"] == "ggml_pass_calls").expect("the process");
    let (id, _) = p["step_libraries"]
        .as_object()
        .unwrap()
        .iter()
        .find(|(_, path)| path.as_str().is_some_and(|p| p.contains("libhipsparse")))
        .unwrap_or_else(|| panic!("hipSPARSE among the step libraries: {}", p["step_libraries"]));
    let phases = p["phases"].as_array().unwrap();
    let calls = |name: &str| -> u64 {
        let ph = phases.iter().find(|ph| ph["phase"] == name).unwrap_or_else(|| panic!("no {name}: {phases:?}"));
        ph["library_calls"][id.as_str()].as_u64().unwrap_or(0)
    };
    assert_eq!((calls("prefill"), calls("decode")), (prefill, decode), "{phases:?}");
    // The cuts: one at each pass after the first (the first makes the tally), one at the end.
    let records = read_trace(&out);
    let cuts = records.iter().filter(|r| matches!(r, Line::StepCalls(c) if c.at_pass.is_some())).count();
    assert_eq!(cuts, 3);
    assert_eq!(footer(&records).total_drops(), 0);
}
