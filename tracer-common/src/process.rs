//! Records of processes: fork, exec and exit, and a traced process opening a runtime library.

use crate::RecordHeader;

crate::wire::wire_enum! {
    /// Process events observed through the scheduler tracepoints.
    pub enum ProcEvent {
        /// A traced process created a new process (not a thread); the child joined the filter.
        Fork = 1,
        /// A traced process called exec.
        Exec = 2,
        /// A traced process ended (its last thread exited).
        Exit = 3,
        /// A probed library's last initializer ran in a traced process: its probes were in place before any
        /// other library could call it there (the header's `lib` names the runtime copy, or, with
        /// [`COUNTED_LIBRARY`], the library whose calls are counted).
        Init = 4,
    }
}

/// In an [`ProcEvent::Init`]'s library id: a library whose calls are counted (rocBLAS, hipBLAS, ggml's
/// backends), numbered apart from the runtime copies.
pub const COUNTED_LIBRARY: u32 = 0x8000;

#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcRecord {
    pub header: RecordHeader,
    /// Fork: the new process's pid. Exec, exit: the process's pid.
    pub pid: u32,
    /// Fork: the parent's pid. Otherwise 0.
    pub parent: u32,
    /// `comm` of the current task at the event.
    pub comm: [u8; 16],
}

/// Longest path an [`OpenRecord`] keeps.
pub const OPEN_PATH_MAX: usize = 256;

/// File-name prefixes of the libraries whose opening by a traced process is reported ([`OpenRecord`]).
///
/// They are the libraries tracer probes (the Vulkan loader among them), and the `OpenCL` loader (a GPU API
/// tracer does not probe: a process that loads it is said to run GPU work tracer does not count). The kernel compares a path's last
/// component with them.
pub const RUNTIME_PREFIXES: [&[u8]; 8] = [
    b"libamdhip64.so",
    b"libhsa-runtime64.so",
    b"libcuda.so",
    b"libcudart.so",
    b"libllama.so",
    b"libvulkan.so",
    b"libggml-base.so",
    b"libOpenCL.so",
];

/// File-name suffixes of the AMD code-object files whose opening is reported too ([`OpenRecord`]).
///
/// rocBLAS's Tensile reads each into memory and loads it from there, so its open is what ties the image to its
/// file.
pub const CODE_OBJECT_SUFFIXES: [&[u8]; 2] = [b".co", b".hsaco"];

/// Whether a path names an AMD code-object file (it ends with one of [`CODE_OBJECT_SUFFIXES`]).
pub fn is_code_object(path: &[u8]) -> bool {
    CODE_OBJECT_SUFFIXES.iter().any(|s| path.ends_with(s))
}

/// A traced process opening a GPU runtime's file or an AMD code-object file (`openat` at entry).
///
/// A runtime copy it is about to load, to probe before its code runs (a private copy tracer could not
/// foresee); or a code-object file ([`CODE_OBJECT_SUFFIXES`]) it is about to read.
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenRecord {
    pub header: RecordHeader,
    /// Bytes of `path` in use; [`NAME_TRUNCATED`](crate::NAME_TRUNCATED) in `flags` when the path was longer.
    pub len: u32,
    pub flags: u32,
    pub path: [u8; OPEN_PATH_MAX],
}
