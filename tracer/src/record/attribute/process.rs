//! Process records: who a process is, read from /proc (or the early look) when the trace first speaks of it.
//! A process is named by (pid, start time), so a reused PID is a new process. What the trace has said of
//! each process ([`Said`]) lives in attribution's entry for it and goes with it at its exit; this holds
//! only the recording's settings for writing them.

use std::{
    collections::{HashMap, HashSet},
    path::PathBuf,
    rc::Rc,
};

use super::{code_files, graphs, sites};
use crate::{
    os::proc::{LIVE, Procs},
    record::{
        intake::decode::Params,
        names::{ProcessNames, early::EarlyLooks},
        probes::{found::MappingsSaid, ollama, watch::Watched},
    },
    trace::{self, Cause, event::Launch},
};

/// What the trace has said of one process image, kept in attribution's entry for the process (carried
/// over an exec).
#[derive(Default)]
pub(crate) struct Said {
    /// The start time of the process its record was written for (None: none written yet).
    start: Option<u64>,
    /// The command tracer started: its argv until its first exec has been recorded.
    command: Option<Vec<String>>,
    /// The files (device, inode) its mapping records were written for.
    mapped: HashSet<(u64, u64)>,
    /// Runtime copies among them written as not probed: written again, with their library, once probed
    /// (the later record supersedes the earlier).
    unprobed: HashSet<(u64, u64)>,
}

impl Said {
    /// Whether a record of this process has been written.
    pub(crate) const fn knows(&self) -> bool {
        self.start.is_some()
    }

    /// Names the command tracer started (`-- COMMAND ARGS`) before it has exec'd.
    pub(crate) fn name_command(&mut self, argv: Vec<String>) {
        self.command = Some(argv);
    }

    /// Whether a mapping found is to be written: not written yet for its file, or written as a runtime copy
    /// not probed that is probed now. Marked written, as not probed or not, when it is.
    pub(crate) fn first_mapping(&mut self, m: &trace::Mapping) -> bool {
        let file = (m.dev, m.inode);
        if self.said(file, m.lib.is_some()) {
            return false;
        }
        self.mapped.insert(file);
        if m.not_probed {
            self.unprobed.insert(file);
        } else {
            self.unprobed.remove(&file);
        }
        true
    }

    /// What was said of a PID's mappings goes over to the process now forked under it: for a fork read after a
    /// look at the child had listed them (the ring lagging), the same process.
    pub(crate) fn carry_mappings(&mut self, from: &mut Self) {
        self.mapped = std::mem::take(&mut from.mapped);
        self.unprobed = std::mem::take(&mut from.unprobed);
    }

    /// A file's mapping is to be written again at the next look that finds it (its copy's initializer ran
    /// after its probes: the record said before as probed late is superseded).
    pub(crate) fn unsay_mapping(&mut self, file: (u64, u64)) {
        self.mapped.remove(&file);
    }
}

impl MappingsSaid for Said {
    fn said(&self, file: (u64, u64), probed: bool) -> bool {
        self.mapped.contains(&file) && !(probed && self.unprobed.contains(&file))
    }
}

/// How process records are written: the recording's settings, the same for every process.
pub(crate) struct ProcessRecords {
    /// Where Ollama keeps its models, to name a runner's model blob.
    pub(crate) models_dir: Option<PathBuf>,
    /// `--private-argv`: only the processes tracer was asked to follow (`targets`, and Ollama's server and
    /// runners) are written with their whole command line; others keep argv[0].
    pub(crate) private_argv: bool,
    pub(crate) targets: HashSet<u32>,
    /// Command lines written cut to [`crate::os::proc::ARGV_KEPT`] bytes (footer `argv_cut`).
    pub(crate) argv_cut: u64,
    procs: &'static (dyn Procs + Sync),
    /// Who a process was at the early look (names/early.rs), for one that ended before it was named.
    pub(crate) early: Option<std::sync::Arc<EarlyLooks>>,
}

impl Default for ProcessRecords {
    fn default() -> Self {
        Self::with_procs(&LIVE)
    }
}

impl ProcessRecords {
    /// Records read from `procs` (the live /proc, or a test's).
    pub(crate) fn with_procs(procs: &'static (dyn Procs + Sync)) -> Self {
        Self { models_dir: None, private_argv: false, targets: HashSet::new(), argv_cut: 0, procs, early: None }
    }

