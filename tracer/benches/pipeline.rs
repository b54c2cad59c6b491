//! The user-space path alone: ring-buffer bytes → decode → attribute → trace writer, no traps.
//! Prints events per second on one core; with `--big PATH`, also writes a 10 M-launch compressed trace
//! for the analysis benchmark. Run by `cargo xtask bench` (`cargo bench -p tracer --bench pipeline`).
#![expect(
    unused_crate_dependencies,
    clippy::print_stdout,
    clippy::float_arithmetic,
    clippy::cast_precision_loss,
    reason = "a benchmark prints rates computed from timings"
)]

use std::time::Instant;

use tracer::testing::bench::Pipeline;
use tracer_common::{ARG_SLOTS, ApiFunc, CALL_ENTRY_ONLY, CallRecord, NAME_MAX, NameRecord, RecordHeader, RecordKind};

const PID: u64 = 0x3fff_ff00; // no such process: /proc lookups fail fast, as for a process that ended

fn bytes_of<T: bytemuck::Pod>(v: &T) -> Vec<u8> {
    bytemuck::bytes_of(v).to_vec()
}

/// A stream shaped like a decode loop: 8 registered kernels, launches cycling over them with a few
/// shapes, one synchronize-like call every 8 launches. Made as it is consumed (100 M events do not fit
/// in memory as bytes).
fn stream(n: usize) -> impl Iterator<Item = Vec<u8>> {
    (0..8u64).map(register).chain((0..n as u64).map(call))
}

fn register(k: u64) -> Vec<u8> {
    let mut name = [0u8; NAME_MAX];
    let s = format!("_Z13mul_mat_vec_qIL9ggml_type{}ELi1EEvPKvS2_PKiPfjj", 10 + k);
    name[..s.len()].copy_from_slice(s.as_bytes());
    bytes_of(&NameRecord {
        header: RecordHeader {
            kind: RecordKind::Name as u16,
            func: ApiFunc::HipRegisterFunction as u16,
            lib: 1,
            pid_tgid: (PID << 32) | PID,
            ts_ns: k,
        },
        handle: 0x1000 + k * 8,
        module: 0x99,
        len: s.len() as u32,
        flags: 0,
        name,
    })
}

fn call(i: u64) -> Vec<u8> {
    // Syncs are recorded at entry by a one-trap probe; launches at return, with duration and result.
    let (func, args, flags) = if i % 9 == 8 {
        (ApiFunc::HipStreamSynchronize, [0u64; ARG_SLOTS], CALL_ENTRY_ONLY)
    } else {
        let k = i % 8;
        let mut a = [0u64; ARG_SLOTS];
        a[0] = 0x1000 + k * 8;
        a[1] = (1 << 32) | (512 + 64 * (i % 3));
        a[2] = 1;
        a[3] = (4 << 32) | 32;
        a[4] = 1;
        a[5] = 0x7ffd_0000;
        (ApiFunc::HipLaunchKernel, a, 0)
    };
    bytes_of(&CallRecord {
        header: RecordHeader {
            kind: RecordKind::Call as u16,
            func: func as u16,
            lib: 1,
            pid_tgid: (PID << 32) | PID,
            ts_ns: 1_000_000 + i * 16_667,
        },
        duration_ns: if flags == 0 { 6_000 + i % 500 } else { 0 },
        ret: 0,
        out: 0,
        caller: 0,
        flags,
        args,
    })
}

fn run<E: AsRef<[u8]>>(
    events: impl IntoIterator<Item = E>,
    path: &std::path::Path,
    compress: bool,
    metrics: bool,
) -> (usize, f64) {
    let mut pipe = Pipeline::new(path, compress, metrics).expect("the bench trace is opened");
    let t = Instant::now();
    let mut n = 0;
    for e in events {
        n += 1;
        pipe.feed(e.as_ref()).expect("a record decodes and is written");
    }
    pipe.finish().expect("the footer is written");
    (n, t.elapsed().as_secs_f64())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    std::fs::create_dir_all(&dir).expect("the bench directory is made");
    let events: Vec<Vec<u8>> = stream(2_000_000).collect();
    // The first run, as a recording meets its events (row 3).
    let (n, secs) = run(&events, &dir.join("pipeline.jsonl"), false, false);
    println!("pipeline events={n} seconds={secs:.3} events_per_s={:.0}", n as f64 / secs);
    // What the metrics tap adds per event: without and with it, alternately, three times each, the fastest
    // run of each (warm: the difference is the tap's, not the allocator's or the page cache's).
    let mut best = [f64::MAX; 2];
    for _ in 0..3 {
        for (i, metrics) in [false, true].into_iter().enumerate() {
            best[i] = best[i].min(run(&events, &dir.join("pipeline.jsonl"), false, metrics).1);
        }
    }
    println!(
        "pipeline_warm events={n} plain_s={:.3} metrics_s={:.3} metrics_ns_per_event={:.1}",
        best[0],
        best[1],
        (best[1] - best[0]) * 1e9 / n as f64
    );
    drop(std::fs::remove_file(dir.join("pipeline.jsonl")));
    // Long traces for the analysis benchmarks: `--big PATH` (10 M launches and calls), `--huge PATH`
    // (100 M), both compressed.
    for (flag, events) in [("--big", 10_000_000), ("--huge", 100_000_000)] {
        if let Some(i) = args.iter().position(|a| a == flag) {
            let path = std::path::PathBuf::from(&args[i + 1]);
            let (n, secs) = run(stream(events), &path, true, false);
            println!("{} events={n} seconds={secs:.3} path={}", &flag[2..], path.display());
        }
    }
}
