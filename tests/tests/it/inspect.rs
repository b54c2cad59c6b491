//! `tracer inspect` on real code objects: the hipcc-built ggml-named fixture, the same bundles
//! compressed as clang-offload-bundler compresses them, and the real `libggml-hip.so` of a llama.cpp
//! `ROCm` build (from the `cyllama-rocm` wheel), whose every kernel name must classify; stripped copies of
//! it and of the real `libggml-cuda.so` (`cyllama-cuda12`) name every handle from their registration calls.
#![expect(
    clippy::little_endian_bytes,
    clippy::cast_precision_loss,
    reason = "builds little-endian bundles by hand and prints the coverage table it measured"
)]

use std::{
    collections::{BTreeMap, BTreeSet},
    io::Write as _,
    process::Command,
};

use integration_tests::{fixture, real_ggml_cuda, real_ggml_hip, scratch, tracer};
use object::{Object as _, ObjectSection as _};

fn inspect_json(args: &[&str]) -> serde_json::Value {
    let o = tracer(&[&["inspect", "--json"], args].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("inspect --json prints JSON")
}

#[test]
fn inspect_lists_bundles_targets_and_ggml_kernels() {
    let prog = fixture("ggml_steps");
    let v = inspect_json(&[prog.to_str().unwrap()]);
    let bundles = v["bundles"].as_array().unwrap();
    assert_eq!(bundles.len(), 1);
    assert_eq!(bundles[0]["number"], "0000");
    assert!(bundles[0]["compressed"].is_null());
    let entries = bundles[0]["entries"].as_array().unwrap();
    let triples: Vec<&str> = entries.iter().map(|e| e["triple"].as_str().unwrap()).collect();
    assert_eq!(triples, ["host-x86_64-unknown-linux", "hipv4-amdgcn-amd-amdhsa--gfx1030"]);
    let gpu = &entries[1];
    assert_eq!(gpu["target"], "gfx1030");
    let kernels = gpu["kernels"].as_array().unwrap();
    assert_eq!(kernels.len(), 10);
    let mmvq = kernels.iter().find(|k| k["family"] == "MMVQ").expect("mul_mat_vec_q found");
    assert_eq!(mmvq["quant"], "Q4_K");
    assert_eq!(mmvq["name"], "_Z13mul_mat_vec_qIL9ggml_type12ELi1ELb0EEvPKvS2_PKiPfjjj");
    // hipcc's code objects carry the metadata note: every kernel has its resources.
    assert!(kernels.iter().all(|k| k["resources"]["wavefront_size"].as_u64().is_some()), "{kernels:?}");
    assert!(kernels.iter().all(|k| k["family"] != "unknown"));
    // The two real mul_mat_q parameter lists: the column count's offset tracer computes from the signature
    // is where hipcc's metadata puts that argument (parameter 10 and 11 of the lists).
    let mmq: Vec<(u64, u64, u64)> = kernels
        .iter()
        .filter(|k| !k["ne11_kernarg"].is_null())
        .map(|k| {
            let offsets = k["resources"]["arg_offsets"].as_array().unwrap();
            let at = k["ne11_kernarg"].as_u64().unwrap();
            let index = offsets.iter().position(|o| o.as_u64() == Some(at)).unwrap_or(usize::MAX) as u64;
            (at, index, offsets.len() as u64)
        })
        .collect();
    assert_eq!(mmq.len(), 3, "{kernels:?}");
    assert!(mmq.contains(&(72, 10, mmq.iter().find(|m| m.0 == 72).unwrap().2)), "{mmq:?}");
    assert!(mmq.contains(&(80, 11, mmq.iter().find(|m| m.0 == 80).unwrap().2)), "{mmq:?}");
    // A target filter keeps only that target's entries.
    let v = inspect_json(&["--target", "gfx90a", prog.to_str().unwrap()]);
    assert!(v["bundles"][0]["entries"].as_array().unwrap().is_empty());
    // A file without GPU code: one sentence.
    let o = tracer(&["inspect", "/bin/true"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("has no .hip_fatbin section and no SPIR-V shaders"));
}

/// Wraps a plain bundle as clang-offload-bundler's compressed format ("CCOB") of the given version and
/// method (0 zlib, 1 zstd).
fn ccob(plain: &[u8], version: u16, method: u16) -> Vec<u8> {
    let data = match method {
        0 => {
            let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            z.write_all(plain).unwrap();
            z.finish().unwrap()
        }
        _ => zstd::bulk::compress(plain, 3).unwrap(),
    };
    let mut out = b"CCOB".to_vec();
    out.extend(version.to_le_bytes());
    out.extend(method.to_le_bytes());
    let header = match version {
        1 => 20,
        2 => 24,
        _ => 32,
    };
    let total = (header + data.len()) as u64;
    match version {
        1 => out.extend((plain.len() as u32).to_le_bytes()),
        2 => {
            out.extend((total as u32).to_le_bytes());
            out.extend((plain.len() as u32).to_le_bytes());
        }
        _ => {
            out.extend(total.to_le_bytes());
            out.extend((plain.len() as u64).to_le_bytes());
        }
    }
    out.extend(0x1234_5678_9abc_def0u64.to_le_bytes()); // hash: not checked
    out.extend(data);
    out
}

fn kernel_names(v: &serde_json::Value) -> Vec<Vec<String>> {
    v["bundles"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|b| b["entries"].as_array().unwrap().clone())
        .map(|e| e["kernels"].as_array().unwrap().iter().map(|k| k["name"].as_str().unwrap().to_owned()).collect())
        .collect()
}

#[test]
fn compressed_bundles_open_like_plain_ones() {
    let prog = fixture("ggml_steps");
    let elf = std::fs::read(&prog).unwrap();
    let file = object::File::parse(&*elf).unwrap();
    let plain = file.section_by_name(".hip_fatbin").unwrap().data().unwrap();
    let dir = scratch("ccob");
    // The plain bundle as a file of its own (what `hipcc --genco` writes).
    let plain_file = dir.join("plain.hipfb");
    std::fs::write(&plain_file, plain).unwrap();
    let want = inspect_json(&[plain_file.to_str().unwrap()]);
    assert_eq!(kernel_names(&want), kernel_names(&inspect_json(&[prog.to_str().unwrap()])));
    assert_eq!(kernel_names(&want)[1].len(), 10);
    for (version, method, name) in [(1, 1, "zstd"), (2, 1, "zstd"), (2, 0, "zlib"), (3, 1, "zstd"), (3, 0, "zlib")] {
        // Two compressed bundles in a row, padded as the section pads them: both open, numbered in order.
        let mut two = ccob(plain, version, method);
        two.resize(two.len().next_multiple_of(4096), 0);
        two.extend(ccob(plain, version, method));
        let path = dir.join(format!("v{version}-{name}.hipfb"));
        std::fs::write(&path, &two).unwrap();
        let got = inspect_json(&[path.to_str().unwrap()]);
        let bundles = got["bundles"].as_array().unwrap();
        assert_eq!(bundles.len(), 2, "v{version} {name}: {got}");
        assert_eq!((bundles[1]["number"].as_str(), bundles[1]["compressed"].as_str()), (Some("0001"), Some(name)));
        assert!(bundles.iter().all(|b| b["error"].is_null()), "{got}");
        assert_eq!(kernel_names(&got)[..2], kernel_names(&want)[..], "v{version} {name}");
    }
    // Corrupt compressed data: listed with the reason, never a crash.
    let mut bad = ccob(plain, 2, 1);
    let n = bad.len();
    bad[40..n - 8].fill(0xAB);
    let path = dir.join("corrupt.hipfb");
    std::fs::write(&path, &bad).unwrap();
    let got = inspect_json(&[path.to_str().unwrap()]);
    assert!(got["bundles"][0]["error"].as_str().unwrap().contains("cannot decompress (zstd)"), "{got}");
    drop(std::fs::remove_dir_all(dir));
}

fn is_ggml_family(f: &str) -> bool {
    f != "unknown" && f != "runtime-internal" && f != "BLAS-GEMM"
}

#[test]
fn real_libggml_hip_bundles_and_every_kernel_classified() {
    let Some(lib) = real_ggml_hip() else { return };
    let v = inspect_json(&[lib.to_str().unwrap()]);
    let bundles = v["bundles"].as_array().unwrap();
    // What the wheel's build holds: one bundle per HIP translation unit, each with the host entry and
    // three GPU targets, none compressed.
    let targets: BTreeSet<&str> =
        bundles.iter().flat_map(|b| b["entries"].as_array().unwrap()).filter_map(|e| e["target"].as_str()).collect();
    println!("{}: {} bundles, targets {targets:?}", lib.display(), bundles.len());
    assert_eq!(bundles.len(), 130);
    assert_eq!(targets, BTreeSet::from(["gfx1100", "gfx90a", "gfx942"]));
    assert!(bundles.iter().all(|b| b["compressed"].is_null() && b["entries"].as_array().unwrap().len() == 4));
    let numbers: Vec<&str> = bundles.iter().map(|b| b["number"].as_str().unwrap()).collect();
    assert_eq!((numbers[0], numbers[129]), ("0000", "0129"));

    // Every distinct kernel name, by family; the names of ggml's kernels must all classify.
    let mut families: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut mmvq_q4k_1: BTreeSet<&str> = BTreeSet::new();
    for b in bundles {
        for e in b["entries"].as_array().unwrap() {
            for k in e["kernels"].as_array().unwrap() {
                let (name, family) = (k["name"].as_str().unwrap(), k["family"].as_str().unwrap());
                families.entry(family.to_owned()).or_default().insert(name.to_owned());
                if family == "MMVQ"
                    && k["quant"] == "Q4_K"
                    && k["demangled"].as_str().unwrap().starts_with("void mul_mat_vec_q<(ggml_type)12, 1,")
                {
                    assert!(k["resources"]["vgprs"].as_u64().unwrap() > 0, "{k}");
                    mmvq_q4k_1.insert(e["target"].as_str().unwrap());
                }
            }
        }
    }
    let total: usize = families.values().map(BTreeSet::len).sum();
    println!("{total} distinct kernel names:");
    for (f, names) in &families {
        println!("  {f:<20} {:>5}", names.len());
    }
    let unknown = families.get("unknown").map_or(0, BTreeSet::len);
    println!("unknown: {unknown} of {total} ({:.2} %)", 100.0 * unknown as f64 / total as f64);
    assert_eq!(unknown, 0, "unclassified ggml kernels: {:?}", families.get("unknown"));
    assert!(families.keys().all(|f| is_ggml_family(f)), "{:?}", families.keys());
    for f in ["MMVQ", "MMQ", "flash-attention", "RoPE", "quantize", "dequantize/convert", "norm", "softmax"] {
        assert!(families.get(f).is_some_and(|n| !n.is_empty()), "no {f} kernel in {}", lib.display());
    }
    // mul_mat_vec_q for Q4_K, one column: built for every target of the wheel.
    assert_eq!(mmvq_q4k_1, targets);
}

/// A stripped copy of `lib`'s registration calls decoded: handle -> name. Prints the counts beside the
/// truth's and asserts that no call was left unresolved.
#[expect(clippy::print_stdout, reason = "prints the counts it measured")]
fn decode_stripped_copy(
    lib: &std::path::Path,
    test: &str,
    truth: &BTreeMap<u64, String>,
    kernels: usize,
) -> BTreeMap<u64, String> {
    let dir = scratch(test);
    let stripped = dir.join("stripped.so");
    let st = Command::new("strip").arg("--strip-all").arg("-o").arg(&stripped).arg(lib).status().unwrap();
    assert!(st.success(), "strip failed");
    let data = std::fs::read(&stripped).unwrap();
    assert!(object::File::parse(&*data).unwrap().symbol_table().is_none(), "strip left a symbol table");
    let reg = tracer::testing::registrations(&stripped).expect("the stripped library imports a registration function");
    let recovered: BTreeMap<u64, String> = reg.by_handle;
    println!(
        "{}: {kernels} kernel names in its device code, {} with a host handle symbol; stripped copy: {} registration calls, {} handles named, {} calls unresolved",
        lib.display(),
        truth.len(),
        reg.calls,
        recovered.len(),
        reg.unresolved.len()
    );
    let first: Vec<String> = reg.unresolved.iter().take(8).map(|a| format!("{a:#x}")).collect();
    assert!(reg.unresolved.is_empty(), "unresolved registration calls at {first:?}");
    drop(std::fs::remove_dir_all(dir));
    recovered
}

/// Issue 12's static decode on a real third-party binary: a stripped copy of the real `libggml-hip.so`
/// still names every kernel handle, through its registration calls, exactly as the unstripped symbol
/// table does.
#[test]
fn registration_calls_of_a_stripped_libggml_hip_name_every_kernel_as_its_symbol_table() {
    use object::{Object as _, ObjectSection as _, ObjectSymbol as _};
    let Some(lib) = real_ggml_hip() else { return };

    // The truth, from the unstripped file: each kernel of its fatbin has a host handle whose symbol is
    // the kernel's mangled name.
    let full = std::fs::read(&lib).unwrap();
    let elf = object::File::parse(&*full).unwrap();
    let fatbin = elf.section_by_name(".hip_fatbin").unwrap().data().unwrap();
    let kernel_names: BTreeSet<String> =
        tracer::testing::code_objects(fatbin, 0).into_iter().flat_map(|(.., kernels)| kernels).collect();
    // A kernel of internal linkage built into several translation units has a handle in each.
    let truth: BTreeMap<u64, String> = elf
        .symbols()
        .filter(|s| s.kind() == object::SymbolKind::Data)
        .filter_map(|s| Some((s.address(), s.name().ok()?.to_owned())))
        .filter(|(_, n)| kernel_names.contains(n))
        .collect();

    let recovered = decode_stripped_copy(&lib, "stripped-ggml", &truth, kernel_names.len());
    assert!(truth.len() > 5000, "{}", truth.len());
    assert_eq!(recovered, truth);
}

/// The kernels of an `.nv_fatbin` section: each fatbin container (magic `0xBA55ED50`, header size at +6,
/// payload size at +8) holds entries (kind at +0, 2 = cubin; header size at +4, payload size at +8); a
/// cubin's kernels are its functions marked `STO_CUDA_ENTRY` (0x10 in `st_other`).
fn cubin_kernel_names(mut fatbin: &[u8]) -> BTreeSet<String> {
    use object::ObjectSymbol as _;
    let u16_at = |b: &[u8], at: usize| u16::from_le_bytes(b[at..at + 2].try_into().unwrap()) as usize;
    let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize;
    let mut names = BTreeSet::new();
    while fatbin.len() >= 16 && u32_at(fatbin, 0) == 0xBA55_ED50 {
        let (header, size) = (u16_at(fatbin, 6), u64_at(fatbin, 8));
        let mut entries = &fatbin[header..header + size];
        while entries.len() >= 16 {
            let (kind, entry_header, payload) = (u16_at(entries, 0), u32_at(entries, 4), u64_at(entries, 8));
            let body = &entries[entry_header..entry_header + payload];
            if kind == 2 {
                let cubin = object::File::parse(body).expect("an uncompressed cubin");
                for s in cubin.symbols() {
                    if let object::SymbolFlags::Elf { st_other, .. } = s.flags()
                        && st_other & 0x10 != 0
                    {
                        names.insert(s.name().unwrap().to_owned());
                    }
                }
            }
            entries = &entries[entry_header + payload..];
        }
        fatbin = &fatbin[header + size..];
    }
    names
}

/// The same static decode on a real CUDA build: a stripped copy of the real `libggml-cuda.so` names
/// every `__cudaRegisterFunction` host handle (`hostFun`) as its unstripped symbol table does.
#[test]
fn registration_calls_of_a_stripped_libggml_cuda_name_every_kernel_as_its_symbol_table() {
    use object::ObjectSymbol as _;
    let Some(lib) = real_ggml_cuda() else { return };
    let full = std::fs::read(&lib).unwrap();
    let elf = object::File::parse(&*full).unwrap();
    let kernel_names = cubin_kernel_names(elf.section_by_name(".nv_fatbin").unwrap().data().unwrap());
    // nvcc's host stub of a kernel carries the kernel's mangled name (`_ZL...` for a static kernel,
    // whose device name is `_Z...`); it is the handle a launch passes.
    let truth: BTreeMap<u64, String> = elf
        .symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text && s.address() != 0)
        .filter_map(|s| {
            let name = s.name().ok()?;
            let device = name.strip_prefix("_ZL").map_or_else(|| name.to_owned(), |rest| format!("_Z{rest}"));
            kernel_names.contains(&device).then_some((s.address(), device))
        })
        .collect();

    let recovered = decode_stripped_copy(&lib, "stripped-ggml-cuda", &truth, kernel_names.len());
    assert!(truth.len() > 1000, "{}", truth.len());
    let wrong: Vec<_> = truth.iter().filter(|&(h, n)| recovered.get(h) != Some(n)).take(4).collect();
    assert!(wrong.is_empty(), "missed or misnamed: {wrong:?}");
    // nvcc gives an internal-linkage entity inside a kernel's template arguments a unique device name
    // (`_ZN42_INTERNAL_<hash>_<file>...`) where the host keeps `_ZL...`: those stubs' symbols cannot
    // equal the registered name, so each must be a host function symbol at exactly that handle.
    let host_functions: BTreeSet<u64> =
        elf.symbols().filter(|s| s.kind() == object::SymbolKind::Text).map(|s| s.address()).collect();
    let renamed: Vec<(&u64, &String)> = recovered.iter().filter(|&(h, _)| !truth.contains_key(h)).collect();
    let odd: Vec<_> =
        renamed.iter().filter(|(h, n)| !n.contains("_INTERNAL_") || !host_functions.contains(h)).take(4).collect();
    assert!(odd.is_empty(), "named handles that are no host stub of a renamed kernel: {odd:?}");
    println!("{} of them kernels whose device name nvcc made unique (`_INTERNAL_`)", renamed.len());
    let named: BTreeSet<&String> = recovered.values().collect();
    let missing: Vec<&String> = kernel_names.iter().filter(|n| !named.contains(n)).take(4).collect();
    assert!(missing.is_empty(), "kernels of the cubins with no registered handle: {missing:?}");
}
