//! The queue layer (libhsa-runtime64): what reached a GPU queue. HIP writes each AQL packet straight into
//! the queue's ring and then stores the packet's index into the queue's doorbell signal with
//! `hsa_signal_store_screlease` (or `_relaxed`). At that store this program reads every packet the store
//! releases, from the one after the last index it saw for that queue to the stored one: the dispatch as
//! the GPU will see it — graph replays and library GEMMs included, which never pass through
//! `hipLaunchKernel`. HIP 6.4 rings once a packet; HIP 7.2 rings once for up to 256 packets of a graph:
//! the packets are read by `bpf_loop`, one verified step for any number of them, up to the ring's size.
//!
//! Layouts (`ROCr` headers): a signal handle is the address of its `amd_signal_t` (kind at 0: -1 doorbell,
//! -2 legacy doorbell; `queue_ptr` at 48, the `amd_queue_t`, which begins with the `hsa_queue_t`:
//! `base_address` at 8, size (packets) at 24; `read_dispatch_id` at 128, the index of the next packet
//! the packet processor will consume, written by the GPU).

use core::ffi::c_void;

use aya_ebpf::{
    EbpfContext as _,
    helpers::{
        bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user,
        generated::{bpf_get_attach_cookie, bpf_loop},
    },
    macros::uprobe,
    programs::ProbeContext,
};
use tracer_common::{AQL_PACKET_BYTES, Counter, DispatchRecord, MAX_PACKETS_PER_DOORBELL, RecordHeader, RecordKind};

use crate::{
    emit::emit_kernarg,
    maps::{FROM_START, LAST_INDEX, QueueKey, count, count_n, reserve, submit_flags, traced},
};

const SIGNAL_KIND_DOORBELL: i64 = -1;
const SIGNAL_KIND_LEGACY_DOORBELL: i64 = -2;
const SIGNAL_QUEUE_PTR: u64 = 48;
const QUEUE_BASE_ADDRESS: u64 = 8;
const QUEUE_SIZE: u64 = 24;
/// `amd_queue_t.read_dispatch_id`: what the packet processor has consumed (`amd_hsa_queue.h`).
const QUEUE_READ_DISPATCH_ID: u64 = 128;

/// The packet type in a kernel dispatch packet's header (its low byte).
const PACKET_KERNEL_DISPATCH: u8 = 2;
/// A vendor-specific packet (type 0), whose byte 2 says which (`hsa_amd_packet_type8_t`): AMD's extended
/// kernel dispatch (3: `hsa_amd_ext_kernel_dispatch_packet_t`, gfx1250's clustered dispatches) keeps the
/// kernel object and argument segment where a kernel dispatch packet has them (bytes 32 and 40).
const PACKET_VENDOR_SPECIFIC: u8 = 0;
const AMD_FORMAT_EXT_KERNEL_DISPATCH: u8 = 3;

/// One store's packets, as each step of the loop reads them.
#[repr(C)]
struct Released {
    header: RecordHeader,
    queue: u64,
    base: u64,
    /// The ring's size in packets less one (a power of two's mask).
    mask: u64,
    /// The first packet's index.
    first: u64,
}

