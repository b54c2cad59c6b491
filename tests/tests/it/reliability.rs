//! The worst moments: a target killed mid-trace, a ring buffer that overflows, a full disk (also while a
//! rotated recording starts its next part), a link planted at the next part's name, and a machine that
//! lacks what recording needs.

use std::{path::PathBuf, process::Command};

use integration_tests::*;

#[test]
fn target_killed_mid_trace_keeps_its_records_and_its_death() {
    let (out, rec) = recording_a_hanging_runner("killed-target");
    let pid = exec_pid(&out);
    // SAFETY: killing the test's own grandchild.
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    }
    let (status, stderr) = rec.wait();
    // tracer exits as its command did: killed by SIGKILL, 128 + 9.
    assert_eq!(status.code(), Some(128 + libc::SIGKILL), "{stderr}");
    let records = read_trace(&out);
    assert_eq!(launches(&records).len(), 7);
    assert_eq!(kernels(&records).iter().filter(|k| k.source.as_str() == "register").count(), 6);
    let exit = records.iter().find_map(|r| if let Line::Exit(e) = r { Some(e) } else { None }).expect("exit");
    assert_eq!((exit.pid, exit.code, exit.signal), (pid, None, Some(libc::SIGKILL)));
    assert_eq!(footer(&records).stop.as_str(), "command-exited");
}

#[test]
fn ring_overflow_is_counted_per_cpu_and_adds_up() {
    let out = scratch_trace("overflow");
    let runner = fixture("mini_runner");
    const LAUNCHES: u64 = 3000;
    // A one-page ring left unread for a while: most launches cannot be kept.
    let records = record_ok(
        &out,
        &[
            "--ring-size",
            "4096",
            "--debug-read-delay-ms",
            "1500",
            // The HIP runtime alone: every probed call is then one the program made (without a GPU the runtime
            // also retries hsa_init on each launch, which would be counted too if libhsa-runtime64 were probed).
            "--lib",
            "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5",
            "--",
            runner.to_str().unwrap(),
            "loop",
            &LAUNCHES.to_string(),
        ],
    );
    // --lib names the only copy probed: libhsa-runtime64, mapped by the runner too, is listed unprobed
    // if the watch looked at the runner while it lived, never probed.
    let probed: Vec<&str> =
        records.iter().filter_map(|r| if let Line::Library(l) = r { Some(l.path.as_str()) } else { None }).collect();
    assert_eq!(probed, ["/usr/lib/x86_64-linux-gnu/libamdhip64.so.5.2.21153"]);
    assert!(
        records.iter().all(|r| !matches!(r, Line::Mapping(m) if m.path.contains("libhsa-runtime64") && !m.not_probed)),
        "{records:?}"
    );
    let f = footer(&records);
    let per_cpu = &f.drops["call"];
    assert_eq!(per_cpu.len(), std::thread::available_parallelism().unwrap().get().max(per_cpu.len()));
    let dropped: u64 = per_cpu.iter().sum();
    assert!(dropped > 0, "the ring did not overflow: {f:?}");
    // Every call the program made is either in the file or counted as dropped: the launches and its one
    // __hipRegisterFatBinary.
    let recorded = launches(&records).len() as u64 + calls(&records).len() as u64;
    assert_eq!(recorded + dropped, LAUNCHES + 1, "recorded {recorded}, dropped {dropped}");
    // The report says so, with the other kinds lost too (each launch before its function's parameter plan
    // also tried to write its kernel parameters).
    let all: u64 = f.drops.values().flatten().sum();
    let o = tracer(&["report", out.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("losses: {all} records dropped")));
}

