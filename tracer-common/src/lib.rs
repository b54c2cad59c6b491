//! Every record that crosses the ring buffer, defined once and shared by both sides.
//!
//! Rules kept here: `#[repr(C)]`, no implicit padding (every struct is a multiple of 8 bytes with fields
//! laid out largest-first or explicitly padded), stable numeric kinds that never change meaning once a
//! trace holds them. The eBPF side fills these records; user space decodes them in one place
//! (`tracer::decode`).
#![no_std]

pub mod api;
mod batch;
mod calls;
pub mod cookie;
mod counters;
mod header;
mod inputs;
pub mod ioctl;
mod job;
mod process;
mod queue;
mod runs;
mod wire;

pub use api::ApiFunc;
// Each topic's records and constants, re-exported whole: a record added to its topic's file is public
// without a list to keep.
pub use batch::*;
pub use calls::*;
pub use counters::*;
pub use header::*;
pub use inputs::*;
pub use ioctl::{IOCTL_ARG_BYTES, IOCTL_ARG_READ, IoctlRecord};
pub use job::*;
pub use process::*;
pub use queue::*;
pub use runs::*;

#[cfg(feature = "user")]
mod user {
    // SAFETY: plain old data, `#[repr(C)]`, no padding (bytemuck's Pod derive checks), every bit pattern
    // valid.
    unsafe impl aya::Pod for super::RecordHeader {}
    // SAFETY: as above: two u64 fields.
    unsafe impl aya::Pod for super::PlanKey {}
    // SAFETY: as above: u64 fields and arrays of them.
    unsafe impl aya::Pod for super::ThreadTally {}
    // SAFETY: as above: two u32 fields.
    unsafe impl aya::Pod for super::EntryKey {}
    // SAFETY: as above: u64 fields.
    unsafe impl aya::Pod for super::StepTally {}
    // SAFETY: as above: u64 fields.
    unsafe impl aya::Pod for super::JobKey {}
    // SAFETY: as above: u32 fields.
    unsafe impl aya::Pod for super::JobFields {}
    // SAFETY: as above: u64 fields and arrays of them.
    unsafe impl aya::Pod for super::ThreadRuns {}
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn layouts_have_no_padding() {
        assert_eq!(size_of::<RecordHeader>(), 24);
        assert_eq!(size_of::<CallRecord>(), 24 + 8 * 5 + 8 * ARG_SLOTS);
        assert_eq!(size_of::<NameRecord>(), 24 + 8 + 8 + 4 + 4 + NAME_MAX);
        assert_eq!(size_of::<ProcRecord>(), 24 + 4 + 4 + 16);
        assert_eq!(size_of::<IoctlRecord>(), 24 + 4 + 4 + 8 * 4 + IOCTL_ARG_BYTES);
        assert_eq!(size_of::<QueueRecord>(), 24 + 8 + 40);
        assert_eq!(size_of::<DispatchRecord>(), 24 + 16 + AQL_PACKET_BYTES);
        assert_eq!(size_of::<ParamsRecord>(), 24 + 16 + 8 * PARAMS_MAX);
        assert_eq!(size_of::<OpenRecord>(), 24 + 8 + OPEN_PATH_MAX);
        assert_eq!(size_of::<JobRecord>(), 24 + 8 * 3 + JOB_RING_BYTES);
        assert_eq!(size_of::<JobFormat>(), 3 * 16);
        assert_eq!(size_of::<StepCutRecord>(), 24 + 8 * STEP_SLOTS);
        assert_eq!(size_of::<RepeatRecord>(), 24 + 8 * 3);
        assert_eq!(size_of::<ThreadRuns>() % 8, 0);
        const { assert!(RUN_HISTORY.is_power_of_two() && RUN_SHAPES.is_power_of_two() && RUN_FOLD_SLOTS.is_power_of_two()) }
        const { assert!(RUN_SHAPES < RUN_NO_SHAPE as usize) }
        assert_eq!(INPUT_HEAD, 24 + 8 * 3 + 8);
        const { assert!(INPUT_HEAD + 4 * INPUT_VALUES_MAX <= 32 << 10, "a per-CPU map value holds at most 32 KiB") }
        assert_eq!(BATCH_HEAD, 24 + 16 + 8 * STEP_SLOTS + 24);
        assert_eq!(batch_arrays(10), ([0, 40, 80, 120], 130));
        const {
            assert!(
                BATCH_HEAD + BATCH_TOKEN_BYTES * BATCH_TOKENS_MAX + 8 * BATCH_CHUNK <= 32 << 10,
                "a per-CPU map value holds at most 32 KiB"
            );
        }
        assert_eq!(size_of::<NameRecord>() % 8, 0);
        assert!(align_of::<CallRecord>() <= 8);
    }

