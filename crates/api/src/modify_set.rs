//! `ModifySet`: add values to or remove values from a list treated as a set.

use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{PathTest, ValueCondition};
use crate::matching::{ApplyTo, Match};
use crate::status::MutatorStatus;

/// Merges values into, or prunes values from, a list that is not keyed,
/// such as a container's `args`.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "mutations.sartor.dev",
    version = "v1",
    kind = "ModifySet",
    plural = "modifyset",
    singular = "modifyset",
    status = "MutatorStatus",
    derive = "PartialEq",
    doc = "ModifySet adds values to, or removes values from, a list of matching objects, treating the list as a set.",
    printcolumn = r#"{"name":"Location","type":"string","jsonPath":".spec.location"}"#,
    printcolumn = r#"{"name":"Operation","type":"string","jsonPath":".spec.parameters.operation"}"#,
    printcolumn = r#"{"name":"Enforced","type":"boolean","jsonPath":".status.byPod[0].enforced"}"#,
    printcolumn = r#"{"name":"Error","type":"string","jsonPath":".status.byPod[0].errors[0].message","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModifySetSpec {
    /// The groups, versions and kinds (and operations) this mutator is written for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub apply_to: Vec<ApplyTo>,
    /// Which objects to mutate; criteria are ANDed, an empty match matches everything.
    #[serde(default, skip_serializing_if = "crate::is_default")]
    pub r#match: Match,
    /// The list to modify, e.g. `spec.containers[name: *].args`.
    pub location: String,
    /// The operation, its values, and the pathTests that guard it.
    #[serde(default)]
    pub parameters: ModifySetParameters,
}

/// `ModifySet.spec.parameters`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModifySetParameters {
    /// Conditions on parts of the location that must hold before mutating.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub path_tests: Vec<PathTest>,
    /// `merge` adds each value not already present; `prune` removes every
    /// element equal to a value.
    #[serde(default)]
    pub operation: SetOperation,
    /// The values to merge or prune.
    #[serde(default)]
    pub values: Values,
    /// Conditions on values of the object (sartor only:
    /// `mutations.sartor.dev/v1`), all of which must hold for it to apply.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ValueCondition>,
}

/// `merge` adds each value not already present (the default); `prune` removes every element equal to a value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum SetOperation {
    /// Add each value not already in the list.
    #[default]
    Merge,
    /// Remove every element equal to one of the values.
    Prune,
}

/// `ModifySet.spec.parameters.values`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Values {
    /// The values, any JSON; compared with whole-value equality.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::any_list")]
    pub from_list: Vec<serde_json::Value>,
}
