//! A hostile ROCr code-object list: whatever a process's memory holds at `_amdgpu_r_debug` (cycles,
//! pointers anywhere, strings without an end, URIs of any shape), the walk ends within its caps and every
//! URI parses or is refused.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracer::testing::names::{Image, rocr::{parse_uri, walk}};

fuzz_target!(|data: &[u8]| {
    let image = Image { base: 0x1000, bytes: data };
    if let Some(list) = walk(&image, 0x1000) {
        for o in &list.objects {
            let _ = parse_uri(&o.uri);
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = parse_uri(text);
    }
});
