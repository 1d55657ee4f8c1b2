//! The System: order, chaining, convergence, conflicts, trace.

use sartor_api::MutatorKind;
use sartor_engine::{Admission, Mutator, MutatorId, Request, System};
use serde_json::{Value, json};

use super::{assign, mutate, objects, pod, system};

fn id(kind: MutatorKind, name: &str) -> MutatorId {
    MutatorId::new(kind, name)
}

fn trace(mutation: &sartor_engine::Mutation) -> Vec<String> {
    mutation
        .changes
        .iter()
        .map(|c| format!("{} {} {}", c.pass, c.mutator(), c.path()))
        .collect()
}

const SIDECAR: &str = "{assign: {value: {name: proxy, image: 'envoy:1.30'}}, \
                       pathTests: [{subPath: 'spec.containers[name: proxy]', condition: MustNotExist}]}";

#[test]
fn a_sidecar_added_by_one_mutator_is_mutated_by_another() {
    let mutators = format!(
        "{}---\n{}",
        assign("sidecar", "spec.containers[name: proxy]", SIDECAR),
        assign(
            "pull",
            "spec.containers[name: *].imagePullPolicy",
            "{assign: {value: Always}}"
        ),
    );
    let system = system(&mutators);
    let (out, mutation) =
        mutate(&system, &pod(&["app"]), &Request::create(Some("default"))).unwrap();
    assert_eq!(
        out["spec"],
        json!({"containers": [
            {"name": "app", "image": "app:1", "imagePullPolicy": "Always"},
            {"name": "proxy", "image": "envoy:1.30", "imagePullPolicy": "Always"},
        ]})
    );
    // "pull" sorts before "sidecar", so the sidecar's policy comes in pass 2.
    assert_eq!(
        trace(&mutation),
        [
            "1 Assign pull spec.containers[name: app].imagePullPolicy",
            "1 Assign sidecar spec.containers[name: proxy]",
            "2 Assign pull spec.containers[name: proxy].imagePullPolicy",
        ]
    );
    assert_eq!(mutation.passes, 3);
    assert_eq!(
        mutation.applied(),
        [
            &id(MutatorKind::Assign, "pull"),
            &id(MutatorKind::Assign, "sidecar")
        ]
    );
}

#[test]
fn a_sidecar_without_a_path_test_is_replaced_in_every_pass() {
    // Ending at a keyed element replaces it whole, so without MustNotExist
    // the sidecar wipes the policy set on it, and the pass that does so
    // ends where the previous one did: converged, as in Gatekeeper.
    let mutators = format!(
        "{}---\n{}",
        assign(
            "sidecar",
            "spec.containers[name: proxy]",
            "{assign: {value: {name: proxy, image: 'envoy:1.30'}}}"
        ),
        assign(
            "pull",
            "spec.containers[name: *].imagePullPolicy",
            "{assign: {value: Always}}"
        ),
    );
    let system = system(&mutators);
    let (out, mutation) =
        mutate(&system, &pod(&["app"]), &Request::create(Some("default"))).unwrap();
    assert_eq!(
        out["spec"],
        json!({"containers": [
            {"name": "app", "image": "app:1", "imagePullPolicy": "Always"},
            {"name": "proxy", "image": "envoy:1.30"},
        ]})
    );
    assert_eq!(mutation.passes, 2);
}

#[test]
fn results_do_not_depend_on_insertion_order() {
    let docs = [
        assign("tier-9", "spec.priority", "{assign: {value: 9}}"),
        assign("tier-10", "spec.priority", "{assign: {value: 10}}"),
        assign("sidecar", "spec.containers[name: proxy]", SIDECAR),
        assign(
            "pull",
            "spec.containers[name: *].imagePullPolicy",
            "{assign: {value: Always}}",
        ),
    ];
    let forward = system(&docs.join("---\n"));
    let mut reversed = System::new();
    for object in objects(&docs.join("---\n")).iter().rev() {
        reversed.upsert(Mutator::compile(object).unwrap());
    }
    let request = Request::create(Some("default"));
    let a = mutate(&forward, &pod(&["app"]), &request).unwrap();
    let b = mutate(&reversed, &pod(&["app"]), &request).unwrap();
    assert_eq!(a, b);
    // Names compare byte-wise: tier-9 runs after tier-10 and wins.
    assert_eq!(a.0["spec"]["priority"], json!(9));
    let order: Vec<String> = forward.mutators().map(|m| m.id().name.clone()).collect();
    assert_eq!(order, ["pull", "sidecar", "tier-10", "tier-9"]);
}

#[test]
fn mutators_fighting_over_a_field_converge_when_a_pass_changes_nothing_overall() {
    let system = system(&format!(
        "{}---\n{}",
        assign("a", "spec.x", "{assign: {value: 1}}"),
        assign("b", "spec.x", "{assign: {value: 2}}"),
    ));
    let (out, mutation) = mutate(&system, &pod(&[]), &Request::create(None)).unwrap();
    assert_eq!(out["spec"]["x"], json!(2));
    assert_eq!(mutation.passes, 2);
}

