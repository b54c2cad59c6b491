//! Multi-point uprobe links (`BPF_LINK_CREATE` with `BPF_TRACE_UPROBE_MULTI`, Linux 6.6 and later): every
//! entry point of one library in one link, attached by one system call and released by one close.
//!
//! aya 0.14 cannot do this yet (its main branch can: aya PR #1417): a program for these links must be
//! loaded with the expected attach type `BPF_TRACE_UPROBE_MULTI`, which aya 0.14's `UProbe::load` does not
//! set. This module loads that one program itself and creates its links; it goes when aya releases
//! multi-point attach. The program's instructions come from aya's own object parser (`aya-obj`, the crate
//! aya loads with), relocated against the maps aya created, so that it shares them (the PID filter, the
//! loss counters, the entry-call map) with every other program.

use std::{
    collections::HashSet,
    ffi::CString,
    os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd, RawFd},
    path::Path,
};

use anyhow::{Context as _, Result, anyhow, bail};
use aya::{
    Ebpf,
    maps::{Map, MapData},
};
use aya_obj::generated::{bpf_attach_type, bpf_attr, bpf_cmd, bpf_insn, bpf_prog_type};

use super::points::{bpf, checked_points};

/// The kernel's information on a loaded program (`BPF_OBJ_GET_INFO_BY_FD`); None when it cannot be asked.
fn prog_info(fd: BorrowedFd<'_>) -> Option<aya_obj::generated::bpf_prog_info> {
    // SAFETY: all-zero is a valid `bpf_prog_info` (plain integers).
    let mut info: aya_obj::generated::bpf_prog_info = unsafe { std::mem::zeroed() };
    // SAFETY: all-zero is a valid `bpf_attr` (a union of plain integers).
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    // SAFETY: the `BPF_OBJ_GET_INFO_BY_FD` member of the union, written field by field.
    let get = unsafe { &mut attr.info };
    get.bpf_fd = fd.as_raw_fd() as u32;
    get.info_len = u32::try_from(size_of::<aya_obj::generated::bpf_prog_info>()).ok()?;
    get.info = std::ptr::from_mut(&mut info) as u64;
    bpf(bpf_cmd::BPF_OBJ_GET_INFO_BY_FD, &mut attr).ok()?;
    Some(info)
}

/// Runs of a program the kernel skipped (`recursion_misses`, Linux 5.12 on; 0 where it cannot be asked): a
/// tracepoint or probe that fires while another tracer program runs on the same CPU (an interrupt's
/// tracepoint during a probe's program) does not run its program. Counted by the kernel whether or not
/// programs are timed.
pub(crate) fn misses(fd: BorrowedFd<'_>) -> u64 {
    prog_info(fd).map_or(0, |info| info.recursion_misses)
}

/// A program's BTF as the kernel wants it beside the instructions: the object's types (loaded, `BPF_BTF_LOAD`)
/// and the program's function and line records. Only a program that passes a function of its own to a helper
/// (`bpf_loop`'s callback, a `BPF_PSEUDO_FUNC` reference) needs it: the verifier refuses such a reference
/// without the callee's function record (`missing btf func_info`).
struct ProgramBtf {
    fd: OwnedFd,
    func_info: (Vec<u8>, u32, u32),
    line_info: (Vec<u8>, u32, u32),
}

/// What the BTF the kernel is given may hold: every kind Linux 6.0 knows (tracer's programs that need BTF
/// call `bpf_loop`, Linux 5.17 on); on an older kernel the load fails and the program is loaded without.
const BTF_FEATURES: aya_obj::btf::BtfFeatures =
    aya_obj::btf::BtfFeatures::new(true, true, true, true, true, true, true, true);

/// Whether `insns` pass a function of their own to a helper (`ld_imm64` with `BPF_PSEUDO_FUNC`).
fn references_a_function(insns: &[bpf_insn]) -> bool {
    const LD_IMM64: u8 = (aya_obj::generated::BPF_LD | aya_obj::generated::BPF_IMM | aya_obj::generated::BPF_DW) as u8;
    insns.iter().any(|i| i.code == LD_IMM64 && u32::from(i.src_reg()) == aya_obj::generated::BPF_PSEUDO_FUNC)
}

