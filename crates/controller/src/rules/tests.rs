#![allow(clippy::unwrap_used)]

use sartor_api::{mutators_from_documents, read_documents_from_str};
use sartor_engine::{Mutator, System};
use serde_json::{Value, json};

use super::*;

fn system(yaml: &str) -> System {
    let (documents, errors) = read_documents_from_str("test.yaml", yaml, false);
    let loaded = mutators_from_documents(&documents, errors);
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let mut system = System::new();
    for mutator in loaded.mutators {
        system.upsert(Mutator::compile(&mutator.object).unwrap());
    }
    system
}

fn targets(yaml: &str) -> Targets {
    system(yaml).targets()
}

/// Core Pods and apps Deployments in v1, and a CRD's kind in two versions.
fn served() -> Served {
    let mut served = Served::default();
    served.insert("", "v1", "Pod", "pods");
    served.insert("", "v1", "ConfigMap", "configmaps");
    served.insert("apps", "v1", "Deployment", "deployments");
    served.insert("apps", "v1", "StatefulSet", "statefulsets");
    served.insert("example.com", "v1", "Widget", "widgets");
    served.insert("example.com", "v2", "Widget", "widgets");
    served
}

fn rules(yaml: &str) -> Value {
    serde_json::to_value(derived(&targets(yaml), &served())).unwrap()
}

fn assign(apply_to: &str) -> String {
    format!(
        "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {{name: a}}\nspec:\n  \
         applyTo: {apply_to}\n  location: spec.priorityClassName\n  parameters: {{assign: {{value: x}}}}\n"
    )
}

fn assign_metadata(kinds: &str) -> String {
    format!(
        "apiVersion: mutations.sartor.dev/v1\nkind: AssignMetadata\nmetadata: {{name: m}}\nspec:\n  \
         match: {{kinds: {kinds}}}\n  location: metadata.labels.x\n  parameters: {{assign: {{value: x}}}}\n"
    )
}

#[test]
fn pod_mutators_send_pods_and_debug_containers_only() {
    assert_eq!(
        rules(&assign("[{groups: [''], versions: [v1], kinds: [Pod]}]")),
        json!([
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"], "scope": "*"},
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods/ephemeralcontainers"], "scope": "*"},
        ])
    );
}

#[test]
fn create_only_pod_mutators_do_not_send_debug_containers() {
    assert_eq!(
        rules(&assign(
            "[{groups: [''], versions: [v1], kinds: [Pod], operations: [CREATE]}, \
             {groups: [apps], versions: [v1], kinds: [Deployment, StatefulSet], operations: [CREATE]}]"
        )),
        json!([
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"], "scope": "*"},
            {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments", "statefulsets"], "scope": "*"},
        ])
    );
}

#[test]
fn match_kinds_send_every_version_and_every_group() {
    // A kind of any group keeps any group: a CRD of another group serving
    // `widgets`, installed later, is sent too.
    assert_eq!(
        rules(&assign_metadata(
            "[{apiGroups: ['*'], kinds: [Widget]}, {apiGroups: [apps], kinds: ['*']}]"
        )),
        json!([
            {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["widgets"], "scope": "*"},
            {"apiGroups": ["apps"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["*"], "scope": "*"},
        ])
    );
}

#[test]
fn a_kind_served_as_two_resources_sends_both() {
    let mut served = served();
    served.insert("example.com", "v1", "Widget", "widgetz");
    let rules = derived(
        &targets(&assign(
            "[{groups: [example.com], versions: [v1], kinds: [Widget]}]",
        )),
        &served,
    );
    assert_eq!(
        serde_json::to_value(rules).unwrap(),
        json!([
            {"apiGroups": ["example.com"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["widgets", "widgetz"], "scope": "*"},
        ])
    );
}

#[test]
fn coverage_understands_wildcards_and_operations() {
    let rules =
        |value: Value| -> Vec<RuleWithOperations> { serde_json::from_value(value).unwrap() };
    let everything = rules(
        json!([{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["*"]}]),
    );
    let pods = rules(
        json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}]),
    );
    let debug = rules(
        json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods/ephemeralcontainers"]}]),
    );
    let create_pods = rules(
        json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]),
    );
    assert!(covers(&everything, &pods));
    // `*` matches no subresource.
    assert!(!covers(&everything, &debug));
    assert!(covers(&pods, &create_pods));
    assert!(!covers(&create_pods, &pods));
    // The union of two rule lists, deduplicated.
    assert_eq!(
        normalized(&[pods.clone(), create_pods.clone(), pods.clone()].concat()).len(),
        2
    );
}

