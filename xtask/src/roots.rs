//! What `cargo xtask setup` makes outside the checkout for the tests, once: roots of Debian unstable's and
//! experimental's GPU stacks (mmdebstrap, from this system's own Debian mirror) and the pinned llama.cpp built
//! with its Vulkan backend.

use std::{
    env, fs,
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use anyhow::{Context as _, Result, bail};

use crate::{output, pylib, root, run, step};

/// A root of today's AMD LLM stack from Debian's unstable suite (HIP 6.4, `ROCr` 6.4, rocBLAS, ggml 0.27's
/// HIP backend, llama.cpp's tools), for the container tests: the runtime a container brings, never the
/// host's. Made by mmdebstrap once, outside the checkout (5.5 GB), from this system's own Debian mirror.
pub(crate) const SID_ROOT: &str = "/var/cache/tracer/sid-rocm";
const SID_PACKAGES: &str = "llama.cpp-tools,libggml0-backend-hip,libllama0,rocminfo,libamdhip64-6";
/// Debian unstable's Vulkan stack for ggml (its `libggml0-backend-vulkan`, shipped without a symbol table)
/// and Mesa's lavapipe, which runs it on the CPU: a root of its own (0.5 GB), so that the `ROCm` root's
/// tools never load a Vulkan backend beside their HIP one.
pub(crate) const SID_VULKAN_ROOT: &str = "/var/cache/tracer/sid-vulkan";
const SID_VULKAN_PACKAGES: &str = "llama.cpp-tools,libggml0-backend-vulkan,mesa-vulkan-drivers";

/// Debian experimental's `ROCm` 7.2.4 (HIP 7.2.4, `ROCr` 7.2.4, comgr 7.2.4; hipcc 7.2.4 with clang 22 and its
/// device libraries) on a Debian unstable base: the HIP line Ollama 0.30+ bundles, whose graph replays ring one
/// doorbell for many AQL packets (issue 76). Its unmodified packages, nothing changed; hipcc builds the HIP graph
/// fixture's code object (`fixtures/kmod/hip_graphs_kernels.hip`), the null GPU's guest runs the rest.
pub(crate) const ROCM72_ROOT: &str = "/var/cache/tracer/exp-rocm72";
const ROCM72_PACKAGES: &str = "libamdhip64-7,libamdhip64-dev,hipcc,rocminfo";
/// The root's apt preferences: the `ROCm` source packages from experimental (HIP, `ROCr`, the `ROCm` LLVM with
/// comgr, hipcc and the device libraries), everything else from unstable (experimental's default priority, 1,
/// leaves every other package there), written by mmdebstrap's setup hook before anything is installed.
const ROCM72_PIN: &str =
    "Package: src:rocm-hipamd src:rocr-runtime src:rocm-llvm\nPin: release a=experimental\nPin-Priority: 990\n";
/// The version every `ROCm` package of that root has.
const ROCM72_VERSION: &str = "7.2.4";

/// The build root of llama.cpp as Ollama 0.30+ ships it for AMD (issue 80): [`ROCM72_ROOT`]'s packages with
/// experimental's rocBLAS, hipBLAS (and what they pull: rocSOLVER, hipBLASLt, roctx) and the build tools.
const ROCM72_BUILD_ROOT: &str = "/var/cache/tracer/exp-rocm72-build";
const ROCM72_BUILD_PACKAGES: &str =
    "libamdhip64-7,libamdhip64-dev,hipcc,rocminfo,librocblas-dev,libhipblas-dev,cmake,ninja-build,g++,make";
const ROCM72_BUILD_PIN: &str = "Package: src:rocm-hipamd src:rocr-runtime src:rocm-llvm src:rocblas src:hipblas \
     src:rocsolver src:roctracer src:hipblaslt\nPin: release a=experimental\nPin-Priority: 990\n";
/// The Ollama-shaped tree `fixtures/kmod/ollama_rocm72.sh` lays out from that build, inside the build root at
/// /opt/ollama (as Ollama's installer puts it under a prefix): the null GPU's guest shares one host directory, the
/// root with the tree in it, whose system libraries the runner uses beside the ones the tree bundles.
pub(crate) const OLLAMA_ROCM72: &str = "/var/cache/tracer/exp-rocm72-build/opt/ollama";

/// `cargo xtask ollama-rocm72`: the build root, then the pinned llama.cpp (the Vulkan build's source, which setup
/// fetched) built for gfx1100 and gfx1201 as Ollama builds it, and laid out as its tree in [`OLLAMA_ROCM72`]; a
/// tree already there is kept. Hours on 2 cores: the recording made from it is shipped, never made by a test.
pub(crate) fn ollama_rocm72() -> Result<()> {
    let out = PathBuf::from(OLLAMA_ROCM72);
    if out.join("lib/ollama/rocm_v7_2/libggml-hip.so").exists() {
        step(&format!("the Ollama-shaped ROCm 7.2 tree in {OLLAMA_ROCM72}: present"));
        return Ok(());
    }
    debian_root(&Root {
        dir: ROCM72_BUILD_ROOT,
        packages: ROCM72_BUILD_PACKAGES,
        what: "Debian experimental's ROCm 7.2 build",
        pin: Some(ROCM72_BUILD_PIN),
    })?;
    step(&format!("building llama.cpp's HIP backend for gfx1100 and gfx1201 in {ROCM72_BUILD_ROOT} (hours)"));
    run(Command::new("bash")
        .arg(root().join("fixtures/kmod/ollama_rocm72.sh"))
        .arg(ROCM72_BUILD_ROOT)
        .arg(Path::new(LLAMA_VK_WORK).join("llama.cpp"))
        .arg(&out))
}

pub(crate) fn sid_roots() -> Result<()> {
    debian_root(&Root { dir: SID_ROOT, packages: SID_PACKAGES, what: "Debian unstable's ROCm", pin: None })?;
    debian_root(&Root {
        dir: SID_VULKAN_ROOT,
        packages: SID_VULKAN_PACKAGES,
        what: "Debian unstable's Vulkan",
        pin: None,
    })
}

/// [`ROCM72_ROOT`], checked after it is made: every `ROCm` package in it is 7.2.4.
pub(crate) fn rocm72_root() -> Result<()> {
    let root = Root {
        dir: ROCM72_ROOT,
        packages: ROCM72_PACKAGES,
        what: "Debian experimental's ROCm 7.2",
        pin: Some(ROCM72_PIN),
    };
    debian_root(&root)
}

/// The pinned llama.cpp (the llama-cpp-python sdist's, as the GPU benches pin it) built with its Vulkan backend by
/// `bench/vulkan/build.sh`, once, outside the checkout: the test that strips its `libggml-vulkan.so` compares the
/// names of the stripped copy's pipelines with the unstripped copy's symbols; and its `llama-server` linked as
/// Ollama links llama.cpp, whose steps are judged from their passes' inputs.
pub(crate) const LLAMA_VK_WORK: &str = "/var/cache/tracer/llama-vulkan";
/// Its `llama-server` linked as Ollama links llama.cpp (libllama in the program, ggml's libraries shared,
/// stripped), under [`LLAMA_VK_WORK`]: the test of steps judged from their passes' inputs runs it.
pub(crate) const STATIC_SERVER: &str = "static/bin/llama-server";
const LLAMA_CPP_PYTHON: &str = "0.3.36";

pub(crate) fn llama_vulkan() -> Result<()> {
    let work = PathBuf::from(LLAMA_VK_WORK);
    let bin = work.join("build/bin");
    if ["llama-bench", "llama-quantize"].iter().all(|t| bin.join(t).exists()) && work.join(STATIC_SERVER).exists() {
        step(&format!("llama.cpp {LLAMA_CPP_PYTHON}'s Vulkan build in {LLAMA_VK_WORK}: present"));
        return Ok(());
    }
    step(&format!(
        "building the pinned llama.cpp (llama-cpp-python {LLAMA_CPP_PYTHON}) with its Vulkan backend in {LLAMA_VK_WORK}, and its llama-server linked as Ollama links it (about 10 and 15 minutes on 2 cores)"
    ));
    let sdist_dir = work.join("sdist");
    fs::create_dir_all(&sdist_dir)?;
    let sdist = sdist_dir.join(format!("llama_cpp_python-{LLAMA_CPP_PYTHON}.tar.gz"));
    if !sdist.exists() {
        run(Command::new("/usr/bin/python3")
            .args(["-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps"])
            .args(["--no-binary", ":all:", "--no-build-isolation", "-d"])
            .arg(&sdist_dir)
            .arg(format!("llama-cpp-python=={LLAMA_CPP_PYTHON}"))
            .env("PYTHONPATH", pylib()))?;
    }
    let path = format!("/usr/bin:{}", env::var("PATH").unwrap_or_default());
    run(Command::new("bash")
        .arg(root().join("bench/vulkan/build.sh"))
        .env("LLAMA_VK_WORK", &work)
        .env("LLAMA_SDIST", &sdist)
        .env("LLAMA_CPP_PYTHON", LLAMA_CPP_PYTHON)
        .env("LLAMA_VK_NO_MODELS", "1")
        .env("LLAMA_VK_STATIC_SERVER", "1")
        .env("PATH", path)
        .env("PYTHONPATH", pylib()))
}

/// A root mmdebstrap makes from Debian unstable (and experimental, where `pin` chooses packages from it).
struct Root<'a> {
    dir: &'a str,
    /// mmdebstrap's `--include`.
    packages: &'a str,
    /// What it is, in words.
    what: &'a str,
    /// apt preferences taking packages from experimental (its suite is then a source too).
    pin: Option<&'a str>,
}

