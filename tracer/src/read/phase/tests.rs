//! Steps, phases and passes, from calls and kernels in order.

use std::collections::BTreeSet;

use super::*;
use crate::trace::classify::classify;

const MMVQ1: &str = "_Z13mul_mat_vec_qIL9ggml_type12ELi1ELb0EEvPKvS2_PKiPfjjj";
const MMVQ4: &str = "_Z13mul_mat_vec_qIL9ggml_type12ELi4ELb0EEvPKvS2_PKiPfjjj";
const MMQ16: &str = "_Z9mul_mat_qIL9ggml_type12ELi16ELb0EEvPKcPKiS4_S4_PfS5_iii";

#[test]
fn steps_as_time_spans() {
    let mut p = Phases::default();
    p.launch(classify(MMQ16), 100);
    p.launch(classify("_Z9rope_normILb1EEvPKfPfiiiii"), 110);
    p.call(ApiFunc::HipMemcpy.op(), Some(MemcpyKind::DeviceToHost), 120, false);
    p.call(ApiFunc::HipStreamSynchronize.op(), None, 130, false);
    p.launch(classify(MMVQ1), 200);
    p.call(ApiFunc::HipGraphLaunch.op(), None, 250, false);
    let spans = p.spans();
    assert_eq!(
        spans,
        [
            StepSpan { phase: Phase::Prefill, start: 100, end: 130, kernels: 2, composition: None },
            StepSpan { phase: Phase::Decode, start: 200, end: 250, kernels: 1, composition: None },
        ]
    );
}

#[test]
fn lean_steps_end_at_the_copy_toward_the_host() {
    // No synchronization recorded: the logits copy ends the step, and a copy toward the device does not.
    let mut p = Phases::default();
    p.launch(classify(MMQ16), 100);
    p.call(ApiFunc::CuMemcpyHtoDAsync.op(), Some(MemcpyKind::HostToDevice), 105, true);
    p.call(ApiFunc::CuMemcpyDtoHAsync.op(), Some(MemcpyKind::DeviceToHost), 120, true);
    p.call(ApiFunc::CuGraphLaunch.op(), None, 200, true);
    p.launch(classify(MMVQ1), 210);
    p.call(ApiFunc::CuMemcpyDtoHAsync.op(), Some(MemcpyKind::DeviceToHost), 220, true);
    // A second copy with no kernel since closes nothing.
    p.call(ApiFunc::CuMemcpyDtoHAsync.op(), Some(MemcpyKind::DeviceToHost), 230, true);
    assert_eq!(
        p.spans(),
        [
            StepSpan { phase: Phase::Prefill, start: 100, end: 120, kernels: 1, composition: None },
            StepSpan { phase: Phase::Decode, start: 210, end: 220, kernels: 1, composition: None },
        ]
    );
    // The same calls in a full recording: the copy alone ends nothing.
    let mut p = Phases::default();
    p.launch(classify(MMQ16), 100);
    p.call(ApiFunc::CuMemcpyDtoHAsync.op(), Some(MemcpyKind::DeviceToHost), 120, false);
    p.launch(classify(MMVQ1), 210);
    assert_eq!(p.spans().len(), 1);
}

#[test]
fn cuda_steps_and_no_phases_without_ggml() {
    // ggml-cuda: the same cuts through the driver API's copy and synchronize.
    let mut p = Phases::default();
    for _ in 0..2 {
        p.launch(classify(MMVQ1), 0);
        p.call(ApiFunc::CuMemcpyDtoHAsync.op(), Some(MemcpyKind::DeviceToHost), 0, false);
        p.call(ApiFunc::CuStreamSynchronize.op(), None, 0, false);
    }
    let phases = p.finish();
    assert_eq!((phases.len(), phases[0].phase.as_str(), phases[0].steps), (1, "decode", 2));
    // A PyTorch process (cuBLAS GEMM and element-wise kernels): no prefill/decode to speak of.
    let mut p = Phases::default();
    p.launch(classify("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x64x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas"), 0);
    p.launch(
        classify("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"),
        0,
    );
    p.call(ApiFunc::CuGraphLaunch.op(), None, 0, false);
    assert!(p.finish().is_empty());
}

