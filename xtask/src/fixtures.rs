//! The fixtures the integration tests run: programs and libraries built from `fixtures/`, and the guest
//! kernel for the GPU scheduler tests.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, Result};

use crate::{root, roots, run, step};

/// Link flags of the plain C fixtures that need them: `register_relaunch` exports its `__hipRegisterFunction`,
/// which the HIP library it loads calls instead of the runtime's.
const C_FIXTURE_FLAGS: &[(&str, &[&str])] = &[("register_relaunch", &["-rdynamic"])];

/// Libraries a HIP fixture links besides the HIP runtime.
pub(crate) const FIXTURE_LIBS: &[(&str, &[&str])] = &[
    ("sparse_rand", &["-lhipsparse", "-lrocsparse", "-lrocrand"]),
    ("server_slots", &["-lhipsparse"]),
    ("ggml_pass_calls", &["-lhipsparse"]),
];
/// HIP fixtures built as shared libraries, under these names, before the programs: the libllama test double.
const FIXTURE_SHARED: &[(&str, &str)] = &[("llama_double", "libllama.so"), ("ggml_base_double", "libggml-base.so")];
/// HIP fixture programs linked to a shared-library fixture, found beside them (rpath `$ORIGIN`).
const FIXTURE_LINKS_SHARED: &[(&str, &str)] =
    &[("server_slots", "libllama.so"), ("ggml_steps", "libggml-base.so"), ("ggml_pass_calls", "libggml-base.so")];
pub(crate) fn fixtures_dir() -> PathBuf {
    root().join("target/fixtures")
}

/// The Vulkan runner and its `libggml-vulkan.so` TEST DOUBLE (`target/fixtures/vulkan/`): each
/// `fixtures/vulkan/shaders/*.comp` compiled by glslc, its SPIR-V written as ggml's vulkan-shaders-gen
/// writes it (`NAME_data`, `NAME_len`) into the double's C source, except `own_kernel`, which goes into the
/// program itself (an application's own shader, in no ggml file).
fn build_vulkan_fixture(out: &Path) -> Result<()> {
    let dir = out.join("vulkan");
    fs::create_dir_all(&dir)?;
    let src = root().join("fixtures/vulkan");
    step("glslc fixtures/vulkan/shaders, cc fixtures/vulkan (the Vulkan runner and its libggml-vulkan test double)");
    let mut shaders: Vec<PathBuf> =
        fs::read_dir(src.join("shaders"))?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    shaders.retain(|p| p.extension().is_some_and(|e| e == "comp"));
    shaders.sort();
    let (mut double, mut own) = (String::from("#include <stdint.h>\n"), String::from("#include <stdint.h>\n"));
    for shader in &shaders {
        let name = shader.file_stem().and_then(|s| s.to_str()).context("a shader file name")?;
        let spv = dir.join(format!("{name}.spv"));
        run(Command::new("glslc").args(["-O", "--target-env=vulkan1.1", "-o"]).arg(&spv).arg(shader))?;
        let bytes = fs::read(&spv)?;
        let list: Vec<String> = bytes.iter().map(u8::to_string).collect();
        let c = format!(
            "const uint64_t {name}_len = {len};\nconst unsigned char {name}_data[{len}] = {{{}}};\n",
            list.join(","),
            len = bytes.len()
        );
        if name == "own_kernel" { own.push_str(&c) } else { double.push_str(&c) }
    }
    fs::write(dir.join("ggml_vulkan_double.c"), double)?;
    fs::write(dir.join("own_kernel.c"), own)?;
    run(Command::new("cc")
        .args(["-O2", "-Wall", "-shared", "-fPIC", "-Wl,-soname,libggml-vulkan.so", "-o"])
        .arg(dir.join("libggml-vulkan.so"))
        .arg(dir.join("ggml_vulkan_double.c")))?;
    run(Command::new("cc")
        .args(["-O2", "-Wall", "-o"])
        .arg(out.join("vk_runner"))
        .arg(src.join("vk_runner.c"))
        .arg(dir.join("own_kernel.c"))
        .arg(format!("-L{}", dir.display()))
        .args(["-l:libggml-vulkan.so", "-lvulkan"])
        .arg(format!("-Wl,-rpath,{}", dir.display())))
}

