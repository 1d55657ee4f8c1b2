//! `sartor mutate`: apply the mutators to objects read from files, as the
//! webhook would, and print the results in input order.

// Everything goes through the `Io` given: a test reads what a user would see.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::collections::{HashMap, HashSet};

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use sartor_api::{Document, Input};
use sartor_engine::{
    Admission, ExpandFailure, Expander, Failure, Generated, Gvk, MatchError, MutateError, Mutation,
    ObjectRef, Operation, Placement, Scopes, Source,
};
use serde_json::{Value, json};

use crate::external::External;
use crate::io::say;
use crate::load::{self, namespace_name};
use crate::{Exit, Io};

mod suite;
#[cfg(test)]
mod tests;

/// Apply mutators to Kubernetes objects and print the results.
///
/// Objects are read from files, directories (recursively: *.yaml, *.yml,
/// *.json) or `-` for stdin (the default when no PATH is given), and printed in
/// input order. Whether an object is namespaced comes from its kind, as the
/// API server would say (built-in kinds, the CRDs among the inputs,
/// --api-resources); a namespaced object without `metadata.namespace` is
/// mutated in the namespace of -n (`default`, as kubectl), which
/// `--explain` says.
///
/// The inputs may be a whole repository (or the output of `kustomize build`
/// or `helm template`): a document whose apiVersion is in a mutation group
/// (`mutations.sartor.dev`, `mutations.gatekeeper.sh`) is a mutator, used
/// and not printed; an `expansion.gatekeeper.sh` ExpansionTemplate is used
/// by --expand and not printed; kustomize's files are skipped, and so are
/// documents found in a directory that are not Kubernetes objects (with a
/// warning naming the file; an error under --strict, and always in a file
/// named on the command line or on stdin); every other document is an object.
/// Namespaces among the inputs serve namespaceSelectors and are objects too.
/// Objects sartor never mutates (any `*.sartor.dev` group, Gatekeeper's
/// policy groups, webhook and admission policy configurations) are printed
/// unchanged, as the webhook leaves them.
#[derive(Debug, Args)]
pub struct MutateArgs {
    /// A mutator file or directory (sartor's or Gatekeeper's apiVersions),
    /// in which every document must be a mutator or an ExpansionTemplate
    /// (kustomize's files are skipped); repeat the flag for more. Optional
    /// when the inputs hold the mutators.
    #[arg(long = "mutators", short = 'm', value_name = "PATH", action = clap::ArgAction::Append)]
    mutators: Vec<String>,
    /// A file or directory of Namespace objects, for namespaceSelector;
    /// repeat the flag for more. Namespaces among the inputs count too.
    #[arg(long = "namespaces", value_name = "PATH", action = clap::ArgAction::Append)]
    namespaces: Vec<String>,
    /// The namespace of namespaced objects without `metadata.namespace`, as
    /// `kubectl apply -n` gives it (or kustomize's `namespace:`, an Argo CD
    /// or Flux destination); matched by `namespaces`, `excludedNamespaces`
    /// and `namespaceSelector` (give its Namespace object for the last).
    #[arg(long, short = 'n', value_name = "NAMESPACE", default_value = "default")]
    namespace: String,
    /// The output of `kubectl api-resources` (with or without `-o wide`) for
    /// the cluster the objects go to: the scope of kinds that are neither
    /// built in nor defined by a CRD among the inputs; repeat for more.
    #[arg(long = "api-resources", value_name = "FILE", action = clap::ArgAction::Append)]
    api_resources: Vec<String>,
    /// The admission operation to mutate for.
    #[arg(long, value_enum, default_value_t = Operation::Create)]
    operation: Operation,
    /// Output format: `yaml`, `json` (one object, or a `List`), or `suite`:
    /// a `sartor test` suite with one case per input object (the object, and
    /// what it became or the error it met), naming the mutators by the paths
    /// given here, to keep what the preview shows as a test.
    #[arg(long, short = 'o', value_enum, default_value_t = Format::Yaml)]
    output: Format,
    /// Instead of the objects, print a unified diff of each object (as YAML)
    /// before and after mutation; coloured when stdout is a terminal.
    #[arg(long, conflicts_with = "explain")]
    diff: bool,
    /// Instead of the objects, print per object which mutator changed which
    /// path in which pass.
    #[arg(long)]
    explain: bool,
    /// Also print what each object generates, as Gatekeeper's expansion does
    /// (a Deployment's Pod, a CronJob's Job and its Pod), right after it,
    /// mutated as `source: Generated`. Templates are the built-in ones and
    /// the ExpansionTemplates among the inputs and --mutators.
    #[arg(long)]
    expand: bool,
    /// With --expand, use only the ExpansionTemplates given, not the
    /// built-in ones (Deployment, ReplicaSet, StatefulSet, DaemonSet, Job,
    /// ReplicationController -> Pod; CronJob -> Job).
    #[arg(long, requires = "expand")]
    no_builtin_templates: bool,
    /// Exit 1 when any object would change (like `git diff --exit-code`), so
    /// CI can fail a repository whose objects are not already mutated; 0 when
    /// every object is unchanged. Generated objects (--expand) are not in the
    /// repository and do not count.
    #[arg(long)]
    exit_code: bool,
    /// Recorded answers of external data providers (a YAML file mapping
    /// each Provider's name to its ProviderResponse; see docs/cli.md);
    /// repeat the flag for more. A key the mutators ask for that is not
    /// recorded is an error: sartor calls no provider unless --call-providers.
    #[arg(long = "provider-answers", value_name = "FILE", action = clap::ArgAction::Append)]
    provider_answers: Vec<String>,
    /// Call the external data providers (the Provider objects among the
    /// mutators) over the network instead of reading recorded answers; no
    /// client certificate is presented.
    #[arg(long, conflicts_with = "provider_answers")]
    call_providers: bool,
    /// The requesting user's name, the key of externalData with
    /// `dataSource: Username`.
    #[arg(long, value_name = "NAME", default_value = "")]
    username: String,
    /// A document found in a directory that is not a Kubernetes object (no
    /// apiVersion or kind, not a mapping) is an error (exit 2) rather than
    /// skipped with a warning. In a file named on the command line, or on
    /// stdin, it is always an error.
    #[arg(long)]
    strict: bool,
    /// Objects to mutate: files, directories, or `-` for stdin.
    #[arg(value_name = "PATH")]
    inputs: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Yaml,
    Json,
    Suite,
}

