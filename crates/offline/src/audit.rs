//! `sartor audit`'s findings as people and tools read them: one [`Sink`]
//! per output format, each object written as the scan finds it (text, and
//! JSON's changes) or kept as a small entry until the summary (YAML, JUnit,
//! JSON's errors), never the object itself. The controller lists the cluster and `sartor-audit`
//! decides; this module only writes, to the [`Io`] it is given.

// Everything goes through the `Io` given: a test reads what a user would see.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;

use anyhow::Context as _;

use sartor_api::{Input, Wildcard, load_mutators};
use sartor_audit::{Audited, Outcome, Stored, Summary};
use sartor_engine::{Operation, System, compile};
use serde_json::{Map, Value, json};

use crate::io::say;
use crate::mutate::colour_if;
use crate::report::{CaseResult, SuiteResult, junit};
use crate::{Exit, Io, explain_as, to_yaml, yaml_diff};

/// `sartor audit`'s flags for a scan (the binary adds its subcommands).
#[derive(Debug, clap::Args)]
pub struct ScanArgs {
    /// Mutator files or directories to audit with, instead of the cluster's
    /// mutators (try a set against the cluster before applying it); repeat
    /// the flag for more.
    #[arg(long = "mutators", short = 'm', value_name = "PATH", action = clap::ArgAction::Append)]
    pub mutators: Vec<String>,
    /// Only this namespace's objects (cluster-scoped kinds are then left out).
    #[arg(long, short = 'n', value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// The namespace sartor runs in: its objects are left out, as the
    /// webhook never mutates them (`sartor serve --namespace`).
    #[arg(long, value_name = "NAME", default_value = "sartor-system")]
    pub sartor_namespace: String,
    /// A namespace whose objects the webhook never mutates, left out (names
    /// or globs, as `sartor serve --exclude-namespace`); namespaces labelled
    /// admission.sartor.dev/ignore are left out too. Repeat the flag for more.
    #[arg(long = "exclude-namespace", value_name = "NAME", default_value = "kube-system", action = clap::ArgAction::Append)]
    pub exclude_namespaces: Vec<Wildcard>,
    /// The kubeconfig file to use, as kubectl's flag (default: $KUBECONFIG,
    /// else ~/.kube/config, else the in-cluster service account).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// The kubeconfig context to use (default: the current one).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// With the cluster's mutators: Gatekeeper's (`mutations.gatekeeper.sh`)
    /// too, as `sartor serve --gatekeeper-compat` enforces them.
    #[arg(long)]
    pub gatekeeper_compat: bool,
    /// The write to audit for: an UPDATE, as the next write to a stored
    /// object is (or CREATE, as if each were created again).
    #[arg(long, value_enum, default_value_t = Operation::Update)]
    pub operation: Operation,
    /// `text`: one line per object on stdout, the summary on stderr; `json`
    /// or `yaml`: one document with every object and the summary; `junit`:
    /// JUnit XML for CI test reporters, a test suite per kind listed and a
    /// failing test case per object that would change or cannot be mutated.
    #[arg(long, short = 'o', value_enum, default_value_t = AuditFormat::Text)]
    pub output: AuditFormat,
    /// After each object's line, a unified diff of it as stored and as the
    /// webhook would store it (text output).
    #[arg(long, conflicts_with_all = ["output", "explain"])]
    pub diff: bool,
    /// After each object's line, which mutator changed which path in which
    /// pass, as `sartor mutate --explain` says it (text output).
    #[arg(long, conflicts_with = "output")]
    pub explain: bool,
    /// Exit 1 when any object would change, to fail a check.
    #[arg(long)]
    pub exit_code: bool,
    /// Repair each object listed, after the scan: read it again, mutate it,
    /// try the patch with a server-side dry run, then send it with the
    /// object's resourceVersion as a precondition (another writer in
    /// between is never overwritten; the repair is retried once from a fresh
    /// read). A Pod a workload owns is not patched: its owner is named.
    /// Needs `get` and `patch` on the kinds listed. Exit 1 when an object
    /// could not be repaired.
    #[arg(long, conflicts_with_all = ["output", "diff", "explain"])]
    pub fix: bool,
}

