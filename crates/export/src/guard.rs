//! Which objects a mutation applies to: its `applyTo` (or an
//! AssignMetadata's `match.kinds`) as the policy's `resourceRules`, and the
//! CEL guard that keeps it to exactly the objects sartor's matching takes:
//! groups, versions, kinds and operations, then `match` criterion by
//! criterion (kinds, scope, namespaces, selectors, name).

use std::collections::BTreeSet;

use sartor_api::{ApplyTo, Match, OperationPattern, Scope};
use sartor_engine::Scopes;

use crate::{Reason, cel};

/// One `resourceRules` entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Rule {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) resource: String,
    pub(crate) operations: Vec<&'static str>,
    /// The kind the resource serves; `None` for `*`.
    pub(crate) kind: Option<String>,
}

/// The operations an `applyTo` entry names (every operation when none),
/// sorted.
fn operations(entry: &ApplyTo) -> Vec<&'static str> {
    let patterns = match entry.operations.as_slice() {
        [] => &[OperationPattern::All][..],
        patterns => patterns,
    };
    let operations: BTreeSet<&'static str> = patterns
        .iter()
        .flat_map(|pattern| pattern.operations())
        .map(|operation| operation.as_str())
        .collect();
    operations.into_iter().collect()
}

/// An Assign's `applyTo` as rules, and the guard that keeps it to exactly
/// those groups, versions, kinds and operations.
pub(crate) fn apply_to(
    entries: &[ApplyTo],
    resources: &Scopes,
) -> Result<(BTreeSet<Rule>, String), Reason> {
    let mut rules = BTreeSet::new();
    let mut alternatives = Vec::new();
    for (group, version, kind, operations) in kinds(entries) {
        let Some(rule) = kind_rule(resources, group, version, kind, &operations)? else {
            continue;
        };
        rules.insert(rule);
        alternatives.push(applies_to(group, version, kind, &operations));
    }
    if rules.is_empty() {
        return Err(Reason::NoKinds);
    }
    Ok((rules, any_of(&alternatives)))
}

/// An `applyTo` as CEL alone, with no resource to find: what the webhook's
/// match condition needs, where the request names its kind.
pub(crate) fn apply_to_guard(entries: &[ApplyTo]) -> String {
    let alternatives: Vec<String> = kinds(entries)
        .into_iter()
        .map(|(group, version, kind, operations)| applies_to(group, version, kind, &operations))
        .collect();
    match alternatives.is_empty() {
        true => "false".to_string(),
        false => any_of(&alternatives),
    }
}

/// Each group, version and kind an `applyTo` names, with its entry's
/// operations, in order.
fn kinds(entries: &[ApplyTo]) -> Vec<(&str, &str, &str, Vec<&'static str>)> {
    let mut kinds = Vec::new();
    for entry in entries {
        let operations = operations(entry);
        for group in &entry.groups {
            for version in &entry.versions {
                for kind in &entry.kinds {
                    kinds.push((
                        group.as_str(),
                        version.as_str(),
                        kind.as_str(),
                        operations.clone(),
                    ));
                }
            }
        }
    }
    kinds
}

