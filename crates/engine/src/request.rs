//! What the engine is asked to mutate: an [`Admission`] (the object, the
//! operation, its namespace and source, and where to find Namespace objects),
//! and the [`Request`] that matching reads once the namespace is resolved.

use std::collections::HashMap;
use std::fmt;

pub use sartor_api::is_namespace_kind;
pub use sartor_api::{Operation, Source};
use serde_json::Value;

use crate::external::{NoAnswers, ProviderAnswers};

/// An object's group, version and kind, as in its `apiVersion` and `kind`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gvk {
    /// The API group; empty for the core group (`v1` Pods, Namespaces).
    pub group: String,
    /// The version, such as `v1`.
    pub version: String,
    /// The kind, such as `Pod`.
    pub kind: String,
}

/// Everything about one object's admission but the object itself: what
/// [`System::mutate`](crate::System::mutate) takes beside the object, built
/// the same way by the webhook, `sartor mutate` and `sartor test`.
#[derive(Clone)]
pub struct Admission<'a> {
    /// The object's kind, read once from the object by [`Admission::new`].
    pub gvk: Gvk,
    /// CREATE or UPDATE; `None` for an object no operation admits (what
    /// expansion generates), which only mutators applying on every
    /// operation match, as in Gatekeeper.
    pub operation: Option<Operation>,
    /// Original (the default) or Generated.
    pub source: Source,
    /// The namespace it is admitted in: the admission request's (an object
    /// may omit `metadata.namespace`); `None` for cluster-scoped objects and
    /// Namespaces. [`Admission::new`] reads `metadata.namespace`.
    pub namespace: Option<String>,
    /// Where the Namespace object is found; asked only when a mutator that
    /// may apply has a `namespaceSelector` or takes a value from it.
    pub namespaces: &'a dyn NamespaceLookup,
    /// Whether to build the RFC 6902 patch from the admitted object to the
    /// result.
    pub patch: bool,
    /// Whether every change keeps the key of each element its globs and
    /// exclusions visited, so [`Change::path`](crate::Change::path) is
    /// concrete (the default). Without, changes of the first pass keep only
    /// their mutator and location; a caller that reads no paths saves a copy
    /// of a key per change.
    pub paths: bool,
    /// Whether to list the mutators that changed the object in the
    /// `sartor.dev/mutations` annotation ([`MUTATIONS_ANNOTATION`](crate::MUTATIONS_ANNOTATION));
    /// off by default, like Gatekeeper's `--mutation-annotations`.
    pub annotate: bool,
    /// The requesting user's name (`userInfo.username`), the key of
    /// externalData with `dataSource: Username`; `""` offline.
    pub username: &'a str,
    /// What external data providers answered: a caller's cache, or what it
    /// asked after a run that was
    /// [`unanswered`](crate::Mutation::unanswered).
    pub answers: &'a dyn ProviderAnswers,
}

/// Namespace objects by name, for `namespaceSelector` and `fromNamespace`.
/// Answers from memory: a caller that must fetch one does so before it calls
/// the engine (the webhook asks when [`System::needs_namespace`](crate::System::needs_namespace)).
pub trait NamespaceLookup: Sync {
    /// The Namespace named `name`, if known.
    fn namespace(&self, name: &str) -> Option<&Value>;
}

/// No Namespace objects: a mutator that needs one fails to match with an
/// error naming the namespace.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoNamespaces;

/// Everything about one admission that matching needs besides the object.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// CREATE or UPDATE; `None` for a generated object
    /// ([`Admission::operation`](Admission)).
    pub operation: Option<Operation>,
    /// Original (the default) or Generated.
    pub source: Source,
    /// The namespace the object lives in, from the admission request (an
    /// object may omit `metadata.namespace`); `None` for cluster-scoped
    /// objects and for Namespace objects themselves.
    pub namespace: Option<&'a str>,
    /// The Namespace object named by `namespace`, when the caller has it;
    /// needed only by mutators with a `namespaceSelector` or a value from the
    /// Namespace.
    pub namespace_object: Option<&'a Value>,
    /// The requesting user's name; `""` offline.
    pub username: &'a str,
}

// === impl Gvk ===

impl Gvk {
    /// A GVK from its parts.
    pub fn new(group: &str, version: &str, kind: &str) -> Gvk {
        Gvk {
            group: group.to_string(),
            version: version.to_string(),
            kind: kind.to_string(),
        }
    }

    /// Reads `apiVersion` (`group/version`, or just `version` for the core
    /// group) and `kind`; a missing part is empty.
    pub fn of(object: &Value) -> Gvk {
        let api_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let kind = object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        Gvk::new(group, version, kind)
    }

    /// Its `apiVersion`: `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether this is the core `Namespace` kind, which is its own namespace.
    pub fn is_namespace(&self) -> bool {
        is_namespace_kind(&self.group, &self.kind)
    }
}

impl fmt::Display for Gvk {
    /// `apps/v1 Deployment`, `v1 Pod`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.group.is_empty() {
            write!(f, "{}/", self.group)?;
        }
        write!(f, "{} {}", self.version, self.kind)
    }
}

// === impl Admission ===

