use super::*;
use crate::{
    trace::event::{Call, Config, MemcpyKind, Origin},
    trace::{Footer, Header, Kernel, Launch, Process, Source, Stop},
};

fn launch(kernel: u32, grid: [u32; 3], ret: i32) -> Line {
    Line::Launch(Launch {
        lib: 1,
        handle: 0x100 * u64::from(kernel),
        grid,
        block: [256, 1, 1],
        ret,
        dur: 1000,
        ..Launch::for_test(7, Some(kernel), 2_000_000_000)
    })
}

#[test]
fn aggregates_per_process() {
    let o = Origin { ts: 0, pid: 7, tid: 0, lib: 1 };
    let records = vec![
        Line::Header(Box::new(Header {
            format: trace::FORMAT.into(),
            schema: 1,
            start_mono_ns: 1_000_000_000,
            ..Default::default()
        })),
        Line::Process(Process { pid: 7, comm: "runner".into(), argv: vec!["runner".into()], ..Default::default() }),
        Line::Kernel(Kernel {
            id: 1,
            pid: 7,
            handle: 0x100,
            name: "_Z1av".into(),
            demangled: "a()".into(),
            source: Source::Register,
            ..Default::default()
        }),
        launch(1, [4, 1, 1], 101),
        launch(1, [4, 1, 1], 101),
        launch(1, [8, 1, 1], 0),
        Line::Config(Config {
            ts: 0,
            pid: 7,
            tid: 0,
            lib: 1,
            api: ApiFunc::HipPushCallConfiguration,
            grid: [2, 1, 1],
            block: [64, 1, 1],
            shmem: 0,
            stream: 0,
            ret: 101,
            dur: 500,
        }),
        Line::Call(Box::new(Call { size: Some(4096), ..Call::new(o, ApiFunc::HipMalloc, 0, 100) })),
        Line::Call(Box::new(Call { size: Some(1 << 30), ..Call::new(o, ApiFunc::HipMalloc, 2, 100) })),
        Line::Call(Box::new(Call {
            size: Some(64),
            kind: Some(MemcpyKind::DeviceToHost),
            ..Call::new(o, ApiFunc::HipMemcpy, 0, 300)
        })),
        Line::Footer(Footer {
            end_mono_ns: 3_000_000_000,
            drops: [("call".to_owned(), vec![1, 2])].into(),
            stop: Stop::Signal,
            ..Default::default()
        }),
    ];
    let r = Report::build(records);
    assert_eq!(r.trace.duration_s.to_bits(), 2.0f64.to_bits(), "exactly 2 s of integer nanoseconds");
    assert_eq!(r.drops_total, 3);
    let p = &r.processes[0];
    assert_eq!(p.comm, "runner");
    let k = &p.kernels[0];
    assert_eq!((k.launches, k.failed, k.demangled.as_str()), (3, 2, "a()"));
    assert_eq!(k.returns, [(0, 1), (101, 2)].into());
    assert_eq!(k.shapes[0].grid, [4, 1, 1]);
    assert_eq!(k.shapes[0].count, 2);
    assert_eq!((p.configs.count, p.configs.failed), (1, 1));
    assert_eq!((p.memory.malloc_calls, p.memory.malloc_failed, p.memory.malloc_bytes), (2, 1, 4096));
    assert_eq!(p.memory.memcpy["DeviceToHost"].bytes, 64);
    let launch_api = p.api.iter().find(|a| a.api == ApiFunc::HipLaunchKernel).unwrap();
    assert_eq!((launch_api.calls, launch_api.errors, launch_api.mean_ns), (3, 2, 1000));
    let text = r.to_text(&TextOptions::default());
    assert!(text.contains("unknown                        a\n"), "{text}");
    assert!(text.contains("3 records dropped"), "{text}");
    let full = r.to_text(&TextOptions { full_names: true, top: 0 });
    assert!(full.contains("unknown                        a()\n"), "{full}");
}

