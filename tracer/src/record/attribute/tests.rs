//! Attribution: launches named by registration, capture and replay, kernel parameters joined, a recycled PID.

use std::collections::BTreeMap;

use tracer_common::ProcEvent;

use super::*;
use crate::{
    record::intake::decode::{Params, Proc},
    trace::{self, event::Origin},
};

pub(super) fn origin(ts: u64) -> Origin {
    // A PID that cannot exist, so /proc lookups find nothing and only the events speak.
    Origin { pid: 0x3fff_fff0, tid: 1, lib: 1, ts }
}

/// ggml's `mul_mat_q` as llama-cpp-python 0.3.36's ggml declares it: `ncols_y` is parameter 11.
const MMQ: &str =
    "_Z9mul_mat_qIL9ggml_type12ELi16ELb0EL9ggml_prec30EEvPKcPKiS5_S5_PfS6_PKf5uint3iiiiiS9_S9_iiiS9_S9_iiiS9_";

/// `__hipRegisterFunction` binding `handle` to `name` in process 1's module 0x20.
pub(super) fn register(handle: u64, name: &str) -> Event {
    Event::Name(Name {
        origin: origin(1),
        api: ApiFunc::HipRegisterFunction,
        handle,
        module: 0x20,
        name: name.into(),
        truncated: false,
        fault: false,
    })
}

/// A launch of `handle` by process 1, at 10.
pub(super) fn launch_of(handle: u64) -> Launch {
    let o = origin(10);
    Launch {
        tid: o.tid,
        lib: o.lib,
        handle,
        grid: [4, 1, 1],
        block: [64, 1, 1],
        dur: 3,
        ..Launch::for_test(o.pid, None, o.ts)
    }
}

fn launch(handle: u64, ret: i32) -> Event {
    Event::Launch(Launch { ret, ..launch_of(handle) })
}

#[test]
fn launches_on_a_capturing_stream_are_graph_nodes() {
    let mut a = Attributor::default();
    let mut out = Vec::new();
    let capture = |api, ret| Event::call(Call { stream: Some(0), ..Call::new(origin(1), api, ret, 0) });
    a.event(capture(ApiFunc::HipStreamBeginCapture, 0), &mut out);
    a.event(launch(0x1000, 0), &mut out);
    a.event(capture(ApiFunc::HipStreamEndCapture, 0), &mut out);
    a.event(launch(0x1000, 0), &mut out);
    // A capture that failed to begin captures nothing.
    a.event(capture(ApiFunc::HipStreamBeginCapture, 101), &mut out);
    a.event(launch(0x1000, 0), &mut out);
    let captured: Vec<bool> =
        out.iter().filter_map(|r| if let Line::Launch(l) = r { Some(l.captured) } else { None }).collect();
    assert_eq!(captured, [true, false, false]);
}

#[test]
fn kernel_parameters_join_their_launch_and_plans_follow_the_name() {
    let mut a = Attributor::default();
    let mut out = Vec::new();
    a.event(register(0x1000, MMQ), &mut out);
    a.event(register(0x2000, "_Z4axpyPfS_f"), &mut out);
    // Read before any plan: every parameter; the launch keeps the one its kernel needs.
    let params = |handle, ts| {
        Event::Params(Params {
            origin: origin(ts),
            handle,
            wanted: tracer_common::PARAMS_ALL,
            values: vec![(0, 5), (11, 290), (12, 4096)],
        })
    };
    a.event(params(0x1000, 10), &mut out);
    a.event(launch(0x1000, 0), &mut out);
    a.event(params(0x2000, 10), &mut out);
    a.event(launch(0x2000, 0), &mut out);
    // Parameters of another launch (an earlier entry) join nothing, and are counted.
    a.event(params(0x1000, 9), &mut out);
    a.event(launch(0x1000, 0), &mut out);
    let launches: Vec<&Launch> =
        out.iter().filter_map(|r| if let Line::Launch(l) = r { Some(l) } else { None }).collect();
    assert_eq!(launches[0].params, BTreeMap::from([(11, 290)]));
    assert!(launches[1].params.is_empty() && launches[2].params.is_empty());
    assert_eq!(a.counters.get("params_without_launch"), Some(&1));
    // One plan per function, given once: MMQ's ncols_y, nothing for the other.
    assert_eq!(a.effects.plans, [(origin(0).pid, 0x1000, 1 << 11), (origin(0).pid, 0x2000, 0)]);
    // A plan in the eBPF map says its process is traced: each is taken back when the image ends (an exec
    // here; an exit alike), or when the process leaves the filter alive.
    let pid = origin(0).pid;
    assert!(a.take_effects().plans_gone.is_empty());
    let proc = |event| Event::Proc(Proc { origin: origin(20), event, pid, parent: 0, comm: String::new() });
    a.event(proc(ProcEvent::Exec), &mut out);
    assert_eq!(a.take_effects().plans_gone, [(pid, 0x1000), (pid, 0x2000)]);
    a.event(params(0x2000, 30), &mut out);
    a.event(Event::Launch(Launch { ts: 30, ..launch_of(0x2000) }), &mut out);
    assert_eq!(a.take_plans(pid), [0x2000]);
    assert!(a.take_plans(pid).is_empty());
    a.event(proc(ProcEvent::Exit), &mut out);
    assert!(a.take_effects().plans_gone.is_empty());
}

