//! GPU driver ioctls by name.
//!
//! KFD (`/dev/kfd`, type 'K') and DRM amdgpu (`/dev/dri/*`, type 'd', numbers from 0x40), matched on type and number only, since argument struct sizes (and so full request numbers)
//! differ between driver versions. The fields decoded are those whose offsets are the same in every
//! version (numbers and layouts: the kernel's `kfd_ioctl.h` and `amdgpu_drm.h`).
#![expect(
    clippy::little_endian_bytes,
    reason = "the formats read here (AQL packets, offload bundles, ELF notes, driver argument structs) are little-endian by definition"
)]

use std::collections::BTreeMap;

use tracer_common::ioctl::{DRM_COMMAND_BASE, DRM_TYPE, KFD_TYPE, number, request_type};

const KFD: &[(u32, &str)] = &[
    (0x01, "AMDKFD_IOC_GET_VERSION"),
    (0x02, "AMDKFD_IOC_CREATE_QUEUE"),
    (0x03, "AMDKFD_IOC_DESTROY_QUEUE"),
    (0x04, "AMDKFD_IOC_SET_MEMORY_POLICY"),
    (0x05, "AMDKFD_IOC_GET_CLOCK_COUNTERS"),
    (0x06, "AMDKFD_IOC_GET_PROCESS_APERTURES"),
    (0x07, "AMDKFD_IOC_UPDATE_QUEUE"),
    (0x08, "AMDKFD_IOC_CREATE_EVENT"),
    (0x09, "AMDKFD_IOC_DESTROY_EVENT"),
    (0x0a, "AMDKFD_IOC_SET_EVENT"),
    (0x0b, "AMDKFD_IOC_RESET_EVENT"),
    (0x0c, "AMDKFD_IOC_WAIT_EVENTS"),
    (0x0d, "AMDKFD_IOC_DBG_REGISTER_DEPRECATED"),
    (0x0e, "AMDKFD_IOC_DBG_UNREGISTER_DEPRECATED"),
    (0x0f, "AMDKFD_IOC_DBG_ADDRESS_WATCH_DEPRECATED"),
    (0x10, "AMDKFD_IOC_DBG_WAVE_CONTROL_DEPRECATED"),
    (0x11, "AMDKFD_IOC_SET_SCRATCH_BACKING_VA"),
    (0x12, "AMDKFD_IOC_GET_TILE_CONFIG"),
    (0x13, "AMDKFD_IOC_SET_TRAP_HANDLER"),
    (0x14, "AMDKFD_IOC_GET_PROCESS_APERTURES_NEW"),
    (0x15, "AMDKFD_IOC_ACQUIRE_VM"),
    (0x16, "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU"),
    (0x17, "AMDKFD_IOC_FREE_MEMORY_OF_GPU"),
    (0x18, "AMDKFD_IOC_MAP_MEMORY_TO_GPU"),
    (0x19, "AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU"),
    (0x1a, "AMDKFD_IOC_SET_CU_MASK"),
    (0x1b, "AMDKFD_IOC_GET_QUEUE_WAVE_STATE"),
    (0x1c, "AMDKFD_IOC_GET_DMABUF_INFO"),
    (0x1d, "AMDKFD_IOC_IMPORT_DMABUF"),
    (0x1e, "AMDKFD_IOC_ALLOC_QUEUE_GWS"),
    (0x1f, "AMDKFD_IOC_SMI_EVENTS"),
    (0x20, "AMDKFD_IOC_SVM"),
    (0x21, "AMDKFD_IOC_SET_XNACK_MODE"),
    (0x22, "AMDKFD_IOC_CRIU_OP"),
    (0x23, "AMDKFD_IOC_AVAILABLE_MEMORY"),
    (0x24, "AMDKFD_IOC_EXPORT_DMABUF"),
    (0x25, "AMDKFD_IOC_RUNTIME_ENABLE"),
    (0x26, "AMDKFD_IOC_DBG_TRAP"),
    (0x27, "AMDKFD_IOC_CREATE_PROCESS"),
    (0x80, "AMDKFD_IOC_IPC_IMPORT_HANDLE"),
    (0x81, "AMDKFD_IOC_IPC_EXPORT_HANDLE"),
    (0x83, "AMDKFD_IOC_CROSS_MEMORY_COPY"),
    (0x84, "AMDKFD_IOC_RLC_SPM"),
    (0x85, "AMDKFD_IOC_PC_SAMPLE"),
];

