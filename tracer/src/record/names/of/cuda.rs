//! CUDA's naming rules: a `cudaLaunchKernel` names the driver launch it makes next on its thread, and a
//! driver function loaded before the attach is named from the driver's own function object once that
//! source has agreed with names learned another way in the same process. A graph executable made before
//! the attach is named from the driver's executable object ([`crate::record::names::graph_exec`]), checked
//! against the graphs tracer saw captured in the same process. What they keep of a process:
//! [`crate::record::names::cuda`].

use crate::trace::counted::Counted;
use std::collections::HashMap;

use crate::{
    record::names::{
        Of,
        budget::room_in,
        cuda::Driver,
        graph_exec::{self, Unread},
        memory::{ProcMem, read_c_string, read_u64},
    },
    trace::event::Launch,
    trace::{self, ExecOutcome, ExecRoute, GraphExec, Line, Source},
};

/// Driver versions the graph-executable layout was measured on (`bench/gpu/graphexec_layout.md`): in a
/// process mapping one of these, an executable is read before any capture could check the layout.
const MEASURED_DRIVERS: &[&str] = &["580.159.04"];

impl Of<'_> {
    /// A `cudaLaunchKernel`: its host stub's name goes to the driver launch its thread makes next.
    /// Returns whether the handle is new (its launches then need no parameters read: the driver launch
    /// it makes reads them).
    pub(crate) fn runtime_launch(&mut self, l: &Launch) -> bool {
        let (name, new) = if let Some(known) = self.proc.cuda.runtime.get(&l.handle) {
            (known.clone(), false)
        } else {
            let name = self.runtime_name(l.handle, l.ts);
            self.proc.cuda.runtime.insert(l.handle, name.clone());
            (name, true)
        };
        self.proc.cuda.pending.insert(l.tid, name);
        new
    }

    /// The name behind a `cudaLaunchKernel` handle: the host stub's name in the file that maps it (ELF
    /// symbol or registration call), else, for a handle in no file, the name CUDA 13's runtime keeps in
    /// the heap object it passes (word 0 is 2, word 1 points to the kernel's mangled name, as read on an
    /// H100 with `PyTorch`'s libcudart.so.13), taken only when the object has that shape and the name
    /// demangles as a C++ function; otherwise the launch stays unnamed.
    fn runtime_name(&mut self, handle: u64, ts: u64) -> Option<String> {
        if let Some((name, _)) = self.static_name(handle, ts) {
            return Some(name);
        }
        let name = ProcMem::open(self.pid).and_then(|mem| {
            (read_u64(&mem, handle)? == 2).then_some(())?;
            let name = read_c_string(&mem, read_u64(&mem, handle.checked_add(8)?)?)?;
            let mangled = name.starts_with("_Z") && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            (mangled && cpp_demangle::Symbol::new(name.as_bytes()).is_ok()).then_some(name)
        });
        self.names.count(if name.is_some() { Counted::RuntimeHandlesNamed } else { Counted::RuntimeHandlesUnnamed });
        name
    }

    /// Whether a runtime launch's name waits for the thread's next driver launch.
    pub(crate) fn runtime_name_waits(&self, tid: u32) -> bool {
        self.proc.cuda.pending.contains_key(&tid)
    }

    /// A driver launch: named from the runtime launch just before it on its thread, or from the driver's
    /// function object. Returns the kernel record to write when it names the function.
    pub(crate) fn driver_launch(&mut self, l: &Launch) -> Option<trace::Kernel> {
        self.learn_from_runtime(l).or_else(|| self.name_from_driver(l))
    }

    /// A driver launch of a function no name is bound to, made by the CUDA runtime's code right after
    /// a `cudaLaunchKernel` on the same thread: the function is that launch's kernel. The return address
    /// must lie in the runtime library, so a launch from elsewhere (cuBLAS's own) never takes the name.
    fn learn_from_runtime(&mut self, l: &Launch) -> Option<trace::Kernel> {
        let name = self.proc.cuda.pending.remove(&l.tid)??;
        if self.lookup(l.handle).is_some() {
            return None;
        }
        let from_runtime = self.file_of(l.caller, l.ts).is_some_and(|(file, _)| {
            file.rsplit('/').next().is_some_and(|n| n.starts_with(trace::runtimes::CUDA_RUNTIME))
        });
        if !from_runtime {
            return None;
        }
        // A function named another way: does the driver's object agree? The host stub's symbol spells some
        // kernels otherwise than the device code does (nvcc's `_ZL` stubs of static kernels, its `_INTERNAL_`
        // names of internal entities in template arguments): the same function and parameters in the
        // driver's object is the device's own spelling, the name the driver launches (and CUPTI shows).
        let driver = driver_name(self.pid, l.handle);
        let agrees = driver.as_deref() == Some(name.as_str());
        let respelled = driver.filter(|d| !agrees && same_function(d, &name));
        let a = &mut self.proc.cuda.agreement;
        if agrees || respelled.is_some() {
            a.0 += 1
        } else {
            a.1 += 1
        }
        self.names.count(match (agrees, &respelled) {
            (true, _) => Counted::DriverNamesAgreed,
            (false, Some(_)) => Counted::DriverNamesDeviceSpelling,
            (false, None) => Counted::DriverNamesDisagreed,
        });
        self.bind(l.handle, 0, respelled.as_deref().unwrap_or(&name), Source::RuntimeLaunch, false, l.ts)
    }

    /// A driver launch of a function with no name (loaded before the attach, by cuBLAS, cuDNN or a
    /// module): named from the driver's function object, once that source has agreed with the names
    /// tracer learned another way in this process (at least one, and ten times as many agreements as
    /// disagreements). Before that, or when the object does not hold a name, it stays unnamed.
    fn name_from_driver(&mut self, l: &Launch) -> Option<trace::Kernel> {
        // The process's agreement first: zero for a process traced from its start, so those launches
        // skip the kernel table.
        let (agreed, disagreed) = self.proc.cuda.agreement;
        if agreed == 0
            || agreed < 10 * disagreed
            || !self.unnamed(l.handle)
            || !room_in(&self.proc.cuda.tried, &l.handle)
            || !self.proc.cuda.tried.insert(l.handle)
        {
            return None;
        }
        if let Some(name) = driver_name(self.pid, l.handle) {
            self.names.count(Counted::DriverFunctionsNamed);
            self.bind(l.handle, 0, &name, Source::DriverFunction, false, l.ts)
        } else {
            self.names.count(Counted::DriverFunctionsUnnamed);
            None
        }
    }
}