#[test]
fn a_recycled_pid_starts_clean() {
    let capture = Event::call(Call { stream: Some(0), ..Call::new(origin(1), ApiFunc::HipStreamBeginCapture, 0, 0) });
    let params = Event::Params(Params {
        origin: origin(10),
        handle: 0x1000,
        wanted: tracer_common::PARAMS_ALL,
        values: vec![(11, 290)],
    });
    // The first life ends (exit), or its image is replaced (exec); the PID then runs another program
    // that registers the same MMQ handle but none at 0x3000.
    for end in [ProcEvent::Exit, ProcEvent::Exec] {
        let mut a = Attributor::default();
        let mut out = Vec::new();
        a.event(register(0x1000, MMQ), &mut out);
        a.event(register(0x3000, "_Z4axpyPfS_f"), &mut out);
        a.event(capture.clone(), &mut out);
        a.event(params.clone(), &mut out);
        let pid = origin(0).pid;
        a.event(Event::Proc(Proc { origin: origin(5), event: end, pid, parent: 1, comm: "next".into() }), &mut out);
        out.clear();
        a.event(register(0x1000, MMQ), &mut out);
        a.event(launch(0x1000, 0), &mut out);
        a.event(launch(0x3000, 0), &mut out);
        let launches: Vec<&Launch> =
            out.iter().filter_map(|r| if let Line::Launch(l) = r { Some(l) } else { None }).collect();
        let kernels: Vec<&trace::Kernel> =
            out.iter().filter_map(|r| if let Line::Kernel(k) = r { Some(k) } else { None }).collect();
        // No capture, no parameters read in the other life, no name of the other life.
        assert!(launches.iter().all(|l| !l.captured), "{end:?}");
        assert!(launches[0].params.is_empty(), "{end:?}");
        assert_eq!(kernels.last().map(|k| k.source), Some(Source::Unnamed), "{end:?}");
    }
}

#[test]
fn registered_names_attribute_launches() {
    let mut a = Attributor::default();
    let mut out = Vec::new();
    a.event(
        Event::Name(Name {
            origin: origin(1),
            api: ApiFunc::HipRegisterFunction,
            handle: 0x1000,
            module: 0x20,
            name: "_Z4axpyPfS_f".into(),
            truncated: false,
            fault: false,
        }),
        &mut out,
    );
    a.event(launch(0x1000, 101), &mut out);
    a.event(launch(0x2000, 0), &mut out);
    let kernels: Vec<&trace::Kernel> =
        out.iter().filter_map(|r| if let Line::Kernel(k) = r { Some(k) } else { None }).collect();
    let launches: Vec<&Launch> =
        out.iter().filter_map(|r| if let Line::Launch(l) = r { Some(l) } else { None }).collect();
    assert_eq!(kernels.len(), 2);
    assert_eq!((kernels[0].demangled.as_str(), kernels[0].source), ("axpy(float*, float*, float)", Source::Register));
    assert_eq!(kernels[1].source, Source::Unnamed);
    assert_eq!(launches[0].kernel, Some(kernels[0].id));
    assert_eq!(launches[1].kernel, Some(kernels[1].id));
    assert_eq!(launches[0].ret, 101);
    assert_eq!(a.names.unnamed, 1);
}

