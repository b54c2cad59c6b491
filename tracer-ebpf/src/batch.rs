//! llama.cpp's `llama_decode` and `llama_process`: the batch of one inference step, read at entry (one
//! trap a step).
//!
//! `llama_decode`'s 56-byte `struct llama_batch` lies on the stack at `[rsp+8]` (passed by value, x86-64
//! `SysV`): its position, sequence-count and output arrays are read whole; each token's first sequence id
//! sits behind its own pointer (`seq_id[i]`), read one by one after a read of the pointers per chunk.
//! `llama_process`'s `llama_batch_ext` is a C++ object behind argument 2: two reads per token (the token,
//! its first sequence node; the layout is in `tracer_common::batch`). The record is
//! built in a per-CPU scratch value and written with its used length. The process's step tally of library
//! calls (see [`crate::entries`]) is moved into the record, so that each call lands in the step it was made
//! in. The loops over tokens run by `bpf_loop` ([`llama_batch`]), or, on a kernel without it, bounded
//! ([`llama_batch_bounded`]): one body, the same records.

use aya_ebpf::{
    EbpfContext as _,
    bindings::BPF_NOEXIST,
    cty::c_void,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user, generated, generated::bpf_loop},
    macros::{map, uprobe},
    maps::PerCpuArray,
    programs::ProbeContext,
};
use tracer_common::{
    BATCH_CHUNK, BATCH_EMBD, BATCH_ENCODE, BATCH_EXT, BATCH_FAULT, BATCH_LOGITS, BATCH_NO_TALLY, BATCH_POS, BATCH_SEQ,
    BATCH_STACK_FAULT, BATCH_TOKEN_BYTES, BATCH_TOKENS_MAX, BatchRecord, Counter, EXT_NODE_VALUE, EXT_TOKEN_MAX,
    ExtLayout, RecordHeader, RecordKind, STEP_SLOTS, StepCutRecord, StepTally, cookie,
};

use crate::maps::{STEP_TALLY, count, output_bytes, reserve, submit_flags, traced};

/// Where a batch record is built before it is written with its used length (its own map, beside the one
/// program that uses it: `maps` names no type of this module).
#[map]
pub(crate) static BATCH_SCRATCH: PerCpuArray<BatchScratch> = PerCpuArray::with_max_entries(1, 0);

/// The scratch a batch record is built in: its head, its arrays, and one chunk of `seq_id` pointers.
#[repr(C)]
pub(crate) struct BatchScratch {
    rec: BatchRecord,
    data: [u8; BATCH_TOKEN_BYTES * BATCH_TOKENS_MAX],
    ptrs: [u64; BATCH_CHUNK],
}

// One extended token is read into the pointer chunk.
const _: () = assert!(size_of::<[u64; BATCH_CHUNK]>() >= EXT_TOKEN_MAX);

/// The batch program: its loops over tokens run by `bpf_loop` (Linux 5.17 on), one verified step each, so
/// that the verifier's work does not grow with [`BATCH_TOKENS_MAX`] (0.35 s of a recording's start-up with
/// the loops written out).
#[uprobe]
pub(crate) fn llama_batch(ctx: ProbeContext) -> u32 {
    batch::<true>(&ctx)
}

/// The batch program with bounded loops, the verifier walking each token: where the kernel has no
/// `bpf_loop` (before Linux 5.17) it runs in [`llama_batch`]'s place; the two write the same records.
#[uprobe]
pub(crate) fn llama_batch_bounded(ctx: ProbeContext) -> u32 {
    batch::<false>(&ctx)
}

