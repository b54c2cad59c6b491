//! Files of other processes, read by a root process as hostile input.
//!
//! Every file tracer reads because a traced process maps it, names it or loads code from it is opened one
//! way, never through a path an unprivileged user can point elsewhere on the host:
//! - a mapped file through `/proc/PID/map_files/START-END`, which is the very file mapped (a FIFO
//!   bind-mounted over its path in the user's own mount namespace changes nothing);
//! - a path the process names (a code object's URI, a library of a container) inside that process's root,
//!   with `openat2(RESOLVE_IN_ROOT)`: an absolute symbolic link resolves inside that root, not on the host;
//! - a path the user of tracer gives (`inspect FILE`, `--lib`) as given.
//!
//! Each is first an `O_PATH` handle, which opens nothing (no FIFO waits, no device's `open` runs), checked
//! to be a regular file (and, for a mapping, the one mapped: same device and inode), then reopened
//! read-only through that handle. A FIFO, a device or `/dev/zero` is refused before it is opened.
//!
//! A file is then read by offset (`pread`), never mapped into tracer and never read whole: a file its owner
//! can truncate kills the reader of a mapping with `SIGBUS` (memmap2's documentation calls that undefined
//! behaviour), and a root process must not die of a file a user controls. [`Bounded`] serves `object`'s
//! ELF parser from bounded reads, so that parsing a 1.3 GB library reads its headers and symbol tables,
//! not its 1.25 GB fat binary.

use std::{
    cell::Cell,
    fmt,
    fs::File,
    io,
    os::{
        fd::{AsRawFd as _, OwnedFd},
        unix::fs::FileExt as _,
    },
    path::Path,
};

use elsa::FrozenMap;
pub(crate) use reader::Reader;
use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};

/// `statfs`'s `f_type` of a FUSE file system.
const FUSE_SUPER_MAGIC: u64 = 0x6573_5546;

/// Names read from one directory at most.
pub(crate) const MAX_DIR_ENTRIES: usize = 65_536;

/// Most bytes one [`Bounded`] view reads in all: what parsing one hostile ELF file can cost in memory.
pub(crate) const ELF_BUDGET: u64 = 256 << 20;

/// Why a file was not read, or not read whole. Says which file.
#[derive(Debug)]
pub(crate) struct FileError {
    pub(crate) file: String,
    pub(crate) why: Why,
}

#[derive(Debug)]
pub(crate) enum Why {
    /// The path or mapping could not be opened.
    Open(io::Error),
    /// A FIFO, a device, a directory, a socket: never opened for reading.
    NotRegular(&'static str),
    /// The mapping now holds another file than the one its maps line names (device, inode).
    Changed,
    /// On a FUSE file system: its daemon, which any user can run, could make every read wait.
    Fuse,
    /// A directory the process it is listed for may not list itself: root lists nothing for it there.
    NotPermitted,
    /// A read asked for bytes past the end of the file (a header that says more than the file holds).
    OutOfBounds {
        offset: u64,
        len: u64,
        file_len: u64,
    },
    /// More than a stated cap.
    TooBig {
        what: &'static str,
        len: u64,
        cap: u64,
    },
    Read(io::Error),
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = &self.file;
        match &self.why {
            Why::Open(e) => write!(f, "cannot open {file}: {e}"),
            Why::NotRegular(kind) => write!(f, "{file} is {kind}, not a regular file: not read"),
            Why::Changed => write!(f, "{file} is not the file mapped any more: not read"),
            Why::Fuse => write!(f, "{file} is on a FUSE file system, whose daemon could stall every read: not read"),
            Why::NotPermitted => write!(f, "{file} may not be listed by the process that loaded from it: not listed"),
            Why::OutOfBounds { offset, len, file_len } => write!(
                f,
                "{file}: {len} bytes at offset {offset} lie beyond its end ({file_len} bytes): a corrupt or hostile header"
            ),
            Why::TooBig { what, len, cap } => {
                write!(f, "{file}: {what} of {len} bytes is more than tracer reads ({cap} bytes)")
            }
            Why::Read(e) => write!(f, "cannot read {file}: {e}"),
        }
    }
}