#[uprobe]
pub(crate) fn doorbell(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = pid_tgid >> 32;
    if !traced(tgid as u32) {
        return 0;
    }
    let (signal, value) = (ctx.arg::<u64>(0).unwrap_or(0), ctx.arg::<u64>(1).unwrap_or(0));
    // SAFETY: bpf_probe_read_user checks every address below.
    let Ok(kind) = (unsafe { bpf_probe_read_user(signal as *const i64) }) else { return 0 };
    if kind != SIGNAL_KIND_DOORBELL && kind != SIGNAL_KIND_LEGACY_DOORBELL {
        return 0; // a completion or user signal, not a queue's doorbell
    }
    // SAFETY: the signal's queue pointer, read by the helper, which checks the address (a value the
    // process wrote anywhere only fails the read).
    let Ok(queue) = (unsafe { bpf_probe_read_user((signal + SIGNAL_QUEUE_PTR) as *const u64) }) else { return 0 };
    // SAFETY: the queue's ring base, read by the helper from a checked address.
    let Ok(base) = (unsafe { bpf_probe_read_user((queue + QUEUE_BASE_ADDRESS) as *const u64) }) else { return 0 };
    // SAFETY: the queue's size in packets, read by the helper from a checked address.
    let Ok(size) = (unsafe { bpf_probe_read_user((queue + QUEUE_SIZE) as *const u32) }) else { return 0 };
    let size = u64::from(size);
    if size == 0 || size & (size - 1) != 0 {
        return 0;
    }
    let key = QueueKey { tgid, queue };
    // SAFETY: the value is copied out.
    let first = match unsafe { LAST_INDEX.get(key) } {
        Some(&FROM_START) => 0,
        Some(&last) if last < value => last + 1,
        // Published already (a store of an index at or below one read: another producer's store came
        // first): nothing new.
        Some(_) => return 0,
        // A queue created before the tracer started, or whose entry the LRU map gave up: every packet the
        // packet processor has not consumed yet (a store releases only packets after the last one
        // consumed). An unreadable read index: this packet only.
        // SAFETY: the helper checks the address.
        None => match unsafe { bpf_probe_read_user((queue + QUEUE_READ_DISPATCH_ID) as *const u64) } {
            Ok(read) if read <= value => read,
            _ => value,
        },
    };
    // A store may release up to a ring of packets; older ones the ring itself has overwritten, and a queue
    // larger than the largest a GPU offers (`MAX_PACKETS_PER_DOORBELL`) is not believed beyond that.
    // (A forged store of 2^64 - 1 on a queue read from index 0 would wrap to 0 packets.)
    let pending = (value - first).saturating_add(1);
    let readable = size.min(MAX_PACKETS_PER_DOORBELL);
    let (first, n) = if pending > readable {
        // At most a ring overwritten is believed: a store further ahead than that is forged (counted once,
        // so that a swing of 2^63 never wraps `packets_cut`).
        if pending - readable > readable {
            count_n(Counter::DoorbellImplausible, 1);
        } else {
            count_n(Counter::PacketsCut, pending - readable);
        }
        (value + 1 - readable, readable)
    } else {
        (first, pending)
    };
    #[expect(
        clippy::let_underscore_must_use,
        reason = "an LRU map makes room itself; a failed insert only means the next doorbell reads from the ring state"
    )]
    let _: Result<(), _> = LAST_INDEX.insert(key, value, 0);
    // SAFETY: see call_entry in calls.rs.
    let c = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    // SAFETY: helper call without preconditions.
    let ts_ns = unsafe { bpf_ktime_get_ns() };
    let mut released = Released {
        header: RecordHeader::of_probe(RecordKind::Dispatch, c, pid_tgid, ts_ns),
        queue,
        base,
        mask: size - 1,
        first,
    };
    let step: unsafe extern "C" fn(u32, *mut Released) -> i64 = read_packet;
    // SAFETY: bpf_loop calls `read_packet` n times with a pointer to `released`, which outlives the call; the
    // callback is passed as the verifier expects: a function's address (a `BPF_PSEUDO_FUNC` reference), cast
    // to a pointer, never made an integer.
    // n <= MAX_PACKETS_PER_DOORBELL < bpf_loop's bound of 2^23.
    unsafe {
        bpf_loop(n as u32, step as *mut c_void, (&raw mut released).cast(), 0);
    }
    0
}

/// One step of the loop: the store's `i`-th packet, read from its ring slot and written with its kernel
/// arguments (a kernel dispatch's).
///
/// # Safety
/// `released` points at the doorbell program's [`Released`], alive for the whole loop.
#[inline(never)]
unsafe extern "C" fn read_packet(i: u32, released: *mut Released) -> i64 {
    // SAFETY: see above; the verifier checks the stack pointer's bounds.
    let r = unsafe { &*released };
    let index = r.first + u64::from(i);
    let slot = r.base + (index & r.mask) * AQL_PACKET_BYTES as u64;
    // SAFETY: bpf_probe_read_user checks the address.
    let Ok(packet) = (unsafe { bpf_probe_read_user(slot as *const [u8; AQL_PACKET_BYTES]) }) else {
        count(Counter::PacketFault);
        return 0;
    };
    let extended = packet[0] == PACKET_VENDOR_SPECIFIC && packet[2] == AMD_FORMAT_EXT_KERNEL_DISPATCH;
    if packet[0] == PACKET_KERNEL_DISPATCH || extended {
        emit_kernarg(r.header, &packet);
    }
    if let Some(mut entry) = reserve::<DispatchRecord>() {
        entry.write(DispatchRecord { header: r.header, queue: r.queue, index, packet });
        entry.submit(submit_flags());
    }
    0
}
