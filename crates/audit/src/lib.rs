//! sartor's audit without a cluster: what the mutators would change in
//! objects already stored, decided object by object with the webhook's
//! engine, and the findings the in-cluster audit keeps as OpenReports
//! reports. The controller lists objects and writes reports (cluster I/O);
//! `sartor-offline` prints the findings (text, JSON, YAML, JUnit); this crate
//! decides, with no cluster client (checked by `tests/tests/architecture.rs`).
//!
//! ```text
//!  a listed object ──left_out? (the install's exclusions, sartor's own reports)
//!    ──audit: System::mutate as the webhook would on its next write──▶
//!  Audited: would change (mutators, paths, the object after) | could not be mutated (why)
//!    ──Reports::add──▶ one Report per namespace (ClusterReport: cluster-scoped)
//! ```
//!
//! ```
//! use std::collections::HashMap;
//!
//! use sartor_audit::{Keep, Outcome, Resource, audit};
//! use sartor_engine::{Operation, compile};
//!
//! let (documents, errors) = sartor_api::read_documents_from_str(
//!     "pull.yaml",
//!     "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {name: pull}\n\
//!      spec:\n  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]\n  \
//!      location: 'spec.containers[name: *].imagePullPolicy'\n  \
//!      parameters: {assign: {value: Always}}\n",
//!     false,
//! );
//! let system = compile(sartor_api::mutators_from_documents(&documents, errors)).system;
//! let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
//!     "metadata": {"name": "web", "namespace": "shop"},
//!     "spec": {"containers": [{"name": "web", "image": "nginx"}]}});
//! let pods = Resource::new("", "v1", "Pod", "pods");
//! let found = audit(&system, &HashMap::new(), Operation::Update, pod, &pods, Keep::Changes);
//! let Some(Outcome::Changes { paths, .. }) = found.map(|found| found.outcome) else {
//!     panic!("the Pod would change");
//! };
//! assert_eq!(paths, ["spec.containers[name: web].imagePullPolicy"]);
//! ```

use std::collections::{BTreeMap, HashMap};

use sartor_api::{Exclusions, namespace_of};
use sartor_engine::{Admission, Mutation, MutatorId, Operation, System};
use serde_json::Value;

mod reports;

pub use reports::{MAX_RESULTS, ObjectKey, Reports, key};

/// A kind as it is served: its group, version, kind and resource (plural);
/// the cluster client's `ApiResource` without the cluster client.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Resource {
    /// The API group; empty for the core group.
    pub group: String,
    /// The version it was listed as.
    pub version: String,
    /// `group/version` (`version` for the core group).
    pub api_version: String,
    /// The kind, such as `Pod`.
    pub kind: String,
    /// The resource, such as `pods`.
    pub plural: String,
}

impl Resource {
    /// `kind` of `group`/`version`, served as `plural`.
    pub fn new(group: &str, version: &str, kind: &str, plural: &str) -> Resource {
        Resource {
            group: group.to_string(),
            version: version.to_string(),
            api_version: match group {
                "" => version.to_string(),
                group => format!("{group}/{version}"),
            },
            kind: kind.to_string(),
            plural: plural.to_string(),
        }
    }

    /// `Kind.group/version` (`Kind.core/version` for the core group): how the
    /// summary names a kind listed.
    pub fn label(&self) -> String {
        let group = match self.group.as_str() {
            "" => "core",
            group => group,
        };
        format!("{}.{group}/{}", self.kind, self.version)
    }
}

/// One object the mutators would change, or could not mutate.
#[derive(Debug, Clone, PartialEq)]
pub struct Audited {
    /// Which object.
    pub object: Stored,
    /// What the mutators would do to it.
    pub outcome: Outcome,
}

/// Where a stored object is: its resource (group, version, kind, plural),
/// namespace and name.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// The resource it was listed as.
    pub resource: Resource,
    /// Its namespace; `None` for a cluster-scoped object.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// Its uid, as listed (for the reports' object references).
    pub uid: Option<String>,
}

/// What the mutators would do to one object.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// They would change it.
    Changes {
        /// The mutators that would change it, in the order they would.
        mutators: Vec<MutatorId>,
        /// Every path they would change (concrete: globs pinned to elements).
        paths: Vec<String>,
        /// The object as listed (managed fields left out), when the audit
        /// was asked to keep it ([`Keep::Before`]: a diff). Kept or not,
        /// the engine mutates the listed object itself, never a copy.
        before: Option<Value>,
        /// The object as the webhook would store it.
        after: Value,
        /// The mutation itself: each change with its pass.
        mutation: Box<Mutation>,
    },
    /// The webhook could not mutate it (it would answer per `--on-error`).
    Failed(String),
}

/// What an audit keeps of an object that would change, beyond its
/// mutators, paths and mutation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Nothing more (a listing, the reports).
    Changes,
    /// The object as listed too, for a diff: a copy of each object before
    /// its mutation, the one copy a scan otherwise never makes.
    Before,
    /// The JSON patch of the change (a repair).
    Patch,
}

/// Whether the webhook never sees `object` (of `resource`), so an audit
/// leaves it out: it lives in (or, a Namespace, is) a namespace `exclusions`
/// leave out; `namespaces` are the Namespace objects, for their exemption
/// label. Sartor's own audit reports are left out too: sartor writes them,
/// and its own writes are never mutated, so a mutator of every kind would
/// find them every scan.
pub fn left_out(
    exclusions: &Exclusions,
    object: &Value,
    resource: &Resource,
    namespaces: &HashMap<String, Value>,
) -> bool {
    if is_sartors_report(object, resource) {
        return true;
    }
    let (namespace, name) = namespace_and_name(object);
    let namespace = namespace_of(&resource.group, &resource.kind, namespace, name);
    let labels = namespaces
        .get(namespace)
        .and_then(|object| object.pointer("/metadata/labels"))
        .and_then(Value::as_object);
    exclusions.of(namespace, labels).is_some()
}

