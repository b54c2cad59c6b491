//! Project tasks cargo cannot do alone: installing the toolchain pieces the eBPF build needs and the
//! `ROCm` user space the tests run against, building the HIP fixtures, running the demo and the tests.
//!
//! `cargo xtask setup` is idempotent: each step checks first and says what it does.
#![expect(clippy::print_stderr, reason = "xtask says what it does at each step")]

use std::{
    env,
    ffi::OsString,
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, Result, bail};
use clap::{Parser, Subcommand};

mod bench;
mod demo;
mod fixtures;
mod internals_map;
mod layout;
mod package;
mod provenance;
mod roots;
mod stack;
mod steplog;

#[derive(Parser)]
#[command(name = "xtask", about = "tracer's build, demo and test tasks")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install what a fresh Debian 12 machine lacks: rust-src for nightly, bpf-linker built against the
    /// nightly's LLVM, Debian's `ROCm` packages; mount tracefs.
    Setup,
    /// Build tracer (release) and the HIP fixtures.
    Build,
    /// Install and build only what the demo needs (the eBPF toolchain, Debian 12's HIP runtime and hipcc,
    /// tracer, its runner), record the demo workload under tracer, report it and two shipped recordings.
    Demo,
    /// Set up, build, then measure cost, throughput and losses (prints a table, writes bench/results.json).
    Bench {
        /// Shorter runs (checks the harness; figures are noisier).
        #[arg(long)]
        quick: bool,
        /// Only the real library-stack rows (10 and 11).
        #[arg(long)]
        stack: bool,
        /// Only these rows (`--rows 1,4,9`); the table is printed and bench/results.json left as it is.
        #[arg(long, value_delimiter = ',')]
        rows: Vec<u32>,
    },
    /// Fuzz every reader of hostile input: the trace reader, offload bundles, ELF files (symbols,
    /// registration calls, fat binaries), `ROCr`'s code-object list, /proc (cargo fuzz; corpora in
    /// fuzz/corpus, one per target).
    Fuzz {
        /// How long to run each target.
        #[arg(long, default_value_t = 120)]
        seconds: u64,
        /// Only this target.
        #[arg(long)]
        target: Option<String>,
    },
    /// Check that every header the fixtures include, every library they link and every program the tests
    /// run comes from a Debian package setup installs (dpkg -S), and that the check fails without one.
    CheckSetup,
    /// Build the Debian package for users: `target/debian/tracer_VERSION_ARCH.deb` (the binary, its man page,
    /// the systemd unit; no `ROCm` or CUDA packages needed or installed).
    Deb,
    /// Build tracer and install it for users under a prefix: bin/tracer, the man page and the systemd unit
    /// (needs only the eBPF build's toolchain, never `ROCm` or CUDA packages).
    Install {
        /// Where to install.
        #[arg(long, default_value = "/usr/local")]
        prefix: PathBuf,
    },
    /// Build llama.cpp as Ollama 0.30+ ships it for AMD (`ROCm` 7.2, gfx1100 and gfx1201, HIP graphs on) in
    /// /var/cache/tracer/exp-rocm72-build/opt/ollama, once (hours on 2 cores): the tree the shipped recordings of
    /// `fixtures/kmod/ollama_gfx1201_record.sh` are made from.
    OllamaRocm72,
    /// Set up, build, then run fmt and clippy checks, every unit test and the root integration tests.
    Test {
        /// Only run tests whose name contains this.
        filter: Option<String>,
        /// Skip the fmt and clippy checks.
        #[arg(long)]
        no_lint: bool,
    },
}

