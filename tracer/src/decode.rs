//! Ring-buffer bytes to typed events.
//!
//! The one place where records from `tracer-common` are given meaning. A call's argument slots are decoded by its layout in the API table
//! ([`tracer_common::api::Layout`]): one arm per layout, never one per function.

use tracer_common::{
    ARG_SLOTS, ApiFunc, BATCH_EMBD, BATCH_ENCODE, BATCH_FAULT, BATCH_HEAD, BATCH_LOGITS, BATCH_NO_TALLY, BATCH_POS,
    BATCH_SEQ, BATCH_STACK_FAULT, BATCH_TOKENS_MAX, BatchRecord, CALL_CONFIG_FAULT, CALL_ENTRY_ONLY, CALL_OUT_VALID,
    CONFIG_SLOTS, CallRecord, DispatchRecord, IOCTL_ARG_READ, IoctlRecord, NAME_FAULT, NAME_TRUNCATED, NameRecord,
    OpenRecord, PARAMS_MAX, ParamsRecord, ProcEvent, ProcRecord, QueueRecord, RecordHeader, RecordKind,
    api::{CopyDirection, Layout},
    batch_arrays,
};

pub use crate::event::Origin;
use crate::event::{Call, Config, Dispatch, GridUnit, Ioctl, Launch, MemcpyKind, Queue, StepBatch};

/// A decoded ring-buffer record.
///
/// Launches, configurations, calls, ioctls, queues and dispatches are the types the trace file stores; names and process events become kernel and process records through
/// attribution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Launch(Launch),
    Config(Config),
    Call(Call),
    Name(Name),
    Proc(Proc),
    Ioctl(Ioctl),
    Queue(Queue),
    Dispatch(Dispatch),
    Params(Params),
    Open(Opened),
    Batch(StepBatch),
}

/// A traced process opening a GPU runtime library by this path (as it gave it: absolute, or relative to
/// its working directory).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opened {
    pub origin: Origin,
    pub path: String,
    pub truncated: bool,
}

/// A name bound to a handle: a registration, a function or symbol lookup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Name {
    pub origin: Origin,
    pub api: ApiFunc,
    pub handle: u64,
    pub module: u64,
    pub name: String,
    pub truncated: bool,
    pub fault: bool,
}

/// A launch's kernel parameters, read at its entry, or a dispatch's argument words, read at its doorbell.
///
/// Attribution joins them to the launch or dispatch that follows on the same thread with the same time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    pub origin: Origin,
    pub handle: u64,
    /// Bit i: parameter (or word) i was asked for.
    pub wanted: u32,
    /// (index, the 8 bytes at the parameter's address, or the argument word) for each one read.
    pub values: Vec<(u8, u64)>,
}

/// A process event: fork, exec, exit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proc {
    pub origin: Origin,
    pub event: ProcEvent,
    pub pid: u32,
    pub parent: u32,
    pub comm: String,
}

/// Why a buffer could not be decoded. Counted by the caller, never silently dropped.
#[derive(Debug, PartialEq, Eq)]
pub enum DecodeError {
    Short { len: usize },
    UnknownKind(u16),
    UnknownFunc(u16),
    UnknownProcEvent(u16),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Short { len } => write!(f, "record of {len} bytes is shorter than its kind"),
            Self::UnknownKind(k) => write!(f, "unknown record kind {k}"),
            Self::UnknownFunc(k) => write!(f, "unknown API function {k}"),
            Self::UnknownProcEvent(k) => write!(f, "unknown process event {k}"),
        }
    }
}

fn read<T: bytemuck::AnyBitPattern>(bytes: &[u8]) -> Result<T, DecodeError> {
    let b = bytes.get(..size_of::<T>()).ok_or(DecodeError::Short { len: bytes.len() })?;
    Ok(bytemuck::pod_read_unaligned(b))
}

const fn origin(h: &RecordHeader) -> Origin {
    Origin { ts: h.ts_ns, pid: h.pid(), tid: h.tid(), lib: h.lib }
}

