//! The study's card under Ollama's own layout (issue 80), from shipped recordings: the pinned llama.cpp built against
//! Debian experimental's `ROCm` 7.2.4 for gfx1100 and gfx1201 as Ollama 0.30+ builds it (`cargo xtask ollama-rocm72`:
//! HIP graphs on, its HIP backend and the `ROCm` it bundles in `lib/ollama/rocm_v7_2`), its llama-bench on the null
//! GPU presenting an RX 9070 XT, a tiny random llama at `Q4_K_M` and F16, `-p 290 -n 8`, recorded from the start
//! by `fixtures/kmod/ollama_gfx1201_record.sh`, which ships beside each recording the two oracles of the same boot:
//! the double's packet log (every packet it consumed) and HIP's own log of the packets it wrote (`AMD_LOG_LEVEL=5`).
//! The build takes hours on 2 cores, so the recordings are shipped and checked here, offline: what tracer read at
//! the doorbells equals the double's log packet for packet, every dispatch is named as HIP names it, and the
//! report answers the study's questions (ne11 of every MMQ and MMVQ dispatch, rocBLAS's Tensile kernels, the
//! libraries Ollama bundles, mapped or called).

use std::{io::Read as _, path::PathBuf};

use integration_tests::*;

use crate::null_gpu::{consumed, every_dispatch_at_ne11, read_by_tracer, reported_equals_logged};

fn shipped(name: &str) -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/traces").join(name)
}

/// A shipped zstd text file, read.
fn unzstd(name: &str) -> String {
    let file = std::fs::File::open(shipped(name)).expect("a shipped file");
    let mut text = String::new();
    zstd::stream::read::Decoder::new(file).expect("zstd").read_to_string(&mut text).expect("UTF-8 text");
    text
}

/// The rows of the report's dispatches of `family`.
fn family<'a>(p: &'a serde_json::Value, family: &str) -> Vec<&'a serde_json::Value> {
    p["dispatches"].as_array().expect("dispatches").iter().filter(|r| r["class"]["family"] == family).collect()
}

/// One recording (`run`: `q4_k_m` or `f16`) against the boot's packet log: the packets tracer read equal the
/// double's, queue by queue; the report's dispatches per kernel object equal its log's; every dispatch named as
/// HIP's log names it; the runtime mapped from Ollama's tree. The report's JSON for the run's other checks, and the
/// names' comparison in words.
fn checked(card: &str, run: &str, packets: &str) -> (serde_json::Value, String) {
    let trace = shipped(&format!("null-gpu-{card}-ollama-{run}.jsonl.zst"));
    let records = read_trace(&trace);
    let f = footer(&records);
    assert_eq!(f.total_drops(), 0, "{run}: nothing dropped");
    let pid = exec_of(&records, "llama-bench").expect("llama-bench ran").pid;
    let truth = consumed(packets, pid);
    let seen = read_by_tracer(&records);
    assert!(!seen.is_empty(), "{run}: queues read");
    for (ring, read) in &seen {
        let logged = truth.packets.get(ring).map_or(&[][..], Vec::as_slice);
        assert_eq!(read.as_slice(), logged, "{run}: ring {ring:#x}: tracer's packets, then the double's");
    }
    let hiplog = unzstd(&format!("null-gpu-{card}-ollama-{run}.hiplog.zst"));
    let said = crate::hip_log::names_checked(&records, &hiplog, run);
    let mut v = tracer_json(&["report", "--json", trace.to_str().expect("UTF-8 path")]);
    let processes = v["processes"].as_array_mut().expect("processes");
    let i = processes.iter().position(|p| p["comm"] == "llama-bench").expect("the llama-bench process");
    let p = processes.swap_remove(i);
    reported_equals_logged(&p, &seen, &truth, run);
    assert_eq!(p["queues_unread"]["sdma"].as_u64(), Some(truth.sdma.len() as u64), "{run}: SDMA queues said");
    // HIP and ROCr from Ollama's bundle, as the runner's LD_LIBRARY_PATH gives them.
    let status = |lib: &str| {
        p["mapped"].as_array().expect("mapped").iter().find_map(|m| {
            let path = m["path"].as_str().unwrap_or("");
            (path.contains("/lib/ollama/rocm_v7_2/") && path.contains(lib)).then(|| m["status"].clone())
        })
    };
    for lib in ["libamdhip64.so.7", "libhsa-runtime64.so.1"] {
        assert_eq!(status(lib), Some(serde_json::json!("called")), "{run}: Ollama's bundled {lib}");
    }
    assert!(status("librocsolver.so.0").is_some(), "{run}: rocSOLVER mapped from the bundle");
    (p, said)
}

