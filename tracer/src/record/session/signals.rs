//! SIGINT and SIGTERM during a recording: the first stops it and writes the footer, a second ends tracer.

use anyhow::Result;
use tokio::signal::unix::{SignalKind, signal};

/// SIGINT and SIGTERM, caught from before the set-up to the end of the recording.
pub(in crate::record) struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl Signals {
    pub(in crate::record) fn install() -> Result<Self> {
        Ok(Self { int: signal(SignalKind::interrupt())?, term: signal(SignalKind::terminate())? })
    }

    /// The next signal.
    pub(in crate::record) async fn recv(&mut self) -> libc::c_int {
        tokio::select! {
            _ = self.int.recv() => libc::SIGINT,
            _ = self.term.recv() => libc::SIGTERM,
        }
    }

    /// A signal that came already (during the set-up), without waiting.
    pub(in crate::record) fn pending(&mut self) -> Option<libc::c_int> {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        if self.int.poll_recv(&mut cx).is_ready() {
            return Some(libc::SIGINT);
        }
        self.term.poll_recv(&mut cx).is_ready().then_some(libc::SIGTERM)
    }
}

/// "SIGINT", "SIGTERM".
pub(in crate::record) const fn signal_name(sig: libc::c_int) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}

/// A second SIGINT or SIGTERM ends the process at once.
pub(in crate::record) fn restore_default_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: resetting a signal's disposition to its default has no preconditions.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
        }
    }
}
