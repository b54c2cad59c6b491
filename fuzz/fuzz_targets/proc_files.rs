//! Hostile `/proc` text: a process names itself, its command line and its mapped paths (spaces, newlines,
//! " (deleted)"), so whatever the bytes, the parsers tracer reads /proc with answer or refuse.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracer::testing::os::{parse_cmdline, parse_maps, parse_stat};

fuzz_target!(|data: &[u8]| {
    let _ = parse_maps(data);
    let _ = parse_stat(data);
    let _ = parse_cmdline(data);
});
