//! Command-line interface.

use std::{path::PathBuf, time::Duration};

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "tracer",
    version,
    about = "Shows which GPU kernels an inference runtime really dispatches, without touching it.",
    long_about = "tracer observes an unmodified process with eBPF uprobes on the GPU runtimes it maps (HIP and \
                  HSA on AMD ROCm, the CUDA driver and runtime on NVIDIA), tracepoints on the GPU drivers' \
                  ioctls and process events: kernel registrations and launches, AQL packets at the GPU \
                  queues, graph replays, memory and synchronization calls, per process and per library copy. \
                  No LD_PRELOAD, no ptrace, no restart. Recording needs root."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Cmd,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Cmd {
    /// Record a trace: of a command (`-- COMMAND ARGS`), of running processes (--pid), or of every process
    /// that calls the probed libraries.
    Record(RecordCli),
    /// Record as `record` does and show it live in the terminal, per process: kernels a second by family,
    /// the current phase, tokens a second, traps a token, GPU libraries, losses; `s` sorts, `q` quits.
    Top(TopCli),
    /// Summarize a trace: kernels per process, API calls, memory, losses.
    Report(ReportCli),
    /// List the GPU code a library or program carries: offload bundles, targets, kernels; a ggml Vulkan
    /// backend's SPIR-V shaders.
    Inspect(InspectCli),
    /// Convert a trace for other tools: Perfetto / <chrome://tracing> JSON, rocprofv3-style kernel CSV, or a Graphviz graph of the libraries.
    Export(ExportCli),
    /// Write files generated from tracer's own definition (`tracer generate man DIR`: the man pages).
    #[command(hide = true)]
    Generate(GenerateCli),
}

