//! `cargo xtask demo`: what the demo needs and nothing of the tests' (no roots, no llama.cpp build, no guest
//! kernel, no Python packages): the eBPF toolchain, Debian 12's HIP runtime and hipcc, tracer, and the one
//! fixture its part 1 records; parts 2 to 4 report recordings shipped in `fixtures/traces/`. `cargo xtask
//! setup`, `build` and `test` make the rest.

use std::{process::Command, time::Instant};

use anyhow::Result;

use crate::{
    bpf_linker, cargo_build_tracer, debian_packages, fixtures, nightly_rust_src, root, run, step, tracefs, tracer_bin,
};

/// The Debian packages the demo needs, each in `cargo xtask setup`'s list too: Debian 12's HIP runtime (with its
/// HSA runtime) that part 1's runner launches through, and hipcc with its headers, which build that runner; the
/// C toolchain tracer's build links with (and compiles zstd and `SQLite` with).
pub(crate) const DEMO_PACKAGES: &[&str] = &["libamdhip64-5", "libamdhip64-dev", "hipcc", "build-essential"];

/// The HIP fixture part 1 records (`fixtures/hip/mini_runner.hip`).
const DEMO_RUNNER: &str = "mini_runner";

/// Sets up what the demo needs, builds tracer and its runner, and shows the three parts; each phase's time said.
pub(crate) fn demo() -> Result<()> {
    let started = Instant::now();
    demo_setup()?;
    let set_up = started.elapsed();
    demo_build()?;
    let built = started.elapsed();
    parts()?;
    let done = started.elapsed();
    step(&format!(
        "demo done in {:.0} s: set-up {:.0} s, build {:.0} s, the three parts {:.0} s",
        done.as_secs_f64(),
        set_up.as_secs_f64(),
        built.saturating_sub(set_up).as_secs_f64(),
        done.saturating_sub(built).as_secs_f64()
    ));
    Ok(())
}

/// [`DEMO_PACKAGES`] (first: bpf-linker's build links with their C toolchain), the eBPF build's toolchain
/// (nightly `rust-src`, bpf-linker), tracefs: each step checks first, as `cargo xtask setup`'s do.
fn demo_setup() -> Result<()> {
    debian_packages(DEMO_PACKAGES)?;
    nightly_rust_src()?;
    bpf_linker()?;
    tracefs()
}

/// tracer (release, with its eBPF programs) and the runner part 1 records, no other fixture.
fn demo_build() -> Result<()> {
    cargo_build_tracer()?;
    fixtures::build_hip_fixture(DEMO_RUNNER)
}

/// The GPU recording the demo reports: made on an NVIDIA H100 by `bench/gpu/ggml/ledger.sh`.
const DEMO_GPU_TRACE: &str = "fixtures/traces/h100-llama-bench-q4_k_m-p513.jsonl.zst";

/// The AMD recording the demo reports: the study's card (issue 80), made in the qemu guest of the null GPU
/// presenting an RX 9070 XT by `fixtures/kmod/ollama_gfx1201_record.sh`, from llama.cpp built as Ollama 0.30+ ships
/// it for AMD (`cargo xtask ollama-rocm72`).
const DEMO_AMD_TRACE: &str = "fixtures/traces/null-gpu-gfx1201-ollama-q4_k_m.jsonl.zst";

/// The same tree served as `ollama serve` runs it, recorded with `--ollama` from before the server's start
/// (`MODE=serve` of the same script).
const DEMO_OLLAMA_TRACE: &str = "fixtures/traces/null-gpu-gfx1201-ollama-serve-start.jsonl.zst";

/// Four parts: a recording made here (the eBPF side works on this machine: a GPU-less run of the demo
/// workload, every launch failing), then the reports of three recordings shipped in the repository: a real GPU's
/// (NVIDIA), and Ollama's AMD stack on the null GPU as an RX 9070 XT, benchmarked and served.
fn parts() -> Result<()> {
    let trace = root().join("target/demo.trace.jsonl");
    let runner = fixtures::fixtures_dir().join(DEMO_RUNNER);
    step(
        "part 1 of 4: a recording made on this machine (no GPU here: the runtime is real, every launch fails; \
         --all-calls reads each launch's result, which the default, one trap a launch, leaves unread)",
    );
    step(&format!("tracer record --all-calls -o {} -- {} demo", trace.display(), runner.display()));
    run(Command::new(tracer_bin())
        .arg("record")
        .arg("--all-calls")
        .arg("--force")
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg(&runner)
        .arg("demo"))?;
    step(&format!("tracer report {}", trace.display()));
    run(Command::new(tracer_bin()).arg("report").arg(&trace))?;
    step(
        "part 2 of 4: a real GPU recording shipped with tracer, made on an NVIDIA H100 (driver 580.159.04) by \
         bench/gpu/ggml/ledger.sh: llama.cpp's llama-bench (CUDA backend, a random-weight Q4_K_M model) with a \
         513-token prompt (two passes at n_ubatch 512) and 4 generated tokens, traced from its start; its 796 \
         kernel executions equal CUPTI's there, kernel by kernel",
    );
    step(&format!("tracer report {DEMO_GPU_TRACE}"));
    run(Command::new(tracer_bin()).arg("report").arg(root().join(DEMO_GPU_TRACE)))?;
    step(
        "part 3 of 4: AMD's dispatch path on the study's card: llama.cpp as Ollama 0.30+ ships it for AMD (its HIP \
         backend built for gfx1100 and gfx1201 against Debian experimental's unmodified ROCm 7.2.4, HIP graphs on, \
         the runtime bundled in lib/ollama/rocm_v7_2), its llama-bench (a random-weight Q4_K_M model, -p 290 -n 8) \
         on the null GPU: a test double of the amdgpu kernel driver in a qemu guest that presents an RX 9070 XT \
         (gfx1201) and consumes every AQL and SDMA packet without computing. It shows the queues, packets, kernels, \
         MMQ/MMVQ column counts and steps exactly as the runtime made them, each dispatch read at its doorbell with \
         one trap; it cannot show GPU time, and no result is computed",
    );
    step(&format!("tracer report {DEMO_AMD_TRACE}"));
    run(Command::new(tracer_bin()).arg("report").arg(root().join(DEMO_AMD_TRACE)))?;
    step(
        "part 4 of 4: the same tree served as Ollama 0.30+ serves it, on the same null GPU: an Ollama-like server (a \
         test double of Ollama's Go server that only starts its children) starts the discovery child \
         (llama-server --list-devices) and the runner (llama-server --model BLOB --parallel 2 ...), recorded with \
         --ollama from before the server's start while two requests are answered at once and then one: the runner \
         labelled with its model's name:tag, prompt and decode phases with the server's own token counts. The \
         null GPU computes nothing, so the tokens are the model's control flow, not its answers",
    );
    step(&format!("tracer report {DEMO_OLLAMA_TRACE}"));
    run(Command::new(tracer_bin()).arg("report").arg(root().join(DEMO_OLLAMA_TRACE)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_demos_packages_are_setups_too() {
        let missing: Vec<&str> =
            super::DEMO_PACKAGES.iter().copied().filter(|p| !crate::PACKAGES.contains(p)).collect();
        assert!(missing.is_empty(), "in the demo's list, not in setup's: {missing:?}");
    }
}
