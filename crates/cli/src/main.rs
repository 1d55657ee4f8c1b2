//! `sartor`: Gatekeeper-style mutation for Kubernetes.
//!
//! The binary is a thin shell: it reads files, hands them to the engine and
//! prints results. Results go to stdout, problems to stderr. Exit codes:
//! 0 ok, 1 a mutation failed, 2 invalid input.

// Results go through `sartor_offline::stdout::print`: `print!` panics when
// the reader has gone (`sartor audit | head`).
#![deny(clippy::print_stdout)]

mod audit;
mod crds;
mod serve;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sartor_offline::{Exit, lint, mutate, test};

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
}

/// mimalloc: fewer instructions per allocation than glibc's malloc on the
/// admission path, which allocates and frees a JSON tree per request.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Mutate(args) => mutate::run(&args),
        Command::Lint(args) => lint::run(&args),
        Command::Test(args) => test::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Audit(args) => audit::run(&args),
        Command::Crds(args) => crds::run(&args),
        Command::Export(command) => sartor_offline::export::run(&command),
    };
    match outcome {
        Ok(Exit::Ok) => ExitCode::SUCCESS,
        Ok(Exit::MutationFailed | Exit::Changed) => ExitCode::from(1),
        Ok(Exit::InvalidInput) => ExitCode::from(2),
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}
