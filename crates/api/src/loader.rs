//! Reading documents (mutators and any Kubernetes objects) from files,
//! directories and stdin, each with its origin: file, document and `List`
//! item. What a document means is [`crate::parse`]'s job; this module says
//! where it was.

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::expansion::ExpansionTemplate;
use crate::parse::{Invalid, ParseError, parse_expansion_template, parse_mutator};
use crate::provider::{Provider, is_provider_document, parse_provider};
use crate::{MutatorKind, MutatorObject};

/// Where documents come from: a file or directory, or standard input (`-`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A file (multi-document YAML or JSON) or a directory, read recursively.
    Path(PathBuf),
    /// Standard input, read as YAML (which covers JSON).
    Stdin,
}

/// Where a document was found: file, document number (from 1, counting empty
/// documents) and, for an item of a `List`, the item number (from 1).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Origin {
    /// The file as given or found (`<stdin>` for standard input).
    pub file: String,
    /// The document's position in the file, from 1; `None` for the file itself.
    pub document: Option<usize>,
    /// The item's position in a `List` document, from 1.
    pub item: Option<usize>,
}

/// One object read from an input, before it is interpreted.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// Where it was read.
    pub origin: Origin,
    /// The object.
    pub value: Value,
}

/// A mutator read by [`mutator_from_document`]: its fields fit the schema. Locations,
/// pathTests and the rest of the semantics are checked when the engine
/// compiles it.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedMutator {
    /// Where it was read.
    pub origin: Origin,
    /// The `apiVersion` as written (sartor's or Gatekeeper's).
    pub api_version: String,
    /// The mutator.
    pub object: MutatorObject,
}

/// Everything [`load_mutators`] read: the mutators that loaded and every problem found.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Mutators in input order.
    pub mutators: Vec<LoadedMutator>,
    /// Problems in input order; a document with a problem yields no mutator.
    pub errors: Vec<LoadError>,
    /// External data providers (`externaldata.gatekeeper.sh` documents
    /// among the inputs), in input order.
    pub providers: Vec<LoadedProvider>,
}

/// A problem with an input, naming where it is and, when known, which mutator.
#[derive(Debug, thiserror::Error)]
pub struct LoadError {
    /// Where the problem is.
    pub origin: Origin,
    /// `Kind name` of the document, when it could be read.
    pub subject: Option<String>,
    /// What is wrong (boxed: errors travel in `Result`s on the success path).
    #[source]
    pub problem: Box<Problem>,
}

/// What is wrong with an input.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Problem {
    /// The file or directory could not be read.
    #[error("cannot read: {0}")]
    Io(#[from] std::io::Error),
    /// The YAML does not parse; the rest of the file is not read.
    #[error("invalid YAML: {0} (the rest of the file is not read)")]
    Yaml(#[from] serde_yaml::Error),
    /// The JSON does not parse.
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The document is not a valid mutator or expansion template, or its
    /// YAML has no JSON equivalent.
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// Another document defines a mutator of the same kind and name.
    #[error(
        "also defined at {0}; a kind and name can be defined once (sartor's and Gatekeeper's groups count as one)"
    )]
    Duplicate(Origin),
}

// === impl Input ===

impl Input {
    /// `-` is standard input; anything else a path.
    pub fn from_arg(arg: &str) -> Input {
        if arg == "-" {
            Input::Stdin
        } else {
            Input::Path(PathBuf::from(arg))
        }
    }
}

impl fmt::Display for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Input::Path(p) => write!(f, "{}", p.display()),
            Input::Stdin => f.write_str(STDIN),
        }
    }
}

const STDIN: &str = "<stdin>";

// === impl Origin ===

impl Origin {
    fn file(file: impl Into<String>) -> Origin {
        Origin {
            file: file.into(),
            document: None,
            item: None,
        }
    }

    fn document(&self, document: usize) -> Origin {
        Origin {
            document: Some(document),
            ..self.clone()
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(document) = self.document {
            write!(f, ": document {document}")?;
        }
        if let Some(item) = self.item {
            write!(f, ", item {item}")?;
        }
        Ok(())
    }
}

// === impl LoadError ===

impl LoadError {
    fn new(origin: Origin, problem: impl Into<Problem>) -> LoadError {
        LoadError {
            origin,
            subject: None,
            problem: Box::new(problem.into()),
        }
    }

    /// `error`, found in the document at `origin`.
    pub fn parsing(origin: Origin, error: ParseError) -> LoadError {
        LoadError {
            origin,
            subject: error.subject,
            problem: Box::new(Problem::Invalid(*error.problem)),
        }
    }
}

impl fmt::Display for LoadError {
    /// `file: document N (Kind name): problem`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.origin)?;
        if let Some(subject) = &self.subject {
            write!(f, " ({subject})")?;
        }
        write!(f, ": {}", self.problem)
    }
}

