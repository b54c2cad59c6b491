//! The early look: a thread of its own reads a new process's maps before the session names its records.
//!
//! It looks when the ring's drain sees the process open a GPU runtime library (the dynamic loader placing
//! it: the executable and the libraries placed before are mapped), make its first call since its exec, or
//! load code, and keeps the newest look per process image that found it alive. The session looks at a
//! process's maps itself when it names the process's first record; a process that lives a few
//! milliseconds (a test program, a short script) may have ended by then, while the session still names
//! the records before (opening a gigabyte library, probing what it opened). Its own look then finds it
//! gone and takes the early look instead (footer counter `maps_from_early_look`), so that the file of a
//! launch's return address can still be told.
//!
//! The look at the first call sees every library the loader placed; but a program that fails fast (no GPU)
//! may end a few milliseconds after that call, and a thread woken on a loaded machine can be later than
//! that (measured here with four busy loops on two cores: 3 of 12 such looks found the process's address
//! space gone). The look at a runtime open comes tens of milliseconds before the first call, while the
//! loader works: when the later look fails, it stands, with the executable (a `hipcc` program's fat
//! binary) and the libraries placed by then.
//!
//! The drain only posts a PID (never waits, never reads `/proc`: a full queue counts
//! `early_looks_lost`); this thread reads `/proc/PID/maps`, which takes the target's mmap lock, once
//! per post.
//!
//! It also opens, while the process lives, each file the look finds mapped that neither it nor the
//! session has opened (through the process's `map_files`, checked as the session checks them), and hands
//! it to the session, which takes it instead of opening the file itself: a process that ended before the
//! session looked still has its files read (the bundle a registered fat binary points at, the symbols
//! that name a launch). At most 4096 files are opened so (as many as naming keeps); past it a file is
//! left to the session (footer counter `early_look_files_limit`).

use crate::trace::counted::{Counted, Counting, Counts};
use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
        mpsc::{Receiver, SyncSender, TrySendError},
    },
    thread::JoinHandle,
};

use anyhow::{Context as _, Result};
use tracer_common::{ApiFunc, ProcEvent, RecordHeader, RecordKind, cookie};

use super::maps::{FileId, MAX_OPEN_FILES, Snapshot, read_mappings};
use crate::os::files::CodeFile;

/// PIDs posted and not yet looked at.
const QUEUE: usize = 4096;
/// Processes whose early look is kept; past it the oldest look goes (counted `early_looks_evicted`).
const KEPT: usize = 1024;
/// Processes the drain remembers having posted since their exec (cleared whole past it: a process then
/// gets one more look at its next call).
const POSTED: usize = 65_536;

/// A look at one process image's maps.
struct Look {
    /// The image: `CLOCK_MONOTONIC` of the exec the drain saw before the look (0: none seen, a process
    /// traced from before tracer or a forked copy of one).
    since: u64,
    snapshot: Snapshot,
    /// Who it was, read with its maps (None: it ended between the two reads).
    who: Option<Who>,
    /// Its root, held open: a directory it loads code from is listed there after it has ended.
    root: Option<Arc<crate::os::files::Root>>,
}

/// A process's `stat` fields and command line, as read at the look: its `process` record when it has
/// ended before the session names its exec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Who {
    pub(crate) stat: crate::os::proc::Stat,
    /// At most 64 KiB of arguments: those past it are left out (`early_look_argv_cut`).
    pub(crate) argv: Vec<String>,
}

/// The looks taken, shared by the looking thread and the session.
#[derive(Default)]
pub(crate) struct EarlyLooks {
    looks: Mutex<HashMap<u32, Look>>,
    files: Mutex<Files>,
    /// Posts the drain could not queue.
    pub(crate) lost: AtomicU64,
    /// Looks dropped to keep 1024 processes' at most.
    pub(crate) evicted: AtomicU64,
    /// Files left to the session: 4096 opened already.
    pub(crate) files_limit: AtomicU64,
    /// Command lines kept without their last arguments (over 64 KiB).
    pub(crate) argv_cut: AtomicU64,
    /// The looking thread runs at [`crate::os::proc::RECORDER_NICE`], as the session it outruns does.
    pub(crate) priority_raised: std::sync::atomic::AtomicBool,
}

