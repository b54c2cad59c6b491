//! One entry per fuzz target (`fuzz/fuzz_targets/NAME.rs` calls `fuzz::NAME`).
//!
//! Each takes the fuzzer's bytes through the readers tracer points at other processes' files and memory, and
//! asserts what must hold whatever the bytes. A panic is the finding.

use tracer_common::BATCH_TOKENS_MAX;

use crate::{
    os::{elf, files::CodeFile, proc},
    read::{phase::Sequences, report::Report},
    record::{
        intake::decode::{Event, decode},
        names::{
            bundle::{FatBinary, open_all},
            graph_exec::{MAX_NODES, read, read_copies},
            memory::Image,
            pipelines,
            reading::Budget,
            registration,
            rocr::{parse_uri, walk},
            spirv::{ShaderIndex, entry_points, preamble_end},
        },
        probes::{batch_layout, ggml_vulkan},
    },
    trace::{Line, read_from},
};

/// Hostile offload bundles.
///
/// Whatever the bytes of a `.hip_fatbin` (plain or compressed bundles, any header), the index by headers and the
/// opening of each bundle end, without a panic, within the caps (256 MiB decompressed per bundle).
pub fn bundles(data: &[u8]) {
    let fat = FatBinary::walk(data, 0x1000);
    for b in &fat.bundles {
        ran(fat.bundle_at(b.offset));
    }
    ran(open_all(data, &fat, None));
    ran(open_all(data, &fat, Some("gfx1030")));
    ran(fat.name_index(data).bundles_defining("_Z6kernelv"));
}

/// Hostile ELF files, read as tracer reads a file a traced process maps.
///
/// Its GPU code sections and dependencies, its symbols and segments, its build-id, the registration calls in its
/// code, its `llama_batch_ext` layout, its fat binary, its SPIR-V arrays (a Vulkan shader's name), ggml-vulkan's
/// pipeline maker (a string's load and the call-frame entry around it). Through a file (the bounded reader), never a
/// panic, never more than the read budget: each code-reading finder (pipeline calls, registration calls, the shader
/// index, the pipeline maker) runs within a budget of [`FINDER_BYTES`] and the target asserts it read no more, which
/// bounds its time per input whatever its sections (repeated, overlapping, spanning the file), `.eh_frame` or strings.
pub fn elf_files(data: &[u8]) {
    let path = std::env::temp_dir().join(format!("tracer-fuzz-elf-{}", std::process::id()));
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let Ok(file) = CodeFile::user(&path) else { return };
    ran(elf::dependencies(&file));
    ran(elf::section_range(&file, ".hip_fatbin"));
    ran(elf::build_id(&file));
    ran(elf::function_offsets(&file));
    ran(elf::dynamic_symbol(&file, "_amdgpu_r_debug"));
    {
        let view = file.elf();
        if let Some(parsed) = elf::parse(&view) {
            ran(elf::symbols_by_address(&parsed));
            ran(elf::segments(&parsed));
            within(|b| ran(pipelines::decode(&file, &parsed, b)));
        }
    }
    within(|b| ran(registration::decode_within(&file, b)));
    ran(batch_layout::read(&file));
    within(|b| ran(ggml_vulkan::pipeline_maker_within(&file, b)));
    // The same bytes as a call-frame table, and as code loading an address.
    ran(ggml_vulkan::function_around(data, 0x2000, 0x1000, 0x1234));
    ran(ggml_vulkan::rip_relative_loads(data, 0x1000, &[0x2000].into()).count());
    // The same bytes as the code of each of the three methods a batch layout is read from.
    ran(batch_layout::from_code((0x1000, data), (0x1000, data), (0x1000, data)));
    let mut budget = Budget::alone(FINDER_BYTES);
    if let Some(index) = ShaderIndex::parse_within(&file, &mut budget) {
        ran(index.find(data.len() as u64, data));
        assert_eq!(index.cut, budget.cut, "a cut index says so");
    }
    assert!(budget.spent <= FINDER_BYTES, "the shader index read within its budget");
    ran(preamble_end(data));
    if let Some(entries) = entry_points(data) {
        assert!(!entries.is_empty() && entries.len() <= 4, "entry points within their cap");
    }
    if let Ok(Some(fat)) = FatBinary::of_file(&file) {
        ran(open_all(&fat.region(&file), &fat, None));
    }
}

