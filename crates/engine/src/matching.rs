//! A mutator's `match` criteria, compiled: which objects of the kinds it
//! applies to it mutates. Rules are Gatekeeper's (`pkg/mutation/match`):
//! criteria are ANDed, an empty criterion matches everything, and a
//! cluster-scoped object passes the namespace criteria.

use sartor_api::{Kinds, LabelSelector, Match, Scope, Source as SourceCriterion, Wildcard};
use serde_json::{Map, Value};

use crate::labels::{Operator, Selector, SelectorError};
use crate::request::{Gvk, Request, Source};

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
    source: SourceCriterion,
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
            source: criteria.source.unwrap_or(SourceCriterion::All),
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
        match self.source {
            SourceCriterion::All => true,
            SourceCriterion::Original => source == Source::Original,
            SourceCriterion::Generated => source == Source::Generated,
        }
    }

    /// Whether this matcher has a namespaceSelector (and so may need the
    /// object's Namespace).
    pub fn needs_namespace(&self) -> bool {
        self.namespace_selector.is_some()
    }
}

fn compile_selector(selector: &LabelSelector) -> Result<Selector, SelectorError> {
    let expressions: Vec<(&str, Operator, &[String])> = selector
        .match_expressions
        .iter()
        .map(|e| {
            let operator = match e.operator {
                sartor_api::SelectorOperator::In => Operator::In,
                sartor_api::SelectorOperator::NotIn => Operator::NotIn,
                sartor_api::SelectorOperator::Exists => Operator::Exists,
                sartor_api::SelectorOperator::DoesNotExist => Operator::DoesNotExist,
            };
            (e.key.as_str(), operator, e.values.as_slice())
        })
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

pub(crate) fn metadata_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata")?.get(field)?.as_str()
}

fn labels(object: &Value) -> Option<&Map<String, Value>> {
    object.get("metadata")?.get("labels")?.as_object()
}
