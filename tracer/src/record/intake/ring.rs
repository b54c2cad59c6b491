//! The ring buffer step: a thread of its own drains the ring and does nothing else.
//!
//! The probes commit records into the kernel's ring; when it is full, they lose records. So the ring is
//! drained by a loop that never waits on anything but the ring: no file parsing, no `/proc`, no writes.
//! It moves each record, as bytes, into batches held in user space (posting, without waiting, the PID of
//! a process worth an early look at its maps: [`crate::record::names::early`]), and the session decodes, attributes
//! and writes them beside it ([`records`] splits a batch). Naming a kernel may read a gigabyte library's headers or a
//! process's maps; while it does, records wait in the queue, not in the ring, and a burst of ten thousand
//! registrations at a library's load passes a 4 MiB ring.
//!
//! The queue is bounded: past [`QUEUE_MAX`] bytes waiting, the drain counts the records it cannot keep,
//! by kind (footer `drops`, kind `queue:<kind>`), as the probes count what the ring cannot take. Its last
//! [`RESERVE`] bytes take only records of process life (fork, exec, exit, a library's initializers): one
//! user's flood of launches can fill the queue, never push out another process's start or end (counted
//! apart: `queue_reserve_records`).

use std::{
    collections::BTreeMap,
    os::fd::{AsFd as _, OwnedFd},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

use anyhow::{Context as _, Result};
use aya::maps::{MapData, RingBuf};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tracer_common::RecordKind;

use crate::{
    os::proc::raise_to_recorder_priority,
    record::names::early::Poster,
    trace::counted::{Counted, Counting, Counts},
};

/// Most bytes of records waiting between the drain and the session.
pub(crate) const QUEUE_MAX: u64 = 256 << 20;
/// Of [`QUEUE_MAX`], the bytes only process-life records may take (a `proc` record takes 52 bytes: about
/// 300 000 of them).
pub(crate) const RESERVE: u64 = 16 << 20;
/// A batch is handed over once it holds this many bytes (or the ring is empty).
const BATCH: usize = 256 << 10;
/// The drain's wait for the ring between batches: the probes wake it only once a quarter of the ring is
/// full, so it also looks on this timer. The records that need reading at once wake it themselves (a
/// process event, a runtime opened, a fat binary registered, a module loaded), so the timer paces only the
/// steady stream: each look wakes this thread and the session's. 20 ms, not 5: tracer's CPU on the
/// stand-in at 60 000 launches/s fell from a median 9.6 % to 8.1 % of a core (5 interleaved runs; docs/figures.md).
const POLL: Duration = Duration::from_millis(20);

/// Line kinds a drop is counted under (indexed by [`RecordKind`]; 0: a kind not known).
const KINDS: usize = RecordKind::LIMIT;

fn kind_name(i: usize) -> &'static str {
    u16::try_from(i).ok().and_then(RecordKind::from_u16).map_or("unknown", RecordKind::drop_name)
}

/// What the drain thread and the session share.
#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    /// Bytes handed over and not yet taken.
    queued: AtomicU64,
    /// The most bytes that waited at once.
    peak: AtomicU64,
    dropped: [AtomicU64; KINDS],
    /// Process-life records kept in the [`RESERVE`] while records of other kinds were dropped.
    reserved: AtomicU64,
    /// The drain and the session run at [`crate::os::proc::RECORDER_NICE`].
    raised: AtomicBool,
}

/// The ring, drained by its own thread.
pub(crate) struct Ring {
    batches: UnboundedReceiver<Vec<u8>>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// Records taken from the ring (what the probes wrote, less what they lost), and those of them that
    /// could not be decoded (counted into the footer, never silently dropped).
    taken: (u64, u64),
}

impl Ring {
    /// Starts the drain thread on the `EVENTS` ring. `delay`: a testing aid, how long the drain leaves
    /// the ring unread at first (provokes overflow). `early`: where the drain posts the processes to look
    /// at before the session reaches their records.
    pub(crate) fn spawn(ring: RingBuf<MapData>, delay: Duration, mut early: Poster) -> Result<Self> {
        let fd = ring.as_fd().try_clone_to_owned().context("cannot poll the ring buffer")?;
        let (tx, batches) = unbounded_channel();
        let shared = Arc::new(Shared::default());
        let drain_shared = Arc::clone(&shared);
        let session_raised = raise_to_recorder_priority();
        let thread = std::thread::Builder::new()
            .name("tracer-drain".into())
            .spawn(move || {
                drain_shared.raised.store(session_raised && raise_to_recorder_priority(), Ordering::Relaxed);
                std::thread::sleep(delay);
                drain(ring, &fd, &tx, &drain_shared, &mut early);
            })
            .context("cannot start the ring's drain thread")?;
        Ok(Self { batches, shared, thread: Some(thread), taken: (0, 0) })
    }

    /// Waits for the next batch of records; None once the drain has ended.
    pub(crate) async fn next(&mut self) -> Option<Vec<u8>> {
        self.batches.recv().await
    }

