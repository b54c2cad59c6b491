//! What the recording knows of the libraries its processes map: runtime copies to probe as they appear
//! (a dlopen after the start, a copy inside a container), and the GPU libraries each process maps.

use crate::os::messages::{say, warning};
use std::sync::Arc;

use anyhow::Result;

use crate::{
    os::{
        files::{CodeFile, ProcessRoot},
        proc::{LIVE, MapsEntry, Procs as _},
    },
    record::probes::{
        attach::{self, ProbeMode},
        entries::Entries,
        found::{Found, MappingsSaid},
        libs::{self, LibCopy},
    },
    trace::{
        self, GpuLibrary,
        counted::{Counted, Counting, Counts},
        runtimes,
    },
};

/// Other roots whose usual places are probed when first seen, at most.
const ROOTS_PROBED: usize = 64;

/// What the recording knows of the libraries its processes map.
#[derive(Default)]
pub(in crate::record) struct LibraryWatch {
    /// File-name prefixes of the runtimes to probe.
    runtimes: Vec<&'static str>,
    /// `--lib`: only the copies the user named are probed; another copy a process maps or opens is listed
    /// as not probed (its mapping record says so), never probed behind the user's back.
    only_named: bool,
    /// HIP's launch functions are left unprobed: each dispatch is read at its doorbell alone (the session
    /// decides it, from KFD's GPUs and the options).
    pub(in crate::record) launches_at_doorbell: bool,
    /// Copies left unprobed for `--lib`, said once each on stderr.
    left_unprobed: std::collections::HashSet<(u64, u64)>,
    /// The runtime programs for multi-point links (None: one uprobe per function).
    pub(in crate::record) links: Option<attach::RuntimeLinks>,
    /// Probed copies: (dev, inode) -> library id.
    pub(in crate::record) probed: std::collections::HashMap<(u64, u64), u32>,
    /// Whether each file (dev, inode) seen mapped is a GPU library, and why: read once per file.
    gpu: std::collections::HashMap<(u64, u64), Option<GpuLibrary>>,
    /// When each probed copy's probes were attached.
    attached_at: std::collections::HashMap<(u64, u64), u64>,
    /// When the recording started: copies attached before were probed before any target ran.
    pub(in crate::record) started: u64,
    /// Runtime copies that could not be probed.
    failed: std::collections::HashSet<(u64, u64)>,
    /// Files (dev, inode) that could not be opened at some look, counted once (`mapped_files_unread_<cause>`).
    unread_files: std::collections::HashSet<(u64, u64)>,
    /// What it counted for the footer: processes a look found ended (with no look held of them, or listed
    /// from naming's), processes that ended before their links, copies opened in another root that could
    /// not be resolved, roots not probed, mapped files not read by cause.
    counts: Counts,
    /// Other roots (containers, chroots) whose usual places were probed, by description.
    roots_probed: std::collections::HashSet<String>,
    /// Calls into the other GPU libraries, counted per exported function (set once the maps are loaded).
    pub(in crate::record) entries: Option<Entries>,
}

/// What the watch knows of one process: kept in attribution's entry for it, beside what the trace has said
/// of it (one owner of per-process state), given to each call here that concerns the process, and let go
/// of when the watch lets go of the process ([`LibraryWatch::forget`]).
#[derive(Default)]
pub(crate) struct Watched {
    /// When it was first looked at (None: not yet; its probes may have been placed, or a file it opened
    /// written).
    first_seen: Option<u64>,
    /// Copies probed because it had loaded them (found in its maps, or opened by it): its calls before the
    /// probes were not seen.
    late: std::collections::HashSet<(u64, u64)>,
    /// Probes per process: when its own links were placed (a mapping probed late says it).
    linked_at: Option<u64>,
    /// Probes per process: when it was found to have its own links (placed then, or before).
    own_links_at: Option<u64>,
    /// Runtime copies whose initializer ran in it after their probes were placed: none of its calls of
    /// them went unseen, wherever the copy was found.
    from_load: std::collections::HashSet<(u64, u64)>,
    /// Its root, as a look while it lived found; None: never looked at alive.
    root: Option<ProcessRoot>,
    /// A look found it without maps (ended); counted once.
    maps_gone: bool,
    /// It ended before its own links could be placed (probes per process): every probed copy it maps is
    /// late for it.
    ended_unlinked: bool,
}

