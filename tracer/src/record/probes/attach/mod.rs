//! The probe plan and its execution.
//!
//! Checks the machine can load tracer's programs, loads them with the recording's settings, and attaches
//! each probed function of each library copy with a cookie naming (library, function), plus the process
//! tracepoints.
#![expect(
    clippy::little_endian_bytes,
    reason = "the formats read here (AQL packets, offload bundles, ELF notes, driver argument structs) are little-endian by definition"
)]

use std::{collections::BTreeMap, fs, path::Path};

use anyhow::{Context as _, Result, anyhow, bail};
use aya::{
    Ebpf, EbpfLoader,
    programs::{
        TracePoint, UProbe,
        uprobe::{UProbeAttachLocation, UProbeAttachPoint, UProbeScope},
    },
};
use tracer_common::{
    ApiFunc,
    api::{Layout, Library, Op, ProbeShape},
    cookie,
};

use crate::{record::probes::libs::LibCopy, trace};

mod links;
mod mode;
mod multi;
mod placement;
mod points;
mod release;
mod sched;
use links::Link;
pub(crate) use links::{Linked, RuntimeLinks};
use mode::Programs;
pub(crate) use mode::{INIT_WITNESS, OBJECT, ProbeMode};
pub(crate) use multi::{MultiProgram, Points, SharedMaps, misses as program_misses};
pub(crate) use placement::{one_trap_point, register_args_point};
pub(crate) use release::{release_in_background, releases_in_progress};
pub(crate) use sched::JobTracepoints;

pub(crate) const TRACEFS: &str = "/sys/kernel/tracing";

/// Checks what loading needs, in the order a user would fix it.
///
/// Root, a kernel new enough (the BPF ring buffer: 5.8), the capabilities (a container's root may lack
/// them), kernel BTF, tracefs (mounted here when missing). Each missing piece is one sentence saying what
/// to do.
pub(crate) fn preflight() -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("tracer record needs root to load eBPF programs: run it with sudo");
    }
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    if let Some(v) = kernel_version(&release)
        && v < MIN_KERNEL
    {
        bail!(
            "this kernel ({}) is older than tracer supports: it needs Linux {}.{} or later (the BPF ring buffer)",
            release.trim(),
            MIN_KERNEL.0,
            MIN_KERNEL.1
        );
    }
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let missing = missing_capabilities(&status);
    if !missing.is_empty() {
        bail!(
            "tracer record runs as root without {}: give it these capabilities (a container: --cap-add {}), or run it as root on the host",
            missing.join(", "),
            missing.iter().map(|c| c.trim_start_matches("CAP_")).collect::<Vec<_>>().join(" --cap-add ")
        );
    }
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        bail!(
            "this kernel exposes no BTF (/sys/kernel/btf/vmlinux is missing): tracer needs a kernel built with CONFIG_DEBUG_INFO_BTF=y"
        );
    }
    ensure_tracefs()
}

/// The oldest kernel tracer loads on: the BPF ring buffer came in 5.8.
const MIN_KERNEL: (u32, u32) = (5, 8);

/// From this kernel on, a multi-point uprobe link's process filter holds (before 6.10 it compared the
/// calling thread's memory map, not its process): recordings of chosen processes place their runtime
/// probes in those processes only.
const SCOPED_LINKS_KERNEL: (u32, u32) = (6, 10);

/// Whether this kernel filters multi-point uprobe links by process reliably (see [`SCOPED_LINKS_KERNEL`]).
pub(crate) fn scoped_links_work() -> bool {
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    kernel_version(&release).is_some_and(|v| v >= SCOPED_LINKS_KERNEL)
}

/// What recording needs beyond root's uid, by bit: loading programs and maps (`CAP_BPF`), uprobes and
/// tracepoints (`CAP_PERFMON`), mounting tracefs, reading `/proc/PID/map_files` and the kernel's program
/// statistics (`CAP_SYS_ADMIN`), other processes' memory and maps (`CAP_SYS_PTRACE`), their files
/// (`CAP_DAC_READ_SEARCH`).
const NEEDED_CAPABILITIES: [(u32, &str); 5] =
    [(39, "CAP_BPF"), (38, "CAP_PERFMON"), (21, "CAP_SYS_ADMIN"), (19, "CAP_SYS_PTRACE"), (2, "CAP_DAC_READ_SEARCH")];

