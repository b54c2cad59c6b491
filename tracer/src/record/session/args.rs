//! What a recording is asked to do and what it finds before it starts: its arguments ([`RecordArgs`],
//! lowered from the command line by `cli`), the set-up checked before any file or probe is made ([`Setup`]),
//! the runtimes it probes, the trace's header, and the process limits it raises for itself.

use crate::os::messages::warning;
use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use crate::{
    os::clock::realtime_ns,
    record::probes::{
        attach::{self, ProbeMode},
        libs::LibCopy,
    },
    trace::{self, GpuLibrary, runtimes},
};

pub(crate) struct RecordArgs {
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
    /// Probe HIP's launch functions even where each dispatch is read at its doorbell (`--hip-launches`).
    pub(crate) hip_launches: bool,
    /// Write every launch whole: no runs of repeats counted in the kernel or written (`--every-launch`).
    pub(crate) every_launch: bool,
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
    /// `--keep-size`: the rotated parts in the output's directory hold at most this many bytes.
    pub(crate) keep_size: Option<u64>,
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

/// Whether HIP's launch functions are left unprobed, each dispatch read at its queue's doorbell alone (one trap
/// where the launch would add a second): the default where KFD lists an AMD GPU and the HSA runtime's copies are
/// probed (every runtime found, or one named by `--lib`), unless `--hip-launches` or `--all-calls` asks for them.
/// Without an AMD GPU no packet reaches a queue, and the launch is all there is to see. Before Linux 5.17 the
/// doorbell program, which reads a store's packets with `bpf_loop`, does not load: the launches are probed.
pub(crate) fn launches_at_doorbell(args: &RecordArgs) -> bool {
    let loops = aya::util::KernelVersion::current().is_ok_and(|v| v >= aya::util::KernelVersion::new(5, 17, 0));
    loops && launches_at_doorbell_with(args, &crate::os::kfd::gpus())
}

/// [`launches_at_doorbell`] on a machine whose KFD lists the GPUs `gpus` (gfx target versions).
pub(crate) fn launches_at_doorbell_with(args: &RecordArgs, gpus: &[u32]) -> bool {
    let hsa_probed = args.libs.is_empty()
        || args.libs.iter().any(|p| runtimes::runtime_of(&p.to_string_lossy()) == tracer_common::api::Library::Hsa);
    !args.hip_launches && !args.probe_mode.probes_tallied() && hsa_probed && !gpus.is_empty()
}

/// The runtime libraries to probe, by file-name prefix. libcudart is probed for its API view
/// (`--cuda-runtime`), and on a late attach (`late`: processes already running are traced, by `--pid`, or as
/// a running Ollama server's children by `--ollama-pid` or `--ollama`) to learn the names of driver functions
/// those processes resolved before it (its launches are then not written, see [`crate::record::attribute`]).
pub(crate) fn runtimes(args: &RecordArgs, late: bool) -> Vec<&'static str> {
    let mut r = runtimes::RUNTIMES.to_vec();
    if args.cuda_runtime || late || !args.pids.is_empty() {
        r.push(runtimes::CUDA_RUNTIME);
    }
    r
}

/// What a recording checks and finds before it creates its file or attaches anything: the machine, the
/// processes named, the command (resolved, so a misspelled one is said at once), the library copies.
pub(crate) struct Setup {
    pub(crate) targets: Targets,
    pub(crate) copies: Vec<LibCopy>,
    /// The other GPU libraries the command will load, with what each is: those built on a runtime get their
    /// entry points counted before it starts.
    pub(crate) counted: Vec<(GpuLibrary, LibCopy)>,
    /// The command's program, resolved.
    pub(crate) program: Option<PathBuf>,
}

/// The processes traced from the start, and the Ollama servers among them.
pub(crate) struct Targets {
    pub(crate) pids: Vec<u32>,
    pub(crate) servers: Vec<u32>,
    /// Follow any `ollama serve` that starts during the recording.
    pub(crate) watch_ollama: bool,
}

/// The trace's first record: the recording's options, host and clocks.
pub(crate) fn header(
    args: &RecordArgs,
    targets: &Targets,
    filter_by_pid: bool,
    probes_per_process: bool,
    start_mono: u64,
    job_tracepoints: Vec<String>,
    launches_at_doorbell: bool,
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
            launches_at_doorbell,
            doorbell_reads_all: true,
            repeats: !args.every_launch,
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

/// Raises the soft limit of open files to the hard one, before any probe is placed. A recording holds a
/// descriptor per probed copy, per file its processes map (up to 4096, opened for naming or by the early look)
/// and per probe (on a kernel without multi-point links, one per exported function of each counted library:
/// rocBLAS alone has 1 217); a shell under systemd starts tracer with 1024 of 524 288. The command tracer
/// starts gets the limit tracer was given back before its exec ([`open_files_limit_given`]). A limit that
/// cannot be raised stays (a warning): files past it are counted unopened.
pub(crate) fn raise_open_files_limit() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let given = getrlimit(Resource::Nofile);
    let Rlimit { current, maximum } = given;
    // None: no limit.
    if current.is_some_and(|c| maximum.is_none_or(|m| c < m)) {
        match setrlimit(Resource::Nofile, Rlimit { current: maximum, maximum }) {
            Ok(()) => drop(GIVEN_OPEN_FILES.set(given)),
            Err(e) => {
                let c = current.unwrap_or(0);
                warning!("the open-files limit stays {c} ({e}): files past it are counted unopened");
            }
        }
    }
}

/// The open-files limit tracer was started with, where it raised it ([`raise_open_files_limit`]).
static GIVEN_OPEN_FILES: std::sync::OnceLock<rustix::process::Rlimit> = std::sync::OnceLock::new();

/// The open-files limit tracer was given, for the command it starts, as `setrlimit(2)` takes it; None where
/// tracer kept it as it was.
pub(crate) fn open_files_limit_given() -> Option<libc::rlimit> {
    let given = GIVEN_OPEN_FILES.get()?;
    let raw = |l: Option<u64>| l.unwrap_or(libc::RLIM_INFINITY);
    Some(libc::rlimit { rlim_cur: raw(given.current), rlim_max: raw(given.maximum) })
}
