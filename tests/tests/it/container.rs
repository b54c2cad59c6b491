//! A runner with its own `ROCm`, as a container brings it: Debian unstable's HIP 6.4, `ROCr` 6.4, rocBLAS and
//! ggml 0.27's HIP backend with llama.cpp's tools, in a root of their own (`cargo xtask setup` makes it with
//! mmdebstrap), never the host's (Debian 12's HIP 5.2, which tracer probes at start). Its `llama-cli
//! --list-devices` loads the HIP backend, which registers its kernels, then finds no GPU.

use std::{
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use integration_tests::*;

fn sid_root() -> PathBuf {
    PathBuf::from(std::env::var_os("TRACER_SID_ROOT").expect("TRACER_SID_ROOT is set by `cargo xtask test`"))
}

const LIBDIR: &str = "usr/lib/x86_64-linux-gnu";

/// The root's file at `path` (as the maps show it from here, or as the process sees it): (device, inode).
fn file_in_root(root: &Path, path: &str) -> Option<(u64, u64)> {
    let host =
        if Path::new(path).starts_with(root) { PathBuf::from(path) } else { root.join(path.trim_start_matches('/')) };
    std::fs::metadata(host).ok().map(|m| (m.dev(), m.ino()))
}

/// What bpftrace counts of `llama-cli`'s calls of `__hipRegisterFunction` on the root's HIP runtime, in a
/// run of `cmd`: the independent count of the kernels the HIP backend registers.
fn bpftrace_registrations(root: &Path, cmd: &str) -> u64 {
    bpftrace_registrations_of(root, cmd, "llama-cli")
}

/// As [`bpftrace_registrations`], for the process named `comm`.
fn bpftrace_registrations_of(root: &Path, cmd: &str, comm: &str) -> u64 {
    let hip = root.join(LIBDIR).join("libamdhip64.so.6");
    let script = format!("uprobe:{}:__hipRegisterFunction /comm == \"{comm}\"/ {{ @fn = count(); }}", hip.display());
    let (status, _, out) =
        run_measured(Command::new("bpftrace").args(["-q", "-e", &script, "-c", cmd]), Duration::from_mins(3));
    assert!(status.success(), "bpftrace: {out}");
    out.lines()
        .find_map(|l| l.strip_prefix("@fn: "))
        .and_then(|n| n.trim().parse().ok())
        .expect("bpftrace printed the count")
}

/// Waits (at most a minute) until no earlier recording's probes are being released: a release holds the
/// kernel's uprobe lock for seconds, and a new recording's first probes would wait behind it while the
/// runner, which nothing holds, loads its backend (a start behind releases is `neighbours`' subject).
fn wait_for_releases() {
    let deadline = std::time::Instant::now() + Duration::from_mins(1);
    let releasing = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .any(|e| std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == "tracer-release"))
    };
    while releasing() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `unshare` arguments that run `inner` (a shell command line) as Docker and podman run a container: new
/// mount and PID namespaces with a fresh /proc, `root` bind-mounted onto itself and `pivot_root`ed into, then
/// entered with `chroot .` (the old root stays under /mnt: the root has no `umount`).
fn in_container(root: &Path, inner: &str) -> Vec<String> {
    let r = root.display();
    [
        "unshare",
        "-m",
        "-p",
        "-f",
        "--propagation",
        "private",
        // The namespace's first process (a server that waits forever) ends with `unshare`.
        "--kill-child",
        &format!("--mount-proc={r}/proc"),
        "/bin/sh",
        "-c",
        &format!("mount --rbind {r} {r} && cd {r} && pivot_root . mnt && exec /usr/sbin/chroot . {inner}"),
    ]
    .map(str::to_owned)
    .to_vec()
}

/// `inner` started in a container (see [`in_container`]), its output piped and its first line read (a
/// program there says it is ready): the container, a reader of the rest of its output, and that first line.
fn start_in_container(
    root: &Path,
    inner: &str,
    setup: impl FnOnce(&mut Command) -> &mut Command,
) -> (std::process::Child, std::io::BufReader<std::process::ChildStdout>, String) {
    let args = in_container(root, inner);
    let mut command = Command::new(&args[0]);
    command.args(&args[1..]).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::null());
    let mut child = setup(&mut command).spawn().unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut lines, &mut line).unwrap();
    (child, lines, line)
}

