//! Inference phases: a process's work cut into steps (one graph evaluation each), each step labelled
//! prefill or decode from its matrix kernels.
//!
//! A step is one `llama_decode`: it ends where ggml waits for its result, a synchronize after a
//! device-to-host copy (the logits). A graph replay is part of the step it runs in (on the real
//! llama.cpp, each token's step is: inputs copied up, the graph replayed, the logits copied down, a sync):
//! its kernels are those its capture recorded; launches made while capturing run only in replays. Labels:
//! any MMQ or BLAS GEMM, or MMVQ with more than one column, is a prompt batch (prefill); MMVQ with one
//! column only is token decode; a step with no quantized or BLAS matrix kernel is "other". Kernels
//! are counted from the queue's dispatches when the process has any (graph replays reach the queue), else
//! from its API launches and replays. Only processes that ran ggml's quantized kernels get phases.
//!
//! A step runs one or more matrix passes (micro-batches): llama.cpp splits a prompt longer than its
//! `n_ubatch` into passes of at most that many tokens, each one evaluation of the graph with its inputs
//! copied up first, all in one `llama_decode` (one step: only the last pass copies logits down). Each
//! pass is one graph handed to ggml's scheduler (`ggml_backend_sched_graph_compute_async`, probed in
//! libggml-base): that call begins the next pass. Where it is not seen (ggml linked in statically), a copy
//! toward the device after a matrix kernel does, in a recording of all calls (`--all-calls`); the default
//! recording probes no such copy, so there each step is one pass. A pass's width is its widest matrix
//! kernel's (a prompt's output projection runs on the last token only); a step of several passes is
//! labelled with their sum, `513 = 512 + 1`.
//!
//! Where the batch is read (`llama_decode`, `llama_process` in a mapped libllama), it labels its step and
//! gives its tokens by sequence. Where it is not (llama.cpp linked into the program, as Ollama's llama
//! engine links it), each pass's token positions and output rows, read as ggml's scheduler copies them to
//! the device, judge the step instead ([`inputs`]); a step whose passes kept outputs then ends where the next
//! pass begins. Where both are read, the inputs' judgement is checked against the batch's.

use std::collections::BTreeMap;

mod batch;
mod done;
mod feed;
mod inputs;
mod report;
mod step;
pub(crate) use batch::Sequences;
pub(crate) use feed::{DriverReads, Execution, FamilyKey, Feeder, ProcessSteps, View};
pub(crate) use report::{MAX_PASSES, PassReport, PassSequence, PhaseTotals};
pub use report::{Phase, PhaseReport};

use tracer_common::{ApiFunc, api::Op};

use crate::{
    trace::classify::{Batch, Class},
    trace::event::{GraphInput, MemcpyKind},
};
use done::Done;
use inputs::{InputJudge, InputTally, PassInputs};
use step::{FamilyCounts, Step, add_counts, passes_label};
pub(crate) use step::{StepSpan, family_key};

/// Builds the phases of one process from its records in order.
#[derive(Default)]
pub(crate) struct Phases {
    api: Step,
    queue: Step,
    api_done: Done,
    queue_done: Done,
    saw_dispatch: bool,
    /// Batches (`llama_decode`) were seen: from then on, each one begins a step, and nothing else ends one.
    batched: bool,
    /// The process's sequences, to judge each batch's tokens.
    pub(crate) sequences: Sequences,
    /// The kernel's number of the batch that began the step being built (0: none).
    step: u64,
    /// Graphs handed to ggml's scheduler were seen: from then on, they alone begin passes.
    passes_marked: bool,
    /// A last step's library calls read before that step's batch was fed (the process's end is handled
    /// beside the ring's order): added when the batch comes.
    early_calls: Option<(u64, BTreeMap<u32, u64>)>,
    /// The inputs of the pass being built, and the outputs waiting for their sampled tokens.
    pass_inputs: PassInputs,
    pub(crate) inputs: InputJudge,
}

impl Phases {
    pub(crate) fn launch(&mut self, class: Class, ts: u64) {
        self.api.push(class, ts);
    }

    /// A graph replay: `n` runs of each kernel its capture recorded, in the step being built.
    pub(crate) fn replay(&mut self, class: &Class, n: u64, ts: u64) {
        self.api.push_n(class, n, ts);
    }

    /// A graph replay of an executable whose capture was not seen: part of the launches' step being built,
    /// its kernels unknown (the queue's view, where there is one, sees them as dispatches).
    pub(crate) fn unknown_replay(&mut self, ts: u64) {
        if self.api.is_empty() {
            self.api.start = ts;
        }
        self.api.end = self.api.end.max(ts);
        self.api.unknown += 1;
    }

    /// A doorbell store trapped (it read one packet or more): a trap of the step being built.
    pub(crate) fn doorbell(&mut self) {
        for step in [&mut self.api, &mut self.queue] {
            (step.traps, step.doorbell_traps) = (step.traps + 1, step.doorbell_traps + 1);
        }
    }

