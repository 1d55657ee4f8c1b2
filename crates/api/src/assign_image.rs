//! `AssignImage`: rewrite parts of a container image reference.

use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{PathTest, ValueCondition};
use crate::matching::{ApplyTo, Match};
use crate::status::MutatorStatus;

/// Replaces the domain, path and/or tag of the image reference at `location`.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "mutations.sartor.dev",
    version = "v1",
    kind = "AssignImage",
    plural = "assignimage",
    singular = "assignimage",
    status = "MutatorStatus",
    derive = "PartialEq",
    doc = "AssignImage replaces the domain, path and/or tag of container image references in matching objects.",
    printcolumn = r#"{"name":"Location","type":"string","jsonPath":".spec.location"}"#,
    printcolumn = r#"{"name":"Enforced","type":"boolean","jsonPath":".status.byPod[0].enforced"}"#,
    printcolumn = r#"{"name":"Error","type":"string","jsonPath":".status.byPod[0].errors[0].message","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AssignImageSpec {
    /// The groups, versions and kinds (and operations) this mutator is written for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub apply_to: Vec<ApplyTo>,
    /// Which objects to mutate; criteria are ANDed, an empty match matches everything.
    #[serde(default, skip_serializing_if = "crate::is_default")]
    pub r#match: Match,
    /// The image field, e.g. `spec.containers[name: *].image`.
    pub location: String,
    /// The parts of the image to assign, and the pathTests that guard it.
    #[serde(default)]
    #[schemars(transform = crate::schema::no_default)]
    pub parameters: AssignImageParameters,
}

/// `AssignImage.spec.parameters`: at least one of domain, path and tag. As in
/// Gatekeeper, an empty string means "not set".
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "(has(self.assignDomain) && self.assignDomain != '') || (has(self.assignPath) && self.assignPath != '') || (has(self.assignTag) && self.assignTag != '')",
        "message": "set at least one of assignDomain, assignPath and assignTag",
    },
    {
        "rule": "!has(self.assignTag) || self.assignTag == '' || self.assignTag.startsWith(':') || self.assignTag.startsWith('@')",
        "message": "assignTag must start with ':' (a tag) or '@' (a digest)",
    },
]))]
pub struct AssignImageParameters {
    /// Conditions on parts of the location that must hold before mutating.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub path_tests: Vec<PathTest>,
    /// The registry domain, e.g. `my.registry.io` or `localhost:5000`, without a trailing `/`.
    #[serde(
        default,
        deserialize_with = "crate::schema::empty_as_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub assign_domain: Option<String>,
    /// The repository path, e.g. `library/nginx`.
    #[serde(
        default,
        deserialize_with = "crate::schema::empty_as_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub assign_path: Option<String>,
    /// The tag (`:v1.2`) or digest (`@sha256:...`), replacing both.
    #[serde(
        default,
        deserialize_with = "crate::schema::empty_as_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub assign_tag: Option<String>,
    /// Conditions on values of the object (sartor only:
    /// `mutations.sartor.dev/v1`), all of which must hold for it to apply.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ValueCondition>,
}
