//! `sartor lint`: check every mutator and the set as a whole.

// Everything goes through the `Io` given: a test reads what a user would see.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::collections::HashMap;

use clap::{Args, ValueEnum};
use serde_json::{Value, json};

use sartor_api::Input;

use sartor_engine::analysis::gatekeeper::Class;
use sartor_engine::analysis::{Rule, Severity};

use crate::io::say;
use crate::load::Category;
use crate::{Exit, Io, load};

mod lines;
#[cfg(test)]
pub(crate) mod tests;

/// Check mutators: every one must compile, no two may conflict, and the
/// set is analysed for what can be proven without an object.
///
/// Lists every problem, not just the first: unreadable files, documents that
/// are not valid mutators, invalid locations and parameters, schema
/// conflicts between pairs of mutators (errors), and the analysis findings:
/// mutators that never apply (error); that never have an effect because a
/// later one overwrites them (shadowed), or keep theirs only by name order;
/// that write on UPDATE a field Kubernetes refuses to change after creation;
/// that write what a Kubernetes controller rewrites; that may keep a set
/// from converging (warnings); and pairs writing one place with different
/// values (info). Exits 0 when there is no error (no warning either, with
/// --strict), 2 otherwise.
///
/// Mutators with a Gatekeeper apiVersion are also compared with Gatekeeper
/// v3.23.1 (category `gatekeeper`): a warning where it would behave
/// differently at admission or refuse what sartor accepts (glob-aliasing,
/// number-types, big-integers, pathtests-parent-first), a note beside the
/// error where it would accept what sartor refuses (pathtests-child-first,
/// pathtest-without-condition, malformed-selector, unknown-fields).
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
    /// Output format: `text` (one line per finding, on stderr) or `json`
    /// (`{"findings": [...]}` on stdout, for CI annotations: each with its
    /// file, document and line).
    #[arg(long, short = 'o', value_enum, default_value_t = LintFormat::Text)]
    output: LintFormat,
    /// Fail on warnings too, not only on errors.
    #[arg(long)]
    strict: bool,
    /// Leave out findings of these analysis rules (repeat, or separate with
    /// commas), e.g. `--allow overlap,breaks-update`; `gatekeeper` leaves
    /// out every Gatekeeper difference, a class name (`glob-aliasing`, ...)
    /// those of one class. Errors are never left out.
    #[arg(long, value_name = "RULE", value_delimiter = ',', value_parser = parse_allow)]
    allow: Vec<Allow>,
    /// The output of `kubectl api-resources` for the cluster the mutators go
    /// to: which kinds are namespaced, beside the built-in kinds and the
    /// CRDs among the PATHs (what `never-applies` reads of `match.scope`);
    /// repeat for more.
    #[arg(long = "api-resources", value_name = "FILE", action = clap::ArgAction::Append)]
    api_resources: Vec<String>,
    /// Also name every mutator `sartor export map` would leave out of a
    /// MutatingAdmissionPolicy, with the reason (category `export`,
    /// warnings).
    #[arg(long = "export-map")]
    export_map: bool,
}

/// What `--allow` leaves out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Allow {
    /// The findings of one analysis rule.
    Rule(Rule),
    /// Every Gatekeeper difference.
    Gatekeeper,
    /// The Gatekeeper differences of one class.
    Class(Class),
}

impl Allow {
    fn covers(self, category: Category) -> bool {
        match (self, category) {
            (
                Allow::Rule(allowed),
                Category::Analysis(rule) | Category::AcceptedByGatekeeper(rule),
            ) => allowed == rule,
            (Allow::Gatekeeper, Category::Gatekeeper(_)) => true,
            (Allow::Class(allowed), Category::Gatekeeper(class)) => allowed == class,
            _ => false,
        }
    }
}

fn parse_allow(name: &str) -> Result<Allow, String> {
    let rule = Rule::ALL
        .into_iter()
        .find(|rule| rule.as_str() == name)
        .map(Allow::Rule);
    let class = Class::ALL
        .into_iter()
        .find(|class| class.as_str() == name)
        .map(Allow::Class);
    let gatekeeper = (name == load::GATEKEEPER).then_some(Allow::Gatekeeper);
    rule.or(gatekeeper).or(class).ok_or_else(|| {
        let rules: Vec<&str> = Rule::ALL.iter().map(|r| r.as_str()).collect();
        let classes: Vec<&str> = Class::ALL.iter().map(|c| c.as_str()).collect();
        format!(
            "unknown rule {name:?}; the rules are {}, and {} (every Gatekeeper difference) or one of its classes: {}",
            rules.join(", "),
            load::GATEKEEPER,
            classes.join(", ")
        )
    })
}

