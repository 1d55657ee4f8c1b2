//! Assign: set any field outside `metadata` to a value, to the object's
//! name or namespace (`fromMetadata`), or to a label or annotation of its
//! Namespace (`fromNamespace`, sartor only).

use std::borrow::Cow;

use sartor_api::{AssignField, AssignSpec, MetadataField, json_type};
use serde_json::{Map, Value};

use super::{
    Action, Parts, Problem, ends_in_list, finish, parse_location, reject_key_change,
    reject_metadata_root,
};
use crate::external::ExternalSource;
use crate::matching::{metadata_str, namespace_of};
use crate::request::Request;
use crate::walk::{Replaced, SetError, Setter, value_equals};
use sartor_api::MutatorKind;
use sartor_location::KeyValue;

/// Where an Assign (or AssignMetadata) gets its value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ValueSource {
    /// `value`: a constant.
    Value(Value),
    /// `fromMetadata`: the object's name or namespace, read when applied.
    FromMetadata(MetadataField),
    /// `fromNamespace`: a label or annotation of the object's Namespace
    /// (`annotation` false: a label), else `default`, else nothing.
    FromNamespace {
        annotation: bool,
        key: String,
        default: Option<String>,
    },
    /// `remove: true`: no value; what is at the location goes (sartor only).
    Remove,
    /// `externalData`: a provider's answer, put in place after convergence.
    External(ExternalSource),
}

/// Removes the field the location ends at, or the list elements its last
/// selector picks; never creates anything.
pub(crate) struct RemoveSetter;

/// Sets a field to a value, or puts an object into a keyed list.
pub(crate) struct AssignSetter<'v>(pub(crate) &'v Value);