#[test]
fn steps_end_at_a_sync_after_the_logits_copy() {
    let mut p = Phases::default();
    p.launch(classify(MMQ16), 0);
    p.call(ApiFunc::HipStreamSynchronize.op(), None, 0, false); // no copy yet: same step
    p.launch(classify("_Z9rope_normILb1EEvPKfPfiiiii"), 0);
    p.call(ApiFunc::HipMemcpy.op(), Some(MemcpyKind::DeviceToHost), 0, false);
    p.call(ApiFunc::HipStreamSynchronize.op(), None, 0, false);
    for _ in 0..3 {
        p.launch(classify(MMVQ1), 0);
        p.call(ApiFunc::HipMemcpyAsync.op(), Some(MemcpyKind::DeviceToHost), 0, false);
        p.call(ApiFunc::HipDeviceSynchronize.op(), None, 0, false);
    }
    p.launch(classify(MMVQ4), 0); // a 4-token prompt goes through MMVQ too
    p.launch(classify(MMVQ1), 0); // its output projection: the last token only
    let phases = p.finish();
    let by: BTreeMap<&str, &PhaseReport> = phases.iter().map(|p| (p.phase.as_str(), p)).collect();
    assert_eq!((by["prefill"].steps, by["decode"].steps), (2, 3));
    assert_eq!(by["prefill"].kernels["MMQ Q4_K"], 1);
    assert_eq!(by["prefill"].kernels["RoPE"], 1);
    assert_eq!(by["decode"].kernels["MMVQ Q4_K"], 3);
    assert_eq!(by["decode"].batch_widths, BTreeSet::from(["1".to_owned()]));
    // Each step's widest: the 4-token prompt is width 4, not 1 as well.
    assert_eq!(by["prefill"].batch_widths, BTreeSet::from(["4".to_owned(), "<=16".to_owned()]));
}

/// A 513-token prompt with `n_ubatch` 512: one step (one logits copy), two passes, each started by
/// its inputs' copy toward the device: 512 columns through MMQ, then the last token through MMVQ.
#[test]
fn a_step_lists_its_micro_batches_in_order() {
    const MMQ128: &str = "_Z9mul_mat_qIL9ggml_type12ELi128ELb0EEvPKcPKiS4_S4_PfS5_iii";
    let mut mmq = classify(MMQ128);
    mmq.batch = Some(Batch::Exact(512)); // its ncols_y parameter, as the feeder settles it
    let up = |p: &mut Phases| p.call(ApiFunc::HipMemcpyAsync.op(), Some(MemcpyKind::HostToDevice), 0, false);
    let end = |p: &mut Phases| {
        p.call(ApiFunc::HipMemcpyAsync.op(), Some(MemcpyKind::DeviceToHost), 0, false);
        p.call(ApiFunc::HipStreamSynchronize.op(), None, 0, false);
    };
    let mut p = Phases::default();
    up(&mut p);
    p.launch(mmq.clone(), 0);
    p.launch(mmq, 0);
    up(&mut p); // two copies between passes start one pass
    up(&mut p);
    p.launch(classify(MMVQ1), 0);
    p.launch(classify("_Z9rope_normILb1EEvPKfPfiiiii"), 0);
    end(&mut p);
    // A one-pass prompt: a copy up before anything ran, and after a kernel that is not a matrix
    // product, starts nothing.
    up(&mut p);
    p.launch(classify("_Z9rope_normILb1EEvPKfPfiiiii"), 0);
    up(&mut p);
    p.launch(classify(MMVQ4), 0);
    p.launch(classify(MMVQ1), 0);
    end(&mut p);
    let phases = p.finish();
    assert_eq!(phases.len(), 1);
    let prefill = &phases[0];
    assert_eq!(prefill.steps, 2);
    assert_eq!(prefill.batch_widths, BTreeSet::from(["513 = 512 + 1".to_owned(), "4".to_owned()]));
    assert_eq!(prefill.micro_batched.len(), 1, "{:?}", prefill.micro_batched);
    let seq = &prefill.micro_batched[0];
    assert_eq!((seq.label.as_str(), seq.steps), ("513 = 512 + 1", 1));
    let passes: Vec<(&str, Vec<(&str, u64)>)> = seq
        .passes
        .iter()
        .map(|p| (p.width.as_str(), p.kernels.iter().map(|(k, n)| (k.as_str(), *n)).collect()))
        .collect();
    assert_eq!(passes, [("512", vec![("MMQ Q4_K", 2)]), ("1", vec![("MMVQ Q4_K", 1), ("RoPE", 1)])]);
    // Widths not all exact: no sum.
    assert_eq!(passes_label(&[Some(Batch::TileUpTo(16)), Some(Batch::Exact(1))]), "<=16 + 1");
}

