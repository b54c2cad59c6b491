//! The `tracer` command: [`tracer::main`] parses the command line and runs one subcommand.
#![expect(
    unused_crate_dependencies,
    reason = "the binary is the library's thin front: the library uses the dependencies"
)]

fn main() -> std::process::ExitCode {
    tracer::main()
}