impl<'a> Admission<'a> {
    /// A CREATE of the original `object`, admitted in its `metadata.namespace`
    /// (none for a Namespace), with no Namespace objects and no patch. Reads
    /// the object and keeps nothing of it.
    pub fn new(object: &Value) -> Admission<'a> {
        let gvk = Gvk::of(object);
        let namespace = object
            .get("metadata")
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str)
            .filter(|ns| !ns.is_empty() && !gvk.is_namespace())
            .map(str::to_string);
        Admission {
            gvk,
            operation: Some(Operation::Create),
            source: Source::Original,
            namespace,
            namespaces: &NoNamespaces,
            patch: false,
            paths: true,
            annotate: false,
            username: "",
            answers: &NoAnswers,
        }
    }

    /// The same admission for `operation`.
    #[must_use]
    pub fn operation(self, operation: Operation) -> Admission<'a> {
        Admission {
            operation: Some(operation),
            ..self
        }
    }

    /// The same object, admitted by no operation: what expansion generates.
    /// Gatekeeper mutates generated resources with an empty operation, which
    /// only mutators whose `applyTo` allows every operation match
    /// (`MutationApplyTo.MatchesOperation`); so does sartor.
    #[must_use]
    pub fn without_operation(self) -> Admission<'a> {
        Admission {
            operation: None,
            ..self
        }
    }

    /// The same admission of an object of `source`.
    #[must_use]
    pub fn source(self, source: Source) -> Admission<'a> {
        Admission { source, ..self }
    }

    /// The same admission in `namespace` (the admission request's).
    #[must_use]
    pub fn namespace(self, namespace: Option<&str>) -> Admission<'a> {
        Admission {
            namespace: namespace.map(str::to_string),
            ..self
        }
    }

    /// The same admission, finding Namespace objects in `namespaces`.
    #[must_use]
    pub fn namespaces(self, namespaces: &'a dyn NamespaceLookup) -> Admission<'a> {
        Admission { namespaces, ..self }
    }

    /// The same admission, requested by `username`.
    #[must_use]
    pub fn username(self, username: &'a str) -> Admission<'a> {
        Admission { username, ..self }
    }

    /// The same admission, with what external data providers answered.
    #[must_use]
    pub fn answers(self, answers: &'a dyn ProviderAnswers) -> Admission<'a> {
        Admission { answers, ..self }
    }

    /// The same admission, asking for the RFC 6902 patch.
    #[must_use]
    pub fn with_patch(self) -> Admission<'a> {
        Admission {
            patch: true,
            ..self
        }
    }

    /// The same admission, listing the mutators that changed the object in
    /// the `sartor.dev/mutations` annotation when `annotate`.
    #[must_use]
    pub fn annotate(self, annotate: bool) -> Admission<'a> {
        Admission { annotate, ..self }
    }

    /// The same admission, leaving the first pass's changes without the keys
    /// of the elements they changed ([`Admission::paths`]).
    #[must_use]
    pub fn without_paths(self) -> Admission<'a> {
        Admission {
            paths: false,
            ..self
        }
    }

    /// What matching reads of this admission besides the object. Its
    /// Namespace object is looked up when it has a namespace and
    /// `needs_namespace()` says a mutator that may apply needs it.
    pub(crate) fn request(&self, needs_namespace: impl FnOnce() -> bool) -> Request<'_> {
        let namespace = self.namespace.as_deref();
        let namespace_object = match namespace {
            Some(name) if needs_namespace() => self.namespaces.namespace(name),
            _ => None,
        };
        Request {
            operation: self.operation,
            source: self.source,
            namespace,
            namespace_object,
            username: self.username,
        }
    }
}

impl fmt::Debug for Admission<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admission")
            .field("object", &self.gvk.to_string())
            .field("operation", &self.operation)
            .field("source", &self.source)
            .field("namespace", &self.namespace)
            .field("patch", &self.patch)
            .field("paths", &self.paths)
            .field("annotate", &self.annotate)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

// === impl NamespaceLookup ===

impl NamespaceLookup for NoNamespaces {
    fn namespace(&self, _name: &str) -> Option<&Value> {
        None
    }
}

impl NamespaceLookup for HashMap<String, Value> {
    fn namespace(&self, name: &str) -> Option<&Value> {
        self.get(name)
    }
}

// === impl Request ===

impl<'a> Request<'a> {
    /// A CREATE of an original object in `namespace`, with no Namespace object.
    pub fn create(namespace: Option<&'a str>) -> Request<'a> {
        Request {
            operation: Some(Operation::Create),
            source: Source::Original,
            namespace,
            namespace_object: None,
            username: "",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn gvks_read_api_version_and_kind() {
        let deployment = Gvk::of(&json!({"apiVersion": "apps/v1", "kind": "Deployment"}));
        assert_eq!(deployment, Gvk::new("apps", "v1", "Deployment"));
        assert_eq!(deployment.to_string(), "apps/v1 Deployment");
        let pod = Gvk::of(&json!({"apiVersion": "v1", "kind": "Pod"}));
        assert_eq!(pod, Gvk::new("", "v1", "Pod"));
        assert_eq!(pod.to_string(), "v1 Pod");
        assert_eq!(Gvk::of(&json!({})), Gvk::default());
        assert!(Gvk::of(&json!({"apiVersion": "v1", "kind": "Namespace"})).is_namespace());
        assert!(!Gvk::new("example.com", "v1", "Namespace").is_namespace());
    }
}