/// How `sartor audit` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
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

/// Where a scan's findings go: each object found, then the summary.
pub trait Sink {
    /// One object that would change or cannot be mutated.
    ///
    /// # Errors
    /// `io` cannot be written (the reader of stdout has gone).
    fn found(&mut self, audited: &Audited, io: &mut Io<'_>) -> anyhow::Result<()>;

    /// The scan is over: the summary, and whatever was kept for it.
    ///
    /// # Errors
    /// As [`Sink::found`].
    fn finish(&mut self, summary: &Summary, io: &mut Io<'_>) -> anyhow::Result<()>;
}

/// The sink of `format`: `diff` and `explain` add to the text output.
pub fn sink(format: AuditFormat, diff: bool, explain: bool) -> Box<dyn Sink> {
    match format {
        AuditFormat::Text => Box::new(Text { diff, explain }),
        AuditFormat::Json => Box::new(Json {
            buffer: String::new(),
            changes: 0,
            errors: Vec::new(),
        }),
        AuditFormat::Yaml => Box::new(Yaml {
            changes: Vec::new(),
            errors: Vec::new(),
        }),
        AuditFormat::Junit => Box::new(Junit {
            cases: BTreeMap::new(),
        }),
    }
}

/// How an audit ends: 1 when an object cannot be mutated, or (with
/// `--exit-code`) when one would change.
pub fn exit(summary: &Summary, exit_code: bool) -> Exit {
    if summary.failed > 0 {
        Exit::MutationFailed
    } else if exit_code && summary.changed > 0 {
        Exit::Changed
    } else {
        Exit::Ok
    }
}

/// The mutators under `paths`, or `None` when the set cannot be used
/// (every problem said on `io.err`, as `sartor mutate` refuses such a set).
///
/// # Errors
/// `io.err` cannot be written.
pub fn mutator_files(paths: &[String], io: &mut Io<'_>) -> anyhow::Result<Option<System>> {
    let inputs: Vec<Input> = paths.iter().map(|path| Input::from_arg(path)).collect();
    let compiled = compile(load_mutators(&inputs));
    let conflicts = compiled.conflicts();
    if compiled.errors.is_empty() && conflicts.is_empty() {
        return Ok(Some(compiled.system));
    }
    for error in &compiled.errors {
        say!(io, "error: {error}")?;
    }
    for (origin, id, conflict) in conflicts {
        say!(io, "error: {origin}: {id}: {conflict}")?;
    }
    Ok(None)
}

/// `--fix`'s line for one object: `Kind namespace/name: what was done`.
///
/// # Errors
/// `io.out` cannot be written.
pub fn repaired(
    object: &Stored,
    outcome: &dyn fmt::Display,
    io: &mut Io<'_>,
) -> anyhow::Result<()> {
    io.print_line(&format!("{}: {outcome}", stored_name(object)))
}

/// `N objects scanned (each kind that has any, and how many kinds had
/// none): C would change, F cannot be mutated`.
pub fn summary_line(summary: &Summary) -> String {
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

/// A progress line while a long scan runs, written only when `on` (the
/// binary: when stderr is a terminal, never in a pipe or a CI log); cleared
/// before anything else is printed. Its writes are best effort: a lost
/// progress line is no error.
pub struct Progress {
    out: RefCell<Box<dyn Write>>,
    on: bool,
    shown: Cell<bool>,
}

impl Progress {
    /// A progress line on `out` when `on`.
    pub fn new(out: impl Write + 'static, on: bool) -> Progress {
        Progress {
            out: RefCell::new(Box::new(out)),
            on,
            shown: Cell::new(false),
        }
    }

    /// `N objects scanned (listing Kind.group/version)`, in place.
    pub fn show(&self, kind: &str, scanned: usize) {
        if self.on {
            let _ = write!(
                self.out.borrow_mut(),
                "\r\x1b[K{scanned} objects scanned (listing {kind})"
            );
            self.shown.set(true);
        }
    }

    /// The line, gone.
    pub fn clear(&self) {
        if self.shown.replace(false) {
            let _ = write!(self.out.borrow_mut(), "\r\x1b[K");
        }
    }
}

/// `Kind namespace/name` (`Kind name` when cluster-scoped).
pub fn stored_name(object: &Stored) -> String {
    let kind = &object.resource.kind;
    match &object.namespace {
        Some(namespace) => format!("{kind} {namespace}/{}", object.name),
        None => format!("{kind} {}", object.name),
    }
}

/// Text: a line per object on `out` (with its diff or explanation), an
/// object that cannot be mutated and the summary on `err`.
struct Text {
    diff: bool,
    explain: bool,
}

impl Sink for Text {
    fn found(&mut self, audited: &Audited, io: &mut Io<'_>) -> anyhow::Result<()> {
        let name = stored_name(&audited.object);
        match &audited.outcome {
            Outcome::Changes {
                mutators,
                paths,
                before,
                after,
                mutation,
            } => {
                let mutators: Vec<String> = mutators.iter().map(ToString::to_string).collect();
                io.print_line(&format!(
                    "{name}: {} ({})",
                    mutators.join(", "),
                    paths.join(", ")
                ))?;
                if self.explain {
                    let mut text = String::new();
                    explain_as(&mut text, "", None, mutation);
                    // Its label line is the object's line above.
                    io.print(text.strip_prefix(":\n").unwrap_or(&text))?;
                }
                if self.diff
                    && let Some(before) = before
                {
                    let (before, after) = (redacted(audited, before), redacted(audited, after));
                    match yaml_diff((&name, &before), (&format!("{name} (mutated)"), &after)) {
                        Ok(text) => io.print(&colour_if(&text, io.colour))?,
                        Err(error) => say!(io, "error: {name}: {error:#}")?,
                    }
                }
            }
            Outcome::Failed(reason) => say!(io, "error: {name}: cannot be mutated: {reason}")?,
        }
        Ok(())
    }

    fn finish(&mut self, summary: &Summary, io: &mut Io<'_>) -> anyhow::Result<()> {
        say!(io, "{}", summary_line(summary))
    }
}

/// One object's entry of `-o json` and `-o yaml`: `Ok` when it would change
/// (its mutators and paths), `Err` when it cannot be mutated (why).
fn entry(audited: &Audited) -> Result<Value, Value> {
    let object = &audited.object;
    let mut entry = Map::new();
    entry.insert("apiVersion".into(), json!(object.resource.api_version));
    entry.insert("kind".into(), json!(object.resource.kind));
    entry.insert("namespace".into(), json!(object.namespace));
    entry.insert("name".into(), json!(object.name));
    match &audited.outcome {
        Outcome::Changes {
            mutators, paths, ..
        } => {
            let mutators: Vec<String> = mutators.iter().map(ToString::to_string).collect();
            entry.insert("mutators".into(), json!(mutators));
            entry.insert("paths".into(), json!(paths));
            Ok(Value::Object(entry))
        }
        Outcome::Failed(reason) => {
            entry.insert("error".into(), json!(reason));
            Err(Value::Object(entry))
        }
    }
}

/// The summary's part of the document: each kind listed with its count,
/// and how many objects were scanned.
fn kinds(summary: &Summary) -> Value {
    let kinds: Map<String, Value> = summary
        .kinds
        .iter()
        .map(|(kind, n)| (kind.clone(), Value::from(*n)))
        .collect();
    Value::Object(kinds)
}

/// `-o yaml`: one document, each object's entry kept until the summary
/// (never the object: one page of objects is held at a time).
struct Yaml {
    changes: Vec<Value>,
    errors: Vec<Value>,
}

impl Sink for Yaml {
    fn found(&mut self, audited: &Audited, _: &mut Io<'_>) -> anyhow::Result<()> {
        match entry(audited) {
            Ok(change) => self.changes.push(change),
            Err(error) => self.errors.push(error),
        }
        Ok(())
    }

    fn finish(&mut self, summary: &Summary, io: &mut Io<'_>) -> anyhow::Result<()> {
        // The entries are moved in, not copied (`json!` would serialize them
        // again: a tenth of a 10,000-object scan).
        let mut report = Map::new();
        report.insert("scanned".to_string(), Value::from(summary.scanned()));
        report.insert("kinds".to_string(), kinds(summary));
        report.insert(
            "changes".to_string(),
            Value::Array(std::mem::take(&mut self.changes)),
        );
        report.insert(
            "errors".to_string(),
            Value::Array(std::mem::take(&mut self.errors)),
        );
        io.print(&to_yaml(&Value::Object(report))?)
    }
}

/// `-o json`: the document `serde_json` prints, byte for byte, written as
/// the scan goes. Its keys come sorted (`changes`, `errors`, `kinds`,
/// `scanned`), so each change is written when it is found and only the
/// errors (few) and the summary wait for the end: the output of a scan of
/// any size is never held, only [`Json::FLUSH_AT`] of it.
struct Json {
    /// What is written next, flushed past [`Json::FLUSH_AT`].
    buffer: String,
    /// Changes written so far.
    changes: usize,
    errors: Vec<Value>,
}

impl Json {
    const FLUSH_AT: usize = 64 * 1024;

    /// Adds `value`, pretty-printed, with every line after the first
    /// indented by `indent` spaces (its place in the document).
    fn push(&mut self, value: &Value, indent: &str) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(value)?;
        for (i, line) in text.split('\n').enumerate() {
            if i > 0 {
                self.buffer.push('\n');
                self.buffer.push_str(indent);
            }
            self.buffer.push_str(line);
        }
        Ok(())
    }

    fn flush(&mut self, io: &mut Io<'_>) -> anyhow::Result<()> {
        io.out
            .write_all(self.buffer.as_bytes())
            .and_then(|()| io.out.flush())
            .context("writing to stdout")?;
        self.buffer.clear();
        Ok(())
    }
}

impl Sink for Json {
    fn found(&mut self, audited: &Audited, io: &mut Io<'_>) -> anyhow::Result<()> {
        let change = match entry(audited) {
            Ok(change) => change,
            Err(error) => {
                self.errors.push(error);
                return Ok(());
            }
        };
        self.buffer.push_str(match self.changes {
            0 => "{\n  \"changes\": [\n    ",
            _ => ",\n    ",
        });
        self.changes += 1;
        self.push(&change, "    ")?;
        if self.buffer.len() >= Json::FLUSH_AT {
            self.flush(io)?;
        }
        Ok(())
    }

    fn finish(&mut self, summary: &Summary, io: &mut Io<'_>) -> anyhow::Result<()> {
        self.buffer.push_str(match self.changes {
            0 => "{\n  \"changes\": [],\n  \"errors\": ",
            _ => "\n  ],\n  \"errors\": ",
        });
        let errors = Value::Array(std::mem::take(&mut self.errors));
        self.push(&errors, "  ")?;
        self.buffer.push_str(",\n  \"kinds\": ");
        self.push(&kinds(summary), "  ")?;
        self.buffer
            .push_str(&format!(",\n  \"scanned\": {}\n}}\n", summary.scanned()));
        self.flush(io)
    }
}

/// `-o junit`: a suite per kind listed, a failing case per object.
struct Junit {
    cases: BTreeMap<String, Vec<CaseResult>>,
}

impl Sink for Junit {
    /// The object's case: named `namespace/name`, its failure the object's
    /// text line (without the kind, its suite's name).
    fn found(&mut self, audited: &Audited, _: &mut Io<'_>) -> anyhow::Result<()> {
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
        self.cases
            .entry(object.resource.label())
            .or_default()
            .push(CaseResult {
                name,
                failure: Some(failure),
                seconds: 0.0,
            });
        Ok(())
    }

    /// In the summary's order, a kind without a case an empty suite
    /// (listed, nothing to change).
    fn finish(&mut self, summary: &Summary, io: &mut Io<'_>) -> anyhow::Result<()> {
        let suites: Vec<SuiteResult> = summary
            .kinds
            .keys()
            .map(|kind| SuiteResult {
                file: kind.clone(),
                problems: Vec::new(),
                cases: self.cases.remove(kind).unwrap_or_default(),
            })
            .collect();
        io.print(&junit("sartor audit", &suites))
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

#[cfg(test)]
mod tests;
