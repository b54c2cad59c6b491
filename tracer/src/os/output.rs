//! Where tracer writes: the rules every command that writes follows.
//!
//! `-` is standard output. A path is only ever a regular file: never written through a symbolic link,
//! never a device, pipe, socket or directory, never the input being read, and never an existing file
//! unless `--force` says so. Exports go to a temporary file beside the destination that is renamed over
//! it when complete, so a failed export leaves no half file; a recording streams into its file directly
//! (a killed recording must leave every complete record readable).

use std::{
    fs::{File, OpenOptions},
    io::{self, ErrorKind},
    os::unix::fs::{MetadataExt as _, OpenOptionsExt as _},
    path::{Path, PathBuf},
};

use anyhow::{Result, anyhow, bail};

/// Where a command writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Dest {
    Stdout,
    File(PathBuf),
}

impl Dest {
    /// `-` is standard output.
    pub(crate) fn parse(path: &Path) -> Self {
        if path.as_os_str() == "-" { Self::Stdout } else { Self::File(path.to_path_buf()) }
    }
}

/// Refuses a destination tracer must not write to: a link, anything but a regular file, one of the
/// `inputs`, or an existing file without `force`.
pub(crate) fn check(path: &Path, force: bool, inputs: &[&Path]) -> Result<()> {
    let shown = path.display();
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => bail!("cannot look at {shown} ({e}): choose another path with -o"),
    };
    if meta.file_type().is_symlink() {
        bail!("{shown} is a symbolic link; tracer does not write through links: choose another path with -o");
    }
    if meta.is_dir() {
        bail!("{shown} is a directory: choose a file name with -o");
    }
    if !meta.is_file() {
        bail!(
            "{shown} is not a regular file (a device, pipe or socket); tracer writes only regular files: choose another path with -o, or -o - for standard output"
        );
    }
    for input in inputs {
        if std::fs::metadata(input).is_ok_and(|m| (m.dev(), m.ino()) == (meta.dev(), meta.ino())) {
            bail!("{shown} is the file being read; writing it would destroy it: choose another path with -o");
        }
    }
    if !force {
        bail!("{shown} already exists: choose another path with -o, or pass --force to replace it");
    }
    Ok(())
}

/// Creates a new file for writing, mode 0600 (a trace shows what a process did), refusing to follow a
/// link or to open an existing file.
pub(crate) fn create_new(path: &Path) -> Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.kind() {
            ErrorKind::AlreadyExists => {
                anyhow!("{} already exists: choose another path with -o, or pass --force to replace it", path.display())
            }
            _ if e.raw_os_error() == Some(libc::ELOOP) => anyhow!(
                "{} is a symbolic link; tracer does not write through links: choose another path with -o",
                path.display()
            ),
            _ => anyhow!("cannot create {} ({e}): choose a writable path with -o", path.display()),
        })
}

