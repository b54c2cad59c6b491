//! The report of real recordings kept under `fixtures/traces/` (no eBPF needed to read them).

use std::path::Path;

use integration_tests::*;

fn recorded(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/traces").join(name)
}

/// `fixtures/traces/pytorch-mix.jsonl.zst`: `bench/gpu/record_real.sh` on an H100 (`PyTorch` 2.11,
/// transformers 5.17 Llama generate, torch.compile/Inductor/Triton, the cuDNN/flash/memory-efficient SDPA
/// backends, a cuDNN convolution), recorded from the start with the driver probes.
#[test]
fn real_pytorch_trace_reads_with_short_names_one_row_per_kernel_and_no_unknown_family() {
    let trace = recorded("pytorch-mix.jsonl.zst");
    let v = tracer_json(&["report", "--json", trace.to_str().unwrap()]);
    let procs = v["processes"].as_array().unwrap();
    let active: Vec<&serde_json::Value> = procs.iter().filter(|p| p["gpu_activity"] == true).collect();
    assert_eq!(active.len(), 1, "one process used the GPU");
    let p = active[0];
    let kernels = p["kernels"].as_array().unwrap();
    // One row per kernel name: cuDNN loads one module per graph, so one name has many handles.
    let mut names: Vec<&str> = kernels.iter().map(|k| k["name"].as_str().unwrap()).collect();
    let rows = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), rows, "a kernel name on two rows");
    let merged = kernels.iter().filter(|k| k["ids"].as_array().unwrap().len() > 1).count();
    assert!(merged > 0, "no name was loaded under several handles in this trace");
    // Every kernel named and in a family; executions add up to the launches (no graphs in this mix).
    for k in kernels {
        assert_ne!(k["source"], "unnamed", "{k}");
        assert_ne!(k["class"]["family"], "unknown", "{}", k["demangled"]);
        assert!(!k["short_name"].as_str().unwrap().is_empty());
    }
    let launches: u64 = kernels.iter().map(|k| k["launches"].as_u64().unwrap()).sum();
    let lib_launches: u64 = p["api"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["api"].as_str().unwrap().starts_with("cuLaunchKernel"))
        .map(|a| a["calls"].as_u64().unwrap())
        .sum();
    assert_eq!(launches, lib_launches);
    let families: std::collections::BTreeSet<&str> =
        kernels.iter().map(|k| k["class"]["family"].as_str().unwrap()).collect();
    for f in ["BLAS-GEMM", "flash-attention", "triton", "convolution", "reduce/scan/sort", "elementwise/other"] {
        assert!(families.contains(f), "{f} missing from {families:?}");
    }
    // Triton's compiler helpers (ptxas, gcc, as, ld) were followed and did nothing on the GPU.
    let idle = procs.len() - 1;
    assert!(procs.iter().any(|p| p["comm"] == "ptxas" && p["gpu_activity"] == false));

    let o = tracer(&["report", trace.to_str().unwrap()]);
    let text = String::from_utf8(o.stdout).unwrap();
    // Short names by default: no parameter lists or template arguments in kernel rows.
    assert!(text.contains(" vectorized_elementwise_kernel  ["), "{text}");
    assert!(!text.contains("std::array<char*"), "{text}");
    assert!(!text.contains("unknown"), "{text}");
    assert!(text.contains(&format!("{idle} processes with no GPU activity")), "{text}");
    assert!(text.contains("more (") && text.contains("--top 0 lists all"), "{text}");
    // The whole names on request, one row per name.
    let o = tracer(&["report", "--full-names", "--top", "0", trace.to_str().unwrap()]);
    let full = String::from_utf8(o.stdout).unwrap();
    assert!(full.contains("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>"), "{full}");
    assert!(full.contains(&format!("kernels launched ({rows} kernel names")), "{full}");
}

/// The `llama-bench` process of a recorded trace, as `tracer report --json` gives it.
fn llama_bench_report(name: &str) -> serde_json::Value {
    let trace = recorded(name);
    let v = tracer_json(&["report", "--json", trace.to_str().unwrap()]);
    v["processes"].as_array().unwrap().iter().find(|p| p["comm"] == "llama-bench").expect("llama-bench").clone()
}

