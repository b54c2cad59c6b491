//! Hostile offload bundles: whatever the bytes of a `.hip_fatbin` (plain or compressed bundles, any
//! header), the index by headers and the opening of each bundle end, without a panic, within the caps
//! (256 MiB decompressed per bundle).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracer::testing::names::FatBinary;

fuzz_target!(|data: &[u8]| {
    let fat = FatBinary::walk(data, 0x1000);
    for b in &fat.bundles {
        let _ = fat.bundle_at(b.offset);
    }
    let _ = tracer::testing::names::open_all(data, &fat, None);
    let _ = tracer::testing::names::open_all(data, &fat, Some("gfx1030"));
    let _ = fat.name_index(data).bundles_defining("_Z6kernelv");
});