#[test]
fn matching_is_evaluated_again_on_the_mutated_object() {
    let mutators = "apiVersion: mutations.sartor.dev/v1\nkind: AssignMetadata\nmetadata: {name: env}\n\
                    spec:\n  location: metadata.labels.env\n  parameters: {assign: {value: prod}}\n---\n\
                    apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {name: prod-only}\n\
                    spec:\n  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]\n  \
                    match: {labelSelector: {matchLabels: {env: prod}}}\n  location: spec.priority\n  \
                    parameters: {assign: {value: 100}}\n";
    let system = system(mutators);
    let (out, mutation) = mutate(&system, &pod(&[]), &Request::create(Some("default"))).unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"env": "prod"}));
    assert_eq!(out["spec"]["priority"], json!(100));
    assert_eq!(
        trace(&mutation),
        [
            "1 AssignMetadata env metadata.labels.env",
            "2 Assign prod-only spec.priority"
        ]
    );
}

fn leaky_image() -> String {
    // Gatekeeper's image parser lets a tag containing '/' leak into the
    // path, so this takes three passes to settle.
    "apiVersion: mutations.sartor.dev/v1\nkind: AssignImage\nmetadata: {name: repath}\n\
     spec:\n  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]\n  \
     location: 'spec.containers[name: *].image'\n  parameters: {assignPath: p}\n"
        .to_string()
}

#[test]
fn the_pass_limit_is_the_number_of_mutators_plus_one() {
    let object = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
                        "spec": {"containers": [{"name": "app", "image": "a/b:c/d"}]}});
    let request = Request::create(Some("default"));
    let alone = system(&leaky_image());
    assert_eq!(
        mutate(&alone, &object, &request).unwrap_err(),
        "v1 Pod default/web: mutation did not converge after 2 passes; still changing it in the last: AssignImage repath (spec.containers[name: app].image)"
    );
    // Another mutator, even one that never matches, raises the limit.
    let mut more = system(&leaky_image());
    more.upsert(super::compile(
        &assign("unrelated", "spec.x", "{assign: {value: 1}}")
            .replace("kinds: [Pod]", "kinds: [Secret]"),
    ));
    let (out, mutation) = mutate(&more, &object, &request).unwrap();
    assert_eq!(out["spec"]["containers"][0]["image"], json!("p:c/p"));
    assert_eq!(mutation.passes, 3);
}

fn modify_set(name: &str, location: &str, operations: &str) -> String {
    format!(
        "apiVersion: mutations.sartor.dev/v1\nkind: ModifySet\nmetadata: {{name: {name}}}\n\
         spec:\n  applyTo: [{{groups: [''], versions: [v1], kinds: [Pod], operations: {operations}}}]\n  \
         location: '{location}'\n  parameters: {{values: {{fromList: [x]}}}}\n"
    )
}

#[test]
fn conflicting_mutators_are_reported_skipped_and_cleared() {
    let mut system = system(&assign(
        "pull",
        "spec.containers[name: *].imagePullPolicy",
        "{assign: {value: Always}}",
    ));
    let set = super::compile(&modify_set("containers-set", "spec.containers", "['*']"));
    let conflicts = system.upsert(set);
    let pull = id(MutatorKind::Assign, "pull");
    let set_id = id(MutatorKind::ModifySet, "containers-set");
    assert_eq!(
        conflicts.into_iter().collect::<Vec<_>>(),
        [pull.clone(), set_id.clone()]
    );
    assert!(system.is_conflicted(&pull));
    let messages: Vec<String> = system
        .conflicts(&pull)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        messages,
        [
            "conflicts with ModifySet containers-set about spec.containers: this mutator treats it as a list keyed by name, ModifySet containers-set as a list of values (v1 Pod CREATE and 1 more)"
        ]
    );
    let messages: Vec<String> = system
        .conflicts(&set_id)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        messages,
        [
            "conflicts with Assign pull about spec.containers: this mutator treats it as a list of values, Assign pull as a list keyed by name (v1 Pod CREATE and 1 more)"
        ]
    );
    // Both are skipped.
    let request = Request::create(Some("default"));
    let (out, mutation) = mutate(&system, &pod(&["app"]), &request).unwrap();
    assert_eq!(out, pod(&["app"]));
    assert_eq!(mutation.passes, 0);
    // Removing one clears the other.
    system.remove(&set_id);
    assert!(!system.is_conflicted(&pull));
    assert!(system.conflicts(&pull).is_empty());
    let (out, _) = mutate(&system, &pod(&["app"]), &request).unwrap();
    assert_eq!(
        out["spec"]["containers"][0]["imagePullPolicy"],
        json!("Always")
    );
}

