//! `sartor audit`: the objects already in a cluster that the mutators would
//! change on their next write; read-only unless `--fix` is given. The
//! mutators come from the cluster, or from files (`--mutators`) to try a set
//! against a live cluster before it is applied.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::ops::ControlFlow;

use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};
use futures::StreamExt as _;
use kube::Client;
use sartor_api::{Exclusions, Input, Wildcard, load_mutators};
use sartor_controller::audit::{
    self, Audited, Forbidden, Keep, Outcome, Repairer, ScanOf, Stored, Summary,
};
use sartor_engine::{Operation, System, compile};
use sartor_offline::stdout::{print, print_line};
use sartor_offline::{
    CaseResult, Exit, SuiteResult, colour, explain_as, junit, to_yaml, yaml_diff,
};
use serde_json::{Map, Value, json};

mod rbac;

/// List the objects in a cluster that the mutators would change on their
/// next write (objects stored before a mutator existed), without changing
/// anything. Cluster access as kubectl's: $KUBECONFIG or ~/.kube/config,
/// or the in-cluster service account.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AuditArgs {
    #[command(subcommand)]
    command: Option<AuditCommand>,
    /// Mutator files or directories to audit with, instead of the cluster's
    /// mutators (try a set against the cluster before applying it); repeat
    /// the flag for more.
    #[arg(long = "mutators", short = 'm', value_name = "PATH", action = clap::ArgAction::Append)]
    mutators: Vec<String>,
    /// Only this namespace's objects (cluster-scoped kinds are then left out).
    #[arg(long, short = 'n', value_name = "NAMESPACE")]
    namespace: Option<String>,
    /// The namespace sartor runs in: its objects are left out, as the
    /// webhook never mutates them (`sartor serve --namespace`).
    #[arg(long, value_name = "NAME", default_value = "sartor-system")]
    sartor_namespace: String,
    /// A namespace whose objects the webhook never mutates, left out (names
    /// or globs, as `sartor serve --exclude-namespace`); namespaces labelled
    /// admission.sartor.dev/ignore are left out too. Repeat the flag for more.
    #[arg(long = "exclude-namespace", value_name = "NAME", default_value = "kube-system", action = clap::ArgAction::Append)]
    exclude_namespaces: Vec<Wildcard>,
    /// The kubeconfig context to use (default: the current one).
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
    /// With the cluster's mutators: Gatekeeper's (`mutations.gatekeeper.sh`)
    /// too, as `sartor serve --gatekeeper-compat` enforces them.
    #[arg(long)]
    gatekeeper_compat: bool,
    /// The write to audit for: an UPDATE, as the next write to a stored
    /// object is (or CREATE, as if each were created again).
    #[arg(long, value_enum, default_value_t = Operation::Update)]
    operation: Operation,
    /// `text`: one line per object on stdout, the summary on stderr; `json`
    /// or `yaml`: one document with every object and the summary; `junit`:
    /// JUnit XML for CI test reporters, a test suite per kind listed and a
    /// failing test case per object that would change or cannot be mutated.
    #[arg(long, short = 'o', value_enum, default_value_t = AuditFormat::Text)]
    output: AuditFormat,
    /// After each object's line, a unified diff of it as stored and as the
    /// webhook would store it (text output).
    #[arg(long, conflicts_with_all = ["output", "explain"])]
    diff: bool,
    /// After each object's line, which mutator changed which path in which
    /// pass, as `sartor mutate --explain` says it (text output).
    #[arg(long, conflicts_with = "output")]
    explain: bool,
    /// Exit 1 when any object would change, to fail a check.
    #[arg(long)]
    exit_code: bool,
    /// Repair each object listed, after the scan: read it again, mutate it,
    /// try the patch with a server-side dry run, then send it with the
    /// object's resourceVersion as a precondition (another writer in
    /// between is never overwritten; the repair is retried once from a fresh
    /// read). A Pod a workload owns is not patched: its owner is named.
    /// Needs `get` and `patch` on the kinds listed. Exit 1 when an object
    /// could not be repaired.
    #[arg(long, conflicts_with_all = ["output", "diff", "explain"])]
    fix: bool,
}