impl std::error::Error for FileError {}

impl FileError {
    /// A short name for counting refusals by cause (footer counters).
    pub(crate) const fn cause(&self) -> &'static str {
        match self.why {
            Why::Open(_) => "open_failed",
            Why::NotRegular(_) => "not_regular",
            Why::Changed => "changed",
            Why::Fuse => "fuse",
            Why::NotPermitted => "not_permitted",
            Why::OutOfBounds { .. } => "out_of_bounds",
            Why::TooBig { .. } => "too_big",
            Why::Read(_) => "read_failed",
        }
    }
}

pub(crate) type Result<T> = std::result::Result<T, FileError>;

/// Which root a process's paths are in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ProcessRoot {
    /// Tracer's own: its paths name the files tracer's do.
    Own,
    /// Another root directory or mount namespace (a chroot, a container), said as `/proc/PID/root` reads
    /// from here, with the mount namespace when it is another (and the directory's inode where that reads
    /// `/`): one text per root.
    Other(String),
}

impl ProcessRoot {
    /// The other root, if it is one.
    pub(crate) fn other(&self) -> Option<&str> {
        match self {
            Self::Own => None,
            Self::Other(root) => Some(root),
        }
    }
}

/// Which root process `pid`'s paths are in; None when it cannot be told (the process has ended).
pub(crate) fn root_description(pid: u32) -> Option<ProcessRoot> {
    use std::os::unix::fs::MetadataExt as _;
    let id = |p: &str| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let (root, ns) = (id(&format!("/proc/{pid}/root"))?, id(&format!("/proc/{pid}/ns/mnt"))?);
    let other_ns = Some(ns) != id("/proc/self/ns/mnt");
    if Some(root) == id("/") && !other_ns {
        return Some(ProcessRoot::Own);
    }
    let link = std::fs::read_link(format!("/proc/{pid}/root")).ok()?.to_string_lossy().into_owned();
    Some(ProcessRoot::Other(match (other_ns, link.as_str()) {
        (false, _) => link,
        // Its root directory as the host cannot name it: by its inode (a pivot_root'ed container's root
        // reads as `/`, as the host's root seen from that namespace before the pivot does).
        (true, "/") => format!("the root of mount namespace mnt:[{}] (directory inode {})", ns.1, root.1),
        (true, _) => format!("{link} in mount namespace mnt:[{}]", ns.1),
    }))
}

/// Process `pid`'s root when it is another than tracer's (see [`root_description`]).
pub(crate) fn other_root(pid: u32) -> Option<String> {
    root_description(pid)?.other().map(str::to_owned)
}

/// A directory paths are resolved in.
///
/// A process's root (or the host's), where absolute links and `..` stay inside it; or a directory of it
/// (an install tree), beneath which every path must stay, links included.
#[derive(Debug)]
pub(crate) struct Root {
    dir: OwnedFd,
    label: String,
    /// The directory as the process sees it ("" for a root).
    base: String,
    resolve: ResolveFlags,
    /// Which root this is when it is not tracer's own (a chroot's directory, a container's root).
    described: Option<String>,
}

impl Root {
    /// The host's root: the paths tracer itself sees.
    pub(crate) fn host() -> Result<Self> {
        Self::open_dir("/", "/".to_owned())
    }

    /// The root of process `pid` (its container's, when it has one).
    pub(crate) fn of(pid: u32) -> Result<Self> {
        let mut root = Self::open_dir(&format!("/proc/{pid}/root"), format!("the root of process {pid}"))?;
        root.described = other_root(pid);
        Ok(root)
    }

    /// Which root this is, when it is not tracer's own.
    pub(crate) fn described(&self) -> Option<&str> {
        self.described.as_deref()
    }

