//! The trace file: `schema` (what each line holds), `writer`, `reader` (with `scan`, its fast
//! path for the writer's own launch and call lines), and `model`, what every reader of it shares.

pub(crate) mod classify;
pub(crate) mod counted;
pub(crate) mod event;
mod live;
pub(crate) mod model;
mod parts;
mod reader;
mod retention;
pub(crate) mod runs;
pub(crate) mod runtimes;
mod scan;
mod schema;
mod sink;
mod writer;

pub(crate) use live::{Endpoint, Serve, Tap};
pub(crate) use parts::Input;
pub use reader::{ReadStatus, read_file, read_from};
pub use schema::*;
pub(crate) use sink::Sink;
pub(crate) use writer::Rotation;
pub use writer::Writer;

#[cfg(test)]
mod tests {
    use std::io::{Read as _, Write as _};

    use super::{
        reader::{MAX_BLANK_LINES, MAX_LINE},
        *,
    };
    use std::{fs::File, path::Path};

    fn header() -> Line {
        Line::Header(Box::new(Header { format: FORMAT.into(), schema: SCHEMA, ..Default::default() }))
    }

    fn launch(i: u32) -> Line {
        Line::Launch(Launch {
            tid: 43,
            lib: 1,
            handle: 0x5555_0000 + u64::from(i),
            grid: [i, 2, 3],
            block: [64, 1, 1],
            shmem: 128,
            ret: 101,
            dur: 5000,
            entry_only: i.is_multiple_of(2),
            ..Launch::for_test(42, Some(i), 1000 + u64::from(i))
        })
    }

    fn write_trace(path: &Path, compress: bool, n: u32, footer: bool) -> Vec<Line> {
        let file = File::create(path).unwrap();
        let mut w = Writer::new(file, compress).unwrap();
        let mut all = vec![header()];
        w.write(&all[0]).unwrap();
        for i in 0..n {
            let r = launch(i);
            w.write(&r).unwrap();
            all.push(r);
        }
        if footer {
            w.finish(Footer { stop: Stop::Signal, ..Default::default() }).unwrap();
        } else {
            w.flush().unwrap();
        }
        all
    }