#[test]
fn passes_beyond_the_cap_are_counted_in_the_last() {
    let mut p = Phases::default();
    for _ in 0..MAX_PASSES + 3 {
        p.call(ApiFunc::HipMemcpyAsync.op(), Some(MemcpyKind::HostToDevice), 0, false);
        p.launch(classify(MMVQ4), 0);
    }
    p.call(ApiFunc::HipMemcpyAsync.op(), Some(MemcpyKind::DeviceToHost), 0, false);
    p.call(ApiFunc::HipStreamSynchronize.op(), None, 0, false);
    let phases = p.finish();
    assert_eq!(phases[0].passes_merged, 3);
    let passes = &phases[0].micro_batched[0].passes;
    assert_eq!(passes.len(), MAX_PASSES);
    assert_eq!(passes.last().unwrap().kernels["MMVQ Q4_K"], 4);
}

/// ggml-cuda's token loop with CUDA graphs, as the real llama.cpp does it: the graph is captured (its
/// launches do not run then), instantiated and replayed in the same step, then replayed alone in each
/// later step; the logits copy and its sync end every step.
#[test]
fn graph_replays_are_part_of_their_step() {
    let mut p = Phases::default();
    let token = |p: &mut Phases| {
        p.replay(&classify(MMVQ1), 4, 0);
        p.replay(&classify("_Z9rope_normILb1EEvPKfPfiiiii"), 2, 0);
        p.call(ApiFunc::CuGraphLaunch.op(), None, 0, false);
        p.call(ApiFunc::CuMemcpyDtoHAsync.op(), Some(MemcpyKind::DeviceToHost), 0, false);
        p.call(ApiFunc::CuStreamSynchronize.op(), None, 0, false);
    };
    for _ in 0..5 {
        token(&mut p);
    }
    let phases = p.finish();
    assert_eq!(phases.len(), 1);
    assert_eq!((phases[0].phase, phases[0].steps), (Phase::Decode, 5));
    assert_eq!(phases[0].kernels["MMVQ Q4_K"], 20);
    assert_eq!(phases[0].kernels["RoPE"], 10);
}

/// Attached late to a steady CUDA graph loop: every replay runs an executable captured before tracer
/// started. The steps are still cut (logits copy, then its sync), labelled "kernels unknown".
#[test]
fn replays_of_unknown_graphs_still_make_steps() {
    let mut p = Phases::default();
    for t in 0..3 {
        p.unknown_replay(t * 100);
        p.call(ApiFunc::CuMemcpyDtoHAsync.op(), Some(MemcpyKind::DeviceToHost), t * 100 + 10, false);
        p.call(ApiFunc::CuStreamSynchronize.op(), None, t * 100 + 20, false);
    }
    let spans = p.spans();
    assert_eq!(spans.len(), 3);
    assert_eq!(spans[1], StepSpan { phase: Phase::Unknown, start: 100, end: 120, kernels: 0, composition: None });
    let mut p = Phases::default();
    p.unknown_replay(0);
    p.call(ApiFunc::CuMemcpyDtoHAsync.op(), Some(MemcpyKind::DeviceToHost), 1, false);
    p.call(ApiFunc::CuStreamSynchronize.op(), None, 2, false);
    let phases = p.finish();
    assert_eq!(phases.len(), 1);
    assert_eq!((phases[0].phase.as_str(), phases[0].steps, phases[0].unknown_replays), ("kernels unknown", 1, 1));
}

