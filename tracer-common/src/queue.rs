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

/// Most AQL packets decoded per doorbell store; more are counted ([`Counter::PacketsCut`](crate::Counter::PacketsCut)), not read.
pub const MAX_PACKETS_PER_DOORBELL: u64 = 16;

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
