//! `remove: true` (sartor only): what is at the location goes.

use sartor_api::MutatorKind;
use sartor_engine::{MutatorId, Request};
use serde_json::{Value, json};

use super::{assign, compile_error, mutate, system};

fn pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "annotations": {"deprecated.example.com/scrape": "true", "keep": "me"},
        },
        "spec": {"containers": [
            {"name": "app", "image": "app:1", "ports": [
                {"containerPort": 8080, "hostPort": 8080},
                {"containerPort": 9090},
            ]},
            {"name": "proxy", "image": "proxy:1"},
        ]},
    })
}

const REMOVE_HOST_PORTS: &str = "{assign: {remove: true}}";

#[test]
fn a_field_is_removed_wherever_the_location_reaches_and_nothing_is_created() {
    let system = system(&assign(
        "no-host-ports",
        "spec.containers[name: *].ports[containerPort: *].hostPort",
        REMOVE_HOST_PORTS,
    ));
    let request = Request::create(Some("default"));
    let (out, mutation) = mutate(&system, &pod(), &request).unwrap();
    let mut want = pod();
    want["spec"]["containers"][0]["ports"][0] = json!({"containerPort": 8080});
    // proxy has no ports: none are created for it.
    assert_eq!(out, want);
    let paths: Vec<String> = mutation
        .changes
        .iter()
        .map(|c| c.path().to_string())
        .collect();
    assert_eq!(
        paths,
        ["spec.containers[name: app].ports[containerPort: 8080].hostPort"]
    );
    // Idempotent: nothing left to remove is no change.
    let (again, mutation) = mutate(&system, &out, &request).unwrap();
    assert_eq!(again, out);
    assert!(!mutation.changed());
}

#[test]
fn an_annotation_is_removed_by_assign_metadata() {
    let yaml = "\
apiVersion: mutations.sartor.dev/v1
kind: AssignMetadata
metadata: {name: drop-scrape}
spec:
  location: metadata.annotations.\"deprecated.example.com/scrape\"
  parameters: {assign: {remove: true}}
";
    let request = Request::create(Some("default"));
    let (out, _) = mutate(&system(yaml), &pod(), &request).unwrap();
    let mut want = pod();
    want["metadata"]["annotations"] = json!({"keep": "me"});
    assert_eq!(out, want);
    // An object without annotations gets none.
    let bare = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}});
    let (out, mutation) = mutate(&system(yaml), &bare, &request).unwrap();
    assert_eq!(out, bare);
    assert!(!mutation.changed());
}

/// Assign and removal of the same field: the later in Gatekeeper's order
/// (kind, then name) wins, as between two Assigns, and the set converges.
#[test]
fn removal_and_assign_on_one_path_the_order_decides() {
    let location = "spec.containers[name: app].ports[containerPort: 8080].hostPort";
    let set = |name: &str| assign(name, location, "{assign: {value: 80}}");
    let remove = |name: &str| assign(name, location, REMOVE_HOST_PORTS);
    let request = Request::create(Some("default"));
    // a-set, then b-remove: removed.
    let (out, _) = mutate(
        &system(&format!("{}---\n{}", set("a-set"), remove("b-remove"))),
        &pod(),
        &request,
    )
    .unwrap();
    assert_eq!(
        out["spec"]["containers"][0]["ports"][0],
        json!({"containerPort": 8080})
    );
    // a-remove, then b-set: set.
    let (out, mutation) = mutate(
        &system(&format!("{}---\n{}", remove("a-remove"), set("b-set"))),
        &pod(),
        &request,
    )
    .unwrap();
    assert_eq!(
        out["spec"]["containers"][0]["ports"][0],
        json!({"containerPort": 8080, "hostPort": 80})
    );
    assert_eq!(
        mutation.applied(),
        [
            &MutatorId::new(MutatorKind::Assign, "a-remove"),
            &MutatorId::new(MutatorKind::Assign, "b-set")
        ]
    );
}