/// Objects held from the first read of the inputs; a larger input is read a
/// second time, object by object, so that memory stays bounded (10,000
/// three-container Pods parsed take about 55 MB).
const OBJECTS_KEPT: usize = 10_000;

/// Runs `sartor mutate`: the objects (or `--explain`, `--diff`) on
/// `io.out`, problems on `io.err`; an input `-` (the default) is read from
/// `io.stdin`.
///
/// # Errors
/// Only for output that cannot be written or serialized, or standard
/// input that cannot be read.
pub fn run(args: &MutateArgs, io: &mut Io<'_>) -> anyhow::Result<Exit> {
    if let Some(problem) = invalid_namespace(&args.namespace) {
        say!(io, "error: -n/--namespace: {problem}")?;
        return Ok(Exit::InvalidInput);
    }
    let inputs: Vec<Input> = if args.inputs.is_empty() {
        vec![Input::Stdin]
    } else {
        args.inputs.iter().map(|p| Input::from_arg(p)).collect()
    };
    // Standard input is read once and kept: the inputs are read twice, for
    // the mutators, then object by object (memory does not grow with them).
    let mut stdin = String::new();
    let explicit_stdin = args
        .mutators
        .iter()
        .any(|m| Input::from_arg(m) == Input::Stdin);
    if explicit_stdin || inputs.contains(&Input::Stdin) {
        std::io::Read::read_to_string(io.stdin, &mut stdin).context("reading standard input")?;
    }
    let repository =
        load::repository_with(&args.mutators, &inputs, &mut stdin.as_bytes(), OBJECTS_KEPT);
    let (mut namespaces, namespace_errors) = load::namespaces_with(&args.namespaces, io.stdin);
    let mut invalid = false;
    for error in repository
        .findings
        .iter()
        .chain(&repository.not_object_findings(args.strict))
        .map(ToString::to_string)
        .chain(namespace_errors)
    {
        say!(io, "error: {error}")?;
        invalid = true;
    }
    if !args.strict {
        for note in repository.skipped_notes() {
            say!(io, "warning: {note} (--strict makes it an error)")?;
        }
    }
    if invalid {
        return Ok(Exit::InvalidInput);
    }
    if args.mutators.is_empty() && repository.found == 0 {
        say!(
            io,
            "error: no mutators: give --mutators, or include mutator documents \
             (apiVersion mutations.sartor.dev/v1 or mutations.gatekeeper.sh/...) among the inputs"
        )?;
        return Ok(Exit::InvalidInput);
    }
    let suite = if args.output == Format::Suite {
        match suite::Suite::new(args, &repository, &namespaces) {
            Ok(suite) => Some(suite),
            Err(message) => {
                say!(io, "error: {message}")?;
                return Ok(Exit::InvalidInput);
            }
        }
    } else {
        None
    };
    let expander = if args.expand {
        match repository.expander(!args.no_builtin_templates) {
            Ok(expander) => Some(expander),
            Err(finding) => {
                say!(io, "error: {finding}")?;
                return Ok(Exit::InvalidInput);
            }
        }
    } else {
        None
    };
    let (scopes, unreadable) = repository.scopes(&args.api_resources);
    if !unreadable.is_empty() {
        for finding in unreadable {
            say!(io, "error: {finding}")?;
        }
        return Ok(Exit::InvalidInput);
    }
    let system = repository.system;
    let documents = repository.others;
    for document in &documents {
        if let Some(name) = namespace_name(&document.value) {
            namespaces
                .entry(name.to_string())
                .or_insert_with(|| document.value.clone());
        }
    }
    let external = if args.call_providers {
        External::network(&repository.providers)
    } else {
        External::recorded(&args.provider_answers)
    };
    let external = match external {
        Ok(external) => external,
        Err(message) => {
            say!(io, "error: {message}")?;
            return Ok(Exit::InvalidInput);
        }
    };
    let offline = Offline {
        operation: args.operation,
        scopes: &scopes,
        namespace: &args.namespace,
        namespaces: &namespaces,
        external: &external,
        username: &args.username,
    };
    let mut run = Objects {
        args,
        system: &system,
        expander: expander.as_ref(),
        offline: &offline,
        printer: Printer::new(args, io, suite),
        outcome: Exit::Ok,
        identities: HashMap::new(),
        unknown: HashSet::new(),
        failure: None,
    };
    let mut each = |document: &Document| {
        if run.failure.is_none()
            && let Err(error) = run.object(document)
        {
            run.failure = Some(error);
        }
    };
    if repository.objects_kept {
        documents.iter().for_each(&mut each);
    } else {
        // As in the first read: `--mutators -` took standard input.
        let objects_stdin = if explicit_stdin { "" } else { stdin.as_str() };
        load::visit_objects(
            &repository.explicit_origins,
            &inputs,
            &mut objects_stdin.as_bytes(),
            &mut |document| each(&document),
        );
    }
    if let Some(error) = run.failure {
        return Err(error);
    }
    run.printer.finish()?;
    Ok(run.outcome)
}

