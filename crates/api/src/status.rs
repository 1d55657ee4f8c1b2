//! The status every mutator kind shares: one entry per serving replica.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Observed state of a mutator, as reported by each sartor replica.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MutatorStatus {
    /// One entry per replica, keyed by `id`, so each replica owns its entry
    /// with server-side apply.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["id"]))]
    pub by_pod: Vec<MutatorPodStatus>,
    /// What the in-cluster audit (`sartor serve --audit-interval`) found,
    /// written by the replica holding the audit's Lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<MutatorAudit>,
}

/// What the in-cluster audit found for one mutator at its last scan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MutatorAudit {
    /// The objects stored in the cluster that this mutator would change on
    /// their next write (they were stored before it existed, or the webhook
    /// did not see their last write).
    pub would_change: i64,
}

/// What one replica made of a mutator.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MutatorPodStatus {
    /// The replica (its pod name).
    pub id: String,
    /// The mutator's `metadata.generation` this entry describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The mutator's UID, to notice a mutator deleted and recreated under the same name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "mutatorUID")]
    pub mutator_uid: Option<String>,
    /// Admission operations this replica mutates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operations: Vec<String>,
    /// Whether the replica applies this mutator.
    #[serde(default)]
    pub enforced: bool,
    /// Why the mutator is not enforced: compile errors, conflicts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<MutatorError>,
}

/// A problem a replica found with a mutator.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MutatorError {
    /// The class of problem, such as `compile` or `schema_conflict`, for tools.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// What is wrong, for people.
    pub message: String,
}
