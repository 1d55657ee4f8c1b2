//! Gatekeeper's `ExpansionTemplate` (`expansion.gatekeeper.sh`), read
//! unchanged: which kinds generate which resource from which field, so a
//! Deployment can be previewed as the Pod it creates.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::matching::{ApplyTo, GroupVersionKind};

/// Gatekeeper's expansion API group.
pub const EXPANSION_GROUP: &str = "expansion.gatekeeper.sh";

/// The versions of [`EXPANSION_GROUP`] that serve `ExpansionTemplate`.
pub const EXPANSION_VERSIONS: [&str; 2] = ["v1alpha1", "v1beta1"];

/// An `ExpansionTemplate`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpansionTemplate {
    /// Its metadata; `name` identifies it.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What it expands into what.
    #[serde(default)]
    pub spec: ExpansionTemplateSpec,
}

/// `ExpansionTemplate.spec`, Gatekeeper's fields.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExpansionTemplateSpec {
    /// The kinds it expands (exact names, no globs).
    #[serde(default)]
    pub apply_to: Vec<ApplyTo>,
    /// The field of the parent holding the generated resource, as a
    /// dot-separated path (`spec.template`, `spec.jobTemplate`).
    #[serde(default)]
    pub template_source: String,
    /// The group, version and kind of the generated resource.
    #[serde(default, rename = "generatedGVK")]
    pub generated_gvk: GroupVersionKind,
    /// What Gatekeeper does with validation results on the generated
    /// resource; mutation does not read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforcement_action: Option<String>,
}
