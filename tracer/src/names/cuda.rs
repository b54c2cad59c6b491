//! CUDA's naming rules: a `cudaLaunchKernel` names the driver launch it makes next on its thread, and a
//! driver function loaded before the attach is named from the driver's own function object once that
//! source has agreed with names learned another way in the same process.

use std::collections::{HashMap, HashSet};

use super::{Of, Source, memory::ProcMem};
use crate::{event::Launch, trace};

/// What CUDA naming knows of one process.
#[derive(Default)]
pub(super) struct CudaNames {
    /// Per thread: the name of the `cudaLaunchKernel` host stub whose driver launch comes next (None:
    /// the stub has no name either).
    pending: HashMap<u32, Option<String>>,
    /// The name behind each runtime launch handle, looked up once.
    runtime: HashMap<u64, Option<String>>,
    /// Functions named another way whose driver object gave the same name, and those whose object gave
    /// another or none ([`Of::driver_launch`]).
    agreement: (u64, u64),
    /// Driver functions whose object was read for a name: once each.
    tried: HashSet<u64>,
}

impl Of<'_> {
    /// A `cudaLaunchKernel`: its host stub's name goes to the driver launch its thread makes next.
    /// Returns whether the handle is new (its launches then need no parameters read: the driver launch
    /// it makes reads them).
    pub fn runtime_launch(&mut self, l: &Launch) -> bool {
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
            use super::memory::{read_c_string, read_u64};
            (read_u64(&mem, handle)? == 2).then_some(())?;
            let name = read_c_string(&mem, read_u64(&mem, handle.checked_add(8)?)?)?;
            let mangled = name.starts_with("_Z") && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            (mangled && cpp_demangle::Symbol::new(name.as_bytes()).is_ok()).then_some(name)
        });
        self.names.count(if name.is_some() { "runtime_handles_named" } else { "runtime_handles_unnamed" });
        name
    }

    /// A driver launch: named from the runtime launch just before it on its thread, or from the driver's
    /// function object. Returns the kernel record to write when it names the function.
    pub fn driver_launch(&mut self, l: &Launch) -> Option<trace::Kernel> {
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
        let from_runtime = self
            .file_of(l.caller, l.ts)
            .is_some_and(|(file, _)| file.rsplit('/').next().is_some_and(|n| n.starts_with(crate::libs::CUDA_RUNTIME)));
        if !from_runtime {
            return None;
        }
        // A function named another way: does the driver's object agree?
        let agrees = driver_name(self.pid, l.handle).as_deref() == Some(name.as_str());
        let a = &mut self.proc.cuda.agreement;
        if agrees {
            a.0 += 1
        } else {
            a.1 += 1
        }
        self.names.count(if agrees { "driver_names_agreed" } else { "driver_names_disagreed" });
        Some(self.bind(l.handle, 0, &name, Source::RuntimeLaunch, false, l.ts))
    }

    /// A driver launch of a function with no name (loaded before the attach, by cuBLAS, cuDNN or a
    /// module): named from the driver's function object, once that source has agreed with the names
    /// tracer learned another way in this process (at least one, and ten times as many agreements as
    /// disagreements). Before that, or when the object does not hold a name, it stays unnamed.
    fn name_from_driver(&mut self, l: &Launch) -> Option<trace::Kernel> {
        // The process's agreement first: zero for a process traced from its start, so those launches
        // skip the kernel table.
        let (agreed, disagreed) = self.proc.cuda.agreement;
        if agreed == 0 || agreed < 10 * disagreed || !self.unnamed(l.handle) || !self.proc.cuda.tried.insert(l.handle) {
            return None;
        }
        if let Some(name) = driver_name(self.pid, l.handle) {
            self.names.count("driver_functions_named");
            Some(self.bind(l.handle, 0, &name, Source::DriverFunction, false, l.ts))
        } else {
            self.names.count("driver_functions_unnamed");
            None
        }
    }
}

/// The name the CUDA driver keeps in its function object: a pointer to it at byte 8 of the
/// `CUfunction` (read on an H100, driver API 13.0, for functions of the runtime and of modules loaded
/// through the driver: `bench/gpu/cufunc_layout.cu`). Taken only when it reads as a symbol name (a
/// C identifier; a C++ one must demangle).
fn driver_name(pid: u32, handle: u64) -> Option<String> {
    use super::memory::{read_c_string, read_u64};
    let mem = ProcMem::open(pid)?;
    let name = read_c_string(&mem, read_u64(&mem, handle.checked_add(8)?)?)?;
    let identifier = name.len() > 1
        && name.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b == b'.');
    let cxx_ok = !name.starts_with("_Z") || cpp_demangle::Symbol::new(name.as_bytes()).is_ok();
    (identifier && cxx_ok).then_some(name)
}
