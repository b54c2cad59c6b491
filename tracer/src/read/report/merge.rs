//! Kernel rows merged by name: one row per kernel, whatever handles it was loaded under.

use std::collections::HashMap;

use super::{KernelClass, KernelReport};

/// One row per kernel name: a name loaded under several handles (cuDNN loads a module per graph; each
/// process load of the same code gives a new handle) is one kernel. Unnamed handles stay apart.
pub(super) fn merge_by_name(kernels: Vec<KernelReport>) -> Vec<KernelReport> {
    let mut out: Vec<KernelReport> = Vec::with_capacity(kernels.len());
    let mut by_name: HashMap<String, usize> = HashMap::new();
    for k in kernels {
        let at = if k.name.is_empty() { None } else { by_name.get(&k.name).copied() };
        let Some(at) = at else {
            if !k.name.is_empty() {
                by_name.insert(k.name.clone(), out.len());
            }
            out.push(KernelReport { short_name: crate::os::demangle::short_name(&k.demangled), ids: vec![k.id], ..k });
            continue;
        };
        let m = &mut out[at];
        m.ids.push(k.id);
        m.launches += k.launches;
        m.failed += k.failed;
        m.executions += k.executions;
        m.graph_executions += k.graph_executions;
        m.from_dispatches |= k.from_dispatches;
        for (columns, n) in k.ne11 {
            *m.ne11.entry(columns).or_default() += n;
        }
        for (code, n) in k.returns {
            *m.returns.entry(code).or_default() += n;
        }
        for sh in k.shapes {
            sh.add_to(&mut m.shapes);
        }
        for a in k.apis {
            if !m.apis.contains(&a) {
                m.apis.push(a);
            }
        }
        if m.code_file.is_none() {
            m.code_file = k.code_file;
            m.bundles = k.bundles;
        }
    }
    for m in &mut out {
        if m.ids.len() > 1 {
            m.shapes.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.cmp(b)));
            m.class = match m.shapes.first() {
                Some(sh) => KernelClass::of_shape(&m.name, sh),
                None => KernelClass::of(&m.name),
            };
        }
    }
    out
}
