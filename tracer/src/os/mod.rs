//! The leaves: what the operating system and foreign files offer.
//!
//! Shared by both wings and by nothing above them: [`proc`] (`/proc`, a maps table read whole or not at all), [`files`] (other processes' files,
//! opened and read as hostile input), [`elf`] (what is read of an ELF file through them), `demangle`,
//! [`output`] (files written whole or not at all), `clock`, `ioctl` (the GPU drivers' request numbers) and
//! [`kfd`] (the AMD GPUs KFD lists), [`stop`] (whether a stop was asked for, for waits on other threads).
//! Nothing here imports from `trace`, `record` or `read`.

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
