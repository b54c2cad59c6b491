//! What is probed, and the probes themselves.
//!
//! The runtime copies a process loads (`libs`, `ldso`, Ollama's bundles in `ollama`), where ggml-vulkan
//! makes its pipelines (`ggml_vulkan`), the library `watch`
//! that follows new processes and copies, the counted libraries' `entries`, what they found for the trace ([`found`]), and [`attach`], which plans,
//! loads and attaches the eBPF programs.

pub(crate) mod attach;
pub(crate) mod batch_layout;
pub(crate) mod entries;
pub(crate) mod found;
pub(crate) mod ggml_vulkan;
pub(crate) mod ldso;
pub(crate) mod libs;
pub(crate) mod ollama;
pub(crate) mod watch;
