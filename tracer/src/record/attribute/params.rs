//! A launch's or dispatch's kernel parameters, joined to it from the record read just before, and the plans
//! that tell the eBPF side which to read.

use std::collections::BTreeMap;

use super::Process;
use crate::trace::counted::{Counted, Counts};

/// The parameters (or a dispatch's argument words) read just before the record of thread `tid` at
/// `ts` for `handle`, keeping those the plan asks for; None when none were read for it. A plan made
/// just now goes to the effects' `plans`: from then on the eBPF side reads only those parameters (or argument
/// words) of `handle` in process `pid`.
pub(super) fn take_params(
    p: &mut Process,
    counters: &mut Counts,
    new_plans: &mut Vec<(u32, u64, u32)>,
    pid: u32,
    (tid, ts, handle): (u32, u64, u64),
    (plan, new_plan): (u32, bool),
) -> Option<BTreeMap<u8, u64>> {
    if new_plan {
        give_plan(&mut p.planned, new_plans, pid, handle, plan);
    }
    if p.pending_params.is_empty() {
        return None;
    }
    let params = p.pending_params.remove(&tid)?;
    if params.origin.ts != ts || params.handle != handle {
        counters.bump(Counted::ParamsWithoutLaunch);
        return None;
    }
    let kept: BTreeMap<u8, u64> = params.values.into_iter().filter(|&(i, _)| plan & (1 << i) != 0).collect();
    if kept.len() != plan.count_ones() as usize {
        // Needed but not read: an address that could not be read, or a plan set to none before the
        // function was named.
        counters.bump(Counted::ParamsUnread);
    }
    Some(kept)
}

/// A plan for the eBPF plan map: `plan` for `handle` in process `pid`, remembered in the process's `planned`
/// so that it is taken back when the process goes.
pub(super) fn give_plan(planned: &mut Vec<u64>, plans: &mut Vec<(u32, u64, u32)>, pid: u32, handle: u64, plan: u32) {
    plans.push((pid, handle, plan));
    planned.push(handle);
}
