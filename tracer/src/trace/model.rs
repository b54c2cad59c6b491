//! The read model every reader of a trace shares: an [`Index`] of what the records name (kernels,
//! processes, the recording's clock), kept as they arrive, and one [`Visitor`] method per record kind.
//!
//! The report, the exports and the live metrics are visitors: each implements the methods of the kinds it
//! treats, looks names up in the index, and keeps only what it derives. The visitor is generated from the
//! one table of record kinds (`schema::trace_lines`): a new kind is a new method with a default that
//! ignores it.

use std::{
    borrow::Cow,
    collections::{BTreeMap, HashMap},
};

use anyhow::Result;

use super::{
    Input, ReadStatus,
    schema::{Kernel, Line, MAX_KERNELS_PER_PROCESS, MAX_UNNAMED_PER_PROCESS, Process, Source, trace_lines},
};

/// Kernel records a reader keeps of one file, every process together, and of those unnamed: a file of many
/// processes each within its own limits (64 of one user's, inventing handles, held a million unnamed
/// kernels and took `report` to 1.6 GB) is cut here, the records past it counted per process as those
/// past its own limits are. The recorder's budgets (`record/names/budget.rs`) keep what it holds at once
/// within 524 288 kernels, 131 072 unnamed; a long recording of processes that come and go can write more,
/// and a reader keeps twice that many named ones (1 048 576: 64 `llama-cli` starts of 16 444), the unnamed
/// as the recording's budget.
const MAX_KERNELS_KEPT: usize = 1 << 20;
/// Of those, kernels without a name.
const MAX_UNNAMED_KEPT: usize = 1 << 17;

/// What the records read so far name, for every visitor to look up.
#[derive(Debug, Default)]
pub(crate) struct Index {
    /// Every kernel named, by id (the ids are the recording's own, unique across processes).
    kernels: HashMap<u32, Kernel>,
    /// Each process's kernel ids, in the order they were named.
    kernels_of: HashMap<u32, Vec<u32>>,
    /// Per process: its unnamed kernels held, and its kernel records not kept past the per-process limits
    /// ([`MAX_KERNELS_PER_PROCESS`], [`MAX_UNNAMED_PER_PROCESS`]: a file the recorder wrote never passes
    /// them).
    held_of: HashMap<u32, (usize, u64)>,
    /// Unnamed kernels held, every process together ([`MAX_UNNAMED_KEPT`]).
    unnamed_kept: usize,
    /// Each process's latest process record.
    processes: BTreeMap<u32, Process>,
    /// The header's `start_mono_ns`: the recording's start on the clock of every `ts`.
    start: u64,
    /// The recording's last moment seen: the footer's end, else the latest activity (the kinds whose row
    /// says `spans`: calls, launches and their repeats, dispatches, ioctls, jobs, batches, graph inputs; not
    /// the records that describe processes or names).
    last_ts: u64,
    /// The recording did not probe synchronizations (`--lean`).
    lean: bool,
    /// A process and its kernels are dropped once its exit was visited (the live metrics, whose recording
    /// has no end); a file's reader keeps them for the summary at its end.
    forget_exited: bool,
}

impl Index {
    /// An index that drops a process and its kernels after its exit, so memory stays flat over a recording
    /// of any length, and keeps of each kernel only its id, process, handle, source and mangled name (the live
    /// metrics classify by it; a kernel is then shown by its mangled name).
    pub(crate) fn forgetting_exited() -> Self {
        Self { forget_exited: true, ..Self::default() }
    }

    /// The kernel named `id`.
    pub(crate) fn kernel(&self, id: u32) -> Option<&Kernel> {
        self.kernels.get(&id)
    }

    /// Kernel records of process `pid` not kept, past the per-process limits (0 for a file tracer wrote).
    pub(crate) fn kernels_not_kept(&self, pid: u32) -> u64 {
        self.held_of.get(&pid).map_or(0, |h| h.1)
    }

    /// The id a launch's kernel is shown by: its own, or None for a kernel whose record was not kept (past
    /// the per-process limits; its launches are shown with those that have no kernel id).
    pub(crate) fn shown_kernel(&self, pid: u32, id: Option<u32>) -> Option<u32> {
        id.filter(|id| self.kernels.contains_key(id) || self.kernels_not_kept(pid) == 0)
    }

