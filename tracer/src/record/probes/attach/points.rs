//! One uprobe link per point, for a kernel without multi-point links (before Linux 6.6: Debian 12's 6.1,
//! Ubuntu 22.04's 5.15, kernels still common on GPU machines): a uprobe perf event at each point
//! (`perf_event_open` on the `uprobe` PMU, as aya's `UProbe` opens it) and a `BPF_LINK_CREATE` of type
//! `BPF_PERF_EVENT` carrying the point's cookie (Linux 5.15 on). aya does the same for a program it loaded;
//! the library entry counts are loaded by `multi` (they share aya's maps), so their points are
//! attached here. The `bpf(2)` call and the points' checks both kinds of link make live here too. Each point is one file descriptor and one uprobe, released one grace period each (see
//! [`super::release_in_background`]).

use std::{
    ffi::CString,
    os::fd::{AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd, RawFd},
    path::Path,
    sync::OnceLock,
};

use anyhow::{Context as _, Result, anyhow, bail};
use aya_obj::generated::{PERF_FLAG_FD_CLOEXEC, bpf_attach_type, bpf_attr, bpf_cmd, perf_event_attr};

/// Where the kernel names the uprobe PMU's perf event type.
const UPROBE_PMU_TYPE: &str = "/sys/bus/event_source/devices/uprobe/type";

/// The uprobe PMU's type, read once.
fn uprobe_pmu() -> Result<u32> {
    static PMU: OnceLock<Option<u32>> = OnceLock::new();
    PMU.get_or_init(|| std::fs::read_to_string(UPROBE_PMU_TYPE).ok()?.trim().parse().ok())
        .ok_or_else(|| anyhow!("{UPROBE_PMU_TYPE} could not be read: this kernel has no uprobe perf events"))
}

/// Attaches the program `prog` (loaded without an expected attach type) at the entry of each of `offsets`
/// (file offsets of `target`, one cookie each), in every process: one link per point. All or none: a point
/// the kernel refuses (too many open files, a point inside no function) releases those made before it.
pub(super) fn attach_each(
    prog: BorrowedFd<'_>,
    target: &Path,
    offsets: &[u64],
    cookies: &[u64],
) -> Result<Vec<OwnedFd>> {
    let path = checked_points(target, offsets, cookies)?;
    let pmu = uprobe_pmu()?;
    let mut links = Vec::with_capacity(offsets.len());
    for (i, (&offset, &cookie)) in offsets.iter().zip(cookies).enumerate() {
        let link = attach_point(prog, pmu, &path, offset, cookie).with_context(|| {
            format!(
                "attaching point {} of {} ({offset:#x}) of {}, one uprobe each",
                i + 1,
                offsets.len(),
                target.display()
            )
        })?;
        links.push(link);
    }
    Ok(links)
}

/// One point: its perf event, then the link that holds it (the event's own descriptor is closed: the link
/// keeps the event until it is closed itself).
fn attach_point(prog: BorrowedFd<'_>, pmu: u32, path: &CString, offset: u64, cookie: u64) -> std::io::Result<OwnedFd> {
    // SAFETY: all-zero is a valid `perf_event_attr` (plain integers and unions of them).
    let mut attr: perf_event_attr = unsafe { std::mem::zeroed() };
    attr.size = u32::try_from(size_of::<perf_event_attr>()).map_err(std::io::Error::other)?;
    attr.type_ = pmu;
    // config 0: at the entry (the PMU's `retprobe` bit clear). config1 names the file, config2 the offset.
    attr.__bindgen_anon_3.config1 = path.as_ptr() as u64;
    attr.__bindgen_anon_4.config2 = offset;
    // pid -1 with cpu 0 is every process (a uprobe fires on any CPU); no group.
    let (pid, cpu, group): (libc::c_int, libc::c_int, libc::c_int) = (-1, 0, -1);
    // SAFETY: `attr` is a valid, initialised `perf_event_attr` and `path` outlives the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            std::ptr::from_ref(&attr),
            pid,
            cpu,
            group,
            libc::c_ulong::from(PERF_FLAG_FD_CLOEXEC),
        )
    };
    if ret < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let raw = i32::try_from(ret).map_err(std::io::Error::other)?;
    // SAFETY: a descriptor the kernel just returned, owned by nothing else.
    let event = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: all-zero is a valid `bpf_attr` (a union of plain integers).
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    // SAFETY: the `BPF_LINK_CREATE` member of the union, written field by field.
    let link = unsafe { &mut attr.link_create };
    link.__bindgen_anon_1.prog_fd = prog.as_raw_fd() as u32;
    link.__bindgen_anon_2.target_fd = event.as_raw_fd() as u32;
    link.attach_type = bpf_attach_type::BPF_PERF_EVENT as u32;
    link.__bindgen_anon_3.perf_event.bpf_cookie = cookie;
    let fd = bpf(bpf_cmd::BPF_LINK_CREATE, &mut attr)?;
    // SAFETY: a descriptor the kernel just returned, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The points of a link (or of one link per point): one cookie per offset, at least one; `target` as the
/// kernel takes a path.
pub(super) fn checked_points(target: &Path, offsets: &[u64], cookies: &[u64]) -> Result<CString> {
    if offsets.is_empty() || offsets.len() != cookies.len() {
        bail!("{} offsets with {} cookies", offsets.len(), cookies.len());
    }
    CString::new(target.as_os_str().as_encoded_bytes())
        .with_context(|| format!("{} contains a NUL byte", target.display()))
}

/// One `bpf(2)` call.
pub(super) fn bpf(cmd: bpf_cmd, attr: &mut bpf_attr) -> std::io::Result<RawFd> {
    // SAFETY: `attr` is a valid, fully initialised `bpf_attr` for `cmd`; the kernel reads at most its size.
    let ret =
        unsafe { libc::syscall(libc::SYS_bpf, cmd as libc::c_long, std::ptr::from_mut(attr), size_of::<bpf_attr>()) };
    if ret < 0 { Err(std::io::Error::last_os_error()) } else { RawFd::try_from(ret).map_err(std::io::Error::other) }
}
