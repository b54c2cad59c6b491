//! Vulkan runners, on the real Vulkan loader (Debian's libvulkan1) and Mesa's lavapipe, which runs the
//! compute shaders on the CPU: `vk_runner` makes the calls ggml's Vulkan backend makes, with its shaders
//! from a `libggml-vulkan.so` test double laid out as ggml's (`fixtures/vulkan`).

use std::collections::BTreeMap;

use integration_tests::*;

/// What `vk_runner` printed it did: dispatches per shader, submissions, modules patched.
struct Truth {
    dispatches: BTreeMap<String, u64>,
    submits: u64,
    patched: u64,
}

fn truth(stdout: &str) -> Truth {
    let value = |key: &str| {
        stdout.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.parse().ok()).expect("vk_runner printed it")
    };
    let dispatches = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("dispatches "))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.parse().unwrap()))
        .collect();
    Truth { dispatches, submits: value("submits="), patched: value("modules_patched=") }
}

/// Records `vk_runner STEPS [patched]`: its truth and the report's JSON.
fn record(test: &str, args: &[&str]) -> (Truth, serde_json::Value, String) {
    let out = scratch_trace(test);
    let prog = fixture("vk_runner");
    let mut argv = vec!["record", "-q", "-o", out.to_str().unwrap(), "--", prog.to_str().unwrap()];
    argv.extend_from_slice(args);
    let o = tracer(&argv);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(stdout.contains("device=llvmpipe"), "lavapipe ran it: {stdout}");
    let report = tracer_json(&["report", "--json", out.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&tracer(&["report", out.to_str().unwrap()]).stdout).into_owned();
    (truth(&stdout), report, text)
}

/// Every dispatch is counted under the ggml shader its pipeline was made from, named from the SPIR-V
/// arrays of the `libggml-vulkan.so` the process maps, whether the module got the array's own words or a
/// copy with words inserted in its head (as ggml patches its shaders for float controls); the
/// application's own shader, in no ggml file, is named by what its SPIR-V declares (glslc's entry point
/// `main`) and a hash of the module, the same in another recording of the same module; submissions are
/// counted.
#[test]
fn a_vulkan_runner_s_dispatches_are_counted_per_ggml_shader_patched_or_not() {
    let mut own_names = Vec::new();
    let runs = [("vulkan-plain", &["3"][..]), ("vulkan-patched", &["4", "patched"][..]), ("vulkan-again", &["3"][..])];
    for (test, args) in runs {
        let (truth, report, text) = record(test, args);
        assert_eq!(truth.patched, if args.len() > 1 { 4 } else { 0 });
        let p = report["processes"].as_array().unwrap().iter().find(|p| p["comm"] == "vk_runner").expect("process");
        let kernels = p["kernels"].as_array().unwrap();
        let launches = |name: &str| -> u64 {
            kernels.iter().filter(|k| k["name"] == name).map(|k| k["launches"].as_u64().unwrap()).sum()
        };
        for (shader, &n) in &truth.dispatches {
            if shader == "own_kernel" {
                continue;
            }
            assert_eq!(launches(shader), n, "{test}: {shader}\n{text}");
            let k = kernels.iter().find(|k| k["name"] == shader.as_str()).unwrap();
            assert_eq!(k["source"], "shader", "{k}");
            assert!(k["code_file"].as_str().unwrap().ends_with("/libggml-vulkan.so"), "{k}");
        }
        assert!(kernels.iter().all(|k| k["source"] != "unnamed"), "{test}: {kernels:?}");
        let own: Vec<&serde_json::Value> = kernels.iter().filter(|k| k["source"] == "spirv").collect();
        assert_eq!(own.len(), 1, "{test}: {kernels:?}");
        assert_eq!(own[0]["launches"].as_u64(), Some(truth.dispatches["own_kernel"]));
        let name = own[0]["name"].as_str().unwrap();
        let hash = name.strip_prefix("main@").unwrap_or_else(|| panic!("{test}: {name}"));
        assert!(hash.len() == 8 && hash.bytes().all(|b| b.is_ascii_hexdigit()), "{name}");
        assert!(own[0]["code_file"].is_null(), "{}", own[0]);
        own_names.push(name.to_owned());
        assert_eq!(report["counters"]["shader_modules_unmatched"], 1, "{test}");
        assert_eq!(report["counters"]["shader_modules_self_named"], 1, "{test}");
        assert!(report["counters"].get("shader_modules_ambiguous").is_none(), "{test}");
        // ggml's families and weight types, from the shader names.
        let class = |name: &str| {
            let k = kernels.iter().find(|k| k["name"] == name).unwrap();
            (k["class"]["family"].as_str().unwrap().to_owned(), k["class"]["quant"].as_str().map(str::to_owned))
        };
        assert_eq!(class("matmul_q4_k_f32"), ("MMQ".to_owned(), Some("Q4_K".to_owned())));
        assert_eq!(class("mul_mat_vec_q4_k_f32_f32"), ("MMVQ".to_owned(), Some("Q4_K".to_owned())));
        assert_eq!(class("rms_norm_f32").0, "norm");
        let calls = |api: &str| {
            p["api"].as_array().unwrap().iter().find(|a| a["api"] == api).and_then(|a| a["calls"].as_u64()).unwrap_or(0)
        };
        let dispatches: u64 = truth.dispatches.values().sum();
        assert_eq!(calls("vkCmdDispatch"), dispatches, "{test}");
        assert_eq!(calls("vkCmdBindPipeline"), dispatches, "{test}");
        assert_eq!(calls("vkQueueSubmit"), truth.submits, "{test}");
        assert_eq!(calls("vkCreateShaderModule"), 4, "{test}");
        assert_eq!(calls("vkCreateComputePipelines"), 4, "{test}");
        assert!(text.contains("matmul_q4_k_f32") && text.contains("MMQ Q4_K"), "{text}");
        assert!(!text.contains("not observed: "), "{text}");
    }
    // The same module, in another process and recording, has the same name; its patched copy (other bytes)
    // another.
    assert_eq!(own_names[0], own_names[2]);
    assert_ne!(own_names[0], own_names[1]);
}

/// A program that takes `vkCmdDispatch` with `vkGetDeviceProcAddr` calls the driver past the loader, where
/// tracer's probes are: its dispatches are not counted, and the recording says so (never a silent zero).
#[test]
fn dispatches_taken_past_the_loader_are_said_not_counted() {
    let (truth, report, text) = record("vulkan-devproc", &["2", "devproc"]);
    let p = report["processes"].as_array().unwrap().iter().find(|p| p["comm"] == "vk_runner").expect("process");
    let calls = |api: &str| {
        p["api"].as_array().unwrap().iter().find(|a| a["api"] == api).and_then(|a| a["calls"].as_u64()).unwrap_or(0)
    };
    assert_eq!(calls("vkCmdDispatch"), 0, "{text}");
    assert_eq!(calls("vkCmdBindPipeline"), truth.dispatches.values().sum::<u64>(), "{text}");
    assert_eq!(calls("vkGetDeviceProcAddr"), 1, "{text}");
    assert_eq!(report["counters"]["vulkan_entry_points_past_loader"], 1, "{text}");
    assert!(text.contains("vulkan: 1 Vulkan entry points tracer probes were taken with vkGetDeviceProcAddr"), "{text}");
}

/// Debian unstable's ggml Vulkan backend as it ships (`libggml0-backend-vulkan`, a `libggml-vulkan.so` with no
/// symbol table), its `llama-bench` on Mesa's lavapipe, in the root `cargo xtask setup` makes, recorded from
/// its start: every pipeline is named by ggml itself, as it makes it (`pipeline->name`, read at its pipeline
/// maker, which tracer finds in the stripped code), with ggml's families and weight types: no dispatch is
/// unnamed or named by its SPIR-V alone, those whose names ggml builds at run time included. Each name ggml
/// writes as a literal is checked in the library's own bytes; the pinned build's test below checks the names
/// against an unstripped copy. The root's loader is probed from the program's first call, through both
/// wrappers of the command. `GGML_VK_VISIBLE_DEVICES=0` makes ggml take lavapipe, which it skips by default as a
/// CPU device; it changes nothing of what the device runs.
#[test]
fn debian_s_stripped_ggml_vulkan_has_its_pipelines_named_as_ggml_makes_them() {
    let root = std::path::PathBuf::from(
        std::env::var_os("TRACER_SID_VULKAN_ROOT").expect("TRACER_SID_VULKAN_ROOT is set by `cargo xtask test`"),
    );
    let r = root.display().to_string();
    let lib = root.join("usr/lib/x86_64-linux-gnu/ggml/backends0/libggml-vulkan.so");
    let bytes = std::fs::read(&lib).expect("Debian's libggml-vulkan.so in the root");
    let f16 = ModelInRoot::new(&root, "vk-f16");
    let q4 = format!("{}-q4_k_m.gguf", f16.inside.trim_end_matches(".gguf"));
    let q4_host = root.join(q4.trim_start_matches('/'));
    let quantize = std::process::Command::new("/usr/sbin/chroot")
        .args([&r, "/usr/bin/llama-quantize", &f16.inside, &q4, "Q4_K_M"])
        .output()
        .expect("chroot runs");
    assert!(quantize.status.success(), "{}", String::from_utf8_lossy(&quantize.stderr));
    let out = scratch_trace("vulkan-debian");
    let o = tracer(&[
        "record",
        "-q",
        "-o",
        out.to_str().unwrap(),
        "--",
        "/usr/sbin/chroot",
        &r,
        "/usr/bin/env",
        "GGML_VK_VISIBLE_DEVICES=0",
        "/usr/bin/llama-bench",
        "-m",
        &q4,
        "-ngl",
        "99",
        "-p",
        "8",
        "-n",
        "4",
        "-r",
        "1",
    ]);
    drop(std::fs::remove_file(&q4_host));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && stdout.contains("| Vulkan "), "{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    let report = tracer_json(&["report", "--json", out.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&tracer(&["report", out.to_str().unwrap()]).stdout).into_owned();
    let p = report["processes"].as_array().unwrap().iter().find(|p| p["comm"] == "llama-bench").expect("process");
    // `chroot ROOT env VAR=1 PROGRAM` is seen through, both wrappers: the root's loader and ggml's Vulkan
    // backend are probed before the program's first call.
    assert_eq!(p["incomplete"], false, "{text}");
    assert!(!text.contains("probed late"), "{text}");
    let kernels = p["kernels"].as_array().unwrap();
    let launches = |k: &serde_json::Value| k["launches"].as_u64().unwrap();
    let calls = |api: &str| p["api"].as_array().unwrap().iter().find(|a| a["api"] == api).unwrap()["calls"].as_u64();
    let dispatches = calls("vkCmdDispatch");
    assert_eq!(Some(kernels.iter().map(launches).sum::<u64>()), dispatches, "{text}");
    // Every pipeline by ggml's own name, in the library's file; each module made is named so.
    assert!(kernels.iter().all(|k| k["source"] == "pipeline"), "{text}");
    assert_eq!(report["counters"]["shader_modules_named_by_runtime"].as_u64(), calls("vkCreateShaderModule"), "{text}");
    let mut literal = 0;
    for k in kernels {
        assert!(k["code_file"].as_str().unwrap().ends_with("/libggml-vulkan.so"), "{k}");
        let name = k["name"].as_str().unwrap();
        assert!(!name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'));
        let needle = format!("\0{name}\0");
        literal += usize::from(bytes.windows(needle.len()).any(|w| w == needle.as_bytes()));
    }
    assert!(literal * 10 >= kernels.len() * 7, "{literal} of {} names stand in the library\n{text}", kernels.len());
    assert!(!text.contains("own SPIR-V") && !text.contains("could not be read or bound"), "{text}");
    let class = |name: &str| {
        let k = kernels.iter().find(|k| k["name"] == name).unwrap_or_else(|| panic!("no {name}:\n{text}"));
        (k["class"]["family"].as_str().unwrap().to_owned(), k["class"]["quant"].as_str().map(str::to_owned))
    };
    assert_eq!(class("mul_mat_vec_q4_k_f32_f32"), ("MMVQ".to_owned(), Some("Q4_K".to_owned())));
    assert_eq!(class("mul_mat_vec_q6_k_f32_f32"), ("MMVQ".to_owned(), Some("Q6_K".to_owned())));
    assert_eq!(class("rope_norm_f32").0, "RoPE");
    assert_eq!(class("fa_split_k_reduce").0, "flash-attention");
    // Names ggml builds at run time, which no call site holds.
    assert_eq!(class("flash_attn_f32_f16_aligned").0, "flash-attention");
    assert_eq!(class("rms_norm_mul_f32").0, "norm");
}

/// Each `vkCmdDispatch` of a recording, in order: its kernel's name and source.
fn dispatch_names(records: &[Line]) -> Vec<(String, trace::Source)> {
    let by_id: std::collections::HashMap<u32, &trace::Kernel> =
        kernels(records).into_iter().map(|k| (k.id, k)).collect();
    launches(records)
        .into_iter()
        .filter(|l| l.api.name() == "vkCmdDispatch")
        .map(|l| {
            let k = by_id[&l.kernel.expect("a dispatch's kernel")];
            (k.name.clone(), k.source)
        })
        .collect()
}

/// The pinned llama.cpp's Vulkan build (`bench/vulkan/build.sh`, made by `cargo xtask setup`) and copies of it,
/// the same deterministic `llama-bench` on lavapipe with each: dispatch i of one run is dispatch i of the others.
/// - The build as made, and a copy whose `libggml-vulkan.so` is stripped (`strip --strip-all`, as Debian and
///   Ollama ship it): tracer finds ggml's pipeline maker in the stripped code where the unstripped copy's
///   symbol table has `ggml_vk_create_pipeline_func` (checked with `nm`), and each dispatch has the same
///   name, ggml's own, in both.
/// - The same two with the pipeline maker not found (the assertion text tracer finds it by changed, as
///   another ggml version could have it): names come from the SPIR-V arrays, by symbol in the unstripped
///   copy and from the library's code in the stripped one. Each stripped name is the symbol's, or lists
///   every pipeline ggml makes from that module (the array's among them), or ggml builds that pipeline's
///   name at run time and the stripped copy names the module by its SPIR-V (counted); never another name.
/// - ggml's own names, checked against both: each is the array's symbol or among the names the code gives
///   that module, where the code holds a literal name.
///
/// `GGML_VK_VISIBLE_DEVICES=0` makes ggml take lavapipe, a CPU device it skips by default.
#[test]
fn a_stripped_ggml_vulkan_names_its_pipelines_as_an_unstripped_copy_does() {
    let bin = std::path::PathBuf::from(
        std::env::var_os("TRACER_LLAMA_VULKAN").expect("TRACER_LLAMA_VULKAN is set by `cargo xtask test`"),
    );
    let dir = scratch("vulkan-stripped");
    let copy_of = |name: &str, strip: bool, marker: bool| copy_of(&bin, &dir.join(name), strip, marker);
    let f16 = dir.join("f16.gguf");
    let model = dir.join("q4_k_m.gguf");
    tiny_llama(&f16);
    let q =
        std::process::Command::new(bin.join("llama-quantize")).arg(&f16).arg(&model).arg("Q4_K_M").output().unwrap();
    assert!(q.status.success(), "{}", String::from_utf8_lossy(&q.stderr));
    let bench = |copy: &std::path::Path, test: &str| {
        let out = dir.join(format!("{test}.jsonl"));
        let ld = format!("LD_LIBRARY_PATH={}", copy.display());
        let program = copy.join("llama-bench");
        let mut args = vec!["--", "/usr/bin/env", "GGML_VK_VISIBLE_DEVICES=0", &ld, program.to_str().unwrap()];
        args.extend_from_slice(&["-m", model.to_str().unwrap(), "-ngl", "99", "-p", "8", "-n", "4", "-r", "1"]);
        let records = record_ok(&out, &args);
        let report = tracer_json(&["report", "--json", out.to_str().unwrap()]);
        let probe = records.iter().find_map(|l| match l {
            Line::Probe(p) if p.api == "ggml_vk_create_pipeline_func" => Some(p.clone()),
            _ => None,
        });
        (dispatch_names(&records), report, probe.expect("the pipeline maker's probe record"))
    };
    let (full, _, full_probe) = bench(&copy_of("full", false, true), "full");
    let (stripped, _, stripped_probe) = bench(&copy_of("stripped", true, true), "stripped");
    // The pipeline maker, found in the stripped code where the symbol table has it.
    let symbol = symbol_address(&bin.join("libggml-vulkan.so"), "ggml_vk_create_pipeline_func");
    assert_eq!(stripped_probe.offset, Some(symbol), "{stripped_probe:?}");
    assert_eq!(full_probe.offset, Some(symbol), "{full_probe:?}");
    assert!(!full.is_empty());
    assert_eq!(full, stripped, "the same names, dispatch by dispatch");
    assert!(full.iter().all(|(_, source)| *source == trace::Source::Pipeline), "{full:?}");
    // Without the pipeline maker: the arrays' names, by symbol and from the code.
    let (symbols, _, none) = bench(&copy_of("full-unfound", false, false), "full-unfound");
    assert!(none.offset.is_none() && none.error.is_some(), "{none:?}");
    let (from_code, report, _) = bench(&copy_of("stripped-unfound", true, false), "stripped-unfound");
    assert_eq!(symbols.len(), full.len(), "the same run dispatches as often");
    assert_eq!(from_code.len(), full.len(), "the same run dispatches as often");
    let (mut same, mut among, mut run_time, mut agree) = (0, 0, 0, 0);
    let (mut at_run_time, mut variants) = (std::collections::BTreeSet::new(), std::collections::BTreeSet::new());
    for (((f, fsource), (s, ssource)), (given, _)) in symbols.iter().zip(&from_code).zip(&full) {
        assert_eq!(*fsource, trace::Source::Shader, "the unstripped copy names {f} by its symbol");
        if f == s {
            same += 1;
        } else if *ssource == trace::Source::Shader && s.split('|').any(|n| n == f) {
            among += 1;
        } else {
            assert_eq!(*ssource, trace::Source::Spirv, "{f} named {s} without its symbol table");
            assert!(s.starts_with("main@"), "{s}");
            at_run_time.insert(f.clone());
            run_time += 1;
        }
        // ggml's own name: the array's, or the array's with the words of a variant added (the pipelines
        // ggml makes from one shader under other specialization constants: `rms_norm_f32` gives
        // `rms_norm_mul_f32`, `flash_attn_f32_f16` gives `flash_attn_f32_f16_aligned`).
        if given == f {
            agree += 1;
        } else {
            let mut words = given.split('_');
            assert!(f.split('_').all(|w| words.any(|g| g == w)), "ggml named {given} a pipeline of shader {f}");
            variants.insert((f.clone(), given.clone()));
        }
    }
    eprintln!(
        "dispatches: same {same}, among {among}, named at run time {run_time} ({at_run_time:?}); ggml's own names \
         the array's {agree}, a variant's {variants:?}"
    );
    // The arrays' names for most of what ran; the modules ggml names at run time are counted as such.
    assert!(same * 10 >= full.len() * 8, "{same} of {}", full.len());
    assert!(agree * 10 >= full.len() * 7, "{agree} of {}", full.len());
    let counted = report["counters"]["shader_pipelines_named_at_run_time"].as_u64().unwrap_or(0);
    assert_eq!(run_time > 0, counted > 0, "{}", report["counters"]);
    drop(std::fs::remove_dir_all(&dir));
}

/// `tracer inspect` on ggml Vulkan backends: the pinned build (shaders by symbol), a stripped copy of it (the
/// same shaders named from its code), Debian's stripped package, and the test double (no pipeline maker). Each
/// lists its SPIR-V shaders, classified, and where ggml's pipeline maker is (the unstripped symbol's address,
/// found in the stripped copy too), or why it is not found.
#[test]
fn inspect_lists_a_ggml_vulkan_s_shaders_and_its_pipeline_maker() {
    let bin = std::path::PathBuf::from(
        std::env::var_os("TRACER_LLAMA_VULKAN").expect("TRACER_LLAMA_VULKAN is set by `cargo xtask test`"),
    );
    let root = std::path::PathBuf::from(
        std::env::var_os("TRACER_SID_VULKAN_ROOT").expect("TRACER_SID_VULKAN_ROOT is set by `cargo xtask test`"),
    );
    let dir = scratch("vulkan-inspect");
    let stripped = copy_of(&bin, &dir.join("stripped"), true, true);
    let inspect = |lib: &std::path::Path| tracer_json(&["inspect", "--json", lib.to_str().unwrap()])["vulkan"].clone();
    let symbol = symbol_address(&bin.join("libggml-vulkan.so"), "ggml_vk_create_pipeline_func");
    let full = inspect(&bin.join("libggml-vulkan.so"));
    let from_code = inspect(&stripped.join("libggml-vulkan.so"));
    let debian = inspect(&root.join("usr/lib/x86_64-linux-gnu/ggml/backends0/libggml-vulkan.so"));
    for (v, from) in [(&full, "symbols"), (&from_code, "code"), (&debian, "code")] {
        assert_eq!(v["names_from"], from, "{v}");
        assert!(v["pipeline_maker"].is_u64(), "{v}");
        let shaders = v["shaders"].as_array().unwrap();
        assert!(shaders.len() > 500, "{}", shaders.len());
        let mmvq = shaders.iter().find(|s| s["name"] == "mul_mat_vec_q4_k_f32_f32").expect("ggml's MMVQ shader");
        assert_eq!((mmvq["family"].as_str(), mmvq["quant"].as_str()), (Some("MMVQ"), Some("Q4_K")), "{mmvq}");
    }
    assert_eq!(full["pipeline_maker"].as_u64(), Some(symbol));
    assert_eq!(from_code["pipeline_maker"].as_u64(), Some(symbol));
    let double = inspect(&fixture("vulkan/libggml-vulkan.so"));
    assert!(double["pipeline_maker"].is_null() && double["pipeline_maker_missing"].is_string(), "{double}");
    assert_eq!(double["shaders"].as_array().unwrap().len(), 3, "{double}");
    drop(std::fs::remove_dir_all(&dir));
}

/// A copy at `copy` of the build in `bin`, its ggml-vulkan stripped or not, its pipeline maker's assertion
/// text (which tracer finds the function by) kept or changed.
fn copy_of(bin: &std::path::Path, copy: &std::path::Path, strip: bool, marker: bool) -> std::path::PathBuf {
    let cp = std::process::Command::new("cp").arg("-a").arg(bin).arg(copy).status().expect("cp runs");
    assert!(cp.success());
    let lib = std::fs::canonicalize(copy.join("libggml-vulkan.so")).expect("the build's libggml-vulkan.so");
    if strip {
        let s = std::process::Command::new("strip").arg("--strip-all").arg(&lib).status().expect("strip runs");
        assert!(s.success());
    }
    if !marker {
        let mut bytes = std::fs::read(&lib).unwrap();
        let text = b"wg_denoms[0] > 0 && wg_denoms[1] > 0";
        let at = bytes.windows(text.len()).position(|w| w == text).expect("the assertion text");
        bytes[at + 12] = b'!';
        std::fs::write(&lib, bytes).unwrap();
    }
    copy.to_path_buf()
}

/// The address `nm` gives the function whose symbol contains `name` in `lib` (its main body, not a `.cold`
/// part).
fn symbol_address(lib: &std::path::Path, name: &str) -> u64 {
    let nm = std::process::Command::new("nm").arg(lib).output().expect("nm runs");
    String::from_utf8_lossy(&nm.stdout)
        .lines()
        .find(|l| l.contains(name) && !l.contains(".cold"))
        .and_then(|l| u64::from_str_radix(l.split(' ').next().unwrap(), 16).ok())
        .expect("the unstripped build's symbol")
}
