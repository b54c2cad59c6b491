//! The worst moments: a target killed mid-trace, a ring buffer that overflows, a full disk, and a machine
//! that lacks what recording needs.

use std::process::Command;

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
    let exit = records.iter().find_map(|r| if let Record::Exit(e) = r { Some(e) } else { None }).expect("exit");
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
        records.iter().filter_map(|r| if let Record::Library(l) = r { Some(l.path.as_str()) } else { None }).collect();
    assert_eq!(probed, ["/usr/lib/x86_64-linux-gnu/libamdhip64.so.5.2.21153"]);
    assert!(
        records
            .iter()
            .all(|r| !matches!(r, Record::Mapping(m) if m.path.contains("libhsa-runtime64") && !m.not_probed)),
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

struct Tmpfs(std::path::PathBuf);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        drop(Command::new("umount").arg(&self.0).status());
    }
}

#[test]
fn full_disk_ends_with_a_clear_error_and_a_readable_file() {
    let dir = scratch("full-disk").join("small");
    std::fs::create_dir_all(&dir).unwrap();
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tracer-test", dir.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(ok.success());
    let _mount = Tmpfs(dir.clone());
    let out = dir.join("t.jsonl");
    let runner = fixture("mini_runner");
    let o = tracer(&["record", "-q", "-o", out.to_str().unwrap(), "--", runner.to_str().unwrap(), "loop", "3000"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("the disk holding the trace is full"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    let (records, status) = trace::read_file(&out).expect("the file reads");
    assert!(!status.has_footer);
    assert!(matches!(records[0], Record::Header(_)));
    assert!(launches(&records).len() > 10, "only {} launches kept", launches(&records).len());
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