/// The batch program's body; `LOOP`: the token loops run by `bpf_loop`.
#[inline(always)]
fn batch<const LOOP: bool>(ctx: &ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    if !traced(tgid) {
        return 0;
    }
    let Some(s) = BATCH_SCRATCH.get_ptr_mut(0) else { return 0 };
    // SAFETY: the context pointer is the probe's own pt_regs.
    let c = unsafe { generated::bpf_get_attach_cookie(ctx.as_ptr()) };
    // SAFETY: helper call without preconditions.
    let ts = unsafe { bpf_ktime_get_ns() };
    // SAFETY: `s` points at this CPU's scratch value, used by this program alone, without preemption.
    let rec = unsafe { &mut (*s).rec };
    rec.header = RecordHeader::of_probe(RecordKind::Batch, c, pid_tgid, ts);
    rec.ctx = ctx.arg::<u64>(0).unwrap_or(0);
    rec.flags = 0;
    rec.laid = 0;
    rec.read = 0;
    rec.n_tokens = 0;
    take_step_calls(tgid, rec);
    if c & cookie::STACK != 0 {
        // SAFETY: pt_regs is the program's own; bpf_probe_read_user checks the address.
        let at = unsafe { (*ctx.regs).rsp } + 8;
        // SAFETY: as above.
        match unsafe { bpf_probe_read_user(at as *const [u64; 7]) } {
            Ok(batch) => read_tokens::<LOOP>(s, &batch),
            Err(_) => rec.flags |= BATCH_STACK_FAULT,
        }
    } else {
        // llama_process(ctx, type, batch): type 0 encodes, 1 decodes.
        if ctx.arg::<u64>(1).unwrap_or(0) as u32 == 0 {
            rec.flags |= BATCH_ENCODE;
        }
        read_ext::<LOOP>(s, ctx.arg::<u64>(2).unwrap_or(0), ExtLayout::of_cookie(c));
    }
    let Some(laid) = bounded(&raw const rec.laid) else { return 0 };
    let size = size_of::<BatchRecord>() + laid * BATCH_TOKEN_BYTES;
    // SAFETY: the record and its arrays lie at the start of the scratch value, `size` bytes of it.
    let bytes = unsafe { core::slice::from_raw_parts(s.cast::<u8>(), size) };
    output_bytes::<BatchRecord>(bytes, submit_flags());
    0
}

/// Moves the process's step tally into the record: the calls of the step that ends here, then one more
/// step. Atomic subtraction, so that a call counted meanwhile on another thread stays for the next step.
#[inline(always)]
fn take_step_calls(tgid: u32, rec: &mut BatchRecord) {
    let t = STEP_TALLY.get_ptr_mut(tgid).or_else(|| {
        let zero = StepTally { step: 0, calls: [0; STEP_SLOTS] };
        #[expect(clippy::let_underscore_must_use, reason = "the lookup below tells whether an entry exists")]
        let _: Result<(), _> = STEP_TALLY.insert(tgid, zero, u64::from(BPF_NOEXIST));
        STEP_TALLY.get_ptr_mut(tgid)
    });
    let Some(t) = t else {
        rec.flags |= BATCH_NO_TALLY;
        rec.step = 0;
        rec.step_calls = [0; STEP_SLOTS];
        return;
    };
    // SAFETY: `t` points into the live map value; the step number is this process's decode thread's to
    // change.
    unsafe {
        (*t).step += 1;
        rec.step = (*t).step;
    }
    move_calls(t, &mut rec.step_calls);
}

/// Moves the calls the tally at `t` counted into `calls`, with atomic subtractions: a call counted meanwhile
/// on another CPU stays for the next step.
#[inline(always)]
fn move_calls(t: *mut StepTally, calls: &mut [u64; STEP_SLOTS]) {
    use core::intrinsics::{AtomicOrdering, atomic_xadd};
    let mut i = 0;
    while i < STEP_SLOTS {
        // SAFETY: `t` points into a live map value (the caller's lookup); library entries add to these
        // counters on any CPU, so they are read volatile and taken out atomically.
        let n = unsafe { core::ptr::read_volatile(&raw const (*t).calls[i]) };
        calls[i] = n;
        if n != 0 {
            // SAFETY: as above.
            unsafe {
                atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(&raw mut (*t).calls[i], n.wrapping_neg());
            }
        }
        i += 1;
    }
}