// === reading documents ===

/// Reads every document of every input, in order.
///
/// A directory is read recursively: its `*.yaml`, `*.yml` and `*.json` files
/// in byte order of their paths, skipping entries whose name starts with `.`
/// and not following symbolic links to directories. A file named directly is
/// read whatever its extension: as JSON if it ends in `.json`, else as YAML.
/// Empty documents are skipped; a `List` (as `kubectl get -o yaml` prints) is
/// read as its items.
///
/// Problems do not stop the reading: they are returned with the documents read.
pub fn read_documents(inputs: &[Input]) -> (Vec<Document>, Vec<LoadError>) {
    read_documents_with_stdin(inputs, &mut std::io::stdin().lock())
}

/// [`read_documents`], reading [`Input::Stdin`] from `stdin` (once: a second
/// `-` finds it empty).
pub fn read_documents_with_stdin(
    inputs: &[Input],
    stdin: &mut dyn Read,
) -> (Vec<Document>, Vec<LoadError>) {
    let mut documents = Vec::new();
    let mut errors = Vec::new();
    visit_documents(inputs, stdin, &mut |read| match read {
        Ok(document) => documents.push(document),
        Err(error) => errors.push(error),
    });
    (documents, errors)
}

/// [`read_documents_with_stdin`] one document at a time: each document, or
/// each problem, is handed to `visit` as it is read, so that only one
/// file's text and one document are held at once.
pub fn visit_documents(
    inputs: &[Input],
    stdin: &mut dyn Read,
    visit: &mut dyn FnMut(Result<Document, LoadError>),
) {
    for input in inputs {
        match input {
            Input::Stdin => {
                let mut text = String::new();
                match stdin.read_to_string(&mut text) {
                    Ok(_) => visit_documents_in_str(STDIN, &text, false, visit),
                    Err(e) => visit(Err(LoadError::new(Origin::file(STDIN), e))),
                }
            }
            Input::Path(path) => {
                let mut files = Vec::new();
                let mut errors = Vec::new();
                collect_files(path, true, &mut files, &mut errors);
                for error in errors {
                    visit(Err(error));
                }
                for file in files {
                    let name = file.display().to_string();
                    match std::fs::read_to_string(&file) {
                        Ok(text) => visit_documents_in_str(
                            &name,
                            &text,
                            has_extension(&file, &["json"]),
                            visit,
                        ),
                        Err(e) => visit(Err(LoadError::new(Origin::file(name), e))),
                    }
                }
            }
        }
    }
}

/// Appends `path` (a file) or the mutator files below it (a directory) to
/// `out`; an entry that cannot be read is reported and the walk goes on.
fn collect_files(path: &Path, named: bool, out: &mut Vec<PathBuf>, errors: &mut Vec<LoadError>) {
    let origin = || Origin::file(path.display().to_string());
    let is_real_dir = || std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
    // Inside a directory, only directories and mutator files are looked at, so
    // an unrelated broken entry is never an error.
    if !named && !has_extension(path, &["yaml", "yml", "json"]) && !is_real_dir() {
        return;
    }
    let metadata = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) => return errors.push(LoadError::new(origin(), e)),
    };
    if !metadata.is_dir() {
        out.push(path.to_path_buf());
        return;
    }
    // A directory named by the user is read even through a link; links to
    // directories found inside one are not followed (no loops).
    if !named && !is_real_dir() {
        return;
    }
    let entries = match std::fs::read_dir(path) {
        Ok(entries) => entries,
        Err(e) => return errors.push(LoadError::new(origin(), e)),
    };
    let mut children = Vec::new();
    for entry in entries {
        match entry {
            Ok(entry) => children.push(entry.path()),
            Err(e) => errors.push(LoadError::new(origin(), e)),
        }
    }
    children.retain(|p| {
        !p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'))
    });
    children.sort();
    for child in children {
        collect_files(&child, false, out, errors);
    }
}

fn has_extension(path: &Path, extensions: &[&str]) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| extensions.iter().any(|x| e.eq_ignore_ascii_case(x)))
}

/// Reads the documents of one file's text; `file` names it in origins.
/// `json` selects a JSON stream instead of multi-document YAML.
pub fn read_documents_from_str(
    file: &str,
    text: &str,
    json: bool,
) -> (Vec<Document>, Vec<LoadError>) {
    let mut documents = Vec::new();
    let mut errors = Vec::new();
    visit_documents_in_str(file, text, json, &mut |read| match read {
        Ok(document) => documents.push(document),
        Err(error) => errors.push(error),
    });
    (documents, errors)
}

