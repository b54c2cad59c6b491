//! Ring-buffer bytes to typed events: the one place where records from `tracer-common` are given
//! meaning. Every probed function's argument slots are decoded here, from its signature.

use tracer_common::{
    ARG_SLOTS, ApiFunc, CALL_CONFIG_FAULT, CALL_ENTRY_ONLY, CALL_OUT_VALID, CONFIG_SLOTS, CallRecord, DispatchRecord,
    IOCTL_ARG_BYTES, IOCTL_ARG_READ, IoctlRecord, NAME_FAULT, NAME_TRUNCATED, NameRecord, ProcEvent, ProcRecord,
    QueueRecord, RecordHeader, RecordKind,
};

/// A decoded ring-buffer record.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    Launch(Launch),
    Config(Config),
    Call(Call),
    Name(Name),
    Proc(Proc),
    Ioctl(Ioctl),
    Queue(Queue),
    Dispatch(Dispatch),
}

/// An HSA queue (`hsa_queue_t`).
#[derive(Clone, Debug, PartialEq)]
pub struct Queue {
    pub origin: Origin,
    pub queue: u64,
    /// 0 multiple producers, 1 single, 2 cooperative.
    pub queue_type: u32,
    pub features: u32,
    pub base_address: u64,
    pub doorbell_signal: u64,
    /// Ring size in packets.
    pub size: u32,
    pub id: u64,
}

/// AQL packet types (`hsa_packet_type_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketType {
    VendorSpecific,
    Invalid,
    KernelDispatch,
    BarrierAnd,
    AgentDispatch,
    BarrierOr,
    Unknown(u8),
}

impl PacketType {
    pub fn from_raw(v: u8) -> Self {
        match v {
            0 => Self::VendorSpecific,
            1 => Self::Invalid,
            2 => Self::KernelDispatch,
            3 => Self::BarrierAnd,
            4 => Self::AgentDispatch,
            5 => Self::BarrierOr,
            v => Self::Unknown(v),
        }
    }

    pub fn name(self) -> std::borrow::Cow<'static, str> {
        match self {
            Self::VendorSpecific => "vendor-specific".into(),
            Self::Invalid => "invalid".into(),
            Self::KernelDispatch => "kernel-dispatch".into(),
            Self::BarrierAnd => "barrier-and".into(),
            Self::AgentDispatch => "agent-dispatch".into(),
            Self::BarrierOr => "barrier-or".into(),
            Self::Unknown(v) => format!("unknown({v})").into(),
        }
    }
}

/// One AQL packet read from a queue's ring at its doorbell (`hsa_kernel_dispatch_packet_t`).
#[derive(Clone, Debug, PartialEq)]
pub struct Dispatch {
    pub origin: Origin,
    pub queue: u64,
    pub index: u64,
    pub packet_type: PacketType,
    /// The header's barrier bit.
    pub barrier: bool,
    /// Kernel dispatches: dimensions used (setup bits 0-1).
    pub dimensions: u16,
    pub workgroup: [u16; 3],
    /// In work-items.
    pub grid: [u32; 3],
    pub private_segment: u32,
    pub group_segment: u32,
    pub kernel_object: u64,
    pub kernarg: u64,
    pub completion_signal: u64,
}

