//! Runtime copies from outside the usual places: a private copy on `LD_LIBRARY_PATH`, one a program
//! dlopens from beside itself, one loaded from a path nobody could foresee. The first two are probed
//! before the command starts (every launch recorded); the last is probed as it is opened, and the trace and
//! the report say, for that process and copy, that calls before the probes were not seen.

use integration_tests::*;

const DEBIAN_HIP: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";

/// A copy of Debian's libamdhip64 (its own inode) in `dir`.
fn private_copy(dir: &std::path::Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let copy = dir.join("libamdhip64.so.5");
    std::fs::copy(std::fs::canonicalize(DEBIAN_HIP).unwrap(), &copy).unwrap();
    copy
}

/// Records `command` with the record options `flags`: the trace and tracer's stderr.
fn record(out: &std::path::Path, flags: &[&str], command: &[&str]) -> (Vec<Line>, String) {
    let o = tracer(&[&["record"], flags, &["-o", out.to_str().unwrap(), "--"], command].concat());
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{stderr}");
    (read_trace(out), stderr)
}

/// The library record of the copy at `path` (probed, or the test fails).
fn library_of<'a>(records: &'a [Line], path: &std::path::Path) -> &'a trace::Library {
    let found = records
        .iter()
        .find_map(|r| if let Line::Library(l) = r { (l.path == path.to_str().unwrap()).then_some(l) } else { None });
    assert!(found.is_some(), "{} was not probed: {records:#?}", path.display());
    found.expect("checked")
}

/// `mini_runner demo` makes 16 `hipLaunchKernel` calls.
const DEMO_LAUNCHES: usize = 16;

#[test]
fn a_private_copy_on_ld_library_path_is_probed_before_the_command_starts() {
    let dir = scratch("private-ld-path");
    let copy = private_copy(&dir.join("private"));
    let out = dir.join("t.jsonl");
    let ld = format!("LD_LIBRARY_PATH={}", copy.parent().unwrap().display());
    let runner = fixture("mini_runner");
    let (records, _) = record(&out, &[], &["env", &ld, runner.to_str().unwrap(), "demo"]);
    let lib = library_of(&records, &copy);
    let ls = launches(&records);
    assert_eq!(ls.len(), DEMO_LAUNCHES, "launches recorded");
    assert!(ls.iter().all(|l| l.lib == lib.id), "every launch through the private copy");
    // Probed before the command ran: no mapping says late.
    assert!(!records.iter().any(|r| matches!(r, Line::Mapping(m) if m.probed_late)));
    drop(std::fs::remove_dir_all(dir));
}

#[test]
fn a_copy_dlopened_from_beside_the_program_is_probed_before_it_starts() {
    let dir = scratch("private-dlopen");
    let app = dir.join("app");
    let copy = private_copy(&app);
    std::fs::copy(fixture("dlopen_demo"), app.join("dlopen_demo")).unwrap();
    let out = dir.join("t.jsonl");
    let (records, _) = record(&out, &[], &[app.join("dlopen_demo").to_str().unwrap()]);
    let lib = library_of(&records, &copy);
    let ls = launches(&records);
    assert_eq!(ls.len(), DEMO_LAUNCHES);
    assert!(ls.iter().all(|l| l.lib == lib.id));
    assert!(!records.iter().any(|r| matches!(r, Line::Mapping(m) if m.probed_late)));
    drop(std::fs::remove_dir_all(dir));
}

#[test]
fn a_copy_only_known_when_it_is_opened_is_probed_then_and_late_unless_its_initializer_ran_under_its_probes() {
    let dir = scratch("private-late");
    let copy = private_copy(&dir.join("somewhere/else"));
    let out = dir.join("t.jsonl");
    let (records, _) = record(&out, &[], &[fixture("dlopen_demo").to_str().unwrap(), copy.to_str().unwrap()]);
    let lib = library_of(&records, &copy);
    let Line::Header(h) = &records[0] else { panic!("no header") };
    assert!(lib.attached_ts.is_some_and(|t| t > h.start_mono_ns), "probed during the recording: {lib:?}");
    // Written late at the open; written again, not late, where the copy's last initializer then ran under its
    // probes (the later record decides).
    let mappings: Vec<&trace::Mapping> = records
        .iter()
        .filter_map(|r| if let Line::Mapping(m) = r { (m.lib == Some(lib.id)).then_some(m) } else { None })
        .collect();
    assert!(mappings.first().expect("a mapping record for the process and the copy").probed_late, "{mappings:?}");
    let late = mappings.last().is_some_and(|m| m.probed_late);
    let o = tracer(&["report", out.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(!text.contains("no GPU activity"), "{text}");
    if late {
        assert!(text.contains("probed late: its calls before"), "{text}");
        assert!(text.contains("incomplete: a GPU runtime copy was probed late or not at all in dlopen_demo"), "{text}");
    } else {
        // The witness's word checked: every one of the program's 16 launches was seen.
        assert_eq!(launches(&records).into_iter().filter(|l| l.lib == lib.id).count(), 16, "{mappings:?}");
        assert!(!text.contains("probed late"), "{text}");
    }
    drop(std::fs::remove_dir_all(dir));
}

/// A recording that lags behind its ring (its reading held back 2.5 s) reads a program's open of a private
/// copy after the program may have ended: the copy is listed either way, probed late or not probed, and the
/// report calls the process incomplete; never left out.
#[test]
fn a_copy_opened_by_a_program_gone_before_its_open_was_read_is_still_listed() {
    let dir = scratch("private-gone");
    let copy = private_copy(&dir.join("somewhere/else"));
    let out = dir.join("t.jsonl");
    let demo = fixture("dlopen_demo");
    let command = [demo.to_str().unwrap(), copy.to_str().unwrap()];
    let (records, stderr) = record(&out, &["--debug-read-delay-ms", "2500"], &command);
    let m = records
        .iter()
        .find_map(|r| if let Line::Mapping(m) = r { (m.path == copy.to_str().unwrap()).then_some(m) } else { None })
        .unwrap_or_else(|| panic!("no mapping of the copy; stderr: {stderr}"));
    assert!((m.lib.is_some() && m.probed_late) || (m.lib.is_none() && m.not_probed), "{m:?}");
    let report = tracer(&["report", out.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(text.contains("incomplete: a GPU runtime copy was probed late or not at all in dlopen_demo"), "{text}");
    drop(std::fs::remove_dir_all(dir));
}
