//! One recording, in three steps: [`Session::set_up`] (load, attach, fill the filter, write the header),
//! [`Session::record`] (the loop: ring, periodic looks at the traced processes, stop conditions) and
//! [`Session::finish`] (last drain, exit status, footer with every loss counted).

use crate::os::messages::{say, tell, warning};
use std::{collections::BTreeMap, io::IsTerminal as _, time::Duration};

use anyhow::Result;

pub(crate) mod args;
pub(crate) mod command;
mod footer;
mod kernel;
pub(crate) mod live;
pub(crate) mod ready;
mod setup;
pub(crate) mod signals;

use args::runtimes;
pub(crate) use args::{RecordArgs, Setup, Targets};

use command::Command;
use kernel::KernelMaps;
use live::{LiveMetrics, LiveStatus};
use signals::{Signals, restore_default_signals};

use crate::{
    os::clock::monotonic_ns,
    record::{
        attribute::Attributor,
        intake::{
            decode::{Event, decode},
            ring::{self, Ring},
        },
        probes::{attach, found::Found, ollama, watch::LibraryWatch},
    },
    trace::{self, Line, Stop, Writer},
};

/// How often the losses so far are written ([`trace::Checkpoint`]).
const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

pub(super) struct Session<'a> {
    args: &'a RecordArgs,
    ebpf: aya::Ebpf,
    watch: LibraryWatch,
    /// The kernel's maps user space reads and writes while recording.
    kernel: KernelMaps,
    ring: Ring,
    attr: Attributor,
    writer: Writer,
    scope: Scope,
    /// While held, the kernel times every program run (`--program-stats`).
    _program_stats: Option<std::os::fd::OwnedFd>,
    /// Live metrics and their endpoint (`--metrics`).
    pub(super) metrics: Option<LiveMetrics>,
}

/// What the recording follows: set at its start, the Ollama servers added as they start.
struct Scope {
    /// Targets given by PID (no command): the recording ends once they have all exited.
    until_targets_exit: bool,
    /// The command tracer started.
    child_pid: Option<u32>,
    /// Ollama servers followed, those running at the start and those started since.
    servers: Vec<u32>,
    /// Watching for Ollama servers to start (`--ollama`).
    ollama: bool,
}

/// How a recording ended: why, the started command's end if it has ended, and the signal that stopped
/// the recording.
pub(super) struct Ended {
    stop: Stop,
    command: Option<command::Ended>,
    signal: Option<libc::c_int>,
}