    /// Directory `dir` (as tracer sees it) as a root: a `chroot` target, its paths resolved inside it.
    pub(crate) fn at(dir: &str) -> Result<Self> {
        let mut root = Self::open_dir(dir, dir.to_owned())?;
        root.described = (Path::new(dir) != Path::new("/")).then(|| dir.to_owned());
        Ok(root)
    }

    /// The working directory of process `pid`, for the relative paths it names (resolved from there as in
    /// a root: `..` and absolute links stay beneath it).
    pub(crate) fn cwd_of(pid: u32) -> Result<Self> {
        let mut cwd = Self::open_dir(&format!("/proc/{pid}/cwd"), format!("the working directory of process {pid}"))?;
        cwd.described = other_root(pid);
        Ok(cwd)
    }

    fn open_dir(path: &str, label: String) -> Result<Self> {
        rustix::fs::open(path, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map(|dir| Self {
                dir,
                label,
                base: String::new(),
                resolve: ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
                described: None,
            })
            .map_err(|e| FileError { file: path.to_owned(), why: Why::Open(e.into()) })
    }

    /// Directory `dir` of this root (resolved as this root resolves), as a tree nothing may leave: paths
    /// in it are relative, and a link that points out of it (`/etc/shadow`, `../../..`) is refused.
    pub(crate) fn beneath(&self, dir: &str) -> Result<Self> {
        let fd = rustix::fs::openat2(
            &self.dir,
            self.relative(dir),
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            self.resolve,
        )
        .map_err(|e| FileError { file: self.shown(dir), why: Why::Open(e.into()) })?;
        Ok(Self {
            dir: fd,
            label: self.label.clone(),
            base: self.shown(dir),
            resolve: ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
            described: self.described.clone(),
        })
    }

    /// A path as the process sees it.
    pub(crate) fn shown(&self, path: &str) -> String {
        if self.base.is_empty() {
            path.to_owned()
        } else {
            format!("{}/{}", self.base.trim_end_matches('/'), path.trim_start_matches('/'))
        }
    }

    /// `path` as openat2 takes it here: relative beneath a directory, as given in a root.
    fn relative<'p>(&self, path: &'p str) -> &'p str {
        if self.base.is_empty() {
            path
        } else {
            match path.trim_start_matches('/') {
                "" => ".",
                p => p,
            }
        }
    }

    /// The names in directory `dir` as the process sees it (resolved inside this root), at most
    /// [`MAX_DIR_ENTRIES`].
    pub(crate) fn list(&self, dir: &str) -> Result<Vec<String>> {
        Ok(self.entries(dir, MAX_DIR_ENTRIES, None)?.0.into_iter().map(|(name, _)| name).collect())
    }

    /// The regular files in directory `dir` as the process sees it (an entry whose type the file system
    /// does not give counts as one), of at most `max` entries read ([`MAX_DIR_ENTRIES`] at most), and
    /// whether it had more: only where `reader` may list it.
    pub(crate) fn list_files(&self, dir: &str, max: usize, reader: &Reader) -> Result<(Vec<String>, bool)> {
        let (entries, cut) = self.entries(dir, max.min(MAX_DIR_ENTRIES), Some(reader))?;
        let files = entries
            .into_iter()
            .filter(|(_, kind)| matches!(kind, FileType::RegularFile | FileType::Unknown))
            .map(|(name, _)| name)
            .collect();
        Ok((files, cut))
    }

    /// The entries of directory `dir` (without `.` and `..`), at most `max`, and whether there were more.
    /// Opened without blocking, never on FUSE; with a `reader`, only a directory it may list.
    fn entries(&self, dir: &str, max: usize, reader: Option<&Reader>) -> Result<(Vec<(String, FileType)>, bool)> {
        let fail = |e: rustix::io::Errno| FileError { file: self.shown(dir), why: Why::Open(e.into()) };
        let fd = rustix::fs::openat2(
            &self.dir,
            self.relative(dir),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::empty(),
            self.resolve,
        )
        .map_err(fail)?;
        if rustix::fs::fstatfs(&fd).is_ok_and(|fs| fs.f_type as u64 == FUSE_SUPER_MAGIC) {
            return Err(FileError { file: self.shown(dir), why: Why::Fuse });
        }
        if let Some(reader) = reader {
            let st = rustix::fs::fstat(&fd).map_err(fail)?;
            if !reader.may_list(st.st_uid, st.st_gid, st.st_mode) {
                return Err(FileError { file: self.shown(dir), why: Why::NotPermitted });
            }
        }
        let mut entries = Vec::new();
        for (read, entry) in rustix::fs::Dir::new(fd).map_err(fail)?.enumerate() {
            if read == max {
                return Ok((entries, true));
            }
            let entry = entry.map_err(fail)?;
            let name = entry.file_name().to_string_lossy();
            if name != "." && name != ".." {
                entries.push((name.into_owned(), entry.file_type()));
            }
        }
        Ok((entries, false))
    }

    /// Opens `path` as the process sees it, resolved inside this root (or beneath this directory), never
    /// through a `/proc` magic link.
    pub(crate) fn open(&self, path: &str) -> Result<CodeFile> {
        let shown = self.shown(path);
        let label = if self.label == "/" { shown } else { format!("{shown} (in {})", self.label) };
        let fd = rustix::fs::openat2(
            &self.dir,
            self.relative(path),
            OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
            self.resolve,
        )
        .map_err(|e| FileError { file: label.clone(), why: Why::Open(e.into()) })?;
        CodeFile::from_path_handle(&fd, label, None)
    }
}

