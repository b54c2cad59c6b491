//! The reader's bound on the launches `repeat` lines stand for, and the lines it counts as unreadable or
//! refuses in one sentence: a header's `schema` no tracer writes, a second `type`, a bad string.

use std::{fmt::Write as _, io::Write as _, path::Path};

use super::bound::{FLOOR, LAUNCHES_PER_STORED_BYTE, allowance};
use crate::trace::{FORMAT, Header, Launch, Line, Options, ReadStatus, Repeat, SCHEMA, read_from};

fn header_line() -> String {
    let h = Header {
        format: FORMAT.into(),
        schema: SCHEMA,
        options: Options { repeats: true, ..Options::default() },
        ..Header::default()
    };
    serde_json::to_string(&Line::Header(Box::new(h))).unwrap()
}

fn launch_line(ts: u64) -> String {
    serde_json::to_string(&Line::Launch(Launch { tid: 7, ..Launch::for_test(7, Some(1), ts) })).unwrap()
}

/// A header, a launch, then `lines` repeats of it of 2^20 launches each: a repeat-line bomb.
fn bomb(lines: u64) -> Vec<u8> {
    let mut text = format!("{}\n{}\n", header_line(), launch_line(1));
    for i in 0..lines {
        let r = Repeat { ts: 2 + i, pid: 7, tid: 7, last_ts: 2 + i, count: 1 << 20, period: 1, dur: 0 };
        text += &serde_json::to_string(&Line::Repeat(r)).unwrap();
        text.push('\n');
    }
    text += &launch_line(1 << 40);
    text.push('\n');
    text.into_bytes()
}

fn read(bytes: &[u8]) -> (Vec<Line>, ReadStatus) {
    let mut records = Vec::new();
    let status = read_from(bytes, Path::new("t.jsonl"), |r| records.push(r)).unwrap();
    (records, status)
}

fn launches(records: &[Line]) -> u64 {
    records.iter().filter(|r| matches!(r, Line::Launch(_))).count() as u64
}

#[test]
fn the_allowance_grows_with_the_stored_bytes_between_its_floor_and_its_cap() {
    assert_eq!(allowance(0), FLOOR);
    assert_eq!(allowance(1000), FLOOR);
    assert_eq!(allowance(1 << 20), (1 << 20) * LAUNCHES_PER_STORED_BYTE);
    assert_eq!(allowance(u64::MAX), 1 << 32);
}

#[test]
fn a_repeat_bomb_is_expanded_to_its_allowance_and_the_rest_counted_and_said() {
    // 2 000 lines of 2^20 launches in about 140 KB plain, 2 KB of zstd.
    let plain = bomb(2000);
    let packed = zstd::encode_all(plain.as_slice(), 3).unwrap();
    for (what, bytes) in [("plain", &plain), ("zstd", &packed)] {
        let (records, status) = read(bytes);
        let stored = u64::try_from(bytes.len()).unwrap();
        let cut = &status.repeats_cut;
        // The launch lines, and the allowance of repeats; the rest counted, not made.
        assert_eq!(launches(&records), 2 + allowance(stored), "{what}");
        assert_eq!(cut.launches, 2000 * (1 << 20) - allowance(stored), "{what}");
        assert_eq!((cut.stored_bytes, cut.allowance), (stored, allowance(stored)), "{what}");
        assert_eq!(cut.first_line, Some(3 + allowance(stored) / (1 << 20)), "{what}");
        // Every repeat line is still handed over; the last launch after the cut is read as it was.
        assert_eq!(records.iter().filter(|r| matches!(r, Line::Repeat(_))).count(), 2000, "{what}");
        assert!(matches!(records.last(), Some(Line::Launch(l)) if l.ts == 1 << 40));
        let said = status.warnings().join(" ");
        assert!(said.contains(&format!("{} launches that {} `repeat` lines", cut.launches, cut.lines)), "{said}");
        println!("{what}: {stored} bytes, {} launches made, {} cut", launches(&records), cut.launches);
    }
}

#[test]
fn repeats_within_the_allowance_are_all_made_and_nothing_is_said() {
    let (records, status) = read(&bomb(1));
    assert_eq!(launches(&records), 2 + (1 << 20));
    assert_eq!(status.repeats_cut.launches, 0);
    assert_eq!(status.repeats_cut.sentence(), None);
}

