//! Fuzz target `bundles`: what it feeds and what must hold are `tracer::testing::fuzz::bundles`'s doc.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tracer::testing::fuzz::bundles(data));