/// The objects of one `sartor mutate`, mutated and printed one at a time.
struct Objects<'a, 'p> {
    args: &'a MutateArgs,
    system: &'a sartor_engine::System,
    expander: Option<&'a Expander>,
    offline: &'a Offline<'a>,
    printer: Printer<'p>,
    outcome: Exit,
    /// `Kind namespace/name` of each object so far, with where it was read.
    identities: HashMap<String, String>,
    /// The kinds of unknown scope warned about.
    unknown: HashSet<Gvk>,
    /// The first output error, which stops the run.
    failure: Option<anyhow::Error>,
}

impl Objects<'_, '_> {
    /// Mutates and prints `document` (and what it generates, with --expand).
    ///
    /// # Errors
    /// Output that cannot be written or serialized.
    fn object(&mut self, document: &Document) -> anyhow::Result<()> {
        let (args, system, offline) = (self.args, self.system, self.offline);
        // One object twice is usually a kustomize patch read as a file. Its
        // identity takes the namespace it is mutated in (-n when assumed).
        let placement = offline.scopes.place(&document.value, offline.namespace);
        let identity = ObjectRef::admitted(
            &document.value,
            &Admission::new(&document.value).namespace(placement.namespace()),
        )
        .to_string();
        match self.identities.get(&identity) {
            Some(first) => say!(
                self.printer,
                "warning: {}: {identity} is also at {first} (a kustomize patch? preview the \
                 built overlay: kustomize build DIR | sartor mutate)",
                document.origin
            )?,
            None => {
                self.identities
                    .insert(identity, document.origin.to_string());
            }
        }
        let mutated = mutate_one(system, document, offline);
        if let Ok((_, mutation)) = &mutated
            && mutation.protected.is_none()
        {
            self.warn_unknown_scope(document, placement)?;
        }
        let printer = &mut self.printer;
        let failure = match mutated {
            Ok((object, mutation)) => {
                if args.exit_code && object != document.value && self.outcome == Exit::Ok {
                    self.outcome = Exit::Changed;
                }
                if args.explain {
                    let mut explanation = String::new();
                    explain(&mut explanation, document, &object, &mutation, placement);
                    printer.text(&explanation)?;
                }
                if args.diff {
                    printer.diff(&diff(document, &object)?)?;
                }
                let generated = match self.expander {
                    Some(expander) => expand_one(expander, system, document, &object, offline),
                    None => Ok(Vec::new()),
                };
                printer.object(object)?;
                match generated {
                    Ok(generated) => {
                        for g in generated {
                            let label = format!(
                                "{} > {} (generated by {})",
                                document.origin,
                                describe(&g.object),
                                g.template
                            );
                            if args.explain {
                                let mut explanation = String::new();
                                explain_as(&mut explanation, &label, None, &g.outcome);
                                printer.text(&explanation)?;
                            }
                            if args.diff {
                                printer.diff(&yaml_diff(
                                    (&label, &g.original),
                                    (&format!("{label} (mutated)"), &g.object),
                                )?)?;
                            }
                            printer.object(g.object)?;
                        }
                        None
                    }
                    Err(message) => {
                        say!(printer, "error: {message}")?;
                        self.outcome = Exit::MutationFailed;
                        Some(message)
                    }
                }
            }
            Err(message) => {
                say!(printer, "error: {message}")?;
                self.outcome = Exit::MutationFailed;
                Some(message)
            }
        };
        printer.case(document, failure.as_deref())?;
        Ok(())
    }