#[test]
fn dispatches_win_over_launches() {
    let mut p = Phases::default();
    p.replay(&classify(MMVQ1), 1, 0);
    for _ in 0..2 {
        p.dispatch(classify(MMVQ1), 0);
        p.call(ApiFunc::HipMemcpyAsync.op(), Some(MemcpyKind::DeviceToHost), 0, false);
        p.call(ApiFunc::HipStreamSynchronize.op(), None, 0, false);
    }
    let phases = p.finish();
    assert_eq!(phases.len(), 1);
    assert_eq!((phases[0].phase.as_str(), phases[0].steps, phases[0].kernels["MMVQ Q4_K"]), ("decode", 2, 2));
}

/// A batch of `runs` (sequence, first position, tokens, last token's output) at `ts`, carrying the library
/// calls of the step before.
fn step_batch(ts: u64, runs: &[(i32, i32, u32, bool)], previous: &[(u32, u64)]) -> crate::trace::event::StepBatch {
    crate::trace::event::StepBatch {
        ts,
        n_tokens: runs.iter().map(|r| r.2 as i32).sum(),
        runs: runs
            .iter()
            .map(|&(seq, pos, tokens, last_output)| crate::trace::event::SeqRun {
                seq,
                pos: Some(pos),
                tokens,
                outputs: u32::from(last_output),
                last_output,
                shared: 0,
            })
            .collect(),
        positions: true,
        seq_ids: true,
        previous_calls: previous.iter().copied().collect(),
        ..Default::default()
    }
}

/// The same step where ggml's scheduler call is seen: each call begins a pass, and a copy toward the
/// device (one of a pass's inputs, after a matrix kernel of the same pass here) cuts nothing. The default
/// recording sees no synchronization: the logits copy ends the step.
#[test]
fn passes_begin_at_the_schedulers_call_once_it_is_seen() {
    const MMQ128: &str = "_Z9mul_mat_qIL9ggml_type12ELi128ELb0EEvPKcPKiS4_S4_PfS5_iii";
    let mut mmq = classify(MMQ128);
    mmq.batch = Some(Batch::Exact(512));
    let pass = |p: &mut Phases| p.call(ApiFunc::GgmlSchedGraphCompute.op(), None, 0, true);
    let up = |p: &mut Phases| p.call(ApiFunc::HipMemcpyAsync.op(), Some(MemcpyKind::HostToDevice), 0, true);
    let mut p = Phases::default();
    pass(&mut p);
    p.launch(mmq.clone(), 0);
    up(&mut p); // after a matrix kernel: would begin a pass were the scheduler's calls not seen
    p.launch(mmq, 0);
    pass(&mut p);
    p.launch(classify(MMVQ1), 0);
    p.call(ApiFunc::HipMemcpyAsync.op(), Some(MemcpyKind::DeviceToHost), 0, true);
    // A decode step: one pass.
    pass(&mut p);
    p.launch(classify(MMVQ1), 0);
    p.call(ApiFunc::HipMemcpyAsync.op(), Some(MemcpyKind::DeviceToHost), 0, true);
    let phases = p.finish();
    let widths: Vec<(Phase, Vec<&str>)> =
        phases.iter().map(|ph| (ph.phase, ph.batch_widths.iter().map(String::as_str).collect())).collect();
    assert_eq!(widths, [(Phase::Prefill, vec!["513 = 512 + 1"]), (Phase::Decode, vec!["1"])]);
    let passes: Vec<(&str, Vec<(&str, u64)>)> = phases[0].micro_batched[0]
        .passes
        .iter()
        .map(|p| (p.width.as_str(), p.kernels.iter().map(|(k, n)| (k.as_str(), *n)).collect()))
        .collect();
    assert_eq!(passes, [("512", vec![("MMQ Q4_K", 2)]), ("1", vec![("MMVQ Q4_K", 1)])]);
}