/// The shipped recordings of one card under Ollama's `ROCm` 7.2 layout, against the double's packet log and HIP's
/// own log, and the study's answers in their reports: `Q4_K_M`'s prompt of 290 tokens as MMQ kernels, every one at
/// ne11 290, and its generated tokens as MMVQ at ne11 1; F16's prompt handed to rocBLAS, whose Tensile kernels for
/// the card (`Cijk_...`, from the bundled librocblas) are dispatched (gfx1100's `Q4_K_M` prompt hands two products
/// to them too, gfx1201's none). In words.
fn card_checked(card: &str) -> String {
    let packets = unzstd(&format!("null-gpu-{card}-ollama.packets.zst"));
    let (q4, q4_names) = checked(card, "q4_k_m", &packets);
    let mmq = every_dispatch_at_ne11(&family(&q4, "MMQ"), 290, "q4_k_m");
    let mmvq = every_dispatch_at_ne11(&family(&q4, "MMVQ"), 1, "q4_k_m");
    assert!(mmq > 0 && mmvq > 0, "{card} q4_k_m: {mmq} MMQ, {mmvq} MMVQ");
    let q4_gemms = tensile_from_the_bundle(&q4, card);
    let (f16, f16_names) = checked(card, "f16", &packets);
    let f16_gemms = tensile_from_the_bundle(&f16, card);
    assert!(f16_gemms > 0, "{card} f16: rocBLAS's Tensile GEMMs for the prompt");
    format!(
        "{card}: {q4_names}; {f16_names}; q4_k_m: {mmq} MMQ dispatches, each at ne11 290, {mmvq} MMVQ, each at ne11 1, \
         {q4_gemms} Tensile GEMMs; f16: {f16_gemms} Tensile GEMMs"
    )
}

/// The report's rocBLAS GEMMs: each a Tensile kernel (`Cijk_...`) whose code is the bundled librocblas's; their
/// dispatches.
fn tensile_from_the_bundle(p: &serde_json::Value, card: &str) -> u64 {
    family(p, "BLAS-GEMM")
        .iter()
        .map(|row| {
            assert!(row["name"].as_str().is_some_and(|n| n.starts_with("Cijk_")), "{row}");
            assert_eq!(row["class"]["library"], "Tensile", "{row}");
            let file = row["code_file"].as_str().unwrap_or("");
            assert!(
                file.ends_with("/lib/ollama/rocm_v7_2/librocblas.so.5"),
                "{card}: Tensile code of the bundle: {row}"
            );
            row["dispatches"].as_u64().unwrap_or(0)
        })
        .sum()
}

/// The study's card, an RX 9070 XT (gfx1201).
#[test]
fn the_rx_9070_xt_under_ollama_s_rocm_7_2_reads_as_the_double_consumed_and_hip_named() {
    println!("{}", card_checked("gfx1201"));
}

/// The same tree on the double's RX 7900 XTX (gfx1100), recorded the same way (`CARD=gfx1100`): the side by side of
/// docs/figures.md.
#[test]
fn the_same_tree_on_an_rx_7900_xtx_reads_as_the_double_consumed_and_hip_named() {
    println!("{}", card_checked("gfx1100"));
}
