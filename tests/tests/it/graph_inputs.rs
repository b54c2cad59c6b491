//! Steps judged from their passes' inputs: the token positions and output rows ggml's scheduler copies to the
//! device, read at `ggml_backend_tensor_set` in libggml-base. A two-slot `llama-server` answering two requests at
//! once on Mesa's lavapipe (ggml's Vulkan backend): Debian's, whose libllama batches the inputs are checked
//! against step by step, and the pinned llama.cpp's linked as Ollama links it (libllama in the stripped program,
//! ggml's libraries shared), whose steps the inputs alone judge. Tokens per phase equal the server's own timings.

use std::path::PathBuf;

use integration_tests::*;
use serde_json::Value;

use crate::debian_llama::{ask_two, stop};

/// `args` recorded from its start (a `llama-server` on `port`), two requests sent at once: the server's
/// timings, the records and the server's report.
fn serve_two(test: &str, args: &[&str], port: u16) -> (Vec<(u64, u64)>, Vec<Line>, Value, String) {
    let out = scratch(test).join("t.jsonl");
    let mut argv = vec!["-q", "--"];
    argv.extend_from_slice(args);
    let rec = Recording::start(&out, &argv);
    let timings = ask_two(port);
    stop(exec_pid(&out));
    let (status, said) = rec.wait();
    assert!(status.success(), "{said}");
    let records = read_trace(&out);
    let v = tracer_json(&["report", "--json", out.to_str().expect("UTF-8 path")]);
    let p = v["processes"].as_array().expect("processes").iter().find(|p| p["comm"] == "llama-server");
    let text = String::from_utf8_lossy(&tracer(&["report", out.to_str().expect("UTF-8 path")]).stdout).into_owned();
    (timings, records, p.expect("the server").clone(), text)
}

/// `server` with 2 slots, every layer on ggml's Vulkan backend (lavapipe, which ggml skips as a CPU device unless
/// named), serving `model` on `port`.
fn two_slots<'a>(server: &'a str, model: &'a str, port: &'a str) -> Vec<&'a str> {
    let args = ["-m", model, "-np", "2", "-c", "2048", "-ngl", "99", "--port", port];
    ["/usr/bin/env", "GGML_VK_VISIBLE_DEVICES=0", server].into_iter().chain(args).collect()
}

/// The phases' sum of `key`.
fn sum(p: &Value, key: &str) -> u64 {
    p["phases"].as_array().expect("phases").iter().map(|ph| ph[key].as_u64().unwrap_or(0)).sum()
}

/// Steps of a composition, over the phases.
fn steps_of(p: &Value, composition: &str) -> u64 {
    p["phases"].as_array().expect("phases").iter().map(|ph| ph["compositions"][composition].as_u64().unwrap_or(0)).sum()
}

/// The pass inputs recorded: positions and output rows.
fn inputs(records: &[Line]) -> (usize, usize) {
    let kind = |k: trace::InputKind| {
        records.iter().filter(|r| matches!(r, Line::GraphInput(g) if g.input == Some(k) && !g.fault)).count()
    };
    (kind(trace::InputKind::Positions), kind(trace::InputKind::Outputs))
}

