//! HIP graph replays on the null GPU (issue 76): HIP 7.2 (Debian experimental's `ROCm` 7.2.4, the line Ollama 0.30+
//! bundles) rings ONE doorbell for many AQL packets of a graph replay, HIP 6.4 (Debian unstable's) one a packet. Our
//! program `fixtures/kmod/hip_graphs.c` (one binary for both: it takes libamdhip64 with dlopen) loads the code object
//! of `fixtures/kmod/hip_graphs_kernels.hip` (built by the 7.2 root's hipcc), launches its three kernels directly,
//! then captures graphs of 64 and 512 kernel nodes (with a memset and a device-to-device copy) and replays them. Both
//! roots are copied file for file into the guest of `fixtures/kmod/guest.sh` with the TEST DOUBLE of AMD's GPU kernel
//! driver (`fixtures/kmod/null_gpu.c`, see `null_gpu.rs`), whose packet log is the oracle: every packet it consumed,
//! in order. Its `doorbell` field is the value it read when it polled, so it merges stores made between two polls
//! (and those behind a barrier): the doorbell stores themselves are counted by tracer's probe, checked against the
//! kernel's own count of the doorbell program's runs (`--program-stats`).

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    process::Command,
};

use integration_tests::*;

use crate::null_gpu::{Packet, consumed, dispatched_names, number, read_by_tracer, reported_equals_logged};

/// Direct launches, graph64 replays and graph512 replays of the recordings from the start; the late attach's. The
/// double's packet log holds 1 MiB: the three runs fill about 70 % of it.
const FROM_START: (u64, u64, u64) = (24, 4, 2);
const LATE: (u64, u64, u64) = (6, 2, 2);
/// The null GPU's two cards (`card=`): gfx target, the marketing name libdrm's amdgpu.ids gives, compute units.
const GFX1100: (&str, &str, u32) = ("gfx1100", "AMD Radeon RX 7900 XTX", 96);
const GFX1201: (&str, &str, u32) = ("gfx1201", "AMD Radeon RX 9070 XT", 64);
/// Kernel nodes of the two graphs (each also has a memset node and a copy node).
const NODES: (u64, u64) = (64, 512);
/// The most packets HIP 7.2 releases with one store.
const MOST_PER_STORE: u64 = 256;

/// One doorbell store as tracer read it: the dispatch records one run of the doorbell program wrote share their
/// queue and header time.
struct Store {
    queue: u64,
    ts: u64,
    /// The indices read, in order.
    read: Vec<u64>,
    /// The packets it released: its index less the queue's previous store's (from index 0 on a queue tracer saw
    /// created).
    released: u64,
}

/// Every store of `records`, by time.
fn stores(records: &[Line]) -> Vec<Store> {
    let mut by: BTreeMap<(u64, u64), Vec<u64>> = BTreeMap::new();
    for r in records {
        if let Line::Dispatch(d) = r {
            by.entry((d.ts, d.queue)).or_default().push(d.index);
        }
    }
    let mut last: BTreeMap<u64, u64> = BTreeMap::new();
    by.into_iter()
        .map(|((ts, queue), read)| {
            let top = read.iter().copied().max().expect("a store reads a packet");
            let released = top + 1 - last.get(&queue).map_or(0, |l| l + 1);
            last.insert(queue, top);
            Store { queue, ts, read, released }
        })
        .collect()
}

/// How many stores released 1, 2, ... packets, in words: "1x49 2x6 ...".
fn histogram(sizes: impl Iterator<Item = u64>) -> String {
    let mut h: BTreeMap<u64, u64> = BTreeMap::new();
    for s in sizes {
        *h.entry(s).or_default() += 1;
    }
    h.iter().map(|(size, n)| format!("{size}x{n}")).collect::<Vec<_>>().join(" ")
}

