//! Maps, load-time settings and the helpers every program shares: the PID filter, the entry stash and
//! the loss counters.

use aya_ebpf::maps::ring_buf::RingBufEntry;
use aya_ebpf::{
    macros::map,
    maps::{Array, HashMap, LruHashMap, PerCpuArray, RingBuf},
};
use tracer_common::{
    ARG_SLOTS, Counter, DROP_SLOTS, EntryKey, OpenRecord, PlanKey, Record, RecordHeader, RecordKind, RepeatRecord,
    StepTally, ThreadRuns, ThreadTally,
};

/// Every record goes through this ring. Its size is set by user space at load (`--ring-size`).
#[map]
pub(crate) static EVENTS: RingBuf = RingBuf::with_byte_size(1 << 22, 0);

/// Traced processes (tgid -> 1) when [`FILTER_ENABLED`] is set.
#[map]
pub(crate) static PIDS: HashMap<u32, u32> = HashMap::with_max_entries(8192, 0);

/// A call's entry, kept until its return probe fires.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Stash {
    pub ts_ns: u64,
    pub flags: u64,
    /// A launch's or module load's return address (the code that made it), read at entry; 0 for other
    /// calls.
    pub caller: u64,
    pub args: [u64; ARG_SLOTS],
}

/// Entries are keyed by thread and function, so a probed function calling another probed function on
/// the same thread keeps both entries apart.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct StashKey {
    pub pid_tgid: u64,
    pub func: u64,
}

/// LRU: an entry whose return never fires (its thread died mid-call) is evicted in time instead of
/// filling the map; a return probe that then finds nothing is counted ([`Counter::ReturnWithoutEntry`]).
#[map]
pub(crate) static STASH: LruHashMap<StashKey, Stash> = LruHashMap::with_max_entries(16384, 0);

/// Which kernel parameters a process's launches of a function read (bit i: parameter i), or which argument
/// words its dispatches of a kernel object read (bit i: word i), set by user space once it has named the
/// function or object (ggml's `mul_mat_q`: its column count; most kernels: none). One without a plan yet
/// reads every slot up to [`tracer_common::PARAMS_MAX`], so what ran before user space caught up is not
/// lost. User space sets plans in traced processes only, and takes a process's back when it execs, ends or
/// leaves the filter: a launch that finds a plan skips the filter's look-up. LRU: a plan not taken back
/// (its exit lost) is evicted in time.
#[map]
pub(crate) static PARAM_PLANS: LruHashMap<PlanKey, u32> = LruHashMap::with_max_entries(65536, 0);

/// Per traced thread (`pid_tgid`): the calls counted in the kernel instead of written (see
/// `tracer_common::cookie::TALLY`), and whether it copied toward the host since its last written
/// synchronization. A live entry (not `ended`) also says the thread is traced: the tallied calls' hot path
/// skips the filter lookup. User space reads it at the end of the recording. A plain hash map, not LRU: an
/// evicted entry would lose its counts silently; a full map is counted ([`Counter::TallyLost`]).
#[map]
pub(crate) static THREADS: HashMap<u64, ThreadTally> = HashMap::with_max_entries(16384, 0);

/// Calls of each probed library entry point by each traced process (see `entries`). A plain hash map:
/// an evicted entry would lose its count silently; a full map is counted ([`Counter::EntryCallLost`]).
/// User space reads it when a process ends and at the end of the recording, and deletes what it read.
#[map]
pub(crate) static ENTRY_CALLS: HashMap<EntryKey, u64> = HashMap::with_max_entries(65536, 0);

/// Per process that called `llama_decode` (tgid): its library calls since then, by step slot, and its
/// steps so far (see `batch`). A plain hash map: an evicted entry would lose counts silently; a process
/// that finds it full is flagged in its batch records. User space deletes a process's entry at its end.
#[map]
pub(crate) static STEP_TALLY: HashMap<u32, StepTally> = HashMap::with_max_entries(4096, 0);

/// Per traced thread that launches (`pid_tgid`): its last launches and the run of exact repeats under way
/// (see `runs`). Made at the thread's first launch that may repeat; taken at its exit or exec, and by user
/// space when its process leaves the filter, so a live entry also says the thread is traced. Preallocated,
/// 256 threads of 36 KiB (9 MiB; an allocation at a thread's first launch could fail, and the allocator's
/// per-CPU reserves would hold as much again on a large host): a full map is counted
/// ([`Counter::RunThreadsFull`]) and that thread's launches are written one by one.
#[map]
pub(crate) static RUNS: HashMap<u64, ThreadRuns> = HashMap::with_max_entries(256, 0);

/// An all-zero [`ThreadRuns`], never written: what a thread's new entry is made from (the stack has no room
/// for one; a per-CPU value holds at most 32 KiB).
#[map]
pub(crate) static RUNS_ZERO: Array<ThreadRuns> = Array::with_max_entries(1, 0);

