//! The one place tracer prints to standard error while it works, as ripgrep's `messages.rs`.
//!
//! [`say!`] is what the user reads as things happen (where the recording goes, what it follows): off with
//! `--quiet`. [`warning!`] is what went wrong and what tracer did about it, and [`tell!`] an outcome the user
//! must read (a set-up interrupted, a command that could not run): always. Each is one line that
//! begins `tracer: `. A live status line on a terminal ([`status`]) is erased before a message, so the two
//! never run into each other; the next tick draws it again.

use std::{
    fmt::Arguments,
    io::Write as _,
    sync::atomic::{AtomicBool, Ordering},
};

/// `--quiet`: [`say!`] prints nothing.
static QUIET: AtomicBool = AtomicBool::new(false);
/// A status line is on the terminal now (no newline after it).
static STATUS_SHOWN: AtomicBool = AtomicBool::new(false);

/// Sets `--quiet` for the rest of the process.
pub(crate) fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Whether [`say!`] is off.
pub(crate) fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// Erase the status line, if one is shown, before anything else is written to the terminal.
const ERASE: &str = "\r\x1b[K";

/// Writes one message line (what [`say!`] and [`warning!`] expand to). A closed standard error is not an
/// error of the recording: the line is lost, the recording goes on.
pub(crate) fn line(kind: &str, args: Arguments<'_>) {
    let lead = if STATUS_SHOWN.swap(false, Ordering::Relaxed) { ERASE } else { "" };
    let mut err = std::io::stderr().lock();
    // A line that cannot be written has nowhere else to go.
    let _lost: std::io::Result<()> = writeln!(err, "{lead}tracer: {kind}{args}");
}

/// Draws the live status line in place of the last one (a terminal only: the caller checks).
pub(crate) fn status(text: &str) {
    let mut err = std::io::stderr().lock();
    // A line that cannot be written has nowhere else to go.
    let _lost: std::io::Result<()> = write!(err, "{ERASE}{text}").and_then(|()| err.flush());
    STATUS_SHOWN.store(true, Ordering::Relaxed);
}

/// Takes the status line away (before the final summary).
pub(crate) fn clear_status() {
    if STATUS_SHOWN.swap(false, Ordering::Relaxed) {
        let mut err = std::io::stderr().lock();
        // A line that cannot be written has nowhere else to go.
        let _lost: std::io::Result<()> = write!(err, "{ERASE}").and_then(|()| err.flush());
    }
}

/// A line the user reads as things happen, unless `--quiet`: `say!("recording to {}", path)`.
macro_rules! say {
    ($($arg:tt)*) => {
        if !$crate::os::messages::quiet() {
            $crate::os::messages::line("", format_args!($($arg)*))
        }
    };
}

/// A warning, always shown: `warning!("cannot probe {path}: {e:#}")` prints `tracer: warning: cannot probe …`.
macro_rules! warning {
    ($($arg:tt)*) => {
        $crate::os::messages::line("warning: ", format_args!($($arg)*))
    };
}

/// A line shown even with `--quiet`, for an outcome the user must read (a set-up interrupted, a command
/// that could not run): `tell!("cannot run {cmd}: {e}")`.
macro_rules! tell {
    ($($arg:tt)*) => {
        $crate::os::messages::line("", format_args!($($arg)*))
    };
}

pub(crate) use {say, tell, warning};