/// Kernel executions of a process's report, all its kernels together.
fn executions(p: &serde_json::Value) -> u64 {
    p["kernels"].as_array().unwrap().iter().map(|k| k["executions"].as_u64().unwrap()).sum()
}

/// One phase of a process's report.
fn phase<'a>(p: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    let phases = p["phases"].as_array().unwrap();
    let found = phases.iter().find(|ph| ph["phase"] == name);
    assert!(found.is_some(), "no {name}: {phases:?}");
    found.unwrap()
}

/// `fixtures/traces/llama-bench-cuda.jsonl.zst`: the real llama.cpp (CUDA backend built from the
/// llama-cpp-python 0.3.36 sdist, `bench/gpu/ggml/`) running `llama-bench -m q4_k_m.gguf -p 8 -n 16 -r 1`
/// on an H100, traced from its start. llama-bench made 2 prompt runs of 8 tokens (warm-up and run) and
/// 17 tokens (warm-up and 16); ggml-cuda captures its graph on the second evaluation of a shape and
/// replays it from then on (updating the executable in place), so most steps are one graph replay.
#[test]
fn real_llama_cpp_steps_are_its_decode_calls_with_their_batch_widths() {
    let p = llama_bench_report("llama-bench-cuda.jsonl.zst");
    assert_eq!((p["graph_replays"].as_u64(), p["graph_replays_unresolved"].as_u64()), (Some(17), Some(0)));
    assert_eq!(p["phases"].as_array().unwrap().len(), 2, "{}", p["phases"]);
    let (prefill, decode) = (phase(&p, "prefill"), phase(&p, "decode"));
    assert_eq!((prefill["steps"].as_u64(), decode["steps"].as_u64()), (Some(2), Some(17)));
    // A prompt step's width is its widest matrix kernel's: MMVQ over the 8 prompt tokens (the output
    // projection runs on the last token only, one column).
    assert_eq!(prefill["batch_widths"], serde_json::json!(["8"]));
    assert_eq!(decode["batch_widths"], serde_json::json!(["1"]));
    // Every token ran the same graph: 4 layers x (q, k, v, o, gate, up, down: Q4_K and Q6_K) + output.
    let k = &decode["kernels"];
    assert_eq!((k["MMVQ Q4_K"].as_u64(), k["MMVQ Q6_K"].as_u64()), (Some(17 * 20), Some(17 * 5)));
}

/// `fixtures/traces/llama-bench-cuda-prompts.jsonl.zst`: the same build running
/// `llama-bench -p 3,8,9,11,290 -n 8 -r 1` on the `Q4_K_M` model (`bench/gpu/ggml/run.sh`; its per-kernel
/// counts equalled CUPTI's there, 1 858 executions). Prompts on both sides of ggml-cuda's MMVQ/MMQ
/// threshold: 3 and 8 tokens go through MMVQ, 9, 11 and 290 through MMQ; every width is exact. Recorded with
/// kernel parameters: each `mul_mat_q` launch carries its `ncols_y`.
#[test]
fn real_llama_cpp_prompts_on_both_sides_of_the_mmvq_threshold() {
    let p = llama_bench_report("llama-bench-cuda-prompts.jsonl.zst");
    let total = executions(&p);
    assert_eq!(total, 1858);
    let (prefill, decode) = (phase(&p, "prefill"), phase(&p, "decode"));
    // 5 prompts, each a warm-up and a run; a warm-up token and 8.
    assert_eq!((prefill["steps"].as_u64(), decode["steps"].as_u64()), (Some(10), Some(9)));
    // Exact column counts: MMVQ's from its name, MMQ's from its own ncols_y parameter (150 launches, half of
    // them captured into graphs); the stream-k fixup kernel after each has no such parameter and takes the
    // width of the quantize_mmq_q8_1 launch before it.
    assert_eq!(prefill["batch_widths"], serde_json::json!(["11", "290", "3", "8", "9"]));
    assert_eq!(decode["batch_widths"], serde_json::json!(["1"]));
    assert_eq!(p["mmq_widths"], serde_json::json!({"kernel parameter": 150, "src1 quantize grid": 150}));
}

