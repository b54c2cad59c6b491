//! CUDA behind the same probe -> decode -> attribute -> trace -> report path, on TEST DOUBLES of libcuda
//! and libcudart (`fixtures/cuda_double`: the real symbols and signatures, fixed handles). The real
//! libraries are checked against CUPTI on a GPU machine (`bench/gpu/cuda_check.sh`).

use integration_tests::*;

/// Records the CUDA driver fixture on the libcuda double; `all_calls`: the synchronizations and async copies
/// toward the device probed too (`--all-calls`; the default leaves them unprobed).
fn record_driver(dir: &std::path::Path, runtime_view: bool, all_calls: bool) -> Vec<Line> {
    let out = dir.join("t.jsonl");
    let double = fixture("cuda-double");
    let driver = fixture("cuda_driver");
    let libcuda = double.join("libcuda.so.1");
    let libcudart = double.join("libcudart.so.13");
    let mut args = vec!["record", "-q", "-o", out.to_str().unwrap(), "--lib", libcuda.to_str().unwrap()];
    if runtime_view {
        args.extend(["--cuda-runtime", "--lib", libcudart.to_str().unwrap()]);
    }
    if all_calls {
        args.push("--all-calls");
    }
    args.extend(["--", driver.to_str().unwrap()]);
    let o = tracer(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    read_trace(&out)
}

#[test]
fn driver_launches_decoded_named_and_graph_replays_counted() {
    let dir = scratch("cuda");
    let records = record_driver(&dir, false, true);
    let launches = launches(&records);
    // Driver launches only: the runtime's cudaLaunchKernel is not probed without --cuda-runtime; the
    // driver launch it makes is (the last one).
    assert_eq!(launches.len(), 9, "{launches:#?}");
    assert!(launches.iter().all(|l| l.entry_only && l.api.name().starts_with("cu")));
    let from_runtime = launches[8];
    assert_eq!((from_runtime.grid, from_runtime.block, from_runtime.shmem), ([2, 3, 4], [32, 1, 1], 64));
    assert_eq!(kernel_name(&records, from_runtime), "_Z6vecaddPfS_S_i");
    // cuLaunchKernel: the six dims, shared memory and stream, exactly; named through
    // cuLibraryGetKernel -> cuKernelGetFunction.
    let plain: Vec<_> = launches[..8].iter().filter(|l| l.api.name() == "cuLaunchKernel").collect();
    assert_eq!(plain.len(), 5);
    for l in &plain {
        assert_eq!((l.grid, l.block, l.shmem), ([1, 2, 3], [4, 5, 6], 128));
        assert_eq!(kernel_name(&records, l), "_Z6vecaddPfS_S_i");
    }
    assert_eq!(plain.iter().filter(|l| l.captured).count(), 2);
    assert!(plain.iter().filter(|l| l.captured).all(|l| l.stream == 0x99));
    assert!(plain.iter().filter(|l| !l.captured).all(|l| l.stream == 0x77));
    // cuLaunchKernelEx: grid, block, shared memory and stream from the CUlaunchConfig it points to.
    let ex: Vec<_> = launches.iter().filter(|l| l.api.name() == "cuLaunchKernelEx").collect();
    assert_eq!(ex.len(), 2);
    for l in &ex {
        assert_eq!((l.grid, l.block, l.shmem, l.stream), ([7, 8, 9], [10, 11, 12], 256, 0x88));
        assert_eq!(
            kernel_name(&records, l),
            "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"
        );
    }
    // A CUkernel passed straight to a launch is named as its library kernel.
    let coop = launches.iter().find(|l| l.api.name() == "cuLaunchCooperativeKernel").unwrap();
    assert_eq!((coop.grid, coop.block), ([64, 1, 1], [256, 1, 1]));
    assert_eq!(kernel_name(&records, coop), "_Z6vecaddPfS_S_i");
    let sources: Vec<&str> = kernels(&records).iter().map(|k| k.source.as_str()).collect();
    // (The last: the runtime resolving its registered vecadd lazily, through cuLibraryGetKernel.)
    assert_eq!(sources, ["library", "library", "module", "library"]);
    // Each kernel's code: the file holding the image its library or module was loaded from (the
    // program's own .rodata here; libcublasLt's or libtorch_cuda's embedded fat binary on a GPU machine).
    let driver = fixture("cuda_driver");
    for k in kernels(&records) {
        assert_eq!(k.code_file.as_deref(), Some(driver.to_str().unwrap()), "{k:?}");
    }
    let loads: Vec<(&str, Option<&str>)> = calls(&records)
        .iter()
        .filter(|c| matches!(c.api.name(), "cuLibraryLoadData" | "cuModuleLoadData"))
        .map(|c| (c.api.name(), c.file.as_deref()))
        .collect();
    assert_eq!(loads, [("cuLibraryLoadData", driver.to_str()), ("cuModuleLoadData", driver.to_str())]);
    // Memory calls: sizes, pointers and directions.
    let calls = calls(&records);
    let alloc = calls.iter().find(|c| c.api.name() == "cuMemAlloc_v2").unwrap();
    assert_eq!((alloc.size, alloc.ptr), (Some(4096), Some(0x7f00_0000_0000)));
    let d2h = calls.iter().find(|c| c.api.name() == "cuMemcpyDtoH_v2").unwrap();
    assert_eq!(
        (d2h.size, d2h.src, d2h.kind.map(trace::event::MemcpyKind::name).as_deref()),
        (Some(64), Some(0x7f00_0000_0000), Some("DeviceToHost"))
    );
    // An async copy to the device is written when its thread's last one was followed by a record (a
    // launch may have run since: the copy may start a step's next matrix pass), else tallied in the kernel
    // (a token's loop makes ~7 in a row); the syncs with no copy to the host before them on their thread
    // are tallied: no record of their own, one tally per function at the end, summed over the threads.
    // The main thread's first copy and the worker thread's are written; the main thread's second, right
    // after its first, is tallied.
    let h2d: Vec<Option<u64>> =
        calls.iter().filter(|c| c.api.name() == "cuMemcpyHtoDAsync_v2").map(|c| c.size).collect();
    assert_eq!(h2d, [Some(32), Some(16)]);
    let tallies: Vec<(&str, u64, u64)> = records
        .iter()
        .filter_map(|r| if let Line::Tally(t) = r { Some((t.api.name(), t.calls, t.bytes)) } else { None })
        .collect();
    assert_eq!(tallies, [("cuStreamSynchronize", 2, 0), ("cuMemcpyHtoDAsync_v2", 1, 16)]);
    // The synchronization after the copy to the host is written (it ends a step).
    assert_eq!(calls.iter().filter(|c| c.api.name() == "cuStreamSynchronize").count(), 1);
    let exec = calls.iter().find(|c| c.api.name() == "cuGraphInstantiateWithFlags").and_then(|c| c.value);
    assert!(exec.is_some());
    assert_eq!(calls.iter().filter(|c| c.api.name() == "cuGraphLaunch" && c.handle == exec).count(), 5);
    // Its first replay read the executable from the driver's objects (the TEST DOUBLE lays them out as the
    // real driver does) to check the layout against the capture: the two launches agree.
    let reads: Vec<_> =
        records.iter().filter_map(|r| if let Line::GraphExec(g) = r { Some(g) } else { None }).collect();
    assert_eq!(reads.len(), 1, "{reads:#?}");
    assert_eq!(
        (reads[0].exec, reads[0].outcome.as_str(), reads[0].nodes, reads[0].agrees),
        (exec.unwrap(), "named", 2, Some(true))
    );
    assert_eq!(footer(&records).counters["graph_checks_agreed"], 1);

    report_counts_graph_replays_and_tallies(&dir);
    drop(std::fs::remove_dir_all(dir));
}

/// What the report makes of `driver_launches_decoded_named_and_graph_replays_counted`'s trace.
fn report_counts_graph_replays_and_tallies(dir: &std::path::Path) {
    // The report: the captured kernel ran 3 times plainly and 2 x 5 times in graph replays.
    let o = tracer(&["report", "--json", dir.join("t.jsonl").to_str().unwrap()]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let p = &v["processes"][0];
    assert_eq!((p["graph_replays"].as_u64(), p["graph_replays_unresolved"].as_u64()), (Some(5), Some(0)));
    let h2d = p["api"].as_array().unwrap().iter().find(|a| a["api"] == "cuMemcpyHtoDAsync_v2").unwrap();
    assert_eq!((h2d["calls"].as_u64(), h2d["tallied"].as_u64()), (Some(3), Some(1)));
    let sync = p["api"].as_array().unwrap().iter().find(|a| a["api"] == "cuStreamSynchronize").unwrap();
    assert_eq!((sync["calls"].as_u64(), sync["tallied"].as_u64()), (Some(3), Some(2)));
    let copies = &p["memory"]["memcpy"]["HostToDevice"];
    assert_eq!((copies["calls"].as_u64(), copies["unchecked"].as_u64()), (Some(4), Some(3)), "{copies}");
    let runs: Vec<(u64, u64, u64)> = p["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["launches"].as_u64().unwrap(),
                k["executions"].as_u64().unwrap(),
                k["graph_executions"].as_u64().unwrap(),
            )
        })
        .collect();
    // vecadd is loaded twice (a module and a library): one row, its launches and runs added (and the
    // runtime's launch through the driver).
    assert_eq!(runs, [(5 + 1 + 1, 13 + 1 + 1, 10), (2, 2, 0)]);
    let vecadd = p["kernels"].as_array().unwrap().iter().find(|k| k["name"] == "_Z6vecaddPfS_S_i").unwrap();
    assert_eq!(vecadd["ids"].as_array().unwrap().len(), 2);
    let fill = p["kernels"].as_array().unwrap().iter().find(|k| k["launches"] == 2).unwrap();
    assert_eq!(fill["class"]["family"], "elementwise/other");
}

