use super::*;

#[test]
fn names_symbols_and_numbers_round_trip() {
    for &f in ApiFunc::ALL {
        assert_eq!(ApiFunc::from_u16(f as u16), Some(f));
        assert_eq!(ApiFunc::from_symbol(f.symbol()), Some(f));
        let back = ApiFunc::from_name(f.name()).unwrap();
        assert_eq!((back.op(), back.layout()), (f.op(), f.layout()), "{f:?}");
    }
    assert_eq!(ApiFunc::HipExtModuleLaunchKernelCxx.name(), "hipExtModuleLaunchKernel");
    assert_eq!(ApiFunc::from_name("hipExtModuleLaunchKernel"), Some(ApiFunc::HipExtModuleLaunchKernel));
    assert_eq!(ApiFunc::from_name("nope"), None);
}

#[test]
fn layouts_give_the_cookie_flags_the_programs_read() {
    assert_eq!(ApiFunc::HipLaunchKernel.cookie_flags(), cookie::STACK | cookie::params(5, 0));
    assert_eq!(ApiFunc::HipModuleGetFunction.cookie_flags(), cookie::out(0) | cookie::name(2, 1));
    assert_eq!(ApiFunc::HsaExecutableGetSymbolByName.cookie_flags(), cookie::out(3) | cookie::name(1, 0));
    assert_eq!(ApiFunc::HsaQueueCreate.cookie_flags(), cookie::STACK | cookie::QUEUE);
    assert_eq!(ApiFunc::HsaAmdMemoryPoolAllocate.cookie_flags(), cookie::out(3));
    assert_eq!(ApiFunc::CuLaunchKernelEx.cookie_flags(), cookie::CONFIG | cookie::params(2, 1));
    assert_eq!(ApiFunc::HipStreamEndCapture.cookie_flags(), cookie::out(1));
    assert_eq!(ApiFunc::CuGraphLaunch.cookie_flags(), 0);
    // A file loaded by path: the path is read at entry, the module at return.
    assert_eq!(ApiFunc::HipModuleLoad.cookie_flags(), cookie::out(0) | cookie::path(1) | cookie::WAKE);
    assert_eq!(ApiFunc::CuModuleLoad.cookie_flags(), cookie::out(0) | cookie::path(1) | cookie::WAKE);
    assert_eq!(cookie::name_arg(cookie::path(1)), 1);
    assert_eq!(ApiFunc::HsaCodeObjectReaderCreateFromFile.cookie_flags(), cookie::out(1) | cookie::WAKE);
    // The path bit is none of a launch's fields: launches never read a path, and paths read no parameters.
    for &f in ApiFunc::ALL {
        let c = f.cookie_flags();
        assert!(c & cookie::PATH == 0 || c & (cookie::PARAMS | cookie::TALLY | cookie::GATED) == 0, "{f:?}");
    }
    // What a token's loop writes and what it tallies.
    let gated = |f: ApiFunc| cookie::GATED | cookie::tally_slot(f.tally_slot().unwrap());
    assert_eq!(ApiFunc::CuStreamSynchronize.cookie_flags(), gated(ApiFunc::CuStreamSynchronize));
    assert_eq!(ApiFunc::HipStreamSynchronize.cookie_flags(), gated(ApiFunc::HipStreamSynchronize));
    assert_eq!(
        ApiFunc::CuMemcpyHtoDAsync.cookie_flags(),
        cookie::TALLY | cookie::tally_slot(ApiFunc::CuMemcpyHtoDAsync.tally_slot().unwrap())
    );
    // Slots are distinct, dense, and read back.
    for (expected, slot) in ApiFunc::ALL.iter().filter_map(|f| f.tally_slot()).enumerate() {
        assert_eq!(slot, expected);
    }
    for f in ApiFunc::ALL.iter().filter(|f| f.tally_slot().is_some()) {
        assert_eq!(ApiFunc::from_tally_slot(f.tally_slot().unwrap()), Some(*f));
        assert_eq!(cookie::tally_slot_of(f.cookie_flags()), f.tally_slot().unwrap());
    }
    assert_eq!(ApiFunc::CuMemcpyDtoHAsync.cookie_flags(), cookie::MARK);
    assert_eq!(ApiFunc::CuMemcpyHtoD.cookie_flags(), 0);
    assert_eq!(ApiFunc::HipMemcpyAsync.cookie_flags(), cookie::mark_if(3));
}

