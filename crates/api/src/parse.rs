//! Interpreting one JSON object as a mutator or an expansion template.
//!
//! Nothing here knows where the object came from: a file read by the
//! [loader](crate::read_documents), an admission request, a watch event. The
//! caller that knows says where ([`LoadError`](crate::LoadError) adds the
//! file and document).

use std::fmt;

use serde_json::Value;

use crate::expansion::{EXPANSION_GROUP, EXPANSION_VERSIONS, ExpansionTemplate};
use crate::provider::EXTERNAL_DATA_GROUP;
use crate::{
    API_VERSION, Assign, AssignImage, AssignMetadata, GATEKEEPER_GROUP, GROUP, ModifySet,
    MutatorKind, MutatorObject, VERSION,
};

/// Why an object is not a valid mutator or expansion template, naming it
/// when its kind and name are readable.
#[derive(Debug, thiserror::Error)]
pub struct ParseError {
    /// `Kind name` of the object, when it could be read.
    pub subject: Option<String>,
    /// What is wrong (boxed: errors travel in `Result`s on the success path).
    #[source]
    pub problem: Box<Invalid>,
}

/// What is wrong with an object that should be a mutator or an expansion
/// template.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Invalid {
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
    Field {
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
    /// A document in the external data group that is not a `Provider` of a
    /// served version.
    #[error(
        "{kind} ({api_version}) is not a provider: expected Provider in {EXTERNAL_DATA_GROUP}/v1beta1 or v1alpha1"
    )]
    NotAProvider {
        /// The document's `apiVersion`.
        api_version: String,
        /// The document's `kind`.
        kind: String,
    },
}

impl fmt::Display for ParseError {
    /// `Kind name: problem`, or the problem alone.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(subject) = &self.subject {
            write!(f, "{subject}: ")?;
        }
        write!(f, "{}", self.problem)
    }
}

