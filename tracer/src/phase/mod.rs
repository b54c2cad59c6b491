//! Inference phases: a process's work cut into steps (one graph evaluation each), each step labelled
//! prefill or decode from its matrix kernels.
//!
//! A step is one `llama_decode`: it ends where ggml waits for its result, a synchronize after a
//! device-to-host copy (the logits). A graph replay is part of the step it runs in (on the real
//! llama.cpp, each token's step is: inputs copied up, the graph replayed, the logits copied down, a sync):
//! its kernels are those its capture recorded; launches made while capturing run only in replays. Labels:
//! any MMQ or BLAS GEMM, or MMVQ with more than one column, is a prompt batch (prefill); MMVQ with one
//! column only is token decode; a step with no quantized or BLAS matrix kernel is "other". A step's batch
//! width is its widest matrix kernel's (a prompt's output projection runs on the last token only). Kernels
//! are counted from the queue's dispatches when the process has any (graph replays reach the queue), else
//! from its API launches and replays. Only processes that ran ggml's quantized kernels get phases.

use std::collections::{BTreeMap, BTreeSet};

mod feed;
pub use feed::{Feeder, Graphs, ProcessSteps};

use serde::Serialize;

use tracer_common::api::Op;

use crate::{
    classify::{Batch, Class, Family},
    event::MemcpyKind,
};

/// What a step of a ggml process did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// A prompt batch: MMQ or a BLAS GEMM, or MMVQ over more than one column.
    Prefill,
    /// One token: MMVQ over one column.
    Decode,
    /// No quantized or BLAS matrix kernel.
    #[default]
    Other,
}

impl Phase {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Prefill => "prefill",
            Self::Decode => "decode",
            Self::Other => "other",
        }
    }
}

/// One phase's totals.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PhaseReport {
    pub phase: Phase,
    pub steps: u64,
    /// Kernels by family, and by family and quant type ("MMVQ `Q4_K`").
    pub kernels: BTreeMap<String, u64>,
    /// The steps' batch widths, each its widest matrix kernel's ("1", "290"; "<=16" where only a tile
    /// bound is known).
    pub batch_widths: BTreeSet<String>,
}

/// Kernels of one family (and quantization type) counted.
type FamilyCounts = BTreeMap<(Family, Option<&'static str>), u64>;

/// The step being built: what its kernels add up to, not the kernels themselves, so that memory stays
/// flat however long the trace.
#[derive(Default)]
struct Step {
    kernels: usize,
    counts: FamilyCounts,
    /// The widest batch of its matrix kernels.
    widest: Option<Batch>,
    /// MMQ or a BLAS GEMM, or MMVQ over more than one column.
    prompt_batch: bool,
    mmvq: bool,
    /// A ggml quantized kernel (MMVQ, MMQ, `q8_1` quantize).
    ggml: bool,
    copied_to_host: bool,
    /// The first kernel's time and the last event's (kernel, or the call that ended the step).
    start: u64,
    end: u64,
}

impl Step {
    fn push(&mut self, class: Class, ts: u64) {
        self.push_n(&class, 1, ts);
    }

    /// `n` runs of one kernel (a graph replay runs each captured launch).
    fn push_n(&mut self, class: &Class, n: u64, ts: u64) {
        if n == 0 {
            return;
        }
        if self.kernels == 0 {
            self.start = ts;
        }
        self.end = self.end.max(ts);
        self.kernels += n as usize;
        let one_column = matches!(class.batch, Some(Batch::Exact(1)));
        self.prompt_batch |=
            matches!(class.family, Family::Mmq | Family::BlasGemm) || (class.family == Family::Mmvq && !one_column);
        self.mmvq |= class.family == Family::Mmvq;
        self.ggml |= matches!(class.family, Family::Mmvq | Family::Mmq | Family::Quantize);
        *self.counts.entry((class.family, class.quant)).or_default() += n;
        if let Some(b) = class.batch
            && self.widest.is_none_or(|w| upper(w) < upper(b))
        {
            self.widest = Some(b);
        }
    }

    /// Any MMQ or BLAS GEMM, or MMVQ with more than one column, is a prompt batch (prefill); MMVQ with one
    /// column only is token decode; a step with no quantized or BLAS matrix kernel is "other".
    const fn label(&self) -> Phase {
        if self.prompt_batch {
            Phase::Prefill
        } else if self.mmvq {
            Phase::Decode
        } else {
            Phase::Other
        }
    }
}

/// The most columns a batch can have.
const fn upper(b: Batch) -> u32 {
    match b {
        Batch::Exact(n) | Batch::TileUpTo(n) | Batch::Range(_, n) => n,
    }
}

/// One step as a time span (for timelines).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepSpan {
    pub phase: Phase,
    pub start: u64,
    pub end: u64,
    pub kernels: usize,
}