/// Debian packages `cargo xtask setup` installs: everything the build, the fixtures and the tests use
/// (`cargo xtask check-setup` proves it against what they really include, link and run). `ROCm` user space
/// (the real targets: the HIP and HSA runtimes, and a real library stack, hipSPARSE over the 1.3 GB
/// rocSPARSE, and rocRAND, with the headers the fixtures include), the C toolchain for the test doubles,
/// pip, which fetches the real libggml-hip.so the classification and inspection tests read (a Python
/// wheel), bpftrace, the independent count the library-stack test checks tracer against, strace, which shows
/// what files a root tracer opened when a user put an impostor in front of it, graphviz, which renders the
/// library graph `tracer export --format dot` writes, Prometheus, the real server that scrapes
/// `record --metrics` in a test, zstd (`zstdcat` reads a trace back), systemd (`systemd-analyze verify`
/// checks the shipped unit), and mmdebstrap and dpkg-dev, which make a fresh Debian system without `ROCm`
/// and the `.deb` that is installed into it.
const PACKAGES: &[&str] = &[
    "libamdhip64-5",
    "libamdhip64-dev",
    "hipcc",
    "libhsa-runtime64-1",
    "rocminfo",
    "libhipsparse-dev",
    "librocsparse-dev",
    "librocrand-dev",
    "build-essential",
    "python3-pip",
    "bpftrace",
    "strace",
    "graphviz",
    "tmux",    // the terminal `tracer top` is used in, keys sent and the screen read (tests/it/top.rs)
    "sqlite3", // reads back the databases `tracer export --format rocpd` writes (tests/it/rocpd.rs)
    "prometheus",
    "zstd",
    "systemd",
    "mmdebstrap",
    "dpkg-dev",
    // The Vulkan loader and its headers, glslc (the Vulkan fixture's shaders), and Mesa's Vulkan drivers:
    // lavapipe runs Vulkan compute on the CPU, so the Vulkan fixture's dispatches really run here.
    "libvulkan1",
    "libvulkan-dev",
    "glslc",
    "mesa-vulkan-drivers",
    // What `bench/vulkan/build.sh` builds the pinned llama.cpp's Vulkan backend with (the stripped-copy test).
    "cmake",
    "ninja-build",
    "spirv-headers",
    // The OpenCL ICD loader: a process that maps it is said to run GPU work tracer does not observe.
    "ocl-icd-libopencl1",
    // A Debian kernel booted under qemu with a busybox initramfs, where the real GPU scheduler module runs a
    // GPU driver test double's jobs (`fixtures/kmod`); gcc-12 builds that module, as it built the kernel.
    "qemu-system-x86",
    "busybox-static",
    "gcc-12",
    "xz-utils",
    "kmod",
];

const BPF_LINKER_VERSION: &str = "0.13.0";
const TRACEFS: &str = "/sys/kernel/tracing";

fn main() {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Setup => setup(),
        Cmd::Build => setup().and_then(|()| build()),
        Cmd::Demo => demo::demo(),
        Cmd::Bench { quick, stack, rows } => setup()
            .and_then(|()| build())
            .and_then(|()| bench::bench(bench::Opts { quick, stack_only: stack, only: rows })),
        Cmd::Fuzz { seconds, target } => setup().and_then(|()| fuzz(seconds, target.as_deref())),
        Cmd::CheckSetup => setup().and_then(|()| build()).and_then(|()| provenance::check()),
        Cmd::Deb => package::deb().map(|deb| step(&format!("built {}", deb.display()))),
        Cmd::Install { prefix } => package::install(&prefix),
        Cmd::OllamaRocm72 => setup().and_then(|()| roots::ollama_rocm72()),
        Cmd::Test { filter, no_lint } => setup().and_then(|()| build()).and_then(|()| test(filter, no_lint)),
    };
    if let Err(e) = result {
        eprintln!("xtask: error: {e:#}");
        std::process::exit(1);
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_path_buf()
}

fn cargo_home() -> PathBuf {
    env::var_os("CARGO_HOME").map_or_else(|| home().join(".cargo"), PathBuf::from)
}

fn home() -> PathBuf {
    env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from)
}

/// PATH with cargo's bin directory first, so the eBPF build finds bpf-linker.
fn path_with_cargo_bin() -> OsString {
    let mut paths = vec![cargo_home().join("bin")];
    if let Some(p) = env::var_os("PATH") {
        paths.extend(env::split_paths(&p));
    }
    env::join_paths(paths).expect("PATH entries are valid")
}

fn step(msg: &str) {
    eprintln!("xtask: {msg}");
}

