//! Where an Assign's or an AssignMetadata's value comes from, as CEL: a
//! constant, the object's name or namespace, or a label or annotation of
//! its Namespace; every other source is refused. Constants are checked to
//! reach the object as JSON gives them.

use sartor_api::{AssignField, MetadataField};
use serde_json::Value;

use crate::guard::REQUEST_NAMESPACE;
use crate::{Reason, cel};

/// Where a mutator's value comes from, in CEL.
pub(crate) enum Source {
    /// This value, when `when` holds (a Namespace's label may be missing).
    Set {
        value: cel::Literal,
        when: Option<String>,
    },
    /// `remove: true`.
    Remove,
}

/// The source of `assign`'s value, as the engine reads it.
pub(crate) fn source(assign: &AssignField) -> Result<Source, Reason> {
    let set = |value: cel::Literal| Ok(Source::Set { value, when: None });
    if assign.external_data.is_some() {
        return Err(Reason::NotConstant(
            "externalData (the API server cannot ask a provider)",
        ));
    }
    if assign.remove == Some(true) {
        return Ok(Source::Remove);
    }
    if let Some(from) = &assign.from_metadata {
        // "" for an object without a name yet or outside a namespace, as
        // Gatekeeper gives.
        return set(cel::Literal::Expression(match from.field {
            MetadataField::Name => {
                r#"(has(object.metadata.name) ? object.metadata.name : "")"#.to_string()
            }
            MetadataField::Namespace => REQUEST_NAMESPACE.to_string(),
        }));
    }
    if let Some(from) = &assign.from_namespace {
        let (map, key) = match (&from.label, &from.annotation) {
            (Some(label), _) => ("labels", label),
            (None, Some(annotation)) => ("annotations", annotation),
            (None, None) => return Err(Reason::NotConstant("fromNamespace without a key")),
        };
        let map = format!("namespaceObject.metadata.{map}");
        let found = format!("(has({map}) && {} in {map})", cel::string(key));
        let read = format!("{map}[{}]", cel::string(key));
        // Nothing outside a namespace; the default when the key is missing.
        let inside = format!(r#"{REQUEST_NAMESPACE} != "" && namespaceObject != null"#);
        return Ok(match &from.default {
            Some(default) => Source::Set {
                value: cel::Literal::Expression(format!(
                    "({found} ? {read} : {})",
                    cel::string(default)
                )),
                when: Some(format!("({inside})")),
            },
            None => Source::Set {
                value: cel::Literal::Expression(read),
                when: Some(format!("({inside} && {found})")),
            },
        });
    }
    match &assign.value {
        Some(value) => {
            json_safe(value)?;
            set(cel::Literal::Json(value.clone()))
        }
        None => Err(Reason::NotConstant("nothing (no value)")),
    }
}

/// The largest integer CEL gives to JSON as a number: past it (either
/// way), kube-apiserver v1.37.2 wrote `9007199254740993` as the string
/// `"9007199254740993"` (measured with a policy on a custom resource).
const JSON_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// `Ok` when every integer in `value` reaches the object as a number.
pub(crate) fn json_safe(value: &Value) -> Result<(), Reason> {
    match value {
        Value::Number(number) => {
            let safe = match (number.as_i64(), number.as_u64()) {
                (Some(integer), _) => integer.unsigned_abs() <= JSON_SAFE_INTEGER,
                (None, Some(integer)) => integer <= JSON_SAFE_INTEGER,
                (None, None) => true,
            };
            match safe {
                true => Ok(()),
                false => Err(Reason::UnsafeInteger(number.to_string())),
            }
        }
        Value::Array(items) => items.iter().try_for_each(json_safe),
        Value::Object(fields) => fields.values().try_for_each(json_safe),
        _ => Ok(()),
    }
}