/// The magic of a HIP fat-binary wrapper (`__hipFatMAGIC2`, "HIPF").
const HIP_FAT_BINARY_MAGIC: u32 = 0x4849_5046;

/// A dim3 passed by value takes two registers: `x | y << 32`, then `z` in the low half.
pub const fn dim3(xy: u64, z: u64) -> [u32; 3] {
    [xy as u32, (xy >> 32) as u32, z as u32]
}

pub fn decode(bytes: &[u8]) -> Result<Event, DecodeError> {
    let header: RecordHeader = read(bytes)?;
    match RecordKind::from_u16(header.kind) {
        Some(RecordKind::Call) => decode_call(&read::<CallRecord>(bytes)?),
        Some(RecordKind::Name) => decode_name(&read::<NameRecord>(bytes)?),
        Some(RecordKind::Proc) => decode_proc(&read::<ProcRecord>(bytes)?),
        Some(RecordKind::Queue) => {
            let r = read::<QueueRecord>(bytes)?;
            let o = origin(&r.header);
            Ok(Event::Queue(Queue {
                ts: o.ts,
                pid: o.pid,
                tid: o.tid,
                lib: o.lib,
                queue: r.queue,
                queue_type: r.raw[0] as u32,
                features: (r.raw[0] >> 32) as u32,
                base_address: r.raw[1],
                doorbell_signal: r.raw[2],
                size: r.raw[3] as u32,
                id: r.raw[4],
            }))
        }
        Some(RecordKind::Dispatch) => {
            let r = read::<DispatchRecord>(bytes)?;
            Ok(Event::Dispatch(Dispatch::from_packet(origin(&r.header), r.queue, r.index, &r.packet)))
        }
        Some(RecordKind::Ioctl) => {
            let r = read::<IoctlRecord>(bytes)?;
            let fields = if r.flags & IOCTL_ARG_READ != 0 {
                crate::ioctl::fields(r.cmd, &r.argbuf[..]).into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
            } else {
                Default::default()
            };
            Ok(Event::Ioctl(Ioctl {
                ts: r.header.ts_ns,
                pid: r.header.pid(),
                tid: r.header.tid(),
                fd: r.fd,
                device: None,
                cmd: r.cmd,
                name: crate::ioctl::name(r.cmd),
                ret: r.ret,
                dur: r.duration_ns,
                fields,
            }))
        }
        Some(RecordKind::Params) => {
            let r = read::<ParamsRecord>(bytes)?;
            let values = (0..PARAMS_MAX).filter(|&i| r.read & (1 << i) != 0).map(|i| (i as u8, r.values[i])).collect();
            Ok(Event::Params(Params { origin: origin(&r.header), handle: r.handle, wanted: r.wanted, values }))
        }
        Some(RecordKind::Open) => {
            let r = read::<OpenRecord>(bytes)?;
            let len = (r.len as usize).min(r.path.len());
            Ok(Event::Open(Opened {
                origin: origin(&r.header),
                path: c_string(&r.path[..len]),
                truncated: r.flags & NAME_TRUNCATED != 0,
            }))
        }
        Some(RecordKind::Batch) => decode_batch(bytes),
        None => Err(DecodeError::UnknownKind(header.kind)),
    }
}