/// A graph executable instantiated from one capture and updated in place with a later one (ggml's
/// way): replays before the update run the first capture's kernels, after it the second's; an
/// executable whose capture was never seen stays unresolved.
#[test]
fn graph_replays_follow_in_place_updates_of_the_executable() {
    let o = Origin { ts: 0, pid: 7, tid: 0, lib: 1 };
    let captured = |kernel: u32| {
        let mut r = launch(kernel, [1, 1, 1], 0);
        if let Line::Launch(l) = &mut r {
            (l.captured, l.stream) = (true, 0x5);
        }
        r
    };
    let call = |api: ApiFunc, handle: u64, value: Option<u64>| {
        Line::Call(Box::new(Call { handle: Some(handle), value, stream: Some(0x5), ..Call::new(o, api, 0, 10) }))
    };
    let replay = || call(ApiFunc::CuGraphLaunch, 0xE, None);
    let records = vec![
        captured(1),
        call(ApiFunc::CuStreamEndCapture, 0x61, None),
        call(ApiFunc::CuGraphInstantiateWithFlags, 0x61, Some(0xE)),
        replay(),
        replay(),
        captured(2),
        captured(2),
        call(ApiFunc::CuStreamEndCapture, 0x62, None),
        call(ApiFunc::CuGraphExecUpdate, 0x62, Some(0xE)),
        replay(),
        call(ApiFunc::CuGraphLaunch, 0xF, None),
    ];
    let r = Report::build(records);
    let p = &r.processes[0];
    assert_eq!((p.graph_replays, p.graph_replays_unresolved), (4, 1));
    let runs = |id: u32| p.kernels.iter().find(|k| k.id == id).map(|k| (k.graph_executions, k.executions));
    // Kernel 1: in 2 replays; kernel 2: twice in the one replay after the update.
    assert_eq!((runs(1), runs(2)), (Some((2, 2)), Some((2, 2))));
}

/// A launch that failed while its stream was capturing was not captured: replays of the graph do not run it,
/// as the report's count of executions already said (a launch both failed and captured is counted as failed).
#[test]
fn a_launch_that_failed_during_a_capture_is_not_replayed() {
    let o = Origin { ts: 0, pid: 7, tid: 0, lib: 1 };
    let captured = |kernel: u32, ret: i32| {
        let mut r = launch(kernel, [1, 1, 1], ret);
        if let Line::Launch(l) = &mut r {
            (l.captured, l.stream) = (true, 0x5);
        }
        r
    };
    let call = |api: ApiFunc, handle: u64, value: Option<u64>| {
        Line::Call(Box::new(Call { handle: Some(handle), value, stream: Some(0x5), ..Call::new(o, api, 0, 10) }))
    };
    let records = vec![
        captured(1, 0),
        captured(2, 1),
        call(ApiFunc::CuStreamEndCapture, 0x61, None),
        call(ApiFunc::CuGraphInstantiateWithFlags, 0x61, Some(0xE)),
        call(ApiFunc::CuGraphLaunch, 0xE, None),
        call(ApiFunc::CuGraphLaunch, 0xE, None),
    ];
    let r = Report::build(records);
    let p = &r.processes[0];
    let runs = |id: u32| p.kernels.iter().find(|k| k.id == id).map(|k| (k.graph_executions, k.executions));
    assert_eq!(runs(1), Some((2, 2)));
    // Kernel 2's one launch failed: it ran in no replay.
    assert_eq!(runs(2).unwrap_or((0, 0)), (0, 0));
    assert_eq!(p.graph_replays, 2);
}

#[test]
fn processes_with_no_gpu_activity_fold_into_one_line() {
    let process = |pid: u32, comm: &str| Line::Process(Process { pid, comm: comm.into(), ..Default::default() });
    let records = vec![process(7, "runner"), launch(1, [1, 1, 1], 0), process(8, "gcc"), process(9, "ld")];
    let r = Report::build(records);
    let active: Vec<u32> = r.processes.iter().filter(|p| p.gpu_activity).map(|p| p.pid).collect();
    assert_eq!((active, r.processes.len()), (vec![7], 3));
    let text = r.to_text(&TextOptions::default());
    assert!(text.contains("process 7 runner"), "{text}");
    assert!(!text.contains("process 8 gcc"), "{text}");
    assert!(text.contains("2 processes with no GPU activity (all in --json): gcc (pid 8), ld (pid 9)"), "{text}");
}

