//! Tests of `decode`.

use tracer_common::NAME_MAX;

use super::*;
use crate::trace::event::PacketType;

fn bytes_of<T: bytemuck::Pod>(v: &T) -> Vec<u8> {
    bytemuck::bytes_of(v).to_vec()
}

fn header(kind: RecordKind, func: ApiFunc, lib: u32, pid_tgid: u64, ts_ns: u64) -> RecordHeader {
    RecordHeader { kind: kind as u16, func: func as u16, lib, pid_tgid, ts_ns }
}

fn call(func: ApiFunc, args: [u64; ARG_SLOTS], ret: u64) -> CallRecord {
    CallRecord {
        // tgid 100, thread 101
        header: header(RecordKind::Call, func, 3, (100u64 << 32) | 0x65, 5_000),
        duration_ns: 700,
        ret,
        out: 0,
        caller: 0,
        flags: 0,
        args,
    }
}

#[test]
fn dim3_unpacks_two_registers() {
    assert_eq!(dim3(0x0000_0012_0000_0011, 0x13), [0x11, 0x12, 0x13]);
    // The upper half of the z register is undefined.
    assert_eq!(dim3(0x0000_0001_0000_0040, 0xdead_beef_0000_0002), [0x40, 1, 2]);
}

#[test]
fn hip_launch_kernel_from_observed_registers() {
    // rdi=f, rsi/rdx=grid, rcx/r8=block, r9=args, [rsp+8]=shmem, [rsp+16]=stream; ret 101 (no GPU).
    let r = call(
        ApiFunc::HipLaunchKernel,
        [0x4010a0, 0x12_0000_0011, 0x13, 0x22_0000_0021, 0x23, 0x7ffd_0000, 0xa0, 0x5000, 0, 0],
        101,
    );
    let Event::Launch(l) = decode(&bytes_of(&r)).unwrap() else { panic!() };
    assert_eq!(l.handle, 0x4010a0);
    assert_eq!(l.grid, [0x11, 0x12, 0x13]);
    assert_eq!(l.block, [0x21, 0x22, 0x23]);
    assert_eq!(l.shmem, 0xa0);
    assert_eq!(l.stream, 0x5000);
    assert_eq!(l.ret, 101);
    assert_eq!(l.grid_unit, GridUnit::Blocks);
    assert_eq!((l.pid, l.tid, l.lib, l.ts), (100, 101, 3, 5_000));
    assert_eq!(l.dur, 700);
}

#[test]
fn module_launches_take_scalars_and_stack() {
    let r = call(ApiFunc::HipModuleLaunchKernel, [0xf00, 8, 4, 2, 256, 1, 0xffff_ffff_0000_0001, 64, 0x77, 0], 0);
    let Event::Launch(l) = decode(&bytes_of(&r)).unwrap() else { panic!() };
    assert_eq!((l.grid, l.block, l.shmem, l.stream), ([8, 4, 2], [256, 1, 1], 64, 0x77));
    let r = call(ApiFunc::HipExtModuleLaunchKernel, [0xf00, 1024, 1, 1, 256, 1, 1, 4096, 0x88, 0], 0);
    let Event::Launch(l) = decode(&bytes_of(&r)).unwrap() else { panic!() };
    assert_eq!((l.grid, l.grid_unit, l.shmem, l.stream), ([1024, 1, 1], GridUnit::WorkItems, 4096, 0x88));
}

