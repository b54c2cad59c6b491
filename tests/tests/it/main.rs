//! The integration tests: the real `tracer` binary, with its real eBPF programs, against real processes
//! (hipcc-built programs on Debian's HIP runtime, Debian's rocminfo, and named test doubles where the real
//! library cannot reach a path without a GPU). One test crate, a module per subject; `cargo xtask test`
//! runs it as root, one test at a time.
#![expect(clippy::tests_outside_test_module, reason = "an integration test crate is a test of its own")]
#![expect(clippy::unwrap_used, reason = "a helper of the tests panics where a test would: that is how it speaks")]

mod cli;
mod code_objects;
mod command_line;
mod compat;
mod container;
mod cuda;
mod debian_llama;
mod driver;
mod flood;
mod gfx1201;
mod gpu_jobs;
mod graph_inputs;
mod hip_graphs;
mod hip_log;
mod hostile;
mod hostile_libraries;
mod inspect;
mod library_stack;
mod neighbours;
mod null_gpu;
mod null_gpu_server;
mod ollama;
mod ollama_late;
mod one_trap;
mod package;
mod phases;
mod private_copies;
mod queue;
mod readiness;
mod record;
mod reliability;
mod repeat_bomb;
mod report;
mod rocpd;
mod runs;
mod service;
mod slots;
mod stop_and_errors;
mod top;
mod vulkan;
