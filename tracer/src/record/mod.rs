//! The write wing: everything between the probes and the trace file.
//!
//! `tracer record` finds the libraries,
//! creates the output, and runs one `session`, which drives the data path end to end: [`attach`] (probe plan,
//! load, attach) → `ring` (a thread drains the ring buffer) → [`decode`] (bytes to the trace's events) →
//! [`attribute`] (process, library copy, kernel name: it asks [`names`] for kernel names, `process` and
//! [`ollama`] for the rest) → [`crate::trace::Writer`]. `libs` and `ldso` find the copies to probe.

pub(crate) mod attach;
pub mod attribute;
pub mod decode;
mod ldso;
mod libs;
pub mod names;
pub mod ollama;
mod process;
mod ring;

mod command;
mod entries;
mod live;
mod ready;
mod session;
mod signals;
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
    os::{
        clock::realtime_ns,
        output,
        proc::{LIVE, Procs as _},
    },
    record::{attach::ProbeMode, libs::LibCopy},
    trace::{
        self, GpuLibrary, Rotation, Writer,
        runtimes::{self, CUDA_DRIVER, HIP_RUNTIME, VULKAN_LOADER},
    },
};

pub struct RecordArgs {
    pub(crate) output: PathBuf,
    /// Follow Ollama: its server (found, or these PIDs) and every runner it starts.
    pub(crate) ollama: bool,
    pub(crate) ollama_pids: Vec<u32>,
    pub(crate) models_dir: Option<PathBuf>,
    pub(crate) force: bool,
    pub(crate) pids: Vec<u32>,
    pub(crate) libs: Vec<PathBuf>,
    pub(crate) duration: Option<Duration>,
    pub(crate) command: Vec<String>,
    pub(crate) ring_bytes: u32,
    pub(crate) quiet: bool,
    /// Written once the probes are live, removed at the stop (`--ready-file`).
    pub(crate) ready_file: Option<PathBuf>,
    pub(crate) probe_mode: ProbeMode,
    /// Also probe libcudart's launch and registration (a second trap per CUDA launch).
    pub(crate) cuda_runtime: bool,
    /// Testing aid: how long to leave the ring unread after attaching (provokes overflow).
    pub(crate) read_delay: Duration,
    /// Benchmarking aid: release the probes before exiting instead of in the background.
    pub(crate) sync_teardown: bool,
    /// Time the eBPF programs' runs in the kernel and write the figures to the footer.
    pub(crate) program_stats: bool,
    /// `--ollama` also trusts a server whose executable this uid owns (root's always are).
    pub(crate) ollama_user: Option<u32>,
    /// Keep only `argv[0]` of processes that are not targets (`--private-argv`; the default system-wide).
    pub(crate) private_argv: bool,
    /// System-wide: keep every process's whole command line (`--full-argv`).
    pub(crate) full_argv: bool,
    /// Serve live metrics for Prometheus at this address (`--metrics`).
    pub(crate) metrics: Option<std::net::SocketAddr>,
    /// Leave the `comm` label out of the metrics (`--metrics-no-comm`).
    pub(crate) metrics_no_comm: bool,
    /// Start a new file past this many bytes (`--rotate-size`) or this age (`--rotate-every`).
    pub(crate) rotate_size: Option<u64>,
    pub(crate) rotate_every: Option<Duration>,
}

impl RecordArgs {
    /// Whether the recording is cut into parts (`--rotate-size`, `--rotate-every`).
    pub(crate) const fn rotates(&self) -> bool {
        self.rotate_size.is_some() || self.rotate_every.is_some()
    }

    /// Whether processes not followed keep `argv[0]` alone: asked (`--private-argv`), or recording every
    /// process without `--full-argv`.
    pub(crate) const fn argv_private(&self, filter_by_pid: bool) -> bool {
        self.private_argv || (!filter_by_pid && !self.full_argv)
    }
}

