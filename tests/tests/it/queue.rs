//! Queue-level truth: AQL packets read at the HSA doorbell. Without a GPU the real libhsa-runtime64
//! cannot create a queue, so the queue path runs on a test double with the real layouts
//! (`fixtures/hsa_double`); the real library's entry points are attached and fire in
//! `driver.rs::rocminfo_as_a_real_kfd_client`. The HIP graph calls run on the real runtime.

use integration_tests::*;

fn dispatches(records: &[Line]) -> Vec<&trace::Dispatch> {
    records.iter().filter_map(|r| if let Line::Dispatch(d) = r { Some(d) } else { None }).collect()
}

/// Records `hsa_driver ARGS` on the HSA test double into a fresh scratch folder `name`: the folder, the
/// trace's path and its records.
fn record_hsa_driver(name: &str, args: &[&str]) -> (std::path::PathBuf, std::path::PathBuf, Vec<Line>) {
    let dir = scratch(name);
    let out = dir.join("t.jsonl");
    let double = fixture("hsa-double/libhsa-runtime64.so.1");
    let driver = fixture("hsa_driver");
    let mut cmd = vec!["--lib", double.to_str().unwrap(), "--", driver.to_str().unwrap()];
    cmd.extend_from_slice(args);
    let records = record_ok(&out, &cmd);
    (dir, out, records)
}

/// Kernel objects named at load (from the symbol lookups), by kernel object.
fn hsa_names(records: &[Line]) -> std::collections::BTreeMap<u64, &str> {
    kernels(records).iter().filter(|k| k.source.as_str() == "hsa").map(|k| (k.handle, k.name.as_str())).collect()
}

fn queues(records: &[Line]) -> Vec<&trace::Queue> {
    records.iter().filter_map(|r| if let Line::Queue(q) = r { Some(q) } else { None }).collect()
}

const MATMUL: &str = "_Z9matmul_q4PKvPfi";
const ROPE: &str = "_Z7rope_f3Pf";
const ADD: &str = "add_f32";

