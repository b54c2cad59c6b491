//! Exact repeats of launches, counted in the kernel instead of written one by one.
//!
//! Each traced thread's launches form a sequence. A launch equal in every field its record would carry
//! (time aside) to the launch `period` places before it in its thread's sequence (within the last
//! [`RUN_HISTORY`]) continues a run: it adds to the run's count. The run is written as one
//! [`RepeatRecord`] before the thread's next record of any kind, at its exit, or at [`RUN_MAX`] launches;
//! user space expands it into the launches it stands for, the sequence exact, the repeats' own times
//! (entry and duration) given up.

use crate::{ARG_SLOTS, RecordHeader};

/// Launches of a thread a run may look back over: a whole decode step of a model of some fifty layers (about
/// twenty launches each), so that a step repeats the one before it.
pub const RUN_HISTORY: usize = 1024;
/// Distinct launches (shapes) a thread's history holds: past them the history starts afresh.
pub const RUN_SHAPES: usize = 256;
/// Slots of the table a shape is found by (its key's fold).
pub const RUN_FOLD_SLOTS: usize = 512;
/// Most launches one [`RepeatRecord`] stands for: a run that reaches it is written and a new one begins,
/// so that expanding one record is bounded.
pub const RUN_MAX: u32 = 1 << 20;
/// A history position that holds no shape (a launch that reads parameters: nothing repeats it).
pub const RUN_NO_SHAPE: u16 = u16::MAX;
/// A [`CallRecord`](crate::CallRecord) flag: the launch is in its thread's run history (the kernel will
/// count repeats of it), so user space keeps it in its copy of that history.
pub const CALL_IN_RUNS: u64 = 1 << 5;

/// A run of launches, each equal to the one `period` places before it in its thread's launch sequence.
///
/// Written before the thread's next record (so the thread's records stay in order), with the header of
/// the run's first launch (its kind [`RecordKind::Repeat`](crate::RecordKind::Repeat), its function and
/// library those of the run's last launch).
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RepeatRecord {
    pub header: RecordHeader,
    /// The entry time of the run's last launch (the header holds its first's).
    pub last_ns: u64,
    /// The launches' durations summed (launches probed at their return; 0 for one-trap launches).
    pub dur_ns: u64,
    /// Launches the run stands for (1 to [`RUN_MAX`]).
    pub count: u32,
    /// How far back each repeats (1 to [`RUN_HISTORY`]).
    pub period: u32,
}

/// What a launch is compared by.
///
/// Its probe's cookie (function, library, what was read), its argument slots (the parameter array's own
/// address left out: a stack address, read through, never recorded), its caller, its flags and its return
/// value.
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunKey {
    pub cookie: u64,
    pub args: [u64; ARG_SLOTS],
    pub caller: u64,
    pub flags: u64,
    pub ret: u64,
}

/// One thread's run state: its last [`RUN_HISTORY`] launches, each as the index of its shape, and the run
/// under way.
///
/// The value of the eBPF map keyed by `pid_tgid`; an entry exists only while its thread is traced (made
/// at a traced launch, taken at the thread's exit or exec and when its process leaves the filter), so a
/// launch that finds it needs no other lookup to continue a run.
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ThreadRuns {
    /// The distinct launches in use (the first `shapes_used`).
    pub shapes: [RunKey; RUN_SHAPES],
    /// Each shape's fold, and the last position it was at ([`u64::MAX`]: none).
    pub shape_folds: [u64; RUN_SHAPES],
    pub shape_last: [u64; RUN_SHAPES],
    /// Shape index + 1 by fold (0: none; a stale slot fails the check against the shape).
    pub fold_slots: [u16; RUN_FOLD_SLOTS],
    /// The shape at each position modulo [`RUN_HISTORY`] ([`RUN_NO_SHAPE`]: none).
    pub history: [u16; RUN_HISTORY],
    /// The launch being compared.
    pub cand: RunKey,
    /// Launches placed in the history so far (the next one's position).
    pub pos: u64,
    /// The first position a run may look back to: past a launch or run whose record the ring could not
    /// take (user space never saw it), or where the shapes started afresh.
    pub valid_from: u64,
    pub shapes_used: u64,
    /// The run under way: its period (0: none), count, first and last entry times, durations summed.
    pub period: u64,
    pub count: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    pub dur_ns: u64,
    /// The cookie of the run's last launch (its record's function and library).
    pub cookie: u64,
    /// The period of the last run written: tried first when a new one begins (a decode step repeats the
    /// step before it, whose launches the nearest equal one would not find).
    pub last_period: u64,
}

/// The fold a key is found by (two keys equal fold equal; a fold that matches is checked whole).
#[inline(always)]
pub const fn fold(k: &RunKey) -> u64 {
    let mut h = k.cookie ^ k.caller.rotate_left(17) ^ k.flags.rotate_left(29) ^ k.ret.rotate_left(41);
    let mut i = 0;
    while i < ARG_SLOTS {
        h = (h ^ k.args[i]).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        i += 1;
    }
    h
}
