//! Exact repeats of a thread's launches, counted instead of written (see `tracer_common::runs`).
//!
//! A launch's key (its cookie, argument slots, caller, flags and result) is written into its thread's entry.
//! It continues the run under way when it equals the shape one period back in the history: then it is
//! counted, and the launch program returns without touching the ring or another map. Otherwise the run is
//! written, and a launch that may repeat (its parameters planned to be read: none) is found among the
//! thread's shapes by its fold (or becomes a new one), and begins a new run when its shape was at the last
//! run's period back, or anywhere within the history (the nearest); failing that it is written, flagged
//! [`CALL_IN_RUNS`](tracer_common::CALL_IN_RUNS), so that user space keeps the same history. Every step is
//! a constant number of instructions: no search.

use tracer_common::{
    ARG_SLOTS, Counter, RUN_FOLD_SLOTS, RUN_HISTORY, RUN_MAX, RUN_NO_SHAPE, RUN_SHAPES, RunKey, ThreadRuns, cookie,
    fold,
};

use crate::maps::{RUNS, RUNS_ZERO, count, runs_enabled, write_run};

const HISTORY_MASK: u64 = RUN_HISTORY as u64 - 1;
const SHAPE_MASK: u64 = RUN_SHAPES as u64 - 1;
const FOLD_MASK: u64 = RUN_FOLD_SLOTS as u64 - 1;
/// No position yet.
const NEVER: u64 = u64::MAX;

/// The thread's run state, when it has one (an entry also says the thread is traced), and runs are counted.
#[inline(always)]
pub(crate) fn of(pid_tgid: u64) -> Option<*mut ThreadRuns> {
    if !runs_enabled() {
        return None;
    }
    RUNS.get_ptr_mut(pid_tgid)
}

/// A new entry for a traced thread (at its first launch that may repeat), or none when the map is full
/// (counted: the thread's launches are then written one by one).
#[inline(always)]
pub(crate) fn make(pid_tgid: u64) -> Option<*mut ThreadRuns> {
    if !runs_enabled() {
        return None;
    }
    let zero = RUNS_ZERO.get_ptr(0)?;
    #[expect(
        clippy::needless_borrows_for_generic_args,
        reason = "the map copies from the template in place: a value of 36 KiB does not fit the 512-byte stack"
    )]
    // SAFETY: a map value pointer the lookup just returned, valid for this program run, never written.
    let inserted = RUNS.insert(pid_tgid, unsafe { &*zero }, u64::from(aya_ebpf::bindings::BPF_NOEXIST));
    let r = RUNS.get_ptr_mut(pid_tgid);
    if inserted.is_err() && r.is_none() {
        count(Counter::RunThreadsFull);
    }
    r
}

/// Writes a launch's key into the entry, to be compared.
///
/// # Safety
/// `r` points into the thread's live entry, written only by this thread's programs.
#[inline(always)]
pub(crate) unsafe fn fill(r: *mut ThreadRuns, c: u64, args: &[u64; ARG_SLOTS], caller: u64, flags: u64, ret: u64) {
    // SAFETY: the caller's promise.
    unsafe {
        let k = &mut (*r).cand;
        k.cookie = c;
        k.args = *args;
        // The parameter array's slot: a stack address the parameters are read through, in no record.
        if c & cookie::PARAMS != 0 {
            let skip = cookie::params_arg(c);
            if skip < ARG_SLOTS {
                k.args[skip] = 0;
            }
        }
        k.caller = caller;
        k.flags = flags;
        k.ret = ret;
    }
}

/// Whether two keys are equal: their words' differences gathered without a branch (a branch per word would
/// multiply the paths the verifier walks).
#[inline(always)]
const fn same(a: &RunKey, b: &RunKey) -> bool {
    let mut diff = (a.cookie ^ b.cookie) | (a.caller ^ b.caller) | (a.flags ^ b.flags) | (a.ret ^ b.ret);
    let mut i = 0;
    while i < ARG_SLOTS {
        diff |= a.args[i] ^ b.args[i];
        i += 1;
    }
    diff == 0
}

/// Places shape `shape` at the next position.
///
/// # Safety
/// As [`fill`].
#[inline(always)]
unsafe fn place(r: *mut ThreadRuns, shape: u16) {
    // SAFETY: the caller's promise; indexes are masked into the arrays.
    unsafe {
        let pos = (*r).pos;
        (*r).history[(pos & HISTORY_MASK) as usize] = shape;
        if shape != RUN_NO_SHAPE {
            (*r).shape_last[(u64::from(shape) & SHAPE_MASK) as usize] = pos;
        }
        (*r).pos = pos + 1;
    }
}

/// The shape at `period` places back, if that position is one user space saw and holds one.
///
/// # Safety
/// As [`fill`].
#[inline(always)]
unsafe fn shape_back(r: *mut ThreadRuns, period: u64) -> Option<u16> {
    // SAFETY: the caller's promise; the index is masked into the array.
    unsafe {
        let pos = (*r).pos;
        if period == 0 || period >= RUN_HISTORY as u64 || period > pos.saturating_sub((*r).valid_from) {
            return None;
        }
        let shape = (*r).history[(pos.wrapping_sub(period) & HISTORY_MASK) as usize];
        (shape != RUN_NO_SHAPE).then_some(shape)
    }
}