/// The same recording as `record --lean` would have made it: no synchronization and no async copy to the
/// device (the calls --lean leaves unprobed), steps ending at the logits copy. The steps, their labels,
/// kernels and widths are the same as those the full recording gives.
#[test]
fn real_llama_cpp_phases_are_the_same_when_steps_end_at_the_logits_copy() {
    use tracer::testing::{Report, trace::Line};
    let (records, _) = trace::read_file(&recorded("llama-bench-cuda-prompts.jsonl.zst")).unwrap();
    let mut lean = Vec::new();
    let mut left_out = 0;
    for r in records.iter().cloned() {
        match r {
            Line::Header(mut h) => {
                h.options.lean = true;
                lean.push(Line::Header(h));
            }
            Line::Call(c) if c.api.tallied() => left_out += 1,
            r => lean.push(r),
        }
    }
    // 334 synchronizations and 152 async copies to the device (written one by one in this recording).
    assert_eq!(left_out, 334 + 152);
    let bench = |r: Report| r.processes.into_iter().find(|p| p.comm == "llama-bench").expect("llama-bench");
    let (full, lean) = (bench(Report::build(records)), bench(Report::build(lean)));
    let steps = |p: &tracer::testing::ProcessReport| p.phases.iter().map(|ph| (ph.phase, ph.steps)).collect::<Vec<_>>();
    use tracer::testing::Phase::{Decode, Prefill};
    assert_eq!(steps(&lean), [(Prefill, 10), (Decode, 9)]);
    // The same steps; only the per-phase API table differs, by the calls taken out.
    let unprobed = |mut p: Vec<tracer::testing::PhaseReport>| {
        for ph in &mut p {
            ph.api_calls.retain(|f, _| trace::event::ApiFunc::from_name(f).is_none_or(|f| !f.tallied()));
            ph.traps = 0;
        }
        p
    };
    assert_eq!(unprobed(full.phases), unprobed(lean.phases));
}

/// The report and the Perfetto export cut the same steps from the same records: on the kept llama.cpp
/// trace (CUDA graphs: captured launches that run only in replays, replays that run them), every
/// process's phase spans in the export count what its report's phases count.
#[test]
fn report_and_perfetto_export_cut_the_same_steps() {
    let trace = recorded("llama-bench-cuda-prompts.jsonl.zst");
    let report = tracer_json(&["report", "--json", trace.to_str().unwrap()]);
    let export = tracer_json(&["export", trace.to_str().unwrap(), "--format", "perfetto"]);
    let mut from_report = std::collections::BTreeMap::new();
    for p in report["processes"].as_array().unwrap() {
        for ph in p["phases"].as_array().unwrap() {
            from_report.insert(
                (p["pid"].as_u64().unwrap(), ph["phase"].as_str().unwrap().to_owned()),
                ph["steps"].as_u64().unwrap(),
            );
        }
    }
    let mut from_export = std::collections::BTreeMap::new();
    for e in export["traceEvents"].as_array().unwrap().iter().filter(|e| e["cat"] == "phase") {
        *from_export.entry((e["pid"].as_u64().unwrap(), e["name"].as_str().unwrap().to_owned())).or_insert(0u64) += 1;
    }
    let bench = report["processes"].as_array().unwrap().iter().find(|p| p["comm"] == "llama-bench").unwrap();
    let pid = bench["pid"].as_u64().unwrap();
    assert_eq!(from_report.get(&(pid, "prefill".to_owned())), Some(&10));
    assert_eq!(from_report.get(&(pid, "decode".to_owned())), Some(&9));
    assert_eq!(from_export, from_report);
}

