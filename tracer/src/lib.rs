//! tracer's user space. The data path, one module per step:
//! [`attach`] (probe plan, load, attach) → `ring` (a thread drains the ring buffer) → [`decode`] (bytes to
//! [`event`]s) → [`attribute`] (process, library copy, kernel name: it asks [`names`] for kernel names, and
//! `process`, [`ollama`] and `ioctl` for the rest) → [`trace`] (the file: schema, writer, reader) →
//! [`report`] / [`export`] (with [`classify`], and [`phase`], whose step feeder both share). [`record`] runs
//! the recording session; `libs` and `ldso` find the copies to probe. Leaves that many steps share: [`proc`]
//! (/proc), `demangle`, [`files`] (other processes' files, opened and read as hostile input), [`elf`] (what is
//! read of an ELF file through them), `clock`; [`inspect`] presents offload bundles without running anything.

/// The hash map of the per-event look-ups (a process by PID, a kernel by handle, a launch site by return
/// address, the drain's image per PID): foldhash, hashbrown's own default, hashes an integer key in a few
/// instructions where std's `SipHash` took 5 % of a recording's CPU at 60 000 launches/s; its seed is random
/// per map, so keys a traced process chooses (handles, addresses) cannot be aimed at one bucket in advance.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

pub mod attach;
pub mod attribute;
pub mod classify;
pub mod cli;
mod clock;
pub mod decode;
mod demangle;
pub mod elf;
pub mod event;
pub mod export;
pub mod files;
pub mod inspect;
mod ioctl;
mod ldso;
mod libs;
pub mod metrics;
pub mod names;
pub mod ollama;
pub mod output;
pub mod phase;
pub mod proc;
mod process;
pub mod record;
pub mod report;
mod ring;
pub mod trace;