/// On a queue, as on a stream: ggml's src1 quantization dispatch (grid x = ne1 blocks; the packet
/// counts work-items) gives the MMQ dispatch after it its exact column count, on the same queue only.
#[test]
fn mmq_dispatches_take_their_width_from_the_src1_quantization_on_their_queue() {
    const QUANTIZE: &str = "_Z17quantize_mmq_q8_1IL18mmq_q8_1_ds_layout1EEvPKfPKiPvlllllii";
    const MMQ16: &str = "_Z9mul_mat_qIL9ggml_type12ELi16ELb0EEvPKcPKiS4_S4_PfS5_iii";
    let kernel = |pid: u32, id: u32, name: &str| {
        Line::Kernel(Kernel { id, pid, handle: u64::from(id), name: name.into(), ..Default::default() })
    };
    let dispatch = |pid: u32, kernel: u32, queue: u64, grid: [u32; 3], workgroup: [u16; 3]| {
        Line::Dispatch(trace::Dispatch {
            pid,
            queue,
            packet: trace::event::PacketType::KernelDispatch,
            workgroup,
            grid,
            kernel_object: u64::from(kernel),
            kernel: Some(kernel),
            ..Default::default()
        })
    };
    let quantize = |pid: u32, id: u32, queue: u64| dispatch(pid, id, queue, [11 * 128, 1, 1], [128, 1, 1]);
    let mmq = |pid: u32, id: u32, queue: u64| dispatch(pid, id, queue, [132 * 256, 1, 1], [256, 1, 1]);
    // A parameter list tracer knows: its column count read from the argument segment wins.
    const MMQ_KNOWN: &str = "_Z9mul_mat_qIL9ggml_type12ELi16ELb0EEvPKcPKiS4_S4_PfS5_5uint3iiiiiS6_S6_iiiS6_S6_iiiS6_";
    let mut read = mmq(9, 6, 0xA);
    if let Line::Dispatch(d) = &mut read {
        d.params = BTreeMap::from([(9, 0x0000_0001_0000_0122)]); // byte 72: 290
    }
    let records = vec![
        kernel(7, 1, QUANTIZE),
        kernel(7, 2, MMQ16),
        kernel(8, 3, QUANTIZE),
        kernel(8, 4, MMQ16),
        kernel(9, 5, QUANTIZE),
        kernel(9, 6, MMQ_KNOWN),
        quantize(7, 1, 0xA),
        mmq(7, 2, 0xA),
        // In another process: the quantization on one queue, the MMQ on another.
        quantize(8, 3, 0xA),
        mmq(8, 4, 0xB),
        quantize(9, 5, 0xA),
        read,
    ];
    let r = Report::build(records);
    let by_pid = |pid: u32| r.processes.iter().find(|p| p.pid == pid).unwrap();
    let widths = |pid: u32| by_pid(pid).mmq_widths.clone().into_iter().collect::<Vec<_>>();
    assert_eq!((widths(7), widths(8)), (vec![("src1 quantize grid", 1)], vec![("tile bound only", 1)]));
    assert_eq!(widths(9), vec![("kernel parameter", 1)]);
    let prefill = |pid: u32| {
        let p = by_pid(pid).phases.iter().find(|ph| ph.phase == crate::read::phase::Phase::Prefill).unwrap();
        p.batch_widths.iter().cloned().collect::<Vec<_>>()
    };
    assert_eq!((prefill(7), prefill(8)), (vec!["11".to_owned()], vec!["<=16".to_owned()]));
    assert_eq!(prefill(9), vec!["290".to_owned()]);
}

