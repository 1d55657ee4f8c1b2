//! `sartor test`: unit tests for mutators, kept next to them in a GitOps repo.
//!
//! A suite is a YAML file named `*.sartor-test.yaml`:
//!
//! ```yaml
//! mutators: [../mutators]              # files or directories, relative to this file
//! namespaces: [../objects/namespace.yaml]  # optional: Namespace objects (files, or inline)
//! namespace: shop                      # optional: of objects without one (default: default)
//! apiResources: [api-resources.txt]    # optional: `kubectl api-resources` output
//! providerAnswers: [answers.yaml]      # optional: recorded provider answers
//! cases:
//! - name: pods pull through the mirror
//!   operation: CREATE                  # optional, CREATE by default
//!   input: ../objects/pod.yaml         # a file, an inline object, or a list of them
//!   expected: expected/pod.yaml        # a file, an inline object, or a list of them
//! - name: a Deployment's Pod gets the defaults too
//!   expand: true                       # optional: also what each input generates
//!   input: ../objects/deployment.yaml
//!   expected: expected/deployment-and-pod.yaml   # the Deployment, then its Pod
//! - name: images are pinned to digests       # externalData: the answers it expects
//!   input: ../objects/pod.yaml
//!   username: alice                    # optional: the requesting user
//!   providers:                         # each Provider's ProviderResponse
//!     tag-to-digest:
//!       response:
//!         idempotent: true
//!         items: [{key: "nginx:1.27", value: "nginx@sha256:6784..."}]
//!   expected: expected/pinned-pod.yaml
//! - name: an unknown namespace is an error
//!   input: {apiVersion: v1, kind: Pod, metadata: {name: x, namespace: other}}
//!   expectedError: needs the labels of Namespace "other"   # part of the message
//! ```

// Everything goes through the `Io` given: a test reads what a user would see.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context as _;
use clap::Args;
use sartor_api::{Document, Input, ProviderResponse, read_documents};
use sartor_engine::{ApiResource, Expander, Operation, Scopes, System};
use serde::Deserialize;
use serde_json::Value;

use crate::external::External;
use crate::io::say;
use crate::load::namespace_name;
use crate::mutate::{Offline, colour_if, expand_one, invalid_namespace, mutate_one, yaml_diff};
use crate::report::{CaseResult, SuiteResult};
use crate::{Exit, Io, load, report};

#[cfg(test)]
pub(crate) mod tests;

/// Run mutator test suites (`*.sartor-test.yaml`).
///
/// Each suite names mutator files, Namespace objects, and cases: an input
/// object and the object expected after mutation, or part of the error message
/// expected. Prints a PASS/FAIL line per case, with a diff for each failure,
/// and a summary. Exit 0 when every case passes, 1 when any fails, 2 when a
/// suite cannot be read or its mutators are invalid. The suite format is
/// described in docs/cli.md.
#[derive(Debug, Args)]
pub struct TestArgs {
    /// Suite files, or directories searched recursively for `*.sartor-test.yaml`.
    #[arg(value_name = "PATH", required = true)]
    paths: Vec<PathBuf>,
    /// Run only the cases whose name contains PATTERN (case-sensitive); the
    /// others are neither run nor counted. Exit 2 when no case matches.
    #[arg(long = "run", value_name = "PATTERN")]
    run: Option<String>,
    /// Output format on stdout: `text` (PASS/FAIL lines, a diff per failure,
    /// a summary), `junit` (JUnit XML for CI test reporters) or `json` (the
    /// same content). Problems with suites also go to stderr.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

/// `sartor test --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Text,
    Junit,
    Json,
}

/// A suite file.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Suite {
    mutators: Vec<String>,
    /// Namespace objects for namespaceSelector: files (other documents in
    /// them are ignored), or objects inline.
    #[serde(default)]
    namespaces: Vec<Objects>,
    /// The namespace of namespaced objects without `metadata.namespace`
    /// (`sartor mutate -n`); a case's own wins.
    #[serde(default)]
    namespace: Option<String>,
    /// `kubectl api-resources` output for kinds neither built in nor defined
    /// by a CRD among the mutators (`sartor mutate --api-resources`).
    #[serde(default)]
    api_resources: Vec<String>,
    /// Recorded external data answers for every case (see `sartor mutate
    /// --provider-answers`); a case's own `providers` win.
    #[serde(default)]
    provider_answers: Vec<String>,
    cases: Vec<Case>,
}

