//! What `cargo xtask setup` makes outside the checkout for the tests, once: roots of Debian unstable's GPU
//! stacks (mmdebstrap, from this system's own Debian mirror) and the pinned llama.cpp built with its Vulkan
//! backend.

use std::{env, fs, path::PathBuf, process::Command};

use anyhow::{Context as _, Result};

use crate::{pylib, root, run, step};

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

pub(crate) fn sid_roots() -> Result<()> {
    sid_root(SID_ROOT, SID_PACKAGES, "ROCm")?;
    sid_root(SID_VULKAN_ROOT, SID_VULKAN_PACKAGES, "Vulkan")
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

fn sid_root(root: &str, packages: &str, what: &str) -> Result<()> {
    let dir = PathBuf::from(root);
    let stamp = dir.join(".tracer-complete");
    if fs::read_to_string(&stamp).is_ok_and(|s| s == packages) {
        step(&format!("Debian unstable's {what} root in {root}: present"));
        return Ok(());
    }
    let mirror = debian_mirror()?;
    step(&format!("making Debian unstable's {what} root in {root} with mmdebstrap ({packages})"));
    let tmp = dir.with_extension("tmp");
    drop(fs::remove_dir_all(&tmp));
    fs::create_dir_all(dir.parent().unwrap_or(&dir))?;
    run(Command::new("mmdebstrap")
        .args(["--variant=apt", "--quiet", "--aptopt=Acquire::Check-Valid-Until \"false\""])
        .arg(format!("--include={packages}"))
        .arg("sid")
        .arg(&tmp)
        .arg(format!("deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] {mirror} sid main")))?;
    fs::write(tmp.join(".tracer-complete"), packages)?;
    drop(fs::remove_dir_all(&dir));
    fs::rename(&tmp, &dir)?;
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