/// The findings as JSON, each with its `line` ([`lines::Lines`]): its file
/// is read again, as the loader keeps no text; `null` for standard input,
/// built-in origins and a file no longer readable.
fn with_lines(findings: &[load::Finding]) -> Vec<Value> {
    let mut files: HashMap<&str, Option<lines::Lines>> = HashMap::new();
    findings
        .iter()
        .map(|finding| {
            let origin = &finding.origin;
            let lines = files.entry(origin.file.as_str()).or_insert_with(|| {
                let stdin = origin.file == Input::Stdin.to_string();
                let text = (!stdin).then(|| std::fs::read_to_string(&origin.file).ok());
                text.flatten().map(|text| lines::Lines::of(&text))
            });
            let line = lines
                .as_ref()
                .and_then(|lines| lines.finding(origin.document, origin.item, &finding.message));
            let mut value = finding.to_json();
            if let Value::Object(fields) = &mut value {
                fields.insert("line".to_string(), json!(line));
            }
            value
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LintFormat {
    Text,
    Json,
}

/// Runs `sartor lint`: the findings on `io.err` (text) or `io.out`
/// (JSON); an input `-` is read from `io.stdin`.
///
/// # Errors
/// JSON output that cannot be serialized, or `io` that cannot be written.
pub fn run(args: &LintArgs, io: &mut Io<'_>) -> anyhow::Result<Exit> {
    let inputs: Vec<Input> = args.paths.iter().map(|p| Input::from_arg(p)).collect();
    let repository = load::repository_with(&args.mutators, &inputs, io.stdin, usize::MAX);
    let system = &repository.system;
    let (scopes, unreadable) = repository.scopes(&args.api_resources);
    let allowed = |f: &load::Finding| !args.allow.iter().any(|a| a.covers(f.category));
    let mut findings = repository.findings.clone();
    // A typo in a file named here (a mutator without apiVersion) is not a
    // document to skip; one found in a directory is counted as skipped.
    findings.extend(repository.not_object_findings(false));
    findings.extend(unreadable);
    findings.extend(load::provider_findings(&repository));
    // Each beside the other findings about its document: a note after the
    // error it explains.
    for finding in load::gatekeeper_findings(&repository)
        .into_iter()
        .filter(allowed)
    {
        let at = findings
            .iter()
            .rposition(|f| f.origin == finding.origin)
            .map_or(findings.len(), |i| i + 1);
        findings.insert(at, finding);
    }
    findings.extend(
        load::analysis_findings(&repository, &scopes)
            .into_iter()
            .filter(allowed),
    );
    if args.export_map {
        findings.extend(load::export_findings(&repository, &scopes));
    }
    let skipped = repository.others.len() + repository.skipped;
    let count = |severity: Severity| findings.iter().filter(|f| f.severity() == severity).count();
    let (errors, warnings, infos) = (
        count(Severity::Error),
        count(Severity::Warning),
        count(Severity::Info),
    );
    match args.output {
        LintFormat::Text => {
            for finding in &findings {
                say!(io, "{}: {finding}", finding.severity())?;
            }
            let others = match skipped {
                0 => String::new(),
                1 => " (1 other document skipped)".to_string(),
                n => format!(" ({n} other documents skipped)"),
            };
            if findings.is_empty() {
                say!(io, "{} mutators, no problems{others}", system.len())?;
            } else if errors == 0 {
                let mut counts = Vec::new();
                for (n, one, many) in [(warnings, "warning", "warnings"), (infos, "note", "notes")]
                {
                    match n {
                        0 => {}
                        1 => counts.push(format!("1 {one}")),
                        n => counts.push(format!("{n} {many}")),
                    }
                }
                say!(
                    io,
                    "{} mutators, no errors, {}{others}",
                    system.len(),
                    counts.join(", ")
                )?;
            }
        }
        LintFormat::Json => {
            let report = json!({
                "mutators": system.len(),
                "skipped": skipped,
                "errors": errors,
                "warnings": warnings,
                "findings": with_lines(&findings),
            });
            io.print_line(&serde_json::to_string_pretty(&report)?)?;
        }
    }
    Ok(if errors > 0 || (args.strict && warnings > 0) {
        Exit::InvalidInput
    } else {
        Exit::Ok
    })
}
