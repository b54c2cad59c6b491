//! One step as it is built: its passes, what its kernels add up to, its time span. Below the phases that
//! build steps ([`super::Phases`]) and the judge of a finished one ([`super::done`]).

use std::collections::BTreeMap;

use tracer_common::ApiFunc;

use super::{
    batch::Composition,
    inputs::InputTally,
    report::{MAX_PASSES, Phase},
};
use crate::trace::classify::{Batch, Class, Family};

/// "513 = 512 + 1" for several passes whose widths are all exact, "<=16 + 1" otherwise; one pass's width
/// alone; "-" for none known.
pub(super) fn passes_label(widths: &[Option<Batch>]) -> String {
    let labels: Vec<String> = widths.iter().map(|w| w.map_or_else(|| "-".to_owned(), Batch::label)).collect();
    if labels.len() <= 1 {
        return labels.into_iter().next().unwrap_or_else(|| "-".to_owned());
    }
    let exact: Option<Vec<u64>> =
        widths.iter().map(|w| if let Some(Batch::Exact(n)) = w { Some(u64::from(*n)) } else { None }).collect();
    match exact {
        Some(n) => format!("{} = {}", n.iter().sum::<u64>(), labels.join(" + ")),
        None => labels.join(" + "),
    }
}

pub(crate) fn family_key((family, quant): (Family, Option<&'static str>)) -> String {
    quant.map_or_else(|| family.name().to_owned(), |q| format!("{} {q}", family.name()))
}

/// Kernels of one family (and quantization type) counted.
pub(super) type FamilyCounts = BTreeMap<(Family, Option<&'static str>), u64>;

/// One matrix pass of a step (a micro-batch): its widest matrix kernel and its kernels by family.
#[derive(Clone, Default)]
pub(super) struct Pass {
    pub(super) widest: Option<Batch>,
    pub(super) counts: FamilyCounts,
    /// It ran a matrix kernel (MMQ, MMVQ, a BLAS GEMM): a copy toward the device ends it.
    pub(super) matrix: bool,
}

/// Adds one set of counts into another (kernel families, API calls, library calls).
pub(super) fn add_counts<K: Ord + Copy>(into: &mut BTreeMap<K, u64>, from: &BTreeMap<K, u64>) {
    for (k, n) in from {
        *into.entry(*k).or_default() += n;
    }
}

impl Pass {
    pub(super) fn add(&mut self, other: Self) {
        add_counts(&mut self.counts, &other.counts);
        self.widest = wider(self.widest, other.widest);
        self.matrix |= other.matrix;
    }
}

/// The wider of two batches (by their most columns).
fn wider(a: Option<Batch>, b: Option<Batch>) -> Option<Batch> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if upper(y) > upper(x) { y } else { x }),
        (x, y) => x.or(y),
    }
}

/// The step being built: what its kernels add up to, not the kernels themselves, so that memory stays
/// flat however long the trace.
#[derive(Default)]
pub(super) struct Step {
    pub(super) kernels: usize,
    /// The pass being built, and those before it in this step (their counts are the step's).
    pub(super) pass: Pass,
    pub(super) passes: Vec<Pass>,
    /// Copies that would have started a pass beyond [`MAX_PASSES`].
    pub(super) passes_merged: u64,
    /// MMQ or a BLAS GEMM, or MMVQ over more than one column.
    pub(super) prompt_batch: bool,
    pub(super) mmvq: bool,
    /// A ggml quantized kernel (MMVQ, MMQ, `q8_1` quantize).
    pub(super) ggml: bool,
    /// Graph replays whose kernels are unknown.
    pub(super) unknown: u64,
    pub(super) copied_to_host: bool,
    /// The first kernel's time and the last event's (kernel, or the call that ended the step).
    pub(super) start: u64,
    pub(super) end: u64,
    /// What its batch carried, where `llama_decode` was seen.
    pub(super) batch: Option<Composition>,
    /// What its passes' inputs add up to, where they were copied up.
    pub(super) inputs: InputTally,
    /// API calls seen one by one in it, by function.
    pub(super) api: BTreeMap<ApiFunc, u64>,
    /// The traps those calls cost: one a call probed at entry, two with its return; one a doorbell store.
    pub(super) traps: u64,
    pub(super) doorbell_traps: u64,
    /// Calls into GPU libraries' entry points in it, by entry library id.
    pub(super) lib_calls: BTreeMap<u32, u64>,
}

