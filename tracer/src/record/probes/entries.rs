//! The "called" side of mapped vs called vs dispatched: every exported C function of each GPU library the
//! traced processes map (hipBLAS, rocSPARSE, cuBLAS, ggml's backends, ...; not the runtimes, whose calls
//! the API table's probes see one by one) gets one uprobe of one multi-point link per library (before
//! Linux 6.6, one link per function), and the kernel counts calls per process and function (`entries` on
//! the eBPF side). Read and deleted when a process ends, and at the end of the recording.

use std::{
    collections::{BTreeMap, HashMap},
    os::fd::OwnedFd,
};

use aya::maps::{HashMap as BpfHashMap, MapData};
use tracer_common::{EntryKey, StepTally};

use crate::{os::files::CodeFile, record::probes::attach::MultiProgram, record::probes::found::Found, trace};

/// Counted entry points of the recording's GPU libraries.
pub(in crate::record) struct Entries {
    /// The counting program; `None` where the kernel could not load it (said once at the start).
    program: Option<MultiProgram>,
    /// The initializer's witness ([`tracer_common::ProcEvent::Init`]), linked at each library's last
    /// initializer after its counting link.
    witness: Option<MultiProgram>,
    /// The kernel's counts: (process, point) -> calls.
    counts: BpfHashMap<MapData, EntryKey, u64>,
    /// The kernel's step tallies: process -> its calls since its last `llama_decode`, by step slot.
    steps: BpfHashMap<MapData, u32, StepTally>,
    /// Libraries given probes (or tried): (dev, inode) -> library id, and whether its link was made.
    libs: HashMap<(u64, u64), (u32, bool)>,
    /// Point (the cookie) -> (library id, function).
    points: Vec<(u32, String)>,
    /// One link per library (or per function, [`Points::Each`](crate::record::probes::attach::Points)):
    /// closing it detaches (see `attach::release_in_background`).
    links: Vec<OwnedFd>,
}

impl Entries {
    pub(in crate::record) fn new(
        (program, witness): (Option<MultiProgram>, Option<MultiProgram>),
        counts: BpfHashMap<MapData, EntryKey, u64>,
        steps: BpfHashMap<MapData, u32, StepTally>,
    ) -> Self {
        Self { program, witness, counts, steps, libs: HashMap::new(), points: Vec::new(), links: Vec::new() }
    }

    /// The library (dev, inode) counted under `id`.
    pub(in crate::record) fn file_of(&self, id: u32) -> Option<(u64, u64)> {
        self.libs.iter().find_map(|(&file, &(lib, _))| (lib == id).then_some(file))
    }

    /// The counting program's (name, runs, nanoseconds) as the kernel counted them (`--program-stats`).
    pub(in crate::record) fn stats(&self, name: &'static str) -> Option<(&'static str, u64, u64)> {
        self.program.as_ref()?.stats().map(|(runs, ns)| (name, runs, ns))
    }

    /// Runs of the counting program the kernel skipped (another tracer program was running on that CPU).
    pub(in crate::record) fn misses(&self) -> u64 {
        self.program.as_ref().map_or(0, MultiProgram::misses)
    }

    /// Whether the library (dev, inode) has its entry points counted.
    pub(in crate::record) fn counted(&self, id: (u64, u64)) -> bool {
        self.libs.get(&id).is_some_and(|&(_, linked)| linked)
    }