    /// A process record when `pid` is new to the trace (or was reused, or `cause` is exec), else None.
    /// `said`: what the trace has said of it so far (updated). `image`: the exec its program image began at
    /// (0: none seen), to tell the early look of this image when the process has ended already.
    pub(crate) fn observe(
        &mut self,
        said: &mut Said,
        pid: u32,
        cause: Cause,
        ts: u64,
        image: u64,
        comm_hint: &str,
    ) -> Option<trace::Process> {
        let stat = self.procs.stat(pid);
        // Ended: who it was when the early look saw it alive, if it did.
        let early = match (&stat, &self.early) {
            (None, Some(e)) => e.who(pid, image),
            _ => None,
        };
        let (info, mut argv) = match early {
            Some(who) => (Some(who.stat), who.argv),
            None => (stat, self.procs.argv(pid)),
        };
        let start = info.as_ref().map_or(0, |i| i.start_time);
        if cause != Cause::Exec && said.start == Some(start) {
            return None;
        }
        said.start = Some(start);
        let (ppid, start_time, comm) =
            info.map_or_else(|| (0, 0, comm_hint.to_owned()), |i| (i.ppid, i.start_time, i.comm));
        let mut comm = comm;
        // The command tracer started: a copy of tracer until it execs, and maybe gone before its exec is
        // seen. Its argv is the one given after `--`.
        let known = if cause == Cause::Exec { said.command.take() } else { said.command.clone() };
        if let Some(command) = known.filter(|_| cause != Cause::Exec || argv.is_empty()) {
            comm =
                command.first().map(|p| p.rsplit('/').next().unwrap_or(p).chars().take(15).collect()).unwrap_or(comm);
            argv = command;
        }
        // A process that already ended has no cmdline: its comm still tells a llama-server runner (a discovery
        // child gone before any look took its argv is then taken for one: its argv is what tells them apart).
        let role = if argv.is_empty() && comm.starts_with("llama-server") {
            trace::OllamaPart::Runner { model: None }
        } else {
            trace::ollama_part(&argv)
        };
        let (role, model) = role.recorded();
        let model_name =
            model.as_deref().zip(self.models_dir.as_deref()).and_then(|(m, dir)| ollama::model_label(m, dir));
        if self.private_argv && role.is_none() && !self.targets.contains(&pid) {
            argv.truncate(1);
        }
        if crate::os::proc::cap_argv(&mut argv) {
            self.argv_cut += 1;
        }
        Some(trace::Process { pid, ppid, start_time, comm, argv, cause, ts, role, model, model_name })
    }
}

/// What attribution knows of one process, dropped whole when it exits and replaced when it execs.
#[derive(Default)]
pub(super) struct Process {
    /// What the trace has said of it (its record written, the command tracer started); carried over an exec.
    pub(super) said: Said,
    /// What the library watch knows of it (None: it never looked); carried over an exec, kept past its exit
    /// until the watch lets go of it ([`Attributor::let_go_watched`]).
    pub(super) watched: Option<Watched>,
    /// Its kernel names.
    pub(super) names: ProcessNames,
    /// What each fd of its ioctls points to, read once.
    pub(super) fds: HashMap<u32, Option<String>>,
    /// Its streams capturing a graph, what they captured, its graph executables.
    pub(super) graphs: graphs::Graphs,
    /// Per thread: the kernel parameters read at the entry of its launch in progress.
    pub(super) pending_params: HashMap<u32, Params>,
    /// Its maps were looked at after one of its API events (its libraries are loaded by then).
    pub(super) scanned: bool,
    /// Its launches by the file whose code made them.
    pub(super) sites: sites::Sites,
    /// Its code-object files loaded by path, and their directories listed.
    pub(super) code_files: code_files::CodeFiles,
    /// Per Vulkan command buffer: the compute pipeline last bound on it, which its dispatches run.
    pub(super) bound: HashMap<u64, u64>,
    /// Per thread: the shader module whose code is arriving.
    pub(super) code: HashMap<u32, ModuleCode>,
    /// Per thread: the pipeline its runtime is making (its name, its SPIR-V's size and address), whose
    /// shader module the thread makes next.
    pub(super) making: HashMap<u32, (String, u64, u64)>,
    /// The functions and kernel objects given a plan in the eBPF plan map: taken back when it goes.
    pub(super) planned: Vec<u64>,
    /// Per thread: its last launches as the probe placed them, which its runs of repeats copy, each with
    /// the launch as written where its copies may be written alike ([`Attributor::passable`]).
    pub(super) runs: trace::runs::Threads<trace::runs::History<Option<Rc<Launch>>>>,
}

/// A shader module's code as its chunks arrive on one thread: its head first, then its end, farthest first.
#[derive(Default)]
pub(super) struct ModuleCode {
    pub(super) handle: u64,
    /// Its first bytes (None: not read).
    pub(super) head: Option<Vec<u8>>,
    /// Its end so far, in order (None once a chunk could not be read).
    pub(super) tail: Option<Vec<u8>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::proc::{MapsEntry, Stat};

    /// A made-up process table: one Ollama runner, pid 500.
    struct Fake;

    impl Procs for Fake {
        fn stat(&self, pid: u32) -> Option<Stat> {
            (pid == 500).then(|| Stat { ppid: 1, start_time: 77, comm: "ollama".into() })
        }
        fn argv(&self, pid: u32) -> Vec<String> {
            match pid {
                500 => ["ollama", "runner", "--model", "/m/blob"].map(String::from).to_vec(),
                502 => ["python3", "app.py", "--token", "s3cret"].map(String::from).to_vec(),
                _ => Vec::new(),
            }
        }
        fn maps(&self, _: u32) -> Option<Vec<MapsEntry>> {
            None
        }
        fn pids(&self) -> Vec<u32> {
            vec![500]
        }
        fn exe(&self, _: u32) -> Option<PathBuf> {
            None
        }
        fn fd_target(&self, _: u32, _: u32) -> Option<String> {
            None
        }
        fn same_mount_ns(&self, _: u32) -> bool {
            true
        }
    }