    pub(crate) fn dispatch(&mut self, class: Class, ts: u64) {
        self.saw_dispatch = true;
        self.queue.push(class, ts);
    }

    /// Whether the steps are counted from queue dispatches (the process had some) rather than launches.
    pub(crate) const fn counts_dispatches(&self) -> bool {
        self.saw_dispatch
    }

    /// A batch handed to the model (`llama_decode`): the step being built ends, with the library calls
    /// the kernel counted in it, and one begins with this batch's composition.
    pub(crate) fn batch(&mut self, b: &crate::trace::event::StepBatch) {
        let c = self.sequences.judge(b);
        self.library_calls(&b.previous_calls);
        self.close();
        self.batched = true;
        for step in [&mut self.api, &mut self.queue] {
            step.batch = Some(c.clone());
            step.start = b.ts;
            step.end = b.ts;
        }
        self.api(b.api, 1);
        self.step = b.step;
        if let Some((_, calls)) = self.early_calls.take_if(|(n, _)| *n == b.step && b.step != 0) {
            self.library_calls(&calls);
        }
    }

    /// A process's last step's library calls, read when it ended (`step_calls`): they belong to the step
    /// its batch number `step` began, which may not have been fed yet.
    pub(crate) fn last_step_calls(&mut self, step: u64, calls: &BTreeMap<u32, u64>) {
        if step > self.step {
            let (_, pending) = self.early_calls.get_or_insert_with(|| (step, BTreeMap::new()));
            for (lib, n) in calls {
                *pending.entry(*lib).or_default() += n;
            }
        } else {
            self.library_calls(calls);
        }
    }

    /// Library calls a process without batches made since its previous pass (cut at the next, or at its end):
    /// they belong to that pass's step, the one being built or, once its logits copy closed it, the last.
    pub(crate) fn pass_calls(&mut self, calls: &BTreeMap<u32, u64>) {
        for (step, done) in [(&mut self.api, &mut self.api_done), (&mut self.queue, &mut self.queue_done)] {
            if !(step.is_empty() && done.late_lib_calls(calls)) {
                add_counts(&mut step.lib_calls, calls);
            }
        }
    }

    /// Calls into GPU libraries' entry points, by entry library id, made in the step being built.
    pub(crate) fn library_calls(&mut self, calls: &BTreeMap<u32, u64>) {
        for step in [&mut self.api, &mut self.queue] {
            add_counts(&mut step.lib_calls, calls);
        }
    }

    /// An API call seen one by one (launches included), in the step being built, and the traps it cost
    /// (1 at entry only, 2 with its return).
    pub(crate) fn api(&mut self, api: ApiFunc, traps: u64) {
        for step in [&mut self.api, &mut self.queue] {
            *step.api.entry(api).or_default() += 1;
            step.traps += traps;
        }
    }

    /// An API call. A graph handed to ggml's scheduler begins a matrix pass (and, in a process without
    /// batches, a step, where the step being built kept outputs); in a process where none is
    /// seen (ggml linked in statically, or a recording of all calls made before the scheduler was probed),
    /// a copy toward the device after a matrix kernel does. A copy to the host, then a synchronization,
    /// ends a step; in a recording that left synchronizations unprobed (`lean`, the default), the copy
    /// itself ends it. Once batches are seen, only they cut steps.
    pub(crate) fn call(&mut self, op: Op, kind: Option<MemcpyKind>, ts: u64, lean: bool) {
        for step in [&mut self.api, &mut self.queue] {
            if !step.is_empty() {
                step.end = step.end.max(ts);
            }
        }
        match (op, kind) {
            (Op::Pass, _) => {
                self.judge_inputs();
                // Without batches, a step whose passes kept outputs ends where the next pass begins: the
                // outputs are copied down after their pass (where no copy is probed: ggml's Vulkan backend).
                if !self.batched && self.api.inputs.outputs > 0 {
                    self.close();
                }
                self.passes_marked = true;
                self.api.copy_up();
                self.queue.copy_up();
            }
            (Op::Memcpy, Some(MemcpyKind::HostToDevice)) if !self.passes_marked => {
                self.api.copy_up();
                self.queue.copy_up();
            }
            _ if self.batched => {}
            (Op::Memcpy, Some(MemcpyKind::DeviceToHost)) if lean => self.close(),
            (Op::Memcpy, Some(MemcpyKind::DeviceToHost)) => {
                self.api.copied_to_host = true;
                self.queue.copied_to_host = true;
            }
            (Op::Sync, _) if self.api.copied_to_host => self.close(),
            _ => {}
        }
    }

    /// A pass's input copied up (its positions or its output rows), for the pass being built: one trap of
    /// the step being built.
    pub(crate) fn graph_input(&mut self, g: &GraphInput) {
        self.api(ApiFunc::GgmlBackendTensorSet, 1);
        self.pass_inputs.set(g);
    }