#[test]
fn lists_keyed_by_different_fields_conflict() {
    let mut system = system(&format!(
        "{}---\n{}",
        assign(
            "by-name",
            "spec.containers[name: *].x",
            "{assign: {value: 1}}"
        ),
        assign(
            "by-image",
            "spec.containers[image: *].y",
            "{assign: {value: 1}}"
        ),
    ));
    let by_name = id(MutatorKind::Assign, "by-name");
    let messages: Vec<String> = system
        .conflicts(&by_name)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        messages,
        [
            "conflicts with Assign by-image about spec.containers: this mutator treats it as a list keyed by name, Assign by-image as a list keyed by image (v1 Pod CREATE and 1 more)"
        ]
    );
    // Replacing the mutator with one that agrees clears both.
    system.upsert(super::compile(&assign(
        "by-image",
        "spec.containers[name: *].y",
        "{assign: {value: 1}}",
    )));
    assert!(system.conflicted().is_empty());
}

#[test]
fn mutators_that_never_share_an_operation_or_kind_do_not_conflict() {
    let mut system = system(&modify_set("create-only", "spec.containers", "[CREATE]"));
    let conflicts = system.upsert(super::compile(
        &assign(
            "pull",
            "spec.containers[name: *].imagePullPolicy",
            "{assign: {value: Always}}",
        )
        .replace("kinds: [Pod]}", "kinds: [Pod], operations: [UPDATE]}"),
    ));
    assert!(conflicts.is_empty());
    let conflicts = system.upsert(super::compile(
        &assign(
            "other-kind",
            "spec.containers[name: *].x",
            "{assign: {value: 1}}",
        )
        .replace("kinds: [Pod]", "kinds: [ReplicaSet]"),
    ));
    assert!(conflicts.is_empty());
    // An Assign ending at the field implies nothing about its type.
    let conflicts = system.upsert(super::compile(&assign(
        "whole",
        "spec.containers",
        "{assign: {value: []}}",
    )));
    assert!(conflicts.is_empty());
}

#[test]
fn the_mutations_annotation_lists_what_changed_the_object() {
    let system = system(&format!(
        "{}---\n{}",
        assign(
            "pull",
            "spec.containers[name: *].imagePullPolicy",
            "{assign: {value: Always}}"
        ),
        assign("never", "spec.x", "{assign: {value: 1}}")
            .replace("kinds: [Pod]", "kinds: [Secret]"),
    ));
    let annotated = |object: &Value| {
        let mut object = object.clone();
        let admission = Admission::new(&object)
            .namespace(Some("default"))
            .annotate(true);
        let mutation = system.mutate(&admission, &mut object).unwrap();
        (object, mutation)
    };
    let (out, _) = annotated(&pod(&["app"]));
    assert_eq!(
        out["metadata"]["annotations"],
        json!({"sartor.dev/mutations": "Assign/pull:0"})
    );
    // Nothing changed, nothing added.
    let (again, mutation) = annotated(&out);
    assert_eq!(again, out);
    assert!(!mutation.changed());
}

/// A label value that is not a string makes selectors read no labels at
/// all; removing it in pass 1, after a mutator whose labelSelector failed on
/// it, lets that mutator apply in pass 2, which must run for it.
#[test]
fn removing_a_label_that_hid_the_others_lets_an_earlier_selector_match() {
    let system = system(&format!(
        "{}---\n{}",
        assign(
            "x",
            "spec.x",
            "{assign: {value: 1}}\n  match: {labelSelector: {matchLabels: {app: web}}}"
        ),
        "apiVersion: mutations.sartor.dev/v1\nkind: AssignMetadata\nmetadata: {name: w}\n\
         spec:\n  location: metadata.labels.bad\n  parameters: {assign: {remove: true}}\n"
    ));
    let object = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "labels": {"app": "web", "bad": 5}},
        "spec": {},
    });
    let (mutated, mutation) = mutate(&system, &object, &Request::create(Some("default"))).unwrap();
    assert_eq!(
        mutated,
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "labels": {"app": "web"}},
            "spec": {"x": 1},
        })
    );
    assert_eq!(mutation.passes, 3);
    assert_eq!(
        trace(&mutation),
        [
            "1 AssignMetadata w metadata.labels.bad",
            "2 Assign x spec.x"
        ]
    );
}

/// More Assigns of one kind than a second pass compares pairwise, over more
/// places of one map than it saves one by one (it then saves the map).
#[test]
fn six_hundred_assigns_on_one_configmap_settle_and_patch_as_a_diff() {
    let mutators: String = (0..600)
        .map(|i| {
            format!(
                "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {{name: set-{i:03}}}\n\
                 spec:\n  applyTo: [{{groups: [\"\"], versions: [v1], kinds: [ConfigMap]}}]\n  \
                 location: 'data.key-{i}'\n  parameters: {{assign: {{value: mutated}}}}\n---\n"
            )
        })
        .collect();
    let system = system(&mutators);
    let data = |keys: std::ops::Range<usize>, value: &str| -> serde_json::Map<String, _> {
        keys.map(|i| (format!("key-{i}"), json!(value))).collect()
    };
    let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "settings", "namespace": "shop"},
                           "data": data(0..100, "admitted")});
    let (mutated, mutation) = mutate(&system, &configmap, &Request::create(Some("shop"))).unwrap();
    assert_eq!(
        mutated,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "settings", "namespace": "shop"},
               "data": data(0..600, "mutated")})
    );
    assert_eq!((mutation.passes, mutation.changes.len()), (2, 600));
}
