//! A real `ROCm` library stack: `fixtures/hip/sparse_rand.hip` maps Debian's hipSPARSE, rocSPARSE (1.3 GB,
//! a 1.25 GB fat binary of 111 offload bundles) and rocRAND, whose constructors register more than
//! twelve thousand kernels with the real HIP runtime at load. Recorded at the default ring, nothing is
//! lost, every registration is named with the bundle its fat binary points at (counted independently by
//! bpftrace), and every mapped GPU library is listed.

use std::{collections::BTreeMap, process::Command, time::Duration};

use integration_tests::*;

const HIP: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";

/// What bpftrace counts of `sparse_rand both`: (fat binaries, functions) registered.
fn bpftrace_counts() -> (u64, u64) {
    let script = format!(
        "uprobe:{HIP}:__hipRegisterFatBinary /comm == \"sparse_rand\"/ {{ @fat = count(); }} \
         uprobe:{HIP}:__hipRegisterFunction /comm == \"sparse_rand\"/ {{ @fn = count(); }}"
    );
    let cmd = format!("{} both", fixture("sparse_rand").display());
    let (status, _, out) =
        run_measured(Command::new("bpftrace").args(["-q", "-e", &script, "-c", &cmd]), Duration::from_mins(3));
    assert!(status.success(), "bpftrace: {out}");
    let count = |name: &str| -> u64 {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("@{name}: ")))
            .and_then(|n| n.trim().parse().ok())
            .expect("bpftrace printed the count")
    };
    (count("fat"), count("fn"))
}

