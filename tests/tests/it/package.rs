//! The user's install: the Debian package `cargo xtask deb` builds, installed into a fresh Debian system that
//! has no `ROCm` or CUDA (made by mmdebstrap from this machine's own apt sources), where `tracer --version`, a
//! recording of `/bin/true` and its report work, and `dpkg --verify` checks its files against the package's
//! md5sums; and the systemd unit it carries, verified by `systemd-analyze verify`.

use std::{
    path::{Path, PathBuf},
    process::Command,
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
    let exec = records
        .iter()
        .any(|r| matches!(r, Record::Process(p) if p.cause.as_str() == "exec" && p.argv == ["/bin/true"]));
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
    assert!(unit.contains("Type=notify") && unit.contains("ExecStart=/usr/bin/tracer record"), "{unit}");
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
