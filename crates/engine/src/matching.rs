//! A mutator's `match` criteria, compiled: which objects of the kinds it
//! applies to it mutates. Rules are Gatekeeper's (`pkg/mutation/match`):
//! criteria are ANDed, an empty criterion matches everything, and a
//! cluster-scoped object passes the namespace criteria.

use sartor_api::{
    Kinds, LabelSelector, Match, Scope, SelectorOperator, Source, SourcePattern, Wildcard,
};
use sartor_location::{Node, Path};
use serde_json::{Map, Value};

use crate::labels::{Selector, SelectorError};
use crate::request::{Gvk, Request};

/// Compiled `match` criteria.
#[derive(Debug, Clone, PartialEq)]
pub struct Matcher {
    kinds: Vec<Kinds>,
    scope: Scope,
    namespaces: Vec<Wildcard>,
    excluded_namespaces: Vec<Wildcard>,
    label_selector: Option<Selector>,
    namespace_selector: Option<Selector>,
    name: Option<Wildcard>,
    source: SourcePattern,
}

/// A `match` that cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MatchCompileError {
    /// A label selector the API server would reject.
    #[error("match.{field}: {source}")]
    Selector {
        /// `labelSelector` or `namespaceSelector`.
        field: &'static str,
        /// Why.
        #[source]
        source: SelectorError,
    },
}

/// Matching could not decide.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MatchError {
    /// A namespaceSelector needs the labels of a Namespace the caller did not
    /// provide. Gatekeeper fails the same way rather than guess.
    #[error(
        "its namespaceSelector needs the labels of Namespace {namespace:?}, which was not provided"
    )]
    NamespaceUnknown {
        /// The namespace the object is in.
        namespace: String,
    },
    /// A value `fromNamespace` needs the Namespace the caller did not provide.
    #[error("its value comes from Namespace {namespace:?}, which was not provided")]
    ValueNamespaceUnknown {
        /// The namespace the object is in.
        namespace: String,
    },
}

// === impl Matcher ===

impl Matcher {
    /// Compiles `criteria`.
    ///
    /// # Errors
    /// A [`MatchCompileError`] for an invalid label or namespace selector.
    pub fn compile(criteria: &Match) -> Result<Matcher, MatchCompileError> {
        let selector = |field, selector: &Option<LabelSelector>| {
            selector
                .as_ref()
                .map(compile_selector)
                .transpose()
                .map_err(|source| MatchCompileError::Selector { field, source })
        };
        Ok(Matcher {
            kinds: criteria.kinds.clone(),
            scope: criteria.scope.unwrap_or(Scope::All),
            namespaces: criteria.namespaces.clone(),
            excluded_namespaces: criteria.excluded_namespaces.clone(),
            label_selector: selector("labelSelector", &criteria.label_selector)?,
            namespace_selector: selector("namespaceSelector", &criteria.namespace_selector)?,
            // Gatekeeper reads an empty name as "no name criterion".
            name: criteria.name.clone().filter(|n| !n.as_str().is_empty()),
            source: criteria.source.unwrap_or(SourcePattern::All),
        })
    }

    /// Whether `object` (of kind `gvk`, admitted as `request`) meets every
    /// criterion, checked in Gatekeeper's order so the same objects fail the
    /// same way.
    ///
    /// # Errors
    /// [`MatchError::NamespaceUnknown`] when a namespaceSelector is reached for
    /// a namespaced object whose Namespace the request does not carry.
    pub fn matches(
        &self,
        object: &Value,
        gvk: &Gvk,
        request: &Request<'_>,
    ) -> Result<bool, MatchError> {
        let namespace = namespace_of(object, request);
        let is_namespace = gvk.is_namespace();
        // The namespace the namespace criteria compare: a Namespace is its own.
        let compared_namespace = if is_namespace {
            Some(metadata_str(object, "name").unwrap_or_default())
        } else {
            namespace
        };
        let matches = self.kinds_match(gvk)
            && self.scope_match(is_namespace, namespace.is_some())
            && (self.namespaces.is_empty()
                || compared_namespace
                    .is_none_or(|ns| self.namespaces.iter().any(|w| w.matches(ns))))
            && compared_namespace
                .is_none_or(|ns| !self.excluded_namespaces.iter().any(|w| w.matches(ns)))
            && self
                .label_selector
                .as_ref()
                .is_none_or(|s| s.matches(labels(object)));
        if !matches || !self.namespace_selector_match(object, is_namespace, namespace, request)? {
            return Ok(false);
        }
        Ok(self.name_match(object) && self.source_match(request.source))
    }

    /// Whether it may read the object's labels: a labelSelector, or a
    /// namespaceSelector (a Namespace is its own namespace: the selector
    /// reads the object's labels).
    pub(crate) fn reads_labels(&self) -> bool {
        self.label_selector.is_some() || self.namespace_selector.is_some()
    }

