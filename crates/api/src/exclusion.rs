//! The namespaces sartor never mutates, as its install leaves them out: one
//! rule for the webhook's skip rules, the audit and the MAP export.

use serde_json::{Map, Value};

use crate::{EXEMPTION_LABEL, Wildcard};

/// Whether `group` and `kind` name the core `Namespace` kind, which is its
/// own namespace (for the namespace rules, its name is the namespace);
/// [`IS_NAMESPACE_CEL`] in CEL.
pub fn is_namespace_kind(group: &str, kind: &str) -> bool {
    group.is_empty() && kind == "Namespace"
}

/// [`is_namespace_kind`] of the object an admission request carries, in CEL
/// (for a MutatingAdmissionPolicy or a webhook's match condition).
pub const IS_NAMESPACE_CEL: &str =
    r#"(request.kind.group == "" && request.kind.kind == "Namespace")"#;

/// The namespace of an admission request, in CEL: `""` for a cluster-scoped
/// object, whose request has no `namespace` key at all (reading it errs:
/// "no such key: namespace", kube-apiserver 1.37.2), so every read is
/// guarded with `has()`.
pub const REQUEST_NAMESPACE_CEL: &str = r#"(has(request.namespace) ? request.namespace : "")"#;

/// [`namespace_of`] the object an admission request carries, in CEL: a
/// Namespace's own name (`""` if it has none yet), else the request's
/// namespace ([`REQUEST_NAMESPACE_CEL`]).
pub const NAMESPACE_OF_CEL: &str = r#"((request.kind.group == "" && request.kind.kind == "Namespace") ? (has(object.metadata.name) ? object.metadata.name : "") : (has(request.namespace) ? request.namespace : ""))"#;

/// The namespace an object is judged by for the namespace rules: its own
/// name for a Namespace, else its `namespace` (empty: cluster-scoped).
pub fn namespace_of<'a>(group: &str, kind: &str, namespace: &'a str, name: &'a str) -> &'a str {
    match is_namespace_kind(group, kind) {
        true => name,
        false => namespace,
    }
}

/// The namespaces left out of mutation: sartor's own, the `--exclude-namespace`
/// names and globs, and any Namespace labelled [`EXEMPTION_LABEL`] (which the
/// install's namespaceSelector leaves out before sartor is called).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exclusions {
    /// The namespace sartor runs in.
    pub own_namespace: String,
    /// Names or globs (`kube-system`, `*-system`).
    pub namespaces: Vec<Wildcard>,
}

/// Why a namespace is left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exclusion {
    /// It is sartor's own namespace.
    OwnNamespace,
    /// An excluded name or glob matches it.
    Excluded,
    /// Its Namespace carries [`EXEMPTION_LABEL`].
    Exempt,
}

impl Exclusions {
    /// sartor in `own_namespace`, leaving `namespaces` (names or globs) out too.
    pub fn new(own_namespace: &str, namespaces: Vec<Wildcard>) -> Exclusions {
        Exclusions {
            own_namespace: own_namespace.to_string(),
            namespaces,
        }
    }

    /// Why objects in `namespace` are left out, if they are; `labels` are
    /// its Namespace's labels when known. Cluster-scoped objects (an empty
    /// namespace) never are.
    pub fn of(&self, namespace: &str, labels: Option<&Map<String, Value>>) -> Option<Exclusion> {
        if namespace.is_empty() {
            None
        } else if namespace == self.own_namespace {
            Some(Exclusion::OwnNamespace)
        } else if self.namespaces.iter().any(|w| w.matches(namespace)) {
            Some(Exclusion::Excluded)
        } else if labels.is_some_and(|labels| labels.contains_key(EXEMPTION_LABEL)) {
            Some(Exclusion::Exempt)
        } else {
            None
        }
    }

    /// The excluded names, sartor's own first, and the excluded globs: a
    /// label selector can name the first, only a condition the second.
    pub fn names_and_globs(&self) -> (Vec<&str>, Vec<&Wildcard>) {
        let (globs, names): (Vec<&Wildcard>, Vec<&Wildcard>) = self
            .namespaces
            .iter()
            .partition(|w| w.as_str().contains('*'));
        let names = std::iter::once(self.own_namespace.as_str())
            .chain(names.into_iter().map(Wildcard::as_str))
            .collect();
        (names, globs)
    }
}

impl Default for Exclusions {
    /// The install's defaults: sartor in `sartor-system`, `kube-system` left out.
    fn default() -> Exclusions {
        Exclusions::new(
            "sartor-system",
            Wildcard::new("kube-system").into_iter().collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn exclusions() -> Exclusions {
        Exclusions::new(
            "sartor",
            ["kube-system", "*-sandbox"]
                .into_iter()
                .filter_map(|w| Wildcard::new(w).ok())
                .collect(),
        )
    }

    #[test]
    fn a_namespace_is_left_out_by_name_glob_label_or_being_sartors() {
        let exclusions = exclusions();
        let labelled = json!({EXEMPTION_LABEL: ""});
        let labels = labelled.as_object();
        assert_eq!(exclusions.of("sartor", None), Some(Exclusion::OwnNamespace));
        assert_eq!(
            exclusions.of("kube-system", None),
            Some(Exclusion::Excluded)
        );
        assert_eq!(
            exclusions.of("ci-sandbox", labels),
            Some(Exclusion::Excluded)
        );
        assert_eq!(exclusions.of("shop", labels), Some(Exclusion::Exempt));
        assert_eq!(exclusions.of("shop", None), None);
        assert_eq!(exclusions.of("shop", json!({"a": "b"}).as_object()), None);
        assert_eq!(exclusions.of("", labels), None);
    }

    #[test]
    fn the_cel_spells_the_same_test() {
        assert!(NAMESPACE_OF_CEL.starts_with(&format!("({IS_NAMESPACE_CEL} ?")));
        assert!(NAMESPACE_OF_CEL.ends_with(&format!(": {REQUEST_NAMESPACE_CEL})")));
    }

    #[test]
    fn a_namespace_is_judged_by_its_own_name() {
        assert_eq!(namespace_of("", "Namespace", "", "shop"), "shop");
        assert_eq!(namespace_of("", "Pod", "shop", "web"), "shop");
        assert_eq!(namespace_of("example.com", "Namespace", "", "x"), "");
    }

    #[test]
    fn names_go_to_a_selector_and_globs_to_a_condition() {
        let exclusions = exclusions();
        let (names, globs) = exclusions.names_and_globs();
        assert_eq!(names, ["sartor", "kube-system"]);
        assert_eq!(
            globs.iter().map(|w| w.as_str()).collect::<Vec<_>>(),
            ["*-sandbox"]
        );
    }
}
