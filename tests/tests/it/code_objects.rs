//! Code-object files loaded by path (`hipModuleLoad`), as rocBLAS loads its Tensile library files, on
//! Debian's real libamdhip64: without a GPU every load fails (hipErrorInvalidDevice, 101), but each call
//! reaches the runtime with its path, which is recorded at the call's entry.

use integration_tests::*;

const HIP_ERROR_INVALID_DEVICE: i64 = 101;

/// The fixture's library directory (`cargo xtask` writes it with `hipcc --genco`), copied into a fresh
/// scratch directory so that what is present there is known: four code objects and a catalogue.
fn library(test: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = scratch(test);
    let library = dir.join("library");
    std::fs::create_dir_all(&library).unwrap();
    for entry in std::fs::read_dir(fixture("code-objects/library")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), library.join(entry.file_name())).unwrap();
    }
    // A subdirectory is not a file present.
    std::fs::create_dir_all(library.join("archive")).unwrap();
    (dir, library)
}

#[test]
fn code_object_files_loaded_by_path_are_listed_with_their_directory_and_results() {
    let (dir, library) = library("code_objects");
    let lib = library.to_str().unwrap();
    let out = dir.join("t.jsonl");
    let bin = fixture("code_objects");
    let records = record_ok(&out, &["--", bin.to_str().unwrap(), lib]);

    // Every load names its file, the relative one made absolute against the working directory.
    let loads: Vec<&trace::Call> = calls(&records).into_iter().filter(|c| c.api.name() == "hipModuleLoad").collect();
    let files: Vec<&str> = loads.iter().map(|c| c.file.as_deref().unwrap_or("")).collect();
    let expected: Vec<String> = ["Kernels_0.co", "Kernels_2.co", "Kernels_3.co", "Kernels_missing.co"]
        .iter()
        .map(|f| format!("{lib}/{f}"))
        .collect();
    assert_eq!(files, expected, "{loads:#?}");
    assert!(loads.iter().all(|c| c.ret == HIP_ERROR_INVALID_DEVICE && c.module.is_none()), "{loads:#?}");

    // The directory, listed once as the process saw it: its regular files.
    let dirs: Vec<&trace::CodeDir> =
        records.iter().filter_map(|r| if let Line::CodeDir(d) = r { Some(d) } else { None }).collect();
    assert_eq!(dirs.len(), 1, "{dirs:#?}");
    assert_eq!((dirs[0].path.as_str(), dirs[0].count, dirs[0].cut, &dirs[0].error), (lib, 5, false, &None));
    assert_eq!(dirs[0].files, ["Kernels_0.co", "Kernels_1.co", "Kernels_2.co", "Kernels_3.co", "TensileLibrary.dat"]);

    // The report's ledger: files present, loaded (each with its result), not loaded.
    let v = tracer_json(&["report", "--json", out.to_str().unwrap()]);
    let p = v["processes"].as_array().unwrap().iter().find(|p| p["comm"] == "code_objects").unwrap();
    let d = &p["code_dirs"][0];
    assert_eq!(d["path"], lib);
    assert_eq!((d["present"].as_u64(), d["loaded"].as_u64(), d["loaded_ok"].as_u64()), (Some(5), Some(4), Some(0)));
    assert_eq!(d["with_dispatches"], 0);
    assert_eq!(d["not_loaded"], serde_json::json!(["Kernels_1.co", "TensileLibrary.dat"]));
    let rows = d["files"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    for (row, path) in rows.iter().zip(&expected) {
        assert_eq!(row["path"], path.as_str());
        assert_eq!((row["loads"].as_u64(), row["failed"].as_u64()), (Some(1), Some(1)));
        assert_eq!(row["results"], serde_json::json!({"101": 1}));
        assert_eq!(row["present"], !path.ends_with("missing.co"));
    }

    let o = tracer(&["report", out.to_str().unwrap()]);
    let text = String::from_utf8(o.stdout).unwrap();
    let short = format!("{}/library", dir.file_name().unwrap().to_str().unwrap());
    for line in [
        format!("    {short}: 5 files present, 4 loaded (4 failed), 0 with dispatches"),
        "      failed  Kernels_0.co  1 load: hipErrorInvalidDevice (101)".to_owned(),
        "      failed  Kernels_missing.co [not in the listing]  1 load: hipErrorInvalidDevice (101)".to_owned(),
        "      not loaded: Kernels_1.co, TensileLibrary.dat".to_owned(),
    ] {
        assert!(text.contains(&line), "no line {line:?} in\n{text}");
    }
}

/// The same through the CUDA driver's `cuModuleLoad`, on the libcuda test double, where loads succeed: the
/// functions looked up in a module carry its file, and the ledger says which files' kernels ran.
#[test]
fn cubins_loaded_by_path_carry_their_kernels_and_the_files_that_ran() {
    let dir = scratch("cubins");
    let library = dir.join("kernels");
    std::fs::create_dir_all(&library).unwrap();
    for f in ["gemm.cubin", "gemv.cubin", "spare.cubin"] {
        std::fs::write(library.join(f), "not a real cubin: the double opens it").unwrap();
    }
    let lib = library.to_str().unwrap();
    let out = dir.join("t.jsonl");
    let libcuda = fixture("cuda-double").join("libcuda.so.1");
    let driver = fixture("cuda_driver");
    let records =
        record_ok(&out, &["--lib", libcuda.to_str().unwrap(), "--", driver.to_str().unwrap(), "modules", lib]);

    let kernel =
        |name: &str| kernels(&records).into_iter().find(|k| k.name == name).unwrap_or_else(|| panic!("{name}"));
    let gemm = kernel("Cijk_Ailk_Bljk_SB_MT64x64");
    assert_eq!((gemm.source.as_str(), gemm.code_file.clone()), ("module", Some(format!("{lib}/gemm.cubin"))));
    // Loaded by a path relative to the working directory: named absolute.
    assert_eq!(kernel("gemv_kernel").code_file, Some(format!("{lib}/gemv.cubin")));

    let v = tracer_json(&["report", "--json", out.to_str().unwrap()]);
    let p = v["processes"].as_array().unwrap().iter().find(|p| p["comm"] == "cuda_driver").unwrap();
    let d = &p["code_dirs"][0];
    assert_eq!(
        (d["present"].as_u64(), d["loaded"].as_u64(), d["loaded_ok"].as_u64(), d["with_dispatches"].as_u64()),
        (Some(3), Some(3), Some(2), Some(1)),
        "{d:#}"
    );
    let row =
        |name: &str| d["files"].as_array().unwrap().iter().find(|f| f["path"] == format!("{lib}/{name}")).unwrap();
    assert_eq!(row("gemm.cubin")["kernels"], serde_json::json!(["Cijk_Ailk_Bljk_SB_MT64x64"]));
    assert_eq!(
        (row("gemm.cubin")["executions"].as_u64(), row("gemm.cubin")["results"].clone()),
        (Some(3), serde_json::json!({"0": 1}))
    );
    assert_eq!(row("gemv.cubin")["executions"], 0);
    assert_eq!(
        (row("absent.cubin")["present"].clone(), row("absent.cubin")["results"].clone()),
        (serde_json::json!(false), serde_json::json!({"301": 1}))
    );
    assert_eq!(d["not_loaded"], serde_json::json!(["spare.cubin"]));

    let o = tracer(&["report", out.to_str().unwrap()]);
    let text = String::from_utf8(o.stdout).unwrap();
    for line in [
        format!("(code: {lib}/gemm.cubin)"),
        ": 3 files present, 3 loaded (1 failed), 1 with dispatches".to_owned(),
        "      loaded  gemm.cubin  1 load: ok, 3 executions, 0 dispatches".to_owned(),
        "              kernels: Cijk_Ailk_Bljk_SB_MT64x64".to_owned(),
        "      failed  absent.cubin [not in the listing]  1 load: CUDA_ERROR_FILE_NOT_FOUND (301)".to_owned(),
    ] {
        assert!(text.contains(&line), "no {line:?} in\n{text}");
    }
}

/// A user's process loads code objects by path from a directory only root may read (a local user names any
/// path, and root's tracer would list it): the directory is not listed, and says why. Before, root listed
/// it into the trace for the user to read.
#[test]
fn a_directory_the_loading_process_may_not_list_is_not_listed_for_it() {
    use std::os::unix::fs::PermissionsExt as _;
    let (dir, library) = library("code_objects_root_only");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&library, std::fs::Permissions::from_mode(0o700)).unwrap();
    let lib = library.to_str().unwrap();
    let out = dir.join("t.jsonl");
    let bin = fixture("code_objects");
    // The fixture, unable to read the directory as that user, exits 1: the recording is what is checked.
    let o = tracer(&[
        "record",
        "-o",
        out.to_str().unwrap(),
        "--",
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        bin.to_str().unwrap(),
        lib,
    ]);
    let records = read_trace(&out);
    assert!(records.iter().any(|r| matches!(r, Line::Footer(_))), "{}", String::from_utf8_lossy(&o.stderr));
    let dirs: Vec<&trace::CodeDir> =
        records.iter().filter_map(|r| if let Line::CodeDir(d) = r { Some(d) } else { None }).collect();
    assert_eq!(dirs.len(), 1, "{dirs:#?}");
    assert!(dirs[0].files.is_empty() && dirs[0].count == 0, "{dirs:#?}");
    let why = dirs[0].error.as_deref().unwrap_or_default();
    assert!(why.contains("may not be listed by the process that loaded from it"), "{why}");
    // Root's own process loading from it gets its listing, as before.
    let out = dir.join("root.jsonl");
    let records = record_ok(&out, &["--", bin.to_str().unwrap(), lib]);
    let listed = records.iter().find_map(|r| if let Line::CodeDir(d) = r { Some(d) } else { None }).unwrap();
    assert_eq!(listed.count, 5, "{listed:#?}");
}