#[derive(Debug, Args)]
pub(crate) struct GenerateCli {
    pub what: Generated,
    /// The directory to write into.
    pub dir: PathBuf,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(crate) enum Generated {
    /// The man pages, tracer(1) and one per subcommand, in roff.
    Man,
}

#[derive(Debug, Args)]
pub(crate) struct InspectCli {
    /// The library or program (e.g. libggml-hip.so, libggml-vulkan.so).
    pub file: PathBuf,
    /// Only entries for this gfx target (e.g. gfx1201).
    #[arg(long)]
    pub target: Option<String>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ExportCli {
    /// The trace file; or the parts of a rotated recording (several files, or their directory).
    #[arg(required = true, num_args = 1.., value_name = "TRACE")]
    pub files: Vec<PathBuf>,
    #[arg(long, value_enum)]
    pub format: ExportFormat,
    /// Where to write: a file that appears only when the export is complete, or `-` (the default) for
    /// standard output.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Replace the output file if it exists (never the trace being read, a link, or a device).
    #[arg(long)]
    pub force: bool,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(crate) enum ExportFormat {
    Perfetto,
    Csv,
    /// Graphviz: the mapped GPU libraries and their dependencies, coloured by mapped / called / dispatched.
    Dot,
    /// Apache Parquet: one row per kernel execution (process, model, phase, step, kernel, family,
    /// library, ne11, grid/block, times), for `DuckDB`, Polars, Spark, `ClickHouse`.
    Parquet,
    /// rocprofiler-sdk's rocpd `SQLite` database (schema 3): kernel dispatches, API regions, processes,
    /// threads, queues, with rocpd's views (`kernels`, `top_kernels`, ...); needs `-o FILE.db`.
    Rocpd,
}

#[derive(Debug, Args)]
pub(crate) struct RecordCli {
    /// Trace file to write: JSON Lines, zstd-compressed when the name ends in .zst (the default), plain
    /// when it does not (`-o run.jsonl`); `-` for standard output, plain.
    #[arg(short, long, default_value = "trace.jsonl.zst")]
    pub(crate) output: PathBuf,
    /// Replace the output file if it exists.
    #[arg(long)]
    pub(crate) force: bool,
    #[command(flatten)]
    pub(crate) follow: Follow,
    /// Write the whole command line only of the processes tracer was asked to follow (the command, --pid
    /// processes, Ollama's server and runners); every other process it records keeps its `argv[0]` alone.
    /// The default when recording every process (no command, --pid or --ollama): a command line can hold
    /// secrets, and any local user can make many. Command lines are cut at 64 KiB in every mode.
    #[arg(long)]
    pub(crate) private_argv: bool,
    /// Recording every process: write every process's whole command line (up to 64 KiB), not `argv[0]`
    /// alone.
    #[arg(long, conflicts_with = "private_argv")]
    pub(crate) full_argv: bool,
    /// Ollama's models directory, to name a runner's model (default: $`OLLAMA_MODELS`, ~/.ollama/models).
    #[arg(long, value_name = "DIR")]
    pub(crate) models_dir: Option<PathBuf>,
    /// Probe this runtime library copy (libamdhip64, libhsa-runtime64, libcuda, libcudart; repeatable);
    /// default: the copies the targets map, else the usual places (Ollama bundles, /opt/rocm*/lib, the
    /// NVIDIA driver's directories, the system library path).
    #[arg(long = "lib", value_name = "PATH")]
    pub(crate) libs: Vec<PathBuf>,
    /// Stop after this long (e.g. 30s, 500ms, 2m; a bare number is seconds).
    #[arg(short, long, allow_hyphen_values = true, value_parser = parse_duration)]
    pub(crate) duration: Option<Duration>,
    /// Ring buffer size in bytes (a power of two, at least 4096).
    #[arg(long, default_value_t = 4 << 20, allow_negative_numbers = true, value_parser = parse_ring_size)]
    pub(crate) ring_size: u32,
    /// Print nothing but errors.
    #[arg(short, long)]
    pub(crate) quiet: bool,
    /// Once the probes are live, write this file (`pid=`, `trace=`, `metrics=` lines; removed when the
    /// recording stops): a script starts its work when the file appears, with -q too. Under systemd
    /// (`Type=notify`) tracer also sends READY=1 then.
    #[arg(long, value_name = "PATH")]
    pub(crate) ready_file: Option<PathBuf>,
    /// Also probe libcudart (cudaLaunchKernel, __cudaRegisterFunction): the runtime API's view of CUDA
    /// launches, at a second trap per launch. The driver (libcuda) is always probed, one trap per launch.
    #[arg(long)]
    pub(crate) cuda_runtime: bool,
    /// Also probe HIP's launch functions (hipLaunchKernel, hipModuleLaunchKernel, `<<<>>>`'s configuration)
    /// on a machine with an AMD GPU, where by default each dispatch is read at its queue's doorbell alone (one
    /// trap): the launches add the file that made each one and the launches that failed, at a second trap
    /// per dispatch. Without an AMD GPU (none in KFD's topology) they are always probed: no packet reaches a
    /// queue then.
    #[arg(long)]
    pub(crate) hip_launches: bool,
    /// Have the kernel time every run of tracer's eBPF programs while recording (`BPF_ENABLE_STATS`) and
    /// write each program's runs and nanoseconds to the trace: what the programs cost the traced threads
    /// beyond the trap itself. The timing adds two clock reads to each run.
    #[arg(long)]
    pub(crate) program_stats: bool,
    /// Probe every call tracer knows, also those it only counts (synchronizations, async copies to the
    /// device): a trap each, most of a decode loop's calls (on llama.cpp's CUDA decode without graphs, 22 a
    /// token beside its 82 launches). By default they are left unprobed: kernels, graph replays, copies
    /// toward the host and ggml's passes are recorded, and steps and passes are cut as exactly.
    #[arg(long)]
    pub(crate) all_calls: bool,
    /// Write every launch as its own record and line. By default a launch equal in every field but its
    /// time to the launch some places before it on its thread (a loop's, a decoder layer's) is counted
    /// into a run instead: in the kernel, one map touched and no record; in the file, one `repeat` line.
    /// The sequence stays exact; the repeats' own times are not kept.
    #[arg(long)]
    pub(crate) every_launch: bool,
    /// Serve live counters for Prometheus at `http://ADDR/metrics` while recording (e.g. 127.0.0.1:9464):
    /// kernel executions by family, launches, graph replays, API calls by category, steps and tokens per
    /// inference phase, per process (comm, Ollama role, model); records dropped; probes attached.
    /// A port another program holds is said, and the recording goes on without metrics.
    #[arg(long, value_name = "ADDR", value_parser = parse_metrics_addr)]
    pub(crate) metrics: Option<std::net::SocketAddr>,
    /// Leave the `comm` label (a process's name, which any user chooses) out of the metrics: processes are
    /// then told apart by Ollama's role and model only. With it, at most 64 distinct names are labels, the
    /// others count under `comm="other"`.
    #[arg(long, requires = "metrics")]
    pub(crate) metrics_no_comm: bool,
    /// Rotate: start a new file once this one holds SIZE bytes of new records (e.g. 256M, 1G; before
    /// compression; each part also restates the libraries and live processes' kernels it refers to).
    /// Parts are named after -o with a number (`run.0000.jsonl.zst`, `run.0001.jsonl.zst`, ...), each
    /// readable alone; `tracer report` and `export` read several parts, or their directory, as one
    /// recording.
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true, value_parser = parse_size)]
    pub(crate) rotate_size: Option<u64>,
    /// Rotate: start a new file once this one is this old (e.g. 1h, 30m).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = parse_duration)]
    pub(crate) rotate_every: Option<Duration>,
    /// Retention of rotated recordings: whenever a part starts (the first too, as the recording starts), remove the oldest parts of tracer
    /// recordings in the output's directory (earlier recordings first) while they hold more than SIZE
    /// bytes in all (e.g. 20G). Only regular files of tracer's own user that are parts of a rotated
    /// recording count; the part being written is never removed. A recording whose first parts were
    /// removed reads from its oldest part left, which restates what the removed ones named; the removals
    /// are counted in the footer.
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true, value_parser = parse_size)]
    pub(crate) keep_size: Option<u64>,
    /// Testing aid: leave the ring buffer unread for this long after attaching, to provoke overflow.
    #[arg(long, hide = true, value_name = "MS", default_value_t = 0)]
    pub(crate) debug_read_delay_ms: u64,
    /// Benchmarking aid: wait until the kernel has released every probe before exiting (by default the
    /// release finishes in the background after tracer has ended).
    #[arg(long, hide = true)]
    pub(crate) debug_sync_teardown: bool,
    /// Run empty programs at the same attach points instead of recording (benchmarks measure the traps),
    /// or record with the batch program of kernels before Linux 5.17 (tests compare its records).
    #[arg(long, hide = true, value_enum, default_value = "record")]
    pub(crate) probe_mode: ProbeModeArg,
    /// Start this command and record it from its first instruction, following its children.
    #[arg(last = true, value_name = "COMMAND")]
    pub(crate) command: Vec<String>,
}