#[test]
fn a_kind_not_served_yet_sends_its_whole_group_and_version() {
    assert_eq!(
        rules(&assign(
            "[{groups: [example.com], versions: [v3], kinds: [Widget]}, {groups: [other.io], versions: [v1], kinds: [Gadget]}]"
        )),
        json!([
            {"apiGroups": ["example.com"], "apiVersions": ["v3"], "operations": ["CREATE", "UPDATE"], "resources": ["*"], "scope": "*"},
            {"apiGroups": ["other.io"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["*"], "scope": "*"},
        ])
    );
    // Any group: nothing narrower than everything is safe.
    assert_eq!(
        rules(&assign_metadata("[{apiGroups: ['*'], kinds: [Gadget]}]")),
        rules(&assign_metadata("[]"))
    );
}

#[test]
fn a_mutator_of_every_kind_sends_everything_and_debug_containers() {
    // Ordered by group: the core group's "" first.
    let everything = json!([
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods/ephemeralcontainers"], "scope": "*"},
        {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["*"], "scope": "*"},
    ]);
    assert_eq!(rules(&assign_metadata("[]")), everything);
    let both = format!(
        "{}---\n{}",
        assign(
            "[{groups: [''], versions: [v1], kinds: [Pod]}, {groups: [apps], versions: [v1], kinds: [Deployment]}]"
        ),
        assign_metadata("[]")
    );
    // Pods and Deployments are sent by `*` already.
    assert_eq!(rules(&both), everything);
    let group = format!(
        "{}---\n{}",
        assign(
            "[{groups: [apps], versions: [v1], kinds: [Deployment]}, {groups: [example.com], versions: [v1], kinds: [Widget], operations: [CREATE]}]"
        ),
        assign_metadata("[{apiGroups: [apps, example.com], kinds: ['*']}]")
    );
    assert_eq!(
        rules(&group),
        json!([
            {"apiGroups": ["apps"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["*"], "scope": "*"},
            {"apiGroups": ["example.com"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["*"], "scope": "*"},
        ])
    );
}

#[test]
fn no_mutator_sends_a_resource_that_does_not_exist() {
    assert_eq!(
        serde_json::to_value(derived(&Targets::default(), &served())).unwrap(),
        json!([
            {"apiGroups": ["mutations.sartor.dev"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["no-mutator-is-enforced"], "scope": "*"},
        ])
    );
}

#[test]
fn installed_rules_compare_equal_in_any_order() {
    let derived = derived(
        &targets(&assign(
            "[{groups: [''], versions: [v1], kinds: [Pod]}, {groups: [apps], versions: [v1], kinds: [Deployment, StatefulSet]}]",
        )),
        &served(),
    );
    let mut installed = derived.clone();
    installed.reverse();
    for rule in &mut installed {
        if let Some(resources) = rule.resources.as_mut() {
            resources.reverse();
        }
        rule.scope = None;
    }
    assert_ne!(installed, derived);
    assert_eq!(normalized(&installed), normalized(&derived));
    assert_eq!(
        summary(&derived),
        "v1 pods (CREATE,UPDATE); v1 pods/ephemeralcontainers (UPDATE); apps/v1 deployments,statefulsets (CREATE,UPDATE)"
    );
    assert_eq!(
        resources(&derived),
        [
            ("".into(), "v1".into(), "pods".into()),
            ("".into(), "v1".into(), "pods/ephemeralcontainers".into()),
            ("apps".into(), "v1".into(), "deployments".into()),
            ("apps".into(), "v1".into(), "statefulsets".into()),
        ]
    );
}

#[test]
fn a_periodic_round_only_widens_rules_a_replica_derived() {
    let rules = |yaml: &str| normalized(&derived(&targets(yaml), &served()));
    let pods = rules(&assign("[{groups: [''], versions: [v1], kinds: [Pod]}]"));
    let both = rules(&assign(
        "[{groups: [''], versions: [v1], kinds: [Pod]}, {groups: [apps], versions: [v1], kinds: [Deployment]}]",
    ));
    let marker = |rules: &[RuleWithOperations]| summary(rules);
    // A replica that has not seen the Deployment mutator yet, on its periodic
    // check, keeps the wider rules another replica derived.
    assert_eq!(
        next_rules(&both, Some(&marker(&both)), pods.clone(), Round::Periodic),
        both
    );
    // Once its own mutators change, it derives afresh (narrows).
    assert_eq!(
        next_rules(&both, Some(&marker(&both)), pods.clone(), Round::Changed),
        pods
    );
    // Rules no replica derived (the install applied again) are replaced.
    let install = normalized(&serde_json::from_value::<Vec<RuleWithOperations>>(json!([
        {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["*"], "scope": "*"},
    ])).unwrap());
    assert_eq!(
        next_rules(
            &install,
            Some(&marker(&both)),
            pods.clone(),
            Round::Periodic
        ),
        pods
    );
    // Derived rules that lack something this replica needs are widened.
    let widened = next_rules(&pods, Some(&marker(&pods)), both.clone(), Round::Periodic);
    assert!(covers(&widened, &both) && covers(&widened, &pods));
}

#[test]
fn a_periodic_round_only_adds_terms_to_a_derived_condition() {
    let one = WebhookCondition::of(&system(&assign(
        "[{groups: [''], versions: [v1], kinds: [Pod]}]",
    )));
    let two = WebhookCondition::of(&system(&format!(
        "{}---\n{}",
        assign("[{groups: [''], versions: [v1], kinds: [Pod]}]"),
        assign_metadata("[{apiGroups: [''], kinds: [ConfigMap]}]")
    )));
    let (one_written, two_written) = (
        one.expression.clone().unwrap(),
        two.expression.clone().unwrap(),
    );
    // A lagging replica keeps the wider condition a newer one wrote.
    assert_eq!(
        next_condition(Some(&two_written), &one, Round::Periodic),
        Some(two_written.clone())
    );
    // Its own mutators changed: derived afresh.
    assert_eq!(
        next_condition(Some(&two_written), &one, Round::Changed),
        Some(one_written.clone())
    );
    // A derived condition lacking a term this replica needs gains it.
    assert_eq!(
        next_condition(Some(&one_written), &two, Round::Periodic),
        Some(two_written)
    );
    // One no replica wrote (an admin's edit) is replaced.
    assert_eq!(
        next_condition(Some("true"), &one, Round::Periodic),
        Some(one_written)
    );
    // None installed: derived.
    assert_eq!(next_condition(None, &one, Round::Periodic), one.expression);
}

#[test]
fn the_annotation_says_why_no_condition_is_installed() {
    let one = WebhookCondition::of(&system(&assign(
        "[{groups: [''], versions: [v1], kinds: [Pod]}]",
    )));
    assert_eq!(
        condition_summary(&one, true),
        "sartor-may-change: 1 mutators sent only what they would change, 0 all they match, 0 nothing (generated objects only)"
    );
    assert_eq!(
        condition_summary(&one, false),
        "none: the installed and the derived terms together would pass the API server's limits"
    );
    let everything = WebhookCondition::of_terms(["true".to_string()].into_iter().collect());
    assert_eq!(
        condition_summary(&everything, false),
        "none: a mutator is sent every object it matches whatever the object holds, with no narrower match CEL can tell"
    );
}
