//! Hostile trace input: whatever the bytes (plain or zstd), the reader returns records or an error —
//! never a panic, never unbounded memory (lines are capped at 1 MiB) — and the report over what it read
//! (the read model, the step feeder, every visitor method of the report) never panics either.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut records = Vec::new();
    let read = tracer::testing::trace::read_from(std::io::Cursor::new(data), std::path::Path::new("fuzz-input"), |r| {
        records.push(r);
    });
    if read.is_ok() {
        let report = tracer::testing::Report::build(records);
        let _ = report.to_text(&tracer::testing::TextOptions::default());
    }
});
