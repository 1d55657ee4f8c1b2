//! Reading mutators (and any Kubernetes objects) from files, directories and stdin.

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::expansion::{EXPANSION_GROUP, EXPANSION_VERSIONS, ExpansionTemplate};
use crate::{
    API_VERSION, Assign, AssignImage, AssignMetadata, GATEKEEPER_GROUP, GROUP, ModifySet,
    MutatorKind, MutatorObject, VERSION,
};

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

/// A mutator read by [`parse_mutator`]: its fields fit the schema. Locations,
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
    /// The document is a scalar or a list, not an object.
    #[error("expected a Kubernetes object, found {0}")]
    NotAnObject(&'static str),
    /// A required top-level field is missing or not a string.
    #[error("{0}: missing or not a string")]
    MissingField(&'static str),
    /// The document is some other kind of object.
    #[error(
        "{kind} ({api_version}) is not a mutator: expected Assign, AssignImage, AssignMetadata or ModifySet in {API_VERSION} or {GATEKEEPER_GROUP}/v1, v1beta1, v1alpha1"
    )]
    NotAMutator {
        /// The document's `apiVersion`.
        api_version: String,
        /// The document's `kind`.
        kind: String,
    },
    /// A mutator kind under an apiVersion that does not serve it.
    #[error("apiVersion {api_version} does not serve {kind}: use {}", supported.join(" or "))]
    UnsupportedVersion {
        /// The document's `apiVersion`.
        api_version: String,
        /// The kind.
        kind: MutatorKind,
        /// The apiVersions that serve the kind.
        supported: Vec<String>,
    },
    /// A field does not fit the schema: unknown, missing, of the wrong type.
    #[error("{path}: {message}")]
    Invalid {
        /// The field, e.g. `spec.parameters.pathTest`.
        path: String,
        /// What is wrong with it.
        message: String,
    },
    /// A Gatekeeper-apiVersion mutator uses a field only sartor's API has.
    #[error(
        "{field}: {extension} is a sartor extension, not part of Gatekeeper's API ({api_version}); use apiVersion {API_VERSION} for this mutator"
    )]
    SartorExtension {
        /// The field, e.g. `spec.parameters.assign.fromNamespace`.
        field: &'static str,
        /// What it is.
        extension: &'static str,
        /// The document's (Gatekeeper) `apiVersion`.
        api_version: String,
    },
    /// A document in the expansion group that is not an `ExpansionTemplate`
    /// of a served version.
    #[error(
        "{kind} ({api_version}) is not an expansion template: expected ExpansionTemplate in {EXPANSION_GROUP}/v1alpha1 or v1beta1"
    )]
    NotATemplate {
        /// The document's `apiVersion`.
        api_version: String,
        /// The document's `kind`.
        kind: String,
    },
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
    for input in inputs {
        match input {
            Input::Stdin => {
                let mut text = String::new();
                match stdin.read_to_string(&mut text) {
                    Ok(_) => {
                        let (docs, errs) = read_documents_from_str(STDIN, &text, false);
                        documents.extend(docs);
                        errors.extend(errs);
                    }
                    Err(e) => errors.push(LoadError::new(Origin::file(STDIN), e)),
                }
            }
            Input::Path(path) => {
                let mut files = Vec::new();
                collect_files(path, true, &mut files, &mut errors);
                for file in files {
                    let name = file.display().to_string();
                    match std::fs::read_to_string(&file) {
                        Ok(text) => {
                            let (docs, errs) = read_documents_from_str(
                                &name,
                                &text,
                                has_extension(&file, &["json"]),
                            );
                            documents.extend(docs);
                            errors.extend(errs);
                        }
                        Err(e) => errors.push(LoadError::new(Origin::file(name), e)),
                    }
                }
            }
        }
    }
    (documents, errors)
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
    let origin = Origin::file(file);
    let mut documents = Vec::new();
    let mut errors = Vec::new();
    let mut push = |index: usize, value: Value| {
        let origin = origin.document(index);
        match list_items(&value) {
            Some(items) => documents.extend(items.iter().enumerate().map(|(i, item)| Document {
                origin: Origin {
                    item: Some(i + 1),
                    ..origin.clone()
                },
                value: item.clone(),
            })),
            None if value.is_null() => {}
            None => documents.push(Document { origin, value }),
        }
    };
    if json {
        for (i, value) in serde_json::Deserializer::from_str(text)
            .into_iter::<Value>()
            .enumerate()
        {
            match value {
                Ok(value) => push(i + 1, value),
                Err(e) => {
                    errors.push(LoadError::new(origin.document(i + 1), e));
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
                    Ok(value) => push(i + 1, value),
                    Err(problem) => errors.push(LoadError::new(origin.document(i + 1), problem)),
                },
                Err(e) => {
                    errors.push(LoadError::new(origin.document(i + 1), e));
                    break;
                }
            }
        }
    }
    (documents, errors)
}