#[test]
fn every_packet_is_decoded_once_with_its_kernel_name() {
    let (dir, out, records) = record_hsa_driver("queue", &[]);
    let driver = fixture("hsa_driver");

    // The alias hsa_signal_store_release is not in the probe plan; screlease is probed once.
    let probes: Vec<&trace::Probe> =
        records.iter().filter_map(|r| if let Line::Probe(p) = r { Some(p) } else { None }).collect();
    assert!(probes.iter().any(|p| p.api == "hsa_signal_store_screlease" && p.error.is_none()));
    assert!(probes.iter().any(|p| p.api == "hsa_signal_store_relaxed" && p.error.is_none()));

    // Kernel objects named at load, from the symbol lookups.
    let named = hsa_names(&records);
    assert_eq!(named.values().copied().collect::<std::collections::BTreeSet<_>>(), [MATMUL, ROPE, ADD].into());

    let queues = queues(&records);
    assert_eq!(queues.len(), 2);
    assert_eq!((queues[0].size, queues[1].size), (8, 64));

    let ds = dispatches(&records);
    let name = |d: &trace::Dispatch| named.get(&d.kernel_object).copied().unwrap_or("");
    // Queue 1: 14 packets, indices 0..=13, each exactly once, across the wrap at 8.
    let q1: Vec<&&trace::Dispatch> = ds.iter().filter(|d| d.queue == queues[0].queue).collect();
    assert_eq!(q1.iter().map(|d| d.index).collect::<Vec<_>>(), (0..14).collect::<Vec<u64>>());
    let expect: [(&str, [u32; 3], [u16; 3], u32); 14] = [
        (MATMUL, [4096, 1, 1], [256, 1, 1], 0),
        (ROPE, [128, 11, 1], [128, 1, 1], 0),
        (ADD, [1024, 1, 1], [256, 1, 1], 512),
        (MATMUL, [8192, 1, 1], [256, 1, 1], 0),
        ("barrier", [0; 3], [0; 3], 0),
        (ADD, [64, 1, 1], [64, 1, 1], 0),
        (MATMUL, [256, 1, 1], [64, 1, 1], 0),
        (ROPE, [512, 1, 1], [64, 1, 1], 0),
        (ADD, [768, 1, 1], [64, 1, 1], 0),
        (MATMUL, [1024, 1, 1], [64, 1, 1], 0),
        (ROPE, [1280, 1, 1], [64, 1, 1], 0),
        (ADD, [1536, 1, 1], [64, 1, 1], 0),
        (MATMUL, [1792, 1, 1], [64, 1, 1], 0),
        (ROPE, [32, 2, 1], [32, 1, 1], 0),
    ];
    for (d, (kernel, grid, wg, lds)) in q1.iter().zip(expect) {
        if kernel == "barrier" {
            assert_eq!((&*d.packet.name(), d.kernel), ("barrier-and", None), "{d:?}");
            assert_eq!(d.completion_signal, 0x5000 + d.index);
            continue;
        }
        assert_eq!(&*d.packet.name(), "kernel-dispatch");
        assert!(d.barrier);
        assert_eq!((name(d), d.grid, d.workgroup, d.group_segment), (kernel, grid, wg, lds), "index {}", d.index);
        assert_eq!(d.kernarg, 0x7f00_0010_0000 + d.index * 256);
        let k = kernels(&records).into_iter().find(|k| Some(k.id) == d.kernel).unwrap();
        assert_eq!((k.name.as_str(), k.source.as_str()), (kernel, "hsa"));
    }
    // Queue 2: 20 packets behind one doorbell, every one read (a store reads all it releases, up to a ring).
    let q2: Vec<u64> = ds.iter().filter(|d| d.queue == queues[1].queue).map(|d| d.index).collect();
    assert_eq!(q2, (0..20).collect::<Vec<u64>>());
    assert!(ds.iter().filter(|d| d.queue == queues[1].queue).all(|d| name(d) == ADD));
    let f = footer(&records);
    assert_eq!(f.counters["packets_cut"], 0);
    assert_eq!(f.counters["packet_fault"], 0);

    // The code object read from memory lies in the driver's own file.
    let reader =
        calls(&records).into_iter().find(|c| c.api.name() == "hsa_code_object_reader_create_from_memory").unwrap();
    assert_eq!(reader.file.as_deref(), Some(driver.to_str().unwrap()));
    let bytes = std::fs::read(&driver).unwrap();
    let off = reader.file_offset.unwrap() as usize;
    assert_eq!(&bytes[off..off + 9], b"de object");

    report_and_exports_join_both_layers(&dir, &out);
}