    /// Warns, once per kind, of an object mutated as cluster-scoped only
    /// because nothing says whether its kind is namespaced.
    ///
    /// # Errors
    /// The warning cannot be written.
    fn warn_unknown_scope(
        &mut self,
        document: &Document,
        placement: Placement<'_>,
    ) -> anyhow::Result<()> {
        if placement == Placement::Unknown {
            let gvk = Gvk::of(&document.value);
            if self.unknown.insert(Gvk {
                version: String::new(),
                ..gvk.clone()
            }) {
                say!(
                    self.printer,
                    "warning: {}: the scope of kind {} is unknown (not built in, no CRD among the \
                     inputs, not in --api-resources): objects of it without metadata.namespace are \
                     mutated as cluster-scoped",
                    document.origin,
                    if gvk.group.is_empty() {
                        gvk.kind.clone()
                    } else {
                        format!("{}.{}", gvk.kind, gvk.group)
                    }
                )?;
            }
        }
        Ok(())
    }
}

/// Where the results go, as they are ready: YAML objects, explanations and
/// diffs are written at once (nothing is held, so memory does not grow with
/// the output); JSON objects are held for the one `List` they print as.
/// Problems go to `err` at once, unbuffered as stderr is.
struct Printer<'p> {
    /// What is printed: objects (in `format`), or the text of --explain/--diff.
    objects: Option<Format>,
    out: std::io::BufWriter<&'p mut dyn std::io::Write>,
    err: &'p mut dyn std::io::Write,
    /// Whether diffs are coloured ([`Io::colour`]).
    colour: bool,
    /// YAML objects written so far (for the `---` between them).
    written: usize,
    /// JSON objects waiting for the end.
    held: Vec<Value>,
    /// With `-o suite`, the suite being written.
    suite: Option<suite::Suite>,
}