#[test]
fn cuda_launches_one_trap_each() {
    // cuLaunchKernel: hipModuleLaunchKernel's shape; sharedMemBytes is 32 bits (upper half garbage).
    let mut r = call(ApiFunc::CuLaunchKernel, [0xf00, 8, 4, 2, 256, 1, 1, 0xdead_0000_0000_0040, 0x77, 0], 0);
    r.flags = CALL_ENTRY_ONLY;
    let Event::Launch(l) = decode(&bytes_of(&r)).unwrap() else { panic!() };
    assert_eq!((l.handle, l.grid, l.block, l.shmem, l.stream), (0xf00, [8, 4, 2], [256, 1, 1], 64, 0x77));
    assert!(l.entry_only);
    // cuLaunchKernelEx: CUlaunchConfig { u32 gridDim x/y/z, blockDim x/y/z, sharedMemBytes; (pad);
    // CUstream } read into the last five slots.
    let config = [2 | (3 << 32), 4 | (128 << 32), 1 | (1 << 32), 4096 | (0xffff_ffff << 32), 0x88];
    let mut args = [0x7ffc_0000_1000, 0xf0f0, 0, 0, 0, 0, 0, 0, 0, 0];
    args[ARG_SLOTS - CONFIG_SLOTS..].copy_from_slice(&config);
    let mut r = call(ApiFunc::CuLaunchKernelEx, args, 0);
    r.flags = CALL_ENTRY_ONLY;
    let Event::Launch(l) = decode(&bytes_of(&r)).unwrap() else { panic!() };
    assert_eq!((l.handle, l.grid, l.block, l.shmem, l.stream), (0xf0f0, [2, 3, 4], [128, 1, 1], 4096, 0x88));
    // An unreadable config: still a launch, of an unknown shape.
    r.flags = CALL_ENTRY_ONLY | CALL_CONFIG_FAULT;
    let Event::Launch(l) = decode(&bytes_of(&r)).unwrap() else { panic!() };
    assert_eq!((l.handle, l.grid, l.block), (0xf0f0, [0; 3], [0; 3]));
    // cudaLaunchKernel (opt-in): dim3 in register pairs, like hipLaunchKernel.
    let r = call(ApiFunc::CudaLaunchKernel, [0xabc, 2 | (3 << 32), 4, 32 | (1 << 32), 1, 0, 64, 0x77, 0, 0], 0);
    let Event::Launch(l) = decode(&bytes_of(&r)).unwrap() else { panic!() };
    assert_eq!((l.grid, l.block, l.shmem, l.stream), ([2, 3, 4], [32, 1, 1], 64, 0x77));
    // A graph replay is a call, the executable its handle.
    let r = call(ApiFunc::CuGraphLaunch, [0x7000, 0x77, 0, 0, 0, 0, 0, 0, 0, 0], 0);
    let Event::Call(c) = decode(&bytes_of(&r)).unwrap() else { panic!() };
    assert_eq!((c.handle, c.stream), (Some(0x7000), Some(0x77)));
}

/// A function added as one row of the API table (`cuMemcpyHtoDAsync_v2`): decoded by its layout, and
/// counted by its category, with no other change anywhere.
#[test]
fn a_new_table_row_is_decoded_and_counted_by_its_category() {
    let r = call(ApiFunc::CuMemcpyHtoDAsync, [0xd000, 0x7f00, 4096, 0x77, 0, 0, 0, 0, 0, 0], 0);
    let Event::Call(c) = decode(&bytes_of(&r)).unwrap() else { panic!() };
    assert_eq!(
        (c.dst, c.src, c.size, c.kind, c.stream),
        (Some(0xd000), Some(0x7f00), Some(4096), Some(MemcpyKind::HostToDevice), Some(0x77))
    );
    let report = crate::read::report::Report::build(vec![Line::Call(c)]);
    let copies = &report.processes[0].memory.memcpy["HostToDevice"];
    assert_eq!((copies.calls, copies.bytes), (1, 4096));
}

#[test]
fn push_call_configuration_is_shifted_one_register() {
    let r = call(ApiFunc::HipPushCallConfiguration, [0x1_0000_0004, 1, 0x1_0000_0080, 1, 32, 0, 0, 0, 0, 0], 101);
    let Event::Plain { record: Line::Config(c), .. } = decode(&bytes_of(&r)).unwrap() else { panic!() };
    assert_eq!((c.grid, c.block, c.shmem, c.stream, c.ret), ([4, 1, 1], [128, 1, 1], 32, 0, 101));
}