    static FAKE: Fake = Fake;

    #[test]
    fn observes_self_once() {
        let mut t = ProcessRecords::default();
        let me = std::process::id();
        let mut said = Said::default();
        let p = t.observe(&mut said, me, Cause::Start, 1, 0, "").unwrap();
        assert_eq!(p.pid, me);
        assert!(!p.argv.is_empty());
        assert!(p.start_time > 0);
        assert!(said.knows());
        assert!(t.observe(&mut said, me, Cause::Seen, 2, 0, "").is_none());
        assert!(t.observe(&mut said, me, Cause::Exec, 3, 0, "").is_some());
        // Another entry (the PID's next process): written again.
        assert!(t.observe(&mut Said::default(), me, Cause::Seen, 4, 0, "").is_some());
    }

    #[test]
    fn private_argv_keeps_whole_command_lines_of_targets_and_ollama_only() {
        let mut t = ProcessRecords::with_procs(&FAKE);
        t.private_argv = true;
        // A runner keeps its command line (its model), a process not asked for keeps argv[0].
        assert_eq!(
            t.observe(&mut Said::default(), 500, Cause::Seen, 1, 0, "").unwrap().argv,
            ["ollama", "runner", "--model", "/m/blob"]
        );
        assert_eq!(t.observe(&mut Said::default(), 502, Cause::Seen, 1, 0, "").unwrap().argv, ["python3"]);
        // One it was asked to follow keeps its whole command line.
        t.targets.insert(502);
        assert_eq!(t.observe(&mut Said::default(), 502, Cause::Exec, 2, 0, "").unwrap().argv.len(), 4);
    }

    #[test]
    fn roles_from_a_made_up_table() {
        let mut t = ProcessRecords::with_procs(&FAKE);
        let p = t.observe(&mut Said::default(), 500, Cause::Seen, 1, 0, "").unwrap();
        assert_eq!((p.role, p.model.as_deref(), p.start_time), (Some(trace::Role::Runner), Some("/m/blob"), 77));
        // A process the table does not know: named by the event's comm, no role.
        let gone = t.observe(&mut Said::default(), 501, Cause::Fork, 2, 0, "llama-server").unwrap();
        assert_eq!((gone.comm.as_str(), gone.role), ("llama-server", Some(trace::Role::Runner)));
        assert_eq!(ollama::find_servers(&FAKE), Vec::<u32>::new());
    }

    #[test]
    fn a_process_ended_before_its_exec_was_named_is_who_the_early_look_saw() {
        let early = std::sync::Arc::new(EarlyLooks::default());
        let stat = Stat { ppid: 9, start_time: 1234, comm: "ollama".into() };
        let argv: Vec<String> = ["/usr/bin/ollama", "runner", "--model", "/m/blob"].map(String::from).to_vec();
        early.keep_who(503, 40, crate::record::names::early::Who { stat, argv: argv.clone() });
        let mut t = ProcessRecords::with_procs(&FAKE);
        t.early = Some(early);
        // Its exec at 40 began the image looked at: its parent, start, command line and role.
        let p = t.observe(&mut Said::default(), 503, Cause::Exec, 40, 40, "ollama").unwrap();
        assert_eq!((p.ppid, p.start_time, &p.argv, p.role), (9, 1234, &argv, Some(trace::Role::Runner)));
        // Another image of the PID (an exec at 50) is not that look's.
        let other = t.observe(&mut Said::default(), 503, Cause::Exec, 50, 50, "ollama").unwrap();
        assert_eq!((other.ppid, other.start_time, other.argv.len()), (0, 0, 0));
    }

    /// A process's mapping of a file is written once; a runtime copy said not probed is written again once
    /// probed, and a file whose mapping was unsaid (its initializer's witness) again at the next look.
    #[test]
    fn a_mapping_is_said_once_and_again_only_when_it_changed() {
        let m = |lib: Option<u32>| trace::Mapping {
            pid: 7,
            dev: 1,
            inode: 2,
            lib,
            not_probed: lib.is_none(),
            ..Default::default()
        };
        let mut said = Said::default();
        assert!(said.first_mapping(&m(None)), "the first mapping of a file is written");
        assert!(!said.first_mapping(&m(None)), "the same again is not");
        assert!(said.first_mapping(&m(Some(3))), "a copy said not probed is written again once probed");
        assert!(!said.first_mapping(&m(Some(3))), "and then not again");
        said.unsay_mapping((1, 2));
        assert!(said.first_mapping(&m(Some(3))), "an unsaid mapping is written at the next look");
        assert!(said.first_mapping(&trace::Mapping { inode: 9, ..m(Some(3)) }), "another file is another mapping");
        // What was said goes over to a process forked under the PID.
        let mut child = Said::default();
        child.carry_mappings(&mut said);
        assert!(!child.first_mapping(&m(Some(3))));
        assert!(said.first_mapping(&m(Some(3))));
    }
}