/// A regular file opened for reading by offset, with its identity and length as they were when it was
/// opened.
#[derive(Debug)]
pub(crate) struct CodeFile {
    file: File,
    len: u64,
    dev: u64,
    ino: u64,
    label: String,
}

impl CodeFile {
    /// The file a process maps at `start..end`, which must still be the file with this device and inode.
    pub(crate) fn mapped(pid: u32, start: u64, end: u64, dev: u64, ino: u64, path: &str) -> Result<Self> {
        let link = format!("/proc/{pid}/map_files/{start:x}-{end:x}");
        let label = path.to_owned();
        let fd = rustix::fs::open(&link, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| FileError { file: label.clone(), why: Why::Open(e.into()) })?;
        Self::from_path_handle(&fd, label, Some((dev, ino)))
    }

    /// A path the user of tracer gave on its command line.
    pub(crate) fn user(path: &Path) -> Result<Self> {
        let label = path.display().to_string();
        let fd = rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| FileError { file: label.clone(), why: Why::Open(e.into()) })?;
        Self::from_path_handle(&fd, label, None)
    }

    /// Checks an `O_PATH` handle (a regular file; the expected one), then opens that very file for reading
    /// through it.
    fn from_path_handle(fd: &OwnedFd, label: String, expect: Option<(u64, u64)>) -> Result<Self> {
        let fail = |why| FileError { file: label.clone(), why };
        let st = rustix::fs::fstat(fd).map_err(|e| fail(Why::Open(e.into())))?;
        let kind = FileType::from_raw_mode(st.st_mode);
        if kind != FileType::RegularFile {
            return Err(fail(Why::NotRegular(kind_name(kind))));
        }
        let id = (st.st_dev, st.st_ino);
        if expect.is_some_and(|e| e != id) {
            return Err(fail(Why::Changed));
        }
        if rustix::fs::fstatfs(fd).is_ok_and(|fs| fs.f_type as u64 == FUSE_SUPER_MAGIC) {
            return Err(fail(Why::Fuse));
        }
        // Reopening through the handle reaches the same inode, whatever happened to any path since.
        let reopened = rustix::fs::open(
            format!("/proc/self/fd/{}", fd.as_raw_fd()),
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
            Mode::empty(),
        )
        .map_err(|e| fail(Why::Open(e.into())))?;
        let st = rustix::fs::fstat(&reopened).map_err(|e| fail(Why::Open(e.into())))?;
        if (st.st_dev, st.st_ino) != id {
            return Err(fail(Why::Changed));
        }
        let len = u64::try_from(st.st_size).unwrap_or(0);
        Ok(Self { file: File::from(reopened), len, dev: st.st_dev, ino: st.st_ino, label })
    }

    pub(crate) const fn len(&self) -> u64 {
        self.len
    }

    /// A path that reaches this very file while it is open: `/proc/self/fd/N` (what a uprobe is attached
    /// through, so the kernel resolves the file tracer checked, not whatever a path names now).
    pub(crate) fn proc_path(&self) -> std::path::PathBuf {
        format!("/proc/self/fd/{}", self.file.as_raw_fd()).into()
    }

    /// (device, inode): one index per file, whatever path or process reached it.
    pub(crate) const fn id(&self) -> (u64, u64) {
        (self.dev, self.ino)
    }

    pub(crate) fn error(&self, why: Why) -> FileError {
        FileError { file: self.label.clone(), why }
    }

    /// Checks that `len` bytes at `offset` lie in the file.
    pub(crate) fn check_range(&self, offset: u64, len: u64) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(self.error(Why::OutOfBounds { offset, len, file_len: self.len })),
        }
    }

    /// Fills `buf` from `offset`; the range must lie in the file.
    pub(crate) fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.check_range(offset, buf.len() as u64)?;
        self.file.read_exact_at(buf, offset).map_err(|e| self.error(Why::Read(e)))
    }

    /// Up to `buf.len()` bytes from `offset`, fewer at the end of the file.
    pub(crate) fn read_at_most(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let n = self.len.saturating_sub(offset).min(buf.len() as u64) as usize;
        self.read_exact_at(offset, &mut buf[..n])?;
        Ok(n)
    }

    /// `len` bytes at `offset` in a new buffer, refused past `cap` (`what` names it in the error).
    pub(crate) fn read_vec(&self, offset: u64, len: u64, cap: u64, what: &'static str) -> Result<Vec<u8>> {
        if len > cap {
            return Err(self.error(Why::TooBig { what, len, cap }));
        }
        self.check_range(offset, len)?;
        let mut buf = vec![0; len as usize];
        self.read_exact_at(offset, &mut buf)?;
        Ok(buf)
    }

    /// The bytes `offset..offset + len` as a stream (for a decompressor), checked against the file.
    pub(crate) fn stream(&self, offset: u64, len: u64) -> Result<Stream<'_>> {
        self.check_range(offset, len)?;
        Ok(Stream { file: self, at: offset, end: offset + len })
    }

    /// An ELF view of the whole file for `object`, reading at most [`ELF_BUDGET`] bytes.
    pub(crate) fn elf(&self) -> Bounded<'_> {
        Bounded::new(self, 0, self.len, ELF_BUDGET)
    }
}