/// A benchmark row's "met" column.
fn verdict(ok: bool) -> String {
    if ok { "yes".into() } else { "NO".into() }
}

/// Runs a step: PATH with cargo's bin directory first unless the step sets a PATH of its own; its output passed
/// through and kept in a log file, whose path and lines that say why a failed step prints ([`steplog`]).
fn run(cmd: &mut Command) -> Result<()> {
    if !cmd.get_envs().any(|(k, v)| k == "PATH" && v.is_some()) {
        cmd.env("PATH", path_with_cargo_bin());
    }
    steplog::run(cmd)
}

fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd.env("PATH", path_with_cargo_bin()).output().with_context(|| format!("cannot run {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn setup() -> Result<()> {
    nightly_rust_src()?;
    bpf_linker()?;
    debian_packages(PACKAGES)?;
    python_packages()?;
    tracefs()?;
    roots::sid_roots()?;
    roots::rocm72_root()?;
    roots::llama_vulkan()?;
    Ok(())
}

/// `DuckDB`'s Python package, which reads back `tracer export --format parquet` in a test: installed with
/// Debian's Python and pip into `target/pylib` (the tests put it on `PYTHONPATH`), not into the system's
/// Python.
/// The tests' Python packages, pinned: `DuckDB` reads the Parquet exports; numpy and gguf write the null GPU test's
/// tiny model (`fixtures/kmod/tiny_llama.py`).
/// scikit-build-core is llama-cpp-python's build backend: pip needs it to read the sdist's metadata, even to
/// download it (the pinned llama.cpp source of the Vulkan build).
const PY_PACKAGES: [&str; 4] = ["duckdb==1.5.6", "numpy==2.4.6", "gguf==0.19.0", "scikit-build-core==1.1.2"];

fn python_packages() -> Result<()> {
    let dir = pylib();
    let have = Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import sys, importlib.metadata as m; sys.exit(0 if all(m.version(n) == v for n, v in (p.split('==') for p in sys.argv[1:])) else 1)",
        ])
        .args(PY_PACKAGES)
        .env("PYTHONPATH", &dir)
        .output()
        .is_ok_and(|o| o.status.success());
    let list = PY_PACKAGES.join(" ");
    if have {
        step(&format!("Python {list} in {}: present", dir.display()));
        return Ok(());
    }
    step(&format!("installing Python {list} into {} with pip", dir.display()));
    run(Command::new("/usr/bin/python3")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--timeout",
            "60",
            "--upgrade",
            "--target",
        ])
        .arg(&dir)
        .args(PY_PACKAGES))
}

/// Where the tests' Python packages live.
fn pylib() -> PathBuf {
    root().join("target/pylib")
}

fn nightly_rust_src() -> Result<()> {
    let installed = output(Command::new("rustup").args(["component", "list", "--toolchain", "nightly", "--installed"]));
    match installed {
        Ok(list) if ["rust-src", "clippy"].iter().all(|c| list.lines().any(|l| l.starts_with(c))) => {
            step("nightly toolchain with rust-src and clippy: present");
            Ok(())
        }
        Ok(_) => {
            step("adding rust-src and clippy to the nightly toolchain (the eBPF crate builds core from source)");
            run(Command::new("rustup").args(["component", "add", "rust-src", "clippy", "--toolchain", "nightly"]))
        }
        Err(_) => {
            step("installing the nightly toolchain with rust-src and clippy (the eBPF crate needs them)");
            run(Command::new("rustup").args([
                "toolchain",
                "install",
                "nightly",
                "--profile",
                "minimal",
                "--component",
                "rust-src",
                "--component",
                "clippy",
            ]))
        }
    }
}