/// Builds every fixture: the HIP programs and libraries, the test doubles, the Vulkan runner, the plain C
/// programs, and the guest kernel with its GPU driver test double.
pub(crate) fn build() -> Result<()> {
    build_hip()?;
    build_c()?;
    build_hip_graphs()?;
    prepare_guest()
}

/// The HIP graph program of the null GPU's graph tests (issue 76), in `target/fixtures/hip-graphs/`: its code
/// object, `fixtures/kmod/hip_graphs_kernels.hip` built by the `ROCm` 7.2 root's own hipcc for both cards of the
/// null GPU, gfx1100 and gfx1201, as one offload bundle (in a scratch directory of the root's /tmp, with a /proc
/// of its own that only that command sees), and `fixtures/kmod/hip_graphs.c` built by the host's gcc (it takes
/// libamdhip64 with dlopen, so one binary runs on HIP 7.2 and 6.4). Each is rebuilt when its source is newer.
fn build_hip_graphs() -> Result<()> {
    let dir = fixtures_dir().join("hip-graphs");
    fs::create_dir_all(&dir)?;
    let src = root().join("fixtures/kmod");
    let stale = |out: &Path, input: &Path| -> Result<bool> {
        let source = fs::metadata(input)?.modified()?;
        Ok(fs::metadata(out).and_then(|m| m.modified()).map_or(true, |built| built < source))
    };
    let (kernels, code_object) = (src.join("hip_graphs_kernels.hip"), dir.join("hip_graphs_kernels.co"));
    if stale(&code_object, &kernels)? {
        let rocm72 = Path::new(roots::ROCM72_ROOT);
        step(&format!("hipcc --genco (the ROCm 7.2 root's, chroot {}) {}", rocm72.display(), kernels.display()));
        let work = rocm72.join(format!("tmp/tracer-hip-graphs-{}", std::process::id()));
        drop(fs::remove_dir_all(&work));
        fs::create_dir_all(&work)?;
        fs::copy(&kernels, work.join("k.hip"))?;
        let inside = Path::new("/").join(work.strip_prefix(rocm72)?);
        // hipcc finds itself through /proc/self/exe: a proc mounted in a mount namespace of the command's own.
        let script = format!(
            "mount -t proc proc {root}/proc && exec chroot {root} hipcc --genco --offload-arch=gfx1100 --offload-arch=gfx1201 -O2 -o {w}/k.co {w}/k.hip",
            root = rocm72.display(),
            w = inside.display()
        );
        let built = run(Command::new("unshare").args(["--mount", "--propagation", "private", "sh", "-c", &script]))
            .and_then(|()| fs::copy(work.join("k.co"), &code_object).map_err(Into::into));
        drop(fs::remove_dir_all(&work));
        built?;
    }
    let (host, program) = (src.join("hip_graphs.c"), dir.join("hip_graphs"));
    if stale(&program, &host)? {
        step(&format!("gcc {}", host.display()));
        run(Command::new("gcc").args(["-O2", "-Wall", "-Wextra", "-o"]).arg(&program).arg(&host).arg("-ldl"))?;
    }
    Ok(())
}

/// Builds each `fixtures/hip/*.hip` with hipcc for gfx1030 (the Debian device libraries stop short of
/// gfx1100), when its source or a `fixtures/hip` header it includes is newer than its binary: the shared
/// libraries (`FIXTURE_SHARED`) first, then the programs.
fn build_hip() -> Result<()> {
    let out = fixtures_dir();
    let (mut sources, headers) = hip_sources()?;
    sources.sort_by_key(|src| (shared_lib(&stem(src)).is_none(), src.clone()));
    for src in sources {
        build_hip_source(&src, &headers)?;
    }
    // A library's code-object directory, as rocBLAS's Tensile `library/` is: code_objects.hip's kernels as
    // one code object (`hipcc --genco`), copied into four files beside a catalogue, for code_objects to
    // load by path.
    let library = out.join("code-objects/library");
    fs::create_dir_all(&library)?;
    let code_object = out.join("code-objects/kernels.co");
    step("hipcc --genco fixtures/hip/code_objects.hip -> target/fixtures/code-objects/library/");
    run(Command::new("hipcc")
        .args(["--genco", "--offload-arch=gfx1030", "-O2", "-o"])
        .arg(&code_object)
        .arg(root().join("fixtures/hip/code_objects.hip")))?;
    for i in 0..4 {
        fs::copy(&code_object, library.join(format!("Kernels_{i}.co")))?;
    }
    fs::write(library.join("TensileLibrary.dat"), "code_objects fixture: the catalogue a library reads\n")?;
    // The demo runner stripped as release builds are (Ollama strips libggml-hip.so): late attach must
    // name its kernels without a symbol table.
    let (runner, stripped) = (out.join("mini_runner"), out.join("mini_runner_stripped"));
    step("strip mini_runner -> mini_runner_stripped");
    run(Command::new("strip").arg("--strip-all").arg("-o").arg(&stripped).arg(&runner))?;
    Ok(())
}