/// The double's doorbell values for process `pid`, per packet: (queue id, index) -> doorbell; only lines from
/// `from` on (their place in the log).
fn doorbells_logged(log: &str, pid: u32, from: usize) -> BTreeMap<(u64, u64), u64> {
    let mut m = BTreeMap::new();
    for line in log.lines().skip(from) {
        let t: Vec<&str> = line.split_whitespace().collect();
        if let [p, "queue", q, "index", i, "doorbell", d, ..] = t[..]
            && number(p) == u64::from(pid)
        {
            m.insert((number(q), number(i)), number(d));
        }
    }
    m
}

/// A recording's dispatches of our three kernels (`graph_*`), by name.
fn ours(records: &[Line]) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for name in dispatched_names(records).into_iter().flatten().filter(|n| n.starts_with("graph_")) {
        *m.entry(name).or_default() += 1;
    }
    m
}

/// The dispatches per kernel the program makes: launch i runs kernel i % 3 (scale, axpy, count), `direct` launches
/// and each graph's nodes the same way.
fn expected(direct: u64, r64: u64, r512: u64) -> BTreeMap<String, u64> {
    let of = |n: u64, k: u64| (n + 2 - k) / 3;
    ["graph_scale", "graph_axpy", "graph_count"]
        .iter()
        .zip(0..)
        .map(|(name, k)| ((*name).to_owned(), of(direct, k) + r64 * of(NODES.0, k) + r512 * of(NODES.1, k)))
        .collect()
}

/// The program's line: every call returned 0, the graphs have their nodes and the replays ran.
fn program_line((direct, r64, r512): (u64, u64, u64)) -> String {
    format!(
        "hipModuleLoadData=0 hipModuleGetFunction=0 hipMalloc=0 hipStreamCreate=0 hipModuleLaunchKernel=0 \
         hipStreamSynchronize=0 capture=0 memops=0 hipGraphInstantiate=0 hipGraphLaunch=0 free=0 direct={direct} \
         graph64 nodes={} replays={r64} graph512 nodes={} replays={r512} rc=0\n",
        NODES.0 + 2,
        NODES.1 + 2
    )
}

/// The hipGraphLaunch calls' times, in order, and the traps each costs (its probe's: entry only, or entry and
/// return).
fn graph_launches(records: &[Line]) -> (Vec<u64>, u64) {
    let ts: Vec<u64> = calls(records).iter().filter(|c| c.api.name() == "hipGraphLaunch").map(|c| c.ts).collect();
    let kind = records.iter().find_map(|r| match r {
        Line::Probe(p) if p.api == "hipGraphLaunch" && p.error.is_none() => Some(p.kind),
        _ => None,
    });
    let traps = match kind {
        Some(trace::ProbeKind::Entry) => 1,
        Some(trace::ProbeKind::EntryReturn) => 2,
        _ => 0,
    };
    (ts, traps)
}

/// What was measured of one recording from its start, in words: packets per store (the double's view and tracer's),
/// traps per direct launch and per replay. Asserts nothing, so that every figure is printed before any check fails.
fn figures(out: &str, run: &str, hip: &str) -> String {
    let records = guest_trace(out, run);
    let pid = exec_of(&records, "hip_graphs").map_or(0, |p| p.pid);
    let all = stores(&records);
    let log = section(out, "packets");
    let logged = doorbells_logged(log, pid, 0);
    let mut by_doorbell: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for ((queue, _), doorbell) in &logged {
        *by_doorbell.entry((*queue, *doorbell)).or_default() += 1;
    }
    let (launches, launch_traps) = graph_launches(&records);
    let direct = launches.first().map_or(0, |&first| all.iter().filter(|s| s.ts < first).count());
    let mut replays = Vec::new();
    for (i, &start) in launches.iter().enumerate() {
        let end = launches.get(i + 1).copied().unwrap_or(u64::MAX);
        let window: Vec<&Store> = all.iter().filter(|s| (start..end).contains(&s.ts)).collect();
        let packets: u64 = window.iter().map(|s| s.released).sum();
        replays.push(format!(
            "{packets} packets in {} stores, {} traps",
            window.len(),
            window.len() as u64 + launch_traps
        ));
    }
    let doorbell_runs = footer(&records).programs.get("doorbell").map_or(0, |p| p.runs);
    format!(
        "{run} ({hip}): packets per doorbell value the double logged: {} (largest {}); per store tracer read: {} \
         (largest {}); {} stores, the doorbell program ran {doorbell_runs} times; before the first replay {direct} \
         stores; per replay (hipGraphLaunch {launch_traps} trap): {}",
        histogram(by_doorbell.values().copied()),
        by_doorbell.values().max().unwrap_or(&0),
        histogram(all.iter().map(|s| s.released)),
        all.iter().map(|s| s.released).max().unwrap_or(0),
        all.len(),
        replays.join("; ")
    )
}