/// `DRM_AMDGPU`_* numbers, relative to `DRM_COMMAND_BASE`.
const AMDGPU: &[(u32, &str)] = &[
    (0x00, "DRM_IOCTL_AMDGPU_GEM_CREATE"),
    (0x01, "DRM_IOCTL_AMDGPU_GEM_MMAP"),
    (0x02, "DRM_IOCTL_AMDGPU_CTX"),
    (0x03, "DRM_IOCTL_AMDGPU_BO_LIST"),
    (0x04, "DRM_IOCTL_AMDGPU_CS"),
    (0x05, "DRM_IOCTL_AMDGPU_INFO"),
    (0x06, "DRM_IOCTL_AMDGPU_GEM_METADATA"),
    (0x07, "DRM_IOCTL_AMDGPU_GEM_WAIT_IDLE"),
    (0x08, "DRM_IOCTL_AMDGPU_GEM_VA"),
    (0x09, "DRM_IOCTL_AMDGPU_WAIT_CS"),
    (0x10, "DRM_IOCTL_AMDGPU_GEM_OP"),
    (0x11, "DRM_IOCTL_AMDGPU_GEM_USERPTR"),
    (0x12, "DRM_IOCTL_AMDGPU_WAIT_FENCES"),
    (0x13, "DRM_IOCTL_AMDGPU_VM"),
    (0x14, "DRM_IOCTL_AMDGPU_FENCE_TO_HANDLE"),
    (0x15, "DRM_IOCTL_AMDGPU_SCHED"),
    (0x16, "DRM_IOCTL_AMDGPU_USERQ"),
    (0x17, "DRM_IOCTL_AMDGPU_USERQ_SIGNAL"),
    (0x18, "DRM_IOCTL_AMDGPU_USERQ_WAIT"),
    (0x19, "DRM_IOCTL_AMDGPU_GEM_LIST_HANDLES"),
];

