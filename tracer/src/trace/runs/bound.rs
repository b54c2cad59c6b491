//! How many launches a file's `repeat` lines may stand for: a line of ~100 bytes claims up to 2^20 launches,
//! and 100 000 such lines compress to 155 KB, so a reader expanding them all would make 10^11 launches (a
//! day of `tracer report`, terabytes of export) from a file that small. Every reader's launches from
//! `repeat` lines are made here ([`Bound::expand`]), within an allowance that grows with the bytes of the
//! file as stored (compressed, if it is): [`LAUNCHES_PER_STORED_BYTE`] a byte, at least [`FLOOR`] and at
//! most [`MAX_LAUNCHES`] a file. Past it, a line's launches are not made: they are counted
//! ([`RepeatsCut`]) and every reader says so, and the thread's history goes on as if they had been made,
//! so the lines after read as they would have.
//!
//! Why 16 a byte: a steady decode writes one run a token (docs/figures.md, "Run counts for exact repeats":
//! 24 613 of 24 785 runs a token on the H200, 81 launches each), with its logits copy and synchronization;
//! the writer ends a zstd frame every 100 ms, so few tokens share a frame. Tokens of 1 000 launches at 20
//! to 200 tokens/s come to 3 to 23 launches a stored byte (tokens of 82 launches, the stand-in's, to 3).
//! A tight loop of one kernel makes one line for 2^20 launches (`mini_runner loop 1000000`: 999 999 of
//! them in 5 080 bytes, 197 a byte; `layers 100000`: 92 a byte): the floor keeps a file's first 2^20,
//! and a longer loop is cut and said. The 155 KB file above gets 2.5 M launches (about a second of
//! `tracer report`).

use serde::Serialize;
use tracer_common::RUN_MAX;

use super::{History, expand, expand_first};
use crate::trace::schema::{Launch, Repeat};

/// Launches a file's `repeat` lines may stand for, per byte of the file as stored.
pub(crate) const LAUNCHES_PER_STORED_BYTE: u64 = 16;
/// Launches any file's `repeat` lines may stand for, however small: one whole run.
pub(crate) const FLOOR: u64 = RUN_MAX as u64;
/// Launches no file's `repeat` lines stand for past this, however large.
pub(crate) const MAX_LAUNCHES: u64 = 1 << 32;

/// The launches a file's `repeat` lines stood for past the reader's allowance: not made, counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct RepeatsCut {
    /// Launches not made.
    pub(crate) launches: u64,
    /// `repeat` lines whose launches were not all made, and the first one's line number.
    pub(crate) lines: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) first_line: Option<u64>,
    /// The allowance that was spent (launches), and the file's bytes as stored when it was.
    pub(crate) allowance: u64,
    pub(crate) stored_bytes: u64,
}

impl RepeatsCut {
    /// One sentence for the user when launches were cut, else None.
    pub(crate) fn sentence(&self) -> Option<String> {
        (self.launches > 0).then(|| {
            format!(
                "{} launches that {} `repeat` lines stand for (the first at line {}) were not made: a file of {} bytes \
                 as stored may stand for {} launches in runs at most ({LAUNCHES_PER_STORED_BYTE} a byte, at least \
                 {FLOOR}, at most {MAX_LAUNCHES}), so kernel counts, steps, phases and exports are short of them \
                 (a forged file, or a loop longer than a recording of that size holds)",
                self.launches,
                self.lines,
                self.first_line.unwrap_or_default(),
                self.stored_bytes,
                self.allowance,
            )
        })
    }

    /// Adds another file's cut (a rotated recording's parts).
    pub(crate) fn add(&mut self, other: &Self) {
        self.launches = self.launches.saturating_add(other.launches);
        self.lines = self.lines.saturating_add(other.lines);
        self.first_line = self.first_line.or(other.first_line);
        self.allowance = self.allowance.saturating_add(other.allowance);
        self.stored_bytes = self.stored_bytes.saturating_add(other.stored_bytes);
    }
}

/// The allowance of a file of `stored` bytes.
pub(crate) fn allowance(stored: u64) -> u64 {
    stored.saturating_mul(LAUNCHES_PER_STORED_BYTE).clamp(FLOOR, MAX_LAUNCHES)
}

/// One file's launches made from `repeat` lines so far, and those cut.
#[derive(Debug, Default)]
pub(crate) struct Bound {
    made: u64,
    cut: RepeatsCut,
}

impl Bound {
    /// The launches `r` stands for, handed to `each` while the allowance of a file of `stored` bytes (read so
    /// far) lasts; the rest placed in `history` as [`History::repeat_all`] places them, and counted.
    /// `history` is the one [`super::Expand::history_for`] gave.
    pub(crate) fn expand(
        &mut self,
        (r, lineno): (&Repeat, u64),
        history: &mut History,
        stored: u64,
        each: impl FnMut(&Launch),
    ) {
        let allowance = allowance(stored);
        let left = allowance.saturating_sub(self.made);
        let count = u64::from(r.count);
        if count <= left {
            self.made = self.made.saturating_add(count);
            expand(r, history, each);
            return;
        }
        // `left` is below `r.count`, a u32.
        let made = u32::try_from(left).unwrap_or(0);
        expand_first(r, made, history, each);
        self.made = allowance;
        let rest = r.count - made;
        // The history holds the launches a period back (the line was checked): the rest is placed.
        let _sources = history.repeat_all(r.period, rest);
        self.cut.launches = self.cut.launches.saturating_add(u64::from(rest));
        self.cut.lines = self.cut.lines.saturating_add(1);
        self.cut.first_line = self.cut.first_line.or(Some(lineno));
        (self.cut.allowance, self.cut.stored_bytes) = (allowance, stored);
    }

    /// What was cut, with the file's final size.
    pub(crate) fn finish(mut self, stored: u64) -> RepeatsCut {
        if self.cut.launches > 0 {
            (self.cut.allowance, self.cut.stored_bytes) = (allowance(stored), stored);
        }
        self.cut
    }
}
