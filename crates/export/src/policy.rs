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
pub(crate) fn policy(mutations: &[Mutation], options: &Options) -> Vec<Value> {
    let rules: Vec<&Rule> = mutations.iter().flat_map(|m| &m.rules).collect();
    // The install's exclusions: the exemption label, sartor's namespace and
    // the excluded namespaces by name; globs as a match condition.
    let (names, globs) = options.exclusions.names_and_globs();
    let names: BTreeSet<&str> = names.into_iter().collect();
    let globs: Vec<String> = globs.iter().map(|w| w.cel(COMPARED_NAMESPACE)).collect();
    // What sartor never mutates, where a rule could reach it: Gatekeeper's
    // policy groups and admission configuration by resource, sartor's own
    // groups (any group under its domain) as a condition. The API server
    // exempts admission configuration from webhooks, not from policies.
    let reaches_protected = rules.iter().any(|rule| {
        rule.group == "*"
            || rule.group == ADMISSION_REGISTRATION_GROUP
            || protected(&rule.group, "").is_some()
    });
    let mut conditions = Vec::new();
    if !globs.is_empty() {
        conditions.push(json!({"name": "not-in-an-excluded-namespace",
                               "expression": format!("!({})", globs.join(" || "))}));
    }
    if reaches_protected {
        conditions.push(json!({"name": "not-sartors-own-api",
                               "expression": format!(
                                   "!(request.kind.group == {domain} || request.kind.group.endsWith({dot}))",
                                   domain = cel::string(SARTOR_DOMAIN),
                                   dot = cel::string(&format!(".{SARTOR_DOMAIN}")))}));
    }
    let constraints = object([
        ("matchPolicy", Some(json!("Exact"))),
        (
            "namespaceSelector",
            Some(json!({"matchExpressions": [
                {"key": EXEMPTION_LABEL, "operator": "DoesNotExist"},
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": names},
            ]})),
        ),
        ("resourceRules", Some(resource_rules(&rules))),
        (
            "excludeResourceRules",
            reaches_protected.then(protected_resource_rules),
        ),
    ]);
    let spec = object([
        (
            "failurePolicy",
            Some(json!(options.failure_policy.as_str())),
        ),
        ("reinvocationPolicy", Some(json!("IfNeeded"))),
        ("matchConstraints", Some(constraints)),
        (
            "matchConditions",
            (!conditions.is_empty()).then_some(Value::Array(conditions)),
        ),
        (
            "mutations",
            Some(json!(
                mutations
                    .iter()
                    .map(|m| json!({
                        "patchType": "JSONPatch",
                        "jsonPatch": {"expression": m.expression},
                    }))
                    .collect::<Vec<_>>()
            )),
        ),
    ]);
    let exported: Vec<String> = mutations.iter().map(|m| named(&m.id)).collect();
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {
            "name": options.name,
            "labels": {"app.kubernetes.io/managed-by": "sartor"},
            "annotations": {"mutations.sartor.dev/exported": exported.join(", ")},
        },
        "spec": spec,
    });
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": options.name, "labels": {"app.kubernetes.io/managed-by": "sartor"}},
        "spec": {"policyName": options.name},
    });
    vec![policy, binding]
}

/// A JSON object of `fields` in order, those without a value left out.
fn object<const N: usize>(fields: [(&str, Option<Value>); N]) -> Value {
    Value::Object(
        fields
            .into_iter()
            .filter_map(|(name, value)| Some((name.to_string(), value?)))
            .collect(),
    )
}

/// `resourceRules`: one entry per group, version and operations, naming
/// every resource of them once.
fn resource_rules(rules: &[&Rule]) -> Value {
    let mut grouped: BTreeMap<(&str, &str, &[&'static str]), BTreeSet<&str>> = BTreeMap::new();
    for rule in rules {
        grouped
            .entry((&rule.group, &rule.version, &rule.operations))
            .or_default()
            .insert(&rule.resource);
    }
    grouped
        .into_iter()
        .map(|((group, version, operations), mut resources)| {
            // `*` already names every resource, and the API server refuses
            // it beside others.
            if resources.contains("*") {
                resources = BTreeSet::from(["*"]);
            }
            json!({"apiGroups": [group], "apiVersions": [version],
                   "resources": resources, "operations": operations})
        })
        .collect()
}

/// `excludeResourceRules` for what sartor never mutates and a rule can
/// name: Gatekeeper's policy groups, and the admission configuration kinds.
fn protected_resource_rules() -> Value {
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
    Value::Array(rules)
}