/// `fixtures/traces/h100-llama-bench-q4_k_m-p513.jsonl.zst`, the GPU recording `cargo xtask demo` reports:
/// `bench/gpu/ggml/ledger.sh` on an H100 (driver 580.159.04), `llama-bench -m q4_k_m.gguf -p 513 -n 4 -r 1`,
/// traced from its start; its 796 executions equalled CUPTI's kernel by kernel. What the demo shows is here:
/// the prompt step as two matrix passes (`513 = 512 + 1`), exact column counts, and a ledger of called and
/// mapped-only libraries.
#[test]
fn the_demos_gpu_recording_has_passes_column_counts_and_a_ledger() {
    let p = llama_bench_report("h100-llama-bench-q4_k_m-p513.jsonl.zst");
    let total = executions(&p);
    assert_eq!(total, 796);
    let (prefill, decode) = (phase(&p, "prefill"), phase(&p, "decode"));
    assert_eq!((prefill["steps"].as_u64(), decode["steps"].as_u64()), (Some(2), Some(5)));
    assert_eq!(prefill["batch_widths"], serde_json::json!(["513 = 512 + 1"]));
    let widths: Vec<&str> = prefill["micro_batched"][0]["passes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["width"].as_str().unwrap())
        .collect();
    assert_eq!(widths, ["512", "1"]);
    let mmq: Vec<&serde_json::Value> =
        p["kernels"].as_array().unwrap().iter().filter(|k| k["class"]["family"] == "MMQ").map(|k| &k["ne11"]).collect();
    assert!(!mmq.is_empty() && mmq.iter().all(|n| n.as_object().unwrap().keys().eq(["512"])), "{mmq:?}");
    let status = |name: &str| {
        let m = p["mapped"].as_array().unwrap().iter().find(|m| m["path"].as_str().unwrap().contains(name));
        m.map(|m| m["status"].as_str().unwrap().to_owned())
    };
    assert_eq!(status("libggml-cuda").as_deref(), Some("called"));
    assert_eq!(status("libcuda.so").as_deref(), Some("called"));
    assert_eq!(status("libcublas.so").as_deref(), Some("mapped-only"));
    assert_eq!(status("libcublasLt").as_deref(), Some("mapped-only"));
}

/// `fixtures/traces/null-gpu-llama-bench-q4_k_m.jsonl.zst`, the AMD recording `cargo xtask demo` reports:
/// `fixtures/kmod/null_gpu_bench.sh`, Debian unstable's unmodified llama-bench (ggml 0.27's HIP backend, HIP 6.4.3,
/// `ROCr` 6.4.3) on the null GPU, `-p 8 -n 4 -r 1`, traced from its start (the null GPU test checks such runs against
/// the double's packet log). Its report: 395 kernel dispatches read at the doorbells, every one named, ggml's families
/// with their quantization; llama-bench's own steps read from Debian's libllama 0.7.0 batch layout; the symbol
/// queries that name nothing counted, and said; rocBLAS called at start-up only. One trap per dispatch: the guest
/// has an AMD GPU, so HIP's launch functions were left unprobed, said, and the kernel table's executions are the
/// dispatches read at the doorbells.
#[test]
fn the_demos_amd_recording_has_every_dispatch_named_and_llama_bench_s_own_steps() {
    let trace = recorded("null-gpu-llama-bench-q4_k_m.jsonl.zst");
    let p = llama_bench_report("null-gpu-llama-bench-q4_k_m.jsonl.zst");
    let rows = p["dispatches"].as_array().unwrap();
    let total: u64 = rows.iter().map(|k| k["dispatches"].as_u64().unwrap()).sum();
    assert_eq!((total, p["barrier_packets"].as_u64()), (395, Some(105)));
    let kernels = p["kernels"].as_array().unwrap();
    assert!(kernels.iter().all(|k| k["from_dispatches"] == true && k["launches"] == 0), "{kernels:?}");
    assert_eq!(kernels.iter().map(|k| k["executions"].as_u64().unwrap()).sum::<u64>(), 395);
    assert!(p["crosscheck"].as_array().unwrap().is_empty());
    assert!(rows.iter().all(|k| k["name"].as_str().is_some_and(|n| !n.is_empty())), "{rows:?}");
    let mmvq: u64 =
        rows.iter().filter(|k| k["class"]["family"] == "MMVQ").map(|k| k["dispatches"].as_u64().unwrap()).sum();
    assert_eq!(mmvq, 93);
    assert!(rows.iter().any(|k| k["class"]["family"] == "MMVQ" && k["class"]["quant"] == "Q4_K"), "{rows:?}");
    let (prefill, decode) = (phase(&p, "prefill"), phase(&p, "decode"));
    assert_eq!(prefill["compositions"], serde_json::json!({"prefill: 1 prompt of 8": 2, "prefill: 1 prompt of 1": 2}));
    assert_eq!(decode["compositions"], serde_json::json!({"decode 1 seq x 1": 3}));
    let text = String::from_utf8(tracer(&["report", trace.to_str().unwrap()]).stdout).unwrap();
    assert!(text.contains("(216868 hsa_executable_symbol_get_info calls asked for other attributes"), "{text}");
    assert!(
        text.contains("not probed, each dispatch read at its queue's doorbell instead (`record --hip-launches` probes them): __hipPushCallConfiguration, hipLaunchKernel,")
            && text.contains("kernels launched or dispatched (15 kernels"),
        "{text}"
    );
    // rocBLAS's entry points, counted one uprobe each on the guest's 6.1 kernel: called twice, for its version at
    // start-up, in no step.
    let rocblas =
        p["mapped"].as_array().unwrap().iter().find(|m| m["path"].as_str().unwrap().contains("librocblas")).unwrap();
    assert_eq!((rocblas["status"].as_str(), rocblas["calls"].as_u64()), (Some("called"), Some(2)), "{rocblas}");
    let rocblas_in_a_step = p["phases"].as_array().unwrap().iter().any(|ph| {
        ph["library_calls"].as_object().is_some_and(|calls| {
            calls.keys().any(|id| p["step_libraries"][id].as_str().is_some_and(|l| l.contains("librocblas")))
        })
    });
    assert!(!rocblas_in_a_step, "{p}");
}

/// `fixtures/traces/h100-llama-bench-f16-p513.jsonl.zst`: the same run in F16 (621 executions = CUPTI's),
/// where ggml hands large products to cuBLAS: libcublas and libcublasLt are called, cuBLASLt's kernels are
/// attributed to its file.
#[test]
fn the_f16_recording_calls_cublas_and_runs_cublaslt_kernels() {
    let p = llama_bench_report("h100-llama-bench-f16-p513.jsonl.zst");
    let total = executions(&p);
    assert_eq!(total, 621);
    let row = |name: &str| {
        p["mapped"].as_array().unwrap().iter().find(|m| m["path"].as_str().unwrap().contains(name)).unwrap().clone()
    };
    let blas = row("libcublas.so");
    assert_eq!((blas["status"].as_str(), blas["calls"].as_u64()), (Some("called"), Some(55)));
    let lt = row("libcublasLt");
    assert_eq!((lt["status"].as_str(), lt["executions"].as_u64()), (Some("called"), Some(50)));
}

/// A server's own token counts from its answers' timings (`slots.py`'s requests file among the recorded traces):
/// prompt tokens (the sum of `prompt_n`) and decoded tokens (the sum of `predicted_n` less the last of each, never
/// decoded).
fn server_tokens(requests: &str) -> (u64, u64) {
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(recorded(requests)).unwrap()).unwrap();
    let answers = v.as_array().unwrap();
    let prompt = answers.iter().map(|r| r["prompt_n"].as_u64().unwrap()).sum();
    let decode = answers.iter().map(|r| r["predicted_n"].as_u64().unwrap() - 1).sum();
    (prompt, decode)
}

