//! Hostile ggml libraries an unprivileged user dlopens under a system-wide recording (issue 77, bad cases 3
//! and 4): a 1.2 MB `libggml-vulkan.so` with 2 000 section headers over the same 1 MiB of code, and an 8 GiB
//! sparse one (24 KB on disk) with 100 executable sections each spanning the file. Both are made here from a
//! small shared object (`cc`), its section headers rewritten: no big binary in git. `nobody` preloads each
//! into `vk_runner` (lavapipe), whose shader modules make tracer index every ggml file it maps (the finder of
//! ggml-vulkan's pipeline calls), while root's `mini_runner launches` (the canary) runs beside it.
//!
//! Bounds, as the issue states them: tracer's peak RSS at most 150 MiB; the canary's launches all there (every
//! run's count the same, none missing); `-d` honoured (tracer ends within 2 s of its duration); SIGTERM
//! honoured (sent while the finder reads the 8 GiB file: tracer ends within 2 s, with its footer); the 8 GiB
//! library said unread, with its reason (footer `code_files_unread`, a warning naming the file).
#![expect(clippy::little_endian_bytes, reason = "rewrites an x86-64 ELF's little-endian section headers")]

use std::{
    io::Write as _,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use integration_tests::*;

/// The peak RSS the issue allows tracer.
const MAX_RSS_KIB: u64 = 150 << 10;
/// How late after its duration (or a SIGTERM) tracer may end.
const STOP_WITHIN: Duration = Duration::from_secs(2);

/// A small x86-64 shared object importing `vkGetInstanceProcAddr` (so the finder takes it), with no
/// `*_data` symbol (so the finder decodes its code), built with `cc`.
fn base_object(dir: &Path) -> Vec<u8> {
    let src = dir.join("hostile.c");
    std::fs::write(
        &src,
        "extern void *vkGetInstanceProcAddr(void *, const char *);\n\
         void *hostile_entry(void) { return vkGetInstanceProcAddr(0, \"vkCreateInstance\"); }\n",
    )
    .unwrap();
    let so = dir.join("base.so");
    let st = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-Wl,-soname,libhostile.so", "-o"])
        .arg(&so)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success(), "cc builds the base object");
    std::fs::read(&so).unwrap()
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// `elf` with its section header table moved to `table_at` (the bytes up to it padded), holding its own
/// headers then `extra` executable `PROGBITS` headers over `offset..offset + size` (address `addr`).
fn with_sections(elf: &[u8], table_at: usize, extra: usize, (offset, size, addr): (u64, u64, u64)) -> Vec<u8> {
    let (shoff, shentsize, shnum) = (u64_at(elf, 0x28) as usize, u16_at(elf, 0x3a) as usize, u16_at(elf, 0x3c));
    assert_eq!(shentsize, 64);
    let own = &elf[shoff..shoff + 64 * shnum as usize];
    let mut out = elf.to_vec();
    out.resize(table_at, 0);
    out.extend_from_slice(own);
    for _ in 0..extra {
        let mut h = [0u8; 64];
        h[4..8].copy_from_slice(&1u32.to_le_bytes()); // SHT_PROGBITS
        h[8..16].copy_from_slice(&6u64.to_le_bytes()); // SHF_ALLOC | SHF_EXECINSTR
        h[16..24].copy_from_slice(&addr.to_le_bytes());
        h[24..32].copy_from_slice(&offset.to_le_bytes());
        h[32..40].copy_from_slice(&size.to_le_bytes());
        h[48..56].copy_from_slice(&16u64.to_le_bytes());
        out.extend_from_slice(&h);
    }
    out[0x28..0x30].copy_from_slice(&(table_at as u64).to_le_bytes());
    let total = u16::try_from(usize::from(shnum) + extra).unwrap();
    out[0x3c..0x3e].copy_from_slice(&total.to_le_bytes());
    out
}

/// (a): 2 000 section headers over the same 1 MiB of code: `lea rcx, [rip]; lea r9, [rip]; call` over and
/// over (argument registers loaded before calls, what the finder follows).
fn many_headers(dir: &Path, base: &[u8]) -> PathBuf {
    let code_at = base.len().next_multiple_of(4096);
    let mut elf = base.to_vec();
    elf.resize(code_at, 0);
    let site: [u8; 19] = [0x48, 0x8d, 0x0d, 0, 0, 0, 0, 0x4c, 0x8d, 0x0d, 0, 0, 0, 0, 0xe8, 0x10, 0x00, 0x00, 0x00];
    while elf.len() < code_at + (1 << 20) {
        elf.extend_from_slice(&site);
    }
    elf.truncate(code_at + (1 << 20));
    let table_at = elf.len();
    let out = with_sections(&elf, table_at, 2000, (code_at as u64, 1 << 20, 0x1000_0000));
    write_library(&dir.join("many"), &out, None)
}

/// (b): an 8 GiB sparse file, 100 executable sections each spanning it.
fn sparse(dir: &Path, base: &[u8]) -> PathBuf {
    const LEN: u64 = 8 << 30;
    let table_at = base.len().next_multiple_of(4096);
    let out = with_sections(base, table_at, 100, (0, LEN, 0));
    write_library(&dir.join("sparse"), &out, Some(LEN))
}

/// Writes `bytes` as `dir/libggml-vulkan.so` (extended to `len`: sparse), readable by everyone.
fn write_library(dir: &Path, bytes: &[u8], len: Option<u64>) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.join("libggml-vulkan.so");
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(bytes).unwrap();
    if let Some(len) = len {
        f.set_len(len).unwrap();
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// `nobody` runs `vk_runner 2` with the library preloaded: it maps the hostile ggml file beside the test
/// double, and its shader modules make tracer look for their names in both.
fn nobody_runs_vulkan_with(lib: &Path) -> std::process::Output {
    Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "env"])
        .arg(format!("LD_PRELOAD={}", lib.display()))
        .arg(fixture("vk_runner"))
        .arg("2")
        .output()
        .unwrap()
}