impl Of<'_> {
    /// Checks of the graph-executable layout in this process: one more each time a capture's executable
    /// agrees (a refused read may be tried again then).
    pub(crate) const fn graph_agreements(&self) -> u64 {
        self.proc.cuda.graph_checks[0].0 + self.proc.cuda.graph_checks[1].0
    }

    /// Reads graph executable `exec` from the driver's objects and returns the record to write (after the
    /// kernel records of functions it named, pushed to `out`).
    ///
    /// `captured`: the functions the launches of the capture it was made from passed, when tracer saw that
    /// capture: the read is then a check of the layout (the capture's names must all be among the nodes',
    /// as many times), counted for the process. Otherwise the executable was made before tracer saw it: it
    /// is read when the process's checks agreed (at least one, and ten times as many agreements as
    /// disagreements), or when none was made and the process maps a driver the layout was measured on;
    /// each kernel node is named as its function is known, else from the driver's function object, else
    /// unnamed.
    pub(crate) fn graph_exec(
        &mut self,
        exec: u64,
        ts: u64,
        captured: Option<&[u64]>,
        out: &mut Vec<Line>,
    ) -> GraphExec {
        let driver = self.driver_version();
        let mut rec = GraphExec { ts, pid: self.pid, exec, check: captured.is_some(), driver, ..GraphExec::default() };
        let allowed = |of: &Self, route| captured.is_some() || of.graph_reads_allowed(route, rec.driver.as_deref());
        let (graph_allowed, copies_allowed) = (allowed(self, ExecRoute::Graph), allowed(self, ExecRoute::Copies));
        if !graph_allowed && !copies_allowed {
            self.names.count(Counted::GraphExecsRefused);
            return rec; // outcome refused
        }
        // The source graph's node list first; once that graph is destroyed (its count reads 0), the
        // executable's own node copies. None: read through a route this process does not trust.
        let read = ProcMem::open(self.pid).ok_or(Unread::Layout).and_then(|mem| match graph_exec::read(&mem, exec) {
            Err(Unread::Empty) if copies_allowed => {
                rec.route = Some(ExecRoute::Copies);
                let c = graph_exec::read_copies(&mem, exec)?;
                Ok(Some((c.entries, self.first_copy(c.first, c.kernels))))
            }
            Ok(_) if !graph_allowed => Ok(None),
            read => {
                rec.route = Some(ExecRoute::Graph);
                read.map(|nodes| Some((u32::try_from(nodes.len()).unwrap_or(u32::MAX), nodes)))
            }
        });
        let (entries, nodes) = match read {
            Ok(Some(read)) => read,
            Ok(None) => {
                self.names.count(Counted::GraphExecsRefused);
                return rec;
            }
            Err(why) => {
                // A read that failed because the process's memory is gone says nothing of the layout.
                let gone = why == Unread::Layout && !has_memory(self.pid);
                rec.outcome = match why {
                    Unread::Empty => ExecOutcome::SourceGone,
                    Unread::Layout if gone => ExecOutcome::ProcessGone,
                    Unread::Layout => ExecOutcome::Layout,
                };
                self.names.count(match rec.outcome {
                    // A check's graph may have changed or gone since (a loop capturing every step).
                    _ if rec.check => Counted::GraphChecksUnread,
                    ExecOutcome::SourceGone => Counted::GraphExecsSourceGone,
                    ExecOutcome::ProcessGone => Counted::GraphExecsProcessGone,
                    _ => Counted::GraphExecsLayout,
                });
                return rec;
            }
        };
        rec.outcome = ExecOutcome::Named;
        rec.nodes = entries;
        let functions: Vec<u64> = nodes.iter().filter(|n| n.is_kernel()).map(|n| n.function).collect();
        let route = rec.route.unwrap_or(ExecRoute::Graph);
        // Each kernel node named as its function is known, else from the driver's function object.
        for &f in &functions {
            // A function bound once (named, or unnamed) is looked up for its next nodes.
            if let Some(id) = self.lookup(f) {
                rec.kernels.push(id);
                continue;
            }
            let (id, new) = if let Some(name) = driver_name(self.pid, f) {
                let k = self.bind(f, 0, &name, Source::GraphExec, false, ts);
                (k.as_ref().map(|k| k.id), k)
            } else {
                self.names.count(Counted::GraphExecFunctionsUnnamed);
                self.resolve(f, ts)
            };
            // A node past the process's limits has no kernel id (counted when it was refused).
            rec.kernels.extend(id);
            out.extend(new.map(Line::Kernel));
        }
        if let Some(captured) = captured {
            rec.agrees = self.check_capture(captured, &functions, route);
        } else {
            self.names.count(if route == ExecRoute::Copies {
                Counted::GraphExecsNamedFromCopies
            } else {
                Counted::GraphExecsNamed
            });
        }
        rec
    }

    /// The kernel node copies of an executable, the first record's among them when the driver names its
    /// function (else it is no node of the graph: passed over, counted `graph_exec_copies_first_unnamed`).
    fn first_copy(&mut self, first: Option<graph_exec::Node>, rest: Vec<graph_exec::Node>) -> Vec<graph_exec::Node> {
        let Some(first) = first else { return rest };
        let named = self.name_of(first.function).is_some_and(|n| !n.is_empty())
            || driver_name(self.pid, first.function).is_some();
        if !named {
            self.names.count(Counted::GraphExecCopiesFirstUnnamed);
            return rest;
        }
        std::iter::once(first).chain(rest).collect()
    }

    /// Whether an executable tracer did not see made may be read in this process (see [`Of::graph_exec`]).
    fn graph_reads_allowed(&self, route: ExecRoute, driver: Option<&str>) -> bool {
        match self.proc.cuda.graph_checks[route_index(route)] {
            (0, 0) => driver.is_some_and(|d| MEASURED_DRIVERS.contains(&d)),
            (agreed, disagreed) => agreed > 0 && agreed >= 10 * disagreed,
        }
    }

    /// A captured graph's executable as read: does every name the capture launched appear among the
    /// nodes' names as many times, and has every other kernel node a name from the driver (a device-to-
    /// device copy the driver runs as its own kernel, a kernel launched on another stream joined into the
    /// capture, which tracer's capture does not list)? A kernel node without a name is no kernel the
    /// layout should have reached. None (counted apart) when a captured launch had no name to compare.
    fn check_capture(&mut self, captured: &[u64], functions: &[u64], route: ExecRoute) -> Option<bool> {
        if captured.is_empty() {
            // A capture of no kernel (copies only): nothing to compare, no agreement.
            self.names.count(Counted::GraphChecksWithoutKernels);
            return None;
        }
        let mut want: HashMap<String, i64> = HashMap::new();
        for &h in captured {
            let Some(name) = self.name_of(h).filter(|n| !n.is_empty()) else {
                self.names.count(Counted::GraphChecksUnnamed);
                return None;
            };
            *want.entry(name.to_owned()).or_default() += 1;
        }
        let mut read: HashMap<u64, Option<String>> = HashMap::new();
        let mut unnamed = 0u64;
        for &f in functions {
            let name = match self.name_of(f).filter(|n| !n.is_empty()) {
                Some(n) => Some(n.to_owned()),
                None => read.entry(f).or_insert_with(|| driver_name(self.pid, f)).clone(),
            };
            match name {
                Some(n) => {
                    if let Some(left) = want.get_mut(&n) {
                        *left -= 1;
                    }
                }
                None => unnamed += 1,
            }
        }
        let agrees = want.values().all(|&n| n == 0) && unnamed == 0;
        let c = &mut self.proc.cuda.graph_checks[route_index(route)];
        if agrees {
            c.0 += 1;
        } else {
            c.1 += 1;
        }
        self.names.count(if agrees { Counted::GraphChecksAgreed } else { Counted::GraphChecksDisagreed });
        Some(agrees)
    }

    /// The CUDA driver's version: the suffix of the `libcuda.so.VERSION` file the process maps (the
    /// driver's own file; `libcuda.so.1` is a link to it), looked up once.
    fn driver_version(&mut self) -> Option<String> {
        if let Driver::Looked(known) = &self.proc.cuda.driver {
            return known.clone();
        }
        let mut version = self.mappings().iter().find_map(|m| driver_version_of(&m.path));
        if version.is_none() {
            // Maps read before the driver was loaded: read them again, once.
            self.snapshot();
            version = self.mappings().iter().find_map(|m| driver_version_of(&m.path));
        }
        self.proc.cuda.driver = Driver::Looked(version.clone());
        version
    }
}

