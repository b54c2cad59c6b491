//! A CUDA graph executable's nodes, read from the driver's own objects in the process's memory.
//!
//! The layout, measured on an H100 with driver 580.159.04 (CUDA 13.0; `bench/gpu/graphexec_layout.md`):
//! the executable `E` (a `CUgraphExec`) points at byte 0x50 to the node list `O` of the graph it runs;
//! `O` holds the record array's address at 0x10 and the node count (u32) at 0x1c; each 0x28-byte record
//! points at byte 0x10 to its node; a node's type is the u32 at byte 4 (the public `CUgraphNodeType`: 0 a
//! kernel), and a kernel node's `CUfunction` lies at byte 0x20. Held there for graphs of 1 to 4096 nodes,
//! captured and built, after launches and after `cuGraphExecUpdate`, while the source graph lives; after
//! the source graph is destroyed the count reads 0. A leaf: memory in, nodes out, every read bounded.

#![expect(clippy::little_endian_bytes, reason = "the traced processes are x86-64: their words are little-endian")]

use super::memory::{Memory, read_u32, read_u64};

/// Byte offset of the node list's address in an executable.
const EXEC_NODE_LIST: u64 = 0x50;
/// Byte offset of the record array's address in a node list.
const LIST_RECORDS: u64 = 0x10;
/// Byte offset of the node count (u32) in a node list.
const LIST_COUNT: u64 = 0x1c;
/// Size of one record.
const RECORD_SIZE: usize = 0x28;
/// Byte offset of the node's address in a record.
const RECORD_NODE: usize = 0x10;
/// Byte offset of the node type (u32) in a node.
const NODE_TYPE: u64 = 4;
/// Byte offset of a kernel node's `CUfunction`.
const NODE_FUNCTION: u64 = 0x20;
/// `CU_GRAPH_NODE_TYPE_KERNEL`.
const KERNEL: u32 = 0;
/// The largest `CUgraphNodeType` value (`CU_GRAPH_NODE_TYPE_CONDITIONAL`, CUDA 12.3+): a node reading
/// another is no node.
const MAX_NODE_TYPE: u32 = 13;

/// Most nodes read from one executable: a count above it is no count.
pub const MAX_NODES: u32 = 100_000;
/// Records read per piece.
const RECORDS_PER_READ: usize = 1024;

/// One node of an executable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Node {
    /// Its `CUgraphNodeType`.
    pub kind: u32,
    /// A kernel node's `CUfunction` (0 for other nodes).
    pub function: u64,
}

impl Node {
    pub const fn is_kernel(&self) -> bool {
        self.kind == KERNEL
    }
}

/// Why an executable's nodes were not read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unread {
    /// The node count reads 0: the graph it was instantiated from is gone (destroyed after instantiation,
    /// as `PyTorch` does by default), or it has no node.
    Empty,
    /// A read failed, the count is out of bounds, or a node does not read as one: this layout does not
    /// hold for the object.
    Layout,
}

/// The nodes of executable `exec`, in the driver's order.
pub fn read(mem: &impl Memory, exec: u64) -> Result<Vec<Node>, Unread> {
    let list = read_u64(mem, exec.checked_add(EXEC_NODE_LIST).ok_or(Unread::Layout)?).ok_or(Unread::Layout)?;
    if list == 0 {
        return Err(Unread::Layout);
    }
    let count = read_u32(mem, list.checked_add(LIST_COUNT).ok_or(Unread::Layout)?).ok_or(Unread::Layout)?;
    if count == 0 {
        return Err(Unread::Empty);
    }
    if count > MAX_NODES {
        return Err(Unread::Layout);
    }
    let records = read_u64(mem, list.checked_add(LIST_RECORDS).ok_or(Unread::Layout)?).ok_or(Unread::Layout)?;
    let count = count as usize;
    let mut nodes = Vec::with_capacity(count);
    let mut piece = vec![0u8; RECORDS_PER_READ.min(count) * RECORD_SIZE];
    let mut done = 0;
    while done < count {
        let n = RECORDS_PER_READ.min(count - done);
        let buf = &mut piece[..n * RECORD_SIZE];
        let at = (done * RECORD_SIZE) as u64;
        if !mem.read(records.checked_add(at).ok_or(Unread::Layout)?, buf) {
            return Err(Unread::Layout);
        }
        for record in buf.chunks_exact(RECORD_SIZE) {
            let node = word(record, RECORD_NODE).ok_or(Unread::Layout)?;
            nodes.push(read_node(mem, node).ok_or(Unread::Layout)?);
        }
        done += n;
    }
    Ok(nodes)
}

