//! tracer's user space. The data path, one module per step:
//! [`attach`] (probe plan, load) → [`ring`] (the ring buffer) → [`decode`] (bytes to [`event`]s) →
//! [`attribute`] (process, library, kernel name; with [`process`], [`symbols`], [`libs`], [`ollama`],
//! [`ioctl`], [`loader`]) → [`trace`] (the file: schema, writer, reader) → [`report`] / [`export`] (with [`classify`]
//! and [`phase`]). [`record`] runs the recording session. Leaves that many steps share: [`proc`] (/proc),
//! [`demangle`], [`files`] (other processes' files, opened and read as hostile input), [`elf`] (what is read
//! of an ELF file through them), [`bundle`] (offload bundles; [`inspect`] presents them), [`registration`]
//! (kernel names decoded from a stripped binary's registration calls).

pub mod attach;
pub mod attribute;
pub mod bundle;
pub mod classify;
pub mod cli;
pub mod decode;
pub mod demangle;
pub mod elf;
pub mod event;
pub mod export;
pub mod files;
pub mod inspect;
pub mod ioctl;
pub mod ldso;
pub mod libs;
pub mod loader;
pub mod ollama;
pub mod output;
pub mod phase;
pub mod proc;
pub mod process;
pub mod record;
pub mod registration;
pub mod report;
pub mod ring;
pub mod symbols;
pub mod trace;
