//! `tracer record`: the recording session. Runs the data path end to end:
//! probes → ring buffer → [`decode`] → [`attribute`] → [`trace::Writer`].

use std::{
    collections::BTreeMap,
    fs::{File, OpenOptions},
    io::ErrorKind,
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus},
    time::Duration,
};

use anyhow::{Context, Result, anyhow, bail};
use aya::maps::{HashMap as BpfHashMap, MapData, PerCpuArray, RingBuf};
use tokio::{
    io::unix::AsyncFd,
    signal::unix::{SignalKind, signal},
};
use tracer_common::Counter;

use crate::{
    attach::{self, ProbeMode, Settings},
    attribute::Attributor,
    decode::decode,
    libs::{self, CUDA_DRIVER, HIP_RUNTIME, LibCopy},
    ollama, process,
    trace::{self, Record, Writer},
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
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of `bpf_ktime_get_ns`, so of every `ts` in a trace.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer to a timespec.
    unsafe { libc::clock_gettime(clock, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Creates the output file: never through a symlink, never over an existing file unless `force`, mode
/// 0600 (a trace shows what a process did).
pub fn create_output(path: &Path, force: bool) -> Result<File> {
    if force {
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.is_dir() => bail!("{} is a directory: choose a file name with -o", path.display()),
            Ok(_) => std::fs::remove_file(path)
                .with_context(|| format!("cannot replace {}: choose another path with -o", path.display()))?,
            Err(_) => {}
        }
    }
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
            _ if e.raw_os_error() == Some(libc::ELOOP) => {
                anyhow!(
                    "{} is a symbolic link; tracer does not write through links: choose another path with -o",
                    path.display()
                )
            }
            _ => anyhow!("cannot create {} ({e}): choose a writable path with -o", path.display()),
        })
}

/// Removes a half-made output file when recording fails before it started.
struct OutputGuard<'a> {
    path: &'a Path,
    armed: bool,
}

impl Drop for OutputGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _ = std::fs::remove_file(self.path);
        }
    }
}

/// The runtime copies to probe from the start: those given with --lib; else those the targets map, the
/// Ollama bundles, and (for a runtime found nowhere else) the usual places.
fn find_libraries(args: &RecordArgs, targets: &[u32], servers: &[u32]) -> Result<Vec<LibCopy>> {
    if !args.libs.is_empty() {
        return libs::from_user_paths(&args.libs);
    }
    let mut all = Vec::new();
    for runtime in runtimes(args) {
        let mut copies: Vec<LibCopy> = targets.iter().flat_map(|&p| libs::mapped_by(p, runtime)).collect();
        // Ollama's runners dlopen the bundle's copy after they start: attach to it before they do.
        for &server in servers {
            for dir in ollama::bundle_dirs(server) {
                copies.extend(libs::in_dir(&dir, runtime));
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
    if !all.iter().any(|c| matches!(c.runtime(), Library::Hip | Library::Cuda)) {
        bail!(
            "neither {HIP_RUNTIME} nor {CUDA_DRIVER} found (not mapped by the target, nor in Ollama's bundles, /opt/rocm*/lib, the NVIDIA driver's directories or the system library path): give its path with --lib PATH"
        );
    }
    Ok(all)
}

/// The runtime libraries to probe, by file-name prefix.
fn runtimes(args: &RecordArgs) -> Vec<&'static str> {
    let mut r = libs::RUNTIMES.to_vec();
    if args.cuda_runtime {
        r.push(libs::CUDA_RUNTIME);
    }
    r
}

/// Every live descendant of `roots` (a /proc scan), so that runners already running are traced too.
fn descendants(roots: &[u32]) -> Vec<u32> {
    let mut children: std::collections::HashMap<u32, Vec<u32>> = std::collections::HashMap::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for pid in entries.flatten().filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok()) {
            if let Some((ppid, _, _)) = process::read_proc(pid) {
                children.entry(ppid).or_default().push(pid);
            }
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
    out.sort();
    out
}

/// Starts the command stopped before its first instruction, so its PID joins the filter before it
/// runs; the caller resumes it. A shell stops itself and then execs the command, keeping its PID
/// (std's spawn waits for the exec, so the child cannot stop itself before it).
fn spawn_stopped(command: &[String]) -> Result<Child> {
    let prog = command.first().ok_or_else(|| anyhow!("no command given after --"))?;
    let child = Command::new("/bin/sh")
        .arg("-c")
        .arg("kill -STOP $$; exec \"$@\"")
        .arg("tracer-command")
        .args(command)
        .spawn()
        .map_err(|e| anyhow!("cannot start /bin/sh to run {prog} ({e})"))?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: waiting for our own child with a valid status pointer.
    let rc = unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED) };
    if rc != pid || !libc::WIFSTOPPED(status) {
        bail!("{prog} did not start (the shell that starts it ended early)");
    }
    Ok(child)
}