/// Converts a YAML value to JSON the way kubectl does: scalar keys become
/// strings; tags, complex keys and non-finite numbers are errors.
fn yaml_to_json(value: serde_yaml::Value, at: &str) -> Result<Value, Problem> {
    use serde_yaml::Value as Yaml;
    let invalid = |message: String| Problem::Invalid {
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
                serde_json::Number::from_f64(f)
                    .map(Value::Number)
                    .ok_or_else(|| invalid(format!("{n} is not a JSON number")))?
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

/// The items of a `List` document (`kind: List`, or `kind: <Kind>List` with `items`).
fn list_items(value: &Value) -> Option<&Vec<Value>> {
    let kind = value.get("kind")?.as_str()?;
    if !kind.ends_with("List") {
        return None;
    }
    value.get("items")?.as_array()
}

// === interpreting mutators ===

/// Reads every input and interprets every document as a mutator.
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
    let mut seen: HashMap<(MutatorKind, String), Origin> = HashMap::new();
    for document in documents {
        match parse_mutator(document) {
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
    Loaded { mutators, errors }
}

/// Whether a document is meant as an expansion template: its `apiVersion` is
/// in Gatekeeper's expansion group.
pub fn is_expansion_template_document(value: &Value) -> bool {
    api_group(value) == Some(EXPANSION_GROUP)
}

/// The API group of a document's `apiVersion` (`None` for the core group and
/// for a document without one).
pub fn api_group(value: &Value) -> Option<&str> {
    value
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|v| v.split_once('/'))
        .map(|(group, _)| group)
}

/// An expansion template as read: where, and what.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedTemplate {
    /// Where it was read.
    pub origin: Origin,
    /// The template.
    pub template: ExpansionTemplate,
}

/// Interprets one document as Gatekeeper's `ExpansionTemplate`, checking
/// what Gatekeeper checks when one is added: a name under 64 characters, a
/// `templateSource`, a `generatedGVK`, an `applyTo` that does not include the
/// kind it generates.
///
/// # Errors
/// A [`LoadError`] naming the document, the template and the field at fault.
pub fn parse_expansion_template(document: &Document) -> Result<LoadedTemplate, LoadError> {
    let value = &document.value;
    let name = value
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str);
    let subject = Some(match name {
        Some(n) => format!("ExpansionTemplate {n}"),
        None => "ExpansionTemplate".to_string(),
    });
    let fail = |problem: Problem| LoadError {
        origin: document.origin.clone(),
        subject: subject.clone(),
        problem: Box::new(problem),
    };
    let invalid = |path: &str, message: &str| {
        fail(Problem::Invalid {
            path: path.to_string(),
            message: message.to_string(),
        })
    };
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let version = api_version
        .split_once('/')
        .map(|(_, v)| v)
        .unwrap_or_default();
    if kind != "ExpansionTemplate" || !EXPANSION_VERSIONS.contains(&version) {
        return Err(fail(Problem::NotATemplate {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
        }));
    }
    let mut value = value.clone();
    if let Value::Object(map) = &mut value {
        map.remove("status");
        map.remove("apiVersion");
        map.remove("kind");
    }
    let template: ExpansionTemplate = deserialize(&value).map_err(fail)?;
    let name = template.metadata.name.as_deref().unwrap_or_default();
    if name.is_empty() || name.len() >= 64 {
        return Err(invalid(
            "metadata.name",
            "must be set and shorter than 64 characters",
        ));
    }
    let spec = &template.spec;
    if spec.template_source.is_empty() {
        return Err(invalid("spec.templateSource", "must be set"));
    }
    let generated = &spec.generated_gvk;
    if generated.version.is_empty() || generated.kind.is_empty() {
        return Err(invalid(
            "spec.generatedGVK",
            "must name a version and a kind",
        ));
    }
    if spec.apply_to.is_empty() {
        return Err(invalid("spec.applyTo", "must name at least one kind"));
    }
    for (index, entry) in spec.apply_to.iter().enumerate() {
        if entry.groups.contains(&generated.group)
            && entry.versions.contains(&generated.version)
            && entry.kinds.contains(&generated.kind)
        {
            return Err(invalid(
                &format!("spec.applyTo[{index}]"),
                "includes the kind the template generates (a template cannot expand its own output)",
            ));
        }
    }
    Ok(LoadedTemplate {
        origin: document.origin.clone(),
        template,
    })
}

/// Whether a document is meant as a mutator: its `apiVersion` is in sartor's
/// or Gatekeeper's mutation group. Such a document that is not a valid
/// mutator is an error, never an object (repository mode).
pub fn is_mutator_document(value: &Value) -> bool {
    api_group(value).is_some_and(|group| group == GROUP || group == GATEKEEPER_GROUP)
}