const fn kind_name(kind: FileType) -> &'static str {
    match kind {
        FileType::Fifo => "a FIFO",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Directory => "a directory",
        FileType::Socket => "a socket",
        FileType::Symlink => "a symbolic link",
        _ => "not a regular file",
    }
}

/// A range of a [`CodeFile`] read in order (`io::Read`), for streaming decompression.
#[derive(Debug)]
pub(crate) struct Stream<'f> {
    file: &'f CodeFile,
    at: u64,
    end: u64,
}

impl io::Read for Stream<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = (self.end - self.at).min(buf.len() as u64) as usize;
        if n == 0 {
            return Ok(0);
        }
        self.file.file.read_exact_at(&mut buf[..n], self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

/// Bytes of a string table read at once for [`object::ReadRef::read_bytes_at_until`].
const STRING_CHUNK: u64 = 64 << 10;
/// Longest string served (a kernel name, a section name).
const STRING_MAX: u64 = 4096;

/// A window of a [`CodeFile`] as `object` reads ELF files (`object::ReadRef`).
///
/// Each range it asks for is read once (`pread`) and kept while the view lives; strings are read in
/// chunks. Every read is checked against the window and charged to a budget, so a header claiming a
/// gigabyte table is an error, not a gigabyte.
pub(crate) struct Bounded<'f> {
    file: &'f CodeFile,
    base: u64,
    len: u64,
    budget: Cell<u64>,
    bufs: FrozenMap<(u64, u64), Box<[u8]>>,
    chunks: FrozenMap<u64, Box<[u8]>>,
    strings: FrozenMap<u64, Box<[u8]>>,
}

