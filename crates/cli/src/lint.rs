//! `sartor lint`: check every mutator and the set as a whole.

use clap::{Args, ValueEnum};
use serde_json::json;

use sartor_api::Input;

use crate::{Outcome, load};

/// Check mutators: every one must compile and no two may conflict.
///
/// Lists every problem, not just the first: unreadable files, documents that
/// are not valid mutators, invalid locations and parameters, and schema
/// conflicts between pairs of mutators. Exits 0 only when there is none, 2
/// otherwise.
///
/// PATHs are repositories: the documents whose apiVersion is in a mutation
/// group (`mutations.sartor.dev`, `mutations.gatekeeper.sh`) are checked, and
/// so are ExpansionTemplates (each valid, none generating another's kinds in
/// a cycle); every other document is skipped (and counted). Under --mutators
/// every document must be a mutator or an ExpansionTemplate.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("sources").required(true).multiple(true).args(["mutators", "paths"]))]
pub struct LintArgs {
    /// A mutator file or directory (sartor's or Gatekeeper's apiVersions) in
    /// which every document must be a mutator; repeat the flag for more.
    #[arg(long = "mutators", short = 'm', value_name = "PATH", action = clap::ArgAction::Append)]
    mutators: Vec<String>,
    /// Files or directories of any manifests (a repository), or `-` for
    /// stdin: the mutators among them are checked, the rest skipped.
    #[arg(value_name = "PATH")]
    paths: Vec<String>,
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
    let inputs: Vec<Input> = args.paths.iter().map(|p| Input::from_arg(p)).collect();
    let repository = load::repository(&args.mutators, &inputs);
    let (system, findings) = (&repository.system, &repository.findings);
    let skipped = repository.others.len() + repository.skipped;
    match args.output {
        LintFormat::Text => {
            for finding in findings {
                eprintln!("error: {finding}");
            }
            if findings.is_empty() {
                let others = match skipped {
                    0 => String::new(),
                    1 => " (1 other document skipped)".to_string(),
                    n => format!(" ({n} other documents skipped)"),
                };
                eprintln!("{} mutators, no problems{others}", system.len());
            }
        }
        LintFormat::Json => {
            let report = json!({
                "mutators": system.len(),
                "skipped": skipped,
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