/// Interprets one document as a mutator of sartor's or Gatekeeper's API.
///
/// # Errors
/// A [`LoadError`] naming the document, the mutator when its kind and name
/// are readable, and the field at fault.
pub fn parse_mutator(document: &Document) -> Result<LoadedMutator, LoadError> {
    let fail = |subject: Option<String>, problem: Problem| LoadError {
        origin: document.origin.clone(),
        subject,
        problem: Box::new(problem),
    };
    let Some(object) = document.value.as_object() else {
        return Err(fail(None, Problem::NotAnObject(json_type(&document.value))));
    };
    let text = |field: &str| object.get(field).and_then(Value::as_str);
    let kind_name = text("kind");
    let name = object
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str);
    let subject = kind_name.map(|k| match name {
        Some(n) => format!("{k} {n}"),
        None => k.to_string(),
    });
    let Some(api_version) = text("apiVersion") else {
        return Err(fail(subject, Problem::MissingField("apiVersion")));
    };
    let Some(kind_name) = kind_name else {
        return Err(fail(subject, Problem::MissingField("kind")));
    };
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = match kind_name.parse::<MutatorKind>() {
        Ok(kind) if group == GROUP || group == GATEKEEPER_GROUP => kind,
        _ => {
            return Err(fail(
                subject,
                Problem::NotAMutator {
                    api_version: api_version.to_string(),
                    kind: kind_name.to_string(),
                },
            ));
        }
    };
    let served = if group == GROUP {
        version == VERSION
    } else {
        kind.gatekeeper_versions().contains(&version)
    };
    if !served {
        let mut supported = vec![API_VERSION.to_string()];
        supported.extend(
            kind.gatekeeper_versions()
                .iter()
                .map(|v| format!("{GATEKEEPER_GROUP}/{v}")),
        );
        return Err(fail(
            subject,
            Problem::UnsupportedVersion {
                api_version: api_version.to_string(),
                kind,
                supported,
            },
        ));
    }
    if name.is_none_or(str::is_empty) {
        return Err(fail(subject, Problem::MissingField("metadata.name")));
    }
    if let Some(problem) = unknown_key(object) {
        return Err(fail(subject, problem));
    }
    let mut value = document.value.clone();
    if let Value::Object(map) = &mut value {
        // Status is the cluster's report, not input; and the API server drops
        // explicit nulls in the spec (fields are not nullable) before use.
        map.remove("status");
        if let Some(spec) = map.get_mut("spec") {
            prune_nulls(spec, "spec");
        }
    }
    let object = typed(kind, &value).map_err(|e| fail(subject.clone(), e))?;
    if group == GATEKEEPER_GROUP
        && let Some((field, extension)) = object.sartor_extension()
    {
        return Err(fail(
            subject,
            Problem::SartorExtension {
                field,
                extension,
                api_version: api_version.to_string(),
            },
        ));
    }
    Ok(LoadedMutator {
        origin: document.origin.clone(),
        api_version: api_version.to_string(),
        object,
    })
}

const TOP_LEVEL: [&str; 5] = ["apiVersion", "kind", "metadata", "spec", "status"];
const METADATA: [&str; 15] = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// A top-level or metadata field that a Kubernetes object does not have
/// (the typed spec catches its own unknown fields).
fn unknown_key(object: &serde_json::Map<String, Value>) -> Option<Problem> {
    let unknown = |path: String, known: &[&str]| Problem::Invalid {
        path,
        message: format!("unknown field, expected one of {}", known.join(", ")),
    };
    if let Some(key) = object.keys().find(|k| !TOP_LEVEL.contains(&k.as_str())) {
        return Some(unknown(key.clone(), &TOP_LEVEL));
    }
    let metadata = object.get("metadata").and_then(Value::as_object)?;
    let key = metadata.keys().find(|k| !METADATA.contains(&k.as_str()))?;
    Some(unknown(format!("metadata.{key}"), &METADATA))
}

/// Removes null-valued fields below `value`, except inside the free-form
/// `assign.value` and `values.fromList`, where a null is data.
fn prune_nulls(value: &mut Value, at: &str) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            for (key, child) in map.iter_mut() {
                let free_form = (key == "value" && at.ends_with("assign"))
                    || (key == "fromList" && at.ends_with("values"));
                if !free_form {
                    prune_nulls(child, key);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| prune_nulls(item, at)),
        _ => {}
    }
}

fn typed(kind: MutatorKind, value: &Value) -> Result<MutatorObject, Problem> {
    Ok(match kind {
        MutatorKind::Assign => MutatorObject::Assign(deserialize::<Assign>(value)?),
        MutatorKind::AssignImage => MutatorObject::AssignImage(deserialize::<AssignImage>(value)?),
        MutatorKind::AssignMetadata => {
            MutatorObject::AssignMetadata(deserialize::<AssignMetadata>(value)?)
        }
        MutatorKind::ModifySet => MutatorObject::ModifySet(deserialize::<ModifySet>(value)?),
    })
}

fn deserialize<T: serde::de::DeserializeOwned>(value: &Value) -> Result<T, Problem> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        Problem::Invalid {
            path: if path == "." { "(object)".into() } else { path },
            message: e.into_inner().to_string(),
        }
    })
}

/// How messages name the type of a JSON value: "a string", "a list", "null"...
pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
