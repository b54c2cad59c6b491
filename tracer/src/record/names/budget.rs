//! What naming holds for one process, one user, and the whole recording: a process's own limits (and whether
//! one of its tables has room: [`room`], [`room_in`]), a budget per uid and one for all.
//!
//! A process's own limits ([`MAX_KERNELS_PER_PROCESS`], [`MAX_UNNAMED_PER_PROCESS`]) do
//! not bound a user, who can start many processes: 64 processes of one user each inventing 20 000 kernel
//! handles made a recording hold a million of them. So each process image charges what it holds (kernel
//! handles and the names waiting for one, those of them unnamed, the addresses found outside every file
//! mapping) to its user, the real uid read once from `/proc/PID/status` when it first binds something,
//! and to the recording; past either budget a new one is refused and counted, per uid (footer
//! `kernel_handles_over_budget_uid_<uid>`, `maps_reads_over_budget_uid_<uid>`; `unknown` for a process
//! that ended before its uid was read), and the recording of everyone else goes on. A process image gives
//! back what it held when naming lets it go (its exit, its exec), so a user's next programs have room
//! again.

use crate::trace::{
    self,
    counted::{Counted, Counting, Counts},
};
use std::{
    cell::RefCell,
    collections::{BTreeMap, HashMap, HashSet},
    rc::Rc,
};

/// Kernel handles one process can make tracer hold (registered, looked up, named from its files, pipelines;
/// named or not); a handle past it is counted (`kernel_handles_over_limit`) and its launches recorded
/// without a kernel id. Far above any real program (Debian's rocSPARSE registers 12 425 kernels; a
/// `llama-cli` start 16 444), far below what a process that invents handles could make tracer keep.
pub(crate) const MAX_KERNELS_PER_PROCESS: usize = trace::MAX_KERNELS_PER_PROCESS;
/// Of those, handles no source names (an invented function pointer, an unknown kernel object): each costs a
/// kernel record and, outside every file mapping, a look at the process's maps.
pub(crate) const MAX_UNNAMED_PER_PROCESS: usize = trace::MAX_UNNAMED_PER_PROCESS;

/// Whether a per-process table has room for `key` (it holds it already, or is below
/// [`MAX_KERNELS_PER_PROCESS`]).
pub(crate) fn room<K: std::hash::Hash + Eq, V, S: std::hash::BuildHasher>(map: &HashMap<K, V, S>, key: &K) -> bool {
    map.len() < MAX_KERNELS_PER_PROCESS || map.contains_key(key)
}

/// The same for a per-process set.
pub(crate) fn room_in<K: std::hash::Hash + Eq, S: std::hash::BuildHasher>(set: &HashSet<K, S>, key: &K) -> bool {
    set.len() < MAX_KERNELS_PER_PROCESS || set.contains(key)
}

/// The user a process runs as: its real uid (None: not known, the process had ended).
pub(crate) type Uid = Option<u32>;

/// What a budget counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Kernel handles bound (named or not), and symbols and library kernels waiting for their handle.
    Kernels = 0,
    /// Of those, handles bound without a name.
    Unnamed = 1,
    /// Addresses found outside every file mapping of a process, for which its maps were read again.
    Outside = 2,
}

const KINDS: usize = 3;

/// One user's budget, by [`Kind`]: 131 072 kernels, 8 times a `llama-cli` start (16 444) and 10 times
/// Debian's rocSPARSE (12 425 registrations), so that a user's several real programs fit; 32 768 unnamed
/// handles and addresses outside every mapping, two processes' own limits (a real program has a few:
/// late attach leaves some objects unnamed). One process that invents handles stays within its own limit
/// (16 384), 64 of them share 32 768 where they held a million.
pub(crate) const PER_UID: [usize; KINDS] = [1 << 17, 1 << 15, 1 << 15];
/// The whole recording's budget: four users at their full budgets. At these, what naming holds stays in
/// tens of MiB for unnamed handles (about 100 bytes each, with their maps look), and within a few hundred
/// MiB however long the names registered (480 bytes at most).
pub(crate) const RECORDING: [usize; KINDS] = [1 << 19, 1 << 17, 1 << 17];

/// What the budgets hold and refused.
#[derive(Default)]
struct Ledger {
    /// Per user: what its live process images hold, by kind.
    held: BTreeMap<Uid, [usize; KINDS]>,
    /// What every process image holds, by kind.
    total: [usize; KINDS],
    /// Per user: what was refused, by kind (whichever budget was spent).
    over: BTreeMap<Uid, [u64; KINDS]>,
    /// What was refused because the recording's budget was spent (the user's was not).
    over_recording: [u64; KINDS],
}

/// The budgets of a recording, shared by every process image's [`Charge`].
#[derive(Clone, Default)]
pub(crate) struct Budgets(Rc<RefCell<Ledger>>);

/// What one process image holds against its user's budget and the recording's: given back when dropped.
pub(crate) struct Charge {
    ledger: Rc<RefCell<Ledger>>,
    uid: Uid,
    held: [usize; KINDS],
}

impl Budgets {
    /// A new process image of user `uid`, holding nothing yet.
    pub(crate) fn charge(&self, uid: Uid) -> Charge {
        Charge { ledger: Rc::clone(&self.0), uid, held: [0; KINDS] }
    }

    /// The footer's counters, by name (tests).
    #[cfg(test)]
    pub(crate) fn counters(&self) -> Vec<(String, u64)> {
        let mut counts = Counts::default();
        self.counted(&mut counts);
        counts.named().collect()
    }
}