/// Creates the next part of a rotated recording, never through a link nor over what another made.
///
/// A new file (`O_EXCL`, `O_NOFOLLOW`, mode 0600), or with `force` one in place of a regular file of that
/// name (an earlier recording's part). `None`: the name is taken by what tracer does not replace (a link,
/// a directory, a device; any file without `force`), or was taken between the look and the creation.
pub(crate) fn create_part(path: &Path, force: bool) -> io::Result<Option<File>> {
    if force && std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(file) => Ok(Some(file)),
        Err(e) if e.kind() == ErrorKind::AlreadyExists || e.raw_os_error() == Some(libc::ELOOP) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The directory a path names a file in (`.` for a bare file name).
pub(crate) fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// The temporary name a file for `dest` is written under, beside it, until it takes `dest`'s name.
pub(crate) fn staged_name(dest: &Path) -> Result<PathBuf> {
    let dir = dir_of(dest);
    let name = dest.file_name().ok_or_else(|| anyhow!("{} names no file: give a file name with -o", dest.display()))?;
    // Unpredictable: a user who may write the directory (a world-writable one) cannot plant a file, link or
    // directory at the name beforehand. std's hasher keys are random per process.
    let nonce = {
        use std::hash::{BuildHasher as _, Hasher as _};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(crate::os::clock::monotonic_ns());
        h.finish()
    };
    Ok(dir.join(format!(".{}.tracer-{}-{nonce:016x}.tmp", name.to_string_lossy(), std::process::id())))
}

/// A file written under a temporary name in the destination's directory, renamed over the destination
/// by [`Staged::commit`]; dropped uncommitted, it is removed.
pub(crate) struct Staged {
    file: Option<File>,
    tmp: PathBuf,
    dest: PathBuf,
}

impl Staged {
    /// Checks `dest` (see [`check`]) and creates the temporary file beside it.
    pub(crate) fn create(dest: &Path, force: bool, inputs: &[&Path]) -> Result<Self> {
        check(dest, force, inputs)?;
        let tmp = staged_name(dest)?;
        let file = create_new(&tmp)?;
        Ok(Self { file: Some(file), tmp, dest: dest.to_path_buf() })
    }

    pub(crate) const fn file(&mut self) -> &mut File {
        self.file.as_mut().expect("the file stays open until commit")
    }

    /// Syncs the file and moves it to its destination (replacing a regular file there with --force).
    pub(crate) fn commit(mut self) -> Result<()> {
        let file = self.file.take().expect("committed once");
        file.sync_all().map_err(|e| anyhow!("writing {} failed ({e})", self.dest.display()))?;
        drop(file);
        // The destination was checked when the file was created; look again, since the export took time.
        check(&self.dest, true, &[])?;
        std::fs::rename(&self.tmp, &self.dest)
            .map_err(|e| anyhow!("cannot move the finished file to {} ({e})", self.dest.display()))
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            // A temporary file already gone needs nothing done.
            drop(std::fs::remove_file(&self.tmp));
        }
    }
}

/// Whether an error is a closed pipe on the output (`| head`): the reader has what it wanted.
pub(crate) fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>().is_some_and(|io| io.kind() == ErrorKind::BrokenPipe)
            || c.downcast_ref::<serde_json::Error>().and_then(serde_json::Error::io_error_kind)
                == Some(ErrorKind::BrokenPipe)
            || c.downcast_ref::<csv::Error>()
                .is_some_and(|e| matches!(e.kind(), csv::ErrorKind::Io(io) if io.kind() == ErrorKind::BrokenPipe))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tracer-output-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    #[test]
    fn refuses_links_devices_inputs_and_existing_files() {
        let input = tmp("in.jsonl");
        std::fs::write(&input, "x").unwrap();
        let err = |p: &Path, force: bool| check(p, force, &[&input]).unwrap_err().to_string();
        assert!(err(&input, true).contains("is the file being read"));
        assert!(err(&input, false).contains("is the file being read"));
        assert!(err(Path::new("/dev/null"), true).contains("not a regular file"));
        let link = tmp("link");
        drop(std::fs::remove_file(&link));
        std::os::unix::fs::symlink(&input, &link).unwrap();
        assert!(err(&link, true).contains("symbolic link"));
        let other = tmp("other");
        std::fs::write(&other, "y").unwrap();
        assert!(err(&other, false).contains("--force"));
        check(&other, true, &[&input]).unwrap();
        check(&tmp("absent"), false, &[&input]).unwrap();
    }

    #[test]
    fn staged_files_appear_only_when_committed() {
        use std::io::Write as _;
        let dest = tmp("staged.out");
        drop(std::fs::remove_file(&dest));
        let mut s = Staged::create(&dest, false, &[]).unwrap();
        s.file().write_all(b"half").unwrap();
        drop(s);
        assert!(!dest.exists());
        let leftovers: Vec<_> = std::fs::read_dir(dest.parent().unwrap())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains(".tracer-"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        let mut s = Staged::create(&dest, false, &[]).unwrap();
        s.file().write_all(b"whole").unwrap();
        s.commit().unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"whole");
    }
}
