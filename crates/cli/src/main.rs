//! `sartor`: Gatekeeper-style mutation for Kubernetes.
//!
//! The binary is a thin shell: it reads files, hands them to the engine and
//! prints results. Results go to stdout, problems to stderr. Exit codes:
//! 0 ok, 1 a mutation failed, 2 invalid input.

// Results go through an `Io`: `print!` panics when the reader has gone
// (`sartor audit | head`).
#![deny(clippy::print_stdout)]

mod audit;
mod crds;
mod playground;
mod serve;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sartor_offline::{Exit, Io, lint, mutate, test};

/// Gatekeeper-style mutation for Kubernetes: preview, lint and test mutators
/// offline, with the engine the webhook runs.
#[derive(Debug, Parser)]
#[command(
    name = "sartor",
    version,
    after_help = "Exit codes: 0 ok; 1 a mutation or a test case failed; 2 invalid input \
                  (unreadable files, invalid mutators, schema or condition conflicts).\n\
                  Results go to stdout, problems to stderr."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Mutate(mutate::MutateArgs),
    Lint(lint::LintArgs),
    Test(test::TestArgs),
    Serve(Box<serve::ServeArgs>),
    Audit(audit::AuditArgs),
    Crds(crds::CrdsArgs),
    /// Writes the mutators as other admission objects: `export map`, a
    /// MutatingAdmissionPolicy and its binding, for clusters with no webhook.
    #[command(subcommand)]
    Export(sartor_offline::export::ExportCommand),
    Playground(playground::PlaygroundArgs),
}

/// mimalloc: fewer instructions per allocation than glibc's malloc on the
/// admission path, which allocates and frees a JSON tree per request.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Mutate(args) => with_std_io(|io| mutate::run(&args, io)),
        Command::Lint(args) => with_std_io(|io| lint::run(&args, io)),
        Command::Test(args) => with_std_io(|io| test::run(&args, io)),
        Command::Serve(args) => serve::run(&args),
        Command::Audit(args) => audit::run(&args),
        Command::Crds(args) => with_std_io(|io| crds::run(&args, io)),
        Command::Export(command) => with_std_io(|io| sartor_offline::export::run(&command, io)),
        Command::Playground(args) => playground::run(&args),
    };
    match outcome {
        Ok(exit) => ExitCode::from(exit.code()),
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// Runs an offline command on the process's standard streams, stdout and
/// stderr locked for its length (diffs coloured when stdout is a
/// terminal). Standard input is not locked here: the loader locks it when
/// it reads `-`, and that lock is not reentrant.
fn with_std_io(command: impl FnOnce(&mut Io<'_>) -> anyhow::Result<Exit>) -> anyhow::Result<Exit> {
    use std::io::IsTerminal as _;
    let colour = std::io::stdout().is_terminal();
    let (mut stdin, mut stdout, mut stderr) = (
        std::io::stdin(),
        std::io::stdout().lock(),
        std::io::stderr().lock(),
    );
    command(&mut Io {
        stdin: &mut stdin,
        out: &mut stdout,
        err: &mut stderr,
        colour,
    })
}
