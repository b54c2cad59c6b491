//! The code-reading finders' worker and budgets: ggml-vulkan's pipeline calls ([`super::pipelines`], behind
//! [`super::spirv::ShaderIndex`]) and HIP's registration calls ([`super::registration`]) decode another
//! process's files, which any user can make as large and as strange as they like (thousands of section
//! headers over the same code, a sparse file of gigabytes).
//!
//! Two bounds. **Budgets**: a finder reads at most [`FILE_BYTES`] of one file (its code windows, the SPIR-V
//! modules it walks), decodes each byte of code once however many section headers cover it, takes at most
//! [`MAX_CODE_SECTIONS`] code ranges and keeps at most [`MAX_SITES`] call sites; every file draws on the
//! recording's [`RECORDING_BYTES`]. Past a bound, what was found so far stands, and the file is said
//! unread with the reason ([`Budget::cut`]). **Off the session's thread**: the finders run on a thread of
//! their own ([`Finder`]; posts never block), and the session waits for a finder's answer at most
//! [`WAIT_EACH`], [`WAIT_TOTAL`] over the whole recording, in slices that each look whether a stop was asked
//! for ([`stop`]: a signal, the `-d` deadline), so that signals and `-d` are answered within a slice whatever
//! a file holds, while the drain goes on taking the ring. A module named before its file's index is ready is named as an
//! unmatched one is (by its own entry points), counted `shader_index_late`; later ones use the index.
//!
//! The budgets, against the real files: Debian's stripped `libggml-vulkan.so` (ggml 0.27, 42 MB) has 1.4 MB
//! of code and 40 MB of SPIR-V that the finder walks; Debian's `libggml-hip.so` (1.27 GB) 11.6 MB of code.
//! 64 MiB a file is five times the largest; a recording's 1 GiB sixteen such files.

use crate::trace::counted::Counted;
use std::{
    collections::HashMap,
    sync::{
        Arc, Condvar, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
        mpsc::SyncSender,
    },
    time::{Duration, Instant},
};

use crate::os::stop;

/// Bytes a finder reads of one file at most.
pub(crate) const FILE_BYTES: u64 = 64 << 20;
/// Bytes the finders read over a whole recording at most.
pub(crate) const RECORDING_BYTES: u64 = 1 << 30;
/// Code ranges (executable sections, overlaps merged) of one file decoded at most (a real library has 5).
pub(crate) const MAX_CODE_SECTIONS: usize = 64;
/// Call sites (or addresses looked at for one) a finder keeps of one file at most (ggml-vulkan has about
/// 2 000 pipeline calls, rocSPARSE 12 425 registrations).
pub(crate) const MAX_SITES: usize = 1 << 18;
/// The longest the session waits for one finder's answer: one within its budget ends sooner (2.4 s for the
/// 64 MiB of an 8 GiB sparse file, 0.06 s for Debian's stripped `libggml-vulkan.so`, here), so names do not
/// depend on how loaded the machine is. The wait ends at once when a stop is asked for ([`stop`]).
pub(crate) const WAIT_EACH: Duration = Duration::from_secs(10);
/// The longest the session waits for finders over a whole recording (the drain goes on filling its queue
/// meanwhile).
pub(crate) const WAIT_TOTAL: Duration = Duration::from_secs(30);
/// How often a wait looks whether a stop was asked for.
const WAIT_SLICE: Duration = Duration::from_millis(20);
/// Files waiting for the worker at most; a post past it is counted (`finder_queue_full`) and tried again
/// the next time the file is needed.
const QUEUE: usize = 64;

/// What the recording's finders may still read.
static RECORDING_LEFT: AtomicU64 = AtomicU64::new(RECORDING_BYTES);

/// A finder's read budget for one file.
#[derive(Debug)]
pub(crate) struct Budget {
    left: u64,
    /// Bytes read so far.
    pub(crate) spent: u64,
    /// Draws on the recording's budget too.
    shared: bool,
    /// Why the file was not read in full (None: it was).
    pub(crate) cut: Option<&'static str>,
}

/// Why a finder stopped reading a file.
pub(crate) const CUT_FILE: &str = "past the 64 MiB a finder reads of one file";
pub(crate) const CUT_RECORDING: &str = "past the 1 GiB the finders read in one recording";
pub(crate) const CUT_SECTIONS: &str = "past the 64 code ranges a finder decodes in one file";
pub(crate) const CUT_SITES: &str = "past the 262 144 call sites a finder keeps of one file";

