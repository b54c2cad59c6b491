//! The records of what naming learnt of kernels: [`Kernel`] (a handle bound to its name, and its
//! [`Source`]) and [`GraphExec`] (a CUDA graph executable's kernels read from the driver).

use serde::{Deserialize, Serialize};

/// Kernel records one process can make a recording hold, and a reader keep.
///
/// The recorder binds no handle past it (counted as `kernel_handles_over_limit`, the launches recorded
/// without a kernel id), and a reader keeps none past it of a file that has more (counted, their launches
/// shown together).
pub(crate) const MAX_KERNELS_PER_PROCESS: usize = 1 << 18;
/// Of those, kernels without a name (`source` unnamed).
pub const MAX_UNNAMED_PER_PROCESS: usize = 1 << 14;

/// Where a kernel's name came from, in order of trust.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// `__hipRegisterFunction` / `__cudaRegisterFunction` seen live.
    Register,
    /// A module function lookup (`hipModuleGetFunction`, `cuModuleGetFunction`).
    Module,
    /// A CUDA library kernel (`cuLibraryGetKernel`), or the function it has in a context
    /// (`cuKernelGetFunction`).
    Library,
    /// An HSA kernel object named at code-object load (symbol lookup + `KERNEL_OBJECT`).
    Hsa,
    /// The ELF symbol table of the file that maps the handle (a late attach to an unstripped program).
    Elf,
    /// The registration call for the handle, decoded in the code of the file that maps it (a late attach
    /// to a stripped library).
    RegisterCall,
    /// A CUDA driver function (`CUfunction`) named after the `cudaLaunchKernel` whose call made its
    /// launch on the same thread: the runtime's host stub is named (ELF symbol, registration call) and
    /// the driver launch it triggers carries that function (a late attach).
    RuntimeLaunch,
    /// The CUDA driver's own function object (`CUfunction`): the pointer to the function's name it keeps
    /// at byte 8 (read on an H100 with driver API 13.0, `bench/gpu/cufunc_layout.cu`), used in a process
    /// only once functions named another way there agreed with it (a late attach).
    DriverFunction,
    /// A kernel node of a CUDA graph executable made before the attach: the driver's function object it
    /// points to (read through the executable's node list, `names::graph_exec`), named as `DriverFunction`
    /// names (a late attach to a graph loop).
    GraphExec,
    /// `ROCr`'s list of loaded code objects (`_amdgpu_r_debug`), read from the process: the `NAME.kd`
    /// symbol at the dispatch's `kernel_object` (a late attach to an HSA runtime).
    Loader,
    /// A Vulkan compute pipeline under the name its runtime gave it as it made it: ggml-vulkan's own
    /// `pipeline->name` (`matmul_q4_k_f32_aligned_l`, `flash_attn_f32_f16_aligned`), read at
    /// `ggml_vk_create_pipeline_func` and bound to the shader module its thread made next (the recording's
    /// `probes::ggml_vulkan`); the module's file is found as for `Shader`, when it can be.
    Pipeline,
    /// A Vulkan compute pipeline named after the shader its module was made from: the SPIR-V array of a
    /// ggml file the process maps (`libggml-vulkan.so`'s `NAME_data`; in a copy without symbols, the
    /// pipeline names its code creates the array under, several joined by `|`) whose last bytes and size
    /// the module's code matches (the recording's `names::spirv` and `names::pipelines`).
    Shader,
    /// A Vulkan compute pipeline whose module is in no ggml file, named by what its SPIR-V declares: its
    /// entry points and a short hash of the module (`main@1c2f9a07`), so its dispatches group by shader.
    Spirv,
    /// No name anywhere: the raw handle is kept.
    #[default]
    Unnamed,
    /// A source this build does not know (a trace from a later build): the name is kept as written.
    #[serde(other)]
    Unknown,
}

