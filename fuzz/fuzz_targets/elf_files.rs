//! Fuzz target `elf_files`: what it feeds and what must hold are `tracer::testing::fuzz::elf_files`'s doc.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tracer::testing::fuzz::elf_files(data));