/// `fixtures/traces/h100-llama-server-f16-np2.jsonl.zst`: `bench/gpu/ggml/slots.sh`'s F16 run on an H100
/// (driver 580.159.04): llama-server of the pinned llama.cpp with 2 slots, four completions sent at once
/// (prompts of 11, 23, 290 and 600 token ids), traced from its start. Its batches (`llama_process`, the
/// extended batch) give each step's sequences: several sequences decode in one step, a prompt runs beside
/// a decode token, and each phase's tokens equal the server's own timings
/// (`h100-llama-server-f16-np2.requests.json`: `prompt_n`, and `predicted_n` minus the last, never decoded),
/// plus the two 2-token decodes the server makes at its start. cuBLAS's calls are given per phase.
#[test]
fn a_two_slot_llama_server_s_steps_and_tokens_equal_the_server_s() {
    let trace = recorded("h100-llama-server-f16-np2.jsonl.zst");
    let v = tracer_json(&["report", "--json", trace.to_str().unwrap()]);
    let p = v["processes"].as_array().unwrap().iter().find(|p| p["comm"] == "llama-server").expect("llama-server");
    let (server_prompt, server_decode) = server_tokens("h100-llama-server-f16-np2.requests.json");
    let phases = p["phases"].as_array().unwrap();
    let sum = |key: &str| phases.iter().map(|ph| ph[key].as_u64().unwrap_or(0)).sum::<u64>();
    assert_eq!((sum("prompt_tokens"), sum("decode_tokens")), (server_prompt + 4, server_decode));
    assert_eq!(sum("steps"), sum("steps_from_batches"));
    let decode = phase(p, "decode");
    assert_eq!(decode["compositions"]["decode 2 seq x 1"], 21, "{decode}");
    let mixed = phase(p, "mixed");
    assert_eq!(mixed["compositions"]["mixed: 1 prompt of 600 + 1 decode"], 1, "{mixed}");
    // cuBLAS is called in the prompt steps (its products), hardly in decode.
    let libs = p["step_libraries"].as_object().unwrap();
    let cublas = libs.iter().find(|(_, l)| l.as_str().unwrap().ends_with("libcublas.so.13")).unwrap().0.as_str();
    let calls = |ph: &serde_json::Value| ph["library_calls"][cublas].as_u64().unwrap_or(0);
    assert_eq!((calls(phase(p, "prefill")), calls(decode), calls(mixed)), (29, 1, 75));
}