/// Whether a process still has its memory (an ended one, a zombie until reaped, has none mapped).
fn has_memory(pid: u32) -> bool {
    use std::io::Read as _;
    let mut first = [0u8; 1];
    std::fs::File::open(format!("/proc/{pid}/maps")).and_then(|mut f| f.read(&mut first)).is_ok_and(|n| n == 1)
}

/// The version in a driver file's name (`/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04`): digits and
/// dots after `libcuda.so.`, at least two parts (`libcuda.so.1` is the link name, no version).
fn driver_version_of(path: &str) -> Option<String> {
    let version = path.rsplit('/').next()?.strip_prefix("libcuda.so.")?;
    let parts: Vec<&str> = version.split('.').collect();
    (parts.len() >= 2 && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())))
        .then(|| version.to_owned())
}

/// The name the CUDA driver keeps in its function object: a pointer to it at byte 8 of the
/// `CUfunction` (read on an H100, driver API 13.0, for functions of the runtime and of modules loaded
/// through the driver: `bench/gpu/cufunc_layout.cu`). Taken only when it reads as a symbol name (a
/// C identifier; a C++ one must demangle).
fn driver_name(pid: u32, handle: u64) -> Option<String> {
    let mem = ProcMem::open(pid)?;
    let name = read_c_string(&mem, read_u64(&mem, handle.checked_add(8)?)?)?;
    let identifier = name.len() > 1
        && name.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b == b'.');
    let cxx_ok = !name.starts_with("_Z") || cpp_demangle::Symbol::new(name.as_bytes()).is_ok();
    (identifier && cxx_ok).then_some(name)
}

