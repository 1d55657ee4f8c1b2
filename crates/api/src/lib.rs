//! sartor's mutator API: the four mutator kinds as Kubernetes custom
//! resources, the CRDs generated from them, and the loader every reader of
//! mutator YAML uses.
//!
//! ```text
//!  files / dirs / stdin ──read_documents──▶ Document (origin + JSON value)
//!                                               │ mutator_from_document
//!                                               ▼
//!                                          LoadedMutator { origin, MutatorObject }
//!
//!  any JSON object (admission request, watch event)
//!        │ parse_mutator (apiVersion, kind, unknown fields, field paths)
//!        ▼
//!  MutatorObject, or ParseError { Kind name, problem }
//! ```
//!
//! sartor serves `mutations.sartor.dev/v1`. The loader also accepts Gatekeeper's
//! `mutations.gatekeeper.sh` `v1`, `v1beta1` and `v1alpha1` documents unchanged;
//! the spec is the same. Unknown fields are errors, so a typo such as
//! `pathTest:` never silently drops a guard.
//!
//! ```
//! use sartor_api::{MutatorKind, mutators_from_documents, read_documents_from_str};
//!
//! let yaml = "apiVersion: mutations.gatekeeper.sh/v1
//! kind: Assign
//! metadata: {name: always-pull}
//! spec:
//!   applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]
//!   location: 'spec.containers[name: *].imagePullPolicy'
//!   parameters: {assign: {value: Always}}
//! ---
//! apiVersion: mutations.sartor.dev/v1
//! kind: Assign
//! metadata: {name: typo}
//! spec: {location: spec.x, parameters: {asign: {value: 1}}}
//! ";
//! let (documents, errors) = read_documents_from_str("mutators.yaml", yaml, false);
//! let loaded = mutators_from_documents(&documents, errors);
//! // Gatekeeper's apiVersion reads unchanged...
//! assert_eq!(loaded.mutators.len(), 1);
//! assert_eq!(loaded.mutators[0].object.kind(), MutatorKind::Assign);
//! assert_eq!(loaded.mutators[0].object.name(), "always-pull");
//! // ...and an unknown field is an error naming the file, document and field.
//! assert_eq!(loaded.errors.len(), 1);
//! assert_eq!(
//!     loaded.errors[0].to_string(),
//!     "mutators.yaml: document 2 (Assign typo): spec.parameters.asign: unknown field \
//!      `asign`, expected one of `pathTests`, `assign`, `conditions`"
//! );
//! ```

mod assign;
mod assign_image;
mod assign_metadata;
mod common;
pub mod crd;
mod exclusion;
mod expansion;
mod loader;
mod matching;
mod modify_set;
mod parse;
mod protection;
mod provider;
mod report;
mod schema;
mod status;
pub mod validation;

use std::fmt;
use std::str::FromStr;

pub use assign::{Assign, AssignParameters, AssignSpec};
pub use assign_image::{AssignImage, AssignImageParameters, AssignImageSpec};
pub use assign_metadata::{AssignMetadata, AssignMetadataSpec, MetadataParameters};
pub use common::{
    AssignField, Condition, DataSource, ExternalData, FailurePolicy, FromMetadata, FromNamespace,
    MetadataField, PathTest, ValueCondition, ValueOperator,
};
pub use exclusion::{
    Exclusion, Exclusions, IS_NAMESPACE_CEL, NAMESPACE_OF_CEL, REQUEST_NAMESPACE_CEL,
    is_namespace_kind, namespace_of,
};
pub use expansion::{
    EXPANSION_GROUP, EXPANSION_VERSIONS, ExpansionTemplate, ExpansionTemplateSpec,
};
pub use loader::{
    Document, Input, LoadError, Loaded, LoadedMutator, LoadedProvider, LoadedTemplate, Origin,
    Problem, load_mutators, mutator_from_document, mutators_from_documents, provider_from_document,
    read_documents, read_documents_from_str, read_documents_with_stdin, template_from_document,
    visit_documents,
};
pub use matching::{
    ApplyTo, GroupVersionKind, InvalidWildcard, Kinds, LabelSelector, LabelSelectorRequirement,
    Match, Operation, OperationPattern, Scope, SelectorOperator, Source, SourcePattern,
    UnknownOperation, WILDCARD_PATTERN, Wildcard, cel_string,
};
pub use modify_set::{ModifySet, ModifySetParameters, ModifySetSpec, SetOperation, Values};
pub use parse::{
    Invalid, ParseError, api_group, invalid_name, is_expansion_template_document,
    is_mutator_document, json_type, parse_expansion_template, parse_mutator,
};
pub use protection::{
    ADMISSION_CONFIGURATION_KINDS, ADMISSION_REGISTRATION_GROUP, GATEKEEPER_PROTECTED_GROUPS,
    Protection, SARTOR_DOMAIN, protected,
};
pub use provider::{
    EXTERNAL_DATA_GROUP, PROVIDER_REQUEST_API_VERSION, PROVIDER_VERSIONS, Provider, ProviderItem,
    ProviderRequest, ProviderRequestBody, ProviderResponse, ProviderResponseBody, ProviderSpec,
    is_provider_document, parse_provider,
};
pub use report::{
    ObjectReference, REPORT_NAME, REPORT_SOURCE, REPORTS_API_VERSION, Report, ReportMetadata,
    ReportResult, ReportSummary,
};
pub use status::{MutatorAudit, MutatorError, MutatorPodStatus, MutatorStatus};

