//! `Assign`: set any field outside `metadata` to a value.

use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{AssignField, PathTest, ValueCondition};
use crate::matching::{ApplyTo, Match};
use crate::status::MutatorStatus;

/// Sets the field at `location` of every matching object, creating missing
/// parents (unless a pathTest says otherwise).
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "mutations.sartor.dev",
    version = "v1",
    kind = "Assign",
    plural = "assign",
    singular = "assign",
    status = "MutatorStatus",
    derive = "PartialEq",
    doc = "Assign sets a field of matching objects (anything outside metadata) to a value, or removes it.",
    printcolumn = r#"{"name":"Location","type":"string","jsonPath":".spec.location"}"#,
    printcolumn = r#"{"name":"Enforced","type":"boolean","jsonPath":".status.byPod[0].enforced"}"#,
    printcolumn = r#"{"name":"Error","type":"string","jsonPath":".status.byPod[0].errors[0].message","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AssignSpec {
    /// The groups, versions and kinds (and operations) this mutator is written
    /// for; every mutation implies part of an object's schema.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub apply_to: Vec<ApplyTo>,
    /// Which objects to mutate; criteria are ANDed, an empty match matches everything.
    #[serde(default, skip_serializing_if = "crate::is_default")]
    pub r#match: Match,
    /// The field to set (or remove), e.g.
    /// `spec.containers[name: *].imagePullPolicy`; sartor also accepts
    /// `[name notin (istio-proxy)]`, every element but those.
    pub location: String,
    /// What to assign, and the pathTests that guard it.
    #[serde(default)]
    pub parameters: AssignParameters,
}

/// `Assign.spec.parameters`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AssignParameters {
    /// Conditions on parts of the location that must hold before mutating.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub path_tests: Vec<PathTest>,
    /// The value to assign.
    pub assign: AssignField,
    /// Conditions on values of the object (sartor only:
    /// `mutations.sartor.dev/v1`), all of which must hold for it to apply.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ValueCondition>,
}