    /// The name a kernel is shown by: demangled where it could be, else as the runtime saw it; "" for an id
    /// with no name, or none.
    pub(crate) fn kernel_name(&self, id: Option<u32>) -> &str {
        match id.and_then(|id| self.kernels.get(&id)) {
            Some(k) if !k.demangled.is_empty() => &k.demangled,
            Some(k) => &k.name,
            None => "",
        }
    }

    /// The label a kernel is shown by where a name is needed: [`Index::kernel_name`], else `unnamed` and
    /// its handle; None for an id with no kernel record, or none.
    pub(crate) fn kernel_label(&self, id: Option<u32>) -> Option<Cow<'_, str>> {
        let k = self.kernels.get(&id?)?;
        Some(match self.kernel_name(id) {
            "" => Cow::Owned(format!("unnamed {:#x}", k.handle)),
            name => Cow::Borrowed(name),
        })
    }

    /// The kernels named in process `pid`, in the order they were named.
    pub(crate) fn kernels_of(&self, pid: u32) -> impl Iterator<Item = &Kernel> {
        self.kernels_of.get(&pid).into_iter().flatten().filter_map(|id| self.kernels.get(id))
    }

    /// What the latest process record of `pid` said.
    pub(crate) fn process(&self, pid: u32) -> Option<&Process> {
        self.processes.get(&pid)
    }

    /// The recording's start on the monotonic clock of every `ts` (0 before its header).
    pub(crate) const fn start(&self) -> u64 {
        self.start
    }

    /// The recording's last moment seen: its footer's end, else its latest timed record.
    pub(crate) const fn last_ts(&self) -> u64 {
        self.last_ts
    }

    /// Whether the recording left synchronizations unprobed (`--lean`).
    pub(crate) const fn lean(&self) -> bool {
        self.lean
    }

    /// Processes and kernels held (what [`Index::forgetting_exited`] keeps flat).
    #[cfg(test)]
    pub(crate) fn held(&self) -> (usize, usize) {
        (self.processes.len(), self.kernels.len())
    }

    /// Takes in what `r` names, then hands it to `v`; an exit is forgotten after `v` saw it, where the index
    /// forgets.
    pub(crate) fn feed(&mut self, r: &Line, v: &mut (impl Visitor + ?Sized)) {
        self.learn(r);
        dispatch(self, r, v);
        if let Line::Exit(e) = r
            && self.forget_exited
        {
            self.processes.remove(&e.pid);
            self.held_of.remove(&e.pid);
            for id in self.kernels_of.remove(&e.pid).unwrap_or_default() {
                if self.kernels.remove(&id).is_some_and(|k| k.source == Source::Unnamed) {
                    self.unnamed_kept = self.unnamed_kept.saturating_sub(1);
                }
            }
        }
    }

    fn learn(&mut self, r: &Line) {
        match r {
            Line::Header(h) => {
                (self.start, self.lean) = (h.start_mono_ns, h.options.lean);
            }
            Line::Process(p) => {
                self.processes.insert(p.pid, p.clone());
            }
            Line::Kernel(k) => {
                let kept = if self.forget_exited {
                    // What a live reader classifies by; the rest (demangled name, code file, bundles, caller)
                    // would weigh as much again for every kernel of a library stack (12 425 for rocSPARSE).
                    Kernel {
                        id: k.id,
                        pid: k.pid,
                        handle: k.handle,
                        name: k.name.clone(),
                        source: k.source,
                        ..Kernel::default()
                    }
                } else {
                    k.clone()
                };
                let of = self.kernels_of.entry(k.pid).or_default();
                let held = self.held_of.entry(k.pid).or_default();
                let unnamed = k.source == Source::Unnamed;
                let file_full =
                    self.kernels.len() >= MAX_KERNELS_KEPT || (unnamed && self.unnamed_kept >= MAX_UNNAMED_KEPT);
                match self.kernels.entry(k.id) {
                    std::collections::hash_map::Entry::Occupied(mut e) => {
                        e.insert(kept);
                    }
                    std::collections::hash_map::Entry::Vacant(_)
                        if of.len() >= MAX_KERNELS_PER_PROCESS
                            || (unnamed && held.0 >= MAX_UNNAMED_PER_PROCESS)
                            || file_full =>
                    {
                        held.1 += 1;
                    }
                    std::collections::hash_map::Entry::Vacant(e) => {
                        held.0 += usize::from(unnamed);
                        self.unnamed_kept += usize::from(unnamed);
                        e.insert(kept);
                        of.push(k.id);
                    }
                }
            }
            // What the rest bring is their time, decided in their row of the table.
            _ => {}
        }
        self.last_ts = self.last_ts.max(r.spans_to().unwrap_or(0));
    }
}

