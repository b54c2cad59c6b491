//! Calls into the exported functions of the GPU libraries a traced process maps (hipBLAS, rocSPARSE,
//! cuBLAS, ggml's backends, ...), counted in the kernel: one trap and one counter per call, no record.
//!
//! User space attaches [`library_entry`] to every exported C function of a library with one
//! `uprobe_multi` link, each point with a cookie that indexes its table of (library, function). It loads
//! this program itself (see the user side's `uprobe_multi` module): aya 0.14 cannot load a program for
//! multi-point links yet. The link may filter by process; the program filters again, since the kernel's
//! PID filter for these links is reliable only from Linux 6.10.
//!
//! A process that runs llama.cpp's `llama_decode` also counts each call in its step tally, in the slot
//! the cookie's upper half names ([`tracer_common::step_slot`]): the next batch record carries those
//! counts, so each call lands in the step it was made in.

use aya_ebpf::{
    EbpfContext as _,
    bindings::BPF_NOEXIST,
    helpers::{bpf_get_current_pid_tgid, generated::bpf_get_attach_cookie},
    macros::uprobe,
    programs::ProbeContext,
};
use core::intrinsics::{AtomicOrdering, atomic_xadd};

use tracer_common::{Counter, EntryKey, STEP_SLOTS};

use crate::maps::{ENTRY_CALLS, STEP_TALLY, count, traced};

#[uprobe]
pub(crate) fn library_entry(ctx: ProbeContext) -> u32 {
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    if !traced(tgid) {
        return 0;
    }
    // SAFETY: the context pointer is the probe's own pt_regs.
    let cookie = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    if let Some(t) = STEP_TALLY.get_ptr_mut(tgid) {
        let slot = ((cookie >> 32) as usize) & (STEP_SLOTS - 1);
        // SAFETY: `t` points into the live map value; the add is atomic (several threads may call).
        unsafe {
            atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(&raw mut (*t).calls[slot], 1);
        }
    }
    let key = EntryKey { tgid, point: cookie as u32 };
    if add_one(&key) {
        return 0;
    }
    // The first call of this function by this process: a new entry. Another CPU may create it first, so a
    // refused insert is tried as an add once more; only a full map loses the call (counted).
    if ENTRY_CALLS.insert(key, 1, u64::from(BPF_NOEXIST)).is_err() && !add_one(&key) {
        count(Counter::EntryCallLost);
    }
    0
}

/// Adds one to the entry's count, if it has one.
#[inline(always)]
fn add_one(key: &EntryKey) -> bool {
    let Some(slot) = ENTRY_CALLS.get_ptr_mut(key) else { return false };
    // SAFETY: the map value is a valid, aligned u64 while the program runs; LLVM lowers this intrinsic to
    // the BPF atomic add (several CPUs may count the same entry).
    unsafe {
        atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(slot, 1);
    }
    true
}
