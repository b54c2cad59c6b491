//! A recording's set-up, in three steps: load the programs, attach them (runtime copies, library entry
//! points, the maps user space holds), then start (the command stopped, the header, the processes known at
//! the start).

use crate::os::messages::{say, warning};
use std::sync::Arc;

use anyhow::{Result, anyhow, bail};
use aya::maps::{HashMap as BpfHashMap, PerCpuArray, RingBuf};

use super::{
    Scope, Session,
    args::{RecordArgs, Setup, Targets, header, launches_at_doorbell, raise_open_files_limit, runtimes},
    kernel::{KernelCounts, KernelMaps},
};
use crate::{
    os::clock::monotonic_ns,
    os::proc::{LIVE, Procs as _},
    record::{
        attribute::{self, Attributor},
        intake::ring::Ring,
        names::early::EarlyLooks,
        probes::{
            attach::{self, Settings},
            entries::Entries,
            found::Found,
            libs::LibCopy,
            ollama,
            watch::LibraryWatch,
        },
        session::command::Command,
    },
    trace::{Line, Writer, counted::Counts},
};

/// The programs loaded, before anything is attached.
struct Loaded {
    ebpf: aya::Ebpf,
    multi: Option<attach::MultiProgram>,
    /// Every map, kept while aya held them all: the runtime links' programs share them too.
    maps: Result<attach::SharedMaps>,
    /// The runtime links' programs, loading on their thread.
    links: std::thread::JoinHandle<Result<attach::RuntimeLinks>>,
    /// The GPU scheduler tracepoints attached (queue, run, done), if this kernel has them.
    job_tracepoints: Vec<String>,
    program_stats: Option<std::os::fd::OwnedFd>,
}

/// The programs attached, and the maps and threads user space holds.
struct Attached {
    ebpf: aya::Ebpf,
    watch: LibraryWatch,
    /// The libraries probed and counted, said after the header.
    records: Vec<Found>,
    kernel: KernelMaps,
    ring: Ring,
    early: Arc<EarlyLooks>,
}

impl<'a> Session<'a> {
    /// Loads the programs, attaches to every copy, fills the PID filter, starts the command stopped,
    /// and writes the header and what is known of each process at the start.
    pub(in crate::record) fn set_up(
        args: &'a RecordArgs,
        setup: Setup,
        writer: Writer,
    ) -> Result<(Self, Option<Command>)> {
        let Setup { targets, copies, counted, program } = setup;
        let filter_by_pid = !targets.pids.is_empty() || !args.command.is_empty() || args.ollama;
        // Before any probe is placed (a kernel without multi-point links takes a descriptor per point).
        raise_open_files_limit();
        let loaded = load(args, &targets, filter_by_pid)?;
        let job_tracepoints = loaded.job_tracepoints.clone();
        let program_stats = loaded.program_stats;
        let attached =
            attach_all(args, (loaded.ebpf, loaded.multi, loaded.maps, loaded.links), &targets, &copies, &counted)?;
        Self::start(args, attached, targets, program, writer, (filter_by_pid, job_tracepoints, program_stats))
    }

