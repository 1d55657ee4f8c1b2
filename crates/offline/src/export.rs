//! `sartor export map`: the mutators as a Kubernetes
//! MutatingAdmissionPolicy and its binding, for clusters that want no
//! webhook. What cannot be exported with exactly sartor's semantics is left
//! out, one line each on stderr with the reason.

// Everything goes through the `Io` given: a test reads what a user would see.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::collections::HashMap;

use clap::{Args, Subcommand, ValueEnum};
use sartor_api::{Exclusions, Input, MutatorObject, Origin, Wildcard};
use sartor_engine::{MutatorId, Scopes, System};
use sartor_export::{FailurePolicy, Options, WEBHOOK_CONDITION, WebhookCondition};
use serde_json::Value;

use crate::io::say;
use crate::load::{self, Category};
use crate::mutate::to_yaml;
use crate::{Exit, Io};

/// `sartor export`'s targets.
#[derive(Debug, Subcommand)]
pub enum ExportCommand {
    /// MutatingAdmissionPolicy (admissionregistration.k8s.io/v1, Kubernetes
    /// 1.36+) and its binding, as YAML on stdout, for `kubectl apply
    /// --server-side -f -` (a client-side apply copies the policy into an
    /// annotation, which may hold 256 KiB).
    /// Exit 0: every mutator exported; 1: some were left out (each named on
    /// stderr with the reason; the policy holds the others); 2: invalid
    /// input, or no mutators among it.
    Map(MapArgs),
    /// The match condition `sartor serve` keeps on its mutating webhook
    /// (sartor-may-change, --webhook-match-condition derived) for these
    /// mutators, as a YAML `matchConditions` entry on stdout; on stderr, how
    /// each mutator is decided in it. The API server calls sartor only when
    /// it holds: when some mutator matches the request and would change the
    /// object. Exit 0: written (or none needed: every object is sent);
    /// 2: invalid input, or no mutators among it.
    Condition(ConditionArgs),
}

/// `sartor export condition`'s flags.
#[derive(Debug, Args)]
pub struct ConditionArgs {
    /// Mutator files or directories (sartor's or Gatekeeper's apiVersions);
    /// other documents are skipped.
    #[arg(value_name = "PATH", required_unless_present = "mutators")]
    paths: Vec<String>,
    /// The same as a PATH; repeat the flag for more.
    #[arg(long = "mutators", short = 'm', value_name = "PATH", action = clap::ArgAction::Append)]
    mutators: Vec<String>,
}

/// `sartor export map`'s flags.
#[derive(Debug, Args)]
pub struct MapArgs {
    /// Mutator files or directories (sartor's or Gatekeeper's apiVersions);
    /// other documents are skipped.
    #[arg(value_name = "PATH", required_unless_present = "mutators")]
    paths: Vec<String>,
    /// The same as a PATH, as `sartor lint`, `mutate` and `audit` take
    /// their mutators; repeat the flag for more.
    #[arg(long = "mutators", short = 'm', value_name = "PATH", action = clap::ArgAction::Append)]
    mutators: Vec<String>,
    /// The policy's and the binding's name.
    #[arg(long, default_value = "sartor")]
    name: String,
    /// The namespace a sartor install runs in, left out as its webhook
    /// leaves it out.
    #[arg(long = "sartor-namespace", default_value = "sartor-system")]
    sartor_namespace: String,
    /// A namespace left out (a name, or a glob with `*` at the start and/or
    /// end), as `sartor serve --exclude-namespace`; repeat for more.
    #[arg(long = "exclude-namespace", value_name = "NAME", default_value = "kube-system", action = clap::ArgAction::Append)]
    exclude_namespaces: Vec<Wildcard>,
    /// What the API server does when a mutation fails: `Ignore` admits the
    /// object unmutated, as sartor's webhook does.
    #[arg(long = "failure-policy", value_enum, default_value_t = Failure::Ignore)]
    failure_policy: Failure,
    /// The output of `kubectl api-resources` for the cluster the policy
    /// goes to: the resources (plurals) of kinds that are not built in,
    /// beside the CRDs among the PATHs; repeat for more.
    #[arg(long = "api-resources", value_name = "FILE", action = clap::ArgAction::Append)]
    api_resources: Vec<String>,
}

/// `--failure-policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Failure {
    #[value(name = "Ignore")]
    Ignore,
    #[value(name = "Fail")]
    Fail,
}

/// Mutators read to be written as other objects, and the resources their
/// kinds are served as.
pub struct MutatorsAndResources {
    /// The mutators that compiled.
    pub system: System,
    /// Each mutator's object as read.
    pub specs: HashMap<MutatorId, MutatorObject>,
    /// Where each mutator was read.
    pub origins: HashMap<MutatorId, Origin>,
    /// The built-in kinds, those of the `--api-resources` files and of the
    /// CRDs among the paths, with their resources (plurals).
    pub resources: Scopes,
}