impl<'f> Bounded<'f> {
    /// The bytes `base..base + len` of `file` (a code object inside a bundle, or the whole file), reading
    /// at most `budget` bytes.
    pub(crate) fn new(file: &'f CodeFile, base: u64, len: u64, budget: u64) -> Self {
        let len = len.min(file.len.saturating_sub(base));
        Self {
            file,
            base,
            len,
            budget: Cell::new(budget),
            bufs: FrozenMap::new(),
            chunks: FrozenMap::new(),
            strings: FrozenMap::new(),
        }
    }

    /// Reads `size` bytes at `offset` of the window into a new buffer, charged to the budget.
    fn fetch(&self, offset: u64, size: u64) -> std::result::Result<Box<[u8]>, ()> {
        let end = offset.checked_add(size).ok_or(())?;
        if end > self.len {
            return Err(());
        }
        let left = self.budget.get().checked_sub(size).ok_or(())?;
        self.budget.set(left);
        let mut buf = vec![0; usize::try_from(size).map_err(|_too_big| ())?];
        self.file.read_exact_at(self.base + offset, &mut buf).map_err(|_unread| ())?;
        Ok(buf.into_boxed_slice())
    }

    /// The string starting at `start` and ending before `delimiter`, within `limit`, from the chunk that
    /// holds it (or a read of its own when it crosses a chunk's end).
    fn string(&self, start: u64, limit: u64, delimiter: u8) -> std::result::Result<&[u8], ()> {
        let chunk_at = start - start % STRING_CHUNK;
        let chunk = if let Some(c) = self.chunks.get(&chunk_at) {
            c
        } else {
            let size = STRING_CHUNK.min(self.len.saturating_sub(chunk_at));
            self.chunks.insert(chunk_at, self.fetch(chunk_at, size)?)
        };
        let from = (start - chunk_at) as usize;
        let upto = ((limit - chunk_at) as usize).min(chunk.len());
        if let Some(bytes) = chunk.get(from..upto)
            && let Some(end) = memchr::memchr(delimiter, bytes)
        {
            return Ok(&bytes[..end]);
        }
        // Crosses the chunk's end: one read of its own, at most STRING_MAX bytes.
        let own = if let Some(s) = self.strings.get(&start) {
            s
        } else {
            let size = STRING_MAX.min(limit - start);
            self.strings.insert(start, self.fetch(start, size)?)
        };
        let end = memchr::memchr(delimiter, own).ok_or(())?;
        Ok(&own[..end])
    }
}

impl<'a> object::ReadRef<'a> for &'a Bounded<'_> {
    fn len(self) -> std::result::Result<u64, ()> {
        Ok(self.len)
    }

    fn read_bytes_at(self, offset: u64, size: u64) -> std::result::Result<&'a [u8], ()> {
        if size == 0 {
            return Ok(&[]);
        }
        if let Some(b) = self.bufs.get(&(offset, size)) {
            return Ok(b);
        }
        Ok(self.bufs.insert((offset, size), self.fetch(offset, size)?))
    }

    fn read_bytes_at_until(self, range: std::ops::Range<u64>, delimiter: u8) -> std::result::Result<&'a [u8], ()> {
        if range.is_empty() || range.end > self.len {
            return Err(());
        }
        self.string(range.start, range.end, delimiter)
    }
}

mod reader;
#[cfg(test)]
mod tests;
