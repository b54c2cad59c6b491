//! tracer's user space: three wings around the trace format, over the leaves.
//!
//! - `trace`: the format. The events (one type each from decode to the file), the schema, the writer, the
//!   reader, a rotated recording read as one. Both wings meet here.
//! - `record`: the write wing, probes → ring → decode → attribute → writer, and the session that runs it.
//! - `read`: the read wing: phases, report, export, live metrics.
//! - `os`: the leaves: `/proc`, other processes' files, ELF, demangling, output files, clocks, ioctl numbers.
//!
//! Imports go one way: `record` and `read` use `trace` and `os`, `trace` uses `os`, `os` uses nothing of
//! ours (`cargo xtask test` checks it). `cli` defines the command line; `commands` and `inspect` are the
//! commands' fronts. Only [`main`] is public, and [`testing`] for the tests, fuzz targets and benchmarks.

mod cli;
mod commands;
mod inspect;
mod os;
mod read;
mod record;
mod trace;

/// The `tracer` command: parses the command line (a usage error exits with status 2, in clap's words) and
/// runs one subcommand to its exit status (`commands` says which).
#[must_use]
pub fn main() -> std::process::ExitCode {
    use clap::Parser as _;
    commands::run(cli::Cli::parse().command)
}

/// What the integration tests, the fuzz targets and the benchmarks reach inside tracer, in one place: not
/// an API (hidden from the docs; it changes with them).
#[doc(hidden)]
pub mod testing;