/// The running processes a recording follows (`record`'s and `top`'s alike).
#[derive(Clone, Debug, Args)]
pub(crate) struct Follow {
    /// Record only this process and the processes it starts (repeatable).
    #[arg(short, long = "pid", value_name = "PID", allow_negative_numbers = true, value_parser = parse_pid)]
    pub(crate) pids: Vec<u32>,
    /// Follow Ollama: the `ollama serve` process and every runner it starts (found in /proc, or --ollama-pid).
    #[arg(long)]
    pub(crate) ollama: bool,
    /// The Ollama server's PID (repeatable; implies --ollama).
    #[arg(long = "ollama-pid", value_name = "PID", allow_negative_numbers = true, value_parser = parse_pid)]
    pub(crate) ollama_pids: Vec<u32>,
    /// With --ollama: also follow an `ollama serve` whose executable this user (a name or uid) owns. By
    /// default only a server whose executable root owns is followed: any user can run a program called
    /// `ollama serve`.
    #[arg(long, value_name = "USER")]
    pub(crate) ollama_user: Option<String>,
}

/// `tracer top`: what it records (as `record`, whose options these are) and how its view ends.
#[derive(Debug, Args)]
pub(crate) struct TopCli {
    /// Also write the trace to this file (as `record -o`); without it, the trace is a temporary file,
    /// removed at the end.
    #[arg(short, long)]
    pub(crate) output: Option<PathBuf>,
    /// Replace the output file if it exists.
    #[arg(long, requires = "output")]
    pub(crate) force: bool,
    #[command(flatten)]
    pub(crate) follow: Follow,
    /// Ollama's models directory, to name a runner's model (default: $`OLLAMA_MODELS`, ~/.ollama/models).
    #[arg(long, value_name = "DIR")]
    pub(crate) models_dir: Option<PathBuf>,
    /// Probe this runtime library copy (repeatable), as `record --lib`.
    #[arg(long = "lib", value_name = "PATH")]
    pub(crate) libs: Vec<PathBuf>,
    /// Stop recording after this long (e.g. 30s, 2m); the last screen stays until q.
    #[arg(short, long, allow_hyphen_values = true, value_parser = parse_duration)]
    pub(crate) duration: Option<Duration>,
    /// Probe every call tracer knows, as `record --all-calls`.
    #[arg(long)]
    pub(crate) all_calls: bool,
    /// Also probe HIP's launch functions where dispatches are read at the doorbell, as `record --hip-launches`.
    #[arg(long)]
    pub(crate) hip_launches: bool,
    /// Exit as soon as the recording ends (the command exited, the targets ended, --duration), instead of
    /// keeping the last screen until q.
    #[arg(long)]
    pub(crate) exit_when_done: bool,
    /// Start this command and record it from its first instruction (its standard input is /dev/null, its
    /// output shown in the messages pane).
    #[arg(last = true, value_name = "COMMAND")]
    pub(crate) command: Vec<String>,
}

