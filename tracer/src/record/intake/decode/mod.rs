//! Ring-buffer bytes to typed events.
//!
//! The one place where records from `tracer-common` are given meaning. A call's argument slots are decoded by its layout in the API table
//! ([`tracer_common::api::Layout`]): one arm per layout, never one per function.

use tracer_common::{
    ARG_SLOTS, ApiFunc, BATCH_EMBD, BATCH_ENCODE, BATCH_FAULT, BATCH_HEAD, BATCH_LOGITS, BATCH_NO_TALLY, BATCH_POS,
    BATCH_SEQ, BATCH_STACK_FAULT, BATCH_TOKENS_MAX, BatchRecord, CALL_CONFIG_FAULT, CALL_ENTRY_ONLY, CALL_IN_RUNS,
    CALL_OUT_VALID, CONFIG_SLOTS, CallRecord, DispatchRecord, INPUT_FAULT, INPUT_HEAD, INPUT_VALUES_MAX,
    IOCTL_ARG_READ, InputRecord, IoctlRecord, JobRecord, NAME_CODE, NAME_FAULT, NAME_TRUNCATED, NameRecord, OpenRecord,
    PARAMS_MAX, ParamsRecord, ProcEvent, ProcRecord, QueueRecord, RecordHeader, RecordKind, RepeatRecord,
    StepCutRecord,
    api::{CopyDirection, Layout},
    batch_arrays, code_chunk,
};

pub(crate) use crate::trace::event::Origin;
use crate::trace::event::{
    Call, Config, Dispatch, GraphInput, GridUnit, InputKind, Ioctl, Job, JobStage, Launch, MemcpyKind, Queue, Repeat,
    StepBatch,
};
use crate::trace::{Line, StepCalls};

/// A decoded ring-buffer record.
///
/// Launches, calls, ioctls and dispatches are the types the trace file stores, completed by attribution; the
/// kinds it passes on as they are come as their trace records ([`Event::Plain`]); names and process events
/// become kernel and process records through attribution.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Event {
    Launch(Launch),
    /// Launches that each repeat the one a period before them on their thread (attribution expands them).
    Repeat(Repeat),
    /// Boxed, the largest kind: an event moved along the data path costs a launch's size.
    Call(Box<Call>),
    Name(Name),
    Proc(Proc),
    Ioctl(Ioctl),
    Dispatch(Dispatch),
    Params(Params),
    Open(Opened),
    Code(CodeTail),
    /// A record as the trace file stores it, which attribution passes on as it is once its process is
    /// seen (a `<<<>>>` configuration, a queue created, a step's batch, a GPU job): one arm there for
    /// every such kind.
    Plain {
        pid: u32,
        ts: u64,
        record: Line,
    },
}

impl Event {
    /// A call, boxed.
    pub(crate) fn call(c: Call) -> Self {
        Self::Call(Box::new(c))
    }

    /// A record attribution passes on as it is, by the process and time of `o`.
    pub(crate) const fn plain(o: Origin, record: Line) -> Self {
        Self::Plain { pid: o.pid, ts: o.ts, record }
    }
}

/// A chunk of the end of the code a handle was made from (a Vulkan shader module's SPIR-V).
///
/// Read at the call's return: attribution joins a module's chunks (farthest first, chunk 0 last) and
/// names it by them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CodeTail {
    pub(crate) origin: Origin,
    pub(crate) api: ApiFunc,
    pub(crate) handle: u64,
    /// The code's size in bytes.
    pub(crate) size: u64,
    /// Which chunk, counted from the end (0: the last bytes).
    pub(crate) chunk: u32,
    /// Its bytes (empty when they could not be read, or the code is shorter than a record holds).
    pub(crate) bytes: Vec<u8>,
}

/// A traced process opening a GPU runtime library by this path (as it gave it: absolute, or relative to
/// its working directory).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Opened {
    pub(crate) origin: Origin,
    pub(crate) path: String,
    pub(crate) truncated: bool,
}

/// A name bound to a handle: a registration, a function or symbol lookup.
#[derive(Clone, Debug, PartialEq, Eq)]
#[expect(clippy::struct_field_names, reason = "a name record's text is the name")]
pub(crate) struct Name {
    pub(crate) origin: Origin,
    pub(crate) api: ApiFunc,
    pub(crate) handle: u64,
    pub(crate) module: u64,
    pub(crate) name: String,
    pub(crate) truncated: bool,
    pub(crate) fault: bool,
}

