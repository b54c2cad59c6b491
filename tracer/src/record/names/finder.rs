//! The code-reading finders' worker: ggml-vulkan's pipeline calls ([`super::pipelines`], behind
//! [`super::spirv::ShaderIndex`]) and HIP's registration calls ([`super::registration`]) decode another
//! process's files, which any user can make as large and as strange as they like (thousands of section
//! headers over the same code, a sparse file of gigabytes).
//!
//! Two bounds. **Budgets**: each file is read within its budget ([`super::reading`]: the bytes of one file
//! and of the recording, the code ranges, the call sites). **Off the session's thread**: the finders run on
//! a thread of their own ([`Finder`]; posts never block), and the session waits for a finder's answer at most
//! [`WAIT_EACH`], [`WAIT_TOTAL`] over the whole recording, in slices that each look whether a stop was asked
//! for ([`stop`]: a signal, the `-d` deadline), so that signals and `-d` are answered within a slice whatever
//! a file holds, while the drain goes on taking the ring. A module named before its file's index is ready is named as an
//! unmatched one is (by its own entry points), counted `shader_index_late`; later ones use the index.
//!
//! What naming posts and takes in (a ggml file's shader index, a file's registration calls) is the
//! behaviour of one process's naming (`of/finder.rs`); here are the thread and the answers it holds
//! ([`Finders`]).

use std::{
    collections::HashMap,
    sync::{Arc, Condvar, Mutex, PoisonError, mpsc::SyncSender},
    time::{Duration, Instant},
};

use super::{elf_symbols::Registered, maps::FileId, spirv::ShaderIndex};
use crate::os::stop;

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

/// A finder's answer, once the worker has it.
pub(crate) struct Pending<T> {
    pub(super) slot: Mutex<Option<T>>,
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

/// A ggml file's shader index, once read (None: no index: not ELF, not opened).
pub(super) type Index = Option<Arc<ShaderIndex>>;

/// The finders' state in a recording's naming: the worker, and the files posted to it not yet answered.
#[derive(Default)]
pub(crate) struct Finders {
    pub(super) worker: Finder,
    pub(super) shaders: HashMap<FileId, (Arc<Pending<Index>>, String)>,
    pub(super) registrations: HashMap<FileId, Arc<Pending<Arc<Registered>>>>,
    /// Registration calls read, by file.
    pub(super) registered: HashMap<FileId, Arc<Registered>>,
}

#[cfg(test)]
mod tests {
    use super::*;

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