    /// Marks a batch as taken from the queue: its bytes no longer count against [`QUEUE_MAX`].
    pub(crate) fn taken(&self, batch: &[u8]) {
        self.shared.queued.fetch_sub(batch.len() as u64, Ordering::Relaxed);
    }

    /// Counts a batch's records as the session took them: `records` in all, `undecodable` of them.
    pub(crate) const fn took(&mut self, records: u64, undecodable: u64) {
        self.taken.0 += records;
        self.taken.1 += undecodable;
    }

    /// Stops the drain once it has read what the ring holds now; what it handed over is then taken
    /// batch by batch ([`Ring::waiting`]), as while recording.
    pub(crate) fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            drop(t.join());
        }
    }

    /// A batch the drain handed over, without waiting for more.
    pub(crate) fn waiting(&mut self) -> Option<Vec<u8>> {
        self.batches.try_recv().ok()
    }

    /// Records the drain could not keep, by kind (`queue:call`, ...).
    pub(crate) fn dropped(&self) -> BTreeMap<String, u64> {
        (0..KINDS)
            .filter_map(|i| {
                let n = self.shared.dropped[i].load(Ordering::Relaxed);
                (n > 0).then(|| (format!("queue:{}", kind_name(i)), n))
            })
            .collect()
    }
}

impl Counting for Ring {
    /// What was taken and undecodable, the queue's peak and reserve, whether the drain and the session run
    /// at [`crate::os::proc::RECORDER_NICE`] (the early look's thread says its own after).
    fn counted(&self, out: &mut Counts) {
        out.add(Counted::RingRecords, self.taken.0);
        out.add(Counted::Undecodable, self.taken.1);
        out.set(Counted::QueuePeakBytes, self.shared.peak.load(Ordering::Relaxed));
        out.set(Counted::QueueReserveRecords, self.shared.reserved.load(Ordering::Relaxed));
        out.set(Counted::RecorderPriorityRaised, u64::from(self.shared.raised.load(Ordering::Relaxed)));
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
    }
}

/// The records of a batch, each as a probe wrote it: the drain frames each with its length (a native
/// `u32`); a frame cut short ends the batch.
pub(crate) fn records(batch: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = batch;
    std::iter::from_fn(move || {
        let (len, tail) = rest.split_first_chunk::<4>()?;
        let (record, tail) = tail.split_at_checked(u32::from_ne_bytes(*len) as usize)?;
        rest = tail;
        Some(record)
    })
}

/// The drain thread: ring → batches, until told to stop (then once more, so that nothing committed
/// before the stop is left behind) or until the session has gone.
fn drain(mut ring: RingBuf<MapData>, fd: &OwnedFd, tx: &UnboundedSender<Vec<u8>>, shared: &Shared, early: &mut Poster) {
    use rustix::event::{PollFd, PollFlags, Timespec};
    let timeout = Timespec { tv_sec: 0, tv_nsec: POLL.as_nanos() as i64 };
    loop {
        let stopping = shared.stop.load(Ordering::Acquire);
        let mut batch = Vec::new();
        while let Some(item) = ring.next() {
            early.offer(&item);
            let queued = shared.queued.load(Ordering::Relaxed) + batch.len() as u64 + 4 + item.len() as u64;
            let kind = item.first_chunk::<2>().map_or(0, |k| usize::from(u16::from_ne_bytes(*k)));
            let life = kind == RecordKind::Proc as usize;
            if queued > QUEUE_MAX - RESERVE && !(life && queued <= QUEUE_MAX) {
                shared.dropped[if kind < KINDS { kind } else { 0 }].fetch_add(1, Ordering::Relaxed);
                continue;
            }
            if queued > QUEUE_MAX - RESERVE {
                shared.reserved.fetch_add(1, Ordering::Relaxed);
            }
            batch.extend_from_slice(&(item.len() as u32).to_ne_bytes());
            batch.extend_from_slice(&item);
            drop(item);
            if batch.len() >= BATCH && !hand_over(tx, shared, std::mem::take(&mut batch)) {
                return;
            }
        }
        if !batch.is_empty() && !hand_over(tx, shared, batch) {
            return;
        }
        if stopping {
            return;
        }
        let mut fds = [PollFd::new(fd, PollFlags::IN)];
        // Readiness, the timeout or an interruption: the ring is read again either way.
        if rustix::event::poll(&mut fds, Some(&timeout)).is_err() {
            std::thread::sleep(POLL);
        }
    }
}

/// Hands a batch to the session; false when the session is gone.
fn hand_over(tx: &UnboundedSender<Vec<u8>>, shared: &Shared, batch: Vec<u8>) -> bool {
    let now = shared.queued.fetch_add(batch.len() as u64, Ordering::Relaxed) + batch.len() as u64;
    shared.peak.fetch_max(now, Ordering::Relaxed);
    tx.send(batch).is_ok()
}