#[test]
fn out_parameters_only_when_valid() {
    let mut r = call(ApiFunc::HipMalloc, [0x7ff0, 1 << 20, 0, 0, 0, 0, 0, 0, 0, 0], 0);
    let Event::Call(c) = decode(&bytes_of(&r)).unwrap() else { panic!() };
    assert_eq!((c.size, c.ptr), (Some(1 << 20), None));
    r.out = 0xdead_0000;
    r.flags = CALL_OUT_VALID;
    let Event::Call(c) = decode(&bytes_of(&r)).unwrap() else { panic!() };
    assert_eq!(c.ptr, Some(0xdead_0000));
    let r = call(ApiFunc::HipMemcpy, [1, 2, 3, 2, 0, 0, 0, 0, 0, 0], 0x1_0000_0065);
    let Event::Call(c) = decode(&bytes_of(&r)).unwrap() else { panic!() };
    assert_eq!((c.kind, c.ret), (Some(MemcpyKind::DeviceToHost), 101));
}

#[test]
fn aql_kernel_dispatch_packet() {
    let mut p = [0u8; 64];
    p[0..2].copy_from_slice(&(2u16 | (1 << 8) | (2 << 9) | (2 << 11)).to_le_bytes()); // dispatch, barrier, system fences
    p[2..4].copy_from_slice(&3u16.to_le_bytes());
    for (o, v) in [(4, 256u16), (6, 1), (8, 1)] {
        p[o..o + 2].copy_from_slice(&v.to_le_bytes());
    }
    for (o, v) in [(12, 4096u32), (16, 2), (20, 1), (24, 16), (28, 1024)] {
        p[o..o + 4].copy_from_slice(&v.to_le_bytes());
    }
    p[32..40].copy_from_slice(&0x7f00_1234_0040u64.to_le_bytes());
    p[40..48].copy_from_slice(&0x7f00_5000_0000u64.to_le_bytes());
    p[56..64].copy_from_slice(&0x55aa_0000u64.to_le_bytes());
    let d = Dispatch::from_packet(Origin::default(), 0x1000, 7, &p);
    assert_eq!(d.packet, PacketType::KernelDispatch);
    assert!(d.barrier);
    assert_eq!((d.dimensions, d.workgroup, d.grid), (3, [256, 1, 1], [4096, 2, 1]));
    assert_eq!((d.private_segment, d.group_segment), (16, 1024));
    assert_eq!((d.kernel_object, d.kernarg, d.completion_signal), (0x7f00_1234_0040, 0x7f00_5000_0000, 0x55aa_0000));
    // A barrier-AND packet: no kernel fields, whatever bytes follow the header.
    p[0] = 3;
    let b = Dispatch::from_packet(Origin::default(), 0x1000, 8, &p);
    assert_eq!((b.packet, b.kernel_object, b.grid), (PacketType::BarrierAnd, 0, [0; 3]));
    assert_eq!(b.completion_signal, 0x55aa_0000);
}

#[test]
fn kernel_parameters_only_where_read() {
    let mut values = [0u64; PARAMS_MAX];
    values[11] = 0x1000_0000_0122;
    values[3] = 0xdead; // not read: no value, whatever the slot holds
    let r = ParamsRecord {
        header: header(RecordKind::Params, ApiFunc::CuLaunchKernel, 2, (7 << 32) | 8, 99),
        handle: 0xabc0,
        wanted: tracer_common::PARAMS_ALL,
        read: 1 << 11,
        values,
    };
    let Event::Params(p) = decode(&bytes_of(&r)).unwrap() else { panic!() };
    assert_eq!((p.origin.ts, p.origin.tid, p.handle, p.values), (99, 8, 0xabc0, vec![(11, 0x1000_0000_0122)]));
    assert!(matches!(decode(&bytes_of(&r)[..40]), Err(DecodeError::Short { .. })));
}

