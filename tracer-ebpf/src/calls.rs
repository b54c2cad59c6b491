//! API calls of the runtimes (libamdhip64, libhsa-runtime64, libcuda, libcudart). Generic programs serve
//! every probed call; the attach cookie says which function and library fired and what to read:
//! - [`call_entry`] stashes the argument registers (and stack slots) with the entry time, and writes the
//!   path of a file the call loads ([`cookie::PATH`]) at once;
//! - [`call_return`] turns the stash into one [`CallRecord`] with duration and return value, reads the
//!   out-parameter the cookie names, and for name lookups and queue creation emits the name or queue;
//! - [`one_trap_entry`] writes a [`CallRecord`] at entry alone: one trap for a call on a hot path (launches,
//!   graph replays, synchronizations), where the duration and result are not needed.

use aya_ebpf::{
    EbpfContext as _,
    bindings::BPF_RB_PROD_POS,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user, generated::bpf_get_attach_cookie},
    macros::{uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext},
};
use tracer_common::{
    ARG_SLOTS, ApiFunc, CALL_CONFIG_FAULT, CALL_ENTRY_ONLY, CALL_IN_RUNS, CALL_OUT_FAULT, CALL_OUT_VALID,
    CALL_STACK_FAULT, CONFIG_SLOTS, CallRecord, Counter, PARAMS_ALL, RecordHeader, RecordKind, STACK_ARGS, TALLY_SLOTS,
    ThreadRuns, ThreadTally,
    api::{HSA_SYMBOL_INFO_KERNEL_OBJECT, extra_reads, memcpy_kind},
    cookie,
};

use crate::{
    emit::{emit_code, emit_name, emit_params, emit_queue, plan_of},
    maps::{EVENTS, STASH, Stash, StashKey, THREADS, count, reserve, reserve_after_run, submit_flags, traced},
    runs::{self, fill},
};

#[uprobe]
pub(crate) fn call_entry(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !traced((pid_tgid >> 32) as u32) {
        return 0;
    }
    // SAFETY: the context pointer is the probe's own pt_regs.
    let c = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    let mut stash = Stash { ts_ns: 0, flags: 0, caller: 0, args: register_args(&ctx) };
    mark_host_copy(pid_tgid, c, &stash.args);
    // A launch (hipLaunchKernel) or a module load: its return address says which code made it.
    let want_caller = c & (cookie::PARAMS | cookie::WAKE) != 0;
    stash.caller = read_stack(&ctx, c, want_caller, &mut stash.args, &mut stash.flags);
    // The fat-binary wrapper's first words, or a Vulkan create info's (its code, its shader module).
    let words_at = if c & cookie::WRAPPER != 0 {
        Some(stash.args[0])
    } else {
        extra_reads(cookie::func(c))
            .0
            .map(|(arg, offset)| stash.args.get(arg).copied().unwrap_or(0).wrapping_add(offset))
    };
    if let Some(at) = words_at {
        // SAFETY: bpf_probe_read_user checks the address and never faults the process.
        match unsafe { bpf_probe_read_user(at as *const [u64; 2]) } {
            Ok(words) => stash.args[6..8].copy_from_slice(&words),
            Err(_) => stash.flags |= CALL_CONFIG_FAULT,
        }
    }
    // SAFETY: helper call without preconditions.
    stash.ts_ns = unsafe { bpf_ktime_get_ns() };
    if c & cookie::PARAMS != 0 {
        // A launch probed at its return too: one that reads no parameters may repeat (see `runs`), decided
        // there.
        let plan = plan_for(pid_tgid, c, &stash.args);
        if plan == Some((true, 0)) {
            stash.flags |= PLANNED_NONE;
        } else if matches!(plan, Some((false, _))) {
            stash.flags |= UNPLANNED;
        }
        let header = RecordHeader::of_probe(RecordKind::Params, c, pid_tgid, stash.ts_ns);
        emit_params(header, c, &stash.args, plan.map(|(_, wanted)| wanted));
    }
    if c & cookie::PATH != 0 {
        // A file the call loads code from, named by path: read now, so that a load that fails names its
        // file too. The caller has just written the string, so its page is resident.
        let path = stash.args.get(cookie::name_arg(c)).copied().unwrap_or(0);
        let header = RecordHeader::of_probe(RecordKind::Name, c, pid_tgid, stash.ts_ns);
        emit_name(header, 0, 0, path as *const u8, false);
    }
    let key = StashKey { pid_tgid, func: u64::from(cookie::func(c)) };
    if STASH.insert(key, stash, 0).is_err() {
        count(Counter::StashFull);
    }
    0
}