impl TopCli {
    /// The recording `top` makes, as `record` would with these options and writing to `output`.
    pub(crate) fn record_cli(&self, output: &std::path::Path) -> anyhow::Result<RecordCli> {
        use clap::FromArgMatches as _;
        let defaults = RecordCli::augment_args(clap::Command::new("record")).try_get_matches_from(["record"])?;
        Ok(RecordCli {
            output: output.to_path_buf(),
            force: self.force,
            follow: self.follow.clone(),
            models_dir: self.models_dir.clone(),
            libs: self.libs.clone(),
            duration: self.duration,
            all_calls: self.all_calls,
            hip_launches: self.hip_launches,
            command: self.command.clone(),
            ..RecordCli::from_arg_matches(&defaults)?
        })
    }
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(crate) enum ProbeModeArg {
    Record,
    Empty,
    /// Record, with the batch program of kernels before Linux 5.17 (bounded loops, no `bpf_loop`).
    BoundedLoops,
}

#[derive(Debug, Args)]
pub(crate) struct ReportCli {
    /// The trace file; or the parts of a rotated recording (several files, or their directory).
    #[arg(required = true, num_args = 1.., value_name = "TRACE")]
    pub files: Vec<PathBuf>,
    /// Print the report as one JSON object (whole kernel names, every kernel).
    #[arg(long)]
    pub json: bool,
    /// Show whole kernel names (template arguments, parameters), one row per name, instead of short
    /// names with the variants of one function folded into a row.
    #[arg(long)]
    pub full_names: bool,
    /// Kernels listed per process, most executions first (0: all).
    #[arg(long, value_name = "N", default_value_t = 25, allow_negative_numbers = true, value_parser = parse_count)]
    pub top: usize,
}

/// An address to serve metrics on: `IP:PORT`, or `HOST:PORT` resolved now (`localhost:9464`).
fn parse_metrics_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs as _;
    if let Ok(addr) = s.parse() {
        return Ok(addr);
    }
    let expected = "give IP:PORT or HOST:PORT, e.g. 127.0.0.1:9464";
    match s.to_socket_addrs() {
        Ok(mut addrs) => addrs.next().ok_or_else(|| format!("`{s}` names no address: {expected}")),
        Err(e) => Err(format!("`{s}` is not an address to serve metrics on ({e}): {expected}")),
    }
}

/// Writes the man pages, tracer(1) and one per subcommand (tracer-record(1), ...), in roff, into `dir`:
/// made from this definition by the clap project's generator.
pub(crate) fn man_pages(dir: &std::path::Path) -> std::io::Result<()> {
    clap_mangen::generate_to(<Cli as clap::CommandFactory>::command(), dir)
}

