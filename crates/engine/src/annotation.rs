//! The `sartor.dev/mutations` annotation: which mutators changed an object,
//! written once it converged when the admission asks for it
//! ([`Admission::annotate`](crate::Admission::annotate)), like Gatekeeper's
//! `gatekeeper.sh/mutations` with `--mutation-annotations`.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::mutation::Change;
use crate::mutator::MutatorId;
use crate::originals::{At, Originals};

/// The annotation listing the mutators that changed an object, when the
/// admission asks for it.
pub const MUTATIONS_ANNOTATION: &str = "sartor.dev/mutations";

const METADATA: At<'static> = At::Field("metadata");
const ANNOTATIONS: At<'static> = At::Field("annotations");

/// Lists the mutators that made `changes`, sorted, in the annotation:
/// `Assign/always-pull:3, ...` (kind/name:generation, `generation` telling
/// each mutator's, 0 when unknown). Saves in `originals` what it replaces;
/// leaves an object whose `metadata` or `annotations` is not a map as it is.
pub(crate) fn write<'s>(
    object: &mut Value,
    changes: &[Change],
    originals: &mut Originals<'s>,
    generation: impl Fn(&MutatorId) -> Option<i64>,
) {
    let applied: BTreeSet<String> = changes
        .iter()
        .map(|c| {
            let mutator = c.mutator();
            let generation = generation(mutator).unwrap_or(0);
            format!("{}/{}:{generation}", mutator.kind, mutator.name)
        })
        .collect();
    let value = Value::String(applied.into_iter().collect::<Vec<_>>().join(", "));
    if let Some(annotations) = annotations(object, originals) {
        annotations.insert(MUTATIONS_ANNOTATION.to_string(), value);
    }
}

/// The object's annotations, made where missing (or `null`), with what the
/// annotation replaces saved in `originals`; `None` when `object`, its
/// `metadata` or its `annotations` is something other than a map.
fn annotations<'v>(
    object: &'v mut Value,
    originals: &mut Originals<'_>,
) -> Option<&'v mut Map<String, Value>> {
    let Value::Object(root) = object else {
        return None;
    };
    if !root.contains_key("metadata") {
        originals.save(&[METADATA], || None);
        let mut metadata = Map::new();
        metadata.insert("annotations".to_string(), Value::Object(Map::new()));
        root.insert("metadata".to_string(), Value::Object(metadata));
    }
    let metadata = root.get_mut("metadata")?.as_object_mut()?;
    match metadata.get("annotations") {
        Some(Value::Object(annotations)) => originals.save(
            &[METADATA, ANNOTATIONS, At::Field(MUTATIONS_ANNOTATION)],
            || annotations.get(MUTATIONS_ANNOTATION).cloned(),
        ),
        Some(Value::Null) => {
            originals.save(&[METADATA, ANNOTATIONS], || Some(Value::Null));
            metadata.insert("annotations".to_string(), Value::Object(Map::new()));
        }
        Some(_) => return None,
        None => {
            originals.save(&[METADATA, ANNOTATIONS], || None);
            metadata.insert("annotations".to_string(), Value::Object(Map::new()));
        }
    }
    metadata.get_mut("annotations")?.as_object_mut()
}