#[test]
fn runtime_api_view_is_opt_in() {
    let dir = scratch("cuda-runtime");
    let records = record_driver(&dir, true, false);
    let rt: Vec<_> = launches(&records).into_iter().filter(|l| l.api.name() == "cudaLaunchKernel").collect();
    assert_eq!(rt.len(), 1);
    let l = rt[0];
    assert_eq!((l.grid, l.block, l.shmem, l.stream), ([2, 3, 4], [32, 1, 1], 64, 0x77));
    // Named by __cudaRegisterFunction's host stub.
    assert_eq!(kernel_name(&records, l), "_Z6vecaddPfS_S_i");
    let k = kernels(&records).into_iter().find(|k| k.id == l.kernel.unwrap()).unwrap();
    assert_eq!(k.source.as_str(), "register");
    // The default recording: the synchronizations and async copies toward the device are left unprobed
    // (no call, no tally); the copy back to the host, which ends a step, is recorded.
    let names: Vec<&str> = calls(&records).iter().map(|c| c.api.name()).collect();
    assert!(!names.iter().any(|n| *n == "cuStreamSynchronize" || *n == "cuMemcpyHtoDAsync_v2"), "{names:?}");
    assert!(names.contains(&"cuMemcpyDtoH_v2"), "{names:?}");
    assert!(!records.iter().any(|r| matches!(r, Line::Tally(_))));
    drop(std::fs::remove_dir_all(dir));
}