/// One HIP fixture, `fixtures/hip/NAME.hip`, built as [`build_hip`] builds each (`cargo xtask demo` builds only
/// its runner): an error naming the fixtures there when there is no such source.
pub(crate) fn build_hip_fixture(name: &str) -> Result<()> {
    let (sources, headers) = hip_sources()?;
    let src = sources.iter().find(|src| stem(src) == name).with_context(|| {
        let names: Vec<String> = sources.iter().map(|src| stem(src)).collect();
        format!("no fixture fixtures/hip/{name}.hip: there are {}", names.join(", "))
    })?;
    build_hip_source(src, &headers)
}

/// The `.hip` sources and `.h` headers of `fixtures/hip`.
fn hip_sources() -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let (mut sources, mut headers) = (Vec::new(), Vec::new());
    for entry in fs::read_dir(root().join("fixtures/hip"))? {
        let path = entry?.path();
        match path.extension().and_then(|e| e.to_str()) {
            Some("hip") => sources.push(path),
            Some("h") => headers.push(path),
            _ => {}
        }
    }
    sources.sort();
    Ok((sources, headers))
}

fn stem(src: &Path) -> String {
    src.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned()
}

/// The library name a HIP fixture is built under, where it is a shared library.
fn shared_lib(stem: &str) -> Option<&'static str> {
    FIXTURE_SHARED.iter().find(|(name, _)| *name == stem).map(|(_, lib)| *lib)
}

/// Builds `src` into `target/fixtures` with hipcc when it or a `fixtures/hip` header it includes is newer than
/// its binary.
fn build_hip_source(src: &Path, headers: &[PathBuf]) -> Result<()> {
    let out = fixtures_dir();
    fs::create_dir_all(&out)?;
    let stem = stem(src);
    let bin = out.join(shared_lib(&stem).unwrap_or(&stem));
    let text = fs::read_to_string(src)?;
    let mut inputs = vec![src];
    inputs.extend(headers.iter().map(PathBuf::as_path).filter(|h| {
        h.file_name().and_then(|n| n.to_str()).is_some_and(|n| text.contains(&format!("#include \"{n}\"")))
    }));
    let newest = inputs.iter().map(|p| fs::metadata(p)?.modified()).collect::<Result<Vec<_>, _>>()?.into_iter().max();
    let fresh = match (newest, fs::metadata(&bin).and_then(|m| m.modified())) {
        (Some(s), Ok(b)) => b >= s,
        _ => false,
    };
    if fresh {
        return Ok(());
    }
    step(&format!("hipcc {}", src.display()));
    let mut hipcc = Command::new("hipcc");
    hipcc.args(["--offload-arch=gfx1030", "-O2", "-o"]).arg(&bin).arg(src);
    if let Some(lib) = shared_lib(&stem) {
        hipcc.args(["-shared", "-fPIC", &format!("-Wl,-soname,{lib}")]);
    }
    for (_, lib) in FIXTURE_LINKS_SHARED.iter().filter(|(name, _)| *name == stem) {
        hipcc.arg(format!("-L{}", out.display())).arg(format!("-l:{lib}")).arg("-Wl,-rpath,$ORIGIN");
    }
    let libs = FIXTURE_LIBS.iter().find(|(name, _)| *name == stem).map_or(&[][..], |(_, libs)| libs);
    run(hipcc.args(libs))
}