/// What `sartor audit` does instead of a scan.
#[derive(Debug, Subcommand)]
enum AuditCommand {
    Rbac(rbac::RbacArgs),
}

/// How `sartor audit` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuditFormat {
    /// Lines for people.
    Text,
    /// One JSON document for tools.
    Json,
    /// The same document as YAML.
    Yaml,
    /// JUnit XML.
    Junit,
}

/// Runs `sartor audit`.
///
/// # Errors
/// No cluster configured, unusable mutator files, or a list the API server
/// refused.
pub fn run(args: &AuditArgs) -> anyhow::Result<Exit> {
    if let Some(AuditCommand::Rbac(rbac)) = &args.command {
        return rbac::run(rbac);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(audit_cluster(args))
}

async fn audit_cluster(args: &AuditArgs) -> anyhow::Result<Exit> {
    // Files are checked before the cluster is reached: bad input first.
    let from_files = if args.mutators.is_empty() {
        None
    } else {
        match mutator_files(&args.mutators) {
            Some(system) => Some(system),
            None => return Ok(Exit::InvalidInput),
        }
    };
    let client = sartor_controller::client(args.context.as_deref()).await?;
    let system = match from_files {
        Some(system) => system,
        None => {
            let snapshot = audit::mutators_in_cluster(&client, args.gatekeeper_compat).await?;
            for id in &snapshot.errors {
                eprintln!("warning: {id} does not compile; left out, as the webhook leaves it out");
            }
            snapshot.system
        }
    };
    // JSON keeps each object's entry only, never the object: one page of
    // objects is held at a time, whatever the scan's size.
    let (mut changes, mut errors) = (Vec::new(), Vec::new());
    // -o junit: each kind's failing cases (the object's line, no object).
    let mut cases: BTreeMap<String, Vec<CaseResult>> = BTreeMap::new();
    // With --fix, where each object to repair is: the repair reads it again.
    let mut to_fix: Vec<Stored> = Vec::new();
    let progress = Progress::on_terminal();
    let exclusions = Exclusions::new(&args.sartor_namespace, args.exclude_namespaces.clone());
    let of = ScanOf {
        system: &system,
        namespace: args.namespace.as_deref(),
        exclusions: &exclusions,
        operation: args.operation,
        forbidden: Forbidden::Stops,
        keep: match args.diff && args.output == AuditFormat::Text {
            true => Keep::Before,
            false => Keep::Changes,
        },
    };
    // The first failed write to stdout (its reader gone): nothing more is
    // printed, the scan stops, and the command ends with it. With --fix the
    // scan and the repairs go on: the repairs are what was asked for.
    let mut unprinted: Option<anyhow::Error> = None;
    let summary = audit::scan(
        &client,
        &of,
        |audited| {
            if args.output == AuditFormat::Text {
                progress.clear();
                if unprinted.is_none()
                    && let Err(error) = print_audited(&audited, args.diff, args.explain)
                {
                    unprinted = Some(error);
                }
                if args.fix && matches!(audited.outcome, Outcome::Changes { .. }) {
                    to_fix.push(audited.object);
                }
            } else if args.output == AuditFormat::Junit {
                cases
                    .entry(audited.object.resource.label())
                    .or_default()
                    .push(case(&audited));
            } else {
                match entry(&audited) {
                    Ok(change) => changes.push(change),
                    Err(error) => errors.push(error),
                }
            }
            match unprinted.is_some() && !args.fix {
                true => ControlFlow::Break(()),
                false => ControlFlow::Continue(()),
            }
        },
        |kind, scanned| progress.show(kind, scanned),
    )
    .await?;
    progress.clear();
    if args.fix {
        let fixed = fix(&client, &system, args.operation, to_fix, &summary).await;
        return match unprinted {
            Some(error) => Err(error),
            None => fixed,
        };
    }
    if let Some(error) = unprinted {
        return Err(error);
    }
    match args.output {
        AuditFormat::Text => eprintln!("{}", summary_line(&summary)),
        AuditFormat::Json => {
            // Written as it is printed, never held whole as text.
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            serde_json::to_writer_pretty(&mut out, &report(changes, errors, &summary))
                .map_err(std::io::Error::from)
                .and_then(|()| writeln!(out))
                .and_then(|()| out.flush())
                .context("writing to stdout")?;
        }
        AuditFormat::Yaml => print(&to_yaml(&report(changes, errors, &summary))?)?,
        AuditFormat::Junit => print(&junit("sartor audit", &suites(cases, &summary)))?,
    }
    Ok(if summary.failed > 0 {
        Exit::MutationFailed
    } else if args.exit_code && summary.changed > 0 {
        Exit::Changed
    } else {
        Exit::Ok
    })
}

/// Repairs each of `objects` (`--fix`), several at a time, a line each in
/// the order listed: `repaired`, or why not; then the summary with what was
/// repaired.
async fn fix(
    client: &Client,
    system: &System,
    operation: Operation,
    objects: Vec<Stored>,
    summary: &Summary,
) -> anyhow::Result<Exit> {
    let repairer = Repairer::new(client, system, operation).await?;
    let mut repaired = 0;
    let listed = objects.len();
    // The repairs asked for are all made, even when stdout's reader is gone
    // (that error is the command's after them): a repair under way is never
    // left half known.
    let mut unprinted: Option<anyhow::Error> = None;
    let mut outcomes = std::pin::pin!(repairer.repair_each(objects));
    while let Some((object, outcome)) = outcomes.next().await {
        if unprinted.is_none()
            && let Err(error) = print_line(&format!("{}: {outcome}", stored_name(&object)))
        {
            unprinted = Some(error);
        }
        if outcome.is_done() {
            repaired += 1;
        }
    }
    eprintln!(
        "{}; {repaired} of {} repaired",
        summary_line(summary),
        listed
    );
    if let Some(error) = unprinted {
        return Err(error);
    }
    Ok(if summary.failed > 0 || repaired < listed {
        Exit::MutationFailed
    } else {
        Exit::Ok
    })
}

/// The mutators under `paths`, or `None` when the set cannot be used
/// (every problem printed, as `sartor mutate` refuses such a set).
fn mutator_files(paths: &[String]) -> Option<System> {
    let inputs: Vec<Input> = paths.iter().map(|path| Input::from_arg(path)).collect();
    let compiled = compile(load_mutators(&inputs));
    let conflicts = compiled.conflicts();
    if compiled.errors.is_empty() && conflicts.is_empty() {
        return Some(compiled.system);
    }
    for error in &compiled.errors {
        eprintln!("error: {error}");
    }
    for (origin, id, conflict) in conflicts {
        eprintln!("error: {origin}: {id}: {conflict}");
    }
    None
}

/// A progress line on stderr while a long scan runs, when stderr is a
/// terminal (never in a pipe or a CI log); cleared before anything else is
/// printed.
struct Progress {
    on: bool,
    shown: std::cell::Cell<bool>,
}

impl Progress {
    fn on_terminal() -> Progress {
        use std::io::IsTerminal as _;
        Progress {
            on: std::io::stderr().is_terminal(),
            shown: std::cell::Cell::new(false),
        }
    }

    /// `N objects scanned (listing Kind.group/version)`, in place.
    fn show(&self, kind: &str, scanned: usize) {
        if self.on {
            eprint!("\r\x1b[K{scanned} objects scanned (listing {kind})");
            self.shown.set(true);
        }
    }

    fn clear(&self) {
        if self.shown.replace(false) {
            eprint!("\r\x1b[K");
        }
    }
}

/// `object`, with a Secret's `data` and `stringData` values replaced by
/// `(redacted)`: a diff goes to terminals and CI logs, and a mutator that
/// matches every kind lists Secrets too. A change to a value still shows,
/// as a changed key.
fn redacted(audited: &Audited, object: &Value) -> Value {
    let mut object = object.clone();
    let resource = &audited.object.resource;
    if resource.api_version == "v1" && resource.kind == "Secret" {
        for field in ["data", "stringData"] {
            if let Some(values) = object.get_mut(field).and_then(Value::as_object_mut) {
                for value in values.values_mut() {
                    *value = Value::from("(redacted)");
                }
            }
        }
    }
    object
}

/// `Kind namespace/name` (`Kind name` when cluster-scoped).
fn stored_name(object: &Stored) -> String {
    let kind = &object.resource.kind;
    match &object.namespace {
        Some(namespace) => format!("{kind} {namespace}/{}", object.name),
        None => format!("{kind} {}", object.name),
    }
}

/// [`stored_name`] of the object audited.
fn object_name(audited: &Audited) -> String {
    stored_name(&audited.object)
}

/// One object's line (and diff or explanation) on stdout, or its error on
/// stderr.
fn print_audited(audited: &Audited, diff: bool, explain: bool) -> anyhow::Result<()> {
    match &audited.outcome {
        Outcome::Changes {
            mutators,
            paths,
            before,
            after,
            mutation,
        } => {
            let mutators: Vec<String> = mutators.iter().map(ToString::to_string).collect();
            print_line(&format!(
                "{}: {} ({})",
                object_name(audited),
                mutators.join(", "),
                paths.join(", ")
            ))?;
            if explain {
                let mut text = String::new();
                explain_as(&mut text, "", None, mutation);
                // Its label line is the object's line above.
                print(text.strip_prefix(":\n").unwrap_or(&text))?;
            }
            if diff && let Some(before) = before {
                let name = object_name(audited);
                let (before, after) = (redacted(audited, before), redacted(audited, after));
                match yaml_diff((&name, &before), (&format!("{name} (mutated)"), &after)) {
                    Ok(text) => print(&colour(&text))?,
                    Err(error) => eprintln!("error: {name}: {error:#}"),
                }
            }
        }
        Outcome::Failed(reason) => {
            eprintln!(
                "error: {}: cannot be mutated: {reason}",
                object_name(audited)
            );
        }
    }
    Ok(())
}

/// `N objects scanned (each kind that has any, and how many kinds had
/// none): C would change, F cannot be mutated`.
fn summary_line(summary: &Summary) -> String {
    let mut kinds: Vec<String> = summary
        .kinds
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(kind, n)| format!("{kind} {n}"))
        .collect();
    let empty = summary.kinds.values().filter(|n| **n == 0).count();
    if empty > 0 {
        kinds.push(format!("{empty} listed kinds without objects"));
    }
    format!(
        "{} objects scanned ({}): {} would change, {} cannot be mutated",
        summary.scanned(),
        if kinds.is_empty() {
            "no kind the mutators can change is served".to_string()
        } else {
            kinds.join(", ")
        },
        summary.changed,
        summary.failed
    )
}