/// Whether a document is meant as a mutator: its `apiVersion` is in sartor's
/// or Gatekeeper's mutation group. Such a document that is not a valid
/// mutator is an error, never an object (repository mode).
pub fn is_mutator_document(value: &Value) -> bool {
    api_group(value).is_some_and(|group| group == GROUP || group == GATEKEEPER_GROUP)
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

/// Interprets one object as a mutator of sartor's or Gatekeeper's API.
///
/// # Errors
/// A [`ParseError`] naming the mutator when its kind and name are readable,
/// and the field at fault.
pub fn parse_mutator(value: &Value) -> Result<MutatorObject, ParseError> {
    let fail = |subject: Option<String>, problem: Invalid| ParseError {
        subject,
        problem: Box::new(problem),
    };
    let Some(object) = value.as_object() else {
        return Err(fail(None, Invalid::NotAnObject(json_type(value))));
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
        return Err(fail(subject, Invalid::MissingField("apiVersion")));
    };
    let Some(kind_name) = kind_name else {
        return Err(fail(subject, Invalid::MissingField("kind")));
    };
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = match kind_name.parse::<MutatorKind>() {
        Ok(kind) if group == GROUP || group == GATEKEEPER_GROUP => kind,
        _ => {
            return Err(fail(
                subject,
                Invalid::NotAMutator {
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
            Invalid::UnsupportedVersion {
                api_version: api_version.to_string(),
                kind,
                supported,
            },
        ));
    }
    let Some(name) = name.filter(|n| !n.is_empty()) else {
        return Err(fail(subject, Invalid::MissingField("metadata.name")));
    };
    if let Some(problem) = invalid_name(name).or_else(|| invalid_metadata(value)) {
        return Err(fail(subject, problem));
    }
    if let Some(problem) = unknown_key(object) {
        return Err(fail(subject, problem));
    }
    let mut cleaned = value.clone();
    if let Value::Object(map) = &mut cleaned {
        // Status is the cluster's report, not input; and the API server drops
        // explicit nulls in the spec (fields are not nullable) before use.
        map.remove("status");
        if let Some(spec) = map.get_mut("spec") {
            prune_nulls(spec, "spec");
        }
    }
    let mutator = typed(kind, &cleaned).map_err(|e| fail(subject.clone(), e))?;
    if group == GATEKEEPER_GROUP
        && let Some((field, extension)) = mutator.sartor_extension()
    {
        return Err(fail(
            subject,
            Invalid::SartorExtension {
                field,
                extension,
                api_version: api_version.to_string(),
            },
        ));
    }
    Ok(mutator)
}

/// What the API server says of a custom resource's `metadata.name` that is
/// not a lowercase RFC 1123 subdomain (its `NameIsDNSSubdomain`, in its
/// words), so that a mutator `kubectl apply` would refuse is refused here too.
pub fn invalid_name(name: &str) -> Option<Invalid> {
    let reasons = crate::validation::dns1123_subdomain_errors(name);
    (!reasons.is_empty()).then(|| Invalid::Field {
        path: "metadata.name".to_string(),
        message: format!("Invalid value: {name:?}: {}", reasons.join("; ")),
    })
}

/// What the API server says of a custom resource's `metadata.labels` or
/// `metadata.annotations` it refuses (`ValidateObjectMetaAccessor`: label
/// keys and values, annotation keys as it checks them, lower-cased), in its
/// words; the first problem, labels first, keys in order.
pub fn invalid_metadata(object: &Value) -> Option<Invalid> {
    use crate::validation::{validate_label_key, validate_label_value};
    let map = |field: &str| {
        object
            .get("metadata")
            .and_then(|m| m.get(field))
            .and_then(Value::as_object)
    };
    let invalid = |field: &str, value: &str, message: String| Invalid::Field {
        path: format!("metadata.{field}"),
        message: format!("Invalid value: {value:?}: {message}"),
    };
    for (key, value) in map("labels").into_iter().flatten() {
        if let Err(message) = validate_label_key(key) {
            return Some(invalid("labels", key, message));
        }
        if let Some(value) = value.as_str()
            && let Err(message) = validate_label_value(value)
        {
            return Some(invalid("labels", value, message));
        }
    }
    for key in map("annotations").into_iter().flatten().map(|(key, _)| key) {
        if let Err(message) = validate_label_key(&key.to_lowercase()) {
            return Some(invalid("annotations", key, message));
        }
    }
    None
}

/// Interprets one object as Gatekeeper's `ExpansionTemplate`, checking what
/// Gatekeeper checks when one is added: a name under 64 characters, a
/// `templateSource`, a `generatedGVK`, an `applyTo` that does not include the
/// kind it generates.
///
/// # Errors
/// A [`ParseError`] naming the template and the field at fault.
pub fn parse_expansion_template(value: &Value) -> Result<ExpansionTemplate, ParseError> {
    let header = Header::read(value, "ExpansionTemplate");
    let fail = |problem: Invalid| header.fail(problem);
    let invalid = |path: &str, message: &str| header.invalid(path, message);
    if header.kind != "ExpansionTemplate"
        || header.group != EXPANSION_GROUP
        || !EXPANSION_VERSIONS.contains(&header.version)
    {
        return Err(fail(Invalid::NotATemplate {
            api_version: header.api_version.to_string(),
            kind: header.kind.to_string(),
        }));
    }
    let value = header.body(value);
    let template: ExpansionTemplate = deserialize(&value).map_err(fail)?;
    let name = template.metadata.name.as_deref().unwrap_or_default();
    if name.is_empty() || name.len() >= 64 {
        return Err(invalid(
            "metadata.name",
            "must be set and shorter than 64 characters",
        ));
    }
    if let Some(problem) = invalid_name(name).or_else(|| invalid_metadata(&value)) {
        return Err(fail(problem));
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
    Ok(template)
}

/// The start of every Gatekeeper object read unchanged (ExpansionTemplate,
/// Provider): how errors name it, and its apiVersion and kind.
pub(crate) struct Header<'v> {
    /// `Kind name`, or the kind alone without a name.
    subject: Option<String>,
    /// `apiVersion` as written (`""` when missing).
    pub(crate) api_version: &'v str,
    /// The group of `apiVersion`.
    pub(crate) group: &'v str,
    /// The version of `apiVersion`.
    pub(crate) version: &'v str,
    /// `kind` as written.
    pub(crate) kind: &'v str,
}

impl<'v> Header<'v> {
    /// Reads `value`'s header; errors name it `expected name`.
    pub(crate) fn read(value: &'v Value, expected: &str) -> Header<'v> {
        let text = |field: &str| value.get(field).and_then(Value::as_str);
        let name = value
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str);
        let api_version = text("apiVersion").unwrap_or_default();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        Header {
            subject: Some(match name {
                Some(n) => format!("{expected} {n}"),
                None => expected.to_string(),
            }),
            api_version,
            group,
            version,
            kind: text("kind").unwrap_or_default(),
        }
    }

    /// The error `problem` about this object.
    pub(crate) fn fail(&self, problem: Invalid) -> ParseError {
        ParseError {
            subject: self.subject.clone(),
            problem: Box::new(problem),
        }
    }

    /// The error that `path` is wrong: `message`.
    pub(crate) fn invalid(&self, path: &str, message: impl Into<String>) -> ParseError {
        self.fail(Invalid::Field {
            path: path.to_string(),
            message: message.into(),
        })
    }

    /// The object without what its type does not hold: `status`,
    /// `apiVersion`, `kind`.
    pub(crate) fn body(&self, value: &Value) -> Value {
        let mut body = value.clone();
        if let Value::Object(map) = &mut body {
            map.remove("status");
            map.remove("apiVersion");
            map.remove("kind");
        }
        body
    }
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
fn unknown_key(object: &serde_json::Map<String, Value>) -> Option<Invalid> {
    let unknown = |path: String, known: &[&str]| Invalid::Field {
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

fn typed(kind: MutatorKind, value: &Value) -> Result<MutatorObject, Invalid> {
    Ok(match kind {
        MutatorKind::Assign => MutatorObject::Assign(deserialize::<Assign>(value)?),
        MutatorKind::AssignImage => MutatorObject::AssignImage(deserialize::<AssignImage>(value)?),
        MutatorKind::AssignMetadata => {
            MutatorObject::AssignMetadata(deserialize::<AssignMetadata>(value)?)
        }
        MutatorKind::ModifySet => MutatorObject::ModifySet(deserialize::<ModifySet>(value)?),
    })
}

pub(crate) fn deserialize<T: serde::de::DeserializeOwned>(value: &Value) -> Result<T, Invalid> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        Invalid::Field {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn an_object_is_parsed_without_knowing_where_it_came_from() {
        let assign = json!({
            "apiVersion": "mutations.sartor.dev/v1", "kind": "Assign",
            "metadata": {"name": "pull"},
            "spec": {"applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
                     "location": "spec.x", "parameters": {"assign": {"value": 1}}},
        });
        let mutator = parse_mutator(&assign).unwrap();
        assert_eq!(mutator.to_string(), "Assign pull");
    }

    #[test]
    fn names_labels_and_annotations_are_checked_as_the_api_server_checks_them() {
        let message = |name: &str, metadata: Value| {
            let mut assign = json!({
                "apiVersion": "mutations.gatekeeper.sh/v1", "kind": "Assign",
                "metadata": metadata,
                "spec": {"applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
                         "location": "spec.x", "parameters": {"assign": {"value": 1}}},
            });
            assign["metadata"]["name"] = json!(name);
            parse_mutator(&assign)
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        let subdomain = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
        assert_eq!(
            message("set_fs_group", json!({})),
            Err(format!(
                "Assign set_fs_group: metadata.name: Invalid value: \"set_fs_group\": {subdomain}"
            ))
        );
        let long = "a".repeat(254);
        assert_eq!(
            message(&long, json!({})),
            Err(format!(
                "Assign {long}: metadata.name: Invalid value: \"{long}\": must be no more than 253 bytes"
            ))
        );
        assert_eq!(message(&"a".repeat(253), json!({})), Ok(()));
        assert_eq!(message("pods.example-1", json!({})), Ok(()));
        assert_eq!(
            message("pull", json!({"labels": {"team": "-x"}})),
            Err("Assign pull: metadata.labels: Invalid value: \"-x\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".to_string())
        );
        // Annotation keys are checked lower-cased, as the API server does.
        assert_eq!(
            message(
                "pull",
                json!({"annotations": {"Example.COM/Owner": "x"}, "labels": {"app": ""}})
            ),
            Ok(())
        );
    }

    #[test]
    fn an_error_names_the_object_when_it_can() {
        let typo = json!({
            "apiVersion": "mutations.sartor.dev/v1", "kind": "Assign",
            "metadata": {"name": "pull"}, "spce": {},
        });
        assert_eq!(
            parse_mutator(&typo).unwrap_err().to_string(),
            "Assign pull: spce: unknown field, expected one of apiVersion, kind, metadata, spec, status"
        );
        assert_eq!(
            parse_mutator(&json!([1])).unwrap_err().to_string(),
            "expected a Kubernetes object, found a list"
        );
    }
}