/// The test doubles and programs built with cc: the HSA and CUDA doubles with their drivers, the Vulkan
/// runner, an unobserved backend, and `fixtures/c`.
fn build_c() -> Result<()> {
    let out = fixtures_dir();
    // The HSA queue-path test double and the program that drives it (linked to the double by rpath).
    let dir = out.join("hsa-double");
    fs::create_dir_all(&dir)?;
    let src = root().join("fixtures/hsa_double");
    let lib = dir.join("libhsa-runtime64.so.1");
    step("cc fixtures/hsa_double (test double of libhsa-runtime64's queue path and loader)");
    run(Command::new("cc")
        .args(["-O2", "-Wall", "-shared", "-fPIC", "-Wl,-soname,libhsa-runtime64.so.1"])
        .arg(format!("-Wl,--version-script={}", src.join("hsa_double.map").display()))
        .arg("-o")
        .arg(&lib)
        .arg(src.join("hsa_double.c")))?;
    for driver in ["hsa_driver", "hsa_late"] {
        run(Command::new("cc")
            .args(["-O2", "-Wall", "-o"])
            .arg(out.join(driver))
            .arg(src.join(format!("{driver}.c")))
            .arg(format!("-L{}", dir.display()))
            .arg("-l:libhsa-runtime64.so.1")
            .arg(format!("-Wl,-rpath,{}", dir.display())))?;
    }
    // The CUDA test doubles (libcuda, libcudart) and the program that drives them.
    let dir = out.join("cuda-double");
    fs::create_dir_all(&dir)?;
    let src = root().join("fixtures/cuda_double");
    step("cc fixtures/cuda_double (test doubles of libcuda and libcudart)");
    // The runtime double launches through the driver double, as libcudart launches through libcuda.
    let to_driver = [format!("-L{}", dir.display()), "-l:libcuda.so.1".to_owned()];
    for (lib, source, links) in
        [("libcuda.so.1", "libcuda_double.c", &[][..]), ("libcudart.so.13", "libcudart_double.c", &to_driver[..])]
    {
        run(Command::new("cc")
            .args(["-O2", "-Wall", "-Wno-unused-parameter", "-shared", "-fPIC"])
            .arg(format!("-Wl,-soname,{lib}"))
            .arg("-o")
            .arg(dir.join(lib))
            .arg(src.join(source))
            .args(links))?;
    }
    run(Command::new("cc")
        .args(["-O2", "-Wall", "-o"])
        .arg(out.join("cuda_driver"))
        .arg(src.join("cuda_driver.c"))
        .arg(format!("-L{}", dir.display()))
        .args(["-l:libcuda.so.1", "-l:libcudart.so.13", "-lpthread"])
        .arg(format!("-Wl,-rpath,{}", dir.display())))?;
    build_vulkan_fixture(&out)?;
    // A ggml backend tracer does not probe, as an empty TEST DOUBLE under its file name: opencl_probe loads it.
    let unobserved = out.join("unobserved");
    fs::create_dir_all(&unobserved)?;
    step("cc -> target/fixtures/unobserved/libggml-sycl.so (an empty test double named as ggml's SYCL backend)");
    run(Command::new("cc")
        .args(["-shared", "-fPIC", "-Wl,-soname,libggml-sycl.so", "-x", "c", "-o"])
        .arg(unobserved.join("libggml-sycl.so"))
        .arg("/dev/null"))?;
    // Plain C fixtures (test doubles and probes that need no HIP).
    for entry in fs::read_dir(root().join("fixtures/c"))? {
        let src = entry?.path();
        if src.extension().is_none_or(|e| e != "c") {
            continue;
        }
        let stem = src.file_stem().expect("a .c file has a stem");
        let bin = out.join(stem);
        step(&format!("cc {}", src.display()));
        let flags = C_FIXTURE_FLAGS.iter().find(|(name, _)| *name == stem).map_or(&[][..], |(_, flags)| flags);
        run(Command::new("cc").args(["-O2", "-Wall", "-o"]).arg(&bin).arg(&src).args(flags))?;
    }
    Ok(())
}

/// Debian 12's kernel (6.1) and the headers it was built with, downloaded into `target/drm_sched`, and the GPU
/// driver TEST DOUBLE `fixtures/kmod/sched_double.c` built against them: `gpu_jobs` boots the kernel under qemu
/// (`fixtures/kmod/guest.sh`) for the real `gpu-sched` module's tracepoints.
fn prepare_guest() -> Result<()> {
    step(
        "fixtures/kmod/guest.sh --prepare (Debian 12's kernel and headers, the sched_double module, under target/drm_sched)",
    );
    run(Command::new(root().join("fixtures/kmod/guest.sh")).arg("--prepare"))
}