/// `fixtures/traces/h200-llama-server-ollama-layout-np4.jsonl.zst`: `bench/gpu/ggml/ollama_layout.sh` on an H200:
/// the pinned llama.cpp's llama-server linked as Ollama's llama engine links llama.cpp (libllama in the stripped
/// program, ggml's libraries shared), 4 slots, four completions sent at once (prompts of 11, 23, 290 and 600 token
/// ids), traced from its start with CUPTI in the same process (3 400 kernel executions, each kernel's count equal).
/// No batch is read: each step is judged from its passes' inputs, and each phase's tokens equal the server's
/// timings (`h200-llama-server-ollama-layout-np4.requests.json`) plus its two start-up decodes of 2 tokens; the steps
/// where four sequences decode together are decode steps.
#[test]
fn a_server_linked_as_ollama_links_llama_cpp_has_the_server_s_tokens_from_its_passes_inputs() {
    let trace = recorded("h200-llama-server-ollama-layout-np4.jsonl.zst");
    let v = tracer_json(&["report", "--json", trace.to_str().unwrap()]);
    let p = v["processes"].as_array().unwrap().iter().find(|p| p["comm"] == "llama-server").expect("llama-server");
    let (server_prompt, server_decode) = server_tokens("h200-llama-server-ollama-layout-np4.requests.json");
    let phases = p["phases"].as_array().unwrap();
    let sum = |key: &str| phases.iter().map(|ph| ph[key].as_u64().unwrap_or(0)).sum::<u64>();
    assert_eq!(
        (sum("prompt_tokens"), sum("decode_tokens"), sum("unread_tokens")),
        (server_prompt + 4, server_decode, 0)
    );
    assert_eq!((sum("steps"), sum("steps_from_inputs"), sum("steps_from_batches")), (33, 33, 0));
    let decode = phase(p, "decode");
    assert_eq!(decode["compositions"]["decode 4 seq x 1"], 7, "{decode}");
    assert_eq!(decode["compositions"]["decode 2 seq x 1"], 4, "{decode}");
    // Each pass's two inputs read, one trap each.
    assert_eq!(decode["api_calls"]["ggml_backend_tensor_set"], 54, "{decode}");
    let executions: u64 = p["kernels"].as_array().unwrap().iter().map(|k| k["executions"].as_u64().unwrap()).sum();
    assert_eq!(executions, 3400);
    let text = String::from_utf8_lossy(&tracer(&["report", trace.to_str().unwrap()]).stdout).into_owned();
    assert!(text.contains("tokens from the passes' inputs: 928 prompt, 52 decode"), "{text}");
}