pub fn run(args: RecordArgs) -> Result<()> {
    attach::preflight()?;
    for &pid in args.pids.iter().chain(&args.ollama_pids) {
        if !process::is_running(pid) {
            bail!("process {pid} is not running: check the PID (ps -p {pid})");
        }
    }
    let servers = if !args.ollama {
        Vec::new()
    } else if !args.ollama_pids.is_empty() {
        args.ollama_pids.clone()
    } else {
        let found = ollama::find_servers();
        if found.is_empty() {
            bail!(
                "no `ollama serve` process is running: start Ollama first, or give the server's PID with --ollama-pid"
            );
        }
        found
    };
    // The processes traced from the start: those named, the Ollama servers, and all their descendants.
    let mut targets: Vec<u32> = args.pids.iter().chain(&servers).copied().collect();
    targets.extend(descendants(&targets));
    targets.sort();
    targets.dedup();
    let copies = find_libraries(&args, &targets, &servers)?;
    let file = create_output(&args.output, args.force)?;
    let mut guard = OutputGuard { path: &args.output, armed: true };
    let compress = args.output.extension().is_some_and(|e| e == "zst");
    let writer = Writer::new(file, compress)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let result = rt.block_on(session(&args, Targets { pids: targets, servers }, copies, writer, &mut guard));
    // A recording that started keeps its file, whatever ended it; one that never started leaves none.
    drop(guard);
    result
}

struct Targets {
    pids: Vec<u32>,
    servers: Vec<u32>,
}

/// Libraries of interest in a process's maps: the runtimes tracer probes and the GPU libraries a runner
/// may load without calling them (the "loaded is not dispatched" table).
const LIBRARIES_OF_INTEREST: [&str; 20] = [
    "libcuda.so",
    "libcudart",
    "libcublas",
    "libggml-cuda",
    "libamdhip64",
    "libhsa-runtime64",
    "libhsakmt",
    "libamd_comgr",
    "librocblas",
    "libhipblas",
    "libhipblaslt",
    "librocsolver",
    "librocsparse",
    "libMIOpen",
    "libggml",
    "libllama",
    "librocprofiler",
    "libroctx64",
    "libdrm_amdgpu",
    "librocroller",
];

/// What the recording knows of the libraries its processes map.
#[derive(Default)]
struct LibraryWatch {
    /// File-name prefixes of the runtimes to probe.
    runtimes: Vec<&'static str>,
    /// Probed copies: (dev, inode) -> library id.
    probed: std::collections::HashMap<(u64, u64), u32>,
    /// Mappings already written: (pid, dev, inode).
    written: std::collections::HashSet<(u32, u64, u64)>,
}

impl LibraryWatch {
    /// Attaches to `copy` unless it is probed already; returns the records to write.
    fn attach(&mut self, ebpf: &mut aya::Ebpf, copy: &LibCopy, mode: ProbeMode) -> Result<Vec<Record>> {
        if self.probed.contains_key(&(copy.dev, copy.inode)) {
            return Ok(Vec::new());
        }
        let id = self.probed.len() as u32 + 1;
        let probes = attach::attach_runtime(ebpf, id, copy, mode)?;
        self.probed.insert((copy.dev, copy.inode), id);
        let mut out = vec![Record::Library(trace::Library {
            id,
            path: copy.path.clone(),
            dev: copy.dev,
            inode: copy.inode,
            build_id: libs::build_id(&copy.open_path),
            origin: copy.origin.as_str().to_owned(),
        })];
        out.extend(probes.into_iter().map(Record::Probe));
        Ok(out)
    }

