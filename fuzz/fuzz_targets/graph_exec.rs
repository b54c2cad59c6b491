//! A hostile CUDA graph executable: whatever a process's memory holds where the driver's executable, node
//! list, records and nodes should be (counts of any size, pointers anywhere, cycles), the read ends within
//! its bound with nodes or a refusal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracer::names::{
    graph_exec::{MAX_NODES, read},
    memory::Image,
};

fuzz_target!(|data: &[u8]| {
    let image = Image { base: 0x1000, bytes: data };
    if let Ok(nodes) = read(&image, 0x1000) {
        assert!(!nodes.is_empty() && nodes.len() <= MAX_NODES as usize);
    }
});
