//! Which eBPF programs the runtime probes run: the real ones, or the empty ones the benchmarks measure the
//! traps alone with, each on the lean or the every-call set of functions.

use tracer_common::{ApiFunc, api::ProbeShape};

/// The eBPF object built by build.rs.
pub(crate) static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tracer"));

/// The program at a runtime copy's initializer ([`ProcEvent::Init`](tracer_common::ProcEvent::Init)).
pub(crate) const INIT_WITNESS: &str = "library_init";

/// The batch program, its token loops run by `bpf_loop`.
const BATCH: &str = "llama_batch";

/// The batch program with bounded loops, the verifier walking each token.
const BATCH_BOUNDED: &str = "llama_batch_bounded";

/// The program loaded in `prog`'s place where the kernel refuses `prog`: the batch program's loops are run
/// by `bpf_loop` (Linux 5.17 on), and before that kernel the same record is written by bounded loops.
pub(super) fn fallback(prog: &str) -> Option<&'static str> {
    (prog == BATCH).then_some(BATCH_BOUNDED)
}

/// Which programs the runtime probes run, and on which functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProbeMode {
    /// The default: the real programs on the cheapest set of functions that still cuts steps and passes
    /// exactly. The calls tracer would only count in the kernel (synchronizations, async copies to the
    /// device: most of a decode loop's calls) are left unprobed and cost no trap; ggml's scheduler call
    /// begins each pass, a copy toward the host (or a model's batch) each step.
    Lean,
    /// The real programs on every function (`record --all-calls`): synchronizations and async copies to
    /// the device counted too, at a trap each.
    AllCalls,
    /// [`ProbeMode::Lean`] with the batch program that runs where the kernel has no `bpf_loop` (before Linux
    /// 5.17; [`fallback`]), chosen on any kernel: the tests compare the two programs' records.
    BoundedLoops,
    /// Empty programs at [`ProbeMode::Lean`]'s attach points: what its traps alone cost (benchmarks).
    Empty,
    /// Empty programs at [`ProbeMode::AllCalls`]' attach points.
    EmptyAllCalls,
}

impl ProbeMode {
    /// The program counting calls into other GPU libraries' entry points (loaded for multi-point links).
    pub(crate) const fn library_program(self) -> &'static str {
        self.programs().library
    }

    /// Whether the calls tallied in the kernel (synchronizations, async copies to the device) are probed.
    pub(crate) const fn probes_tallied(self) -> bool {
        matches!(self, Self::AllCalls | Self::EmptyAllCalls)
    }

    /// Programs for (entry, return, registration, doorbell, one-trap calls, library entry points).
    pub(super) const fn programs(self) -> Programs {
        match self {
            Self::BoundedLoops => Programs { batch: BATCH_BOUNDED, ..Self::Lean.programs() },
            Self::Lean | Self::AllCalls => Programs {
                entry: "call_entry",
                ret: "call_return",
                register: "register_function",
                doorbell: "doorbell",
                one_trap: "one_trap_entry",
                batch: BATCH,
                pipeline_name: "pipeline_name",
                input: "graph_input",
                library: "library_entry",
            },
            Self::Empty | Self::EmptyAllCalls => Programs {
                entry: "empty_entry",
                ret: "empty_return",
                register: "empty_entry",
                doorbell: "empty_entry",
                one_trap: "empty_one_trap",
                batch: "empty_entry",
                pipeline_name: "empty_entry",
                input: "empty_entry",
                library: "empty_entry",
            },
        }
    }
}

impl Programs {
    /// The program a function runs at its entry, and at its return where it has one.
    pub(super) const fn of(&self, func: ApiFunc, mode: ProbeMode) -> (&'static str, Option<&'static str>) {
        match func.shape() {
            ProbeShape::Call if !mode.probes_tallied() && func.entry_only_by_default() => (self.one_trap, None),
            ProbeShape::Call => (self.entry, Some(self.ret)),
            ProbeShape::RegisterName => (self.register, None),
            ProbeShape::Doorbell => (self.doorbell, None),
            ProbeShape::OneTrap => (self.one_trap, None),
            ProbeShape::Batch => (self.batch, None),
            ProbeShape::PipelineName => (self.pipeline_name, None),
            ProbeShape::Input => (self.input, None),
        }
    }
}

/// The program names one probe mode attaches, by probe shape.
pub(super) struct Programs {
    pub(super) entry: &'static str,
    pub(super) ret: &'static str,
    pub(super) register: &'static str,
    pub(super) doorbell: &'static str,
    pub(super) one_trap: &'static str,
    /// llama.cpp's `llama_decode`: a step's batch.
    pub(super) batch: &'static str,
    /// ggml-vulkan's pipeline maker: the name of the pipeline being made.
    pub(super) pipeline_name: &'static str,
    /// ggml's tensor set: a pass's inputs copied up.
    pub(super) input: &'static str,
    /// The program of the multi-point links on other GPU libraries' entry points.
    pub(super) library: &'static str,
}