/// The request's name, or a spelled-out unknown ("`AMDKFD_IOC_0x5a`", "`DRM_IOCTL_AMDGPU_0x3f`").
pub(crate) fn name(cmd: u32) -> String {
    let (t, nr) = (request_type(cmd), number(cmd));
    let find = |table: &[(u32, &'static str)], n: u32| table.iter().find(|(k, _)| *k == n).map(|(_, v)| *v);
    match t {
        KFD_TYPE => find(KFD, nr).map_or_else(|| format!("AMDKFD_IOC_{nr:#04x}"), str::to_owned),
        DRM_TYPE if nr >= DRM_COMMAND_BASE => find(AMDGPU, nr - DRM_COMMAND_BASE)
            .map_or_else(|| format!("DRM_IOCTL_AMDGPU_{:#04x}", nr - DRM_COMMAND_BASE), str::to_owned),
        _ => format!("ioctl_{cmd:#010x}"),
    }
}

/// Whether the name came from the table (false: counted as unknown in the footer).
pub(crate) fn is_known(cmd: u32) -> bool {
    !name(cmd).contains("_0x") && !name(cmd).starts_with("ioctl_")
}

/// A field of a KFD argument struct: name, byte offset, width in bytes (4 or 8, little-endian).
type Field = (&'static str, usize, usize);

/// The key argument fields of the KFD requests whose layouts are stable across versions, by number.
const FIELDS: &[(u32, &[Field])] = &[
    (0x01, &[("major_version", 0, 4), ("minor_version", 4, 4)]),
    (
        0x02,
        &[
            ("ring_base_address", 0, 8),
            ("write_pointer_address", 8, 8),
            ("ring_size", 32, 4),
            ("gpu_id", 36, 4),
            ("queue_type", 40, 4),
            ("queue_id", 52, 4),
        ],
    ),
    (0x03, &[("queue_id", 0, 4)]),
    (0x0c, &[("num_events", 8, 4), ("wait_for_all", 12, 4), ("timeout_ms", 16, 4), ("wait_result", 20, 4)]),
    (0x16, &[("va_addr", 0, 8), ("size", 8, 8), ("handle", 16, 8), ("gpu_id", 32, 4), ("flags", 36, 4)]),
    (0x17, &[("handle", 0, 8)]),
    (0x18, MAP_MEMORY),
    (0x19, MAP_MEMORY),
];

/// The shared argument struct of `MAP_MEMORY_TO_GPU` and `UNMAP_MEMORY_FROM_GPU`.
const MAP_MEMORY: &[Field] = &[("handle", 0, 8), ("n_devices", 16, 4), ("n_success", 20, 4)];

/// The key argument fields of the requests whose layouts are stable across versions.
pub(crate) fn fields(cmd: u32, arg: &[u8]) -> BTreeMap<&'static str, u64> {
    if request_type(cmd) != KFD_TYPE {
        return BTreeMap::new();
    }
    let Some((_, layout)) = FIELDS.iter().find(|(nr, _)| *nr == number(cmd)) else { return BTreeMap::new() };
    layout
        .iter()
        .map(|&(name, off, width)| {
            let value = arg.get(off..off + width).map_or(0, |b| {
                let mut le = [0u8; 8];
                le[..width].copy_from_slice(b);
                u64::from_le_bytes(le)
            });
            (name, value)
        })
        .collect()
}

/// A negative syscall return as an errno name.
pub(crate) const fn errno_name(ret: i64) -> Option<&'static str> {
    Some(match -ret {
        1 => "EPERM",
        2 => "ENOENT",
        4 => "EINTR",
        9 => "EBADF",
        11 => "EAGAIN",
        12 => "ENOMEM",
        13 => "EACCES",
        14 => "EFAULT",
        16 => "EBUSY",
        19 => "ENODEV",
        22 => "EINVAL",
        25 => "ENOTTY",
        28 => "ENOSPC",
        62 => "ETIME",
        95 => "EOPNOTSUPP",
        110 => "ETIMEDOUT",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_by_type_and_number_whatever_the_size() {
        assert_eq!(name(0x80084b01), "AMDKFD_IOC_GET_VERSION");
        // CREATE_QUEUE with the 96-byte (KFD 1.17) and the 88-byte (upstream) struct.
        assert_eq!(name(0xc0604b02), "AMDKFD_IOC_CREATE_QUEUE");
        assert_eq!(name(0xc0584b02), "AMDKFD_IOC_CREATE_QUEUE");
        assert_eq!(name(0xc0284b16), "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU");
        assert_eq!(name(0xc0184b0c), "AMDKFD_IOC_WAIT_EVENTS");
        assert_eq!(name(0xc0304b80), "AMDKFD_IOC_IPC_IMPORT_HANDLE");
        assert_eq!(name(0xc0206440), "DRM_IOCTL_AMDGPU_GEM_CREATE");
        assert_eq!(name(0x40406448), "DRM_IOCTL_AMDGPU_GEM_VA");
        assert_eq!(name(0x40286448), "DRM_IOCTL_AMDGPU_GEM_VA");
        assert_eq!(name(0xc0106459), "DRM_IOCTL_AMDGPU_GEM_LIST_HANDLES");
        assert_eq!(name(0xc0084b5a), "AMDKFD_IOC_0x5a");
        assert!(!is_known(0xc0084b5a));
        assert!(is_known(0x80084b01));
    }

    #[test]
    fn create_queue_and_alloc_fields() {
        let mut b = [0u8; 64];
        b[0..8].copy_from_slice(&0x7f00_0000_1000u64.to_le_bytes());
        b[32..36].copy_from_slice(&(1u32 << 20).to_le_bytes());
        b[40..44].copy_from_slice(&2u32.to_le_bytes());
        b[52..56].copy_from_slice(&7u32.to_le_bytes());
        let f = fields(0xc0604b02, &b);
        assert_eq!(
            (f["ring_base_address"], f["ring_size"], f["queue_type"], f["queue_id"]),
            (0x7f00_0000_1000, 1 << 20, 2, 7)
        );
        let mut a = [0u8; 64];
        a[8..16].copy_from_slice(&(64u64 << 20).to_le_bytes());
        a[36..40].copy_from_slice(&0x8000_0001u32.to_le_bytes());
        let f = fields(0xc0284b16, &a);
        assert_eq!((f["size"], f["flags"]), (64 << 20, 0x8000_0001));
        assert!(fields(0xc0206440, &a).is_empty());
    }

    #[test]
    fn errno_names() {
        assert_eq!(errno_name(-25), Some("ENOTTY"));
        assert_eq!(errno_name(0), None);
    }
}