/// A process table that knows one process's working directory, a directory's files and a descriptor.
struct Files;

impl Procs for Files {
    fn stat(&self, _: u32) -> Option<crate::os::proc::Stat> {
        None
    }
    fn argv(&self, _: u32) -> Vec<String> {
        Vec::new()
    }
    fn maps(&self, _: u32) -> Option<Vec<crate::os::proc::MapsEntry>> {
        None
    }
    fn pids(&self) -> Vec<u32> {
        Vec::new()
    }
    fn exe(&self, _: u32) -> Option<std::path::PathBuf> {
        None
    }
    fn fd_target(&self, _: u32, fd: u32) -> Option<String> {
        match fd {
            7 => Some("/opt/hsa/kernels.co".into()),
            8 => Some("pipe:[1234]".into()),
            _ => None,
        }
    }
    fn same_mount_ns(&self, _: u32) -> bool {
        true
    }
    fn cwd(&self, _: u32) -> Option<String> {
        Some("/work".into())
    }
    fn file_size(&self, _: u32, path: &str) -> Option<u64> {
        (path == "/work/library/a.co").then_some(4096)
    }
    fn list_files(&self, _: u32, dir: &str, _: usize) -> Result<(Vec<String>, bool), String> {
        match dir {
            "/work/library" => Ok((vec!["b.co".into(), "a.co".into(), "TensileLibrary.dat".into()], false)),
            _ => Err(format!("cannot open {dir}: No such file or directory (os error 2)")),
        }
    }
}

static FILES: Files = Files;

/// The path a load names at its entry (thread 1 of the test process, at `ts`).
fn path_named(api: ApiFunc, path: &str, ts: u64) -> Event {
    Event::Name(Name {
        origin: origin(ts),
        api,
        handle: 0,
        module: 0,
        name: path.into(),
        truncated: false,
        fault: false,
    })
}

fn load(api: ApiFunc, ts: u64, ret: i64, module: Option<u64>) -> Event {
    Event::call(Call { module, ..Call::new(origin(ts), api, ret, 10) })
}

#[test]
fn a_load_by_path_binds_its_file_to_the_call_the_module_and_the_directory() {
    let mut a = Attributor { procs: &FILES, ..Attributor::default() };
    let mut out = Vec::new();
    // A relative path, made absolute against the working directory; the load succeeded.
    a.event(path_named(ApiFunc::HipModuleLoad, "./library/a.co", 5), &mut out);
    a.event(load(ApiFunc::HipModuleLoad, 5, 0, Some(0x40)), &mut out);
    // A failed load from the same directory: its file, no second listing.
    a.event(path_named(ApiFunc::HipModuleLoad, "/work/library/gone.co", 6), &mut out);
    a.event(load(ApiFunc::HipModuleLoad, 6, 301, None), &mut out);
    // A function looked up in the module loaded: its code is that file's.
    a.event(
        Event::Name(Name {
            origin: origin(7),
            api: ApiFunc::HipModuleGetFunction,
            handle: 0x99,
            module: 0x40,
            name: "Cijk_Ailk".into(),
            truncated: false,
            fault: false,
        }),
        &mut out,
    );
    let dirs: Vec<&trace::CodeDir> =
        out.iter().filter_map(|r| if let Line::CodeDir(d) = r { Some(d) } else { None }).collect();
    assert_eq!(dirs.len(), 1);
    assert_eq!((dirs[0].path.as_str(), dirs[0].count, dirs[0].ts), ("/work/library", 3, 5));
    assert_eq!(dirs[0].files, ["TensileLibrary.dat", "a.co", "b.co"]);
    let files: Vec<(Option<&str>, i64)> = out
        .iter()
        .filter_map(|r| if let Line::Call(c) = r { Some((c.file.as_deref(), c.ret)) } else { None })
        .collect();
    assert_eq!(files, [(Some("/work/library/a.co"), 0), (Some("/work/library/gone.co"), 301)]);
    let Some(Line::Kernel(k)) = out.last() else { panic!("{out:#?}") };
    assert_eq!((k.name.as_str(), k.code_file.as_deref()), ("Cijk_Ailk", Some("/work/library/a.co")));
    assert!(a.counters.is_empty(), "{:?}", a.counters);
}

