//! Recording real HIP programs on Debian's real libamdhip64 (no GPU: launches return
//! hipErrorInvalidDevice, 101, but every probed call reaches the runtime).

use std::process::Command;

use integration_tests::*;

/// What `mini_runner launches` does (see `fixtures/hip/mini_runner.hip`, `known_launches`).
const RMS_NORM: &str = "_Z12rms_norm_f32PKfPfif";
const MMV1: &str = "_Z11mul_mat_vecILi1EfEvPKT0_PKfPfi";
const MMV8: &str = "_Z11mul_mat_vecILi8EfEvPKT0_PKfPfi";
const ADD: &str = "add_f32";
const HIP_ERROR_INVALID_DEVICE: i32 = 101;

/// A launch as `mini_runner` makes it: API, kernel name (None: unnamed), grid, block, grid unit, shared memory.
type Expected = (&'static str, Option<&'static str>, [u32; 3], [u32; 3], &'static str, u64);

const LAUNCHES: [Expected; 7] = [
    ("hipLaunchKernel", Some(RMS_NORM), [17, 3, 2], [64, 2, 1], "blocks", 512),
    ("hipLaunchKernel", Some(MMV1), [4096, 1, 1], [32, 4, 1], "blocks", 0),
    ("hipLaunchKernel", Some(MMV8), [512, 2, 1], [32, 4, 1], "blocks", 0),
    ("hipLaunchKernel", Some(ADD), [33, 1, 1], [128, 1, 1], "blocks", 0),
    ("hipLaunchKernel", Some(ADD), [33, 1, 1], [128, 1, 1], "blocks", 0),
    // The module failed to load, so the function handle is null: named by nothing.
    ("hipModuleLaunchKernel", None, [9, 8, 7], [64, 2, 1], "blocks", 256),
    ("hipExtModuleLaunchKernel", None, [1024, 16, 1], [256, 4, 1], "work-items", 2048),
];

fn assert_known_launches(records: &[Line], pid: u32, named_by: &str) {
    let ls = launches(records);
    assert_eq!(ls.len(), LAUNCHES.len(), "launches: {ls:#?}");
    for (l, &(api, kernel, grid, block, unit, shmem)) in ls.iter().zip(LAUNCHES.iter()) {
        assert_eq!(l.api.name(), api);
        assert_eq!((l.grid, l.block, l.grid_unit.as_str(), l.shmem), (grid, block, unit, shmem), "{l:?}");
        assert_eq!(l.pid, pid);
        // The default recording probes a launch at entry only (one trap: no duration, no result); a
        // recording of all calls at its return too.
        assert_eq!(l.entry_only, l.dur == 0, "{l:?}");
        assert_eq!(l.stream, 0);
        let name = kernel_name(records, l);
        if let Some(k) = kernel {
            assert_eq!(name, k);
            assert_eq!(l.ret, if l.entry_only { 0 } else { HIP_ERROR_INVALID_DEVICE }, "{l:?}");
            let rec = kernels(records).into_iter().find(|r| Some(r.id) == l.kernel).unwrap();
            assert_eq!(rec.source.as_str(), named_by, "{rec:?}");
        } else {
            assert_eq!(name, "");
            assert_eq!(l.handle, 0);
            assert!(l.entry_only || l.ret != 0, "{l:?}");
        }
    }
    let cfg = configs(records);
    assert_eq!(cfg.len(), 1, "{cfg:?}");
    assert_eq!(
        (cfg[0].grid, cfg[0].block, cfg[0].shmem, cfg[0].ret),
        ([5, 6, 7], [8, 4, 2], 96, HIP_ERROR_INVALID_DEVICE)
    );
    assert_eq!(cfg[0].pid, pid);

    let cs = calls(records);
    let find =
        |api: &str| cs.iter().find(|c| c.api.name() == api).ok_or_else(|| format!("no {api} call in {cs:#?}")).unwrap();
    assert_eq!(find("hipMalloc").size, Some(1 << 20));
    let memcpy = find("hipMemcpy");
    assert_eq!(
        (memcpy.size, memcpy.kind.map(trace::event::MemcpyKind::name).as_deref()),
        (Some(256), Some("DeviceToHost"))
    );
    assert_ne!(find("hipModuleLoadData").ret, 0);
    assert_ne!(find("hipModuleGetFunction").ret, 0);
    // Synchronizations are probed only in a recording of all calls (`--all-calls`).
    if records.iter().any(|r| matches!(r, Line::Header(h) if h.options.lean)) {
        assert!(cs.iter().all(|c| c.api.name() != "hipDeviceSynchronize"), "{cs:#?}");
    } else {
        find("hipDeviceSynchronize");
    }
    assert!(cs.iter().all(|c| c.pid == pid));
}

/// Records `mini_runner launches` from its start into `FILE` of a fresh scratch folder.
fn record_mini_runner_launches(scratch_name: &str, file: &str) -> (std::path::PathBuf, Vec<Line>) {
    record_mini_runner(scratch_name, file, &[], &["launches"])
}

/// Records `mini_runner RUNNER_ARGS` with the record `flags` into `scratch_name/file`.
fn record_mini_runner(
    scratch_name: &str,
    file: &str,
    flags: &[&str],
    runner_args: &[&str],
) -> (std::path::PathBuf, Vec<Line>) {
    let out = scratch(scratch_name).join(file);
    let runner = fixture("mini_runner");
    let mut args = vec!["record", "-q", "-o", out.to_str().unwrap()];
    args.extend_from_slice(flags);
    args.extend(["--", runner.to_str().unwrap()]);
    args.extend_from_slice(runner_args);
    let o = tracer(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let records = read_trace(&out);
    (out, records)
}

/// The program a process exec'd, as its exec record names it.
fn runner_path(records: &[Line], pid: u32) -> &str {
    records
        .iter()
        .find_map(|r| match r {
            Line::Process(p) if p.pid == pid && p.cause.as_str() == "exec" => Some(p.argv[0].as_str()),
            _ => None,
        })
        .expect("an exec record")
}

#[test]
fn command_is_recorded_from_its_first_instruction() {
    let (_, records) = record_mini_runner_launches("command", "t.jsonl");

    let Line::Header(h) = &records[0] else { panic!("first record is not the header") };
    assert_eq!((h.format.as_str(), h.schema, h.options.filter.as_str()), ("tracer-trace", 1, "pid"));
    let libs: Vec<&trace::Library> =
        records.iter().filter_map(|r| if let Line::Library(l) = r { Some(l) } else { None }).collect();
    assert!(libs.iter().any(|l| l.path.contains("libamdhip64.so") && l.origin.as_str() == "system"), "{libs:?}");

    // The process: started through the shell, then exec'd into the runner.
    let procs: Vec<&trace::Process> =
        records.iter().filter_map(|r| if let Line::Process(p) = r { Some(p) } else { None }).collect();
    let exec = procs.iter().find(|p| p.cause.as_str() == "exec").expect("exec record");
    assert!(exec.argv[0].ends_with("mini_runner") && exec.argv[1] == "launches", "{exec:?}");
    let pid = exec.pid;

    // Registration, seen live: the exact names, bound to the handles the launches use.
    let names: std::collections::BTreeSet<&str> =
        kernels(&records).iter().filter(|k| k.source.as_str() == "register").map(|k| k.name.as_str()).collect();
    let want: std::collections::BTreeSet<&str> =
        [RMS_NORM, MMV1, MMV8, ADD, "_Z8rope_f32PKfPfiPKif", "_Z12soft_max_f32PKfPfi"].into();
    assert_eq!(names, want);
    let mmv8 = kernels(&records).into_iter().find(|k| k.name == MMV8).unwrap();
    assert_eq!(mmv8.demangled, "void mul_mat_vec<8, float>(float const*, float const*, float*, int)");
    assert!(calls(&records).iter().any(|c| c.api.name() == "__hipRegisterFatBinary" && c.module.unwrap_or(0) != 0));

    assert_known_launches(&records, pid, "register");
    // Which code made the launches: every one, HIP's two-trap hipLaunchKernel included (its return address
    // is read at entry), came from the program itself.
    let sites: Vec<(&str, u64)> = records
        .iter()
        .filter_map(|r| match r {
            Line::LaunchSites(s) if s.pid == pid => Some((s.path.as_str(), s.launches)),
            _ => None,
        })
        .collect();
    assert_eq!(sites, [(runner_path(&records, pid), LAUNCHES.len() as u64)]);

    let exit = records.iter().find_map(|r| if let Line::Exit(e) = r { Some(e) } else { None }).expect("exit");
    assert_eq!((exit.pid, exit.code), (pid, Some(0)));
    let f = footer(&records);
    assert_eq!(f.stop.as_str(), "command-exited");
    assert_eq!(f.total_drops(), 0);
    assert_eq!(f.records["launch"], LAUNCHES.len() as u64);
    assert_eq!(f.counters["undecodable"], 0);
}

/// A program that lives 35 ms, started while tracer still names rocSPARSE's 12 425 registrations (the
/// records wait in the queue behind them): its maps can no longer be read when its first record is
/// named, and the look the early-look thread took while it lived (at its runtime opens and first call) stands in,
/// for its maps, its files and who it was.
#[test]
fn a_process_that_ended_before_it_was_named_keeps_its_launch_sites_code_files_and_libraries() {
    let dir = scratch("early_look");
    let script = dir.join("behind_rocsparse.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/bash\ncoproc SR {{ {} late; }}\nread -r ready <&\"${{SR[0]}}\"\n{} launches\necho go >&\"${{SR[1]}}\"\nwait\n",
            fixture("sparse_rand").display(),
            fixture("mini_runner").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = dir.join("t.jsonl");
    let records = record_ok(&out, &["--", script.to_str().unwrap()]);
    let exec = exec_of(&records, "mini_runner").expect("the runner's exec record");
    let runner = exec.pid;
    // Its parent, start time and command line as the early look read them while it lived.
    let script_pid = records.iter().find_map(|r| match r {
        Line::Process(p) if p.argv.iter().any(|a| a.ends_with("behind_rocsparse.sh")) => Some(p.pid),
        _ => None,
    });
    assert_eq!(exec.argv, [fixture("mini_runner").to_str().unwrap(), "launches"], "{exec:?}");
    assert_eq!(Some(exec.ppid), script_pid, "{exec:?}");
    assert!(exec.start_time > 0, "{exec:?}");
    let sites: Vec<(&str, u64)> = records
        .iter()
        .filter_map(|r| match r {
            Line::LaunchSites(s) if s.pid == runner => Some((s.path.as_str(), s.launches)),
            _ => None,
        })
        .collect();
    let path = fixture("mini_runner");
    assert_eq!(sites, [(path.to_str().unwrap(), LAUNCHES.len() as u64)]);
    // Its launches (sparse_rand makes none), named from its registrations as ever.
    let named: Vec<(u32, &str)> = launches(&records).iter().map(|l| (l.pid, kernel_name(&records, l))).collect();
    let want: Vec<(u32, &str)> = LAUNCHES.iter().map(|l| (runner, l.1.unwrap_or(""))).collect();
    assert_eq!(named, want);
    // Its registered kernels keep the file and bundle of their code: the early look opened the runner's
    // files while it lived.
    let registered: Vec<(Option<&str>, usize)> = kernels(&records)
        .into_iter()
        .filter(|k| k.pid == runner && k.source == trace::Source::Register)
        .map(|k| (k.code_file.as_deref(), k.bundles.len()))
        .collect();
    assert!(!registered.is_empty());
    assert!(registered.iter().all(|&r| r == (path.to_str(), 1)), "{registered:?}");
    // And the libraries it mapped are listed, each for what it is, from the same look.
    let mapped: Vec<(&str, Option<trace::GpuLibrary>)> = records
        .iter()
        .filter_map(|r| match r {
            Line::Mapping(m) if m.pid == runner => Some((m.path.rsplit('/').next().unwrap(), m.gpu)),
            _ => None,
        })
        .collect();
    assert!(mapped.contains(&("mini_runner", Some(trace::GpuLibrary::Code))), "{mapped:?}");
    assert!(mapped.iter().any(|(f, g)| f.starts_with("libamdhip64") && *g == Some(trace::GpuLibrary::Runtime)));
    // It was over before it was named: the early look placed its launches.
    let f = footer(&records);
    assert!(f.counters.get("maps_from_early_look").copied().unwrap_or(0) >= 1, "{:?}", f.counters);
    assert_eq!((f.counters["early_looks_lost"], f.counters["early_look_files_limit"], f.total_drops()), (0, 0, 0));
    // The look ran at the session's priority: at nice 0 it would wait behind the session (at -10) naming
    // rocSPARSE while the runner ends.
    assert_eq!(f.counters["recorder_priority_raised"], 1);
    // `files_unopened` is not asserted: it counts every process's races with its own address space (a
    // forked shell's mapping replaced by its exec, the loader's `ld.so.cache` unmapped as it is opened),
    // which naming meets or not depending on how far behind the registrations it is. The runner's own
    // files are asserted above: its code file and bundle on every kernel, its launch sites.
}

#[test]
fn late_attach_names_launches_from_elf_and_ignores_other_processes() {
    let out = scratch_trace("late");
    let runner = fixture("mini_runner");
    // Both have registered their kernels before the tracer starts.
    let target = Waiting::start(&runner, "late");
    let other = Waiting::start(&runner, "late");
    let target_pid = target.pid();
    let other_pid = other.pid();
    let rec = Recording::start(&out, &["--pid", &target_pid.to_string()]);
    assert!(other.go().success());
    assert!(target.go().success());
    // The tracer stops by itself once its only target has exited.
    let (status, stderr) = rec.wait();
    assert!(status.success(), "{stderr}");
    let records = read_trace(&out);
    assert_eq!(footer(&records).stop.as_str(), "targets-exited");
    assert_known_launches(&records, target_pid, "elf");
    for r in &records {
        let pid = match r {
            Line::Launch(l) => l.pid,
            Line::Call(c) => c.pid,
            Line::Config(c) => c.pid,
            Line::Kernel(k) => k.pid,
            _ => continue,
        };
        assert_ne!(pid, other_pid, "unrelated process recorded: {r:?}");
    }
    // No registration was seen (it happened before the tracer started).
    assert!(kernels(&records).iter().all(|k| k.source.as_str() != "register"));
}

/// The same late attach to a stripped runner (no symbol table): every launch is named from the
/// registration calls decoded in its code.
#[test]
fn late_attach_names_launches_of_a_stripped_program_from_its_registration_calls() {
    let out = scratch_trace("late-stripped");
    let runner = fixture("mini_runner_stripped");
    let symbols = Command::new("readelf").arg("-S").arg(&runner).output().unwrap();
    assert!(!String::from_utf8_lossy(&symbols.stdout).contains(".symtab"), "the fixture is not stripped");
    let target = Waiting::start(&runner, "late");
    let target_pid = target.pid();
    let records = target.traced_late(&out);
    assert_known_launches(&records, target_pid, "register-call");
    // Only the runner's deliberate null-handle launch stays unnamed.
    assert_eq!(footer(&records).counters["unnamed_kernels"], 1);
    assert!(kernels(&records).iter().all(|k| k.handle == 0 || k.source.as_str() == "register-call"));
}

#[test]
fn children_of_the_command_are_followed() {
    let out = scratch_trace("children");
    let runner = fixture("mini_runner");
    let script = format!("{r} launches; {r} launches", r = runner.display());
    let records = record_ok(&out, &["--", "/bin/sh", "-c", &script]);
    let forks: Vec<&trace::Process> = records
        .iter()
        .filter_map(|r| if let Line::Process(p) = r { (p.cause.as_str() == "fork").then_some(p) } else { None })
        .collect();
    assert_eq!(forks.len(), 2, "{forks:?}");
    for child in &forks {
        let mine: Vec<Line> = records
            .iter()
            .filter(|r| match r {
                Line::Launch(l) => l.pid == child.pid,
                Line::Config(c) => c.pid == child.pid,
                Line::Call(c) => c.pid == child.pid,
                Line::Kernel(k) => k.pid == child.pid,
                Line::Header(_) => true,
                _ => false,
            })
            .cloned()
            .collect();
        assert_known_launches(&mine, child.pid, "register");
    }
}

#[test]
fn compressed_trace_reads_back() {
    let (out, records) = record_mini_runner_launches("zst", "t.jsonl.zst");
    let raw = std::fs::read(&out).unwrap();
    assert_eq!(&raw[..4], &[0x28, 0xb5, 0x2f, 0xfd], "not a zstd stream");
    assert_eq!(launches(&records).len(), LAUNCHES.len());
    let report = tracer(&["report", "--json", out.to_str().unwrap()]);
    assert!(report.status.success());
    let v: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let p = &v["processes"].as_array().unwrap().iter().find(|p| p["comm"] == "mini_runner").unwrap();
    let k = p["kernels"].as_array().unwrap().iter().find(|k| k["name"] == ADD).unwrap();
    // Probed at entry only, a launch is counted as made: its failure (no GPU here) is not seen, and the report
    // says so for each of the seven.
    assert_eq!((k["launches"].as_u64(), k["failed"].as_u64()), (Some(2), Some(0)));
    assert_eq!(v["trace"]["launch_results_unread"], LAUNCHES.len());
    assert_eq!(k["shapes"][0]["grid"], serde_json::json!([33, 1, 1]));
}

#[test]
fn program_stats_time_every_program_run() {
    // `mini_runner loop N`: N kernel launches through `<<<>>>`, each a __hipPushCallConfiguration and a
    // hipLaunchKernel: the push probed at entry and return, the launch at entry only.
    let (out, records) = record_mini_runner("program-stats", "t.jsonl", &["--program-stats"], &["loop", "500"]);
    let f = footer(&records);
    let launches = launches(&records).len() as u64;
    assert_eq!(launches, 500);
    // Every launch ran the one-trap program once (the launch, at entry only), and the entry and the return
    // program once (its configuration push); other probed calls add a few more.
    for name in ["call_entry", "call_return", "one_trap_entry"] {
        let p = f.programs.get(name).unwrap_or_else(|| panic!("no {name} in {:?}", f.programs));
        assert!(p.runs >= launches && p.runs < launches + 50, "{name}: {p:?}");
        assert!(p.ns > 0, "{name}: {p:?}");
    }
    assert!(f.programs["sched_process_exec"].runs >= 1);
    let report = tracer(&["report", out.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(text.contains("eBPF programs, as the kernel timed them") && text.contains("call_entry"), "{text}");
    // Without the flag, the kernel times nothing and the trace says nothing of it.
    let (_, plain) = record_mini_runner_launches("program-stats-off", "t.jsonl");
    assert!(footer(&plain).programs.is_empty());
}

/// A process whose GPU work goes through an API tracer does not probe (`OpenCL`, and ggml's SYCL backend)
/// is reported as such, with the files that show it, never as a process with no GPU work: `opencl_probe`
/// loads a `libggml-sycl.so` (an empty test double under the backend's name) and the real `OpenCL` ICD loader
/// (Debian's ocl-icd-libopencl1), and asks the loader for its platforms.
#[test]
fn a_process_on_the_opencl_loader_is_said_to_run_gpu_work_tracer_does_not_observe() {
    let out = scratch_trace("opencl-unobserved");
    let prog = fixture("opencl_probe");
    let sycl = fixture("unobserved/libggml-sycl.so");
    let o =
        tracer(&["record", "-q", "-o", out.to_str().unwrap(), "--", prog.to_str().unwrap(), sycl.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("clGetPlatformIDs="), "the loader answered");
    let v = tracer_json(&["report", "--json", out.to_str().unwrap()]);
    let p = v["processes"].as_array().unwrap().iter().find(|p| p["comm"] == "opencl_probe").expect("the process");
    assert_eq!(p["gpu_activity"], true, "{p}");
    let unobserved: Vec<&str> = p["unobserved"].as_array().unwrap().iter().map(|u| u.as_str().unwrap()).collect();
    assert_eq!(unobserved.len(), 2, "{p}");
    assert!(unobserved.iter().any(|u| u.starts_with("OpenCL (") && u.contains("libOpenCL.so")), "{p}");
    assert!(
        unobserved.iter().any(|u| u.starts_with("ggml's SYCL backend (") && u.ends_with("libggml-sycl.so)")),
        "{p}"
    );
    let text = String::from_utf8_lossy(&tracer(&["report", out.to_str().unwrap()]).stdout).into_owned();
    assert!(text.contains("not observed: OpenCL (") && text.contains("not observed: ggml's SYCL backend ("), "{text}");
    assert!(!text.contains("no GPU activity (all in --json): opencl_probe"), "{text}");
}

/// Recording a running process by PID places the runtime probes in it alone (a link per process); a child
/// it starts gets its own links when tracer reads its fork, before the child's program maps the runtime
/// here (the child waits half a second, then execs `mini_runner`): every one of its launches is recorded
/// and named, and its copy is not marked late.
#[test]
fn a_child_of_a_process_recorded_by_pid_gets_probes_of_its_own() {
    let dir = scratch("pid-child");
    let script = dir.join("parent.sh");
    let runner = fixture("mini_runner");
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho ready\nread go\n( sleep 0.5; exec {} launches )\n", runner.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let parent = Waiting::start_with(&script, &[]);
    let records = parent.traced_late(&dir.join("t.jsonl"));
    let options = records.iter().find_map(|r| if let Line::Header(h) = r { Some(h.options.clone()) } else { None });
    assert!(options.expect("a header").probes_per_process);
    let child = exec_of(&records, "mini_runner").expect("the child's exec record").pid;
    let mine: Vec<Line> = records
        .iter()
        .filter(|r| match r {
            Line::Launch(l) => l.pid == child,
            Line::Config(c) => c.pid == child,
            Line::Call(c) => c.pid == child,
            Line::Kernel(k) => k.pid == child,
            Line::Header(_) => true,
            _ => false,
        })
        .cloned()
        .collect();
    assert_known_launches(&mine, child, "register");
    let late: Vec<&trace::Mapping> = records
        .iter()
        .filter_map(|r| if let Line::Mapping(m) = r { (m.pid == child && m.probed_late).then_some(m) } else { None })
        .collect();
    assert!(late.is_empty(), "{late:?}");
}