/// One case of a suite.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Case {
    name: String,
    #[serde(default)]
    operation: Option<Operation>,
    /// The namespace of namespaced inputs without `metadata.namespace`.
    #[serde(default)]
    namespace: Option<String>,
    input: Objects,
    #[serde(default)]
    expected: Option<Objects>,
    #[serde(default)]
    expected_error: Option<String>,
    /// Also produce what each input generates (its Pod, ...), right after
    /// it, as `sartor mutate --expand` does; `expected` lists them too.
    #[serde(default)]
    expand: bool,
    /// The requesting user's name (externalData's `Username`).
    #[serde(default)]
    username: String,
    /// The external data answers this case expects, by Provider name.
    #[serde(default)]
    providers: BTreeMap<String, ProviderResponse>,
}

/// Objects given as a file path, or inline: one object or a list of them.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Objects {
    File(String),
    Inline(Value),
}

const SUFFIX: &str = ".sartor-test.yaml";

/// Runs `sartor test`: the report on `io.out`, the problems with suites
/// on `io.err`.
///
/// # Errors
/// A directory that cannot be listed, or `io` that cannot be written.
pub fn run(args: &TestArgs, io: &mut Io<'_>) -> anyhow::Result<Exit> {
    let mut suites = Vec::new();
    for path in &args.paths {
        find_suites(path, &mut suites)?;
    }
    if suites.is_empty() {
        say!(io, "error: no *{SUFFIX} files found")?;
        return Ok(Exit::InvalidInput);
    }
    let mut results = Vec::with_capacity(suites.len());
    for suite in &suites {
        let result = run_suite(suite, args.run.as_deref());
        for problem in &result.problems {
            say!(io, "error: {}: {problem}", result.file)?;
        }
        if args.format == Format::Text {
            print_text(&result, io)?;
        }
        results.push(result);
    }
    let tally = Tally::of(&results);
    if let Some(pattern) = &args.run
        && tally.passed + tally.failed == 0
        && tally.invalid == 0
    {
        say!(io, "error: no case name contains {pattern:?}")?;
        return Ok(Exit::InvalidInput);
    }
    match args.format {
        Format::Text => io.print_line(&format!(
            "{} passed, {} failed{}",
            tally.passed,
            tally.failed,
            if tally.invalid > 0 {
                let noun = if tally.invalid == 1 {
                    "suite"
                } else {
                    "suites"
                };
                format!(", {} {noun} invalid", tally.invalid)
            } else {
                String::new()
            }
        ))?,
        Format::Junit => io.print(&report::junit("sartor test", &results))?,
        Format::Json => io.print_line(&serde_json::to_string_pretty(&report::json(&results))?)?,
    }
    Ok(if tally.invalid > 0 {
        Exit::InvalidInput
    } else if tally.failed > 0 {
        Exit::MutationFailed
    } else {
        Exit::Ok
    })
}

/// PASS/FAIL lines for one suite, with an indented diff per failure.
fn print_text(result: &SuiteResult, io: &mut Io<'_>) -> anyhow::Result<()> {
    for case in &result.cases {
        match &case.failure {
            None => io.print_line(&format!("PASS {}: {}", result.file, case.name))?,
            Some(report) => {
                io.print_line(&format!("FAIL {}: {}", result.file, case.name))?;
                io.print(&indent(&colour_if(report, io.colour)))?;
            }
        }
    }
    Ok(())
}

#[derive(Debug, Default)]
struct Tally {
    passed: usize,
    failed: usize,
    invalid: usize,
}

impl Tally {
    fn of(results: &[SuiteResult]) -> Tally {
        let mut tally = Tally::default();
        for result in results {
            if !result.problems.is_empty() {
                tally.invalid += 1;
            }
            for case in &result.cases {
                if case.failure.is_some() {
                    tally.failed += 1;
                } else {
                    tally.passed += 1;
                }
            }
        }
        tally
    }
}

