//! The runtime probes as multi-point uprobe links: one link per program and library copy, or, recording
//! chosen processes, one per program, copy and process.

use std::{collections::BTreeMap, sync::Arc};

use anyhow::{Result, anyhow};
use aya::Ebpf;

use super::{MultiProgram, OBJECT, ProbeMode, Programs};
use crate::files::CodeFile;

/// The runtime probes' programs loaded for multi-point uprobe links (Linux 6.6 and later): each program is
/// attached to all its functions of a library copy by one link, so a copy costs five links instead of one
/// uprobe per function, and its release waits for one grace period per link instead of one per probe (a
/// recording started meanwhile no longer waits seconds behind the release). Without them (an older kernel),
/// each function gets a uprobe of its own, as before.
pub(crate) struct RuntimeLinks {
    /// Program name -> the program loaded for multi-point links.
    programs: BTreeMap<&'static str, MultiProgram>,
    /// Every link made for every process: closing one detaches its points (see [`release_in_background`]).
    links: Vec<std::os::fd::OwnedFd>,
    /// Recording chosen processes: each process's own links (its probes trap nobody else); `None`: one
    /// link per program and copy, for every process.
    scoped: Option<BTreeMap<u32, Vec<std::os::fd::OwnedFd>>>,
    /// What each link covers, kept so that a process joining later gets the same probes.
    plans: Vec<Plan>,
    /// Links the kernel refused since last asked, each said once (their functions got a uprobe each).
    pub(super) refused: Vec<String>,
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

impl RuntimeLinks {
    /// Loads the programs of `mode` for multi-point links, sharing `ebpf`'s maps.
    pub(crate) fn load(ebpf: &Ebpf, mode: ProbeMode) -> Result<Self> {
        let Programs { entry, ret, register, doorbell, one_trap, .. } = mode.programs();
        let mut programs = BTreeMap::new();
        // The batch program is loaded once a libllama is probed (its loops take the verifier a quarter of a
        // second).
        for name in [entry, ret, register, doorbell, one_trap] {
            if !programs.contains_key(name) {
                programs.insert(name, MultiProgram::load(OBJECT, ebpf, name)?);
            }
        }
        Ok(Self { programs, links: Vec::new(), scoped: None, plans: Vec::new(), refused: Vec::new() })
    }

    /// From now on, each process gets links of its own ([`RuntimeLinks::add_process`]); other processes
    /// that map the same copies do not trap.
    pub(crate) fn scope_to_processes(&mut self) {
        self.scoped.get_or_insert_with(BTreeMap::new);
    }

    /// Whether probes are placed per process.
    pub(crate) const fn scoped(&self) -> bool {
        self.scoped.is_some()
    }

    /// A process joining the recording gets links on every planned copy; false when it already had them, or
    /// probes are not placed per process. A process that has already ended is skipped.
    pub(crate) fn add_process(&mut self, pid: u32) -> Result<bool> {
        let Self { programs, scoped: Some(by_pid), plans, .. } = self else { return Ok(false) };
        if by_pid.contains_key(&pid) {
            return Ok(false);
        }
        let mut fds = Vec::with_capacity(plans.len());
        for plan in plans.iter() {
            let program = programs.get(plan.prog).ok_or_else(|| anyhow!("{} is not loaded", plan.prog))?;
            match program.attach(&plan.file.proc_path(), &plan.offsets, &plan.cookies, Some(pid), plan.returns) {
                Ok(fd) => fds.push(fd),
                Err(e) if process_gone(&e) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        by_pid.insert(pid, fds);
        Ok(true)
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
        self.programs.values().map(MultiProgram::misses).sum()
    }

    /// Each program's (name, runs, nanoseconds) as the kernel counted them (`record --program-stats`).
    pub(crate) fn stats(&self) -> Vec<(&'static str, u64, u64)> {
        self.programs.iter().filter_map(|(name, p)| p.stats().map(|(runs, ns)| (*name, runs, ns))).collect()
    }

    /// Links `prog` at `points` (offset, cookie) of `file`, at the returns when `returns`: for every process,
    /// or for each process of the recording when probes are placed per process.
    pub(super) fn link(
        &mut self,
        ebpf: &Ebpf,
        prog: &'static str,
        file: &Arc<CodeFile>,
        points: &[(u64, u64)],
        returns: bool,
    ) -> Result<()> {
        if !self.programs.contains_key(prog) {
            self.programs.insert(prog, MultiProgram::load(OBJECT, ebpf, prog)?);
        }
        let program = self.programs.get(prog).ok_or_else(|| anyhow!("{prog} is not loaded for multi-point links"))?;
        let (offsets, cookies): (Vec<u64>, Vec<u64>) = points.iter().copied().unzip();
        let target = file.proc_path();
        match &mut self.scoped {
            None => self.links.push(program.attach(&target, &offsets, &cookies, None, returns)?),
            Some(by_pid) => {
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