impl<'p> Printer<'p> {
    fn new(args: &MutateArgs, io: &'p mut Io<'_>, suite: Option<suite::Suite>) -> Printer<'p> {
        Printer {
            objects: (!args.explain && !args.diff).then_some(args.output),
            out: std::io::BufWriter::new(&mut *io.out),
            err: &mut *io.err,
            colour: io.colour,
            written: 0,
            held: Vec::new(),
            suite,
        }
    }

    /// A mutated (or generated) object.
    fn object(&mut self, object: Value) -> anyhow::Result<()> {
        use std::io::Write as _;
        match self.objects {
            None => Ok(()),
            Some(Format::Json) => {
                self.held.push(object);
                Ok(())
            }
            Some(Format::Suite) => {
                if let Some(suite) = &mut self.suite {
                    suite.object(object);
                }
                Ok(())
            }
            Some(Format::Yaml) => {
                if self.written > 0 {
                    self.out.write_all(b"---\n").context("writing to stdout")?;
                }
                self.written += 1;
                let text = to_yaml(&object)?;
                self.out
                    .write_all(text.as_bytes())
                    .context("writing to stdout")
            }
        }
    }

    /// Ends the objects of `document` (with `-o suite`, its case):
    /// `failure` is the message its mutation failed with.
    ///
    /// # Errors
    /// The suite cannot take it.
    fn case(&mut self, document: &Document, failure: Option<&str>) -> anyhow::Result<()> {
        match &mut self.suite {
            Some(suite) => suite.case(document, failure).map_err(anyhow::Error::msg),
            None => Ok(()),
        }
    }

    /// Text of --explain.
    fn text(&mut self, text: &str) -> anyhow::Result<()> {
        use std::io::Write as _;
        self.out
            .write_all(text.as_bytes())
            .context("writing to stdout")
    }

    /// A diff of --diff, coloured when `colour` says so.
    fn diff(&mut self, diff: &str) -> anyhow::Result<()> {
        self.text(&colour_if(diff, self.colour))
    }

    /// A line to `err` ([`say!`]).
    fn say(&mut self, line: std::fmt::Arguments<'_>) -> anyhow::Result<()> {
        crate::io::say_to(self.err, line)
    }

    /// Prints what was held and flushes.
    fn finish(mut self) -> anyhow::Result<()> {
        use std::io::Write as _;
        if let Some(suite) = &self.suite {
            self.out
                .write_all(suite.to_yaml()?.as_bytes())
                .context("writing to stdout")?;
        }
        if self.objects == Some(Format::Json) {
            let value = match self.held.as_slice() {
                [one] => one.clone(),
                many => json!({"apiVersion": "v1", "kind": "List", "items": many}),
            };
            let mut text = serde_json::to_string_pretty(&value).context("printing JSON")?;
            text.push('\n');
            self.out
                .write_all(text.as_bytes())
                .context("writing to stdout")?;
        }
        self.out.flush().context("writing to stdout")
    }
}

/// How objects are admitted offline: what `sartor mutate` and `sartor test`
/// share.
pub(crate) struct Offline<'a> {
    /// CREATE or UPDATE.
    pub operation: Operation,
    /// Which kinds are namespaced.
    pub scopes: &'a Scopes,
    /// The namespace of namespaced objects without `metadata.namespace`.
    pub namespace: &'a str,
    /// Namespace objects by name.
    pub namespaces: &'a HashMap<String, Value>,
    /// Where external data comes from.
    pub external: &'a External,
    /// The requesting user's name (externalData's `Username`).
    pub username: &'a str,
}

