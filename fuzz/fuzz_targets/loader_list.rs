//! Fuzz target `loader_list`: what it feeds and what must hold are `tracer::testing::fuzz::loader_list`'s doc.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tracer::testing::fuzz::loader_list(data));
