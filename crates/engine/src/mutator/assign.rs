//! Assign: set any field outside `metadata` to a value, or to the object's
//! name or namespace (`fromMetadata`).

use std::borrow::Cow;

use sartor_api::{AssignField, AssignSpec, MetadataField, json_type};
use serde_json::{Map, Value};

use super::{
    Action, Parts, Problem, ends_in_list, finish, parse_location, reject_key_change,
    reject_metadata_root,
};
use crate::matching::{metadata_str, namespace_of};
use crate::request::Request;
use crate::walk::{SetError, Setter, value_equals};
use sartor_api::MutatorKind;
use sartor_location::KeyValue;

/// Where an Assign (or AssignMetadata) gets its value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Source {
    /// `value`: a constant.
    Value(Value),
    /// `fromMetadata`: the object's name or namespace, read when applied.
    FromMetadata(MetadataField),
}

/// Sets a field to a value, or puts an object into a keyed list.
pub(crate) struct AssignSetter<'v>(pub(crate) &'v Value);

pub(super) fn compile(spec: &AssignSpec) -> Result<Parts, Problem> {
    let location = parse_location(&spec.location)?;
    reject_metadata_root(&location, MutatorKind::Assign)?;
    reject_key_change(&location)?;
    let source = Source::compile(&spec.parameters.assign)?;
    if let Some(list) = ends_in_list(&location) {
        match &source {
            Source::FromMetadata(_) => {
                return Err(Problem::MetadataIntoList {
                    location: location.clone(),
                });
            }
            Source::Value(value) => {
                match list.key_value {
                    KeyValue::Glob => {
                        return Err(Problem::GlobAtEnd {
                            location: location.clone(),
                        });
                    }
                    KeyValue::NotIn(_) => {
                        return Err(Problem::ExclusionAtEnd {
                            location: location.clone(),
                        });
                    }
                    KeyValue::String(_) | KeyValue::Integer(_) => {}
                }
                let Value::Object(element) = value else {
                    return Err(Problem::ElementNotAnObject {
                        location: location.clone(),
                        found: json_type(value),
                    });
                };
                let key = element.get(&list.key_field);
                if !key.is_some_and(|k| value_equals(k, &list.key_value)) {
                    return Err(Problem::ElementKeyDiffers {
                        location: location.clone(),
                        key: list.key_field.clone(),
                        expected: list.key_value.to_string(),
                        found: key.map_or_else(|| "nothing".to_string(), Value::to_string),
                    });
                }
            }
        }
    }
    finish(
        location,
        &spec.parameters.path_tests,
        &spec.apply_to,
        &spec.r#match,
        Action::Assign(source),
    )
}

// === impl Source ===

impl Source {
    /// Reads `spec.parameters.assign`: exactly one of value, fromMetadata and
    /// externalData, and sartor does not call external data providers.
    pub(super) fn compile(field: &AssignField) -> Result<Source, Problem> {
        let set = usize::from(field.value.is_some())
            + usize::from(field.from_metadata.is_some())
            + usize::from(field.external_data.is_some());
        if set != 1 {
            return Err(Problem::ValueSources);
        }
        if field.external_data.is_some() {
            return Err(Problem::ExternalData);
        }
        match (&field.value, &field.from_metadata) {
            (Some(value), _) => Ok(Source::Value(value.clone())),
            (_, Some(from)) => Ok(Source::FromMetadata(from.field)),
            (None, None) => Err(Problem::ValueSources),
        }
    }

    /// The value to set on `object`. `fromMetadata` gives `""` when the
    /// object has no name (yet) or no namespace, as Gatekeeper does.
    pub(crate) fn value<'s>(&'s self, object: &Value, request: &Request<'_>) -> Cow<'s, Value> {
        match self {
            Source::Value(value) => Cow::Borrowed(value),
            Source::FromMetadata(MetadataField::Name) => Cow::Owned(Value::String(
                metadata_str(object, "name").unwrap_or_default().to_string(),
            )),
            Source::FromMetadata(MetadataField::Namespace) => Cow::Owned(Value::String(
                namespace_of(object, request)
                    .unwrap_or_default()
                    .to_string(),
            )),
        }
    }
}

// === impl AssignSetter ===

impl Setter for AssignSetter<'_> {
    fn set_value(&self, object: &mut Map<String, Value>, key: &str) -> Result<bool, SetError> {
        match object.get_mut(key) {
            Some(existing) if existing == self.0 => Ok(false),
            Some(existing) => {
                *existing = self.0.clone();
                Ok(true)
            }
            None => {
                object.insert(key.to_string(), self.0.clone());
                Ok(true)
            }
        }
    }

    fn keyed_list_value(&self) -> Result<Map<String, Value>, SetError> {
        match self.0 {
            Value::Object(element) => Ok(element.clone()),
            other => Err(SetError::NotAnObjectValue(json_type(other))),
        }
    }
}