/// Loss and error counters, one slot per [`Counter`], per CPU.
#[map]
pub(crate) static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(tracer_common::COUNTERS, 0);

/// Records the ring could not take, per CPU, indexed by [`RecordKind`].
#[map]
pub(crate) static DROPS: PerCpuArray<u64> = PerCpuArray::with_max_entries(DROP_SLOTS, 0);

// Load-time settings, written by user space through `EbpfLoader::override_global`.

/// 1: record only processes in [`PIDS`]; 0: record every process except the tracer itself.
#[unsafe(no_mangle)]
static FILTER_ENABLED: u32 = 0;
/// The tracer's own tgid, never recorded.
#[unsafe(no_mangle)]
static TRACER_TGID: u32 = 0;
/// Wake the reader only once this many bytes wait in the ring (user space also drains it on a timer):
/// a wake-up per record would cost a context switch per launch.
#[unsafe(no_mangle)]
static WAKEUP_BYTES: u32 = 1 << 20;

/// 1: exact repeats of a launch are counted into runs; 0: every launch is written (`record --every-launch`).
#[unsafe(no_mangle)]
static RUNS_ENABLED: u32 = 1;

/// Whether repeats are counted into runs.
#[inline(always)]
pub(crate) fn runs_enabled() -> bool {
    setting(&RUNS_ENABLED) != 0
}

/// A command name (`comm`, little-endian, two halves; 0: none) whose exec joins the filter: `ollama`, so
/// that `--ollama` follows a server started after tracer, or restarted, from its exec.
#[unsafe(no_mangle)]
static WATCH_COMM_LO: u64 = 0;
#[unsafe(no_mangle)]
static WATCH_COMM_HI: u64 = 0;

/// Whether the current task's command name is the watched one.
#[inline(always)]
pub(crate) fn watched_comm() -> bool {
    // SAFETY: plain reads of globals user space patches at load; volatile keeps the loads.
    let (lo, hi) = unsafe {
        (core::ptr::read_volatile(&raw const WATCH_COMM_LO), core::ptr::read_volatile(&raw const WATCH_COMM_HI))
    };
    if lo == 0 {
        return false;
    }
    let Ok(comm) = aya_ebpf::helpers::bpf_get_current_comm() else { return false };
    let half = |at: usize| {
        let mut v = 0u64;
        let mut i = 0;
        while i < 8 {
            v |= u64::from(comm[at + i]) << (8 * i);
            i += 1;
        }
        v
    };
    half(0) == lo && half(8) == hi
}

/// Flags for `submit`: no wake-up until the ring holds [`WAKEUP_BYTES`].
#[inline(always)]
pub(crate) fn submit_flags() -> u64 {
    use aya_ebpf::bindings::{BPF_RB_AVAIL_DATA, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP};
    if EVENTS.query(u64::from(BPF_RB_AVAIL_DATA)) >= u64::from(setting(&WAKEUP_BYTES)) {
        u64::from(BPF_RB_FORCE_WAKEUP)
    } else {
        u64::from(BPF_RB_NO_WAKEUP)
    }
}

#[inline(always)]
pub(crate) fn setting(v: &'static u32) -> u32 {
    // SAFETY: a plain read of a global; volatile so the compiler keeps the load that user space patches.
    unsafe { core::ptr::read_volatile(v) }
}

#[inline(always)]
pub(crate) fn filter_enabled() -> bool {
    setting(&FILTER_ENABLED) != 0
}

/// Whether calls of this process are recorded.
#[inline(always)]
pub(crate) fn traced(tgid: u32) -> bool {
    if filter_enabled() {
        // SAFETY: the value is only tested for presence.
        unsafe { PIDS.get(tgid).is_some() }
    } else {
        tgid != setting(&TRACER_TGID)
    }
}

/// Adds to a loss counter with an atomic add: a sleepable program may be preempted on its CPU between
/// a load and a store, so a plain increment could lose a count.
#[inline(always)]
pub(crate) fn count_n(counter: Counter, n: u64) {
    add(&COUNTERS, counter as u32, n);
}

#[inline(always)]
fn add(map: &PerCpuArray<u64>, index: u32, n: u64) {
    use core::intrinsics::{AtomicOrdering, atomic_xadd};
    if let Some(slot) = map.get_ptr_mut(index) {
        // SAFETY: the map value is a valid, aligned u64 for the program's lifetime. The BPF target has no
        // atomic types in core, but LLVM lowers this intrinsic to the BPF atomic add.
        unsafe {
            atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(slot, n);
        }
    }
}

#[inline(always)]
pub(crate) fn count(counter: Counter) {
    count_n(counter, 1);
}

/// A record of `T`'s kind the ring could not take.
#[inline(always)]
pub(crate) fn count_drop(kind: RecordKind) {
    add(&DROPS, kind as u32, 1);
}