/// A stash flag, never written: the launch's plan was found and reads no parameters, so it may repeat.
const PLANNED_NONE: u64 = 1 << 63;
/// A stash flag, never written: the launch's function has no plan yet (its record wakes the reader).
const UNPLANNED: u64 = 1 << 62;

/// The six integer argument registers (x86-64 `SysV`), then room for the stack slots.
#[inline(always)]
fn register_args(ctx: &ProbeContext) -> [u64; ARG_SLOTS] {
    let a = |n: usize| ctx.arg::<u64>(n).unwrap_or(0);
    [a(0), a(1), a(2), a(3), a(4), a(5), 0, 0, 0, 0]
}

/// The return address (`[rsp]`, when `want_caller`; else 0) and, when the cookie asks for them, the stack
/// argument slots (`[rsp+8]`, `[rsp+16]`, ...: into `args[6..]`, or [`CALL_STACK_FAULT`] in `flags`), in one
/// read of the user stack where both are wanted: a read of user memory costs about as much as the rest of a
/// launch's program (measured with `--program-stats`: 70–160 ns each of ~575).
#[inline(always)]
fn read_stack(ctx: &ProbeContext, c: u64, want_caller: bool, args: &mut [u64; ARG_SLOTS], flags: &mut u64) -> u64 {
    if c & cookie::STACK == 0 {
        return if want_caller { return_address(ctx) } else { 0 };
    }
    // SAFETY: bpf_probe_read_user checks the address and never faults the process.
    if let Ok(words) = unsafe { bpf_probe_read_user(stack_pointer(ctx) as *const [u64; 1 + STACK_ARGS]) } {
        args[6..].copy_from_slice(&words[1..]);
        return if want_caller { words[0] } else { 0 };
    }
    *flags |= CALL_STACK_FAULT;
    if want_caller { return_address(ctx) } else { 0 }
}

/// The return address at entry, `[rsp]` (0 when it cannot be read).
#[inline(always)]
fn return_address(ctx: &ProbeContext) -> u64 {
    // SAFETY: bpf_probe_read_user checks the address and never faults the process.
    unsafe { bpf_probe_read_user(stack_pointer(ctx) as *const u64) }.unwrap_or(0)
}

/// The stack pointer at entry (no `arg` reaches it).
#[inline(always)]
fn stack_pointer(ctx: &ProbeContext) -> u64 {
    // SAFETY: pt_regs is kernel memory handed to the program; reading it is always valid.
    unsafe { (*ctx.regs).rsp }
}

/// What one [`CallRecord`] advances the ring's producer position by: the record rounded up to 8 bytes,
/// after the ring's own 8-byte header.
const RECORD_SPAN: u64 = ((size_of::<CallRecord>() as u64 + 7) & !7) + 8;