/// The trace file of a recording: new, or (with `--force` over an existing file) written beside the old
/// one under a temporary name and moved over it only once the recording has started, so that a recording
/// that never starts leaves the old trace as it was. A recording that never starts leaves no file.
pub(crate) struct TraceOutput {
    /// The temporary name while the old file stays (None: writing to the destination itself, or stdout).
    staged: Option<PathBuf>,
    dest: Option<PathBuf>,
    started: bool,
}

impl TraceOutput {
    /// Creates the output: `-` is standard output. A path must be a new regular file, or with `force` an
    /// existing regular file that is not read by this run (never a link, a device, a pipe or a
    /// directory). Mode 0600: a trace shows what a process did.
    pub(crate) fn create(path: &Path, force: bool) -> Result<(Self, File)> {
        if output::Dest::parse(path) == output::Dest::Stdout {
            let fd = std::io::stdout().as_fd().try_clone_to_owned()?;
            return Ok((Self { staged: None, dest: None, started: true }, File::from(fd)));
        }
        output::check(path, force, &[])?;
        if std::fs::symlink_metadata(path).is_ok() {
            let staged = output::staged_name(path)?;
            let file = output::create_new(&staged)?;
            return Ok((Self { staged: Some(staged), dest: Some(path.to_path_buf()), started: false }, file));
        }
        let file = output::create_new(path)?;
        Ok((Self { staged: None, dest: Some(path.to_path_buf()), started: false }, file))
    }

    /// The recording has started: the new trace takes the destination's name (the writer keeps its open
    /// file).
    pub(crate) fn started(&mut self) -> Result<()> {
        if let (Some(staged), Some(dest)) = (&self.staged, &self.dest) {
            output::check(dest, true, &[])?;
            std::fs::rename(staged, dest)
                .map_err(|e| anyhow::anyhow!("cannot replace {} ({e}): choose another path with -o", dest.display()))?;
        }
        self.started = true;
        Ok(())
    }
}

impl Drop for TraceOutput {
    /// A recording that never started leaves nothing: its new file, or its staged one, is removed.
    fn drop(&mut self) {
        if !self.started
            && let Some(p) = self.staged.as_ref().or(self.dest.as_ref())
        {
            drop(std::fs::remove_file(p));
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
        if copies.is_empty() {
            copies = libs::usual_places(runtime);
        }
        // Ollama's runners dlopen the bundle's copy after they start: attach to it before they do. The
        // bundle's copies are added to the others, never in their place (a runner may use the system's).
        for &server in servers {
            copies.extend(ollama::bundle_copies(server, runtime));
        }
        all.extend(copies);
    }
    let mut seen = std::collections::BTreeSet::new();
    all.retain(|c| seen.insert((c.dev, c.inode)));
    use tracer_common::api::Library;
    if !later && !all.iter().any(|c| matches!(c.runtime(), Library::Hip | Library::Cuda | Library::Vulkan)) {
        bail!(
            "none of {HIP_RUNTIME}, {CUDA_DRIVER} or {VULKAN_LOADER} found (not mapped by the target, nor in Ollama's bundles, /opt/rocm*/lib, the NVIDIA driver's directories or the system library path): give its path with --lib PATH"
        );
    }
    Ok(all)
}

/// The runtime libraries to probe, by file-name prefix. libcudart is probed for its API view
/// (`--cuda-runtime`), and on a late attach (`--pid`) to learn the names of driver functions the process
/// resolved before it (its launches are then not written, see [`crate::record::attribute`]).
fn runtimes(args: &RecordArgs) -> Vec<&'static str> {
    let mut r = runtimes::RUNTIMES.to_vec();
    if args.cuda_runtime || !args.pids.is_empty() {
        r.push(runtimes::CUDA_RUNTIME);
    }
    r
}

