//! The code-object ledger of a process: each directory it loaded code-object files from by path (rocBLAS's
//! Tensile `library/`), the files present there when it was listed, those loaded (every load with its
//! result), the kernels looked up in each and whether they ran.

use std::collections::BTreeMap;

use super::{CodeDirReport, CodeFileReport, DispatchReport, KernelReport};
use crate::trace;

/// A process's loads by path and its directory listings, as the records came.
#[derive(Default)]
pub(super) struct CodeAcc {
    /// Per file: its row so far.
    files: BTreeMap<String, CodeFileReport>,
    dirs: Vec<trace::CodeDir>,
}

/// The directory part of an absolute path ("/" for a file at the root; "" for a relative one).
fn dir_of(path: &str) -> &str {
    match path.rsplit_once('/') {
        Some(("", _)) => "/",
        Some((dir, _)) => dir,
        None => "",
    }
}

impl CodeAcc {
    /// A load that named its file (the call's `file`).
    pub(super) fn load(&mut self, c: &trace::Call, file: &str) {
        let f = self.files.entry(file.to_owned()).or_insert_with(|| CodeFileReport {
            path: file.to_owned(),
            api: c.api,
            loads: 0,
            failed: 0,
            results: BTreeMap::new(),
            present: None,
            kernels: Vec::new(),
            launches: 0,
            executions: 0,
            dispatches: 0,
        });
        f.loads += 1;
        if c.ret != 0 {
            f.failed += 1;
        }
        *f.results.entry(c.ret).or_default() += 1;
    }

    pub(super) fn dir(&mut self, d: trace::CodeDir) {
        // A rotated recording's parts restate a listing: the first one stands.
        if !self.dirs.iter().any(|x| x.path == d.path) {
            self.dirs.push(d);
        }
    }

    /// The ledger, one entry per directory (those listed first, in listing order), with the kernels each
    /// file holds: looked up in its module (`kernel` records of this process whose code file it is), and
    /// how often they ran.
    pub(super) fn finish(
        self,
        named: &[&trace::Kernel],
        kernels: &[KernelReport],
        dispatches: &[DispatchReport],
    ) -> Vec<CodeDirReport> {
        let mut out: Vec<CodeDirReport> = self
            .dirs
            .into_iter()
            .map(|d| {
                let error = d.error;
                CodeDirReport {
                    present: error.is_none().then_some(d.count),
                    listing_cut: d.cut,
                    listing_error: error,
                    present_files: d.files,
                    path: d.path,
                    ..CodeDirReport::default()
                }
            })
            .collect();
        for (path, mut f) in self.files {
            let mut held: Vec<&trace::Kernel> = named
                .iter()
                .copied()
                .filter(|k| !k.name.is_empty() && k.code_file.as_deref() == Some(path.as_str()))
                .collect();
            held.sort_by_key(|k| k.id);
            for k in held {
                if !f.kernels.contains(&k.name) {
                    f.kernels.push(k.name.clone());
                }
            }
            for k in kernels.iter().filter(|k| k.code_file.as_deref() == Some(path.as_str())) {
                f.launches += k.launches;
                f.executions += k.executions;
            }
            f.dispatches =
                dispatches.iter().filter(|d| d.code_file.as_deref() == Some(path.as_str())).map(|d| d.dispatches).sum();
            let dir = dir_of(&path);
            let at = if let Some(at) = out.iter().position(|d| d.path == dir) {
                at
            } else {
                // Not listed (an old trace, a relative path, a directory past the cap).
                out.push(CodeDirReport { path: dir.to_owned(), ..CodeDirReport::default() });
                out.len() - 1
            };
            let d = &mut out[at];
            let name = path.rsplit('/').next().unwrap_or(&path);
            f.present = d.present.map(|_| d.present_files.iter().any(|p| p == name));
            d.loaded += 1;
            d.loaded_ok += u64::from(f.loads > f.failed);
            d.with_dispatches += u64::from(f.executions + f.dispatches > 0);
            d.files.push(f);
        }
        for d in &mut out {
            let loaded: Vec<&str> = d.files.iter().map(|f| f.path.rsplit('/').next().unwrap_or(&f.path)).collect();
            d.not_loaded = d.present_files.iter().filter(|p| !loaded.contains(&p.as_str())).cloned().collect();
        }
        // A directory listed but none of whose loads reached the trace (a rotated part) says nothing.
        out.retain(|d| !d.files.is_empty());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::event::{ApiFunc, Call, Origin};

    fn load(file: &str, ret: i64) -> Call {
        let o = Origin { ts: 1, pid: 7, tid: 7, lib: 1 };
        Call { file: Some(file.into()), ..Call::new(o, ApiFunc::HipModuleLoad, ret, 5) }
    }

    #[test]
    fn a_directory_counts_its_files_its_loads_and_what_ran() {
        let mut acc = CodeAcc::default();
        acc.dir(trace::CodeDir {
            ts: 1,
            pid: 7,
            path: "/opt/lib/library".into(),
            count: 4,
            files: vec!["a.co".into(), "b.co".into(), "c.co".into(), "d.dat".into()],
            ..Default::default()
        });
        for (file, ret) in [("/opt/lib/library/a.co", 0), ("/opt/lib/library/b.co", 100), ("/opt/lib/library/a.co", 0)]
        {
            let c = load(file, ret);
            acc.load(&c, file);
        }
        acc.load(&load("/elsewhere/x.hsaco", 0), "/elsewhere/x.hsaco");
        let kernel = trace::Kernel {
            id: 3,
            pid: 7,
            name: "Cijk_Ailk".into(),
            code_file: Some("/opt/lib/library/a.co".into()),
            ..Default::default()
        };
        let named = [&kernel];
        let rows = vec![KernelReport {
            id: 3,
            name: "Cijk_Ailk".into(),
            code_file: Some("/opt/lib/library/a.co".into()),
            launches: 2,
            executions: 2,
            ..Default::default()
        }];
        let dirs = acc.finish(&named, &rows, &[]);
        assert_eq!(dirs.len(), 2);
        let d = &dirs[0];
        assert_eq!(
            (d.path.as_str(), d.present, d.loaded, d.loaded_ok, d.with_dispatches),
            ("/opt/lib/library", Some(4), 2, 1, 1)
        );
        assert_eq!(d.not_loaded, ["c.co", "d.dat"]);
        let a = &d.files[0];
        assert_eq!((a.loads, a.failed, a.present, a.executions), (2, 0, Some(true), 2));
        assert_eq!(a.kernels, ["Cijk_Ailk"]);
        let b = &d.files[1];
        assert_eq!((b.loads, b.failed, b.results.get(&100).copied()), (1, 1, Some(1)));
        // A directory with no listing: its loads, with nothing said of what was present.
        let e = &dirs[1];
        assert_eq!((e.path.as_str(), e.present, e.loaded, e.files[0].present), ("/elsewhere", None, 1, None));
    }
}