/// `fixtures/traces/h100-llama-decode-by-value.jsonl.zst`: `bench/gpu/ggml/decode_api.sh` on an H100: the
/// pinned llama.cpp's `llama_decode`, its `struct llama_batch` passed by value as Ollama's runner and
/// llama-cpp-python pass it (two sequences: a prompt, a prompt beside a decode token, then both decoding).
/// The steps and tokens equal the program's own (`h100-llama-decode-by-value.truth.json`).
#[test]
fn a_real_llama_decode_batch_by_value_gives_the_program_s_steps() {
    let trace = recorded("h100-llama-decode-by-value.jsonl.zst");
    let truth: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(recorded("h100-llama-decode-by-value.truth.json")).unwrap())
            .unwrap();
    let v = tracer_json(&["report", "--json", trace.to_str().unwrap()]);
    let p = v["processes"].as_array().unwrap().iter().find(|p| p["comm"] == "decode_api").expect("decode_api");
    for name in ["prefill", "mixed", "decode"] {
        assert_eq!(phase(p, name)["steps"], truth[name], "{name}");
        assert_eq!(phase(p, name)["steps_from_batches"], truth[name], "{name}");
    }
    let sum = |key: &str| p["phases"].as_array().unwrap().iter().map(|ph| ph[key].as_u64().unwrap_or(0)).sum::<u64>();
    assert_eq!((sum("prompt_tokens"), sum("decode_tokens")), (34, 13));
    assert_eq!(truth["prompt_tokens"], 34);
    assert_eq!(phase(p, "mixed")["compositions"]["mixed: 1 prompt of 23 + 1 decode"], 1);
    assert_eq!(phase(p, "decode")["api_calls"]["llama_decode"], 6);
}

/// A compressed trace cut in the middle of a frame (a copy interrupted, a disk full): `report` and every
/// export read what is complete, end with status 0 and say on stderr that the file was cut and how much
/// was read.
#[test]
fn a_compressed_trace_cut_mid_frame_is_reported_and_exported_with_a_warning() {
    let dir = scratch("cut-zst");
    let whole = std::fs::read(recorded("pytorch-mix.jsonl.zst")).unwrap();
    let cut = dir.join("cut.jsonl.zst");
    std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
    let said = "tracer: warning: the trace was not closed normally (the tracer was killed, or its disk filled?): the file is cut in the middle of a compressed frame: the ";
    let o = tracer(&["report", cut.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.starts_with(said) && stderr.trim().lines().count() == 1, "{stderr}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("warning: the trace was not closed normally"));
    for format in ["csv", "perfetto", "dot", "parquet"] {
        let out = dir.join(format!("out.{format}"));
        let o = tracer(&["export", "--format", format, "-o", out.to_str().unwrap(), cut.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{format}: {stderr}");
        assert!(stderr.starts_with(said) && stderr.trim().lines().count() == 1, "{format}: {stderr}");
        assert!(std::fs::metadata(&out).unwrap().len() > 0, "{format}");
        println!("export {format}: {}", stderr.trim());
    }
    drop(std::fs::remove_dir_all(dir));
}

/// `fixtures/traces/debian-vulkan-llama-bench-q4_k_m.jsonl.zst`: Debian unstable's llama-bench with its stripped
/// `libggml0-backend-vulkan` (ggml 0.27) on Mesa's lavapipe, `-ngl 99 -p 8 -n 4 -r 1` on a tiny `Q4_K_M` model, in
/// the root `cargo xtask setup` makes, recorded from its start (the command of
/// `vulkan::debian_s_stripped_ggml_vulkan_has_its_pipelines_named_as_ggml_makes_them`). Every pipeline carries
/// ggml's own name (source `pipeline`, read at ggml's pipeline maker), those ggml builds at run time included, with
/// ggml's families and weight types; the trace reads as this build writes it.
#[test]
fn a_stripped_ggml_vulkan_s_recording_has_every_pipeline_under_ggml_s_own_name() {
    let p = llama_bench_report("debian-vulkan-llama-bench-q4_k_m.jsonl.zst");
    let kernels = p["kernels"].as_array().unwrap();
    assert_eq!(executions(&p), 245);
    assert_eq!(kernels.len(), 13);
    assert!(kernels.iter().all(|k| k["source"] == "pipeline"), "{kernels:?}");
    let class = |name: &str| {
        let k = kernels.iter().find(|k| k["name"] == name).unwrap_or_else(|| panic!("no {name}: {kernels:?}"));
        let family = k["class"]["family"].as_str().unwrap().to_owned();
        (k["executions"].as_u64().unwrap(), family, k["class"]["quant"].as_str().map(str::to_owned))
    };
    assert_eq!(class("mul_mat_vec_q4_k_f32_f32"), (84, "MMVQ".to_owned(), Some("Q4_K".to_owned())));
    assert_eq!(class("flash_attn_f32_f16_aligned").0, 14);
    assert_eq!(class("rms_norm_mul_f32").0, 28);
    assert_eq!(class("add_f32_f32_f32_norepeat").0, 4);
}
