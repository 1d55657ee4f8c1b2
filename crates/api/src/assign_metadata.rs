//! `AssignMetadata`: add a label or annotation when it is absent.

use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{AssignField, ValueCondition};
use crate::matching::Match;
use crate::status::MutatorStatus;

/// Adds `metadata.labels.<key>` or `metadata.annotations.<key>` to every
/// matching object that lacks it; an existing value is never changed.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "mutations.sartor.dev",
    version = "v1",
    kind = "AssignMetadata",
    plural = "assignmetadata",
    singular = "assignmetadata",
    status = "MutatorStatus",
    derive = "PartialEq",
    doc = "AssignMetadata adds a label or annotation to matching objects that lack it.",
    printcolumn = r#"{"name":"Location","type":"string","jsonPath":".spec.location"}"#,
    printcolumn = r#"{"name":"Enforced","type":"boolean","jsonPath":".status.byPod[0].enforced"}"#,
    printcolumn = r#"{"name":"Error","type":"string","jsonPath":".status.byPod[0].errors[0].message","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AssignMetadataSpec {
    /// Which objects to mutate; criteria are ANDed, an empty match matches everything.
    #[serde(default, skip_serializing_if = "crate::is_default")]
    pub r#match: Match,
    /// `metadata.labels.<key>` or `metadata.annotations.<key>`.
    #[schemars(length(max = 512))]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": crate::crd::METADATA_LOCATION_RULE,
        "message": "location must be metadata.labels.<key> or metadata.annotations.<key>",
    }]))]
    pub location: String,
    /// The value to assign.
    #[serde(default)]
    pub parameters: MetadataParameters,
}

/// `AssignMetadata.spec.parameters`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetadataParameters {
    /// The label or annotation value: a string `value`, or `fromMetadata`.
    pub assign: AssignField,
    /// Conditions on values of the object (sartor only:
    /// `mutations.sartor.dev/v1`), all of which must hold for it to apply.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ValueCondition>,
}
