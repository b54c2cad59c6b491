//! Fuzz target `trace_reader`: what it feeds and what must hold are `tracer::testing::fuzz::trace_reader`'s doc.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tracer::testing::fuzz::trace_reader(data));