/// bpf-linker links against the nightly's own shared LLVM; a stamp file records which one, so a changed
/// nightly rebuilds it.
fn bpf_linker() -> Result<()> {
    let sysroot = output(Command::new("rustc").args(["+nightly", "--print", "sysroot"]))?.trim().to_owned();
    let libdir = Path::new(&sysroot).join("lib");
    let so = fs::read_dir(&libdir)?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("libLLVM.so."))
        .with_context(|| format!("the nightly toolchain has no shared LLVM in {}", libdir.display()))?;
    let version = output(Command::new("rustc").args(["+nightly", "-vV"]))?;
    let major = version
        .lines()
        .find_map(|l| l.strip_prefix("LLVM version: "))
        .and_then(|v| v.split('.').next())
        .context("cannot read the nightly's LLVM version")?
        .to_owned();
    let bin = cargo_home().join("bin");
    let stamp = bin.join(".bpf-linker-llvm");
    let linker = bin.join("bpf-linker");
    let want = format!("{BPF_LINKER_VERSION} {so}");
    let works = Command::new(&linker).arg("--version").output().is_ok_and(|o| o.status.success());
    if works && fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == want) {
        step(&format!("bpf-linker {BPF_LINKER_VERSION} for {so}: present"));
        return Ok(());
    }
    step(&format!(
        "building bpf-linker {BPF_LINKER_VERSION} against the nightly's LLVM {major} ({so}); about 2 minutes"
    ));
    // bpf-linker's build looks for libLLVM.so under $LLVM_PREFIX/lib: a throw-away directory with a link
    // to the nightly's library; the rpath lets the binary find it at run time.
    let shim = env::temp_dir().join(format!("tracer-llvm-shim-{}", std::process::id()));
    drop(fs::remove_dir_all(&shim));
    fs::create_dir_all(shim.join("lib"))?;
    std::os::unix::fs::symlink(libdir.join(&so), shim.join("lib/libLLVM.so"))?;
    let result = run(Command::new("cargo")
        .args(["install", &format!("bpf-linker@{BPF_LINKER_VERSION}"), "--locked", "--force", "--no-default-features"])
        .args(["--features", &format!("llvm-{major}")])
        .arg("--root")
        .arg(cargo_home())
        .env("LLVM_PREFIX", &shim)
        .env("RUSTFLAGS", format!("-C link-arg=-Wl,-rpath,{}", libdir.display())));
    drop(fs::remove_dir_all(&shim));
    result?;
    fs::write(&stamp, want)?;
    Ok(())
}

/// Installs those of `packages` that are not installed (apt-get).
fn debian_packages(packages: &[&str]) -> Result<()> {
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| {
            !Command::new("dpkg-query")
                .args(["-W", "-f=${Status}", p])
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        })
        .collect();
    if missing.is_empty() {
        step(&format!("Debian packages ({}): present", packages.join(" ")));
        return Ok(());
    }
    step(&format!("installing Debian packages: {}", missing.join(" ")));
    run(Command::new("apt-get").arg("update").arg("-q"))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "-q", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

fn tracefs() -> Result<()> {
    if Path::new(TRACEFS).join("events").is_dir() {
        step("tracefs: mounted");
        return Ok(());
    }
    step(&format!("mounting tracefs at {TRACEFS}"));
    run(Command::new("mount").args(["-t", "tracefs", "nodev", TRACEFS]))
}

fn build() -> Result<()> {
    cargo_build_tracer()?;
    fixtures::build()
}

/// `cargo build --release -p tracer` (the eBPF programs are built by tracer/build.rs).
fn cargo_build_tracer() -> Result<()> {
    step("building tracer (release; the eBPF programs are built by tracer/build.rs)");
    run(Command::new("cargo").current_dir(root()).args(["build", "--release", "-p", "tracer"]))
}

fn tracer_bin() -> PathBuf {
    root().join("target/release/tracer")
}

/// The fuzz targets (`fuzz/fuzz_targets/NAME.rs`), each with its corpus under `fuzz/corpus/NAME`.
const FUZZ_TARGETS: [&str; 7] =
    ["trace_reader", "bundles", "elf_files", "loader_list", "proc_files", "graph_exec", "ring_records"];