    /// Probes the exported functions of `file` (seen as `path`), unless done before: the record to write,
    /// once per file (with the reason when it could not be probed).
    pub(in crate::record) fn attach(&mut self, path: &str, file: &CodeFile) -> Option<trace::EntryLibrary> {
        let program = self.program.as_ref()?;
        let (dev, inode) = file.id();
        if self.libs.contains_key(&(dev, inode)) {
            return None;
        }
        let id = u32::try_from(self.libs.len() + 1).unwrap_or(u32::MAX);
        self.libs.insert((dev, inode), (id, false));
        let mut rec = trace::EntryLibrary { id, path: path.to_owned(), dev, inode, ..Default::default() };
        let Some(found) = crate::os::elf::entry_points(file) else {
            rec.error = Some("not an ELF library tracer could read".into());
            return Some(rec);
        };
        rec.not_probed = found.left_out;
        if found.functions.is_empty() {
            rec.error = Some("exports no C function".into());
            return Some(rec);
        }
        let first = self.points.len() as u64;
        // Each where one exception does (past a leading `test` before a jump: see `one_trap_point`); the
        // counting program reads nothing but its cookie.
        let offsets: Vec<u64> =
            found.functions.iter().map(|(_, off)| crate::record::probes::attach::one_trap_point(file, *off)).collect();
        // The point in the low half; the upper half is the library's step slot (its calls per step).
        let slot = tracer_common::step_slot(id) << 32;
        let cookies: Vec<u64> = (first..).take(offsets.len()).map(|p| p | slot).collect();
        match program.attach_everywhere(&file.proc_path(), &offsets, &cookies) {
            Ok(links) => {
                self.links.extend(links);
                // Its initializer's witness, after the counting links: a hit says they were in place.
                let cookie = tracer_common::cookie::make(id | tracer_common::COUNTED_LIBRARY, 0, 0);
                if id < tracer_common::COUNTED_LIBRARY
                    && let Some(w) = self.witness.as_ref()
                    && let Some(at) = crate::os::elf::last_initializer_offset(file)
                    && let Ok(links) = w.attach_everywhere(&file.proc_path(), &[at], &[cookie])
                {
                    self.links.extend(links);
                }
                self.libs.insert((dev, inode), (id, true));
                rec.attached_ts = Some(crate::os::clock::monotonic_ns());
                rec.functions = u32::try_from(offsets.len()).unwrap_or(u32::MAX);
                self.points.extend(found.functions.into_iter().map(|(name, _)| (id, name)));
            }
            Err(err) => rec.error = Some(format!("{err:#}")),
        }
        Some(rec)
    }

    /// Reads and deletes the counts of process `pid` (every process: `None`), as records by library and
    /// function, and the calls of its last step (a process that ran `llama_decode`).
    pub(in crate::record) fn take(&mut self, pid: Option<u32>) -> Vec<Found> {
        let mut out = self.take_steps(pid);
        out.extend(self.take_calls(pid));
        out
    }

    /// The step tallies of `pid` (every process: `None`): the calls of each one's last step.
    fn take_steps(&mut self, pid: Option<u32>) -> Vec<Found> {
        let keys: Vec<u32> = self.steps.keys().filter_map(Result::ok).filter(|&k| pid.is_none_or(|p| k == p)).collect();
        let mut out = Vec::new();
        for key in keys {
            let Ok(tally) = self.steps.get(&key, 0) else { continue };
            drop(self.steps.remove(&key));
            let calls = trace::StepCalls::by_library(&tally.calls);
            if !calls.is_empty() {
                out.push(Found::Steps(trace::StepCalls { pid: key, step: tally.step, calls, at_pass: None }));
            }
        }
        out
    }

    fn take_calls(&mut self, pid: Option<u32>) -> Vec<Found> {
        if self.points.is_empty() {
            return Vec::new();
        }
        let keys: Vec<EntryKey> =
            self.counts.keys().filter_map(Result::ok).filter(|k| pid.is_none_or(|p| k.tgid == p)).collect();
        let mut sums: BTreeMap<(u32, u32, &str), u64> = BTreeMap::new();
        for key in keys {
            let Ok(calls) = self.counts.get(&key, 0) else { continue };
            drop(self.counts.remove(&key));
            // A point is always one tracer gave; one it did not is skipped rather than trusted.
            if let Some((lib, function)) = self.points.get(key.point as usize) {
                *sums.entry((key.tgid, *lib, function.as_str())).or_default() += calls;
            }
        }
        sums.into_iter()
            .map(|((pid, lib, function), calls)| {
                Found::Calls(trace::EntryCalls { pid, lib, function: function.to_owned(), calls })
            })
            .collect()
    }
}
