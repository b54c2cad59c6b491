//! Scheduler tracepoints: they keep the PID filter following the traced processes (a traced process's
//! new child joins it, an ended process leaves it) and record fork, exec and exit.
//!
//! Tracepoint field offsets differ between kernel versions, so user space reads them from tracefs'
//! `format` files and patches them in at load.

use aya_ebpf::{
    EbpfContext as _,
    helpers::{bpf_get_current_pid_tgid, generated::bpf_get_attach_cookie},
    macros::{tracepoint, uprobe},
    programs::{ProbeContext, TracePointContext},
};
use tracer_common::{Counter, ProcEvent};

use crate::{
    emit::{emit_proc, emit_proc_of},
    maps::{PIDS, THREADS, count, filter_enabled, setting, traced, watched_comm},
    runs::end_thread,
};

/// `task:task_newtask` offset of `pid` (the new task's id).
#[unsafe(no_mangle)]
static NEWTASK_PID_OFFSET: u32 = 8;
/// `task:task_newtask` offset of `clone_flags` (u64).
#[unsafe(no_mangle)]
static NEWTASK_FLAGS_OFFSET: u32 = 32;
/// `sched:sched_process_exit` offset of `group_dead` (bool); 0 when the kernel lacks the field.
#[unsafe(no_mangle)]
static EXIT_GROUP_DEAD_OFFSET: u32 = 0;

const CLONE_THREAD: u64 = 0x0001_0000;

/// Runs in the parent when any task is created.
#[tracepoint]
pub(crate) fn task_newtask(ctx: TracePointContext) -> u32 {
    if !filter_enabled() {
        return 0;
    }
    let parent = (bpf_get_current_pid_tgid() >> 32) as u32;
    if !traced(parent) {
        return 0;
    }
    // SAFETY: offsets come from this kernel's format file; read_at checks the access.
    let flags: u64 = unsafe { ctx.read_at(setting(&NEWTASK_FLAGS_OFFSET) as usize) }.unwrap_or(0);
    if flags & CLONE_THREAD != 0 {
        return 0; // a new thread of a traced process is already covered by its tgid
    }
    // SAFETY: as above.
    let Ok(child) = (unsafe { ctx.read_at::<i32>(setting(&NEWTASK_PID_OFFSET) as usize) }) else {
        return 0;
    };
    let child = child as u32;
    if PIDS.insert(child, 1, 0).is_err() {
        count(Counter::FilterFull);
    }
    emit_proc(ProcEvent::Fork, child, parent);
    0
}

#[tracepoint]
pub(crate) fn sched_process_exec(_ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    if traced(tgid) {
        // The image goes: its launches' run ends, and the new one's begin afresh.
        end_thread(pid_tgid);
        emit_proc(ProcEvent::Exec, tgid, 0);
    } else if filter_enabled() && watched_comm() {
        // A program with the watched name (`ollama`) starts: traced from its first instruction; user space
        // keeps it if it is a server and takes it out again if not.
        if PIDS.insert(tgid, 1, 0).is_err() {
            count(Counter::FilterFull);
        }
        emit_proc(ProcEvent::Exec, tgid, 0);
    }
    0
}

#[tracepoint]
pub(crate) fn sched_process_exit(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    if !traced(tgid) {
        return 0;
    }
    end_thread(pid_tgid);
    // The thread's tallies stay for user space to read at the end; the entry no longer vouches for it.
    if let Some(t) = THREADS.get_ptr_mut(pid_tgid) {
        // SAFETY: `t` points into the live map value; the thread is exiting, so no probe of it runs now.
        unsafe {
            (*t).ended = 1;
        }
    }
    let off = setting(&EXIT_GROUP_DEAD_OFFSET);
    let last = if off != 0 {
        // SAFETY: offset from this kernel's format file.
        unsafe { ctx.read_at::<u8>(off as usize) }.unwrap_or(0) != 0
    } else {
        pid_tgid as u32 == tgid // older kernels: take the leader's exit as the process's
    };
    if !last {
        return 0;
    }
    emit_proc(ProcEvent::Exit, tgid, 0);
    if filter_enabled() {
        #[expect(clippy::let_underscore_must_use, reason = "a process not in the filter needs nothing done")]
        let _: Result<(), _> = PIDS.remove(tgid);
    }
    0
}

/// A probed library's last initializer (its `DT_INIT_ARRAY`'s last function, else `DT_INIT`: the dynamic
/// loader runs them before another library may call it) in a traced process: the witness that the library's
/// probes were in place before its first call there. One trap per process and library loaded; the cookie
/// carries the library id (a runtime copy's, or a counted library's marked `COUNTED_LIBRARY`).
#[uprobe]
pub(crate) fn library_init(ctx: ProbeContext) -> u32 {
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    if traced(tgid) {
        // SAFETY: the context pointer is the probe's own pt_regs.
        let cookie = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
        emit_proc_of(ProcEvent::Init, tgid, 0, tracer_common::cookie::lib(cookie));
    }
    0
}
