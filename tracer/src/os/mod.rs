//! The leaves: what the operating system and foreign files offer.
//!
//! Shared by both wings and by nothing above them: [`proc`] (`/proc`, a maps table read whole or not at all), [`files`] (other processes' files,
//! opened and read as hostile input), [`elf`] (what is read of an ELF file through them), `demangle`,
//! [`output`] (files written whole or not at all), `clock`, `ioctl` (the GPU drivers' request numbers) and
//! [`kfd`] (the AMD GPUs KFD lists), [`stop`] (whether a stop was asked for, for waits on other threads), and [`FastMap`], the per-event look-ups' hash map.
//! Nothing here imports from `trace`, `record` or `read`.

/// The hash map of the per-event look-ups (a process by PID, a kernel by handle, a launch site by return
/// address, the drain's image per PID): foldhash, hashbrown's own default, hashes an integer key in a few
/// instructions where std's `SipHash` took 5 % of a recording's CPU at 60 000 launches/s; its seed is random
/// per map, so keys a traced process chooses (handles, addresses) cannot be aimed at one bucket in advance.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

pub(crate) mod clock;
pub(crate) mod demangle;
pub(crate) mod elf;
pub(crate) mod files;
pub(crate) mod ioctl;
pub(crate) mod kfd;
pub(crate) mod messages;
pub(crate) mod output;
pub(crate) mod proc;
pub(crate) mod stop;

/// A path's last component (the whole path when it has no `/`).
pub(crate) fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}
