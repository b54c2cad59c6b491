//! The null GPU (issue 58, step 1): Debian unstable's unmodified `ROCm` 6.4 (`ROCr` 6.4.3 with its thunk, HIP
//! 6.4.3, libdrm 2.4.134, rocminfo) runs against `fixtures/kmod/null_gpu.c`, a TEST DOUBLE of AMD's GPU kernel
//! driver alone (amdgpu and its KFD: `/dev/kfd`, the KFD topology in sysfs, a render node named "amdgpu")
//! presenting one gfx1100, loaded into a qemu guest of Debian 12's kernel (`fixtures/kmod/guest.sh` with
//! `GUEST_NULL_GPU=1`). No user-space file is changed or preloaded and no environment variable is set: the
//! programs run in a chroot of files copied from the root `cargo xtask setup` made with mmdebstrap
//! (`fixtures/kmod/null_gpu_root.sh`). The double logs every ioctl it served: the oracle for tracer's driver
//! layer. No queue exists yet (step 2), so nothing is dispatched.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

use integration_tests::*;

/// The copied `ROCm` root for the guest, made in a scratch directory (about 260 MB).
fn guest_files() -> PathBuf {
    let sid = std::env::var_os("TRACER_SID_ROOT").expect("TRACER_SID_ROOT is set by `cargo xtask test`");
    let dir = scratch("null-gpu-files");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/kmod/null_gpu_root.sh");
    let st = Command::new(script).arg(sid).arg(&dir).status().expect("null_gpu_root.sh runs");
    assert!(st.success(), "null_gpu_root.sh failed");
    dir
}

/// The double's log for the processes `pids`: (pid, full request number, result) -> times served.
fn served(log: &str, pids: &[u32]) -> BTreeMap<(u32, u32, i64), u64> {
    let mut m = BTreeMap::new();
    for line in log.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [pid, "kfd" | "drm", cmd, rc, ..] = f[..] else { continue };
        let pid: u32 = pid.parse().expect("a pid");
        if pids.contains(&pid) {
            let cmd = u32::from_str_radix(cmd.trim_start_matches("0x"), 16).expect("a request number");
            *m.entry((pid, cmd, rc.parse().expect("a result"))).or_default() += 1;
        }
    }
    m
}

/// What tracer recorded of the GPU driver's ioctls, in the double's terms.
fn recorded(records: &[Line]) -> BTreeMap<(u32, u32, i64), u64> {
    let mut m = BTreeMap::new();
    for r in records {
        if let Line::Ioctl(i) = r {
            *m.entry((i.pid, i.cmd, i.ret)).or_default() += 1;
        }
    }
    m
}

fn pids(records: &[Line]) -> Vec<u32> {
    let mut p: Vec<u32> =
        records.iter().filter_map(|r| if let Line::Process(p) = r { Some(p.pid) } else { None }).collect();
    p.dedup();
    p
}

/// rocminfo lists the CPU and one gfx1100 agent with its marketing name, `hipGetDeviceCount` says 1, and tracer,
/// recording each from its start, records every GPU driver ioctl the double served, with its request number and
/// result, and no other: count for count.
#[test]
fn debian_rocm_finds_the_null_gpu_and_tracer_records_every_driver_ioctl_it_served() {
    let files = guest_files();
    let out = guest(
        "S=/guest/sid
         for d in proc sys dev tmp; do mount --bind /$d $S/$d; done
         echo '@@BEGIN rocminfo'; chroot $S /usr/bin/rocminfo; echo \"rc=$?\"; echo '@@END rocminfo'
         tracer record -q -o /tmp/h.jsonl -- chroot $S /usr/bin/hip_device_count > /tmp/h.out || exit 1
         tracer record -q -o /tmp/r.jsonl -- chroot $S /usr/bin/rocminfo > /dev/null || exit 1
         echo '@@BEGIN count'; cat /tmp/h.out; echo '@@END count'
         for t in h r; do echo \"@@BEGIN $t\"; cat /tmp/$t.jsonl; echo \"@@END $t\"; done
         echo '@@BEGIN log'; cat /sys/kernel/debug/null_gpu/ioctls; echo '@@END log'",
        &[("GUEST_NULL_GPU", "1"), ("GUEST_MEM", "4096"), ("GUEST_FILES", files.to_str().expect("UTF-8 path"))],
    );
    drop(std::fs::remove_dir_all(&files));

    let info = section(&out, "rocminfo");
    assert!(info.ends_with("rc=0\n"), "{info}");
    assert!(info.contains("Agent 2") && !info.contains("Agent 3"), "a CPU and one GPU agent: {info}");
    assert!(info.contains("gfx1100") && info.contains("AMD Radeon RX 7900 XTX"), "{info}");
    assert_eq!(section(&out, "count"), "hipGetDeviceCount=0 devices=1\n");

    let log = section(&out, "log");
    for name in ["h", "r"] {
        let records = guest_trace(&out, name);
        assert_eq!(footer(&records).total_drops(), 0);
        let seen = recorded(&records);
        let truth = served(log, &pids(&records));
        assert_eq!(seen, truth, "{name}: tracer's ioctls, then the double's");
        let names: Vec<&str> =
            records.iter().filter_map(|r| if let Line::Ioctl(i) = r { Some(i.name.as_str()) } else { None }).collect();
        for n in [
            "AMDKFD_IOC_GET_VERSION",
            "AMDKFD_IOC_ACQUIRE_VM",
            "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU",
            "DRM_IOCTL_AMDGPU_INFO",
        ] {
            assert!(names.contains(&n), "{name}: no {n} in {names:?}");
        }
        // The runtime is the container's own: its libraries are read through the process's root.
        let hsa = records.iter().find_map(|r| match r {
            Line::Library(l) if l.path.ends_with("/libhsa-runtime64.so.1") => Some(l),
            _ => None,
        });
        assert_eq!(hsa.and_then(|l| l.root.as_deref()), Some("/guest/sid"), "{name}: {hsa:?}");
    }
}
