//! The runtime probes as multi-point uprobe links: one link per program and library copy, or, recording
//! chosen processes, one per program, copy and process for the calls that recur, and one per program and
//! copy in every process for the others.

use std::{collections::BTreeMap, sync::Arc};

use anyhow::{Result, anyhow};

use super::{
    mode::{INIT_WITNESS, OBJECT, ProbeMode, Programs},
    multi::{MultiProgram, SharedMaps},
};
use crate::os::files::CodeFile;

/// The runtime probes' programs loaded for multi-point uprobe links (Linux 6.6 and later): each program is
/// attached to all its functions of a library copy by one link, so a copy costs five links instead of one
/// uprobe per function, and its release waits for one grace period per link instead of one per probe (a
/// recording started meanwhile no longer waits seconds behind the release). Without them (an older kernel),
/// each function gets a uprobe of its own, as before.
pub(crate) struct RuntimeLinks {
    /// Program name -> the program loaded for multi-point links: in every process, or, placed per process,
    /// the calls that recur in each recorded process.
    programs: BTreeMap<&'static str, MultiProgram>,
    /// Placed per process with `--program-stats`: the same programs loaded again for the calls that do not
    /// recur, linked in every process (filtered by the program), so that the kernel counts each set's runs
    /// apart. Without it, those links take the programs above.
    everywhere: BTreeMap<&'static str, MultiProgram>,
    /// Whether [`RuntimeLinks::everywhere`] is used.
    stats_apart: bool,
    /// Every link made for every process: closing one detaches its points (see [`release_in_background`]).
    links: Vec<std::os::fd::OwnedFd>,
    /// Recording chosen processes: each process's own links (its probes trap nobody else); `None`: one
    /// link per program and copy, for every process.
    scoped: Option<BTreeMap<u32, Vec<std::os::fd::OwnedFd>>>,
    /// What each process's own links cover, kept so that a process joining later gets the same probes.
    plans: Vec<Plan>,
    /// Links the kernel refused since last asked, each said once (their functions got a uprobe each).
    pub(super) refused: Vec<String>,
    /// The maps the programs share, for those loaded at their first use.
    maps: SharedMaps,
    /// The programs of copies found later, loaded meanwhile on a thread of their own (a verifier's tenth of
    /// a second each, the batch program's fallback a quarter): taken at the first link that needs one, so
    /// that a runtime found during the recording (a container's libllama, a dlopened HIP) is linked at once,
    /// not after a verification that the process's own loading outruns.
    preloading: Preloading,
}

/// Runs `load` on a thread of tracer's that takes no signal from then on. A signal delivered to the thread
/// that runs the verifier ends its load with EAGAIN (a command's SIGCHLD, restarting a program's
/// verification each time): the process's signals are left to its other threads. Call it only on a
/// thread started for loading.
fn verify_alone<T>(load: impl FnOnce() -> T) -> T {
    // SAFETY: an all-ones set is valid; this thread's mask alone is changed.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&raw mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &raw const all, std::ptr::null_mut());
    }
    load()
}

/// Program `name` loaded for multi-point links on a thread started for loading ([`verify_alone`]).
fn load_alone(maps: &SharedMaps, name: &'static str) -> Result<MultiProgram> {
    verify_alone(|| MultiProgram::load(OBJECT, maps, name))
}

