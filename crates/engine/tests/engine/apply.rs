//! Each mutator kind applied through a System, asserting the whole object.

use sartor_engine::Request;
use serde_json::{Value, json};

use super::{assign, mutate, pod, system};

fn run(mutators: &str, object: Value) -> Value {
    let system = system(mutators);
    mutate(&system, &object, &Request::create(Some("default")))
        .unwrap_or_else(|e| panic!("{e}"))
        .0
}

fn modify_set(operation: &str, location: &str, values: &str) -> String {
    format!(
        "apiVersion: mutations.sartor.dev/v1\nkind: ModifySet\nmetadata: {{name: m}}\n\
         spec:\n  applyTo: [{{groups: [\"\"], versions: [v1], kinds: [Pod]}}]\n  \
         location: '{location}'\n  parameters: {{operation: {operation}, values: {{fromList: {values}}}}}\n"
    )
}

fn assign_image(parameters: &str) -> String {
    format!(
        "apiVersion: mutations.sartor.dev/v1\nkind: AssignImage\nmetadata: {{name: i}}\n\
         spec:\n  applyTo: [{{groups: [\"\"], versions: [v1], kinds: [Pod]}}]\n  \
         location: 'spec.containers[name: *].image'\n  parameters: {parameters}\n"
    )
}

fn assign_metadata(location: &str, assign: &str) -> String {
    format!(
        "apiVersion: mutations.sartor.dev/v1\nkind: AssignMetadata\nmetadata: {{name: md}}\n\
         spec:\n  location: '{location}'\n  parameters: {{assign: {assign}}}\n"
    )
}

#[test]
fn assign_sets_a_value_on_every_globbed_element() {
    assert_eq!(
        run(
            &assign(
                "pull",
                "spec.containers[name: *].imagePullPolicy",
                "{assign: {value: Always}}"
            ),
            pod(&["app", "proxy"]),
        ),
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"containers": [
                {"name": "app", "image": "app:1", "imagePullPolicy": "Always"},
                {"name": "proxy", "image": "proxy:1", "imagePullPolicy": "Always"},
            ]},
        })
    );
}

#[test]
fn assign_replaces_whole_values_and_creates_parents() {
    let object = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"securityContext": {"runAsUser": 0, "fsGroup": 1}}});
    assert_eq!(
        run(
            &assign(
                "sc",
                "spec.securityContext",
                "{assign: {value: {runAsNonRoot: true}}}"
            ),
            object.clone(),
        ),
        json!({"apiVersion": "v1", "kind": "Pod", "spec": {"securityContext": {"runAsNonRoot": true}}})
    );
    assert_eq!(
        run(
            &assign(
                "seccomp",
                "spec.securityContext.seccompProfile.type",
                "{assign: {value: RuntimeDefault}}"
            ),
            object,
        ),
        json!({"apiVersion": "v1", "kind": "Pod", "spec": {"securityContext": {
            "runAsUser": 0, "fsGroup": 1, "seccompProfile": {"type": "RuntimeDefault"}
        }}})
    );
}

#[test]
fn assign_adds_a_sidecar_by_key_once() {
    let sidecar = "{assign: {value: {name: proxy, image: 'envoy:1.30'}}}";
    let want = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"containers": [
            {"name": "app", "image": "app:1"},
            {"name": "proxy", "image": "envoy:1.30"},
        ]},
    });
    assert_eq!(
        run(
            &assign("sidecar", "spec.containers[name: proxy]", sidecar),
            pod(&["app"])
        ),
        want
    );
    // An existing element with the key is replaced, not merged.
    assert_eq!(
        run(
            &assign("sidecar", "spec.containers[name: proxy]", sidecar),
            pod(&["app", "proxy"])
        ),
        want
    );
}

#[test]
fn assign_from_metadata_reads_the_name_and_namespace() {
    let mutators = format!(
        "{}---\n{}",
        assign(
            "n",
            "spec.hostname",
            "{assign: {fromMetadata: {field: name}}}"
        ),
        assign(
            "ns",
            "spec.subdomain",
            "{assign: {fromMetadata: {field: namespace}}}"
        ),
    );
    let system = system(&mutators);
    // The namespace comes from the request even when the object omits it.
    let object = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}});
    let (out, _) = mutate(&system, &object, &Request::create(Some("shop"))).unwrap();
    assert_eq!(
        out,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
               "spec": {"hostname": "web", "subdomain": "shop"}})
    );
    // No name and no namespace: empty strings, as Gatekeeper.
    let object = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "web-"}});
    let (out, _) = mutate(&system, &object, &Request::create(None)).unwrap();
    assert_eq!(out["spec"], json!({"hostname": "", "subdomain": ""}));
}