pub(super) fn compile(spec: &AssignSpec) -> Result<Parts, Problem> {
    let location = parse_location(&spec.location)?;
    reject_metadata_root(&location, MutatorKind::Assign)?;
    reject_key_change(&location)?;
    let source = ValueSource::compile(&spec.parameters.assign)?;
    if let Some(list) = ends_in_list(&location) {
        match &source {
            ValueSource::External(_) => {
                return Err(Problem::ExternalIntoList {
                    location: location.clone(),
                });
            }
            ValueSource::FromMetadata(_) => {
                return Err(Problem::MetadataIntoList {
                    location: location.clone(),
                });
            }
            ValueSource::FromNamespace { .. } => {
                return Err(Problem::NamespaceIntoList {
                    location: location.clone(),
                });
            }
            // Removes the selected elements (the walk's list removal).
            ValueSource::Remove => {}
            ValueSource::Value(value) => {
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
    // A removal needs something there: the walk then never creates a parent.
    let mut path_tests = spec.parameters.path_tests.clone();
    if source == ValueSource::Remove {
        if let Some(index) = path_tests
            .iter()
            .position(|t| t.condition == sartor_api::Condition::MustNotExist)
        {
            return Err(Problem::RemoveMustNotExist { index });
        }
        path_tests.push(sartor_api::PathTest {
            sub_path: spec.location.clone(),
            condition: sartor_api::Condition::MustExist,
        });
    }
    finish(
        location,
        &path_tests,
        &spec.apply_to,
        &spec.r#match,
        Action::Assign(source),
    )
}

// === impl ValueSource ===

impl ValueSource {
    /// Reads `spec.parameters.assign`: exactly one of value, fromMetadata,
    /// fromNamespace, externalData and remove; `UseDefault` needs a `default`.
    pub(super) fn compile(field: &AssignField) -> Result<ValueSource, Problem> {
        let set = usize::from(field.value.is_some())
            + usize::from(field.from_metadata.is_some())
            + usize::from(field.from_namespace.is_some())
            + usize::from(field.external_data.is_some())
            + usize::from(field.remove == Some(true));
        if set != 1 {
            // Gatekeeper's message unless one of sartor's sources is involved.
            return Err(
                if field.from_namespace.is_some() || field.remove.is_some() {
                    Problem::ValueSourcesExtended
                } else {
                    Problem::ValueSources
                },
            );
        }
        if field.remove == Some(true) {
            return Ok(ValueSource::Remove);
        }
        if let Some(external) = &field.external_data {
            let default = external.default.clone().unwrap_or_default();
            if external.failure_policy == sartor_api::FailurePolicy::UseDefault
                && default.is_empty()
            {
                return Err(Problem::ExternalDefaultMissing);
            }
            return Ok(ValueSource::External(ExternalSource {
                provider: external.provider.clone(),
                data_source: external.data_source,
                failure_policy: external.failure_policy,
                default,
            }));
        }
        if let Some(from) = &field.from_namespace {
            let (annotation, key) = match (&from.label, &from.annotation) {
                (Some(label), None) if !label.is_empty() => (false, label),
                (None, Some(annotation)) if !annotation.is_empty() => (true, annotation),
                _ => return Err(Problem::NamespaceKey),
            };
            return Ok(ValueSource::FromNamespace {
                annotation,
                key: key.clone(),
                default: from.default.clone(),
            });
        }
        match (&field.value, &field.from_metadata) {
            (Some(value), _) => Ok(ValueSource::Value(value.clone())),
            (_, Some(from)) => Ok(ValueSource::FromMetadata(from.field)),
            (None, None) => Err(Problem::ValueSources),
        }
    }

    /// The value to set on `object`, `None` when there is none. `fromMetadata`
    /// gives `""` when the object has no name (yet) or no namespace, as
    /// Gatekeeper does; `fromNamespace` gives nothing for a request outside a
    /// namespace (a cluster-scoped object, whatever its `metadata.namespace`),
    /// or whose Namespace was not provided (matching refuses that case
    /// first), and the default, if any, when the Namespace lacks the key.
    pub(crate) fn value<'s>(
        &'s self,
        object: &Value,
        request: &Request<'_>,
    ) -> Option<Cow<'s, Value>> {
        match self {
            ValueSource::Value(value) => Some(Cow::Borrowed(value)),
            ValueSource::FromMetadata(MetadataField::Name) => Some(Cow::Owned(Value::String(
                metadata_str(object, "name").unwrap_or_default().to_string(),
            ))),
            ValueSource::FromMetadata(MetadataField::Namespace) => Some(Cow::Owned(Value::String(
                namespace_of(object, request)
                    .unwrap_or_default()
                    .to_string(),
            ))),
            ValueSource::Remove | ValueSource::External(_) => None,
            ValueSource::FromNamespace {
                annotation,
                key,
                default,
            } => {
                request.namespace.filter(|ns| !ns.is_empty())?;
                let namespace = request.namespace_object?;
                let map = if *annotation { "annotations" } else { "labels" };
                let found = namespace
                    .get("metadata")
                    .and_then(|m| m.get(map))
                    .and_then(|m| m.get(key.as_str()))
                    .and_then(Value::as_str)
                    .or(default.as_deref())?;
                Some(Cow::Owned(Value::String(found.to_string())))
            }
        }
    }
}

// === impl RemoveSetter ===

impl Setter for RemoveSetter {
    fn set_value(&self, object: &mut Map<String, Value>, key: &str) -> Result<bool, SetError> {
        Ok(object.remove(key).is_some())
    }

    fn replace_value(
        &self,
        object: &mut Map<String, Value>,
        key: &str,
    ) -> Option<Result<Replaced, SetError>> {
        Some(Ok(match object.remove(key) {
            Some(before) => Replaced::Changed {
                before: Some(before),
            },
            None => Replaced::Unchanged,
        }))
    }

    fn removes(&self) -> bool {
        true
    }
}

// === impl AssignSetter ===

impl AssignSetter<'_> {
    /// Sets `key` to the value, handing back what it replaced.
    fn replace(&self, object: &mut Map<String, Value>, key: &str) -> Replaced {
        // One search of the map, for the price of the key's copy when the
        // field is there already. A CREATE's first pass mostly adds (one
        // search fewer: 8k instructions of a heavy request); an UPDATE of an
        // object mutated before finds its fields set and pays the copy.
        match object.entry(key) {
            serde_json::map::Entry::Occupied(mut existing) => {
                if existing.get() == self.0 {
                    return Replaced::Unchanged;
                }
                Replaced::Changed {
                    before: Some(existing.insert(self.0.clone())),
                }
            }
            serde_json::map::Entry::Vacant(vacant) => {
                vacant.insert(self.0.clone());
                Replaced::Changed { before: None }
            }
        }
    }
}

impl Setter for AssignSetter<'_> {
    fn set_value(&self, object: &mut Map<String, Value>, key: &str) -> Result<bool, SetError> {
        Ok(self.replace(object, key) != Replaced::Unchanged)
    }

    fn replace_value(
        &self,
        object: &mut Map<String, Value>,
        key: &str,
    ) -> Option<Result<Replaced, SetError>> {
        Some(Ok(self.replace(object, key)))
    }

    fn keyed_list_value(&self) -> Result<&Map<String, Value>, SetError> {
        match self.0 {
            Value::Object(element) => Ok(element),
            other => Err(SetError::NotAnObjectValue(json_type(other))),
        }
    }
}