#[test]
fn names_and_flags() {
    let mut name = [0u8; NAME_MAX];
    name[..12].copy_from_slice(b"_Z4axpyPfS_f");
    let r = NameRecord {
        header: header(RecordKind::Name, ApiFunc::HipRegisterFunction, 1, (7 << 32) | 7, 9),
        handle: 0x1234,
        module: 0x99,
        len: 12,
        flags: NAME_TRUNCATED,
        name,
    };
    let Event::Name(n) = decode(&bytes_of(&r)).unwrap() else { panic!() };
    assert_eq!(
        (n.name.as_str(), n.handle, n.module, n.truncated, n.fault),
        ("_Z4axpyPfS_f", 0x1234, 0x99, true, false)
    );
}

#[test]
fn a_load_by_path_is_its_entry_path_then_its_call() {
    // The path, read at entry: a name record with the call's own header.
    let mut name = [0u8; NAME_MAX];
    name[..20].copy_from_slice(b"/lib/library/a.hsaco");
    let h = header(RecordKind::Name, ApiFunc::HipModuleLoad, 3, (100u64 << 32) | 0x65, 5_000);
    let r = NameRecord { header: h, handle: 0, module: 0, len: 20, flags: 0, name };
    let Event::Name(n) = decode(&bytes_of(&r)).unwrap() else { panic!() };
    assert_eq!(
        (n.api, n.name.as_str(), n.origin.ts, n.origin.tid),
        (ApiFunc::HipModuleLoad, "/lib/library/a.hsaco", 5_000, 0x65)
    );
    // The call, at return: the module when it succeeded, none when it failed.
    let mut r = call(ApiFunc::CuModuleLoad, [0x7000, 0x8000, 0, 0, 0, 0, 0, 0, 0, 0], 0);
    r.flags = CALL_OUT_VALID;
    r.out = 0x55;
    let Event::Call(c) = decode(&bytes_of(&r)).unwrap() else { panic!() };
    assert_eq!((c.module, c.ret, c.ts, c.tid, c.file), (Some(0x55), 0, 5_000, 0x65, None));
    let r = call(ApiFunc::HipModuleLoad, [0x7000, 0x8000, 0, 0, 0, 0, 0, 0, 0, 0], 101);
    let Event::Call(c) = decode(&bytes_of(&r)).unwrap() else { panic!() };
    assert_eq!((c.module, c.ret), (None, 101));
    // An HSA reader of an open file: the descriptor (an int) and the reader.
    let mut r =
        call(ApiFunc::HsaCodeObjectReaderCreateFromFile, [0xffff_ffff_0000_0007, 0x9000, 0, 0, 0, 0, 0, 0, 0, 0], 0);
    r.flags = CALL_OUT_VALID;
    r.out = 0x66;
    let Event::Call(c) = decode(&bytes_of(&r)).unwrap() else { panic!() };
    assert_eq!((c.value, c.handle), (Some(7), Some(0x66)));
}

#[test]
fn unknown_and_short_records_are_errors() {
    assert_eq!(decode(&[1, 0, 0]), Err(DecodeError::Short { len: 3 }));
    let mut r = call(ApiFunc::HipFree, [0; ARG_SLOTS], 0);
    r.header.func = 999;
    assert_eq!(decode(&bytes_of(&r)), Err(DecodeError::UnknownFunc(999)));
    r.header.kind = 77;
    assert_eq!(decode(&bytes_of(&r)), Err(DecodeError::UnknownKind(77)));
    let b = bytes_of(&call(ApiFunc::HipFree, [0; ARG_SLOTS], 0));
    assert!(matches!(decode(&b[..40]), Err(DecodeError::Short { .. })));
}