/// Root's canary: `mini_runner launches` run `runs` times.
fn canary(runs: usize) -> std::thread::JoinHandle<()> {
    let runner = fixture("mini_runner");
    std::thread::spawn(move || {
        for i in 0..runs {
            let st = Command::new(&runner).arg("launches").output().unwrap().status;
            assert!(st.success(), "canary run {i}");
        }
    })
}

/// Launches per canary process, one entry per process.
fn canary_launches(records: &[Line]) -> Vec<usize> {
    let pids: std::collections::BTreeSet<u32> = records
        .iter()
        .filter_map(|r| match r {
            Line::Process(p) if p.comm == "mini_runner" => Some(p.pid),
            _ => None,
        })
        .collect();
    pids.iter().map(|pid| launches(records).iter().filter(|l| l.pid == *pid).count()).collect()
}

/// What a recording shows, and its bounds checked: RSS, canary, footer.
#[expect(clippy::print_stdout, clippy::use_debug, reason = "prints the figures it measured")]
fn check(records: &[Line], runs: usize, what: &str) -> u64 {
    let f = footer(records);
    let rss = f.counters["tracer_max_rss_kib"];
    let per_run = canary_launches(records);
    println!("{what}: tracer's peak RSS {rss} KiB; canary launches per run {per_run:?}; counters {:?}", f.counters);
    assert!(rss <= MAX_RSS_KIB, "{what}: tracer's peak RSS {rss} KiB");
    assert_eq!(per_run.len(), runs, "{what}: every canary run recorded");
    assert!(per_run.iter().all(|&n| n == per_run[0] && n >= 6), "{what}: canary launches {per_run:?}");
    assert_eq!(f.total_drops(), 0, "{what}");
    rss
}

