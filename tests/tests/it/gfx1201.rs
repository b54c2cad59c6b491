//! The study's card under Ollama's own layout (issue 80), from shipped recordings: the pinned llama.cpp built against
//! Debian experimental's `ROCm` 7.2.4 for gfx1100 and gfx1201 as Ollama 0.30+ builds it (`cargo xtask ollama-rocm72`:
//! HIP graphs on, its HIP backend and the `ROCm` it bundles in `lib/ollama/rocm_v7_2`), its llama-bench on the null
//! GPU presenting an RX 9070 XT, a tiny random llama at `Q4_K_M` and F16, `-p 290 -n 8`, recorded from the start
//! by `fixtures/kmod/ollama_gfx1201_record.sh`, which ships beside each recording the oracles of the same boot: the
//! double's packet and ioctl logs (every packet it consumed, every driver ioctl it served) and HIP's own log of the
//! packets it wrote (`AMD_LOG_LEVEL=5`). The build takes hours on 2 cores, so the recordings are shipped and checked
//! here, offline: what tracer read at the doorbells equals the double's log packet for packet, every driver ioctl
//! is recorded as the double served it, every dispatch is named as HIP names it, and the report answers the
//! study's questions (ne11 of every MMQ and MMVQ dispatch, rocBLAS's Tensile kernels, the libraries Ollama bundles,
//! mapped or called). The same tree served as `ollama serve` runs it (`MODE=serve` of the script: the Ollama-like
//! server starts the discovery child and the runner) is recorded from the start and attached late, each recording
//! shipped with the server's answers and both oracles cut where the late one began.

use std::{io::Read as _, path::PathBuf};

use integration_tests::*;

use crate::null_gpu::{consumed, dispatched_names, every_dispatch_at_ne11, read_by_tracer, reported_equals_logged};

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

/// The packets tracer read at the doorbells against the double's log `packets` of process `pid`: ring by ring the
/// same packets in the same order. What the double consumed and what tracer read, for further checks.
fn read_as_consumed(
    records: &[Line],
    packets: &str,
    pid: u32,
    what: &str,
) -> (crate::null_gpu::Consumed, std::collections::BTreeMap<u64, Vec<crate::null_gpu::Packet>>) {
    let truth = consumed(packets, pid);
    let seen = read_by_tracer(records);
    assert!(!seen.is_empty(), "{what}: queues read");
    for (ring, read) in &seen {
        let logged = truth.packets.get(ring).map_or(&[][..], Vec::as_slice);
        assert_eq!(read.as_slice(), logged, "{what}: ring {ring:#x}: tracer's packets, then the double's");
    }
    (truth, seen)
}

/// Every driver ioctl of the recording's processes as the double's log `ioctls` says it served them.
fn ioctls_as_served(records: &[Line], ioctls: &str, what: &str) {
    let pids = crate::null_gpu::pids(records);
    let served = crate::null_gpu::served(ioctls, &pids);
    assert!(!served.is_empty(), "{what}: the double served ioctls of {pids:?}");
    assert_eq!(crate::null_gpu::recorded(records), served, "{what}: ioctls: tracer's, the double's");
}

