//! tracer's kernel side. Programs are grouped by the layer they observe:
//! - [`calls`]: entry/return uprobes shared by every probed API call (HIP and HSA);
//! - [`hip`]: kernel registration in libamdhip64;
//! - [`hsa`]: the doorbell store in libhsa-runtime64, where AQL packets are read from the queue;
//! - [`process`]: scheduler tracepoints that keep the PID filter following the traced processes;
//! - [`ioctl`]: GPU driver ioctls (KFD, DRM amdgpu) from the syscall tracepoints;
//! - [`opens`]: a traced process opening a GPU runtime library (a copy to probe before it runs).
//!
//! Everything here is read-only towards the traced process: programs read registers and user memory and
//! write only into their own maps. Filtering happens first, so an untraced process costs only the trap.
#![no_std]
#![no_main]
#![expect(
    internal_features,
    unstable_features,
    reason = "atomic adds for the loss counters: core has no atomic RMW types for the BPF target"
)]
#![feature(core_intrinsics)]

// The library target exists for rebuild tracking only.
use tracer_ebpf as _;

mod baseline;
mod calls;
mod hip;
mod hsa;
mod ioctl;
mod maps;
mod opens;
mod process;

#[cfg(not(test))]
#[panic_handler]
const fn panic(_info: &core::panic::PanicInfo<'_>) -> ! {
    // Never reached: the verifier rejects any program with a reachable panic.
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