impl LibraryWatch {
    /// A watch probing the copies of `runtimes` it finds, or (`only_named`: `--lib`) none but those.
    pub(in crate::record) fn new(runtimes: Vec<&'static str>, only_named: bool, launches_at_doorbell: bool) -> Self {
        Self { runtimes, only_named, launches_at_doorbell, ..Default::default() }
    }

    /// Whether a runtime copy found mapped or opened by `pid` is to be probed now; with `--lib`, it is
    /// not (said once per copy).
    pub(in crate::record) fn may_probe(&mut self, id: (u64, u64), path: &str, pid: u32) -> bool {
        if self.only_named && self.left_unprobed.insert(id) {
            say!("note: {path} (used by process {pid}) is not probed: --lib names the only copies to probe");
        }
        !self.only_named
    }

    /// Attaches to `copy` unless it is probed already; returns what was found (its library and probes).
    pub(in crate::record) fn attach(
        &mut self,
        ebpf: &mut aya::Ebpf,
        copy: &LibCopy,
        mode: ProbeMode,
    ) -> Result<Vec<Found>> {
        if self.probed.contains_key(&(copy.dev, copy.inode)) {
            return Ok(Vec::new());
        }
        let id = self.probed.len() as u32 + 1;
        let probes = attach::attach_runtime(ebpf, self.links.as_mut(), id, copy, (mode, self.launches_at_doorbell))?;
        for why in self.links.as_mut().map(attach::RuntimeLinks::take_refused).unwrap_or_default() {
            warning!(
                "the kernel refused a multi-point link for {why}: its functions are probed one uprobe each (released more slowly)"
            );
        }
        let attached_ts = crate::os::clock::monotonic_ns();
        self.probed.insert((copy.dev, copy.inode), id);
        self.attached_at.insert((copy.dev, copy.inode), attached_ts);
        let library = trace::Library {
            id,
            path: copy.path.clone(),
            dev: copy.dev,
            inode: copy.inode,
            build_id: libs::build_id(copy),
            origin: copy.origin,
            attached_ts: Some(attached_ts),
            root: copy.root.clone(),
        };
        Ok(vec![Found::Probed(library, probes)])
    }

    /// A process of the recording, its runtime probes placed in it alone (probes per process; nothing when
    /// they are not). One that joined after the start (`joined`: a child, a new Ollama server) and already
    /// maps a probed copy may have called it before its probes: that copy is marked late for it.
    pub(in crate::record) fn scope(&mut self, pid: u32, joined: bool, w: &mut Watched) {
        let Some(links) = self.links.as_mut() else { return };
        let now = crate::os::clock::monotonic_ns();
        let linked = links.add_process(pid);
        if matches!(linked, Ok(attach::Linked::New | attach::Linked::Already)) {
            w.own_links_at.get_or_insert(now);
        }
        match linked {
            Ok(attach::Linked::Gone) if joined => self.ended_unlinked(w, now),
            Ok(attach::Linked::New) if joined => match LIVE.maps(pid).filter(|m| !m.is_empty()) {
                Some(maps) => {
                    for e in maps {
                        if self.probed.contains_key(&(e.dev, e.inode)) {
                            w.late.insert((e.dev, e.inode));
                            w.linked_at = Some(now);
                        }
                    }
                }
                // Ended while its links were being placed (an attach may wait for earlier recordings'
                // releases): what it mapped cannot be read now, so it is taken as having ended before them.
                None => self.ended_unlinked(w, now),
            },
            Ok(_) => {}
            Err(e) => warning!("the runtime probes could not be placed in process {pid}: {e:#}"),
        }
    }

    /// A process that exec'd at `ts`: its image began then (a copy probed later may have been loaded unseen,
    /// unless its initializer's witness says otherwise). Whether its root is another than tracer's (a
    /// container's, a chroot's): then the copies its program will load are to be found in that root now.
    pub(in crate::record) fn execd(pid: u32, ts: u64, w: &mut Watched) -> Option<String> {
        w.first_seen = Some(w.first_seen.map_or(ts, |f| f.min(ts)));
        w.root = crate::os::files::root_description(pid).or_else(|| w.root.take());
        w.root.as_ref().and_then(ProcessRoot::other).map(str::to_owned)
    }