/// rocBLAS's Tensile: a code-object file opened, read into memory, given to `ROCr`'s reader, loaded from memory.
#[test]
fn an_image_read_from_a_code_object_file_carries_that_file_when_the_sizes_agree() {
    let mut a = Attributor { procs: &FILES, ..Attributor::default() };
    let mut out = Vec::new();
    let opened = |path: &str, ts| {
        Event::Open(crate::record::intake::decode::Opened { origin: origin(ts), path: path.into(), truncated: false })
    };
    let reader = |ptr, size, ts| {
        Event::call(Call {
            ptr: Some(ptr),
            size: Some(size),
            ..Call::new(origin(ts), ApiFunc::HsaCodeObjectReaderCreateFromMemory, 0, 1)
        })
    };
    let from_memory = |ptr, module, ts| {
        Event::call(Call {
            ptr: Some(ptr),
            module: Some(module),
            ..Call::new(origin(ts), ApiFunc::HipModuleLoadData, 0, 1)
        })
    };
    // Relative to the working directory; the reader's size is the file's: bound, and the module carries it.
    a.event(opened("library/a.co", 1), &mut out);
    a.event(reader(0x1000, 4096, 3), &mut out);
    a.event(from_memory(0x1000, 0x40, 2), &mut out);
    // Another size: nothing bound (counted), the module placed as before (here: nowhere).
    a.event(opened("/work/library/a.co", 4), &mut out);
    a.event(reader(0x2000, 100, 6), &mut out);
    a.event(from_memory(0x2000, 0x41, 5), &mut out);
    let files: Vec<(ApiFunc, Option<&str>)> = out
        .iter()
        .filter_map(|r| if let Line::Call(c) = r { Some((c.api, c.file.as_deref())) } else { None })
        .collect();
    assert_eq!(
        files,
        [
            (ApiFunc::HsaCodeObjectReaderCreateFromMemory, Some("/work/library/a.co")),
            (ApiFunc::HipModuleLoadData, Some("/work/library/a.co")),
            (ApiFunc::HsaCodeObjectReaderCreateFromMemory, None),
            (ApiFunc::HipModuleLoadData, None),
        ]
    );
    assert!(out.iter().any(|r| matches!(r, Line::CodeDir(d) if d.path == "/work/library" && d.count == 3)), "{out:#?}");
    assert_eq!(a.counters.get("code_object_images_unmatched"), Some(&1));
    // The open of a code object is no runtime copy to probe.
    assert!(a.effects.opened.is_empty());
    assert!(
        tracer_common::is_code_object(b"/x/TensileLibrary_gfx1100.hsaco")
            && !tracer_common::is_code_object(b"/x/libamdhip64.so")
    );
}

/// A process opening code objects from more threads than are kept: the opens are let go, counted, never grown.
#[test]
fn code_object_opens_are_kept_for_a_bounded_number_of_threads() {
    let mut files = code_files::CodeFiles::default();
    let mut counters = Counts::default();
    for tid in 0..=4096 {
        files.code_object_opened((9, tid, 1), "/x/a.co", false, &FILES, &mut counters);
    }
    files.code_object_opened((9, 1, 2), "/x/b.co", true, &FILES, &mut counters);
    assert_eq!(counters.get("code_object_opens_let_go"), Some(&1));
    assert_eq!(counters.get("code_object_opens_truncated"), Some(&1));
}