/// One recording (`run`: `q4_k_m` or `f16`) against the boot's packet and ioctl logs: the packets tracer read equal
/// the double's, queue by queue; the report's dispatches per kernel object equal its log's; every driver ioctl of
/// the run's processes recorded as the double served it; every dispatch named as HIP's log names it; the runtime
/// mapped from Ollama's tree. The report's JSON for the run's other checks, and the names' comparison in words.
fn checked(card: &str, run: &str, packets: &str, ioctls: &str) -> (serde_json::Value, String) {
    let trace = shipped(&format!("null-gpu-{card}-ollama-{run}.jsonl.zst"));
    let records = read_trace(&trace);
    let f = footer(&records);
    assert_eq!(f.total_drops(), 0, "{run}: nothing dropped");
    let pid = exec_of(&records, "llama-bench").expect("llama-bench ran").pid;
    let (truth, seen) = read_as_consumed(&records, packets, pid, run);
    ioctls_as_served(&records, ioctls, run);
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
    let ioctls = unzstd(&format!("null-gpu-{card}-ollama.ioctls.zst"));
    let (q4, q4_names) = checked(card, "q4_k_m", &packets, &ioctls);
    let mmq = every_dispatch_at_ne11(&family(&q4, "MMQ"), 290, "q4_k_m");
    let mmvq = every_dispatch_at_ne11(&family(&q4, "MMVQ"), 1, "q4_k_m");
    assert!(mmq > 0 && mmvq > 0, "{card} q4_k_m: {mmq} MMQ, {mmvq} MMVQ");
    let q4_gemms = tensile_from_the_bundle(&q4, card);
    let (f16, f16_names) = checked(card, "f16", &packets, &ioctls);
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

/// The prompt tokens of the runner's start-up decode (llama.cpp's warm-up), which no request asked for.
const STARTUP_PROMPT: u64 = 4;

/// A shipped server recording's answers: each request's `(prompt_n, predicted_n)` from the server's own timings.
fn answered(name: &str) -> Vec<(u64, u64)> {
    unzstd(name)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("the server's answer");
            let t = &v["timings"];
            (t["prompt_n"].as_u64().expect("prompt_n"), t["predicted_n"].as_u64().expect("predicted_n"))
        })
        .collect()
}

/// The process records of Ollama's tree: the server, its discovery child and its runner, checked for what they are
/// to Ollama; the runner's PID.
fn ollama_tree(records: &[Line], run: &str) -> u32 {
    let procs: Vec<&trace::Process> =
        records.iter().filter_map(|r| if let Line::Process(p) = r { Some(p) } else { None }).collect();
    let role = |p: &trace::Process| p.role.map(trace::Role::as_str);
    let runner = procs.iter().find(|p| role(p) == Some("runner"));
    assert!(runner.is_some(), "{run}: a runner {procs:#?}");
    let runner = runner.expect("a runner");
    assert_eq!(runner.model_name.as_deref(), Some("tiny:q4_k_m"), "{run}: the runner's model by its manifest");
    assert!(runner.argv.iter().any(|a| a == "--parallel"), "{run}: Ollama's argv {:?}", runner.argv);
    let server = procs.iter().find(|p| role(p) == Some("ollama-server"));
    assert!(server.is_some_and(|s| s.pid == runner.ppid), "{run}: the runner's server {procs:#?}");
    if run == "start" {
        let discovery = procs.iter().find(|p| p.argv.iter().any(|a| a == "--list-devices"));
        assert!(discovery.is_some(), "{run}: the discovery child {procs:#?}");
        let discovery = discovery.expect("the discovery child");
        assert_eq!(discovery.comm, "llama-server");
        assert_eq!(role(discovery), None, "{run}: the discovery child is not a runner");
        assert_eq!(discovery.ppid, runner.ppid, "{run}: both children of the server");
    }
    runner.pid
}

/// HIP's log lines of process `pid` only (the discovery child logs to the same standard error).
fn hip_lines_of(log: &str, pid: u32) -> String {
    let tag = format!("[pid:{pid} ");
    log.lines().filter(|l| l.contains(&tag)).flat_map(|l| [l, "\n"]).collect()
}

/// The kernel packets the double consumed for `pid`, per kernel object (a cut of its log: no queue created in it).
fn consumed_per_object(log: &str, pid: u32) -> std::collections::BTreeMap<u64, u64> {
    let mut m = std::collections::BTreeMap::new();
    for line in log.lines() {
        let t: Vec<&str> = line.split_whitespace().collect();
        let field = |key: &str| t.iter().position(|w| *w == key).and_then(|i| t.get(i + 1)).copied();
        if t.first().map(|p| crate::null_gpu::number(p)) == Some(u64::from(pid))
            && t.get(1) == Some(&"queue")
            && field("type") == Some("2")
        {
            *m.entry(crate::null_gpu::number(field("kernel_object").expect("a kernel object"))).or_default() += 1;
        }
    }
    m
}

