//! What a recording's live endpoint (the metrics server, `read::metrics`) is to the recording: a [`Tap`]
//! that sees every line the writer writes, and the [`Endpoint`] the session hands its figures to.

use std::collections::BTreeMap;

use anyhow::Result;

use super::Line;

/// Sees every record written, in order (a recording's live metrics).
pub(crate) trait Tap: Send {
    fn record(&mut self, record: &Line);
}

/// A live endpoint a [`Tap`] feeds (the metrics server, `read::metrics`), as a recording drives it: the
/// recording hands it its losses and processes, and at its end takes what it shed.
pub(crate) trait Endpoint: Send + Sync {
    /// Where it answers.
    fn addr(&self) -> std::net::SocketAddr;
    /// The recording's losses so far (by kind) and the processes it traces, for the next answers.
    fn set_session(&self, dropped: BTreeMap<String, u64>, processes_traced: u64);
    /// The recording's counters so far, by their footer names, for the next answers.
    fn set_counted(&self, counted: BTreeMap<String, u64>);
    /// Its listening socket, which the child that releases the probes closes.
    fn listener_fd(&self) -> std::os::fd::RawFd;
    /// (connections closed to make room, waits for room before accepting).
    fn shed(&self) -> (u64, u64);
}

/// Starts a live endpoint on the recording's runtime: at an address, with process names as labels or not;
/// the endpoint, and the tap that feeds it.
pub(crate) type Serve = fn(std::net::SocketAddr, bool) -> Result<(Box<dyn Endpoint>, Box<dyn Tap>)>;