/// A size in bytes: a number with an optional K, M or G (powers of 1024), at least 64K.
pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().trim_end_matches(['B', 'b']).trim_end_matches('i');
    let (num, shift) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    let n: u64 = num.trim().parse().map_err(|e| format!("`{s}` is not a size ({e}; try 256M or 1G)"))?;
    let bytes = n.checked_mul(1 << shift).ok_or_else(|| format!("`{s}` is too large"))?;
    if bytes < 64 << 10 {
        return Err(format!("`{s}` is smaller than a part may be (at least 64K)"));
    }
    Ok(bytes)
}

#[expect(clippy::float_arithmetic, reason = "durations are given in decimal fractions of their unit")]
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num.trim().parse().map_err(|e| format!("`{s}` is not a duration ({e}; try 30s, 500ms, 2m)"))?;
    if !v.is_finite() || v <= 0.0 {
        return Err(format!("`{s}` is not a positive duration"));
    }
    let secs = v * scale;
    if secs > MAX_DURATION.as_secs_f64() {
        return Err(format!(
            "`{s}` is longer than tracer records at once (at most 365 days: {}s)",
            MAX_DURATION.as_secs()
        ));
    }
    Duration::try_from_secs_f64(secs).map_err(|e| format!("`{s}` is not a duration ({e})"))
}

/// The longest `--duration`.
pub(crate) const MAX_DURATION: Duration = Duration::from_hours(365 * 24);

/// A process ID: a positive number (a negative one reaches here as a value, not as an unknown option, so
/// that the sentence says what to give).
fn parse_pid(s: &str) -> Result<u32, String> {
    match s.trim().parse::<i64>() {
        Ok(pid) if pid > 0 => u32::try_from(pid).map_err(|_too_large| format!("`{s}` is larger than any process ID")),
        _ => Err(format!("`{s}` is not a process ID: give the positive number `ps` or `pgrep` shows")),
    }
}

/// A count of rows: a number, 0 for all.
fn parse_count(s: &str) -> Result<usize, String> {
    s.trim().parse().map_err(|_not_a_count| format!("`{s}` is not a count of rows: give 0 (all) or a positive number"))
}

fn parse_ring_size(s: &str) -> Result<u32, String> {
    let v: u32 = s.parse().map_err(|e| format!("`{s}` is not a number of bytes ({e})"))?;
    if v < 4096 || !v.is_power_of_two() {
        return Err(format!("ring size must be a power of two of at least 4096 bytes, not {v}"));
    }
    Ok(v)
}

/// The command line of `record`, lowered once into what a recording needs (as ripgrep's `hiargs`): the
/// Ollama user resolved, `--ollama-pid` implying `--ollama`, the probe mode chosen.
impl TryFrom<RecordCli> for crate::record::RecordArgs {
    type Error = anyhow::Error;