/// The batch's tokens: `batch` is `{n_tokens, token*, embd*, pos*, n_seq_id*, seq_id**, logits*}`.
#[inline(always)]
fn read_tokens<const LOOP: bool>(s: *mut BatchScratch, batch: &[u64; 7]) {
    let n_tokens = batch[0] as u32 as i32;
    let (embd, pos, n_seq, seq_id, logits) = (batch[2], batch[3], batch[4], batch[5], batch[6]);
    let laid = if n_tokens <= 0 { 0 } else { (n_tokens as usize).min(BATCH_TOKENS_MAX) };
    // SAFETY: `s` is this CPU's scratch value (see the caller); every read below goes through the helper,
    // which checks the user address, into the value at offsets the verifier bounds.
    unsafe {
        let rec = &mut (*s).rec;
        rec.n_tokens = n_tokens;
        rec.laid = laid as u32;
        let Some(laid) = bounded(&raw const rec.laid) else { return };
        let mut flags = 0;
        if embd != 0 {
            flags |= BATCH_EMBD;
        }
        let data = (&raw mut (*s).data).cast::<u8>();
        let mut ok = true;
        if pos != 0 {
            flags |= BATCH_POS;
            ok &= read_user(data.add(4 * laid), pos, 4 * laid);
        }
        if logits != 0 {
            flags |= BATCH_LOGITS;
            ok &= read_user(data.add(12 * laid), logits, laid);
        }
        if seq_id != 0 && n_seq != 0 {
            flags |= BATCH_SEQ;
            ok &= read_user(data.add(8 * laid), n_seq, 4 * laid);
            ok &= if LOOP { looped_seq_ids(seq_id, laid) } else { read_seq_ids(s, seq_id, laid) };
        }
        let read = if ok { laid } else { 0 };
        if read < laid {
            flags |= BATCH_FAULT;
        }
        (*s).rec.read = read as u32;
        (*s).rec.flags |= flags;
    }
}

/// Chunks of [`BATCH_CHUNK`] tokens in the largest batch laid.
const CHUNKS: usize = BATCH_TOKENS_MAX / BATCH_CHUNK;

/// Each token's first sequence id, into the first array, a chunk of [`BATCH_CHUNK`] tokens at a time,
/// the verifier walking every chunk. False when a read failed (the ids are then not trusted).
#[inline(always)]
fn read_seq_ids(s: *mut BatchScratch, seq_id: u64, laid: usize) -> bool {
    let mut fault = 0i64;
    let mut chunk = 0;
    while chunk < CHUNKS {
        match seq_chunk(s, seq_id, laid, chunk) {
            Some(f) => fault |= f,
            None => break,
        }
        chunk += 1;
    }
    fault == 0
}

/// What the steps of [`looped_seq_ids`] share.
#[repr(C)]
struct SeqIds {
    /// The batch's `seq_id` array.
    seq_id: u64,
    /// Tokens laid out in the record.
    laid: u32,
    /// The reads' failures, or-ed together (-1 where a step found no scratch value).
    fault: i64,
}

/// As [`read_seq_ids`], the chunks run by `bpf_loop`: one verified step ([`seq_ids_step`]).
#[inline(always)]
fn looped_seq_ids(seq_id: u64, laid: usize) -> bool {
    let chunks = laid.div_ceil(BATCH_CHUNK);
    let mut shared = SeqIds { seq_id, laid: laid as u32, fault: 0 };
    let step: unsafe extern "C" fn(u32, *mut SeqIds) -> i64 = seq_ids_step;
    // SAFETY: bpf_loop calls `seq_ids_step` at most CHUNKS times with a pointer to `shared`, which outlives
    // the call; the callback is passed as a function's address (a `BPF_PSEUDO_FUNC` reference).
    let done = unsafe { bpf_loop(chunks as u32, step as *mut c_void, (&raw mut shared).cast(), 0) };
    // SAFETY: `shared` was written by the steps through the pointer: read anew.
    let fault = unsafe { core::ptr::read_volatile(&raw const shared.fault) };
    done == chunks as i64 && fault == 0
}