#[test]
fn the_launches_after_a_cut_line_repeat_what_its_launches_would_have_left() {
    // Three kernels, then five runs of period 3 and 2^20 launches in the first chunk read (256 KiB: an
    // allowance of 4 Mi launches, under the 5 Mi claimed), then 700 KB of records of a later build, then a
    // run of 2: its handles follow the whole of the five runs, not the launches made of them.
    let mut text = header_line();
    text.push('\n');
    for h in [10, 11, 12] {
        let l = Launch { tid: 7, handle: h, ..Launch::for_test(7, Some(1), h) };
        text += &serde_json::to_string(&Line::Launch(l)).unwrap();
        text.push('\n');
    }
    let run = |count, ts| Repeat { ts, pid: 7, tid: 7, last_ts: ts, count, period: 3, dur: 0 };
    let runs = (0..5).map(|i| run(1 << 20, 100 + i));
    for r in runs.chain(std::iter::once(run(2, 1 << 30))) {
        if r.count == 2 {
            for _ in 0..700 {
                writeln!(text, "{{\"type\":\"future_record\",\"pad\":\"{}\"}}", "x".repeat(1000)).unwrap();
            }
        }
        text += &serde_json::to_string(&Line::Repeat(r)).unwrap();
        text.push('\n');
    }
    let (records, status) = read(text.as_bytes());
    assert_eq!(status.repeats_cut.launches, 5 * (1 << 20) - allowance(256 << 10), "{:?}", status.repeats_cut);
    let handles: Vec<u64> =
        records.iter().filter_map(|r| if let Line::Launch(l) = r { Some(l.handle) } else { None }).collect();
    // 5 * 2^20 repeats before the last run: it starts at the third kernel (5 * 2^20 % 3 == 2).
    assert_eq!(handles[handles.len() - 2..], [12, 10]);
}

fn with_header(schema: &str) -> Vec<u8> {
    header_line().replace(&format!("\"schema\":{SCHEMA}"), &format!("\"schema\":{schema}")).into_bytes()
}

#[test]
fn a_header_schema_no_tracer_writes_is_refused_in_one_sentence() {
    for (schema, says) in [
        ("1e300", "of schema 1e+300, which no tracer writes"),
        ("18446744073709551616", "which no tracer writes (a schema is a whole number below 2^32)"),
        ("4294967296", "of schema 4294967296, which no tracer writes"),
        ("-1", "of schema -1, which no tracer writes"),
        ("\"1\"", "whose `schema` is \"1\", not a number"),
        ("2", "was written with trace schema 2 but this tracer reads up to 1"),
    ] {
        let mut bytes = with_header(schema);
        bytes.push(b'\n');
        let err = read_from(bytes.as_slice(), Path::new("t.jsonl"), |_| ()).unwrap_err().to_string();
        assert!(err.contains(says), "{schema}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    // A header of a string too long to show is shown cut.
    let long = format!("\"{}\"", "9".repeat(5000));
    let mut bytes = with_header(&long);
    bytes.push(b'\n');
    let err = read_from(bytes.as_slice(), Path::new("t.jsonl"), |_| ()).unwrap_err().to_string();
    assert!(err.len() < 400, "{err}");
}

#[test]
fn a_line_of_two_types_or_with_a_bad_string_is_skipped_and_counted_and_the_rest_read() {
    let kernel = "{\"type\":\"kernel\",\"id\":1,\"pid\":7,\"handle\":1,\"module\":0,\"name\":\"k\",\"demangled\":\"k\",\"source\":\"register\",\"truncated\":false,\"ts\":1";
    let launch = launch_line(5);
    let bad: Vec<Vec<u8>> = vec![
        format!("{kernel},\"type\":\"launch\"}}").into_bytes(),
        format!("{},\"type\":\"kernel\"}}", &launch[..launch.len() - 1]).into_bytes(),
        format!("{},\"typ\\u0065\":\"launch\"}}", &launch[..launch.len() - 1]).into_bytes(),
        format!("{{\"ts\":1,\"type\":\"launch\",{}", &launch[1..]).into_bytes(),
        kernel.replace("\"name\":\"k\"", "\"name\":\"\\q\"").into_bytes().into_iter().chain(*b"}").collect(),
        kernel.replace("\"name\":\"k\"", "\"name\":\"\\ud800x\"").into_bytes().into_iter().chain(*b"}").collect(),
        kernel
            .replace("\"name\":\"k\"", "\"name\":\"@\"")
            .bytes()
            .map(|b| if b == b'@' { 0xff } else { b })
            .chain(*b"}")
            .collect(),
    ];
    for line in bad {
        let mut file = Vec::new();
        writeln!(file, "{}\n{launch}", header_line()).unwrap();
        file.extend_from_slice(&line);
        writeln!(file, "\n{launch}").unwrap();
        let shown = String::from_utf8_lossy(&line).into_owned();
        let mut records = Vec::new();
        let status = read_from(file.as_slice(), Path::new("t.jsonl"), |r| records.push(r));
        let status = status.unwrap_or_else(|e| panic!("{shown}: {e}"));
        assert_eq!(launches(&records), 2, "{shown}: {records:?}");
        assert_eq!(records.len(), 3, "{shown}");
        assert_eq!((status.unreadable_records, status.unknown_records), (1, 0), "{shown}");
        assert!(status.first_unreadable.as_deref().is_some_and(|w| w.starts_with("line 3: ")), "{shown}");
    }
    // A line that is not JSON around its strings is still corruption.
    let file = format!("{}\n{{\"type\":\"launch\",\"garbage\n{launch}\n", header_line());
    let err = read_from(file.as_bytes(), Path::new("t.jsonl"), |_| ()).unwrap_err().to_string();
    assert!(err.contains("line 2 is not a valid trace record"), "{err}");
}
