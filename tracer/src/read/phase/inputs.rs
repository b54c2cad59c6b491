//! A step's composition from its passes' inputs, where no batch is read: the token positions and output
//! rows ggml's scheduler copies to the device for each pass (`inp_pos`, `out_ids`).
//!
//! The inputs carry no sequence ids, so a token is judged by what llama.cpp's semantics leave: a decode
//! token is a token whose output is kept, the only token of its run in the pass (the token before it is not
//! at the position before it without an output: a prompt's last token follows its prompt), at the position
//! after a token whose output was kept in an earlier step (the sampled token fed back). Every other token
//! is a prompt's. What this cannot tell, beside the batch judge's own limit (a one-token prompt that
//! continues a sampled sequence): a one-token prompt at the position after another sequence's last sampled
//! token, within [`EXPECT_STEPS`] steps of it. A pass whose positions or output rows were not copied up (a
//! model whose last layer runs on the CPU) is not judged (counted); M-RoPE's four positions a token are
//! not told from four tokens.

use std::collections::HashMap;

use super::batch::Composition;
use crate::trace::event::{GraphInput, InputKind};

/// Most positions kept waiting for their sampled token, per process; outputs beyond them are counted.
pub(crate) const MAX_EXPECTED: usize = 4096;
/// Steps a kept output waits for its sampled token before it is let go (a sequence that ended).
pub(crate) const EXPECT_STEPS: u64 = 64;

/// The inputs of the pass being built, as copied up (a later copy of the same input replaces an earlier:
/// a second device gets the same values).
#[derive(Default)]
pub(crate) struct PassInputs {
    positions: Option<GraphInput>,
    outputs: Option<GraphInput>,
}

impl PassInputs {
    pub(crate) fn set(&mut self, g: &GraphInput) {
        match g.input {
            Some(InputKind::Positions) => self.positions = Some(g.clone()),
            Some(InputKind::Outputs) => self.outputs = Some(g.clone()),
            None => {}
        }
    }

    const fn is_empty(&self) -> bool {
        self.positions.is_none() && self.outputs.is_none()
    }
}

/// What a step's passes' inputs add up to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct InputTally {
    pub(crate) prompt_tokens: u64,
    pub(crate) decodes: u32,
    /// Tokens whose positions were not read (past what a record holds, or a fault).
    pub(crate) unread: u64,
    /// Output rows of its passes (kept outputs: the logits copied down after the pass).
    pub(crate) outputs: u64,
    /// Passes judged, and those whose positions or output rows were not seen (not judged).
    pub(crate) passes: u32,
    pub(crate) unjudged: u32,
}

impl InputTally {
    pub(crate) const fn add(&mut self, other: &Self) {
        self.prompt_tokens += other.prompt_tokens;
        self.decodes = self.decodes.saturating_add(other.decodes);
        self.unread += other.unread;
        self.outputs += other.outputs;
        self.passes = self.passes.saturating_add(other.passes);
        self.unjudged = self.unjudged.saturating_add(other.unjudged);
    }

    /// The step's composition, where every pass was judged; sequences are not told apart in its prompts.
    pub(crate) fn composition(&self) -> Option<Composition> {
        (self.unjudged == 0 && self.passes > 0).then(|| Composition {
            prompts: if self.prompt_tokens > 0 {
                vec![u32::try_from(self.prompt_tokens).unwrap_or(u32::MAX)]
            } else {
                Vec::new()
            },
            decodes: self.decodes,
            unread: u32::try_from(self.unread).unwrap_or(u32::MAX),
            unreadable: false,
            from_inputs: true,
        })
    }
}

/// One process's outputs waiting for their sampled token, by the position it would take.
#[derive(Default)]
pub(crate) struct InputJudge {
    /// Position -> the steps whose outputs expect a token there (oldest first).
    expected: HashMap<i64, Vec<u64>>,
    held: usize,
    /// This step's outputs, expected from the next step on.
    fresh: Vec<i64>,
    step: u64,
    /// Outputs not kept waiting: [`MAX_EXPECTED`] were.
    pub(crate) dropped: u64,
}

impl InputJudge {
    /// Judges one pass's inputs into `tally` (taking them).
    pub(crate) fn pass(&mut self, inputs: &mut PassInputs, tally: &mut InputTally) {
        if inputs.is_empty() {
            return;
        }
        let (Some(pos), Some(out)) = (inputs.positions.take(), inputs.outputs.take()) else {
            *inputs = PassInputs::default();
            tally.unjudged += 1;
            return;
        };
        tally.passes += 1;
        tally.outputs += out.count;
        let positions: Vec<i32> = pos.values().collect();
        let rows: Vec<i32> = out.values().collect();
        let tokens = pos.count;
        tally.unread += tokens.saturating_sub(positions.len() as u64);
        let mut sorted = rows.clone();
        sorted.sort_unstable();
        let is_output = |r: usize| i32::try_from(r).is_ok_and(|r| sorted.binary_search(&r).is_ok());
        let mut decodes = 0u64;
        for &row in &rows {
            let Some(r) = usize::try_from(row).ok().filter(|&r| r < positions.len()) else { continue };
            let p = i64::from(positions[r]);
            self.fresh.push(p + 1);
            let after_prompt = r > 0 && i64::from(positions[r - 1]) == p - 1 && !is_output(r - 1);
            if !after_prompt && self.take(p) {
                decodes += 1;
            }
        }
        tally.decodes = tally.decodes.saturating_add(u32::try_from(decodes).unwrap_or(u32::MAX));
        tally.prompt_tokens += (positions.len() as u64).saturating_sub(decodes);
    }

