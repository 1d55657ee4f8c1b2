//! `[key notin (...)]`, sartor's exclusion selector: every element a glob
//! would visit except the listed keys, for every kind, with whole-object
//! assertions. All mutators here are `mutations.sartor.dev/v1`: the loader
//! refuses exclusions under Gatekeeper's apiVersions.

use sartor_api::MutatorKind;
use sartor_engine::{MutatorId, Request};
use serde_json::{Value, json};

use super::{assign, compile, compile_error, mutate, pod, system};

fn request() -> Request<'static> {
    Request::create(Some("default"))
}

/// Mutates `object` with the mutators in `yaml`; the result and the trace
/// as `pass mutator path` lines.
fn run(yaml: &str, object: &Value) -> (Value, Vec<String>) {
    let system = system(yaml);
    let (out, mutation) = mutate(&system, object, &request()).unwrap_or_else(|e| panic!("{e}"));
    let trace = mutation
        .changes
        .iter()
        .map(|c| format!("{} {} {}", c.pass, c.mutator(), c.path()))
        .collect();
    (out, trace)
}

fn modify_set(name: &str, location: &str, parameters: &str) -> String {
    format!(
        "apiVersion: mutations.sartor.dev/v1\nkind: ModifySet\nmetadata: {{name: {name}}}\n\
         spec:\n  applyTo: [{{groups: [\"\"], versions: [v1], kinds: [Pod]}}]\n  \
         location: '{location}'\n  parameters: {parameters}\n"
    )
}

fn assign_image(name: &str, location: &str, parameters: &str) -> String {
    format!(
        "apiVersion: mutations.sartor.dev/v1\nkind: AssignImage\nmetadata: {{name: {name}}}\n\
         spec:\n  applyTo: [{{groups: [\"\"], versions: [v1], kinds: [Pod]}}]\n  \
         location: '{location}'\n  parameters: {parameters}\n"
    )
}

/// A Pod whose containers are the given JSON objects.
fn pod_of(containers: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"containers": containers},
    })
}

const PULL_BUT_MESH: &str =
    "spec.containers[name notin (istio-proxy, linkerd-proxy)].imagePullPolicy";

#[test]
fn assign_leaves_the_excluded_elements_alone() {
    let (out, trace) = run(
        &assign("pull", PULL_BUT_MESH, "{assign: {value: Always}}"),
        &pod(&["app", "istio-proxy", "worker", "linkerd-proxy"]),
    );
    assert_eq!(
        out,
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"containers": [
                {"name": "app", "image": "app:1", "imagePullPolicy": "Always"},
                {"name": "istio-proxy", "image": "istio-proxy:1"},
                {"name": "worker", "image": "worker:1", "imagePullPolicy": "Always"},
                {"name": "linkerd-proxy", "image": "linkerd-proxy:1"},
            ]},
        })
    );
    // The trace pins the exclusion to each element changed.
    assert_eq!(
        trace,
        [
            "1 Assign pull spec.containers[name: app].imagePullPolicy",
            "1 Assign pull spec.containers[name: worker].imagePullPolicy",
        ]
    );
}

#[test]
fn elements_without_the_key_are_selected_like_a_glob_selects_them() {
    let object = pod_of(json!([
        {"name": "istio-proxy"},
        {"image": "nameless"},
        {"name": 7},
    ]));
    let (out, trace) = run(
        &assign(
            "pull",
            "spec.containers[name notin (istio-proxy)].imagePullPolicy",
            "{assign: {value: Always}}",
        ),
        &object,
    );
    assert_eq!(
        out,
        pod_of(json!([
            {"name": "istio-proxy"},
            {"image": "nameless", "imagePullPolicy": "Always"},
            {"name": 7, "imagePullPolicy": "Always"},
        ]))
    );
    // An element with no string or integer key keeps the exclusion in its path.
    assert_eq!(
        trace,
        [
            "1 Assign pull spec.containers[name notin (istio-proxy)].imagePullPolicy",
            "1 Assign pull spec.containers[name: 7].imagePullPolicy",
        ]
    );
}

