//! The report's phases of a process: steps by phase with their kernels, passes, compositions, API and
//! library calls and traps; the tokens the batches carried; graph executables read from the driver.

#![expect(
    clippy::float_arithmetic,
    clippy::cast_precision_loss,
    reason = "traps per token are shown as a decimal fraction of two counts"
)]

use std::fmt::Write as _;

use super::{super::ProcessReport, words::plural};

/// The CUDA graph executables made before the attach whose kernels were read from the driver's objects,
/// and what the reads rest on.
fn write_driver_reads(s: &mut String, p: &ProcessReport) -> std::fmt::Result {
    let d = &p.graph_execs_from_driver;
    if d.named == 0 && d.checks_agreed + d.checks_disagreed + d.checks_unread == 0 {
        return Ok(());
    }
    let driver = d.driver.as_deref().map_or_else(String::new, |v| format!(" {v}"));
    if d.named > 0 {
        writeln!(
            s,
            "\n  {} of {} graph replays ran {} executable{} made before tracer started, {} kernel nodes read from \
             the CUDA driver{driver}'s own objects (kernels with source graph-exec{copies})",
            d.replays,
            p.graph_replays,
            d.named,
            plural(d.named),
            d.kernel_nodes,
            copies = if d.named_from_copies > 0 {
                format!(
                    "; {} executable{} through {} own node copies, {} source graph destroyed",
                    d.named_from_copies,
                    plural(d.named_from_copies),
                    if d.named_from_copies == 1 { "its" } else { "their" },
                    if d.named_from_copies == 1 { "its" } else { "their" }
                )
            } else {
                String::new()
            }
        )?;
    }
    let checks = d.checks_agreed + d.checks_disagreed;
    let unread = if d.checks_unread > 0 {
        format!(
            "; {} not compared: the executable no longer read as its capture (changed or gone since)",
            d.checks_unread
        )
    } else {
        String::new()
    };
    if checks > 0 {
        writeln!(
            s,
            "  (the layout checked against {checks} graph{} captured while tracing: {} agreed, {} disagreed{unread})",
            plural(checks),
            d.checks_agreed,
            d.checks_disagreed
        )
    } else if d.named > 0 {
        writeln!(
            s,
            "  (no graph captured while tracing could check the layout{unread}: read on driver{driver}, the one the \
             layout was measured on)"
        )
    } else {
        writeln!(s, "\n  (the graph-executable layout was not checked{unread})")
    }
}

/// Why executables made before the attach were not read from the driver, where some were not.
fn unread_why(d: &crate::read::phase::DriverReads) -> String {
    let mut why = Vec::new();
    if d.source_gone > 0 {
        why.push(format!(
            "{} executable{} whose source graph was destroyed after instantiation (PyTorch's default), and whose \
             own node copies did not read as kernel nodes (or were not trusted in this process)",
            d.source_gone,
            plural(d.source_gone)
        ));
    }
    if d.layout > 0 {
        why.push(format!("{} executable{} the driver's layout did not hold for", d.layout, plural(d.layout)));
    }
    if d.process_gone > 0 {
        why.push(format!("{} executable{} not read: the process had ended", d.process_gone, plural(d.process_gone)));
    }
    if d.refused > 0 {
        let reason = if d.checks_disagreed > 0 {
            "the checks against captured graphs disagreed".to_owned()
        } else {
            format!(
                "no graph captured while tracing to check the layout, and driver {} is not one it was measured on",
                d.driver.as_deref().unwrap_or("(version unknown)")
            )
        };
        why.push(format!("{} executable{} not read: {reason}", d.refused, plural(d.refused)));
    }
    if why.is_empty() { String::new() } else { format!(";\n  not read from the driver: {}", why.join("; ")) }
}

pub(super) fn write_phases(s: &mut String, p: &ProcessReport, lean: bool) -> std::fmt::Result {
    write_driver_reads(s, p)?;
    if p.graph_replays_unresolved > 0 {
        writeln!(
            s,
            "\n  {} of {} graph replays ran executables captured before tracer started: their kernels are \
             unknown (a graph captured, instantiated or updated while tracing is followed){}",
            p.graph_replays_unresolved,
            p.graph_replays,
            unread_why(&p.graph_execs_from_driver)
        )?;
    }
    if p.phases.iter().any(|ph| ph.phase != crate::read::phase::Phase::Other) {
        let batched: u64 = p.phases.iter().map(|ph| ph.steps_from_batches).sum();
        let from_inputs: u64 = p.phases.iter().map(|ph| ph.steps_from_inputs).sum();
        let cut = match (batched, from_inputs, lean) {
            (1.., _, _) => "it begins there, and its batch gives its sequences",
            (0, 1.., _) => "none seen: it ends at the logits copy, or where a pass begins after one that kept outputs",
            (0, 0, true) => "it ends at the logits copy",
            (0, 0, false) => "it ends at the sync after the logits copy",
        };
        writeln!(
            s,
            "\n  phases (a step is one llama_decode or llama_process call: {cut}; graph replays count in it):"
        )?;
        writeln!(s, "  {:<8} {:>6}  {:<16} kernels", "phase", "steps", "batch widths")?;
        for ph in &p.phases {
            let widths: Vec<&str> = ph.batch_widths.iter().map(String::as_str).collect();
            let kernels: Vec<String> = ph.kernels.iter().map(|(k, n)| format!("{k} x{n}")).collect();
            writeln!(
                s,
                "  {:<8} {:>6}  {:<16} {}",
                ph.phase.as_str(),
                ph.steps,
                if widths.is_empty() { "-".to_owned() } else { widths.join(", ") },
                kernels.join(", ")
            )?;
            for seq in &ph.micro_batched {
                let passes: Vec<String> = seq
                    .passes
                    .iter()
                    .map(|pass| {
                        let k: Vec<String> = pass.kernels.iter().map(|(k, n)| format!("{k} x{n}")).collect();
                        format!("[{}] {}", pass.width, k.join(", "))
                    })
                    .collect();
                let steps = if seq.steps == 1 { "1 step".to_owned() } else { format!("{} steps", seq.steps) };
                writeln!(s, "  {:>15}  {} ({steps}), passes in order: {}", "", seq.label, passes.join("; "))?;
            }
            if ph.passes_unlisted > 0 {
                writeln!(
                    s,
                    "  {:>15}  ({} more steps of several passes, sequences not listed)",
                    "", ph.passes_unlisted
                )?;
            }
            if ph.unknown_replays > 0 {
                writeln!(s, "  {:>15}  ({} graph replays of unknown kernels in these steps)", "", ph.unknown_replays)?;
            }
            if ph.passes_merged > 0 {
                writeln!(
                    s,
                    "  {:>15}  ({} passes beyond {} in a step counted in its last)",
                    "",
                    ph.passes_merged,
                    crate::read::phase::MAX_PASSES
                )?;
            }
            write_phase_calls(s, p, ph)?;
        }
        write_step_tokens(s, p, batched)?;
        if !p.mmq_widths.is_empty() {
            let sources: Vec<String> = p.mmq_widths.iter().map(|(k, n)| format!("{n} from the {k}")).collect();
            writeln!(s, "  MMQ column counts (ne11): {}", sources.join(", "))?;
        }
    }
    Ok(())
}