    /// A token at `p` takes the most recent output waiting for it.
    fn take(&mut self, p: i64) -> bool {
        let Some(steps) = self.expected.get_mut(&p) else { return false };
        if steps.pop().is_none() {
            return false;
        }
        self.held -= 1;
        if steps.is_empty() {
            self.expected.remove(&p);
        }
        true
    }

    /// The step ends: its outputs wait for their tokens from the next step on; outputs that waited
    /// [`EXPECT_STEPS`] steps are let go.
    pub(crate) fn end_step(&mut self) {
        self.step += 1;
        for p in std::mem::take(&mut self.fresh) {
            if self.held >= MAX_EXPECTED {
                self.dropped += 1;
                continue;
            }
            self.expected.entry(p).or_default().push(self.step);
            self.held += 1;
        }
        // Made at the end of step `k`, an output waits through step `k + EXPECT_STEPS`.
        let oldest = (self.step + 1).saturating_sub(EXPECT_STEPS);
        if self.expected.values().any(|s| s.first().is_some_and(|&f| f < oldest)) {
            self.expected.retain(|_, steps| {
                steps.retain(|&s| s >= oldest);
                !steps.is_empty()
            });
            self.held = self.expected.values().map(Vec::len).sum();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(kind: InputKind, values: &[i32]) -> GraphInput {
        GraphInput {
            input: Some(kind),
            count: values.len() as u64,
            runs: GraphInput::runs_of(values.iter().copied()),
            ..GraphInput::default()
        }
    }

    /// One step of passes, each `(positions, output rows)`.
    fn step(j: &mut InputJudge, passes: &[(&[i32], &[i32])]) -> Composition {
        let mut tally = InputTally::default();
        for (pos, out) in passes {
            let mut p = PassInputs::default();
            p.set(&input(InputKind::Positions, pos));
            p.set(&input(InputKind::Outputs, out));
            j.pass(&mut p, &mut tally);
        }
        j.end_step();
        tally.composition().expect("judged")
    }

    #[test]
    fn a_two_slot_server_s_steps_from_positions_and_outputs() {
        let mut j = InputJudge::default();
        let prefill: Vec<i32> = (0..11).collect();
        assert_eq!(step(&mut j, &[(&prefill, &[10])]).label(), "prefill: 11 prompt tokens");
        assert_eq!(step(&mut j, &[(&[11], &[0])]).label(), "decode 1 seq x 1");
        // Slot 0 decodes while slot 1's 23-token prompt runs beside it.
        let mut mixed = vec![12];
        mixed.extend(0..23);
        let c = step(&mut j, &[(&mixed, &[0, 23])]);
        assert_eq!((c.label(), c.prompt_tokens(), c.decodes), ("mixed: 23 prompt tokens + 1 decode".into(), 23, 1));
        // Two sequences decoding, at consecutive positions by chance: still two decode tokens.
        assert_eq!(step(&mut j, &[(&[13, 23], &[0, 1])]).label(), "decode 2 seq x 1");
        assert_eq!(step(&mut j, &[(&[14, 24], &[0, 1])]).label(), "decode 2 seq x 1");
    }

    #[test]
    fn a_prompt_split_over_passes_and_steps_stays_a_prompt() {
        let mut j = InputJudge::default();
        let first: Vec<i32> = (0..512).collect();
        // One step of two passes: the last token alone in its pass, after a pass without outputs.
        let c = step(&mut j, &[(&first, &[]), (&[512], &[0])]);
        assert_eq!((c.label(), c.prompt_tokens()), ("prefill: 513 prompt tokens".into(), 513));
        assert_eq!(step(&mut j, &[(&[513], &[0])]).label(), "decode 1 seq x 1");
        // A prompt's last token after its prompt in the same pass is a prompt token even where an output
        // waits at its position (another sequence's).
        let c = step(&mut j, &[(&[514, 513, 514], &[0, 2])]);
        assert_eq!((c.prompt_tokens(), c.decodes), (2, 1));
    }

    #[test]
    fn a_pass_without_its_inputs_is_not_judged_and_outputs_wait_a_bounded_time() {
        let mut j = InputJudge::default();
        let mut tally = InputTally::default();
        let mut p = PassInputs::default();
        p.set(&input(InputKind::Positions, &[0, 1, 2]));
        j.pass(&mut p, &mut tally);
        assert_eq!((tally.unjudged, tally.composition()), (1, None));
        // An output nobody continues is let go after EXPECT_STEPS steps.
        step(&mut j, &[(&[40], &[0])]);
        for _ in 0..EXPECT_STEPS {
            step(&mut j, &[(&[0, 1], &[])]);
        }
        assert_eq!(step(&mut j, &[(&[41], &[0])]).label(), "prefill: 1 prompt token");
        // Unread positions are counted, not judged.
        let mut cut = input(InputKind::Positions, &[7, 8]);
        cut.count = 5;
        let mut tally = InputTally::default();
        let mut p = PassInputs::default();
        p.set(&cut);
        p.set(&input(InputKind::Outputs, &[]));
        j.pass(&mut p, &mut tally);
        assert_eq!((tally.unread, tally.prompt_tokens), (3, 2));
    }
}