/// Writes the current thread's run of repeated launches, if one is under way: before any other record of
/// the thread, so that its records stay in order. A function of its own (a BPF-to-BPF call): inlined at
/// each of the many places a record is reserved, its branches multiplied what the verifier walks (a
/// call's return program went from 81 000 instructions verified to 376 000, and a recording's start took
/// 1.4 s longer).
#[inline(never)]
pub(crate) fn flush_run() {
    let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
    if let Some(r) = RUNS.get_ptr_mut(pid_tgid) {
        // SAFETY: a pointer into the live map value; only this thread's programs write its entry, and they
        // do not run concurrently.
        unsafe {
            write_run(r, pid_tgid);
        }
    }
}

/// Writes the run under way in `r` (the thread's live entry) as one [`RepeatRecord`] and ends it. A record
/// the ring cannot take is counted with the launches it stood for, and nothing before it may be repeated
/// any more (user space never saw them).
///
/// # Safety
/// `r` points into the thread's live [`RUNS`] entry, written only by this thread's programs.
#[inline(always)]
pub(crate) unsafe fn write_run(r: *mut ThreadRuns, pid_tgid: u64) {
    // SAFETY: the caller's promise.
    unsafe {
        let count = (*r).count;
        if count == 0 {
            return;
        }
        // Written in the ring field by field, not built on the stack: this runs in a function of its own
        // (see `flush_run`), whose frame adds to its caller's, and Linux 6.1 refuses the two above 512 bytes.
        if let Some(mut entry) = EVENTS.reserve::<RepeatRecord>(0) {
            let rec = entry.as_mut_ptr();
            (*rec).header = RecordHeader::of_probe(RecordKind::Repeat, (*r).cookie, pid_tgid, (*r).first_ns);
            (*rec).last_ns = (*r).last_ns;
            (*rec).dur_ns = (*r).dur_ns;
            (*rec).count = count as u32;
            (*rec).period = (*r).period as u32;
            entry.submit(submit_flags());
        } else {
            count_drop(RecordKind::Repeat);
            count_n(Counter::RunLaunchesLost, count);
            (*r).valid_from = (*r).pos;
        }
        (*r).count = 0;
        (*r).last_period = (*r).period;
        (*r).period = 0;
        (*r).dur_ns = 0;
    }
}

/// Room for a `T` in the ring, or none (the ring full: counted under `T`'s kind, never waited for). The
/// thread's run under way is written first.
#[inline(always)]
pub(crate) fn reserve<T: Record>() -> Option<RingBufEntry<T>> {
    flush_run();
    reserve_after_run::<T>()
}

/// [`reserve`] for a launch's own record, whose run the caller has written already.
#[inline(always)]
pub(crate) fn reserve_after_run<T: Record>() -> Option<RingBufEntry<T>> {
    let entry = EVENTS.reserve::<T>(0);
    if entry.is_none() {
        count_drop(T::KIND);
    }
    entry
}

/// Copies `rec` into the ring, or counts it lost under its kind.
#[inline(always)]
pub(crate) fn output<T: Record>(rec: &T, flags: u64) {
    flush_run();
    if EVENTS.output::<T>(rec, flags).is_err() {
        count_drop(T::KIND);
    }
}

/// Copies `bytes`, a record of `T`'s kind with its variable tail, into the ring, or counts it lost.
#[inline(always)]
pub(crate) fn output_bytes<T: Record>(bytes: &[u8], flags: u64) {
    flush_run();
    if EVENTS.output::<[u8]>(bytes, flags).is_err() {
        count_drop(T::KIND);
    }
}

/// A queue in one process (queue addresses are per address space).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct QueueKey {
    pub tgid: u64,
    pub queue: u64,
}

/// The last packet index decoded per queue; [`FROM_START`] for a queue created while tracing.
#[map]
pub(crate) static LAST_INDEX: LruHashMap<QueueKey, u64> = LruHashMap::with_max_entries(4096, 0);

/// A queue whose creation was seen: its first doorbell publishes every packet from index 0.
pub(crate) const FROM_START: u64 = u64::MAX;

/// An ioctl's entry, kept until its exit.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct IoctlEntry {
    pub ts_ns: u64,
    pub arg: u64,
    pub fd: u32,
    pub cmd: u32,
}

/// LRU: a thread that dies inside an ioctl leaves an entry that is evicted in time, not one that stays.
#[map]
pub(crate) static IOCTLS: LruHashMap<u64, IoctlEntry> = LruHashMap::with_max_entries(4096, 0);

/// The record being built, per CPU: a path is read and matched here, and reaches the ring only when it
/// names a runtime (most opens are of other files, and must cost no ring space).
#[map]
pub(crate) static OPEN_SCRATCH: PerCpuArray<OpenRecord> = PerCpuArray::with_max_entries(1, 0);

/// The submitting thread (`pid_tgid`) of each job a traced process queued, until its fence signals. LRU:
/// a job whose done stage is never seen (tracer attached or detached mid-way) is evicted in time.
#[map]
pub(crate) static JOBS: LruHashMap<tracer_common::JobKey, u64> = LruHashMap::with_max_entries(16384, 0);