/// Makes `root` once: in a directory beside it, renamed into place when mmdebstrap and the checks succeeded; a
/// stamp file with its package list (and pin) says it is complete.
fn debian_root(root: &Root<'_>) -> Result<()> {
    let dir = PathBuf::from(root.dir);
    let stamp_text = match root.pin {
        Some(pin) => format!("{}\n{pin}", root.packages),
        None => root.packages.to_owned(),
    };
    let what = root.what;
    if fs::read_to_string(dir.join(STAMP)).is_ok_and(|s| s == stamp_text) {
        step(&format!("{what} root in {}: present", root.dir));
        return Ok(());
    }
    let mirror = debian_mirror()?;
    step(&format!("making {what} root in {} with mmdebstrap ({})", root.dir, root.packages));
    let started = Instant::now();
    let tmp = dir.with_extension("tmp");
    drop(fs::remove_dir_all(&tmp));
    fs::create_dir_all(dir.parent().unwrap_or(&dir))?;
    let source =
        |suite: &str| format!("deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] {mirror} {suite} main");
    let mut cmd = Command::new("mmdebstrap");
    cmd.args(["--variant=apt", "--quiet", "--aptopt=Acquire::Check-Valid-Until \"false\""])
        .arg(format!("--include={}", root.packages));
    if let Some(pin) = root.pin {
        // The hook runs after the sources are written and before apt's first update and install.
        cmd.arg(format!(
            "--setup-hook=mkdir -p \"$1/etc/apt/preferences.d\" && printf '{pin}' > \"$1/etc/apt/preferences.d/tracer-rocm.pref\""
        ));
    }
    cmd.arg("sid").arg(&tmp).arg(source("sid"));
    if root.pin.is_some() {
        cmd.arg(source("experimental"));
    }
    run(&mut cmd)?;
    if root.pin.is_some() {
        rocm_versions(&tmp, ROCM72_VERSION)?;
    }
    fs::write(tmp.join(STAMP), &stamp_text)?;
    drop(fs::remove_dir_all(&dir));
    fs::rename(&tmp, &dir)?;
    let size = output(Command::new("du").args(["-sh", "--"]).arg(&dir))?;
    step(&format!(
        "{what} root made in {:.0} s: {}",
        started.elapsed().as_secs_f64(),
        size.split_whitespace().next().unwrap_or("?")
    ));
    Ok(())
}

