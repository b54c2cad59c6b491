//! A run of exact repeats of a thread's launches, from the ring to the trace file: one line for launches
//! that each equal the launch `period` places before them on their thread.

use serde::{Deserialize, Serialize};

/// Launches that each repeat, in every field but their times, the launch `period` places before them.
///
/// `period` counts back in their thread's sequence of launches (the launches it repeats came before, as
/// `launch` lines or runs). The exact sequence is kept; the repeats' own times are not: readers place them evenly from `ts` (the
/// first's entry) to `last_ts` (the last's) and share `dur` (their durations summed) out evenly.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Repeat {
    /// The first repeat's entry time.
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    /// The last repeat's entry time.
    pub last_ts: u64,
    /// Launches the line stands for (1 to [`tracer_common::RUN_MAX`]).
    pub count: u32,
    /// How far back in the thread's launches each repeats (1 to [`tracer_common::RUN_HISTORY`]).
    pub period: u32,
    /// Their durations summed (launches probed at their return; 0 for one-trap launches).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dur: u64,
}

#[expect(clippy::trivially_copy_pass_by_ref, reason = "serde's skip_serializing_if passes a reference")]
const fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Repeat {
    /// The entry time and duration given to the `i`th launch of the run (from 0): times placed evenly from the
    /// first to the last, durations shared evenly (the last takes what does not divide).
    pub(crate) fn times_of(&self, i: u32) -> (u64, u64) {
        let n = u64::from(self.count.max(1));
        let i = u64::from(i).min(n - 1);
        let span = u128::from(self.last_ts.saturating_sub(self.ts));
        let step = if n > 1 { span * u128::from(i) / u128::from(n - 1) } else { 0 };
        let ts = self.ts.saturating_add(u64::try_from(step).unwrap_or(u64::MAX));
        let share = self.dur / n;
        let dur = if i == n - 1 { share + self.dur % n } else { share };
        (ts, dur)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_are_placed_evenly_and_share_their_duration() {
        let r = Repeat { ts: 100, last_ts: 400, count: 4, period: 2, dur: 10, ..Repeat::default() };
        let times: Vec<(u64, u64)> = (0..4).map(|i| r.times_of(i)).collect();
        assert_eq!(times, [(100, 2), (200, 2), (300, 2), (400, 4)]);
        // One launch: its own time; a last time before the first (a file nobody wrote) stays at the first.
        assert_eq!(Repeat { count: 1, ..r }.times_of(0), (100, 10));
        let r = Repeat { ts: 100, last_ts: 0, count: 4, period: 2, dur: 10, ..Repeat::default() };
        assert_eq!(r.times_of(3), (100, 4));
    }
}