    #[test]
    fn gpu_ioctls_by_type_and_number() {
        assert!(ioctl::is_gpu(0x80084b01)); // AMDKFD_IOC_GET_VERSION
        assert!(ioctl::is_gpu(0xc0206440)); // DRM_IOCTL_AMDGPU_GEM_CREATE
        assert!(!ioctl::is_gpu(0xc0106400)); // DRM_IOCTL_VERSION (core DRM, nr < 0x40)
        assert!(!ioctl::is_gpu(0x5401)); // TCGETS
    }

    #[test]
    fn every_counter_once_in_the_footer() {
        for (i, c) in Counter::ALL.iter().enumerate() {
            assert_eq!(*c as usize, i);
            assert!(!Counter::ALL[i + 1..].iter().any(|o| o.name() == c.name()), "{c:?}");
        }
    }

    #[test]
    fn cookie_round_trip() {
        let c = cookie::make(7, ApiFunc::HipLaunchKernel as u16, cookie::STACK);
        assert_eq!(cookie::lib(c), 7);
        assert_eq!(cookie::func(c), ApiFunc::HipLaunchKernel as u16);
        assert_ne!(c & cookie::STACK, 0);
        assert_eq!(c & cookie::OUT, 0);
        let c = cookie::make(1, 6, cookie::out(3) | cookie::name(1, 0));
        assert_eq!((cookie::out_arg(c), cookie::name_arg(c), cookie::module_arg(c)), (3, 1, 0));
        assert_ne!(c & cookie::NAME, 0);
        assert_eq!(cookie::func(c), 6);
        assert_eq!(c & cookie::QUEUE, 0);
        // Flags never reach the function or library fields.
        let all = cookie::make(
            0xffff,
            u16::MAX,
            cookie::STACK | cookie::out(7) | cookie::name(7, 7) | cookie::QUEUE | cookie::params(15, 15),
        );
        assert_eq!((cookie::func(all), cookie::lib(all)), (u16::MAX, 0xffff));
        let c = cookie::make(1, 12, cookie::mark_if(3) | cookie::GATED | cookie::TALLY | cookie::MARK);
        assert_eq!((cookie::mark_arg(c), cookie::lib(c), cookie::func(c)), (3, 1, 12));
        assert_ne!(c & cookie::MARK_IF, 0);
        let c = cookie::make(3, 128, cookie::STACK | cookie::params(9, 0));
        assert_eq!((cookie::params_arg(c), cookie::handle_arg(c), cookie::lib(c)), (9, 0, 3));
        assert_ne!(c & cookie::PARAMS, 0);
    }

    #[test]
    fn kinds_round_trip() {
        for &k in RecordKind::ALL {
            assert_eq!(RecordKind::from_u16(k as u16), Some(k));
            assert!((k as usize) < RecordKind::LIMIT);
            assert!((k as u32) < DROP_SLOTS);
        }
        assert_eq!(RecordKind::LIMIT, 14);
        assert_eq!(RecordKind::from_u16(0), None);
        assert_eq!(CallRecord::KIND, RecordKind::Call);
        assert_eq!(JobRecord::KIND, RecordKind::Job);
        for &s in JobStage::ALL {
            assert_eq!(JobStage::from_u16(s as u16), Some(s));
        }
        assert_eq!(ProcEvent::from_u16(4), Some(ProcEvent::Init));
        for f in ApiFunc::ALL {
            assert_eq!(ApiFunc::from_u16(*f as u16), Some(*f));
        }
    }
}
