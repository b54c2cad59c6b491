//! A pass's graph input as ggml's scheduler copied it to the device: llama.cpp's token positions or output
//! rows, from the ring to the trace file.

use serde::{Deserialize, Serialize};

/// Which of a pass's inputs a [`GraphInput`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    /// `inp_pos`: each token's position in its sequence, in batch order.
    Positions,
    /// `out_ids`: the rows (tokens of the pass, counted from 0) whose output is kept, in order.
    Outputs,
}

impl InputKind {
    pub(crate) const fn from_raw(which: u32) -> Option<Self> {
        match which & 0xff {
            tracer_common::INPUT_POSITIONS => Some(Self::Positions),
            tracer_common::INPUT_OUTPUT_ROWS => Some(Self::Outputs),
            _ => None,
        }
    }
}

/// One graph input of a pass, copied to the device through `ggml_backend_tensor_set`.
///
/// Read at its entry, just after the pass's `ggml_backend_sched_graph_compute_async`: its values as runs of
/// consecutive values (a prompt's positions are one run; a step of two decoding sequences, two runs of one).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphInput {
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub lib: u32,
    pub input: Option<InputKind>,
    /// Values set: the bytes given over 4 (positions: one per token, four under M-RoPE; rows: one per
    /// output).
    pub count: u64,
    /// The values read, as `[first, length]` runs of consecutive values, in order.
    pub runs: Vec<(i32, u32)>,
    /// Values set but not read: past [`tracer_common::INPUT_VALUES_MAX`], or all of them after a fault.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unread: u64,
    /// The values could not be read.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fault: bool,
    /// Set from this byte offset of the tensor (a copy sets it whole, from 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub offset: u64,
}

#[expect(clippy::trivially_copy_pass_by_ref, reason = "serde's skip_serializing_if passes a reference")]
const fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl GraphInput {
    /// Values as runs of consecutive values (each one more than the last), in order.
    pub(crate) fn runs_of(values: impl IntoIterator<Item = i32>) -> Vec<(i32, u32)> {
        let mut runs: Vec<(i32, u32)> = Vec::new();
        for v in values {
            match runs.last_mut() {
                Some((first, len)) if i64::from(*first) + i64::from(*len) == i64::from(v) => *len += 1,
                _ => runs.push((v, 1)),
            }
        }
        runs
    }

    /// The values read, in order (runs expanded, each bounded by what a record holds).
    pub(crate) fn values(&self) -> impl Iterator<Item = i32> + '_ {
        self.runs.iter().flat_map(|&(first, len)| {
            (0..len.min(tracer_common::INPUT_VALUES_MAX as u32)).map(move |i| first.wrapping_add(i as i32))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_group_into_runs_and_back() {
        let v = [0, 1, 2, 57, 12, 13, -1, i32::MAX];
        let runs = GraphInput::runs_of(v);
        assert_eq!(runs, vec![(0, 3), (57, 1), (12, 2), (-1, 1), (i32::MAX, 1)]);
        let g = GraphInput { runs, ..GraphInput::default() };
        assert_eq!(g.values().collect::<Vec<_>>(), v);
    }
}