    /// Starts the command stopped, writes the header and the set-up's records, and what is known of each
    /// process at the start.
    fn start(
        args: &'a RecordArgs,
        attached: Attached,
        targets: Targets,
        program: Option<std::path::PathBuf>,
        mut writer: Writer,
        (filter_by_pid, job_tracepoints, program_stats): (bool, Vec<String>, Option<std::os::fd::OwnedFd>),
    ) -> Result<(Self, Option<Command>)> {
        let Attached { mut ebpf, mut watch, records: setup, mut kernel, ring, early } = attached;
        for &pid in &targets.pids {
            kernel.pids.insert(pid, 1, 0)?;
        }
        let child = program.as_deref().map(|path| start_command(args, path)).transpose()?;
        let child_pid = child.as_ref().map(|c| c.pid);
        if let Some(pid) = child_pid {
            kernel.pids.insert(pid, 1, 0)?;
        }
        let mut attr = attributor(args, &targets.pids, child_pid, early, filter_by_pid);
        for &pid in targets.pids.iter().chain(&targets.servers).chain(child_pid.iter()) {
            watch.scope(pid, false, attr.watched(pid));
        }

        let start_mono = monotonic_ns();
        watch.started = start_mono;
        writer.write(&Line::Header(Box::new(header(
            args,
            &targets,
            filter_by_pid,
            watch.scoped(),
            start_mono,
            job_tracepoints,
            watch.launches_at_doorbell,
        ))))?;
        attr.found(setup, &mut writer)?;
        for &pid in targets.pids.iter().chain(child_pid.iter()) {
            // One reading of its maps for both: naming's look and the library listing.
            let listing = LIVE.maps(pid);
            attr.start_process(pid, start_mono, listing.clone(), &mut writer)?;
            let held = if listing.as_ref().is_none_or(Vec::is_empty) { attr.held_mappings(pid) } else { Vec::new() };
            let found = watch.scan(&mut ebpf, pid, start_mono, args.probe_mode, listing, (held, attr.lend(pid)));
            attr.found(found, &mut writer)?;
        }
        kernel.filter_at_start = filter_by_pid.then(|| kernel.filtered() as u64);
        writer.flush()?;
        let until_targets_exit = !targets.pids.is_empty() && child_pid.is_none() && !targets.watch_ollama;
        let scope = Scope { until_targets_exit, child_pid, servers: targets.servers, ollama: targets.watch_ollama };
        let session = Session {
            args,
            ebpf,
            watch,
            kernel,
            ring,
            attr,
            writer,
            scope,
            _program_stats: program_stats,
            metrics: None,
        };
        Ok((session, child))
    }
}

/// Loads the programs with the recording's settings, and the multi-point program for library entry points.
fn load(args: &RecordArgs, targets: &Targets, filter_by_pid: bool) -> Result<Loaded> {
    let program_stats = if args.program_stats {
        Some(aya::sys::enable_stats(aya::sys::Stats::RunTime).map_err(|e| {
            anyhow!("--program-stats: the kernel refused to time eBPF programs ({e}); record without it")
        })?)
    } else {
        None
    };
    let watch_comm = targets.watch_ollama.then_some("ollama");
    let jobs =
        attach::JobTracepoints::find().map_err(|e| warning!("GPU job times are not recorded: {e:#}")).ok().flatten();
    let job_tracepoints = jobs.as_ref().map(|j| j.names.map(str::to_owned).to_vec()).unwrap_or_default();
    warn_of_ring_size(args.ring_bytes);
    let runs = !args.every_launch;
    let settings = Settings { filter_by_pid, ring_bytes: args.ring_bytes, watch_comm, jobs, runs };
    let mut ebpf = attach::load(&settings)?;
    // Taken while aya holds every map: every program loaded for multi-point links shares them.
    let maps = attach::SharedMaps::of(&ebpf);
    // The runtime links' programs verified on a thread while the tracepoints' are here.
    let links_maps = maps.as_ref().map_err(|e| anyhow!("{e:#}")).and_then(attach::SharedMaps::try_clone);
    let links = attach::RuntimeLinks::load_apart(links_maps, args.probe_mode);
    attach::attach_tracepoints(&mut ebpf, &settings)?;
    let multi = maps.as_ref().map_err(|e| anyhow!("{e:#}")).and_then(|maps| library_program(maps, args)).map_err(|e| {
        warning!("calls into GPU libraries other than the runtimes are not counted: {e:#}");
    });
    let multi = multi.ok();
    Ok(Loaded { ebpf, multi, maps, links, job_tracepoints, program_stats })
}

/// The program counting calls into other GPU libraries' entry points: for multi-point links, or, on a kernel
/// without them (before Linux 6.6), for one uprobe per function, said once.
fn library_program(maps: &attach::SharedMaps, args: &RecordArgs) -> Result<attach::MultiProgram> {
    let name = args.probe_mode.library_program();
    let multi = attach::MultiProgram::load(attach::OBJECT, maps, name).and_then(|p| {
        if p.links_work() { Ok(p) } else { Err(anyhow!("the kernel makes no multi-point uprobe links")) }
    });
    multi.or_else(|multi| {
        let each = attach::MultiProgram::load_for(attach::OBJECT, maps, name, attach::Points::Each)
            .map_err(|e| anyhow!("{e:#} (and for multi-point links: {multi:#})"))?;
        warning!(
            "the kernel refused multi-point uprobes (Linux 6.6 or later): calls into GPU libraries other than the runtimes are counted with one uprobe per exported function (a descriptor each; released in the background after the recording, about 0.1 s each)"
        );
        Ok(each)
    })
}