#[test]
fn loads_without_their_path_and_unreadable_descriptors_are_counted() {
    let mut a = Attributor { procs: &FILES, ..Attributor::default() };
    let mut out = Vec::new();
    // No path read for this load (its name record lost): no file.
    a.event(load(ApiFunc::CuModuleLoad, 5, 0, Some(0x40)), &mut out);
    // Another load's path (its call record lost) is not the next load's.
    a.event(path_named(ApiFunc::CuModuleLoad, "/x/a.cubin", 6), &mut out);
    a.event(load(ApiFunc::CuModuleLoad, 9, 0, Some(0x41)), &mut out);
    // A directory that cannot be listed says why.
    a.event(path_named(ApiFunc::CuModuleLoad, "/x/b.cubin", 10), &mut out);
    a.event(load(ApiFunc::CuModuleLoad, 10, 0, Some(0x42)), &mut out);
    // An HSA reader of an open file: the descriptor's file, once; one that is no file is counted.
    let reader = |fd: u64, ts| {
        Event::call(Call { value: Some(fd), ..Call::new(origin(ts), ApiFunc::HsaCodeObjectReaderCreateFromFile, 0, 1) })
    };
    a.event(reader(7, 11), &mut out);
    a.event(reader(8, 12), &mut out);
    let files: Vec<Option<&str>> =
        out.iter().filter_map(|r| if let Line::Call(c) = r { Some(c.file.as_deref()) } else { None }).collect();
    assert_eq!(files, [None, None, Some("/x/b.cubin"), Some("/opt/hsa/kernels.co"), None]);
    let dirs: Vec<(&str, Option<&str>)> = out
        .iter()
        .filter_map(|r| if let Line::CodeDir(d) = r { Some((d.path.as_str(), d.error.as_deref())) } else { None })
        .collect();
    assert_eq!(
        dirs,
        [
            ("/x", Some("cannot open /x: No such file or directory (os error 2)")),
            ("/opt/hsa", Some("cannot open /opt/hsa: No such file or directory (os error 2)"))
        ]
    );
    assert_eq!(a.counters.get("module_loads_without_path"), Some(&2));
    assert_eq!(a.counters.get("code_object_fds_unread"), Some(&1));
    assert_eq!(a.counters.get("code_dirs_unlisted"), Some(&2));
}

