//! Code-object files a process loads by path (`hipModuleLoad`, `cuModuleLoad`) or by descriptor
//! (`hsa_code_object_reader_create_from_file`): the call gets its file, the module its code file (so the
//! functions looked up in it carry it), and the file's directory is listed once, as the process sees it,
//! into a `code_dir` record (what was present there is known only at record time).
//!
//! And those it reads into memory first (rocBLAS's Tensile: `.co`/`.hsaco` files read whole, then
//! `hipModuleLoadData`): the thread's open of the file (the openat program passes code-object names) is bound
//! to the image `ROCr`'s reader is then given on the same thread when the reader's size equals the file's;
//! the module loaded from that image carries the file. An open not followed so is forgotten at the thread's next
//! open; a size that differs binds nothing (counted).

use std::collections::{HashMap, HashSet};

use crate::{
    os::{files::Reader, proc::Procs},
    record::intake::decode::Name,
    trace::event::Call,
    trace::{CODE_DIR_BYTES_MAX, CODE_DIR_NAMES_MAX, CodeDir},
};

use crate::trace::counted::{Counted, Counts};

/// Directories listed per process at most; a load from a further one is counted
/// (`code_dirs_not_listed`).
const DIRS_MAX: usize = 64;
/// Directory entries a recording reads for code-directory listings, every process's together: 16
/// processes listing 64 directories of 65 536 entries each cost tracer 38.5 s of CPU before; this bounds
/// the work near a second. Past it, directories are counted (`code_dirs_not_listed_budget`).
pub(super) const LISTING_BUDGET: usize = 1 << 21;

/// One process's code-object files: the path each thread's load in progress named at its entry, and the
/// directories listed so far.
#[derive(Default)]
pub(super) struct CodeFiles {
    /// Per thread: the path read at the entry of its load in progress (the call record follows).
    pending: HashMap<u32, Name>,
    listed: HashSet<String>,
    /// Per thread: the code-object file it opened last (absolute path) and when.
    opened: HashMap<u32, (String, u64)>,
    /// Images bound to the file they were read from (image address -> file), until their module is loaded.
    images: HashMap<u64, String>,
}

/// Images bound and not yet taken by a module load, per process at most: past it, all are let go (counted).
const IMAGES_MAX: usize = 256;
/// Threads whose last code-object open is kept, per process at most: past it, all are let go (counted).
const OPENED_MAX: usize = 4096;

impl CodeFiles {
    /// The path a load named at its entry (a name record with the call's header).
    pub(super) fn path_named(&mut self, n: Name, counters: &mut Counts) {
        if self.pending.insert(n.origin.tid, n).is_some() {
            counters.bump(Counted::ModulePathsWithoutCall);
        }
    }

    /// The file a load by path named: the path its entry read (same thread, same time), made absolute
    /// against the process's working directory where it is relative, and whether the probe cut it. None
    /// when no path was read for it.
    pub(super) fn path_of(&mut self, c: &Call, procs: &dyn Procs, counters: &mut Counts) -> Option<(String, bool)> {
        let Some(n) = self.pending.remove(&c.tid) else {
            counters.bump(Counted::ModuleLoadsWithoutPath);
            return None;
        };
        if n.origin.ts != c.ts {
            // Another load's path (its call record was lost): not this one's.
            counters.bump(Counted::ModuleLoadsWithoutPath);
            return None;
        }
        if n.fault || n.name.is_empty() {
            counters.bump(Counted::ModulePathsUnread);
            return None;
        }
        if n.name.starts_with('/') {
            return Some((n.name, n.truncated));
        }
        let relative = n.name.trim_start_matches("./");
        if let Some(cwd) = procs.cwd(c.pid) {
            Some((format!("{}/{relative}", cwd.trim_end_matches('/')), n.truncated))
        } else {
            counters.bump(Counted::ModulePathsRelative);
            Some((n.name, n.truncated))
        }
    }

    /// A code-object file thread `tid` opened (the path as it gave it, made absolute against the process's
    /// working directory).
    pub(super) fn code_object_opened(
        &mut self,
        (pid, tid, ts): (u32, u32, u64),
        path: &str,
        truncated: bool,
        procs: &dyn Procs,
        counters: &mut Counts,
    ) {
        let path = if path.starts_with('/') {
            path.to_owned()
        } else if let Some(cwd) = procs.cwd(pid) {
            format!("{}/{}", cwd.trim_end_matches('/'), path.trim_start_matches("./"))
        } else {
            counters.bump(Counted::CodeObjectOpensRelative);
            return;
        };
        if truncated {
            counters.bump(Counted::CodeObjectOpensTruncated);
            return;
        }
        if self.opened.len() >= OPENED_MAX && !self.opened.contains_key(&tid) {
            self.opened.clear();
            counters.bump(Counted::CodeObjectOpensLetGo);
        }
        self.opened.insert(tid, (path, ts));
    }