#[test]
fn a_real_rocsparse_stack_registers_at_the_default_ring_with_nothing_lost_and_every_kernel_named() {
    let (fat_binaries, functions) = bpftrace_counts();
    assert!(functions > 10_000, "rocSPARSE registers thousands of kernels: {functions}");

    let dir = scratch("library-stack");
    let out = dir.join("t.jsonl");
    let (status, _, said) = run_measured(
        Command::new(tracer_bin()).args(["record", "-o"]).arg(&out).arg("--").arg(fixture("sparse_rand")).arg("both"),
        Duration::from_mins(3),
    );
    assert!(status.success(), "{said}");
    let records = read_trace(&out);
    let f = footer(&records);
    assert_eq!(f.total_drops(), 0, "drops: {:?}", f.drops);
    assert_eq!(f.counters.get("undecodable"), Some(&0));

    // Every registration bpftrace counted, each named, with the file and bundle its fat binary points at.
    let pid = records
        .iter()
        .find_map(|r| if let Line::Process(p) = r { (p.comm == "sparse_rand").then_some(p.pid) } else { None })
        .expect("the command's process record");
    let ks: Vec<&trace::Kernel> = kernels(&records).into_iter().filter(|k| k.pid == pid).collect();
    let registered: Vec<&&trace::Kernel> = ks.iter().filter(|k| k.source == trace::Source::Register).collect();
    assert_eq!(registered.len() as u64, functions, "kernels named by registration vs bpftrace's count");
    assert!(registered.iter().all(|k| !k.name.is_empty() && !k.truncated), "a registration without its name");
    let unplaced: Vec<&&&trace::Kernel> =
        registered.iter().filter(|k| k.code_file.is_none() || k.bundles.len() != 1).take(3).collect();
    assert!(unplaced.is_empty(), "kernels without their bundle: {unplaced:#?}\n{:?}", f.counters);
    let fats: Vec<&trace::Call> =
        calls(&records).into_iter().filter(|c| c.pid == pid && c.api.name() == "__hipRegisterFatBinary").collect();
    assert_eq!(fats.len() as u64, fat_binaries, "fat binaries registered vs bpftrace's count");
    assert!(fats.iter().all(|c| c.bundle.is_some()), "{fats:#?}");
    let mut per_file: BTreeMap<&str, usize> = BTreeMap::new();
    for k in &registered {
        *per_file.entry(k.code_file.as_deref().unwrap()).or_default() += 1;
    }
    let rocsparse = per_file.iter().find(|(f, _)| f.contains("librocsparse")).map_or(0, |(_, n)| *n);
    assert!(rocsparse > 10_000, "{per_file:?}");
    assert!(per_file.keys().any(|f| f.contains("librocrand")), "{per_file:?}");

    // Every GPU library the process maps is listed, each for what it is.
    let mapped: BTreeMap<String, Option<trace::GpuLibrary>> = records
        .iter()
        .filter_map(|r| if let Line::Mapping(m) = r { (m.pid == pid).then_some(m) } else { None })
        .map(|m| (m.path.rsplit('/').next().unwrap().to_owned(), m.gpu))
        .collect();
    let kind = |prefix: &str| *mapped.iter().find(|(n, _)| n.starts_with(prefix))?.1;
    assert_eq!(kind("librocsparse"), Some(trace::GpuLibrary::Code), "{mapped:?}");
    assert_eq!(kind("librocrand"), Some(trace::GpuLibrary::Code), "{mapped:?}");
    assert_eq!(kind("libhipsparse"), Some(trace::GpuLibrary::UsesRuntime), "{mapped:?}");
    assert_eq!(kind("libamdhip64"), Some(trace::GpuLibrary::Runtime), "{mapped:?}");
    assert_eq!(kind("libhsa-runtime64"), Some(trace::GpuLibrary::Runtime), "{mapped:?}");
    assert_eq!(kind("libc.so"), None, "{mapped:?}");
    let report = tracer(&["report", out.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&report.stdout);
    for lib in ["librocsparse.so", "libhipsparse.so", "librocrand.so"] {
        assert!(text.contains(lib), "{lib} not in the report:\n{text}");
    }
    println!(
        "sparse_rand: {} fat binaries, {functions} kernels named (bpftrace: {fat_binaries}, {functions}); tracer {} KiB peak, {} us CPU, queue peak {} bytes",
        fats.len(),
        f.counters["tracer_max_rss_kib"],
        f.counters["tracer_cpu_us"],
        f.counters["queue_peak_bytes"],
    );
    drop(std::fs::remove_dir_all(dir));
}

/// The functions whose calls bpftrace counts independently for `sparse_rand direct`: the program's four
/// hipSPARSE calls, the rocSPARSE functions hipSPARSE makes them with, its two rocSPARSE calls of its own,
/// and rocRAND's API, which it never calls.
const COUNTED: [(&str, &str); 8] = [
    ("libhipsparse.so.0.1", "hipsparseCreate"),
    ("libhipsparse.so.0.1", "hipsparseCreateMatDescr"),
    ("libhipsparse.so.0.1", "hipsparseDestroyMatDescr"),
    ("libhipsparse.so.0.1", "hipsparseDestroy"),
    ("librocsparse.so.0.1", "rocsparse_create_handle"),
    ("librocsparse.so.0.1", "rocsparse_destroy_handle"),
    ("librocsparse.so.0.1", "rocsparse_create_mat_descr"),
    ("librocsparse.so.0.1", "rocsparse_destroy_mat_descr"),
];

/// bpftrace's count of each function in [`COUNTED`] and of all of rocRAND's `rocrand_*` functions, for
/// `sparse_rand direct`.
fn bpftrace_calls() -> BTreeMap<String, u64> {
    let lib = "/usr/lib/x86_64-linux-gnu";
    let mut probes: Vec<String> = COUNTED.iter().map(|(file, f)| format!("uprobe:{lib}/{file}:{f}")).collect();
    probes.push(format!("uprobe:{lib}/librocrand.so.1.1:rocrand_*"));
    let script = format!("{} /pid == cpid/ {{ @[probe] = count(); }}", probes.join(", "));
    let cmd = format!("{} direct", fixture("sparse_rand").display());
    let (status, _, out) =
        run_measured(Command::new("bpftrace").args(["-q", "-e", &script, "-c", &cmd]), Duration::from_mins(3));
    assert!(status.success(), "bpftrace: {out}");
    // Lines like `@[uprobe:/usr/lib/x86_64-linux-gnu/libhipsparse.so.0.1:hipsparseCreate]: 1`.
    out.lines()
        .filter_map(|l| {
            let (probe, n) = l.strip_prefix("@[")?.split_once("]: ")?;
            Some((probe.rsplit(':').next()?.to_owned(), n.trim().parse().ok()?))
        })
        .collect()
}

#[test]
fn the_ledger_says_which_mapped_libraries_were_called_and_how_often() {
    let truth = bpftrace_calls();
    assert_eq!(truth.get("hipsparseCreate"), Some(&1), "bpftrace: {truth:?}");
    assert!(!truth.keys().any(|f| f.starts_with("rocrand_")), "the program never calls rocRAND: {truth:?}");

    let out = scratch_trace("ledger");
    let records = record_ok(&out, &["--", fixture("sparse_rand").to_str().unwrap(), "direct"]);
    // Each library's entry points were counted from before the command started: none was late.
    let counted: Vec<&trace::EntryLibrary> =
        records.iter().filter_map(|r| if let Line::EntryLibrary(l) = r { Some(l) } else { None }).collect();
    for name in ["libhipsparse", "librocsparse", "librocrand"] {
        let l = counted.iter().find(|l| l.path.contains(name)).unwrap_or_else(|| panic!("{name}: {counted:#?}"));
        assert!(l.attached_ts.is_some() && l.functions > 0, "{l:?}");
    }
    let v = tracer_json(&["report", "--json", out.to_str().unwrap()]);
    let p = v["processes"].as_array().unwrap().iter().find(|p| p["comm"] == "sparse_rand").expect("the process");
    let mapped = p["mapped"].as_array().unwrap();
    let row = |name: &str| {
        mapped
            .iter()
            .find(|m| m["path"].as_str().unwrap().rsplit('/').next().unwrap().starts_with(name))
            .unwrap_or_else(|| panic!("{name} not among {mapped:#?}"))
    };
    let function_calls = |name: &str, function: &str| -> u64 {
        row(name)["functions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|f| f["function"] == function)
            .map_or(0, |f| f["calls"].as_u64().unwrap())
    };
    // Every counted function equals bpftrace's count of it (absent: never called).
    for (file, function) in COUNTED {
        let name = file.split(".so").next().unwrap();
        assert_eq!(
            function_calls(name, function),
            truth.get(function).copied().unwrap_or(0),
            "{function}: tracer's count vs bpftrace's ({truth:?})"
        );
    }
    // hipSPARSE: exactly the program's four calls; rocSPARSE called (directly and by hipSPARSE); rocRAND
    // mapped and never called; the runtimes called.
    assert_eq!(row("libhipsparse")["status"], "called");
    assert_eq!(row("libhipsparse")["calls"], 4, "{:#}", row("libhipsparse"));
    assert_eq!(row("librocsparse")["status"], "called");
    assert!(function_calls("librocsparse", "rocsparse_create_mat_descr") >= 2, "one direct call, one by hipSPARSE");
    assert_eq!(row("librocrand")["status"], "mapped-only", "{:#}", row("librocrand"));
    assert_eq!(row("librocrand")["calls"], 0);
    assert_eq!(row("libamdhip64")["status"], "called");
    assert!(row("libamdhip64")["calls"].as_u64().unwrap() > 100, "its fat binaries registered");
    // The kernels each library's code holds: the registered ones, none run here (no GPU).
    assert!(row("librocsparse")["kernels"] == 0 && row("librocsparse")["executions"] == 0);
    assert_eq!(footer(&records).counters.get("entry_calls_lost"), Some(&0));

    // The library graph: Graphviz renders it, with the libraries and the dependency edge hipSPARSE ->
    // rocSPARSE.
    let o = tracer(&["export", out.to_str().unwrap(), "--format", "dot"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let graph = String::from_utf8(o.stdout).unwrap();
    let node = |name: &str| {
        graph.lines().find(|l| l.contains(&format!("label=\"{name}"))).and_then(|l| l.split('"').nth(1)).unwrap()
    };
    assert!(graph.contains(&format!("\"{}\" -> \"{}\"", node("libhipsparse"), node("librocsparse"))), "{graph}");
    let mut dot = Command::new("dot")
        .arg("-Tsvg")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("graphviz's dot (cargo xtask setup installs it)");
    std::io::Write::write_all(&mut dot.stdin.take().unwrap(), graph.as_bytes()).unwrap();
    let svg = dot.wait_with_output().unwrap();
    assert!(svg.status.success());
    let svg = String::from_utf8_lossy(&svg.stdout);
    assert!(svg.contains("<svg") && svg.contains("libhipsparse.so") && svg.contains("mapped only"), "{svg}");
}
