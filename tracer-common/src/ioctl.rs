//! Ioctls on the GPU drivers: the record, and the request types tracer records (KFD, and DRM
//! driver-specific numbers: amdgpu).

use crate::RecordHeader;

/// Bytes of an ioctl's argument struct copied at return (enough for every KFD/amdgpu field decoded).
pub const IOCTL_ARG_BYTES: usize = 64;

/// An ioctl on a GPU driver, written at the syscall's exit.
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoctlRecord {
    pub header: RecordHeader,
    pub fd: u32,
    /// The full request number: direction, size, type ('K' = 0x4b, 'd' = 0x64) and number.
    pub cmd: u32,
    pub arg: u64,
    /// The syscall's return value (negative errno on failure).
    pub ret: i64,
    pub duration_ns: u64,
    /// [`IOCTL_ARG_READ`] when `argbuf` holds the argument struct as it was at return.
    pub flags: u64,
    pub argbuf: [u8; IOCTL_ARG_BYTES],
}

pub const IOCTL_ARG_READ: u64 = 1 << 0;

pub const KFD_TYPE: u32 = 0x4b; // 'K'
pub const DRM_TYPE: u32 = 0x64; // 'd'
pub const DRM_COMMAND_BASE: u32 = 0x40;

pub const fn request_type(cmd: u32) -> u32 {
    (cmd >> 8) & 0xff
}
pub const fn number(cmd: u32) -> u32 {
    cmd & 0xff
}
/// Whether tracer records this request (decided by type and number only: struct sizes change
/// between driver versions, so the full request number is not a stable key).
pub const fn is_gpu(cmd: u32) -> bool {
    let t = request_type(cmd);
    t == KFD_TYPE || (t == DRM_TYPE && number(cmd) >= DRM_COMMAND_BASE)
}