impl Dispatch {
    pub fn from_packet(origin: Origin, queue: u64, index: u64, p: &[u8; 64]) -> Dispatch {
        let u16_at = |o: usize| u16::from_le_bytes([p[o], p[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes([p[o], p[o + 1], p[o + 2], p[o + 3]]);
        let u64_at = |o: usize| u64::from_le_bytes(p[o..o + 8].try_into().expect("8 bytes"));
        let header = u16_at(0);
        let packet_type = PacketType::from_raw(header as u8);
        let kernel = packet_type == PacketType::KernelDispatch;
        Dispatch {
            origin,
            queue,
            index,
            packet_type,
            barrier: header >> 8 & 1 != 0,
            dimensions: if kernel { u16_at(2) & 3 } else { 0 },
            workgroup: if kernel { [u16_at(4), u16_at(6), u16_at(8)] } else { [0; 3] },
            grid: if kernel { [u32_at(12), u32_at(16), u32_at(20)] } else { [0; 3] },
            private_segment: if kernel { u32_at(24) } else { 0 },
            group_segment: if kernel { u32_at(28) } else { 0 },
            kernel_object: if kernel { u64_at(32) } else { 0 },
            kernarg: if kernel { u64_at(40) } else { 0 },
            completion_signal: u64_at(56),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Ioctl {
    pub origin: Origin,
    pub fd: u32,
    pub cmd: u32,
    pub arg: u64,
    pub ret: i64,
    pub dur: u64,
    /// The argument struct as the driver left it, when it could be read.
    pub argbuf: Option<[u8; IOCTL_ARG_BYTES]>,
}

/// Who and where, common to every event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Origin {
    pub pid: u32,
    pub tid: u32,
    pub lib: u32,
    pub ts: u64,
}

impl From<&RecordHeader> for Origin {
    fn from(h: &RecordHeader) -> Self {
        Origin { pid: h.pid(), tid: h.tid(), lib: h.lib, ts: h.ts_ns }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GridUnit {
    Blocks,
    WorkItems,
}

impl GridUnit {
    pub fn as_str(self) -> &'static str {
        match self {
            GridUnit::Blocks => "blocks",
            GridUnit::WorkItems => "work-items",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Launch {
    pub origin: Origin,
    pub api: ApiFunc,
    /// The host function (hipLaunchKernel & co.) or hipFunction_t (module launches).
    pub handle: u64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub grid_unit: GridUnit,
    pub shmem: u64,
    pub stream: u64,
    pub ret: i32,
    pub dur: u64,
    /// Recorded at entry by a one-trap probe: `ret` and `dur` are not known.
    pub entry_only: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub origin: Origin,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shmem: u64,
    pub stream: u64,
    pub ret: i32,
    pub dur: u64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Call {
    pub origin: Origin,
    pub api: Option<ApiFunc>,
    pub ret: i64,
    pub dur: u64,
    pub size: Option<u64>,
    pub ptr: Option<u64>,
    pub dst: Option<u64>,
    pub src: Option<u64>,
    pub kind: Option<MemcpyKind>,
    pub stream: Option<u64>,
    pub module: Option<u64>,
    pub function: Option<u64>,
    /// A handle the call is about: an HSA symbol, a graph, a graph executable, a code-object reader.
    pub handle: Option<u64>,
    /// hsa_executable_symbol_get_info's attribute.
    pub attribute: Option<u32>,
    /// A value the call returned through an out-parameter (KERNEL_OBJECT for get_info).
    pub value: Option<u64>,
    /// Recorded at entry by a one-trap probe: `ret` and `dur` are not known.
    pub entry_only: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Name {
    pub origin: Origin,
    pub api: ApiFunc,
    pub handle: u64,
    pub module: u64,
    pub name: String,
    pub truncated: bool,
    pub fault: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Proc {
    pub origin: Origin,
    pub event: ProcEvent,
    pub pid: u32,
    pub parent: u32,
    pub comm: String,
}

/// hipMemcpyKind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemcpyKind {
    HostToHost,
    HostToDevice,
    DeviceToHost,
    DeviceToDevice,
    Default,
    DeviceToDeviceNoCU,
    Unknown(u32),
}

impl MemcpyKind {
    pub fn from_raw(v: u32) -> Self {
        match v {
            0 => Self::HostToHost,
            1 => Self::HostToDevice,
            2 => Self::DeviceToHost,
            3 => Self::DeviceToDevice,
            4 => Self::Default,
            1024 => Self::DeviceToDeviceNoCU,
            v => Self::Unknown(v),
        }
    }

    pub fn name(self) -> std::borrow::Cow<'static, str> {
        match self {
            Self::HostToHost => "HostToHost".into(),
            Self::HostToDevice => "HostToDevice".into(),
            Self::DeviceToHost => "DeviceToHost".into(),
            Self::DeviceToDevice => "DeviceToDevice".into(),
            Self::Default => "Default".into(),
            Self::DeviceToDeviceNoCU => "DeviceToDeviceNoCU".into(),
            Self::Unknown(v) => format!("unknown({v})").into(),
        }
    }
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
            DecodeError::Short { len } => write!(f, "record of {len} bytes is shorter than its kind"),
            DecodeError::UnknownKind(k) => write!(f, "unknown record kind {k}"),
            DecodeError::UnknownFunc(k) => write!(f, "unknown API function {k}"),
            DecodeError::UnknownProcEvent(k) => write!(f, "unknown process event {k}"),
        }
    }
}

fn read<T: Copy>(bytes: &[u8]) -> Result<T, DecodeError> {
    if bytes.len() < size_of::<T>() {
        return Err(DecodeError::Short { len: bytes.len() });
    }
    // SAFETY: length checked; T is a #[repr(C)] plain-old-data record; read_unaligned needs no alignment.
    Ok(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

/// A dim3 passed by value takes two registers: `x | y << 32`, then `z` in the low half.
pub fn dim3(xy: u64, z: u64) -> [u32; 3] {
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
            Ok(Event::Queue(Queue {
                origin: Origin::from(&r.header),
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
            Ok(Event::Dispatch(Dispatch::from_packet(Origin::from(&r.header), r.queue, r.index, &r.packet)))
        }
        Some(RecordKind::Ioctl) => {
            let r = read::<IoctlRecord>(bytes)?;
            Ok(Event::Ioctl(Ioctl {
                origin: Origin::from(&r.header),
                fd: r.fd,
                cmd: r.cmd,
                arg: r.arg,
                ret: r.ret,
                dur: r.duration_ns,
                argbuf: (r.flags & IOCTL_ARG_READ != 0).then_some(r.argbuf),
            }))
        }
        None => Err(DecodeError::UnknownKind(header.kind)),
    }
}

fn decode_call(r: &CallRecord) -> Result<Event, DecodeError> {
    let api = ApiFunc::from_u16(r.header.func).ok_or(DecodeError::UnknownFunc(r.header.func))?;
    let origin = Origin::from(&r.header);
    let a = &r.args;
    let ret32 = r.ret as u32 as i32;
    let out = (r.flags & CALL_OUT_VALID != 0).then_some(r.out);
    let entry_only = r.flags & CALL_ENTRY_ONLY != 0;
    let launch = |handle, grid, block, unit, shmem, stream| {
        Event::Launch(Launch {
            origin,
            api,
            handle,
            grid,
            block,
            grid_unit: unit,
            shmem,
            stream,
            ret: ret32,
            dur: r.duration_ns,
            entry_only,
        })
    };
    let u32s = |x: &[u64]| [x[0] as u32, x[1] as u32, x[2] as u32];
    let call = Call { origin, api: Some(api), ret: ret32 as i64, dur: r.duration_ns, entry_only, ..Default::default() };
    // cuLaunchKernelEx's CUlaunchConfig, read into the last slots: u32 grid x, y, z, block x, y, z,
    // sharedMemBytes, (padding), then the stream.
    let config = &a[ARG_SLOTS - CONFIG_SLOTS..];
    let lo = |w: u64| w as u32;
    let hi = |w: u64| (w >> 32) as u32;
    Ok(match api {
        ApiFunc::HipLaunchKernel | ApiFunc::HipExtLaunchKernel => {
            launch(a[0], dim3(a[1], a[2]), dim3(a[3], a[4]), GridUnit::Blocks, a[6], a[7])
        }
        // sharedMemBytes is an unsigned int here.
        ApiFunc::HipLaunchCooperativeKernel => {
            launch(a[0], dim3(a[1], a[2]), dim3(a[3], a[4]), GridUnit::Blocks, a[6] as u32 as u64, a[7])
        }
        ApiFunc::HipModuleLaunchKernel => {
            launch(a[0], u32s(&a[1..4]), u32s(&a[4..7]), GridUnit::Blocks, a[7] as u32 as u64, a[8])
        }
        ApiFunc::HipExtModuleLaunchKernel | ApiFunc::HipExtModuleLaunchKernelCxx => {
            launch(a[0], u32s(&a[1..4]), u32s(&a[4..7]), GridUnit::WorkItems, a[7], a[8])
        }
        ApiFunc::HipPushCallConfiguration => Event::Config(Config {
            origin,
            grid: dim3(a[0], a[1]),
            block: dim3(a[2], a[3]),
            shmem: a[4],
            stream: a[5],
            ret: ret32,
            dur: r.duration_ns,
        }),
        // The return value is the module handle, not an error code.
        ApiFunc::HipRegisterFatBinary => Event::Call(Call { ret: 0, ptr: Some(a[0]), module: Some(r.ret), ..call }),
        ApiFunc::HipModuleLoadData => Event::Call(Call { ptr: Some(a[1]), module: out, ..call }),
        ApiFunc::HipModuleGetFunction => Event::Call(Call { module: Some(a[1]), function: out, ..call }),
        ApiFunc::HipMalloc => Event::Call(Call { size: Some(a[1]), ptr: out, ..call }),
        ApiFunc::HipFree => Event::Call(Call { ptr: Some(a[0]), ..call }),
        ApiFunc::HipMemcpy => Event::Call(Call {
            dst: Some(a[0]),
            src: Some(a[1]),
            size: Some(a[2]),
            kind: Some(MemcpyKind::from_raw(a[3] as u32)),
            ..call
        }),
        ApiFunc::HipMemcpyAsync => Event::Call(Call {
            dst: Some(a[0]),
            src: Some(a[1]),
            size: Some(a[2]),
            kind: Some(MemcpyKind::from_raw(a[3] as u32)),
            stream: Some(a[4]),
            ..call
        }),
        ApiFunc::HipStreamSynchronize => Event::Call(Call { stream: Some(a[0]), ..call }),
        ApiFunc::HipDeviceSynchronize => Event::Call(call),
        ApiFunc::HipStreamBeginCapture => Event::Call(Call { stream: Some(a[0]), ..call }),
        ApiFunc::HipStreamEndCapture => Event::Call(Call { stream: Some(a[0]), handle: out, ..call }),
        ApiFunc::HipGraphInstantiate => Event::Call(Call { handle: Some(a[1]), value: out, ..call }),
        ApiFunc::HipGraphLaunch => Event::Call(Call { handle: Some(a[0]), stream: Some(a[1]), ..call }),
        ApiFunc::HsaInit => Event::Call(call),
        ApiFunc::HsaQueueCreate => Event::Call(Call { size: Some(a[1] as u32 as u64), ..call }),
        ApiFunc::HsaExecutableGetSymbolByName => Event::Call(Call { module: Some(a[0]), handle: out, ..call }),
        ApiFunc::HsaExecutableSymbolGetInfo => {
            Event::Call(Call { handle: Some(a[0]), attribute: Some(a[1] as u32), value: out, ..call })
        }
        ApiFunc::HsaCodeObjectReaderCreateFromMemory => {
            Event::Call(Call { ptr: Some(a[0]), size: Some(a[1]), handle: out, ..call })
        }
        ApiFunc::HsaAmdMemoryPoolAllocate => Event::Call(Call { size: Some(a[1]), ptr: out, ..call }),
        ApiFunc::HsaAmdMemoryPoolFree => Event::Call(Call { ptr: Some(a[0]), ..call }),
        // CUDA's driver API: cuLaunchKernel's shape is hipModuleLaunchKernel's (grid and block as six u32
        // arguments, shared memory an unsigned int).
        ApiFunc::CuLaunchKernel
        | ApiFunc::CuLaunchKernelPtsz
        | ApiFunc::CuLaunchCooperativeKernel
        | ApiFunc::CuLaunchCooperativeKernelPtsz => {
            launch(a[0], u32s(&a[1..4]), u32s(&a[4..7]), GridUnit::Blocks, a[7] as u32 as u64, a[8])
        }
        ApiFunc::CuLaunchKernelEx | ApiFunc::CuLaunchKernelExPtsz => {
            if r.flags & CALL_CONFIG_FAULT != 0 {
                // The config could not be read: the launch is still a launch, of an unknown shape.
                launch(a[1], [0; 3], [0; 3], GridUnit::Blocks, 0, 0)
            } else {
                let grid = [lo(config[0]), hi(config[0]), lo(config[1])];
                let block = [hi(config[1]), lo(config[2]), hi(config[2])];
                launch(a[1], grid, block, GridUnit::Blocks, lo(config[3]) as u64, config[4])
            }
        }
        // The runtime API's launch (opt-in): hipLaunchKernel's shape.
        ApiFunc::CudaLaunchKernel => launch(a[0], dim3(a[1], a[2]), dim3(a[3], a[4]), GridUnit::Blocks, a[6], a[7]),
        ApiFunc::CuGraphLaunch | ApiFunc::CuGraphLaunchPtsz => {
            Event::Call(Call { handle: Some(a[0]), stream: Some(a[1]), ..call })
        }
        ApiFunc::CuModuleGetFunction | ApiFunc::CuLibraryGetKernel => {
            Event::Call(Call { module: Some(a[1]), function: out, ..call })
        }
        ApiFunc::CuKernelGetFunction => Event::Call(Call { handle: Some(a[1]), function: out, ..call }),
        ApiFunc::CuModuleLoadData | ApiFunc::CuModuleLoadDataEx | ApiFunc::CuLibraryLoadData => {
            Event::Call(Call { ptr: Some(a[1]), module: out, ..call })
        }
        ApiFunc::CuMemAlloc => Event::Call(Call { size: Some(a[1]), ptr: out, ..call }),
        ApiFunc::CuMemFree => Event::Call(Call { ptr: Some(a[0]), ..call }),
        ApiFunc::CuMemcpyDtoH => Event::Call(Call {
            dst: Some(a[0]),
            src: Some(a[1]),
            size: Some(a[2]),
            kind: Some(MemcpyKind::DeviceToHost),
            ..call
        }),
        ApiFunc::CuMemcpyHtoD => Event::Call(Call {
            dst: Some(a[0]),
            src: Some(a[1]),
            size: Some(a[2]),
            kind: Some(MemcpyKind::HostToDevice),
            ..call
        }),
        ApiFunc::CuMemcpyDtoHAsync => Event::Call(Call {
            dst: Some(a[0]),
            src: Some(a[1]),
            size: Some(a[2]),
            kind: Some(MemcpyKind::DeviceToHost),
            stream: Some(a[3]),
            ..call
        }),
        ApiFunc::CuMemcpyAsync => Event::Call(Call {
            dst: Some(a[0]),
            src: Some(a[1]),
            size: Some(a[2]),
            kind: Some(MemcpyKind::Default),
            stream: Some(a[3]),
            ..call
        }),
        ApiFunc::CuStreamSynchronize | ApiFunc::CuStreamSynchronizePtsz => {
            Event::Call(Call { stream: Some(a[0]), ..call })
        }
        ApiFunc::CuCtxSynchronize => Event::Call(call),
        ApiFunc::CuStreamBeginCapture | ApiFunc::CuStreamBeginCapturePtsz => {
            Event::Call(Call { stream: Some(a[0]), ..call })
        }
        ApiFunc::CuStreamEndCapture | ApiFunc::CuStreamEndCapturePtsz => {
            Event::Call(Call { stream: Some(a[0]), handle: out, ..call })
        }
        ApiFunc::CuGraphInstantiateWithFlags | ApiFunc::CuGraphInstantiateWithParams | ApiFunc::CuGraphInstantiate => {
            Event::Call(Call { handle: Some(a[1]), value: out, ..call })
        }
        // Registration and doorbells have their own programs and records, never a call record.
        ApiFunc::HipRegisterFunction
        | ApiFunc::CudaRegisterFunction
        | ApiFunc::HsaSignalStoreScrelease
        | ApiFunc::HsaSignalStoreRelaxed => {
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
        origin: Origin::from(&r.header),
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
    Ok(Event::Proc(Proc {
        origin: Origin::from(&r.header),
        event,
        pid: r.pid,
        parent: r.parent,
        comm: c_string(&r.comm),
    }))
}

/// The name of a hipError_t value (the subset a launch, copy or allocation returns), for reports.
pub fn hip_error_name(code: i64) -> Option<&'static str> {
    Some(match code {
        0 => "hipSuccess",
        1 => "hipErrorInvalidValue",
        2 => "hipErrorOutOfMemory",
        3 => "hipErrorNotInitialized",
        9 => "hipErrorInvalidConfiguration",
        13 => "hipErrorInvalidSymbol",
        17 => "hipErrorInvalidDevicePointer",
        21 => "hipErrorInvalidMemcpyDirection",
        35 => "hipErrorInsufficientDriver",
        52 => "hipErrorMissingConfiguration",
        98 => "hipErrorInvalidDeviceFunction",
        100 => "hipErrorNoDevice",
        101 => "hipErrorInvalidDevice",
        200 => "hipErrorInvalidImage",
        201 => "hipErrorInvalidContext",
        209 => "hipErrorNoBinaryForGpu",
        400 => "hipErrorInvalidHandle",
        500 => "hipErrorNotFound",
        600 => "hipErrorNotReady",
        700 => "hipErrorIllegalAddress",
        701 => "hipErrorLaunchOutOfResources",
        719 => "hipErrorLaunchFailure",
        _ => return None,
    })
}

pub fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use tracer_common::{ARG_SLOTS, CALL_OUT_VALID, NAME_MAX, RecordHeader};

    use super::*;

    fn bytes_of<T>(v: &T) -> Vec<u8> {
        // SAFETY: test helper over #[repr(C)] records without padding.
        unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()).to_vec() }
    }

    fn call(func: ApiFunc, args: [u64; ARG_SLOTS], ret: u64) -> CallRecord {
        CallRecord {
            header: RecordHeader {
                kind: RecordKind::Call as u16,
                func: func as u16,
                lib: 3,
                pid_tgid: (100u64 << 32) | 101,
                ts_ns: 5_000,
            },
            duration_ns: 700,
            ret,
            out: 0,
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
        assert_eq!(l.origin, Origin { pid: 100, tid: 101, lib: 3, ts: 5_000 });
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
        let config = [2 | 3 << 32, 4 | 128 << 32, 1 | 1 << 32, 4096 | 0xffff_ffff << 32, 0x88];
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
        let r = call(ApiFunc::CudaLaunchKernel, [0xabc, 2 | 3 << 32, 4, 32 | 1 << 32, 1, 0, 64, 0x77, 0, 0], 0);
        let Event::Launch(l) = decode(&bytes_of(&r)).unwrap() else { panic!() };
        assert_eq!((l.grid, l.block, l.shmem, l.stream), ([2, 3, 4], [32, 1, 1], 64, 0x77));
        // A graph replay is a call, the executable its handle.
        let r = call(ApiFunc::CuGraphLaunch, [0x7000, 0x77, 0, 0, 0, 0, 0, 0, 0, 0], 0);
        let Event::Call(c) = decode(&bytes_of(&r)).unwrap() else { panic!() };
        assert_eq!((c.handle, c.stream), (Some(0x7000), Some(0x77)));
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
        p[0..2].copy_from_slice(&(2u16 | 1 << 8 | 2 << 9 | 2 << 11).to_le_bytes()); // dispatch, barrier, system fences
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
        assert_eq!(d.packet_type, PacketType::KernelDispatch);
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
        assert_eq!((b.packet_type, b.kernel_object, b.grid), (PacketType::BarrierAnd, 0, [0; 3]));
        assert_eq!(b.completion_signal, 0x55aa_0000);
    }

    #[test]
    fn names_and_flags() {
        let mut name = [0u8; NAME_MAX];
        name[..12].copy_from_slice(b"_Z4axpyPfS_f");
        let r = NameRecord {
            header: RecordHeader {
                kind: RecordKind::Name as u16,
                func: ApiFunc::HipRegisterFunction as u16,
                lib: 1,
                pid_tgid: 7 << 32 | 7,
                ts_ns: 9,
            },
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
}
