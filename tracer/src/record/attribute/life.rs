//! A process's life in attribution: its fork, exec and exit applied once (its entry made, replaced,
//! dropped), a library's initializers run, and what goes with an image when it ends.

use tracer_common::ProcEvent;

use super::{Attributor, process::Process};
use crate::{
    record::{intake::decode::Proc, names::ProcessNames},
    trace::{self, Cause, Line},
};

/// Kernel handles (and addresses outside its mappings) a process image must have held for its let-go to
/// give the allocator's free memory back to the system (`malloc_trim`): a few milliseconds each, taken
/// only after a process that held thousands.
const TRIM_AFTER: usize = 4096;

/// A process's life in attribution: its events (fork, exec, exit, a library's initializers run) and what
/// goes with its image when it ends.
impl Attributor {
    /// Names the command tracer started (`-- COMMAND ARGS`), `pid`, until it execs.
    pub(crate) fn name_command(&mut self, pid: u32, argv: Vec<String>) {
        self.live.entry(pid).or_default().said.name_command(argv);
    }

    pub(super) fn proc(&mut self, p: Proc, out: &mut Vec<Line>) {
        let ts = p.origin.ts;
        // An exec or an exit ends the image an early look of the PID was taken at.
        if let (ProcEvent::Exec | ProcEvent::Exit, Some(e)) = (p.event, &self.names.early) {
            e.forget_before(p.pid, ts);
        }
        match p.event {
            ProcEvent::Fork => {
                self.effects.joined.push(p.pid);
                // A new process: nothing of another process that had its PID before, but for what the library
                // watch knows and has said of the PID (a look at the child may have come before its fork).
                let mut new = Process::default();
                if let Some(mut old) = self.live.remove(&p.pid) {
                    new.watched = old.watched.take();
                    new.said.carry_mappings(&mut old.said);
                    self.let_go(p.pid, old, out);
                }
                self.live.insert(p.pid, new);
                self.snapshot(p.pid);
                let said = &mut self.live.entry(p.pid).or_default().said;
                if let Some(rec) = self.processes.observe(said, p.pid, Cause::Fork, ts, 0, &p.comm) {
                    out.push(Line::Process(trace::Process { ppid: p.parent, ..rec }));
                }
            }
            ProcEvent::Exec => {
                self.effects.joined.push(p.pid);
                self.effects.execs.push((p.pid, ts));
                // A new program: nothing of the old image means anything now. No maps read now: the
                // dynamic loader is still mapping and unmapping (its cache, its libraries), and a mapping
                // read now may hold another file by the time an address in it is looked up. Its first API
                // event reads them (its libraries are loaded by then).
                // What the trace said of the process goes over to its new image.
                let mut image = Process { names: ProcessNames::since(ts), ..Process::default() };
                if let Some(mut old) = self.live.remove(&p.pid) {
                    image.said = std::mem::take(&mut old.said);
                    image.watched = old.watched.take();
                    self.let_go(p.pid, old, out);
                }
                self.effects.seen.push(p.pid);
                self.last_scanned = 0;
                if let Some(rec) = self.processes.observe(&mut image.said, p.pid, Cause::Exec, ts, ts, &p.comm) {
                    out.push(Line::Process(rec));
                }
                self.live.insert(p.pid, image);
            }
            ProcEvent::Exit => {
                self.effects.left.push(p.pid);
                // What the watch knows of it is kept until the session has the watch let go of it
                // ([`super::Effects::left`]).
                let mut gone = self.live.remove(&p.pid);
                self.leaving.insert(p.pid, gone.as_mut().and_then(|g| g.watched.take()));
                if let Some(gone) = gone {
                    self.let_go(p.pid, gone, out);
                }
                self.last_scanned = 0;
                if self.own_child != Some(p.pid) {
                    out.push(Line::Exit(trace::Exit { ts, pid: p.pid, code: None, signal: None }));
                }
            }
            ProcEvent::Init => self.effects.initialized.push((p.pid, p.origin.lib, ts)),
        }
    }

    /// What is left of a process image that ended (exec, exit, or a fork reusing its PID unseen): where
    /// its launches came from, written; its parameter plans, taken back from the eBPF map.
    pub(super) fn let_go(&mut self, pid: u32, image: Process, out: &mut Vec<Line>) {
        out.extend(image.sites.records(pid));
        let held = image.names.held();
        self.effects.plans_gone.extend(image.planned.into_iter().map(|handle| (pid, handle)));
        if held >= TRIM_AFTER {
            // Its tables freed, the allocator's free pages go back to the system: glibc keeps them in its
            // arenas otherwise, and a flood's recorder stayed at its peak after it.
            // SAFETY: malloc_trim only releases free memory of the allocator's own.
            unsafe {
                libc::malloc_trim(0);
            }
        }
    }

    /// The parameter plans of a process leaving the filter alive, to take back from the eBPF map (it keeps
    /// its other state: it may make no further call that reaches the recording).
    pub(crate) fn take_plans(&mut self, pid: u32) -> Vec<u64> {
        self.live.get_mut(&pid).map(|p| std::mem::take(&mut p.planned)).unwrap_or_default()
    }
}