#[test]
fn one_trap_programs_only_for_launches_graph_replays_syncs_async_copies_passes_binds_and_submits() {
    for &f in ApiFunc::ALL {
        // Call-shaped functions probed at entry only by default: launches and async copies alone.
        if f.entry_only_by_default() {
            let async_copy = matches!(f.layout(), Memcpy { stream: Some(_), .. });
            assert!(matches!(f.op(), Op::Launch | Op::GraphLaunch) || async_copy, "{f:?}");
            assert_eq!(f.cookie_flags() & (cookie::OUT | cookie::NAME | cookie::QUEUE | cookie::WAKE), 0, "{f:?}");
        }
        match f.shape() {
            ProbeShape::OneTrap => {
                let async_copy = matches!(f.layout(), Memcpy { stream: Some(_), .. });
                let kind = matches!(f.op(), Op::Launch | Op::GraphLaunch | Op::Sync | Op::Pass | Op::Bind | Op::Submit);
                assert!(kind || async_copy, "{f:?}");
                // Nothing is read at return: no out-parameter, no name, no queue.
                assert_eq!(f.cookie_flags() & (cookie::OUT | cookie::NAME | cookie::QUEUE), 0, "{f:?}");
            }
            ProbeShape::RegisterName => assert_eq!(f.layout(), Layout::Register),
            ProbeShape::Doorbell => assert_eq!(f.layout(), Layout::Doorbell),
            ProbeShape::Batch => {
                assert!(matches!(f.layout(), Layout::LlamaBatch | Layout::LlamaBatchExt), "{f:?}");
                assert_eq!(f.op(), Op::Batch);
            }
            ProbeShape::PipelineName => {
                assert_eq!(f.layout(), Layout::PipelineName);
                assert_eq!(f.op(), Op::PipelineName);
                assert_eq!(f.cookie_flags(), 0, "{f:?}");
            }
            ProbeShape::Input => {
                assert_eq!((f.layout(), f.op()), (Layout::TensorSet, Op::Input), "{f:?}");
                assert_eq!(f.cookie_flags(), 0, "{f:?}");
            }
            ProbeShape::Call => {}
        }
    }
}

#[test]
fn results_are_named_in_each_runtime_s_own_type() {
    assert_eq!(ApiFunc::HipLaunchKernel.result_name(98), Some("hipErrorInvalidDeviceFunction"));
    assert_eq!(ApiFunc::CuLaunchKernel.result_name(719), Some("CUDA_ERROR_LAUNCH_FAILED"));
    assert_eq!(ApiFunc::CudaLaunchKernel.result_name(719), Some("cudaErrorLaunchFailure"));
    assert_eq!(ApiFunc::HsaQueueCreate.result_name(0x1008), Some("HSA_STATUS_ERROR_OUT_OF_RESOURCES"));
    // A HIP code is not a CUDA driver's: 98 means nothing to CUresult.
    assert_eq!(ApiFunc::CuLaunchKernel.result_name(98), None);
    assert_eq!(ApiFunc::HipLaunchKernel.result_name(12345), None);
}

#[test]
fn vulkan_creation_calls_read_their_structures_and_the_code_at_return() {
    // vkCreateShaderModule: codeSize and pCode at bytes 24..40 of its info; the module at *arg3.
    assert_eq!(extra_reads(ApiFunc::VkCreateShaderModule as u16), (Some((1, 24)), true));
    assert_eq!(ApiFunc::VkCreateShaderModule.cookie_flags(), cookie::out(3) | cookie::WAKE);
    // vkCreateComputePipelines: the first info's stage module and entry name at bytes 48..64; *arg5.
    assert_eq!(extra_reads(ApiFunc::VkCreateComputePipelines as u16), (Some((3, 48)), false));
    assert_eq!(ApiFunc::VkCreateComputePipelines.cookie_flags(), cookie::out(5));
    // The programs' two comparisons agree with every row's layout.
    for &f in ApiFunc::ALL {
        let layout = f.layout();
        assert_eq!(extra_reads(f as u16), (layout.entry_struct(), layout == Layout::ShaderModuleOut), "{f:?}");
    }
    assert_eq!(extra_reads(0), (None, false));
}

/// Recording by PID, the calls that recur are probed in the recorded processes alone: every call a decode
/// loop makes at a trap each (launches, replays, copies, synchronizations, step and pass markers) must be
/// one of them, or a neighbour on the same runtime would trap on it. A call that names kernels or holds the
/// state a later call is read through (registrations, lookups, code loaded, queues) must not: a child joining
/// late would lose its names.
#[test]
fn a_decode_loops_calls_recur_and_naming_calls_do_not() {
    for &f in ApiFunc::ALL {
        if f.entry_only_by_default() || f.tallied() || f.step_flags() != 0 {
            assert!(f.op().recurs(), "{f:?} is on a decode loop's path");
        }
        if f.shape() == ProbeShape::RegisterName || f.cookie_flags() & cookie::QUEUE != 0 {
            assert!(!f.op().recurs(), "{f:?} names kernels or a queue");
        }
    }
    assert!(ApiFunc::HsaSignalStoreScrelease.op().recurs());
    assert!(!ApiFunc::HipModuleGetFunction.op().recurs());
    assert!(!ApiFunc::CuModuleGetFunction.op().recurs());
}

#[test]
fn a_return_writes_at_most_one_extra_record() {
    // `call_return` writes a name, a queue or a shader module's code after the call record, and stops after
    // the first that applies: no function may need two of them.
    for &f in ApiFunc::ALL {
        let c = f.cookie_flags();
        let extras = [c & cookie::NAME != 0, c & cookie::QUEUE != 0, extra_reads(f as u16).1];
        assert!(extras.iter().filter(|&&e| e).count() <= 1, "{f:?} needs {extras:?}");
    }
    assert_ne!(ApiFunc::HipModuleGetFunction.cookie_flags() & cookie::NAME, 0);
    assert!(extra_reads(ApiFunc::VkCreateShaderModule as u16).1);
}