/// Reads the recording at `input` through `v`, in order; returns the index as the last record left it, and
/// how the input ended.
pub(crate) fn read(input: &Input, v: &mut (impl Visitor + ?Sized)) -> Result<(Index, ReadStatus)> {
    let mut index = Index::default();
    let status = input.for_each_record(|r| index.feed(&r, v))?;
    Ok((index, status))
}

/// [`Visitor`], its dispatch and its pairing, from the table of kinds.
macro_rules! visitor {
    ($($variant:ident($ty:ident $(in $wrap:ident)?) = $tag:literal => $method:ident [$($row:tt)*],)*) => {
        /// What a reader of a trace does with each record kind, in trace order: one method per kind, each
        /// ignoring its record unless implemented. `index` has taken the record in already.
        pub(crate) trait Visitor {
            $(
                #[doc = concat!("A `", $tag, "` record.")]
                fn $method(&mut self, _index: &Index, _record: &crate::trace::$ty) {}
            )*
        }

        /// Two visitors, each record handed to the first, then the second.
        impl<A: Visitor, B: Visitor> Visitor for (A, B) {
            $(
                fn $method(&mut self, index: &Index, record: &crate::trace::$ty) {
                    self.0.$method(index, record);
                    self.1.$method(index, record);
                }
            )*
        }

        /// A visitor lent.
        impl<V: Visitor + ?Sized> Visitor for &mut V {
            $(
                fn $method(&mut self, index: &Index, record: &crate::trace::$ty) {
                    (**self).$method(index, record);
                }
            )*
        }

        /// Hands `r` to its method of `v`.
        fn dispatch(index: &Index, r: &Line, v: &mut (impl Visitor + ?Sized)) {
            match r {
                $(Line::$variant(record) => v.$method(index, record),)*
            }
        }
    };
}