    /// An image `ROCr`'s reader was given (`hsa_code_object_reader_create_from_memory(ptr, size)`) outside every
    /// mapped file: the file this thread opened last, when its size is the image's; the image is bound to it
    /// for the module load that follows, and the file's directory listed the first time (as for a load by path).
    pub(super) fn image_read(
        &mut self,
        c: &Call,
        procs: &dyn Procs,
        budget: &mut usize,
        counters: &mut Counts,
    ) -> Option<(String, Option<CodeDir>)> {
        let file = self.bind_image(c, procs, counters)?;
        let dir = self.list_dir(&file, false, (c.pid, c.ts), (procs, None), budget, counters);
        Some((file, dir))
    }

    fn bind_image(&mut self, c: &Call, procs: &dyn Procs, counters: &mut Counts) -> Option<String> {
        let (ptr, size) = (c.ptr?, c.size?);
        let (path, opened_ts) = self.opened.remove(&c.tid)?;
        if opened_ts > c.ts || procs.file_size(c.pid, &path) != Some(size) {
            counters.bump(Counted::CodeObjectImagesUnmatched);
            return None;
        }
        if self.images.len() >= IMAGES_MAX {
            self.images.clear();
            counters.bump(Counted::CodeObjectImagesLetGo);
        }
        self.images.insert(ptr, path.clone());
        Some(path)
    }

    /// The file an image was read from, once ([`Self::image_read`]).
    pub(super) fn image_file(&mut self, image: u64) -> Option<String> {
        self.images.remove(&image)
    }

    /// The file behind a descriptor a load was given, read now (the process may close it soon after):
    /// None, counted, when it could not be read or is not a file of a path.
    pub(super) fn fd_file(c: &Call, procs: &dyn Procs, counters: &mut Counts) -> Option<String> {
        let target = c.value.and_then(|fd| u32::try_from(fd).ok()).and_then(|fd| procs.fd_target(c.pid, fd));
        match target {
            Some(t) if t.starts_with('/') => Some(t),
            _ => {
                counters.bump(Counted::CodeObjectFdsUnread);
                None
            }
        }
    }

    /// The `code_dir` record of the directory holding `file`, the first time this process loads from it,
    /// listed only where the process itself may list it. The process's root is opened now, or, for a
    /// process that has ended, taken from `held` (the early look's, opened while it lived: its credentials
    /// gone, only a directory anyone may list is listed there). `budget`: the entries the recording may
    /// still read for such listings (every process's together); none left, the directory is counted, not
    /// listed.
    pub(super) fn list_dir(
        &mut self,
        file: &str,
        truncated: bool,
        (pid, ts): (u32, u64),
        (procs, held): (&dyn Procs, Option<&crate::os::files::Root>),
        budget: &mut usize,
        counters: &mut Counts,
    ) -> Option<CodeDir> {
        // A path cut by the probe names no directory for certain.
        if !file.starts_with('/') || truncated {
            return None;
        }
        let dir = match file.rsplit_once('/') {
            Some(("", _)) => "/".to_owned(),
            Some((dir, _)) => dir.to_owned(),
            None => return None,
        };
        if self.listed.contains(&dir) {
            return None;
        }
        if self.listed.len() >= DIRS_MAX || *budget == 0 {
            counters.bump(if *budget == 0 { Counted::CodeDirsNotListedBudget } else { Counted::CodeDirsNotListed });
            return None;
        }
        self.listed.insert(dir.clone());
        let mut rec = CodeDir { ts, pid, path: dir, ..CodeDir::default() };
        let max = *budget;
        let listed = procs.list_files(pid, &rec.path, max).or_else(|why| match held {
            Some(root) => root.list_files(&rec.path, max, &Reader::anyone()).map_err(|e| e.to_string()),
            None => Err(why),
        });
        match listed {
            Ok((mut files, cut)) => {
                // The entries read (at most `max`), each against the recording's budget.
                *budget = budget.saturating_sub(files.len().saturating_add(1));
                files.sort_unstable();
                rec.count = files.len() as u64;
                rec.cut = cut;
                let mut bytes = 0usize;
                for f in files {
                    bytes = bytes.saturating_add(f.len());
                    if rec.files.len() == CODE_DIR_NAMES_MAX || bytes > CODE_DIR_BYTES_MAX {
                        rec.cut = true;
                        break;
                    }
                    rec.files.push(f);
                }
            }
            Err(why) => {
                counters.bump(Counted::CodeDirsUnlisted);
                rec.error = Some(why);
            }
        }
        Some(rec)
    }
}