impl Session<'_> {
    /// Resumes the command (its first instruction runs traced) and records until a stop condition.
    #[expect(
        clippy::future_not_send,
        reason = "run on the current thread's runtime (record/mod.rs); the run histories share launches by Rc, \
                  whose plain counts cost less than atomic ones on every repeated launch"
    )]
    pub(super) async fn record(&mut self, mut child: Option<Command>, signals: &mut Signals) -> Result<Ended> {
        if let Some(c) = &child {
            c.resume();
        }
        self.say_started();
        self.update_metrics_session();
        // The probes are live: said to a waiting script or service manager (with -q too).
        let mut facts =
            vec![("pid", std::process::id().to_string()), ("trace", self.args.output.display().to_string())];
        if let Some(m) = &self.metrics {
            facts.push(("metrics", m.server.addr().to_string()));
        }
        let status = format!("recording to {}", self.args.output.display());
        let _ready = ready::Ready::announce(self.args.ready_file.as_deref(), &facts, &status);
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        // Effects are applied after every batch too; this tick finds a command's end and the effects of a
        // quiet ring (each tick is a wake-up: see `ring::POLL`).
        let mut poll = tokio::time::interval(Duration::from_millis(25));
        let mut checkpoint = tokio::time::interval_at(tokio::time::Instant::now() + CHECKPOINT_EVERY, CHECKPOINT_EVERY);
        let deadline = self.args.duration.map(|d| tokio::time::Instant::now() + d);
        if let Some(at) = deadline {
            crate::os::stop::set_deadline(at.into_std());
        }
        let sleep = tokio::time::sleep_until(
            deadline.unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_hours(8760)),
        );
        tokio::pin!(sleep);
        let mut signal_seen = None;
        let mut status = LiveStatus::new(!crate::os::messages::quiet() && std::io::stderr().is_terminal());
        let stop = loop {
            tokio::select! {
                Some(batch) = self.ring.next() => self.take_batch(&batch)?,
                _ = poll.tick() => {
                    self.apply_effects()?;
                    if child.as_mut().is_some_and(|c| c.try_wait().is_some()) {
                        break Stop::CommandExited;
                    }
                }
                _ = checkpoint.tick() => self.checkpoint()?,
                _ = tick.tick() => {
                    self.writer.flush_and_rotate()?;
                    self.update_metrics_session();
                    if status.due() {
                        let line = self.status_line(&mut status);
                        status.show(&line);
                    }
                    if self.kernel.by_pid() && !self.look_at_processes()? {
                        break Stop::TargetsExited;
                    }
                }
                sig = signals.recv() => {
                    signal_seen = Some(sig);
                    break Stop::Signal;
                }
                () = &mut sleep, if deadline.is_some() => break Stop::Duration,
            }
        };
        status.clear();
        if let Some(sig) = signal_seen {
            // The recording stops now, without waiting for the command: it gets the same signal (as a
            // terminal's Ctrl-C would give it), and a second signal ends tracer at once, leaving every
            // record written so far readable.
            if let Some(c) = &child {
                c.signal(sig);
            }
            restore_default_signals();
        }
        let command = self.command_end(child.as_mut(), stop, signal_seen);
        Ok(Ended { stop, command, signal: signal_seen })
    }

    /// What the user reads as the recording starts: where it goes, what it follows.
    fn say_started(&self) {
        let n = self.watch.probed.len();
        if let Some(m) = &self.metrics {
            say!("metrics for Prometheus at http://{}/metrics", m.server.addr());
        }
        say!(
            "recording {}to {} ({n} library cop{}); stop with Ctrl-C",
            if self.kernel.by_pid() { "" } else { "every process that calls a probed runtime " },
            self.args.output.display(),
            if n == 1 { "y" } else { "ies" }
        );
        for pid in &self.scope.servers {
            say!("following `ollama serve` (pid {pid}) and its runners");
        }
        if self.scope.ollama && self.scope.servers.is_empty() {
            say!(
                "no `ollama serve` is running yet: waiting for one to start (it and its runners are traced from their first instruction)"
            );
        }
    }

    /// The command's end if it has ended; a command that never ran, or that goes on untraced, said.
    fn command_end(
        &self,
        mut child: Option<&mut Command>,
        stop: Stop,
        signal: Option<libc::c_int>,
    ) -> Option<command::Ended> {
        let command = child.as_mut().and_then(|c| c.try_wait());
        if let Some(c) = child {
            // A command that ended without running: why its exec failed, in one sentence.
            if command.is_some()
                && let Some(e) = c.exec_failure()
            {
                tell!("cannot run {}: {e}", self.args.command.join(" "));
            }
            if command.is_none() && signal.is_none() {
                say!(
                    "the command (pid {}) was still running when the recording stopped ({}); it goes on, untraced",
                    c.pid,
                    stop.as_str()
                );
            }
        }
        command
    }

    /// "tracer: 12 s, 3 processes, 41200 launches/s, 0 dispatches/s, 0 dropped": what arrived since the
    /// last line.
    fn status_line(&self, status: &mut LiveStatus) -> String {
        let counts = self.writer.counts();
        let n = |k: &str| counts.get(k).copied().unwrap_or(0);
        let (launches, dispatches) = (n("launch"), n("dispatch"));
        let dropped: u64 = self.ring_drops().values().sum();
        status.line(self.processes_traced(), launches, dispatches, dropped)
    }

    /// Records the ring could not take so far, by kind, summed over the CPUs.
    fn ring_drops(&self) -> BTreeMap<String, u64> {
        self.kernel.counts.drops_per_cpu().into_iter().map(|(kind, n)| (kind.to_owned(), n.iter().sum())).collect()
    }

    /// Processes in the kernel's filter, or seen (recording every process).
    fn processes_traced(&self) -> usize {
        if self.kernel.by_pid() { self.kernel.filtered() } else { self.attr.processes_seen() }
    }

    /// The session's figures for the metrics endpoint's next renders: its losses and processes.
    fn update_metrics_session(&self) {
        let Some(m) = &self.metrics else { return };
        let dropped = self.drops_so_far();
        m.server.set_session(dropped, self.processes_traced() as u64);
    }

    /// Records lost so far, by kind: the drain thread's own losses beside the ring's, as the footer lists
    /// them.
    fn drops_so_far(&self) -> BTreeMap<String, u64> {
        let mut dropped = self.ring_drops();
        for (kind, n) in self.ring.dropped() {
            *dropped.entry(kind).or_default() += n;
        }
        dropped
    }

    /// The losses so far, in the trace: a recording killed before its footer still says them; every stage's
    /// counts so far, to the metrics endpoint.
    fn checkpoint(&mut self) -> Result<()> {
        if let Some(m) = &self.metrics {
            m.server.set_counted(self.counted().named().collect());
        }
        let mut drops = self.drops_so_far();
        drops.retain(|_, n| *n > 0);
        let c = trace::Checkpoint { ts: monotonic_ns(), drops };
        self.writer.write(&Line::Checkpoint(c))
    }

    /// New runners, late dlopens, containers: looks at what each traced process maps now. False when
    /// every --pid target has exited (the exit tracepoint removes each from the filter as it ends).
    fn look_at_processes(&mut self) -> Result<bool> {
        use crate::os::proc::{LIVE, Procs as _};
        let now = monotonic_ns();
        // A process that ended before it joined the filter (found in /proc as it exited) has no exit event
        // to take it out: taken out here.
        let (live, ended): (Vec<u32>, Vec<u32>) =
            self.kernel.pids.keys().flatten().partition(|&pid| LIVE.is_running(pid));
        for pid in ended {
            self.leave_filter(pid)?;
        }
        for pid in &live {
            // A process the kernel put in the filter (a traced process's child) whose fork the session has not
            // read yet, when it lags behind the ring: its own probes are placed now, before its libraries are
            // listed, so a mapping listed here says whether they came late.
            self.watch.scope(*pid, true, self.attr.watched(*pid));
            // One reading of its maps for both: naming's look and the library listing.
            let listing = LIVE.maps(*pid);
            self.attr.snapshot_from(*pid, listing.clone());
            self.list_libraries_from(*pid, now, listing)?;
        }
        Ok(!(self.scope.until_targets_exit && live.is_empty()))
    }

    /// Decodes, attributes and writes a batch of records. What attributing a record asks for is done before
    /// the next record: a process seen for the first time has its maps looked at before the records after
    /// its first (a short-lived one may be gone by the end of a batch), a joining process gets its probes.
    fn take_batch(&mut self, batch: &[u8]) -> Result<()> {
        self.ring.taken(batch);
        let (mut records, mut undecodable) = (0, 0);
        for record in ring::records(batch) {
            records += 1;
            match decode(record) {
                Ok(ev) => self.attr.take(ev, &mut self.writer)?,
                Err(_) => undecodable += 1,
            }
            if self.attr.effects_urgent() {
                self.apply_effects()?;
            }
        }
        self.ring.took(records, undecodable);
        self.apply_effects()
    }

    /// Does what attribution asked for ([`crate::record::attribute::Effects`]): processes that just appeared
    /// (their first event, an exec) have their maps looked at, since the libraries they use are mapped by
    /// now, even if they end before the next periodic look.
    fn apply_effects(&mut self) -> Result<()> {
        let effects = self.attr.take_effects();
        // Probes placed per process: a process joining gets its own before anything else is done; one
        // that ended lets its go.
        for pid in effects.joined {
            self.watch.scope(pid, true, self.attr.watched(pid));
        }
        for (pid, ts) in effects.execs {
            self.predict(pid, ts)?;
        }
        for o in effects.opened {
            let found = self.watch.opened(&mut self.ebpf, &o, self.args.probe_mode, self.attr.watched(o.origin.pid));
            self.attr.found(found, &mut self.writer)?;
            // The dynamic loader has mapped what it loaded before this runtime: listed now, since a
            // short-lived program may be gone by the time its first API event is taken from the queue.
            self.list_libraries(o.origin.pid, monotonic_ns())?;
        }
        for (pid, lib, ts) in effects.initialized {
            let found = self.watch.initialized(pid, lib, ts, self.attr.watched(pid));
            self.attr.found(found, &mut self.writer)?;
            self.list_libraries(pid, monotonic_ns())?;
        }
        for w in self.attr.take_warnings() {
            warning!("{w} (not read further)");
        }
        for (pid, handle, plan) in effects.plans {
            self.kernel.give_plan(pid, handle, plan);
        }
        for (pid, handle) in effects.plans_gone {
            self.kernel.take_plan(pid, handle);
        }
        let now = monotonic_ns();
        for pid in effects.seen {
            if self.scope.ollama {
                self.follow_if_server(pid)?;
            }
            self.list_libraries(pid, now)?;
        }
        // Processes that ended, once everything about them is listed: their own probes go, and the library
        // watch lets go of them (in every mode: system-wide, exits are the only place it hears of them).
        for pid in effects.left {
            self.watch.unscope(pid);
            let found = self.watch.forget(pid, self.attr.let_go_watched(pid));
            self.attr.found(found, &mut self.writer)?;
        }
        Ok(())
    }

    /// A process that exec'd in another root than tracer's (a container, a chroot): the runtime copies its
    /// program will load (its `DT_NEEDED` closure and what lies beside it to be dlopened, found in its root as
    /// its dynamic loader will find them) are probed now, and the other GPU libraries among them counted,
    /// while it starts: a backend's registrations at its load are seen. Whether a copy's probes came before
    /// its first call there, its initializer's witness says. A process of tracer's own root has its copies
    /// probed as it opens them (a command's, before it starts).
    fn predict(&mut self, pid: u32, ts: u64) -> Result<()> {
        let Some(other) = LibraryWatch::execd(pid, ts, self.attr.watched(pid)) else { return Ok(()) };
        let Some((root, loaded)) = crate::record::probes::ldso::of_process(pid) else { return Ok(()) };
        // A process exec'd now is traced from its first call.
        let runtimes = runtimes(self.args, false);
        // The runtimes first, the ones a backend's load calls into first of all (its registrations); the
        // libraries whose calls are counted last: the process is loading them meanwhile.
        let rank = |name: &str| match runtimes.iter().position(|r| name.starts_with(r)) {
            Some(_) if ["libamdhip64", "libhsa-runtime64", "libcuda"].iter().any(|r| name.starts_with(r)) => 0,
            Some(_) => 1,
            None => 2,
        };
        let mut found: Vec<(u8, String, crate::record::probes::libs::LibCopy)> = loaded
            .objects
            .iter()
            .skip(1)
            .filter_map(|p| {
                let name = p.file_name()?.to_string_lossy().into_owned();
                Some((rank(&name), name, crate::record::probes::libs::in_root(&root, p)?))
            })
            .collect();
        // A root seen for the first time (a container's first program: its entry script, its server): the
        // runtime copies in its usual places too, after this program's own, for the programs it starts.
        if self.watch.new_root(&other) {
            let usual = runtimes.iter().flat_map(|r| crate::record::probes::libs::usual_places_in(&root, r));
            found.extend(usual.filter_map(|c| {
                let name = c.path.rsplit('/').next()?.to_owned();
                Some((rank(&name).max(1), name, c))
            }));
        }
        found.sort_by_key(|(r, _, _)| *r);
        for (rank, name, copy) in found {
            let found = if rank < 2 {
                self.watch.attach_found(&mut self.ebpf, pid, &copy, self.args.probe_mode)
            } else {
                let gpu = crate::record::probes::libs::gpu_library(&name, Some(&copy.file));
                self.watch.count_entries(gpu, &copy.path, &copy.file).map(Found::Counting).into_iter().collect()
            };
            self.attr.found(found, &mut self.writer)?;
        }
        Ok(())
    }

    /// The library watch's look at a process (see `LibraryWatch::scan`), its records written; a process
    /// that has ended is listed from what naming holds of it.
    fn list_libraries(&mut self, pid: u32, now: u64) -> Result<()> {
        use crate::os::proc::{LIVE, Procs as _};
        self.list_libraries_from(pid, now, LIVE.maps(pid))
    }

    /// [`Session::list_libraries`] from a listing of its maps read just now (None: unreadable, or gone).
    fn list_libraries_from(
        &mut self,
        pid: u32,
        now: u64,
        listing: Option<Vec<crate::os::proc::MapsEntry>>,
    ) -> Result<()> {
        let mode = self.args.probe_mode;
        // A process that has ended is listed from what naming holds of it.
        let held = if listing.as_ref().is_none_or(Vec::is_empty) { self.attr.held_mappings(pid) } else { Vec::new() };
        let found = self.watch.scan(&mut self.ebpf, pid, now, mode, listing, (held, self.attr.lend(pid)));
        self.attr.found(found, &mut self.writer)?;
        Ok(())
    }

    /// A process that joined the filter by its name (`ollama`) at its exec, or a descendant of one: a new
    /// server is followed (its bundled runtimes probed before its runners load them); an `ollama` client
    /// command that no traced process started leaves the filter.
    fn follow_if_server(&mut self, pid: u32) -> Result<()> {
        use crate::os::proc::{LIVE, Procs as _};
        if self.scope.servers.contains(&pid) {
            return Ok(());
        }
        let argv = LIVE.argv(pid);
        match trace::ollama_part(&argv) {
            trace::OllamaPart::Server => {
                if let Err(why) = ollama::trusted_server(pid, self.args.ollama_user) {
                    warning!(
                        "not following `ollama serve` pid {pid}: {why} (give --ollama-user to trust that user's Ollama)"
                    );
                    self.leave_filter(pid)?;
                    return Ok(());
                }
                self.scope.servers.push(pid);
                // A server that starts now has no runner yet: its runners are traced from their first call.
                for runtime in runtimes(self.args, false) {
                    for copy in ollama::bundle_copies(pid, runtime) {
                        if !self.watch.may_probe((copy.dev, copy.inode), &copy.path, pid) {
                            continue;
                        }
                        match self.watch.attach(&mut self.ebpf, &copy, self.args.probe_mode) {
                            Ok(found) => self.attr.found(found, &mut self.writer)?,
                            Err(e) => warning!("{} skipped: {e:#}", copy.path),
                        }
                    }
                }
                say!("following `ollama serve` (pid {pid}) and its runners");
            }
            trace::OllamaPart::Runner { .. } => {}
            trace::OllamaPart::Other => {
                let parent = LIVE.stat(pid).map_or(0, |s| s.ppid);
                if argv.first().is_some_and(|a| a.rsplit('/').next() == Some("ollama"))
                    && !self.kernel.in_filter(parent)
                {
                    self.leave_filter(pid)?;
                }
            }
        }
        Ok(())
    }

    /// Takes a process out of the kernel's filter, with its plans, tallies and runs (see
    /// [`KernelMaps::leave`]). The counts stay for the end. Its exit will not reach the recording: the library
    /// watch lets go of it now, as at an exit.
    fn leave_filter(&mut self, pid: u32) -> Result<()> {
        let plans = self.attr.take_plans(pid);
        self.kernel.leave(pid, plans);
        let found = self.watch.forget(pid, self.attr.let_go_watched(pid));
        self.attr.found(found, &mut self.writer)?;
        Ok(())
    }

    /// Reads what the probes committed before the stop, records the command's exit, and writes the
    /// footer: drops per CPU, every loss counter, the tracer's own cost.
    pub(super) fn finish(mut self, ended: Ended) -> Result<Option<u8>> {
        // The endpoint closes with the recording (the child that releases the probes must not keep its port);
        // the connections it closed to make room and those it refused go into the footer.
        let listener = self.metrics.as_ref().map(|m| m.server.listener_fd());
        let shed = self.metrics.take().map(|m| m.server.shed());
        // Processes ended by now have their exit in the ring: the last read below lets each go.
        self.attr.stopping();
        self.ring.stop();
        while let Some(batch) = self.ring.waiting() {
            self.take_batch(&batch)?;
        }
        // The runs still under way in the kernel's map: each the last of its thread's launches (any later
        // record of the thread would have written it).
        for r in self.kernel.runs_under_way() {
            self.attr.take(Event::Repeat(r), &mut self.writer)?;
        }
        // What the last records asked for: libraries of the processes they showed first, processes that
        // ended let go of.
        self.apply_effects()?;
        for w in self.attr.finders_unfinished() {
            warning!("{w}");
        }
        if let (Some(pid), Some(end)) = (self.scope.child_pid, ended.command) {
            let (code, signal) = match end {
                command::Ended::Exited(c) => (Some(c), None),
                command::Ended::Killed(s) => (None, Some(s)),
            };
            let exit = Found::Exit(trace::Exit { ts: monotonic_ns(), pid, code, signal });
            self.attr.found([exit], &mut self.writer)?;
        }
        // Where the running processes' launches came from, and their calls into GPU libraries.
        self.attr.launch_sites(&mut self.writer)?;
        let calls = self.watch.entries.as_mut().map(|en| en.take(None)).unwrap_or_default();
        self.attr.found(calls, &mut self.writer)?;
        self.attr.found(self.kernel.tallies(), &mut self.writer)?;
        let footer = self.footer(ended.stop, shed);
        let drops = footer.total_drops();
        let counts: BTreeMap<&'static str, u64> = self.writer.counts();
        self.writer.finish(footer)?;
        // The trace is complete. Detaching the probes takes the kernel about 100 ms each, one after the
        // other; a child keeps them so that this process can end now (the probes stay in place, recording
        // nothing, until the kernel has released them).
        if !self.args.sync_teardown {
            attach::release_in_background(listener.as_slice());
        }
        let n = |k: &str| counts.get(k).copied().unwrap_or(0);
        say!(
            "stopped ({}); wrote {} launches, {} configs, {} calls, {} kernels to {}; {} records dropped",
            ended.stop.as_str(),
            n("launch"),
            n("config"),
            n("call"),
            n("kernel"),
            self.args.output.display(),
            drops
        );
        // The command's status; a recording stopped by a signal before the command ended answers as a
        // process that signal ended, whatever it recorded (a command, PIDs, every process).
        Ok(match (ended.command, ended.signal) {
            (Some(end), _) => Some(end.status()),
            (None, Some(sig)) => Some(command::Ended::Killed(sig).status()),
            (None, None) => self.scope.child_pid.map(|_| 0),
        })
    }
}
