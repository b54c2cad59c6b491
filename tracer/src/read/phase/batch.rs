//! A step's composition from the batch `llama_decode` was given: which sequences it carried, and for
//! each whether its tokens were a prompt's or one decoded token.
//!
//! A sequence's tokens in a batch are one decode token when they are one token that follows, at the next
//! position, a run of that sequence whose last token had its output asked for (the token sampled from it,
//! fed back: llama-server's `common_batch_add(batch, slot.sampled, ...)`, llama-cli's and llama-bench's
//! next token). Anything else is prompt: a new sequence, several tokens, a position that does not follow
//! (a request that reuses part of a cached prompt), or one that follows a run without output (a prompt
//! split over several batches). A batch that gives no positions (`llama_batch_get_one`) is judged by the
//! output alone. The one case this cannot tell: a new prompt of exactly one token that continues, at the
//! next position, a sequence whose last token was sampled (a chat turn that adds one token) is counted
//! as a decode token.

use std::collections::HashMap;

use super::Phase;
use crate::trace::event::StepBatch;

/// Most sequences whose last position is kept per process; a batch's sequences beyond it are judged as
/// new ones (counted).
pub(crate) const MAX_SEQUENCE_STATES: usize = 4096;

/// What one step's batch carried.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Composition {
    /// Tokens of each sequence that evaluated prompt tokens, in batch order.
    pub(crate) prompts: Vec<u32>,
    /// Sequences that decoded one token.
    pub(crate) decodes: u32,
    /// Tokens whose sequence was not read (see [`StepBatch::unread`]).
    pub unread: u32,
    /// The batch itself could not be read (its structure, before any count): not known to be empty.
    pub(crate) unreadable: bool,
    /// Judged from the passes' inputs (no batch read): `prompts` is then one sum, sequences not told apart.
    pub(crate) from_inputs: bool,
}

impl Composition {
    pub(crate) fn prompt_tokens(&self) -> u64 {
        self.prompts.iter().map(|&n| u64::from(n)).sum()
    }

    pub(crate) fn tokens(&self) -> u64 {
        self.prompt_tokens() + u64::from(self.decodes) + u64::from(self.unread)
    }

    /// Prefill (prompts only), decode (decode tokens only), mixed (both); none for an empty batch.
    pub(crate) const fn phase(&self) -> Option<Phase> {
        match (self.prompts.is_empty(), self.decodes == 0) {
            (true, true) => None,
            (false, true) => Some(Phase::Prefill),
            (true, false) => Some(Phase::Decode),
            (false, false) => Some(Phase::Mixed),
        }
    }

    /// `decode 2 seq x 1`, `prefill: 1 prompt of 290`, `mixed: 1 prompt of 23 + 1 decode`, with
    /// `+ 12 unread` where tokens were not read.
    pub(crate) fn label(&self) -> String {
        let prompts = match self.prompts.as_slice() {
            [] => String::new(),
            _ if self.from_inputs => {
                let n = self.prompt_tokens();
                format!("{n} prompt token{}", if n == 1 { "" } else { "s" })
            }
            [n] => format!("1 prompt of {n}"),
            many => {
                format!("{} prompts of {}", many.len(), many.iter().map(u32::to_string).collect::<Vec<_>>().join(" + "))
            }
        };
        let mut label = match self.phase() {
            Some(Phase::Decode) => format!("decode {} seq x 1", self.decodes),
            Some(Phase::Prefill) => format!("prefill: {prompts}"),
            Some(_) => format!("mixed: {prompts} + {} decode", self.decodes),
            None if self.unreadable => "not read".to_owned(),
            None => "empty".to_owned(),
        };
        if self.unread > 0 {
            label = format!("{label} + {} unread", self.unread);
        }
        label
    }
}

/// Where a sequence stood after its last batch.
#[derive(Clone, Copy, Debug, Default)]
struct SeqState {
    /// The position after its last token, where batches gave positions.
    next: Option<i64>,
    /// Its last token's output was asked for.
    sampled: bool,
}

/// The sequences of one process, by (context, sequence id).
#[derive(Default)]
pub(crate) struct Sequences {
    states: HashMap<(u64, i32), SeqState>,
    /// Sequences judged without their state: more than [`MAX_SEQUENCE_STATES`] were kept.
    pub(crate) untracked: u64,
}