/// Traps: one a call probed at entry only, two with its return; summed per phase.
#[test]
fn a_phase_counts_the_traps_its_calls_cost() {
    let mut p = Phases::default();
    p.api(ApiFunc::GgmlSchedGraphCompute, 1);
    p.launch(classify(MMVQ1), 10);
    p.api(ApiFunc::HipLaunchKernel, 1);
    p.api(ApiFunc::HipMemcpyAsync, 2);
    p.call(ApiFunc::HipMemcpyAsync.op(), Some(MemcpyKind::DeviceToHost), 20, true);
    let phases = p.finish();
    assert_eq!((phases[0].phase, phases[0].traps), (Phase::Decode, 4));
}

#[test]
fn batches_begin_steps_and_label_them_by_their_sequences() {
    let mut p = Phases::default();
    // Prefill of 11 tokens; its logits copy and sync end nothing once batches are seen.
    p.batch(&step_batch(100, &[(0, 0, 11, true)], &[]));
    p.launch(classify(MMQ16), 110);
    p.call(ApiFunc::HipMemcpyAsync.op(), Some(MemcpyKind::DeviceToHost), 120, false);
    p.call(ApiFunc::HipStreamSynchronize.op(), None, 130, false);
    p.launch(classify(MMVQ1), 140); // still the prefill step's (before the next llama_decode)
    // Slot 0 decodes; 3 library calls were made in the prefill step.
    p.batch(&step_batch(200, &[(0, 11, 1, true)], &[(1, 3)]));
    p.api(ApiFunc::HipLaunchKernel, 1);
    p.launch(classify(MMVQ1), 210);
    // Slot 0 decodes beside slot 1's prompt of 23: a width-2+ step that is not a prefill.
    p.batch(&step_batch(300, &[(0, 12, 1, true), (1, 0, 23, true)], &[(1, 2)]));
    p.launch(classify(MMQ16), 310);
    // Two sequences decode one token each: MMVQ over 2 columns, a decode step.
    p.batch(&step_batch(400, &[(0, 13, 1, true), (1, 23, 1, true)], &[]));
    p.launch(classify(MMVQ4), 410);
    p.library_calls(&std::iter::once((2, 5)).collect());
    let phases = p.finish();
    let get = |ph: Phase| phases.iter().find(|r| r.phase == ph).unwrap();
    let (prefill, decode, mixed) = (get(Phase::Prefill), get(Phase::Decode), get(Phase::Mixed));
    assert_eq!((prefill.steps, prefill.prompt_tokens, prefill.tokens), (1, 11, 11));
    assert_eq!(prefill.compositions.keys().collect::<Vec<_>>(), ["prefill: 1 prompt of 11"]);
    assert_eq!(prefill.library_calls, std::iter::once((1, 3)).collect());
    assert_eq!(prefill.kernels.values().sum::<u64>(), 2);
    assert_eq!((decode.steps, decode.decode_tokens, decode.tokens, decode.steps_from_batches), (2, 3, 3, 2));
    assert_eq!(
        decode.compositions,
        [("decode 1 seq x 1".to_owned(), 1), ("decode 2 seq x 1".to_owned(), 1)].into_iter().collect()
    );
    assert_eq!(decode.library_calls, [(1, 2), (2, 5)].into_iter().collect());
    assert_eq!(decode.api_calls.get("llama_decode"), Some(&2));
    assert_eq!(decode.api_calls.get("hipLaunchKernel"), Some(&1));
    assert_eq!((mixed.steps, mixed.prompt_tokens, mixed.decode_tokens), (1, 23, 1));
    assert_eq!(mixed.compositions.keys().collect::<Vec<_>>(), ["mixed: 1 prompt of 23 + 1 decode"]);
}