    /// Whether another root is seen for the first time (its usual places are then probed), at most
    /// [`ROOTS_PROBED`] of them; past it, counted.
    pub(in crate::record) fn new_root(&mut self, root: &str) -> bool {
        if self.roots_probed.contains(root) {
            return false;
        }
        if self.roots_probed.len() >= ROOTS_PROBED {
            self.counts.bump(Counted::RootsNotProbed);
            return false;
        }
        self.roots_probed.insert(root.to_owned())
    }

    /// Probes runtime `copy`, found for process `pid` before it loads it, unless probed already or refused.
    pub(in crate::record) fn attach_found(
        &mut self,
        ebpf: &mut aya::Ebpf,
        pid: u32,
        copy: &LibCopy,
        mode: ProbeMode,
    ) -> Vec<Found> {
        let id = (copy.dev, copy.inode);
        if self.probed.contains_key(&id) || self.failed.contains(&id) || !self.may_probe(id, &copy.path, pid) {
            return Vec::new();
        }
        self.attach(ebpf, copy, mode).unwrap_or_else(|err| {
            self.failed.insert(id);
            warning!("cannot probe {} for process {pid}: {err:#}", copy.path);
            Vec::new()
        })
    }

    /// A probed copy's initializer ran in process `pid` at `ts` (its witness probe): the copy's probes were in
    /// place before its first call there, so its mapping is said again, not probed late, at the next look
    /// (what is returned). Where probes are placed per process, only once the process had its own links by
    /// then.
    pub(in crate::record) fn initialized(&self, pid: u32, lib: u32, ts: u64, w: &mut Watched) -> Option<Found> {
        let id = if lib & tracer_common::COUNTED_LIBRARY == 0 {
            self.probed.iter().find_map(|(&id, &l)| (l == lib).then_some(id))
        } else {
            self.entries.as_ref().and_then(|e| e.file_of(lib & !tracer_common::COUNTED_LIBRARY))
        };
        let id = id?;
        if self.scoped() && w.own_links_at.is_none_or(|at| at > ts) {
            return None;
        }
        w.from_load.insert(id);
        w.late.remove(&id);
        Some(Found::Unsaid { pid, file: id })
    }

    /// A joining process that ended before its links were in place: whatever probed runtime copy it is
    /// later listed mapping was called, if at all, unseen (said on each such mapping, and counted).
    fn ended_unlinked(&mut self, w: &mut Watched, now: u64) {
        w.linked_at = Some(now);
        if !std::mem::replace(&mut w.ended_unlinked, true) {
            self.counts.bump(Counted::ProcessesEndedBeforeProbes);
        }
    }

    /// A runtime copy a process opened, read only after the process had gone (the copy cannot be found
    /// through it any more): its mapping, written now, since no look at its maps can list it. The copy is the
    /// file at the path it opened, looked up from tracer's root. Probed: late where the process's calls of
    /// it may have gone unseen (its own links came late, or the copy was probed after the open); not probed:
    /// said so, and the report calls the process incomplete.
    fn opened_gone(&mut self, o: &crate::record::intake::decode::Opened, w: &Watched) -> Vec<Found> {
        // In a container or chroot, the same path from tracer's root is another file (the host's): not
        // listed, and counted.
        if matches!(w.root, Some(ProcessRoot::Other(_))) {
            self.counts.bump(Counted::OpenedInOtherRootUnresolved);
            return Vec::new();
        }
        let Some(copy) = at_own_root(&o.path) else { return Vec::new() };
        let id = (copy.dev, copy.inode);
        let late = w.ended_unlinked || self.attached_at.get(&id).is_some_and(|&at| at > o.origin.ts);
        vec![self.opened_mapping(o, copy, late, w)]
    }