/// [`read_documents_from_str`], handing each document or problem to `visit`
/// as it is read (a YAML stream is parsed one document at a time).
fn visit_documents_in_str(
    file: &str,
    text: &str,
    json: bool,
    visit: &mut dyn FnMut(Result<Document, LoadError>),
) {
    let origin = Origin::file(file);
    if json {
        for (i, value) in serde_json::Deserializer::from_str(text)
            .into_iter::<Value>()
            .enumerate()
        {
            match value {
                Ok(mut value) => {
                    whole_numbers_as_integers(&mut value);
                    visit_value(origin.document(i + 1), value, visit);
                }
                Err(e) => {
                    visit(Err(LoadError::new(origin.document(i + 1), e)));
                    break;
                }
            }
        }
    } else {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        for (i, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
            // Through serde_yaml's own Value: it rejects duplicate keys (as
            // kubectl does) and resolves `<<` merge keys.
            let converted = serde_yaml::Value::deserialize(document)
                .and_then(|mut value| value.apply_merge().map(|()| value));
            match converted {
                Ok(value) => match yaml_to_json(value, "") {
                    Ok(value) => visit_value(origin.document(i + 1), value, visit),
                    Err(problem) => visit(Err(LoadError::new(origin.document(i + 1), problem))),
                },
                Err(e) => {
                    visit(Err(LoadError::new(origin.document(i + 1), e)));
                    break;
                }
            }
        }
    }
}

/// Hands one document read at `origin` to `visit`: a `List`'s items one by
/// one, nothing for an empty document.
fn visit_value(origin: Origin, value: Value, visit: &mut dyn FnMut(Result<Document, LoadError>)) {
    match list_items(&value) {
        Some(items) => {
            for (i, item) in items.iter().enumerate() {
                visit(Ok(Document {
                    origin: Origin {
                        item: Some(i + 1),
                        ..origin.clone()
                    },
                    value: item.clone(),
                }));
            }
        }
        None if value.is_null() => {}
        None => visit(Ok(Document { origin, value })),
    }
}

/// Converts a YAML value to JSON the way kubectl does: scalar keys become
/// strings; tags, complex keys and non-finite numbers are errors.
fn yaml_to_json(value: serde_yaml::Value, at: &str) -> Result<Value, Invalid> {
    use serde_yaml::Value as Yaml;
    let invalid = |message: String| Invalid::Field {
        path: if at.is_empty() {
            "(document)".into()
        } else {
            at.to_string()
        },
        message,
    };
    Ok(match value {
        Yaml::Null => Value::Null,
        Yaml::Bool(b) => Value::Bool(b),
        Yaml::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                match as_integer(f) {
                    Some(i) => Value::from(i),
                    None => serde_json::Number::from_f64(f)
                        .map(Value::Number)
                        .ok_or_else(|| invalid(format!("{n} is not a JSON number")))?,
                }
            }
        }
        Yaml::String(s) => Value::String(s),
        Yaml::Sequence(items) => Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, item)| yaml_to_json(item, &format!("{at}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        Yaml::Mapping(mapping) => {
            let mut map = serde_json::Map::new();
            for (key, item) in mapping {
                let key = match key {
                    Yaml::String(s) => s,
                    Yaml::Number(n) => n.to_string(),
                    Yaml::Bool(b) => b.to_string(),
                    Yaml::Null => "null".to_string(),
                    _ => return Err(invalid("a mapping key must be a scalar".into())),
                };
                let child = if at.is_empty() {
                    key.clone()
                } else {
                    format!("{at}.{key}")
                };
                map.insert(key, yaml_to_json(item, &child)?);
            }
            Value::Object(map)
        }
        Yaml::Tagged(tagged) => {
            return Err(invalid(format!("YAML tag {} is not supported", tagged.tag)));
        }
    })
}

/// A whole number written as a float (`1.0`, `1e3`) as the cluster stores
/// it: an integer. kubectl sends it as `1` (its YAML is read into a Go
/// float64, which JSON writes without a fraction) and the API server reads
/// that back as an int64, so Gatekeeper and the webhook see `1`; the
/// offline commands read it the same way. Past int64 it stays a float, as
/// there.
fn as_integer(f: f64) -> Option<i64> {
    // 2^63: the first float past int64.
    const PAST_I64: f64 = 9_223_372_036_854_775_808.0;
    (f.fract() == 0.0 && (-PAST_I64..PAST_I64).contains(&f)).then_some(f as i64)
}