/// `BPF_BTF_LOAD` of `raw`: the descriptor of the loaded types.
fn load_btf(raw: &[u8]) -> std::io::Result<OwnedFd> {
    // SAFETY: all-zero is a valid `bpf_attr` (a union of plain integers).
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    // SAFETY: the `BPF_BTF_LOAD` member of the union, written field by field.
    let load = unsafe { &mut attr.__bindgen_anon_7 };
    load.btf = raw.as_ptr() as u64;
    load.btf_size = u32::try_from(raw.len()).map_err(std::io::Error::other)?;
    let fd = bpf(bpf_cmd::BPF_BTF_LOAD, &mut attr)?;
    // SAFETY: a descriptor the kernel just returned, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `BPF_PROG_LOAD` of a uprobe program for `points`, with its BTF when given and the verifier's log in `log`
/// when given.
fn load_program(
    name: &str,
    (insns, btf): (&[bpf_insn], Option<&ProgramBtf>),
    license: &CString,
    (sleepable, points): (bool, Points),
    log: Option<&mut Vec<u8>>,
) -> std::io::Result<RawFd> {
    // SAFETY: all-zero is a valid `bpf_attr` (a union of plain integers).
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    // SAFETY: the `BPF_PROG_LOAD` member of the union, written field by field.
    let load = unsafe { &mut attr.__bindgen_anon_3 };
    load.prog_type = bpf_prog_type::BPF_PROG_TYPE_KPROBE as u32;
    if points == Points::Multi {
        load.expected_attach_type = bpf_attach_type::BPF_TRACE_UPROBE_MULTI as u32;
    }
    load.insns = insns.as_ptr() as u64;
    load.insn_cnt = u32::try_from(insns.len()).map_err(std::io::Error::other)?;
    load.license = license.as_ptr() as u64;
    if sleepable {
        load.prog_flags = aya_obj::generated::BPF_F_SLEEPABLE;
    }
    if let Some(btf) = btf {
        load.prog_btf_fd = u32::try_from(btf.fd.as_raw_fd()).map_err(std::io::Error::other)?;
        (load.func_info, load.func_info_rec_size, load.func_info_cnt) =
            (btf.func_info.0.as_ptr() as u64, btf.func_info.1, btf.func_info.2);
        (load.line_info, load.line_info_rec_size, load.line_info_cnt) =
            (btf.line_info.0.as_ptr() as u64, btf.line_info.1, btf.line_info.2);
    }
    for (dst, src) in load.prog_name.iter_mut().zip(name.bytes().take(15)) {
        *dst = src as libc::c_char;
    }
    if let Some(log) = log {
        load.log_level = 1;
        load.log_buf = log.as_mut_ptr() as u64;
        load.log_size = u32::try_from(log.len()).unwrap_or(u32::MAX);
    }
    bpf(bpf_cmd::BPF_PROG_LOAD, &mut attr)
}

/// How a program loaded here is attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Points {
    /// Every point of a library in one multi-point link (Linux 6.6 on).
    Multi,
    /// One uprobe link per point ([`super::points`]): a kernel without multi-point links.
    Each,
}

/// A loaded program for multi-point uprobe links, or, on an older kernel, for one link per point.
pub(crate) struct MultiProgram {
    fd: OwnedFd,
    points: Points,
}

/// The map behind each kind of map tracer's object declares.
const fn map_data(map: &Map) -> Option<&MapData> {
    match map {
        Map::Array(d)
        | Map::HashMap(d)
        | Map::LruHashMap(d)
        | Map::PerCpuArray(d)
        | Map::PerCpuHashMap(d)
        | Map::RingBuf(d)
        | Map::Unsupported(d) => Some(d),
        _ => None,
    }
}

/// Every map of tracer's object as aya created it, each descriptor duplicated while aya still holds them
/// all. User space takes some out of the [`Ebpf`] once the probes are attached (the filter, the counters,
/// the ring), and aya then no longer lists them; a program loaded after that (the batch program, at the
/// first copy of libllama) must still point at those very maps.
pub(crate) struct SharedMaps(Vec<(String, OwnedFd)>);

impl SharedMaps {
    /// The maps `ebpf` holds now: call it before any is taken.
    pub(crate) fn of(ebpf: &Ebpf) -> Result<Self> {
        let mut out = Vec::new();
        for (name, map) in ebpf.maps() {
            if let Some(data) = map_data(map) {
                let fd = data.fd().as_fd().try_clone_to_owned().with_context(|| format!("duplicating map {name}"))?;
                out.push((name.to_owned(), fd));
            }
        }
        Ok(Self(out))
    }