fn find_suites(path: &Path, suites: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    if !path.is_dir() {
        suites.push(path.to_path_buf());
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .with_context(|| format!("listing {}", path.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for entry in entries {
        let name = entry
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.starts_with('.') {
            continue;
        }
        if entry.is_dir() {
            find_suites(&entry, suites)?;
        } else if name.ends_with(SUFFIX) {
            suites.push(entry);
        }
    }
    Ok(())
}

/// Runs one suite file: its cases, or the problems that stopped it.
fn run_suite(file: &Path, run: Option<&str>) -> SuiteResult {
    let mut result = SuiteResult {
        file: file.display().to_string(),
        problems: Vec::new(),
        cases: Vec::new(),
    };
    let suite: Suite = match std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read: {e}"))
        .and_then(|text| serde_yaml::from_str(&text).map_err(|e| format!("invalid suite: {e}")))
    {
        Ok(suite) => suite,
        Err(message) => {
            result.problems.push(message);
            return result;
        }
    };
    let dir = file.parent().unwrap_or(Path::new("."));
    let relative = |p: &String| dir.join(p).display().to_string();
    let inputs: Vec<Input> = suite
        .mutators
        .iter()
        .map(|p| Input::Path(PathBuf::from(relative(p))))
        .collect();
    let repository = load::repository(&[], &inputs);
    let expander = match repository.expander(true) {
        Ok(expander) => expander,
        Err(finding) => {
            result.problems.push(finding.to_string());
            return result;
        }
    };
    if let Some(problem) = suite.namespace.as_deref().and_then(invalid_namespace) {
        result.problems.push(format!("namespace: {problem}"));
        return result;
    }
    let (scopes, unreadable) =
        repository.scopes(&suite.api_resources.iter().map(relative).collect::<Vec<_>>());
    if !unreadable.is_empty() {
        result.problems = unreadable
            .iter()
            .map(|finding| format!("apiResources: {finding}"))
            .collect();
        return result;
    }
    let not_objects = repository.not_object_findings(false);
    let (system, mut findings) = (repository.system, repository.findings);
    findings.extend(not_objects);
    let mut namespaces = HashMap::new();
    for entry in &suite.namespaces {
        let documents = match entry {
            Objects::File(path) => read(&[relative(path)]),
            Objects::Inline(_) => objects(entry, dir).and_then(|documents| {
                match documents
                    .iter()
                    .find(|d| namespace_name(&d.value).is_none())
                {
                    Some(other) => Err(format!("{}: not a v1 Namespace", other.origin)),
                    None => Ok(documents),
                }
            }),
        };
        match documents {
            Ok(documents) => namespaces.extend(documents.into_iter().filter_map(|d| {
                namespace_name(&d.value).map(|n| (n.to_string(), d.value.clone()))
            })),
            Err(message) => {
                result.problems.push(format!("namespaces: {message}"));
                return result;
            }
        }
    }
    if !findings.is_empty() {
        result.problems = findings.iter().map(ToString::to_string).collect();
        return result;
    }
    let recorded = match External::recorded(
        &suite
            .provider_answers
            .iter()
            .map(relative)
            .collect::<Vec<_>>(),
    ) {
        Ok(External::Recorded(recorded)) => recorded,
        Ok(External::Network { .. }) => BTreeMap::new(),
        Err(message) => {
            result.problems.push(format!("providerAnswers: {message}"));
            return result;
        }
    };
    for case in suite
        .cases
        .iter()
        .filter(|case| run.is_none_or(|pattern| case.name.contains(pattern)))
    {
        let started = Instant::now();
        let setting = Setting {
            system: &system,
            expander: &expander,
            scopes: &scopes,
            namespace: suite.namespace.as_deref().unwrap_or("default"),
            namespaces: &namespaces,
            recorded: &recorded,
        };
        let failure = run_case(case, dir, &setting).err();
        result.cases.push(CaseResult {
            name: case.name.clone(),
            failure,
            seconds: started.elapsed().as_secs_f64(),
        });
    }
    result
}

/// What a suite gives each of its cases.
struct Setting<'a> {
    system: &'a System,
    expander: &'a Expander,
    /// Which kinds are namespaced (built in, `apiResources`, the CRDs among
    /// the mutators).
    scopes: &'a Scopes,
    /// The suite's namespace for objects without one.
    namespace: &'a str,
    namespaces: &'a HashMap<String, Value>,
    recorded: &'a BTreeMap<String, ProviderResponse>,
}

/// Runs one case; `Err` carries what to show for its failure.
fn run_case(case: &Case, dir: &Path, setting: &Setting<'_>) -> Result<(), String> {
    let Setting {
        system,
        expander,
        namespaces,
        recorded,
        ..
    } = *setting;
    if let Some(problem) = case.namespace.as_deref().and_then(invalid_namespace) {
        return Err(format!("namespace: {problem}\n"));
    }
    let inputs = objects(&case.input, dir)?;
    // A CRD among the inputs gives its kind a scope, as in `sartor mutate`.
    let mut scopes = setting.scopes.clone();
    for input in &inputs {
        if let Some(kind) =
            ApiResource::of_crd(&input.value).map_err(|e| format!("{}: {e}", input.origin))?
        {
            scopes.extend([kind]);
        }
    }
    let mut answers = recorded.clone();
    answers.extend(case.providers.clone());
    let external = External::Recorded(answers);
    let mut namespaces = namespaces.clone();
    for input in &inputs {
        if let Some(name) = namespace_name(&input.value) {
            namespaces.insert(name.to_string(), input.value.clone());
        }
    }
    let offline = Offline {
        operation: case.operation.unwrap_or(Operation::Create),
        scopes: &scopes,
        namespace: case.namespace.as_deref().unwrap_or(setting.namespace),
        namespaces: &namespaces,
        external: &external,
        username: &case.username,
    };
    let mut outputs = Vec::with_capacity(inputs.len());
    let mut failure = None;
    for input in &inputs {
        let mutated = mutate_one(system, input, &offline).and_then(|(object, _)| {
            let generated = if case.expand {
                expand_one(expander, system, input, &object, &offline)?
            } else {
                Vec::new()
            };
            Ok((object, generated))
        });
        match mutated {
            Ok((object, generated)) => {
                outputs.push(object);
                outputs.extend(generated.into_iter().map(|g| g.object));
            }
            Err(message) => {
                failure = Some(message);
                break;
            }
        }
    }
    match (&case.expected_error, failure, &case.expected) {
        (Some(want), Some(got), _) if got.contains(want.as_str()) => Ok(()),
        (Some(want), Some(got), _) => Err(format!(
            "expected an error containing {want:?}\ngot: {got}\n"
        )),
        (Some(want), None, _) => Err(format!(
            "expected an error containing {want:?}, but the mutation succeeded\n"
        )),
        (None, Some(got), _) => Err(format!("mutation failed: {got}\n")),
        (None, None, None) => Err("the case names neither expected nor expectedError\n".into()),
        (None, None, Some(expected)) => {
            let expected: Vec<Value> = objects(expected, dir)?
                .into_iter()
                .map(|d| d.value)
                .collect();
            if expected == outputs {
                return Ok(());
            }
            let mut report = String::new();
            if expected.len() != outputs.len() {
                let _ = writeln!(
                    report,
                    "expected {} objects, got {}",
                    expected.len(),
                    outputs.len()
                );
            }
            for (i, (want, got)) in expected.iter().zip(&outputs).enumerate() {
                let diff = yaml_diff(
                    (&format!("expected #{}", i + 1), want),
                    (&format!("got #{}", i + 1), got),
                )
                .map_err(|e| format!("{e:#}"))?;
                report.push_str(&diff);
            }
            Err(report)
        }
    }
}

/// Reads the objects of a case: a file relative to the suite, or inline;
/// each must be a Kubernetes object.
fn objects(objects: &Objects, dir: &Path) -> Result<Vec<Document>, String> {
    let documents = match objects {
        Objects::File(path) => read(&[dir.join(path).display().to_string()])?,
        Objects::Inline(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, value)| inline(i + 1, value))
            .collect(),
        Objects::Inline(value) => vec![inline(1, value)],
    };
    for document in &documents {
        if let Some(problem) = load::object_problem(&document.value) {
            return Err(format!(
                "{}: not a Kubernetes object: {problem}",
                document.origin
            ));
        }
    }
    Ok(documents)
}

/// The `n`th object written inline in a suite.
fn inline(n: usize, value: &Value) -> Document {
    Document {
        origin: sartor_api::Origin {
            file: "inline".into(),
            document: Some(n),
            item: None,
        },
        value: value.clone(),
    }
}

fn read(paths: &[String]) -> Result<Vec<Document>, String> {
    let inputs: Vec<Input> = paths
        .iter()
        .map(|p| Input::Path(PathBuf::from(p)))
        .collect();
    let (documents, errors) = read_documents(&inputs);
    match errors.first() {
        Some(error) => Err(error.to_string()),
        None => Ok(documents),
    }
}

fn indent(text: &str) -> String {
    text.lines().map(|line| format!("    {line}\n")).collect()
}
