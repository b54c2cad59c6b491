//! Exists so that `tracer` can list this crate as a build-dependency (rebuild tracking); the programs
//! live in the `tracer` binary target of this crate, built for bpfel-unknown-none by `tracer/build.rs`.
#![no_std]
// The library target only marks the crate for rebuild tracking; the programs (the binary target) use these.
use aya_ebpf as _;
use tracer_common as _;