/// Issue 12's CUDA late attach: the runtime resolved its kernels to driver functions before tracer
/// attached, so no lookup names them. Each `cudaLaunchKernel` (its host stub named from the program's
/// file) names the driver function of the launch it makes on the same thread, and a later driver-level
/// launch of that function is named too. A function loaded through the driver before the attach is named
/// from the driver's function object (the TEST DOUBLE keeps the name pointer where the real driver does),
/// once a learned name agreed with that source. A driver launch of a function nothing named stays unnamed,
/// attributed to the file whose code made it, and never takes a failed runtime launch's name.
#[test]
fn late_attach_learns_driver_functions_from_runtime_launches() {
    let dir = scratch("cuda-late");
    let out = dir.join("t.jsonl");
    let driver = fixture("cuda_driver");
    let records = Waiting::start(&driver, "late").traced_late(&out);

    // The runtime's launches only taught names (not written without --cuda-runtime): 3 + 1 that failed.
    let launches = launches(&records);
    assert!(launches.iter().all(|l| l.api.name() == "cuLaunchKernel"), "{launches:#?}");
    let names: Vec<&str> = launches.iter().map(|l| kernel_name(&records, l)).collect();
    let want: Vec<&str> = ["_Z8late_addPfS_i"; 5].into_iter().chain(["_Z11blas_kernelPfi", ""]).collect();
    assert_eq!(names, want);
    let f = footer(&records);
    assert_eq!(f.counters["runtime_launches_for_names"], 4);
    assert_eq!(f.counters["unnamed_kernels"], 1);
    // The first learned name agreed with the driver's object (the TEST DOUBLE keeps the name where the real
    // driver does), so the function loaded before the attach is named from its object; 0xBAD0 is no object.
    assert_eq!((f.counters["driver_names_agreed"], f.counters.get("driver_names_disagreed")), (1, None));
    assert_eq!((f.counters["driver_functions_named"], f.counters["driver_functions_unnamed"]), (1, 1));
    let ks = kernels(&records);
    let learned = ks.iter().find(|k| k.name == "_Z8late_addPfS_i").unwrap();
    assert_eq!(learned.source.as_str(), "runtime-launch");
    assert_eq!(launches[3].handle, learned.handle, "the driver-level launch of the learned function");
    let blas = ks.iter().find(|k| k.name == "_Z11blas_kernelPfi").unwrap();
    assert_eq!(blas.source.as_str(), "driver-function");
    // The unnamed one: the raw handle, and the program whose code launched it.
    let unnamed = ks.iter().find(|k| k.name.is_empty()).unwrap();
    assert_eq!(unnamed.handle, 0xBAD0);
    assert_eq!(unnamed.caller.as_deref(), Some(driver.to_str().unwrap()));
    assert_eq!(ks.len(), 3, "{ks:#?}");
    // Two replays of a graph captured before the attach: their kernels unknown, said in one sentence, and
    // the two steps they ran in (each ended by the logits copy and its sync) still cut.
    let v = tracer_json(&["report", "--json", out.to_str().unwrap()]);
    let p = v["processes"].as_array().unwrap().iter().find(|p| p["comm"] == "cuda_driver").unwrap();
    assert_eq!((p["graph_replays"].as_u64(), p["graph_replays_unresolved"].as_u64()), (Some(2), Some(2)));
    // (The launches after them, of no matrix kernel, make one more step: "other".)
    let phases = p["phases"].as_array().unwrap();
    let unknown = phases.iter().find(|ph| ph["phase"] == "unknown").unwrap_or_else(|| panic!("{phases:?}"));
    assert_eq!((unknown["steps"].as_u64(), unknown["unknown_replays"].as_u64()), (Some(2), Some(2)), "{phases:?}");
    let text = String::from_utf8(tracer(&["report", out.to_str().unwrap()]).stdout).unwrap();
    assert!(text.contains("2 of 2 graph replays ran executables captured before tracer started"), "{text}");
    assert!(text.contains("kernels unknown      2"), "{text}");
    // Not read from the driver's objects: no graph was captured while tracing to check the layout against,
    // and the TEST DOUBLE's file names no driver version the layout was measured on.
    assert_eq!(p["graph_execs_from_driver"]["refused"].as_u64(), Some(1), "{p}");
    assert!(
        text.contains(
            "1 executable not read: no graph captured while tracing to check the layout, and driver \
                       (version unknown) is not one it was measured on"
        ),
        "{text}"
    );
    drop(std::fs::remove_dir_all(dir));
}

