//! `sartor playground`: the offline preview in a browser. A page served
//! from the binary (its HTML, CSS and script embedded: nothing to build,
//! nothing fetched) takes mutators and objects as YAML, and shows what the
//! CLI would print for them: the mutated objects, the diff, the explain
//! trace, `sartor lint`'s findings, `sartor export map`'s policy, and a
//! `sartor test` suite that keeps what is shown (`sartor mutate -o suite`).
//!
//! ```text
//!  page ──POST /api/evaluate {mutators, objects, apiResources, namespace, ...}──▶ evaluate
//!        each pane a file in a directory of the request's own
//!        ──▶ sartor_offline::{mutate, lint, export}::run (the CLI's entry points)
//!        ◀── {mutate, diff, explain, suite, lint, export}: each {exit, out, err}
//! ```
//!
//! There is no second mutate path: [`evaluate`] parses the CLI's own flags
//! and calls the CLI's own `run` functions, so the page shows exactly what
//! `sartor mutate`, `sartor lint` and `sartor export map` print, errors
//! included (files named `mutators.yaml`, `objects.yaml` and
//! `api-resources.txt`). Input is
//! untrusted: each pane is bounded ([`MAX_PANE_BYTES`]), a request names no
//! file, and evaluations run one at a time on blocking threads.

mod examples;
mod server;
#[cfg(test)]
mod tests;

use std::path::Path;

use clap::Parser as _;
use sartor_offline::{Exit, Io, export, lint, mutate};
use serde::{Deserialize, Serialize};

pub use examples::{Example, examples};
pub use server::{Listening, listen};

/// The largest pane the playground takes, in bytes: a few hundred mutators
/// or objects. A request over it is refused, naming the pane.
pub const MAX_PANE_BYTES: usize = 256 * 1024;

/// What the page sends: its panes, and the context `sartor mutate` takes as
/// flags.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Input {
    /// Mutators (either apiVersion) and ExpansionTemplates, as YAML.
    pub mutators: String,
    /// Objects to mutate as YAML; Namespaces among them give
    /// `namespaceSelector` its labels, CRDs their kinds' scope.
    #[serde(default)]
    pub objects: String,
    /// `--api-resources`: `kubectl api-resources` output of the cluster the
    /// objects go to, for the scope of kinds neither built in nor defined by
    /// a CRD among the objects; empty for none.
    #[serde(default)]
    pub api_resources: String,
    /// `-n`: the namespace of namespaced objects without one.
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// The labels of that namespace, `key=value` pairs separated by commas
    /// or lines: given, the namespace is written as a Namespace object
    /// (`--namespaces namespace.yaml`), which a Namespace of the same name
    /// among the objects does not replace.
    #[serde(default)]
    pub namespace_labels: String,
    /// `--operation`: `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    #[serde(default = "default_operation")]
    pub operation: String,
    /// `--expand`: also what each object generates (a Deployment's Pod),
    /// mutated as `source: Generated`.
    #[serde(default)]
    pub expand: bool,
    /// `--username`: the requesting user (externalData's `Username`).
    #[serde(default)]
    pub username: String,
}

fn default_namespace() -> String {
    "default".to_string()
}

fn default_operation() -> String {
    "CREATE".to_string()
}

/// One command's result, as the CLI gives it: its exit code, stdout and
/// stderr.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Run {
    /// 0, 1 or 2, as the binary exits.
    pub exit: u8,
    /// What it printed on stdout.
    pub out: String,
    /// What it printed on stderr.
    pub err: String,
}

/// What the page shows for one [`Input`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Output {
    /// `sartor mutate -m mutators.yaml objects.yaml` (with `--expand` when
    /// asked).
    pub mutate: Run,
    /// The same with `--diff`.
    pub diff: Run,
    /// The same with `--explain`.
    pub explain: Run,
    /// The same with `-o suite`: a `sartor test` suite of what is shown.
    pub suite: Run,
    /// `sartor lint --export-map mutators.yaml`.
    pub lint: Run,
    /// `sartor export map mutators.yaml`.
    pub export: Run,
    /// The findings of `sartor lint --export-map -o json` about the
    /// mutators pane, each with the line it points at, for the page to mark.
    pub problems: Vec<Problem>,
}

