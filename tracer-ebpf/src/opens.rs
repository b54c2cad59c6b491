//! A traced process opening a GPU runtime library (`openat`, at entry): what lets user space probe a
//! runtime copy nobody could foresee (a wheel's, a venv's, one dlopened by a path from a config) before
//! the process runs its code, instead of finding it in /proc later. Only paths whose last component starts
//! with a runtime's file name ([`RUNTIME_PREFIXES`]), or that end like an AMD code-object file
//! ([`CODE_OBJECT_SUFFIXES`]: rocBLAS's Tensile files, read into memory before they are loaded), are written;
//! everything else is discarded here.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user_str_bytes},
    macros::tracepoint,
    programs::TracePointContext,
};
use tracer_common::{CODE_OBJECT_SUFFIXES, NAME_TRUNCATED, OPEN_PATH_MAX, RUNTIME_PREFIXES, RecordHeader, RecordKind};

use crate::maps::{OPEN_SCRATCH, output, setting, traced};

/// `syscalls:sys_enter_openat` offset of `filename`.
#[unsafe(no_mangle)]
static OPENAT_FILENAME_OFFSET: u32 = 24;

#[tracepoint]
pub(crate) fn sys_enter_openat(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !traced((pid_tgid >> 32) as u32) {
        return 0;
    }
    // SAFETY: the offset comes from this kernel's format file; read_at checks the access.
    let Ok(filename) = (unsafe { ctx.read_at::<u64>(setting(&OPENAT_FILENAME_OFFSET) as usize) }) else {
        return 0;
    };
    let Some(rec) = OPEN_SCRATCH.get_ptr_mut(0) else { return 0 };
    // SAFETY: `rec` points at this CPU's scratch value; the path buffer is filled by the helper (which
    // checks the user address) before it is read, and every index into it is masked.
    unsafe {
        let buf = &mut (*rec).path;
        let Ok(len) = bpf_probe_read_user_str_bytes(filename as *const u8, buf).map(<[u8]>::len) else { return 0 };
        if !runtime_file(buf, len) && !code_object_file(buf, len) {
            return 0;
        }
        (*rec).len = len as u32;
        (*rec).flags = if len >= OPEN_PATH_MAX - 1 { NAME_TRUNCATED } else { 0 };
        (*rec).header = RecordHeader {
            kind: RecordKind::Open as u16,
            func: 0,
            lib: 0,
            pid_tgid,
            // SAFETY: helper call without preconditions.
            ts_ns: bpf_ktime_get_ns(),
        };
        // Rare, and the process is about to load the library: wake the reader now.
        output(&*rec, u64::from(aya_ebpf::bindings::BPF_RB_FORCE_WAKEUP));
    }
    0
}

/// How far back from a path's end its last '/' is looked for. The verifier walks the loop once per byte
/// (a tenth of a second of every recording's start-up at the whole 256): a last component longer than
/// this is handed to user space whole, which checks every name it is given.
const LAST_COMPONENT_SEEN: usize = 64;

/// Whether the last component of the path in `buf[..len]` starts like a runtime's file name: its first 8
/// bytes are compared with those of [`RUNTIME_PREFIXES`] (user space checks the whole name). A last
/// component longer than [`LAST_COMPONENT_SEEN`] bytes is taken as one (user space tells).
#[inline(always)]
fn runtime_file(buf: &[u8; OPEN_PATH_MAX], len: usize) -> bool {
    // The last '/', found from the end: the loop carries one counter, so the verifier walks it once.
    let mut base = 0usize;
    let mut k = 0usize;
    while k < LAST_COMPONENT_SEEN {
        if k >= len {
            break;
        }
        let i = len - 1 - k;
        if buf[i & (OPEN_PATH_MAX - 1)] == b'/' {
            base = i + 1;
            break;
        }
        k += 1;
    }
    if k == LAST_COMPONENT_SEEN && len > LAST_COMPONENT_SEEN {
        return true;
    }
    if base + 8 > len {
        return false;
    }
    let at = |k: usize| u64::from(buf[(base + k) & (OPEN_PATH_MAX - 1)]) << (8 * k);
    let head = at(0) | at(1) | at(2) | at(3) | at(4) | at(5) | at(6) | at(7);
    PREFIX_HEADS.contains(&head)
}

/// Whether the path in `buf[..len]` ends with one of [`CODE_OBJECT_SUFFIXES`].
#[inline(always)]
fn code_object_file(buf: &[u8; OPEN_PATH_MAX], len: usize) -> bool {
    let ends = |suffix: &[u8]| {
        let n = suffix.len();
        if len < n {
            return false;
        }
        let mut k = 0;
        while k < n {
            if buf[(len - n + k) & (OPEN_PATH_MAX - 1)] != suffix[k] {
                return false;
            }
            k += 1;
        }
        true
    };
    ends(CODE_OBJECT_SUFFIXES[0]) || ends(CODE_OBJECT_SUFFIXES[1])
}

/// The first 8 bytes of each runtime prefix, as little-endian words.
const PREFIX_HEADS: [u64; RUNTIME_PREFIXES.len()] = [
    head(RUNTIME_PREFIXES[0]),
    head(RUNTIME_PREFIXES[1]),
    head(RUNTIME_PREFIXES[2]),
    head(RUNTIME_PREFIXES[3]),
    head(RUNTIME_PREFIXES[4]),
    head(RUNTIME_PREFIXES[5]),
    head(RUNTIME_PREFIXES[6]),
    head(RUNTIME_PREFIXES[7]),
];

const fn head(p: &[u8]) -> u64 {
    let mut v = 0u64;
    let mut k = 0;
    while k < 8 {
        v |= (p[k] as u64) << (8 * k);
        k += 1;
    }
    v
}
