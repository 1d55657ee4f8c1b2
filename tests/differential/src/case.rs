//! A case (mutators, an admitted object, its Namespace, the operation) and
//! what one side answers for it, in the oracle's wire format
//! (`tests/gatekeeper/README.md`) so both sides are read the same way.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One admission to put to both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Case {
    /// Names the case in reports: `seed/mode/index`.
    #[serde(default)]
    pub id: String,
    /// Mutator objects as written in a file (apiVersion, kind, metadata, spec).
    pub mutators: Vec<Value>,
    /// The admitted object.
    pub object: Value,
    /// The object's Namespace, if it is namespaced and the Namespace exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Value>,
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub operation: String,
    /// The requesting user.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub username: String,
}

/// What one side made of a case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// Per mutator, in the case's order: accepted or refused, and why.
    pub mutators: Vec<Verdict>,
    /// Accepted mutators left out because of a schema conflict, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<String>,
    /// What happened to the object.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// One mutator accepted or refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// `metadata.name`.
    pub name: String,
    /// Its kind.
    pub kind: String,
    /// Whether the side would enforce it (schema conflicts aside).
    pub accepted: bool,
    /// Where it was refused: `crd`, `decode`, `compile`, `upsert` (the
    /// oracle), `parse` or `compile` (sartor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// Why it was refused, in the side's own words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Fields the API server would drop from it (the oracle's CRD step).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pruned: Vec<String>,
    /// The mutator as the API server would store it (the oracle's CRD step:
    /// pruned and defaulted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored: Option<Value>,
}

/// What happened to the admitted object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "lowercase")]
pub enum Outcome {
    /// Changed; the whole object after mutation.
    Mutated {
        /// The mutated object.
        object: Value,
    },
    /// Left as admitted.
    Unchanged,
    /// The admission failed.
    Error {
        /// The side's message.
        error: String,
    },
    /// Not put to the mutators (an operation not mutated, a protected group).
    Skipped {
        /// Why.
        skipped: String,
    },
}

impl Outcome {
    /// `mutated`, `unchanged`, `error` or `skipped`.
    pub fn word(&self) -> &'static str {
        match self {
            Outcome::Mutated { .. } => "mutated",
            Outcome::Unchanged => "unchanged",
            Outcome::Error { .. } => "error",
            Outcome::Skipped { .. } => "skipped",
        }
    }
}

impl Case {
    /// The same case with only the mutators `keep` says yes to.
    pub fn retain_mutators(&self, mut keep: impl FnMut(usize, &Value) -> bool) -> Case {
        let mutators = self
            .mutators
            .iter()
            .enumerate()
            .filter(|(i, m)| keep(*i, m))
            .map(|(_, m)| m.clone())
            .collect();
        Case {
            mutators,
            ..self.clone()
        }
    }
}

/// The API group of an object's `apiVersion` (`""` for the core group).
pub fn group_of(object: &Value) -> &str {
    object
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|v| v.split_once('/'))
        .map_or("", |(group, _)| group)
}

/// `metadata.name` of an object, `""` when missing.
pub fn name_of(object: &Value) -> &str {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}
