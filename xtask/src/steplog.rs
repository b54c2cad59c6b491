//! Each command xtask runs, its output passed through as it comes (stdout to stdout, stderr to stderr) and kept
//! whole in a log file under `target/xtask-logs`; when it fails, the log's path, the lines that say why
//! (wherever they are: a compiler's error comes before the lines of the jobs that ran beside it, a script's
//! before its clean-up) and its last lines.
#![expect(clippy::print_stderr, reason = "a failed step says why")]

use std::{
    collections::VecDeque,
    fs::{self, File},
    io::{BufRead as _, BufReader, Read, Write},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{
        Mutex,
        atomic::{AtomicU32, Ordering},
    },
};

use anyhow::{Context as _, Result, bail};

use crate::root;

/// What a line that says why a step failed contains.
const WHY: [&str; 8] = ["error", "Error", "ERROR", "FAILED", "No such file", "No space", "Killed", "fatal"];
/// The lines that say why kept for the summary (the first ones; the rest are counted).
const WHY_KEPT: usize = 40;
/// The last lines kept for the summary.
const TAIL: usize = 40;
/// The most bytes one read of a line takes: a longer line is passed through and logged in pieces.
const PIECE: u64 = 64 * 1024;
/// The most characters of a line shown in the summary (the log has it whole).
const SHOWN: usize = 400;

/// The steps run by this xtask, numbering their logs.
static STEPS: AtomicU32 = AtomicU32::new(0);

/// What the summary of a failed step keeps of its output.
#[derive(Default)]
struct Kept {
    /// Lines read, both streams together.
    lines: u64,
    /// The first [`WHY_KEPT`] lines that say why, with their line numbers.
    why: Vec<(u64, String)>,
    /// Lines that say why past those.
    why_left_out: u64,
    /// The last [`TAIL`] lines.
    tail: VecDeque<String>,
}

/// Runs `cmd` (already given its environment) as described in the module's docs.
pub(crate) fn run(cmd: &mut Command) -> Result<()> {
    let log_path = log_path(cmd)?;
    let log = File::create(&log_path).with_context(|| format!("cannot write {}", log_path.display()))?;
    let shared = Mutex::new(Shared { log, kept: Kept::default() });
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    let (out, err) = (child.stdout.take(), child.stderr.take());
    std::thread::scope(|s| {
        if let Some(out) = out {
            s.spawn(|| relay(out, &mut std::io::stdout(), &shared));
        }
        if let Some(err) = err {
            s.spawn(|| relay(err, &mut std::io::stderr(), &shared));
        }
    });
    let status = child.wait().with_context(|| format!("waiting for {cmd:?}"))?;
    if status.success() {
        return Ok(());
    }
    let shared = shared.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    summary(&log_path, &shared.kept);
    bail!("{cmd:?} failed ({status}); its whole output: {}", log_path.display())
}

/// The log and the summary's lines, written together: a line's number is its line in the log.
struct Shared {
    log: File,
    kept: Kept,
}

/// `target/xtask-logs/PID-N-PROGRAM.log`: this xtask's Nth step, named by its program (and script, for a shell).
fn log_path(cmd: &Command) -> Result<PathBuf> {
    let dir = root().join("target/xtask-logs");
    fs::create_dir_all(&dir).with_context(|| format!("cannot make {}", dir.display()))?;
    let n = STEPS.fetch_add(1, Ordering::Relaxed).saturating_add(1);
    let base = |p: &std::ffi::OsStr| Path::new(p).file_name().map(|n| n.to_string_lossy().into_owned());
    let mut name = base(cmd.get_program()).unwrap_or_default();
    if let Some(first) = cmd.get_args().next().and_then(base) {
        name = format!("{name}-{first}");
    }
    let name: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).take(60).collect();
    Ok(dir.join(format!("{}-{n:03}-{name}.log", std::process::id())))
}

/// Passes `from` through to `to` as it comes, into the log and the summary's lines, a piece of at most [`PIECE`]
/// bytes at a time (a longer line counts as several). A write that fails (a closed terminal) does not stop the
/// relay: the child is never left blocked on a full pipe.
fn relay(from: impl Read, to: &mut impl Write, shared: &Mutex<Shared>) {
    let mut reader = BufReader::new(from);
    let mut piece = Vec::new();
    loop {
        piece.clear();
        match (&mut reader).take(PIECE).read_until(b'\n', &mut piece) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        drop(to.write_all(&piece).and_then(|()| to.flush()));
        let text = String::from_utf8_lossy(&piece);
        let line = text.trim_end_matches(['\n', '\r']);
        let shown = shown(line);
        shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner).add(&piece, line, shown);
    }
}

impl Shared {
    /// One piece read: into the log whole, and into the summary's lines (`line`, shown as `shown`).
    fn add(&mut self, piece: &[u8], line: &str, shown: String) {
        drop(self.log.write_all(piece));
        let kept = &mut self.kept;
        kept.lines = kept.lines.saturating_add(1);
        if WHY.iter().any(|w| line.contains(w)) {
            if kept.why.len() < WHY_KEPT {
                kept.why.push((kept.lines, shown.clone()));
            } else {
                kept.why_left_out = kept.why_left_out.saturating_add(1);
            }
        }
        if kept.tail.len() == TAIL {
            kept.tail.pop_front();
        }
        kept.tail.push_back(shown);
    }
}

/// A line as the summary shows it: at most [`SHOWN`] characters, a longer one said cut.
fn shown(line: &str) -> String {
    let count = line.chars().count();
    if count <= SHOWN {
        return line.to_owned();
    }
    let head: String = line.chars().take(SHOWN).collect();
    format!("{head} [cut: {} more characters in the log]", count.saturating_sub(SHOWN))
}

/// The failed step's summary on stderr: the lines that say why, then the last lines.
fn summary(log: &Path, kept: &Kept) {
    eprintln!("xtask: the step failed; its whole output ({} lines) is in {}", kept.lines, log.display());
    if kept.why.is_empty() {
        eprintln!("xtask: no line of its output names an error ({})", WHY.join(", "));
    } else {
        let more = match kept.why_left_out {
            0 => String::new(),
            n => format!("; {n} more past the first {WHY_KEPT}, in the log"),
        };
        eprintln!("xtask: the lines of its output that say why (line numbers of the log{more}):");
        for (n, line) in &kept.why {
            eprintln!("  {n}: {line}");
        }
    }
    eprintln!("xtask: its last {} lines:", kept.tail.len());
    for line in &kept.tail {
        eprintln!("  {line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_step_keeps_its_error_lines_from_anywhere_and_its_last_lines() {
        let script = "echo 'CMake Error at x.cmake:4 (file):' >&2; for i in $(seq 1 100); do echo \"-- Installing: f$i\"; done; exit 3";
        let err = run(Command::new("sh").args(["-c", script])).expect_err("the step fails");
        let text = format!("{err:#}");
        assert!(text.contains("exit status: 3"), "{text}");
        let log = text.rsplit("its whole output: ").next().expect("the log is named");
        let whole = fs::read_to_string(log).expect("the log is there");
        assert_eq!(whole.lines().count(), 101, "{whole}");
        assert!(whole.contains("CMake Error at x.cmake:4") && whole.contains("-- Installing: f100"));
    }

    #[test]
    fn kept_lines_are_bounded_and_long_ones_said_cut() {
        let line = "x".repeat(SHOWN + 5);
        assert_eq!(shown(&line), format!("{} [cut: 5 more characters in the log]", "x".repeat(SHOWN)));
        assert_eq!(shown("short"), "short");
    }
}
