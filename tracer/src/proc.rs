//! What `/proc` says of processes, read with the `procfs` crate.
//!
//! A leaf: the process table, the library
//! finder, the kernel table, Ollama discovery and the recording session read processes through
//! [`Procs`], so a test can hand them a made-up process table.

use std::{collections::HashMap, path::PathBuf};

/// The fields of `/proc/PID/stat` tracer uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stat {
    pub ppid: u32,
    /// Clock ticks since boot: with the pid, names one process across pid reuse.
    pub start_time: u64,
    pub comm: String,
}

/// One file mapping of `/proc/PID/maps` (anonymous, pseudo and deleted mappings are left out).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapsEntry {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    /// The file's device as `st_dev` encodes it (glibc's makedev), and its inode: no stat needed.
    pub dev: u64,
    pub inode: u64,
    /// The path as the process sees it.
    pub path: String,
}

impl MapsEntry {
    /// The file name without its directory.
    pub fn file_name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }
}

/// A process table: the live one ([`LIVE`]) or a test's.
pub trait Procs {
    /// None when the process is gone (a zombie included).
    fn stat(&self, pid: u32) -> Option<Stat>;
    /// Empty when the process is gone or is a kernel thread.
    fn argv(&self, pid: u32) -> Vec<String>;
    fn maps(&self, pid: u32) -> Option<Vec<MapsEntry>>;
    /// Every process now.
    fn pids(&self) -> Vec<u32>;
    fn exe(&self, pid: u32) -> Option<PathBuf>;
    /// What a file descriptor points to (`/dev/kfd`).
    fn fd_target(&self, pid: u32, fd: u32) -> Option<String>;
    /// Whether the process sees the same mounts as the tracer (then its paths open from here).
    fn same_mount_ns(&self, pid: u32) -> bool;

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
pub struct Live;

pub static LIVE: Live = Live;

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

/// The file mappings of a parsed maps table.
fn file_mappings(maps: procfs::process::MemoryMaps) -> Vec<MapsEntry> {
    maps.into_iter()
        .filter_map(|m| {
            let procfs::process::MMapPath::Path(path) = m.pathname else { return None };
            let path = path.to_str()?;
            if !path.starts_with('/') || path.ends_with(" (deleted)") {
                return None;
            }
            Some(MapsEntry {
                start: m.address.0,
                end: m.address.1,
                offset: m.offset,
                dev: makedev(m.dev.0 as u64, m.dev.1 as u64),
                inode: m.inode,
                path: path.to_owned(),
            })
        })
        .collect()
}

impl Procs for Live {
    fn stat(&self, pid: u32) -> Option<Stat> {
        let s = process(pid)?.stat().ok()?;
        // A zombie (or a task being torn down) has ended: nothing of it can be traced or read any more.
        if matches!(s.state, 'Z' | 'X' | 'x') {
            return None;
        }
        Some(Stat { ppid: u32::try_from(s.ppid).unwrap_or(0), start_time: s.starttime, comm: s.comm })
    }

    fn argv(&self, pid: u32) -> Vec<String> {
        process(pid).and_then(|p| p.cmdline().ok()).unwrap_or_default()
    }

    fn maps(&self, pid: u32) -> Option<Vec<MapsEntry>> {
        Some(file_mappings(process(pid)?.maps().ok()?))
    }

    fn pids(&self) -> Vec<u32> {
        let Ok(all) = procfs::process::all_processes() else { return Vec::new() };
        all.flatten().filter_map(|p| u32::try_from(p.pid()).ok()).collect()
    }

    fn exe(&self, pid: u32) -> Option<PathBuf> {
        process(pid)?.exe().ok()
    }

    fn fd_target(&self, pid: u32, fd: u32) -> Option<String> {
        match process(pid)?.fd_from_fd(i32::try_from(fd).ok()?).ok()?.target {
            procfs::process::FDTarget::Path(p) => Some(p.display().to_string()),
            other => Some(format!("{other:?}")),
        }
    }

    fn is_kernel_thread(&self, pid: u32) -> bool {
        // PF_KTHREAD in the task's flags (stat field 9).
        const PF_KTHREAD: u32 = 0x0020_0000;
        process(pid).and_then(|p| p.stat().ok()).is_some_and(|s| s.flags & PF_KTHREAD != 0)
    }

    fn same_mount_ns(&self, pid: u32) -> bool {
        let mine = procfs::process::Process::myself().ok().and_then(|p| mount_ns(&p));
        mine.is_some() && process(pid).and_then(|p| mount_ns(&p)) == mine
    }
}

/// The tracer's own peak resident memory (`VmHWM`), in KiB.
pub fn own_peak_rss_kib() -> Option<u64> {
    procfs::process::Process::myself().ok()?.status().ok()?.vmhwm
}

#[cfg(test)]
mod tests {
    use procfs::FromBufRead as _;

    use super::*;

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
";
        let parsed = procfs::process::MemoryMaps::from_buf_read(maps.as_bytes()).unwrap();
        let mut paths: Vec<String> = file_mappings(parsed).into_iter().map(|e| e.path).collect();
        paths.sort();
        assert_eq!(paths, ["/home/u/lib/ollama/rocm/libamdhip64.so.6.1", "/tmp/with space/libx.so", "/usr/bin/prog"]);
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