    /// The mapping of a runtime copy a process was seen opening, found now (said once per process and copy):
    /// `late`, its calls before the probes were not seen, from `linked_at` where its own links came.
    fn opened_mapping(
        &self,
        o: &crate::record::intake::decode::Opened,
        copy: LibCopy,
        late: bool,
        w: &Watched,
    ) -> Found {
        let pid = o.origin.pid;
        let id = (copy.dev, copy.inode);
        let lib = self.probed.get(&id).copied();
        let late = late && !w.from_load.contains(&id);
        Found::Mapped(trace::Mapping {
            ts: o.origin.ts,
            pid,
            lib,
            path: copy.path,
            dev: copy.dev,
            inode: copy.inode,
            gpu: Some(GpuLibrary::Runtime),
            probed_late: late && lib.is_some(),
            probed_at: if late && lib.is_some() { w.linked_at } else { None },
            not_probed: lib.is_none(),
            root: copy.root,
        })
    }

    /// A process that ended: its own probes released (probes per process).
    pub(in crate::record) fn unscope(&mut self, pid: u32) {
        if let Some(links) = self.links.as_mut() {
            links.remove_process(pid);
        }
    }

    /// Whether runtime probes are placed in the recorded processes only.
    pub(in crate::record) fn scoped(&self) -> bool {
        self.links.as_ref().is_some_and(attach::RuntimeLinks::scoped)
    }

    /// Looks at a traced process's maps (one read): probes a runtime copy it maps that is not probed yet
    /// (a dlopen after the start, a copy inside a container), and records the libraries of interest it
    /// maps (attribution says each once; one it has said is skipped, `said`). Known files cost no stat: maps
    /// give their device and inode. A
    /// process that has ended (`listing` empty) is
    /// listed from the mappings naming holds of it (`held`: its last look taken while it lived, with the
    /// files opened then).
    pub(in crate::record) fn scan(
        &mut self,
        ebpf: &mut aya::Ebpf,
        pid: u32,
        ts: u64,
        mode: ProbeMode,
        listing: Option<Vec<MapsEntry>>,
        (held, (w, said)): (crate::record::names::HeldMappings, (&mut Watched, Option<&dyn MappingsSaid>)),
    ) -> Vec<Found> {
        let mut out = Vec::new();
        let (entries, held_files) = if let Some(entries) = listing.filter(|e| !e.is_empty()) {
            (entries, None)
        } else {
            // Ended (or a zombie): counted once per process in the footer, as listed from naming's look
            // or not listed at all (the libraries it mapped after the last look are missing).
            let (entries, files): (Vec<_>, Vec<_>) = held.into_iter().unzip();
            if !std::mem::replace(&mut w.maps_gone, true) {
                if entries.is_empty() {
                    self.counts.bump(Counted::MapsGoneBeforeLook);
                } else {
                    self.counts.bump(Counted::MapsGoneListedFromNaming);
                }
            }
            (entries, Some(files))
        };
        let first_seen = *w.first_seen.get_or_insert(ts);
        if held_files.is_none() && w.root.is_none() {
            w.root = crate::os::files::root_description(pid);
        }
        let root = w.root.as_ref().and_then(ProcessRoot::other).map(str::to_owned);
        for (i, e) in entries.iter().enumerate() {
            let file = e.file_name();
            let id = (e.dev, e.inode);
            let runtime = self.runtimes.iter().any(|r| file.starts_with(r));
            // A copy is probed only in a process that lives: it is opened through that process.
            if runtime && held_files.is_none() {
                self.probe_mapped(ebpf, (pid, &mut *w), e, mode, &mut out);
            }
            if said.is_some_and(|s| s.said(id, self.probed.contains_key(&id))) {
                continue;
            }
            let gpu = self.gpu_of((pid, &mut *w), e, held_files.as_deref().map(|files| (files, i)), &mut out);
            if let Some(gpu) = gpu {
                let lib = self.probed.get(&id).copied();
                // A runtime copy's calls that recur go through the process's own links, which came late.
                let late = w.late.contains(&id) || (w.ended_unlinked && lib.is_some());
                let from_load = w.from_load.contains(&id);
                let linked_at = w.linked_at;
                let counted = self.entries.as_ref().is_some_and(|en| en.counted(id));
                // Probed after the recording started, and this process was there before: its calls
                // before the probes may have gone unseen.
                let after_start = self.attached_at.get(&id).is_some_and(|&at| at > self.started && first_seen < at);
                out.push(Found::Mapped(trace::Mapping {
                    ts,
                    pid,
                    path: e.path.clone(),
                    dev: e.dev,
                    inode: e.inode,
                    lib,
                    gpu: Some(gpu),
                    probed_late: (lib.is_some() || counted) && (late || after_start) && !from_load,
                    probed_at: linked_at,
                    not_probed: runtime && lib.is_none(),
                    root: root.clone(),
                }));
            }
        }
        out
    }

