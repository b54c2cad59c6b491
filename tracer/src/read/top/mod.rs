//! `tracer top`: a recording shown live in the terminal, per process.
//!
//! The recording is `record`'s own (the caller runs it, with a tap on its writer: this wing does not
//! reach into `record`); the tap folds each line written into per-process figures ([`model`]), counted by
//! the report's own code, and a thread of its own draws them ([`view`]) and reads the keys. `q` ends the
//! recording as SIGINT does (its footer written) and exits 0; when the recording ends by itself (the
//! command exited, the targets ended, `--duration`), the last screen stays, as `top` and `nvtop` stay
//! until quit, with the figures finished as `tracer report` finishes them, until `q`
//! (`--exit-when-done`: at once). While the view is up, tracer's messages and the command's output go to
//! its messages pane ([`capture`]) and are printed again once the terminal is given back.
//!
//! The screen is drawn with ratatui (and its crossterm backend, which it re-exports): the maintained
//! successor of tui-rs, used by bottom, gitui and many others; it diffs frames so a redraw writes only
//! what changed, lays out tables with multi-line cells, and crossterm restores the terminal's mode,
//! reads keys from `/dev/tty` when standard input is elsewhere, and needs no C library.

mod capture;
mod model;
mod view;

use std::{
    io::IsTerminal as _,
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Result, bail};
use ratatui::crossterm::{
    cursor, event, execute,
    terminal::{self, EnterAlternateScreen, LeaveAlternateScreen},
};

pub(crate) use model::{Model, Shared, Tap};

/// What `tracer top` was asked besides the recording.
pub(crate) struct Options {
    /// `-o`: also keep the trace there; none: a temporary trace, removed at the end.
    pub(crate) output: Option<PathBuf>,
    /// Exit as soon as the recording has ended, with its final screen drawn once.
    pub(crate) exit_when_done: bool,
}

/// How the recording ended, as the view learns it.
enum Done {
    Ended,
    Failed,
}

/// What the view thread and the recording share.
struct Run {
    model: Shared,
    done: Mutex<Option<Done>>,
    /// `q` was pressed: the recording is being stopped, then tracer exits 0.
    quit: AtomicBool,
}

/// Runs `record` (given the trace's path and the tap) under the live view; the exit status.
pub(crate) fn run(
    opts: &Options,
    record: impl FnOnce(&Path, Box<dyn crate::trace::Tap>) -> Result<Option<u8>>,
) -> Result<Option<u8>> {
    let needs = "tracer top needs a terminal: use tracer record";
    if !std::io::stdout().is_terminal() {
        bail!("{needs}");
    }
    if opts.output.as_deref().is_some_and(|o| o == Path::new("-")) {
        bail!("tracer top draws on the terminal: give -o a file, or use tracer record -o - for standard output");
    }
    let Ok(tty) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/tty") else { bail!("{needs}") };
    let temp = if opts.output.is_none() { Some(TempTrace::new()?) } else { None };
    let path = opts.output.clone().or_else(|| temp.as_ref().map(|t| t.file.clone())).unwrap_or_default();
    let shared = Arc::new(Run { model: Shared::default(), done: Mutex::new(None), quit: AtomicBool::new(false) });
    let capture = capture::Capture::start()?;
    let ui = {
        let (shared, messages) = (Arc::clone(&shared), Arc::clone(&capture.messages));
        let shown = opts.output.as_ref().map_or_else(|| "a temporary trace".to_owned(), |o| o.display().to_string());
        let exit_when_done = opts.exit_when_done;
        std::thread::Builder::new()
            .name("top-view".into())
            .spawn(move || ui(&tty, &shared, &messages, &shown, exit_when_done))?
    };
    let result = record(&path, Box::new(Tap(Arc::clone(&shared.model))));
    *shared.done.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
        Some(if result.is_ok() { Done::Ended } else { Done::Failed });
    let drawn = ui.join().unwrap_or_else(|_| Err(anyhow::anyhow!("the view stopped")));
    let messages = Arc::clone(&capture.messages);
    drop(capture);
    print_messages(&messages);
    drop(temp);
    let status = result?;
    drawn?;
    Ok(if shared.quit.load(Ordering::Relaxed) { Some(0) } else { status })
}

/// The lines the messages pane caught, on standard error now that the terminal is back.
fn print_messages(messages: &capture::SharedMessages) {
    use std::io::Write as _;
    capture::with(messages, |m| {
        let mut err = std::io::stderr().lock();
        // A line that cannot be written has nowhere else to go.
        if m.not_kept > 0 {
            let _lost: std::io::Result<()> =
                writeln!(err, "tracer: ({} earlier lines of output not kept, past {})", m.not_kept, capture::MAX_LINES);
        }
        for l in &m.lines {
            let _lost: std::io::Result<()> = writeln!(err, "{l}");
        }
    });
}