/// What the report and the exports make of `every_packet_is_decoded_once_with_its_kernel_name`'s trace.
fn report_and_exports_join_both_layers(dir: &std::path::Path, out: &std::path::Path) {
    // The report joins both layers: no HIP launch here, so every dispatch is explained.
    let o = tracer(&["report", "--json", out.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let p = &v["processes"][0];
    assert_eq!(p["barrier_packets"], 1);
    let rows = p["crosscheck"].as_array().unwrap();
    let add = rows.iter().find(|r| r["kernel"] == ADD).unwrap();
    assert_eq!((add["api_launches"].as_u64(), add["queue_dispatches"].as_u64()), (Some(0), Some(4 + 20)));
    assert!(add["explanation"].as_str().unwrap().contains("no HIP launch"), "{add}");

    // Exports: one CSV row per kernel dispatch (13 + 20), and a Perfetto trace with a track per queue.
    let o = tracer(&["export", out.to_str().unwrap(), "--format", "csv"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    assert_eq!(text.lines().count(), 1 + 13 + 20);
    // Current rocprofv3's kernel-trace columns, in its order, with demangled names.
    assert_eq!(
        text.lines().next().unwrap(),
        "Kind,Agent_Id,Queue_Id,Stream_Id,Thread_Id,Dispatch_Id,Kernel_Id,Kernel_Name,Correlation_Id,\
         Start_Timestamp,End_Timestamp,LDS_Block_Size,Scratch_Size,VGPR_Count,Accum_VGPR_Count,SGPR_Count,\
         Workgroup_Size_X,Workgroup_Size_Y,Workgroup_Size_Z,Grid_Size_X,Grid_Size_Y,Grid_Size_Z"
    );
    assert!(text.lines().skip(1).all(|l| l.starts_with("KERNEL_DISPATCH,")));
    let csv_names: std::collections::BTreeSet<&str> =
        text.lines().skip(1).map(|l| l.split(',').nth(7).unwrap()).collect();
    assert!(csv_names.contains("rope_f3(float*)"), "{csv_names:?}");
    assert!(!csv_names.iter().any(|n| n.starts_with("_Z")), "{csv_names:?}");
    let json = dir.join("t.perfetto.json");
    let o = tracer(&["export", out.to_str().unwrap(), "--format", "perfetto", "-o", json.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let ev = v["traceEvents"].as_array().unwrap();
    assert_eq!(ev.iter().filter(|e| e["cat"] == "dispatch" && e["ph"] == "i").count(), 34);
    assert_eq!(ev.iter().filter(|e| e["name"] == "thread_name").count(), 2);
    assert!(ev.iter().all(|e| e["ts"].is_number() || e["ph"] == "M"));
}

/// A dispatch as the test compares it: index, packet type, extended, grid, work-group, dimensions, kernel.
type Decoded<'a> = (u64, String, bool, [u32; 3], [u16; 3], u16, &'a str);

/// AMD's extended kernel dispatch packets (vendor-specific, format 3: gfx1250's clustered dispatches) are
/// decoded as kernel dispatches, named by their kernel objects, their grids clusters x work-groups per
/// cluster x work-items; the barrier-value packet between them stays a vendor-specific packet. A queue whose
/// ring tracer cannot read at the doorbell (as a ring in device memory may be from the host; the test
/// double's page is made inaccessible) loses its three dispatches to the queue's view: counted, and said
/// by the report, never dropped without a word.
#[test]
fn extended_dispatches_are_decoded_and_an_unreadable_ring_is_said() {
    let (_, out, records) = record_hsa_driver("queue-ext", &["ext"]);
    let named = hsa_names(&records);
    let queues = queues(&records);
    assert_eq!(queues.len(), 3);
    let all = dispatches(&records);
    let (ds, small): (Vec<&trace::Dispatch>, Vec<&trace::Dispatch>) =
        all.iter().partition(|d| d.queue != queues[2].queue);
    let seen: Vec<Decoded<'_>> = ds
        .iter()
        .map(|d| {
            let name = named.get(&d.kernel_object).copied().unwrap_or("");
            (d.index, d.packet.name().into_owned(), d.extended, d.grid, d.workgroup, d.dimensions, name)
        })
        .collect();
    let want = [
        (0, "kernel-dispatch", true, [1280, 2, 1], [64, 1, 1], 2, MATMUL),
        (1, "vendor-specific", false, [0; 3], [0; 3], 0, ""),
        (2, "kernel-dispatch", true, [512, 2, 1], [128, 1, 1], 2, ROPE),
    ]
    .map(|(i, p, e, g, w, n, k)| (i, p.to_owned(), e, g, w, n, k));
    assert_eq!(seen, want);
    assert!(ds.iter().all(|d| d.queue == queues[0].queue), "{ds:#?}");
    // Named by the attribution as any kernel dispatch is.
    assert!(ds.iter().filter(|d| d.extended).all(|d| d.kernel.is_some()), "{ds:#?}");
    // The ring of 8 held the last 8 of the 12 packets its one doorbell released: those are read, in order,
    // the 4 it had overwritten are counted as cut and said, for that queue.
    assert_eq!(small.iter().map(|d| d.index).collect::<Vec<_>>(), (4..12).collect::<Vec<u64>>());
    assert_eq!(small.iter().map(|d| d.grid[0]).collect::<Vec<_>>(), (5..=12).map(|i| 32 * i).collect::<Vec<u32>>());
    let f = footer(&records);
    assert_eq!((f.counters["packet_fault"], f.counters["packets_cut"]), (3, 4), "{:?}", f.counters);
    let text = String::from_utf8(tracer(&["report", out.to_str().unwrap()]).stdout).unwrap();
    assert!(text.contains("queues: 3 AQL packets could not be read from their queue's ring"), "{text}");
    assert!(text.contains("queues: 4 AQL packets a doorbell store released had been overwritten"), "{text}");
    // Per queue where its packets say so: the unreadable ring gave none, so its loss is the counter's alone.
    assert!(text.contains(&format!("per queue: 4 on queue {:#x} of hsa_driver", queues[2].queue)), "{text}");
    let v = tracer_json(&["report", "--json", out.to_str().unwrap()]);
    let missing: Vec<(u64, u64)> = v["processes"][0]["packets_missing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["queue"].as_u64().unwrap(), g["missing"].as_u64().unwrap()))
        .collect();
    assert_eq!(missing, [(queues[2].queue, 4)]);
}

/// Doorbell stores of forged indices (a swing of 2^63, of 2^62, to 2^64 - 1) on a ring of 8: each is counted
/// as implausible and said by the report, `packets_cut` takes none of them (their sum wrapped it before:
/// 18446744073707951616), and the last ring of packets before each is still read.
#[test]
fn forged_doorbell_indices_are_counted_apart_and_never_wrap_packets_cut() {
    let (_, out, records) = record_hsa_driver("queue-forged", &["forged"]);
    let f = footer(&records);
    let counter = |name: &str| f.counters.get(name).copied().unwrap_or(0);
    assert_eq!((counter("doorbell_stores_implausible"), counter("packets_cut")), (3, 0), "{:?}", f.counters);
    let indexes: Vec<u64> = dispatches(&records).iter().map(|d| d.index).collect();
    assert_eq!(indexes.first(), Some(&0), "{indexes:?}");
    assert_eq!(indexes.len(), 1 + 3 * 8, "the real packet, then a ring's slots before each forged index");
    assert!(indexes.contains(&(u64::MAX - 7)) && indexes.contains(&u64::MAX), "{indexes:?}");
    let text = String::from_utf8(tracer(&["report", out.to_str().unwrap()]).stdout).unwrap();
    assert!(text.contains("queues: 3 doorbell stores claimed an index more than two rings past"), "{text}");
}

#[test]
fn graph_calls_reach_the_real_runtime() {
    let out = scratch_trace("graph");
    let runner = fixture("mini_runner");
    let records = record_ok(&out, &["--", runner.to_str().unwrap(), "graph"]);
    let cs = calls(&records);
    let count = |api: &str| cs.iter().filter(|c| c.api.name() == api).count();
    assert_eq!(
        (
            count("hipStreamBeginCapture"),
            count("hipStreamEndCapture"),
            count("hipGraphInstantiate"),
            count("hipGraphLaunch")
        ),
        (1, 1, 1, 3)
    );
    // Without a GPU the stream cannot be created and capture fails (101): the launch between begin and
    // end capture is therefore an ordinary launch, not a graph node. (A replay is probed at entry only: its
    // result is not read.)
    assert!(
        cs.iter()
            .filter(|c| c.api.name().starts_with("hipGraph") || c.api.name().starts_with("hipStream"))
            .all(|c| if c.api.name() == "hipGraphLaunch" { c.entry_only && c.ret == 0 } else { c.ret == 101 })
    );
    let ls = launches(&records);
    assert_eq!(ls.len(), 1);
    assert!(!ls[0].captured);
}

/// The gfx code objects of a file's `.hip_fatbin`: (target, file offset, size, kernel names).
fn code_objects(path: &std::path::Path) -> Vec<(String, u64, u64, Vec<String>)> {
    use object::{Object as _, ObjectSection as _};
    let data = std::fs::read(path).unwrap();
    let elf = object::File::parse(&*data).unwrap();
    let fatbin = elf.section_by_name(".hip_fatbin").expect("a HIP binary");
    let (at, _) = fatbin.file_range().unwrap();
    tracer::testing::code_objects(fatbin.data().unwrap(), at)
        .into_iter()
        .filter_map(|(target, offset, size, kernels)| Some((target?, offset?, size, kernels)))
        .collect()
}

/// Issue 12's AMD late attach: a runtime loaded its code objects before the tracer attached, so no
/// symbol lookup is ever seen; every dispatch is still named, from `ROCr`'s list of loaded code objects
/// (`_amdgpu_r_debug`, kept by the HSA test double in `ROCr`'s layout) read from the process's memory.
/// The code objects are real: from hipcc-built fatbins and from the real `libggml-hip.so`, under the
/// three URI forms `ROCr` writes (a mapped file range, heap memory, a whole file).
#[test]
fn late_attach_names_dispatches_from_the_loaded_code_object_list() {
    let dir = scratch("queue-late");
    let out = dir.join("t.jsonl");
    let list = dir.join("dispatched.txt");
    let mut specs = Vec::new();
    let mut files: Vec<(String, Option<String>)> = Vec::new(); // (a kernel of it, the file its URI names)
    let steps = fixture("ggml_steps");
    let (_, offset, size, names) = code_objects(&steps).remove(0);
    specs.push(format!("map:{}:{offset}:{size}", steps.display()));
    files.push((names[0].clone(), Some(steps.display().to_string())));
    let runner = fixture("mini_runner");
    let (_, offset, size, names) = code_objects(&runner).remove(0);
    specs.push(format!("copy:{}:{offset}:{size}", runner.display()));
    files.push((names[0].clone(), None));
    if let Some(ggml) = real_ggml_hip() {
        // The real library's gfx1100 code objects: the one with the most kernels mapped in place, the
        // next one extracted to a file of its own.
        let mut objects: Vec<_> = code_objects(&ggml).into_iter().filter(|o| o.0 == "gfx1100").collect();
        objects.sort_by_key(|o| std::cmp::Reverse(o.3.len()));
        let (_, offset, size, names) = &objects[0];
        specs.push(format!("map:{}:{offset}:{size}", ggml.display()));
        files.push((names[0].clone(), Some(ggml.display().to_string())));
        let (_, offset, size, names) = &objects[1];
        let data = std::fs::read(&ggml).unwrap();
        let hsaco = dir.join("ggml part.hsaco");
        std::fs::write(&hsaco, &data[*offset as usize..(offset + size) as usize]).unwrap();
        specs.push(format!("file:{}", hsaco.display()));
        files.push((names[0].clone(), Some(hsaco.display().to_string())));
    }
    let mut args = vec![list.to_str().unwrap()];
    args.extend(specs.iter().map(String::as_str));
    let records = Waiting::start_with(&fixture("hsa_late"), &args).traced_late(&out);

    let expected: Vec<String> = std::fs::read_to_string(&list).unwrap().lines().map(str::to_owned).collect();
    let named: std::collections::BTreeMap<u32, &trace::Kernel> =
        kernels(&records).into_iter().map(|k| (k.id, k)).collect();
    let ds = dispatches(&records);
    let got: Vec<&str> = ds.iter().map(|d| named[&d.kernel.expect("a kernel dispatch")].name.as_str()).collect();
    println!(
        "{} code objects loaded before the attach; {} dispatches, {} named from the loader list",
        specs.len(),
        ds.len(),
        ds.iter().filter(|d| named[&d.kernel.unwrap()].source.as_str() == "loader").count()
    );
    assert_eq!(got.len(), expected.len());
    assert!(got.iter().zip(&expected).all(|(g, e)| g == e), "dispatch names differ from what was dispatched");
    assert!(named.values().all(|k| k.source.as_str() == "loader"), "{named:?}");
    assert_eq!(footer(&records).counters["unnamed_kernels"], 0);
    // ggml's mul_mat_q (both real parameter lists, in ggml_steps' code object): the doorbell read the
    // argument word holding ncols_y; the driver's segments hold 0x10000 + each word's own offset, so the
    // value says the offset read was the one tracer computes (inspect's test ties it to hipcc's metadata).
    let mut mmq = 0;
    for d in &ds {
        let k = named[&d.kernel.unwrap()];
        let Some(at) = trace::classify::classify(&k.name).ne11_kernarg else { continue };
        let word = d.params.get(&((at / 8) as u8)).copied().unwrap_or_else(|| panic!("{} read nothing", k.name));
        assert_eq!((word >> (8 * (at % 8))) as u32, 0x10000 + at, "{}", k.name);
        mmq += 1;
    }
    assert!(mmq >= 2, "the fixture's two mul_mat_q kernels were dispatched: {mmq}");
    // Each kernel says which file its code object came from; heap memory names none.
    for (kernel, file) in &files {
        let k = named.values().find(|k| &k.name == kernel).unwrap();
        assert_eq!(&k.code_file, file, "{kernel}");
    }
}