/// A batch record: its head, then its arrays, each as long as the head says it laid out (bounded by
/// what the probe can lay out, and by the bytes there).
fn decode_batch(bytes: &[u8]) -> Result<Event, DecodeError> {
    let r = read::<BatchRecord>(bytes)?;
    let api = ApiFunc::from_u16(r.header.func).ok_or(DecodeError::UnknownFunc(r.header.func))?;
    let laid = (r.laid as usize).min(BATCH_TOKENS_MAX);
    let (starts, len) = batch_arrays(laid);
    let data = bytes.get(BATCH_HEAD..BATCH_HEAD + len).ok_or(DecodeError::Short { len: bytes.len() })?;
    let read = (r.read as usize).min(laid);
    let word = |array: usize, i: usize| {
        let at = starts[array] + 4 * i;
        data.get(at..at + 4).and_then(|b| b.try_into().ok()).map_or(0, i32::from_ne_bytes)
    };
    let positions = r.flags & BATCH_POS != 0;
    let seq_ids = r.flags & BATCH_SEQ != 0;
    let logits = r.flags & BATCH_LOGITS != 0;
    let last = usize::try_from(r.n_tokens).unwrap_or(0).checked_sub(1);
    let tokens = (0..read).map(|i| {
        let output = if logits { data.get(starts[3] + i).is_some_and(|&b| b != 0) } else { Some(i) == last };
        (
            if seq_ids { word(0, i) } else { 0 },
            positions.then(|| word(1, i)),
            if seq_ids { word(2, i) } else { 1 },
            output,
        )
    });
    let o = origin(&r.header);
    let uncounted = r.flags & BATCH_NO_TALLY != 0;
    Ok(Event::Batch(StepBatch {
        ts: o.ts,
        pid: o.pid,
        tid: o.tid,
        lib: o.lib,
        api,
        encode: r.flags & BATCH_ENCODE != 0,
        ctx: r.ctx,
        step: r.step,
        n_tokens: r.n_tokens,
        runs: StepBatch::group(tokens),
        unread: u32::try_from(r.n_tokens).unwrap_or(0).saturating_sub(read as u32),
        positions,
        seq_ids,
        embd: r.flags & BATCH_EMBD != 0,
        fault: r.flags & (BATCH_FAULT | BATCH_STACK_FAULT) != 0,
        previous_calls: r
            .step_calls
            .iter()
            .enumerate()
            .filter(|&(_, &n)| n > 0)
            .map(|(slot, &n)| (slot as u32, n))
            .collect(),
        calls_uncounted: uncounted,
    }))
}