/// The file that says a root is complete: its package list (and pin).
const STAMP: &str = ".tracer-complete";

/// Every `ROCm` package in `root` (HIP, HSA, comgr, rocBLAS and the BLAS wrappers, hipcc, rocminfo, the device
/// libraries) has version `version`: an error naming those that do not.
fn rocm_versions(root: &Path, version: &str) -> Result<()> {
    let list = output(Command::new("chroot").arg(root).args(["dpkg-query", "-W", "-f", "${Package} ${Version}\n"]))?;
    let rocm: Vec<(&str, &str)> = list
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(p, _)| ["hip", "hsa", "comgr", "rocblas", "rocm", "rocminfo"].iter().any(|w| p.contains(w)))
        // hipBLAS's common headers are a source package of their own, on a version line of its own (7.1.0).
        .filter(|(p, _)| !p.starts_with("libhipblas-common"))
        .collect();
    let wrong: Vec<String> =
        rocm.iter().filter(|(_, v)| !v.starts_with(version)).map(|(p, v)| format!("{p} {v}")).collect();
    if rocm.len() < 5 || !wrong.is_empty() {
        bail!("{}: ROCm packages not at {version}: {wrong:?} (of {rocm:?})", root.display());
    }
    let said: Vec<String> = rocm.iter().map(|(p, v)| format!("{p} {v}")).collect();
    step(&format!("{}: {}", root.display(), said.join(", ")));
    Ok(())
}

/// Debian's main archive as this system's apt sources name it (deb822 or one-line).
fn debian_mirror() -> Result<String> {
    let mut text = fs::read_to_string("/etc/apt/sources.list").unwrap_or_default();
    let mut parts: Vec<PathBuf> = fs::read_dir("/etc/apt/sources.list.d")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "sources" || e == "list"))
        .collect();
    parts.sort();
    for p in parts {
        text.push('\n');
        text.push_str(&fs::read_to_string(p).unwrap_or_default());
    }
    text.lines()
        .map(str::trim)
        .filter(|l| l.starts_with("URIs:") || l.starts_with("deb "))
        .filter(|l| !l.contains("security") && !l.contains("updates"))
        .flat_map(str::split_whitespace)
        .find(|w| w.starts_with("http://") || w.starts_with("https://"))
        .map(str::to_owned)
        .context("no Debian mirror in this system's apt sources (/etc/apt/sources.list*)")
}