#[test]
fn a_batch_record_groups_its_tokens_into_sequence_runs() {
    // Slot 0's decode token at 12, then slot 1's prompt of 3 at 0..3 with the last token's output.
    let head = BatchRecord {
        header: RecordHeader {
            kind: RecordKind::Batch as u16,
            func: 224,
            lib: 3,
            pid_tgid: (0x2a << 32) | 0x2b,
            ts_ns: 9,
        },
        ctx: 0x77,
        step: 5,
        n_tokens: 4,
        laid: 4,
        read: 4,
        flags: BATCH_POS | BATCH_SEQ | BATCH_LOGITS,
        ..BatchRecord::default()
    };
    let mut head = head;
    head.step_calls[2] = 7;
    let mut bytes = bytes_of(&head);
    for v in [0i32, 1, 1, 1, 12, 0, 1, 2, 1, 1, 1, 2] {
        bytes.extend_from_slice(&v.to_ne_bytes());
    }
    bytes.extend_from_slice(&[1, 0, 0, 1]);
    let Ok(Event::Plain { record: Line::Batch(b), .. }) = decode(&bytes) else { panic!("not a batch") };
    assert_eq!((b.pid, b.tid, b.ctx, b.step, b.n_tokens, b.unread), (42, 43, 0x77, 5, 4, 0));
    assert_eq!(
        b.runs,
        [
            crate::trace::event::SeqRun { seq: 0, pos: Some(12), tokens: 1, outputs: 1, last_output: true, shared: 0 },
            crate::trace::event::SeqRun { seq: 1, pos: Some(0), tokens: 3, outputs: 1, last_output: true, shared: 1 },
        ]
    );
    assert_eq!(b.previous_calls, std::iter::once((2, 7)).collect());
    // Cut short (fewer array bytes than laid out): refused, never read past the end.
    assert!(matches!(decode(&bytes[..bytes.len() - 1]), Err(DecodeError::Short { .. })));
    // No positions, sequences or outputs given (`llama_batch_get_one`): sequence 0, the last token's
    // output; tokens beyond the read ones are unread.
    let bare = BatchRecord { n_tokens: 3000, laid: 0, read: 0, flags: 0, ..head };
    let Ok(Event::Plain { record: Line::Batch(b), .. }) = decode(&bytes_of(&bare)) else { panic!("not a batch") };
    assert_eq!((b.runs.len(), b.unread, b.positions, b.seq_ids), (0, 3000, false, false));
    let one = BatchRecord { n_tokens: 2, laid: 2, read: 2, flags: 0, ..head };
    let mut bytes = bytes_of(&one);
    bytes.extend_from_slice(&[0; 26]);
    let Ok(Event::Plain { record: Line::Batch(b), .. }) = decode(&bytes) else { panic!("not a batch") };
    assert_eq!(
        b.runs,
        [crate::trace::event::SeqRun { seq: 0, pos: None, tokens: 2, outputs: 1, last_output: true, shared: 0 }]
    );
}

#[test]
fn gpu_scheduler_jobs_carry_their_stage_fence_and_ring() {
    let mut ring = [0u8; tracer_common::JOB_RING_BYTES];
    ring[..9].copy_from_slice(b"gfx_0.0.0");
    let queued = JobRecord {
        header: RecordHeader { kind: RecordKind::Job as u16, func: 1, lib: 0, pid_tgid: (7u64 << 32) | 8, ts_ns: 50 },
        context: 0x2a,
        seqno: 9,
        client: 3,
        ring,
    };
    let Ok(Event::Plain { record: Line::Job(j), .. }) = decode(&bytes_of(&queued)) else { panic!("not a job") };
    assert_eq!(
        j,
        Job {
            ts: 50,
            pid: 7,
            tid: 8,
            stage: JobStage::Queue,
            context: 0x2a,
            seqno: 9,
            client: Some(3),
            ring: Some("gfx_0.0.0".into())
        }
    );
    // The run and done stages carry no ring and no client (the kernel reads them at the queue stage only).
    let done = JobRecord { header: RecordHeader { func: 3, ..queued.header }, client: 0, ring: [0; 32], ..queued };
    let Ok(Event::Plain { record: Line::Job(j), .. }) = decode(&bytes_of(&done)) else { panic!("not a job") };
    assert_eq!((j.stage, j.client, j.ring), (JobStage::Done, None, None));
    let odd = JobRecord { header: RecordHeader { func: 4, ..queued.header }, ..queued };
    assert_eq!(decode(&bytes_of(&odd)), Err(DecodeError::UnknownJobStage(4)));
}