/// A launch's kernel parameters, read at its entry, or a dispatch's argument words, read at its doorbell.
///
/// Attribution joins them to the launch or dispatch that follows on the same thread with the same time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Params {
    pub(crate) origin: Origin,
    pub(crate) handle: u64,
    /// Bit i: parameter (or word) i was asked for.
    pub(crate) wanted: u32,
    /// (index, the 8 bytes at the parameter's address, or the argument word) for each one read.
    pub(crate) values: Vec<(u8, u64)>,
}

/// A process event: fork, exec, exit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Proc {
    pub(crate) origin: Origin,
    pub(crate) event: ProcEvent,
    pub(crate) pid: u32,
    pub(crate) parent: u32,
    pub(crate) comm: String,
}

/// Why a buffer could not be decoded. Counted by the caller, never silently dropped.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum DecodeError {
    Short { len: usize },
    UnknownKind(u16),
    UnknownFunc(u16),
    UnknownProcEvent(u16),
    UnknownJobStage(u16),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Short { len } => write!(f, "record of {len} bytes is shorter than its kind"),
            Self::UnknownKind(k) => write!(f, "unknown record kind {k}"),
            Self::UnknownFunc(k) => write!(f, "unknown API function {k}"),
            Self::UnknownProcEvent(k) => write!(f, "unknown process event {k}"),
            Self::UnknownJobStage(k) => write!(f, "unknown GPU job stage {k}"),
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

fn decode_job(r: &JobRecord) -> Result<Event, DecodeError> {
    let Some(stage) = JobStage::from_u16(r.header.func) else {
        return Err(DecodeError::UnknownJobStage(r.header.func));
    };
    let ring = c_string(&r.ring);
    let o = origin(&r.header);
    Ok(Event::plain(
        o,
        Line::Job(Job {
            ts: o.ts,
            pid: o.pid,
            tid: o.tid,
            stage,
            context: r.context,
            seqno: r.seqno,
            client: (stage == JobStage::Queue && r.client != 0).then_some(r.client),
            ring: (!ring.is_empty()).then_some(ring),
        }),
    ))
}

/// The magic of a HIP fat-binary wrapper (`__hipFatMAGIC2`, "HIPF").
const HIP_FAT_BINARY_MAGIC: u32 = 0x4849_5046;

/// A dim3 passed by value takes two registers: `x | y << 32`, then `z` in the low half.
pub(crate) const fn dim3(xy: u64, z: u64) -> [u32; 3] {
    [xy as u32, (xy >> 32) as u32, z as u32]
}

pub(crate) fn decode(bytes: &[u8]) -> Result<Event, DecodeError> {
    let header: RecordHeader = read(bytes)?;
    match RecordKind::from_u16(header.kind) {
        Some(RecordKind::Call) => decode_call(&read::<CallRecord>(bytes)?),
        Some(RecordKind::Name) => decode_name(&read::<NameRecord>(bytes)?),
        Some(RecordKind::Proc) => decode_proc(&read::<ProcRecord>(bytes)?),
        Some(RecordKind::Queue) => {
            let r = read::<QueueRecord>(bytes)?;
            let o = origin(&r.header);
            Ok(Event::plain(
                o,
                Line::Queue(Queue {
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
                }),
            ))
        }
        Some(RecordKind::Dispatch) => {
            let r = read::<DispatchRecord>(bytes)?;
            Ok(Event::Dispatch(Dispatch::from_packet(origin(&r.header), r.queue, r.index, &r.packet)))
        }
        Some(RecordKind::Ioctl) => {
            let r = read::<IoctlRecord>(bytes)?;
            let fields = if r.flags & IOCTL_ARG_READ != 0 {
                crate::os::ioctl::fields(r.cmd, &r.argbuf[..]).into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
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
                name: crate::os::ioctl::name(r.cmd),
                ret: r.ret,
                dur: r.duration_ns,
                fields,
            }))
        }
        Some(RecordKind::Job) => decode_job(&read::<JobRecord>(bytes)?),
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
        Some(RecordKind::Input) => decode_input(bytes),
        Some(RecordKind::Repeat) => Ok(decode_repeat(&read::<RepeatRecord>(bytes)?)),
        Some(RecordKind::StepCut) => {
            let r = read::<StepCutRecord>(bytes)?;
            let o = origin(&r.header);
            let calls = StepCalls::by_library(&r.calls);
            Ok(Event::plain(o, Line::StepCalls(StepCalls { pid: o.pid, step: 0, calls, at_pass: Some(o.ts) })))
        }
        None => Err(DecodeError::UnknownKind(header.kind)),
    }
}

