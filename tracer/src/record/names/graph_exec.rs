//! A CUDA graph executable's nodes, read from the driver's own objects in the process's memory.
//!
//! The layout, measured on an H100 with driver 580.159.04 (CUDA 13.0; `bench/gpu/graphexec_layout.md`):
//! the executable `E` (a `CUgraphExec`) points at byte 0x50 to the node list `O` of the graph it runs;
//! `O` holds the record array's address at 0x10 and the node count (u32) at 0x1c; each 0x28-byte record
//! points at byte 0x10 to its node; a node's type is the u32 at byte 4 (the public `CUgraphNodeType`: 0 a
//! kernel), and a kernel node's `CUfunction` lies at byte 0x20. Held there for graphs of 1 to 4096 nodes,
//! captured and built, after launches and after `cuGraphExecUpdate`, while the source graph lives; after
//! the source graph is destroyed the count reads 0, and [`read_copies`] reads the executable's own node
//! copies instead. A leaf: memory in, nodes out, every read bounded.

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
pub(crate) const MAX_NODES: u32 = 100_000;
/// Records read per piece.
const RECORDS_PER_READ: usize = 1024;

/// One node of an executable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Node {
    /// Its `CUgraphNodeType`.
    pub(crate) kind: u32,
    /// A kernel node's `CUfunction` (0 for other nodes).
    pub function: u64,
}

impl Node {
    pub(crate) const fn is_kernel(&self) -> bool {
        self.kind == KERNEL
    }
}

/// Why an executable's nodes were not read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unread {
    /// The node count reads 0: the graph it was instantiated from is gone (destroyed after instantiation,
    /// as `PyTorch` does by default), or it has no node.
    Empty,
    /// A read failed, the count is out of bounds, or a node does not read as one: this layout does not
    /// hold for the object.
    Layout,
}

/// The nodes of executable `exec`, in the driver's order.
pub(crate) fn read(mem: &impl Memory, exec: u64) -> Result<Vec<Node>, Unread> {
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

/// The second route, for an executable whose source graph is gone (measured on the same driver, 21
/// graphs of 1 to 2000 nodes, sources destroyed and kept, after launches and `cuGraphExecUpdate`:
/// `bench/gpu/graphexec_layout.md`, "after the source graph is destroyed"): the executable keeps its own
/// copies of the nodes, each pointed at (byte 0x38) by a record the executable lists in a vector;
/// `C = *(*(*(E+0x178)+0x10)+0x10)` holds the vector's length (u32) at 0x10 and its data at 0x18.
const EXEC_COPIES: u64 = 0x178;
const COPIES_HOP: u64 = 0x10;
const COPIES_COUNT: u64 = 0x10;
const COPIES_DATA: u64 = 0x18;
/// Byte offset of the node copy's address in a record.
const COPY_NODE: u64 = 0x38;
/// Byte offset of the executable owning a node copy.
const NODE_OWNER: u64 = 0x18;
/// Record addresses read per piece.
const COPIES_PER_READ: usize = 1024;

/// What the second route read: the records listed, and the kernel node copies among them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Copies {
    /// Records listed: as many as the graph's nodes, or one more (every linear capture of 3 nodes or more
    /// measured), whose first is then no node of the graph.
    pub entries: u32,
    /// The first record's node, when it is a kernel node copy the executable owns: a node of the graph
    /// when the driver names its function; where the records are one more than the nodes, it points at a
    /// function the driver does not name (one for all of a process's executables), measured on 11 graphs
    /// of 3 to 2000 nodes (`bench/gpu/graph_copies.sh`).
    pub first: Option<Node>,
    /// The kernel node copies of the other records the executable owns, in the vector's order.
    pub kernels: Vec<Node>,
}

/// The kernel nodes of executable `exec`, read from its own node copies.
///
/// Every listed record is read, and kept when it points at a kernel node that the executable owns (byte
/// 0x18 of the node) with a function. A record pointing at anything else is passed over; a record that
/// cannot be read, or no kernel node at all, refuses the whole.
pub(crate) fn read_copies(mem: &impl Memory, exec: u64) -> Result<Copies, Unread> {
    let mut at = exec;
    for hop in [EXEC_COPIES, COPIES_HOP, COPIES_HOP] {
        at = read_u64(mem, at.checked_add(hop).ok_or(Unread::Layout)?).ok_or(Unread::Layout)?;
        if at == 0 {
            return Err(Unread::Layout);
        }
    }
    let entries = read_u32(mem, at.checked_add(COPIES_COUNT).ok_or(Unread::Layout)?).ok_or(Unread::Layout)?;
    if entries == 0 {
        return Err(Unread::Empty);
    }
    if entries > MAX_NODES.saturating_add(1) {
        return Err(Unread::Layout);
    }
    let data = read_u64(mem, at.checked_add(COPIES_DATA).ok_or(Unread::Layout)?).ok_or(Unread::Layout)?;
    let count = entries as usize;
    let mut kernels = Vec::new();
    let mut first = None;
    let mut piece = vec![0u8; COPIES_PER_READ.min(count) * 8];
    let mut done = 0;
    while done < count {
        let n = COPIES_PER_READ.min(count - done);
        let buf = &mut piece[..n * 8];
        if !mem.read(data.checked_add((done * 8) as u64).ok_or(Unread::Layout)?, buf) {
            return Err(Unread::Layout);
        }
        for (i, record) in buf.chunks_exact(8).enumerate() {
            let record = word(record, 0).ok_or(Unread::Layout)?;
            let node = read_u64(mem, record.checked_add(COPY_NODE).ok_or(Unread::Layout)?).ok_or(Unread::Layout)?;
            match owned_kernel(mem, node, exec) {
                Some(kernel) if done + i == 0 => first = Some(kernel),
                Some(kernel) => kernels.push(kernel),
                None => {}
            }
        }
        done += n;
    }
    if kernels.is_empty() && first.is_none() {
        return Err(Unread::Layout);
    }
    Ok(Copies { entries, first, kernels })
}