/// Records until a stop condition; returns the exit status (the shell's convention): the started
/// command's, or 128 + N when signal N stopped the recording.
pub fn run(args: RecordArgs) -> Result<Option<u8>> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        // Signals first: one that comes during the set-up (probes take seconds to attach) must not kill
        // tracer without a word, nor leave a half-made file.
        let mut signals = signals::Signals::install()?;
        let setup = prepare(&args)?;
        let to_stdout = output::Dest::parse(&args.output) == output::Dest::Stdout;
        let compress = !to_stdout && args.output.extension().is_some_and(|e| e == "zst");
        let rotation = args.rotates().then(|| Rotation {
            first: Rotation::part_path(&args.output, 0),
            max_bytes: args.rotate_size,
            every: args.rotate_every,
            force: args.force,
        });
        let (mut out, file) = TraceOutput::create(rotation.as_ref().map_or(&args.output, |r| &r.first), args.force)?;
        let mut writer = match rotation {
            Some(r) => Writer::rotating(file, compress, r, &args.output)?,
            None => Writer::new(file, compress)?,
        };
        let metrics = args.metrics.and_then(|addr| serve_metrics(addr, &args, &mut writer));
        let (mut session, child) = session::Session::set_up(&args, setup, writer)?;
        session.metrics = metrics;
        if let Some(sig) = signals.pending() {
            drop(out); // removes what was made
            if let Some(c) = &child {
                c.signal(libc::SIGKILL);
            }
            #[expect(clippy::print_stderr, reason = "the one sentence of an interrupted set-up")]
            let () = eprintln!(
                "tracer: interrupted while setting up ({}): nothing was recorded{}",
                signals::signal_name(sig),
                if to_stdout { String::new() } else { format!(", {} not written", args.output.display()) }
            );
            return Ok(Some(128u8.wrapping_add(sig as u8)));
        }
        // From here on the file is a trace, whatever ends the recording.
        out.started()?;
        let ended = session.record(child, &mut signals).await?;
        session.finish(ended)
    })
}

/// The metrics endpoint (`--metrics`), fed by the writer's tap. A port taken by someone else is no reason
/// to lose the recording (a service would restart in a loop): tracer says so and records without metrics.
#[expect(clippy::print_stderr, reason = "a recording without its metrics, or with them exposed, says so")]
fn serve_metrics(addr: std::net::SocketAddr, args: &RecordArgs, writer: &mut Writer) -> Option<live::LiveMetrics> {
    let live = std::sync::Arc::new(std::sync::Mutex::new(crate::read::metrics::Metrics::new(!args.metrics_no_comm)));
    match crate::read::metrics::Server::start(addr, std::sync::Arc::clone(&live)) {
        Ok(server) => {
            if !addr.ip().is_loopback() {
                eprintln!(
                    "tracer: warning: metrics are served on {addr}, which other machines may reach, and they name the traced processes and models; serve them on 127.0.0.1 unless that is meant"
                );
            }
            writer.set_tap(Box::new(crate::read::metrics::Tap(live)));
            Some(live::LiveMetrics { server })
        }
        Err(e) => {
            eprintln!("tracer: warning: {e:#}: recording without metrics (choose another port with --metrics)");
            None
        }
    }
}

/// What a recording checks and finds before it creates its file or attaches anything: the machine, the
/// processes named, the command (resolved, so a misspelled one is said at once), the library copies.
pub(crate) struct Setup {
    targets: Targets,
    copies: Vec<LibCopy>,
    /// The other GPU libraries the command will load, with what each is: those built on a runtime get their
    /// entry points counted before it starts.
    counted: Vec<(GpuLibrary, LibCopy)>,
    /// The command's program, resolved.
    program: Option<PathBuf>,
}