    /// A runtime copy a living process maps, not probed yet: probed now (late for this process), or said
    /// why not, once per copy.
    fn probe_mapped(
        &mut self,
        ebpf: &mut aya::Ebpf,
        (pid, w): (u32, &mut Watched),
        e: &MapsEntry,
        mode: ProbeMode,
        out: &mut Vec<Found>,
    ) {
        let id = (e.dev, e.inode);
        if !self.probed.contains_key(&id) && !self.failed.contains(&id) && self.may_probe(id, &e.path, pid) {
            // Mapped already, not probed: probed now, late for this process.
            match libs::copy_in(pid, e).map(|copy| self.attach(ebpf, &copy, mode).map_err(|err| (copy, err))) {
                Some(Ok(recs)) => {
                    w.late.insert(id);
                    out.extend(recs);
                }
                Some(Err((copy, err))) => {
                    self.failed.insert(id);
                    warning!("cannot probe {} mapped by {pid}: {err:#}", copy.path);
                }
                None => {
                    self.failed.insert(id);
                    warning!("cannot probe {} mapped by {pid}: it could not be opened", e.path);
                }
            }
        }
    }

    /// What GPU library a mapped file is (once per file), from the file as the process maps it (`held`: the
    /// files naming held, and this one's index, for a process gone); a library built on a runtime gets its
    /// entry points counted.
    fn gpu_of(
        &mut self,
        (pid, w): (u32, &mut Watched),
        e: &MapsEntry,
        held: Option<(&[Option<Arc<CodeFile>>], usize)>,
        out: &mut Vec<Found>,
    ) -> Option<GpuLibrary> {
        if let Some(known) = self.gpu.get(&(e.dev, e.inode)) {
            return *known;
        }
        let opened = match held {
            None => CodeFile::mapped(pid, e.start, e.end, e.dev, e.inode, &e.path).map(Arc::new).map_err(Some),
            // Naming counted the files it could not open.
            Some((files, i)) => files.get(i).cloned().flatten().ok_or(None),
        };
        match opened {
            Ok(opened) => {
                let gpu = libs::gpu_library(e.file_name(), Some(&opened));
                self.gpu.insert((e.dev, e.inode), gpu);
                // A library built on a runtime: its entry points counted from now on (late for
                // this process, which has mapped it already).
                if let Some(lib) = self.count_entries(gpu, &e.path, &opened) {
                    if lib.attached_ts.is_some() {
                        w.late.insert((e.dev, e.inode));
                    }
                    out.push(Found::Counting(lib));
                }
                gpu
            }
            Err(err) => {
                // Not kept: a mapping the dynamic loader was replacing, or a process that just
                // ended, is read again at the next look. Counted once per file.
                if let Some(err) = err
                    && self.unread_files.insert((e.dev, e.inode))
                {
                    self.counts.add_per(Counted::MappedFilesUnread, err.cause(), 1);
                }
                libs::gpu_library(e.file_name(), None)
            }
        }
    }

    /// Counts the entry points of a library built on a runtime (not a runtime itself: those calls are the
    /// API table's), unless done before: the record to write.
    pub(in crate::record) fn count_entries(
        &mut self,
        gpu: Option<GpuLibrary>,
        path: &str,
        file: &CodeFile,
    ) -> Option<trace::EntryLibrary> {
        if !matches!(gpu, Some(GpuLibrary::Code | GpuLibrary::UsesRuntime)) {
            return None;
        }
        // A library the API table probes (libllama: `llama_decode`) is not counted a second time.
        let name = path.rsplit('/').next().unwrap_or(path);
        if runtimes::RUNTIMES.iter().any(|r| name.starts_with(r)) {
            return None;
        }
        let lib = self.entries.as_mut()?.attach(path, file)?;
        if let Some(at) = lib.attached_ts {
            self.attached_at.insert((lib.dev, lib.inode), at);
        }
        Some(lib)
    }

