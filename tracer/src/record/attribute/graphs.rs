//! A process's CUDA graphs as attribution follows them: which streams capture, what their captures
//! launched (kept for a few graphs, to check the driver's executable layout against), and which
//! executables are known. A replay of an executable tracer did not see made has it read from the driver
//! once ([`crate::record::names::Of::graph_exec`]).

use std::collections::{HashMap, VecDeque};

use crate::{
    record::names::{Of, graph_exec::MAX_NODES},
    trace::{ExecOutcome, Line},
};

/// Executables checked against their capture, per process.
const CHECKS: u32 = 4;
/// Graphs whose captured launches are kept until an executable is made from them.
const GRAPHS_KEPT: usize = 16;
/// Executables followed per process: those past it are neither read nor checked (counted).
const EXECS_KEPT: usize = 1 << 16;
/// Reads of executables tracer did not see made, per process (a program that updates an executable
/// from graphs built node by node at every step would have it read at every replay): past it, counted.
const READS: u32 = 4096;

/// What is left to do at an executable's next replay.
enum Exec {
    /// Made from a graph tracer saw captured (its launches' functions): read and checked.
    Captured(Vec<u64>),
    /// Made from a graph tracer saw captured, no check left, or already read: nothing.
    Known,
    /// Its read was refused when the process had this many agreeing checks: tried again after more.
    Refused(u64),
}

/// What to do at a replay.
enum AtReplay {
    Nothing,
    /// Over the caps: neither read nor followed.
    Untracked,
    /// Read the executable: to check it against these captured functions, or (None) to name its kernels.
    Read(Option<Vec<u64>>),
}

#[derive(Default)]
pub(super) struct Graphs {
    /// Per capturing stream: the functions its driver launches passed (None past [`MAX_NODES`]).
    capturing: HashMap<u64, Option<Vec<u64>>>,
    /// The last graphs captured, with their launches' functions while checks are left.
    captured: VecDeque<(u64, Option<Vec<u64>>)>,
    execs: HashMap<u64, Exec>,
    /// Checks begun.
    checks: u32,
    /// Reads of executables tracer did not see made.
    reads: u32,
}

impl Graphs {
    pub(super) fn is_capturing(&self, stream: u64) -> bool {
        self.capturing.contains_key(&stream)
    }

    pub(super) fn begin_capture(&mut self, stream: u64) {
        self.capturing.insert(stream, Some(Vec::new()));
    }

    /// A driver launch on a capturing stream: a node of the graph.
    pub(super) fn captured_launch(&mut self, stream: u64, function: u64) {
        if let Some(slot) = self.capturing.get_mut(&stream) {
            match slot {
                Some(v) if v.len() < MAX_NODES as usize => v.push(function),
                _ => *slot = None,
            }
        }
    }

    /// A capture ended (`graph`: the graph it made, when it succeeded).
    pub(super) fn end_capture(&mut self, stream: u64, graph: Option<u64>) {
        let launches = self.capturing.remove(&stream).flatten().filter(|_| self.checks < CHECKS);
        if let Some(graph) = graph {
            if self.captured.len() == GRAPHS_KEPT {
                self.captured.pop_front();
            }
            self.captured.push_back((graph, launches));
        }
    }

    /// An executable made from `graph` (instantiated, or updated to run it): checked at its next replay
    /// when tracer saw the graph captured and checks are left; read at it when the graph was not seen
    /// captured (built node by node, or captured before the attach).
    pub(super) fn made(&mut self, graph: u64, exec: u64) {
        let launches = self.captured.iter().rev().find(|(g, _)| *g == graph).map(|(_, l)| l.clone());
        match launches {
            Some(Some(l)) if self.checks < CHECKS => self.set(exec, Exec::Captured(l)),
            Some(_) => self.set(exec, Exec::Known),
            None => {
                self.execs.remove(&exec);
            }
        }
    }

    /// A CUDA replay of `exec`: an executable tracer did not see made has its kernels read from the driver's
    /// objects (the record written before the replay's, which then runs them), one made from a capture is
    /// checked against it. Returns whether the executable went unfollowed (over the caps).
    pub(super) fn replayed(&mut self, exec: u64, ts: u64, names: &mut Of<'_>, out: &mut Vec<Line>) -> bool {
        let agreements = names.graph_agreements();
        match self.replay(exec, agreements) {
            AtReplay::Nothing => false,
            AtReplay::Untracked => true,
            AtReplay::Read(captured) => {
                let rec = names.graph_exec(exec, ts, captured.as_deref(), out);
                if rec.outcome == ExecOutcome::Refused {
                    self.refused(exec, agreements);
                }
                out.push(Line::GraphExec(rec));
                false
            }
        }
    }

