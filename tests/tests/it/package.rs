//! The user's install: the Debian package `cargo xtask deb` builds, installed into a fresh Debian system that
//! has no `ROCm` or CUDA (made by mmdebstrap from this machine's own apt sources), where `tracer --version`, a
//! recording of `/bin/true` and its report work, and `dpkg --verify` checks its files against the package's
//! md5sums; and the systemd unit it carries, verified by `systemd-analyze verify`.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use integration_tests::*;

/// A Debian system of this machine's release (its essential packages alone), made once per build tree.
fn fresh_debian() -> PathBuf {
    let fixtures = PathBuf::from(std::env::var_os("TRACER_FIXTURES").expect("set by `cargo xtask test`"));
    let root = fixtures.parent().unwrap().join("debian-rootfs");
    let done = root.join(".tracer-complete");
    if done.exists() {
        return root;
    }
    drop(std::fs::remove_dir_all(&root));
    let release = std::fs::read_to_string("/etc/os-release").unwrap();
    let codename = release.lines().find_map(|l| l.strip_prefix("VERSION_CODENAME=")).expect("a Debian release");
    let o = Command::new("mmdebstrap")
        .args(["--variant=essential", "--quiet", codename.trim_matches('"')])
        .arg(&root)
        .output()
        .expect("mmdebstrap runs (`cargo xtask setup` installs it)");
    assert!(o.status.success(), "mmdebstrap: {}", String::from_utf8_lossy(&o.stderr));
    std::fs::write(&done, "").unwrap();
    root
}

/// Files under `root` whose name starts with one of `prefixes`.
fn files_named(root: &Path, prefixes: &[&str]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let (path, kind) = (e.path(), e.file_type().unwrap());
            let name = e.file_name().to_string_lossy().into_owned();
            if kind.is_dir() && !kind.is_symlink() && !["proc", "sys", "dev"].iter().any(|d| path == root.join(d)) {
                dirs.push(path);
            } else if prefixes.iter().any(|p| name.starts_with(p)) {
                found.push(path);
            }
        }
    }
    found
}

#[test]
fn the_deb_installs_and_records_on_a_debian_system_without_rocm_or_cuda() {
    let deb = PathBuf::from(std::env::var_os("TRACER_DEB").expect("TRACER_DEB is set by `cargo xtask test`"));
    // The package carries the md5sums `dpkg --verify` checks an install against.
    let md5sums = Command::new("dpkg-deb").arg("-I").arg(&deb).arg("md5sums").output().unwrap();
    let listed = String::from_utf8_lossy(&md5sums.stdout);
    assert!(md5sums.status.success() && listed.contains("  usr/bin/tracer\n"), "no md5sums: {listed}");
    let root = fresh_debian();
    let runtimes = files_named(&root, &["libamdhip64", "libhsa-runtime64", "libcuda", "librocm"]);
    assert!(runtimes.is_empty(), "the fresh system has GPU runtimes: {runtimes:?}");
    std::fs::copy(&deb, root.join("tmp/tracer.deb")).unwrap();
    drop(std::fs::remove_file(root.join("tmp/t.jsonl")));
    // In a mount namespace of its own: the system's /proc, /sys (BTF, tracefs) and /dev, gone with it.
    let r = root.display();
    let script = format!(
        "set -e; mount --rbind /sys {r}/sys; mount -t proc proc {r}/proc; mount --rbind /dev {r}/dev; \
         (chroot {r} dpkg --purge tracer >/dev/null 2>&1 || true); \
         chroot {r} dpkg -i /tmp/tracer.deb >/dev/null; \
         test -z \"$(chroot {r} dpkg --verify tracer)\"; \
         chroot {r} tracer --version; \
         chroot {r} tracer record -q -o /tmp/t.jsonl -- /bin/true; \
         chroot {r} tracer report /tmp/t.jsonl"
    );
    let o =
        Command::new("unshare").args(["--mount", "--propagation", "private", "sh", "-c", &script]).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.starts_with(&format!("tracer {}\n", env!("CARGO_PKG_VERSION"))), "{stdout}");
    assert!(stdout.contains("true (pid"), "the report lists /bin/true: {stdout}");
    let records = read_trace(&root.join("tmp/t.jsonl"));
    let exec =
        records.iter().any(|r| matches!(r, Line::Process(p) if p.cause.as_str() == "exec" && p.argv == ["/bin/true"]));
    assert!(exec, "the recording has /bin/true's exec");
    // The package's files: the binary, a man page per command, the unit.
    let listed = Command::new("dpkg-deb").arg("-c").arg(&deb).output().unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    for f in [
        "./usr/bin/tracer",
        "./usr/share/man/man1/tracer.1.gz",
        "./usr/share/man/man1/tracer-record.1.gz",
        "./lib/systemd/system/tracer-ollama.service",
    ] {
        assert!(listed.contains(f), "{f} not in the package: {listed}");
    }
}