impl Sequences {
    /// The composition of `b`, judged against each sequence's previous batch; then each sequence's state
    /// moves past this batch.
    pub(crate) fn judge(&mut self, b: &StepBatch) -> Composition {
        // A sequence's runs in this batch, in order of first appearance: tokens, first position, and the
        // state after its last run.
        let mut seqs: Vec<(i32, u32, Option<i32>, SeqState)> = Vec::new();
        for r in &b.runs {
            let after = SeqState { next: r.pos.map(|p| i64::from(p) + i64::from(r.tokens)), sampled: r.last_output };
            match seqs.iter_mut().find(|s| s.0 == r.seq) {
                Some(s) => {
                    s.1 = s.1.saturating_add(r.tokens);
                    s.3 = after;
                }
                None => seqs.push((r.seq, r.tokens, r.pos, after)),
            }
        }
        let unreadable = b.fault && b.n_tokens == 0 && b.runs.is_empty();
        let mut c = Composition { unread: b.unread, unreadable, ..Composition::default() };
        for (seq, tokens, first, after) in seqs {
            let key = (b.ctx, seq);
            let before = self.states.get(&key).copied();
            let follows = match (before, first) {
                (Some(s), Some(p)) => s.sampled && s.next == Some(i64::from(p)),
                (Some(s), None) => s.sampled && s.next.is_none(),
                (None, _) => false,
            };
            if tokens == 1 && follows {
                c.decodes += 1;
            } else {
                c.prompts.push(tokens);
            }
            if before.is_some() || self.states.len() < MAX_SEQUENCE_STATES {
                self.states.insert(key, after);
            } else {
                self.untracked += 1;
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::event::SeqRun;

    fn batch(runs: &[(i32, Option<i32>, u32, bool)]) -> StepBatch {
        StepBatch {
            runs: runs
                .iter()
                .map(|&(seq, pos, tokens, last_output)| SeqRun {
                    seq,
                    pos,
                    tokens,
                    outputs: u32::from(last_output),
                    last_output,
                    shared: 0,
                })
                .collect(),
            ..StepBatch::default()
        }
    }

    #[test]
    fn a_two_slot_server_s_steps() {
        let mut s = Sequences::default();
        let prefill = s.judge(&batch(&[(0, Some(0), 11, true)]));
        assert_eq!((prefill.phase(), prefill.label()), (Some(Phase::Prefill), "prefill: 1 prompt of 11".into()));
        let decode = s.judge(&batch(&[(0, Some(11), 1, true)]));
        assert_eq!(decode.label(), "decode 1 seq x 1");
        let mixed = s.judge(&batch(&[(0, Some(12), 1, true), (1, Some(0), 23, true)]));
        assert_eq!((mixed.phase(), mixed.label()), (Some(Phase::Mixed), "mixed: 1 prompt of 23 + 1 decode".into()));
        let two = s.judge(&batch(&[(0, Some(13), 1, true), (1, Some(23), 1, true)]));
        assert_eq!((two.phase(), two.label()), (Some(Phase::Decode), "decode 2 seq x 1".into()));
        assert_eq!(two.tokens(), 2);
        // A new request on slot 0: its prompt starts over (a position that does not follow).
        let again = s.judge(&batch(&[(1, Some(24), 1, true), (0, Some(0), 600, true)]));
        assert_eq!(again.label(), "mixed: 1 prompt of 600 + 1 decode");
        assert_eq!(again.prompt_tokens(), 600);
    }

    #[test]
    fn a_batch_whose_structure_could_not_be_read_is_not_called_empty() {
        let mut s = Sequences::default();
        assert_eq!(s.judge(&batch(&[])).label(), "empty");
        let unread = s.judge(&StepBatch { fault: true, ..batch(&[]) });
        assert_eq!((unread.phase(), unread.label()), (None, "not read".into()));
    }

    #[test]
    fn one_token_prompts_are_prompts_unless_they_follow_a_sampled_token() {
        let mut s = Sequences::default();
        // A prompt split over two batches: the first asks for no output, so the second's token is prompt.
        assert_eq!(s.judge(&batch(&[(0, Some(0), 4, false)])).phase(), Some(Phase::Prefill));
        assert_eq!(s.judge(&batch(&[(0, Some(4), 1, true)])).label(), "prefill: 1 prompt of 1");
        // A cached prompt re-evaluated from its last token: the position goes back.
        assert_eq!(s.judge(&batch(&[(0, Some(5), 1, true)])).phase(), Some(Phase::Decode));
        assert_eq!(s.judge(&batch(&[(0, Some(3), 1, true)])).phase(), Some(Phase::Prefill));
        // Another context's sequence 0 is another sequence.
        let other = StepBatch { ctx: 7, ..batch(&[(0, Some(4), 1, true)]) };
        assert_eq!(s.judge(&other).phase(), Some(Phase::Prefill));
    }

    #[test]
    fn batches_without_positions_follow_outputs_alone() {
        // llama-bench and llama-cli: `llama_batch_get_one`, no positions, the last token's output.
        let mut s = Sequences::default();
        assert_eq!(s.judge(&batch(&[(0, None, 512, true)])).label(), "prefill: 1 prompt of 512");
        assert_eq!(s.judge(&batch(&[(0, None, 1, true)])).label(), "decode 1 seq x 1");
        assert_eq!(s.judge(&batch(&[(0, None, 1, true)])).phase(), Some(Phase::Decode));
    }

    #[test]
    fn unread_tokens_are_said_and_counted_apart() {
        let mut s = Sequences::default();
        let c = s.judge(&StepBatch { unread: 952, ..batch(&[(0, Some(0), 2048, false)]) });
        assert_eq!(c.label(), "prefill: 1 prompt of 2048 + 952 unread");
        assert_eq!((c.prompt_tokens(), c.tokens()), (2048, 3000));
    }

    #[test]
    fn sequence_states_are_bounded() {
        let mut s = Sequences::default();
        for seq in 0..MAX_SEQUENCE_STATES as i32 + 10 {
            s.judge(&batch(&[(seq, Some(0), 3, true)]));
        }
        assert_eq!(s.states.len(), MAX_SEQUENCE_STATES);
        assert_eq!(s.untracked, 10);
    }
}
