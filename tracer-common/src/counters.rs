//! What the kernel side counts instead of writing: losses and errors per CPU, and calls tallied per
//! thread.

use crate::RecordKind;

/// Declares [`Counter`] once: each counter's slot and the name the footer gives it; `ALL`, `name` and
/// [`COUNTERS`] come from the rows.
macro_rules! counters {
    ($($(#[$doc:meta])* $counter:ident = $slot:literal, $name:literal;)*) => {
        /// Losses and errors the eBPF side counts per CPU, one slot each.
        ///
        /// A `PerCpuArray<u64>` indexed by these, read by user space at the end of a recording and written
        /// into the trace footer's `counters` under [`Counter::name`]. Records the ring could not take are
        /// counted apart, per [`RecordKind`] ([`DROP_SLOTS`]). Nothing is dropped without a count.
        #[repr(u32)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Counter {
            $($(#[$doc])* $counter = $slot,)*
        }

        impl Counter {
            /// Every counter, in slot order.
            pub const ALL: &[Self] = &[$(Self::$counter),*];

            /// The counter's name in the trace footer's `counters` (summed over the CPUs).
            pub const fn name(self) -> &'static str {
                match self {
                    $(Self::$counter => $name,)*
                }
            }
        }
    };
}

counters! {
    /// A call's entry could not be stashed (stash map full): that call produces no record.
    StashFull = 0, "stash_full";
    /// A return probe fired without a stashed entry (the tracer attached while the call was running).
    ReturnWithoutEntry = 1, "return_without_entry";
    /// A process could not be added to the PID filter (map full): its calls are not recorded.
    FilterFull = 2, "filter_full";
    /// Packets a doorbell store released that were no longer in the ring when it was read: more than a ring
    /// (or [`MAX_PACKETS_PER_DOORBELL`](crate::MAX_PACKETS_PER_DOORBELL)) between the last index seen and the
    /// stored one, the oldest overwritten. Their dispatches are missing from the queue's view.
    PacketsCut = 3, "packets_cut";
    /// Packets whose ring slot could not be read.
    PacketFault = 4, "packet_fault";
    /// A call to tally in the kernel found no room for its thread in the tally map: it was neither tallied
    /// nor written.
    TallyLost = 5, "tally_lost";
    /// A call into a library's entry point found no room for its (process, entry point) in the entry-call
    /// map: it was not counted.
    EntryCallLost = 6, "entry_calls_lost";
    /// A process without batches reached a pass and found no room for its step tally: its library calls land
    /// in no phase.
    StepTallyFull = 7, "step_tally_full";
    /// An `hsa_executable_symbol_get_info` call for an attribute other than `KERNEL_OBJECT` (the only one
    /// that names a dispatch's kernel): counted here, every process together, never written (HIP asks each
    /// symbol of each code object it loads for its variable segment: 99 % of a llama-bench start-up's calls).
    SymbolInfoOther = 8, "symbol_info_other_attributes";
    /// A `ggml_backend_tensor_set` call on a tensor that is not a pass's positions or output rows copied up
    /// (the weights as they load, the other inputs), or whose name could not be read: a trap, counted here,
    /// every process together, never written (about seven a pass beside the two read).
    TensorSetOther = 9, "tensor_set_other_tensors";
    /// A traced thread's launch found no room for its run history (map full): its launches are written
    /// one by one, none counted as a repeat.
    RunThreadsFull = 10, "run_threads_full";
    /// Launches of runs whose record the ring could not take (each such record is also counted under
    /// `repeat` in the drops).
    RunLaunchesLost = 11, "run_launches_lost";
    /// A doorbell store whose index lies more than two rings past the last packet read (or the packet
    /// processor's read index): no producer can have written so many packets unread, so the index is forged
    /// or garbage. The last ring of packets before it is still read; nothing is added to `packets_cut` (a
    /// forged swing of 2^63 would wrap it).
    DoorbellImplausible = 12, "doorbell_stores_implausible";
}

/// Number of [`Counter`] slots.
pub const COUNTERS: u32 = Counter::ALL.len() as u32;

/// Number of drop slots: one per [`RecordKind`] number (0: none), each counting the records of that kind
/// the ring could not take.
pub const DROP_SLOTS: u32 = RecordKind::LIMIT as u32;

/// Functions that can be tallied in the kernel: the rows of the API table with a tally slot
/// ([`crate::api::ApiFunc::tally_slot`]).
pub const TALLY_SLOTS: usize = 8;

/// One thread's calls counted in the kernel instead of written one by one, and its sync gate.
///
/// The value of the eBPF map keyed by `pid_tgid`: one entry serves both, so a tallied call costs one
/// lookup.
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadTally {
    /// 1 when the thread copied toward the host since its last written synchronization.
    pub host_copied: u32,
    /// 1 once the thread has exited or its process has left the filter: the entry keeps its counts, but no
    /// longer vouches that the thread is traced (a recycled thread id checks the filter again).
    pub ended: u32,
    /// The ring's producer position just past the last copy toward the device this thread wrote: a copy
    /// that finds the ring there (nothing written since) is tallied.
    pub ring_at_copy: u64,
    /// Calls per tally slot.
    pub calls: [u64; TALLY_SLOTS],
    /// The sizes the calls passed (copies), summed, per tally slot.
    pub bytes: [u64; TALLY_SLOTS],
}

/// The key of the entry-call map: one process, one exported function of a GPU library.
///
/// The value is the number of calls, counted in the kernel. `point` is the attach cookie user space gave
/// the function's probe: an index into its table of (library, function).
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EntryKey {
    pub tgid: u32,
    pub point: u32,
}