/// The unit as installed, checked by systemd's own verifier against the installed binary; a broken copy
/// makes it complain, so the check can fail.
#[test]
fn the_systemd_unit_passes_systemd_analyze_verify() {
    let dir = scratch("unit");
    let unit =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/tracer-ollama.service")).unwrap();
    assert!(unit.contains("Type=notify") && unit.contains("exec /usr/bin/tracer record"), "{unit}");
    let verify = |name: &str, text: &str| {
        let dir = dir.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tracer-ollama.service");
        std::fs::write(&path, text.replace("/usr/bin/tracer", tracer_bin().to_str().unwrap())).unwrap();
        let o = Command::new("systemd-analyze").arg("verify").arg(&path).output().unwrap();
        (o.status.success(), String::from_utf8_lossy(&o.stderr).trim().to_owned())
    };
    let (ok, said) = verify("shipped", &unit);
    assert!(ok && said.is_empty(), "systemd-analyze verify: {said}");
    let (_, said) = verify("broken", &unit.replace("Type=notify", "Type=notifyy"));
    assert!(said.contains("Failed to parse service type"), "a broken unit passes: {said}");
}

/// The shipped unit, hardened: `systemd-analyze security` scores its exposure at most 5 (9.6, UNSAFE,
/// before), and a unit without the hardening scores worse, so the check can fail.
#[test]
fn the_systemd_unit_is_hardened() {
    let dir = scratch("unit-security");
    let unit = shipped_unit();
    let exposure = |name: &str, text: &str| -> f64 {
        let path = dir.join(name);
        std::fs::create_dir_all(&path).unwrap();
        let path = path.join("tracer-ollama.service");
        std::fs::write(&path, text).unwrap();
        let o = Command::new("systemd-analyze").args(["security", "--offline=true"]).arg(&path).output().unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        let line = text.lines().find(|l| l.contains("Overall exposure level")).unwrap_or_else(|| panic!("{text}"));
        line.rsplit(": ").next().and_then(|v| v.split_whitespace().next()).and_then(|v| v.parse().ok()).unwrap()
    };
    let shipped = exposure("shipped", &unit);
    let bare = unit.lines().filter(|l| !l.starts_with("Protect") && !l.starts_with("CapabilityBoundingSet")).fold(
        String::new(),
        |mut text, l| {
            text.push_str(l);
            text.push('\n');
            text
        },
    );
    let unhardened = exposure("bare", &bare);
    eprintln!("exposure: shipped {shipped}, without its Protect* and capability lines {unhardened}");
    assert!(shipped <= 5.0, "the shipped unit's exposure is {shipped}");
    assert!(unhardened > shipped);
}

/// The shipped unit's text.
fn shipped_unit() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/tracer-ollama.service")).unwrap()
}

/// The unit's `KEY=` lines, continuation lines joined, as systemd reads them.
fn unit_lines(unit: &str, key: &str) -> Vec<String> {
    let joined = unit.replace("\\\n", " ");
    joined.lines().filter_map(|l| l.strip_prefix(key)?.strip_prefix('=')).map(str::to_owned).collect()
}

