//! Fuzz target `graph_exec`: what it feeds and what must hold are `tracer::testing::fuzz::graph_exec`'s doc.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tracer::testing::fuzz::graph_exec(data));