/// One recording from the start (`run`), checked against the double: every packet of the queues tracer saw
/// created equal to the double's, index by index; our kernels' dispatches as the program made them and, kernel by
/// kernel, the report's equal to the log's; nothing cut or dropped; every store read whole; one store per direct
/// launch; per replay, one store per packet (`batched` false: HIP 6.4) or fewer stores than packets (HIP 7.2); every
/// doorbell value the double saw one tracer saw stored; every run of the doorbell program one store read.
fn checked(out: &str, run: &str, batched: bool) {
    assert_eq!(section(out, &format!("{run}-out")), program_line(FROM_START), "{run}: the program's line");
    let records = guest_trace(out, run);
    let f = footer(&records);
    assert_eq!(f.total_drops(), 0, "{run}: nothing dropped");
    assert_eq!(f.counters.get("packets_cut").copied().unwrap_or(0), 0, "{run}: no packet cut at a store");
    let pid = exec_of(&records, "hip_graphs").expect("hip_graphs ran").pid;
    let log = section(out, "packets");
    assert!(!log.lines().any(|l| l.starts_with("lost ")), "the double's packet log held every line");
    let truth = consumed(log, pid);
    let seen = read_by_tracer(&records);
    for (ring, packets) in &seen {
        let logged = truth.packets.get(ring).map_or(&[][..], Vec::as_slice);
        same_packets(&format!("{run}: ring {ring:#x}"), packets, logged);
    }
    let elsewhere: Vec<(&u64, usize)> = truth
        .packets
        .iter()
        .filter(|(ring, _)| !seen.contains_key(ring))
        .map(|(ring, p)| (ring, p.iter().filter(|p| p.kind == "kernel-dispatch").count()))
        .collect();
    assert!(
        elsewhere.iter().all(|(ring, _)| truth.sizes[*ring] == 4096),
        "{run}: only ROCr's own 4 KiB queues go unseen: {elsewhere:?}"
    );
    let (direct, r64, r512) = FROM_START;
    assert_eq!(ours(&records), expected(direct, r64, r512), "{run}: our kernels' dispatches, by name");
    // The report's dispatches per kernel object equal the double's, kernel by kernel.
    reported_equals_logged(&guest_report(out, run, "hip_graphs"), &seen, &truth, run);
    crate::one_trap::one_trap_per_dispatch(&records, run);
    stores_checked(&records, log, run, batched);
}