/// A run of repeated launches: the time in its header is its first launch's.
const fn decode_repeat(r: &RepeatRecord) -> Event {
    let o = origin(&r.header);
    Event::Repeat(Repeat {
        ts: o.ts,
        pid: o.pid,
        tid: o.tid,
        last_ts: r.last_ns,
        count: r.count,
        period: r.period,
        dur: r.dur_ns,
    })
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
    Ok(Event::plain(
        o,
        Line::Batch(StepBatch {
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
            previous_calls: StepCalls::by_library(&r.step_calls),
            calls_uncounted: uncounted,
        }),
    ))
}

/// An input record: its head, then as many values as it says it read (bounded by what a record holds, and
/// by the bytes there).
fn decode_input(bytes: &[u8]) -> Result<Event, DecodeError> {
    let r = read::<InputRecord>(bytes)?;
    let n = (r.read as usize).min(INPUT_VALUES_MAX);
    let data = bytes.get(INPUT_HEAD..INPUT_HEAD + 4 * n).ok_or(DecodeError::Short { len: bytes.len() })?;
    let values = data.chunks_exact(4).map(|b| b.try_into().map_or(0, i32::from_ne_bytes));
    let o = origin(&r.header);
    let count = r.size / 4;
    Ok(Event::plain(
        o,
        Line::GraphInput(GraphInput {
            ts: o.ts,
            pid: o.pid,
            tid: o.tid,
            lib: o.lib,
            input: InputKind::from_raw(r.which),
            count,
            runs: GraphInput::runs_of(values),
            unread: count.saturating_sub(n as u64),
            fault: r.which & INPUT_FAULT != 0,
            offset: r.offset,
        }),
    ))
}

fn decode_call(r: &CallRecord) -> Result<Event, DecodeError> {
    let api = ApiFunc::from_u16(r.header.func).ok_or(DecodeError::UnknownFunc(r.header.func))?;
    let o = origin(&r.header);
    let a = &r.args;
    let ret32 = r.ret as u32 as i32;
    let out = (r.flags & CALL_OUT_VALID != 0).then_some(r.out);
    let entry_only = r.flags & CALL_ENTRY_ONLY != 0;
    let call = Call { entry_only, caller: r.caller, ..Call::new(o, api, i64::from(ret32), r.duration_ns) };
    Ok(match api.layout() {
        Layout::LaunchDim3 { .. }
        | Layout::LaunchScalars { .. }
        | Layout::LaunchConfig
        | Layout::PushConfig
        | Layout::VkDispatch { .. } => launch_event(r, api),
        Layout::Nothing => Event::call(call),
        Layout::Stream => Event::call(Call { stream: Some(a[0]), ..call }),
        Layout::StreamHandleOut => Event::call(Call { stream: Some(a[0]), handle: out, ..call }),
        Layout::InstantiateOut => Event::call(Call { handle: Some(a[1]), value: out, ..call }),
        Layout::ExecGraph => Event::call(Call { handle: Some(a[1]), value: Some(a[0]), ..call }),
        Layout::HandleStream => Event::call(Call { handle: Some(a[0]), stream: Some(a[1]), ..call }),
        Layout::AllocOut { .. } => Event::call(Call { size: Some(a[1]), ptr: out, ..call }),
        Layout::Ptr => Event::call(Call { ptr: Some(a[0]), ..call }),
        Layout::Memcpy { direction, stream } => Event::call(memcpy(a, direction, stream, call)),
        // The return value is the module handle, not an error code; a HIP wrapper (its magic checked)
        // gives the address of its offload bundle.
        Layout::FatBinary => {
            let wrapper_read = r.flags & CALL_CONFIG_FAULT == 0 && a[6] as u32 == HIP_FAT_BINARY_MAGIC;
            Event::call(Call {
                ret: 0,
                ptr: Some(a[0]),
                module: Some(r.ret),
                value: wrapper_read.then_some(a[7]),
                ..call
            })
        }
        Layout::ModuleOut => Event::call(Call { ptr: Some(a[1]), module: out, ..call }),
        Layout::FunctionOut => Event::call(Call { module: Some(a[1]), function: out, ..call }),
        Layout::KernelFunctionOut => Event::call(Call { handle: Some(a[1]), function: out, ..call }),
        Layout::SymbolByName => Event::call(Call { module: Some(a[0]), handle: out, ..call }),
        Layout::SymbolInfo => {
            Event::call(Call { handle: Some(a[0]), attribute: Some(a[1] as u32), value: out, ..call })
        }
        Layout::CodeObjectFromMemory => Event::call(Call { ptr: Some(a[0]), size: Some(a[1]), handle: out, ..call }),
        // The path came before, in a name record with this call's header (read at entry).
        Layout::ModulePath => Event::call(Call { module: out, ..call }),
        // The descriptor (an `int`): attribution reads which file it is.
        Layout::CodeObjectFromFile => Event::call(Call { value: Some(u64::from(a[0] as u32)), handle: out, ..call }),
        Layout::QueueCreate => Event::call(Call { size: Some(u64::from(a[1] as u32)), ..call }),
        // The code's size and address were read from the create info at entry (slots 6 and 7).
        Layout::ShaderModuleOut => {
            let read = r.flags & CALL_CONFIG_FAULT == 0;
            Event::call(Call { size: read.then_some(a[6]), ptr: read.then_some(a[7]), module: out, ..call })
        }
        // The first create info's shader module (slot 6); the count of pipelines asked for.
        Layout::PipelinesOut => {
            let module = (r.flags & CALL_CONFIG_FAULT == 0).then_some(a[6]);
            Event::call(Call { module, size: Some(u64::from(a[2] as u32)), function: out, ..call })
        }
        // The command buffer is the call's stream, the bind point its attribute.
        Layout::BindPipeline => {
            Event::call(Call { stream: Some(a[0]), attribute: Some(a[1] as u32), function: Some(a[2]), ..call })
        }
        Layout::QueueSubmit => Event::call(Call { handle: Some(a[0]), size: Some(u64::from(a[1] as u32)), ..call }),
        // The name came before, in a name record with this call's header; the return value is an address.
        Layout::ProcAddr => Event::call(Call { ret: 0, ptr: Some(r.ret), ..call }),
        // Registration, doorbells, batches, pipeline names and inputs have their own programs and records, never a call record.
        Layout::Register
        | Layout::Doorbell
        | Layout::LlamaBatch
        | Layout::LlamaBatchExt
        | Layout::PipelineName
        | Layout::TensorSet => {
            return Err(DecodeError::UnknownFunc(r.header.func));
        }
    })
}

