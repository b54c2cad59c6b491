//! Tests of `event`.

use super::*;

/// AMD's extended kernel dispatch (vendor-specific, format 3; the layout of `hsa_ext_amd.h`) is a
/// kernel dispatch: its grid in work-items is clusters x work-groups per cluster (0 read as 1) x
/// work-items per work-group; its setup is byte 3. Another vendor packet (a barrier-value, format 2) is
/// not.
#[test]
fn an_extended_kernel_dispatch_decodes_as_a_kernel_dispatch() {
    let mut p = [0u8; 64];
    p[0..2].copy_from_slice(&(1u16 << 8).to_le_bytes()); // vendor-specific, barrier bit
    p[2] = 3; // HSA_AMD_PACKET_TYPE_EXT_KERNEL_DISPATCH
    p[3] = 2; // two dimensions
    for (at, v) in [(4, 64u16), (6, 2), (8, 1), (16, 3), (18, 1)] {
        p[at..at + 2].copy_from_slice(&v.to_le_bytes());
    }
    p[12..16].copy_from_slice(&10u32.to_le_bytes());
    p[20..23].copy_from_slice(&[2, 1, 0]);
    for (at, v) in [(24, 16u32), (28, 512)] {
        p[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }
    for (at, v) in [(32, 0xabcu64), (40, 0x7000), (56, 5)] {
        p[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
    let d = Dispatch::from_packet(Origin::default(), 1, 7, &p);
    assert_eq!((d.packet, d.extended, d.barrier, d.dimensions), (PacketType::KernelDispatch, true, true, 2));
    assert_eq!((d.grid, d.workgroup), ([1280, 6, 1], [64, 2, 1]));
    assert_eq!((d.private_segment, d.group_segment, d.kernel_object, d.kernarg), (16, 512, 0xabc, 0x7000));
    // Hostile sizes saturate, never wrap.
    p[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    p[20] = 255;
    assert_eq!(Dispatch::from_packet(Origin::default(), 1, 7, &p).grid[0], u32::MAX);
    p[2] = 2; // HSA_AMD_PACKET_TYPE_BARRIER_VALUE
    let v = Dispatch::from_packet(Origin::default(), 1, 8, &p);
    assert_eq!((v.packet, v.extended, v.grid, v.kernel_object), (PacketType::VendorSpecific, false, [0; 3], 0));
}

#[test]
fn raw_values_names_and_unknowns_round_trip() {
    for v in [0, 1, 2, 3, 4, 1024, 77] {
        let k = MemcpyKind::from_raw(v);
        assert_eq!(MemcpyKind::from_name(&k.name()), Some(k));
    }
    assert_eq!(MemcpyKind::from_raw(2).name(), "DeviceToHost");
    assert_eq!(MemcpyKind::from_raw(77).name(), "unknown(77)");
    for v in 0..=7 {
        let p = PacketType::from_raw(v);
        assert_eq!(serde_json::from_str::<PacketType>(&serde_json::to_string(&p).unwrap()).unwrap(), p);
    }
    assert_eq!(serde_json::to_string(&PacketType::KernelDispatch).unwrap(), "\"kernel-dispatch\"");
    serde_json::from_str::<MemcpyKind>("\"Sideways\"").unwrap_err();
}
