#![expect(
    unused_crate_dependencies,
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "the binary is the library's thin front: the library uses the dependencies, and a CLI prints its answers and errors"
)]
use std::process::ExitCode;

use clap::Parser as _;
use tracer::{
    attach::ProbeMode,
    cli::{Cli, Cmd, ExportFormat, ProbeModeArg},
    record::{self, RecordArgs},
    report::Report,
};

fn main() -> ExitCode {
    let cli = Cli::parse(); // exits with status 2 on a usage error
    let result = match cli.command {
        Cmd::Record(r) => record::run(RecordArgs {
            output: r.output,
            ollama: r.ollama || !r.ollama_pids.is_empty(),
            ollama_pids: r.ollama_pids,
            models_dir: r.models_dir,
            force: r.force,
            pids: r.pids,
            libs: r.libs,
            duration: r.duration,
            command: r.command,
            ring_bytes: r.ring_size,
            quiet: r.quiet,
            cuda_runtime: r.cuda_runtime,
            read_delay: std::time::Duration::from_millis(r.debug_read_delay_ms),
            probe_mode: match r.probe_mode {
                ProbeModeArg::Record => ProbeMode::Record,
                ProbeModeArg::Empty => ProbeMode::Empty,
            },
        }),
        Cmd::Inspect(i) => tracer::inspect::inspect(&i.file, i.target.as_deref()).and_then(|ins| {
            if i.json {
                println!("{}", serde_json::to_string_pretty(&ins)?);
            } else {
                print!("{}", ins.to_text());
            }
            Ok(())
        }),
        Cmd::Export(e) => (|| {
            let mut out: Box<dyn std::io::Write> = match &e.output {
                Some(path) => Box::new(std::io::BufWriter::new(record::create_output(path, true)?)),
                None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
            };
            match e.format {
                ExportFormat::Perfetto => tracer::export::perfetto(&e.file, &mut out)?,
                ExportFormat::Csv => tracer::export::csv(&e.file, &mut out)?,
            }
            out.flush()?;
            Ok(())
        })(),
        Cmd::Report(r) => Report::from_file(&r.file).and_then(|rep| {
            if r.json {
                println!("{}", serde_json::to_string_pretty(&rep)?);
            } else {
                if let Some(w) = &rep.trace.warning {
                    eprintln!("tracer: warning: {w}");
                }
                print!("{}", rep.to_text());
            }
            Ok(())
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tracer: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