/// A hostile CUDA graph executable.
///
/// Whatever a process's memory holds where the driver's executable, node list, records, node copies and nodes
/// should be (counts of any size, pointers anywhere, cycles), both routes end within their bounds with nodes or a
/// refusal.
pub fn graph_exec(data: &[u8]) {
    let image = Image { base: 0x1000, bytes: data };
    if let Ok(nodes) = read(&image, 0x1000) {
        assert!(!nodes.is_empty() && nodes.len() <= MAX_NODES as usize, "nodes within their cap");
    }
    if let Ok(c) = read_copies(&image, 0x1000) {
        let read = c.kernels.len() + usize::from(c.first.is_some());
        assert!(read > 0 && read <= c.entries as usize, "copies within the count read");
        assert!(
            c.kernels.iter().chain(c.first.iter()).all(|n| n.is_kernel() && n.function != 0),
            "only kernel nodes with a function"
        );
    }
}

/// A hostile `ROCr` code-object list.
///
/// Whatever a process's memory holds at `_amdgpu_r_debug` (cycles, pointers anywhere, strings without an end,
/// URIs of any shape), the walk ends within its caps and every URI parses or is refused.
pub fn loader_list(data: &[u8]) {
    let image = Image { base: 0x1000, bytes: data };
    if let Some(list) = walk(&image, 0x1000) {
        for o in &list.objects {
            ran(parse_uri(&o.uri));
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        ran(parse_uri(text));
    }
}

/// Hostile `/proc` text.
///
/// A process names itself, its command line and its mapped paths (spaces, newlines, " (deleted)"), so whatever
/// the bytes, the parsers tracer reads /proc with answer or refuse.
pub fn proc_files(data: &[u8]) {
    ran(proc::parse_maps(data));
    ran(proc::parse_stat(data));
    ran(proc::parse_cmdline(data));
}

/// Ring records as bytes.
///
/// What the probes wrote, whose contents came from traced processes' memory (a batch's token arrays, names,
/// packets, kernel parameters). Any length, any kind, any counts: decoding ends with an event or an error, never
/// reads past the bytes, and a batch's runs hold at most the tokens its record laid out; judged as a step, its
/// composition counts its tokens once each.
pub fn ring_records(data: &[u8]) {
    if let Ok(Event::Plain { record: Line::Batch(b), .. }) = decode(data) {
        let tokens: u64 = b.runs.iter().map(|r| u64::from(r.tokens)).sum();
        assert!(tokens <= BATCH_TOKENS_MAX as u64, "a batch holds at most its record's tokens");
        assert!(
            b.runs.iter().all(|r| r.outputs <= r.tokens && r.shared <= r.tokens && r.tokens > 0),
            "each run's outputs and shared tokens within its tokens"
        );
        let c = Sequences::default().judge(&b);
        assert_eq!(c.tokens(), tokens + u64::from(c.unread), "a step counts its tokens once each");
    }
}

/// Hostile trace input.
///
/// Whatever the bytes (plain or zstd), the reader returns records or an error (never a panic, never unbounded
/// memory: lines are capped at 1 MiB), and the report over what it read (the read model, the step feeder, every
/// visitor method of the report) never panics either.
pub fn trace_reader(data: &[u8]) {
    let mut records = Vec::new();
    let read = read_from(std::io::Cursor::new(data), std::path::Path::new("fuzz-input"), |r| records.push(r));
    if read.is_ok() {
        ran(Report::build(records).to_text(&crate::read::report::TextOptions::default()));
    }
}

/// The read budget each finder gets per input: a fuzz input is at most 256 KiB, so a finder reading more
/// reads some bytes several times (overlapping sections, a module walked twice).
const FINDER_BYTES: u64 = 4 << 20;

/// Runs a finder within a budget of [`FINDER_BYTES`] and asserts it held.
fn within(finder: impl FnOnce(&mut Budget)) {
    let mut budget = Budget::alone(FINDER_BYTES);
    finder(&mut budget);
    assert!(budget.spent <= FINDER_BYTES, "a finder read {} bytes, past its budget", budget.spent);
}

/// A reader's answer, taken and let go: each reader runs for its panics, not for what it returns
/// (`black_box` keeps the call from being optimized away).
fn ran<T>(answer: T) {
    drop(std::hint::black_box(answer));
}
