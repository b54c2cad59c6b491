//! Fuzz target `proc_files`: what it feeds and what must hold are `tracer::testing::fuzz::proc_files`'s doc.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tracer::testing::fuzz::proc_files(data));
