//! Whether the recording has been asked to stop: SIGINT or SIGTERM came, or its `-d` deadline passed.
//!
//! The session's loop answers both, but only between the records it names; a wait inside naming for work
//! of another thread (a finder reading a library's code, in naming) checks this instead, so
//! that the stop is answered within a slice of that wait whatever the other thread is doing. The signals'
//! action here is registered beside tokio's own (both through `signal-hook-registry`) and only sets a flag.

use std::{
    sync::{
        OnceLock,
        atomic::{AtomicBool, Ordering},
    },
    time::Instant,
};

static SIGNALLED: AtomicBool = AtomicBool::new(false);
static DEADLINE: OnceLock<Instant> = OnceLock::new();

/// From now on SIGINT and SIGTERM set the flag (as well as whatever else they do).
pub(crate) fn watch_signals() -> std::io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the action only stores to an atomic, which is async-signal-safe.
        unsafe { signal_hook_registry::register(sig, || SIGNALLED.store(true, Ordering::Relaxed)) }?;
    }
    Ok(())
}

/// The recording's `-d` deadline (set once).
pub(crate) fn set_deadline(at: Instant) {
    DEADLINE.get_or_init(|| at);
}

/// Whether a stop was asked for: a signal came, or the deadline has passed.
pub(crate) fn requested() -> bool {
    SIGNALLED.load(Ordering::Relaxed) || DEADLINE.get().is_some_and(|d| Instant::now() >= *d)
}