/// "6.18.0-1-amd64" -> (6, 18).
fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.trim().split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The capabilities of [`NEEDED_CAPABILITIES`] missing from `CapEff` in `/proc/self/status` (none when the
/// line cannot be read: the kernel then answers for itself).
fn missing_capabilities(status: &str) -> Vec<&'static str> {
    let Some(eff) =
        status.lines().find_map(|l| l.strip_prefix("CapEff:")).and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
    else {
        return Vec::new();
    };
    NEEDED_CAPABILITIES.iter().filter(|(bit, _)| eff & (1u64 << bit) == 0).map(|(_, name)| *name).collect()
}

#[cfg(test)]
mod preflight_tests {
    use super::*;

    #[test]
    fn kernel_versions_and_capabilities_are_read() {
        assert_eq!(kernel_version("6.18.0-1-amd64\n"), Some((6, 18)));
        assert_eq!(kernel_version("5.4.0"), Some((5, 4)));
        assert!(kernel_version("5.4.0").unwrap() < MIN_KERNEL);
        assert_eq!(kernel_version("garbage"), None);
        assert!(missing_capabilities("Name:\ttracer\nCapEff:\t000001ffffffffff\n").is_empty());
        // Root in a container without CAP_BPF and CAP_SYS_ADMIN.
        let eff = 0x0000_01ff_ffff_ffffu64 & !(1 << 39) & !(1 << 21);
        let got = missing_capabilities(&format!("CapEff:\t{eff:016x}\n"));
        assert_eq!(got, ["CAP_BPF", "CAP_SYS_ADMIN"]);
        assert!(missing_capabilities("no such line").is_empty());
    }
}

