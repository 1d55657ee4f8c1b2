//! sartor's offline commands as a library: `sartor lint`, `sartor mutate`
//! (the preview) and `sartor test`, run on files, with the engine the
//! webhook runs and no cluster client. A GitOps repository's CI runs these;
//! the `sartor` binary only parses its command line and calls [`lint::run`],
//! [`mutate::run`] or [`test::run`].
//!
//! ```text
//!  paths ──load (sartor_api's loader)──▶ a repository: mutators, objects,
//!                                         Namespaces, api-resources, Providers
//!        ──sartor_engine::compile──▶ System ──lint: analysis findings
//!                                          ──mutate: each object placed in its namespace
//!                                             (metadata.namespace, else -n), System::mutate,
//!                                             expansion's generated objects ──▶ YAML or a diff
//!                                          ──test: suites of cases ──▶ text, JSON or JUnit
//! ```
//!
//! Every command returns an [`Exit`], the exit code other tools rely on.
//!
//! ```
//! use clap::Parser;
//!
//! /// `sartor lint`'s flags, as the binary takes them.
//! #[derive(Parser)]
//! struct Lint {
//!     #[command(flatten)]
//!     args: sartor_offline::lint::LintArgs,
//! }
//!
//! // The repository's example mutators load, compile and agree.
//! let lint = Lint::parse_from(["lint", "--mutators", "../../examples/mutators"]);
//! assert_eq!(sartor_offline::lint::run(&lint.args)?, sartor_offline::Exit::Ok);
//! # Ok::<(), anyhow::Error>(())
//! ```

// Results go through `stdout::print`: `print!` panics when the reader has
// gone (`sartor audit | head`).
#![deny(clippy::print_stdout)]

pub mod export;
mod external;
pub mod lint;
mod load;
pub mod mutate;
mod report;
pub mod stdout;
pub mod test;

pub use load::namespaces;
pub use mutate::{colour, explain_as, to_yaml, yaml_diff};
/// The JUnit XML writer of `sartor test`, which `sartor audit -o junit` shares.
pub use report::{CaseResult, SuiteResult, junit};

/// How a command ended, mapped to the exit code other tools rely on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Everything worked.
    Ok,
    /// At least one mutation failed (for example, it did not converge).
    MutationFailed,
    /// `mutate --exit-code`: at least one object would change.
    Changed,
    /// The input could not be used: unreadable files, invalid mutators,
    /// schema or condition conflicts.
    InvalidInput,
}