/// sartor's API group.
pub const GROUP: &str = "mutations.sartor.dev";

/// The label that exempts a namespace from mutation: the install's mutating
/// webhook skips namespaces that carry it (any value), and `sartor audit`
/// leaves their objects out.
pub const EXEMPTION_LABEL: &str = "admission.sartor.dev/ignore";
/// The label by which an admin asks the in-cluster audit to repair a
/// namespace's objects (value `true`): each object its scans and watches
/// find the mutators would change is patched as `sartor audit --fix`
/// patches it. Nothing is repaired anywhere else.
pub const REPAIR_LABEL: &str = "audit.sartor.dev/repair";
/// sartor's API version.
pub const VERSION: &str = "v1";
/// sartor's `apiVersion`.
pub const API_VERSION: &str = "mutations.sartor.dev/v1";
/// Gatekeeper's mutation API group, accepted by every reader.
pub const GATEKEEPER_GROUP: &str = "mutations.gatekeeper.sh";

/// The four mutator kinds, ordered as their names sort (the order mutators run in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MutatorKind {
    /// [`Assign`].
    Assign,
    /// [`AssignImage`].
    AssignImage,
    /// [`AssignMetadata`].
    AssignMetadata,
    /// [`ModifySet`].
    ModifySet,
}

/// A kind name that is not one of the four mutator kinds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a mutator kind (Assign, AssignImage, AssignMetadata, ModifySet)")]
pub struct UnknownKind(pub String);

impl MutatorKind {
    /// Every kind, in order.
    pub const ALL: [MutatorKind; 4] = [
        MutatorKind::Assign,
        MutatorKind::AssignImage,
        MutatorKind::AssignMetadata,
        MutatorKind::ModifySet,
    ];

    /// The kind's name, as in `kind:`.
    pub fn as_str(self) -> &'static str {
        match self {
            MutatorKind::Assign => "Assign",
            MutatorKind::AssignImage => "AssignImage",
            MutatorKind::AssignMetadata => "AssignMetadata",
            MutatorKind::ModifySet => "ModifySet",
        }
    }

    /// The Gatekeeper versions that serve this kind: AssignImage exists only
    /// in `v1alpha1`, the others in `v1`, `v1beta1` and `v1alpha1`.
    pub fn gatekeeper_versions(self) -> &'static [&'static str] {
        match self {
            MutatorKind::AssignImage => &["v1alpha1"],
            _ => &["v1", "v1beta1", "v1alpha1"],
        }
    }
}

impl fmt::Display for MutatorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for MutatorKind {
    type Err = UnknownKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        MutatorKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownKind(s.to_string()))
    }
}

/// A mutator of any kind, as read from the API or a file.
#[derive(Debug, Clone, PartialEq)]
pub enum MutatorObject {
    /// An [`Assign`].
    Assign(Assign),
    /// An [`AssignImage`].
    AssignImage(AssignImage),
    /// An [`AssignMetadata`].
    AssignMetadata(AssignMetadata),
    /// A [`ModifySet`].
    ModifySet(ModifySet),
}

impl MutatorObject {
    /// The kind.
    pub fn kind(&self) -> MutatorKind {
        match self {
            MutatorObject::Assign(_) => MutatorKind::Assign,
            MutatorObject::AssignImage(_) => MutatorKind::AssignImage,
            MutatorObject::AssignMetadata(_) => MutatorKind::AssignMetadata,
            MutatorObject::ModifySet(_) => MutatorKind::ModifySet,
        }
    }

    /// The object's metadata.
    pub fn metadata(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        match self {
            MutatorObject::Assign(m) => &m.metadata,
            MutatorObject::AssignImage(m) => &m.metadata,
            MutatorObject::AssignMetadata(m) => &m.metadata,
            MutatorObject::ModifySet(m) => &m.metadata,
        }
    }

