//! The seeds' question on a ggml-shaped workload: kernels named as ggml names them, launched on the real HIP
//! runtime in a prefill step and three decode steps (fixtures/hip/ggml_steps.hip).

use integration_tests::*;

#[test]
fn prefill_and_decode_steps_with_families_quant_types_and_batch_widths() {
    let dir = scratch("phases");
    let out = dir.join("t.jsonl");
    let prog = fixture("ggml_steps");
    let o = tracer(&["record", "-q", "-o", out.to_str().unwrap(), "--", prog.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = tracer(&["report", "--json", out.to_str().unwrap()]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let p = v["processes"].as_array().unwrap().iter().find(|p| p["comm"] == "ggml_steps").expect("the process");
    let phases = p["phases"].as_array().unwrap();
    let phase =
        |name: &str| phases.iter().find(|ph| ph["phase"] == name).unwrap_or_else(|| panic!("no {name}: {phases:?}"));
    assert_eq!(phases.len(), 2, "{phases:?}");
    let prefill = phase("prefill");
    assert_eq!(prefill["steps"], 1);
    assert_eq!(
        prefill["kernels"],
        serde_json::json!({"MMQ Q4_K": 1, "RoPE": 1, "flash-attention": 1, "quantize": 1, "softmax": 1})
    );
    assert_eq!(prefill["batch_widths"], serde_json::json!(["<=16"]));
    let decode = phase("decode");
    assert_eq!(decode["steps"], 3);
    assert_eq!(
        decode["kernels"],
        serde_json::json!({"MMVQ Q4_K": 3, "RoPE": 3, "flash-attention F16": 3, "quantize": 3})
    );
    assert_eq!(decode["batch_widths"], serde_json::json!(["1"]));
    // Every kernel is classified: nothing left unknown.
    let kernels = p["kernels"].as_array().unwrap();
    assert_eq!(kernels.len(), 8);
    assert!(kernels.iter().all(|k| k["class"]["family"] != "unknown"), "{kernels:?}");
    let mmvq = kernels.iter().find(|k| k["class"]["family"] == "MMVQ").unwrap();
    assert_eq!((mmvq["class"]["quant"].as_str(), mmvq["class"]["batch"].as_str()), (Some("Q4_K"), Some("1")));
}

#[test]
fn inspect_lists_bundles_targets_and_ggml_kernels() {
    let prog = fixture("ggml_steps");
    let o = tracer(&["inspect", "--json", prog.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let bundles = v["bundles"].as_array().unwrap();
    assert_eq!(bundles.len(), 1);
    assert_eq!(bundles[0]["number"], "0000");
    let entries = bundles[0]["entries"].as_array().unwrap();
    let triples: Vec<&str> = entries.iter().map(|e| e["triple"].as_str().unwrap()).collect();
    assert_eq!(triples, ["host-x86_64-unknown-linux", "hipv4-amdgcn-amd-amdhsa--gfx1030"]);
    let gpu = &entries[1];
    assert_eq!(gpu["target"], "gfx1030");
    let kernels = gpu["kernels"].as_array().unwrap();
    assert_eq!(kernels.len(), 8);
    let mmvq = kernels.iter().find(|k| k["family"] == "MMVQ").expect("mul_mat_vec_q found");
    assert_eq!(mmvq["quant"], "Q4_K");
    assert_eq!(mmvq["name"], "_Z13mul_mat_vec_qIL9ggml_type12ELi1ELb0EEvPKvS2_PKiPfjjj");
    assert!(kernels.iter().all(|k| k["family"] != "unknown"));
    // A target filter keeps only that target's entries.
    let o = tracer(&["inspect", "--json", "--target", "gfx90a", prog.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["bundles"][0]["entries"].as_array().unwrap().is_empty());
    // A file without GPU code: one sentence.
    let o = tracer(&["inspect", "/bin/true"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("has no .hip_fatbin section"));
}