impl Budget {
    /// A file's budget, drawn from the recording's.
    pub(crate) const fn file() -> Self {
        Self::drawn(FILE_BYTES)
    }

    /// A budget of `bytes`, drawn from the recording's.
    pub(crate) const fn drawn(bytes: u64) -> Self {
        Self { left: bytes, spent: 0, shared: true, cut: None }
    }

    /// A budget of `bytes` that draws on nothing else (`tracer inspect`'s, the fuzz targets').
    pub(crate) const fn alone(bytes: u64) -> Self {
        Self { left: bytes, spent: 0, shared: false, cut: None }
    }

    /// Takes `n` bytes to read; false (and the reason kept) when the file's or the recording's budget has
    /// not that much left.
    pub(crate) fn take(&mut self, n: u64) -> bool {
        if self.cut.is_some() {
            return false;
        }
        let Some(left) = self.left.checked_sub(n) else {
            self.cut = Some(CUT_FILE);
            return false;
        };
        if self.shared
            && RECORDING_LEFT.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| l.checked_sub(n)).is_err()
        {
            self.cut = Some(CUT_RECORDING);
            return false;
        }
        self.left = left;
        self.spent = self.spent.saturating_add(n);
        true
    }

    /// Stops the reading for `why` (a bound other than bytes), keeping the first reason.
    pub(crate) fn stop(&mut self, why: &'static str) {
        self.cut.get_or_insert(why);
    }
}

/// A finder's answer, once the worker has it.
pub(crate) struct Pending<T> {
    slot: Mutex<Option<T>>,
    ready: Condvar,
}

impl<T: Clone> Pending<T> {
    /// The answer, if it is there.
    #[cfg(test)]
    pub(crate) fn get(&self) -> Option<T> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn put(&self, value: T) {
        *self.slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(value);
        self.ready.notify_all();
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// The finders' thread, started the first time a file is posted, and how long the session has waited for it.
#[derive(Default)]
pub(crate) struct Finder {
    tx: Option<SyncSender<Job>>,
    waited: Duration,
    /// The thread could not be started: finders run on the session's thread (still within their budgets).
    inline: bool,
}

impl Finder {
    /// Posts `run` to the worker; its answer comes in the returned slot. Never blocks: None (counted by the
    /// caller) when the queue is full.
    pub(crate) fn post<T: Clone + Send + 'static>(
        &mut self,
        run: impl FnOnce() -> T + Send + 'static,
    ) -> Option<Arc<Pending<T>>> {
        let pending = Arc::new(Pending { slot: Mutex::new(None), ready: Condvar::new() });
        let slot = Arc::clone(&pending);
        let job: Job = Box::new(move || slot.put(run()));
        if self.tx.is_none() && !self.inline {
            self.tx = start();
            self.inline = self.tx.is_none();
        }
        if let Some(tx) = &self.tx {
            // Full or gone: not read (counted by the caller).
            tx.try_send(job).is_ok().then_some(pending)
        } else {
            job();
            Some(pending)
        }
    }

    /// The answer in `pending`, waiting for it at most [`WAIT_EACH`], and [`WAIT_TOTAL`] over the recording,
    /// in slices that each look whether a stop was asked for (None: not ready in that time, or stopping).
    pub(crate) fn wait<T: Clone>(&mut self, pending: &Pending<T>) -> Option<T> {
        let room = WAIT_TOTAL.saturating_sub(self.waited).min(WAIT_EACH);
        let began = Instant::now();
        let mut slot = pending.slot.lock().unwrap_or_else(PoisonError::into_inner);
        while slot.is_none() && !stop::requested() {
            let left = room.saturating_sub(began.elapsed());
            if left.is_zero() {
                break;
            }
            slot = pending.ready.wait_timeout(slot, left.min(WAIT_SLICE)).unwrap_or_else(PoisonError::into_inner).0;
        }
        let answer = slot.clone();
        drop(slot);
        self.waited = self.waited.saturating_add(began.elapsed());
        answer
    }
}

/// The worker: runs the posted finders one after another; ends when the session's [`Finder`] is dropped
/// (never joined: a finder still reading ends with tracer).
fn start() -> Option<SyncSender<Job>> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<Job>(QUEUE);
    std::thread::Builder::new()
        .name("tracer-finder".into())
        .spawn(move || {
            while let Ok(job) = rx.recv() {
                job();
            }
        })
        .ok()?;
    Some(tx)
}