    fn tmp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("tracer-trace-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    #[test]
    fn an_earlier_recordings_parts_are_found_but_not_links_or_other_names() {
        let dir = std::env::temp_dir().join(format!("tracer-earlier-parts-{}", std::process::id()));
        drop(std::fs::remove_dir_all(&dir));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("run.jsonl.zst");
        assert!(Rotation::earlier_parts(&out).is_empty());
        for name in ["run.0000.jsonl.zst", "run.0002.jsonl.zst", "run.00x1.jsonl.zst", "other.0001.jsonl.zst"] {
            std::fs::write(dir.join(name), "").unwrap();
        }
        std::os::unix::fs::symlink("/dev/null", dir.join("run.0001.jsonl.zst")).unwrap();
        assert_eq!(Rotation::earlier_parts(&out), [dir.join("run.0002.jsonl.zst")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn round_trip_plain_and_compressed() {
        for compress in [false, true] {
            let path = tmp(&format!("rt-{compress}.jsonl"));
            let written = write_trace(&path, compress, 100, true);
            let (read, status) = read_file(&path).unwrap();
            assert_eq!(&read[..written.len()], &*written);
            let Some(Line::Footer(f)) = read.last() else { panic!("no footer") };
            assert_eq!(f.records["launch"], 100);
            assert_eq!(f.records["header"], 1);
            let lines = written.len() as u64 + 1;
            assert_eq!(status, ReadStatus { has_footer: true, lines, bytes: status.bytes, ..Default::default() });
            assert!(status.warning().is_none());
        }
    }

    #[test]
    fn repeated_launches_are_written_as_runs_and_read_back_as_every_launch() {
        let path = tmp("runs.jsonl.zst");
        let mut w = Writer::new(File::create(&path).unwrap(), true).unwrap();
        let mut h = Header { format: FORMAT.into(), schema: SCHEMA, ..Default::default() };
        h.options.repeats = true;
        let mut all = vec![Line::Header(Box::new(h))];
        // Ten layers of three kernels, 10 ns apart, an exit between the fifth and the sixth; the last layer's
        // third differs.
        for layer in 0..10u32 {
            for k in 0..3u32 {
                let ts = u64::from(30 * layer + 10 * k);
                let grid = if layer == 9 && k == 2 { [7, 7, 7] } else { [k, 2, 3] };
                let handle = 0x5555_0000 + u64::from(k);
                all.push(Line::Launch(Launch { tid: 43, handle, grid, ..Launch::for_test(42, Some(k), ts) }));
            }
            if layer == 4 {
                all.push(Line::Exit(Exit { ts: 145, pid: 9, ..Default::default() }));
            }
        }
        for r in &all {
            w.write(r).unwrap();
        }
        w.finish(Footer::default()).unwrap();
        let (read, status) = read_file(&path).unwrap();
        assert_eq!(status.unreadable_records, 0);
        // The reader hands over each `repeat` line, then the launches it stands for: without the lines, what
        // was written, in order, the repeats' times here as they were (evenly spaced).
        let runs: Vec<&Repeat> =
            read.iter().filter_map(|r| if let Line::Repeat(x) = r { Some(x) } else { None }).collect();
        let counts: Vec<(u32, u32)> = runs.iter().map(|r| (r.count, r.period)).collect();
        assert_eq!(counts, [(12, 3), (14, 3)]);
        let back: Vec<Line> = read.into_iter().filter(|r| !matches!(r, Line::Repeat(_) | Line::Footer(_))).collect();
        assert_eq!(back, all);
        let Some(Line::Footer(f)) = read_file(&path).unwrap().0.pop() else { panic!("no footer") };
        assert_eq!((f.records["launch"], f.records["repeat"]), (30, 2));
        // The file holds the first layer and one more launch whole.
        let text = String::from_utf8(zstd::decode_all(File::open(&path).unwrap()).unwrap()).unwrap();
        assert_eq!(text.matches("\"type\":\"launch\"").count(), 4);
    }

    #[test]
    fn a_code_directory_and_a_load_by_path_round_trip() {
        let path = tmp("code-dir.jsonl");
        let dir = CodeDir {
            ts: 5,
            pid: 7,
            path: "/opt/rocm/lib/rocblas/library".into(),
            count: 3,
            files: vec!["Kernels_0.co".into(), "TensileLibrary.dat".into()],
            cut: true,
            error: None,
        };
        let o = event::Origin { ts: 5, pid: 7, tid: 7, lib: 1 };
        let load = Call {
            file: Some("/opt/rocm/lib/rocblas/library/Kernels_0.co".into()),
            ..Call::new(o, ApiFunc::HipModuleLoad, 101, 9)
        };
        let records = vec![header(), Line::CodeDir(dir), Line::Call(Box::new(load))];
        let mut w = Writer::new(File::create(&path).unwrap(), false).unwrap();
        for r in &records {
            w.write(r).unwrap();
        }
        w.finish(Footer::default()).unwrap();
        let (read, _) = read_file(&path).unwrap();
        assert_eq!(&read[..3], &*records);
        // An unlisted directory says why, and a listing of older fields still reads.
        let line = r#"{"type":"code_dir","ts":1,"pid":2,"path":"/x","count":0,"files":[],"error":"cannot open /x"}"#;
        let Line::CodeDir(d) = serde_json::from_str(line).unwrap() else { panic!() };
        assert_eq!((d.error.as_deref(), d.cut), (Some("cannot open /x"), false));
    }

    #[test]
    fn cut_at_every_byte_reads_complete_records() {
        let path = tmp("cut-src.jsonl");
        write_trace(&path, false, 5, true);
        let bytes = std::fs::read(&path).unwrap();
        let line_ends: Vec<usize> =
            bytes.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i + 1).collect();
        let cut = tmp("cut.jsonl");
        for at in 1..bytes.len() {
            std::fs::write(&cut, &bytes[..at]).unwrap();
            let complete = line_ends.iter().filter(|&&e| e <= at).count();
            match read_file(&cut) {
                Ok((records, status)) => {
                    assert_eq!(records.len(), complete, "cut at {at}");
                    let last_end = line_ends.iter().rfind(|&&e| e <= at).copied().unwrap_or(0);
                    assert_eq!(status.cut_bytes, (at - last_end) as u64, "cut at {at}");
                    assert_eq!(status.has_footer, complete == line_ends.len());
                }
                Err(e) => {
                    assert_eq!(complete, 0, "cut at {at}: {e}");
                    assert!(e.to_string().contains("no complete record"), "{e}");
                }
            }
        }
    }

    #[test]
    fn killed_compressed_writer_keeps_flushed_records() {
        let path = tmp("killed.jsonl.zst");
        let written = write_trace(&path, true, 50, false);
        // Append half a zstd block, as a writer killed mid-write would leave.
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[0x10, 0x20, 0x30]).unwrap();
        let (read, status) = read_file(&path).unwrap();
        assert_eq!(read, written);
        assert!(!status.has_footer);
        assert!(status.warning().is_some());
    }

    #[test]
    fn a_compressed_file_cut_mid_frame_reads_up_to_the_cut_and_says_how_much() {
        let path = tmp("whole.jsonl.zst");
        write_trace(&path, true, 20_000, true);
        let bytes = std::fs::read(&path).unwrap();
        let cut = tmp("cut.jsonl.zst");
        std::fs::write(&cut, &bytes[..bytes.len() * 3 / 5]).unwrap();
        let (records, status) = read_file(&cut).unwrap();
        assert!(status.stream_cut && !status.has_footer, "{status:?}");
        assert!(records.len() > 1000 && records.len() < 20_000, "{}", records.len());
        assert_eq!(status.lines, records.len() as u64);
        let warning = status.warning().unwrap();
        assert!(
            warning.starts_with(&format!(
                "the trace was not closed normally (the tracer was killed, or its disk filled?): the file is cut in the middle of a compressed frame: the {} complete lines before the cut ({} bytes decompressed) were read",
                records.len(),
                status.bytes
            )),
            "{warning}"
        );
    }

    #[test]
    fn rejects_files_that_are_not_traces() {
        let cases: [(&str, &[u8], &str); 5] = [
            ("empty", b"", "is empty"),
            ("text", b"hello world\n", "not a tracer trace file"),
            ("json", b"{\"type\":\"launch\"}\n", "not a tracer trace file"),
            ("other-header", b"{\"type\":\"header\",\"format\":\"other\",\"schema\":1,\"tracer_version\":\"\",\"host\":\"\",\"kernel_release\":\"\",\"start_unix_ns\":0,\"start_mono_ns\":0,\"options\":{\"pids\":[],\"command\":[],\"libs\":[],\"duration_s\":null,\"filter\":\"\",\"ring_bytes\":0},\"units\":{}}\n", "not a tracer trace file"),
            ("binary", &[0u8, 159, 146, 150, b'\n'], "not a tracer trace file"),
        ];
        for (name, bytes, want) in cases {
            let p = tmp(name);
            std::fs::write(&p, bytes).unwrap();
            let err = read_file(&p).unwrap_err().to_string();
            assert!(err.contains(want), "{name}: {err}");
        }
    }

    #[test]
    fn rejects_newer_schema_and_corrupt_lines() {
        let p = tmp("newer.jsonl");
        let mut h = Header { format: FORMAT.into(), schema: SCHEMA + 1, ..Default::default() };
        std::fs::write(&p, format!("{}\n", serde_json::to_string(&Line::Header(Box::new(h.clone()))).unwrap()))
            .unwrap();
        let err = read_file(&p).unwrap_err().to_string();
        assert!(err.contains("use a newer tracer"), "{err}");

        h.schema = SCHEMA;
        let mut text = format!("{}\n", serde_json::to_string(&Line::Header(Box::new(h))).unwrap());
        text += "{\"type\":\"launch\",\"garbage\n";
        text.push_str(&serde_json::to_string(&launch(1)).unwrap());
        text.push('\n');
        std::fs::write(&p, &text).unwrap();
        let err = read_file(&p).unwrap_err().to_string();
        assert!(err.contains("line 2 is not a valid trace record"), "{err}");

        // A call of an API function a newer tracer probes is skipped and counted the same way.
        let future_api = text.replace("{\"type\":\"launch\",\"garbage\n", "{\"type\":\"call\",\"ts\":1,\"pid\":1,\"tid\":1,\"lib\":1,\"api\":\"hipFutureCall\",\"ret\":0,\"dur\":1}\n");
        std::fs::write(&p, &future_api).unwrap();
        let (records, status) = read_file(&p).unwrap();
        assert_eq!((records.len(), status.unknown_records), (2, 1));

        // A record type from a newer tracer is skipped and counted, not an error.
        let text = text.replace("{\"type\":\"launch\",\"garbage\n", "{\"type\":\"future_record\",\"queue\":1}\n");
        std::fs::write(&p, &text).unwrap();
        let (records, status) = read_file(&p).unwrap();
        assert_eq!((records.len(), status.unknown_records), (2, 1));
    }

    #[test]
    fn blank_lines_values_not_known_and_unreadable_records_do_not_end_the_reading() {
        let p = tmp("odd.jsonl");
        let mut text = format!("{}\n\n   \n", serde_json::to_string(&header()).unwrap());
        // A probe as builds before 2026-11-22 14:47 wrote one whose symbol was missing: kept, kind unknown.
        text += "{\"type\":\"probe\",\"lib\":1,\"api\":\"hipExtModuleLaunchKernel\",\"offset\":null,\"kind\":\"\",\"error\":\"symbol not exported by this library\"}\n";
        // Values a later build may write: kept, as unknown.
        let future = serde_json::to_string(&launch(1)).unwrap().replace("\"blocks\"", "\"clusters\"");
        text += &future;
        text.push('\n');
        text += "{\"type\":\"kernel\",\"id\":1,\"pid\":1,\"handle\":1,\"module\":0,\"name\":\"k\",\"demangled\":\"k\",\"source\":\"telepathy\",\"truncated\":false,\"ts\":1}\n";
        // A record of a known type this build cannot take: skipped, counted, the first one said.
        text += "{\"type\":\"exit\",\"ts\":1,\"pid\":\"seven\",\"code\":null,\"signal\":null}\n";
        // Every kind is known: a job of another shape is unreadable too, not a kind from a later build.
        text += "{\"type\":\"job\",\"ts\":\"soon\"}\n";
        std::fs::write(&p, &text).unwrap();
        let (records, status) = read_file(&p).unwrap();
        assert_eq!(records.len(), 4, "{records:?}");
        assert_eq!(status.unknown_records, 0, "{status:?}");
        assert!(matches!(&records[1], Line::Probe(p) if p.kind == ProbeKind::Unknown));
        assert!(matches!(&records[2], Line::Launch(l) if l.grid_unit == event::GridUnit::Unknown));
        assert!(matches!(&records[3], Line::Kernel(k) if k.source == Source::Unknown && k.name == "k"));
        assert_eq!(status.unreadable_records, 2);
        assert!(status.first_unreadable.as_deref().is_some_and(|e| e.starts_with("line 7:")), "{status:?}");
    }

    /// Endless newlines after `head`, counting the bytes handed out.
    struct Newlines {
        head: std::io::Cursor<Vec<u8>>,
        given: std::sync::Arc<std::sync::atomic::AtomicU64>,
    }

    impl std::io::Read for Newlines {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = match self.head.read(buf)? {
                0 => {
                    buf.fill(b'\n');
                    buf.len()
                }
                n => n,
            };
            self.given.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
            Ok(n)
        }
    }

    #[test]
    fn two_traces_joined_into_one_file_are_refused_not_read_as_one() {
        let one =
            format!("{}\n{}\n", serde_json::to_string(&header()).unwrap(), serde_json::to_string(&launch(1)).unwrap());
        let p = tmp("joined.jsonl");
        std::fs::write(&p, format!("{one}{one}")).unwrap();
        let err = read_file(&p).unwrap_err().to_string();
        assert!(err.contains("line 3 is a second tracer header"), "{err}");
        std::fs::write(&p, &one).unwrap();
        assert_eq!(read_file(&p).unwrap().0.len(), 2);
    }

    #[test]
    fn a_run_of_blank_lines_past_the_bound_is_refused_after_reading_little() {
        let head = format!("{}\n", serde_json::to_string(&header()).unwrap());
        let record = format!("{}\n", serde_json::to_string(&launch(1)).unwrap());
        // 1024 blank or whitespace-only lines in a row read; 1025 do not.
        let p = tmp("blank-runs.jsonl");
        let run = |n: usize| (0..n).map(|i| if i % 2 == 0 { "\n" } else { " \t \r\n" }).collect::<String>();
        let bound = MAX_BLANK_LINES as usize;
        std::fs::write(&p, format!("{head}{}{record}{}{record}", run(bound), run(bound))).unwrap();
        let (records, _) = read_file(&p).unwrap();
        assert_eq!(records.len(), 3);
        std::fs::write(&p, format!("{head}{record}{}{record}", run(bound + 1))).unwrap();
        let err = read_file(&p).unwrap_err().to_string();
        assert_eq!(
            err,
            format!("{}: more than 1024 blank lines in a row at line 3; this is not a tracer trace", p.display())
        );
        // Fewer lines of more whitespace: bounded in bytes too.
        let wide = format!("{}\n", " ".repeat(MAX_LINE / 4));
        std::fs::write(&p, format!("{head}{}{record}", wide.repeat(5))).unwrap();
        let err = read_file(&p).unwrap_err().to_string();
        assert!(
            err.ends_with("more than 1048576 bytes of blank lines in a row at line 2; this is not a tracer trace"),
            "{err}"
        );

        // Endless newlines: refused once the first chunk is seen, before any is parsed.
        let given = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let endless =
            Newlines { head: std::io::Cursor::new(head.clone().into_bytes()), given: std::sync::Arc::clone(&given) };
        let started = std::time::Instant::now();
        let mut n = 0;
        let err = read_from(endless, Path::new("endless"), |_| n += 1).unwrap_err().to_string();
        assert_eq!(err, "endless: more than 1024 blank lines in a row at line 2; this is not a tracer trace");
        let read = given.load(std::sync::atomic::Ordering::Relaxed);
        assert!(read < 4 << 20, "{read} bytes read");
        println!("endless newlines refused after {read} bytes, {:?}", started.elapsed());

        // The same as zstd: 2 GiB of newlines in frames of 64 MiB, a few KiB compressed.
        let mut bomb = zstd::encode_all(head.as_bytes(), 1).unwrap();
        let frame = zstd::encode_all(std::io::repeat(b'\n').take(64 << 20), 1).unwrap();
        for _ in 0..32 {
            bomb.extend_from_slice(&frame);
        }
        let p = tmp("bomb.jsonl.zst");
        std::fs::write(&p, &bomb).unwrap();
        let started = std::time::Instant::now();
        let err = read_file(&p).unwrap_err().to_string();
        assert!(err.ends_with("more than 1024 blank lines in a row at line 2; this is not a tracer trace"), "{err}");
        println!("{} compressed bytes of 2 GiB of newlines refused in {:?}", bomb.len(), started.elapsed());
    }

    #[test]
    fn huge_line_is_refused_without_buffering_it_all() {
        let p = tmp("huge.jsonl");
        let mut text = format!("{}\n", serde_json::to_string(&header()).unwrap());
        text += &"x".repeat(MAX_LINE + 10);
        text += "\n";
        std::fs::write(&p, text).unwrap();
        let err = read_file(&p).unwrap_err().to_string();
        assert!(err.contains("longer than"), "{err}");
    }

    #[test]
    fn batches_step_calls_and_jobs_round_trip_in_either_key_order() {
        let batch = Line::Batch(StepBatch {
            ts: 5,
            pid: 42,
            n_tokens: 24,
            runs: vec![
                SeqRun { seq: 0, pos: Some(12), tokens: 1, outputs: 1, last_output: true, shared: 0 },
                SeqRun { seq: 1, pos: Some(0), tokens: 23, outputs: 1, last_output: true, shared: 0 },
            ],
            positions: true,
            seq_ids: true,
            previous_calls: [(1, 4), (15, 2)].into_iter().collect(),
            ..StepBatch::default()
        });
        let calls =
            Line::StepCalls(StepCalls { pid: 42, step: 9, calls: std::iter::once((2, 7)).collect(), at_pass: None });
        let job = Line::Job(Job {
            ts: 7,
            pid: 42,
            tid: 43,
            stage: JobStage::Queue,
            context: 0x2a,
            seqno: 3,
            client: Some(5),
            ring: Some("comp_1.0.0".into()),
        });
        for rec in [batch, calls, job] {
            let line = serde_json::to_string(&rec).unwrap();
            assert!(line.starts_with(r#"{"type":""#), "{line}");
            assert_eq!(reader::parse_line_for_tests(line.as_bytes()).unwrap(), rec);
            // The same object with its type last: serde's tagged-enum path.
            let mut v: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&line).unwrap();
            let t = v.remove("type").unwrap();
            v.insert("type".into(), t);
            let moved = serde_json::to_string(&v).unwrap();
            assert_eq!(reader::parse_line_for_tests(moved.as_bytes()).unwrap(), rec, "{moved}");
        }
    }
}