/// The terminal in the view's mode (raw, the alternate screen), given back on drop.
struct Screen(ratatui::Terminal<ratatui::backend::CrosstermBackend<std::fs::File>>);

impl Screen {
    fn enter(tty: &std::fs::File) -> Result<Self> {
        let mut out = tty.try_clone()?;
        terminal::enable_raw_mode()?;
        execute!(out, EnterAlternateScreen, cursor::Hide)?;
        Ok(Self(ratatui::Terminal::new(ratatui::backend::CrosstermBackend::new(out))?))
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        // The terminal as it was, as far as it can be put back.
        drop(execute!(self.0.backend_mut(), LeaveAlternateScreen, cursor::Show));
        drop(terminal::disable_raw_mode());
    }
}

/// The view thread: draws four times a second, reads keys, stops the recording on `q`, and ends once the
/// recording has ended and, unless told to exit then, `q` is pressed.
fn ui(
    tty: &std::fs::File,
    shared: &Run,
    messages: &capture::SharedMessages,
    shown: &str,
    exit_when_done: bool,
) -> Result<()> {
    let mut screen = Screen::enter(tty)?;
    let mut view = view::View::default();
    let started = Instant::now();
    let mut signalled = false;
    loop {
        // The end first: a snapshot taken after it holds the footer.
        let done = shared.done.lock().map_or(Some(true), |d| d.as_ref().map(|d| matches!(d, Done::Failed)));
        let snap = model::with(&shared.model, Model::snapshot);
        view.update(&snap, Instant::now());
        let quit = shared.quit.load(Ordering::Relaxed);
        // The recording's tokio handler for SIGINT is in place once anything was written: the signal is sent then.
        if quit && !signalled && snap.records > 0 && done.is_none() {
            // SAFETY: kill on our own pid, with a signal the recording handles.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGINT);
            }
            signalled = true;
        }
        let state = state(&snap, done, quit, started.elapsed(), shown);
        let lines: Vec<String> = capture::with(messages, |m| m.lines.iter().cloned().collect());
        screen.0.draw(|f| view.draw(f, &snap, &state, &lines))?;
        if let Some(failed) = done
            && (failed || quit || exit_when_done || snap.stop.is_none_or(|s| s == crate::trace::Stop::Signal))
        {
            return Ok(());
        }
        if event::poll(Duration::from_millis(250))?
            && let event::Event::Key(k) = event::read()?
            && k.kind != event::KeyEventKind::Release
            && view.key(k) == view::Action::Quit
        {
            // After the end, `q` leaves the last screen (the status stays the recording's).
            if done.is_some() {
                return Ok(());
            }
            shared.quit.store(true, Ordering::Relaxed);
        }
    }
}

/// The recording's state, as the first line says it.
fn state(snap: &model::Snapshot, done: Option<bool>, quit: bool, elapsed: Duration, shown: &str) -> String {
    let secs = elapsed.as_secs();
    match (done, snap.stop) {
        (None, _) if quit => format!("stopping the recording ({secs} s, to {shown})"),
        (None, None) if snap.records == 0 => format!("setting up the probes ({secs} s)"),
        (None, _) => format!("recording to {shown} ({secs} s)"),
        (Some(_), Some(stop)) => {
            format!("recording ended ({}): final figures, as tracer report counts them; q quits", stop.as_str())
        }
        (Some(_), None) => "recording ended".to_owned(),
    }
}

/// The trace of a `tracer top` without `-o`: a file in a directory of its own (mode 0700) under the
/// temporary directory, both removed at the end.
struct TempTrace {
    dir: PathBuf,
    file: PathBuf,
}

impl TempTrace {
    fn new() -> Result<Self> {
        use std::os::unix::fs::DirBuilderExt as _;
        let base = std::env::temp_dir();
        for attempt in 0..16u32 {
            let nanos =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
            let dir = base.join(format!("tracer-top.{}.{nanos}.{attempt}", std::process::id()));
            // A name taken (by anyone) is skipped: mkdir never follows a link there.
            if std::fs::DirBuilder::new().mode(0o700).create(&dir).is_ok() {
                return Ok(Self { file: dir.join("top.jsonl.zst"), dir });
            }
        }
        bail!("cannot make a directory for the temporary trace in {}: give -o FILE", base.display())
    }
}

impl Drop for TempTrace {
    fn drop(&mut self) {
        // What cannot be removed stays, in a directory only root reads.
        drop(std::fs::remove_file(&self.file));
        drop(std::fs::remove_dir(&self.dir));
    }
}

#[cfg(test)]
mod tests;