#[test]
fn a_code_directory_of_a_process_gone_is_listed_in_the_root_held_for_it() {
    let dir = std::env::temp_dir().join(format!("tracer-held-root-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("lib")).unwrap();
    std::fs::write(dir.join("lib/y.co"), b"").unwrap();
    std::fs::write(dir.join("lib/x.co"), b"").unwrap();
    let held = crate::os::files::Root::at(&dir.to_string_lossy()).unwrap();
    let mut counters = Counts::default();
    // The process table cannot list `/lib` (its process has ended): the root held while it lived can.
    let listed = code_files::CodeFiles::default()
        .list_dir("/lib/x.co", false, (9, 1), (&FILES, Some(&held)), &mut 100, &mut counters)
        .unwrap();
    assert_eq!((listed.count, &listed.files, &listed.error), (2, &vec!["x.co".to_owned(), "y.co".to_owned()], &None));
    // Without one, the reason is kept.
    let unlisted = code_files::CodeFiles::default()
        .list_dir("/lib/x.co", false, (9, 1), (&FILES, None), &mut 100, &mut counters)
        .unwrap();
    assert!(unlisted.error.as_ref().is_some_and(|e| e.contains("/lib")), "{unlisted:?}");
    // The recording's listing budget: a listing reads no more than is left, and none once it is spent.
    let mut left = 1;
    let cut = code_files::CodeFiles::default()
        .list_dir("/lib/x.co", false, (9, 1), (&FILES, Some(&held)), &mut left, &mut counters)
        .unwrap();
    assert!(cut.cut && cut.count <= 1 && left == 0, "{cut:?}");
    let none = code_files::CodeFiles::default().list_dir(
        "/lib/x.co",
        false,
        (9, 1),
        (&FILES, Some(&held)),
        &mut left,
        &mut counters,
    );
    assert!(none.is_none());
    assert_eq!(counters.get("code_dirs_not_listed_budget"), Some(&1));
    drop(std::fs::remove_dir_all(dir));
}

/// ggml-vulkan names the pipeline it is making (`ggml_vk_create_pipeline_func`), on `tid`, with its SPIR-V's
/// size and address.
fn making(tid: u32, name: &str, spv_size: u64) -> Name {
    Name {
        origin: Origin { tid, ..origin(1) },
        api: ApiFunc::GgmlVkCreatePipeline,
        handle: 0x7000_0000,
        module: spv_size,
        name: name.into(),
        truncated: false,
        fault: false,
    }
}

/// A shader module of `size` bytes made on `tid`: its code's head and its last chunk, unreadable.
fn module_made(a: &mut Attributor, out: &mut Vec<Line>, tid: u32, handle: u64, size: u64) {
    for chunk in [CODE_HEAD, 0] {
        let origin = Origin { tid, ..origin(2) };
        let code = CodeTail { origin, api: ApiFunc::VkCreateShaderModule, handle, size, chunk, bytes: Vec::new() };
        a.event(Event::Code(code), out);
    }
}

/// A compute pipeline made from `module`.
fn pipeline_made(pipeline: u64, module: u64) -> Event {
    let call = Call::new(origin(3), ApiFunc::VkCreateComputePipelines, 0, 1);
    Event::call(Call { function: Some(pipeline), module: Some(module), size: Some(1), ..call })
}

#[test]
fn a_pipeline_ggml_names_as_it_makes_it_names_the_module_its_thread_makes_next() {
    let mut a = Attributor::default();
    let mut out = Vec::new();
    // Two threads making pipelines at once: each module takes its own thread's name.
    a.event(Event::Name(making(1, "matmul_q4_k_f32_l", 4096)), &mut out);
    a.event(Event::Name(making(2, "rms_norm_mul_f32", 1024)), &mut out);
    module_made(&mut a, &mut out, 2, 0xb, 1024 + 76);
    module_made(&mut a, &mut out, 1, 0xa, 4096);
    // A module with no pipeline being made on its thread, and one smaller than the SPIR-V given: not named
    // so (the second counted).
    module_made(&mut a, &mut out, 3, 0xc, 2048);
    a.event(Event::Name(making(4, "add_f32", 8192)), &mut out);
    module_made(&mut a, &mut out, 4, 0xd, 4000);
    for (pipeline, module) in [(0x10, 0xa), (0x20, 0xb), (0x30, 0xc), (0x40, 0xd)] {
        a.event(pipeline_made(pipeline, module), &mut out);
    }
    let named: Vec<(u64, &str, Source)> = out
        .iter()
        .filter_map(|r| if let Line::Kernel(k) = r { Some((k.handle, k.name.as_str(), k.source)) } else { None })
        .collect();
    assert_eq!(
        named[..2],
        [(0x10, "matmul_q4_k_f32_l", Source::Pipeline), (0x20, "rms_norm_mul_f32", Source::Pipeline)]
    );
    assert!(named[2..].iter().all(|&(_, _, source)| source != Source::Pipeline), "{named:?}");
    assert_eq!(a.counters.get("pipeline_names_unbound"), Some(&1));
    // A name that could not be read binds nothing, and is counted.
    a.event(Event::Name(Name { fault: true, ..making(5, "", 64) }), &mut out);
    assert_eq!(a.counters.get("pipeline_names_unread"), Some(&1));
}

/// A code-object symbol whose name was cut (past the name record's bytes, as rocBLAS's longest Tensile kernel
/// names are) names its kernel object as cut: the kernel record says so, and readers compare it as a prefix.
#[test]
fn a_cut_hsa_symbol_name_names_its_kernel_object_as_cut() {
    let mut a = Attributor::default();
    let mut out = Vec::new();
    for (symbol, truncated) in [(0x100, true), (0x200, false)] {
        a.event(
            Event::Name(Name {
                origin: origin(1),
                api: ApiFunc::HsaExecutableGetSymbolByName,
                handle: symbol,
                module: 0x20,
                name: format!("Cijk_{symbol:x}"),
                truncated,
                fault: false,
            }),
            &mut out,
        );
        let info = Call {
            handle: Some(symbol),
            attribute: Some(tracer_common::api::HSA_SYMBOL_INFO_KERNEL_OBJECT),
            value: Some(symbol * 16),
            ..Call::new(origin(2), ApiFunc::HsaExecutableSymbolGetInfo, 0, 0)
        };
        a.event(Event::call(info), &mut out);
    }
    let kernels: Vec<(u64, bool)> =
        out.iter().filter_map(|l| if let Line::Kernel(k) = l { Some((k.handle, k.truncated)) } else { None }).collect();
    assert_eq!(kernels, [(0x1000, true), (0x2000, false)]);
}