#[test]
fn must_not_exist_sets_only_where_the_field_is_missing() {
    let object = pod_of(json!([
        {"name": "app", "imagePullPolicy": "Never"},
        {"name": "istio-proxy"},
        {"name": "worker"},
    ]));
    let parameters = format!(
        "{{assign: {{value: Always}}, pathTests: [{{subPath: '{PULL_BUT_MESH}', condition: MustNotExist}}]}}"
    );
    let (out, _) = run(&assign("pull", PULL_BUT_MESH, &parameters), &object);
    assert_eq!(
        out,
        pod_of(json!([
            {"name": "app", "imagePullPolicy": "Never"},
            {"name": "istio-proxy"},
            {"name": "worker", "imagePullPolicy": "Always"},
        ]))
    );
}

#[test]
fn must_exist_creates_nothing_under_an_exclusion() {
    let object = pod_of(json!([
        {"name": "app", "securityContext": {"privileged": false}},
        {"name": "istio-proxy", "securityContext": {}},
        {"name": "worker"},
    ]));
    let location = "spec.containers[name notin (istio-proxy)].securityContext.runAsNonRoot";
    let parameters = "{assign: {value: true}, pathTests: [\
        {subPath: 'spec.containers[name notin (istio-proxy)].securityContext', condition: MustExist}]}";
    let (out, _) = run(&assign("non-root", location, parameters), &object);
    assert_eq!(
        out,
        pod_of(json!([
            {"name": "app", "securityContext": {"privileged": false, "runAsNonRoot": true}},
            {"name": "istio-proxy", "securityContext": {}},
            {"name": "worker"},
        ]))
    );
    // MustNotExist on the exclusion level itself never passes, as on a glob.
    let parameters = "{assign: {value: true}, pathTests: [\
        {subPath: 'spec.containers[name notin (istio-proxy)]', condition: MustNotExist}]}";
    let (out, trace) = run(&assign("non-root", location, parameters), &object);
    assert_eq!(out, object);
    assert!(trace.is_empty());
}

#[test]
fn a_subpath_may_write_the_set_in_any_order() {
    let parameters = "{assign: {value: Always}, pathTests: [\
        {subPath: 'spec.containers[name notin (linkerd-proxy, \"istio-proxy\")]', condition: MustExist}]}";
    let (out, _) = run(
        &assign("pull", PULL_BUT_MESH, parameters),
        &pod(&["app", "linkerd-proxy"]),
    );
    assert_eq!(
        out["spec"]["containers"],
        json!([
            {"name": "app", "image": "app:1", "imagePullPolicy": "Always"},
            {"name": "linkerd-proxy", "image": "linkerd-proxy:1"},
        ])
    );
}

#[test]
fn integer_keys_under_a_glob_exclude_numbers_only() {
    let object = pod_of(json!([
        {"name": "app", "ports": [
            {"containerPort": 80},
            {"containerPort": 8080},
            {"containerPort": "443"},
            {"containerPort": 443},
        ]},
        {"name": "istio-proxy", "ports": [{"containerPort": 15090}]},
    ]));
    let (out, trace) = run(
        &assign(
            "udp",
            "spec.containers[name: *].ports[containerPort notin (80, 443)].protocol",
            "{assign: {value: UDP}}",
        ),
        &object,
    );
    assert_eq!(
        out,
        pod_of(json!([
            {"name": "app", "ports": [
                {"containerPort": 80},
                {"containerPort": 8080, "protocol": "UDP"},
                // A quoted "443" in the object is a string: not excluded by 443.
                {"containerPort": "443", "protocol": "UDP"},
                {"containerPort": 443},
            ]},
            {"name": "istio-proxy", "ports": [{"containerPort": 15090, "protocol": "UDP"}]},
        ]))
    );
    assert_eq!(
        trace,
        [
            "1 Assign udp spec.containers[name: app].ports[containerPort: 8080].protocol",
            "1 Assign udp spec.containers[name: app].ports[containerPort: \"443\"].protocol",
            "1 Assign udp spec.containers[name: istio-proxy].ports[containerPort: 15090].protocol",
        ]
    );
    // The other way round: exclusion outside, glob inside; and a quoted
    // value excludes strings only.
    let (out, _) = run(
        &assign(
            "udp",
            "spec.containers[name notin (istio-proxy)].ports[containerPort notin (\"443\")].protocol",
            "{assign: {value: UDP}}",
        ),
        &object,
    );
    assert_eq!(
        out,
        pod_of(json!([
            {"name": "app", "ports": [
                {"containerPort": 80, "protocol": "UDP"},
                {"containerPort": 8080, "protocol": "UDP"},
                {"containerPort": "443"},
                {"containerPort": 443, "protocol": "UDP"},
            ]},
            {"name": "istio-proxy", "ports": [{"containerPort": 15090}]},
        ]))
    );
}