/// A call on a hot path (CUDA's driver launches, graph replays, synchronizations): one trap. The record
/// is written at entry with the arguments (stack slots or the `CUlaunchConfig` the cookie asks for);
/// there is no return probe, so no duration and no return value.
#[uprobe]
pub(crate) fn one_trap_entry(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: see call_entry.
    let c = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    // A launch's parameter plan (found, and what it asks for: every slot where user space has set none yet),
    // when its function is in a register: user space sets plans in traced processes only and takes them
    // back when a process execs, ends or leaves the filter, so a plan found also says the process is traced
    // (one map touched, not two: each costs about 100 ns on the test VM).
    let mut plan: Option<(bool, u32)> = None;
    // A launching thread's run entry (see `runs`).
    let mut runs = None;
    // The argument registers, read once the tallied calls' hot path is behind.
    let mut args = if c & (cookie::TALLY | cookie::GATED) != 0 {
        // The hot path (most syncs and host-to-device copies of a decode loop): a live entry in THREADS
        // was made by this thread while its process was traced, so one lookup answers both questions.
        let t = match THREADS.get_ptr_mut(pid_tgid) {
            // SAFETY: a map value pointer the lookup just returned: valid and aligned for this program run;
            // the field is only read, and the pointer passed on.
            Some(t) if unsafe { (*t).ended } == 0 => t,
            _ => {
                if !traced((pid_tgid >> 32) as u32) {
                    return 0;
                }
                let Some(t) = thread_tally(pid_tgid) else {
                    count(Counter::TallyLost);
                    return 0;
                };
                t
            }
        };
        let slot = cookie::tally_slot_of(c) & (TALLY_SLOTS - 1);
        // A copy toward the device is written when anything was written since this thread's last one
        // (the ring's producer moved): after a launch it may start a step's next matrix pass. The copies
        // of one batch of inputs after it are tallied.
        let ring = if c & cookie::TALLY != 0 { EVENTS.query(u64::from(BPF_RB_PROD_POS)) } else { 0 };
        // SAFETY: `t` points into the live map value; only this thread writes its entry (its programs do
        // not run concurrently), so plain adds lose nothing.
        unsafe {
            let tally = if c & cookie::TALLY != 0 { (*t).ring_at_copy == ring } else { (*t).host_copied == 0 };
            if tally {
                (*t).calls[slot] += 1;
                if c & cookie::TALLY != 0 {
                    (*t).bytes[slot] += ctx.arg::<u64>(2).unwrap_or(0);
                }
                return 0;
            }
            if c & cookie::TALLY != 0 {
                // Past this copy's own record: the next copy with nothing written between is tallied.
                (*t).ring_at_copy = ring + RECORD_SPAN;
            } else {
                // A sync after a copy toward the host: it ends a step, so it is written.
                (*t).host_copied = 0;
            }
        }
        register_args(&ctx)
    } else if c & cookie::PARAMS != 0 {
        // A launch: a thread with a run entry is traced (the one lookup of a repeat); one without looks its
        // plan up, which says so too.
        runs = runs::of(pid_tgid);
        let args = register_args(&ctx);
        if runs.is_none() {
            plan = plan_for(pid_tgid, c, &args);
            if plan.is_none_or(|(planned, _)| !planned) && !traced((pid_tgid >> 32) as u32) {
                return 0;
            }
        }
        args
    } else {
        if !traced((pid_tgid >> 32) as u32) {
            return 0;
        }
        register_args(&ctx)
    };
    mark_host_copy(pid_tgid, c, &args);
    let mut flags = CALL_ENTRY_ONLY;
    // A launch's return address: which code made it (one that stays unnamed is counted by library, and a
    // runtime's launch names the driver launch it makes). Other calls do not need it.
    let caller = read_stack(&ctx, c, c & cookie::PARAMS != 0, &mut args, &mut flags);
    if c & cookie::CONFIG != 0 {
        let at = args[0] as *const [u64; CONFIG_SLOTS];
        // SAFETY: as above.
        match unsafe { bpf_probe_read_user(at) } {
            Ok(words) => args[ARG_SLOTS - CONFIG_SLOTS..].copy_from_slice(&words),
            Err(_) => flags |= CALL_CONFIG_FAULT,
        }
    }

    // SAFETY: helper call without preconditions.
    let ts_ns = unsafe { bpf_ktime_get_ns() };
    if c & cookie::PARAMS != 0 {
        launch_at_entry(pid_tgid, c, ts_ns, plan, runs, (&args, caller, flags));
        return 0;
    }
    let header = RecordHeader::of_probe(RecordKind::Call, c, pid_tgid, ts_ns);
    if cookie::func(c) == ApiFunc::GgmlSchedGraphCompute as u16 {
        crate::batch::cut_at_pass(header);
    }
    if let Some(mut entry) = reserve::<CallRecord>() {
        entry.write(CallRecord { header, duration_ns: 0, ret: 0, out: 0, flags, caller, args });
        entry.submit(submit_flags());
    }
    0
}