/// One step of [`looped_seq_ids`]: chunk `chunk`'s ids.
///
/// # Safety
/// `shared` points at the caller's [`SeqIds`], alive for the whole loop.
#[inline(never)]
unsafe extern "C" fn seq_ids_step(chunk: u32, shared: *mut SeqIds) -> i64 {
    // SAFETY: see above; the verifier checks the stack pointer's bounds.
    let shared = unsafe { &mut *shared };
    let (Some(s), Some(laid)) = (BATCH_SCRATCH.get_ptr_mut(0), bounded(&raw const shared.laid)) else {
        shared.fault = -1;
        return 1;
    };
    match seq_chunk(s, shared.seq_id, laid, chunk as usize) {
        Some(f) => {
            shared.fault |= f;
            0
        }
        None => 1,
    }
}

/// The first sequence ids of chunk `chunk`'s tokens: its pointers read at once, then the id each points to.
/// The reads' failures or-ed together (0: all read); `None` past the last token laid. The loop does not
/// branch on a read's result (the helper zero-fills what it could not read): a branch per token would leave
/// the verifier more paths to walk than it allows.
#[inline(always)]
fn seq_chunk(s: *mut BatchScratch, seq_id: u64, laid: usize, chunk: usize) -> Option<i64> {
    let first = (chunk & (CHUNKS - 1)) * BATCH_CHUNK;
    if first >= laid {
        return None;
    }
    let here = laid - first;
    let here = if here > BATCH_CHUNK { BATCH_CHUNK } else { here };
    // SAFETY: `s` is this CPU's scratch value.
    unsafe {
        (*s).rec.pad_chunk = here as u32;
    }
    // SAFETY: as above.
    let Some(here) = bounded(unsafe { &raw const (*s).rec.pad_chunk }) else { return Some(-1) };
    let here = if here > BATCH_CHUNK { BATCH_CHUNK } else { here };
    let mut fault = 0i64;
    // SAFETY: `s` is this CPU's scratch value; the helper checks the user addresses and writes only into
    // the value (the pointer chunk, then one id slot each, at indexes below BATCH_TOKENS_MAX).
    unsafe {
        fault |= raw_read((&raw mut (*s).ptrs).cast::<u8>(), seq_id + 8 * first as u64, 8 * here);
        let ids = (&raw mut (*s).data).cast::<u8>();
        let mut j = 0;
        while j < BATCH_CHUNK {
            if j >= here {
                break;
            }
            let at = (*s).ptrs[j & (BATCH_CHUNK - 1)];
            fault |= raw_read(ids.add(4 * ((first + j) & (BATCH_TOKENS_MAX - 1))), at, 4);
            j += 1;
        }
    }
    Some(fault)
}

