//! Fuzz target `ring_records`: what it feeds and what must hold are `tracer::testing::fuzz::ring_records`'s doc.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tracer::testing::fuzz::ring_records(data));