fn ensure_tracefs() -> Result<()> {
    if Path::new(TRACEFS).join("events").is_dir() {
        return Ok(());
    }
    let target = std::ffi::CString::new(TRACEFS)?;
    let fstype = std::ffi::CString::new("tracefs")?;
    let source = std::ffi::CString::new("nodev")?;
    // SAFETY: valid NUL-terminated strings; no data argument.
    let rc = unsafe { libc::mount(source.as_ptr(), target.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) };
    if rc != 0 || !Path::new(TRACEFS).join("events").is_dir() {
        bail!(
            "tracefs is not mounted at {TRACEFS} and mounting it failed ({}): mount it with `mount -t tracefs nodev {TRACEFS}`",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// Load-time settings.
pub(crate) struct Settings {
    pub(crate) filter_by_pid: bool,
    pub(crate) ring_bytes: u32,
    /// A command name whose exec joins the PID filter (`ollama`), at most 15 bytes.
    pub(crate) watch_comm: Option<&'static str>,
    /// The GPU scheduler's tracepoints to attach, where this kernel has them.
    pub(crate) jobs: Option<JobTracepoints>,
    /// Count exact repeats of a launch into runs (not `--every-launch`).
    pub(crate) runs: bool,
}

/// Offset of `field` in a tracepoint's format description, if the kernel has that field.
pub(crate) fn field_offset(format: &str, field: &str) -> Option<u32> {
    format.lines().find_map(|l| {
        let l = l.trim();
        let decl = l.strip_prefix("field:")?.split(';').next()?;
        let name = decl.rsplit([' ', '\t', '*']).next()?;
        let name = name.split('[').next()?;
        if name != field {
            return None;
        }
        let off = l.split("offset:").nth(1)?.split(';').next()?;
        off.trim().parse().ok()
    })
}

/// Which GPU tracepoint groups this kernel has (amdgpu, `gpu_scheduler`). tracer attaches to the GPU
/// scheduler's jobs ([`JobTracepoints`]); amdgpu's own are recorded as there or not.
pub(crate) fn gpu_tracepoint_groups() -> BTreeMap<String, bool> {
    ["amdgpu", sched::GROUP]
        .iter()
        .map(|g| ((*g).to_owned(), Path::new(TRACEFS).join("events").join(g).is_dir()))
        .collect()
}

fn tracepoint_format(category: &str, name: &str) -> Result<String> {
    let path = format!("{TRACEFS}/events/{category}/{name}/format");
    fs::read_to_string(&path).with_context(|| format!("this kernel has no tracepoint {category}:{name} ({path})"))
}

/// The eBPF object with the recording's settings, its maps made and none of its programs loaded yet.
pub(crate) fn load(settings: &Settings) -> Result<Ebpf> {
    // RLIMIT_MEMLOCK: kernels since 5.11 charge BPF memory to the cgroup; where raising it is not allowed
    // the load still works, so a failure here is not an error.
    let unlimited = libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: plain syscall with a valid struct.
    let _: libc::c_int = unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &raw const unlimited) };
    object(settings)
}

/// Loads and attaches the tracepoints' programs: process events, ioctls, opens, and the GPU scheduler's
/// jobs where `settings` has them.
pub(crate) fn attach_tracepoints(ebpf: &mut Ebpf, settings: &Settings) -> Result<()> {
    for (name, category) in [
        ("task_newtask", "task"),
        ("sched_process_exec", "sched"),
        ("sched_process_exit", "sched"),
        ("sys_enter_ioctl", "syscalls"),
        ("sys_exit_ioctl", "syscalls"),
        ("sys_enter_openat", "syscalls"),
    ] {
        let prog: &mut TracePoint = program(ebpf, name)?;
        prog.load().with_context(|| format!("the kernel refused eBPF program {name}"))?;
        prog.attach(category, name).with_context(|| format!("attaching to tracepoint {category}:{name} failed"))?;
    }
    if let Some(jobs) = &settings.jobs {
        for (prog_name, tp) in ["job_queue", "job_run", "job_done"].into_iter().zip(jobs.names) {
            let prog: &mut TracePoint = program(ebpf, prog_name)?;
            prog.load().with_context(|| format!("the kernel refused eBPF program {prog_name}"))?;
            prog.attach(sched::GROUP, tp)
                .with_context(|| format!("attaching to tracepoint {}:{tp} failed", sched::GROUP))?;
        }
    }
    Ok(())
}

/// Loads the runtime probes' programs for one uprobe per function, where the kernel makes no multi-point
/// links (before Linux 6.6): loaded before any copy is probed, so that a copy found during the recording
/// is probed at once, not after the verifier. With multi-point links they are not loaded at all (each was
/// verified twice, once for each kind, a quarter of a second of a recording's start-up); one is loaded at
/// its first use where a link is refused ([`attach_one`]).
pub(crate) fn load_uprobes(ebpf: &mut Ebpf, mode: ProbeMode) -> Result<()> {
    let Programs { entry, ret, one_trap, register, doorbell, .. } = mode.programs();
    for name in [entry, ret, one_trap, register, doorbell] {
        let prog: &mut UProbe = program(ebpf, name)?;
        if prog.fd().is_err() {
            prog.load().with_context(|| format!("the kernel refused eBPF program {name}"))?;
        }
    }
    Ok(())
}

/// The eBPF object with its globals set: the filter, tracer's own PID, the name a process is followed by
/// (`--ollama`), the ring's wake-up size, and each tracepoint field's offset, from its format file.
fn object(settings: &Settings) -> Result<Ebpf> {
    let filter = u32::from(settings.filter_by_pid);
    let tgid = std::process::id();
    let mut comm = [0u8; 16];
    if let Some(name) = settings.watch_comm {
        let n = name.len().min(15);
        comm[..n].copy_from_slice(&name.as_bytes()[..n]);
    }
    let half = |at: usize| u64::from_le_bytes(comm[at..at + 8].try_into().expect("8 bytes"));
    let (comm_lo, comm_hi, wakeup) = (half(0), half(8), settings.ring_bytes / 4);
    let runs = u32::from(settings.runs);
    // Each tracepoint's format read once, for the offsets of the fields its program reads.
    let mut offsets = Vec::new();
    for (category, tp, fields) in [
        ("task", "task_newtask", &[("NEWTASK_PID_OFFSET", "pid"), ("NEWTASK_FLAGS_OFFSET", "clone_flags")][..]),
        (
            "syscalls",
            "sys_enter_ioctl",
            &[("IOCTL_FD_OFFSET", "fd"), ("IOCTL_CMD_OFFSET", "cmd"), ("IOCTL_ARG_OFFSET", "arg")],
        ),
        ("syscalls", "sys_exit_ioctl", &[("IOCTL_RET_OFFSET", "ret")]),
        ("syscalls", "sys_enter_openat", &[("OPENAT_FILENAME_OFFSET", "filename")]),
    ] {
        let format = tracepoint_format(category, tp)?;
        for &(global, name) in fields {
            let at =
                field_offset(&format, name).ok_or_else(|| anyhow!("tracepoint {category}:{tp} has no field {name}"))?;
            offsets.push((global, at));
        }
    }
    let mut loader = EbpfLoader::new();
    loader
        .override_global("FILTER_ENABLED", &filter, true)
        .override_global("TRACER_TGID", &tgid, true)
        .override_global("WATCH_COMM_LO", &comm_lo, true)
        .override_global("WATCH_COMM_HI", &comm_hi, true)
        .override_global("WAKEUP_BYTES", &wakeup, true)
        .override_global("RUNS_ENABLED", &runs, true);
    for (global, at) in &offsets {
        loader.override_global(global, at, true);
    }
    let group_dead = field_offset(&tracepoint_format("sched", "sched_process_exit")?, "group_dead").unwrap_or(0);
    loader
        .override_global("EXIT_GROUP_DEAD_OFFSET", &group_dead, true)
        .override_global(
            "JOB_FORMAT",
            &settings.jobs.as_ref().map_or([tracer_common::JobFields::ABSENT; 3], |j| j.format),
            true,
        )
        .map_max_entries("EVENTS", settings.ring_bytes)
        .load(OBJECT)
        .context("loading tracer's eBPF programs into the kernel failed")
}

fn program<'a, T>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut T>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program, Error = aya::programs::ProgramError>,
{
    let prog = ebpf.program_mut(name).ok_or_else(|| anyhow!("the eBPF object has no program {name}"))?;
    prog.try_into().with_context(|| format!("eBPF program {name} has an unexpected type"))
}

/// Why a libllama's `llama_process` is left unprobed: its batch would be read at guessed offsets.
pub(crate) const EXT_LAYOUT_UNREAD: &str = "its llama_batch_ext layout could not be read from the library's code \
     (llama_batch_ext::set_output, set_token_pos and add_seq): steps are cut at ggml's passes instead";

/// Where `func` begins in `copy` (a file offset), from its symbol among `offsets`; ggml-vulkan's pipeline
/// maker, which has no exported symbol, where the library's code says. Err: why not.
fn function_offset(func: ApiFunc, offsets: &BTreeMap<String, u64>, copy: &LibCopy) -> Result<u64, &'static str> {
    if func.layout() == Layout::PipelineName {
        super::ggml_vulkan::pipeline_maker(&copy.file)
    } else {
        offsets.get(func.symbol()).copied().ok_or("symbol not exported by this library")
    }
}