/// [`as_integer`] throughout a JSON document.
fn whole_numbers_as_integers(value: &mut Value) {
    match value {
        Value::Number(n) if n.is_f64() => {
            if let Some(i) = n.as_f64().and_then(as_integer) {
                *value = Value::from(i);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_numbers_as_integers),
        Value::Object(map) => map.values_mut().for_each(whole_numbers_as_integers),
        _ => {}
    }
}

/// The items of a `List` document (`kind: List`, or `kind: <Kind>List` with `items`).
fn list_items(value: &Value) -> Option<&Vec<Value>> {
    let kind = value.get("kind")?.as_str()?;
    if !kind.ends_with("List") {
        return None;
    }
    value.get("items")?.as_array()
}

// === interpreting documents ===

/// Reads every input and interprets every document as a mutator, or as an
/// external data provider when it is one.
///
/// Every problem is collected, not just the first: unreadable files, invalid
/// YAML, documents that are not mutators, invalid fields, and a kind/name
/// defined twice.
pub fn load_mutators(inputs: &[Input]) -> Loaded {
    let (documents, errors) = read_documents(inputs);
    mutators_from_documents(&documents, errors)
}

/// Interprets documents already read as mutators, adding to `errors` (the
/// problems met reading them) those of interpretation and duplicates.
pub fn mutators_from_documents(documents: &[Document], mut errors: Vec<LoadError>) -> Loaded {
    let mut mutators: Vec<LoadedMutator> = Vec::new();
    let mut providers: Vec<LoadedProvider> = Vec::new();
    let mut seen: HashMap<(MutatorKind, String), Origin> = HashMap::new();
    let mut providers_seen: HashMap<String, Origin> = HashMap::new();
    for document in documents {
        if is_provider_document(&document.value) {
            match provider_from_document(document) {
                Ok(loaded) => {
                    let name = loaded.provider.name().to_string();
                    if let Some(first) = providers_seen.get(&name) {
                        errors.push(LoadError {
                            origin: loaded.origin.clone(),
                            subject: Some(format!("Provider {name}")),
                            problem: Box::new(Problem::Duplicate(first.clone())),
                        });
                    } else {
                        providers_seen.insert(name, loaded.origin.clone());
                        providers.push(loaded);
                    }
                }
                Err(e) => errors.push(e),
            }
            continue;
        }
        match mutator_from_document(document) {
            Ok(loaded) => {
                let key = (loaded.object.kind(), loaded.object.name().to_string());
                if let Some(first) = seen.get(&key) {
                    errors.push(LoadError {
                        origin: loaded.origin.clone(),
                        subject: Some(loaded.object.to_string()),
                        problem: Box::new(Problem::Duplicate(first.clone())),
                    });
                } else {
                    seen.insert(key, loaded.origin.clone());
                    mutators.push(loaded);
                }
            }
            Err(e) => errors.push(e),
        }
    }
    Loaded {
        mutators,
        errors,
        providers,
    }
}

/// An expansion template as read: where, and what.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedTemplate {
    /// Where it was read.
    pub origin: Origin,
    /// The template.
    pub template: ExpansionTemplate,
}

/// Interprets one document as a mutator ([`parse_mutator`]).
///
/// # Errors
/// A [`LoadError`] naming the document, the mutator when its kind and name
/// are readable, and the field at fault.
pub fn mutator_from_document(document: &Document) -> Result<LoadedMutator, LoadError> {
    let object = parse_mutator(&document.value)
        .map_err(|error| LoadError::parsing(document.origin.clone(), error))?;
    Ok(LoadedMutator {
        origin: document.origin.clone(),
        api_version: document
            .value
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        object,
    })
}

/// Interprets one document as an expansion template
/// ([`parse_expansion_template`]).
///
/// # Errors
/// A [`LoadError`] naming the document, the template and the field at fault.
pub fn template_from_document(document: &Document) -> Result<LoadedTemplate, LoadError> {
    let template = parse_expansion_template(&document.value)
        .map_err(|error| LoadError::parsing(document.origin.clone(), error))?;
    Ok(LoadedTemplate {
        origin: document.origin.clone(),
        template,
    })
}

/// A Provider as read: where, and what.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedProvider {
    /// Where it was read.
    pub origin: Origin,
    /// The provider.
    pub provider: Provider,
}

/// Interprets one document as an external data provider ([`parse_provider`]).
///
/// # Errors
/// A [`LoadError`] naming the document, the provider and the field at fault.
pub fn provider_from_document(document: &Document) -> Result<LoadedProvider, LoadError> {
    let provider = parse_provider(&document.value)
        .map_err(|error| LoadError::parsing(document.origin.clone(), error))?;
    Ok(LoadedProvider {
        origin: document.origin.clone(),
        provider,
    })
}
