//! tracer's user space. The data path, one module per step:
//! [`attach`] (probe plan, load) → ring buffer → [`decode`] → [`attribute`] (with [`process`],
//! [`symbols`], [`libs`], [`ollama`], [`ioctl`]) → [`trace`] (file format) → [`report`]. [`record`] runs the
//! recording session.

pub mod attach;
pub mod attribute;
pub mod classify;
pub mod cli;
pub mod decode;
pub mod export;
pub mod inspect;
pub mod ioctl;
pub mod libs;
pub mod ollama;
pub mod phase;
pub mod process;
pub mod record;
pub mod report;
pub mod symbols;
pub mod trace;
