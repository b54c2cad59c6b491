//! A hostile CUDA graph executable: whatever a process's memory holds where the driver's executable, node
//! list, records, node copies and nodes should be (counts of any size, pointers anywhere, cycles), both
//! routes end within their bounds with nodes or a refusal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracer::testing::names::{
    Image,
    graph_exec::{MAX_NODES, read, read_copies},
};

fuzz_target!(|data: &[u8]| {
    let image = Image { base: 0x1000, bytes: data };
    if let Ok(nodes) = read(&image, 0x1000) {
        assert!(!nodes.is_empty() && nodes.len() <= MAX_NODES as usize);
    }
    if let Ok(c) = read_copies(&image, 0x1000) {
        let read = c.kernels.len() + usize::from(c.first.is_some());
        assert!(read > 0 && read <= c.entries as usize);
        assert!(c.kernels.iter().chain(c.first.iter()).all(|n| n.is_kernel() && n.function != 0));
    }
});