    /// The same maps, each descriptor duplicated (for a program loaded on another thread).
    pub(crate) fn try_clone(&self) -> Result<Self> {
        let mut out = Vec::with_capacity(self.0.len());
        for (name, fd) in &self.0 {
            out.push((name.clone(), fd.try_clone().with_context(|| format!("duplicating map {name}"))?));
        }
        Ok(Self(out))
    }
}

impl MultiProgram {
    /// Loads program `name` of `object` (the object tracer's maps were created from), its map references
    /// pointing at `maps`. Every map the object declares must be there: for a symbol it cannot match,
    /// aya-obj's relocation falls back to whichever map of the same section it met last, so a map missing
    /// here would silently become another.
    pub(crate) fn load(object: &[u8], maps: &SharedMaps, name: &str) -> Result<Self> {
        Self::load_for(object, maps, name, Points::Multi)
    }

    /// As [`MultiProgram::load`], for links of the kind `points`.
    pub(crate) fn load_for(object: &[u8], maps: &SharedMaps, name: &str, points: Points) -> Result<Self> {
        let mut obj = aya_obj::Object::parse(object).context("parsing tracer's eBPF object")?;
        let program = obj.programs.get(name).ok_or_else(|| anyhow!("the eBPF object has no program {name}"))?;
        let key = program.function_key();
        // A program that may sleep (it copies from user memory) is loaded as one.
        let sleepable = matches!(
            program.section,
            aya_obj::ProgramSection::UProbe { sleepable: true }
                | aya_obj::ProgramSection::URetProbe { sleepable: true }
        );
        // Only this program is relocated and loaded (the others are aya's); the functions it calls are
        // linked into it, as aya links them.
        obj.programs.retain(|n, _| n == name);
        let text_sections: HashSet<usize> = obj.functions.keys().map(|(section, _)| *section).collect();
        let declared = obj.maps.clone();
        if let Some(missing) = declared.keys().find(|d| !maps.0.iter().any(|(n, _)| n == *d)) {
            bail!("map {missing} of the eBPF object is not among the maps created for it");
        }
        let maps = maps
            .0
            .iter()
            .filter_map(|(map_name, fd)| Some((map_name.as_str(), fd.as_raw_fd(), declared.get(map_name)?)));
        obj.relocate_maps(maps, &text_sections).with_context(|| format!("relocating {name}'s map references"))?;
        obj.relocate_calls(&text_sections).with_context(|| format!("relocating {name}'s calls"))?;
        let function = obj.functions.get(&key).ok_or_else(|| anyhow!("{name} has no code"))?;
        let btf = if references_a_function(&function.instructions) {
            let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
            let rec = |n: usize| u32::try_from(n).unwrap_or(0);
            let func_info = (
                function.func_info.func_info_bytes(),
                rec(function.func_info_rec_size),
                count(function.func_info.func_info.len()),
            );
            let line_info = (
                function.line_info.line_info_bytes(),
                rec(function.line_info_rec_size),
                count(function.line_info.line_info.len()),
            );
            // The object's types, fixed up as aya fixes them up before it loads them (the records' type ids
            // stay).
            let raw = obj.fixup_and_sanitize_btf(&BTF_FEATURES).ok().flatten().map(aya_obj::btf::Btf::to_bytes);
            raw.and_then(|raw| load_btf(&raw).ok()).map(|fd| ProgramBtf { fd, func_info, line_info })
        } else {
            None
        };
        let function = obj.functions.get(&key).ok_or_else(|| anyhow!("{name} has no code"))?;
        let insns: &[bpf_insn] = &function.instructions;
        let license = CString::new(obj.license.as_bytes()).context("the eBPF object's license")?;
        let code = (insns, btf.as_ref());

        // Loaded without a verifier log first: a log longer than its buffer fails the load (ENOSPC). Only a
        // refused program is loaded again, with the log, for the reason.
        // A signal that reaches tracer while the verifier runs (a command's SIGCHLD) ends the load with
        // EAGAIN: loaded again, a few times, rather than taken for a refusal.
        let mut quick = load_program(name, code, &license, (sleepable, points), None);
        for _ in 0..8 {
            match &quick {
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {
                    quick = load_program(name, code, &license, (sleepable, points), None);
                }
                _ => break,
            }
        }
        let fd = quick.or_else(|_| {
            let mut log = vec![0u8; 1 << 20];
            load_program(name, code, &license, (sleepable, points), Some(&mut log)).map_err(|err| {
                let text = String::from_utf8_lossy(log.split(|&b| b == 0).next().unwrap_or_default()).into_owned();
                let tail: String =
                    text.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
                anyhow!("the kernel refused eBPF program {name}: {err}\n{tail}")
            })
        })?;
        // SAFETY: a descriptor the kernel just returned, owned by nothing else.
        Ok(Self { fd: unsafe { OwnedFd::from_raw_fd(fd) }, points })
    }