fn fuzz(seconds: u64, only: Option<&str>) -> Result<()> {
    if !Command::new("cargo")
        .args(["+nightly", "fuzz", "--version"])
        .env("PATH", path_with_cargo_bin())
        .output()
        .is_ok_and(|o| o.status.success())
    {
        step("installing cargo-fuzz");
        run(Command::new("cargo").args(["+nightly", "install", "cargo-fuzz", "--locked"]))?;
    }
    let targets: Vec<&str> = FUZZ_TARGETS.iter().copied().filter(|t| only.is_none_or(|o| o == *t)).collect();
    if targets.is_empty() {
        bail!("no fuzz target {}: the targets are {}", only.unwrap_or_default(), FUZZ_TARGETS.join(", "));
    }
    for target in targets {
        let corpus = root().join("fuzz/corpus").join(target);
        fs::create_dir_all(&corpus)?;
        step(&format!("fuzzing {target} for {seconds} s (corpus: {})", corpus.display()));
        // The readers need no eBPF object: skip its build under the sanitizer flags.
        run(Command::new("cargo")
            .current_dir(root().join("fuzz"))
            .args(["+nightly", "fuzz", "run", target])
            .arg(&corpus)
            // Leak detection is off: LeakSanitizer reports std's per-thread channel context of the trace
            // reader's worker threads, which lives until the thread ends. The RSS limit sits above the
            // 256 MiB a compressed bundle may decompress to.
            .args([
                "--",
                &format!("-max_total_time={seconds}"),
                "-rss_limit_mb=1536",
                "-max_len=262144",
                "-detect_leaks=0",
            ])
            .env("AYA_BUILD_SKIP", "1"))?;
    }
    Ok(())
}

fn test(filter: Option<String>, no_lint: bool) -> Result<()> {
    let root = root();
    if !no_lint {
        step("cargo fmt --check");
        run(Command::new("cargo").current_dir(&root).args(["fmt", "--all", "--check"]))?;
        step("cargo clippy --all-targets -- -D warnings");
        run(Command::new("cargo").current_dir(&root).args([
            "clippy",
            "--release",
            "--workspace",
            "--exclude",
            "tracer-ebpf",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]))?;
        step("layout: imports between the wings go one way, no file over 600 lines, docs/internals.md's file map true");
        layout::check(&root)?;
        // The fuzz targets are a workspace of their own that nothing else builds: a path moved in tracer
        // would break them unseen until `cargo xtask fuzz`.
        step("cargo check (the fuzz targets)");
        run(Command::new("cargo").current_dir(root.join("fuzz")).args(["check", "--bins"]))?;
        step("cargo +nightly clippy (the eBPF crate, for bpfel-unknown-none) -- -D warnings");
        run(Command::new("cargo").current_dir(root.join("tracer-ebpf")).args([
            "+nightly",
            "clippy",
            "--target",
            "bpfel-unknown-none",
            "-Z",
            "build-std=core",
            "--",
            "-D",
            "warnings",
        ]))?;
    }
    step("provenance of what the fixtures and tests use (cargo xtask check-setup)");
    provenance::check()?;
    let deb = package::deb()?;
    let filter_args: Vec<String> = filter.into_iter().collect();
    step("unit tests");
    run(Command::new("cargo").current_dir(&root).args(["test", "--release"]).args(&filter_args))?;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("the integration tests load eBPF programs and need root: run `sudo -E cargo xtask test`");
    }
    step("integration tests (root; real eBPF programs against real processes)");
    run(Command::new("cargo")
        .current_dir(&root)
        .args(["test", "--release", "-p", "integration-tests"])
        .args(&filter_args)
        .args(["--", "--test-threads=1"])
        .env("TRACER_BIN", tracer_bin())
        .env("TRACER_FIXTURES", fixtures::fixtures_dir())
        .env("TRACER_PYLIB", pylib())
        .env("TRACER_DEB", deb)
        .env("TRACER_SID_ROOT", roots::SID_ROOT)
        .env("TRACER_ROCM72_ROOT", roots::ROCM72_ROOT)
        .env("TRACER_SID_VULKAN_ROOT", roots::SID_VULKAN_ROOT)
        .env("TRACER_LLAMA_VULKAN", PathBuf::from(roots::LLAMA_VK_WORK).join("build/bin"))
        .env("TRACER_LLAMA_STATIC_SERVER", PathBuf::from(roots::LLAMA_VK_WORK).join(roots::STATIC_SERVER)))
}