/// Mutates `object` in place through the engine, asking for external data
/// when the first run says a provider must be asked, and mutating again with
/// the answers (as the webhook does).
fn admit(
    system: &sartor_engine::System,
    admission: Admission<'_>,
    object: &mut Value,
    external: &External,
) -> Result<Mutation, MutateError> {
    let first = system.mutate(&admission, object)?;
    if !first.unanswered {
        return Ok(first);
    }
    let answers = external
        .answers(&first.asks)
        .map_err(|message| MutateError {
            object: Box::new(ObjectRef::admitted(object, &admission)),
            reason: Box::new(Failure::ExternalData(message)),
        })?;
    system.mutate(&admission.answers(&answers), object)
}

/// Mutates one object as `offline` says: the result (the object itself
/// when nothing changed) and what happened, or the error message naming
/// where the object was read.
pub(crate) fn mutate_one(
    system: &sartor_engine::System,
    document: &Document,
    offline: &Offline<'_>,
) -> Result<(Value, Mutation), String> {
    let placement = offline.scopes.place(&document.value, offline.namespace);
    let admission = Admission::new(&document.value)
        .namespace(placement.namespace())
        .operation(offline.operation)
        .namespaces(offline.namespaces)
        .username(offline.username);
    let mut object = document.value.clone();
    // The API server clears a cluster-scoped object's metadata.namespace
    // before any webhook sees it: mutated without it, printed as written.
    let stray = match placement {
        Placement::Cluster => object
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .and_then(|metadata| metadata.remove("namespace")),
        _ => None,
    };
    let admitted = admit(system, admission, &mut object, offline.external);
    if let (Some(namespace), Some(metadata)) = (
        stray,
        object.get_mut("metadata").and_then(Value::as_object_mut),
    ) {
        metadata.insert("namespace".to_string(), namespace);
    }
    match admitted {
        Ok(mutation) => Ok((object, mutation)),
        Err(error) => Err(format!(
            "{}: {error}{}",
            document.origin,
            hint(&error, placement)
        )),
    }
}

/// What `mutated` (the mutated `document`) generates, each resource mutated
/// as `source: Generated` in the parent's namespace (assumed or not),
/// admitted by no operation (as Gatekeeper's expansion mutates it).
pub(crate) fn expand_one(
    expander: &Expander,
    system: &sartor_engine::System,
    document: &Document,
    mutated: &Value,
    offline: &Offline<'_>,
) -> Result<Vec<Generated<Mutation>>, String> {
    let placement = offline.scopes.place(mutated, offline.namespace);
    let namespace = placement.namespace().map(str::to_string);
    let mut mutate = |generated: &mut Value| {
        let admission = Admission::new(generated)
            .without_operation()
            .source(Source::Generated)
            .namespace(namespace.as_deref())
            .namespaces(offline.namespaces)
            .username(offline.username);
        admit(system, admission, generated, offline.external)
    };
    let mut generated = expander
        .expand(mutated, namespace.as_deref(), &mut mutate)
        .map_err(|failure| match failure {
            ExpandFailure::Expand(error) => format!("{}: {error}", document.origin),
            ExpandFailure::Mutate(error) => {
                format!(
                    "{}: generated {error}{}",
                    document.origin,
                    hint(&error, placement)
                )
            }
        })?;
    // What a namespace-less manifest generates is printed without a
    // namespace too (as gator does), though it was mutated in the assumed one.
    if let Placement::Assumed(_) = placement {
        for g in &mut generated {
            for object in [&mut g.original, &mut g.object] {
                if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                    metadata.remove("namespace");
                }
            }
        }
    }
    Ok(generated)
}

/// Why `namespace` cannot name a namespace, in the API server's words
/// (`Invalid value: "Bad_NS": a lowercase RFC 1123 label must ...`).
pub(crate) fn invalid_namespace(namespace: &str) -> Option<String> {
    let errors = sartor_api::validation::dns1123_label_errors(namespace);
    (!errors.is_empty()).then(|| format!("Invalid value: {namespace:?}: {}", errors.join("; ")))
}