/// Whether `object` is one of the audit's own reports.
fn is_sartors_report(object: &Value, resource: &Resource) -> bool {
    resource.group == "openreports.io"
        && object.pointer("/metadata/name").and_then(Value::as_str) == Some(sartor_api::REPORT_NAME)
        && object
            .pointer("/metadata/labels/app.kubernetes.io~1managed-by")
            .and_then(Value::as_str)
            == Some(sartor_api::REPORT_SOURCE)
}

/// What a scan went through.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Each kind listed, as `Kind.group/version`, with how many objects.
    pub kinds: BTreeMap<String, usize>,
    /// Objects the mutators would change.
    pub changed: usize,
    /// Objects they could not mutate.
    pub failed: usize,
    /// The kinds left out because RBAC does not let sartor list them, as the
    /// API server refused (only when the scan goes on past them).
    pub forbidden: Vec<String>,
}

impl Summary {
    /// Every object listed.
    pub fn scanned(&self) -> usize {
        self.kinds.values().sum()
    }
}

/// An object's `metadata.namespace` and `metadata.name` (`""` when absent).
pub fn namespace_and_name(object: &Value) -> (&str, &str) {
    let metadata = object.get("metadata");
    let field = |name: &str| {
        metadata
            .and_then(|metadata| metadata.get(name))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    (field("namespace"), field("name"))
}

/// One object through `system`, mutated in place: `None` when it would not
/// change. `keep` says what else is kept of it (the object as listed, the
/// JSON patch a repair sends).
pub fn audit(
    system: &System,
    namespaces: &HashMap<String, Value>,
    operation: Operation,
    object: Value,
    resource: &Resource,
    keep: Keep,
) -> Option<Audited> {
    let metadata = |field: &str| {
        object
            .get("metadata")
            .and_then(|metadata| metadata.get(field))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let name = metadata("name").unwrap_or_default();
    let namespace = metadata("namespace");
    let uid = metadata("uid");
    let mut after = without_managed_fields(object);
    let admission = Admission::new(&after)
        .operation(operation)
        .namespace(namespace.as_deref())
        .namespaces(namespaces);
    let admission = match keep {
        Keep::Patch => admission.with_patch(),
        Keep::Changes | Keep::Before => admission,
    };
    let before = (keep == Keep::Before).then(|| after.clone());
    let outcome = match system.mutate(&admission, &mut after) {
        Err(error) => Outcome::Failed(error.reason.to_string()),
        Ok(mutation) if mutation.unanswered => Outcome::Failed(
            "a mutator takes external data, which an audit does not ask providers for".to_string(),
        ),
        Ok(mutation) if !mutation.mutated => return None,
        Ok(mutation) => {
            let mutators: Vec<MutatorId> = mutation.applied().into_iter().cloned().collect();
            let mut paths: Vec<String> = Vec::new();
            for change in &mutation.changes {
                let path = change.path().to_string();
                if !paths.contains(&path) {
                    paths.push(path);
                }
            }
            Outcome::Changes {
                mutators,
                paths,
                before,
                after,
                mutation: Box::new(mutation),
            }
        }
    };
    Some(Audited {
        object: Stored {
            resource: resource.clone(),
            namespace,
            name,
            uid,
        },
        outcome,
    })
}

/// `object` without `metadata.managedFields` (as `kubectl get` shows it).
pub fn without_managed_fields(mut object: Value) -> Value {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    object
}

#[cfg(test)]
mod tests {
    use sartor_api::{EXEMPTION_LABEL, Wildcard};
    use serde_json::json;

    use super::*;

    #[test]
    fn the_webhooks_excluded_namespaces_are_left_out() {
        let exclusions = Exclusions::new(
            "sartor-system",
            ["kube-system", "*-sandbox"]
                .into_iter()
                .filter_map(|pattern| Wildcard::new(pattern).ok())
                .collect(),
        );
        let namespaces: HashMap<String, Value> = [
            json!({"metadata": {"name": "quiet", "labels": {EXEMPTION_LABEL: ""}}}),
            json!({"metadata": {"name": "shop", "labels": {"team": "core"}}}),
        ]
        .into_iter()
        .map(|object| (namespace_and_name(&object).1.to_string(), object))
        .collect();
        let pods = Resource::new("", "v1", "Pod", "pods");
        let pod = |namespace: &str| json!({"metadata": {"name": "web", "namespace": namespace}});
        let left_out =
            |object: &Value, resource: &Resource, namespaces: &HashMap<String, Value>| {
                left_out(&exclusions, object, resource, namespaces)
            };
        let none = HashMap::new();
        assert!(left_out(&pod("sartor-system"), &pods, &none));
        assert!(left_out(&pod("kube-system"), &pods, &none));
        assert!(left_out(&pod("dev-sandbox"), &pods, &none));
        assert!(left_out(&pod("quiet"), &pods, &namespaces));
        assert!(!left_out(&pod("shop"), &pods, &namespaces));
        assert!(!left_out(&pod("shop"), &pods, &none));
        // The audit's own reports, and only those.
        let reports = Resource::new("openreports.io", "v1alpha1", "Report", "reports");
        let report = |name: &str, managed_by: &str| {
            json!({"metadata": {"name": name, "namespace": "shop",
                                "labels": {"app.kubernetes.io/managed-by": managed_by}}})
        };
        assert!(left_out(&report("sartor-audit", "sartor"), &reports, &none));
        assert!(!left_out(
            &report("sartor-audit", "kyverno"),
            &reports,
            &none
        ));
        assert!(!left_out(&report("nightly", "sartor"), &reports, &none));
    }
}