#[test]
fn an_empty_or_missing_list_is_left_as_is() {
    let mutators = format!(
        "{}---\n{}---\n{}",
        assign("pull", PULL_BUT_MESH, "{assign: {value: Always}}"),
        modify_set(
            "args",
            "spec.containers[name notin (istio-proxy)].args",
            "{values: {fromList: [--v]}}"
        ),
        assign_image(
            "mirror",
            "spec.containers[name notin (istio-proxy)].image",
            "{assignDomain: mirror.example.com}"
        ),
    );
    let system = system(&mutators);
    for object in [
        pod_of(json!([])),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}, "spec": {}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}}),
    ] {
        let (out, mutation) = mutate(&system, &object, &request()).unwrap();
        assert_eq!(out, object);
        assert!(mutation.changes.is_empty(), "{:?}", mutation.changes);
    }
}

#[test]
fn modify_set_merges_and_prunes_through_an_exclusion() {
    let object = pod_of(json!([
        {"name": "app", "args": ["--debug", "--v=1"]},
        {"name": "istio-proxy", "args": ["--debug"]},
        {"name": "worker"},
    ]));
    let (out, trace) = run(
        &modify_set(
            "no-debug",
            "spec.containers[name notin (istio-proxy)].args",
            "{operation: prune, values: {fromList: [--debug]}}",
        ),
        &object,
    );
    assert_eq!(
        out,
        pod_of(json!([
            {"name": "app", "args": ["--v=1"]},
            {"name": "istio-proxy", "args": ["--debug"]},
            // Pruning leaves a missing list missing.
            {"name": "worker"},
        ]))
    );
    assert_eq!(
        trace,
        ["1 ModifySet no-debug spec.containers[name: app].args"]
    );
    let (out, _) = run(
        &modify_set(
            "quiet",
            "spec.containers[name notin (istio-proxy)].args",
            "{values: {fromList: [--quiet]}}",
        ),
        &object,
    );
    assert_eq!(
        out,
        pod_of(json!([
            {"name": "app", "args": ["--debug", "--v=1", "--quiet"]},
            {"name": "istio-proxy", "args": ["--debug"]},
            {"name": "worker", "args": ["--quiet"]},
        ]))
    );
}

#[test]
fn assign_image_rewrites_all_but_the_excluded_images() {
    let (out, trace) = run(
        &assign_image(
            "mirror",
            "spec.containers[name notin (istio-proxy)].image",
            "{assignDomain: mirror.example.com}",
        ),
        &pod(&["app", "istio-proxy"]),
    );
    assert_eq!(
        out,
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"containers": [
                {"name": "app", "image": "mirror.example.com/app:1"},
                {"name": "istio-proxy", "image": "istio-proxy:1"},
            ]},
        })
    );
    assert_eq!(
        trace,
        ["1 AssignImage mirror spec.containers[name: app].image"]
    );
}

#[test]
fn an_excluded_sidecar_added_later_stays_untouched_and_the_set_converges() {
    // "pull" sorts before "sidecar": the sidecar arrives in pass 1 after pull
    // ran, and pass 2 must leave it alone because it is excluded.
    let sidecar = "{assign: {value: {name: istio-proxy, image: 'proxy:1'}}, \
                   pathTests: [{subPath: 'spec.containers[name: istio-proxy]', condition: MustNotExist}]}";
    let mutators = format!(
        "{}---\n{}",
        assign("pull", PULL_BUT_MESH, "{assign: {value: Always}}"),
        assign("sidecar", "spec.containers[name: istio-proxy]", sidecar),
    );
    let system = system(&mutators);
    let (out, mutation) = mutate(&system, &pod(&["app"]), &request()).unwrap();
    assert_eq!(
        out,
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"containers": [
                {"name": "app", "image": "app:1", "imagePullPolicy": "Always"},
                {"name": "istio-proxy", "image": "proxy:1"},
            ]},
        })
    );
    assert_eq!(mutation.passes, 2);
    // A fixed point: mutating the result changes nothing.
    let (again, mutation) = mutate(&system, &out, &request()).unwrap();
    assert_eq!(again, out);
    assert!(mutation.changes.is_empty());
}

