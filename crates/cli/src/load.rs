//! Reading mutators into a System, collecting every problem as a finding.

use std::collections::HashMap;
use std::fmt;

use sartor_api::{Input, Origin, load_mutators, read_documents};
use sartor_engine::{Gvk, Mutator, System};
use serde_json::{Value, json};

/// One problem with the mutator set, for humans (Display) and CI (JSON).
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// What kind of problem: `load`, `compile` or `conflict`.
    pub category: &'static str,
    /// Where the mutator (or unreadable input) is.
    pub origin: Origin,
    /// `Kind name` of the document, when known.
    pub subject: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Finding {
    /// `file: document N: Kind name: message`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.origin)?;
        if let Some(subject) = &self.subject {
            write!(f, ": {subject}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl Finding {
    /// The machine-readable form: `{category, file, document, item, subject, message}`.
    pub fn to_json(&self) -> Value {
        json!({
            "category": self.category,
            "file": self.origin.file,
            "document": self.origin.document,
            "item": self.origin.item,
            "subject": self.subject,
            "message": self.message,
        })
    }
}

/// Loads and compiles every mutator under `paths`: the System of those that
/// compiled, and every problem found (unreadable input, invalid document,
/// invalid mutator, schema conflict), in input order.
pub fn system(paths: &[String]) -> (System, Vec<Finding>) {
    let inputs: Vec<Input> = paths.iter().map(|p| Input::from_arg(p)).collect();
    let loaded = load_mutators(&inputs);
    let mut findings: Vec<Finding> = loaded
        .errors
        .iter()
        .map(|error| Finding {
            category: "load",
            origin: error.origin.clone(),
            subject: error.subject.clone(),
            message: error.problem.to_string(),
        })
        .collect();
    let mut system = System::new();
    let mut origins = Vec::new();
    for mutator in &loaded.mutators {
        match Mutator::compile(&mutator.object) {
            Ok(compiled) => {
                origins.push((compiled.id().clone(), mutator.origin.clone()));
                system.upsert(compiled);
            }
            Err(error) => findings.push(Finding {
                category: "compile",
                origin: mutator.origin.clone(),
                subject: Some(error.mutator.to_string()),
                message: error.problem.to_string(),
            }),
        }
    }
    for (id, origin) in &origins {
        for conflict in system.conflicts(id) {
            findings.push(Finding {
                category: "conflict",
                origin: origin.clone(),
                subject: Some(id.to_string()),
                message: conflict.to_string(),
            });
        }
    }
    (system, findings)
}

/// Reads the Namespace objects under `paths` (`--namespaces`), by name, and
/// a message for every unreadable input or object that is not a Namespace.
pub fn namespaces(paths: &[String]) -> (HashMap<String, Value>, Vec<String>) {
    let inputs: Vec<Input> = paths.iter().map(|p| Input::from_arg(p)).collect();
    let (documents, errors) = read_documents(&inputs);
    let mut messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    let mut namespaces = HashMap::new();
    for document in documents {
        match namespace_name(&document.value) {
            Some(name) => {
                namespaces.insert(name.to_string(), document.value);
            }
            None => messages.push(format!(
                "{}: --namespaces takes v1 Namespace objects only",
                document.origin
            )),
        }
    }
    (namespaces, messages)
}

/// The name of a core v1 Namespace object.
pub fn namespace_name(value: &Value) -> Option<&str> {
    if !Gvk::of(value).is_namespace() {
        return None;
    }
    value.get("metadata")?.get("name")?.as_str()
}
