//! What `/proc` says of processes, read with the `procfs` crate.
//!
//! A leaf: the process table, the library
//! finder, the kernel table, Ollama discovery and the recording session read processes through
//! [`Procs`], so a test can hand them a made-up process table.

use std::{collections::HashMap, os::fd::OwnedFd, path::PathBuf, sync::LazyLock};

use rustix::fs::{Mode, OFlags};

/// The fields of `/proc/PID/stat` tracer uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stat {
    pub(crate) ppid: u32,
    /// Clock ticks since boot: with the pid, names one process across pid reuse.
    pub(crate) start_time: u64,
    pub(crate) comm: String,
}

/// One file mapping of `/proc/PID/maps` (anonymous, pseudo and deleted mappings are left out).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MapsEntry {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) offset: u64,
    /// The file's device as `st_dev` encodes it (glibc's makedev), and its inode: no stat needed.
    pub(crate) dev: u64,
    pub(crate) inode: u64,
    /// The path as the process sees it.
    pub(crate) path: String,
}

impl MapsEntry {
    /// The file name without its directory.
    pub(crate) fn file_name(&self) -> &str {
        super::basename(&self.path)
    }
}

/// A process table: the live one ([`LIVE`]) or a test's.
pub(crate) trait Procs {
    /// None when the process is gone (a zombie included).
    fn stat(&self, pid: u32) -> Option<Stat>;
    /// Empty when the process is gone or is a kernel thread.
    fn argv(&self, pid: u32) -> Vec<String>;
    /// None when the process is gone, has no address space (a zombie, a kernel thread), or its exit
    /// cut the read short.
    fn maps(&self, pid: u32) -> Option<Vec<MapsEntry>>;
    /// Every process now.
    fn pids(&self) -> Vec<u32>;
    fn exe(&self, pid: u32) -> Option<PathBuf>;
    /// What a file descriptor points to (`/dev/kfd`).
    fn fd_target(&self, pid: u32, fd: u32) -> Option<String>;
    /// Whether the process sees the same mounts as the tracer (then its paths open from here).
    fn same_mount_ns(&self, pid: u32) -> bool;

    /// The process's working directory, as its link reads (None: gone, or not readable).
    fn cwd(&self, _pid: u32) -> Option<String> {
        None
    }

    /// The regular files of directory `dir` as the process sees it (inside its root), at most `max` entries
    /// read, and whether the listing was cut ([`crate::os::files::Root::list_files`]): only where the
    /// process itself may list it (its effective user and groups); the sentence why it was not listed.
    fn list_files(&self, _pid: u32, dir: &str, _max: usize) -> Result<(Vec<String>, bool), String> {
        Err(format!("{dir}: not listed"))
    }

    /// The size of the regular file at `path` as the process sees it (inside its root); None when it is not
    /// one or cannot be opened.
    fn file_size(&self, _pid: u32, _path: &str) -> Option<u64> {
        None
    }

    fn is_running(&self, pid: u32) -> bool {
        self.stat(pid).is_some()
    }

    /// Whether the process is a kernel thread (it runs no program of its own).
    fn is_kernel_thread(&self, _pid: u32) -> bool {
        false
    }

    /// Every live descendant of `roots`, in pid order.
    fn descendants(&self, roots: &[u32]) -> Vec<u32> {
        let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
        for pid in self.pids() {
            if let Some(s) = self.stat(pid) {
                children.entry(s.ppid).or_default().push(pid);
            }
        }
        let mut out = Vec::new();
        let mut stack: Vec<u32> = roots.to_vec();
        while let Some(p) = stack.pop() {
            for &c in children.get(&p).into_iter().flatten() {
                if !roots.contains(&c) && !out.contains(&c) {
                    out.push(c);
                    stack.push(c);
                }
            }
        }
        out.sort_unstable();
        out
    }
}

/// The machine's own `/proc`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Live;

pub(crate) static LIVE: Live = Live;

/// The real uid of a live process (`/proc/PID/status`, as `list_files` reads its credentials); None when it
/// has ended.
pub(crate) fn real_uid(pid: u32) -> Option<u32> {
    Some(process(pid)?.status().ok()?.ruid)
}

fn process(pid: u32) -> Option<procfs::process::Process> {
    procfs::process::Process::new(i32::try_from(pid).ok()?).ok()
}

