//! `ROCr`'s list of loaded code objects read for one process, and the kernel objects it names
//! ([`crate::record::names::rocr`]: the list's layout and its URIs).

use crate::trace::counted::Counted;
use std::{collections::HashMap, sync::Arc};

use crate::{
    os::files::{Bounded, ELF_BUDGET, Root},
    record::names::{
        KernelSymbols, Of, ProcessNames,
        bundle::MAX_CODE_OBJECT,
        maps::Mapping,
        memory::{Memory as _, ProcMem},
        rocr::{R_DEBUG_SYMBOL, Uri, kernel_descriptors, parse_uri, walk},
    },
};

impl Of<'_> {
    /// The kernel a dispatch's `kernel_object` stands for, from `ROCr`'s list of loaded code objects in
    /// the process (a code object loaded before tracer attached): its name and the file it came from.
    pub(in crate::record::names) fn loaded_name(&mut self, object: u64) -> Option<(String, Option<String>)> {
        let hit =
            |p: &ProcessNames| p.loaded.get(&object).map(|(n, f)| (n.to_string(), f.as_deref().map(str::to_owned)));
        if let Some(found) = hit(self.proc) {
            return Some(found);
        }
        // Not among the objects read so far: the list may have grown since.
        self.read_loader_list();
        hit(self.proc)
    }

    /// Where `_amdgpu_r_debug` is in the process: in the libhsa-runtime64 it maps.
    fn r_debug_of(&mut self) -> Option<u64> {
        let runtimes: Vec<Mapping> = self
            .mappings()
            .iter()
            .filter(|m| m.path.rsplit('/').next().is_some_and(|n| n.starts_with(crate::trace::runtimes::HSA_RUNTIME)))
            .cloned()
            .collect();
        for m in &runtimes {
            let at = if let Some(at) = self.names.r_debug_files.get(&m.file) {
                at.clone()
            } else {
                let at = self.file(m).and_then(|f| crate::os::elf::dynamic_symbol(&f, R_DEBUG_SYMBOL));
                self.names.r_debug_files.insert(m.file, at.clone());
                at
            };
            let Some((vaddr, segments)) = at else { continue };
            // The load bias, from a mapping that starts a segment: its address minus the segment's page.
            for r in runtimes.iter().filter(|r| r.file == m.file) {
                if let Some(&(_, _, seg_vaddr)) = segments.iter().find(|(off, _, _)| off & !0xfff == r.offset) {
                    return Some(r.start.wrapping_sub(seg_vaddr & !0xfff).wrapping_add(vaddr));
                }
            }
        }
        None
    }

    /// Walks the process's loaded code-object list and names every kernel object of it.
    fn read_loader_list(&mut self) {
        let pid = self.pid;
        let Some(r_debug) = self.r_debug_of() else { return };
        let Some(list) = ProcMem::open(pid).and_then(|mem| walk(&mem, r_debug)) else {
            self.names.count(Counted::LoaderListUnreadable);
            return;
        };
        if list.truncated {
            self.names.count(Counted::LoaderListTruncated);
        }
        for _ in 0..list.unreadable {
            self.names.count(Counted::LoaderUriUnreadable);
        }
        let same_ns = {
            use crate::os::proc::Procs as _;
            crate::os::proc::LIVE.same_mount_ns(pid)
        };
        let mut named = HashMap::new();
        for o in list.objects {
            let uri = parse_uri(&o.uri);
            // A file URI in tracer's own mount namespace means the same file for every process.
            let shared = same_ns && matches!(uri, Some(Uri::File { .. }));
            let cache = if shared { &mut self.names.code_objects } else { &mut self.proc.code_objects };
            let kernels = if let Some(k) = cache.get(&o.uri) {
                k.clone()
            } else {
                let k = uri.as_ref().and_then(|u| code_object_kernels(pid, u)).map(Arc::new);
                cache.insert(o.uri.clone(), k.clone());
                if k.is_none() {
                    self.names.count(Counted::LoaderCodeObjectUnreadable);
                }
                k
            };
            let file: Option<Arc<str>> = match uri {
                Some(Uri::File { path, .. }) => Some(path.into()),
                _ => None,
            };
            for (name, value) in kernels.iter().flat_map(|k| k.iter()) {
                named.insert(o.load_delta.wrapping_add(*value), (Arc::from(name.as_str()), file.clone()));
            }
        }
        self.proc.loaded = named;
    }
}

/// The `NAME.kd` symbols of a code object, from where its URI says: a file the process sees (resolved
/// in its root, only the code object's range read), or the memory of a process.
fn code_object_kernels(pid: u32, uri: &Uri) -> Option<KernelSymbols> {
    match uri {
        Uri::File { path, offset, size } => {
            let file = Root::of(pid).and_then(|root| root.open(path)).ok()?;
            let len = size.unwrap_or_else(|| file.len().saturating_sub(*offset));
            if len == 0 || len > MAX_CODE_OBJECT {
                return None;
            }
            file.check_range(*offset, len).ok()?;
            kernel_descriptors(&Bounded::new(&file, *offset, len, ELF_BUDGET))
        }
        &Uri::Memory { pid: owner, addr, size } => {
            if size == 0 || size > MAX_CODE_OBJECT {
                return None;
            }
            let mem = ProcMem::open(owner)?;
            let mut buf = vec![0; size as usize];
            mem.read(addr, &mut buf).then_some(())?;
            kernel_descriptors(buf.as_slice())
        }
    }
}