    /// Looks at a traced process's maps (one read): probes a runtime copy it maps that is not probed yet
    /// (a dlopen after the start, a copy inside a container), and records the libraries of interest it
    /// maps. Known files cost no stat: maps give their device and inode.
    fn scan(&mut self, ebpf: &mut aya::Ebpf, pid: u32, ts: u64, mode: ProbeMode) -> Vec<Record> {
        let mut out = Vec::new();
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else { return out };
        let entries = libs::parse_maps(&text);
        let name = |e: &libs::MapsEntry<'_>| e.path.rsplit('/').next().unwrap_or(e.path).to_owned();
        for e in &entries {
            let file = name(e);
            if self.runtimes.iter().any(|r| file.starts_with(r)) && !self.probed.contains_key(&(e.dev, e.inode)) {
                match libs::copy_in(pid, e).map(|copy| self.attach(ebpf, &copy, mode).map_err(|err| (copy, err))) {
                    Some(Ok(recs)) => out.extend(recs),
                    Some(Err((copy, err))) => {
                        eprintln!("tracer: warning: cannot probe {} mapped by {pid}: {err:#}", copy.path)
                    }
                    None => {}
                }
            }
            if LIBRARIES_OF_INTEREST.iter().any(|p| file.starts_with(p)) && self.written.insert((pid, e.dev, e.inode)) {
                out.push(Record::Mapping(trace::Mapping {
                    ts,
                    pid,
                    path: e.path.to_owned(),
                    dev: e.dev,
                    inode: e.inode,
                    lib: self.probed.get(&(e.dev, e.inode)).copied(),
                }));
            }
        }
        out
    }

    fn forget(&mut self, pid: u32) {
        self.written.retain(|(p, _, _)| *p != pid);
    }
}

