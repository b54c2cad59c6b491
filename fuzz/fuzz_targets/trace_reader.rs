//! Hostile trace input: whatever the bytes (plain or zstd), the reader returns records or an error —
//! never a panic, never unbounded memory (lines are capped at 1 MiB).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut n = 0usize;
    let _ = tracer::trace::read_from(std::io::Cursor::new(data), std::path::Path::new("fuzz-input"), |_| n += 1);
});