#[test]
fn path_tests_narrow_a_removal() {
    // Only containers that set a memory limit lose their CPU limit.
    let yaml = assign(
        "no-cpu-limit",
        "spec.containers[name: *].resources.limits.cpu",
        "{assign: {remove: true}, pathTests: [{subPath: 'spec.containers[name: *].resources.limits', condition: MustExist}]}",
    );
    let object = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"containers": [
            {"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
            {"name": "b", "resources": {"requests": {"cpu": "1"}}},
        ]},
    });
    let (out, _) = mutate(&system(&yaml), &object, &Request::create(Some("default"))).unwrap();
    let mut want = object.clone();
    want["spec"]["containers"][0]["resources"]["limits"] = json!({"memory": "1Gi"});
    assert_eq!(out, want);
    assert_eq!(
        compile_error(&assign(
            "never",
            "spec.containers[name: *].resources.limits.cpu",
            "{assign: {remove: true}, pathTests: [{subPath: 'spec.containers[name: *].resources', condition: MustNotExist}]}",
        )),
        "Assign never: spec.parameters.pathTests[0]: MustNotExist cannot go with remove: a removal applies only where its location exists, so it would never apply"
    );
}

#[test]
fn remove_is_one_source_among_the_others() {
    assert_eq!(
        compile_error(&assign(
            "both",
            "spec.x",
            "{assign: {remove: true, value: 1}}"
        )),
        "Assign both: spec.parameters.assign: set exactly one of value, fromMetadata, fromNamespace, externalData and remove"
    );
}

#[test]
fn a_removal_implies_the_same_shape_as_a_set() {
    // Removing a field of `spec.tolerations` says it is an object; a
    // ModifySet says it is a list: a schema conflict, both skipped.
    let yaml = format!(
        "{}---\n{}",
        assign("drop", "spec.tolerations.legacy", REMOVE_HOST_PORTS),
        "apiVersion: mutations.sartor.dev/v1\nkind: ModifySet\nmetadata: {name: tolerate}\n\
         spec:\n  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]\n  \
         location: spec.tolerations\n  parameters: {values: {fromList: [{key: x, operator: Exists}]}}\n"
    );
    let system = system(&yaml);
    assert!(system.is_conflicted(&MutatorId::new(MutatorKind::Assign, "drop")));
    assert!(system.is_conflicted(&MutatorId::new(MutatorKind::ModifySet, "tolerate")));
}

#[test]
fn list_elements_are_removed_by_key_glob_or_exclusion() {
    let request = Request::create(Some("default"));
    // One element, by its key; gone once, then nothing to do.
    let system_one = system(&assign(
        "no-proxy",
        "spec.containers[name: proxy]",
        REMOVE_HOST_PORTS,
    ));
    let (out, mutation) = mutate(&system_one, &pod(), &request).unwrap();
    let mut want = pod();
    want["spec"]["containers"] = json!([want["spec"]["containers"][0].clone()]);
    assert_eq!(out, want);
    let paths: Vec<String> = mutation
        .changes
        .iter()
        .map(|c| c.path().to_string())
        .collect();
    assert_eq!(paths, ["spec.containers[name: proxy]"]);
    let (again, mutation) = mutate(&system_one, &out, &request).unwrap();
    assert_eq!(again, out);
    assert!(!mutation.changed());
    // Every port but 8080 (an exclusion at the end: a removal may end there).
    let (out, _) = mutate(
        &system(&assign(
            "only-8080",
            "spec.containers[name: *].ports[containerPort notin (8080)]",
            REMOVE_HOST_PORTS,
        )),
        &pod(),
        &request,
    )
    .unwrap();
    let mut want = pod();
    want["spec"]["containers"][0]["ports"] = json!([{"containerPort": 8080, "hostPort": 8080}]);
    assert_eq!(out, want);
    // Every port (a glob at the end); the list itself stays, empty.
    let (out, _) = mutate(
        &system(&assign(
            "no-ports",
            "spec.containers[name: *].ports[containerPort: *]",
            REMOVE_HOST_PORTS,
        )),
        &pod(),
        &request,
    )
    .unwrap();
    let mut want = pod();
    want["spec"]["containers"][0]["ports"] = json!([]);
    assert_eq!(out, want);
}

#[test]
fn a_key_held_twice_is_removed_at_once() {
    let object = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"containers": [{"name": "app", "env": [
            {"name": "DEBUG", "value": "1"},
            {"name": "KEEP", "value": "x"},
            {"name": "DEBUG", "value": "2"},
        ]}]},
    });
    let (out, mutation) = mutate(
        &system(&assign(
            "no-debug",
            "spec.containers[name: *].env[name: DEBUG]",
            REMOVE_HOST_PORTS,
        )),
        &object,
        &Request::create(Some("default")),
    )
    .unwrap();
    let mut want = object.clone();
    want["spec"]["containers"][0]["env"] = json!([{"name": "KEEP", "value": "x"}]);
    assert_eq!(out, want);
    assert_eq!(mutation.passes, 2);
}