impl Counting for Budgets {
    /// What was refused, per user and kind, and for the recording.
    fn counted(&self, out: &mut Counts) {
        let Ok(ledger) = self.0.try_borrow() else { return };
        for (uid, over) in &ledger.over {
            let uid = uid.map_or_else(|| "unknown".to_owned(), |u| u.to_string());
            // Handles and the names waiting for one are refused alike: one counter for the user.
            let handles = over[Kind::Kernels as usize].saturating_add(over[Kind::Unnamed as usize]);
            if handles > 0 {
                out.add_per(Counted::KernelHandlesOverBudget, &uid, handles);
            }
            if over[Kind::Outside as usize] > 0 {
                out.add_per(Counted::MapsReadsOverBudget, &uid, over[Kind::Outside as usize]);
            }
        }
        let r = ledger.over_recording;
        out.set_nonzero(
            Counted::KernelHandlesOverRecordingBudget,
            r[Kind::Kernels as usize].saturating_add(r[Kind::Unnamed as usize]),
        );
        out.set_nonzero(Counted::MapsReadsOverRecordingBudget, r[Kind::Outside as usize]);
    }
}

impl Budgets {
    /// What every live process image holds, by kind (tests).
    #[cfg(test)]
    fn total(&self) -> [usize; KINDS] {
        self.0.borrow().total
    }
}

impl Charge {
    /// Whether one more of `kind` fits its user's budget and the recording's; a refusal is counted.
    pub(crate) fn room(&self, kind: Kind) -> bool {
        let Ok(mut ledger) = self.ledger.try_borrow_mut() else { return false };
        let k = kind as usize;
        let user = ledger.held.get(&self.uid).map_or(0, |h| h[k]);
        let (user_full, all_full) = (user >= PER_UID[k], ledger.total[k] >= RECORDING[k]);
        if user_full || all_full {
            let over = ledger.over.entry(self.uid).or_default();
            over[k] = over[k].saturating_add(1);
            if !user_full {
                ledger.over_recording[k] = ledger.over_recording[k].saturating_add(1);
            }
            return false;
        }
        true
    }

    /// One more of `kind` held (checked with [`Charge::room`] first).
    pub(crate) fn add(&mut self, kind: Kind) {
        let Ok(mut ledger) = self.ledger.try_borrow_mut() else { return };
        let k = kind as usize;
        self.held[k] += 1;
        ledger.total[k] = ledger.total[k].saturating_add(1);
        let user = ledger.held.entry(self.uid).or_default();
        user[k] = user[k].saturating_add(1);
    }

    /// One of `kind` no longer held (an unnamed handle given its name).
    pub(crate) fn sub(&mut self, kind: Kind) {
        let k = kind as usize;
        if self.held[k] == 0 {
            return;
        }
        let Ok(mut ledger) = self.ledger.try_borrow_mut() else { return };
        self.held[k] -= 1;
        ledger.total[k] = ledger.total[k].saturating_sub(1);
        if let Some(user) = ledger.held.get_mut(&self.uid) {
            user[k] = user[k].saturating_sub(1);
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        let Ok(mut ledger) = self.ledger.try_borrow_mut() else { return };
        for (total, held) in ledger.total.iter_mut().zip(self.held) {
            *total = total.saturating_sub(held);
        }
        if let Some(user) = ledger.held.get_mut(&self.uid) {
            for (n, held) in user.iter_mut().zip(self.held) {
                *n = n.saturating_sub(held);
            }
            if user.iter().all(|&n| n == 0) {
                ledger.held.remove(&self.uid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_processes_share_its_budget_and_give_it_back_when_let_go() {
        let budgets = Budgets::default();
        let mut first = budgets.charge(Some(1000));
        for _ in 0..PER_UID[Kind::Unnamed as usize] {
            assert!(first.room(Kind::Unnamed));
            first.add(Kind::Unnamed);
        }
        // Another process of the same user finds the budget spent; another user's has room.
        let second = budgets.charge(Some(1000));
        assert!(!second.room(Kind::Unnamed));
        assert!(!second.room(Kind::Unnamed));
        assert!(budgets.charge(Some(0)).room(Kind::Unnamed));
        assert!(second.room(Kind::Kernels));
        let said = budgets.counters();
        assert_eq!(said, [("kernel_handles_over_budget_uid_1000".to_owned(), 2)]);
        // The first let go: the user has room again, the refusals stay counted.
        drop(first);
        assert!(second.room(Kind::Unnamed));
        assert_eq!(budgets.total(), [0; KINDS]);
        assert_eq!(budgets.counters(), said);
    }

    #[test]
    fn the_recordings_budget_bounds_every_user_together() {
        let budgets = Budgets::default();
        let per_user = PER_UID[Kind::Outside as usize];
        let users = RECORDING[Kind::Outside as usize] / per_user;
        let mut held: Vec<Charge> = (0..users).map(|u| budgets.charge(u32::try_from(u).ok())).collect();
        for c in &mut held {
            for _ in 0..per_user {
                c.add(Kind::Outside);
            }
        }
        let late = budgets.charge(None);
        assert!(!late.room(Kind::Outside));
        let c = budgets.counters();
        assert!(c.contains(&("maps_reads_over_budget_uid_unknown".to_owned(), 1)), "{c:?}");
        assert!(c.contains(&("maps_reads_over_recording_budget".to_owned(), 1)), "{c:?}");
        held.truncate(users - 1);
        assert!(late.room(Kind::Outside));
    }
}