/// Programs loaded on a thread of their own, each handed over as soon as it is loaded.
struct Preloading {
    /// Their names, in the order they are loaded.
    names: Vec<&'static str>,
    /// The one loaded last, once the set-up has its others ([`RuntimeLinks::finish_preloading`]) or a link
    /// needs it: its verifier time is then not spent while the set-up's programs are verified.
    deferred: Option<&'static str>,
    /// Tells the thread to load [`Preloading::deferred`] (dropped: it is not loaded there).
    go: Option<std::sync::mpsc::Sender<()>>,
    ready: std::sync::mpsc::Receiver<(&'static str, Result<MultiProgram>)>,
}

impl Preloading {
    /// Starts loading `names` with a copy of `maps`, then `deferred` once told to.
    fn start(names: &[&'static str], deferred: &'static str, maps: &SharedMaps) -> Self {
        let mut names: Vec<&'static str> = names.to_vec();
        names.dedup();
        let (tx, ready) = std::sync::mpsc::channel();
        let (go, told) = std::sync::mpsc::channel::<()>();
        let deferred = (!names.contains(&deferred)).then_some(deferred);
        match maps.try_clone() {
            Ok(maps) => {
                let (todo, last) = (names.clone(), deferred);
                std::thread::spawn(move || {
                    for name in todo {
                        if tx.send((name, load_alone(&maps, name))).is_err() {
                            return;
                        }
                    }
                    if let Some(name) = last
                        && told.recv().is_ok()
                    {
                        drop(tx.send((name, load_alone(&maps, name))));
                    }
                });
                names.extend(deferred);
            }
            // Each is loaded at its first use instead.
            Err(_) => names.clear(),
        }
        Self { names, deferred, go: Some(go), ready }
    }

    /// Waits for program `name` if it is being loaded, moving every program loaded by then into `programs`.
    /// A load that failed there is made again at its use, which says why.
    fn wait_for(&mut self, name: &'static str, programs: &mut BTreeMap<&'static str, MultiProgram>) {
        if !self.names.contains(&name) {
            return;
        }
        if Some(name) == self.deferred {
            self.load_deferred();
        }
        while let Ok((done, loaded)) = self.ready.recv() {
            self.names.retain(|n| *n != done);
            if let Ok(program) = loaded {
                programs.entry(done).or_insert(program);
            }
            if done == name {
                break;
            }
        }
        if self.names.contains(&name) {
            // The loading thread is gone: the rest are loaded at their first use.
            self.names.clear();
        }
    }

    /// Lets the thread load the deferred program.
    fn load_deferred(&mut self) {
        if let Some(go) = self.go.take() {
            // A thread already gone has nothing to load: the program is loaded at its first use.
            go.send(()).unwrap_or_default();
        }
    }
}

/// One link's program and where it goes.
#[derive(Clone, Copy)]
pub(super) struct Link {
    pub(super) prog: &'static str,
    /// At the functions' returns.
    pub(super) returns: bool,
    /// Its functions' calls recur ([`tracer_common::api::Op::recurs`]): placed per process when probes are.
    pub(super) recurs: bool,
}

/// One program's points in one library copy, at the functions' entries or returns.
struct Plan {
    prog: &'static str,
    /// The copy, kept open: its links go on this very file (`/proc/self/fd/N`).
    file: Arc<CodeFile>,
    offsets: Vec<u64>,
    cookies: Vec<u64>,
    returns: bool,
}

/// The program `name` of `loaded`, loaded on its first use with `maps`.
fn loaded<'a>(
    loaded: &'a mut BTreeMap<&'static str, MultiProgram>,
    maps: &SharedMaps,
    name: &'static str,
) -> Result<&'a MultiProgram> {
    if !loaded.contains_key(name) {
        loaded.insert(name, MultiProgram::load(OBJECT, maps, name)?);
    }
    loaded.get(name).ok_or_else(|| anyhow!("{name} is not loaded for multi-point links"))
}

/// What placing a process's own links came to ([`RuntimeLinks::add_process`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Linked {
    /// Placed now.
    New,
    /// It had them already, or probes are not placed per process.
    Already,
    /// It ended before they could be placed.
    Gone,
}

impl RuntimeLinks {
    /// Loads the programs of `mode` for multi-point links, sharing `maps` (kept for the programs loaded
    /// later).
    pub(crate) fn load(maps: SharedMaps, mode: ProbeMode) -> Result<Self> {
        let Programs { entry, ret, one_trap, register, doorbell, batch, pipeline_name, .. } = mode.programs();
        let mut programs = BTreeMap::new();
        // The programs of every copy, loaded now, side by side (the verifier takes 0.05 to 0.12 s over each;
        // a kernel without multi-point links says so before anything is attached); the others on a thread,
        // ready by their first use, the batch program last.
        let preloading = Preloading::start(&[INIT_WITNESS, register, doorbell, pipeline_name], batch, &maps);
        let loads = std::thread::scope(|s| {
            let others: Vec<_> = [ret, one_trap]
                .into_iter()
                .filter(|n| *n != entry)
                .map(|name| {
                    let maps = &maps;
                    s.spawn(move || (name, load_alone(maps, name)))
                })
                .collect();
            let mut all = vec![(entry, MultiProgram::load(OBJECT, &maps, entry))];
            for h in others {
                all.push(h.join().map_err(|_panic| anyhow!("a thread loading a runtime program panicked"))?);
            }
            Ok::<_, anyhow::Error>(all)
        })?;
        for (name, program) in loads {
            programs.entry(name).or_insert(program?);
        }
        if !programs.get(entry).is_some_and(MultiProgram::links_work) {
            anyhow::bail!("the kernel makes no multi-point uprobe links");
        }
        Ok(Self {
            preloading,
            programs,
            everywhere: BTreeMap::new(),
            stats_apart: false,
            links: Vec::new(),
            scoped: None,
            plans: Vec::new(),
            refused: Vec::new(),
            maps,
        })
    }

    /// [`RuntimeLinks::load`] on a thread of its own, which takes no signal: the verifier's work over the
    /// runtime programs goes on beside the tracepoints' (a tenth of a second each on this machine's cores).
    pub(crate) fn load_apart(maps: Result<SharedMaps>, mode: ProbeMode) -> std::thread::JoinHandle<Result<Self>> {
        std::thread::spawn(move || verify_alone(|| Self::load(maps?, mode)))
    }

    /// Waits for the programs loading on their thread (started with the set-up's other work, they cost it
    /// little): a runtime found during the recording is then linked at once, where waiting for a verifier
    /// would let a short-lived process's loading outrun its probes. Then the thread loads the batch program
    /// (its verifier's time kept off the set-up's cores): it is not waited for, since only a
    /// libllama needs it, and its link waits for it there, long before the library's first batch (a model
    /// is loaded first).
    pub(crate) fn finish_preloading(&mut self) {
        let deferred = self.preloading.deferred;
        while let Some(&name) = self.preloading.names.iter().find(|n| Some(**n) != deferred) {
            self.preloading.wait_for(name, &mut self.programs);
        }
        self.preloading.load_deferred();
    }

