//! The write wing: everything between the probes and the trace file, laid out as its data path.
//!
//! `tracer record` finds the libraries, creates the output, and runs one `session`, which drives the data
//! path end to end: [`probes`] (which copies to probe — `libs`, `ldso`, `ollama`, the library `watch`,
//! counted `entries` — and `attach`: probe plan, load, attach) → [`intake`] (`ring`: a thread drains the
//! ring buffer; `decode`: bytes to the trace's events) → [`attribute`] (process, library copy, kernel name:
//! it asks [`names`] for kernel names) → [`crate::trace::Writer`]. `session` holds the recording's control:
//! its arguments, the command it starts, signals, readiness, live metrics.

pub(crate) mod attribute;
pub(crate) mod intake;
pub(crate) mod names;
pub(crate) mod probes;
mod session;

use crate::os::messages::{say, tell, warning};
use std::{
    fs::File,
    os::fd::AsFd as _,
    path::{Path, PathBuf},
};

use anyhow::{Result, bail};

use probes::{attach, ldso, libs, libs::LibCopy, ollama};
pub(crate) use session::args::RecordArgs;
#[cfg(test)]
pub(crate) use session::args::launches_at_doorbell_with;
use session::{Setup, Targets, args::runtimes, command, live, ready, signals};

use crate::{
    os::{
        output,
        proc::{LIVE, Procs as _},
    },
    trace::{
        self, GpuLibrary, Rotation, Writer,
        runtimes::{CUDA_DRIVER, HIP_RUNTIME, VULKAN_LOADER},
    },
};

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
    for runtime in runtimes(args, !targets.is_empty()) {
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

/// Records until a stop condition; returns the exit status (the shell's convention).
///
/// The status is the started command's, or 128 + N when signal N stopped the recording. `serve` starts the metrics endpoint when `--metrics` asks for one (the read wing's server, handed in by
/// `main`: the recording does not reach into the read wing).
pub(crate) fn run(args: RecordArgs, serve: trace::Serve) -> Result<Option<u8>> {
    run_tapped(args, serve, None)
}

/// [`run`], with `tap` seeing every line written (`tracer top`'s view), without a metrics socket.
pub(crate) fn run_tapped(
    args: RecordArgs,
    serve: trace::Serve,
    tap: Option<Box<dyn trace::Tap>>,
) -> Result<Option<u8>> {
    crate::os::messages::set_quiet(args.quiet);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        // Signals first: one that comes during the set-up (probes take seconds to attach) must not kill
        // tracer without a word, nor leave a half-made file.
        let mut signals = signals::Signals::install()?;
        // Waits inside naming answer a stop too (a finder's answer is not waited for past it).
        crate::os::stop::watch_signals()?;
        let setup = prepare(&args)?;
        let to_stdout = output::Dest::parse(&args.output) == output::Dest::Stdout;
        let compress = !to_stdout && args.output.extension().is_some_and(|e| e == "zst");
        let rotation = args.rotates().then(|| Rotation {
            first: Rotation::part_path(&args.output, 0),
            max_bytes: args.rotate_size,
            every: args.rotate_every,
            force: args.force,
            keep: args.keep_size,
        });
        let (mut out, file) = TraceOutput::create(rotation.as_ref().map_or(&args.output, |r| &r.first), args.force)?;
        let mut writer = match rotation {
            Some(r) => Writer::rotating(file, compress, r, &args.output)?,
            None => Writer::new(file, compress)?,
        };
        if let Some(tap) = tap {
            writer.set_tap(tap);
        }
        let metrics = args.metrics.and_then(|addr| serve_metrics(serve, addr, &args, &mut writer));
        let (mut session, child) = session::Session::set_up(&args, setup, writer)?;
        session.metrics = metrics;
        if let Some(sig) = signals.pending() {
            drop(out); // removes what was made
            if let Some(c) = &child {
                c.signal(libc::SIGKILL);
            }
            tell!(
                "interrupted while setting up ({}): nothing was recorded{}",
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
fn serve_metrics(
    serve: trace::Serve,
    addr: std::net::SocketAddr,
    args: &RecordArgs,
    writer: &mut Writer,
) -> Option<live::LiveMetrics> {
    match serve(addr, !args.metrics_no_comm) {
        Ok((server, tap)) => {
            if !addr.ip().is_loopback() {
                warning!(
                    "metrics are served on {addr}, which other machines may reach, and they name the traced processes and models; serve them on 127.0.0.1 unless that is meant"
                );
            }
            writer.set_tap(tap);
            Some(live::LiveMetrics { server })
        }
        Err(e) => {
            warning!("{e:#}: recording without metrics (choose another port with --metrics)");
            None
        }
    }
}

fn prepare(args: &RecordArgs) -> Result<Setup> {
    check_rotation(args)?;
    attach::preflight()?;
    let releasing = attach::releases_in_progress();
    if releasing > 0 {
        say!(
            "note: {releasing} earlier recording{} still releasing {} probes (the kernel frees them after grace periods): attaching may wait for them",
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
        if !copies.iter().any(|c| matches!(c.runtime(), Library::Hip | Library::Cuda | Library::Vulkan)) {
            say!(
                "note: none of {HIP_RUNTIME}, {CUDA_DRIVER} or {VULKAN_LOADER} found (not among what the command loads, nor in /opt/rocm*/lib, the NVIDIA driver's directories or the system library path): recording the command's processes; a runtime it opens is probed then (give its path with --lib PATH to probe it from the start)"
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
                warning!(
                    "not following `ollama serve` pid {pid}: {why} (give --ollama-user to trust that user's Ollama)"
                );
                false
            }
        });
        found
    }
}

/// A rotated recording goes to files, and does not write over an earlier recording's parts unless forced.
fn check_rotation(args: &RecordArgs) -> Result<()> {
    if args.keep_size.is_some() && !args.rotates() {
        bail!("--keep-size removes the oldest parts of rotated recordings: give --rotate-size or --rotate-every too");
    }
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
    let runtimes = runtimes(args, false);
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