/// The files the looking thread opens for the session.
#[derive(Default)]
struct Files {
    /// Opened while their process lived, not taken by the session yet.
    opened: HashMap<FileId, Arc<CodeFile>>,
    /// Opened by the thread (or being opened), or asked for by the session: not opened again.
    known: std::collections::HashSet<FileId>,
}

impl EarlyLooks {
    /// Keeps a look, replacing an older one of the same process.
    fn keep(&self, pid: u32, look: Look) {
        let mut looks = self.looks.lock().unwrap_or_else(PoisonError::into_inner);
        if looks.len() >= KEPT && !looks.contains_key(&pid) {
            let oldest = looks.iter().min_by_key(|(_, l)| l.snapshot.taken).map(|(p, _)| *p);
            if let Some(p) = oldest {
                looks.remove(&p);
                self.evicted.fetch_add(1, Ordering::Relaxed);
            }
        }
        looks.insert(pid, look);
    }

    /// The look of a process image that has ended (the image of its exec at `since`, 0: of no exec seen),
    /// taken by the session. A look at another image of the PID stays.
    pub(super) fn take(&self, pid: u32, since: u64) -> Option<Snapshot> {
        let mut looks = self.looks.lock().unwrap_or_else(PoisonError::into_inner);
        if looks.get(&pid)?.since != since {
            return None;
        }
        looks.remove(&pid).map(|l| l.snapshot)
    }

    /// Who the process of an image was at its newest look (the image of its exec at `since`, 0: of no
    /// exec seen); the look stays for naming.
    pub(crate) fn who(&self, pid: u32, since: u64) -> Option<Who> {
        let looks = self.looks.lock().unwrap_or_else(PoisonError::into_inner);
        looks.get(&pid).filter(|l| l.since == since)?.who.clone()
    }

    /// The root of a process image (the image of its exec at `since`, 0: of no exec seen), held open by its
    /// newest look while it lived.
    pub(crate) fn root(&self, pid: u32, since: u64) -> Option<Arc<crate::os::files::Root>> {
        let looks = self.looks.lock().unwrap_or_else(PoisonError::into_inner);
        looks.get(&pid).filter(|l| l.since == since)?.root.clone()
    }

    /// Keeps a look with no mappings that saw `who` (for tests of what reads it).
    #[cfg(test)]
    pub(crate) fn keep_who(&self, pid: u32, since: u64, who: Who) {
        self.keep(
            pid,
            Look { since, snapshot: Snapshot { taken: since, maps: Vec::new() }, who: Some(who), root: None },
        );
    }

    /// Forgets a process's look taken before `ts` (an exec or exit of that PID at `ts`: what it mapped
    /// before means nothing after).
    pub(crate) fn forget_before(&self, pid: u32, ts: u64) {
        let mut looks = self.looks.lock().unwrap_or_else(PoisonError::into_inner);
        if looks.get(&pid).is_some_and(|l| l.snapshot.taken < ts) {
            looks.remove(&pid);
        }
    }

    /// Forgets a process's look: the session's own look is newer.
    pub(super) fn forget(&self, pid: u32) {
        self.looks.lock().unwrap_or_else(PoisonError::into_inner).remove(&pid);
    }

    /// The file the looking thread opened for the session, if it did; the thread will not open it again
    /// (the session holds it, or opens it itself).
    pub(super) fn take_file(&self, id: FileId) -> Option<Arc<CodeFile>> {
        let mut files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
        files.known.insert(id);
        files.opened.remove(&id)
    }

