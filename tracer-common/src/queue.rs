//! Records of the queue layer: an HSA queue created, an AQL packet read at a doorbell.

use crate::RecordHeader;

/// An HSA queue as `hsa_queue_create` returned it (the first 40 bytes of `hsa_queue_t`).
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueRecord {
    pub header: RecordHeader,
    /// The `hsa_queue_t*` (also the `amd_queue_t*` a doorbell signal points back to).
    pub queue: u64,
    /// u32 type, u32 features, u64 `base_address`, u64 `doorbell_signal`, u32 size, u32 reserved, u64 id.
    pub raw: [u64; 5],
}

/// Most AQL packets decoded per doorbell store: a ring of the largest queue `ROCr` makes.
///
/// `maxAqlSize_`: 0x20000 packets, 8 MiB (`HSA_AGENT_INFO_QUEUE_MAX_SIZE`). A store reads every packet it
/// releases, up to its own ring's size; packets beyond that the ring itself overwrote before the store was
/// read, and they are counted ([`Counter::PacketsCut`](crate::Counter::PacketsCut)), as are those of a ring
/// that claims to be larger than this.
pub const MAX_PACKETS_PER_DOORBELL: u64 = 0x2_0000;

/// One AQL packet read from a queue's ring when its doorbell was rung.
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DispatchRecord {
    pub header: RecordHeader,
    pub queue: u64,
    /// The packet's index (write index) in the queue.
    pub index: u64,
    /// The 64-byte packet as it was in the ring.
    pub packet: [u8; 64],
}

/// Bytes of one AQL packet.
pub const AQL_PACKET_BYTES: usize = 64;