/// One object's entry of `-o json`: `Ok` when it would change (its
/// mutators and paths), `Err` when it cannot be mutated (why).
fn entry(audited: &Audited) -> Result<Value, Value> {
    let object = &audited.object;
    let mut entry = json!({
        "apiVersion": object.resource.api_version,
        "kind": object.resource.kind,
        "namespace": object.namespace,
        "name": object.name,
    });
    let fields = entry.as_object_mut();
    match (&audited.outcome, fields) {
        (
            Outcome::Changes {
                mutators, paths, ..
            },
            Some(fields),
        ) => {
            let mutators: Vec<String> = mutators.iter().map(ToString::to_string).collect();
            fields.insert("mutators".to_string(), json!(mutators));
            fields.insert("paths".to_string(), json!(paths));
            Ok(entry)
        }
        (Outcome::Failed(reason), Some(fields)) => {
            fields.insert("error".to_string(), json!(reason));
            Err(entry)
        }
        (Outcome::Changes { .. }, None) => Ok(entry),
        (Outcome::Failed(_), None) => Err(entry),
    }
}

/// One object's failing case of `-o junit`: named `namespace/name`, its
/// failure the object's text line (without the kind, its suite's name).
fn case(audited: &Audited) -> CaseResult {
    let object = &audited.object;
    let name = match &object.namespace {
        Some(namespace) => format!("{namespace}/{}", object.name),
        None => object.name.clone(),
    };
    let failure = match &audited.outcome {
        Outcome::Changes {
            mutators, paths, ..
        } => {
            let mutators: Vec<String> = mutators.iter().map(ToString::to_string).collect();
            format!(
                "would change: {} ({})",
                mutators.join(", "),
                paths.join(", ")
            )
        }
        Outcome::Failed(reason) => format!("cannot be mutated: {reason}"),
    };
    CaseResult {
        name,
        failure: Some(failure),
        seconds: 0.0,
    }
}