/// Why `func` is left unprobed on purpose, if it is: a call the default recording only counts (`--all-calls`
/// probes it), or HIP's launch where each dispatch is read at its doorbell (`--hip-launches` probes it).
fn left_out(func: ApiFunc, mode: ProbeMode, launches_at_doorbell: bool) -> Option<&'static str> {
    if !mode.probes_tallied() && func.tallied() {
        Some(trace::LEAN_UNPROBED)
    } else if launches_at_doorbell && func.library() == Library::Hip && matches!(func.op(), Op::Launch | Op::PushConfig)
    {
        Some(trace::DOORBELL_READS)
    } else {
        None
    }
}

/// A probe point of a program (keyed by the program, whether at the return, and whether its function's calls
/// recur: [`tracer_common::api::Op::recurs`]): (offset, cookie, index of the function's probe record).
type Point = (u64, u64, usize);

/// Attaches every probed function of the copy's runtime found in `copy`: through multi-point links when
/// `links` is given (one per program, or, placed per process, one per program and process for the calls
/// that recur and one in every process for the others), else one uprobe per function and program; a link
/// the kernel refuses falls back to uprobes.
///
/// Where `launches_at_doorbell`, HIP's launch functions are left unprobed: each dispatch is read at its queue's
/// doorbell alone.
///
/// Returns one probe record per function, with the reason where one could not be attached (a symbol this
/// runtime version lacks, an alias already probed, a function left out on purpose).
pub(crate) fn attach_runtime(
    ebpf: &mut Ebpf,
    links: Option<&mut RuntimeLinks>,
    lib_id: u32,
    copy: &LibCopy,
    (mode, launches_at_doorbell): (ProbeMode, bool),
) -> Result<Vec<trace::Probe>> {
    let programs = mode.programs();
    let offsets =
        crate::os::elf::function_offsets(&copy.file).with_context(|| format!("{} is not an ELF library", copy.path))?;
    let target = copy.attach_path();
    let mut probed_at: BTreeMap<u64, ApiFunc> = BTreeMap::new();
    let mut out = Vec::new();
    let mut planned: BTreeMap<(&'static str, bool, bool), Vec<Point>> = BTreeMap::new();
    let mut links = links;
    for &func in ApiFunc::ALL.iter().filter(|f| f.library() == copy.runtime()) {
        let mut rec = trace::Probe { lib: lib_id, api: func.symbol().to_owned(), ..Default::default() };
        let off = match function_offset(func, &offsets, copy) {
            Ok(off) => off,
            Err(why) => {
                rec.error = Some(why.into());
                out.push(rec);
                continue;
            }
        };
        rec.offset = Some(off);
        if let Some(why) = left_out(func, mode, launches_at_doorbell) {
            rec.error = Some(why.into());
            out.push(rec);
            continue;
        }
        if let Some(first) = probed_at.get(&off) {
            rec.error = Some(format!("alias of {} (same address), probed once", first.symbol()));
            out.push(rec);
            continue;
        }
        // `llama_process`'s batch is read where this build's own code says its fields lie, or not at all.
        let mut flags = func.cookie_flags();
        if func.layout() == Layout::LlamaBatchExt {
            let Some(bits) = super::batch_layout::read(&copy.file).and_then(tracer_common::ExtLayout::cookie_bits)
            else {
                rec.error = Some(EXT_LAYOUT_UNREAD.into());
                out.push(rec);
                continue;
            };
            flags |= bits;
        }
        probed_at.insert(off, func);
        let c = cookie::make(lib_id, func as u16, flags);
        let (prog, ret) = programs.of(func, mode);
        rec.kind = if ret.is_some() { trace::ProbeKind::EntryReturn } else { trace::ProbeKind::Entry };
        // A one-trap probe goes where the kernel can emulate the instruction (see `one_trap_point`).
        let at = match func.shape() {
            _ if prog == programs.one_trap => one_trap_point(&copy.file, off),
            ProbeShape::Input => register_args_point(&copy.file, off),
            _ => off,
        };
        for (prog, returns) in std::iter::once((prog, false)).chain(ret.map(|r| (r, true))) {
            planned.entry((prog, returns, func.op().recurs())).or_default().push((at, c, out.len()));
        }
        out.push(rec);
    }
    // The copy's last initializer: the witness that its probes came before its first call in a process that
    // loads it after they were placed (one trap per process and copy; without it, such a process's calls
    // are taken as possibly unseen).
    // Placed last, after every other link of the copy: a hit says they were all in place.
    let witness =
        crate::os::elf::last_initializer_offset(&copy.file).map(|at| (at, cookie::make(lib_id, 0, 0), usize::MAX));
    let planned = planned.into_iter().chain(witness.map(|w| ((INIT_WITNESS, false, false), vec![w])));
    for ((prog, returns, recurs), points) in planned {
        let linked = links.as_mut().is_some_and(|l| {
            let at: Vec<(u64, u64)> = points.iter().map(|&(off, c, _)| (off, c)).collect();
            l.link(Link { prog, returns, recurs }, &copy.file, &at)
                .map_err(|e| l.refused.push(format!("{prog} on {}: {e:#}", copy.path)))
                .is_ok()
        });
        if linked {
            continue;
        }
        for (off, c, i) in points {
            if let Err(e) = attach_one(ebpf, prog, off, c, &target)
                && let Some(rec) = out.get_mut(i)
                && rec.error.is_none()
            {
                rec.error = Some(format!("{e:#}"));
            }
        }
    }
    Ok(out)
}

fn attach_one(ebpf: &mut Ebpf, prog: &str, offset: u64, c: u64, target: &Path) -> Result<()> {
    let prog = load_uprobe(ebpf, prog)?;
    let p: &mut UProbe = program(ebpf, prog)?;
    let point = UProbeAttachPoint { location: UProbeAttachLocation::AbsoluteOffset(offset), cookie: Some(c) };
    p.attach(point, target, UProbeScope::AllProcesses).with_context(|| format!("attaching {prog} at {offset:#x}"))?;
    Ok(())
}

/// Loads program `prog` at its first use (the batch program: see `RuntimeLinks::load`), or, where the kernel
/// refuses it and it has a [`mode::fallback`], the fallback: the name of the program loaded.
fn load_uprobe<'a>(ebpf: &mut Ebpf, prog: &'a str) -> Result<&'a str> {
    let fallback = mode::fallback(prog);
    if let Some(other) = fallback
        && program::<UProbe>(ebpf, other)?.fd().is_ok()
    {
        return Ok(other);
    }
    let p: &mut UProbe = program(ebpf, prog)?;
    if p.fd().is_ok() {
        return Ok(prog);
    }
    let refused = match p.load() {
        Ok(()) => return Ok(prog),
        Err(e) => anyhow::Error::new(e).context(format!("the kernel refused eBPF program {prog}")),
    };
    let Some(other) = fallback else { return Err(refused) };
    let p: &mut UProbe = program(ebpf, other)?;
    p.load().map_err(|e| refused.context(format!("and its fallback {other} too: {e}")))?;
    Ok(other)
}