#[test]
fn hostile_ggml_libraries_leave_a_system_wide_recording_bounded_and_answering() {
    let dir = scratch("hostile-libraries");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let base = base_object(&dir);
    let (many, big) = (many_headers(&dir, &base), sparse(&dir, &base));
    assert!(std::fs::metadata(&big).unwrap().len() == 8 << 30);

    // (a) under `-d 12`: the recording ends on time, its RSS bounded, the canary whole.
    let out = dir.join("a.jsonl.zst");
    let rec = Recording::start(&out, &["-d", "12"]);
    let started = Instant::now();
    let runs = 20;
    let c = canary(runs);
    let o = nobody_runs_vulkan_with(&many);
    assert!(o.status.success(), "vk_runner with (a): {}", String::from_utf8_lossy(&o.stderr));
    c.join().unwrap();
    let (status, stderr) = rec.wait();
    let took = started.elapsed();
    eprintln!("(a) -d 12: tracer ended {:.2} s after its probes were live", took.as_secs_f64());
    assert!(status.success(), "{stderr}");
    assert!(took <= Duration::from_secs(12) + STOP_WITHIN, "-d 12 honoured: {took:?}");
    check(&read_trace(&out), runs, "(a) 2 000 section headers");

    // (b) SIGTERM while the finder reads the 8 GiB file.
    let out = dir.join("b.jsonl.zst");
    let rec = Recording::start(&out, &["-d", "60"]);
    let c = canary(runs);
    let o = nobody_runs_vulkan_with(&big);
    assert!(o.status.success(), "vk_runner with (b): {}", String::from_utf8_lossy(&o.stderr));
    c.join().unwrap();
    // Let the finder end its 64 MiB of the file (2.4 s measured with `tracer inspect`), past the session's waits.
    std::thread::sleep(Duration::from_secs(4));
    let sent = Instant::now();
    rec.signal(libc::SIGTERM);
    let (status, stderr) = rec.wait();
    let took = sent.elapsed();
    eprintln!("(b) SIGTERM: tracer ended {:.2} s after it; stderr: {stderr}", took.as_secs_f64());
    assert_eq!(status.code(), Some(143), "{stderr}");
    assert!(took <= STOP_WITHIN, "SIGTERM honoured: {took:?}");
    let records = read_trace(&out);
    check(&records, runs, "(b) 8 GiB sparse");
    let f = footer(&records);
    assert!(f.counters.get("code_files_unread").copied().unwrap_or(0) >= 1, "{:?}", f.counters);
    assert!(
        stderr.contains(&format!("{}: ggml-vulkan's pipeline finder stopped past the 64 MiB", big.display())),
        "the library said unread, with its reason: {stderr}"
    );

    // (c) SIGTERM at once, while the finder is still reading the 8 GiB file: the stop does not wait for it,
    // and says what it left.
    let out = dir.join("c.jsonl.zst");
    let rec = Recording::start(&out, &["-d", "60"]);
    let o = nobody_runs_vulkan_with(&big);
    assert!(o.status.success(), "vk_runner with (c): {}", String::from_utf8_lossy(&o.stderr));
    let sent = Instant::now();
    rec.signal(libc::SIGTERM);
    let (status, stderr) = rec.wait();
    let took = sent.elapsed();
    println!("(c) SIGTERM mid-finder: tracer ended {:.2} s after it", took.as_secs_f64());
    assert_eq!(status.code(), Some(143), "{stderr}");
    assert!(took <= STOP_WITHIN, "SIGTERM honoured mid-finder: {took:?}");
    let records = read_trace(&out);
    let f = footer(&records);
    let counter = |name: &str| f.counters.get(name).copied().unwrap_or(0);
    assert!(counter("code_files_unfinished") + counter("code_files_unread") >= 1, "{:?}", f.counters);
    assert!(
        stderr.contains("the recording stopped while tracer's finder was still reading its code")
            || stderr.contains("pipeline finder stopped past the 64 MiB"),
        "{stderr}"
    );
}