trace_lines!(visitor);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Exit, Launch};

    /// Counts what it is handed, and what the index said then.
    #[derive(Default)]
    struct Seen {
        launches: Vec<(Option<u32>, String)>,
        exits: Vec<(u32, bool)>,
    }

    impl Visitor for Seen {
        fn launch(&mut self, index: &Index, l: &Launch) {
            self.launches.push((l.kernel, index.kernel_name(l.kernel).to_owned()));
        }

        fn exit(&mut self, index: &Index, e: &Exit) {
            self.exits.push((e.pid, index.process(e.pid).is_some()));
        }
    }

    fn kernel(id: u32, pid: u32, name: &str, demangled: &str) -> Line {
        Line::Kernel(Kernel { id, pid, name: name.into(), demangled: demangled.into(), ..Kernel::default() })
    }

    fn records() -> Vec<Line> {
        vec![
            Line::Process(Process { pid: 7, comm: "runner".into(), ts: 3, ..Process::default() }),
            kernel(1, 7, "_Z3addv", "add()"),
            kernel(2, 7, "plain", ""),
            Line::Launch(Launch::for_test(7, Some(1), 10)),
            Line::Launch(Launch::for_test(7, Some(2), 20)),
            Line::Launch(Launch::for_test(7, Some(9), 30)),
            Line::Exit(Exit { pid: 7, ts: 40, ..Exit::default() }),
        ]
    }

    #[test]
    fn visitors_see_the_names_the_index_took_in_before_them() {
        // A live (forgetting) index keeps the mangled name only.
        for (mut index, add) in [(Index::default(), "add()"), (Index::forgetting_exited(), "_Z3addv")] {
            let mut seen = Seen::default();
            for r in records() {
                index.feed(&r, &mut seen);
            }
            let want = [(Some(1), add), (Some(2), "plain"), (Some(9), "")];
            assert_eq!(seen.launches, want.map(|(id, n)| (id, n.to_owned())));
            // The exit is seen while its process is still known, whatever the index forgets after.
            assert_eq!(seen.exits, [(7, true)]);
            assert_eq!(index.last_ts(), 30);
        }
    }

    #[test]
    fn an_index_keeps_no_kernel_past_the_per_process_limits_of_a_file_that_has_more() {
        let mut index = Index::default();
        let unnamed = |id: u32, pid: u32| {
            Line::Kernel(Kernel { id, pid, handle: u64::from(id), source: Source::Unnamed, ..Kernel::default() })
        };
        let over = MAX_UNNAMED_PER_PROCESS as u32;
        for id in 1..=over + 5 {
            index.feed(&unnamed(id, 7), &mut Seen::default());
        }
        // A named kernel still has room; another process has its own limits.
        let named =
            Kernel { id: over + 6, pid: 7, name: "_Z3addv".into(), source: Source::Register, ..Kernel::default() };
        index.feed(&Line::Kernel(named), &mut Seen::default());
        index.feed(&unnamed(over + 7, 8), &mut Seen::default());
        assert_eq!(index.kernels_not_kept(7), 5);
        assert_eq!(index.kernels_not_kept(8), 0);
        assert_eq!(index.kernels_of(7).count(), MAX_UNNAMED_PER_PROCESS + 1);
        // A launch of a kernel not kept is shown without a kernel id; one of a kept kernel by its own.
        assert_eq!(index.shown_kernel(7, Some(over + 1)), None);
        assert_eq!(index.shown_kernel(7, Some(over)), Some(over));
        assert_eq!(index.shown_kernel(7, Some(over + 6)), Some(over + 6));
        // A process that kept every record: an id without a record is its own row, as before.
        assert_eq!(index.shown_kernel(8, Some(12_345_678)), Some(12_345_678));
    }

    #[test]
    fn an_index_keeps_no_more_unnamed_kernels_of_a_file_than_its_limit_every_process_together() {
        let mut index = Index::default();
        let per = MAX_UNNAMED_PER_PROCESS as u32;
        let processes = u32::try_from(MAX_UNNAMED_KEPT).unwrap() / per + 1;
        for pid in 0..processes {
            for i in 0..per {
                let id = pid * per + i + 1;
                let k = Kernel { id, pid, handle: u64::from(id), source: Source::Unnamed, ..Kernel::default() };
                index.feed(&Line::Kernel(k), &mut Seen::default());
            }
        }
        // Each process within its own limit, the last past the file's: its kernels counted, not kept.
        assert_eq!(index.kernels_not_kept(processes - 2), 0);
        assert_eq!(index.kernels_not_kept(processes - 1), u64::from(per));
        assert_eq!(index.held().1, MAX_UNNAMED_KEPT);
    }

    #[test]
    fn a_forgetting_index_drops_an_exited_process_and_its_kernels_and_a_keeping_one_does_not() {
        let (mut keep, mut forget) = (Index::default(), Index::forgetting_exited());
        for r in records() {
            keep.feed(&r, &mut Seen::default());
            forget.feed(&r, &mut Seen::default());
        }
        assert_eq!(keep.held(), (1, 2));
        assert_eq!(keep.kernels_of(7).map(|k| k.id).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(forget.held(), (0, 0));
        assert_eq!(forget.kernels_of(7).count(), 0);
    }

    #[test]
    fn a_kernel_is_shown_demangled_else_mangled_else_unnamed_by_its_handle() {
        let mut index = Index::default();
        for r in
            records().into_iter().chain([Line::Kernel(Kernel { id: 3, pid: 7, handle: 0xbeef, ..Kernel::default() })])
        {
            index.feed(&r, &mut Seen::default());
        }
        let label = |id| index.kernel_label(id).map(Cow::into_owned);
        assert_eq!(label(Some(1)).as_deref(), Some("add()"));
        assert_eq!(label(Some(2)).as_deref(), Some("plain"));
        assert_eq!(label(Some(3)).as_deref(), Some("unnamed 0xbeef"));
        assert_eq!((label(Some(9)), label(None)), (None, None));
        assert_eq!(index.kernel_name(Some(3)), "");
    }

    #[test]
    fn a_pair_of_visitors_sees_each_record_in_turn() {
        let mut pair = (Seen::default(), Seen::default());
        let mut index = Index::default();
        for r in records() {
            index.feed(&r, &mut pair);
        }
        assert_eq!(pair.0.launches.len(), 3);
        assert_eq!(pair.0.launches, pair.1.launches);
    }
}