/// Whether the launch just filled in continues the run under way: if so it is counted (entered at `ts`,
/// lasting `dur`) and placed in the history.
///
/// # Safety
/// As [`fill`].
#[inline(always)]
pub(crate) unsafe fn continues(r: *mut ThreadRuns, ts: u64, dur: u64) -> bool {
    // SAFETY: the caller's promise; indexes are masked into the arrays.
    unsafe {
        if (*r).count >= u64::from(RUN_MAX) {
            return false;
        }
        let Some(shape) = shape_back(r, (*r).period) else { return false };
        if !same(&(*r).shapes[(u64::from(shape) & SHAPE_MASK) as usize], &(*r).cand) {
            return false;
        }
        place(r, shape);
        (*r).count += 1;
        (*r).last_ns = ts;
        (*r).dur_ns = (*r).dur_ns.wrapping_add(dur);
        (*r).cookie = (*r).cand.cookie;
        true
    }
}

/// The shape of the launch just filled in: found by its fold, else made (the shapes start afresh when all
/// are in use: nothing before may be repeated then).
///
/// # Safety
/// As [`fill`].
#[inline(always)]
unsafe fn shape_of(r: *mut ThreadRuns) -> u16 {
    // SAFETY: the caller's promise; indexes are masked into the arrays.
    unsafe {
        let f = fold(&(*r).cand);
        let slot = (f & FOLD_MASK) as usize;
        let found = u64::from((*r).fold_slots[slot]);
        if found != 0 && found <= (*r).shapes_used {
            let s = ((found - 1) & SHAPE_MASK) as usize;
            if (*r).shape_folds[s] == f && same(&(*r).shapes[s], &(*r).cand) {
                return s as u16;
            }
        }
        if (*r).shapes_used >= RUN_SHAPES as u64 {
            (*r).shapes_used = 0;
            (*r).valid_from = (*r).pos;
        }
        let s = ((*r).shapes_used & SHAPE_MASK) as usize;
        (*r).shapes_used += 1;
        (*r).shapes[s] = (*r).cand;
        (*r).shape_folds[s] = f;
        (*r).shape_last[s] = NEVER;
        (*r).fold_slots[slot] = (s + 1) as u16;
        s as u16
    }
}

/// A launch, just filled in, that does not continue the run: the run is written, then the launch begins a
/// new run when it may repeat and its shape was at the last run's period back, or within the history (the
/// nearest; true: nothing to write); else it is placed for later launches to repeat (false: the caller
/// writes it, flagged `CALL_IN_RUNS`). One that may not repeat (it reads parameters) is placed as no shape.
///
/// # Safety
/// As [`fill`].
#[inline(always)]
pub(crate) unsafe fn begin(r: *mut ThreadRuns, pid_tgid: u64, ts: u64, dur: u64, repeatable: bool) -> bool {
    // SAFETY: the caller's promise; indexes are masked into the arrays.
    unsafe {
        write_run(r, pid_tgid);
        if !repeatable {
            place(r, RUN_NO_SHAPE);
            return false;
        }
        let shape = shape_of(r);
        let pos = (*r).pos;
        let last = (*r).shape_last[(u64::from(shape) & SHAPE_MASK) as usize];
        let period = if shape_back(r, (*r).last_period) == Some(shape) {
            (*r).last_period
        } else if last != NEVER && shape_back(r, pos.wrapping_sub(last)) == Some(shape) {
            pos.wrapping_sub(last)
        } else {
            0
        };
        place(r, shape);
        if period == 0 {
            return false;
        }
        (*r).period = period;
        (*r).count = 1;
        (*r).first_ns = ts;
        (*r).last_ns = ts;
        (*r).dur_ns = dur;
        (*r).cookie = (*r).cand.cookie;
        true
    }
}

/// The record of a launch placed by [`begin`] could not be written: nothing up to it may be repeated.
///
/// # Safety
/// As [`fill`].
#[inline(always)]
pub(crate) unsafe fn lost(r: *mut ThreadRuns) {
    // SAFETY: the caller's promise.
    unsafe {
        (*r).valid_from = (*r).pos;
    }
}

/// The thread ends (exit, or exec: its launches begin again): its run is written and its entry taken.
#[inline(always)]
pub(crate) fn end_thread(pid_tgid: u64) {
    if let Some(r) = RUNS.get_ptr_mut(pid_tgid) {
        // SAFETY: the live entry of the current thread.
        unsafe {
            write_run(r, pid_tgid);
        }
        #[expect(clippy::let_underscore_must_use, reason = "an entry already gone needs nothing done")]
        let _: Result<(), _> = RUNS.remove(pid_tgid);
    }
}