use super::{FileId, Of, elf_symbols::Registered, maps::Mapping, spirv::ShaderIndex};

/// A ggml file's shader index, once read (None: no index: not ELF, not opened).
type Index = Option<Arc<ShaderIndex>>;

/// The finders' state in a recording's naming: the worker, and the files posted to it not yet answered.
#[derive(Default)]
pub(crate) struct Finders {
    worker: Finder,
    shaders: HashMap<FileId, (Arc<Pending<Index>>, String)>,
    registrations: HashMap<FileId, Arc<Pending<Arc<Registered>>>>,
    /// Registration calls read, by file.
    registered: HashMap<FileId, Arc<Registered>>,
}

impl Of<'_> {
    /// A ggml file's shader index: read (posted to the finders' thread the first time), or Err when not
    /// ready in the time the session waits (counted by the caller).
    pub(super) fn shader_index(&mut self, mapping: &Mapping) -> Result<Index, ()> {
        if let Some(index) = self.names.shaders.get(&mapping.file) {
            return Ok(index.clone());
        }
        let pending = if let Some((p, _)) = self.names.finders.shaders.get(&mapping.file) {
            Arc::clone(p)
        } else {
            let Some(file) = self.file(mapping) else {
                self.names.shaders.insert(mapping.file, None);
                return Ok(None);
            };
            let Some(p) = self.names.finders.worker.post(move || ShaderIndex::parse(&file).map(Arc::new)) else {
                self.names.count(Counted::FinderQueueFull);
                return Err(());
            };
            self.names.finders.shaders.insert(mapping.file, (Arc::clone(&p), mapping.path.clone()));
            p
        };
        let index = self.names.finders.worker.wait(&pending).ok_or(())?;
        self.names.finders.shaders.remove(&mapping.file);
        if let Some(i) = &index {
            self.names.index_read(mapping.file, &mapping.path, i);
        }
        self.names.shaders.insert(mapping.file, index.clone());
        Ok(index)
    }

    /// The names a mapped file's registration calls give: read (posted to the finders' thread the first
    /// time), or None when not ready in the time the session waits (counted `registration_calls_late`) or
    /// the file is not open.
    pub(super) fn registered_in(&mut self, mapping: &Mapping) -> Option<Arc<Registered>> {
        if let Some(r) = self.names.finders.registered.get(&mapping.file) {
            return Some(Arc::clone(r));
        }
        let pending = if let Some(p) = self.names.finders.registrations.get(&mapping.file) {
            Arc::clone(p)
        } else {
            let file = self.file(mapping)?;
            let Some(p) = self.names.finders.worker.post(move || super::elf_symbols::ElfSymbols::registered(&file))
            else {
                self.names.count(Counted::FinderQueueFull);
                return None;
            };
            self.names.finders.registrations.insert(mapping.file, Arc::clone(&p));
            p
        };
        let Some(read) = self.names.finders.worker.wait(&pending) else {
            self.names.count(Counted::RegistrationCallsLate);
            return None;
        };
        self.names.finders.registrations.remove(&mapping.file);
        if let Some(why) = read.1 {
            self.names.count(Counted::CodeFilesUnread);
            let sentence = format!(
                "{}: the finder of its kernels' registration calls stopped {why}: kernels registered past there \
                 are named by their symbols or left unnamed",
                mapping.path
            );
            self.names.warn(mapping.file, sentence);
        }
        self.names.finders.registered.insert(mapping.file, Arc::clone(&read));
        Some(read)
    }
}

impl super::Names {
    /// The files the finders' thread was still reading when the recording stopped: counted
    /// (`code_files_unfinished`), one sentence each for the ggml files (a stop never waits for a finder).
    pub(crate) fn finders_unfinished(&mut self) -> Vec<String> {
        let n = self.finders.shaders.len() + self.finders.registrations.len();
        if n > 0 {
            self.counts.add(Counted::CodeFilesUnfinished, n as u64);
        }
        self.finders
            .shaders
            .values()
            .map(|(_, path)| {
                format!(
                    "{path}: the recording stopped while tracer's finder was still reading its code: the shader \
                     modules it had not named by then are named by their own SPIR-V"
                )
            })
            .collect()
    }