#[test]
fn a_step_cut_is_the_library_calls_of_the_last_pass() {
    let mut calls = [0u64; tracer_common::STEP_SLOTS];
    (calls[3], calls[15]) = (2, 1);
    let h = header(RecordKind::StepCut, ApiFunc::GgmlSchedGraphCompute, 0, (77u64 << 32) | 0x4e, 9_000);
    let Event::Plain { pid, record: Line::StepCalls(c), .. } =
        decode(&bytes_of(&StepCutRecord { header: h, calls })).unwrap()
    else {
        panic!("a step_calls line")
    };
    assert_eq!((pid, c.pid, c.step, c.at_pass), (77, 77, 0, Some(9_000)));
    assert_eq!(c.calls, [(3, 2), (15, 1)].into_iter().collect());
    // A record cut short is refused, not read past its end.
    let short = bytes_of(&StepCutRecord { header: h, calls });
    decode(&short[..short.len() - 8]).unwrap_err();
}

#[test]
fn a_pass_input_is_its_values_as_runs_and_what_was_not_read() {
    let h = header(RecordKind::Input, ApiFunc::GgmlBackendTensorSet, 5, (9u64 << 32) | 0xa, 700);
    let head = InputRecord {
        header: h,
        tensor: 0x1000,
        size: 4 * 5,
        offset: 0,
        which: tracer_common::INPUT_POSITIONS,
        read: 3,
    };
    let mut bytes = bytes_of(&head);
    for v in [23i32, 0, 1] {
        bytes.extend_from_slice(&v.to_ne_bytes());
    }
    let Event::Plain { record: Line::GraphInput(g), .. } = decode(&bytes).unwrap() else {
        panic!("a graph_input line")
    };
    assert_eq!((g.pid, g.tid, g.lib, g.ts), (9, 10, 5, 700));
    assert_eq!(
        (g.input, g.count, g.runs.clone(), g.unread, g.fault),
        (Some(InputKind::Positions), 5, vec![(23, 1), (0, 2)], 2, false)
    );
    // Output rows; a fault reads nothing.
    let rows = InputRecord { which: tracer_common::INPUT_OUTPUT_ROWS | INPUT_FAULT, read: 0, size: 8, ..head };
    let Event::Plain { record: Line::GraphInput(g), .. } = decode(&bytes_of(&rows)).unwrap() else {
        panic!("a graph_input line")
    };
    assert_eq!((g.input, g.runs.len(), g.unread, g.fault), (Some(InputKind::Outputs), 0, 2, true));
    // A record that claims more values than its bytes hold is refused, not read past its end.
    decode(&bytes[..bytes.len() - 4]).unwrap_err();
    // A count past what a record holds is bounded by it.
    let many = InputRecord { read: u32::MAX, ..head };
    decode(&bytes_of(&many)).unwrap_err();
}

#[test]
fn a_run_of_repeats_and_a_launch_placed_in_its_thread_s_history() {
    let r = RepeatRecord {
        header: header(RecordKind::Repeat, ApiFunc::CuLaunchKernel, 2, (100u64 << 32) | 0x65, 5_000),
        last_ns: 9_000,
        dur_ns: 40,
        count: 17,
        period: 4,
    };
    let Event::Repeat(x) = decode(&bytes_of(&r)).unwrap() else { panic!() };
    assert_eq!((x.pid, x.tid, x.ts, x.last_ts, x.count, x.period, x.dur), (100, 101, 5_000, 9_000, 17, 4, 40));
    let mut c = call(ApiFunc::HipLaunchKernel, [0x4010a0, 1, 1, 1, 1, 0, 0, 0, 0, 0], 0);
    let Event::Launch(l) = decode(&bytes_of(&c)).unwrap() else { panic!() };
    assert!(!l.in_runs);
    c.flags = CALL_IN_RUNS;
    let Event::Launch(l) = decode(&bytes_of(&c)).unwrap() else { panic!() };
    assert!(l.in_runs);
    // Cut short: refused, never read past its end.
    assert_eq!(decode(&bytes_of(&r)[..30]), Err(DecodeError::Short { len: 30 }));
}
