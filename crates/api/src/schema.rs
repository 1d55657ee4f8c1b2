//! Schema pieces schemars cannot derive in the shape Kubernetes requires.

use schemars::{Schema, SchemaGenerator, json_schema};

/// Any JSON value, kept as is by the API server.
pub(crate) fn any_value(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "x-kubernetes-preserve-unknown-fields": true })
}

/// A list of arbitrary JSON values.
pub(crate) fn any_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": { "x-kubernetes-preserve-unknown-fields": true }
    })
}

/// Serde: an empty string is no value (Gatekeeper's AssignImage treats `""` as unset).
pub(crate) fn empty_as_none<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    let value: Option<String> = serde::Deserialize::deserialize(deserializer)?;
    Ok(value.filter(|s| !s.is_empty()))
}

/// Schema transform: no `default`. For an object whose validation rules its
/// own default would break (AssignImage's `parameters`: `{}` sets none of the
/// parts the rule asks for), which the API server refuses in a CRD. Serde
/// still reads a missing object as empty, so the engine reports it.
pub(crate) fn no_default(schema: &mut Schema) {
    if let Some(object) = schema.as_object_mut() {
        object.remove("default");
    }
}