async fn session(
    args: &RecordArgs,
    targets: Targets,
    copies: Vec<LibCopy>,
    mut writer: Writer,
    guard: &mut OutputGuard<'_>,
) -> Result<()> {
    let filter_by_pid = !targets.pids.is_empty() || !args.command.is_empty() || args.ollama;
    let mut ebpf = attach::load(&Settings { filter_by_pid, ring_bytes: args.ring_bytes })?;
    let mut logger = aya_log::EbpfLogger::init(&mut ebpf).ok();

    let mut watch = LibraryWatch { runtimes: runtimes(args), ..Default::default() };
    let mut setup = Vec::new();
    for copy in &copies {
        setup.extend(watch.attach(&mut ebpf, copy, args.probe_mode)?);
    }
    if !setup.iter().any(|r| matches!(r, Record::Probe(p) if p.error.is_none())) {
        let paths: Vec<&str> = copies.iter().map(|c| c.path.as_str()).collect();
        bail!("no runtime function could be probed in {}: is this libamdhip64 or libcuda?", paths.join(", "));
    }

    let mut pids: BpfHashMap<MapData, u32, u32> =
        BpfHashMap::try_from(ebpf.take_map("PIDS").ok_or_else(|| anyhow!("eBPF object has no PIDS map"))?)?;
    let counters: PerCpuArray<MapData, u64> =
        PerCpuArray::try_from(ebpf.take_map("COUNTERS").ok_or_else(|| anyhow!("eBPF object has no COUNTERS map"))?)?;
    let ring = RingBuf::try_from(ebpf.take_map("EVENTS").ok_or_else(|| anyhow!("eBPF object has no EVENTS map"))?)?;
    // SAFETY: the ring buffer owns its map fd, which stays open and unchanged until the AsyncFd drops it.
    let mut ring = unsafe { AsyncFd::register_with_interest(ring, tokio::io::Interest::READABLE) }
        .map_err(|e| anyhow!("cannot poll the ring buffer: {e}"))?;

    for &pid in &targets.pids {
        pids.insert(pid, 1, 0)?;
    }
    let mut child = if args.command.is_empty() { None } else { Some(spawn_stopped(&args.command)?) };
    let child_pid = child.as_ref().map(|c| c.id());
    if let Some(pid) = child_pid {
        pids.insert(pid, 1, 0)?;
    }

    let start_mono = monotonic_ns();
    let header = trace::Header {
        format: trace::FORMAT.into(),
        schema: trace::SCHEMA,
        tracer_version: env!("CARGO_PKG_VERSION").into(),
        host: read_trimmed("/proc/sys/kernel/hostname"),
        kernel_release: read_trimmed("/proc/sys/kernel/osrelease"),
        start_unix_ns: clock_ns(libc::CLOCK_REALTIME),
        start_mono_ns: start_mono,
        options: trace::Options {
            pids: args.pids.clone(),
            command: args.command.clone(),
            libs: args.libs.iter().map(|p| p.display().to_string()).collect(),
            duration_s: args.duration.map(|d| d.as_secs_f64()),
            filter: if filter_by_pid { "pid" } else { "all" }.into(),
            ring_bytes: args.ring_bytes,
            ollama_servers: targets.servers.clone(),
            kernel_tracepoints: attach::gpu_tracepoint_groups(),
        },
        units: units(),
    };
    writer.write(&Record::Header(header))?;
    for r in setup {
        writer.write(&r)?;
    }
    let mut attr = Attributor::default();
    attr.own_child = child_pid;
    attr.processes.models_dir = ollama::models_dir(args.models_dir.as_deref());
    let mut out = Vec::new();
    for &pid in targets.pids.iter().chain(child_pid.iter()) {
        attr.start_process(pid, start_mono, &mut out);
        out.extend(watch.scan(&mut ebpf, pid, start_mono, args.probe_mode));
    }
    let filter_at_start = pids.keys().count() as u64;
    for r in out.drain(..) {
        writer.write(&r)?;
    }
    writer.flush()?;
    guard.armed = false; // from here on the file is a trace, whatever ends the recording

    // Resume the command only now: its first instruction runs traced.
    let mut child_exit = None;
    if let Some(c) = child.take() {
        // SAFETY: signalling our own stopped child.
        unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGCONT) };
        child_exit = Some(tokio::task::spawn_blocking(move || {
            let mut c = c;
            c.wait()
        }));
    }
    if !args.quiet {
        eprintln!(
            "tracer: recording to {} ({} library cop{}); stop with Ctrl-C",
            args.output.display(),
            watch.probed.len(),
            if watch.probed.len() == 1 { "y" } else { "ies" }
        );
    }

    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut poll = tokio::time::interval(Duration::from_millis(10));
    let deadline = args.duration.map(|d| tokio::time::Instant::now() + d);
    let sleep = tokio::time::sleep_until(
        deadline.unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(86400 * 365)),
    );
    tokio::pin!(sleep);
    let mut undecodable = 0u64;
    let watch_pids = !targets.pids.is_empty() && child_pid.is_none();
    let mut prev_live: Vec<u32> = Vec::new();
    let mut exit_status: Option<std::io::Result<ExitStatus>> = None;

    if !args.read_delay.is_zero() {
        tokio::time::sleep(args.read_delay).await;
    }
    let stop = loop {
        tokio::select! {
            guard = ring.readable_mut() => {
                let mut guard = guard?;
                drain(guard.get_inner_mut(), &mut attr, &mut writer, &mut undecodable)?;
                guard.clear_ready();
                scan_new(&mut attr, &mut watch, &mut ebpf, &mut writer, args.probe_mode)?;
            }
            _ = poll.tick() => {
                // Probes wake the reader only when the ring is a quarter full; drain it often anyway.
                drain(ring.get_mut(), &mut attr, &mut writer, &mut undecodable)?;
                scan_new(&mut attr, &mut watch, &mut ebpf, &mut writer, args.probe_mode)?;
            }
            _ = tick.tick() => {
                writer.flush()?;
                if let Some(l) = logger.as_mut() { l.flush(); }
                if filter_by_pid {
                    // New runners, late dlopens, containers: look at what each traced process maps now.
                    let now = monotonic_ns();
                    let live: Vec<u32> = pids.keys().flatten().collect();
                    for gone in prev_live.iter().filter(|p| !live.contains(p)) {
                        watch.forget(*gone);
                    }
                    for pid in &live {
                        attr.kernels.snapshot(*pid);
                        for r in watch.scan(&mut ebpf, *pid, now, args.probe_mode) {
                            writer.write(&r)?;
                        }
                    }
                    // --pid: the exit tracepoint removes each traced process from the filter as it ends.
                    if watch_pids && live.is_empty() {
                        break "targets-exited";
                    }
                    prev_live = live;
                }
            }
            _ = sigint.recv() => break "signal",
            _ = sigterm.recv() => break "signal",
            _ = &mut sleep, if deadline.is_some() => break "duration",
            status = async { child_exit.as_mut().expect("guarded").await }, if child_exit.is_some() => {
                exit_status = Some(status.unwrap_or_else(|e| Err(std::io::Error::other(e))));
                break "command-exited";
            }
        }
    };
    // Everything the probes committed before the stop is still in the ring.
    drain(ring.get_mut(), &mut attr, &mut writer, &mut undecodable)?;
    if let Some(l) = logger.as_mut() {
        l.flush();
    }
    if let (Some(pid), Some(Ok(status))) = (child_pid, &exit_status) {
        use std::os::unix::process::ExitStatusExt;
        writer.write(&Record::Exit(trace::Exit {
            ts: monotonic_ns(),
            pid,
            code: status.code(),
            signal: status.signal(),
        }))?;
    }

    let mut footer = trace::Footer { end_mono_ns: monotonic_ns(), stop: stop.into(), ..Default::default() };
    let per_cpu = |c: Counter| -> Vec<u64> {
        counters.get(&(c as u32), 0).map(|v| v.iter().copied().collect()).unwrap_or_default()
    };
    footer.drops.insert("call".into(), per_cpu(Counter::DropCall));
    footer.drops.insert("name".into(), per_cpu(Counter::DropName));
    footer.drops.insert("proc".into(), per_cpu(Counter::DropProc));
    footer.drops.insert("ioctl".into(), per_cpu(Counter::DropIoctl));
    footer.drops.insert("dispatch".into(), per_cpu(Counter::DropDispatch));
    for (name, c) in [
        ("stash_full", Counter::StashFull),
        ("return_without_entry", Counter::ReturnWithoutEntry),
        ("filter_full", Counter::FilterFull),
        ("packets_cut", Counter::PacketsCut),
        ("packet_fault", Counter::PacketFault),
    ] {
        footer.counters.insert(name.into(), per_cpu(c).iter().sum());
    }
    footer.counters.insert("undecodable".into(), undecodable);
    if filter_by_pid {
        footer.counters.insert("filter_entries_start".into(), filter_at_start);
        footer.counters.insert("filter_entries_end".into(), pids.keys().count() as u64);
    }
    footer.counters.insert("unnamed_kernels".into(), attr.kernels.unnamed);
    for (k, v) in &attr.counters {
        footer.counters.insert(k.clone(), *v);
    }
    // The tracer's own cost, for users and for `cargo xtask bench`.
    // SAFETY: rusage is plain data, for which all-zero bytes are valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } == 0 {
        let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
        footer.counters.insert("tracer_cpu_us".into(), us(usage.ru_utime) + us(usage.ru_stime));
    }
    // Peak RSS of this program image (VmHWM): ru_maxrss would also count the image of the process that
    // started tracer, inherited across fork and exec.
    if let Some(kib) = std::fs::read_to_string("/proc/self/status").ok().and_then(|s| {
        s.lines().find_map(|l| l.strip_prefix("VmHWM:")?.trim().strip_suffix("kB")?.trim().parse::<u64>().ok())
    }) {
        footer.counters.insert("tracer_max_rss_kib".into(), kib);
    }
    let drops = footer.total_drops();
    let counts: BTreeMap<String, u64> = writer.counts().clone();
    writer.finish(footer)?;
    if !args.quiet {
        let n = |k: &str| counts.get(k).copied().unwrap_or(0);
        eprintln!(
            "tracer: stopped ({stop}); wrote {} launches, {} configs, {} calls, {} kernels to {}; {} records dropped",
            n("launch"),
            n("config"),
            n("call"),
            n("kernel"),
            args.output.display(),
            drops
        );
    }
    Ok(())
}

/// Looks at the maps of processes that just appeared (their first event, an exec): the libraries they
/// use are mapped by now, even if they end before the next periodic look.
fn scan_new(
    attr: &mut Attributor,
    watch: &mut LibraryWatch,
    ebpf: &mut aya::Ebpf,
    writer: &mut Writer,
    mode: ProbeMode,
) -> Result<()> {
    if attr.newly_seen.is_empty() {
        return Ok(());
    }
    let now = monotonic_ns();
    for pid in std::mem::take(&mut attr.newly_seen) {
        for r in watch.scan(ebpf, pid, now, mode) {
            writer.write(&r)?;
        }
    }
    Ok(())
}

fn drain(ring: &mut RingBuf<MapData>, attr: &mut Attributor, writer: &mut Writer, undecodable: &mut u64) -> Result<()> {
    let mut out = Vec::new();
    while let Some(item) = ring.next() {
        match decode(&item) {
            Ok(ev) => attr.event(ev, &mut out),
            Err(_) => *undecodable += 1,
        }
        drop(item);
        for r in out.drain(..) {
            writer.write(&r)?;
        }
    }
    Ok(())
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
