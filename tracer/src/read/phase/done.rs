//! A process's closed steps, per phase: what their kernels, tokens, passes, calls and traps add up to, and
//! each step as a span.

use std::collections::{BTreeMap, BTreeSet};

use tracer_common::ApiFunc;

use super::{
    batch::Composition,
    report::{MAX_SEQUENCES, Phase},
    step::{FamilyCounts, Step, StepSpan, add_counts, passes_label},
};
use crate::trace::classify::Batch;

/// One phase's closed steps: how many, their kernels, their widths, and the steps of several passes by
/// their sequence of widths.
#[derive(Default)]
pub(super) struct PhaseAcc {
    pub(super) steps: u64,
    pub(super) counts: FamilyCounts,
    pub(super) widths: BTreeSet<String>,
    pub(super) sequences: BTreeMap<Vec<Option<Batch>>, (u64, Vec<FamilyCounts>)>,
    pub(super) unlisted: u64,
    pub(super) merged: u64,
    pub(super) unknown: u64,
    pub(super) tokens: u64,
    pub(super) tokens_unknown: u64,
    pub(super) from_batches: u64,
    /// Steps judged from their passes' inputs (no batch read).
    pub(super) from_inputs: u64,
    /// Steps with both a batch and judged inputs, and those whose judgements differ (prompt tokens or
    /// decode tokens).
    pub(super) inputs_checked: u64,
    pub(super) inputs_disagree: u64,
    pub(super) prompt_tokens: u64,
    pub(super) decode_tokens: u64,
    pub(super) unread_tokens: u64,
    /// Of the unread tokens (claimed by a batch past those read), those the step's kernels' exact widths
    /// do not confirm: a process can claim any count.
    pub(super) unconfirmed_tokens: u64,
    pub(super) compositions: BTreeMap<String, u64>,
    pub(super) compositions_unlisted: u64,
    pub(super) api: BTreeMap<ApiFunc, u64>,
    pub(super) traps: u64,
    pub(super) doorbell_traps: u64,
    pub(super) lib_calls: BTreeMap<u32, u64>,
}

/// The closed steps of one view (API launches or queue dispatches): totals per phase and a span each.
#[derive(Default)]
pub(super) struct Done {
    pub(super) steps: BTreeMap<Phase, PhaseAcc>,
    pub(super) spans: Vec<StepSpan>,
    pub(super) ggml: bool,
    /// Steps ran graph replays whose kernels are unknown.
    pub(super) unknown: bool,
    /// Steps had batches.
    pub(super) batched: bool,
    /// Steps without a batch were judged from their inputs.
    pub(super) from_inputs: bool,
    /// The phase of the step closed last.
    pub(super) last: Option<Phase>,
}

impl PhaseAcc {
    /// A step with a batch and judged inputs: the two judgements checked against each other (where neither
    /// left tokens unread).
    fn check_inputs(&mut self, batch: Option<&Composition>, inputs: Option<&Composition>) {
        let (Some(b), Some(i)) = (batch, inputs) else { return };
        if b.unread > 0 || i.unread > 0 || b.unreadable {
            return;
        }
        self.inputs_checked += 1;
        if (b.prompt_tokens(), b.decodes) != (i.prompt_tokens(), i.decodes) {
            self.inputs_disagree += 1;
        }
    }
}

impl Done {
    /// Library calls that belong to the step closed last (none closed yet: dropped, `false`).
    pub(super) fn late_lib_calls(&mut self, calls: &BTreeMap<u32, u64>) -> bool {
        let Some(acc) = self.last.and_then(|phase| self.steps.get_mut(&phase)) else { return false };
        add_counts(&mut acc.lib_calls, calls);
        true
    }

    pub(super) fn add(&mut self, step: Step) {
        let phase = step.label();
        self.last = Some(phase);
        let (start, end, kernels, ggml) = (step.start, step.end, step.kernels, step.ggml);
        let acc = self.steps.entry(phase).or_default();
        acc.steps += 1;
        add_counts(&mut acc.api, &step.api);
        acc.traps += step.traps;
        acc.doorbell_traps += step.doorbell_traps;
        add_counts(&mut acc.lib_calls, &step.lib_calls);
        let batch = step.batch.clone();
        self.batched |= batch.is_some();
        let inputs = step.inputs.composition();
        self.from_inputs |= batch.is_none() && inputs.is_some();
        acc.check_inputs(batch.as_ref(), inputs.as_ref());
        let judged = batch.or(inputs);
        acc.unknown += step.unknown;
        self.unknown |= step.unknown > 0;
        let (passes, merged) = step.into_passes();
        for pass in &passes {
            add_counts(&mut acc.counts, &pass.counts);
        }
        acc.merged += merged;
        let widths: Vec<Option<Batch>> = passes.iter().map(|p| p.widest).collect();
        let exact: Option<u64> = widths
            .iter()
            .map(|w| match w {
                Some(Batch::Exact(n)) => Some(u64::from(*n)),
                _ => None,
            })
            .sum();
        match (&judged, exact) {
            (Some(c), _) => {
                if c.from_inputs {
                    acc.from_inputs += 1;
                } else {
                    acc.from_batches += 1;
                }
                acc.tokens += c.tokens();
                acc.prompt_tokens += c.prompt_tokens();
                acc.decode_tokens += u64::from(c.decodes);
                acc.unread_tokens += u64::from(c.unread);
                // Tokens past the read ones are the process's claim: confirmed only as far as the step's
                // kernels ran exact widths beyond the read tokens.
                let read = c.tokens().saturating_sub(u64::from(c.unread));
                let confirmed = exact.map_or(0, |n| n.saturating_sub(read)).min(u64::from(c.unread));
                acc.unconfirmed_tokens += u64::from(c.unread) - confirmed;
                let label = c.label();
                if acc.compositions.len() < MAX_SEQUENCES || acc.compositions.contains_key(&label) {
                    *acc.compositions.entry(label).or_default() += 1;
                } else {
                    acc.compositions_unlisted += 1;
                }
            }
            (None, Some(n)) if !widths.is_empty() => acc.tokens += n,
            (None, _) => acc.tokens_unknown += 1,
        }
        if widths.iter().any(Option::is_some) {
            acc.widths.insert(passes_label(&widths));
        }
        if passes.len() > 1 {
            let listed = acc.sequences.len() < MAX_SEQUENCES || acc.sequences.contains_key(&widths);
            if listed {
                let (n, counts) =
                    acc.sequences.entry(widths).or_insert_with(|| (0, vec![FamilyCounts::new(); passes.len()]));
                *n += 1;
                for (into, pass) in counts.iter_mut().zip(&passes) {
                    add_counts(into, &pass.counts);
                }
            } else {
                acc.unlisted += 1;
            }
        }
        self.ggml |= ggml;
        let composition = judged.as_ref().map(Composition::label);
        self.spans.push(StepSpan { phase, start, end, kernels, composition });
    }
}