/// Issue 28: a steady graph loop attached late. Executables made before the attach are read from the
/// driver's objects (the TEST DOUBLE lays them out as driver 580.159.04 does: `bench/gpu/graphexec_layout.md`)
/// once a graph captured while tracing agreed with its own executable as read the same way; their kernels
/// count in the replays and the steps; one whose source graph was destroyed stays unknown, said why.
#[test]
fn late_attach_reads_graph_executables_made_before_it() {
    let dir = scratch("cuda-late-graphs");
    let out = dir.join("t.jsonl");
    let records = Waiting::start(&fixture("cuda_driver"), "graphs").traced_late(&out);
    let reads: Vec<_> =
        records.iter().filter_map(|r| if let Line::GraphExec(g) = r { Some(g) } else { None }).collect();
    let got: Vec<(&str, u32, usize, Option<bool>)> =
        reads.iter().map(|g| (g.outcome.as_str(), g.nodes, g.kernels.len(), g.agrees)).collect();
    // The graph captured after the attach (checked: agrees), the one captured after it whose source graph
    // was destroyed first (checked through its node copies: 4 records, the first a kernel node of no name,
    // passed over), the one made before (4 nodes: 3 kernels and a copy), the one made before whose source
    // graph is gone (its node copies: 2 records, 1 kernel).
    assert_eq!(
        got,
        [("named", 2, 2, Some(true)), ("named", 4, 3, Some(true)), ("named", 4, 3, None), ("named", 2, 1, None)]
    );
    let routes: Vec<&str> = reads.iter().map(|g| g.route.map_or("", |r| r.as_str())).collect();
    assert_eq!(routes, ["graph", "copies", "graph", "copies"]);
    let ks = kernels(&records);
    let name = |id: u32| ks.iter().find(|k| k.id == id).map(|k| (k.name.as_str(), k.source.as_str())).unwrap();
    let named: Vec<(&str, &str)> = reads[2].kernels.iter().map(|&id| name(id)).collect();
    // gemm named from the driver's function object through the executable; blas known by its lookup.
    assert_eq!(
        named,
        [("_Z9late_gemmPfi", "graph-exec"), ("_Z11blas_kernelPfi", "module"), ("_Z9late_gemmPfi", "graph-exec")]
    );
    assert_eq!(name(reads[3].kernels[0]), ("_Z11blas_kernelPfi", "module"));
    let f = footer(&records);
    assert_eq!((f.counters["graph_checks_agreed"], f.counters["graph_execs_named"]), (2, 1));
    assert_eq!((f.counters["graph_execs_named_from_copies"], f.counters["graph_exec_copies_first_unnamed"]), (1, 2));
    assert!(!f.counters.contains_key("graph_execs_source_gone"), "{:?}", f.counters);

    let v = tracer_json(&["report", "--json", out.to_str().unwrap()]);
    let p = v["processes"].as_array().unwrap().iter().find(|p| p["comm"] == "cuda_driver").unwrap();
    assert_eq!((p["graph_replays"].as_u64(), p["graph_replays_unresolved"].as_u64()), (Some(5), Some(0)));
    let d = &p["graph_execs_from_driver"];
    assert_eq!(
        (d["named"].as_u64(), d["named_from_copies"].as_u64(), d["kernel_nodes"].as_u64(), d["replays"].as_u64()),
        (Some(2), Some(1), Some(4), Some(3)),
        "{d}"
    );
    assert_eq!((d["source_gone"].as_u64(), d["refused"].as_u64()), (Some(0), Some(0)), "{d}");
    assert_eq!((d["checks_agreed"].as_u64(), d["checks_disagreed"].as_u64()), (Some(2), Some(0)));
    // Executions in replays: gemm 2 x 2 (the old executable); blas 2 (the old one) + 1 (the checked one) +
    // 1 (the copied one) + 1 (the old one whose source is gone); vecadd 1 + 2 (the copied one).
    let replayed = |name: &str| -> u64 {
        p["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|k| k["name"] == name)
            .map(|k| k["graph_executions"].as_u64().unwrap())
            .sum()
    };
    assert_eq!(
        (replayed("_Z9late_gemmPfi"), replayed("_Z11blas_kernelPfi"), replayed("_Z6vecaddPfS_S_i")),
        (4, 5, 3),
        "{p}"
    );
    let text = String::from_utf8(tracer(&["report", out.to_str().unwrap()]).stdout).unwrap();
    assert!(
        text.contains(
            "3 of 5 graph replays ran 2 executables made before tracer started, 4 kernel nodes read from the CUDA \
             driver's own objects (kernels with source graph-exec; 1 executable through its own node copies, its \
             source graph destroyed)"
        ),
        "{text}"
    );
    assert!(
        text.contains("the layout checked against 2 graphs captured while tracing: 2 agreed, 0 disagreed"),
        "{text}"
    );
    assert!(!text.contains("not read from the driver"), "{text}");
    drop(std::fs::remove_dir_all(dir));
}
