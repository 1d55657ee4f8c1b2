//! The CustomResourceDefinitions generated from the types, as checked in under `crds/`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use kube_core::CustomResourceExt;

use crate::{Assign, AssignImage, AssignMetadata, ModifySet, MutatorKind};

/// CEL rule on AssignMetadata's `location`: it starts with `metadata`, then
/// `labels` or `annotations`, then a `.`, each name bare or quoted and with
/// the whitespace the location syntax allows between tokens. The engine checks
/// the rest (exactly one key after it, a parseable location).
pub const METADATA_LOCATION_RULE: &str = r#"self.matches('^[ \\t\\r\\n]*(metadata|"metadata"|\'metadata\')[ \\t\\r\\n]*[.][ \\t\\r\\n]*(labels|annotations|"labels"|"annotations"|\'labels\'|\'annotations\')[ \\t\\r\\n]*[.]')"#;

/// The CRD of one mutator kind.
///
/// Fields under `spec` are not `nullable` (kube-derive marks every `Option` so):
/// as with Gatekeeper's CRDs, the API server then drops an explicit `null`
/// instead of storing it, which is what the loader does too.
pub fn crd(kind: MutatorKind) -> CustomResourceDefinition {
    let mut crd = match kind {
        MutatorKind::Assign => Assign::crd(),
        MutatorKind::AssignImage => AssignImage::crd(),
        MutatorKind::AssignMetadata => AssignMetadata::crd(),
        MutatorKind::ModifySet => ModifySet::crd(),
    };
    for version in &mut crd.spec.versions {
        let spec = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .and_then(|s| s.properties.as_mut())
            .and_then(|p| p.get_mut("spec"));
        if let Some(spec) = spec {
            not_nullable(spec);
        }
    }
    crd
}

fn not_nullable(schema: &mut JSONSchemaProps) {
    schema.nullable = None;
    for property in schema.properties.iter_mut().flat_map(|p| p.values_mut()) {
        not_nullable(property);
    }
    match schema.items.as_mut() {
        Some(JSONSchemaPropsOrArray::Schema(item)) => not_nullable(item),
        Some(JSONSchemaPropsOrArray::Schemas(items)) => items.iter_mut().for_each(not_nullable),
        None => {}
    }
    if let Some(JSONSchemaPropsOrBool::Schema(values)) = schema.additional_properties.as_mut() {
        not_nullable(values);
    }
}

/// The file under `crds/` holding the CRD of `kind`.
pub fn crd_file_name(kind: MutatorKind) -> String {
    format!("{}.yaml", kind.as_str().to_ascii_lowercase())
}

/// The checked-in YAML of the CRD of `kind`: a header saying where it comes
/// from, then the CRD.
///
/// # Errors
/// Serialization errors (none are expected for these types).
pub fn crd_yaml(kind: MutatorKind) -> Result<String, serde_yaml::Error> {
    let body = serde_yaml::to_string(&crd(kind))?;
    Ok(format!(
        "# Generated from crates/api ({} in sartor-api); do not edit.\n\
         # Regenerate with: SARTOR_UPDATE_CRDS=1 cargo test -p sartor-api --test crds\n\
         {body}",
        kind.as_str()
    ))
}
