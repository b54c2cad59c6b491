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

/// A packet as the double consumed it, or as tracer read it at the doorbell.
#[derive(Debug, PartialEq, Eq)]
struct Packet {
    index: u64,
    kind: String,
    dims: u64,
    kernel_object: u64,
    grid: String,
    workgroup: String,
    kernarg: u64,
    signal: u64,
}

fn number(text: &str) -> u64 {
    text.strip_prefix("0x").map_or_else(|| text.parse(), |hex| u64::from_str_radix(hex, 16)).expect("a number")
}

/// The double's packet log for process `pid`: each queue's ring address and the packets consumed from it, in order
/// (each line ends with ` #N`, its place among both logs' lines).
fn consumed(log: &str, pid: u32) -> BTreeMap<u64, Vec<Packet>> {
    let mut rings: BTreeMap<u64, u64> = BTreeMap::new(); // queue id -> ring
    let mut by_ring: BTreeMap<u64, Vec<Packet>> = BTreeMap::new();
    for line in log.lines() {
        let t: Vec<&str> = line.split_whitespace().collect();
        if t.first().map(|p| number(p)) != Some(u64::from(pid)) {
            continue;
        }
        let field = |key: &str| t.iter().position(|w| *w == key).map(|i| t[i + 1]);
        match t.get(1) {
            Some(&"create") => {
                rings.insert(number(t[3]), number(field("ring").expect("a ring")));
                continue;
            }
            Some(&"queue") => {}
            _ => continue, // a signal completed: its value, mailbox and event
        }
        let ring = rings[&number(field("queue").expect("a queue"))];
        let kind = match field("type").expect("a type") {
            "0" => "vendor-specific",
            "2" => "kernel-dispatch",
            "3" => "barrier-and",
            "5" => "barrier-or",
            other => other, // no other type is written by HIP; an unknown one fails the comparison
        };
        let dispatch = kind == "kernel-dispatch";
        by_ring.entry(ring).or_default().push(Packet {
            index: number(field("index").expect("an index")),
            kind: kind.to_owned(),
            dims: if dispatch { number(field("dims").expect("dims")) } else { 0 },
            kernel_object: field("kernel_object").map_or(0, number),
            grid: field("grid").unwrap_or("0,0,0").to_owned(),
            workgroup: field("workgroup").unwrap_or("0,0,0").to_owned(),
            kernarg: field("kernarg").map_or(0, number),
            signal: number(field("signal").expect("a signal")),
        });
    }
    by_ring
}

/// HIP's own fill kernel, launched three times and synchronized, reaches the null GPU as real AQL packets on a real
/// queue (written by Debian's unmodified HIP 6.4.3 and `ROCr` 6.4.3, rung at a real doorbell, consumed by the
/// double: barriers honoured, completion signals and their events signaled, no computing); tracer, recording from
/// the start, reads at the doorbell every packet of the queue it saw created, exactly as the double consumed it
/// (index, type, dimensions, kernel object, grid, work-group, kernel arguments, completion signal), and names the
/// kernel. The double also consumes `ROCr`'s internal utility queue, which `hsa_queue_create` never made: its
/// packets (code cache invalidations) are not kernel dispatches, and tracer does not see that queue.
#[test]
fn hip_s_fill_kernel_reaches_the_null_gpu_as_aql_packets_and_tracer_reads_each_as_it_was_consumed() {
    let files = guest_files();
    let out = guest(
        "S=/guest/sid
         for d in proc sys dev tmp; do mount --bind /$d $S/$d; done
         timeout 200 tracer record -q -o /tmp/f.jsonl -- chroot $S /usr/bin/hip_fill 3 > /tmp/f.out; rc=$?
         echo '@@BEGIN packets'; cat /sys/kernel/debug/null_gpu/packets; echo '@@END packets'
         [ $rc = 0 ] || { echo \"tracer record: $rc\"; cat /tmp/f.out; cat /sys/kernel/debug/null_gpu/queues; exit 1; }
         echo '@@BEGIN fill'; cat /tmp/f.out; echo '@@END fill'
         echo '@@BEGIN f'; cat /tmp/f.jsonl; echo '@@END f'",
        &[
            ("GUEST_NULL_GPU", "1"),
            ("GUEST_MEM", "4096"),
            ("GUEST_TIMEOUT", "400"),
            ("GUEST_FILES", files.to_str().expect("UTF-8 path")),
        ],
    );
    drop(std::fs::remove_dir_all(&files));
    assert_eq!(section(&out, "fill"), "hipMalloc=0 hipMemsetD32=0 hipDeviceSynchronize=0 hipFree=0 fills=3\n");

    let records = guest_trace(&out, "f");
    assert_eq!(footer(&records).total_drops(), 0);
    let pid = exec_of(&records, "hip_fill").expect("hip_fill ran").pid;
    let log = section(&out, "packets");
    let truth = consumed(log, pid);
    let queues: Vec<&trace::Queue> =
        records.iter().filter_map(|r| if let Line::Queue(q) = r { Some(q) } else { None }).collect();
    assert_eq!(queues.len(), 1, "{queues:?}");
    let mut seen: BTreeMap<u64, Vec<Packet>> = BTreeMap::new();
    for r in &records {
        let Line::Dispatch(d) = r else { continue };
        let q = queues.iter().find(|q| q.queue == d.queue).expect("a dispatch on a queue tracer saw created");
        let [g0, g1, g2] = d.grid;
        let [w0, w1, w2] = d.workgroup;
        seen.entry(q.base_address).or_default().push(Packet {
            index: d.index,
            kind: d.packet.name().into_owned(),
            dims: u64::from(d.dimensions),
            kernel_object: d.kernel_object,
            grid: format!("{g0},{g1},{g2}"),
            workgroup: format!("{w0},{w1},{w2}"),
            kernarg: d.kernarg,
            signal: d.completion_signal,
        });
    }
    let ring = queues[0].base_address;
    assert_eq!(seen.get(&ring), truth.get(&ring), "tracer's packets, then the double's, on ring {ring:#x}:\n{log}");
    let fills = &truth[&ring];
    assert_eq!(
        fills.iter().map(|p| p.kind.as_str()).collect::<Vec<_>>(),
        ["kernel-dispatch", "kernel-dispatch", "kernel-dispatch", "barrier-and"]
    );
    // Every kernel dispatch the double consumed is on the queue tracer saw.
    let elsewhere: Vec<&Packet> = truth
        .iter()
        .filter(|(r, _)| **r != ring)
        .flat_map(|(_, p)| p)
        .filter(|p| p.kind == "kernel-dispatch")
        .collect();
    assert!(elsewhere.is_empty(), "kernel dispatches on queues tracer did not see: {elsewhere:?}");
    // The dispatches are named: CLR's fill kernel.
    let d = records.iter().find_map(|r| if let Line::Dispatch(d) = r { d.kernel } else { None }).expect("named");
    let name = kernels(&records).into_iter().find(|k| k.id == d).map(|k| k.name.clone()).expect("its kernel");
    assert!(name.starts_with("__amd_rocclr_fillBuffer"), "{name}");
}