    /// The pass being built is judged by its inputs, into the step being built.
    fn judge_inputs(&mut self) {
        let mut t = InputTally::default();
        self.inputs.pass(&mut self.pass_inputs, &mut t);
        if t != InputTally::default() {
            self.api.inputs.add(&t);
            self.queue.inputs.add(&t);
        }
    }

    fn close(&mut self) {
        self.judge_inputs();
        self.inputs.end_step();
        for (step, done) in [(&mut self.api, &mut self.api_done), (&mut self.queue, &mut self.queue_done)] {
            let s = std::mem::take(step);
            if !s.is_empty() {
                done.add(s);
            }
        }
    }

    /// The closed steps of the view that counts (the queue's when the process has dispatches); none for a process that ran no ggml quantized kernel: the
    /// prefill/decode labels describe ggml's graph evaluations, not other workloads.
    fn done(mut self) -> Option<Done> {
        self.close();
        let done = if self.saw_dispatch { self.queue_done } else { self.api_done };
        (done.ggml || done.unknown || done.batched || done.from_inputs).then_some(done)
    }

    /// The closed steps' totals so far, per phase, without ending the step being built (a live
    /// recording's metrics); none for a process that ran no ggml quantized kernel, as [`Phases::finish`].
    pub(crate) fn totals(&self) -> Vec<PhaseTotals> {
        let done = if self.saw_dispatch { &self.queue_done } else { &self.api_done };
        if !(done.ggml || done.unknown || done.batched) {
            return Vec::new();
        }
        done.steps
            .iter()
            .map(|(&phase, acc)| PhaseTotals {
                phase,
                steps: acc.steps,
                tokens: acc.tokens.saturating_sub(acc.unconfirmed_tokens),
                prompt_tokens: acc.prompt_tokens,
                decode_tokens: acc.decode_tokens,
                kernels: acc.counts.iter().map(|(&k, &n)| (family_key(k), n)).collect(),
                traps: acc.traps,
            })
            .collect()
    }

    /// Lets go of the closed steps' spans (a live recording keeps totals only, so its memory stays flat).
    pub(crate) fn forget_spans(&mut self) {
        self.api_done.spans.clear();
        self.queue_done.spans.clear();
    }

    /// Each step as a labelled time span.
    pub(crate) fn spans(self) -> Vec<StepSpan> {
        self.done().map(|d| d.spans).unwrap_or_default()
    }

    /// The phases' totals.
    #[cfg(test)]
    pub(crate) fn finish(self) -> Vec<PhaseReport> {
        self.finish_with_spans().0
    }

    /// The phases' totals, and each step as a labelled time span.
    pub(crate) fn finish_with_spans(self) -> (Vec<PhaseReport>, Vec<StepSpan>) {
        let Some(mut done) = self.done() else { return (Vec::new(), Vec::new()) };
        let spans = std::mem::take(&mut done.spans);
        let named = |counts: FamilyCounts| counts.into_iter().map(|(k, n)| (family_key(k), n)).collect();
        let phases = done
            .steps
            .into_iter()
            .map(|(phase, acc)| {
                let mut micro_batched: Vec<PassSequence> = acc
                    .sequences
                    .into_iter()
                    .map(|(widths, (steps, counts))| PassSequence {
                        label: passes_label(&widths),
                        steps,
                        passes: widths
                            .iter()
                            .zip(counts)
                            .map(|(w, c)| PassReport {
                                width: w.map_or_else(|| "-".to_owned(), Batch::label),
                                kernels: named(c),
                            })
                            .collect(),
                    })
                    .collect();
                micro_batched.sort_by(|a, b| b.steps.cmp(&a.steps).then_with(|| a.label.cmp(&b.label)));
                PhaseReport {
                    phase,
                    steps: acc.steps,
                    kernels: named(acc.counts),
                    batch_widths: acc.widths,
                    micro_batched,
                    passes_unlisted: acc.unlisted,
                    passes_merged: acc.merged,
                    unknown_replays: acc.unknown,
                    tokens: acc.tokens,
                    tokens_unknown_steps: acc.tokens_unknown,
                    steps_from_batches: acc.from_batches,
                    steps_from_inputs: acc.from_inputs,
                    inputs_checked: acc.inputs_checked,
                    inputs_disagree: acc.inputs_disagree,
                    prompt_tokens: acc.prompt_tokens,
                    decode_tokens: acc.decode_tokens,
                    unread_tokens: acc.unread_tokens,
                    compositions: acc.compositions,
                    compositions_unlisted: acc.compositions_unlisted,
                    api_calls: acc.api.into_iter().map(|(f, n)| (f.name().to_owned(), n)).collect(),
                    traps: acc.traps,
                    doorbell_traps: acc.doorbell_traps,
                    library_calls: acc.lib_calls,
                }
            })
            .collect();
        (phases, spans)
    }
}

#[cfg(test)]
mod tests;