fn decode_call(r: &CallRecord) -> Result<Event, DecodeError> {
    let api = ApiFunc::from_u16(r.header.func).ok_or(DecodeError::UnknownFunc(r.header.func))?;
    let o = origin(&r.header);
    let a = &r.args;
    let ret32 = r.ret as u32 as i32;
    let out = (r.flags & CALL_OUT_VALID != 0).then_some(r.out);
    let entry_only = r.flags & CALL_ENTRY_ONLY != 0;
    let launch = |handle, grid, block, grid_unit, shmem, stream| {
        Event::Launch(Launch {
            ts: o.ts,
            pid: o.pid,
            tid: o.tid,
            lib: o.lib,
            api,
            kernel: None,
            handle,
            grid,
            block,
            grid_unit,
            shmem,
            stream,
            ret: ret32,
            dur: r.duration_ns,
            captured: false,
            entry_only,
            params: Default::default(),
            caller: r.caller,
        })
    };
    let u32s = |x: &[u64]| -> [u32; 3] { std::array::from_fn(|i| x[i] as u32) };
    let shmem = |v: u64, shmem32: bool| if shmem32 { u64::from(v as u32) } else { v };
    let call = Call { entry_only, caller: r.caller, ..Call::new(o, api, i64::from(ret32), r.duration_ns) };
    Ok(match api.layout() {
        Layout::LaunchDim3 { shmem32 } => {
            launch(a[0], dim3(a[1], a[2]), dim3(a[3], a[4]), GridUnit::Blocks, shmem(a[6], shmem32), a[7])
        }
        Layout::LaunchScalars { shmem32, work_items } => {
            let unit = if work_items { GridUnit::WorkItems } else { GridUnit::Blocks };
            launch(a[0], u32s(&a[1..4]), u32s(&a[4..7]), unit, shmem(a[7], shmem32), a[8])
        }
        // CUlaunchConfig, read into the last slots: u32 grid x, y, z, block x, y, z, sharedMemBytes,
        // (padding), then the stream.
        Layout::LaunchConfig => {
            if r.flags & CALL_CONFIG_FAULT != 0 {
                // The config could not be read: the launch is still a launch, of an unknown shape.
                launch(a[1], [0; 3], [0; 3], GridUnit::Blocks, 0, 0)
            } else {
                let c: [u64; CONFIG_SLOTS] = std::array::from_fn(|i| a[ARG_SLOTS - CONFIG_SLOTS + i]);
                let (lo, hi) = (|w: u64| w as u32, |w: u64| (w >> 32) as u32);
                let grid = [lo(c[0]), hi(c[0]), lo(c[1])];
                let block = [hi(c[1]), lo(c[2]), hi(c[2])];
                launch(a[1], grid, block, GridUnit::Blocks, u64::from(lo(c[3])), c[4])
            }
        }
        Layout::PushConfig => Event::Config(Config {
            ts: o.ts,
            pid: o.pid,
            tid: o.tid,
            lib: o.lib,
            api,
            grid: dim3(a[0], a[1]),
            block: dim3(a[2], a[3]),
            shmem: a[4],
            stream: a[5],
            ret: ret32,
            dur: r.duration_ns,
        }),
        Layout::Nothing => Event::Call(call),
        Layout::Stream => Event::Call(Call { stream: Some(a[0]), ..call }),
        Layout::StreamHandleOut => Event::Call(Call { stream: Some(a[0]), handle: out, ..call }),
        Layout::InstantiateOut => Event::Call(Call { handle: Some(a[1]), value: out, ..call }),
        Layout::ExecGraph => Event::Call(Call { handle: Some(a[1]), value: Some(a[0]), ..call }),
        Layout::HandleStream => Event::Call(Call { handle: Some(a[0]), stream: Some(a[1]), ..call }),
        Layout::AllocOut { .. } => Event::Call(Call { size: Some(a[1]), ptr: out, ..call }),
        Layout::Ptr => Event::Call(Call { ptr: Some(a[0]), ..call }),
        Layout::Memcpy { direction, stream } => {
            let kind = match direction {
                CopyDirection::Arg(i) => a[i as usize] as u32,
                CopyDirection::Fixed(k) => k,
            };
            Event::Call(Call {
                dst: Some(a[0]),
                src: Some(a[1]),
                size: Some(a[2]),
                kind: Some(MemcpyKind::from_raw(kind)),
                stream: stream.map(|i| a[i as usize]),
                ..call
            })
        }
        // The return value is the module handle, not an error code; a HIP wrapper (its magic checked)
        // gives the address of its offload bundle.
        Layout::FatBinary => {
            let wrapper_read = r.flags & CALL_CONFIG_FAULT == 0 && a[6] as u32 == HIP_FAT_BINARY_MAGIC;
            Event::Call(Call {
                ret: 0,
                ptr: Some(a[0]),
                module: Some(r.ret),
                value: wrapper_read.then_some(a[7]),
                ..call
            })
        }
        Layout::ModuleOut => Event::Call(Call { ptr: Some(a[1]), module: out, ..call }),
        Layout::FunctionOut => Event::Call(Call { module: Some(a[1]), function: out, ..call }),
        Layout::KernelFunctionOut => Event::Call(Call { handle: Some(a[1]), function: out, ..call }),
        Layout::SymbolByName => Event::Call(Call { module: Some(a[0]), handle: out, ..call }),
        Layout::SymbolInfo => {
            Event::Call(Call { handle: Some(a[0]), attribute: Some(a[1] as u32), value: out, ..call })
        }
        Layout::CodeObjectFromMemory => Event::Call(Call { ptr: Some(a[0]), size: Some(a[1]), handle: out, ..call }),
        // The path came before, in a name record with this call's header (read at entry).
        Layout::ModulePath => Event::Call(Call { module: out, ..call }),
        // The descriptor (an `int`): attribution reads which file it is.
        Layout::CodeObjectFromFile => Event::Call(Call { value: Some(u64::from(a[0] as u32)), handle: out, ..call }),
        Layout::QueueCreate => Event::Call(Call { size: Some(u64::from(a[1] as u32)), ..call }),
        // Registration, doorbells and batches have their own programs and records, never a call record.
        Layout::Register | Layout::Doorbell | Layout::LlamaBatch | Layout::LlamaBatchExt => {
            return Err(DecodeError::UnknownFunc(r.header.func));
        }
    })
}