    /// Its `match.kinds`.
    pub fn kinds(&self) -> &[Kinds] {
        &self.kinds
    }

    /// Whether `match.kinds` allows `gvk` (any version).
    pub fn kinds_match(&self, gvk: &Gvk) -> bool {
        self.kinds.is_empty()
            || self.kinds.iter().any(|entry| {
                let any_of = |list: &[String], value: &str| {
                    list.is_empty() || list.iter().any(|item| item == "*" || item == value)
                };
                any_of(&entry.kinds, &gvk.kind) && any_of(&entry.api_groups, &gvk.group)
            })
    }

    fn scope_match(&self, is_namespace: bool, has_namespace: bool) -> bool {
        match self.scope {
            Scope::Cluster => is_namespace || !has_namespace,
            Scope::Namespaced => !is_namespace && has_namespace,
            Scope::All => true,
        }
    }

    fn namespace_selector_match(
        &self,
        object: &Value,
        is_namespace: bool,
        namespace: Option<&str>,
        request: &Request<'_>,
    ) -> Result<bool, MatchError> {
        let Some(selector) = &self.namespace_selector else {
            return Ok(true);
        };
        if is_namespace {
            return Ok(selector.matches(labels(object)));
        }
        match (namespace, request.namespace_object) {
            (None, None) => Ok(true),
            (_, Some(namespace_object)) => Ok(selector.matches(labels(namespace_object))),
            (Some(namespace), None) => Err(MatchError::NamespaceUnknown {
                namespace: namespace.to_string(),
            }),
        }
    }

    fn name_match(&self, object: &Value) -> bool {
        let Some(pattern) = &self.name else {
            return true;
        };
        // A missing name reads as "", which `*` matches, as in Gatekeeper.
        pattern.matches(metadata_str(object, "name").unwrap_or_default())
            || pattern
                .matches_generate_name(metadata_str(object, "generateName").unwrap_or_default())
    }

    fn source_match(&self, source: Source) -> bool {
        self.source.covers(source)
    }

    /// Whether this matcher has a namespaceSelector (and so may need the
    /// object's Namespace).
    pub fn needs_namespace(&self) -> bool {
        self.namespace_selector.is_some()
    }

    /// Its `match.scope` (`*` when left out).
    pub fn scope(&self) -> Scope {
        self.scope
    }

    /// Its `match.source` (`All` when left out).
    pub fn source(&self) -> SourcePattern {
        self.source
    }

    /// Why no object of any kind can meet its criteria, if that can be told
    /// without an object: a labelSelector no label set satisfies. (Criteria
    /// that only rule out namespaced objects are [`Self::never_matches_namespaced`].)
    pub fn never_matches(&self) -> Option<String> {
        let selector = self.label_selector.as_ref()?;
        (!selector.satisfiable_with(None))
            .then(|| "its labelSelector requires a label to be both present and absent, or to have a value none of its requirements allows".to_string())
    }

    /// Why no namespaced object can meet its criteria (cluster-scoped ones
    /// pass the namespace criteria), if that can be told without an object.
    pub fn never_matches_namespaced(&self) -> Option<String> {
        if !self.namespaces.is_empty()
            && self.namespaces.iter().all(|included| {
                self.excluded_namespaces
                    .iter()
                    .any(|excluded| wildcard_covers(excluded, included))
            })
        {
            return Some(
                "every namespace in match.namespaces is also in match.excludedNamespaces"
                    .to_string(),
            );
        }
        let selector = self.namespace_selector.as_ref()?;
        (!selector.satisfiable_with(None))
            .then(|| "its namespaceSelector requires a label to be both present and absent, or to have a value none of its requirements allows".to_string())
    }

    /// Whether some object may meet both `self` and `other` (kinds aside):
    /// false only when a criterion rules it out for sure. With `labels`
    /// false, label selectors are not compared (labels may change between
    /// the two matches).
    pub fn may_overlap(&self, other: &Matcher, labels: bool) -> bool {
        let scopes_disjoint = matches!(
            (self.scope, other.scope),
            (Scope::Cluster, Scope::Namespaced) | (Scope::Namespaced, Scope::Cluster)
        );
        let sources_disjoint = matches!(
            (self.source, other.source),
            (SourcePattern::Original, SourcePattern::Generated)
                | (SourcePattern::Generated, SourcePattern::Original)
        );
        let exact = |name: &Option<Wildcard>| {
            name.as_ref()
                .filter(|n| !n.as_str().contains('*'))
                .map(|n| n.as_str().to_string())
        };
        let names_disjoint =
            matches!((exact(&self.name), exact(&other.name)), (Some(a), Some(b)) if a != b);
        let labels_disjoint = labels
            && match (&self.label_selector, &other.label_selector) {
                (Some(a), b) => !a.satisfiable_with(b.as_ref()),
                (None, Some(b)) => !b.satisfiable_with(None),
                (None, None) => false,
            };
        !(scopes_disjoint || sources_disjoint || names_disjoint || labels_disjoint)
    }