fn mount_ns(p: &procfs::process::Process) -> Option<u64> {
    p.namespaces().ok()?.0.get(std::ffi::OsStr::new("mnt")).map(|n| n.identifier)
}

/// glibc's makedev: how `st_dev` encodes (major, minor).
const fn makedev(major: u64, minor: u64) -> u64 {
    ((major & 0xfff) << 8) | ((major & !0xfff) << 32) | (minor & 0xff) | ((minor & !0xff) << 12)
}

/// One line of a maps table when it maps a file: `start-end perms offset major:minor inode path`, the
/// path padded to its column; None for anonymous and pseudo mappings, deleted files and lines of another
/// shape.
fn maps_line(line: &str) -> Option<MapsEntry> {
    let mut fields = line.splitn(6, ' ');
    let (range, _perms, offset, dev, inode) =
        (fields.next()?, fields.next()?, fields.next()?, fields.next()?, fields.next()?);
    let path = fields.next()?.trim_start_matches(' ');
    if !path.starts_with('/') || path.ends_with(" (deleted)") {
        return None;
    }
    let (start, end) = range.split_once('-')?;
    let (major, minor) = dev.split_once(':')?;
    let hex = |s: &str| u64::from_str_radix(s, 16).ok();
    Some(MapsEntry {
        start: hex(start)?,
        end: hex(end)?,
        offset: hex(offset)?,
        dev: makedev(hex(major)?, hex(minor)?),
        inode: inode.parse().ok()?,
        path: path.to_owned(),
    })
}

/// Most bytes of one `/proc` file read (a process with the kernel's maximum of 65 530 mappings has a few
/// MiB of maps; its command line is at most a few MiB).
pub(crate) const MAX_PROC_FILE: u64 = 64 << 20;

/// A `/proc/PID/...` file, at most [`MAX_PROC_FILE`] bytes (never a wait: procfs answers at once).
fn read_proc(pid: u32, name: &str) -> Option<Vec<u8>> {
    read_to_end(std::fs::File::open(format!("/proc/{pid}/{name}")).ok()?, Vec::new())
}

/// The nice value the recorder's time-critical threads run at: the ring's drain, the session that names its
/// records and the early look at new processes' maps (each raises its own when it starts; threads started
/// after inherit it). A recorder at 0 is one thread among a user's many busy processes: against 64 processes
/// launching invented kernels on 2 cores it got 6 % of a core, its queue filled and 1.4 million records were
/// dropped, another user's among them; at -10 it took 8.9 s of CPU in 69 s, its queue peaked at 3.4 MB and
/// nothing was dropped (`flood::*`). The early look races processes that live milliseconds, so it must not
/// wait behind the session it outruns. Root may raise it; where it cannot (a container without
/// `CAP_SYS_NICE`), the footer says so (`recorder_priority_raised` 0).
pub(crate) const RECORDER_NICE: i32 = -10;

/// Raises the calling thread's priority to [`RECORDER_NICE`] (Linux's `setpriority(PRIO_PROCESS, 0)` is per
/// thread); whether it could.
pub(crate) fn raise_to_recorder_priority() -> bool {
    rustix::process::setpriority_process(None, RECORDER_NICE).is_ok()
}

/// The memory the kernel says is available for new allocations (`MemAvailable`), in bytes.
pub(crate) fn mem_available() -> Option<u64> {
    use procfs::Current as _;
    procfs::Meminfo::current().ok()?.mem_available
}

/// The most bytes of a command line a record keeps (its arguments and their separators).
///
/// A longer one is cut at an argument, and counted (`argv_cut`): any local user can give a process a 1 MB
/// command line.
pub(crate) const ARGV_KEPT: usize = 64 << 10;

/// Cuts `argv` to at most [`ARGV_KEPT`] bytes: whole arguments while they fit, the first argument itself
/// cut at a character boundary if it alone is longer. True when something was cut.
pub(crate) fn cap_argv(argv: &mut Vec<String>) -> bool {
    let mut bytes = 0usize;
    let kept = argv
        .iter()
        .take_while(|a| {
            bytes = bytes.saturating_add(a.len() + 1);
            bytes <= ARGV_KEPT
        })
        .count();
    if kept == argv.len() {
        return false;
    }
    if kept == 0
        && let Some(first) = argv.first_mut()
    {
        let mut end = ARGV_KEPT.saturating_sub(1).min(first.len());
        while !first.is_char_boundary(end) {
            end -= 1;
        }
        first.truncate(end);
        argv.truncate(1);
    } else {
        argv.truncate(kept);
    }
    true
}

