//! Ring records as bytes: what the probes wrote, whose contents came from traced processes' memory (a
//! batch's token arrays, names, packets, kernel parameters). Any length, any kind, any counts: decoding
//! ends with an event or an error, never reads past the bytes, and a batch's runs hold at most the tokens
//! its record laid out; judged as a step, its composition counts its tokens once each.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracer::testing::{Sequences, decode::{Event, decode}, trace::Line};
use tracer_common::BATCH_TOKENS_MAX;

fuzz_target!(|data: &[u8]| {
    if let Ok(Event::Plain { record: Line::Batch(b), .. }) = decode(data) {
        let tokens: u64 = b.runs.iter().map(|r| u64::from(r.tokens)).sum();
        assert!(tokens <= BATCH_TOKENS_MAX as u64);
        assert!(b.runs.iter().all(|r| r.outputs <= r.tokens && r.shared <= r.tokens && r.tokens > 0));
        let c = Sequences::default().judge(&b);
        assert_eq!(c.tokens(), tokens + u64::from(c.unread));
    }
});