/// A phase's steps by what their batches carried, and its API and library calls.
fn write_phase_calls(s: &mut String, p: &ProcessReport, ph: &crate::read::phase::PhaseReport) -> std::fmt::Result {
    let pad = "";
    for (label, n) in &ph.compositions {
        writeln!(s, "  {pad:>15}  {label} ({n} step{})", plural(*n))?;
    }
    if ph.compositions_unlisted > 0 {
        writeln!(s, "  {pad:>15}  ({} more steps of other compositions, not listed)", ph.compositions_unlisted)?;
    }
    if !ph.api_calls.is_empty() {
        let calls: Vec<String> = ph.api_calls.iter().map(|(f, n)| format!("{f} {n}")).collect();
        writeln!(s, "  {pad:>15}  API calls: {}", calls.join(", "))?;
    }
    if ph.traps > 0 {
        let per =
            if ph.tokens > 0 { format!(", {:.1} a token", ph.traps as f64 / ph.tokens as f64) } else { String::new() };
        let doorbells = if ph.doorbell_traps > 0 {
            format!("; {} at doorbells, one a store of a queue's write index", ph.doorbell_traps)
        } else {
            String::new()
        };
        writeln!(
            s,
            "  {pad:>15}  traps: {}{per} (a probed call traps once at entry, twice with its return{doorbells})",
            ph.traps
        )?;
    }
    for (id, n) in &ph.library_calls {
        let name = p.step_libraries.get(id).map_or("?", String::as_str);
        writeln!(s, "  {pad:>15}  library calls: {n} into {name}")?;
    }
    Ok(())
}

/// Tokens by kind over the process's steps, and what the steps' composition rests on: batches read, the
/// passes' inputs copied up, or kernel widths alone.
fn write_step_tokens(s: &mut String, p: &ProcessReport, batched: u64) -> std::fmt::Result {
    let steps: u64 = p.phases.iter().map(|ph| ph.steps).sum();
    let sum = |f: fn(&crate::read::phase::PhaseReport) -> u64| p.phases.iter().map(f).sum::<u64>();
    let from_inputs = sum(|ph| ph.steps_from_inputs);
    if batched == 0 && from_inputs == 0 {
        return writeln!(
            s,
            "  composition: from kernel widths alone (no llama_decode seen: libllama not mapped, or llama.cpp \
             linked into the program; and no pass's positions and output rows copied up through libggml-base); \
             several sequences in one step are not told apart"
        );
    }
    let (prompt, decode, unread) = (sum(|ph| ph.prompt_tokens), sum(|ph| ph.decode_tokens), sum(|ph| ph.unread_tokens));
    let unread = if unread > 0 { format!(", {unread} unread (beyond what a probe reads)") } else { String::new() };
    let from = match (batched, from_inputs) {
        (0, _) => "the passes' inputs",
        (_, 0) => "the batches",
        _ => "the batches and the passes' inputs",
    };
    writeln!(s, "  tokens from {from}: {prompt} prompt, {decode} decode{unread}")?;
    if from_inputs > 0 {
        writeln!(
            s,
            "  ({from_inputs} steps judged from their passes' inputs, no llama_decode seen: token positions and \
             output rows as ggml's scheduler copied them up; a decode token is a kept output one position after \
             an earlier step's; sequences are not told apart in prompts)"
        )?;
    }
    let (checked, disagree) = (sum(|ph| ph.inputs_checked), sum(|ph| ph.inputs_disagree));
    if checked > 0 {
        writeln!(
            s,
            "  (judged from their passes' inputs alone, {} of {checked} batched steps come out the same)",
            checked - disagree
        )?;
    }
    let judged = batched + from_inputs;
    if judged < steps {
        writeln!(s, "  ({} steps without a batch or judged inputs are labelled by their kernels)", steps - judged)?;
    }
    if p.sequences_untracked > 0 {
        writeln!(s, "  ({} sequences judged without their history: too many sequences)", p.sequences_untracked)?;
    }
    if p.outputs_unheld > 0 {
        writeln!(s, "  ({} kept outputs not held for their next token: too many waiting)", p.outputs_unheld)?;
    }
    writeln!(s, "  (API calls tallied in the kernel are counted for the whole recording only, not per phase)")
}
