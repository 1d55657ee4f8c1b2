#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
//! Engine tests across crates: mutators written as YAML, compiled, applied.

#[path = "engine/analysis.rs"]
mod analysis;
#[path = "engine/apply.rs"]
mod apply;
#[path = "engine/compile.rs"]
mod compile;
#[path = "engine/conditions.rs"]
mod conditions;
#[path = "engine/exclusion.rs"]
mod exclusion;
#[path = "engine/expansion.rs"]
mod expansion;
#[path = "engine/external.rs"]
mod external;
#[path = "engine/in_place.rs"]
pub mod in_place;
#[path = "engine/matching.rs"]
mod matching;
#[path = "engine/namespace_values.rs"]
mod namespace_values;
#[path = "engine/protection.rs"]
mod protection;
#[path = "engine/removal.rs"]
mod removal;
#[path = "engine/system.rs"]
mod system;
#[path = "engine/targets.rs"]
mod targets;

use sartor_api::{MutatorObject, mutators_from_documents, read_documents_from_str};
use sartor_engine::{Mutation, Mutator, Request, System};
use serde_json::Value;

/// Parses mutator YAML (one or more documents); panics on load errors.
pub fn objects(yaml: &str) -> Vec<MutatorObject> {
    let (documents, errors) = read_documents_from_str("test.yaml", yaml, false);
    let loaded = mutators_from_documents(&documents, errors);
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    loaded.mutators.into_iter().map(|m| m.object).collect()
}

/// Compiles the single mutator in `yaml`.
pub fn compile(yaml: &str) -> Mutator {
    let objects = objects(yaml);
    assert_eq!(objects.len(), 1);
    Mutator::compile(&objects[0]).unwrap_or_else(|e| panic!("{e}"))
}

/// The compile error of the single mutator in `yaml`.
pub fn compile_error(yaml: &str) -> String {
    let objects = objects(yaml);
    assert_eq!(objects.len(), 1);
    match Mutator::compile(&objects[0]) {
        Ok(_) => panic!("compiled: {yaml}"),
        Err(e) => e.to_string(),
    }
}

/// A system holding every mutator in `yaml`.
pub fn system(yaml: &str) -> System {
    let mut system = System::new();
    for object in objects(yaml) {
        system.upsert(Mutator::compile(&object).unwrap_or_else(|e| panic!("{e}")));
    }
    system
}

/// Mutates a copy of `object`; the result or the error message.
pub fn mutate(
    system: &System,
    object: &Value,
    request: &Request<'_>,
) -> Result<(Value, Mutation), String> {
    let mut object = object.clone();
    in_place::mutate_in_place(system, &mut object, request)
        .map(|m| (object, m))
        .map_err(|e| e.to_string())
}

/// An Assign on v1 Pods (CREATE and UPDATE) with the given location and
/// `parameters` (a YAML flow mapping).
pub fn assign(name: &str, location: &str, parameters: &str) -> String {
    format!(
        "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {{name: {name}}}\n\
         spec:\n  applyTo: [{{groups: [\"\"], versions: [v1], kinds: [Pod]}}]\n  \
         location: '{location}'\n  parameters: {parameters}\n"
    )
}

/// A Pod with containers named as given (each with an image `<name>:1`).
pub fn pod(containers: &[&str]) -> Value {
    let containers: Vec<Value> = containers
        .iter()
        .map(|name| serde_json::json!({"name": name, "image": format!("{name}:1")}))
        .collect();
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"containers": containers},
    })
}