/// Flags for a launch record's submit: a launch whose function has no plan yet wakes the reader at once.
/// Until user space reads it and sets the plan, every launch of that function reads all its parameters
/// and may not repeat (on this VM the stand-in's first 2 000 launches, written whole while the reader
/// slept its 20 ms, cost 17 ms: 170 ns over each of 100 000 launches).
#[inline(always)]
fn launch_wake(unplanned: bool) -> u64 {
    if unplanned { u64::from(aya_ebpf::bindings::BPF_RB_FORCE_WAKEUP) } else { submit_flags() }
}

/// A launch's plan, when its function is in a register: (whether user space has set one, what it asks for:
/// every parameter where it has not).
#[inline(always)]
fn plan_for(pid_tgid: u64, c: u64, args: &[u64; ARG_SLOTS]) -> Option<(bool, u32)> {
    let handle_arg = cookie::handle_arg(c);
    (handle_arg < 6).then(|| {
        let found = plan_of(pid_tgid >> 32, args.get(handle_arg).copied().unwrap_or(0));
        (found.is_some(), found.unwrap_or(PARAMS_ALL))
    })
}

/// A one-trap launch, its arguments read (`what`: the slots, caller and flags): counted when it repeats the
/// launch a period before it on its thread, else written (its parameters first, as its plan asks).
#[inline(always)]
fn launch_at_entry(
    pid_tgid: u64,
    c: u64,
    ts_ns: u64,
    mut plan: Option<(bool, u32)>,
    mut runs: Option<*mut ThreadRuns>,
    (args, caller, mut flags): (&[u64; ARG_SLOTS], u64, u64),
) {
    if let Some(r) = runs {
        // SAFETY: the thread's live entry, written only by its own programs.
        unsafe {
            fill(r, c, args, caller, flags, 0);
            if runs::continues(r, ts_ns, 0) {
                return;
            }
        }
        plan = plan_for(pid_tgid, c, args);
    }
    // Only a launch that reads no parameters may repeat: the parameters are not compared.
    let repeatable = plan == Some((true, 0));
    if runs.is_none() && repeatable {
        runs = runs::make(pid_tgid);
        if let Some(r) = runs {
            // SAFETY: as above.
            unsafe {
                fill(r, c, args, caller, flags, 0);
            }
        }
    }
    if let Some(r) = runs {
        // SAFETY: as above.
        if unsafe { runs::begin(r, pid_tgid, ts_ns, 0, repeatable) } {
            return;
        }
        flags |= CALL_IN_RUNS;
    }
    let header = RecordHeader::of_probe(RecordKind::Call, c, pid_tgid, ts_ns);
    emit_params(header, c, args, plan.map(|(_, wanted)| wanted));
    if let Some(mut entry) = reserve_after_run::<CallRecord>() {
        entry.write(CallRecord { header, duration_ns: 0, ret: 0, out: 0, flags, caller, args: *args });
        entry.submit(launch_wake(matches!(plan, Some((false, _)))));
    } else if let Some(r) = runs {
        // SAFETY: as above.
        unsafe {
            runs::lost(r);
        }
    }
}