/// A copy: destination, source, size, direction (an argument, or the function's own) and stream.
fn memcpy(a: &[u64; ARG_SLOTS], direction: CopyDirection, stream: Option<u8>, call: Call) -> Call {
    let kind = match direction {
        CopyDirection::Arg(i) => a[i as usize] as u32,
        CopyDirection::Fixed(k) => k,
    };
    Call {
        dst: Some(a[0]),
        src: Some(a[1]),
        size: Some(a[2]),
        kind: Some(MemcpyKind::from_raw(kind)),
        stream: stream.map(|i| a[i as usize]),
        ..call
    }
}

/// A call whose layout makes a launch (or, for `__hipPushCallConfiguration`, a configuration): its grid,
/// block, shared memory and stream from the argument slots.
fn launch_event(r: &CallRecord, api: ApiFunc) -> Event {
    let o = origin(&r.header);
    let a = &r.args;
    let ret32 = r.ret as u32 as i32;
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
            in_runs: r.flags & CALL_IN_RUNS != 0,
        })
    };
    let u32s = |x: &[u64]| -> [u32; 3] { std::array::from_fn(|i| x[i] as u32) };
    let shmem = |v: u64, shmem32: bool| if shmem32 { u64::from(v as u32) } else { v };
    match api.layout() {
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
        Layout::PushConfig => Event::plain(
            o,
            Line::Config(Config {
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
        ),
        // A dispatch recorded on a command buffer (its stream): the pipeline bound there is attribution's to
        // say; the workgroup size is the shader's, not an argument (zero).
        Layout::VkDispatch { grid } => {
            let grid = grid.map_or([0; 3], |at| u32s(&a[at as usize..at as usize + 3]));
            launch(0, grid, [0; 3], GridUnit::Blocks, 0, a[0])
        }
        // Not a launch layout (decode_call sends only those here): a call.
        _ => Event::call(Call { entry_only, caller: r.caller, ..Call::new(o, api, i64::from(ret32), r.duration_ns) }),
    }
}

fn decode_name(r: &NameRecord) -> Result<Event, DecodeError> {
    let api = ApiFunc::from_u16(r.header.func).ok_or(DecodeError::UnknownFunc(r.header.func))?;
    let len = (r.len as usize).min(r.name.len());
    if r.flags & NAME_CODE != 0 {
        let bytes = if r.flags & NAME_FAULT == 0 { r.name[..len].to_vec() } else { Vec::new() };
        let chunk = code_chunk(r.flags);
        return Ok(Event::Code(CodeTail {
            origin: origin(&r.header),
            api,
            handle: r.handle,
            size: r.module,
            chunk,
            bytes,
        }));
    }
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

pub(crate) fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

#[cfg(test)]
#[expect(clippy::little_endian_bytes, reason = "AQL packets are little-endian by definition")]
mod tests;