impl Step {
    pub(super) fn push(&mut self, class: Class, ts: u64) {
        self.push_n(&class, 1, ts);
    }

    /// `n` runs of one kernel (a graph replay runs each captured launch).
    pub(super) fn push_n(&mut self, class: &Class, n: u64, ts: u64) {
        if n == 0 {
            return;
        }
        if self.kernels == 0 && self.batch.is_none() {
            self.start = ts;
        }
        self.end = self.end.max(ts);
        self.kernels += n as usize;
        let one_column = matches!(class.batch, Some(Batch::Exact(1)));
        self.prompt_batch |=
            matches!(class.family, Family::Mmq | Family::BlasGemm) || (class.family == Family::Mmvq && !one_column);
        self.mmvq |= class.family == Family::Mmvq;
        self.ggml |= matches!(class.family, Family::Mmvq | Family::Mmq | Family::Quantize);
        *self.pass.counts.entry((class.family, class.quant)).or_default() += n;
        self.pass.widest = wider(self.pass.widest, class.batch);
        self.pass.matrix |= matches!(class.family, Family::Mmq | Family::Mmvq | Family::BlasGemm);
    }

    /// A copy toward the device: after a matrix kernel, the next pass's inputs.
    pub(super) fn copy_up(&mut self) {
        if !self.pass.matrix {
            return;
        }
        let pass = std::mem::take(&mut self.pass);
        let full = self.passes.len() >= MAX_PASSES;
        match self.passes.last_mut() {
            Some(last) if full => {
                last.add(pass);
                self.passes_merged += 1;
            }
            _ => self.passes.push(pass),
        }
    }

    /// Its passes, closed: kernels after the last matrix pass (no matrix kernel of their own) belong to it.
    pub(super) fn into_passes(mut self) -> (Vec<Pass>, u64) {
        if self.pass.matrix {
            self.copy_up();
        }
        let rest = std::mem::take(&mut self.pass);
        match self.passes.last_mut() {
            Some(last) => last.add(rest),
            None if !rest.counts.is_empty() => self.passes.push(rest),
            None => {}
        }
        (self.passes, self.passes_merged)
    }

    /// Any MMQ or BLAS GEMM, or MMVQ with more than one column, is a prompt batch (prefill); MMVQ with one
    /// column only is token decode; a step with no quantized or BLAS matrix kernel is "other".
    /// A step with a batch is labelled by it: prefill, decode or mixed by its sequences' tokens.
    pub(super) fn label(&self) -> Phase {
        if let Some(phase) = self.batch.as_ref().and_then(Composition::phase) {
            return phase;
        }
        if self.batch.is_none()
            && let Some(phase) = self.inputs.composition().as_ref().and_then(Composition::phase)
        {
            return phase;
        }
        if self.prompt_batch {
            Phase::Prefill
        } else if self.mmvq {
            Phase::Decode
        } else if self.unknown > 0 {
            Phase::Unknown
        } else {
            Phase::Other
        }
    }

    pub(super) const fn is_empty(&self) -> bool {
        self.kernels == 0 && self.unknown == 0 && self.batch.is_none()
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
pub(crate) struct StepSpan {
    pub(crate) phase: Phase,
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) kernels: usize,
    /// What its batch carried (`mixed: 1 prompt of 23 + 1 decode`), where `llama_decode` was seen.
    pub(crate) composition: Option<String>,
}
