//! `tracer record`: finds the libraries, creates the output, and runs one [`session`].
//!
//! The session runs the data path end to end, probes → [`crate::ring`] → [`crate::decode`] → [`crate::attribute`] → [`crate::trace::Writer`].

mod command;
mod session;
mod watch;

use std::{
    collections::BTreeMap,
    fs::File,
    os::fd::AsFd as _,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Result, bail};

use crate::{
    attach::{self, ProbeMode},
    libs::{self, CUDA_DRIVER, HIP_RUNTIME, LibCopy},
    ollama, output,
    proc::{LIVE, Procs as _},
    trace::Writer,
};

pub struct RecordArgs {
    pub output: PathBuf,
    /// Follow Ollama: its server (found, or these PIDs) and every runner it starts.
    pub ollama: bool,
    pub ollama_pids: Vec<u32>,
    pub models_dir: Option<PathBuf>,
    pub force: bool,
    pub pids: Vec<u32>,
    pub libs: Vec<PathBuf>,
    pub duration: Option<Duration>,
    pub command: Vec<String>,
    pub ring_bytes: u32,
    pub quiet: bool,
    pub probe_mode: ProbeMode,
    /// Also probe libcudart's launch and registration (a second trap per CUDA launch).
    pub cuda_runtime: bool,
    /// Testing aid: how long to leave the ring unread after attaching (provokes overflow).
    pub read_delay: Duration,
    /// Benchmarking aid: release the probes before exiting instead of in the background.
    pub sync_teardown: bool,
    /// Time the eBPF programs' runs in the kernel and write the figures to the footer.
    pub program_stats: bool,
}

/// `CLOCK_MONOTONIC` in nanoseconds: the clock of `bpf_ktime_get_ns`, so of every `ts` in a trace.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer to a timespec.
    unsafe {
        libc::clock_gettime(clock, &raw mut t);
    }
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Creates the output: `-` is standard output.
///
/// A path must be a new regular file, or with `force` an existing regular file that is not read by this
/// run (never a link, a device, a pipe or a directory). Mode 0600: a trace shows what a process did.
pub fn create_output(path: &Path, force: bool) -> Result<File> {
    if output::Dest::parse(path) == output::Dest::Stdout {
        let fd = std::io::stdout().as_fd().try_clone_to_owned()?;
        return Ok(File::from(fd));
    }
    output::check(path, force, &[])?;
    if force {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                bail!("cannot replace {} ({e}): choose another path with -o", path.display())
            }
            _ => {}
        }
    }
    output::create_new(path)
}

/// Removes a half-made output file when recording fails before it started.
struct OutputGuard<'a> {
    path: &'a Path,
    armed: bool,
}

impl Drop for OutputGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            drop(std::fs::remove_file(self.path));
        }
    }
}

/// The runtime copies to probe from the start: those given with --lib; else those the targets map, the
/// Ollama bundles, and (for a runtime found nowhere else) the usual places. `later`: copies may come
/// later (an Ollama server not started yet brings its own), so none now is no error.
fn find_libraries(args: &RecordArgs, targets: &[u32], servers: &[u32], later: bool) -> Result<Vec<LibCopy>> {
    if !args.libs.is_empty() {
        return libs::from_user_paths(&args.libs);
    }
    let mut all = Vec::new();
    for runtime in runtimes(args) {
        let mut copies: Vec<LibCopy> = targets.iter().flat_map(|&p| libs::mapped_by(p, runtime)).collect();
        // Ollama's runners dlopen the bundle's copy after they start: attach to it before they do.
        for &server in servers {
            if let Some((root, dirs)) = ollama::bundle_dirs(&LIVE, server) {
                for dir in dirs {
                    copies.extend(libs::in_dir(&root, &dir, runtime));
                }
            }
        }
        if copies.is_empty() {
            copies = libs::usual_places(runtime);
        }
        all.extend(copies);
    }
    let mut seen = std::collections::BTreeSet::new();
    all.retain(|c| seen.insert((c.dev, c.inode)));
    use tracer_common::api::Library;
    if !later && !all.iter().any(|c| matches!(c.runtime(), Library::Hip | Library::Cuda)) {
        bail!(
            "neither {HIP_RUNTIME} nor {CUDA_DRIVER} found (not mapped by the target, nor in Ollama's bundles, /opt/rocm*/lib, the NVIDIA driver's directories or the system library path): give its path with --lib PATH"
        );
    }
    Ok(all)
}

