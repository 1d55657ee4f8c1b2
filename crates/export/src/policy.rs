//! The policy of the mutations and its binding: the mutations in sartor's
//! order, the resources they need, and the install's exclusions (the
//! exemption label, the excluded namespaces, what sartor never mutates).

use std::collections::{BTreeMap, BTreeSet};

use sartor_api::{
    ADMISSION_CONFIGURATION_KINDS, ADMISSION_REGISTRATION_GROUP, EXEMPTION_LABEL,
    GATEKEEPER_PROTECTED_GROUPS, SARTOR_DOMAIN, protected,
};
use sartor_engine::Scopes;
use serde_json::{Value, json};

use crate::guard::{COMPARED_NAMESPACE, Rule};
use crate::mutation::Mutation;
use crate::{Options, cel, named};

/// The policy of `mutations` and its binding.
/// Every mutation's rules.
fn rules_of(mutations: &[Mutation]) -> Vec<&Rule> {
    mutations.iter().flat_map(|m| &m.rules).collect()
}

/// `excludeResourceRules` for what sartor never mutates and a rule can
/// name: Gatekeeper's policy groups, and the admission configuration kinds.
fn protected_resource_rules() -> Vec<Value> {
    let every = ["*"];
    let mut rules: Vec<Value> = GATEKEEPER_PROTECTED_GROUPS
        .iter()
        .map(|group| {
            json!({"apiGroups": [group], "apiVersions": every,
                   "resources": every, "operations": every})
        })
        .collect();
    let configuration: Vec<&str> = ADMISSION_CONFIGURATION_KINDS
        .iter()
        .filter_map(|kind| Scopes::builtin().plural(ADMISSION_REGISTRATION_GROUP, kind))
        .collect();
    rules.push(
        json!({"apiGroups": [ADMISSION_REGISTRATION_GROUP], "apiVersions": every,
                      "resources": configuration, "operations": every}),
    );
    rules
}

pub(crate) fn policy(mutations: &[Mutation], options: &Options) -> Vec<Value> {
    let mut rules: BTreeMap<(String, String, Vec<&'static str>), BTreeSet<String>> =
        BTreeMap::new();
    for rule in rules_of(mutations) {
        rules
            .entry((
                rule.group.clone(),
                rule.version.clone(),
                rule.operations.clone(),
            ))
            .or_default()
            .insert(rule.resource.clone());
    }
    let resource_rules: Vec<Value> = rules
        .into_iter()
        .map(|((group, version, operations), mut resources)| {
            // `*` already names every resource, and the API server refuses
            // it beside others.
            if resources.contains("*") {
                resources = BTreeSet::from(["*".to_string()]);
            }
            json!({"apiGroups": [group], "apiVersions": [version],
                   "resources": resources, "operations": operations})
        })
        .collect();
    // The install's exclusions: the exemption label, sartor's namespace and
    // the excluded namespaces by name; globs as a match condition.
    let mut names: BTreeSet<String> = BTreeSet::from([options.sartor_namespace.clone()]);
    let mut globs = Vec::new();
    for excluded in &options.excluded_namespaces {
        if excluded.as_str().contains('*') {
            globs.push(excluded.cel(COMPARED_NAMESPACE));
        } else {
            names.insert(excluded.as_str().to_string());
        }
    }
    let mut conditions = Vec::new();
    if !globs.is_empty() {
        conditions.push(json!({"name": "not-in-an-excluded-namespace",
                               "expression": format!("!({})", globs.join(" || "))}));
    }
    // What sartor never mutates, where a rule could reach it: Gatekeeper's
    // policy groups and admission configuration by resource, sartor's own
    // groups (any group under its domain) as a condition. The API server
    // exempts admission configuration from webhooks, not from policies.
    let reaches = |group: &str| {
        group == "*" || group == ADMISSION_REGISTRATION_GROUP || protected(group, "").is_some()
    };
    let exclusions = if rules_of(mutations).iter().any(|rule| reaches(&rule.group)) {
        conditions.push(json!({"name": "not-sartors-own-api",
                               "expression": format!(
                                   "!(request.kind.group == {domain} || request.kind.group.endsWith({dot}))",
                                   domain = cel::string(SARTOR_DOMAIN),
                                   dot = cel::string(&format!(".{SARTOR_DOMAIN}")))}));
        protected_resource_rules()
    } else {
        Vec::new()
    };
    let mut policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {
            "name": options.name,
            "labels": {"app.kubernetes.io/managed-by": "sartor"},
            "annotations": {"mutations.sartor.dev/exported": mutations
                .iter()
                .map(|m| named(&m.id))
                .collect::<Vec<_>>()
                .join(", ")},
        },
        "spec": {
            "failurePolicy": options.failure_policy.as_str(),
            "reinvocationPolicy": "IfNeeded",
            "matchConstraints": {
                "matchPolicy": "Exact",
                "namespaceSelector": {"matchExpressions": [
                    {"key": EXEMPTION_LABEL, "operator": "DoesNotExist"},
                    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": names},
                ]},
                "resourceRules": resource_rules,
            },
            "mutations": mutations.iter().map(|m| json!({
                "patchType": "JSONPatch",
                "jsonPatch": {"expression": m.expression},
            })).collect::<Vec<_>>(),
        },
    });
    if let Some(spec) = policy.get_mut("spec").and_then(Value::as_object_mut) {
        if !conditions.is_empty() {
            spec.insert("matchConditions".to_string(), Value::Array(conditions));
        }
        if !exclusions.is_empty()
            && let Some(constraints) = spec
                .get_mut("matchConstraints")
                .and_then(Value::as_object_mut)
        {
            constraints.insert("excludeResourceRules".to_string(), Value::Array(exclusions));
        }
    }
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": options.name, "labels": {"app.kubernetes.io/managed-by": "sartor"}},
        "spec": {"policyName": options.name},
    });
    vec![policy, binding]
}
