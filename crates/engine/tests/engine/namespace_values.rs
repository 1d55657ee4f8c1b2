//! `fromNamespace` (sartor only): values taken from the object's Namespace.

use sartor_engine::Request;
use serde_json::{Value, json};

use super::{assign, compile_error, mutate, system};

fn namespace(labels: Value, annotations: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "shop", "labels": labels, "annotations": annotations},
    })
}

fn pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "shop/app:1"}]},
    })
}

/// Copies the Namespace's `team` label onto every Pod (AssignMetadata), and
/// its `example.com/cost-center` annotation into a container env (Assign).
fn mutators(default: &str) -> String {
    format!(
        "apiVersion: mutations.sartor.dev/v1
kind: AssignMetadata
metadata: {{name: team}}
spec:
  match: {{kinds: [{{apiGroups: [''], kinds: [Pod]}}]}}
  location: metadata.labels.team
  parameters:
    assign: {{fromNamespace: {{label: team{default}}}}}
---
{}",
        assign(
            "cost-center",
            "spec.containers[name: app].env[name: COST_CENTER].value",
            "{assign: {fromNamespace: {annotation: example.com/cost-center}}}",
        )
    )
}

fn with_namespace(namespace: &Value) -> Request<'_> {
    Request {
        namespace_object: Some(namespace),
        ..Request::create(Some("shop"))
    }
}

#[test]
fn labels_and_annotations_of_the_namespace_are_assigned() {
    let system = system(&mutators(""));
    let shop = namespace(
        json!({"team": "checkout"}),
        json!({"example.com/cost-center": "cc-42"}),
    );
    let (out, mutation) = mutate(&system, &pod(), &with_namespace(&shop)).unwrap();
    assert_eq!(
        out,
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web", "team": "checkout"}},
            "spec": {"containers": [{
                "name": "app",
                "image": "shop/app:1",
                "env": [{"name": "COST_CENTER", "value": "cc-42"}],
            }]},
        })
    );
    assert_eq!(mutation.passes, 2);
    // Mutating the result again changes nothing.
    let (again, mutation) = mutate(&system, &out, &with_namespace(&shop)).unwrap();
    assert_eq!(again, out);
    assert!(!mutation.changed());
}

#[test]
fn a_missing_label_uses_the_default_or_leaves_the_object_alone() {
    let bare = namespace(json!({}), json!({}));
    let (out, _) = mutate(&system(&mutators("")), &pod(), &with_namespace(&bare)).unwrap();
    assert_eq!(out, pod());
    let (out, _) = mutate(
        &system(&mutators(", default: unowned")),
        &pod(),
        &with_namespace(&bare),
    )
    .unwrap();
    assert_eq!(
        out["metadata"]["labels"],
        json!({"app": "web", "team": "unowned"})
    );
    // The annotation has no default: the container is not touched.
    assert_eq!(out["spec"], pod()["spec"]);
}

#[test]
fn an_object_outside_a_namespace_is_left_alone() {
    let yaml = "\
apiVersion: mutations.sartor.dev/v1
kind: AssignMetadata
metadata: {name: team}
spec:
  location: metadata.labels.team
  parameters:
    assign: {fromNamespace: {label: team, default: unowned}}
";
    let system = system(yaml);
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}});
    let (out, _) = mutate(&system, &node, &Request::create(None)).unwrap();
    assert_eq!(out, node);
    // A cluster-scoped object is admitted without a namespace, whatever its
    // metadata says (a chart that templates `namespace:` everywhere).
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                      "metadata": {"name": "r", "namespace": "shop"}});
    let (out, _) = mutate(&system, &role, &Request::create(None)).unwrap();
    assert_eq!(out, role);
    // A Namespace is not in a namespace either: its own labels are never read.
    let shop = namespace(json!({"team": "checkout"}), json!({}));
    let (out, _) = mutate(&system, &shop, &Request::create(None)).unwrap();
    assert_eq!(out, shop);
}

#[test]
fn an_unknown_namespace_is_an_error_never_a_guess() {
    assert_eq!(
        mutate(
            &system(&mutators(", default: unowned")),
            &pod(),
            &Request::create(Some("shop"))
        ),
        Err("v1 Pod shop/web: Assign cost-center: its value comes from Namespace \"shop\", which was not provided".to_string())
    );
}

#[test]
fn exactly_one_key_and_one_source_are_accepted() {
    let yaml = |assign: &str| {
        format!(
            "apiVersion: mutations.sartor.dev/v1\nkind: AssignMetadata\nmetadata: {{name: team}}\n\
             spec:\n  location: metadata.labels.team\n  parameters:\n    assign: {assign}\n"
        )
    };
    assert_eq!(
        compile_error(&yaml("{fromNamespace: {label: team, annotation: team}}")),
        "AssignMetadata team: spec.parameters.assign.fromNamespace: set exactly one of label and annotation, not empty"
    );
    assert_eq!(
        compile_error(&yaml("{fromNamespace: {default: x}}")),
        "AssignMetadata team: spec.parameters.assign.fromNamespace: set exactly one of label and annotation, not empty"
    );
    assert_eq!(
        compile_error(&yaml("{value: x, fromNamespace: {label: team}}")),
        "AssignMetadata team: spec.parameters.assign: set exactly one of value, fromMetadata, fromNamespace, externalData and remove"
    );
    assert_eq!(
        compile_error(&assign(
            "into-list",
            "spec.containers[name: app]",
            "{assign: {fromNamespace: {label: team}}}"
        )),
        "Assign into-list: spec.parameters.assign.fromNamespace: spec.containers[name: app] is a keyed-list element; fromNamespace gives a string"
    );
}
