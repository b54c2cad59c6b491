//! The kernel table of the text report: one row per kernel name (short names fold variants of one
//! function in one family), with its shapes, exact column counts, code file and failed launches.

use std::{
    collections::{BTreeMap, HashMap},
    fmt::Write as _,
};

use super::words::{TextOptions, error_text};
use crate::{
    read::report::{KernelReport, Shape},
    trace,
    trace::{counted::Counted, event::GridUnit},
};

/// One row of the kernel table: a kernel name, or (short names) the variants of one function that fall
/// in the same family.
struct KernelRow<'a> {
    name: String,
    class: String,
    runs: u64,
    launches: u64,
    failed: u64,
    graph_runs: u64,
    shapes: Vec<Shape>,
    /// Kernel names folded into this row.
    variants: usize,
    from_elf: bool,
    code: Option<String>,
    returns: BTreeMap<i32, u64>,
    ne11: BTreeMap<u32, u64>,
    first: &'a KernelReport,
}

fn kernel_rows<'a>(kernels: &'a [KernelReport], full_names: bool) -> Vec<KernelRow<'a>> {
    let mut rows: Vec<KernelRow<'a>> = Vec::new();
    let mut at: HashMap<(String, String), usize> = HashMap::new();
    for k in kernels {
        let unnamed = k.demangled.is_empty();
        let name = if unnamed && k.id == 0 {
            "no kernel id: handles past the per-process kernel limit or the per-user budget (kernel_handles_over_limit, kernel_handles_over_budget_uid_*)".to_owned()
        } else if unnamed {
            match k.caller.as_deref().and_then(|c| c.rsplit('/').next()) {
                Some(file) => format!("unnamed handle {:#x} (launched from {file})", k.handle),
                None => format!("unnamed handle {:#x}", k.handle),
            }
        } else if full_names {
            k.demangled.clone()
        } else {
            k.short_name.clone()
        };
        // Every run's exact column count known: the counts replace the name's tile bound.
        let class = k.class.text_with(!all_exact(&k.ne11, k.executions));
        let key = (name.clone(), class.clone());
        if let Some(&i) = at.get(&key).filter(|_| !full_names && !unnamed) {
            let r = &mut rows[i];
            r.runs += k.executions;
            r.launches += k.launches;
            r.failed += k.failed;
            r.graph_runs += k.graph_executions;
            r.variants += 1;
            r.from_elf |= k.source == trace::Source::Elf;
            for sh in &k.shapes {
                sh.clone().add_to(&mut r.shapes);
            }
            for (code, n) in &k.returns {
                *r.returns.entry(*code).or_default() += n;
            }
            for (columns, n) in &k.ne11 {
                *r.ne11.entry(*columns).or_default() += n;
            }
            continue;
        }
        at.insert(key, rows.len());
        rows.push(KernelRow {
            name,
            class,
            runs: k.executions,
            launches: k.launches,
            failed: k.failed,
            graph_runs: k.graph_executions,
            shapes: k.shapes.clone(),
            variants: 1,
            from_elf: k.source == trace::Source::Elf,
            code: code_text(k.code_file.as_deref(), &k.bundles),
            returns: k.returns.clone(),
            ne11: k.ne11.clone(),
            first: k,
        });
    }
    for r in &mut rows {
        r.shapes.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.cmp(b)));
    }
    rows.sort_by(|a, b| b.runs.cmp(&a.runs).then(b.launches.cmp(&a.launches)).then(a.first.id.cmp(&b.first.id)));
    rows
}

/// A demangled name as the options ask: whole, or its short name.
pub(super) fn display_name(demangled: &str, opts: &TextOptions) -> String {
    if opts.full_names { demangled.to_owned() } else { crate::os::demangle::short_name(demangled) }
}

/// Shapes shown per kernel row; the rest are counted.
const SHAPES_SHOWN: usize = 3;