fn prepare(args: &RecordArgs) -> Result<Setup> {
    check_rotation(args)?;
    attach::preflight()?;
    let releasing = attach::releases_in_progress();
    if releasing > 0 && !args.quiet {
        #[expect(clippy::print_stderr, reason = "a start that may wait says why")]
        let () = eprintln!(
            "tracer: note: {releasing} earlier recording{} still releasing {} probes (the kernel frees them after grace periods): attaching may wait for them",
            if releasing == 1 { " is" } else { "s are" },
            if releasing == 1 { "its" } else { "their" }
        );
    }
    if let Some(path) = &args.ready_file {
        ready::check(path)?;
    }
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
    let program = match args.command.first() {
        Some(p) => Some(command::resolve(p)?),
        None => None,
    };
    // --ollama without PIDs: the servers running now, and any `ollama serve` that starts later (a first
    // start or a restart), followed from its exec.
    let watch_ollama = args.ollama && args.ollama_pids.is_empty();
    let servers = ollama_servers(args);
    // The processes traced from the start: those named, the Ollama servers, and all their descendants.
    let mut targets: Vec<u32> = args.pids.iter().chain(&servers).copied().collect();
    targets.extend(LIVE.descendants(&targets));
    targets.sort_unstable();
    targets.dedup();
    let mut copies = find_libraries(args, &targets, &servers, watch_ollama || program.is_some())?;
    let (runtimes, counted) = program.as_deref().map(|p| command_copies(args, p)).unwrap_or_default();
    if program.is_some() && args.libs.is_empty() {
        copies.extend(runtimes);
        let mut seen = std::collections::BTreeSet::new();
        copies.retain(|c| seen.insert((c.dev, c.inode)));
        use tracer_common::api::Library;
        // No runtime on this machine yet: the command's process life is recorded, and a runtime it opens
        // later (a bundled copy, a Python package's) is probed then, its calls before that unseen.
        if !copies.iter().any(|c| matches!(c.runtime(), Library::Hip | Library::Cuda | Library::Vulkan)) && !args.quiet
        {
            #[expect(clippy::print_stderr, reason = "a recording that starts without a runtime says so")]
            let () = eprintln!(
                "tracer: note: none of {HIP_RUNTIME}, {CUDA_DRIVER} or {VULKAN_LOADER} found (not among what the command loads, nor in /opt/rocm*/lib, the NVIDIA driver's directories or the system library path): recording the command's processes; a runtime it opens is probed then (give its path with --lib PATH to probe it from the start)"
            );
        }
    }
    Ok(Setup { targets: Targets { pids: targets, servers, watch_ollama }, copies, counted, program })
}

/// The `ollama serve` processes to follow from the start: those given, else those found whose executable
/// a trusted user owns.
fn ollama_servers(args: &RecordArgs) -> Vec<u32> {
    if !args.ollama {
        Vec::new()
    } else if !args.ollama_pids.is_empty() {
        args.ollama_pids.clone()
    } else {
        // A server found by its name is trusted only when root (or the user given) owns its executable:
        // any user can run a program called `ollama serve`.
        let mut found = ollama::find_servers(&LIVE);
        found.retain(|&pid| match ollama::trusted_server(pid, args.ollama_user) {
            Ok(()) => true,
            Err(why) => {
                #[expect(clippy::print_stderr, reason = "a server not followed is said, with why")]
                let () = eprintln!(
                    "tracer: warning: not following `ollama serve` pid {pid}: {why} (give --ollama-user to trust that user's Ollama)"
                );
                false
            }
        });
        found
    }
}

/// A rotated recording goes to files, and does not write over an earlier recording's parts unless forced.
fn check_rotation(args: &RecordArgs) -> Result<()> {
    if args.rotates() && output::Dest::parse(&args.output) == output::Dest::Stdout {
        bail!("a rotated recording is written to files: give -o NAME.jsonl.zst with --rotate-size or --rotate-every");
    }
    if args.rotates() && !args.force {
        let earlier = Rotation::earlier_parts(&args.output);
        if let Some(first) = earlier.first() {
            bail!(
                "{} and {} more part(s) of an earlier recording are there: move them away, or give --force to write over them",
                first.display(),
                earlier.len() - 1
            );
        }
    }
    Ok(())
}