/// An extended batch's tokens, laid out as `layout` says: the vector's bounds, then per token the token and
/// its first sequence node. Without a layout (the attach never gives one: user space leaves such a library
/// unprobed) nothing is read.
#[inline(always)]
fn read_ext<const LOOP: bool>(s: *mut BatchScratch, batch: u64, layout: Option<ExtLayout>) {
    // SAFETY: `s` is this CPU's scratch value (see the caller); the helper checks every user address.
    unsafe {
        let rec = &mut (*s).rec;
        rec.flags |= BATCH_EXT | BATCH_POS | BATCH_SEQ | BATCH_LOGITS;
        let Some(lay) = layout else {
            rec.flags |= BATCH_STACK_FAULT;
            return;
        };
        let Ok([begin, end]) = bpf_probe_read_user((batch + lay.tokens) as *const [u64; 2]) else {
            rec.flags |= BATCH_STACK_FAULT;
            return;
        };
        let bytes = end.wrapping_sub(begin);
        if end < begin || bytes % lay.token_bytes != 0 || bytes / lay.token_bytes > i32::MAX as u64 {
            rec.flags |= BATCH_STACK_FAULT;
            return;
        }
        let n = (bytes / lay.token_bytes) as usize;
        let laid = n.min(BATCH_TOKENS_MAX);
        rec.n_tokens = n as i32;
        rec.laid = laid as u32;
        let Some(laid) = bounded(&raw const rec.laid) else { return };
        let mut shared = ExtTokens { lay, begin, laid: laid as u32, fault: 0 };
        let read = if LOOP {
            let step: unsafe extern "C" fn(u32, *mut ExtTokens) -> i64 = ext_step;
            // SAFETY: bpf_loop calls `ext_step` `laid` times (at most BATCH_TOKENS_MAX) with a pointer to
            // `shared`, which outlives the call; the callback is passed as a function's address.
            let done = bpf_loop(laid as u32, step as *mut c_void, (&raw mut shared).cast(), 0);
            let fault = core::ptr::read_volatile(&raw const shared.fault);
            if done == laid as i64 && fault == 0 { laid } else { 0 }
        } else {
            let mut i = 0;
            while i < BATCH_TOKENS_MAX {
                if i >= laid {
                    break;
                }
                shared.fault |= ext_token(s, &shared, laid, i);
                i += 1;
            }
            if shared.fault == 0 { i } else { 0 }
        };
        if read < laid {
            (*s).rec.flags |= BATCH_FAULT;
        }
        (*s).rec.read = read as u32;
    }
}

/// What the steps of an extended batch's token loop share.
#[repr(C)]
struct ExtTokens {
    lay: ExtLayout,
    /// The token vector's first element.
    begin: u64,
    /// Tokens laid out in the record.
    laid: u32,
    /// The reads' failures, or-ed together (-1 where a step found no scratch value).
    fault: i64,
}

/// One step of [`read_ext`]'s `bpf_loop`: token `i`.
///
/// # Safety
/// `shared` points at the caller's [`ExtTokens`], alive for the whole loop.
#[inline(never)]
unsafe extern "C" fn ext_step(i: u32, shared: *mut ExtTokens) -> i64 {
    // SAFETY: see above; the verifier checks the stack pointer's bounds.
    let shared = unsafe { &mut *shared };
    let (Some(s), Some(laid)) = (BATCH_SCRATCH.get_ptr_mut(0), bounded(&raw const shared.laid)) else {
        shared.fault = -1;
        return 1;
    };
    // SAFETY: `s` is this CPU's scratch value.
    shared.fault |= unsafe { ext_token(s, shared, laid, i as usize) };
    0
}

/// Token `i` of an extended batch into the record's arrays: the token read into the pointer chunk, its
/// first sequence id behind its set's first node. The read's failures or-ed (0: read). As in
/// [`seq_chunk`]: no branch on a read's result.
///
/// # Safety
/// `s` is this CPU's scratch value; `laid` is at most [`BATCH_TOKENS_MAX`].
#[inline(always)]
unsafe fn ext_token(s: *mut BatchScratch, shared: &ExtTokens, laid: usize, i: usize) -> i64 {
    let lay = shared.lay;
    // Bounds the verifier can see (the layout's fields are masked, this says it again).
    let size = (lay.token_bytes as usize) & (EXT_TOKEN_MAX - 8);
    let (node, count, pos, output) = (
        lay.seq_node() as usize & 255,
        lay.seq_count() as usize & 255,
        lay.pos as usize & 255,
        lay.output as usize & 127,
    );
    // SAFETY: every write lands in the value at offsets bounded by `laid` and `k` (both at most
    // BATCH_TOKENS_MAX) or by the masked fields above (a token's bytes at most EXT_TOKEN_MAX); the helper
    // checks every user address.
    unsafe {
        let data = (&raw mut (*s).data).cast::<u8>();
        let token = (&raw mut (*s).ptrs).cast::<u8>();
        let mut fault = raw_read(token, shared.begin + i as u64 * lay.token_bytes, size);
        let word = |at: usize| core::ptr::read_unaligned(token.add(at).cast::<u64>());
        let k = i & (BATCH_TOKENS_MAX - 1);
        fault |= raw_read(data.add(4 * k), word(node) + EXT_NODE_VALUE, 4);
        let first = core::ptr::read_unaligned(token.add(pos).cast::<i32>());
        core::ptr::write_unaligned(data.add(4 * laid + 4 * k).cast::<i32>(), first);
        core::ptr::write_unaligned(data.add(8 * laid + 4 * k).cast::<i32>(), word(count) as i32);
        *data.add(12 * laid + k) = *token.add(output);
        fault
    }
}

