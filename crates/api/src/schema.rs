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