#[test]
fn dispatches_name_the_bundle_of_the_registered_kernel() {
    let kernel = |id: u32, source: Source, bundles: Vec<String>| {
        Line::Kernel(Kernel {
            id,
            pid: 7,
            handle: 0x100 * u64::from(id),
            name: "_Z1av".into(),
            demangled: "a()".into(),
            source,
            code_file: (!bundles.is_empty()).then(|| "/lib/libggml-hip.so".to_owned()),
            bundles,
            caller: None,
            ..Default::default()
        })
    };
    let dispatch = Line::Dispatch(trace::Dispatch {
        pid: 7,
        packet: trace::event::PacketType::KernelDispatch,
        workgroup: [64, 1, 1],
        grid: [256, 1, 1],
        kernel_object: 0xabc,
        kernel: Some(2),
        ..Default::default()
    });
    let records = vec![
        Line::Process(Process { pid: 7, comm: "runner".into(), ..Default::default() }),
        kernel(1, Source::Register, vec!["0042".into()]),
        kernel(2, Source::Hsa, Vec::new()),
        dispatch,
    ];
    let r = Report::build(records.clone());
    let d = &r.processes[0].dispatches[0];
    assert_eq!(
        (d.code_file.as_deref(), d.bundles.as_slice()),
        (Some("/lib/libggml-hip.so"), ["0042".to_owned()].as_slice())
    );
    // Launches probed: the kernel table holds launches alone (none here).
    assert!(r.processes[0].kernels.is_empty());
    // HIP's launches left to the doorbell: the dispatch is the kernel's execution, its code the registration's,
    // its shape in work-items; no launch to set beside it.
    let mut header = Header::default();
    header.options.launches_at_doorbell = true;
    let at_doorbell = [vec![Line::Header(Box::new(header))], records].concat();
    let r = Report::build(at_doorbell);
    let p = &r.processes[0];
    let [k] = p.kernels.as_slice() else { panic!("one kernel row: {:?}", p.kernels) };
    assert_eq!((k.executions, k.launches, k.from_dispatches), (1, 0, true));
    assert_eq!(
        (k.code_file.as_deref(), k.bundles.as_slice()),
        (Some("/lib/libggml-hip.so"), ["0042".to_owned()].as_slice())
    );
    assert_eq!(
        (k.shapes[0].grid, k.shapes[0].block, k.shapes[0].grid_unit),
        ([256, 1, 1], [64, 1, 1], GridUnit::WorkItems)
    );
    assert!(p.crosscheck.is_empty() && r.trace.launches_at_doorbell);
    let text = r.to_text(&TextOptions::default());
    assert!(
        text.contains("note: HIP's launch functions were not probed")
            && text.contains("kernels launched or dispatched"),
        "{text}"
    );
}

/// The records of the ledger test: one process, each kind of mapped library.
fn ledger_records() -> Vec<Line> {
    let mapping = |path: &str, inode: u64, lib: Option<u32>| {
        Line::Mapping(trace::Mapping {
            ts: 1_000_000_000,
            pid: 7,
            path: path.into(),
            dev: 1,
            inode,
            lib,
            gpu: Some(trace::GpuLibrary::UsesRuntime),
            ..Default::default()
        })
    };
    let counted = |id: u32, path: &str, inode: u64| {
        Line::EntryLibrary(trace::EntryLibrary {
            id,
            path: path.into(),
            dev: 1,
            inode,
            functions: 500,
            attached_ts: Some(900_000_000),
            ..Default::default()
        })
    };
    let entry = |lib: u32, function: &str, calls: u64| {
        Line::EntryCalls(trace::EntryCalls { pid: 7, lib, function: function.into(), calls })
    };
    vec![
        Line::Header(Box::new(Header {
            format: trace::FORMAT.into(),
            schema: 1,
            start_mono_ns: 0,
            ..Default::default()
        })),
        Line::Library(trace::Library {
            id: 1,
            path: "/lib/libamdhip64.so.5".into(),
            dev: 1,
            inode: 10,
            attached_ts: Some(0),
            ..Default::default()
        }),
        counted(1, "/lib/libhipblas.so.2", 11),
        counted(2, "/lib/librocsolver.so.0", 12),
        Line::Process(Process { pid: 7, comm: "runner".into(), ..Default::default() }),
        mapping("/lib/libamdhip64.so.5", 10, Some(1)),
        mapping("/lib/libhipblas.so.2", 11, None),
        mapping("/lib/librocsolver.so.0", 12, None),
        mapping("/lib/libggml-hip.so", 13, None),
        Line::Kernel(Kernel {
            id: 1,
            pid: 7,
            handle: 0x100,
            name: "_Z1av".into(),
            source: Source::Register,
            code_file: Some("/lib/libggml-hip.so".into()),
            ..Default::default()
        }),
        launch(1, [4, 1, 1], 0),
        launch(1, [4, 1, 1], 0),
        entry(1, "hipblasCreate", 1),
        entry(1, "hipblasSgemm", 3),
        Line::LaunchSites(trace::LaunchSites { pid: 7, path: "/lib/libggml-hip.so".into(), launches: 2, failed: 0 }),
        // A program whose own kernels' launches all failed (no usable GPU): nothing of it ran.
        mapping("/bin/runner", 14, None),
        Line::Kernel(Kernel {
            id: 2,
            pid: 7,
            handle: 0x200,
            name: "_Z1bv".into(),
            source: Source::Register,
            code_file: Some("/bin/runner".into()),
            ..Default::default()
        }),
        launch(2, [4, 1, 1], 100),
        launch(2, [4, 1, 1], 100),
        launch(2, [4, 1, 1], 100),
        Line::LaunchSites(trace::LaunchSites { pid: 7, path: "/bin/runner".into(), launches: 3, failed: 3 }),
    ]
}