#[uretprobe]
pub(crate) fn call_return(ctx: RetProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: see call_entry.
    let c = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    let key = StashKey { pid_tgid, func: u64::from(cookie::func(c)) };
    // SAFETY: the entry is copied out before it is removed.
    let Some(stash) = (unsafe { STASH.get(key) }).copied() else {
        // Untraced process (no entry was made), or the call began before the probe was attached.
        if traced((pid_tgid >> 32) as u32) {
            count(Counter::ReturnWithoutEntry);
        }
        return 0;
    };
    #[expect(
        clippy::let_underscore_must_use,
        reason = "an entry already gone (evicted, or taken by a racing return) needs nothing done"
    )]
    let _: Result<(), _> = STASH.remove(key);
    if cookie::func(c) == ApiFunc::HsaExecutableSymbolGetInfo as u16
        && stash.args[1] as u32 != HSA_SYMBOL_INFO_KERNEL_OBJECT
    {
        // Only the kernel object names anything: the other queries are counted.
        count(Counter::SymbolInfoOther);
        return 0;
    }
    // SAFETY: helper call without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    let ret: u64 = ctx.ret();
    let header = RecordHeader::of_probe(RecordKind::Call, c, pid_tgid, stash.ts_ns);
    let mut flags = stash.flags;
    let mut out = 0u64;
    // Out-parameters are written by the call, so they are read now, and only when it succeeded.
    if c & cookie::OUT != 0 && ret as u32 == 0 {
        let at = stash.args.get(cookie::out_arg(c)).copied().unwrap_or(0);
        // SAFETY: bpf_probe_read_user checks the address.
        match unsafe { bpf_probe_read_user(at as *const u64) } {
            Ok(v) => {
                out = v;
                flags |= CALL_OUT_VALID;
            }
            Err(_) => flags |= CALL_OUT_FAULT,
        }
    }
    // A fat binary registered, or a module loaded from an image, wakes the reader at once: its process's
    // maps are read while it lives (a library's fat binaries are few; its kernel registrations, many,
    // wake nobody).
    let wake = if c & (cookie::WRAPPER | cookie::WAKE) != 0 {
        u64::from(aya_ebpf::bindings::BPF_RB_FORCE_WAKEUP)
    } else {
        submit_flags()
    };
    let duration_ns = now.saturating_sub(stash.ts_ns);
    if c & cookie::PARAMS != 0 {
        launch_at_return(pid_tgid, c, &stash, ret, duration_ns);
        return 0;
    }
    if let Some(mut entry) = reserve::<CallRecord>() {
        entry.write(CallRecord { header, duration_ns, ret, out, flags, caller: stash.caller, args: stash.args });
        entry.submit(wake);
    }
    // At most one of what follows: a function's one layout gives it a name lookup, a queue or a shader
    // module, never two (`tracer_common`'s test `a_return_writes_at_most_one_extra_record`). Each returns,
    // so that the verifier walks each apart, not every combination of the three.
    if c & cookie::NAME != 0 {
        if flags & CALL_OUT_VALID != 0 {
            // A lookup by name: the runtime has just read the name, so its page is resident.
            let header = RecordHeader { kind: RecordKind::Name as u16, ..header };
            let name = stash.args.get(cookie::name_arg(c)).copied().unwrap_or(0);
            let module = stash.args.get(cookie::module_arg(c)).copied().unwrap_or(0);
            emit_name(header, out, module, name as *const u8, false);
        }
        return 0;
    }
    if c & cookie::QUEUE != 0 {
        if ret as u32 == 0 {
            emit_queue(RecordHeader { kind: RecordKind::Queue as u16, ..header }, stash.args[7]);
        }
        return 0;
    }
    if flags & (CALL_OUT_VALID | CALL_CONFIG_FAULT) == CALL_OUT_VALID && extra_reads(cookie::func(c)).1 {
        // A shader module made: the head and last bytes of its code (the caller still holds them) name it.
        emit_code(RecordHeader { kind: RecordKind::Name as u16, ..header }, out, stash.args[6], stash.args[7]);
    }
    0
}

