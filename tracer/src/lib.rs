//! tracer's user space: three wings around the trace format, over the leaves.
//!
//! - [`trace`]: the format. The events (one type each from decode to the file), the schema, the writer, the
//!   reader, a rotated recording read as one. Both wings meet here.
//! - [`record`]: the write wing, probes → ring → decode → attribute → writer, and the session that runs it.
//! - [`read`]: the read wing: classify, phases, report, export, live metrics.
//! - [`os`]: the leaves: `/proc`, other processes' files, ELF, demangling, output files, clocks, ioctl numbers.
//!
//! Imports go one way: `record` uses `read` (kernel families for parameter plans, the live metrics), both use
//! `trace` and `os`, `trace` uses `os`, `os` uses nothing of ours. [`cli`] and [`inspect`] are the commands'
//! fronts.

/// The hash map of the per-event look-ups (a process by PID, a kernel by handle, a launch site by return
/// address, the drain's image per PID): foldhash, hashbrown's own default, hashes an integer key in a few
/// instructions where std's `SipHash` took 5 % of a recording's CPU at 60 000 launches/s; its seed is random
/// per map, so keys a traced process chooses (handles, addresses) cannot be aimed at one bucket in advance.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

pub mod cli;
pub mod inspect;
pub mod os;
pub mod read;
pub mod record;
pub mod trace;