    /// `metadata.name`, or `""` when unset (the loader rejects that).
    pub fn name(&self) -> &str {
        self.metadata().name.as_deref().unwrap_or_default()
    }

    /// `spec.location`.
    pub fn location(&self) -> &str {
        match self {
            MutatorObject::Assign(m) => &m.spec.location,
            MutatorObject::AssignImage(m) => &m.spec.location,
            MutatorObject::AssignMetadata(m) => &m.spec.location,
            MutatorObject::ModifySet(m) => &m.spec.location,
        }
    }

    /// `spec.match`.
    pub fn match_criteria(&self) -> &Match {
        match self {
            MutatorObject::Assign(m) => &m.spec.r#match,
            MutatorObject::AssignImage(m) => &m.spec.r#match,
            MutatorObject::AssignMetadata(m) => &m.spec.r#match,
            MutatorObject::ModifySet(m) => &m.spec.r#match,
        }
    }

    /// `spec.applyTo`; `None` for an AssignMetadata, which has none (it
    /// applies to every kind its `match` takes).
    pub fn apply_to(&self) -> Option<&[ApplyTo]> {
        match self {
            MutatorObject::Assign(m) => Some(&m.spec.apply_to),
            MutatorObject::AssignImage(m) => Some(&m.spec.apply_to),
            MutatorObject::ModifySet(m) => Some(&m.spec.apply_to),
            MutatorObject::AssignMetadata(_) => None,
        }
    }

    /// `spec.parameters.pathTests`; none for an AssignMetadata, whose key
    /// alone decides.
    pub fn path_tests(&self) -> &[PathTest] {
        match self {
            MutatorObject::Assign(m) => &m.spec.parameters.path_tests,
            MutatorObject::AssignImage(m) => &m.spec.parameters.path_tests,
            MutatorObject::ModifySet(m) => &m.spec.parameters.path_tests,
            MutatorObject::AssignMetadata(_) => &[],
        }
    }

    /// `spec.parameters.conditions` (sartor only), in order.
    pub fn conditions(&self) -> &[ValueCondition] {
        match self {
            MutatorObject::Assign(m) => &m.spec.parameters.conditions,
            MutatorObject::AssignImage(m) => &m.spec.parameters.conditions,
            MutatorObject::AssignMetadata(m) => &m.spec.parameters.conditions,
            MutatorObject::ModifySet(m) => &m.spec.parameters.conditions,
        }
    }

    /// The first field it uses that only sartor's API has (its path and what
    /// it is), or `None`: such a mutator needs sartor's apiVersion, since a
    /// Gatekeeper apiVersion always means exactly Gatekeeper's behaviour.
    pub fn sartor_extension(&self) -> Option<(&'static str, &'static str)> {
        let assign = match self {
            MutatorObject::Assign(m) => Some(&m.spec.parameters.assign),
            MutatorObject::AssignMetadata(m) => Some(&m.spec.parameters.assign),
            MutatorObject::AssignImage(_) | MutatorObject::ModifySet(_) => None,
        };
        if assign.is_some_and(|a| a.from_namespace.is_some()) {
            return Some((
                "spec.parameters.assign.fromNamespace",
                "a value from the Namespace",
            ));
        }
        // Any `remove`, even `false`: Gatekeeper's schema has no such field.
        if assign.is_some_and(|a| a.remove.is_some()) {
            return Some(("spec.parameters.assign.remove", "removal"));
        }
        if !self.conditions().is_empty() {
            return Some(("spec.parameters.conditions", "a value condition"));
        }
        // A pathTest's subPath is a prefix of the location: checking the
        // location is enough. One that does not parse is the engine's to report.
        if sartor_location::Path::parse(self.location()).is_ok_and(|p| p.uses_exclusion()) {
            return Some(("spec.location", "an exclusion ([key notin (...)])"));
        }
        None
    }

    /// The object as JSON, with sartor's `apiVersion`.
    ///
    /// # Errors
    /// Serialization errors (none are expected for these types).
    pub fn to_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        match self {
            MutatorObject::Assign(m) => serde_json::to_value(m),
            MutatorObject::AssignImage(m) => serde_json::to_value(m),
            MutatorObject::AssignMetadata(m) => serde_json::to_value(m),
            MutatorObject::ModifySet(m) => serde_json::to_value(m),
        }
    }
}

impl fmt::Display for MutatorObject {
    /// `Kind name`, the way errors name a mutator.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind(), self.name())
    }
}

/// Serde helper: skip a field equal to its default.
pub(crate) fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}
