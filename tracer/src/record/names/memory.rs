//! Another process's memory, read without stopping it.
//!
//! `/proc/PID/mem` (root reads it without ptrace-attaching), or bytes standing for it (a saved image; the
//! fuzzer's input). Every read is bounded and may fail; a failed read is an answer, never a panic.
#![expect(clippy::little_endian_bytes, reason = "the traced processes are x86-64: their words are little-endian")]

use std::{fs, os::unix::fs::FileExt as _};

/// Longest string read.
const MAX_STRING: usize = 4096;

/// Memory of a process, read without stopping it.
pub(crate) trait Memory {
    /// Fills `buf` from `addr`; false when that memory cannot be read.
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool;
}

/// `/proc/PID/mem`, readable by root without ptrace-attaching.
pub(crate) struct ProcMem(fs::File);

impl ProcMem {
    pub(crate) fn open(pid: u32) -> Option<Self> {
        fs::File::open(format!("/proc/{pid}/mem")).ok().map(Self)
    }
}

impl Memory for ProcMem {
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        self.0.read_exact_at(buf, addr).is_ok()
    }
}

/// Bytes standing for a process's memory from address `base` (a saved image; the fuzzer's input).
pub(crate) struct Image<'a> {
    pub base: u64,
    pub bytes: &'a [u8],
}

impl Memory for Image<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        let Some(at) = addr.checked_sub(self.base).and_then(|a| usize::try_from(a).ok()) else { return false };
        match at.checked_add(buf.len()).and_then(|end| self.bytes.get(at..end)) {
            Some(src) => {
                buf.copy_from_slice(src);
                true
            }
            None => false,
        }
    }
}

pub(crate) fn read_u64(mem: &impl Memory, addr: u64) -> Option<u64> {
    let mut b = [0; 8];
    mem.read(addr, &mut b).then(|| u64::from_le_bytes(b))
}

pub(crate) fn read_u32(mem: &impl Memory, addr: u64) -> Option<u32> {
    let mut b = [0; 4];
    mem.read(addr, &mut b).then(|| u32::from_le_bytes(b))
}

/// A NUL-terminated string of at most `MAX_STRING` bytes, read in pieces so that the read stops at the end
/// of readable memory.
pub(crate) fn read_c_string(mem: &impl Memory, addr: u64) -> Option<String> {
    let mut out = Vec::new();
    let mut chunk = [0; 256];
    while out.len() < MAX_STRING {
        // Stay within the page: a string near its end must not make the read fail.
        let at = addr.checked_add(out.len() as u64)?;
        let room = (4096 - (at % 4096)) as usize;
        let piece = &mut chunk[..room.min(256)];
        if !mem.read(at, piece) {
            return None;
        }
        if let Some(end) = piece.iter().position(|&b| b == 0) {
            out.extend_from_slice(&piece[..end]);
            return String::from_utf8(out).ok();
        }
        out.extend_from_slice(piece);
    }
    None
}
