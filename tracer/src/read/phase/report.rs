//! What the phases of a process come to: the phase labels, each phase's totals as the report, the export and
//! the metrics show them, and the passes of its micro-batched steps.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

/// What a step of a ggml process did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// A prompt batch: MMQ or a BLAS GEMM, or MMVQ over more than one column.
    Prefill,
    /// One token: MMVQ over one column; or, from its batch, one decoded token of each of its sequences.
    Decode,
    /// From its batch: prompt tokens of some sequences beside decode tokens of others (a server's slots).
    Mixed,
    /// No quantized or BLAS matrix kernel.
    #[default]
    Other,
    /// Its kernels are unknown: it ran graph replays of executables whose capture tracer did not see
    /// (made before it attached), and no matrix kernel tracer could count.
    Unknown,
}

impl Phase {
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::Prefill => "prefill",
            Self::Decode => "decode",
            Self::Mixed => "mixed",
            Self::Other => "other",
            Self::Unknown => "kernels unknown",
        }
    }

    /// The phase as a metrics label value (one word).
    pub(crate) const fn metric_name(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            _ => self.as_str(),
        }
    }
}

/// One phase's totals.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PhaseReport {
    pub phase: Phase,
    pub steps: u64,
    /// Kernels by family, and by family and quant type ("MMVQ `Q4_K`").
    pub(crate) kernels: BTreeMap<String, u64>,
    /// The steps' batch widths: a pass's widest matrix kernel's ("1", "290"; "<=16" where only a tile
    /// bound is known), a step of several passes their sum ("513 = 512 + 1").
    pub(crate) batch_widths: BTreeSet<String>,
    /// Steps of more than one pass, grouped by their passes' widths in order, with the kernels of each
    /// pass (at most [`MAX_SEQUENCES`] sequences per phase; steps of others are counted in
    /// `passes_unlisted`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) micro_batched: Vec<PassSequence>,
    /// Steps of several passes whose sequence was not listed (more than [`MAX_SEQUENCES`] distinct ones).
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) passes_unlisted: u64,
    /// Copies that would have started a pass beyond [`MAX_PASSES`] in one step: those passes were
    /// counted in the step's last listed pass.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) passes_merged: u64,
    /// Graph replays in these steps whose kernels are unknown (their executable's capture was not seen).
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) unknown_replays: u64,
    /// Tokens these steps evaluated: the sum of their passes' exact widths (a decode step: 1), over the
    /// steps whose every pass has an exact width; the others are counted in `tokens_unknown_steps`.
    pub(crate) tokens: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) tokens_unknown_steps: u64,
    /// Steps whose label and tokens come from their batch (`llama_decode`); the others' come from their
    /// kernels.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) steps_from_batches: u64,
    /// Steps without a batch whose label and tokens come from their passes' inputs as ggml's scheduler
    /// copied them up (token positions and output rows: sequences not told apart).
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) steps_from_inputs: u64,
    /// Steps with a batch whose inputs were judged too, and those where the two judgements differ.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) inputs_checked: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) inputs_disagree: u64,
    /// Of `tokens`, from batches or inputs: prompt tokens, decode tokens, and tokens whose sequence (or
    /// position) was not read.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) prompt_tokens: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) decode_tokens: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) unread_tokens: u64,
    /// Steps by what their batch carried (`decode 2 seq x 1`, `mixed: 1 prompt of 23 + 1 decode`; at most
    /// [`MAX_SEQUENCES`] kinds, further steps counted in `compositions_unlisted`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) compositions: BTreeMap<String, u64>,
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) compositions_unlisted: u64,
    /// Calls the API table's probes saw one by one in these steps, by function (calls tallied in the
    /// kernel are counted for the whole recording only).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub api_calls: BTreeMap<String, u64>,
    /// The traps `api_calls` cost the process: one a call probed at entry only, two a call with a return
    /// probe (its duration and result); and one a doorbell store read (AMD's queues). Divided by the steps'
    /// tokens, what tracer costs a token.
    #[serde(skip_serializing_if = "is_zero")]
    pub traps: u64,
    /// Of `traps`, the doorbell stores': each read the packets it made visible (a kernel dispatch or a barrier
    /// each).
    #[serde(skip_serializing_if = "is_zero")]
    pub doorbell_traps: u64,
    /// Calls into GPU libraries' entry points in these steps, by entry library id (steps cut by batches
    /// only: the kernel counts them per `llama_decode`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) library_calls: BTreeMap<u32, u64>,
}

/// One phase's closed steps so far, while recording (live metrics): steps, tokens, kernels by family.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PhaseTotals {
    pub(crate) phase: Phase,
    pub(crate) steps: u64,
    /// Tokens read, and those a batch claimed past them that the step's kernels' exact widths confirm (a
    /// process's claim alone is not counted: the live metrics are any local user's to inflate otherwise).
    pub(crate) tokens: u64,
    pub(crate) prompt_tokens: u64,
    pub(crate) decode_tokens: u64,
    pub(crate) kernels: Vec<(String, u64)>,
    /// The traps these steps' calls cost, as [`PhaseReport::traps`] (`tracer top`'s traps a token).
    pub(crate) traps: u64,
}

#[expect(clippy::trivially_copy_pass_by_ref, reason = "serde's skip_serializing_if passes a reference")]
const fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The most passes kept per step; a copy that would start one more adds to the last (counted).
pub(crate) const MAX_PASSES: usize = 64;
/// The most distinct pass sequences listed per phase; steps of further ones are counted.
pub(crate) const MAX_SEQUENCES: usize = 64;

/// Steps that ran the same passes, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct PassSequence {
    /// "513 = 512 + 1" (a sum only when every width is exact).
    pub(crate) label: String,
    pub(crate) steps: u64,
    /// Each pass in order: its width and its kernels by family.
    pub(crate) passes: Vec<PassReport>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct PassReport {
    pub(crate) width: String,
    pub(crate) kernels: BTreeMap<String, u64>,
}