#[test]
fn a_process_with_batches_and_no_gpu_kernel_has_steps() {
    // llama.cpp on the CPU: its batches alone are its steps.
    let mut p = Phases::default();
    p.batch(&step_batch(100, &[(0, 0, 5, true)], &[]));
    p.batch(&step_batch(200, &[(0, 5, 1, true)], &[]));
    let spans = p.spans();
    assert_eq!(
        spans,
        [
            StepSpan {
                phase: Phase::Prefill,
                start: 100,
                end: 100,
                kernels: 0,
                composition: Some("prefill: 1 prompt of 5".into())
            },
            StepSpan {
                phase: Phase::Decode,
                start: 200,
                end: 200,
                kernels: 0,
                composition: Some("decode 1 seq x 1".into())
            },
        ]
    );
}

#[test]
fn a_last_step_s_calls_read_before_its_batch_land_in_it() {
    // The process's end is handled beside the ring's order: its last step's calls may be written first.
    let mut p = Phases::default();
    let numbered = |ts: u64, step: u64, runs: &[(i32, i32, u32, bool)]| crate::trace::event::StepBatch {
        step,
        ..step_batch(ts, runs, &[])
    };
    p.last_step_calls(2, &std::iter::once((1, 4)).collect());
    p.batch(&numbered(100, 1, &[(0, 0, 5, true)]));
    p.batch(&numbered(200, 2, &[(0, 5, 1, true)]));
    let phases = p.finish();
    let get = |ph: Phase| phases.iter().find(|r| r.phase == ph).unwrap();
    assert!(get(Phase::Prefill).library_calls.is_empty());
    assert_eq!(get(Phase::Decode).library_calls, std::iter::once((1, 4)).collect());
}

/// One pass's inputs as the scheduler copies them up: its positions, then its output rows.
fn pass(p: &mut Phases, ts: u64, positions: &[i32], rows: &[i32]) {
    use crate::trace::event::InputKind;
    p.call(ApiFunc::GgmlSchedGraphCompute.op(), None, ts, true);
    for (kind, values) in [(InputKind::Positions, positions), (InputKind::Outputs, rows)] {
        let runs = GraphInput::runs_of(values.iter().copied());
        p.graph_input(&GraphInput { ts, input: Some(kind), count: values.len() as u64, runs, ..GraphInput::default() });
    }
}