/// What a run of the root's ggml HIP backend must show in process `comm`'s part of the trace: every kernel
/// it registered named (as many as bpftrace counted), HIP 6.4 and `ROCr` 6.4 probed from their first call as
/// the root's own files, every GPU library listed the root's file (never the host's at the same path), and
/// the report saying which root.
fn check_own_rocm(records: &[Line], out: &Path, root: &Path, comm: &str, registered: u64) {
    assert_eq!(footer(records).total_drops(), 0);
    let pid = exec_of(records, comm).expect("the runner's exec").pid;
    let named = kernels(records)
        .into_iter()
        .filter(|k| k.pid == pid && k.source == trace::Source::Register && !k.name.is_empty())
        .count() as u64;
    assert_eq!(named, registered, "kernels named by registration vs bpftrace's count");
    let mappings: Vec<&trace::Mapping> = records
        .iter()
        .filter_map(|r| if let Line::Mapping(m) = r { (m.pid == pid).then_some(m) } else { None })
        .collect();
    for name in ["libamdhip64.so.6", "libhsa-runtime64.so.1"] {
        let id = file_in_root(root, &format!("/{LIBDIR}/{name}")).expect("the root has the runtime");
        // The later record of a process and file supersedes the earlier.
        let m = mappings.iter().rev().find(|m| (m.dev, m.inode) == id).expect("the runtime's mapping");
        assert!(m.lib.is_some() && !m.not_probed, "{name} not probed: {m:?}");
        assert!(!m.probed_late, "{name} probed late: {m:?}");
        let lib = records
            .iter()
            .find_map(|r| if let Line::Library(l) = r { (Some(l.id) == m.lib).then_some(l) } else { None })
            .expect("the probed copy's library record");
        assert_eq!((lib.dev, lib.inode), id, "{lib:?}");
        assert!(lib.root.is_some(), "the library record names its root: {lib:?}");
        // Every probe point of tracer's table is in this runtime (HIP 6's exports are versioned: found by name).
        let lacking: Vec<&str> = records
            .iter()
            .filter_map(|r| if let Line::Probe(p) = r { (p.lib == lib.id).then_some(p) } else { None })
            .filter(|p| p.offset.is_none())
            .map(|p| p.api.as_str())
            .collect();
        assert!(lacking.is_empty(), "{name} lacks {lacking:?}");
    }
    for m in mappings.iter().filter(|m| m.gpu.is_some()) {
        assert_eq!(file_in_root(root, &m.path), Some((m.dev, m.inode)), "not the root's file: {m:?}");
        assert!(m.root.is_some(), "the mapping names its root: {m:?}");
    }
    let report = tracer(&["report", out.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(text.contains("  root: "), "the report says which root: {text}");
}

#[test]
fn a_chroot_with_its_own_rocm_is_probed_from_its_first_call_and_every_kernel_named() {
    let root = sid_root();
    let r = root.display().to_string();
    let registered = bpftrace_registrations(&root, &format!("/usr/sbin/chroot {r} /usr/bin/llama-cli --list-devices"));
    assert!(registered > 10_000, "ggml's HIP backend registers thousands of kernels: {registered}");

    let out = scratch("container-chroot").join("t.jsonl");
    wait_for_releases();
    let (status, _, said) = run_measured(
        Command::new(tracer_bin()).args(["record", "-o"]).arg(&out).args([
            "--",
            "/usr/sbin/chroot",
            &r,
            "/usr/bin/llama-cli",
            "--list-devices",
        ]),
        Duration::from_mins(3),
    );
    assert!(status.success(), "{said}");
    let records = read_trace(&out);
    check_own_rocm(&records, &out, &root, "llama-cli", registered);
    // The counted libraries the backend brings were found before it started.
    let rocblas = records
        .iter()
        .find_map(|r| if let Line::Mapping(m) = r { m.path.contains("librocblas.so").then_some(m) } else { None })
        .expect("rocBLAS is mapped");
    assert!(!rocblas.probed_late, "{rocblas:?}");
}

/// Nothing is predicted here: tracer starts `unshare`, and the container's root appears only at the exec of
/// its first program (an entry script, as images have), inside the new namespaces. The runtime copies in
/// that root's usual places are probed then, and the runner's own (its `DT_NEEDED` closure and backends) at
/// its exec: it runs under them from its first call. (A runner exec'd as the container's very first program
/// races tracer's reading of its exec; its initializer's witness then says whether it was probed late.)
#[test]
fn a_container_with_its_own_rocm_and_proc_is_probed_from_its_first_call() {
    let root = sid_root();
    let r = root.display().to_string();
    let registered = bpftrace_registrations(&root, &format!("/usr/sbin/chroot {r} /usr/bin/llama-cli --list-devices"));
    let out = scratch("container-ns").join("t.jsonl");
    wait_for_releases();
    let (status, _, said) = run_measured(
        Command::new(tracer_bin())
            .args(["record", "-o"])
            .arg(&out)
            .arg("--")
            .args(in_container(&root, "/bin/sh -c 'sleep 1; exec /usr/bin/llama-cli --list-devices'")),
        Duration::from_mins(3),
    );
    assert!(status.success(), "{said}");
    let records = read_trace(&out);
    check_own_rocm(&records, &out, &root, "llama-cli", registered);
}

/// An Ollama-shaped server inside the container (the test double `ollama_shim`, installed in the root as
/// `ollama`) starts the root's real `llama-server` as its runner, the way newer Ollama does; tracer follows it
/// with `--ollama` from the host. The runner loads ggml's HIP backend (its kernels registered), then fails to
/// load the model (the blob is no GGUF), as it would on a machine whose model is broken.
#[test]
fn an_ollama_runner_in_a_container_is_followed_from_the_host_with_its_own_rocm() {
    let root = sid_root();
    let r = root.display().to_string();
    let runner = format!("/usr/bin/llama-server --model /tmp/tracer-blob.gguf --port {}", server_port(129));
    let registered = bpftrace_registrations_of(&root, &format!("/usr/sbin/chroot {r} {runner}"), "llama-server");
    let shim = root.join("usr/local/bin/ollama");
    std::fs::create_dir_all(shim.parent().unwrap()).unwrap();
    std::fs::copy(fixture("ollama_shim"), &shim).unwrap();
    let out = scratch("container-ollama").join("t.jsonl");
    wait_for_releases();
    let rec = Recording::start(&out, &["--ollama"]);
    let children = format!("0|0|/usr/bin/llama-server|{}", runner.replace(' ', "|").trim_start_matches("/usr/bin/"));
    let (mut server, mut lines, mut line) = start_in_container(&root, "/usr/local/bin/ollama serve", |c| {
        c.env("OLLAMA_SHIM_CHILDREN", children).stdin(std::process::Stdio::piped())
    });
    assert_eq!(line.trim(), "ready");
    // A server waits for its first request before it starts a runner: here, until the trace shows the
    // container's HIP runtime probed (how long tracer takes to see a new root is not this test's subject).
    let (_, hip_inode) = file_in_root(&root, &format!("/{LIBDIR}/libamdhip64.so.6")).unwrap();
    let probed = format!("\"inode\":{hip_inode},");
    let deadline = std::time::Instant::now() + Duration::from_mins(1);
    while !std::fs::read_to_string(&out)
        .unwrap_or_default()
        .lines()
        .any(|l| l.contains("\"type\":\"library\"") && l.contains(&probed))
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::io::Write::write_all(&mut server.stdin.take().unwrap(), b"go\n").unwrap();
    line.clear();
    std::io::BufRead::read_line(&mut lines, &mut line).unwrap();
    assert!(line.starts_with("children done"), "the shim said {line:?}");
    drop(server.kill());
    drop(server.wait());
    std::thread::sleep(Duration::from_millis(300));
    rec.signal(libc::SIGINT);
    let (status, said) = rec.wait();
    assert_eq!(status.code(), Some(130), "{said}");
    let records = read_trace(&out);
    let runner_role = records.iter().any(|r| {
        matches!(r, Line::Process(p) if p.comm == "llama-server" && p.role.map(trace::Role::as_str) == Some("runner"))
    });
    assert!(runner_role, "the runner is followed as Ollama's");
    check_own_rocm(&records, &out, &root, "llama-server", registered);
}

/// A process in a container that loaded ggml's HIP backend (its kernels registered) before tracer started,
/// recorded with `--pid` from the host: each stub it launches afterwards is named from its own files, as a
/// late attach names them on the host, with the name its registration gave (which the fixture
/// `register_relaunch` kept by interposing `__hipRegisterFunction` in its own process: the oracle).
#[test]
fn a_container_process_started_before_tracer_has_every_launched_handle_named() {
    let root = sid_root();
    let names_in = "/tmp/tracer-relaunch-names";
    let go_in = "/tmp/tracer-relaunch-go";
    let (names, go) = (root.join(&names_in[1..]), root.join(&go_in[1..]));
    drop(std::fs::remove_file(&names));
    drop(std::fs::remove_file(&go));
    std::fs::copy(fixture("register_relaunch"), root.join("tmp/register_relaunch")).unwrap();
    let inner = format!(
        "/tmp/register_relaunch /{LIBDIR}/libamdhip64.so.6 /{LIBDIR}/ggml/backends0/libggml-hip.so {names_in} {go_in}"
    );
    let (mut program, mut lines, mut line) = start_in_container(&root, &inner, |c| c);
    assert!(line.starts_with("ready "), "{line:?}");
    // Its PID as the host sees it (it printed the one of its PID namespace).
    let pid = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .find(|p| std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "register_relaun"))
        .expect("the program's host PID");
    let registered: std::collections::HashMap<u64, String> = std::fs::read_to_string(&names)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let (stub, name) = l.split_once(' ')?;
            Some((u64::from_str_radix(stub.trim_start_matches("0x"), 16).ok()?, name.to_owned()))
        })
        .collect();
    assert!(registered.len() > 10_000, "{}", registered.len());

    let out = scratch("container-pid").join("t.jsonl");
    wait_for_releases();
    let rec = Recording::start(&out, &["--pid", &pid.to_string()]);
    std::fs::write(&go, b"").unwrap();
    line.clear();
    std::io::BufRead::read_line(&mut lines, &mut line).unwrap();
    assert_eq!(line.trim(), format!("launched {}", registered.len()));
    drop(program.wait());
    // The recording ends with its target.
    let (status, said) = rec.wait();
    assert!(status.success(), "{said}");
    let records = read_trace(&out);
    assert_eq!(footer(&records).total_drops(), 0);
    // Its GPU libraries are the container's files, never the host's at the same path.
    let mapped: Vec<&trace::Mapping> = records
        .iter()
        .filter_map(|r| if let Line::Mapping(m) = r { (m.pid == pid && m.gpu.is_some()).then_some(m) } else { None })
        .collect();
    assert!(mapped.iter().any(|m| m.path.contains("libamdhip64.so.6")), "{mapped:#?}");
    for m in &mapped {
        assert_eq!(file_in_root(&root, &m.path), Some((m.dev, m.inode)), "not the root's file: {m:?}");
        assert!(m.root.is_some(), "the mapping names its root: {m:?}");
    }
    let launched: Vec<&trace::Launch> = launches(&records).into_iter().filter(|l| l.pid == pid).collect();
    assert_eq!(launched.len(), registered.len(), "one launch per registered stub");
    let by_id: std::collections::HashMap<u32, &str> =
        kernels(&records).into_iter().filter(|k| k.pid == pid).map(|k| (k.id, k.name.as_str())).collect();
    let mut wrong = Vec::new();
    for l in &launched {
        let said = l.kernel.and_then(|id| by_id.get(&id).copied()).unwrap_or("");
        let want = registered.get(&l.handle).map_or("", String::as_str);
        if said != want {
            wrong.push((l.handle, said.to_owned(), want.to_owned()));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} launches named otherwise than registered: {:?}",
        wrong.len(),
        launched.len(),
        &wrong[..wrong.len().min(5)]
    );
}