    /// From now on, each process gets links of its own for the calls that recur ([`RuntimeLinks::add_process`]);
    /// other processes that map the same copies do not trap on them.
    /// `stats_apart`: the programs of the calls that do not recur are loaded apart, their runs counted apart
    /// (`record --program-stats`).
    pub(crate) fn scope_to_processes(&mut self, stats_apart: bool) {
        self.scoped.get_or_insert_with(BTreeMap::new);
        self.stats_apart = stats_apart;
    }

    /// Whether probes are placed per process.
    pub(crate) const fn scoped(&self) -> bool {
        self.scoped.is_some()
    }

    /// A process joining the recording gets links on every planned copy ([`Linked::New`]); nothing when it
    /// already had them, or probes are not placed per process. A process that has already ended gets none
    /// ([`Linked::Gone`]): its calls that recur were not seen.
    pub(crate) fn add_process(&mut self, pid: u32) -> Result<Linked> {
        let Self { programs, scoped: Some(by_pid), plans, .. } = self else { return Ok(Linked::Already) };
        if by_pid.contains_key(&pid) {
            return Ok(Linked::Already);
        }
        let mut fds = Vec::with_capacity(plans.len());
        for plan in plans.iter() {
            let program = programs.get(plan.prog).ok_or_else(|| anyhow!("{} is not loaded", plan.prog))?;
            match program.attach(&plan.file.proc_path(), &plan.offsets, &plan.cookies, Some(pid), plan.returns) {
                Ok(fd) => fds.push(fd),
                Err(e) if process_gone(&e) => return Ok(Linked::Gone),
                Err(e) => return Err(e),
            }
        }
        by_pid.insert(pid, fds);
        Ok(Linked::New)
    }

    /// A process that ended: its links closed, in the background (each close waits for a grace period).
    pub(crate) fn remove_process(&mut self, pid: u32) {
        if let Some(fds) = self.scoped.as_mut().and_then(|by_pid| by_pid.remove(&pid))
            && !fds.is_empty()
        {
            drop(std::thread::Builder::new().name("tracer-release".into()).spawn(move || drop(fds)));
        }
    }

    /// The links refused since the last call, as sentences (their functions were probed one uprobe each).
    pub(crate) fn take_refused(&mut self) -> Vec<String> {
        std::mem::take(&mut self.refused)
    }

    /// Runs of these programs the kernel skipped (another tracer program was running on that CPU).
    pub(crate) fn misses(&self) -> u64 {
        self.programs.values().chain(self.everywhere.values()).map(MultiProgram::misses).sum()
    }

    /// Each program's (name, runs, nanoseconds) as the kernel counted them (`record --program-stats`); placed
    /// per process, the programs linked in every process are named `NAME (every process)`.
    pub(crate) fn stats(&self) -> Vec<(String, u64, u64)> {
        let own = self.programs.iter().map(|(name, p)| ((*name).to_owned(), p));
        let everywhere = self.everywhere.iter().map(|(name, p)| (format!("{name} (every process)"), p));
        own.chain(everywhere).filter_map(|(name, p)| p.stats().map(|(runs, ns)| (name, runs, ns))).collect()
    }

    /// Links `link`'s program at `points` (offset, cookie) of `file`: for every process, or, when probes are
    /// placed per process and its calls recur, for each process of the recording.
    pub(super) fn link(&mut self, link: Link, file: &Arc<CodeFile>, points: &[(u64, u64)]) -> Result<()> {
        let Link { prog, returns, recurs } = link;
        if !self.programs.contains_key(prog) {
            self.preloading.wait_for(prog, &mut self.programs);
        }
        let (offsets, cookies): (Vec<u64>, Vec<u64>) = points.iter().copied().unzip();
        let target = file.proc_path();
        match &mut self.scoped {
            None => {
                let program = loaded(&mut self.programs, &self.maps, prog)?;
                self.links.push(program.attach(&target, &offsets, &cookies, None, returns)?);
            }
            Some(_) if !recurs => {
                // The same program as the calls that recur, but with `--program-stats`, where it is loaded
                // again so that the kernel counts each set's runs apart (a verifier's tenth of a second each).
                let set = if self.stats_apart { &mut self.everywhere } else { &mut self.programs };
                let program = loaded(set, &self.maps, prog)?;
                self.links.push(program.attach(&target, &offsets, &cookies, None, returns)?);
                return Ok(());
            }
            Some(by_pid) => {
                let program = loaded(&mut self.programs, &self.maps, prog)?;
                for (&pid, fds) in by_pid.iter_mut() {
                    match program.attach(&target, &offsets, &cookies, Some(pid), returns) {
                        Ok(fd) => fds.push(fd),
                        Err(e) if process_gone(&e) => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        self.plans.push(Plan { prog, file: Arc::clone(file), offsets, cookies, returns });
        Ok(())
    }
}

/// Whether a link failed because its process has ended (`ESRCH`).
fn process_gone(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.raw_os_error() == Some(libc::ESRCH)))
}