/// A tiny random `Q4_K_M` llama model at `q4`, quantized from the F16 one at `f16` by the command `quantize`
/// (paths as that command sees them).
fn q4_model(quantize: &[&str], f16: &str, q4: &str) {
    let o = std::process::Command::new(quantize[0])
        .args(&quantize[1..])
        .args([f16, q4, "Q4_K_M"])
        .output()
        .expect("llama-quantize runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Debian's llama-server on lavapipe: every batched step is judged alike from its passes' inputs, and the
/// tokens per phase are the server's (plus the 4 prompt tokens of its two start-up decodes).
#[test]
fn debian_s_llama_server_s_batched_steps_are_judged_alike_from_their_passes_inputs() {
    let root = PathBuf::from(std::env::var_os("TRACER_SID_VULKAN_ROOT").expect("set by `cargo xtask test`"));
    let r = root.display().to_string();
    let f16 = ModelInRoot::new(&root, "inputs-f16");
    let q4 = format!("{}-q4.gguf", f16.inside.trim_end_matches(".gguf"));
    let q4_host = root.join(q4.trim_start_matches('/'));
    q4_model(&["/usr/sbin/chroot", &r, "/usr/bin/llama-quantize"], &f16.inside, &q4);
    let mut args = vec!["/usr/sbin/chroot", &r];
    let port = server_port(161);
    let port_arg = port.to_string();
    args.extend(two_slots("/usr/bin/llama-server", &q4, &port_arg));
    let (timings, records, p, text) = serve_two("inputs-debian", &args, port);
    drop(std::fs::remove_file(&q4_host));
    assert_eq!(footer(&records).total_drops(), 0);
    let (positions, outputs) = inputs(&records);
    assert!(positions > 0 && positions == outputs, "{positions} {outputs}");
    let prompt: u64 = timings.iter().map(|t| t.0).sum::<u64>() + 4;
    let decode: u64 = timings.iter().map(|t| t.1 - 1).sum();
    assert_eq!((sum(&p, "prompt_tokens"), sum(&p, "decode_tokens")), (prompt, decode), "{text}");
    // Every step has its batch, and its passes' inputs judge it alike.
    let batched = sum(&p, "steps_from_batches");
    assert!(batched > 0, "{text}");
    assert_eq!((sum(&p, "inputs_checked"), sum(&p, "inputs_disagree")), (batched, 0), "{text}");
    assert!(steps_of(&p, "decode 2 seq x 1") > 0, "{text}");
    assert!(text.contains(&format!("{batched} of {batched} batched steps come out the same")), "{text}");
}

/// The pinned llama.cpp's llama-server with libllama linked in (no libllama.so mapped, no batch read), on
/// lavapipe: its steps are judged from their passes' inputs, steps of two decoding sequences are decode steps,
/// and its tokens per phase equal the server's timings (plus its start-up decodes' prompt tokens).
#[test]
fn a_server_linked_as_ollama_links_llama_cpp_has_its_steps_from_its_passes_inputs() {
    let server = PathBuf::from(std::env::var_os("TRACER_LLAMA_STATIC_SERVER").expect("set by `cargo xtask test`"));
    let bin = PathBuf::from(std::env::var_os("TRACER_LLAMA_VULKAN").expect("set by `cargo xtask test`"));
    let dir = scratch("inputs-static-model");
    let f16 = dir.join("f16.gguf");
    tiny_llama(&f16);
    let q4 = dir.join("q4.gguf");
    let quantize = bin.join("llama-quantize");
    let (f16, model) = (f16.to_str().expect("UTF-8 path"), q4.to_str().expect("UTF-8 path"));
    q4_model(&[quantize.to_str().expect("UTF-8 path")], f16, model);
    let server = server.to_str().expect("UTF-8 path");
    let port = server_port(162);
    let (timings, records, p, text) = serve_two("inputs-static", &two_slots(server, model, &port.to_string()), port);
    assert_eq!(footer(&records).total_drops(), 0);
    // No model library: no batch, and no libllama among the libraries.
    assert!(!records.iter().any(|r| matches!(r, Line::Batch(_))));
    assert!(!records.iter().any(|r| matches!(r, Line::Library(l) if l.path.contains("libllama"))));
    let (positions, outputs) = inputs(&records);
    assert!(positions > 0 && positions == outputs, "{positions} {outputs}");
    assert_eq!(sum(&p, "steps_from_batches"), 0);
    assert_eq!(sum(&p, "steps_from_inputs"), sum(&p, "steps"), "{text}");
    let prompt: u64 = timings.iter().map(|t| t.0).sum();
    let decode: u64 = timings.iter().map(|t| t.1 - 1).sum();
    // Its two start-up decodes of 2 tokens each are prompt tokens, as in Debian's.
    assert_eq!((sum(&p, "prompt_tokens"), sum(&p, "decode_tokens")), (prompt + 4, decode), "{text}");
    // Two sequences decoding share steps, and those are decode steps, never prefill.
    assert!(steps_of(&p, "decode 2 seq x 1") > 0, "{text}");
    let phases = p["phases"].as_array().expect("phases");
    let prefill = phases.iter().find(|ph| ph["phase"] == "prefill").expect("a prefill phase");
    assert!(prefill["compositions"].as_object().expect("compositions").keys().all(|k| k.starts_with("prefill:")));
    assert!(text.contains("steps judged from their passes' inputs"), "{text}");
}