/// The runtime libraries to probe, by file-name prefix. libcudart is probed for its API view
/// (`--cuda-runtime`), and on a late attach (`--pid`) to learn the names of driver functions the process
/// resolved before it (its launches are then not written, see [`crate::attribute`]).
fn runtimes(args: &RecordArgs) -> Vec<&'static str> {
    let mut r = libs::RUNTIMES.to_vec();
    if args.cuda_runtime || !args.pids.is_empty() {
        r.push(libs::CUDA_RUNTIME);
    }
    r
}

/// Records until a stop condition; returns the started command's exit status (the shell's convention),
/// if a command was started.
pub fn run(args: RecordArgs) -> Result<Option<u8>> {
    attach::preflight()?;
    for &pid in args.pids.iter().chain(&args.ollama_pids) {
        if !LIVE.is_running(pid) {
            bail!("process {pid} is not running: check the PID (ps -p {pid})");
        }
        if LIVE.is_kernel_thread(pid) {
            bail!(
                "process {pid} is a kernel thread, which calls no GPU library: give the PID of a program (ps -p {pid})"
            );
        }
    }
    // --ollama without PIDs: the servers running now, and any `ollama serve` that starts later (a first
    // start or a restart), followed from its exec.
    let watch_ollama = args.ollama && args.ollama_pids.is_empty();
    let servers = if !args.ollama {
        Vec::new()
    } else if !args.ollama_pids.is_empty() {
        args.ollama_pids.clone()
    } else {
        ollama::find_servers(&LIVE)
    };
    // The processes traced from the start: those named, the Ollama servers, and all their descendants.
    let mut targets: Vec<u32> = args.pids.iter().chain(&servers).copied().collect();
    targets.extend(LIVE.descendants(&targets));
    targets.sort_unstable();
    targets.dedup();
    let copies = find_libraries(&args, &targets, &servers, watch_ollama)?;
    let file = create_output(&args.output, args.force)?;
    let to_stdout = output::Dest::parse(&args.output) == output::Dest::Stdout;
    let mut guard = OutputGuard { path: &args.output, armed: !to_stdout };
    let compress = !to_stdout && args.output.extension().is_some_and(|e| e == "zst");
    let writer = Writer::new(file, compress)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let (mut session, child) =
            session::Session::set_up(&args, Targets { pids: targets, servers, watch_ollama }, &copies, writer)?;
        // From here on the file is a trace, whatever ends the recording; one that never started leaves none.
        guard.armed = false;
        let ended = session.record(child).await?;
        session.finish(ended)
    })
}

/// The processes traced from the start, and the Ollama servers among them.
struct Targets {
    pids: Vec<u32>,
    servers: Vec<u32>,
    /// Follow any `ollama serve` that starts during the recording.
    watch_ollama: bool,
}

fn units() -> BTreeMap<String, String> {
    [
        ("ts", "CLOCK_MONOTONIC nanoseconds (see start_mono_ns)"),
        ("dur", "nanoseconds from the call's entry to its return"),
        (
            "grid",
            "per launch, in grid_unit: blocks for hipLaunchKernel-style calls, work-items for hipExtModuleLaunchKernel",
        ),
        ("block", "work-items per block"),
        ("shmem", "bytes of dynamic shared memory (LDS)"),
        ("size", "bytes"),
        ("start_time", "clock ticks since boot (/proc/PID/stat field 22)"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}
