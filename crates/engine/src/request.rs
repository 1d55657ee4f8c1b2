//! What the engine knows about an admission besides the object: its kind,
//! the operation, the namespace it lives in and where it came from.

use std::fmt;

use serde_json::Value;

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

/// The admission operation a mutation runs for. Gatekeeper mutates only on
/// these two; DELETE and CONNECT never reach the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    /// An object being created.
    Create,
    /// An object being updated.
    Update,
}

/// Whether the object is one a user wrote or one generated from another
/// (Gatekeeper's expansion of a Deployment's Pod template). `match.source`
/// selects on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Source {
    /// An object as submitted; what the webhook and the CLI mutate.
    #[default]
    Original,
    /// An object generated from another one.
    Generated,
}

/// Everything about one admission that matching needs besides the object.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// CREATE or UPDATE.
    pub operation: Operation,
    /// Original (the default) or Generated.
    pub source: Source,
    /// The namespace the object lives in, from the admission request (an
    /// object may omit `metadata.namespace`); `None` for cluster-scoped
    /// objects and for Namespace objects themselves.
    pub namespace: Option<&'a str>,
    /// The Namespace object named by `namespace`, when the caller has it;
    /// needed only by mutators with a `namespaceSelector`.
    pub namespace_object: Option<&'a Value>,
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
        self.group.is_empty() && self.kind == "Namespace"
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

// === impl Operation ===

impl Operation {
    /// Both operations, in Gatekeeper's order.
    pub const ALL: [Operation; 2] = [Operation::Create, Operation::Update];

    /// The admission spelling, `CREATE` or `UPDATE`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

// === impl Request ===

impl<'a> Request<'a> {
    /// A CREATE of an original object in `namespace`, with no Namespace object.
    pub fn create(namespace: Option<&'a str>) -> Request<'a> {
        Request {
            operation: Operation::Create,
            source: Source::Original,
            namespace,
            namespace_object: None,
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