/// A launch probed at its return too (HIP's): counted when it repeats the launch a period before it on its
/// thread, result included, else written. A function of its own: the verifier walks it once, not once per
/// path through the rest of the return program.
#[inline(never)]
fn launch_at_return(pid_tgid: u64, c: u64, stash: &Stash, ret: u64, duration_ns: u64) {
    let repeatable = stash.flags & PLANNED_NONE != 0;
    let mut flags = stash.flags & !(PLANNED_NONE | UNPLANNED);
    let runs = runs::of(pid_tgid).or_else(|| if repeatable { runs::make(pid_tgid) } else { None });
    if let Some(r) = runs {
        // SAFETY: the thread's live entry, written only by its own programs.
        unsafe {
            fill(r, c, &stash.args, stash.caller, flags, ret);
            if runs::continues(r, stash.ts_ns, duration_ns)
                || runs::begin(r, pid_tgid, stash.ts_ns, duration_ns, repeatable)
            {
                return;
            }
        }
        flags |= CALL_IN_RUNS;
    }
    if let Some(mut entry) = reserve_after_run::<CallRecord>() {
        let rec = entry.as_mut_ptr();
        // SAFETY: `rec` points at reserved ring memory of the right size; every field is written before submit.
        // Field by field, not a record built on the stack: this function's frame adds to its caller's, and
        // Linux 6.1 refuses the two above 512 bytes.
        unsafe {
            (*rec).header = RecordHeader::of_probe(RecordKind::Call, c, pid_tgid, stash.ts_ns);
            (*rec).duration_ns = duration_ns;
            (*rec).ret = ret;
            (*rec).out = 0;
            (*rec).flags = flags;
            (*rec).caller = stash.caller;
            (*rec).args = stash.args;
        }
        entry.submit(launch_wake(stash.flags & UNPLANNED != 0));
    } else if let Some(r) = runs {
        // SAFETY: as above.
        unsafe {
            runs::lost(r);
        }
    }
}

/// The thread's entry in [`THREADS`], made at its first tallied call or copy toward the host. Callers
/// have checked that the thread is traced: an entry marked ended (a recycled thread id) is live again.
#[inline(always)]
fn thread_tally(pid_tgid: u64) -> Option<*mut ThreadTally> {
    let t = THREADS.get_ptr_mut(pid_tgid).or_else(|| {
        let zero =
            ThreadTally { host_copied: 0, ended: 0, ring_at_copy: 0, calls: [0; TALLY_SLOTS], bytes: [0; TALLY_SLOTS] };
        #[expect(clippy::let_underscore_must_use, reason = "the lookup below tells whether an entry exists")]
        let _: Result<(), _> = THREADS.insert(pid_tgid, zero, u64::from(aya_ebpf::bindings::BPF_NOEXIST));
        THREADS.get_ptr_mut(pid_tgid)
    })?;
    // SAFETY: `t` points into the live map value, written only by this thread.
    unsafe {
        (*t).ended = 0;
    }
    Some(t)
}

/// A copy toward the host marks its thread: its next synchronization ends a step and is written.
#[inline(always)]
fn mark_host_copy(pid_tgid: u64, c: u64, args: &[u64; ARG_SLOTS]) {
    let to_host = c & cookie::MARK != 0
        || (c & cookie::MARK_IF != 0
            && matches!(
                args.get(cookie::mark_arg(c)).map(|&k| k as u32),
                Some(memcpy_kind::DEVICE_TO_HOST | memcpy_kind::DEFAULT)
            ));
    if to_host {
        // With no room for the thread, its next sync cannot be gated either: it is counted as lost there.
        if let Some(t) = thread_tally(pid_tgid) {
            // SAFETY: `t` points into the live map value, written only by this thread.
            unsafe {
                (*t).host_copied = 1;
            }
        }
    }
}