/// The rest of an open `/proc` file after `start`, at most [`MAX_PROC_FILE`] bytes in all.
fn read_to_end(file: std::fs::File, mut start: Vec<u8>) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let left = MAX_PROC_FILE.saturating_sub(start.len() as u64);
    file.take(left).read_to_end(&mut start).ok()?;
    Some(start)
}

/// A process's `/proc/PID` directory: what is opened beneath it is of this process, never of another that
/// took its PID since (the kernel answers ESRCH once it is reaped).
fn proc_dir(pid: u32) -> Option<OwnedFd> {
    rustix::fs::open(format!("/proc/{pid}"), OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).ok()
}

/// A file beneath a `/proc/PID` directory, opened for reading.
fn open_at(dir: &OwnedFd, name: &str) -> Option<std::fs::File> {
    rustix::fs::openat(dir, name, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok().map(std::fs::File::from)
}

/// Whether this kernel ends a 64-bit process's maps with the gate area (x86-64's `[vsyscall]`, the one
/// line above the user half of the address space): tracer's own maps say, once.
static SHOWS_GATE: LazyLock<bool> =
    LazyLock::new(|| read_proc(std::process::id(), "maps").is_some_and(|t| ends_in_gate(&t)));

/// Whether a maps table's last line is the gate area: a start address in the kernel half.
fn ends_in_gate(text: &[u8]) -> bool {
    let text = text.strip_suffix(b"\n").unwrap_or(text);
    let last = text.rsplit(|&b| b == b'\n').next().unwrap_or(text);
    let start = last.iter().position(|&b| b == b'-').and_then(|dash| std::str::from_utf8(&last[..dash]).ok());
    start.and_then(|s| u64::from_str_radix(s, 16).ok()).is_some_and(|a| a >= 1 << 63)
}

/// Whether the process still has its address space: `statm`'s first field (its size) is not 0.
fn has_address_space(dir: &OwnedFd) -> bool {
    let statm = open_at(dir, "statm").and_then(|f| read_to_end(f, Vec::new()));
    statm.is_some_and(|s| s.split(u8::is_ascii_whitespace).next().is_some_and(|size| !size.is_empty() && size != b"0"))
}

/// The rest of a process's maps table after `start`, when the read saw the whole table. The kernel answers
/// a read of maps a page at a time; once the process's exit (or exec) has let go of the address space, the
/// next page is the end of the file: the table stops before its later mappings (the libraries, mapped
/// high), with nothing to say so. Measured: a process killed after the first page of its 25 KiB table
/// left a 4 KiB table. None then, as for a process that has ended. A whole table ends with the gate area
/// where the kernel shows one; elsewhere the address space is still there after the read (then it was
/// there for every page before).
fn whole_maps(dir: &OwnedFd, maps: std::fs::File, start: Vec<u8>) -> Option<Vec<u8>> {
    let text = read_to_end(maps, start)?;
    let whole = if *SHOWS_GATE { ends_in_gate(&text) } else { has_address_space(dir) };
    whole.then_some(text)
}

/// The fields of a `/proc/PID/stat` line tracer reads.
struct StatLine {
    state: char,
    ppid: u32,
    flags: u32,
    start_time: u64,
    comm: String,
}

/// Parses a stat line: `pid (comm) state ppid ...`, the command name between the first `(` and the last
/// `)` (it may hold spaces and parentheses of its own), fields numbered as proc(5) numbers them. None for
/// anything else. (procfs's own parser panics on some malformed lines: found by fuzzing.)
fn stat_line(text: &[u8]) -> Option<StatLine> {
    let text = std::str::from_utf8(text).ok()?;
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_owned();
    text.get(..open)?.trim().parse::<u32>().ok()?;
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // rest[0] is field 3 (state): field N is rest[N - 3].
    let field = |n: usize| rest.get(n - 3).copied();
    let mut state = field(3)?.chars();
    let (Some(state), None) = (state.next(), state.next()) else { return None };
    Some(StatLine {
        state,
        ppid: field(4)?.parse().ok()?,
        flags: field(9)?.parse().ok()?,
        start_time: field(22)?.parse().ok()?,
        comm,
    })
}

/// `/proc/PID/stat` as tracer reads it; None for a process that has ended (a zombie included) or text
/// that is not a stat line.
pub(crate) fn parse_stat(text: &[u8]) -> Option<Stat> {
    let s = stat_line(text)?;
    // A zombie (or a task being torn down) has ended: nothing of it can be traced or read any more.
    if matches!(s.state, 'Z' | 'X' | 'x') {
        return None;
    }
    Some(Stat { ppid: s.ppid, start_time: s.start_time, comm: s.comm })
}

/// `/proc/PID/maps` as tracer reads it: its file mappings.
///
/// tracer's own parser: procfs's panics on some paths a user can create (a file named `/SYSV` in a
/// container's root; found by fuzzing). The kernel escapes a newline in a path, so each line is one mapping.
pub(crate) fn parse_maps(text: &[u8]) -> Vec<MapsEntry> {
    String::from_utf8_lossy(text).lines().filter_map(maps_line).collect()
}

/// `/proc/PID/cmdline`: its NUL-separated arguments.
pub(crate) fn parse_cmdline(bytes: &[u8]) -> Vec<String> {
    let bytes = bytes.strip_suffix(b"\0").unwrap_or(bytes);
    if bytes.is_empty() {
        return Vec::new();
    }
    bytes.split(|&b| b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect()
}

impl Procs for Live {
    fn stat(&self, pid: u32) -> Option<Stat> {
        parse_stat(&read_proc(pid, "stat")?)
    }

    fn argv(&self, pid: u32) -> Vec<String> {
        read_proc(pid, "cmdline").map(|b| parse_cmdline(&b)).unwrap_or_default()
    }

    fn maps(&self, pid: u32) -> Option<Vec<MapsEntry>> {
        let dir = proc_dir(pid)?;
        Some(parse_maps(&whole_maps(&dir, open_at(&dir, "maps")?, Vec::new())?))
    }

    fn pids(&self) -> Vec<u32> {
        let Ok(all) = procfs::process::all_processes() else { return Vec::new() };
        all.flatten().filter_map(|p| u32::try_from(p.pid()).ok()).collect()
    }

    fn exe(&self, pid: u32) -> Option<PathBuf> {
        process(pid)?.exe().ok()
    }

    fn fd_target(&self, pid: u32, fd: u32) -> Option<String> {
        // The link's text as the kernel gives it (`/dev/kfd`, `anon_inode:[eventfd]`), never parsed.
        std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok().map(|p| p.to_string_lossy().into_owned())
    }

    fn cwd(&self, pid: u32) -> Option<String> {
        std::fs::read_link(format!("/proc/{pid}/cwd")).ok().map(|p| p.to_string_lossy().into_owned())
    }

    fn list_files(&self, pid: u32, dir: &str, max: usize) -> Result<(Vec<String>, bool), String> {
        let status = process(pid).and_then(|p| p.status().ok());
        let Some(status) = status else {
            return Err(format!("{dir}: its process's credentials could not be read: not listed"));
        };
        let gids = std::iter::once(status.egid).chain(status.groups).collect();
        let reader = crate::os::files::Reader { uid: status.euid, gids };
        let root = crate::os::files::Root::of(pid).map_err(|e| e.to_string())?;
        root.list_files(dir, max, &reader).map_err(|e| e.to_string())
    }

    fn file_size(&self, pid: u32, path: &str) -> Option<u64> {
        let root = crate::os::files::Root::of(pid).ok()?;
        root.open(path).ok().map(|f| f.len())
    }

    fn is_kernel_thread(&self, pid: u32) -> bool {
        // PF_KTHREAD in the task's flags (stat field 9).
        const PF_KTHREAD: u32 = 0x0020_0000;
        read_proc(pid, "stat").and_then(|t| stat_line(&t)).is_some_and(|s| s.flags & PF_KTHREAD != 0)
    }

    fn same_mount_ns(&self, pid: u32) -> bool {
        let mine = procfs::process::Process::myself().ok().and_then(|p| mount_ns(&p));
        mine.is_some() && process(pid).and_then(|p| mount_ns(&p)) == mine
    }
}

/// The value of environment variable `name` in process `pid` (its `environ`, as it was at its exec).
pub(crate) fn env_var(pid: u32, name: &str) -> Option<String> {
    let bytes = read_proc(pid, "environ")?;
    let prefix = format!("{name}=");
    bytes
        .split(|&b| b == 0)
        .find_map(|kv| kv.strip_prefix(prefix.as_bytes()).map(|v| String::from_utf8_lossy(v).into_owned()))
}

/// The tracer's own peak resident memory (`VmHWM`), in KiB.
pub(crate) fn own_peak_rss_kib() -> Option<u64> {
    procfs::process::Process::myself().ok()?.status().ok()?.vmhwm
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_real_uid_is_read_from_status() {
        assert_eq!(real_uid(std::process::id()), Some(rustix::process::getuid().as_raw()));
        assert_eq!(real_uid(u32::MAX), None);
    }

    use super::*;

    #[test]
    fn command_lines_are_cut_at_64_kib_at_an_argument() {
        let short: Vec<String> = ["python3", "app.py"].map(String::from).to_vec();
        let mut argv = short.clone();
        assert!(!cap_argv(&mut argv));
        assert_eq!(argv, short);
        // A 1 MB argument after two short ones: the short ones stay.
        let mut argv = vec!["sh".to_owned(), "-c".to_owned(), "x".repeat(1 << 20)];
        assert!(cap_argv(&mut argv));
        assert_eq!(argv, ["sh", "-c"]);
        // A 1 MB first argument (multi-byte characters): cut within it, at a character boundary.
        let mut argv = vec!["\u{e9}".repeat(1 << 19), "more".to_owned()];
        assert!(cap_argv(&mut argv));
        assert_eq!(argv.len(), 1);
        assert!(argv[0].len() < ARGV_KEPT && argv[0].len() > ARGV_KEPT - 4, "{}", argv[0].len());
        // Many arguments: at most ARGV_KEPT bytes with their separators.
        let mut argv = vec!["y".repeat(1000); 1000];
        assert!(cap_argv(&mut argv));
        assert_eq!(argv.len(), ARGV_KEPT / 1001);
    }

    #[test]
    fn maps_paths_are_parsed() {
        // As the kernel writes it: an anonymous mapping's line ends in a space.
        let maps = "\
55d0c0000000-55d0c0001000 r--p 00000000 08:01 123 /usr/bin/prog
7f0000000000-7f0000100000 r-xp 00010000 08:01 456 /home/u/lib/ollama/rocm/libamdhip64.so.6.1
7f0000200000-7f0000300000 rw-p 00000000 00:00 0 
7f0000300000-7f0000400000 r--p 00000000 00:00 0 [heap]
7f0000400000-7f0000500000 r--p 00000000 08:01 789 /tmp/with space/libx.so
7f0000500000-7f0000600000 r--p 00000000 08:01 790 /tmp/gone.so (deleted)
7f0000600000-7f0000700000 r--p 00000000 fe:00 791   /SYSV4.so.2
7f0000700000-7f0000800000 r--p 00000000 00:00 0   [anon:\u{e9}t\u{e9}]
not a maps line
";
        let mut paths: Vec<String> = parse_maps(maps.as_bytes()).into_iter().map(|e| e.path).collect();
        paths.sort();
        assert_eq!(
            paths,
            ["/SYSV4.so.2", "/home/u/lib/ollama/rocm/libamdhip64.so.6.1", "/tmp/with space/libx.so", "/usr/bin/prog"]
        );
    }

    #[test]
    fn the_gate_area_ends_a_whole_table() {
        let table = "55d0c0000000-55d0c0001000 r--p 00000000 08:01 123 /usr/bin/prog\n";
        let gate = "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n";
        assert!(ends_in_gate(format!("{table}{gate}").as_bytes()));
        assert!(ends_in_gate(gate.trim_end().as_bytes()));
        for cut in [table, "", "\n", "ffffffffff600000", "x-y\n", &gate[..10]] {
            assert!(!ends_in_gate(cut.as_bytes()), "{cut:?}");
        }
        // This kernel (x86-64, vsyscall emulated or not) shows its gate area at the end of this very table.
        if cfg!(target_arch = "x86_64") {
            assert!(*SHOWS_GATE);
        }
    }

    #[test]
    fn a_maps_read_cut_short_by_the_exit_is_no_table() {
        use std::io::Read as _;
        // A program at a path so long that its table is several pages: each line of its own file holds it.
        let mut dir = std::env::temp_dir().join(format!("tracer-proc-{}", std::process::id()));
        let top = dir.clone();
        for i in 0..14 {
            dir.push(format!("{i:0>200}"));
        }
        std::fs::create_dir_all(&dir).unwrap();
        let prog = dir.join("sleep");
        std::fs::copy("/bin/sleep", &prog).unwrap();
        let mut child = std::process::Command::new(&prog).arg("30").spawn().unwrap();
        let pid = child.id();
        // Until the loader has mapped it (its table then ends with the C library and the gate area).
        let dir_fd = proc_dir(pid).unwrap();
        let whole = (0..500)
            .find_map(|_| {
                std::thread::sleep(std::time::Duration::from_millis(10));
                let text = whole_maps(&dir_fd, open_at(&dir_fd, "maps")?, Vec::new())?;
                parse_maps(&text).iter().any(|m| m.path.contains("libc.so")).then_some(text)
            })
            .expect("the child's whole table");
        assert!(whole.len() > 3 * 4096, "{} bytes", whole.len());
        assert!(has_address_space(&dir_fd));

        // One page read, then the process is killed: the rest of the read is the end of the file.
        let mut maps = open_at(&dir_fd, "maps").unwrap();
        let mut first = vec![0; 4096];
        let n = maps.read(&mut first).unwrap();
        first.truncate(n);
        assert!(n > 0 && n < whole.len());
        child.kill().unwrap();
        // A zombie, not reaped yet: its directory is still there.
        while LIVE.stat(pid).is_some() {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!has_address_space(&dir_fd));
        assert_eq!(whole_maps(&dir_fd, maps, first.clone()).map(|t| t.len()), None);
        // What the cut read holds is a table missing its libraries, which is why it is refused.
        let mut rest = first;
        open_at(&dir_fd, "maps").unwrap().read_to_end(&mut rest).unwrap();
        assert!(!parse_maps(&rest).iter().any(|m| m.path.contains("libc.so")));
        assert_eq!(LIVE.maps(pid), None);
        child.wait().unwrap();
        std::fs::remove_dir_all(top).unwrap();
    }

    #[test]
    fn command_lines_and_stat_lines() {
        assert_eq!(parse_cmdline(b"ollama\0serve\0"), ["ollama", "serve"]);
        assert_eq!(parse_cmdline(b""), Vec::<String>::new());
        assert_eq!(parse_cmdline(b"a\0\0b"), ["a", "", "b"]);
        let line = b"42 (my prog) S 7 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 12345 1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
        assert_eq!(parse_stat(line), Some(Stat { ppid: 7, start_time: 12345, comm: "my prog".into() }));
        assert_eq!(parse_stat(b"not a stat line"), None);
        let zombie = String::from_utf8_lossy(line).replace(") S ", ") Z ");
        assert_eq!(parse_stat(zombie.as_bytes()), None);
        // A command name with parentheses and spaces of its own; lines the fuzzer found.
        let odd = String::from_utf8_lossy(line).replace("(my prog)", "(a) b (c)");
        assert_eq!(parse_stat(odd.as_bytes()).map(|s| s.comm).as_deref(), Some("a) b (c"));
        for bad in [&b"("[..], b")(", b"1 (x)", b"1 (x) S", b"(x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19"] {
            assert_eq!(parse_stat(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        let stat = LIVE.stat(me).unwrap();
        assert!(stat.start_time > 0 && stat.ppid > 0);
        assert!(!LIVE.argv(me).is_empty());
        let maps = LIVE.maps(me).unwrap();
        let exe = std::fs::canonicalize("/proc/self/exe").unwrap();
        let own = maps.iter().find(|m| std::path::Path::new(&m.path) == exe).expect("own executable mapped");
        let meta = std::fs::metadata(&exe).unwrap();
        use std::os::unix::fs::MetadataExt as _;
        assert_eq!((own.dev, own.inode), (meta.dev(), meta.ino()));
        assert!(LIVE.same_mount_ns(me));
        assert!(LIVE.pids().contains(&me));
        assert!(LIVE.descendants(&[stat.ppid]).contains(&me));
        assert!(!LIVE.is_kernel_thread(me));
        // kthreadd (pid 2 outside a PID namespace) has no program: its cmdline is empty.
        if let Some(k) = LIVE.pids().into_iter().find(|&p| LIVE.stat(p).is_some_and(|s| s.comm == "kthreadd")) {
            assert!(LIVE.is_kernel_thread(k) && LIVE.argv(k).is_empty());
        }
    }
}
