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
    /// ExpansionTemplate objects: when there are any, the admitted object
    /// (as mutated) is expanded and what it generates is compared too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub templates: Vec<Value>,
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
    /// Per template, in the case's order (cases with templates only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub templates: Vec<TemplateVerdict>,
    /// What the admitted object generates, in the side's order; `None`
    /// without templates, after an admission error, or when expansion failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated: Option<Vec<GeneratedObject>>,
    /// Why expansion failed, in the side's own words.
    #[serde(
        default,
        rename = "expandError",
        skip_serializing_if = "Option::is_none"
    )]
    pub expand_error: Option<String>,
}

/// One ExpansionTemplate accepted or refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TemplateVerdict {
    /// `metadata.name`.
    pub name: String,
    /// Whether the side took it in.
    pub accepted: bool,
    /// Accepted, but in a cycle of templates and so never used (the
    /// oracle's; sartor refuses such templates).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub conflict: bool,
    /// Where it was refused: `decode`, `upsert` (the oracle), `parse`,
    /// `cycle` (sartor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// Why it was refused, in the side's own words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl TemplateVerdict {
    /// Whether it takes part in expansion: accepted and in no cycle.
    pub fn used(&self) -> bool {
        self.accepted && !self.conflict
    }
}

/// One generated resource, mutated as `source: Generated`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GeneratedObject {
    /// The template that generated it.
    pub template: String,
    /// `mutated` or `unchanged`.
    pub outcome: String,
    /// The resource after mutation.
    #[serde(default)]
    pub object: Value,
}

impl GeneratedObject {
    /// What pairs it with the other side's: template, kind, name.
    pub fn key(&self) -> (String, String, String) {
        let kind = self
            .object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("");
        (
            self.template.clone(),
            kind.to_string(),
            name_of(&self.object).to_string(),
        )
    }
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
    /// The same case with only the templates `keep` says yes to.
    pub fn retain_templates(&self, keep: impl FnMut(usize, &Value) -> bool) -> Case {
        Case {
            templates: kept(&self.templates, keep),
            ..self.clone()
        }
    }

    /// The same case with only the mutators `keep` says yes to.
    pub fn retain_mutators(&self, keep: impl FnMut(usize, &Value) -> bool) -> Case {
        Case {
            mutators: kept(&self.mutators, keep),
            ..self.clone()
        }
    }
}

/// The items `keep` says yes to (given each one's position).
fn kept(items: &[Value], mut keep: impl FnMut(usize, &Value) -> bool) -> Vec<Value> {
    items
        .iter()
        .enumerate()
        .filter(|(i, item)| keep(*i, item))
        .map(|(_, item)| item.clone())
        .collect()
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