/// Reads the mutators of `paths` (files or directories; other documents
/// are skipped) and the `kubectl api-resources` output of `api_resources`,
/// for `sartor export map` and `sartor audit rbac`: `None`, with every
/// problem said on `io.err`, when an input cannot be read, a mutator does
/// not compile, or there is no mutator.
///
/// # Errors
/// `io.err` cannot be written.
pub fn read_mutators(
    paths: &[String],
    api_resources: &[String],
    io: &mut Io<'_>,
) -> anyhow::Result<Option<MutatorsAndResources>> {
    let inputs: Vec<Input> = paths.iter().map(|p| Input::from_arg(p)).collect();
    let repository = load::repository(&[], &inputs);
    let invalid: Vec<&load::Finding> = repository
        .findings
        .iter()
        .filter(|f| matches!(f.category, Category::Load | Category::Compile))
        .collect();
    if !invalid.is_empty() {
        for finding in invalid {
            say!(io, "error: {finding}")?;
        }
        return Ok(None);
    }
    // A replica enforces none of the mutators in a schema conflict; the
    // export leaves them out the same way, and says so.
    for finding in repository
        .findings
        .iter()
        .filter(|f| f.category == Category::Conflict)
    {
        say!(io, "warning: {finding} (not enforced, so left out)")?;
    }
    if repository.system.is_empty() {
        say!(
            io,
            "error: no mutators in {} (documents whose apiVersion is mutations.sartor.dev or mutations.gatekeeper.sh)",
            paths.join(", ")
        )?;
        return Ok(None);
    }
    let (resources, unreadable) = repository.scopes(api_resources);
    if !unreadable.is_empty() {
        for finding in unreadable {
            say!(io, "error: {finding}")?;
        }
        return Ok(None);
    }
    Ok(Some(MutatorsAndResources {
        system: repository.system,
        specs: repository.specs,
        origins: repository.origins,
        resources,
    }))
}

/// Runs `sartor export`: the objects on `io.out`, what was refused and the
/// count on `io.err`.
///
/// # Errors
/// The YAML could not be printed.
pub fn run(command: &ExportCommand, io: &mut Io<'_>) -> anyhow::Result<Exit> {
    let args = match command {
        ExportCommand::Map(args) => args,
        ExportCommand::Condition(args) => return condition(args, io),
    };
    let Some(MutatorsAndResources {
        system,
        specs,
        resources,
        ..
    }) = read_mutators(
        &[args.mutators.as_slice(), args.paths.as_slice()].concat(),
        &args.api_resources,
        io,
    )?
    else {
        return Ok(Exit::InvalidInput);
    };
    let options = Options {
        name: args.name.clone(),
        exclusions: Exclusions::new(&args.sartor_namespace, args.exclude_namespaces.clone()),
        failure_policy: match args.failure_policy {
            Failure::Ignore => FailurePolicy::Ignore,
            Failure::Fail => FailurePolicy::Fail,
        },
        resources,
    };
    let export = sartor_export::map(&system, &specs, &options);
    let documents: Vec<String> = export
        .objects
        .iter()
        .map(|object: &Value| to_yaml(object))
        .collect::<anyhow::Result<_>>()?;
    io.print(&documents.join("---\n"))?;
    for refusal in &export.refused {
        say!(io, "{refusal}")?;
    }
    say!(
        io,
        "{} of {} mutators exported",
        export.exported.len(),
        export.exported.len() + export.refused.len()
    )?;
    Ok(match export.refused.is_empty() {
        true => Exit::Ok,
        false => Exit::MutationFailed,
    })
}

/// `sartor export condition`.
fn condition(args: &ConditionArgs, io: &mut Io<'_>) -> anyhow::Result<Exit> {
    let Some(MutatorsAndResources { system, .. }) = read_mutators(
        &[args.mutators.as_slice(), args.paths.as_slice()].concat(),
        &[],
        io,
    )?
    else {
        return Ok(Exit::InvalidInput);
    };
    let condition = WebhookCondition::of(&system);
    match (&condition.expression, condition.withheld()) {
        (Some(expression), _) => io.print_line(
            to_yaml(&serde_json::json!([{
                "name": WEBHOOK_CONDITION,
                "expression": expression,
            }]))?
            .trim_end(),
        )?,
        (None, Some(why)) => say!(io, "no condition: {why}")?,
        (None, None) => {}
    }
    for line in condition.explained() {
        say!(io, "{line}")?;
    }
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests;
