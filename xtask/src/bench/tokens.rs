//! Rows of a decode token: with graphs (9), without (16), Vulkan (17); and the library-stack rows (10, 11).

use super::{
    Dir, RATIO_GOAL, Result, Rows, fixtures_dir, fs, json, repeats, stack, step, three_modes, traps_per_call, verdict,
};

/// A decode-token row: the stand-in's token loop of one shape, run without tracer, under empty programs and
/// under tracer; the traps a token costs, from the probes the last recording lists (one for an entry probe,
/// two for entry+return, none for a function left unprobed).
struct TokenRow {
    /// The loop's mode and its tokens per run (quick, full).
    mode: &'static str,
    tokens: (&'static str, &'static str),
    /// Per token, how many calls of each function.
    calls: &'static [(u64, &'static str)],
    /// The results key and the table's label.
    key: &'static str,
    label: &'static str,
    /// Launches a token makes, where the row's goal is at most launches + 2 traps.
    launches: Option<u64>,
}

fn token_row(d: &Dir, q: bool, rows: &mut Rows, row: &TokenRow) -> Result<()> {
    let trace = d.trace();
    let reps = repeats(q);
    let tokens = if q { row.tokens.0 } else { row.tokens.1 };
    let modes = three_modes(d, &trace, reps, (&d.driver, &d.standin), &[row.mode, tokens], "ns_per_token")?;
    let mut traps = 0;
    for &(n, api) in row.calls {
        traps += n * traps_per_call(&trace, api)?;
    }
    let mut result = modes.json(json!({"tokens_per_run": tokens, "repeats": reps, "traps_per_token": traps}));
    let (launches, target, traps_met) = match row.launches {
        Some(n) => {
            result["launches_per_token"] = json!(n);
            result["target_traps"] = json!(n + 2);
            (format!(" ({n} launches)"), format!("ratio <= {RATIO_GOAL}, traps <= {}", n + 2), traps <= n + 2)
        }
        None => (String::new(), format!("ratio <= {RATIO_GOAL}"), true),
    };
    rows.results.insert(row.key.into(), result);
    rows.table.push((
        row.label.into(),
        format!("{}; {traps} traps per token{launches}", modes.measured()),
        target,
        verdict(modes.ratio() <= RATIO_GOAL && traps_met),
    ));
    Ok(())
}

/// Row 9: the decode loop's call pattern (ggml with graphs): per token one graph launch and 14 syncs.
pub(super) fn row_9(d: &Dir, q: bool, rows: &mut Rows) -> Result<()> {
    step("9/18 ggml-shaped decode token (1 hipGraphLaunch + 14 hipStreamSynchronize): none, empty programs, tracer");
    token_row(
        d,
        q,
        rows,
        &TokenRow {
            mode: "tokens",
            tokens: ("5000", "20000"),
            calls: &[(14, "hipStreamSynchronize"), (1, "hipGraphLaunch")],
            key: "ggml_token",
            label: "9 ggml-shaped token, 15 calls",
            launches: None,
        },
    )
}

/// Row 16: a decode token where every kernel is a launch (llama.cpp's CUDA decode with graphs off, the
/// stand-in for HIP builds without graphs and batched decode): 82 launches, 15 syncs, 7 async copies
/// toward the device and the logits copy back, each token. Traps per token from the probes the recording
/// lists, against the goal of launches + 2.
pub(super) fn row_16(d: &Dir, q: bool, rows: &mut Rows) -> Result<()> {
    step("16/18 decode token without graphs (82 hipLaunchKernel, 15 syncs, 8 hipMemcpyAsync): none, empty, tracer");
    token_row(
        d,
        q,
        rows,
        &TokenRow {
            mode: "eager",
            tokens: ("500", "2000"),
            calls: &[(82, "hipLaunchKernel"), (15, "hipStreamSynchronize"), (8, "hipMemcpyAsync")],
            key: "eager_token",
            label: "16 token without graphs, 105 calls",
            launches: Some(82),
        },
    )
}

/// Row 17: a Vulkan dispatch as ggml records it, a pipeline bound then a dispatch (two traps), into one
/// command buffer never submitted, on Debian's real loader and Mesa's lavapipe (`vk_runner loop`): none,
/// empty programs, tracer. The loader's trampolines begin `test; je`, probed on the jump (one exception each).
pub(super) fn row_17(d: &Dir, q: bool, rows: &mut Rows) -> Result<()> {
    let trace = d.trace();
    step("17/18 a Vulkan bind and dispatch pair (the real loader, lavapipe): none, empty programs, tracer");
    let (n, reps) = (if q { "20000" } else { "100000" }, repeats(q));
    let loader = fs::canonicalize("/usr/lib/x86_64-linux-gnu/libvulkan.so.1")?;
    let runner = fixtures_dir().join("vk_runner");
    let modes = three_modes(d, &trace, reps, (&runner, &loader), &["loop", n], "ns_per_pair")?;
    let traps = traps_per_call(&trace, "vkCmdBindPipeline")? + traps_per_call(&trace, "vkCmdDispatch")?;
    let extra = json!({"pairs_per_run": n, "repeats": reps, "traps_per_pair": traps});
    rows.results.insert("vulkan_dispatch".into(), modes.json(extra));
    rows.table.push((
        "17 Vulkan bind + dispatch".into(),
        format!("{}; {traps} traps a pair", modes.measured()),
        format!("ratio <= {RATIO_GOAL}"),
        verdict(modes.ratio() <= RATIO_GOAL),
    ));
    Ok(())
}

/// Rows 10 and 11: a real `ROCm` library stack, thousands of registrations at load, gigabytes of GPU code.
pub(super) fn stack_rows(d: &Dir, q: bool, rows: &mut Rows) -> Result<()> {
    step("10/18 a real ROCm library stack: sparse_rand on hipSPARSE, rocSPARSE (1.3 GB) and rocRAND");
    let (r, v) = stack::rocsparse(&d.work, q)?;
    rows.results.insert("rocsparse_stack".into(), v);
    rows.table.push(r);
    step("11/18 the real libggml-hip.so mapped, its registrations replayed on the real HIP runtime");
    let (r, v) = stack::ggml_hip(&d.work, q)?;
    rows.results.insert("ggml_hip_mapped".into(), v);
    rows.table.push(r);
    Ok(())
}