/// The object, the library entry counts' program, every map and the runtime links loading.
type Programs = (
    aya::Ebpf,
    Option<attach::MultiProgram>,
    Result<attach::SharedMaps>,
    std::thread::JoinHandle<Result<attach::RuntimeLinks>>,
);

/// Attaches the runtime probes to every copy, takes the maps user space holds, counts the entry points of the
/// GPU libraries the command will load, and starts the ring's drain.
fn attach_all(
    args: &RecordArgs,
    (mut ebpf, multi, maps, links): Programs,
    targets: &Targets,
    copies: &[LibCopy],
    counted: &[(crate::trace::GpuLibrary, LibCopy)],
) -> Result<Attached> {
    let mut watch =
        LibraryWatch::new(runtimes(args, !targets.pids.is_empty()), !args.libs.is_empty(), launches_at_doorbell(args));
    // The initializer's witness for the libraries whose calls are counted (the runtime links load their own).
    let witness = maps.as_ref().ok().zip(multi.as_ref()).and_then(|(m, counting)| {
        attach::MultiProgram::load_for(attach::OBJECT, m, attach::INIT_WITNESS, counting.points()).ok()
    });
    watch.links = links
        .join()
        .unwrap_or_else(|_panic| Err(anyhow!("the thread loading the runtime programs panicked")))
            .map_err(|e| {
                warning!(
                    "runtime functions are probed one uprobe each (the kernel refused multi-point uprobes, Linux 6.6 or later), so releasing them after the recording takes about 0.1 s a probe: {e:#}"
                );
            })
            .ok();
    if watch.links.is_none() {
        attach::load_uprobes(&mut ebpf, args.probe_mode)?;
    }
    // Recording running processes by PID, the probes of the calls that recur go into them alone (a link per
    // process), so that other processes mapping the same copies do not trap on their launches, copies and
    // synchronizations. A child they start later gets its links when its fork or exec is read; a copy it
    // already maps then is marked late for it (its launches before the links are not seen, and said). The
    // calls that build state (registrations, code loaded, lookups, queues) stay probed in every process
    // mapping the copies, filtered by the programs, so such a child still has every name.
    //
    // A command and Ollama's runners are recorded from their first call instead: the kernel cannot place a
    // link in a child at its fork, and a child started while the ring is busy (a library registering
    // thousands of kernels) runs its first launches before its fork is read. There every probe stays on
    // every process mapping the copies, and the programs filter.
    if args.command.is_empty()
        && !args.ollama
        && !targets.pids.is_empty()
        && attach::scoped_links_work()
        && let Some(links) = watch.links.as_mut()
    {
        links.scope_to_processes(args.program_stats);
    }
    let mut setup = Vec::new();
    for copy in copies {
        match watch.attach(&mut ebpf, copy, args.probe_mode) {
            Ok(records) => setup.extend(records),
            // A copy that vanished since it was found (an upgrade, a removed install) is skipped; the
            // check below still wants one probed runtime.
            Err(e) if copies.len() > 1 || targets.watch_ollama => {
                warning!("{} skipped: {e:#}", copy.path);
            }
            Err(e) => return Err(e),
        }
    }
    // Watching for Ollama, the runtimes may come later with a server not started yet.
    // Watching for Ollama or recording a command, a runtime opened later is probed then.
    if !targets.watch_ollama
        && args.command.is_empty()
        && !setup.iter().any(|f| matches!(f, Found::Probed(_, probes) if probes.iter().any(|p| p.error.is_none())))
    {
        let paths: Vec<&str> = copies.iter().map(|c| c.path.as_str()).collect();
        bail!("no runtime function could be probed in {}: is this libamdhip64 or libcuda?", paths.join(", "));
    }
    let mut take = |name: &str| ebpf.take_map(name).ok_or_else(|| anyhow!("eBPF object has no {name} map"));
    let kernel = KernelMaps {
        pids: BpfHashMap::try_from(take("PIDS")?)?,
        param_plans: BpfHashMap::try_from(take("PARAM_PLANS")?)?,
        threads: BpfHashMap::try_from(take("THREADS")?)?,
        runs: BpfHashMap::try_from(take("RUNS")?)?,
        counts: KernelCounts {
            counters: PerCpuArray::try_from(take("COUNTERS")?)?,
            drops: PerCpuArray::try_from(take("DROPS")?)?,
        },
        filter_at_start: None,
        counted: Counts::default(),
    };
    watch.entries = Some(Entries::new(
        (multi, witness),
        BpfHashMap::try_from(take("ENTRY_CALLS")?)?,
        BpfHashMap::try_from(take("STEP_TALLY")?)?,
    ));
    // The GPU libraries the command will load: counted before its first instruction.
    for (gpu, copy) in counted {
        setup.extend(watch.count_entries(Some(*gpu), &copy.path, &copy.file).map(Found::Counting));
    }
    if let Some(links) = watch.links.as_mut() {
        links.finish_preloading();
    }
    // The looking thread ends with the drain, which holds its poster.
    let (poster, early, _looking) = crate::record::names::early::start()?;
    let ring = Ring::spawn(RingBuf::try_from(take("EVENTS")?)?, args.read_delay, poster)?;

    Ok(Attached { ebpf, watch, records: setup, kernel, ring, early })
}