pub(super) fn write_kernels(s: &mut String, kernels: &[KernelReport], opts: &TextOptions) -> std::fmt::Result {
    if kernels.is_empty() {
        return Ok(());
    }
    let rows = kernel_rows(kernels, opts.full_names);
    let shown = if opts.top == 0 { rows.len() } else { opts.top.min(rows.len()) };
    let what = if opts.full_names { "kernel names" } else { "kernels" };
    // Where HIP's launches were left to the doorbell, the runs are the dispatches read there.
    let how = if kernels.iter().any(|k| k.from_dispatches) { "launched or dispatched" } else { "launched" };
    writeln!(s, "\n  kernels {how} ({} {what}, most runs first):", rows.len())?;
    writeln!(
        s,
        "  {:>8} {:>8} {:>6}  {:<34} {:<30} kernel",
        "runs", "launches", "failed", "grid x block (shmem) [count]", "family"
    )?;
    for r in &rows[..shown] {
        let first = r.shapes.first().map(shape_text).unwrap_or_default();
        let variants = if r.variants > 1 { format!("  [{} variants]", r.variants) } else { String::new() };
        // A row whose runs are dispatches read at the doorbell had no launch probed: its launches are unknown.
        let (launches, failed) = if r.launches == 0 && r.first.from_dispatches {
            ("-".to_owned(), "-".to_owned())
        } else {
            (r.launches.to_string(), r.failed.to_string())
        };
        writeln!(
            s,
            "  {:>8} {:>8} {:>6}  {:<34} {:<30} {}{variants}",
            r.runs, launches, failed, first, r.class, r.name
        )?;
        for sh in r.shapes.iter().skip(1).take(SHAPES_SHOWN - 1) {
            writeln!(s, "  {:>8} {:>8} {:>6}  {:<34}", "", "", "", shape_text(sh))?;
        }
        if r.shapes.len() > SHAPES_SHOWN {
            writeln!(s, "  {:>8} {:>8} {:>6}  (and {} more shapes)", "", "", "", r.shapes.len() - SHAPES_SHOWN)?;
        }
        if r.from_elf {
            writeln!(s, "  {:>8} {:>8} {:>6}  (name from {})", "", "", "", trace::Source::Elf.as_str())?;
        }
        if r.graph_runs > 0 {
            writeln!(s, "  {:>8} {:>8} {:>6}  ({} of the runs from graph replays)", "", "", "", r.graph_runs)?;
        }
        if let Some(line) = columns_text(&r.ne11, r.runs) {
            writeln!(s, "  {:>8} {:>8} {:>6}  {line}", "", "", "")?;
        }
        if let Some(code) = &r.code {
            writeln!(s, "  {:>8} {:>8} {:>6}  {code}", "", "", "")?;
        }
        // Named in the result type of the runtime the launches went through (none when they went
        // through several).
        let apis = &r.first.apis;
        let library = apis.first().map(|a| a.library()).filter(|l| apis.iter().all(|a| a.library() == *l));
        let errors: Vec<String> = r
            .returns
            .iter()
            .filter(|(code, _)| **code != 0)
            .map(|(code, n)| format!("{} x{n}", error_text(library, i64::from(*code))))
            .collect();
        if !errors.is_empty() {
            writeln!(s, "  {:>8} {:>8} {:>6}  returned {}", "", "", "", errors.join(", "))?;
        }
    }
    if shown < rows.len() {
        let rest = &rows[shown..];
        let runs: u64 = rest.iter().map(|r| r.runs).sum();
        writeln!(s, "  ... and {} more ({runs} runs); --top 0 lists all", rest.len())?;
    }
    Ok(())
}

/// Column counts shown per kernel row; the rest are summed.
const COLUMNS_SHOWN: usize = 8;

/// "ne11 (columns): 512 x28, 1 x2 (3 runs not exact)" for a ggml matrix kernel whose exact column
/// counts are known, most runs first.
pub(super) fn columns_text(ne11: &BTreeMap<u32, u64>, runs: u64) -> Option<String> {
    if ne11.is_empty() {
        return None;
    }
    let mut by_runs: Vec<(u32, u64)> = ne11.iter().map(|(c, n)| (*c, *n)).collect();
    by_runs.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut parts: Vec<String> = by_runs.iter().take(COLUMNS_SHOWN).map(|(c, n)| format!("{c} x{n}")).collect();
    if by_runs.len() > COLUMNS_SHOWN {
        let rest: u64 = by_runs[COLUMNS_SHOWN..].iter().map(|(_, n)| n).sum();
        parts.push(format!("{} more counts x{rest}", by_runs.len() - COLUMNS_SHOWN));
    }
    let bounded = runs.saturating_sub(ne11.values().sum());
    let rest = if bounded > 0 { format!(" ({bounded} runs: column count bounded only)") } else { String::new() };
    Some(format!("ne11 (columns): {}{rest}", parts.join(", ")))
}

/// Whether every one of `runs` has its exact column count in `ne11` (a ggml matrix kernel's row shows the
/// counts instead of the tile bound).
pub(super) fn all_exact(ne11: &BTreeMap<u32, u64>, runs: u64) -> bool {
    !ne11.is_empty() && ne11.values().sum::<u64>() >= runs
}