    /// Whether every object `other` matches, `self` matches too (kinds
    /// aside): each of its criteria is absent, or as wide as `other`'s. A
    /// sufficient test: `false` may still be a cover it cannot prove.
    pub fn covers(&self, other: &Matcher) -> bool {
        let selector_covers =
            |mine: &Option<Selector>, theirs: &Option<Selector>| match (mine, theirs) {
                (None, _) => true,
                (Some(mine), Some(theirs)) => mine.is_implied_by(theirs),
                (Some(mine), None) => mine.is_empty(),
            };
        (self.scope == Scope::All || self.scope == other.scope)
            && (self.source == SourcePattern::All || self.source == other.source)
            && (self.namespaces.is_empty()
                || (!other.namespaces.is_empty()
                    && other.namespaces.iter().all(|theirs| {
                        self.namespaces
                            .iter()
                            .any(|mine| wildcard_covers(mine, theirs))
                    })))
            && self.excluded_namespaces.iter().all(|mine| {
                other
                    .excluded_namespaces
                    .iter()
                    .any(|theirs| wildcard_covers(theirs, mine))
            })
            && selector_covers(&self.label_selector, &other.label_selector)
            && selector_covers(&self.namespace_selector, &other.namespace_selector)
            && (self.name.is_none() || self.name == other.name)
    }

    /// The label keys its selectors read on the object itself: the
    /// labelSelector's, and the namespaceSelector's when the object may be a
    /// Namespace (which is its own namespace).
    pub fn label_keys(&self, namespaces_too: bool) -> Vec<&str> {
        let mut keys: Vec<&str> = self
            .label_selector
            .iter()
            .flat_map(Selector::keys)
            .collect();
        if namespaces_too {
            keys.extend(self.namespace_selector.iter().flat_map(Selector::keys));
        }
        keys
    }
}

fn compile_selector(selector: &LabelSelector) -> Result<Selector, SelectorError> {
    let expressions: Vec<(&str, SelectorOperator, &[String])> = selector
        .match_expressions
        .iter()
        .map(|e| (e.key.as_str(), e.operator, e.values.as_slice()))
        .collect();
    Selector::new(
        selector
            .match_labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str())),
        expressions,
    )
}

/// The namespace an object lives in: the request's, else its own
/// `metadata.namespace`; `None` when neither names one.
pub(crate) fn namespace_of<'a>(object: &'a Value, request: &Request<'a>) -> Option<&'a str> {
    request
        .namespace
        .or_else(|| metadata_str(object, "namespace"))
        .filter(|ns| !ns.is_empty())
}

/// What a write may change of what match criteria read of an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum MatchInput {
    /// Nothing: outside `metadata`, or its annotations or other fields.
    Untouched,
    /// `metadata.labels`: read by labelSelectors.
    Labels,
    /// The name, generateName or namespace, or all of `metadata`: read by
    /// name and namespace criteria.
    Identity,
}

/// What a write at `location` may change of what match criteria read.
pub(crate) fn input_written(location: &Path) -> MatchInput {
    match location.nodes() {
        [Node::Field(root), rest @ ..] if root == "metadata" => match rest.first() {
            Some(Node::Field(field)) => match field.as_str() {
                "labels" => MatchInput::Labels,
                "name" | "generateName" | "namespace" => MatchInput::Identity,
                _ => MatchInput::Untouched,
            },
            Some(Node::List(_)) | None => MatchInput::Identity,
        },
        _ => MatchInput::Untouched,
    }
}

pub(crate) fn metadata_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata")?.get(field)?.as_str()
}

fn labels(object: &Value) -> Option<&Map<String, Value>> {
    object.get("metadata")?.get("labels")?.as_object()
}

/// Whether every name `inner` matches, `outer` matches too: equal patterns,
/// or `outer` a glob whose fixed part `inner` keeps (`kube-*` covers
/// `kube-system` and `kube-sys*`; `*` covers everything).
fn wildcard_covers(outer: &Wildcard, inner: &Wildcard) -> bool {
    if outer == inner {
        return true;
    }
    let (o, i) = (outer.as_str(), inner.as_str());
    match (o.strip_prefix('*'), o.strip_suffix('*')) {
        (Some(rest), Some(_)) => {
            let middle = rest.strip_suffix('*').unwrap_or(rest);
            i.trim_matches('*').contains(middle)
        }
        (Some(suffix), None) => !i.ends_with('*') && i.ends_with(suffix),
        (None, Some(prefix)) => !i.starts_with('*') && i.starts_with(prefix),
        (None, None) => false,
    }
}