#[test]
fn an_exclusion_is_a_list_keyed_by_its_key_field_in_the_schema() {
    let pull = MutatorId::new(MutatorKind::Assign, "pull");
    let mut system = system(&assign("pull", PULL_BUT_MESH, "{assign: {value: Always}}"));
    // The same list treated as a list of values: a conflict, both skipped.
    let set = compile(&modify_set(
        "containers-set",
        "spec.containers",
        "{values: {fromList: [x]}}",
    ));
    let set_id = set.id().clone();
    assert_eq!(
        system.upsert(set).into_iter().collect::<Vec<_>>(),
        [pull.clone(), set_id.clone()]
    );
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
    let (out, _) = mutate(&system, &pod(&["app"]), &request()).unwrap();
    assert_eq!(out, pod(&["app"]));
    system.remove(&set_id);
    assert!(system.conflicted().is_empty());

    // The same list as an object: a conflict too.
    let object = compile(&assign(
        "as-object",
        "spec.containers.app",
        "{assign: {value: 1}}",
    ));
    let object_id = object.id().clone();
    system.upsert(object);
    assert_eq!(
        system
            .conflicts(&pull)
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        [
            "conflicts with Assign as-object about spec.containers: this mutator treats it as a list keyed by name, Assign as-object as an object (v1 Pod CREATE and 1 more)"
        ]
    );
    system.remove(&object_id);

    // Keyed by another field: a conflict; by the same field, a glob or a
    // concrete key agrees with it.
    let by_image = compile(&assign(
        "by-image",
        "spec.containers[image notin (x)].y",
        "{assign: {value: 1}}",
    ));
    let by_image_id = by_image.id().clone();
    system.upsert(by_image);
    assert_eq!(
        system
            .conflicts(&pull)
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        [
            "conflicts with Assign by-image about spec.containers: this mutator treats it as a list keyed by name, Assign by-image as a list keyed by image (v1 Pod CREATE and 1 more)"
        ]
    );
    system.remove(&by_image_id);
    for (name, location) in [
        ("glob", "spec.containers[name: *].image"),
        ("concrete", "spec.containers[name: app].image"),
    ] {
        let agrees = compile(&assign(name, location, "{assign: {value: x}}"));
        assert!(system.upsert(agrees).is_empty(), "{location}");
    }
    assert!(system.conflicted().is_empty());
}

#[test]
fn an_exclusion_cannot_end_a_location_where_a_glob_cannot() {
    let cases = [
        (
            assign(
                "a",
                "spec.containers[name notin (istio-proxy)]",
                "{assign: {value: {name: x}}}",
            ),
            "Assign a: spec.location: spec.containers[name notin (istio-proxy)] ends in a notin selector; there is no single list element to set",
        ),
        (
            modify_set(
                "m",
                "spec.containers[name notin (istio-proxy)]",
                "{values: {fromList: [a]}}",
            ),
            "ModifySet m: spec.location: ModifySet cannot end at a keyed-list element (spec.containers[name notin (istio-proxy)])",
        ),
        (
            assign_image(
                "i",
                "spec.containers[name notin (istio-proxy)]",
                "{assignTag: ':v1'}",
            ),
            "AssignImage i: spec.location: AssignImage cannot end at a keyed-list element (spec.containers[name notin (istio-proxy)])",
        ),
        (
            assign(
                "a",
                "spec.containers[name notin (istio-proxy)].name",
                "{assign: {value: x}}",
            ),
            "Assign a: spec.location: spec.containers[name notin (istio-proxy)].name would change the key field \"name\" of a list element, which identifies it",
        ),
        (
            assign(
                "a",
                "spec.containers[name notin ()].image",
                "{assign: {value: x}}",
            ),
            "Assign a: spec.location: invalid location \"spec.containers[name notin ()].image\": empty notin set at 28: list at least one value, as in [name notin (istio-proxy)]\n  spec.containers[name notin ()].image\n                              ^",
        ),
        (
            assign(
                "a",
                PULL_BUT_MESH,
                "{assign: {value: x}, pathTests: [{subPath: 'spec.containers[name notin (istio-proxy)]', condition: MustExist}]}",
            ),
            "Assign a: spec.parameters.pathTests: pathTest subPath \"spec.containers[name notin (istio-proxy)]\" is not a prefix of location \"spec.containers[name notin (istio-proxy, linkerd-proxy)].imagePullPolicy\"",
        ),
    ];
    for (yaml, want) in cases {
        assert_eq!(compile_error(&yaml), want);
    }
}