/// "(code: FILE bundle 0042)" for a kernel whose code file and bundles are known, "(code: FILE)" for one
/// whose file alone is (a CUDA module's image).
pub(super) fn code_text(file: Option<&str>, bundles: &[String]) -> Option<String> {
    let file = file?;
    if bundles.is_empty() {
        return Some(format!("(code: {file})"));
    }
    let which = if bundles.len() == 1 { "bundle" } else { "bundles" };
    Some(format!("(code: {file} {which} {})", bundles.join(", ")))
}

/// A launch shape: grid (in work-items where marked) x block (`-` where the call does not give it: a Vulkan
/// dispatch's workgroup size is its shader's), shared memory, and how many launches had it.
pub(super) fn shape_text(s: &Shape) -> String {
    let unit = if s.grid_unit == GridUnit::WorkItems { " wi" } else { "" };
    let block =
        if s.block == [0; 3] { "-".to_owned() } else { format!("({},{},{})", s.block[0], s.block[1], s.block[2]) };
    format!("({},{},{}){unit} x {block} ({}) [{}]", s.grid[0], s.grid[1], s.grid[2], s.shmem, s.count)
}

/// What a recording's Vulkan counters say about calls not counted and shader modules not named by ggml.
pub(super) fn write_vulkan_notes(s: &mut String, counters: &BTreeMap<String, u64>) -> std::fmt::Result {
    let count = |c: Counted| c.in_footer(counters);
    let past = count(Counted::VulkanEntryPointsPastLoader);
    if past > 0 {
        writeln!(
            s,
            "\nvulkan: {past} Vulkan entry points tracer probes were taken with vkGetDeviceProcAddr, from the driver \
             past the loader: calls through them are not counted"
        )?;
    }
    let lost = count(Counted::PipelineNamesUnread)
        + count(Counted::PipelineNamesUnbound)
        + count(Counted::PipelineNamesOverLimit);
    if lost > 0 {
        writeln!(
            s,
            "\nvulkan: {lost} pipeline names ggml-vulkan gave as it made them could not be read or bound to the shader \
             module made next on their thread: those pipelines are named from their SPIR-V"
        )?;
    }
    let (unmatched, at_run_time) =
        (count(Counted::ShaderModulesUnmatched), count(Counted::ShaderPipelinesNamedAtRunTime));
    if count(Counted::ShaderArraysNamedFromCode) > 0 && unmatched > 0 {
        writeln!(
            s,
            "\nvulkan: {unmatched} shader modules match no SPIR-V array a mapped ggml file names, and are named by their \
             own SPIR-V (entry point@hash): a ggml file without a symbol table names its arrays from the calls that \
             create its pipelines, and {at_run_time} of those calls build the name at run time"
        )?;
    }
    write_finder_notes(s, &count)
}

/// What the finders that read a library's code (ggml-vulkan's pipeline calls, HIP's registration calls) left
/// unread: files past their budgets, and answers that came after naming had to go on without them.
fn write_finder_notes(s: &mut String, count: &impl Fn(Counted) -> u64) -> std::fmt::Result {
    let unfinished = count(Counted::CodeFilesUnfinished);
    if unfinished > 0 {
        writeln!(
            s,
            "\ncode: the recording stopped while tracer's finders were still reading {unfinished} librar{}' code (a \
             stop never waits for them): what they had not named by then is named by its own symbols or SPIR-V",
            if unfinished == 1 { "y" } else { "ies" }
        )?;
    }
    let (unread, late_index, late_calls, full) = (
        count(Counted::CodeFilesUnread),
        count(Counted::ShaderIndexLate),
        count(Counted::RegistrationCallsLate),
        count(Counted::FinderQueueFull),
    );
    if unread > 0 {
        writeln!(
            s,
            "
code: {unread} librar{} read only in part by tracer's finders, past what a finder reads of one file or              of one recording (tracer's stderr named each and why): the kernels and shaders past the cut are named              by their own symbols or SPIR-V, or left unnamed",
            if unread == 1 { "y was" } else { "ies were" }
        )?;
    }
    if late_index + late_calls + full > 0 {
        writeln!(
            s,
            "
code: {late_index} shader modules and {late_calls} kernel handles were named before the finder reading              their library's code had answered (it had not within its wait), and {full} librar{} not read at all (the              finder's queue was full): named by their own SPIR-V or symbols, or left unnamed",
            if full == 1 { "y was" } else { "ies were" }
        )?;
    }
    Ok(())
}