    /// Whether this kernel makes multi-point uprobe links (Linux 6.6 on): one on `/`, not a regular file,
    /// fails with `EBADF` where it does and `EINVAL` where the attach type is unknown (libbpf's own probe).
    /// Before 6.6 a program loads for them all the same; only its links are refused.
    pub(crate) fn links_work(&self) -> bool {
        match self.attach(Path::new("/"), &[0], &[0], None, false) {
            Ok(_) => true,
            Err(e) => {
                e.root_cause().downcast_ref::<std::io::Error>().and_then(std::io::Error::raw_os_error)
                    == Some(libc::EBADF)
            }
        }
    }

    /// How this program is attached.
    pub(crate) const fn points(&self) -> Points {
        self.points
    }

    /// Attaches the program at the entries of `offsets` (file offsets of `target`, one cookie each) in every
    /// process: one multi-point link, or one link per point ([`Points::Each`]). Closing the descriptors
    /// detaches the points.
    pub(crate) fn attach_everywhere(&self, target: &Path, offsets: &[u64], cookies: &[u64]) -> Result<Vec<OwnedFd>> {
        match self.points {
            Points::Multi => Ok(vec![self.attach(target, offsets, cookies, None, false)?]),
            Points::Each => super::points::attach_each(self.fd.as_fd(), target, offsets, cookies),
        }
    }

    /// (runs, nanoseconds) the kernel counted for this program (`BPF_ENABLE_STATS`, `record
    /// --program-stats`); None when it cannot be asked.
    pub(crate) fn stats(&self) -> Option<(u64, u64)> {
        prog_info(self.fd.as_fd()).map(|info| (info.run_cnt, info.run_time_ns))
    }

    /// Runs the kernel skipped because another tracer program was running on that CPU (see [`misses`]).
    pub(crate) fn misses(&self) -> u64 {
        misses(self.fd.as_fd())
    }

    /// Attaches the program at `offsets` (file offsets of `target`, with one cookie each) in one link, at
    /// the functions' returns when `returns`; `pid` limits it to one process. The returned descriptor holds
    /// the link: closing it detaches every point with one grace period.
    pub(crate) fn attach(
        &self,
        target: &Path,
        offsets: &[u64],
        cookies: &[u64],
        pid: Option<u32>,
        returns: bool,
    ) -> Result<OwnedFd> {
        if self.points == Points::Each {
            bail!("the program was loaded for one link per point");
        }
        let path = checked_points(target, offsets, cookies)?;
        // SAFETY: all-zero is a valid `bpf_attr` (a union of plain integers).
        let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
        // SAFETY: the `BPF_LINK_CREATE` member of the union, written field by field.
        let link = unsafe { &mut attr.link_create };
        link.__bindgen_anon_1.prog_fd = self.fd.as_raw_fd() as u32;
        link.attach_type = bpf_attach_type::BPF_TRACE_UPROBE_MULTI as u32;
        // SAFETY: as above, the uprobe-multi member of the link's union.
        let multi = unsafe { &mut link.__bindgen_anon_3.uprobe_multi };
        multi.path = path.as_ptr() as u64;
        multi.offsets = offsets.as_ptr() as u64;
        multi.cookies = cookies.as_ptr() as u64;
        multi.cnt = u32::try_from(offsets.len()).context("too many entry points")?;
        multi.pid = pid.unwrap_or(0);
        // BPF_F_UPROBE_MULTI_RETURN (include/uapi/linux/bpf.h): at the functions' returns.
        multi.flags = u32::from(returns);
        let fd = bpf(bpf_cmd::BPF_LINK_CREATE, &mut attr)
            .with_context(|| format!("attaching {} points of {}", offsets.len(), target.display()))?;
        // SAFETY: a descriptor the kernel just returned, owned by nothing else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}