/// The closed steps of one view (API launches or queue dispatches): totals per phase and a span each.
#[derive(Default)]
struct Done {
    steps: BTreeMap<Phase, (u64, FamilyCounts, BTreeSet<Batch>)>,
    spans: Vec<StepSpan>,
    ggml: bool,
}

impl Done {
    fn add(&mut self, step: Step) {
        let phase = step.label();
        let (n, counts, batches) = self.steps.entry(phase).or_default();
        *n += 1;
        for (k, c) in step.counts {
            *counts.entry(k).or_default() += c;
        }
        batches.extend(step.widest);
        self.ggml |= step.ggml;
        self.spans.push(StepSpan { phase, start: step.start, end: step.end, kernels: step.kernels });
    }
}

/// Builds the phases of one process from its records in order.
#[derive(Default)]
pub struct Phases {
    api: Step,
    queue: Step,
    api_done: Done,
    queue_done: Done,
    saw_dispatch: bool,
}

impl Phases {
    pub fn launch(&mut self, class: Class, ts: u64) {
        self.api.push(class, ts);
    }

    /// A graph replay: `n` runs of each kernel its capture recorded, in the step being built.
    pub fn replay(&mut self, class: &Class, n: u64, ts: u64) {
        self.api.push_n(class, n, ts);
    }

    pub fn dispatch(&mut self, class: Class, ts: u64) {
        self.saw_dispatch = true;
        self.queue.push(class, ts);
    }

    /// Whether the steps are counted from queue dispatches (the process had some) rather than launches.
    pub const fn counts_dispatches(&self) -> bool {
        self.saw_dispatch
    }

    /// An API call: a copy to the host, then a synchronization, ends a step. In a recording that left
    /// synchronizations unprobed (`lean`: `record --lean`), the copy itself ends it.
    pub fn call(&mut self, op: Op, kind: Option<MemcpyKind>, ts: u64, lean: bool) {
        for step in [&mut self.api, &mut self.queue] {
            if step.kernels > 0 {
                step.end = step.end.max(ts);
            }
        }
        match (op, kind) {
            (Op::Memcpy, Some(MemcpyKind::DeviceToHost)) if lean => self.close(),
            (Op::Memcpy, Some(MemcpyKind::DeviceToHost)) => {
                self.api.copied_to_host = true;
                self.queue.copied_to_host = true;
            }
            (Op::Sync, _) if self.api.copied_to_host => self.close(),
            _ => {}
        }
    }

    fn close(&mut self) {
        for (step, done) in [(&mut self.api, &mut self.api_done), (&mut self.queue, &mut self.queue_done)] {
            let s = std::mem::take(step);
            if s.kernels > 0 {
                done.add(s);
            }
        }
    }

    /// The closed steps of the view that counts (the queue's when the process has dispatches); none for a process that ran no ggml quantized kernel: the
    /// prefill/decode labels describe ggml's graph evaluations, not other workloads.
    fn done(mut self) -> Option<Done> {
        self.close();
        let done = if self.saw_dispatch { self.queue_done } else { self.api_done };
        done.ggml.then_some(done)
    }

    /// Each step as a labelled time span.
    pub fn spans(self) -> Vec<StepSpan> {
        self.done().map(|d| d.spans).unwrap_or_default()
    }

    /// The phases' totals.
    pub fn finish(self) -> Vec<PhaseReport> {
        let Some(done) = self.done() else { return Vec::new() };
        done.steps
            .into_iter()
            .map(|(phase, (steps, counts, batches))| PhaseReport {
                phase,
                steps,
                kernels: counts
                    .into_iter()
                    .map(|((family, quant), n)| {
                        let key = quant.map_or_else(|| family.name().to_owned(), |q| format!("{} {q}", family.name()));
                        (key, n)
                    })
                    .collect(),
                batch_widths: batches.into_iter().map(Batch::label).collect(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use tracer_common::ApiFunc;

    use super::*;
    use crate::classify::classify;

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
                StepSpan { phase: Phase::Prefill, start: 100, end: 130, kernels: 2 },
                StepSpan { phase: Phase::Decode, start: 200, end: 250, kernels: 1 },
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
                StepSpan { phase: Phase::Prefill, start: 100, end: 120, kernels: 1 },
                StepSpan { phase: Phase::Decode, start: 210, end: 220, kernels: 1 },
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
            classify(
                "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_",
            ),
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
}
