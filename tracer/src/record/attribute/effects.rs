//! Attribution's effects: what it asks the session to do.

/// What attributing asks of the recording, gathered until the session takes them
/// ([`Attributor::take_effects`]) and applies them: attribution itself places no probe, writes no map and
/// reads no library list.
#[derive(Default)]
pub(crate) struct Effects {
    /// Processes first seen (or exec'd): their maps are looked at while they live.
    pub(crate) seen: Vec<u32>,
    /// Processes that joined the recording (a traced process's child, an exec): where probes are placed per
    /// process, theirs are placed.
    pub(crate) joined: Vec<u32>,
    /// Processes that ended: their probes are released and the library watch lets go of them.
    pub(crate) left: Vec<u32>,
    /// Plans for the eBPF plan map: (pid, function, plan).
    pub(crate) plans: Vec<(u32, u64, u32)>,
    /// Plans to take back from the map, (pid, function): their process exec'd or ended. A plan in the map
    /// also tells the eBPF launch path that its process is traced.
    pub(crate) plans_gone: Vec<(u32, u64)>,
    /// Runtime libraries traced processes opened: copies that may have to be probed now.
    pub(crate) opened: Vec<crate::record::intake::decode::Opened>,
    /// Probed libraries whose last initializer ran in a traced process: (pid, library id, time), the id as
    /// `ProcEvent::Init` carries it. Their probes were in place before the library's first call there.
    pub(crate) initialized: Vec<(u32, u32, u64)>,
    /// Processes that exec'd, and when: a process of another root gets the copies its program will load
    /// probed before it loads them.
    pub(crate) execs: Vec<(u32, u64)>,
}

impl Effects {
    /// Whether the session must act before the next record is attributed: a process to look at while it
    /// lives, a probe to place before its next call.
    pub(crate) const fn urgent(&self) -> bool {
        !self.seen.is_empty() || !self.opened.is_empty() || !self.joined.is_empty()
    }
}
