//! A launch's or dispatch's kernel parameters, joined to it from the record read just before, and the plans
//! that tell the eBPF side which to read.

use std::collections::BTreeMap;

use super::{Process, bump};

/// The parameters (or a dispatch's argument words) read just before the record of thread `tid` at
/// `ts` for `handle`, keeping those the plan asks for; None when none were read for it. A plan made
/// just now goes to the effects' `plans`: from then on the eBPF side reads only those parameters (or argument
/// words) of `handle` in process `pid`.
pub(super) fn take_params(
    p: &mut Process,
    counters: &mut BTreeMap<String, u64>,
    new_plans: &mut Vec<(u32, u64, u32)>,
    pid: u32,
    (tid, ts, handle): (u32, u64, u64),
    (plan, new_plan): (u32, bool),
) -> Option<BTreeMap<u8, u64>> {
    if new_plan {
        new_plans.push((pid, handle, plan));
        p.planned.push(handle);
    }
    if p.pending_params.is_empty() {
        return None;
    }
    let params = p.pending_params.remove(&tid)?;
    if params.origin.ts != ts || params.handle != handle {
        bump(counters, "params_without_launch");
        return None;
    }
    let kept: BTreeMap<u8, u64> = params.values.into_iter().filter(|&(i, _)| plan & (1 << i) != 0).collect();
    if kept.len() != plan.count_ones() as usize {
        // Needed but not read: an address that could not be read, or a plan set to none before the
        // function was named.
        bump(counters, "params_unread");
    }
    Some(kept)
}
