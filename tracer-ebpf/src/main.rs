//! tracer's kernel side. Programs are grouped by the layer they observe:
//! - [`calls`]: entry/return uprobes shared by every probed API call (HIP, HSA, the CUDA driver and
//!   runtime), one-trap entry probes for hot paths, and the calls tallied in the kernel;
//! - [`hip`]: kernel registration (`__hipRegisterFunction`, libcudart's `__cudaRegisterFunction`);
//! - [`hsa`]: the doorbell store in libhsa-runtime64, where AQL packets are read from the queue;
//! - [`process`]: scheduler tracepoints that keep the PID filter following the traced processes;
//! - [`ioctl`]: GPU driver ioctls (KFD, DRM amdgpu) from the syscall tracepoints;
//! - [`opens`]: a traced process opening a GPU runtime library (a copy to probe before it runs);
//! - [`entries`]: calls into every other GPU library's exported functions, counted in the kernel;
//! - [`batch`]: llama.cpp's `llama_decode`, the batch each inference step is given;
//! - [`pipelines`]: ggml-vulkan's pipeline maker, the name each pipeline is given;
//! - [`inputs`]: ggml's tensor set, where a pass's token positions and output rows are copied up;
//! - [`sched`]: the kernel's GPU scheduler jobs (queue, run, done), where its tracepoints exist.
//!
//! What they share: [`maps`] (every map, the load-time settings, the PID filter and loss counters),
//! [`emit`] (every record but a call's own, written into the ring in one place) and [`runs`] (a thread's
//! exact repeats of launches, counted instead of written). No module of programs uses another's.
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
mod batch;
mod calls;
mod emit;
mod entries;
mod hip;
mod hsa;
mod inputs;
mod ioctl;
mod maps;
mod opens;
mod pipelines;
mod process;
mod runs;
mod sched;

#[cfg(not(test))]
#[panic_handler]
const fn panic(_info: &core::panic::PanicInfo<'_>) -> ! {
    // Never reached: the verifier rejects any program with a reachable panic.
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
