//! `sartor lint`: check every mutator and the set as a whole.

use clap::{Args, ValueEnum};
use serde_json::json;

use crate::{Outcome, load};

/// Check mutators: every one must compile and no two may conflict.
///
/// Lists every problem, not just the first: unreadable files, documents that
/// are not valid mutators, invalid locations and parameters, and schema
/// conflicts between pairs of mutators. Exits 0 only when there is none, 2
/// otherwise.
#[derive(Debug, Args)]
pub struct LintArgs {
    /// A mutator file or directory (sartor's or Gatekeeper's apiVersions);
    /// repeat the flag for more.
    #[arg(long = "mutators", short = 'm', value_name = "PATH", required = true, action = clap::ArgAction::Append)]
    mutators: Vec<String>,
    /// Output format: `text` (one line per problem, on stderr) or `json`
    /// (`{"findings": [...]}` on stdout, for CI annotations).
    #[arg(long, short = 'o', value_enum, default_value_t = LintFormat::Text)]
    output: LintFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LintFormat {
    Text,
    Json,
}

/// Runs `sartor lint`.
///
/// # Errors
/// Only when JSON output cannot be serialized.
pub fn run(args: &LintArgs) -> anyhow::Result<Outcome> {
    let (system, findings) = load::system(&args.mutators);
    match args.output {
        LintFormat::Text => {
            for finding in &findings {
                eprintln!("error: {finding}");
            }
            if findings.is_empty() {
                eprintln!("{} mutators, no problems", system.len());
            }
        }
        LintFormat::Json => {
            let report = json!({
                "mutators": system.len(),
                "findings": findings.iter().map(load::Finding::to_json).collect::<Vec<_>>(),
            });
            println!("{}", serde_json::to_string_pretty(&report)?);
        }
    }
    Ok(if findings.is_empty() {
        Outcome::Ok
    } else {
        Outcome::InvalidInput
    })
}