#[test]
fn assign_metadata_adds_only_what_is_absent() {
    let owner = assign_metadata("metadata.labels.owner", "{value: team-a}");
    let object = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}});
    assert_eq!(
        run(&owner, object),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": {"owner": "team-a"}}})
    );
    // An existing label is never overwritten, even an empty one.
    let object = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": {"owner": ""}}});
    assert_eq!(run(&owner, object.clone()), object);
    // Applies to every kind, without applyTo.
    let object =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}});
    assert_eq!(
        run(
            &assign_metadata(
                r#"metadata.annotations."example.com/team""#,
                "{fromMetadata: {field: namespace}}"
            ),
            object
        ),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "annotations": {"example.com/team": "default"}}})
    );
}

#[test]
fn modify_set_merges_missing_values_only() {
    let object = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [
        {"name": "a", "args": ["--v=1", "--x", "--x"]},
        {"name": "b"},
    ]}});
    assert_eq!(
        run(
            &modify_set(
                "merge",
                "spec.containers[name: *].args",
                "['--x', '--y', '--y']"
            ),
            object
        ),
        json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [
            // Existing duplicates stay; each missing value is added once.
            {"name": "a", "args": ["--v=1", "--x", "--x", "--y"]},
            // A missing list is fromList as it is.
            {"name": "b", "args": ["--x", "--y", "--y"]},
        ]}})
    );
}

#[test]
fn modify_set_prunes_every_equal_element() {
    let object = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [
        {"name": "a", "args": ["--debug", "--v=1", "--debug", {"k": 1}]},
        {"name": "b", "args": ["--debug"]},
        {"name": "c"},
    ]}});
    assert_eq!(
        run(
            &modify_set(
                "prune",
                "spec.containers[name: *].args",
                "['--debug', {k: 1}]"
            ),
            object
        ),
        json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [
            {"name": "a", "args": ["--v=1"]},
            {"name": "b", "args": []},
            {"name": "c"},
        ]}})
    );
}

/// Gatekeeper reads ModifySet values as float64, so `1` and `1.0` are one
/// value to it (found by tests/differential); sartor compares numbers by
/// value, for merge and prune alike.
#[test]
fn modify_set_compares_numbers_by_value() {
    let object = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [
        {"name": "a", "args": [1, {"port": 80}]},
    ]}});
    assert_eq!(
        run(
            &modify_set(
                "merge",
                "spec.containers[name: a].args",
                "[1.0, {port: 80.0}, 2]"
            ),
            object.clone()
        ),
        json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [
            {"name": "a", "args": [1, {"port": 80}, 2]},
        ]}})
    );
    assert_eq!(
        run(
            &modify_set(
                "prune",
                "spec.containers[name: a].args",
                "[1.0, {port: 80.0}]"
            ),
            object
        ),
        json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [
            {"name": "a", "args": []},
        ]}})
    );
}

#[test]
fn modify_set_prune_still_creates_parents_like_gatekeeper() {
    let object = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": []}});
    assert_eq!(
        run(
            &modify_set("prune", "spec.containers[name: app].args", "['--debug']"),
            object
        ),
        json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": "app"}]}})
    );
}

#[test]
fn modify_set_on_something_else_than_a_list_fails() {
    let system = system(&modify_set("merge", "spec.args", "[a]"));
    let object = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"}, "spec": {"args": "a"}});
    assert_eq!(
        mutate(&system, &object, &Request::create(Some("default"))).unwrap_err(),
        "v1 Pod default/web: ModifySet m failed: spec.args: a string is not a list"
    );
}

#[test]
fn assign_image_replaces_the_parts_given() {
    let object = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [
        {"name": "a", "image": "nginx"},
        {"name": "b", "image": "docker.io/library/redis:7@sha256:0123456789abcdef0123456789abcdef"},
        {"name": "c", "image": "localhost:5000/tools/debug:latest"},
        {"name": "d"},
    ]}});
    assert_eq!(
        run(
            &assign_image("{assignDomain: mirror.example.com, assignTag: ':pinned'}"),
            object
        ),
        json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [
            {"name": "a", "image": "mirror.example.com/nginx:pinned"},
            {"name": "b", "image": "mirror.example.com/library/redis:pinned"},
            {"name": "c", "image": "mirror.example.com/tools/debug:pinned"},
            {"name": "d", "image": "mirror.example.com/:pinned"},
        ]}})
    );
}

#[test]
fn assign_image_needs_a_string() {
    let system = system(&assign_image("{assignTag: ':v1'}"));
    let object = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}, "spec": {"containers": [{"name": "a", "image": 3}]}});
    assert_eq!(
        mutate(&system, &object, &Request::create(None)).unwrap_err(),
        "v1 Pod web: AssignImage i failed: spec.containers[name: *].image: a number is not a string"
    );
}