fn decode_name(r: &NameRecord) -> Result<Event, DecodeError> {
    let api = ApiFunc::from_u16(r.header.func).ok_or(DecodeError::UnknownFunc(r.header.func))?;
    let len = (r.len as usize).min(r.name.len());
    let bytes = &r.name[..len];
    let bytes = bytes.split(|&b| b == 0).next().unwrap_or_default();
    Ok(Event::Name(Name {
        origin: origin(&r.header),
        api,
        handle: r.handle,
        module: r.module,
        name: String::from_utf8_lossy(bytes).into_owned(),
        truncated: r.flags & NAME_TRUNCATED != 0,
        fault: r.flags & NAME_FAULT != 0,
    }))
}

fn decode_proc(r: &ProcRecord) -> Result<Event, DecodeError> {
    let event = ProcEvent::from_u16(r.header.func).ok_or(DecodeError::UnknownProcEvent(r.header.func))?;
    Ok(Event::Proc(Proc { origin: origin(&r.header), event, pid: r.pid, parent: r.parent, comm: c_string(&r.comm) }))
}

pub fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

#[cfg(test)]
#[expect(clippy::little_endian_bytes, reason = "AQL packets are little-endian by definition")]
mod tests {
    use tracer_common::NAME_MAX;

    use super::*;
    use crate::event::PacketType;

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
        let report = crate::report::Report::build(vec![crate::trace::Record::Call(c)]);
        let copies = &report.processes[0].memory.memcpy["HostToDevice"];
        assert_eq!((copies.calls, copies.bytes), (1, 4096));
    }

    #[test]
    fn push_call_configuration_is_shifted_one_register() {
        let r = call(ApiFunc::HipPushCallConfiguration, [0x1_0000_0004, 1, 0x1_0000_0080, 1, 32, 0, 0, 0, 0, 0], 101);
        let Event::Config(c) = decode(&bytes_of(&r)).unwrap() else { panic!() };
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
        assert_eq!(
            (d.kernel_object, d.kernarg, d.completion_signal),
            (0x7f00_1234_0040, 0x7f00_5000_0000, 0x55aa_0000)
        );
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
        let mut r = call(
            ApiFunc::HsaCodeObjectReaderCreateFromFile,
            [0xffff_ffff_0000_0007, 0x9000, 0, 0, 0, 0, 0, 0, 0, 0],
            0,
        );
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
        let Ok(Event::Batch(b)) = decode(&bytes) else { panic!("not a batch") };
        assert_eq!((b.pid, b.tid, b.ctx, b.step, b.n_tokens, b.unread), (42, 43, 0x77, 5, 4, 0));
        assert_eq!(
            b.runs,
            [
                crate::event::SeqRun { seq: 0, pos: Some(12), tokens: 1, outputs: 1, last_output: true, shared: 0 },
                crate::event::SeqRun { seq: 1, pos: Some(0), tokens: 3, outputs: 1, last_output: true, shared: 1 },
            ]
        );
        assert_eq!(b.previous_calls, std::iter::once((2, 7)).collect());
        // Cut short (fewer array bytes than laid out): refused, never read past the end.
        assert!(matches!(decode(&bytes[..bytes.len() - 1]), Err(DecodeError::Short { .. })));
        // No positions, sequences or outputs given (`llama_batch_get_one`): sequence 0, the last token's
        // output; tokens beyond the read ones are unread.
        let bare = BatchRecord { n_tokens: 3000, laid: 0, read: 0, flags: 0, ..head };
        let Ok(Event::Batch(b)) = decode(&bytes_of(&bare)) else { panic!("not a batch") };
        assert_eq!((b.runs.len(), b.unread, b.positions, b.seq_ids), (0, 3000, false, false));
        let one = BatchRecord { n_tokens: 2, laid: 2, read: 2, flags: 0, ..head };
        let mut bytes = bytes_of(&one);
        bytes.extend_from_slice(&[0; 26]);
        let Ok(Event::Batch(b)) = decode(&bytes) else { panic!("not a batch") };
        assert_eq!(
            b.runs,
            [crate::event::SeqRun { seq: 0, pos: None, tokens: 2, outputs: 1, last_output: true, shared: 0 }]
        );
    }
}