/// What to tell the user along with a mutation error they can fix here;
/// `placement` is where the object was mutated.
fn hint(error: &MutateError, placement: Placement<'_>) -> String {
    let Failure::Match {
        source: MatchError::NamespaceUnknown { .. } | MatchError::ValueNamespaceUnknown { .. },
        ..
    } = &*error.reason
    else {
        return String::new();
    };
    match placement {
        Placement::Assumed(namespace) => format!(
            "; the object has no metadata.namespace, so it was mutated in namespace {namespace:?} \
             (-n): pass that Namespace object with --namespaces, or give -n the namespace it is \
             deployed to"
        ),
        _ => "; pass the Namespace object with --namespaces".to_string(),
    }
}

/// `Kind namespace/name` of an object, for labels.
fn describe(object: &Value) -> String {
    ObjectRef::admitted(object, &Admission::new(object)).to_string()
}

/// Appends what happened to one object: a header naming it, where it was
/// mutated (`placement`) when that was assumed, then one line per change
/// (`pass 1  Assign pull  spec.containers[name: app].imagePullPolicy`), or
/// the one line saying why an object sartor never mutates was left.
fn explain(
    out: &mut String,
    document: &Document,
    object: &Value,
    mutation: &Mutation,
    placement: Placement<'_>,
) {
    let label = format!("{} ({})", document.origin, describe(object));
    let assumed = (mutation.protected.is_none()
        && matches!(placement, Placement::Assumed(_) | Placement::Unknown))
    .then(|| placement.to_string());
    explain_as(out, &label, assumed.as_deref(), mutation);
}

/// What `--explain` says of one object, under a label of the caller's
/// (with where the object was mutated when that was assumed): one line per
/// change, `pass 1  Assign pull  spec.containers[name: app].imagePullPolicy`.
pub fn explain_as(out: &mut String, label: &str, placement: Option<&str>, mutation: &Mutation) {
    use std::fmt::Write as _;
    let _ = writeln!(out, "{label}:");
    if let Some(placement) = placement {
        let _ = writeln!(out, "  mutated {placement}");
    }
    if let Some(protection) = mutation.protected {
        let _ = writeln!(out, "  not mutated: {protection}");
    } else if mutation.changes.is_empty() {
        out.push_str("  no changes\n");
    }
    for change in &mutation.changes {
        let _ = writeln!(
            out,
            "  pass {}  {}  {}",
            change.pass,
            change.mutator(),
            change.path()
        );
    }
}

/// A unified diff of one object's YAML before and after; empty when unchanged.
fn diff(document: &Document, after: &Value) -> anyhow::Result<String> {
    let origin = document.origin.to_string();
    yaml_diff(
        (&origin, &document.value),
        (&format!("{origin} (mutated)"), after),
    )
}

/// `value` as YAML that YAML 1.1 readers such as kubectl read back as
/// written: strings like `yes`, `on` or `n`, which a YAML 1.1 reader takes
/// for booleans, are quoted.
pub fn to_yaml(value: &Value) -> anyhow::Result<String> {
    serde_saphyr::to_string(value).context("printing YAML")
}

/// A unified diff of two values printed as YAML, each with its header label;
/// empty when they print the same.
pub fn yaml_diff(before: (&str, &Value), after: (&str, &Value)) -> anyhow::Result<String> {
    let old = to_yaml(before.1)?;
    let new = to_yaml(after.1)?;
    if old == new {
        return Ok(String::new());
    }
    Ok(similar::TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(3)
        .header(before.0, after.0)
        .to_string())
}

/// Colours a unified diff for a terminal: removals red, additions green,
/// hunk headers cyan. Left as it is when stdout is not a terminal.
pub fn colour(diff: &str) -> String {
    use std::io::IsTerminal as _;
    colour_if(diff, std::io::stdout().is_terminal())
}

/// [`colour`] when `colour` is true (an [`Io`] writing to a terminal),
/// else `diff` as it is.
pub(crate) fn colour_if(diff: &str, colour: bool) -> String {
    if !colour {
        return diff.to_string();
    }
    diff.lines()
        .map(|line| {
            let code = if line.starts_with("+++") || line.starts_with("---") {
                "1"
            } else if line.starts_with('+') {
                "32"
            } else if line.starts_with('-') {
                "31"
            } else if line.starts_with("@@") {
                "36"
            } else {
                return format!("{line}\n");
            };
            format!("\x1b[{code}m{line}\x1b[0m\n")
        })
        .collect()
}
