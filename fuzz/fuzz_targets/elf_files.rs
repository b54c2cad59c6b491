//! Hostile ELF files, read as tracer reads a file a traced process maps: its GPU code sections and
//! dependencies, its symbols and segments, its build-id, the registration calls in its code, its fat
//! binary, its SPIR-V arrays (a Vulkan shader's name). Through a file (the bounded reader), never a panic, never more than the read budget.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracer::testing::{elf, names::FatBinary, os::CodeFile};

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("tracer-fuzz-elf-{}", std::process::id()));
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let Ok(file) = CodeFile::user(&path) else { return };
    let _ = elf::dependencies(&file);
    let _ = elf::section_range(&file, ".hip_fatbin");
    let _ = elf::build_id(&file);
    let _ = elf::function_offsets(&file);
    let _ = elf::dynamic_symbol(&file, "_amdgpu_r_debug");
    {
        let view = file.elf();
        if let Some(parsed) = elf::parse(&view) {
            let _ = elf::symbols_by_address(&parsed);
            let _ = elf::segments(&parsed);
        }
    }
    let _ = tracer::testing::names::registration::decode(&file);
    if let Some(index) = tracer::testing::names::ShaderIndex::parse(&file) {
        let _ = index.find(data.len() as u64, data);
    }
    let _ = tracer::testing::names::preamble_end(data);
    if let Some(entries) = tracer::testing::names::entry_points(data) {
        assert!(!entries.is_empty() && entries.len() <= 4);
    }
    if let Ok(Some(fat)) = FatBinary::of_file(&file) {
        let _ = tracer::testing::names::open_all(&fat.region(&file), &fat, None);
    }
});
