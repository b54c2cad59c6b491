//! The process table: which processes the trace speaks of, read from /proc when first seen.
//! A process is named by (pid, start time), so a reused PID is a new process.

use std::{collections::HashMap, fs, path::PathBuf};

use crate::{ollama, trace};

#[derive(Default)]
pub struct ProcessTable {
    known: HashMap<u32, u64>,
    /// Where Ollama keeps its models, to name a runner's model blob.
    pub models_dir: Option<PathBuf>,
}

/// Reads what /proc says of a process, or None when it is gone.
pub fn read_proc(pid: u32) -> Option<(u32, u64, String)> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat)
}

/// (ppid, start time, comm) from a /proc/PID/stat line. comm may hold spaces and parentheses, so the
/// fields after it are found from the last ')'.
pub fn parse_stat(stat: &str) -> Option<(u32, u64, String)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_owned();
    let rest: Vec<&str> = stat.get(close + 2..)?.split_whitespace().collect();
    // rest[0] is field 3 (state); ppid is field 4, starttime field 22.
    let ppid = rest.get(1)?.parse().ok()?;
    let start = rest.get(19)?.parse().ok()?;
    Some((ppid, start, comm))
}

pub fn read_argv(pid: u32) -> Vec<String> {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned()).collect()
        })
        .unwrap_or_default()
}

pub fn is_running(pid: u32) -> bool {
    read_proc(pid).is_some()
}

impl ProcessTable {
    /// A process record when `pid` is new to the trace (or was reused, or `cause` is "exec"), else None.
    pub fn observe(&mut self, pid: u32, cause: &str, ts: u64, comm_hint: &str) -> Option<trace::Process> {
        let info = read_proc(pid);
        let start = info.as_ref().map_or(0, |i| i.1);
        if cause != "exec" && self.known.get(&pid) == Some(&start) {
            return None;
        }
        self.known.insert(pid, start);
        let (ppid, start_time, comm) = info.unwrap_or((0, 0, comm_hint.to_owned()));
        let argv = read_argv(pid);
        // A process that already ended has no cmdline: its comm still tells a llama-server runner.
        let for_role = if argv.is_empty() { vec![comm.clone()] } else { argv.clone() };
        let (role, model) = match ollama::role(&for_role) {
            ollama::Role::Other => (None, None),
            r @ ollama::Role::Server => (Some(r.name().to_owned()), None),
            ollama::Role::Runner { model } => (Some("runner".to_owned()), model),
        };
        let model_name =
            model.as_deref().zip(self.models_dir.as_deref()).and_then(|(m, dir)| ollama::model_label(m, dir));
        Some(trace::Process { pid, ppid, start_time, comm, argv, cause: cause.to_owned(), ts, role, model, model_name })
    }

    pub fn knows(&self, pid: u32) -> bool {
        self.known.contains_key(&pid)
    }

    pub fn forget(&mut self, pid: u32) {
        self.known.remove(&pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_odd_comm() {
        let stat = "1234 (my (odd) prog) S 99 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 5555 1000 10";
        assert_eq!(parse_stat(stat), Some((99, 5555, "my (odd) prog".to_owned())));
    }

    #[test]
    fn observes_self_once() {
        let mut t = ProcessTable::default();
        let me = std::process::id();
        let p = t.observe(me, "start", 1, "").unwrap();
        assert_eq!(p.pid, me);
        assert!(!p.argv.is_empty());
        assert!(p.start_time > 0);
        assert!(t.observe(me, "seen", 2, "").is_none());
        assert!(t.observe(me, "exec", 3, "").is_some());
    }
}