impl Source {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Register => "register",
            Self::Module => "module",
            Self::Library => "library",
            Self::Hsa => "hsa",
            Self::Elf => "elf",
            Self::RegisterCall => "register-call",
            Self::RuntimeLaunch => "runtime-launch",
            Self::DriverFunction => "driver-function",
            Self::GraphExec => "graph-exec",
            Self::Pipeline => "pipeline",
            Self::Loader => "loader",
            Self::Shader => "shader",
            Self::Spirv => "spirv",
            Self::Unnamed => "unnamed",
            Self::Unknown => "unknown",
        }
    }
}

/// A kernel named in a process: a handle (host function, `hipFunction_t`) bound to its name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kernel {
    pub id: u32,
    pub pid: u32,
    pub handle: u64,
    pub module: u64,
    /// The mangled name as the runtime saw it ("" when unnamed).
    pub name: String,
    pub demangled: String,
    pub source: Source,
    /// True when the name was longer than the probe keeps and was cut.
    pub truncated: bool,
    pub ts: u64,
    /// The mapped file whose `.hip_fatbin` holds the kernel (a registered host stub lies in it), as the
    /// process saw its path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_file: Option<String>,
    /// The offload bundles of that file ("0042", numbered as `tracer inspect` numbers them) whose code
    /// objects define the kernel: one, or several when a header's static kernel is built into several.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bundles: Vec<String>,
    /// For an unnamed kernel: the file whose code made its first launch (the return address at the
    /// launch probe), as the process saw its path; what stays unnamed is counted by this library.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
}

/// A CUDA graph executable read from the driver's objects in the process's memory.
///
/// Read (`names::graph_exec`) at the first replay of one made before tracer saw it (its kernels, which
/// its replays run from then on), and at the first replay of a few made from graphs tracer saw captured
/// (`check`: the layout checked against what the capture launched).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphExec {
    pub ts: u64,
    pub pid: u32,
    /// The `CUgraphExec`.
    pub exec: u64,
    /// Read to check the layout against a graph tracer saw captured (its kernels are the capture's).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub check: bool,
    pub outcome: ExecOutcome,
    /// Its nodes, of every type, where read.
    pub nodes: u32,
    /// The kernel ids of its kernel nodes, in the driver's order (`outcome` named; a function without a
    /// name has an unnamed kernel's id).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernels: Vec<u32>,
    /// For a check: whether every kernel its capture launched is among the read nodes' names as many
    /// times, and every other kernel node read has a name from the driver (nodes the capture did not
    /// launch, such as a device-to-device copy the driver runs as its own kernel, may be added).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agrees: Option<bool>,
    /// The CUDA driver's version, as the file name of the `libcuda.so` the process maps gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// Which of the driver's structures were read (absent: none, the read refused or not reached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<ExecRoute>,
}

/// Where a graph executable's nodes were read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExecRoute {
    /// The node list of the graph it was made from (`nodes`: every node of it, of every type).
    Graph,
    /// Its own copies of the nodes, once that graph is destroyed (`nodes`: the records it lists; its
    /// kernel node copies alone are kept).
    Copies,
    /// A value this build does not know (a trace from a later build).
    #[serde(other)]
    Unknown,
}

impl ExecRoute {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Graph => "graph",
            Self::Copies => "copies",
            Self::Unknown => "unknown",
        }
    }
}

/// What reading a graph executable gave.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExecOutcome {
    /// Its nodes were read (kernel nodes named where their function object holds a name).
    Named,
    /// Its node count reads 0: the graph it was made from was destroyed (`PyTorch`'s default), so the
    /// layout reaches no node.
    SourceGone,
    /// A read failed or a word was out of bounds: the layout does not hold for the object.
    Layout,
    /// The process had ended (its memory gone) before tracer read the executable.
    ProcessGone,
    /// Not read: in this process the checks against captured graphs disagreed, or none were made and the
    /// driver is not one the layout was measured on.
    #[default]
    Refused,
    /// A value this build does not know (a trace from a later build).
    #[serde(other)]
    Unknown,
}

impl ExecOutcome {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Named => "named",
            Self::SourceGone => "source-gone",
            Self::Layout => "layout",
            Self::ProcessGone => "process-gone",
            Self::Refused => "refused",
            Self::Unknown => "unknown",
        }
    }
}
