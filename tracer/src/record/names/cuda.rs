//! What CUDA naming knows of one process: the runtime launches waiting for their driver launch, the driver
//! functions read, the agreement of the driver's objects with names learned another way. The rules that use
//! it (a `cudaLaunchKernel` names the driver launch it makes next, a driver function or graph executable
//! named from the driver's own objects) are one process's naming: `of/cuda.rs`.

use std::collections::{HashMap, HashSet};

/// What CUDA naming knows of one process.
#[derive(Default)]
pub(super) struct CudaNames {
    /// Per thread: the name of the `cudaLaunchKernel` host stub whose driver launch comes next (None:
    /// the stub has no name either).
    pub(super) pending: HashMap<u32, Option<String>>,
    /// The name behind each runtime launch handle, looked up once.
    pub(super) runtime: HashMap<u64, Option<String>>,
    /// Functions named another way whose driver object gave the same name, and those whose object gave
    /// another or none ([`super::Of::driver_launch`]).
    pub(super) agreement: (u64, u64),
    /// Driver functions whose object was read for a name: once each.
    pub(super) tried: HashSet<u64>,
    /// Graph executables read to check the layout against a capture: (agreed, disagreed), per route
    /// (indexed by `route_index`, `of/cuda.rs`).
    pub(super) graph_checks: [(u64, u64); 2],
    /// The driver's version from the name of the `libcuda.so` file the process maps, looked up once.
    pub(super) driver: Driver,
}

/// The CUDA driver's version in one process, once looked up (None: its file name gives none).
#[derive(Default)]
pub(super) enum Driver {
    #[default]
    NotLooked,
    Looked(Option<String>),
}
