//! The commands' fronts: one subcommand of a parsed command line run to its exit status, and its error said
//! in one sentence. `main` only parses.
//!
//! Exit status: 0 on success; for `record -- COMMAND`, the command's own status (128 + N when a signal N
//! ended it); 1 with one sentence on stderr when something failed; 2 for a usage error (clap's, before
//! this). A closed output pipe (`tracer report t.jsonl | head`) ends quietly with 0.

use std::{
    io::{BufWriter, Write as _},
    process::ExitCode,
};

use crate::{
    cli::{Cmd, ExportCli, ExportFormat, Generated},
    os::{
        messages::{tell, warning},
        output::{self, Dest, Staged},
    },
    read::{self, report::Report},
    record::{self, RecordArgs},
};

/// Runs one subcommand to its exit status; an error is said on stderr as one sentence.
pub(crate) fn run(cmd: Cmd) -> ExitCode {
    match command(cmd) {
        Ok(code) => code,
        // The reader of our output went away (`| head`): it has what it wanted.
        Err(e) if output::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            tell!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// One subcommand, to its exit status.
fn command(command: Cmd) -> anyhow::Result<ExitCode> {
    match command {
        Cmd::Record(r) => {
            Ok(record::run(RecordArgs::try_from(r)?, read::metrics::serve)?.map_or(ExitCode::SUCCESS, ExitCode::from))
        }
        Cmd::Inspect(i) => {
            let ins = crate::inspect::inspect(&i.file, i.target.as_deref())?;
            print(&if i.json { format!("{}\n", serde_json::to_string_pretty(&ins)?) } else { ins.to_text() })
        }
        Cmd::Export(e) => export(&e),
        Cmd::Top(t) => {
            let opts = read::top::Options { output: t.output.clone(), exit_when_done: t.exit_when_done };
            let status = read::top::run(&opts, |output, tap| {
                record::run_tapped(RecordArgs::try_from(t.record_cli(output)?)?, read::metrics::serve, Some(tap))
            })?;
            Ok(status.map_or(ExitCode::SUCCESS, ExitCode::from))
        }
        Cmd::Generate(g) => match g.what {
            Generated::Man => crate::cli::man_pages(&g.dir).map(|()| ExitCode::SUCCESS).map_err(|e| {
                anyhow::anyhow!("cannot write the man pages into {} ({e}): give an existing directory", g.dir.display())
            }),
        },
        Cmd::Report(r) => {
            let rep = Report::from_input(&crate::trace::Input::new(&r.files)?)?;
            if r.json {
                print(&format!("{}\n", serde_json::to_string_pretty(&rep)?))
            } else {
                warn(&rep.trace.warnings());
                print(&rep.to_text(&read::report::TextOptions { full_names: r.full_names, top: r.top }))
            }
        }
    }
}

/// What reading the input found wrong with it, on stderr (the output goes on).
fn warn(warnings: &[String]) {
    for w in warnings {
        warning!("{w}");
    }
}

fn print(text: &str) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Said when rocpd is asked for on standard output.
const ROCPD_NEEDS_FILE: &str = "rocpd is an SQLite file: give -o FILE.db";

/// Exports to standard output, or to a file that appears only when the export is complete; what reading
/// the input found wrong with it (a cut file, parts missing) is said on stderr, as `report` says it.
fn export(e: &ExportCli) -> anyhow::Result<ExitCode> {
    let input = crate::trace::Input::new(&e.files)?;
    if matches!(e.format, ExportFormat::Rocpd) {
        // A database, written where it will lie (beside it, then renamed), never streamed.
        let Some(Dest::File(path)) = e.output.as_deref().map(Dest::parse) else {
            anyhow::bail!("{ROCPD_NEEDS_FILE}");
        };
        let inputs: Vec<&std::path::Path> = input.paths().collect();
        warn(&read::export::rocpd(&input, &path, e.force, &inputs)?);
        return Ok(ExitCode::SUCCESS);
    }
    let run = |out: &mut (dyn std::io::Write + Send)| match e.format {
        ExportFormat::Perfetto => read::export::perfetto(&input, out),
        ExportFormat::Csv => read::export::csv(&input, out),
        ExportFormat::Dot => read::export::dot(&input, out),
        ExportFormat::Parquet => read::export::parquet(&input, out),
        ExportFormat::Rocpd => Err(anyhow::anyhow!("{ROCPD_NEEDS_FILE}")),
    };
    let warnings = match e.output.as_deref().map_or(Dest::Stdout, Dest::parse) {
        Dest::Stdout => {
            let mut spool = read::export::Spool::new();
            let warnings = run(&mut spool)?;
            spool.copy_to(&mut std::io::stdout().lock())?;
            warnings
        }
        Dest::File(path) => {
            let inputs: Vec<&std::path::Path> = input.paths().collect();
            let mut staged = Staged::create(&path, e.force, &inputs)?;
            let mut out = BufWriter::new(staged.file());
            let warnings = run(&mut out)?;
            out.flush()?;
            drop(out);
            staged.commit()?;
            warnings
        }
    };
    warn(&warnings);
    Ok(ExitCode::SUCCESS)
}