/// The ledger of one process: a probed runtime (its API calls), a counted library called (its functions,
/// most called first; the kernels its code holds and their executions; the launches its code made), a
/// counted library never called, and a GPU library whose calls were not counted.
#[test]
fn the_ledger_sums_calls_kernels_and_launches_per_mapped_library() {
    let r = Report::build(ledger_records());
    let p = &r.processes[0];
    let row = |name: &str| p.mapped.iter().find(|m| m.path.contains(name)).unwrap();
    let hip = row("libamdhip64");
    assert_eq!((hip.status, hip.calls), (MapStatus::Called, Some(5))); // 2 calls and the runner's 3 launches
    let blas = row("libhipblas");
    assert_eq!((blas.status, blas.calls), (MapStatus::Called, Some(4)));
    let functions: Vec<(&str, u64)> = blas.functions.iter().map(|f| (f.function.as_str(), f.calls)).collect();
    assert_eq!(functions, [("hipblasSgemm", 3), ("hipblasCreate", 1)]);
    let solver = row("librocsolver");
    assert_eq!((solver.status, solver.calls), (MapStatus::MappedOnly, Some(0)));
    // Its calls not counted, but its code ran: dispatched.
    let ggml = row("libggml-hip");
    assert_eq!((ggml.status, ggml.calls), (MapStatus::Dispatched, None));
    assert_eq!((ggml.kernels, ggml.executions, ggml.launches_from), (1, 2, 2));
    let runner = row("/bin/runner");
    assert_eq!((runner.status, runner.executions, runner.launches_failed), (MapStatus::LaunchesFailed, 0, 3));
    let text = r.to_text(&TextOptions::default());
    assert!(text.contains("launches-failed /bin/runner (1 kernels of its code, 0 executions, 3 launches made from its code, every one failed)"), "{text}");
    assert!(text.contains("hipblasSgemm 3, hipblasCreate 1"), "{text}");
    assert!(text.contains("(1 kernels of its code, 2 executions, 2 launches made from its code)"), "{text}");
}

/// A recording killed before its footer: its losses are its last checkpoint's, said to be a floor; with a
/// footer, the footer's.
#[test]
fn without_a_footer_the_losses_are_the_last_checkpoints() {
    let header = Line::Header(Box::new(Header {
        format: trace::FORMAT.into(),
        schema: 1,
        start_mono_ns: 1_000_000_000,
        ..Default::default()
    }));
    let checkpoint =
        |ts: u64, n: u64| Line::Checkpoint(trace::Checkpoint { ts, drops: [("call".to_owned(), n)].into() });
    let killed = vec![header, checkpoint(2_000_000_000, 5), launch(1, [1, 1, 1], 0), checkpoint(3_500_000_000, 9)];
    let r = Report::build(killed.clone());
    assert_eq!((r.drops_total, r.drops.get("call").copied()), (9, Some(9)));
    assert_eq!(
        r.trace.notes,
        ["losses: 9 records dropped by the last checkpoint, 2.5 s into the recording; those after it are unknown"]
    );
    let mut closed = killed;
    closed.push(Line::Footer(Footer {
        end_mono_ns: 4_000_000_000,
        drops: [("call".to_owned(), vec![6, 6])].into(),
        stop: Stop::Signal,
        ..Default::default()
    }));
    let r = Report::build(closed);
    assert_eq!(r.drops_total, 12);
    assert!(r.trace.notes.is_empty(), "{:?}", r.trace.notes);
}

