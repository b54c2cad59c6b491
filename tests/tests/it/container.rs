//! A runner with its own `ROCm`, as a container brings it: Debian unstable's HIP 6.4, `ROCr` 6.4, rocBLAS and
//! ggml 0.27's HIP backend with llama.cpp's tools, in a root of their own (`cargo xtask setup` makes it with
//! mmdebstrap), never the host's (Debian 12's HIP 5.2, which tracer probes at start). Its `llama-cli
//! --list-devices` loads the HIP backend, which registers its kernels, then finds no GPU.

use std::{
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use integration_tests::*;

fn sid_root() -> PathBuf {
    PathBuf::from(std::env::var_os("TRACER_SID_ROOT").expect("TRACER_SID_ROOT is set by `cargo xtask test`"))
}

const LIBDIR: &str = "usr/lib/x86_64-linux-gnu";

/// The root's file at `path` (as the maps show it from here, or as the process sees it): (device, inode).
fn file_in_root(root: &Path, path: &str) -> Option<(u64, u64)> {
    let host =
        if Path::new(path).starts_with(root) { PathBuf::from(path) } else { root.join(path.trim_start_matches('/')) };
    std::fs::metadata(host).ok().map(|m| (m.dev(), m.ino()))
}

/// What bpftrace counts of `llama-cli`'s calls of `__hipRegisterFunction` on the root's HIP runtime, in a
/// run of `cmd`: the independent count of the kernels the HIP backend registers.
fn bpftrace_registrations(root: &Path, cmd: &str) -> u64 {
    let hip = root.join(LIBDIR).join("libamdhip64.so.6");
    let script = format!("uprobe:{}:__hipRegisterFunction /comm == \"llama-cli\"/ {{ @fn = count(); }}", hip.display());
    let (status, _, out) =
        run_measured(Command::new("bpftrace").args(["-q", "-e", &script, "-c", cmd]), Duration::from_mins(3));
    assert!(status.success(), "bpftrace: {out}");
    out.lines()
        .find_map(|l| l.strip_prefix("@fn: "))
        .and_then(|n| n.trim().parse().ok())
        .expect("bpftrace printed the count")
}

#[test]
fn a_chroot_with_its_own_rocm_is_probed_from_its_first_call_and_every_kernel_named() {
    let root = sid_root();
    let r = root.display().to_string();
    let registered = bpftrace_registrations(&root, &format!("/usr/sbin/chroot {r} /usr/bin/llama-cli --list-devices"));
    assert!(registered > 10_000, "ggml's HIP backend registers thousands of kernels: {registered}");

    let out = scratch("container-chroot").join("t.jsonl");
    let (status, _, said) = run_measured(
        Command::new(tracer_bin()).args(["record", "-o"]).arg(&out).args([
            "--",
            "/usr/sbin/chroot",
            &r,
            "/usr/bin/llama-cli",
            "--list-devices",
        ]),
        Duration::from_mins(3),
    );
    assert!(status.success(), "{said}");
    let records = read_trace(&out);
    assert_eq!(footer(&records).total_drops(), 0);
    let pid = exec_of(&records, "llama-cli").expect("llama-cli's exec").pid;

    // Every kernel the backend registered is named, as bpftrace counted them.
    let named = kernels(&records)
        .into_iter()
        .filter(|k| k.pid == pid && k.source == trace::Source::Register && !k.name.is_empty())
        .count() as u64;
    assert_eq!(named, registered, "kernels named by registration vs bpftrace's count");

    let mappings: Vec<&trace::Mapping> = records
        .iter()
        .filter_map(|r| if let Record::Mapping(m) = r { (m.pid == pid).then_some(m) } else { None })
        .collect();
    // HIP 6.4 and ROCr 6.4 are the root's own files, probed from their first call.
    for name in ["libamdhip64.so.6", "libhsa-runtime64.so.1"] {
        let id = file_in_root(&root, &format!("/{LIBDIR}/{name}")).expect("the root has the runtime");
        let m = mappings.iter().rev().find(|m| (m.dev, m.inode) == id).expect("the runtime's mapping");
        assert!(m.lib.is_some() && !m.not_probed, "{name} not probed: {m:?}");
        assert!(!m.probed_late, "{name} probed late: {m:?}");
        let lib = records
            .iter()
            .find_map(|r| if let Record::Library(l) = r { (Some(l.id) == m.lib).then_some(l) } else { None })
            .expect("the probed copy's library record");
        assert_eq!((lib.dev, lib.inode), id, "{lib:?}");
    }
    // No host library stands for a container's path: every GPU library listed is the root's file.
    for m in mappings.iter().filter(|m| m.gpu.is_some()) {
        assert_eq!(file_in_root(&root, &m.path), Some((m.dev, m.inode)), "not the root's file: {m:?}");
    }
    // The counted libraries the backend brings are the root's, probed before its load.
    let rocblas = mappings.iter().find(|m| m.path.contains("librocblas.so")).expect("rocBLAS is mapped");
    assert!(!rocblas.probed_late, "{rocblas:?}");
}
