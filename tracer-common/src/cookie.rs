//! Attach cookie layout: the library id in the upper 16 bits, probe flags in bits 16..48, the
//! [`crate::ApiFunc`] in the low 16 bits.

/// Read [`crate::STACK_ARGS`] stack slots at entry.
pub const STACK: u64 = 1 << 16;
/// At return, when the call returned 0, read the u64 an out-parameter points to: the argument slot
/// is [`out_arg`] (0..=7).
pub const OUT: u64 = 1 << 17;
const OUT_SHIFT: u32 = 18; // 3 bits
/// At return, also emit a [`crate::NameRecord`] binding the out value to the string at argument
/// [`name_arg`], with argument [`module_arg`] as its module.
pub const NAME: u64 = 1 << 21;
const NAME_SHIFT: u32 = 22; // 3 bits
const MODULE_SHIFT: u32 = 25; // 3 bits
/// `hsa_queue_create`: at return, read the `hsa_queue_t` the out-parameter points to and emit a
/// [`crate::QueueRecord`].
pub const QUEUE: u64 = 1 << 28;
/// At entry, read [`crate::CONFIG_SLOTS`] u64 words from the structure argument 0 points to into the
/// last argument slots (`cuLaunchKernelEx`'s `CUlaunchConfig`: grid, block, shared memory, stream).
pub const CONFIG: u64 = 1 << 29;
/// At entry, read the launch's kernel parameters ([`crate::ParamsRecord`]).
///
/// The `void**` array is argument [`params_arg`], the function handle argument [`handle_arg`]; the
/// plan for that handle says which parameters.
pub const PARAMS: u64 = 1 << 30;
/// At entry, read the first two words of the fat-binary wrapper argument 0 points to (magic and
/// version, then the address of its offload bundle) into argument slots 6 and 7.
pub const WRAPPER: u64 = 1 << 31;
const PARAMS_SHIFT: u32 = 32; // 4 bits
const HANDLE_SHIFT: u32 = 36; // 3 bits
/// At entry, emit a [`crate::NameRecord`] of the path string at argument [`name_arg`].
///
/// The path of a file the call loads code from, recorded whether or not the call succeeds (its header is
/// the call's own, so user space binds the two). Its bit lies beside the launch fields, which a call
/// naming a file never uses.
pub const PATH: u64 = 1 << 39;
/// A synchronization: written only when its thread copied toward the host since its last written
/// one (the sync that ends an inference step); otherwise tallied in the kernel ([`crate::ThreadTally`]).
pub const GATED: u64 = 1 << 40;
/// Tallied in the kernel, never written one by one: calls, and the bytes in argument 2.
pub const TALLY: u64 = 1 << 41;
/// A tallied or gated call's slot in its thread's [`crate::ThreadTally`] (3 bits). These bits are the
/// parameter-array fields of a launch: a tallied call never reads parameters.
const TALLY_SLOT_SHIFT: u32 = 32;
/// A copy toward the host: marks its thread, so that the thread's next synchronization is written.
pub const MARK: u64 = 1 << 42;
/// A copy whose direction (a hipMemcpyKind) is argument [`mark_arg`]: marks its thread when that is
/// device-to-host or from the pointers.
pub const MARK_IF: u64 = 1 << 43;
const MARK_SHIFT: u32 = 44; // 3 bits
/// Wake the reader at once when the record is written, and read the return address at entry.
///
/// For a module loaded from an image in memory, whose file (or, for an image outside every file, its
/// loader's) is looked up in the process's maps while the process lives (such loads are few).
pub const WAKE: u64 = 1 << 47;

pub const fn mark_if(slot: u64) -> u64 {
    MARK_IF | ((slot & 7) << MARK_SHIFT)
}
pub const fn mark_arg(c: u64) -> usize {
    ((c >> MARK_SHIFT) & 7) as usize
}

/// Read `*arg[slot]` at return.
pub const fn out(slot: u64) -> u64 {
    OUT | ((slot & 7) << OUT_SHIFT)
}
/// Bind the out value to the name at `name` with module `module` (argument slots).
pub const fn name(name: u64, module: u64) -> u64 {
    NAME | ((name & 7) << NAME_SHIFT) | ((module & 7) << MODULE_SHIFT)
}
/// Read the kernel parameters whose array is argument `params` of a launch of the function at
/// argument `handle` (argument slots).
pub const fn params(params: u64, handle: u64) -> u64 {
    PARAMS | ((params & 15) << PARAMS_SHIFT) | ((handle & 7) << HANDLE_SHIFT)
}
/// Record the path string at argument `name` at entry.
pub const fn path(name: u64) -> u64 {
    PATH | ((name & 7) << NAME_SHIFT)
}
pub const fn tally_slot(slot: usize) -> u64 {
    ((slot as u64) & 7) << TALLY_SLOT_SHIFT
}
pub const fn tally_slot_of(c: u64) -> usize {
    ((c >> TALLY_SLOT_SHIFT) & 7) as usize
}
pub const fn params_arg(c: u64) -> usize {
    ((c >> PARAMS_SHIFT) & 15) as usize
}
pub const fn handle_arg(c: u64) -> usize {
    ((c >> HANDLE_SHIFT) & 7) as usize
}
pub const fn out_arg(c: u64) -> usize {
    ((c >> OUT_SHIFT) & 7) as usize
}
pub const fn name_arg(c: u64) -> usize {
    ((c >> NAME_SHIFT) & 7) as usize
}
pub const fn module_arg(c: u64) -> usize {
    ((c >> MODULE_SHIFT) & 7) as usize
}

/// The library id must fit in 16 bits (tracer numbers its library copies from 1).
pub const fn make(lib: u32, func: u16, flags: u64) -> u64 {
    ((lib as u64 & 0xffff) << 48) | (flags & 0xffff_ffff_0000) | func as u64
}
pub const fn func(c: u64) -> u16 {
    c as u16
}
pub const fn lib(c: u64) -> u32 {
    (c >> 48) as u32
}