/// One start of the unit as systemd makes it (its `ExecStartPre=` lines, then `ExecStart=`, `%%` as `%`),
/// with its paths moved into `state` and its metrics onto `port`, stopped by SIGTERM after `stop_after`
/// unless it ended first: (status, stderr).
fn start_unit(unit: &str, state: &Path, port: u16, stop_after: Option<Duration>) -> (std::process::ExitStatus, String) {
    let localize = |line: &str| {
        line.replace("%%", "%")
            .replace("/var/lib/tracer", state.to_str().unwrap())
            .replace("/usr/bin/tracer", tracer_bin().to_str().unwrap())
            .replace("127.0.0.1:9464", &format!("127.0.0.1:{port}"))
    };
    for pre in unit_lines(unit, "ExecStartPre") {
        let o = Command::new("/bin/sh").arg("-c").arg(localize(&pre)).output().unwrap();
        if !o.status.success() {
            return (o.status, String::from_utf8_lossy(&o.stderr).into_owned());
        }
    }
    let start = unit_lines(unit, "ExecStart").pop().expect("the unit has an ExecStart");
    // As systemd runs it: the command line's program is the unit's main process (exec), not a child of ours.
    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg(format!("exec {}", localize(&start)))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(after) = stop_after {
        let deadline = std::time::Instant::now() + after;
        while std::time::Instant::now() < deadline && child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_millis(100));
        }
        // SAFETY: signalling our own child (the shell exec'd tracer), not yet reaped.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
    }
    let o = child.wait_with_output().unwrap();
    (o.status, String::from_utf8_lossy(&o.stderr).into_owned())
}

/// The unit keeps recordings: a recording, then two starts in a row that fail on a full disk (which hourly
/// parts reach), leave every part of the earlier recording in place, byte for byte, and it reads. Before,
/// each start ran `rm -rf previous` and moved the parts into `previous/`: the two failed starts removed the
/// whole recording without a word.
#[test]
fn two_failed_starts_of_the_unit_in_a_row_leave_every_earlier_part_in_place() {
    let state = scratch("unit-keeps").join("state");
    let _mount = Tmpfs::mount(&state, "8m");
    let unit = shipped_unit();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (status, said) = start_unit(&unit, &state, port, Some(Duration::from_secs(8)));
    assert!(status.success() || status.code() == Some(143), "{status}: {said}");
    let listing = |dir: &Path| -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
        walk(dir).into_iter().map(|p| (p.clone(), std::fs::read(&p).unwrap())).collect()
    };
    let before = listing(&state);
    let first = before.keys().find(|p| p.to_string_lossy().ends_with(".0000.jsonl.zst")).cloned();
    let first = first.unwrap_or_else(|| panic!("no first part: {:?}", before.keys()));
    // The disk fills: a file takes what is left.
    let filler = state.join("filler");
    drop(std::fs::write(&filler, vec![0u8; 8 << 20]));
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(1100));
        // It fails (the shipped unit's tracer says the disk is full), or is stopped after a while.
        let (status, said) = start_unit(&unit, &state, port, Some(Duration::from_secs(10)));
        eprintln!("a start on a full disk: {status}: {}", said.trim());
    }
    std::fs::remove_file(&filler).unwrap();
    let after = listing(&state);
    for (path, bytes) in &before {
        assert_eq!(after.get(path), Some(bytes), "{} changed or went", path.display());
    }
    let stem = first.to_string_lossy().trim_end_matches(".0000.jsonl.zst").to_owned();
    let parts: Vec<&PathBuf> = before.keys().filter(|p| p.to_string_lossy().starts_with(&stem)).collect();
    let o = Command::new(tracer_bin()).arg("report").args(parts).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() { files.extend(walk(&p)) } else { files.push(p) }
    }
    files
}