/// A count read back from the scratch value and checked against [`BATCH_TOKENS_MAX`]: the compiler knows
/// the bound of a value it computed and drops such checks, the verifier does not know it; a value read
/// anew (volatile) keeps the check, and the verifier learns the bound from it.
#[inline(always)]
fn bounded(at: *const u32) -> Option<usize> {
    // SAFETY: `at` points into this CPU's scratch value.
    let v = unsafe { core::ptr::read_volatile(at) } as usize;
    if v > BATCH_TOKENS_MAX { None } else { Some(v) }
}

/// Reads `len` bytes of user memory at `from` into `to`: the helper's result (0, or a negative error, the
/// bytes then zeroed).
#[inline(always)]
unsafe fn raw_read(to: *mut u8, from: u64, len: usize) -> i64 {
    // SAFETY: the caller gives a destination with room for `len` bytes; the helper checks the source.
    unsafe { generated::bpf_probe_read_user(to.cast::<c_void>(), len as u32, from as *const c_void) }
}

/// Reads `len` bytes of user memory at `from` into `to`; false when it could not (nothing to read is
/// success).
#[inline(always)]
unsafe fn read_user(to: *mut u8, from: u64, len: usize) -> bool {
    // SAFETY: the caller gives a destination with room for `len` bytes.
    len == 0 || unsafe { raw_read(to, from, len) } == 0
}

/// A graph handed to ggml's scheduler in process `tgid`: where the process has no batches (its step number
/// is 0: no `llama_decode` seen), the library calls its tally counted since its previous pass are moved into
/// a [`StepCutRecord`], written before the pass's own record. The first pass makes the tally: calls before
/// it belong to no step.
#[inline(always)]
pub(crate) fn cut_at_pass(header: RecordHeader) {
    let tgid = (header.pid_tgid >> 32) as u32;
    let Some(t) = STEP_TALLY.get_ptr_mut(tgid) else {
        let zero = StepTally { step: 0, calls: [0; STEP_SLOTS] };
        // Another CPU may have made it first (refused as existing, not full): only a missing entry counts.
        if STEP_TALLY.insert(tgid, zero, u64::from(BPF_NOEXIST)).is_err() && STEP_TALLY.get_ptr(tgid).is_none() {
            count(Counter::StepTallyFull);
        }
        return;
    };
    // SAFETY: `t` points into the live map value; the step number and the counters are only read here.
    let (step, any) = unsafe {
        let mut any = 0u64;
        let mut i = 0;
        while i < STEP_SLOTS {
            any |= core::ptr::read_volatile(&raw const (*t).calls[i]);
            i += 1;
        }
        (core::ptr::read_volatile(&raw const (*t).step), any)
    };
    if step != 0 || any == 0 {
        return; // batches cut this process's steps, or no call since the last pass
    }
    // Reserved before the calls are moved: a full ring (counted) leaves them in the tally, for the next pass.
    let Some(mut entry) = reserve::<StepCutRecord>() else { return };
    let mut calls = [0u64; STEP_SLOTS];
    move_calls(t, &mut calls);
    entry.write(StepCutRecord { header: RecordHeader { kind: RecordKind::StepCut as u16, ..header }, calls });
    entry.submit(submit_flags());
}