#[test]
fn full_disk_ends_with_a_clear_error_and_a_readable_file() {
    let dir = scratch("full-disk").join("small");
    let _mount = Tmpfs::mount(&dir, "64k");
    let out = dir.join("t.jsonl");
    let runner = fixture("mini_runner");
    let o = tracer(&["record", "-q", "-o", out.to_str().unwrap(), "--", runner.to_str().unwrap(), "loop", "3000"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("the disk holding the trace is full"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    let (records, status) = trace::read_file(&out).expect("the file reads");
    assert!(!status.has_footer);
    assert!(matches!(records[0], Line::Header(_)));
    assert!(launches(&records).len() > 10, "only {} launches kept", launches(&records).len());
}

/// The files of a rotated recording's directory, by name: (path, records, how it ended).
fn parts_in(dir: &std::path::Path) -> Vec<(PathBuf, Vec<Line>, trace::ReadStatus)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.metadata().is_ok_and(|m| m.is_file()) && e.file_name().to_string_lossy().starts_with("run."))
        .map(|e| e.path())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let read = trace::read_file(&p);
            assert!(read.is_ok(), "{}: {read:?}", p.display());
            let (records, status) = read.unwrap();
            (p, records, status)
        })
        .collect()
}

/// `tracer record -q --rotate-size 64K -o OUT -- mini_runner loop 3000`: 3000 launches, several parts.
fn record_rotating_launch_loop(out: &std::path::Path) -> std::process::Output {
    let runner = fixture("mini_runner");
    tracer(&[
        "record",
        "-q",
        "--rotate-size",
        "64K",
        "-o",
        out.to_str().unwrap(),
        "--",
        runner.to_str().unwrap(),
        "loop",
        "3000",
    ])
}

fn part_index(records: &[Line]) -> Option<u32> {
    match records.first() {
        Some(Line::Header(h)) => h.part.map(|p| p.index),
        _ => None,
    }
}

#[test]
fn full_disk_while_rotating_ends_naming_the_part_and_every_complete_part_reads() {
    // 68 KiB: part 0 (64 KiB and a record, its footer) fits, part 1 has no room for its header; 256 KiB:
    // the disk fills in the middle of a later part.
    for size in ["68k", "256k"] {
        let dir = scratch(&format!("full-disk-rotating-{size}")).join("small");
        let _mount = Tmpfs::mount(&dir, size);
        let out = dir.join("run.jsonl");
        let o = record_rotating_launch_loop(&out);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(stderr.contains("the disk holding the trace is full: "), "{stderr}");
        println!("{size}: record: {}", stderr.trim());
        // No empty part is left; every part reads, in order, cut back to its last complete record; each but
        // the last ends `rotated`.
        let parts = parts_in(&dir);
        for (i, (path, records, status)) in parts.iter().enumerate() {
            assert!(std::fs::metadata(path).unwrap().len() > 0, "{} is empty", path.display());
            assert_eq!(part_index(records), Some(i as u32), "{}", path.display());
            assert_eq!(status.cut_bytes, 0, "{}", path.display());
            if i + 1 < parts.len() {
                assert!(matches!(records.last(), Some(Line::Footer(f)) if f.stop.as_str() == "rotated"));
            }
        }
        // The error names the part it ended in, or the one it removed.
        let (last, _, last_status) = parts.last().unwrap();
        let next = dir.join(format!("run.{:04}.jsonl", parts.len()));
        if last_status.has_footer {
            assert!(
                stderr.contains(&format!(
                    "part {} could not be written and {} was removed",
                    parts.len(),
                    next.display()
                )),
                "{stderr}"
            );
        } else {
            assert!(stderr.contains(&format!("the recording ends in {},", last.display())), "{stderr}");
        }
        if size == "68k" {
            assert_eq!(parts.len(), 1, "{stderr}");
        }
        // The report reads every part and says how the recording ended.
        let o = tracer(&["report", dir.to_str().unwrap()]);
        let said = String::from_utf8_lossy(&o.stderr);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{said}");
        let name = dir.join("run.jsonl").display().to_string();
        let n = parts.len() - 1;
        let read = if n == 0 { "part 0000".to_owned() } else { format!("parts 0000-{n:04}") };
        assert!(text.starts_with(&format!("trace {read} of {name}")), "{text}");
        if last_status.has_footer {
            assert!(said.contains(&format!("continued after part {n:04}: its later parts are missing")), "{said}");
        } else {
            assert!(said.contains(&format!("part {n:04} ({}) was not closed normally", last.display())), "{said}");
        }
        let launches: usize = parts.iter().map(|(_, r, _)| launches(r).len()).sum();
        assert!(launches > 100, "{launches} launches read");
        println!("{size}: report: {} parts, {launches} launches; {}", parts.len(), said.trim());
    }
}