/// Attribution's set-up: the early look, the command's child named by its argv until it execs, and where
/// models and command lines come from.
fn attributor(
    args: &RecordArgs,
    target_pids: &[u32],
    child_pid: Option<u32>,
    early: Arc<EarlyLooks>,
    filter_by_pid: bool,
) -> Attributor {
    Attributor::new(attribute::Config {
        early,
        command: child_pid.map(|pid| (pid, args.command.clone())),
        runtime_view: args.cuda_runtime,
        models_dir: ollama::models_dir(args.models_dir.as_deref()),
        private_argv: args.argv_private(filter_by_pid),
        targets: target_pids.iter().chain(child_pid.iter()).copied().collect(),
    })
}

/// The command, started stopped: it runs its first instruction once the recording is live.
fn start_command(args: &RecordArgs, path: &std::path::Path) -> Result<Command> {
    let to_stdout = crate::os::output::Dest::parse(&args.output) == crate::os::output::Dest::Stdout;
    if to_stdout {
        say!("the trace goes to standard output, so the command's standard output goes to standard error");
    }
    Command::start_stopped(path, &args.command, to_stdout)
}

/// Says so when the ring buffer would take more than half the memory available: the kernel's pages, and as
/// much again mapped into tracer as the drain reads them (a 2 GiB ring took 4.2 GB).
fn warn_of_ring_size(ring_bytes: u32) {
    if let Some(warning) = crate::os::proc::mem_available().and_then(|a| ring_warning(ring_bytes, a)) {
        warning!("{warning}");
    }
}

/// Rings past this are said whatever the memory: their set-up alone takes seconds (a 2 GiB ring: 7.5 s and
/// 4.2 GB on this project's VM) and no drain that keeps up needs them (the default 4 MiB dropped nothing at
/// 60 000 launches a second, bench row 4).
const RING_SAID: u32 = 256 << 20;

/// The sentence for a ring of `ring_bytes` with `available` bytes of memory available, when it takes more
/// than half of them, or is larger than [`RING_SAID`].
fn ring_warning(ring_bytes: u32, available: u64) -> Option<String> {
    let taken = 2 * u64::from(ring_bytes);
    if taken > available / 2 {
        return Some(format!(
            "--ring-size {ring_bytes} takes about {} MiB (the ring, and tracer's mapping of it), more than half the {} MiB of memory available: give a smaller --ring-size",
            taken >> 20,
            available >> 20
        ));
    }
    (ring_bytes > RING_SAID).then(|| {
        format!(
            "--ring-size {ring_bytes} takes about {} MiB (the ring, and tracer's mapping of it) and seconds to set up before the recording is live; a ring of {} MiB or less is enough for a drain that keeps up",
            taken >> 20,
            RING_SAID >> 20
        )
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_ring_of_more_than_half_the_memory_available_or_past_256_mib_is_said() {
        let warning = super::ring_warning(1 << 31, 6 << 30).unwrap();
        assert!(warning.starts_with("--ring-size 2147483648 takes about 4096 MiB"), "{warning}");
        assert_eq!(super::ring_warning(4 << 20, 6 << 30), None);
        let warning = super::ring_warning(1 << 31, 64 << 30).unwrap();
        assert!(warning.contains("4096 MiB") && warning.contains("seconds to set up"), "{warning}");
        assert_eq!(super::ring_warning(256 << 20, 9 << 30), None);
    }
}