/// [`checked`]'s doorbell stores: each read whole (at most 256 packets), each run of the doorbell program one store
/// read, every doorbell value the double saw one tracer saw stored, one store per packet before the first replay
/// (the direct launches), and per replay one store per packet (`batched` false) or fewer stores than packets.
fn stores_checked(records: &[Line], log: &str, run: &str, batched: bool) {
    let f = footer(records);
    let pid = exec_of(records, "hip_graphs").expect("hip_graphs ran").pid;
    let (_, r64, r512) = FROM_START;
    let all = stores(records);
    for s in &all {
        assert_eq!(
            s.read.len() as u64,
            s.released,
            "{run}: store at {} on {:#x} read whole: {:?}",
            s.ts,
            s.queue,
            s.read
        );
        assert!(s.released <= MOST_PER_STORE, "{run}: {} packets in one store", s.released);
    }
    let doorbell_runs = f.programs.get("doorbell").map_or(0, |p| p.runs);
    assert_eq!(doorbell_runs, all.len() as u64, "{run}: each run of the doorbell program (a trap) read one store");
    let values: BTreeSet<(u64, u64)> =
        all.iter().map(|s| (s.queue, s.read.iter().copied().max().unwrap_or(0))).collect();
    let queue_of_ring: BTreeMap<u64, u64> = records
        .iter()
        .filter_map(|r| if let Line::Queue(q) = r { Some((q.base_address, q.queue)) } else { None })
        .collect();
    let ring_of_id = rings_by_id(log, pid);
    for ((id, index), doorbell) in doorbells_logged(log, pid, 0) {
        let Some(&queue) = ring_of_id.get(&id).and_then(|ring| queue_of_ring.get(ring)) else { continue };
        assert!(
            values.contains(&(queue, doorbell)),
            "{run}: the double saw doorbell {doorbell} (packet {index}) unstored"
        );
    }
    // Before the first replay: one store per direct launch (and per packet of the runtime's own).
    let (launches, _) = graph_launches(records);
    assert_eq!(launches.len() as u64, r64 + r512, "{run}: hipGraphLaunch calls");
    let first = launches[0];
    assert!(all.iter().filter(|s| s.ts < first).all(|s| s.released == 1), "{run}: one store per direct launch");
    for (i, &start) in launches.iter().enumerate() {
        let end = launches.get(i + 1).copied().unwrap_or(u64::MAX);
        let window: Vec<&Store> = all.iter().filter(|s| (start..end).contains(&s.ts)).collect();
        let packets: u64 = window.iter().map(|s| s.released).sum();
        let nodes = if (i as u64) < r64 { NODES.0 } else { NODES.1 };
        assert!(packets > nodes, "{run}: replay {i}: {packets} packets for {nodes} kernel nodes");
        if batched {
            assert!((window.len() as u64) < packets, "{run}: replay {i}: {} stores, {packets} packets", window.len());
        } else {
            assert_eq!(window.len() as u64, packets, "{run}: replay {i}: one store per packet");
        }
    }
}

/// tracer's packets of one queue (`read`) equal the double's (`logged`), index by index, field by field; a
/// difference is said by its first packet and the counts, not by the two whole lists.
fn same_packets(what: &str, read: &[Packet], logged: &[Packet]) {
    let first = read.iter().zip(logged).position(|(r, l)| r != l);
    assert!(
        first.is_none() && read.len() == logged.len(),
        "{what}: tracer read {} packets, the double consumed {}; first difference at {first:?}: tracer's {:?}, the \
         double's {:?}",
        read.len(),
        logged.len(),
        first.map(|i| &read[i]),
        first.map_or_else(|| logged.get(read.len()), |i| logged.get(i))
    );
}

/// The double's queue ids of process `pid`: id -> ring address.
fn rings_by_id(log: &str, pid: u32) -> BTreeMap<u64, u64> {
    let mut m = BTreeMap::new();
    for line in log.lines() {
        let t: Vec<&str> = line.split_whitespace().collect();
        if let [p, "create", "queue", id, "ring", ring, ..] = t[..]
            && number(p) == u64::from(pid)
        {
            m.insert(number(id), number(ring));
        }
    }
    m
}