    fn try_from(r: RecordCli) -> anyhow::Result<Self> {
        use crate::record::probes::attach::ProbeMode;
        let Follow { pids, ollama, ollama_pids, ollama_user } = r.follow;
        let ollama_user = match ollama_user.as_deref() {
            Some(user) => Some(crate::record::probes::ollama::uid_of(user).ok_or_else(|| {
                anyhow::anyhow!("no user {user} on this machine: give --ollama-user a user name or a uid")
            })?),
            None => None,
        };
        Ok(Self {
            ollama_user,
            private_argv: r.private_argv,
            full_argv: r.full_argv,
            output: r.output,
            ollama: ollama || !ollama_pids.is_empty(),
            ollama_pids,
            models_dir: r.models_dir,
            force: r.force,
            pids,
            libs: r.libs,
            duration: r.duration,
            command: r.command,
            ring_bytes: r.ring_size,
            quiet: r.quiet,
            ready_file: r.ready_file,
            cuda_runtime: r.cuda_runtime,
            hip_launches: r.hip_launches,
            every_launch: r.every_launch,
            read_delay: Duration::from_millis(r.debug_read_delay_ms),
            sync_teardown: r.debug_sync_teardown,
            program_stats: r.program_stats,
            metrics: r.metrics,
            metrics_no_comm: r.metrics_no_comm,
            rotate_size: r.rotate_size,
            rotate_every: r.rotate_every,
            keep_size: r.keep_size,
            probe_mode: match (r.probe_mode, r.all_calls) {
                (ProbeModeArg::Record, false) => ProbeMode::Lean,
                (ProbeModeArg::Record, true) => ProbeMode::AllCalls,
                (ProbeModeArg::Empty, false) => ProbeMode::Empty,
                (ProbeModeArg::Empty, true) => ProbeMode::EmptyAllCalls,
                (ProbeModeArg::BoundedLoops, false) => ProbeMode::BoundedLoops,
                (ProbeModeArg::BoundedLoops, true) => {
                    anyhow::bail!("--probe-mode bounded-loops records the lean set of calls: leave out --all-calls")
                }
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_mins(2)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        parse_duration("-1").unwrap_err();
        parse_duration("soon").unwrap_err();
        // Past the stated maximum: one sentence, never a panic.
        for huge in ["1e20", "1e300", "18446744073709551616", "1e19", "366d", "8761h", "525601m"] {
            let e = parse_duration(huge).unwrap_err();
            assert!(e.contains("at most 365 days") || e.contains("not a duration"), "{huge}: {e}");
        }
        assert_eq!(parse_duration("8760h"), Ok(MAX_DURATION));
    }

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from(["tracer", "record", "-o", "x.jsonl", "--pid", "5", "--", "prog", "-a"]).unwrap();
        let Cmd::Record(r) = cli.command else { panic!() };
        assert_eq!((r.follow.pids, r.command), (vec![5], vec!["prog".to_owned(), "-a".to_owned()]));
        Cli::try_parse_from(["tracer", "record", "--ring-size", "1000"]).unwrap_err();
    }

    /// A negative number given to a numeric option is that option's error in one sentence, never clap's tip to
    /// pass it after `--` (which, for `record`, would run it as the command).
    #[test]
    fn a_negative_number_is_the_options_error_not_a_tip_to_use_dashes() {
        for argv in [
            &["tracer", "record", "-d", "-5"][..],
            &["tracer", "record", "--pid", "-5"],
            &["tracer", "record", "--ollama-pid", "-1"],
            &["tracer", "record", "--ring-size", "-4096"],
            &["tracer", "record", "--keep-size", "-1G"],
            &["tracer", "record", "--rotate-every", "-5m"],
            &["tracer", "report", "--top", "-5", "t.jsonl"],
        ] {
            let e = Cli::try_parse_from(argv).unwrap_err().to_string();
            assert!(e.contains("invalid value '-") && !e.contains("tip:"), "{argv:?}: {e}");
        }
        let e = Cli::try_parse_from(["tracer", "record", "--pid", "-5"]).unwrap_err().to_string();
        assert!(e.contains("is not a process ID"), "{e}");
    }

    /// HIP's launches are left to the doorbell where KFD lists an AMD GPU and the HSA runtime is probed, unless
    /// asked for (`--hip-launches`, `--all-calls`).
    #[test]
    fn hip_launches_are_left_to_the_doorbell_only_where_an_amd_gpu_reads_them() {
        use crate::record::launches_at_doorbell_with;
        let at_doorbell = |flags: &[&str], gpus: &[u32]| {
            let argv = [&["tracer", "record"][..], flags, &["--", "prog"]].concat();
            let Cmd::Record(r) = Cli::try_parse_from(argv).unwrap().command else { panic!() };
            launches_at_doorbell_with(&crate::record::RecordArgs::try_from(r).unwrap(), gpus)
        };
        let gfx1100 = [110_000];
        assert!(at_doorbell(&[], &gfx1100));
        assert!(!at_doorbell(&[], &[]), "no AMD GPU: no packet reaches a queue");
        assert!(!at_doorbell(&["--hip-launches"], &gfx1100));
        assert!(!at_doorbell(&["--all-calls"], &gfx1100));
        assert!(!at_doorbell(&["--lib", "/opt/rocm/lib/libamdhip64.so.6"], &gfx1100), "ROCr not probed");
        assert!(at_doorbell(&["--lib", "/opt/rocm/lib/libhsa-runtime64.so.1"], &gfx1100));
    }
}
