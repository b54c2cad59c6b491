//! Retention of a rotated recording (`record --keep-size`): once a new part is started, the oldest parts
//! of tracer recordings in the output's directory are removed while all of them together hold more than
//! the bound, as journald keeps its files under `SystemMaxUse`. The part being written is never removed.
//!
//! Only what tracer itself wrote counts: a regular file (never a link) of tracer's own user whose first
//! line is the header of a part of a rotated recording. Anything else in the directory (another user's
//! file, a link planted there, a whole recording, any other file) is neither counted nor removed.

use std::{
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
};

use super::reader::header_of;

/// Entries of the directory looked at, at most (as many as a recording's parts a reader takes).
const MAX_ENTRIES: usize = 100_000;

/// What a pass removed: (parts, bytes).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Removed {
    pub(super) parts: u64,
    pub(super) bytes: u64,
}

/// [`prune`] in the directory of `current`, the part being written, adding what went to `removed`.
pub(super) fn prune_beside(current: &Path, keep: u64, removed: &mut Removed) {
    let dir = current.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or_else(|| Path::new("."));
    let r = prune(dir, keep, current);
    removed.parts += r.parts;
    removed.bytes = removed.bytes.saturating_add(r.bytes);
}

/// Removes the oldest parts in `dir` (oldest recording first, then lowest part) while the parts there hold
/// more than `keep` bytes; never `current`. Looks at [`MAX_ENTRIES`] entries of the directory at most.
pub(super) fn prune(dir: &Path, keep: u64, current: &Path) -> Removed {
    let mut removed = Removed::default();
    let Ok(entries) = std::fs::read_dir(dir) else { return removed };
    let own = rustix::process::geteuid().as_raw();
    // ((recording start, part index), path, bytes)
    let mut parts: Vec<((u64, u32), PathBuf, u64)> = Vec::new();
    for entry in entries.flatten().take(MAX_ENTRIES) {
        let path = entry.path();
        if path == current || !path.file_name().is_some_and(|n| n.to_string_lossy().contains(".jsonl")) {
            continue;
        }
        // The entry itself, not what a link points to.
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() || meta.uid() != own {
            continue;
        }
        let Ok(header) = header_of(&path) else { continue };
        if let Some(part) = header.part {
            parts.push(((header.start_unix_ns, part.index), path, meta.len()));
        }
    }
    let current_bytes = std::fs::metadata(current).map_or(0, |m| m.len());
    let mut total = parts.iter().fold(current_bytes, |sum, p| sum.saturating_add(p.2));
    parts.sort_by_key(|p| p.0);
    for (_, path, bytes) in parts {
        if total <= keep {
            break;
        }
        if std::fs::remove_file(&path).is_ok() {
            total = total.saturating_sub(bytes);
            removed.parts += 1;
            removed.bytes = removed.bytes.saturating_add(bytes);
        }
    }
    removed
}
