//! Empty programs, attached by `tracer record --probe-mode empty` at the same points as the real ones:
//! the benchmark's floor, what the traps alone cost (`cargo xtask bench`).

use aya_ebpf::{
    macros::{uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext},
};

#[uprobe]
pub(crate) const fn empty_entry(_ctx: ProbeContext) -> u32 {
    0
}

#[uretprobe]
pub(crate) const fn empty_return(_ctx: RetProbeContext) -> u32 {
    0
}

/// The empty twin of a one-trap launch probe.
#[uprobe]
pub(crate) const fn empty_one_trap(_ctx: ProbeContext) -> u32 {
    0
}