    /// The sentences for the user so far, after taking in every index the finders' thread has answered
    /// since (one no module waited for long enough: its counters and what it left unread are said too).
    pub(crate) fn take_warnings(&mut self) -> Vec<String> {
        let done: Vec<FileId> = self
            .finders
            .shaders
            .iter()
            .filter(|(_, (p, _))| p.slot.lock().unwrap_or_else(PoisonError::into_inner).is_some())
            .map(|(id, _)| *id)
            .collect();
        for id in done {
            if let Some((p, path)) = self.finders.shaders.remove(&id) {
                let index = p.slot.lock().unwrap_or_else(PoisonError::into_inner).take().flatten();
                if let Some(i) = &index {
                    self.index_read(id, &path, i);
                }
                self.shaders.insert(id, index);
            }
        }
        std::mem::take(&mut self.warnings)
    }
}

/// The code ranges of sections (file offset, size, address), sorted by offset, each byte once: a range
/// covered by one before it is dropped, one overlapping it keeps its part past it. At most
/// [`MAX_CODE_SECTIONS`] ranges (the budget stopped past them).
pub(crate) fn code_ranges(mut sections: Vec<(u64, u64, u64)>, budget: &mut Budget) -> Vec<(u64, u64, u64)> {
    sections.sort_unstable();
    let mut out: Vec<(u64, u64, u64)> = Vec::new();
    let mut covered = 0u64;
    for (offset, size, addr) in sections {
        let Some(end) = offset.checked_add(size) else { continue };
        let from = offset.max(covered);
        if end <= from {
            continue;
        }
        if out.len() >= MAX_CODE_SECTIONS {
            budget.stop(CUT_SECTIONS);
            break;
        }
        let skip = from - offset;
        out.push((from, end - from, addr.wrapping_add(skip)));
        covered = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_over_the_same_bytes_are_one_range_and_overlaps_keep_their_new_part() {
        let mut b = Budget::alone(100);
        let same = vec![(0x1000, 0x100, 0x1000); 2000];
        assert_eq!(code_ranges(same, &mut b), [(0x1000, 0x100, 0x1000)]);
        let parts = vec![(0x1080, 0x100, 0x5080), (0x1000, 0x100, 0x5000), (0x1010, 0x10, 0x5010), (u64::MAX, 2, 0)];
        assert_eq!(code_ranges(parts, &mut b), [(0x1000, 0x100, 0x5000), (0x1100, 0x80, 0x5100)]);
        assert_eq!(b.cut, None);
        let many: Vec<_> = (0..100u64).map(|i| (i * 0x100, 0x100, i * 0x100)).collect();
        assert_eq!(code_ranges(many, &mut b).len(), MAX_CODE_SECTIONS);
        assert_eq!(b.cut, Some(CUT_SECTIONS));
    }

    #[test]
    fn a_budget_refuses_past_its_bytes_and_keeps_why() {
        let mut b = Budget::alone(10);
        assert!(b.take(6) && !b.take(5) && b.cut == Some(CUT_FILE));
        // Once cut, nothing more.
        assert!(!b.take(1));
        assert_eq!(b.spent, 6);
    }

    #[test]
    fn an_answer_not_ready_in_time_is_none_and_the_waits_add_up_to_their_bound() {
        let mut f = Finder::default();
        let gate = Arc::new(Mutex::new(()));
        let held = gate.lock().unwrap();
        let g = Arc::clone(&gate);
        let slow = f.post(move || drop(g.lock())).unwrap();
        for _ in 0..5 {
            assert!(f.wait(&slow).is_none());
        }
        assert!(f.waited >= WAIT_TOTAL && f.waited < WAIT_TOTAL + Duration::from_millis(500), "{:?}", f.waited);
        drop(held);
        let quick = f.post(|| 7).unwrap();
        // The total is spent: no more waiting, but an answer already there is taken.
        while quick.get().is_none() {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(f.wait(&quick), Some(7));
    }
}