/// Whether two mangled names are one C++ function spelled two ways: the same function name and parameter
/// types once demangled, both C++ names.
fn same_function(a: &str, b: &str) -> bool {
    use crate::os::demangle::{base_name, demangle, parameter_types};
    if !a.starts_with("_Z") || !b.starts_with("_Z") {
        return false;
    }
    let (a, b) = (demangle(a), demangle(b));
    let name = base_name(&a);
    !name.is_empty() && !name.starts_with("_Z") && name == base_name(&b) && parameter_types(&a) == parameter_types(&b)
}

/// A route's slot in the per-route check counts.
const fn route_index(route: ExecRoute) -> usize {
    match route {
        ExecRoute::Copies => 1,
        ExecRoute::Graph | ExecRoute::Unknown => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::{driver_version_of, same_function};

    /// As nvcc 13 spells them: the host stub's symbol (`_ZL`, internal entities by their own name) and the
    /// device's name of the same kernel (read from llama.cpp's libggml-cuda.so on an H200).
    #[test]
    fn host_and_device_spellings_of_one_kernel() {
        assert!(same_function("_Z13quantize_q8_1PKfPvlllllj5uint3", "_ZL13quantize_q8_1PKfPvlllllj5uint3"));
        assert!(same_function(
            "_Z21unary_gated_op_kernelIXadL_ZN38_INTERNAL_c3bf1c9a_8_unary_cu_eb6d53667op_siluEfEEfEvPKT0_S3_PS1_llll",
            "_Z21unary_gated_op_kernelIXadL_ZL7op_silufEEfEvPKT0_S2_PS0_llll"
        ));
        // Another function, other parameters, or not C++: not one kernel.
        assert!(!same_function(
            "_Z25flash_attn_mask_to_KV_maxILi16EEvPK7__half2Piill",
            "_ZL13quantize_q8_1PKfPvlllllj5uint3"
        ));
        assert!(!same_function("_Z13quantize_q8_1PKfPvlllllj5uint3", "_Z13quantize_q8_1PKfPvllllj5uint3"));
        assert!(!same_function("quantize_q8_1", "_Z13quantize_q8_1PKfPvlllllj5uint3"));
    }

    #[test]
    fn driver_version_from_its_file_name() {
        assert_eq!(driver_version_of("/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04").as_deref(), Some("580.159.04"));
        for none in ["/usr/lib/libcuda.so.1", "/usr/lib/libcuda.so", "/x/libcuda.so.580.x", "/x/libcudart.so.13.0"] {
            assert_eq!(driver_version_of(none), None, "{none}");
        }
    }
}