#[test]
fn a_link_planted_at_the_next_parts_name_moves_the_part_to_the_next_name() {
    let dir = scratch("planted-part-link");
    let victim = dir.join("victim");
    std::fs::write(&victim, "not tracer's").unwrap();
    let out = dir.join("run.jsonl");
    let planted = dir.join("run.0001.jsonl");
    std::os::unix::fs::symlink(&victim, &planted).unwrap();
    let o = record_rotating_launch_loop(&out);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert_eq!(
        stderr.trim(),
        format!(
            "tracer: warning: {} is taken by a file or link already there: part 1 is written to {}",
            planted.display(),
            dir.join("run.0002.jsonl").display()
        )
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "not tracer's");
    assert!(std::fs::symlink_metadata(&planted).unwrap().file_type().is_symlink());
    // Every part has its footer, numbered in order though the names skip one.
    let parts = parts_in(&dir);
    assert!(parts.len() >= 3, "{}", parts.len());
    for (i, (path, records, status)) in parts.iter().enumerate() {
        assert!(status.has_footer, "{}", path.display());
        assert_eq!(part_index(records), Some(i as u32), "{}", path.display());
    }
    let f = footer(&parts.last().unwrap().1);
    assert_eq!(f.counters.get("rotation_names_taken"), Some(&1), "{:?}", f.counters);
    assert_eq!(f.stop.as_str(), "command-exited");
    // The directory reads whole, the link skipped and said.
    let o = tracer(&["report", dir.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{said}");
    assert_eq!(said.trim(), format!("tracer: warning: {} is a symbolic link, not a part: skipped", planted.display()));
    let v = tracer_json(&["report", "--json", dir.to_str().unwrap()]);
    let launched: u64 = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["kernels"].as_array().unwrap())
        .map(|k| k["launches"].as_u64().unwrap())
        .sum();
    // Each launch once: the parts' restatements are not read twice.
    let recorded: usize = parts.iter().map(|(_, r, _)| launches(r).len()).sum();
    assert_eq!(launched, recorded as u64);
    assert!(launched > 2000, "{launched}");
    drop(std::fs::remove_dir_all(dir));
}

fn assert_env_error(mut cmd: Command, sentence: &str) {
    let o = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(sentence), "expected {sentence:?} in {stderr:?}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

#[test]
fn missing_privileges_btf_or_tracefs_are_one_sentence_each() {
    let bin = tracer_bin();
    let dir = scratch("env");
    let out = dir.join("t.jsonl");
    let record = format!("{} record -o {} -- true", bin.display(), out.display());

    let mut nobody = Command::new("setpriv");
    nobody.args(["--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", &record]);
    assert_env_error(nobody, "needs root");

    // A mount namespace where the kernel's BTF is hidden.
    let mut no_btf = Command::new("unshare");
    no_btf.args(["-m", "sh", "-c", &format!("mount -t tmpfs none /sys/kernel/btf && exec {record}")]);
    assert_env_error(no_btf, "exposes no BTF");

    // A mount namespace where /sys/kernel has no tracing directory to mount tracefs on.
    let keep = dir.join("btf");
    std::fs::create_dir_all(&keep).unwrap();
    let script = format!(
        "mount --bind /sys/kernel/btf {k} && mount -t tmpfs none /sys/kernel && mkdir /sys/kernel/btf && \
         mount --bind {k} /sys/kernel/btf && exec {record}",
        k = keep.display()
    );
    let mut no_tracefs = Command::new("unshare");
    no_tracefs.args(["-m", "sh", "-c", &script]);
    assert_env_error(no_tracefs, "mount it with `mount -t tracefs nodev /sys/kernel/tracing`");
    assert!(!out.exists(), "a failed recording left a file");
}

/// `--keep-size`: the oldest parts in the output's directory go as new ones start, an earlier recording's
/// first, while they hold more than the bound; what is not tracer's own part (another file, a link) stays;
/// what is left reads from its oldest part, which says the removed ones are not there.
#[test]
fn keep_size_removes_the_oldest_parts_first_and_what_is_left_reads() {
    let dir = scratch("keep-size");
    let keep: u64 = 512 << 10;
    let runner = fixture("mini_runner");
    // A recording of `launches` launches rotating at `rotate`, keeping `keep`.
    let record_kept = |name: &str, launches: &str, rotate: &str, keep: &str| {
        let out = dir.join(name);
        let o = tracer(&[
            "record",
            "-q",
            "--rotate-size",
            rotate,
            "--keep-size",
            keep,
            "-o",
            out.to_str().unwrap(),
            "--",
            runner.to_str().unwrap(),
            "loop",
            launches,
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    let record = |name: &str, launches: &str| record_kept(name, launches, "64K", "512K");
    // Beside the recordings: a file that is not a part, and a link; neither counts nor goes.
    std::fs::write(dir.join("notes.jsonl"), "not a trace\n").unwrap();
    std::os::unix::fs::symlink("/etc/hostname", dir.join("link.0000.jsonl")).unwrap();
    record("early.jsonl", "300");
    let early: Vec<PathBuf> = parts_named(&dir, "early.");
    assert!(!early.is_empty());
    record("run.jsonl", "8000");
    // The earlier recording went first, then the oldest parts of this one.
    assert!(parts_named(&dir, "early.").is_empty(), "{early:?}");
    let left = parts_named(&dir, "run.");
    let bytes: u64 = left.iter().map(|p| std::fs::metadata(p).unwrap().len()).sum();
    let largest = left.iter().map(|p| std::fs::metadata(p).unwrap().len()).max().unwrap();
    assert!(bytes <= keep + largest, "{bytes} bytes left in {} parts", left.len());
    assert!(!left[0].to_string_lossy().ends_with(".0000.jsonl"), "{left:?}");
    assert!(dir.join("notes.jsonl").exists() && dir.join("link.0000.jsonl").is_symlink());
    let (records, status) = trace::read_file(left.last().unwrap()).unwrap();
    assert!(status.has_footer);
    let f = footer(&records);
    // Counted: the earlier recording's parts and this one's before its oldest left.
    let oldest_left: u64 =
        left[0].to_string_lossy().trim_end_matches(".jsonl").rsplit('.').next().unwrap().parse().unwrap();
    assert_eq!(f.counters["parts_removed_by_keep_size"], early.len() as u64 + oldest_left, "{:?}", f.counters);
    // What is left reads as a recording from its oldest part on, and says the removed ones are not there.
    let o = tracer(&std::iter::once("report").chain(left.iter().map(|p| p.to_str().unwrap())).collect::<Vec<_>>());
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{said}");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(format!("{text}{said}").contains("of the recording are not here (removed by --keep-size"), "{text}{said}");
    // A recording that never rotates (a service restarted more often than it rotates) prunes as it starts.
    record_kept("short.jsonl", "1", "64M", "64K");
    let short_parts = parts_named(&dir, "short.");
    assert_eq!(short_parts.len(), 1, "{short_parts:?}");
    let run_left = parts_named(&dir, "run.");
    let run_bytes: u64 = run_left.iter().map(|p| std::fs::metadata(p).unwrap().len()).sum();
    assert!(run_left.len() < left.len() && run_bytes <= 64 << 10, "{run_bytes} bytes left in {run_left:?}");
    let (records, _) = trace::read_file(&short_parts[0]).unwrap();
    let removed = footer(&records).counters["parts_removed_by_keep_size"];
    assert_eq!(removed, (left.len() - run_left.len()) as u64);
    drop(std::fs::remove_dir_all(dir));
}

/// The parts in `dir` whose names start with `prefix` (regular files), in name order.
fn parts_named(dir: &std::path::Path, prefix: &str) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.metadata().is_ok_and(|m| m.is_file()) && e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path())
        .collect();
    paths.sort();
    paths
}