/// A doorbell store traps once, whatever number of packets it made visible: the packets it read share its time
/// and queue; a barrier packet's store counts too.
#[test]
fn a_phase_counts_one_trap_a_doorbell_store() {
    const MMVQ1: &str = "_Z13mul_mat_vec_qIL9ggml_type12ELi1ELb0EEvPKvS2_PKiPfjjj";
    let packet = |ts: u64, queue: u64, kernel: Option<u32>| {
        Line::Dispatch(trace::Dispatch {
            ts,
            pid: 7,
            queue,
            packet: if kernel.is_some() {
                trace::event::PacketType::KernelDispatch
            } else {
                trace::event::PacketType::BarrierAnd
            },
            workgroup: [32, 1, 1],
            grid: [8192, 1, 1],
            kernel_object: 0xabc,
            kernel,
            ..Default::default()
        })
    };
    let records = vec![
        Line::Kernel(Kernel { id: 1, pid: 7, handle: 0xabc, name: MMVQ1.into(), ..Default::default() }),
        packet(10, 0xA, Some(1)),
        packet(10, 0xA, Some(1)),
        packet(11, 0xA, None),
        packet(12, 0xB, Some(1)),
    ];
    let r = Report::build(records);
    let [ph] = r.processes[0].phases.as_slice() else { panic!("one phase: {:?}", r.processes[0].phases) };
    assert_eq!((ph.phase, ph.traps, ph.doorbell_traps), (crate::read::phase::Phase::Decode, 3, 3));
}

/// Packets missing on a queue are said per queue: from index 0 on a queue made while tracing (its first
/// packets overwritten before the store that released them was read), between the first and the last read on a
/// queue met late; a queue whose packets were all read is not listed.
#[test]
fn packets_missing_from_a_queue_are_counted_per_queue() {
    let packet = |queue: u64, index: u64| {
        Line::Dispatch(trace::Dispatch {
            ts: 10 + index,
            pid: 7,
            queue,
            index,
            packet: trace::event::PacketType::BarrierAnd,
            ..Default::default()
        })
    };
    let mut records = vec![
        Line::Process(Process { pid: 7, comm: "runner".into(), ..Default::default() }),
        Line::Queue(trace::Queue { pid: 7, queue: 0xA, size: 8, ..Default::default() }),
        Line::Queue(trace::Queue { pid: 7, queue: 0xC, size: 8, ..Default::default() }),
    ];
    // 0xA, made while tracing: 0-3 overwritten, 4-11 read. 0xB, met late: 100-102, 105. 0xC: 0-2, all read.
    records.extend((4..12).map(|i| packet(0xA, i)));
    records.extend([100, 101, 102, 105].map(|i| packet(0xB, i)));
    records.extend((0..3).map(|i| packet(0xC, i)));
    let r = Report::build(records);
    let gaps: Vec<(u64, u64, u64, u64, u64)> =
        r.processes[0].packets_missing.iter().map(|g| (g.queue, g.first, g.last, g.read, g.missing)).collect();
    assert_eq!(gaps, [(0xA, 0, 11, 8, 4), (0xB, 100, 105, 4, 2)]);
    let text = r.to_text(&TextOptions::default());
    assert!(text.contains("per queue: 4 on queue 0xa of runner (pid 7); 2 on queue 0xb of runner (pid 7)"), "{text}");
    assert!(text.contains("queue 0xa: 4 of the 12 packets from index 0 to 11 not read"), "{text}");
}
