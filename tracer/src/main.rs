//! The `tracer` command: parses the command line and runs one subcommand ([`tracer::run`] says the exit
//! statuses).
#![expect(
    unused_crate_dependencies,
    reason = "the binary is the library's thin front: the library uses the dependencies"
)]

use clap::Parser as _;

fn main() -> std::process::ExitCode {
    let cli = tracer::cli::Cli::parse(); // exits with status 2 on a usage error
    tracer::run(cli.command)
}