/// The runtime copies a command will load, and the other GPU libraries it will load, found before it
/// starts as the dynamic loader would find them (its `DT_NEEDED` closure under the `LD_LIBRARY_PATH` and
/// runpaths it will have, and what lies beside it to be dlopened), so that a private copy is probed, and
/// a library's entry points counted, before the command's first instruction.
fn command_copies(args: &RecordArgs, program: &Path) -> (Vec<LibCopy>, Vec<(GpuLibrary, LibCopy)>) {
    let launch = ldso::launch(program, &args.command, |cmd, path| command::resolve_on(cmd, path).ok());
    let root = match &launch.root {
        Some(dir) => crate::os::files::Root::at(&dir.to_string_lossy()),
        None => crate::os::files::Root::host(),
    };
    let Ok(root) = root else { return (Vec::new(), Vec::new()) };
    let loaded = ldso::closure(&launch, &root);
    let runtimes = runtimes(args);
    let (mut probed, mut counted) = (Vec::new(), Vec::new());
    // The program itself is not a library.
    for p in loaded.objects.iter().skip(1) {
        let Some(name) = p.file_name().map(|n| n.to_string_lossy().into_owned()) else { continue };
        if runtimes.iter().any(|r| name.starts_with(r)) {
            probed.extend(libs::in_root(&root, p));
        } else if let Some(copy) = libs::in_root(&root, p)
            && let Some(gpu) = libs::gpu_library(&name, Some(&copy.file))
        {
            counted.push((gpu, copy));
        }
    }
    (probed, counted)
}

/// The processes traced from the start, and the Ollama servers among them.
struct Targets {
    pids: Vec<u32>,
    servers: Vec<u32>,
    /// Follow any `ollama serve` that starts during the recording.
    watch_ollama: bool,
}

/// The trace's first record: the recording's options, host and clocks.
fn header(
    args: &RecordArgs,
    targets: &Targets,
    filter_by_pid: bool,
    probes_per_process: bool,
    start_mono: u64,
    job_tracepoints: Vec<String>,
) -> trace::Header {
    trace::Header {
        format: trace::FORMAT.into(),
        schema: trace::SCHEMA,
        tracer_version: env!("CARGO_PKG_VERSION").into(),
        host: read_trimmed("/proc/sys/kernel/hostname"),
        kernel_release: read_trimmed("/proc/sys/kernel/osrelease"),
        start_unix_ns: realtime_ns(),
        start_mono_ns: start_mono,
        options: trace::Options {
            pids: args.pids.clone(),
            command: args.command.clone(),
            libs: args.libs.iter().map(|p| p.display().to_string()).collect(),
            duration_s: args.duration.map(|d| d.as_secs_f64()),
            filter: if filter_by_pid { trace::Filter::Pid } else { trace::Filter::All },
            ring_bytes: args.ring_bytes,
            ollama_servers: targets.servers.clone(),
            kernel_tracepoints: attach::gpu_tracepoint_groups(),
            job_tracepoints,
            lean: !args.probe_mode.probes_tallied(),
            private_argv: args.argv_private(filter_by_pid),
            probes_per_process,
        },
        units: units(),
        part: None,
    }
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path).map(|s| s.trim().to_owned()).unwrap_or_default()
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

/// Raises the soft limit of open files to the hard one. A recording holds a descriptor per probed copy,
/// per file its processes map (up to 4096, opened for naming or by the early look) and per probe;
/// a shell under systemd starts tracer with 1024 of 524 288. The command tracer starts is forked before,
/// with the limit it was given. A limit that cannot be raised stays (a warning): files past it are counted
/// unopened.
#[expect(clippy::print_stderr, reason = "a recording warns its user on stderr")]
fn raise_open_files_limit() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let Rlimit { current, maximum } = getrlimit(Resource::Nofile);
    // None: no limit.
    if current.is_some_and(|c| maximum.is_none_or(|m| c < m))
        && let Err(e) = setrlimit(Resource::Nofile, Rlimit { current: maximum, maximum })
    {
        let c = current.unwrap_or(0);
        eprintln!("tracer: warning: the open-files limit stays {c} ({e}): files past it are counted unopened");
    }
}