/// `-o junit`'s suites: one per kind listed, in the summary's order, a
/// kind without a case an empty suite (listed, nothing to change).
fn suites(mut cases: BTreeMap<String, Vec<CaseResult>>, summary: &Summary) -> Vec<SuiteResult> {
    summary
        .kinds
        .keys()
        .map(|kind| SuiteResult {
            file: kind.clone(),
            problems: Vec::new(),
            cases: cases.remove(kind).unwrap_or_default(),
        })
        .collect()
}

/// The JSON document of `-o json`. The entries are moved in, not copied
/// (`json!` would serialize them again: a tenth of a 10,000-object scan).
fn report(changes: Vec<Value>, errors: Vec<Value>, summary: &Summary) -> Value {
    let kinds: Map<String, Value> = summary
        .kinds
        .iter()
        .map(|(kind, n)| (kind.clone(), Value::from(*n)))
        .collect();
    let mut report = Map::new();
    report.insert("scanned".to_string(), Value::from(summary.scanned()));
    report.insert("kinds".to_string(), Value::Object(kinds));
    report.insert("changes".to_string(), Value::Array(changes));
    report.insert("errors".to_string(), Value::Array(errors));
    Value::Object(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_each_kind_and_the_counts() {
        let summary = Summary {
            kinds: [
                ("Pod.core/v1".to_string(), 3),
                ("Deployment.apps/v1".to_string(), 1),
            ]
            .into_iter()
            .collect(),
            changed: 2,
            failed: 1,
            forbidden: Vec::new(),
        };
        assert_eq!(
            summary_line(&summary),
            "4 objects scanned (Deployment.apps/v1 1, Pod.core/v1 3): 2 would change, 1 cannot be mutated"
        );
        let mut with_empty = summary.clone();
        with_empty.kinds.insert("Secret.core/v1".to_string(), 0);
        assert_eq!(
            summary_line(&with_empty),
            "4 objects scanned (Deployment.apps/v1 1, Pod.core/v1 3, 1 listed kinds without objects): 2 would change, 1 cannot be mutated"
        );
        assert_eq!(
            summary_line(&Summary::default()),
            "0 objects scanned (no kind the mutators can change is served): 0 would change, 0 cannot be mutated"
        );
    }

    #[test]
    fn a_secrets_values_never_reach_a_diff() {
        let resource = |kind: &str| {
            sartor_audit::Resource::new("", "v1", kind, &format!("{}s", kind.to_lowercase()))
        };
        let audited = Audited {
            object: Stored {
                resource: resource("Secret"),
                namespace: Some("shop".to_string()),
                name: "db".to_string(),
                uid: None,
            },
            outcome: Outcome::Failed(String::new()),
        };
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
                            "data": {"password": "aHVudGVyMg=="}, "stringData": {"user": "admin"},
                            "metadata": {"name": "db"}});
        assert_eq!(
            redacted(&audited, &secret),
            json!({"apiVersion": "v1", "kind": "Secret",
                   "data": {"password": "(redacted)"}, "stringData": {"user": "(redacted)"},
                   "metadata": {"name": "db"}})
        );
        let config = Audited {
            object: Stored {
                resource: resource("ConfigMap"),
                ..audited.object.clone()
            },
            ..audited
        };
        assert_eq!(redacted(&config, &secret), secret);
    }
}