/// Whether the request is for `kind` of `group`/`version` by one of `operations`.
fn applies_to(group: &str, version: &str, kind: &str, operations: &[&'static str]) -> String {
    let listed: Vec<String> = operations.iter().map(|o| cel::string(o)).collect();
    format!(
        "(request.kind.group == {} && request.kind.version == {} && request.kind.kind == {} && request.operation in [{}])",
        cel::string(group),
        cel::string(version),
        cel::string(kind),
        listed.join(", ")
    )
}

/// `alternatives` joined by `||`, grouped.
fn any_of(alternatives: &[String]) -> String {
    match alternatives {
        [one] => one.clone(),
        _ => format!("({})", alternatives.join(" || ")),
    }
}

/// The rule of `kind` in `group` at `version`: `None` when the group is a
/// built-in one without that kind (nothing to match), an error when the
/// group is not built in (its resource is not known offline).
fn kind_rule(
    resources: &Scopes,
    group: &str,
    version: &str,
    kind: &str,
    operations: &[&'static str],
) -> Result<Option<Rule>, Reason> {
    match resources.plural(group, kind) {
        Some(resource) => Ok(Some(Rule {
            group: group.to_string(),
            version: version.to_string(),
            resource: resource.to_string(),
            operations: operations.to_vec(),
            kind: Some(kind.to_string()),
        })),
        None if resources.lists_group(group) => Ok(None),
        None => Err(Reason::UnknownKind(match version {
            "*" => format!("{kind} ({group})"),
            _ => format!("{kind} ({group}/{version})"),
        })),
    }
}

/// The rules of an AssignMetadata, which applies to every kind `match.kinds`
/// allows: a kind in the table by its resource, `*` for every resource.
pub(crate) fn kinds_rules(criteria: &Match, resources: &Scopes) -> Result<BTreeSet<Rule>, Reason> {
    let operations = vec!["CREATE", "UPDATE"];
    let every = |group: &str| Rule {
        group: group.to_string(),
        version: "*".to_string(),
        resource: "*".to_string(),
        operations: operations.clone(),
        kind: None,
    };
    let mut rules = BTreeSet::new();
    if criteria.kinds.is_empty() {
        rules.insert(every("*"));
    }
    for entry in &criteria.kinds {
        let groups: Vec<&str> = match entry.api_groups.as_slice() {
            [] => vec!["*"],
            groups if groups.iter().any(|g| g == "*") => vec!["*"],
            groups => groups.iter().map(String::as_str).collect(),
        };
        for group in groups {
            if entry.kinds.is_empty() || entry.kinds.iter().any(|k| k == "*") || group == "*" {
                rules.insert(every(group));
                continue;
            }
            for kind in &entry.kinds {
                rules.extend(kind_rule(resources, group, "*", kind, &operations)?);
            }
        }
    }
    if rules.is_empty() {
        return Err(Reason::NoKinds);
    }
    Ok(rules)
}

/// Whether the object being admitted is a Namespace.
pub(crate) use sartor_api::IS_NAMESPACE_CEL as IS_NAMESPACE;
/// The namespace the namespace criteria compare (`sartor_api::namespace_of`).
pub(crate) use sartor_api::NAMESPACE_OF_CEL as COMPARED_NAMESPACE;
/// The request's namespace, `""` for a cluster-scoped object.
pub(crate) use sartor_api::REQUEST_NAMESPACE_CEL as REQUEST_NAMESPACE;

/// Whether the CEL at hand has the object's Namespace (`namespaceObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Namespace {
    /// A MutatingAdmissionPolicy's: `namespaceObject`.
    Bound,
    /// A webhook's match condition, which has none: a `namespaceSelector`
    /// is taken to hold for any object but a Namespace (judged on its own
    /// labels), which keeps the condition no narrower than the match.
    Unbound,
}

/// `match` as CEL, criterion by criterion as the engine checks them.
pub(crate) fn criteria_guard(criteria: &Match, namespace: Namespace) -> String {
    let mut parts = Vec::new();
    if !criteria.kinds.is_empty() {
        let any = |list: &[String], subject: &str| {
            if list.is_empty() || list.iter().any(|item| item == "*") {
                "true".to_string()
            } else {
                let listed: Vec<String> = list.iter().map(|item| cel::string(item)).collect();
                format!("{subject} in [{}]", listed.join(", "))
            }
        };
        let entries: Vec<String> = criteria
            .kinds
            .iter()
            .map(|entry| {
                format!(
                    "({} && {})",
                    any(&entry.kinds, "request.kind.kind"),
                    any(&entry.api_groups, "request.kind.group")
                )
            })
            .collect();
        parts.push(format!("({})", entries.join(" || ")));
    }
    match criteria.scope {
        Some(Scope::Cluster) => {
            parts.push(format!(r#"({IS_NAMESPACE} || {REQUEST_NAMESPACE} == "")"#))
        }
        Some(Scope::Namespaced) => {
            parts.push(format!(r#"(!{IS_NAMESPACE} && {REQUEST_NAMESPACE} != "")"#));
        }
        Some(Scope::All) | None => {}
    }
    if !criteria.namespaces.is_empty() {
        let any: Vec<String> = criteria
            .namespaces
            .iter()
            .map(|w| w.cel(COMPARED_NAMESPACE))
            .collect();
        parts.push(format!(
            r#"({COMPARED_NAMESPACE} == "" && !{IS_NAMESPACE} || {})"#,
            any.join(" || ")
        ));
    }
    for excluded in &criteria.excluded_namespaces {
        parts.push(format!(
            r#"!(({IS_NAMESPACE} || {COMPARED_NAMESPACE} != "") && {})"#,
            excluded.cel(COMPARED_NAMESPACE)
        ));
    }
    if let Some(selector) = &criteria.label_selector {
        parts.push(format!("({})", cel::selector("object", selector)));
    }
    if let Some(selector) = &criteria.namespace_selector {
        parts.push(match namespace {
            Namespace::Bound => format!(
                r#"({IS_NAMESPACE} ? ({}) : (namespaceObject == null || ({})))"#,
                cel::selector("object", selector),
                cel::selector("namespaceObject", selector)
            ),
            Namespace::Unbound => format!(
                r#"(!{IS_NAMESPACE} || ({}))"#,
                cel::selector("object", selector)
            ),
        });
    }
    if let Some(name) = &criteria.name {
        let read = |field: &str| {
            format!(r#"(has(object.metadata.{field}) ? object.metadata.{field} : "")"#)
        };
        parts.push(format!(
            "({} || {})",
            name.cel(&read("name")),
            name.cel_generate_name(&read("generateName"))
        ));
    }
    if parts.is_empty() {
        return "true".to_string();
    }
    parts.join(" && ")
}

/// `patches` when the mutation's own conditions (`applies`; `"true"` for
/// none) and its `match` hold, else no patch.
pub(crate) fn guarded(applies: String, criteria: &Match, patches: String) -> String {
    let guard = [applies, criteria_guard(criteria, Namespace::Bound)]
        .into_iter()
        .filter(|part| part != "true")
        .collect::<Vec<_>>();
    match guard.as_slice() {
        [] => patches,
        [only] if cel::is_grouped(only) => format!("{only} ? {patches} : []"),
        _ => format!("({}) ? {patches} : []", guard.join(" && ")),
    }
}