#[test]
fn steps_without_batches_are_judged_by_their_passes_inputs() {
    let mut p = Phases::default();
    let copy_down =
        |p: &mut Phases, ts: u64| p.call(ApiFunc::CuMemcpyDtoHAsync.op(), Some(MemcpyKind::DeviceToHost), ts, true);
    let prompt: Vec<i32> = (0..11).collect();
    pass(&mut p, 100, &prompt, &[10]);
    p.launch(classify(MMQ16), 110);
    copy_down(&mut p, 120);
    pass(&mut p, 200, &[11], &[0]);
    p.launch(classify(MMVQ1), 210);
    copy_down(&mut p, 220);
    // Slot 0 decodes beside slot 1's prompt: widths alone would call it a prefill.
    let mut mixed = vec![12];
    mixed.extend(0..23);
    pass(&mut p, 300, &mixed, &[0, 23]);
    p.launch(classify(MMQ16), 310);
    copy_down(&mut p, 320);
    // Two sequences decoding: MMVQ over 2 columns, which widths alone would call a prompt batch.
    pass(&mut p, 400, &[13, 23], &[0, 1]);
    p.launch(classify(MMVQ4), 410);
    copy_down(&mut p, 420);
    let phases = p.finish();
    let get = |ph: Phase| phases.iter().find(|r| r.phase == ph).unwrap();
    let (prefill, decode, mixed) = (get(Phase::Prefill), get(Phase::Decode), get(Phase::Mixed));
    assert_eq!((prefill.steps, prefill.prompt_tokens, prefill.steps_from_inputs), (1, 11, 1));
    assert_eq!(prefill.compositions.keys().collect::<Vec<_>>(), ["prefill: 11 prompt tokens"]);
    assert_eq!((decode.steps, decode.decode_tokens, decode.steps_from_inputs), (2, 3, 2));
    assert_eq!(decode.compositions.get("decode 2 seq x 1"), Some(&1));
    assert_eq!((mixed.steps, mixed.prompt_tokens, mixed.decode_tokens), (1, 23, 1));
    assert_eq!(mixed.compositions.keys().collect::<Vec<_>>(), ["mixed: 23 prompt tokens + 1 decode"]);
    // Each input read is a trap of its step.
    assert_eq!((decode.api_calls.get("ggml_backend_tensor_set"), decode.traps), (Some(&4), 4));
    assert_eq!(phases.iter().map(|ph| ph.steps_from_batches).sum::<u64>(), 0);
}

#[test]
fn a_batch_s_step_is_checked_against_its_passes_inputs() {
    let mut p = Phases::default();
    p.batch(&step_batch(100, &[(0, 0, 11, true)], &[]));
    pass(&mut p, 101, &(0..11).collect::<Vec<_>>(), &[10]);
    p.launch(classify(MMQ16), 110);
    // llama.cpp splits slot 0's decode and slot 1's prompt into two passes (one token of each, then the
    // rest of the prompt): the same tokens as the batch.
    p.batch(&step_batch(200, &[(0, 11, 1, true), (1, 0, 5, true)], &[]));
    pass(&mut p, 201, &[11, 0], &[0]);
    pass(&mut p, 202, &[1, 2, 3, 4], &[3]);
    p.launch(classify(MMQ16), 210);
    // Inputs that say another thing than the batch (a prompt token where the batch has a decode).
    p.batch(&step_batch(300, &[(0, 12, 1, true), (1, 5, 1, true)], &[]));
    pass(&mut p, 301, &[12, 5], &[1]);
    p.launch(classify(MMVQ4), 310);
    let phases = p.finish();
    let sum = |f: fn(&PhaseReport) -> u64| phases.iter().map(f).sum::<u64>();
    assert_eq!((sum(|ph| ph.inputs_checked), sum(|ph| ph.inputs_disagree)), (3, 1));
    // The batches label the steps; the inputs only check them.
    assert_eq!((sum(|ph| ph.steps_from_batches), sum(|ph| ph.steps_from_inputs)), (3, 0));
    assert_eq!((sum(|ph| ph.prompt_tokens), sum(|ph| ph.decode_tokens)), (16, 3));
}

#[test]
fn without_a_probed_copy_a_step_that_kept_outputs_ends_at_the_next_pass() {
    // ggml's Vulkan backend copies the logits down with no call tracer probes: the passes cut the steps.
    let mut p = Phases::default();
    pass(&mut p, 100, &(0..512).collect::<Vec<_>>(), &[]);
    p.launch(classify(MMQ16), 110);
    pass(&mut p, 200, &[512], &[0]);
    p.launch(classify(MMQ16), 210);
    pass(&mut p, 300, &[513], &[0]);
    p.launch(classify(MMVQ1), 310);
    let spans = p.spans();
    let seen: Vec<(Phase, Option<&str>)> = spans.iter().map(|s| (s.phase, s.composition.as_deref())).collect();
    assert_eq!(seen, [(Phase::Prefill, Some("prefill: 513 prompt tokens")), (Phase::Decode, Some("decode 1 seq x 1"))]);
}