    /// A replay of `exec`: what to read now. `agreements`: the process's agreeing checks so far.
    fn replay(&mut self, exec: u64, agreements: u64) -> AtReplay {
        match self.execs.get_mut(&exec) {
            Some(Exec::Known) => AtReplay::Nothing,
            Some(Exec::Refused(then)) if *then >= agreements => AtReplay::Nothing,
            Some(e @ Exec::Captured(_)) => {
                let Exec::Captured(l) = std::mem::replace(e, Exec::Known) else { return AtReplay::Nothing };
                if self.checks >= CHECKS {
                    return AtReplay::Nothing;
                }
                self.checks += 1;
                AtReplay::Read(Some(l))
            }
            Some(e @ Exec::Refused(_)) => {
                *e = Exec::Known;
                AtReplay::Read(None)
            }
            None => {
                if self.execs.len() >= EXECS_KEPT || self.reads >= READS {
                    return AtReplay::Untracked;
                }
                self.reads += 1;
                self.execs.insert(exec, Exec::Known);
                AtReplay::Read(None)
            }
        }
    }

    /// The read of an executable tracer did not see made was refused: tried again after more checks agree.
    fn refused(&mut self, exec: u64, agreements: u64) {
        self.execs.insert(exec, Exec::Refused(agreements));
    }

    /// Follows an executable, within [`EXECS_KEPT`] (one past it is counted at its replay).
    fn set(&mut self, exec: u64, e: Exec) {
        if self.execs.len() < EXECS_KEPT || self.execs.contains_key(&exec) {
            self.execs.insert(exec, e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a replay reads, as a string: "-" nothing, "unknown" an executable not seen made, else the
    /// captured functions it is checked against.
    fn reads(a: &AtReplay) -> String {
        match a {
            AtReplay::Nothing => "-".to_owned(),
            AtReplay::Untracked => "untracked".to_owned(),
            AtReplay::Read(None) => "unknown".to_owned(),
            AtReplay::Read(Some(l)) => format!("{l:x?}"),
        }
    }

    #[test]
    fn a_captured_graph_is_checked_once_and_an_unknown_executable_read_once() {
        let mut g = Graphs::default();
        g.begin_capture(9);
        assert!(g.is_capturing(9));
        g.captured_launch(9, 0xf1);
        g.captured_launch(9, 0xf2);
        g.end_capture(9, Some(0x600));
        assert!(!g.is_capturing(9));
        g.made(0x600, 0x700);
        assert_eq!(reads(&g.replay(0x700, 0)), "[f1, f2]");
        assert_eq!(reads(&g.replay(0x700, 1)), "-");
        // Made before the attach: read at its first replay only.
        assert_eq!(reads(&g.replay(0x800, 1)), "unknown");
        assert_eq!(reads(&g.replay(0x800, 1)), "-");
    }

    #[test]
    fn a_refused_read_is_tried_again_after_another_agreement() {
        let mut g = Graphs::default();
        assert_eq!(reads(&g.replay(0x800, 0)), "unknown");
        g.refused(0x800, 0);
        assert_eq!(reads(&g.replay(0x800, 0)), "-");
        assert_eq!(reads(&g.replay(0x800, 1)), "unknown");
        assert_eq!(reads(&g.replay(0x800, 2)), "-");
    }

    #[test]
    fn checks_stop_after_a_few_and_a_graph_not_seen_captured_is_read() {
        let mut g = Graphs::default();
        for i in 0..6 {
            g.begin_capture(1);
            g.captured_launch(1, 0xf1);
            g.end_capture(1, Some(0x600 + i));
            g.made(0x600 + i, 0x700 + i);
            let checked = reads(&g.replay(0x700 + i, 0)) != "-";
            assert_eq!(checked, i < u64::from(CHECKS), "{i}");
        }
        // Made from a graph seen captured after the checks: nothing to read.
        g.begin_capture(1);
        g.end_capture(1, Some(0x900));
        g.made(0x900, 0x901);
        assert_eq!(reads(&g.replay(0x901, 0)), "-");
        // Updated to run a graph tracer did not see captured: read at its next replay.
        g.made(0x999, 0x700);
        assert_eq!(reads(&g.replay(0x700, 0)), "unknown");
    }
}