/// `tracer record --ollama` from before `ollama serve` (the Ollama-like server of the recording script) started the
/// tree's `llama-server` on `card`: two requests answered at once, then one. The runner is labelled with its model's
/// name:tag and the discovery child is no runner; phases and tokens equal the server's own timings (with its
/// start-up decode), both slots share steps; every packet tracer read equals the double's, every driver ioctl of the
/// tree's processes equals the double's log, every dispatch is named as HIP's log names it. In words.
fn served_from_its_start(card: &str) -> String {
    let run = |part: &str| format!("null-gpu-{card}-ollama-serve-start.{part}.zst");
    let path = shipped(&run("jsonl"));
    let records = read_trace(&path);
    let runner = ollama_tree(&records, "start");
    let timings = answered(&run("answers"));
    assert_eq!(timings.len(), 3, "{card}: {timings:?}");
    crate::debian_llama::check_server(&records, &path, &timings, STARTUP_PROMPT);
    read_as_consumed(&records, &unzstd(&run("packets")), runner, card);
    ioctls_as_served(&records, &unzstd(&run("ioctls")), card);
    let hiplog = hip_lines_of(&unzstd(&run("hiplog")), runner);
    format!("{card}: {timings:?}; {}", crate::hip_log::names_checked(&records, &hiplog, "start"))
}

/// The same server attached late (`--ollama-pid SERVER`), its runner serving with its kernels loaded, while one more
/// request is answered: the runner found through its server and labelled, its tokens the server's, and every
/// dispatch after the attach named, as HIP's log names it, from the code objects `ROCr` loaded before it; per kernel
/// object as many dispatches as the double consumed after the attach. In words.
fn served_attached_late(card: &str) -> String {
    let run = |part: &str| format!("null-gpu-{card}-ollama-serve-late.{part}.zst");
    let path = shipped(&run("jsonl"));
    let records = read_trace(&path);
    assert_eq!(footer(&records).total_drops(), 0, "{card}: drops");
    let runner = ollama_tree(&records, "late");
    let timings = answered(&run("answers"));
    let v = tracer_json(&["report", "--json", path.to_str().expect("UTF-8 path")]);
    let p = crate::debian_llama::server_phases(&v);
    let sum =
        |key: &str| p["phases"].as_array().expect("phases").iter().map(|ph| ph[key].as_u64().unwrap_or(0)).sum::<u64>();
    let want = (timings.iter().map(|t| t.0).sum::<u64>(), timings.iter().map(|t| t.1 - 1).sum::<u64>(), 0);
    assert_eq!((sum("prompt_tokens"), sum("decode_tokens"), sum("unread_tokens")), want, "{card}: {timings:?}: {p}");
    let names = dispatched_names(&records);
    assert!(!names.is_empty() && names.iter().all(Option::is_some), "{card}: every dispatch named: {names:?}");
    let mut read = std::collections::BTreeMap::new();
    for r in &records {
        if let Line::Dispatch(d) = r
            && d.packet.name() == "kernel-dispatch"
        {
            *read.entry(d.kernel_object).or_insert(0u64) += 1;
        }
    }
    let packets = unzstd(&run("packets"));
    assert_eq!(
        read,
        consumed_per_object(&packets, runner),
        "{card}: kernel packets per object: tracer's, the double's"
    );
    let hiplog = hip_lines_of(&unzstd(&run("hiplog")), runner);
    format!("{card}: {timings:?}; {}", crate::hip_log::names_checked(&records, &hiplog, "late"))
}

/// The study's card, an RX 9070 XT, serving from its start.
#[test]
fn ollama_serving_on_the_rx_9070_xt_from_its_start_has_the_server_s_tokens_and_hip_s_names() {
    println!("{}", served_from_its_start("gfx1201"));
}

/// The study's card, an RX 9070 XT, its server attached late.
#[test]
fn ollama_serving_on_the_rx_9070_xt_attached_late_names_every_dispatch_after_the_attach() {
    println!("{}", served_attached_late("gfx1201"));
}

/// The same tree served on the double's RX 7900 XTX (`CARD=gfx1100 MODE=serve`), from its start.
#[test]
fn ollama_serving_on_an_rx_7900_xtx_from_its_start_has_the_server_s_tokens_and_hip_s_names() {
    println!("{}", served_from_its_start("gfx1100"));
}

/// The same tree served on the double's RX 7900 XTX, its server attached late.
#[test]
fn ollama_serving_on_an_rx_7900_xtx_attached_late_names_every_dispatch_after_the_attach() {
    println!("{}", served_attached_late("gfx1100"));
}
