//! sartor's offline commands as a library: `sartor lint`, `sartor mutate`
//! (the preview) and `sartor test`, run on files, with the engine the
//! webhook runs and no cluster client. A GitOps repository's CI runs these;
//! the `sartor` binary only parses its command line and calls [`lint::run`],
//! [`mutate::run`] or [`test::run`] with its standard streams.
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
//! Every command takes its flags (the `clap` arguments the binary parses)
//! and an [`Io`]: where `-` is read from, where its results go (`out`, the
//! binary's stdout) and where its problems go (`err`, the binary's stderr),
//! each written as it is ready. It returns an [`Exit`], the exit code other
//! tools rely on, or an error when `out` or `err` cannot be written (a
//! closed pipe: `writing to stdout: Broken pipe ...`).
//!
//! ```
//! use clap::Parser;
//! use sartor_offline::{Exit, Io, mutate};
//!
//! /// `sartor mutate`'s flags, as the binary takes them.
//! #[derive(Parser)]
//! struct Mutate {
//!     #[command(flatten)]
//!     args: mutate::MutateArgs,
//! }
//!
//! // The repository's example mutators on a Pod given as standard input.
//! let examples = "../../examples";
//! let mutate = Mutate::parse_from([
//!     "mutate",
//!     "--mutators", &format!("{examples}/mutators"),
//!     "--namespaces", &format!("{examples}/objects/namespace.yaml"),
//!     "-",
//! ]);
//! let pod = "{apiVersion: v1, kind: Pod, metadata: {name: web, namespace: prod-shop}, \
//!            spec: {containers: [{name: app, image: nginx}]}}";
//! let (mut out, mut err) = (Vec::new(), Vec::new());
//! let mut io = Io { stdin: &mut pod.as_bytes(), out: &mut out, err: &mut err, colour: false };
//! assert_eq!(mutate::run(&mutate.args, &mut io)?, Exit::Ok);
//! assert!(String::from_utf8(out)?.contains("imagePullPolicy: Always"));
//! assert_eq!(String::from_utf8(err)?, "");
//! # Ok::<(), anyhow::Error>(())
//! ```

// Results go through an `Io`: `print!` panics when the
// reader has gone (`sartor audit | head`).
#![deny(clippy::print_stdout)]

pub mod audit;
pub mod export;
mod external;
mod io;
pub mod lint;
mod load;
pub mod mutate;
mod report;
pub mod test;
#[cfg(test)]
mod testing;

pub use io::Io;
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

impl Exit {
    /// The process's exit code: 0, 1 (a mutation failed, or `--exit-code`
    /// saw a change) or 2 (invalid input; a command's error is 2 too).
    pub fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::MutationFailed | Exit::Changed => 1,
            Exit::InvalidInput => 2,
        }
    }
}
