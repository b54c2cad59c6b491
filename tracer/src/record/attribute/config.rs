//! What attribution is told once, at the recording's start ([`Config`], [`super::Attributor::new`]), and
//! what it says it counted at the end.

use std::sync::Arc;

use super::Attributor;
use crate::{
    record::names::early::EarlyLooks,
    trace::counted::{Counted, Counting, Counts},
};

/// What a recording tells attribution once, at its start ([`Attributor::new`]).
pub(crate) struct Config {
    /// Where the early-look thread leaves what it saw of new processes.
    pub(crate) early: Arc<EarlyLooks>,
    /// The command tracer started, and its argv: the stopped child is a copy of tracer until it execs.
    pub(crate) command: Option<(u32, Vec<String>)>,
    /// `--cuda-runtime`: the CUDA runtime's own launches are written.
    pub(crate) runtime_view: bool,
    /// Where Ollama keeps its models, to name a runner's model blob.
    pub(crate) models_dir: Option<std::path::PathBuf>,
    /// Only the processes tracer follows are written with their whole command line.
    pub(crate) private_argv: bool,
    /// The processes tracer was asked to follow (by PID, the command).
    pub(crate) targets: std::collections::HashSet<u32>,
}

impl Attributor {
    /// Attribution for a recording: what it is told once, at the start; everything else it learns from the
    /// events.
    pub(crate) fn new(config: Config) -> Self {
        let Config { early, command, runtime_view, models_dir, private_argv, targets } = config;
        let mut attr = Self::default();
        attr.processes.early = Some(Arc::clone(&early));
        attr.names.early = Some(early);
        attr.runtime_view = runtime_view;
        attr.processes.models_dir = models_dir;
        attr.processes.private_argv = private_argv;
        attr.processes.targets = targets;
        if let Some((pid, argv)) = command {
            // Until it execs, the stopped child is a copy of tracer: recorded under the command's argv.
            attr.own_child = Some(pid);
            attr.name_command(pid, argv);
        }
        attr
    }
}

impl Counting for Attributor {
    /// Attribution's oddities, naming's counts and the command lines cut.
    fn counted(&self, out: &mut Counts) {
        out.merge(&self.counters);
        self.names.counted(out);
        out.set_nonzero(Counted::ArgvCut, self.processes.argv_cut);
        if let Some(ended) = &self.ended_at_stop {
            let held = ended.iter().filter(|&&pid| self.watch_holds(pid)).count();
            out.set(Counted::ProcessesHeldAfterExit, held as u64);
        }
    }
}