#[cfg(test)]
mod tests {
    use object::{Object as _, ObjectSection as _};

    use super::*;

    /// BPF helpers that would let a program write to, redirect or signal the traced process.
    const FORBIDDEN_HELPERS: [(i32, &str); 4] = [
        (36, "bpf_probe_write_user"),
        (58, "bpf_override_return"),
        (109, "bpf_send_signal"),
        (117, "bpf_send_signal_thread"),
    ];

    /// Helper ids called by BPF code: `BPF_JMP | BPF_CALL` (0x85) with `src_reg` 0 calls a helper whose id is
    /// the immediate; `src_reg` 1 is a call to another BPF function, `src_reg` 2 a kfunc.
    fn helper_ids(code: &[u8]) -> impl Iterator<Item = i32> + '_ {
        code.chunks_exact(8).filter_map(|insn| match *insn {
            [0x85, regs, _, _, a, b, c, d] if regs >> 4 == 0 => Some(i32::from_le_bytes([a, b, c, d])),
            _ => None,
        })
    }

    /// Helper calls in an eBPF object's code sections, by helper id: (section, helper id) for each call.
    fn helper_calls(object: &[u8]) -> Result<Vec<(String, i32)>> {
        let file = object::File::parse(object).context("the eBPF object is not ELF")?;
        let mut calls = Vec::new();
        for section in file.sections() {
            if section.kind() != object::SectionKind::Text {
                continue;
            }
            let name = section.name().unwrap_or("?").to_owned();
            for id in helper_ids(section.data()?) {
                calls.push((name.clone(), id));
            }
        }
        Ok(calls)
    }

    /// The observer is read-only: no program may call a helper that writes to or signals the target.
    #[test]
    fn ebpf_programs_are_read_only() {
        let calls = helper_calls(OBJECT).unwrap();
        assert!(calls.iter().any(|(_, id)| *id == 131), "expected bpf_ringbuf_reserve calls: {calls:?}");
        for (section, id) in &calls {
            if let Some((_, name)) = FORBIDDEN_HELPERS.iter().find(|(f, _)| f == id) {
                panic!("{section} calls {name}: tracer's eBPF programs must stay read-only");
            }
        }
    }

    #[test]
    fn helper_scan_decodes_calls() {
        let code: Vec<u8> = [
            [0xb7, 0x01, 0, 0, 5, 0, 0, 0],    // r1 = 5
            [0x85, 0x00, 0, 0, 36, 0, 0, 0],   // call bpf_probe_write_user
            [0x85, 0x10, 0, 0, 0x10, 0, 0, 0], // call a BPF function (src_reg 1): not a helper
            [0x18, 0x01, 0, 0, 0x85, 0, 0, 0], // lddw, first half
            [0x00, 0x00, 0, 0, 0, 0, 0, 0],    // lddw, second half
            [0x85, 0x00, 0, 0, 131, 0, 0, 0],  // call bpf_ringbuf_reserve
            [0x95, 0x00, 0, 0, 0, 0, 0, 0],    // exit
        ]
        .concat();
        assert_eq!(helper_ids(&code).collect::<Vec<_>>(), [36, 131]);
    }

    const NEWTASK: &str = "name: task_newtask
ID: 130
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:pid_t pid;\toffset:8;\tsize:4;\tsigned:1;
\tfield:char comm[16];\toffset:12;\tsize:16;\tsigned:0;
\tfield:u64 clone_flags;\toffset:32;\tsize:8;\tsigned:0;
";

    #[test]
    fn tracepoint_offsets_from_format() {
        assert_eq!(field_offset(NEWTASK, "pid"), Some(8));
        assert_eq!(field_offset(NEWTASK, "clone_flags"), Some(32));
        assert_eq!(field_offset(NEWTASK, "comm"), Some(12));
        assert_eq!(field_offset(NEWTASK, "group_dead"), None);
        assert_eq!(field_offset(NEWTASK, "common_pid"), Some(4));
    }
}