/// A kernel node copy the executable owns, or None (anything else a record points at).
fn owned_kernel(mem: &impl Memory, node: u64, exec: u64) -> Option<Node> {
    let n = read_node(mem, node)?;
    (n.is_kernel() && read_u64(mem, node.checked_add(NODE_OWNER)?)? == exec).then_some(n)
}

fn word(bytes: &[u8], at: usize) -> Option<u64> {
    let b: [u8; 8] = bytes.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_le_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::names::memory::Image;

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

    /// An image laid out as the measured driver keeps an executable's node copies: exec at BASE, the
    /// hops at BASE+0x300/0x340, the vector at BASE+0x380, its data at BASE+0x400, records 0xc8 apart
    /// from BASE+0x1000, node copies 0x40 apart after them. `entries`: (type, function, owned by the
    /// executable).
    fn copies_image(entries: &[(u32, u64, bool)], count: u32) -> Vec<u8> {
        let records = 0x1000u64;
        let nodes = records + 0xc8 * entries.len() as u64;
        let mut b = vec![0u8; usize::try_from(nodes).unwrap() + 0x40 * entries.len() + 0x40];
        put(&mut b, BASE + EXEC_COPIES, &(BASE + 0x300).to_le_bytes());
        put(&mut b, BASE + 0x300 + COPIES_HOP, &(BASE + 0x340).to_le_bytes());
        put(&mut b, BASE + 0x340 + COPIES_HOP, &(BASE + 0x380).to_le_bytes());
        put(&mut b, BASE + 0x380 + COPIES_COUNT, &count.to_le_bytes());
        put(&mut b, BASE + 0x380 + COPIES_DATA, &(BASE + 0x400).to_le_bytes());
        for (i, &(kind, function, owned)) in entries.iter().enumerate() {
            let (record, node) = (BASE + records + 0xc8 * i as u64, BASE + nodes + 0x40 * i as u64);
            put(&mut b, BASE + 0x400 + 8 * i as u64, &record.to_le_bytes());
            put(&mut b, record + COPY_NODE, &node.to_le_bytes());
            put(&mut b, node + NODE_TYPE, &kind.to_le_bytes());
            put(&mut b, node + NODE_FUNCTION, &function.to_le_bytes());
            put(&mut b, node + NODE_OWNER, &(if owned { BASE } else { 0xdead_0000 }).to_le_bytes());
        }
        b
    }

    #[test]
    fn node_copies_keep_the_kernels_the_executable_owns() {
        // The first record points at a kernel node of another executable; a copy node (type 1) is no kernel;
        // a node type no driver has is passed over.
        let entries = [(0, 0x99, false), (0, 0xaa, true), (1, 0, true), (0, 0xbb, true), (77, 0xcc, true)];
        let bytes = copies_image(&entries, 5);
        let c = read_copies(&Image { base: BASE, bytes: &bytes }, BASE).unwrap();
        assert_eq!((c.entries, c.first), (5, None));
        assert_eq!(c.kernels.iter().map(|n| n.function).collect::<Vec<_>>(), [0xaa, 0xbb]);
        // The first record's kernel apart (the caller decides on its name).
        let bytes = copies_image(&[(0, 0x77, true), (0, 0xaa, true)], 2);
        let c = read_copies(&Image { base: BASE, bytes: &bytes }, BASE).unwrap();
        assert_eq!((c.first.map(|n| n.function), c.kernels.len()), (Some(0x77), 1));
    }

    #[test]
    fn node_copies_that_do_not_hold_are_refused() {
        let image = |e: &[(u32, u64, bool)], count| copies_image(e, count);
        let read = |b: &[u8]| read_copies(&Image { base: BASE, bytes: b }, BASE);
        assert_eq!(read(&image(&[], 0)), Err(Unread::Empty));
        // No kernel of its own among the records.
        assert_eq!(read(&image(&[(0, 0x99, false), (1, 0, true)], 2)), Err(Unread::Layout));
        // More records listed than the image holds; a count over the bound.
        assert_eq!(read(&image(&[(0, 0xaa, true)], 900)), Err(Unread::Layout));
        assert_eq!(read(&image(&[(0, 0xaa, true)], MAX_NODES + 2)), Err(Unread::Layout));
        // A broken hop.
        let mut b = image(&[(0, 0xaa, true)], 1);
        put(&mut b, BASE + 0x300 + COPIES_HOP, &0u64.to_le_bytes());
        assert_eq!(read(&b), Err(Unread::Layout));
        assert_eq!(read_copies(&Image { base: BASE, bytes: &[] }, u64::MAX - 0x100), Err(Unread::Layout));
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
