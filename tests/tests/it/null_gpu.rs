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
pub(crate) fn served(log: &str, pids: &[u32]) -> BTreeMap<(u32, u32, i64), u64> {
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
pub(crate) fn recorded(records: &[Line]) -> BTreeMap<(u32, u32, i64), u64> {
    let mut m = BTreeMap::new();
    for r in records {
        if let Line::Ioctl(i) = r {
            *m.entry((i.pid, i.cmd, i.ret)).or_default() += 1;
        }
    }
    m
}

pub(crate) fn pids(records: &[Line]) -> Vec<u32> {
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
pub(crate) struct Packet {
    pub(crate) index: u64,
    pub(crate) kind: String,
    pub(crate) dims: u64,
    pub(crate) kernel_object: u64,
    pub(crate) grid: String,
    pub(crate) workgroup: String,
    pub(crate) kernarg: u64,
    pub(crate) signal: u64,
}

pub(crate) fn number(text: &str) -> u64 {
    text.strip_prefix("0x").map_or_else(|| text.parse(), |hex| u64::from_str_radix(hex, 16)).expect("a number")
}

/// What the double consumed for process `pid`, by queue ring address.
#[derive(Default)]
pub(crate) struct Consumed {
    /// Each ring's packets, in order.
    pub(crate) packets: BTreeMap<u64, Vec<Packet>>,
    /// Each AQL ring's size in bytes, from its `CREATE_QUEUE`.
    pub(crate) sizes: BTreeMap<u64, u64>,
    /// The rings of its SDMA queues (the double serves them since issue 80: `ROCr`'s copies).
    pub(crate) sdma: std::collections::BTreeSet<u64>,
}

/// The double's packet log for process `pid` (each line ends with ` #N`, its place among both logs' lines).
pub(crate) fn consumed(log: &str, pid: u32) -> Consumed {
    let mut rings: BTreeMap<u64, u64> = BTreeMap::new(); // queue id -> ring
    let mut c = Consumed::default();
    for line in log.lines() {
        let t: Vec<&str> = line.split_whitespace().collect();
        if t.first().map(|p| number(p)) != Some(u64::from(pid)) {
            continue;
        }
        let field = |key: &str| t.iter().position(|w| *w == key).map(|i| t[i + 1]);
        match t.get(1) {
            Some(&"create") => {
                let ring = number(field("ring").expect("a ring"));
                rings.insert(number(t[3]), ring);
                if t.contains(&"sdma") {
                    c.sdma.insert(ring);
                } else {
                    c.sizes.insert(ring, number(field("size").expect("a size")));
                }
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
        c.packets.entry(ring).or_default().push(Packet {
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
    c
}

/// What tracer read at the doorbells, by the ring of the queue it saw created (`hsa_queue_create`).
pub(crate) fn read_by_tracer(records: &[Line]) -> BTreeMap<u64, Vec<Packet>> {
    let queues: Vec<&trace::Queue> =
        records.iter().filter_map(|r| if let Line::Queue(q) = r { Some(q) } else { None }).collect();
    let mut seen: BTreeMap<u64, Vec<Packet>> = queues.iter().map(|q| (q.base_address, Vec::new())).collect();
    for r in records {
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
    seen
}

/// The report's dispatches per kernel object (process report `p`), asserted equal to the double's kernel
/// dispatches on the queues tracer saw (`seen`), kernel by kernel; the double's count per object.
pub(crate) fn reported_equals_logged(
    p: &serde_json::Value,
    seen: &BTreeMap<u64, Vec<Packet>>,
    truth: &Consumed,
    trace: &str,
) -> BTreeMap<u64, u64> {
    let mut reported: BTreeMap<u64, u64> = BTreeMap::new();
    for row in p["dispatches"].as_array().expect("dispatches per kernel") {
        let object = row["kernel_object"].as_u64().expect("a kernel object");
        *reported.entry(object).or_default() += row["dispatches"].as_u64().expect("a count");
    }
    let mut logged: BTreeMap<u64, u64> = BTreeMap::new();
    for packet in seen.keys().filter_map(|ring| truth.packets.get(ring)).flatten() {
        if packet.kind == "kernel-dispatch" {
            *logged.entry(packet.kernel_object).or_default() += 1;
        }
    }
    assert_eq!(reported, logged, "{trace}: the report's dispatches per kernel object, then the double's");
    logged
}

/// The name of the kernel a dispatch ran, as tracer named it.
pub(crate) fn dispatched_names(records: &[Line]) -> Vec<Option<String>> {
    let names: BTreeMap<u32, &str> = kernels(records).into_iter().map(|k| (k.id, k.name.as_str())).collect();
    records
        .iter()
        .filter_map(|r| match r {
            Line::Dispatch(d) if d.packet.name() == "kernel-dispatch" => {
                Some(d.kernel.and_then(|k| names.get(&k)).map(|n| (*n).to_owned()))
            }
            _ => None,
        })
        .collect()
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
    let seen = read_by_tracer(&records);
    assert_eq!(seen.len(), 1, "one queue made by hsa_queue_create: {:?}", seen.keys());
    let (&ring, packets) = seen.iter().next().expect("one queue");
    assert_eq!(
        Some(packets),
        truth.packets.get(&ring),
        "tracer's packets, then the double's, on ring {ring:#x}:\n{log}"
    );
    assert_eq!(
        packets.iter().map(|p| p.kind.as_str()).collect::<Vec<_>>(),
        ["kernel-dispatch", "kernel-dispatch", "kernel-dispatch", "barrier-and"]
    );
    // Every kernel dispatch the double consumed is on the queue tracer saw.
    let elsewhere: Vec<&Packet> = truth
        .packets
        .iter()
        .filter(|(r, _)| **r != ring)
        .flat_map(|(_, p)| p)
        .filter(|p| p.kind == "kernel-dispatch")
        .collect();
    assert!(elsewhere.is_empty(), "kernel dispatches on queues tracer did not see: {elsewhere:?}");
    // The dispatches are named: CLR's fill kernel.
    let names = dispatched_names(&records);
    let name = names[0].clone().expect("named");
    assert!(names.iter().all(|n| n.as_deref() == Some(name.as_str())), "{names:?}");
    assert!(name.starts_with("__amd_rocclr_fillBuffer"), "{name}");
}

/// One llama-bench run's trace (section `trace` of the guest's output) checked against the double's packet log: every
/// packet of every queue tracer saw made equal to the double's, the report's dispatches per kernel equal to the
/// log's, every kernel dispatched named, nothing dropped, and only `ROCr`'s own 4 KiB queues unseen. The names of the kernels dispatched, and what was compared, in words.
fn checked_against_the_double(out: &str, trace: &str) -> (Vec<String>, String) {
    let records = guest_trace(out, trace);
    assert_eq!(footer(&records).total_drops(), 0, "{trace}");
    let pid = exec_of(&records, "llama-bench").expect("llama-bench ran").pid;
    let truth = consumed(section(out, "packets"), pid);
    let seen = read_by_tracer(&records);
    for (ring, packets) in &seen {
        assert!(truth.sizes.contains_key(ring), "{trace}: the double made each queue tracer saw made: {ring:#x}");
        let consumed = truth.packets.get(ring).map_or(&[][..], Vec::as_slice);
        assert_eq!(packets.as_slice(), consumed, "{trace}: tracer's packets, then the double's, on ring {ring:#x}");
    }
    let compared: usize = seen.values().map(|p| p.iter().filter(|p| p.kind == "kernel-dispatch").count()).sum();
    let unseen: Vec<(u64, u64, usize)> = truth
        .packets
        .iter()
        .filter(|(ring, _)| !seen.contains_key(ring))
        .map(|(ring, p)| (*ring, truth.sizes[ring], p.iter().filter(|p| p.kind == "kernel-dispatch").count()))
        .collect();
    let unseen_said: Vec<String> =
        unseen.iter().map(|(ring, size, n)| format!("ring {ring:#x} ({size} bytes): {n} kernel dispatches")).collect();
    assert!(compared > 300, "{trace}: {compared}");
    assert!(
        unseen.iter().all(|&(_, size, _)| size == 4096),
        "{trace}: only ROCr's 4 KiB queues go unseen: {unseen_said:?}"
    );
    let names = dispatched_names(&records);
    assert!(names.iter().all(Option::is_some), "{trace}: every dispatch named");
    let launches_said = crate::one_trap::one_trap_per_dispatch(&records, trace);
    // HIP asks each symbol of each code object it loads for its variable segment: those queries are counted
    // in the kernel; only the kernel-object queries, which name the dispatches, are written.
    let asked: Vec<Option<u32>> = calls(&records)
        .iter()
        .filter(|c| c.api.name() == "hsa_executable_symbol_get_info")
        .map(|c| c.attribute)
        .collect();
    assert!(!asked.is_empty() && asked.iter().all(|a| *a == Some(22)), "{trace}: {asked:?}");
    let other = footer(&records).counters.get("symbol_info_other_attributes").copied().unwrap_or(0);
    assert!(other > 10 * asked.len() as u64, "{trace}: {other} other queries counted, {} written", asked.len());
    // The report's dispatches per kernel (by kernel object, as the packets carry it) equal the double's, kernel
    // by kernel, on every queue tracer saw.
    let p = &guest_report(out, trace, "llama-bench");
    assert_eq!(p["pid"], pid, "{trace}: the one llama-bench");
    let logged = reported_equals_logged(p, &seen, &truth, trace);
    crate::one_trap::executions_are_the_dispatches(p, trace);
    // The queues tracer did not see made are said, from the driver's ioctls: the double's queues of this process
    // that no hsa_queue_create made, by ring size.
    let mut unread: Vec<u64> = p["queues_unread"]["aql_ring_bytes"]
        .as_array()
        .map(|a| a.iter().filter_map(serde_json::Value::as_u64).collect())
        .unwrap_or_default();
    let mut made_elsewhere: Vec<u64> =
        truth.sizes.iter().filter(|(ring, _)| !seen.contains_key(ring)).map(|(_, size)| *size).collect();
    unread.sort_unstable();
    made_elsewhere.sort_unstable();
    assert_eq!(
        unread, made_elsewhere,
        "{trace}: the report's unread queues, then the double's AQL queues tracer did not see"
    );
    // The SDMA queues ROCr's copies ran on (the double serves them): said, by count.
    let sdma = p["queues_unread"]["sdma"].as_u64();
    assert_eq!(sdma, Some(truth.sdma.len() as u64), "{trace}: the report's SDMA queues, then the double's");
    let said = format!(
        "{trace}: kernel dispatches read by tracer, equal to the double's: {compared} ({} kernels, the report's \
         count of each equal to the log's, executions too); on ROCr's own queues: {}; {launches_said}",
        logged.len(),
        unseen_said.join(", ")
    );
    (names.into_iter().flatten().collect(), said)
}

/// llama.cpp as Debian unstable ships it (llama-bench, ggml 0.27's HIP backend with its 1.2 GB libggml-hip, rocBLAS
/// 6.4 with its Tensile files, HIP 6.4.3, `ROCr` 6.4.3, shared read-only into the guest whole over 9p, no file
/// changed) runs on the null GPU with every layer offloaded (`-ngl 99`), on a tiny random model, `Q4_K_M` then F16,
/// each with a prompt of 290 tokens and 8 generated. ggml finds "AMD Radeon RX 7900 XTX,
/// gfx1100" and its kernels reach the double as real AQL packets, HIP graph replays included. tracer, recording
/// each from the start, reads at the doorbells every packet of every queue made by `hsa_queue_create`, exactly as
/// the double consumed them, names every kernel dispatched (ggml's `Q4_K` mat-vec and flash attention; for the F16
/// prompt, rocBLAS's Tensile GEMMs), and loses nothing. What it does not see is said: `ROCr`'s internal 4 KiB queues
/// (its own blits, rung without `hsa_signal_store_screlease`). The `Q4_K_M` run again with `--hip-launches` counts
/// the same executions from its launches (`one_trap.rs`).
#[test]
fn llama_bench_on_ggml_s_hip_backend_reaches_the_null_gpu_and_tracer_reads_every_packet_of_its_queues() {
    let sid = std::env::var("TRACER_SID_ROOT").expect("TRACER_SID_ROOT is set by `cargo xtask test`");
    let files = scratch("null-gpu-model");
    tiny_llama(&files.join("f16.gguf"));
    let out = guest(
        "S=/guest/9p
         for d in proc sys dev tmp; do mount --bind /$d $S/$d; done
         cp /guest/f16.gguf /tmp/
         chroot $S llama-quantize /tmp/f16.gguf /tmp/q4.gguf Q4_K_M > /tmp/q.out 2>&1 || { cat /tmp/q.out; exit 1; }
         bench() {
           timeout 900 tracer record -q $4 -o /tmp/$1.jsonl -- chroot $S llama-bench -m /tmp/$2 $3 -ngl 99 -r 1 \
             > /tmp/$1.out 2>&1; rc=$?
           echo \"@@BEGIN $1-bench\"; cat /tmp/$1.out; echo \"@@END $1-bench\"
           [ $rc = 0 ] || exit 1
           echo \"@@BEGIN $1\"; cat /tmp/$1.jsonl; echo \"@@END $1\"; rm /tmp/$1.jsonl
         }
         bench q4 q4.gguf '-p 290 -n 8'
         bench f16 f16.gguf '-p 290 -n 8'
         bench q4l q4.gguf '-p 290 -n 8' --hip-launches
         echo '@@BEGIN packets'; cat /sys/kernel/debug/null_gpu/packets; echo '@@END packets'",
        &[
            ("GUEST_NULL_GPU", "1"),
            ("GUEST_9P", &sid),
            ("GUEST_MEM", "6144"),
            ("GUEST_TIMEOUT", "2400"),
            ("GUEST_FILES", files.to_str().expect("UTF-8 path")),
        ],
    );
    drop(std::fs::remove_dir_all(&files));
    for (run, test) in [("q4", " pp290 |"), ("f16", " pp290 |")] {
        let bench = section(&out, &format!("{run}-bench"));
        assert!(bench.contains("AMD Radeon RX 7900 XTX, gfx1100") && bench.contains(test), "{bench}");
    }

    // Each run's steps as llama-bench makes them (a warm-up and a measured run of each test): two prompts, the
    // generation warm-up's token, then the generated tokens, read from Debian's libllama 0.7.0 batch layout.
    for (run, prompt, generated) in [("q4", 290, 8), ("f16", 290, 8)] {
        let records = guest_trace(&out, run);
        let steps: Vec<(i32, bool)> = records
            .iter()
            .filter_map(|r| if let Line::Batch(b) = r { Some((b.n_tokens, b.fault)) } else { None })
            .collect();
        let mut want = vec![(prompt, false), (prompt, false)];
        want.extend(std::iter::repeat_n((1, false), 1 + generated));
        assert_eq!(steps, want, "{run}: each step's tokens");
    }
    let (q4, said) = checked_against_the_double(&out, "q4");
    println!("{said}");

    let named = |names: &[String], part: &str| names.iter().filter(|n| n.contains(part)).count();
    assert!(named(&q4, "mul_mat_vec_qIL9ggml_type12") > 0, "ggml's Q4_K mat-vec (MMVQ): {q4:?}");
    assert!(named(&q4, "flash_attn") > 0, "ggml's flash attention: {q4:?}");
    println!("{}", mmq_columns(&out, "q4", 290));
    let (f16, said) = checked_against_the_double(&out, "f16");
    println!("{said}");
    assert!(named(&f16, "Cijk_") > 0, "rocBLAS's Tensile GEMMs for the F16 prompt: {f16:?}");
    let said = tensile_files(&guest_trace(&out, "f16"), &guest_report(&out, "f16", "llama-bench"), Path::new(&sid));
    println!("{said}");
    let tensile = |names: &[String]| names.iter().filter(|n| n.starts_with("Cijk_")).count() as u64;
    println!("{}", rocblas_calls_by_phase(&out, "q4", tensile(&q4)));
    println!("{}", rocblas_calls_by_phase(&out, "f16", tensile(&f16)));
    println!("{}", crate::one_trap::launches_count_what_dispatches_count(&out, "q4l", "q4"));
}

/// Every dispatch of the report's rows `rows` has `ne11` columns: the count of them.
pub(crate) fn every_dispatch_at_ne11(rows: &[&serde_json::Value], ne11: u64, run: &str) -> u64 {
    assert!(!rows.is_empty(), "{run}: rows of the family");
    rows.iter()
        .map(|row| {
            let n = row["dispatches"].as_u64().expect("a count");
            let by = row["ne11"].as_object().expect("ne11 by column count");
            assert!(
                by.len() == 1 && by.get(&ne11.to_string()).and_then(serde_json::Value::as_u64) == Some(n),
                "{run}: every dispatch of {} has ne11 {ne11}: {by:?} of {n}",
                row["name"]
            );
            n
        })
        .sum()
}

/// ggml's MMQ kernels (the 290-token prompt's quantized matrix products): every dispatch read at the doorbell has
/// its exact column count (ne11), the prompt's `prompt` tokens, taken from the src1 quantization dispatched before
/// it on the same queue (a dispatch carries no launch parameters); none is left at its tile bound. In words.
fn mmq_columns(out: &str, trace: &str, prompt: u64) -> String {
    let p = &guest_report(out, trace, "llama-bench");
    let mmq: Vec<&serde_json::Value> =
        p["dispatches"].as_array().expect("dispatches").iter().filter(|r| r["class"]["family"] == "MMQ").collect();
    assert!(!mmq.is_empty(), "{trace}: MMQ dispatches for the prompt: {p}");
    let total = every_dispatch_at_ne11(&mmq, prompt, trace);
    let widths = p["mmq_widths"].as_object().expect("mmq_widths");
    assert!(widths.get("tile bound only").is_none() && !widths.is_empty(), "{trace}: {widths:?}");
    format!("{trace}: {total} MMQ dispatches of {} kernels, each with ne11 = {prompt} ({widths:?})", mmq.len())
}

/// rocBLAS's calls, counted at its 1 217 exported C functions (on this 6.1 guest kernel, which makes no multi-point
/// links, one uprobe each), against what reached the null GPU: `rocblas_gemm_ex` is called once for each Tensile
/// kernel dispatched (`gemms`, from the double's log: 22 in the F16 run, 2 in the `Q4_K_M` one), and the report puts rocBLAS's calls per phase in the prompt steps alone, none in the
/// decode steps (ggml's own mat-vec kernels serve one token). hipBLAS and hipBLASLt are
/// not mapped at all (Debian's ggml HIP backend links rocBLAS). What was found, in words.
fn rocblas_calls_by_phase(out: &str, trace: &str, gemms: u64) -> String {
    let records = guest_trace(out, trace);
    let rocblas: Vec<&trace::EntryLibrary> = records
        .iter()
        .filter_map(|r| if let Line::EntryLibrary(l) = r { l.path.contains("librocblas").then_some(l) } else { None })
        .collect();
    assert!(
        matches!(rocblas[..], [l] if l.error.is_none() && l.functions > 1000 && l.attached_ts.is_some()),
        "{trace}: rocBLAS's entry points probed: {rocblas:?}"
    );
    let id = rocblas[0].id;
    let gemm_ex: u64 = records
        .iter()
        .filter_map(|r| match r {
            Line::EntryCalls(c) if c.lib == id && c.function == "rocblas_gemm_ex" => Some(c.calls),
            _ => None,
        })
        .sum();
    assert_eq!(gemm_ex, gemms, "{trace}: rocblas_gemm_ex calls, then the Tensile kernels dispatched");
    let mapped = |name: &str| {
        records
            .iter()
            .any(|r| matches!(r, Line::Mapping(m) if m.path.rsplit('/').next().is_some_and(|f| f.starts_with(name))))
    };
    assert!(!mapped("libhipblas"), "{trace}: hipBLAS and hipBLASLt are not mapped");
    let p = &guest_report(out, trace, "llama-bench");
    let in_phase = |phase: &str| {
        p["phases"]
            .as_array()
            .expect("phases")
            .iter()
            .filter(|ph| ph["phase"] == phase)
            .map(|ph| ph["library_calls"][id.to_string()].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    let (prefill, decode) = (in_phase("prefill"), in_phase("decode"));
    assert!(
        prefill >= gemms && decode == 0,
        "{trace}: rocBLAS's calls by phase: prefill {prefill}, decode {decode}: {p}"
    );
    format!(
        "{trace}: rocBLAS called {prefill} times in the prompt steps, 0 in the decode steps; rocblas_gemm_ex {gemm_ex}, \
         one per Tensile kernel dispatched; hipBLAS and hipBLASLt not mapped"
    )
}

/// rocBLAS's Tensile reads each code-object file into memory before it loads it: every dispatched `Cijk_` kernel of
/// the report's kernel table carries the file it came from, a `.co` or `.hsaco` of the root's rocBLAS library
/// directory whose own symbol table (read here with the `object` crate, apart from tracer) defines that kernel (its
/// name as recorded, cut where the record says so); and the directory's listing counts the files the root really
/// has there. What was found, in words.
fn tensile_files(records: &[Line], p: &serde_json::Value, sid: &Path) -> String {
    let on_host = |path: &str| sid.join(path.trim_start_matches("/guest/9p").trim_start_matches('/'));
    let recorded: BTreeMap<u64, &trace::Kernel> = kernels(records).into_iter().map(|k| (u64::from(k.id), k)).collect();
    let rows = p["kernels"].as_array().expect("kernel rows");
    let tensile: Vec<(&trace::Kernel, &str)> = rows
        .iter()
        .filter(|r| r["name"].as_str().is_some_and(|n| n.starts_with("Cijk_")) && r["executions"].as_u64() > Some(0))
        .map(|r| {
            let id = r["id"].as_u64().expect("an id");
            (*recorded.get(&id).expect("a recorded kernel"), r["code_file"].as_str().unwrap_or_default())
        })
        .collect();
    assert!(!tensile.is_empty(), "{rows:?}");
    let mut files = std::collections::BTreeSet::new();
    for &(k, file) in &tensile {
        let extension = Path::new(file).extension().and_then(|e| e.to_str());
        assert!(file.contains("/rocblas/") && matches!(extension, Some("co" | "hsaco")), "{k:?}");
        let bytes = std::fs::read(on_host(file)).expect("the root's Tensile file");
        let elf = object::File::parse(&*bytes).expect("an ELF code object");
        let defines = object::Object::symbols(&elf).any(|s| {
            object::ObjectSymbol::name(&s)
                .is_ok_and(|n| n == k.name || n == format!("{}.kd", k.name) || (k.truncated && n.starts_with(&k.name)))
        });
        assert!(defines, "{file} does not define {}", k.name);
        files.insert(file.to_owned());
    }
    let dirs: Vec<&trace::CodeDir> =
        records.iter().filter_map(|r| if let Line::CodeDir(d) = r { Some(d) } else { None }).collect();
    for file in &files {
        let dir = Path::new(file).parent().expect("a directory").to_str().expect("UTF-8");
        let listed = dirs.iter().find(|d| d.path == dir);
        assert!(listed.is_some(), "no code_dir {dir}: {dirs:?}");
        let listed = listed.expect("checked");
        let present =
            std::fs::read_dir(on_host(dir)).expect("the directory").flatten().filter(|e| e.path().is_file()).count();
        assert_eq!((listed.count, listed.cut, listed.error.as_deref()), (present as u64, false, None), "{dir}");
    }
    let names: Vec<&str> = files.iter().map(String::as_str).collect();
    format!("f16: {} Tensile kernels dispatched, from {} files: {}", tensile.len(), files.len(), names.join(", "))
}