    /// Opens the files a look found mapped that are not known yet, while the process lives. One that
    /// cannot be opened now (the process ended, a mapping replaced) is forgotten: a later look, or the
    /// session, tries again and counts why.
    fn open_files(&self, pid: u32, maps: &[super::maps::Mapping]) {
        for m in maps {
            {
                let mut files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
                if files.known.contains(&m.file) {
                    continue;
                }
                if files.known.len() >= MAX_OPEN_FILES {
                    self.files_limit.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                files.known.insert(m.file);
            }
            let opened = m.open(pid);
            let mut files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
            match opened {
                Ok(f) => {
                    files.opened.insert(m.file, Arc::new(f));
                }
                Err(_) => {
                    files.known.remove(&m.file);
                }
            }
        }
    }
}

/// The drain's side: decides from a record's header whether its process is worth a look now, and
/// posts its PID without waiting.
pub(crate) struct Poster {
    tx: SyncSender<(u32, u64)>,
    looks: Arc<EarlyLooks>,
    /// Processes seen since their exec (or since tracer started): their image.
    posted: crate::os::FastMap<u32, Image>,
    /// The process of the last call looked at, whose first call is behind it (the hot path: the same
    /// process calling again, no map touched).
    last: u32,
}

/// A process image the drain has seen.
#[derive(Default)]
struct Image {
    /// The time of the exec that began it (0: none seen).
    since: u64,
    /// Its first call has been posted.
    called: bool,
}

impl Poster {
    /// Looks at a record (its header alone) as the drain moves it.
    pub(crate) fn offer(&mut self, record: &[u8]) {
        if let Some(post) = self.wanted(record)
            && let Err(TrySendError::Full(_)) = self.tx.try_send(post)
        {
            self.looks.lost.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The process to look at for this record, with the exec its image began at: at each GPU runtime
    /// library it opens; at its first call since its exec (or since tracer started); at every load of
    /// code (the calls the probes wake the reader for, few).
    fn wanted(&mut self, record: &[u8]) -> Option<(u32, u64)> {
        let h: RecordHeader = bytemuck::try_pod_read_unaligned(record.get(..size_of::<RecordHeader>())?).ok()?;
        let pid = h.pid();
        match RecordKind::from_u16(h.kind)? {
            RecordKind::Proc => match ProcEvent::from_u16(h.func)? {
                // Not looked at yet: a process that never calls a GPU runtime needs no look (recording
                // every process, that is every exec on the machine).
                ProcEvent::Exec => {
                    self.posted.insert(pid, Image { since: h.ts_ns, called: false });
                    self.last = 0;
                    None
                }
                ProcEvent::Exit => {
                    self.posted.remove(&pid);
                    self.last = 0;
                    None
                }
                ProcEvent::Fork | ProcEvent::Init => None,
            },
            // The dynamic loader opening a GPU runtime library (few per process): the executable and the
            // libraries placed so far are mapped. A process whose first call comes a few milliseconds
            // before its exit may have ended before that call's look: this one, taken earlier, stands.
            RecordKind::Open => Some((pid, self.image(pid).since)),
            RecordKind::Call => {
                let loads = ApiFunc::from_u16(h.func)
                    .is_some_and(|f| f.layout().cookie_flags() & (cookie::WRAPPER | cookie::WAKE) != 0);
                if pid == self.last && !loads {
                    return None;
                }
                self.last = pid;
                let image = self.image(pid);
                let first = !std::mem::replace(&mut image.called, true);
                (first || loads).then_some((pid, image.since))
            }
            _ => None,
        }
    }

    /// What the drain has seen of a process's image (nothing yet: no exec seen), within its bound.
    fn image(&mut self, pid: u32) -> &mut Image {
        if self.posted.len() >= POSTED {
            self.posted.clear();
        }
        self.posted.entry(pid).or_default()
    }
}

/// Starts the looking thread; it ends when the poster is dropped (the drain has ended).
pub(crate) fn start() -> Result<(Poster, Arc<EarlyLooks>, JoinHandle<()>)> {
    let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE);
    let looks = Arc::new(EarlyLooks::default());
    let shared = Arc::clone(&looks);
    let thread = std::thread::Builder::new()
        .name("tracer-early-look".into())
        .spawn(move || {
            // At nice 0 it would wait behind the session (at -10) while that names a library's ten thousand
            // registrations, and a program living 35 ms may end before its look.
            let raised = crate::os::proc::raise_to_recorder_priority();
            shared.priority_raised.store(raised, Ordering::Relaxed);
            look(&rx, &shared);
        })
        .context("cannot start the thread that looks at new processes' maps")?;
    Ok((Poster { tx, looks: Arc::clone(&looks), posted: crate::os::FastMap::default(), last: 0 }, looks, thread))
}

/// The looking thread: one maps read per PID waiting (a PID posted twice meanwhile is read once).
fn look(rx: &Receiver<(u32, u64)>, looks: &EarlyLooks) {
    while let Ok(first) = rx.recv() {
        let mut pids = vec![first];
        pids.extend(rx.try_iter().take(QUEUE));
        pids.sort_unstable();
        pids.dedup();
        for (pid, since) in pids {
            let taken = crate::os::clock::monotonic_ns();
            // Ended already (or an exiting process, whose maps read empty): nothing to keep.
            if let Some(maps) = read_mappings(pid).filter(|m| !m.is_empty()) {
                // Who it is, and its root, read first: its files are opened next (each mapped file opened
                // and checked), and a program that lives 35 ms may end meanwhile, its process record then
                // without parent, start time or command line (seen once in CI).
                let who = who(pid, &looks.argv_cut);
                let root = crate::os::files::Root::of(pid).ok().map(Arc::new);
                looks.open_files(pid, &maps);
                looks.keep(pid, Look { since, snapshot: Snapshot { taken, maps }, who, root });
            }
        }
    }
}

/// Who a process is now: its `stat` fields and at most [`crate::os::proc::ARGV_KEPT`] bytes of its arguments (a cut one
/// counted in `cut`).
fn who(pid: u32, cut: &AtomicU64) -> Option<Who> {
    use crate::os::proc::{LIVE, Procs as _};
    let stat = LIVE.stat(pid)?;
    let mut argv = LIVE.argv(pid);
    if crate::os::proc::cap_argv(&mut argv) {
        cut.fetch_add(1, Ordering::Relaxed);
    }
    Some(Who { stat, argv })
}

impl Counting for EarlyLooks {
    /// What the early look left undone (said at 0 too); a looking thread left at its priority makes the
    /// recorder's not raised (the ring says the drain's and the session's before).
    fn counted(&self, out: &mut Counts) {
        if !self.priority_raised.load(Ordering::Relaxed) {
            out.set(Counted::RecorderPriorityRaised, 0);
        }
        out.add(Counted::EarlyLooksLost, self.lost.load(Ordering::Relaxed));
        out.add(Counted::EarlyLooksEvicted, self.evicted.load(Ordering::Relaxed));
        out.add(Counted::EarlyLookFilesLimit, self.files_limit.load(Ordering::Relaxed));
        out.add(Counted::EarlyLookArgvCut, self.argv_cut.load(Ordering::Relaxed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::proc::Procs as _;

    fn header(kind: RecordKind, func: u16, pid: u32) -> Vec<u8> {
        let h = RecordHeader { kind: kind as u16, func, lib: 0, pid_tgid: (u64::from(pid) << 32) | 7, ts_ns: 1 };
        let mut b = bytemuck::bytes_of(&h).to_vec();
        b.extend([0u8; 40]);
        b
    }

    fn poster() -> (Poster, Receiver<(u32, u64)>) {
        let (tx, rx) = std::sync::mpsc::sync_channel(2);
        (Poster { tx, looks: Arc::new(EarlyLooks::default()), posted: crate::os::FastMap::default(), last: 0 }, rx)
    }

    #[test]
    fn posts_at_runtime_opens_the_first_call_of_an_image_and_code_loads_only() {
        let (mut p, rx) = poster();
        let launch = ApiFunc::ALL.iter().find(|f| f.symbol() == "hipLaunchKernel").unwrap();
        let fat = ApiFunc::ALL.iter().find(|f| f.symbol() == "__hipRegisterFatBinary").unwrap();
        p.offer(&header(RecordKind::Proc, ProcEvent::Exec as u16, 5));
        rx.try_recv().unwrap_err();
        // Each runtime library the loader opens, with the exec's time; they are not its first call.
        p.offer(&header(RecordKind::Open, 0, 5));
        p.offer(&header(RecordKind::Open, 0, 5));
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), [(5, 1), (5, 1)]);
        // Its first call, with the exec's time; a code load every time.
        p.offer(&header(RecordKind::Call, *launch as u16, 5));
        p.offer(&header(RecordKind::Call, *launch as u16, 5));
        p.offer(&header(RecordKind::Call, *fat as u16, 5));
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), [(5, 1), (5, 1)]);
        // Exec'd again: the new image's first call is looked at.
        p.offer(&header(RecordKind::Proc, ProcEvent::Exec as u16, 5));
        p.offer(&header(RecordKind::Call, *launch as u16, 5));
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), [(5, 1)]);
        // A process traced from before tracer: its first call.
        p.offer(&header(RecordKind::Call, *launch as u16, 9));
        p.offer(&header(RecordKind::Call, *launch as u16, 9));
        p.offer(&header(RecordKind::Name, *launch as u16, 9));
        p.offer(&header(RecordKind::Proc, ProcEvent::Fork as u16, 9));
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), [(9, 0)]);
        // After its exit, a PID used again is looked at again.
        p.offer(&header(RecordKind::Proc, ProcEvent::Exit as u16, 9));
        p.offer(&header(RecordKind::Call, *launch as u16, 9));
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), [(9, 0)]);
        // Short or unknown records are not looked at.
        p.offer(&[1, 0, 0]);
        p.offer(&header(RecordKind::Call, *launch as u16, 11)[..20]);
        let mut unknown = header(RecordKind::Call, *launch as u16, 12);
        unknown[0] = 0xee;
        p.offer(&unknown);
        rx.try_recv().unwrap_err();
    }

    #[test]
    fn a_full_queue_counts_the_posts_it_loses() {
        let (mut p, rx) = poster();
        let launch = ApiFunc::ALL.iter().find(|f| f.symbol() == "hipLaunchKernel").unwrap();
        for pid in 1..=5 {
            p.offer(&header(RecordKind::Call, *launch as u16, pid));
        }
        assert_eq!(rx.try_iter().count(), 2);
        assert_eq!(p.looks.lost.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn keeps_the_newest_look_per_process_within_its_bound() {
        let looks = EarlyLooks::default();
        let look = |since, taken| Look { since, snapshot: Snapshot { taken, maps: Vec::new() }, who: None, root: None };
        for pid in 0..KEPT as u32 {
            looks.keep(pid, look(0, 100 + u64::from(pid)));
        }
        looks.keep(0, look(4000, 5000));
        looks.keep(99_999, look(0, 6000));
        // The oldest (pid 1, taken at 101) made room; pid 0's newer look replaced its older one.
        assert_eq!(looks.evicted.load(Ordering::Relaxed), 1);
        assert!(looks.take(1, 0).is_none());
        // A look at the image of another exec is not this image's, and stays for that one.
        assert!(looks.take(0, 0).is_none());
        assert_eq!(looks.take(0, 4000).map(|s| s.taken), Some(5000));
        looks.forget_before(2, 50);
        looks.forget_before(3, 500);
        assert!(looks.take(2, 0).is_some() && looks.take(3, 0).is_none());
    }

    #[test]
    fn looks_at_a_live_process_and_keeps_nothing_of_an_ended_one() {
        let (mut p, looks, thread) = start().unwrap();
        let me = std::process::id();
        let launch = ApiFunc::ALL.iter().find(|f| f.symbol() == "hipLaunchKernel").unwrap();
        p.offer(&header(RecordKind::Call, *launch as u16, me));
        p.offer(&header(RecordKind::Call, *launch as u16, u32::MAX - 1));
        drop(p);
        thread.join().unwrap();
        // Who it is, kept with the look for a process record written after the process has ended.
        let who = looks.who(me, 0).expect("this test's own stat and command line");
        assert_eq!(who.argv, crate::os::proc::LIVE.argv(me));
        assert_eq!(who.stat, crate::os::proc::LIVE.stat(me).unwrap());
        assert!(looks.who(me, 1).is_none(), "another image's");
        let mine = looks.take(me, 0).expect("a look at this test's own maps");
        let exe = mine.maps.iter().find(|m| m.path.contains("tracer")).expect("this test's own executable");
        assert!(looks.take(u32::MAX - 1, 0).is_none());
        // The files it maps were opened for the session, each handed over once.
        let file = looks.take_file(exe.file).expect("the executable opened by the look");
        assert_eq!(file.id(), exe.file);
        assert!(looks.take_file(exe.file).is_none());
        assert_eq!(looks.files_limit.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_command_line_over_its_bound_keeps_the_arguments_before_it_and_is_counted() {
        // Three 30 000-byte arguments: two fit in 64 KiB with `sh`, `-c`, the script and `$0`.
        let long: Vec<String> = (b'a'..=b'c').map(|c| String::from_utf8(vec![c; 30_000]).unwrap()).collect();
        let mut child =
            std::process::Command::new("/bin/sh").args(["-c", "sleep 5", "zero"]).args(&long).spawn().unwrap();
        let pid = child.id();
        // The shell's own command line, once it has exec'd.
        let read = (0..500).any(|_| {
            let exec_done = crate::os::proc::LIVE.argv(pid).len() == 7;
            if !exec_done {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            exec_done
        });
        let cut = AtomicU64::new(0);
        let who = who(pid, &cut);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(read);
        let who = who.expect("a live process");
        assert_eq!(who.argv.len(), 6, "the last argument is past 64 KiB");
        assert_eq!(who.argv[5], long[1]);
        assert_eq!(cut.load(Ordering::Relaxed), 1);
        let small = AtomicU64::new(0);
        assert!(super::who(std::process::id(), &small).is_some());
        assert_eq!(small.load(Ordering::Relaxed), 0);
        assert!(super::who(u32::MAX - 1, &small).is_none());
    }

    #[test]
    fn a_file_known_to_the_session_is_not_opened_again() {
        let looks = EarlyLooks::default();
        let me = std::process::id();
        let maps = read_mappings(me).unwrap();
        assert!(looks.take_file(maps[0].file).is_none());
        looks.open_files(me, &maps);
        // Asked for before the look: left to the session; every other file opened.
        assert!(looks.take_file(maps[0].file).is_none());
        let others: std::collections::BTreeSet<FileId> =
            maps.iter().map(|m| m.file).filter(|f| *f != maps[0].file).collect();
        assert!(!others.is_empty());
        assert!(others.iter().all(|f| looks.take_file(*f).is_some()));
        // A file that cannot be opened (a process that has ended) is forgotten, to be tried again.
        let fresh = EarlyLooks::default();
        fresh.open_files(u32::MAX - 1, &maps);
        let left = fresh.files.lock().map(|f| (f.opened.len(), f.known.len())).unwrap();
        assert_eq!(left, (0, 0));
    }
}
