//! Runs of exact repeats on Debian's real libamdhip64: a real HIP program's "decoder layers" recorded with
//! runs (the default) read back as the same launches, in the same order, as with every launch written
//! (`--every-launch`); the kernel counted most of them into runs instead of writing them, at the entry-only
//! launch probe and at the return probe (`--all-calls`), and the recorder wrote each of those runs as it came.
//! Only libamdhip64 is probed: without a GPU, HIP
//! 5.2 calls `hsa_init` inside every failing launch, whose record would end each run.

use integration_tests::*;

/// Launches `mini_runner layers 64` makes: 64 layers of four.
const LAUNCHES: usize = 256;

/// A launch as compared: every field a trace writes but its time, its duration and its handle (an address in
/// a program loaded at another place each run), with its kernel's name.
type Shape = (String, String, [u32; 3], [u32; 3], u64, u64, i32, bool);

/// What a recording of the layers gave: its launches as compared, its footer's counters, its records, its
/// file.
type Layers = (Vec<Shape>, std::collections::BTreeMap<String, u64>, Vec<Line>, std::path::PathBuf);

/// Records `mini_runner layers 64` with `flags`.
fn layers(test: &str, flags: &[&str]) -> Layers {
    let out = scratch_trace(test);
    let runner = fixture("mini_runner");
    let mut args =
        vec!["record", "-q", "-o", out.to_str().unwrap(), "--lib", "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5"];
    args.extend_from_slice(flags);
    args.extend(["--", runner.to_str().unwrap(), "layers", "64"]);
    let o = tracer(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let records = read_trace(&out);
    let shapes = launches(&records)
        .into_iter()
        .map(|l| {
            let name = kernel_name(&records, l).to_owned();
            (l.api.name().to_owned(), name, l.grid, l.block, l.shmem, l.stream, l.ret, l.entry_only)
        })
        .collect();
    let counters = footer(&records).counters.clone();
    (shapes, counters, records, out)
}

fn repeat_lines(records: &[Line]) -> Vec<&trace::Repeat> {
    records.iter().filter_map(|r| if let Line::Repeat(x) = r { Some(x) } else { None }).collect()
}

#[test]
fn a_loop_of_layers_counted_into_runs_reads_back_as_every_launch_written() {
    for (name, flags) in [("runs-entry", &[][..]), ("runs-return", &["--all-calls"][..])] {
        let (with_runs, counters, records, _) = layers(name, flags);
        let mut every_flags = flags.to_vec();
        every_flags.push("--every-launch");
        let (every, every_counters, every_records, _) = layers(&format!("{name}-every"), &every_flags);
        // The same launches in the same order, every field the trace writes equal.
        assert_eq!(with_runs.len(), LAUNCHES, "{name}");
        assert_eq!(with_runs, every, "{name}");
        // Probed at return (`--all-calls`), each carries the runtime's error; at entry, none.
        assert!(with_runs.iter().all(|s| s.7 == flags.is_empty()), "{name}: {with_runs:?}");
        // The kernel wrote few records: after the first layer, the launches repeat the layer before, but
        // every eighth layer's add (a different grid) and the syncs between.
        let n = |c: &std::collections::BTreeMap<String, u64>, k: &str| c.get(k).copied().unwrap_or(0);
        assert!(n(&counters, "launches_in_kernel_runs") >= 200, "{name}: {counters:?}");
        assert!(n(&counters, "ring_records") * 4 < n(&every_counters, "ring_records"), "{name}: {counters:?}");
        assert_eq!(n(&every_counters, "launches_in_kernel_runs"), 0, "{name}");
        assert_eq!(n(&counters, "run_launches_lost") + n(&counters, "run_threads_full"), 0, "{name}");
        // The file says so: its header, and `repeat` lines standing for most launches.
        let Line::Header(h) = &records[0] else { panic!("no header") };
        let Line::Header(every_h) = &every_records[0] else { panic!("no header") };
        assert!(h.options.repeats && !every_h.options.repeats, "{name}");
        let repeats = repeat_lines(&records);
        assert!(repeats.iter().map(|r| r.count as usize).sum::<usize>() >= 200, "{name}: {repeats:?}");
        // Each repeats whole layers (four launches each), up to the eight layers between two of the different
        // adds.
        assert!(repeats.iter().all(|r| r.period % 4 == 0 && r.period <= 32), "{name}: {repeats:?}");
        // Nothing attributes a layer's launches differently once it has been launched: every run the kernel
        // counted is written as it came, one line, no launch of it made and collapsed again.
        assert!(n(&counters, "runs_counted_in_kernel") >= 1, "{name}: {counters:?}");
        assert_eq!(
            n(&counters, "runs_written_as_counted"),
            n(&counters, "runs_counted_in_kernel"),
            "{name}: {counters:?}"
        );
        assert!(repeat_lines(&every_records).is_empty(), "{name}");
        // The footer counts the launches the file stands for, whole or within runs.
        assert_eq!(footer(&records).records.get("launch"), Some(&(LAUNCHES as u64)), "{name}");
    }
}

#[test]
fn a_report_counts_repeated_launches_as_launches_and_says_their_times_were_not_kept() {
    let (.., out) = layers("runs-report", &[]);
    let v = tracer_json(&["report", "--json", out.to_str().unwrap()]);
    let launched: u64 =
        v["processes"][0]["kernels"].as_array().unwrap().iter().map(|k| k["launches"].as_u64().unwrap_or(0)).sum();
    assert_eq!(launched, LAUNCHES as u64, "{v:#}");
    assert!(v["trace"]["launches_repeated"].as_u64().unwrap() >= 200, "{v:#}");
    let text = tracer(&["report", out.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("launches came as exact repeats of earlier ones on their thread"), "{text}");
}