/// A node: its type, and a kernel node's function (which must be an address).
fn read_node(mem: &impl Memory, node: u64) -> Option<Node> {
    if node == 0 {
        return None;
    }
    let kind = read_u32(mem, node.checked_add(NODE_TYPE)?)?;
    if kind > MAX_NODE_TYPE {
        return None;
    }
    let function = if kind == KERNEL { read_u64(mem, node.checked_add(NODE_FUNCTION)?)? } else { 0 };
    if kind == KERNEL && function == 0 {
        return None;
    }
    Some(Node { kind, function })
}

fn word(bytes: &[u8], at: usize) -> Option<u64> {
    let b: [u8; 8] = bytes.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_le_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::memory::Image;

    /// An image laid out as the measured driver lays an executable out: exec at BASE, node list at
    /// BASE+0x100, records at BASE+0x200, nodes after them (0x40 apart).
    const BASE: u64 = 0x10_0000;

    fn put(bytes: &mut [u8], at: u64, v: &[u8]) {
        let at = usize::try_from(at - BASE).unwrap();
        bytes[at..at + v.len()].copy_from_slice(v);
    }

    fn image(nodes: &[(u32, u64)], count: u32) -> Vec<u8> {
        let first_node = 0x200 + (nodes.len() * RECORD_SIZE).next_multiple_of(0x40) as u64;
        let mut b = vec![0u8; usize::try_from(first_node).unwrap() + 0x40 * nodes.len()];
        put(&mut b, BASE + EXEC_NODE_LIST, &(BASE + 0x100).to_le_bytes());
        put(&mut b, BASE + 0x100 + LIST_RECORDS, &(BASE + 0x200).to_le_bytes());
        put(&mut b, BASE + 0x100 + LIST_COUNT, &count.to_le_bytes());
        for (i, &(kind, function)) in nodes.iter().enumerate() {
            let node = BASE + first_node + 0x40 * i as u64;
            put(&mut b, BASE + 0x200 + (i * RECORD_SIZE + RECORD_NODE) as u64, &node.to_le_bytes());
            put(&mut b, node + NODE_TYPE, &kind.to_le_bytes());
            put(&mut b, node + NODE_FUNCTION, &function.to_le_bytes());
        }
        b
    }

    #[test]
    fn reads_kernel_and_other_nodes_in_order() {
        let bytes = image(&[(0, 0xaa), (2, 0x77), (0, 0xbb)], 3);
        let nodes = read(&Image { base: BASE, bytes: &bytes }, BASE).unwrap();
        let got: Vec<(bool, u64)> = nodes.iter().map(|n| (n.is_kernel(), n.function)).collect();
        assert_eq!(got, [(true, 0xaa), (false, 0), (true, 0xbb)]);
    }

    #[test]
    fn a_destroyed_source_graph_reads_empty() {
        let bytes = image(&[], 0);
        assert_eq!(read(&Image { base: BASE, bytes: &bytes }, BASE), Err(Unread::Empty));
    }

    #[test]
    fn what_does_not_hold_is_refused() {
        // A count past the records the image holds: a read fails.
        let bytes = image(&[(0, 0xaa)], 40);
        assert_eq!(read(&Image { base: BASE, bytes: &bytes }, BASE), Err(Unread::Layout));
        // A count over the bound.
        let bytes = image(&[(0, 0xaa)], MAX_NODES + 1);
        assert_eq!(read(&Image { base: BASE, bytes: &bytes }, BASE), Err(Unread::Layout));
        // A node type no driver has, a kernel node without a function.
        for bad in [(99, 0xaa), (0, 0)] {
            let bytes = image(&[(0, 0xaa), bad], 2);
            assert_eq!(read(&Image { base: BASE, bytes: &bytes }, BASE), Err(Unread::Layout));
        }
        // An executable outside readable memory, at the end of the address space.
        assert_eq!(read(&Image { base: BASE, bytes: &[] }, u64::MAX - 4), Err(Unread::Layout));
    }

    #[test]
    fn reads_more_records_than_one_piece() {
        let nodes: Vec<(u32, u64)> = (0..2500).map(|i| (0, 0x1000 + i)).collect();
        let bytes = image(&nodes, 2500);
        let got = read(&Image { base: BASE, bytes: &bytes }, BASE).unwrap();
        assert_eq!(got.len(), 2500);
        assert!(got.iter().enumerate().all(|(i, n)| n.function == 0x1000 + i as u64));
    }
}