/// The late attach (`tracer record --pid`, its probes ready while the program waited before its replays): every
/// packet the double consumed after that, on the queues tracer read, is in the trace, equal field by field and in
/// order; every replay's kernel dispatches are there; nothing cut or dropped. In words.
fn checked_late(out: &str) -> String {
    assert_eq!(section(out, "late-out"), program_line(LATE), "late: the program's line");
    let records = guest_trace(out, "late");
    let f = footer(&records);
    assert_eq!(f.total_drops(), 0, "late: nothing dropped");
    let cut = f.counters.get("packets_cut").copied().unwrap_or(0);
    let pid = section(out, "late-pid").trim().parse::<u32>().expect("the program's pid");
    let mark: usize = section(out, "mark").trim().parse().expect("the log's lines at the attach");
    let log = section(out, "packets");
    // The log from the attach on, with the queues' creation lines (made before it).
    let after: Vec<&str> = log
        .lines()
        .enumerate()
        .filter(|(i, l)| *i >= mark || l.split_whitespace().nth(1) == Some("create"))
        .map(|(_, l)| l)
        .collect();
    let after = after.join("\n");
    let truth = consumed(&after, pid);
    // The trace's packets by the queue tracer read them from (it saw no queue created), each matched to the ring
    // of the double that holds its first packet.
    let mut read: BTreeMap<u64, Vec<Packet>> = BTreeMap::new();
    for r in &records {
        let Line::Dispatch(d) = r else { continue };
        let [g0, g1, g2] = d.grid;
        let [w0, w1, w2] = d.workgroup;
        read.entry(d.queue).or_default().push(Packet {
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
    let mut compared = 0;
    let mut matched = BTreeSet::new();
    for packets in read.values() {
        let ring = truth.packets.iter().find(|(_, p)| p.iter().any(|p| Some(p) == packets.first())).map(|(r, _)| *r);
        assert!(ring.is_some(), "late: no ring of the double holds {:?}", packets.first());
        let ring = ring.expect("checked");
        same_packets(&format!("late: ring {ring:#x}, after the attach"), packets, &truth.packets[&ring]);
        compared += packets.len();
        matched.insert(ring);
    }
    let missed: Vec<(&u64, usize)> = truth
        .packets
        .iter()
        .filter(|(ring, _)| !matched.contains(*ring) && truth.sizes[*ring] != 4096)
        .map(|(ring, p)| (ring, p.len()))
        .collect();
    assert!(missed.is_empty(), "late: packets after the attach on queues tracer never read: {missed:?}");
    let (_, r64, r512) = LATE;
    assert_eq!(ours(&records), expected(0, r64, r512), "late: the replays' kernel dispatches, by name");
    assert_eq!(cut, 0, "late: no packet cut at a store");
    format!(
        "late (HIP 7.2, attached before the replays): {compared} packets after the attach read, equal to the double's"
    )
}

/// The user space of both HIP versions, copied file for file from the roots `cargo xtask setup` made
/// (`fixtures/kmod/null_gpu_root.sh`: `ROCm` 6.4 as `sid`, 7.2 as `r72`), and our program with its code object
/// (`cargo xtask build`), in a scratch directory for `GUEST_FILES`.
fn guest_files() -> std::path::PathBuf {
    let dir = scratch("hip-graphs-files");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/kmod/null_gpu_root.sh");
    for (var, name) in [("TRACER_SID_ROOT", "sid"), ("TRACER_ROCM72_ROOT", "r72")] {
        let root = std::env::var_os(var);
        assert!(root.is_some(), "{var} is set by `cargo xtask test`");
        let root = root.expect("checked");
        let st = Command::new(&script).arg(root).arg(&dir).arg(name).status().expect("null_gpu_root.sh runs");
        assert!(st.success(), "null_gpu_root.sh {name} failed");
    }
    let program = dir.join("hip-graphs");
    std::fs::create_dir_all(&program).expect("scratch dir");
    for file in ["hip_graphs", "hip_graphs_kernels.co"] {
        std::fs::copy(fixture(&format!("hip-graphs/{file}")), program.join(file)).expect("the fixture");
    }
    dir
}

/// The guest's commands: rocminfo of `ROCm` 7.2, then our program recorded from its start on HIP 7.2 (`h72`, with
/// the environment `h72_env`), and with `all` on HIP 6.4 (`h64`) and on HIP 7.2 attached late, just before its
/// replays (`late`); then the double's packet log. Each recording's program output, stderr (HIP's warnings) and
/// HIP's own log lines ([`crate::hip_log`]) are sections of their own.
fn guest_script(all: bool, h72_env: &str) -> String {
    let (d, r64, r512) = FROM_START;
    let (ld, l64, l512) = LATE;
    let begin = format!(
        "for r in r72 sid; do for d in proc sys dev tmp; do mount --bind /$d /guest/$r/$d; done; done
         cp /guest/hip-graphs/* /tmp/
         P=/sys/kernel/debug/null_gpu/packets G='/tmp/hip_graphs /tmp/hip_graphs_kernels.co'
         echo '@@BEGIN rocminfo'; chroot /guest/r72 /usr/bin/rocminfo 2>&1; echo \"rc=$?\"; echo '@@END rocminfo'
         run() {{
           env $3 timeout 600 tracer record -q --program-stats -o /tmp/$1.jsonl -- chroot /guest/$2 $G {d} {r64} \
             {r512} > /tmp/$1.out 2> /tmp/$1.err; rc=$?
           echo \"@@BEGIN $1-out\"; cat /tmp/$1.out; echo \"@@END $1-out\"
           echo \"@@BEGIN $1-err\"; grep -v '^:[0-9]:' /tmp/$1.err; echo \"@@END $1-err\"
           echo \"@@BEGIN $1-hiplog\"; cat /tmp/$1.err | {grep}; echo \"@@END $1-hiplog\"
           [ $rc = 0 ] || {{ echo \"tracer record: $rc\"; tail $P; exit 1; }}
           echo \"@@BEGIN $1\"; cat /tmp/$1.jsonl; echo \"@@END $1\"; rm /tmp/$1.jsonl
         }}
         run h72 r72 {h72_env}
",
        grep = crate::hip_log::GREP
    );
    let rest = format!(
        "run h64 sid
         chroot /guest/r72 $G {ld} {l64} {l512} /tmp/go > /tmp/late.out 2> /tmp/late.err &
         app=$!
         echo '@@BEGIN late-pid'; echo $app; echo '@@END late-pid'
         until [ -f /tmp/go.waiting ]; do sleep 1; done
         timeout 600 tracer record -q --program-stats --ready-file /tmp/ready -o /tmp/late.jsonl --pid $app \
           > /tmp/late.rec 2>&1 &
         rec=$!
         until [ -f /tmp/ready ]; do sleep 1; done
         echo '@@BEGIN mark'; wc -l < $P; echo '@@END mark'
         touch /tmp/go
         wait $app
         wait $rec || {{ echo 'tracer record --pid failed'; cat /tmp/late.rec; exit 1; }}
         echo '@@BEGIN late-out'; cat /tmp/late.out; echo '@@END late-out'
         echo '@@BEGIN late'; cat /tmp/late.jsonl; echo '@@END late'
"
    );
    format!("{begin}{}echo '@@BEGIN packets'; cat $P; echo '@@END packets'", if all { rest } else { String::new() })
}

/// One guest boot of the null GPU presenting `card` (its module parameter), running [`guest_script`]: the output,
/// after rocminfo's agent was checked to be the card (`target`, marketing name `name`, `cus` compute units).
fn boot(card: (&str, &str, u32), all: bool, h72_env: &str) -> String {
    let (target, name, cus) = card;
    let files = guest_files();
    let out = guest(
        &guest_script(all, h72_env),
        &[
            ("GUEST_NULL_GPU", "1"),
            ("GUEST_NULL_GPU_CARD", target),
            ("GUEST_MEM", "6144"),
            ("GUEST_TIMEOUT", "1500"),
            ("GUEST_FILES", files.to_str().expect("UTF-8 path")),
        ],
    );
    drop(std::fs::remove_dir_all(&files));
    let info = section(&out, "rocminfo");
    assert!(info.ends_with("rc=0\n"), "{info}");
    let agent = info.split("*******").find(|a| a.contains(&format!("Name:                    {target}")));
    assert!(agent.is_some(), "ROCm 7.2's rocminfo has no {target} agent: {info}");
    let agent = agent.expect("checked");
    assert!(agent.contains(name), "ROCm 7.2's rocminfo names the {target} {name:?}: {agent}");
    let cu_line = agent.lines().find(|l| l.trim_start().starts_with("Compute Unit:"));
    assert_eq!(cu_line.map(|l| number(l.split(':').nth(1).unwrap_or("").trim())), Some(u64::from(cus)), "{agent}");
    out
}

/// The completion signals' timestamps: the double writes start and end on the queues `ROCr` enables profiling on,
/// as the CP does, so `ROCr` never finds them missing: HIP's stderr of recording `run` has no "time stamps may be
/// invalid". Returns the count of timestamped completions in the double's log, for the figures.
fn timestamps_checked(out: &str, run: &str) -> usize {
    let err = section(out, &format!("{run}-err"));
    let invalid = err.lines().filter(|l| l.contains("time stamps may be invalid")).count();
    let stamped = section(out, "packets")
        .lines()
        .filter(|l| l.contains(" signal ") && l.split(" end ").nth(1).is_some_and(|e| !e.starts_with('0')))
        .count();
    assert_eq!(invalid, 0, "{run}: ROCr found {invalid} signals without timestamps ({stamped} stamped): {err}");
    stamped
}

/// Runs every check whatever another found: a failure says its own panic, and all are named at the end.
fn each_checked(checks: &[(&str, &dyn Fn())]) {
    let failed: Vec<&str> = checks
        .iter()
        .filter(|(_, check)| std::panic::catch_unwind(std::panic::AssertUnwindSafe(check)).is_err())
        .map(|(name, _)| *name)
        .collect();
    assert!(failed.is_empty(), "checks failed (see each panic above): {failed:?}");
}

/// One guest boot: rocminfo of `ROCm` 7.2 finds the null GPU's gfx1100; our program recorded from its start on HIP
/// 7.2 then 6.4 (`--program-stats`), each checked against the double ([`checked`]): every packet read, every store
/// whole, HIP 6.4 one store per packet, HIP 7.2 fewer stores than packets per replay (it batches up to 256), one
/// trap per direct launch's store and, per replay, the replay's stores and hipGraphLaunch's probe; then the program
/// on HIP 7.2 attached late, just before its replays ([`checked_late`]). Prints packets per store and traps per
/// replay on each version.
#[test]
fn hip_7_2_graph_replays_ring_one_doorbell_for_many_packets_and_tracer_reads_every_packet_of_each_store() {
    let out = boot(GFX1100, true, "");
    println!("{}", figures(&out, "h72", "HIP 7.2"));
    println!("{}", figures(&out, "h64", "HIP 6.4"));
    each_checked(&[
        ("h64", &|| checked(&out, "h64", false)),
        ("h72", &|| checked(&out, "h72", true)),
        ("late", &|| println!("{}", checked_late(&out))),
        ("timestamps", &|| println!("{} completions stamped", timestamps_checked(&out, "h72"))),
    ]);
}

/// The null GPU as the study's card, an RX 9070 XT (gfx1201, RDNA4): `ROCm` 7.2's rocminfo finds it with its 64
/// compute units, and our program on HIP 7.2, recorded from its start, is read as on gfx1100 ([`checked`]: every
/// packet equal to the double's, every store whole, one trap a store, our kernels named from the gfx1201 code
/// object of the bundle), its completions timestamped, and every dispatch named as HIP's own log names it
/// (`AMD_LOG_LEVEL=5`: HIP 7.2 prints each kernel packet it writes with its kernel's name at that level; it
/// changes HIP's logging only).
#[test]
fn the_null_gpu_as_an_rx_9070_xt_runs_hip_7_2_graphs_and_tracer_reads_every_packet() {
    let out = boot(GFX1201, false, "AMD_LOG_LEVEL=5");
    println!("{}", figures(&out, "h72", "HIP 7.2, gfx1201"));
    let oracle = || {
        let said = crate::hip_log::names_checked(&guest_trace(&out, "h72"), section(&out, "h72-hiplog"), "h72");
        println!("{said}");
    };
    each_checked(&[
        ("h72", &|| checked(&out, "h72", true)),
        ("names", &oracle),
        ("timestamps", &|| println!("{} completions stamped", timestamps_checked(&out, "h72"))),
    ]);
}