    /// A process that ended, or left the recording, whose [`Watched`] attribution has given back (None: the
    /// watch never looked at it, as any process's exit system-wide, which costs nothing): what it leaves to
    /// write (its counted calls).
    pub(in crate::record) fn forget(&mut self, pid: u32, w: Option<Watched>) -> Vec<Found> {
        if w.is_none() {
            return Vec::new();
        }
        self.entries.as_mut().map(|en| en.take(Some(pid))).unwrap_or_default()
    }

    /// A runtime library a traced process is opening: probed now, if it is a copy not probed yet, before
    /// the process runs its code if tracer is quick enough (the trace says, per process, that calls before
    /// the probes were not seen).
    pub(in crate::record) fn opened(
        &mut self,
        ebpf: &mut aya::Ebpf,
        o: &crate::record::intake::decode::Opened,
        mode: ProbeMode,
        w: &mut Watched,
    ) -> Vec<Found> {
        let name = o.path.rsplit('/').next().unwrap_or(&o.path);
        // A process that opens a GPU API or ggml backend tracer does not probe (the OpenCL loader, ggml's SYCL
        // backend, ...) is listed as mapping it at once: it may call no probed runtime, and so never be looked
        // at otherwise.
        if runtimes::unobserved_api(name).is_some() {
            return self.unobserved_opened(o, w);
        }
        if !self.runtimes.iter().any(|r| name.starts_with(r)) {
            return Vec::new();
        }
        let pid = o.origin.pid;
        w.first_seen.get_or_insert(o.origin.ts);
        let Some(copy) = libs::opened_by(pid, &o.path) else { return self.opened_gone(o, w) };
        if self.probed.contains_key(&(copy.dev, copy.inode)) || !self.may_probe((copy.dev, copy.inode), &copy.path, pid)
        {
            return Vec::new();
        }
        match self.attach(ebpf, &copy, mode) {
            Ok(mut recs) => {
                w.late.insert((copy.dev, copy.inode));
                // Said now, not at the next look at its maps: the process may end before that.
                recs.push(self.opened_mapping(o, copy, true, w));
                recs
            }
            Err(err) => {
                self.failed.insert((copy.dev, copy.inode));
                warning!("cannot probe {} opened by {pid}: {err:#}", copy.path);
                Vec::new()
            }
        }
    }

    /// A traced process opening the loader of a GPU API tracer does not probe: its mapping, written now.
    ///
    /// The file is looked up in the process's root; a process already gone or a zombie (a short program:
    /// the open record may be read after its exit) has its absolute path looked up in tracer's own, which
    /// names the same file outside containers. Nothing is probed in it either way.
    fn unobserved_opened(&self, o: &crate::record::intake::decode::Opened, w: &Watched) -> Vec<Found> {
        let pid = o.origin.pid;
        let found = libs::opened_by(pid, &o.path).or_else(|| {
            // Gone, or a zombie not reaped yet: its root can no longer be opened.
            crate::os::files::Root::of(pid).is_err().then(|| at_own_root(&o.path)).flatten()
        });
        let Some(copy) = found else { return Vec::new() };
        // Never probed: its record names no library (`lib` comes from the probed copies).
        vec![self.opened_mapping(o, copy, false, w)]
    }
}

/// The file at an absolute path a process opened, looked up from tracer's own root: for a process gone, whose
/// root can no longer be opened (it names the same file outside containers).
fn at_own_root(path: &str) -> Option<LibCopy> {
    path.starts_with('/').then(|| libs::at_path(std::path::Path::new(path))).flatten()
}

impl Counting for LibraryWatch {
    /// Said at 0 too, but for the processes that ended before their own probes (only where probes are
    /// placed per process) and the roots not probed (only when some were not).
    fn counted(&self, out: &mut Counts) {
        out.merge(&self.counts);
        for c in [Counted::MapsGoneBeforeLook, Counted::MapsGoneListedFromNaming, Counted::OpenedInOtherRootUnresolved]
        {
            out.add(c, 0);
        }
        if self.scoped() {
            out.add(Counted::ProcessesEndedBeforeProbes, 0);
        }
    }
}