/// A lint finding about the mutators pane, placed at its line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The line (from 1) of the field the finding names, else of its
    /// document; `None` when the pane's text does not say.
    pub line: Option<usize>,
    /// `error`, `warning` or `info`.
    pub severity: String,
    /// The finding as `sartor lint` words it: `document N: Kind name: ...`.
    pub text: String,
}

/// Why an input was not evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// A pane over [`MAX_PANE_BYTES`].
    #[error(
        "the {pane} pane holds {bytes} bytes, and the playground takes at most {MAX_PANE_BYTES}"
    )]
    TooLarge {
        /// Which pane.
        pane: &'static str,
        /// Its size.
        bytes: usize,
    },
    /// A namespace label that is not `key=value`.
    #[error("the namespace labels are key=value pairs separated by commas; {0:?} has no '='")]
    Label(String),
    /// The request's directory could not be made or written.
    #[error("the playground could not write the panes to a scratch directory: {0}")]
    Scratch(String),
}

/// What `sartor mutate`, `lint` and `export map` print for `input`, each
/// run with the CLI's flags on the panes written as `mutators.yaml`,
/// `objects.yaml` and `api-resources.txt` (the names their messages use).
///
/// # Errors
/// A pane past [`MAX_PANE_BYTES`], or no scratch directory.
pub fn evaluate(input: &Input) -> Result<Output, Refused> {
    for (pane, text) in [
        ("mutators", &input.mutators),
        ("objects", &input.objects),
        ("api-resources", &input.api_resources),
        ("namespace", &input.namespace),
        ("namespace labels", &input.namespace_labels),
        ("operation", &input.operation),
        ("username", &input.username),
    ] {
        if text.len() > MAX_PANE_BYTES {
            return Err(Refused::TooLarge {
                pane,
                bytes: text.len(),
            });
        }
    }
    let dir = tempfile::Builder::new()
        .prefix("sartor-playground-")
        .tempdir()
        .map_err(|error| Refused::Scratch(error.to_string()))?;
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).map_err(|error| Refused::Scratch(error.to_string()))?;
        Ok::<String, Refused>(path.display().to_string())
    };
    let mutators = write("mutators.yaml", &input.mutators)?;
    let objects = write("objects.yaml", &input.objects)?;
    let mut context = vec![
        "-n",
        input.namespace.as_str(),
        "--operation",
        input.operation.as_str(),
    ];
    if !input.username.is_empty() {
        context.extend(["--username", input.username.as_str()]);
    }
    let namespaces;
    if let Some(namespace) = namespace_object(&input.namespace, &input.namespace_labels)? {
        namespaces = write("namespace.yaml", &namespace)?;
        context.extend(["--namespaces", namespaces.as_str()]);
    }
    let api_resources;
    if !input.api_resources.trim().is_empty() {
        api_resources = write("api-resources.txt", &input.api_resources)?;
        context.extend(["--api-resources", api_resources.as_str()]);
    }
    if input.expand {
        context.push("--expand");
    }
    let preview = |extra: &[&str]| {
        let mut argv = vec!["mutate", "-m", mutators.as_str()];
        argv.extend(&context);
        argv.extend(extra);
        argv.push(objects.as_str());
        run_mutate(&argv, dir.path())
    };
    Ok(Output {
        mutate: preview(&[]),
        diff: preview(&["--diff"]),
        explain: preview(&["--explain"]),
        suite: preview(&["-o", "suite"]),
        lint: run_lint(&["lint", "--export-map", &mutators], dir.path()),
        problems: problems(&run_lint(
            &["lint", "--export-map", "-o", "json", &mutators],
            dir.path(),
        )),
        export: run_export(&["export", "map", &mutators], dir.path()),
    })
}

