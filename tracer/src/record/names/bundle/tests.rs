//! The index by headers and the opening of bundles, on hostile bytes.
#![expect(clippy::little_endian_bytes, reason = "offload bundle headers are little-endian")]

use std::io::Write as _;

use super::*;
use crate::record::names::bundle::open_all;

/// A plain bundle's header with one entry (`offset`, `size`, `triple`), code object bytes after it.
pub(crate) fn plain(offset: u64, size: u64, triple: &[u8]) -> Vec<u8> {
    let mut b = BUNDLE_MAGIC.to_vec();
    b.extend(1u64.to_le_bytes());
    b.extend(offset.to_le_bytes());
    b.extend(size.to_le_bytes());
    b.extend((triple.len() as u64).to_le_bytes());
    b.extend(triple);
    b
}

/// clang's compressed bundle (v2 or v3) around `data`, claiming `uncompressed` bytes inside.
pub(crate) fn ccob(version: u16, method: u16, data: &[u8], uncompressed: u64) -> Vec<u8> {
    let mut b = COMPRESSED_MAGIC.to_vec();
    b.extend(version.to_le_bytes());
    b.extend(method.to_le_bytes());
    let header = if version == 2 { 24u64 } else { 32 };
    let total = header + data.len() as u64;
    if version == 2 {
        b.extend((total as u32).to_le_bytes());
        b.extend((uncompressed as u32).to_le_bytes());
    } else {
        b.extend(total.to_le_bytes());
        b.extend(uncompressed.to_le_bytes());
    }
    b.extend(0u64.to_le_bytes());
    b.extend(data);
    b
}

#[test]
fn an_entry_offset_that_wraps_around_is_an_error_not_a_panic() {
    // 57 bytes: the entry's offset + size overflows u64.
    let b = plain(u64::MAX - 8, 16, b"x");
    assert_eq!(b.len(), 57);
    let fat = FatBinary::walk(b.as_slice(), 0);
    assert_eq!(fat.bundles.len(), 1);
    assert!(fat.bundles[0].error.as_deref().is_some_and(|e| e.contains("beyond the section")), "{fat:?}");
    let opened = open_all(b.as_slice(), &fat, None);
    assert!(opened[0].entries.is_empty());
}

#[test]
fn lengths_that_would_wrap_the_walk_around_end_it() {
    // A compressed bundle whose total size is u64::MAX, then one whose total is 0, then a plain bundle
    // whose code object claims to end at u64::MAX: each step moves forward or the walk ends.
    let mut b = ccob(3, 1, &[0; 8], 10);
    b[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    let fat = FatBinary::walk(b.as_slice(), 0);
    assert_eq!(fat.bundles.len(), 1);
    assert!(fat.bundles[0].error.as_deref().is_some_and(|e| e.contains("are left in the section")), "{fat:?}");
    let mut zero = ccob(3, 1, &[0; 8], 10);
    zero[8..16].copy_from_slice(&0u64.to_le_bytes());
    zero.extend(plain(0, u64::MAX, b"hipv4-amdgcn-amd-amdhsa--gfx1030"));
    let fat = FatBinary::walk(zero.as_slice(), 0);
    assert_eq!(fat.bundles.len(), 2, "{fat:?}");
    // A section of nothing but magics: one bundle per magic, never more than the bytes allow.
    let magics = BUNDLE_MAGIC.repeat(1000);
    let fat = FatBinary::walk(magics.as_slice(), 0);
    assert!(fat.bundles.len() <= 1000);
}

#[test]
fn entry_counts_and_triples_are_capped() {
    let mut b = plain(0, 0, b"x");
    b[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
    let fat = FatBinary::walk(b.as_slice(), 0);
    assert!(fat.bundles[0].error.as_deref().is_some_and(|e| e.contains("more than 4096")), "{fat:?}");
    let mut b = plain(0, 0, b"x");
    b[48..56].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let fat = FatBinary::walk(b.as_slice(), 0);
    assert!(fat.bundles[0].error.as_deref().is_some_and(|e| e.contains("triple")), "{fat:?}");
}

/// Zeros compressed: `n` bytes inside, a small file outside.
fn bomb(method: u16, n: usize) -> Vec<u8> {
    let zeros = vec![0u8; 1 << 20];
    if method == 1 {
        let mut z = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        for _ in 0..n >> 20 {
            z.write_all(&zeros).unwrap();
        }
        z.finish().unwrap()
    } else {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        for _ in 0..n >> 20 {
            z.write_all(&zeros).unwrap();
        }
        z.finish().unwrap()
    }
}

#[test]
fn decompression_bombs_stop_at_the_cap_whatever_the_header_says() {
    for (method, name) in [(1, "zstd"), (0, "zlib")] {
        let inner = bomb(method, (MAX_DECOMPRESSED as usize) + (16 << 20));
        // The header claims a small size: the decompressor is not trusted to stop there either.
        for claimed in [1024, MAX_DECOMPRESSED + (16 << 20), u64::from(u32::MAX)] {
            let b = ccob(3, method, &inner, claimed);
            let fat = FatBinary::walk(b.as_slice(), 0);
            let e = fat.kernels(b.as_slice(), &fat.bundles[0], None, false).unwrap_err();
            assert!(e.contains("more than"), "{name}: {e}");
        }
    }
}

#[test]
fn zstd_frames_are_measured_from_their_block_headers() {
    let frame = zstd::bulk::compress(&vec![7u8; 300_000], 1).unwrap();
    let mut data = frame.clone();
    data.extend(b"trailing");
    assert_eq!(zstd_frame_len(data.as_slice(), 0), Some(frame.len() as u64));
    // Cut short: no length.
    assert_eq!(zstd_frame_len(&frame[..frame.len() - 1], 0), None);
    assert_eq!(zstd_frame_len(&b"not zstd"[..], 0), None);
}

#[test]
fn a_registered_offset_finds_its_bundle() {
    let mut b = plain(64, 0, b"host-x86_64-unknown-linux");
    b.resize(4096, 0);
    b.extend(plain(64, 0, b"host-x86_64-unknown-linux"));
    let fat = FatBinary::walk(b.as_slice(), 0x1000);
    assert_eq!(fat.bundles.len(), 2);
    assert_eq!(fat.bundle_at(0x1000).map(Header::name).as_deref(), Some("0000"));
    assert_eq!(fat.bundle_at(0x2000).map(Header::name).as_deref(), Some("0001"));
    assert_eq!(fat.bundle_at(0x1800), None, "padding between bundles is in no bundle");
    assert_eq!(fat.bundle_at(0x10), None);
}