/// The Namespace `namespace` with `labels` (`key=value, ...`), as a file's
/// text; `None` without labels.
fn namespace_object(namespace: &str, labels: &str) -> Result<Option<String>, Refused> {
    let mut map = serde_json::Map::new();
    for pair in labels
        .split([',', '\n'])
        .map(str::trim)
        .filter(|pair| !pair.is_empty())
    {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| Refused::Label(pair.to_string()))?;
        map.insert(key.trim().to_string(), value.trim().into());
    }
    if map.is_empty() {
        return Ok(None);
    }
    let namespace = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace, "labels": map},
    });
    Ok(Some(format!("{namespace}\n")))
}

/// The findings of `lint -o json` about `mutators.yaml`, each at the line
/// lint gives it.
fn problems(lint: &Run) -> Vec<Problem> {
    let Ok(report) = serde_json::from_str::<serde_json::Value>(&lint.out) else {
        return Vec::new();
    };
    let text = |finding: &serde_json::Value, key: &str| {
        finding
            .get(key)
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
    };
    let number = |finding: &serde_json::Value, key: &str| {
        finding
            .get(key)
            .and_then(serde_json::Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
    };
    report
        .get("findings")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter(|finding| text(finding, "file").as_deref() == Some("mutators.yaml"))
        .map(|finding| {
            let mut words = Vec::new();
            if let Some(document) = number(finding, "document") {
                words.push(match number(finding, "item") {
                    Some(item) => format!("document {document}, item {item}"),
                    None => format!("document {document}"),
                });
            }
            words.extend(text(finding, "subject"));
            words.extend(text(finding, "message"));
            Problem {
                line: number(finding, "line"),
                severity: text(finding, "severity").unwrap_or_default(),
                text: words.join(": "),
            }
        })
        .collect()
}

/// `sartor mutate`'s flags, parsed as the binary parses them.
#[derive(clap::Parser)]
struct Mutate {
    #[command(flatten)]
    args: mutate::MutateArgs,
}

/// `sartor lint`'s flags.
#[derive(clap::Parser)]
struct Lint {
    #[command(flatten)]
    args: lint::LintArgs,
}

/// `sartor export`'s subcommands.
#[derive(clap::Parser)]
struct Export {
    #[command(subcommand)]
    command: export::ExportCommand,
}

fn run_mutate(argv: &[&str], dir: &Path) -> Run {
    match Mutate::try_parse_from(argv) {
        Ok(parsed) => run(dir, |io| mutate::run(&parsed.args, io)),
        Err(error) => refused_flags(&error),
    }
}

fn run_lint(argv: &[&str], dir: &Path) -> Run {
    match Lint::try_parse_from(argv) {
        Ok(parsed) => run(dir, |io| lint::run(&parsed.args, io)),
        Err(error) => refused_flags(&error),
    }
}

fn run_export(argv: &[&str], dir: &Path) -> Run {
    match Export::try_parse_from(argv) {
        Ok(parsed) => run(dir, |io| export::run(&parsed.command, io)),
        Err(error) => refused_flags(&error),
    }
}

/// A flag the page set that the CLI refuses (an unknown operation): exit
/// 2 with clap's words, as the binary would say them.
fn refused_flags(error: &clap::Error) -> Run {
    Run {
        exit: 2,
        out: String::new(),
        err: error.render().to_string(),
    }
}

/// Runs a command with no standard input and its streams captured, as the
/// binary runs it (an error is `error: ...` and exit 2), with the scratch
/// directory's path taken out of what it printed: the files are
/// `mutators.yaml` and `objects.yaml` to the reader.
fn run(dir: &Path, command: impl FnOnce(&mut Io<'_>) -> anyhow::Result<Exit>) -> Run {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let outcome = command(&mut Io {
        stdin: &mut &[][..],
        out: &mut out,
        err: &mut err,
        colour: false,
    });
    let exit = match outcome {
        Ok(exit) => exit.code(),
        Err(error) => {
            err.extend_from_slice(format!("error: {error:#}\n").as_bytes());
            2
        }
    };
    let scratch = format!("{}/", dir.display());
    let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).replace(&scratch, "");
    Run {
        exit,
        out: text(out),
        err: text(err),
    }
}
