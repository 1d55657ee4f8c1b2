#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use serde_json::json;

use super::*;
use crate::guard::{COMPARED_NAMESPACE, IS_NAMESPACE, REQUEST_NAMESPACE};
use sartor_api::MutatorKind;
use sartor_engine::Mutator;

/// The set of `mutators` (sartor's apiVersion, JSON) exported with the
/// default options.
fn export(mutators: &[Value]) -> Export {
    let mut system = System::new();
    let mut specs = HashMap::new();
    for value in mutators {
        let object = sartor_api::parse_mutator(value).unwrap();
        let mutator = Mutator::compile(&object).unwrap();
        specs.insert(mutator.id().clone(), object);
        system.upsert(mutator);
    }
    map(&system, &specs, &Options::default())
}

fn assign(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "mutations.sartor.dev/v1", "kind": "Assign",
           "metadata": {"name": name}, "spec": spec})
}

fn pods() -> Value {
    json!([{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}])
}

#[test]
fn an_assign_of_fields_is_one_mutation_of_the_policy() {
    let exported = export(&[assign(
        "seccomp",
        json!({"applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"], "operations": ["CREATE"]}],
               "location": "spec.securityContext.seccompProfile",
               "parameters": {"pathTests": [{"subPath": "spec.securityContext.seccompProfile", "condition": "MustNotExist"}],
                              "assign": {"value": {"type": "RuntimeDefault"}}}}),
    )]);
    assert_eq!(exported.refused, []);
    assert_eq!(
        exported.objects,
        [
            json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingAdmissionPolicy",
                "metadata": {"name": "sartor",
                             "labels": {"app.kubernetes.io/managed-by": "sartor"},
                             "annotations": {"mutations.sartor.dev/exported": "Assign/seccomp"}},
                "spec": {
                    "failurePolicy": "Ignore",
                    "reinvocationPolicy": "IfNeeded",
                    "matchConstraints": {
                        "matchPolicy": "Exact",
                        "namespaceSelector": {"matchExpressions": [
                            {"key": "admission.sartor.dev/ignore", "operator": "DoesNotExist"},
                            {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                             "values": ["kube-system", "sartor-system"]},
                        ]},
                        "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                           "resources": ["pods"], "operations": ["CREATE"]}],
                    },
                    "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": concat!(
                        r#"((request.kind.group == "" && request.kind.version == "v1" && request.kind.kind == "Pod" && request.operation in ["CREATE"])"#,
                        r#" && !(has(object.spec) && has(object.spec.securityContext) && has(object.spec.securityContext.seccompProfile)))"#,
                        r#" ? (has(object.spec) ? (has(object.spec.securityContext)"#,
                        r#" ? [JSONPatch{op: "add", path: "/spec/securityContext/seccompProfile", value: {"type": "RuntimeDefault"}}]"#,
                        r#" : [JSONPatch{op: "add", path: "/spec/securityContext", value: {"seccompProfile": {"type": "RuntimeDefault"}}}])"#,
                        r#" : [JSONPatch{op: "add", path: "/spec", value: {"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}}]) : []"#,
                    )}}],
                },
            }),
            json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingAdmissionPolicyBinding",
                "metadata": {"name": "sartor", "labels": {"app.kubernetes.io/managed-by": "sartor"}},
                "spec": {"policyName": "sartor"},
            }),
        ]
    );
}

#[test]
fn what_cannot_be_exported_exactly_is_refused_with_its_reason() {
    let exported = export(&[
        assign(
            "a-notin",
            json!({"applyTo": pods(), "location": "spec.containers[name: *].ports[containerPort notin (80)].hostPort",
                   "parameters": {"assign": {"value": 0}}}),
        ),
        assign(
            "b-external",
            json!({"applyTo": pods(), "location": "spec.hostname",
                   "parameters": {"assign": {"externalData": {"provider": "names"}}}}),
        ),
        assign(
            "c-widget",
            json!({"applyTo": [{"groups": ["example.com"], "versions": ["v1"], "kinds": ["Widget"]}],
                   "location": "spec.size", "parameters": {"assign": {"value": 1}}}),
        ),
    ]);
    let reasons: Vec<String> = exported.refused.iter().map(ToString::to_string).collect();
    assert_eq!(
        reasons,
        [
            "Assign/a-notin: not exported: its location has a notin selector of numbers, which is not exported yet",
            "Assign/b-external: not exported: its value comes from externalData (the API server cannot ask a provider), which is not exported",
            "Assign/c-widget: not exported: it applies to Widget (example.com/v1), whose resource (plural) is not known offline: give its CRD or --api-resources",
        ]
    );
    assert_eq!(exported.objects, Vec::<Value>::new());
}

/// AssignMetadata `name` setting label `key`, when `selector` matches.
fn label(name: &str, key: &str, selector: Option<&str>) -> Value {
    let mut spec = json!({"location": format!("metadata.labels.{key}"),
                          "parameters": {"assign": {"value": "yes"}}});
    if let Some(selected) = selector {
        spec["match"] = json!({"labelSelector": {"matchLabels": {selected: "yes"}}});
    }
    json!({"apiVersion": "mutations.sartor.dev/v1", "kind": "AssignMetadata",
           "metadata": {"name": name}, "spec": spec})
}

#[test]
fn a_mutator_applying_in_a_third_pass_is_refused() {
    // Pass 1: m-c sets c. Pass 2: m-b (selects c) sets b. Pass 3: a-priority
    // (selects b) would apply: the API server runs a policy twice at most.
    let priority = assign(
        "a-priority",
        json!({"applyTo": pods(), "location": "spec.priority",
               "match": {"labelSelector": {"matchLabels": {"b": "yes"}}},
               "parameters": {"assign": {"value": 10}}}),
    );
    let exported = export(&[
        priority.clone(),
        label("m-b", "b", Some("c")),
        label("m-c", "c", None),
    ]);
    assert_eq!(
        exported.exported,
        [
            MutatorId::new(MutatorKind::AssignMetadata, "m-b"),
            MutatorId::new(MutatorKind::AssignMetadata, "m-c")
        ]
    );
    assert_eq!(
        exported
            .refused
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        [
            "Assign/a-priority: not exported: it reads metadata.labels.b, which AssignMetadata/m-b writes after it: sartor may apply it in pass 3, and the API server runs a policy at most twice (once more when the first run changed the object)"
        ]
    );
    // Two passes do: without m-b's wait for c, everything exports.
    let exported = export(&[priority, label("m-b", "b", None)]);
    assert_eq!(exported.refused, []);
}

#[test]
fn a_keyed_element_assigned_whole_and_merged_into_needs_two_passes() {
    // Gatekeeper's docs (workload-resources): the sidecar is assigned
    // whole, then its args merged. Pass 2 assigns it again (dropping the
    // args) and merges them again: the object of pass 1, so the API
    // server's second run ends where sartor does.
    let sidecar = assign(
        "add-sidecar",
        json!({"applyTo": pods(), "location": "spec.containers[name: istio-proxy]",
               "parameters": {"assign": {"value": {"name": "istio-proxy", "image": "proxyv2"}}}}),
    );
    let args = json!({"apiVersion": "mutations.sartor.dev/v1", "kind": "ModifySet",
        "metadata": {"name": "add-istio-args"},
        "spec": {"applyTo": pods(), "location": "spec.containers[name: istio-proxy].args",
                 "parameters": {"operation": "merge", "values": {"fromList": ["proxy", "sidecar"]}}}});
    let exported = export(&[sidecar, args]);
    assert_eq!(exported.refused, []);
}

#[test]
fn a_label_is_added_only_when_missing() {
    let exported = export(&[
        json!({"apiVersion": "mutations.sartor.dev/v1", "kind": "AssignMetadata",
        "metadata": {"name": "owner"},
        "spec": {"match": {"scope": "Namespaced", "namespaces": ["shop-*"]},
                 "location": "metadata.labels.\"example.com/owner\"",
                 "parameters": {"assign": {"value": "shop"}}}}),
    ]);
    let policy = &exported.objects[0];
    assert_eq!(
        policy["spec"]["matchConstraints"]["resourceRules"],
        json!([{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "operations": ["CREATE", "UPDATE"]}])
    );
    let compared = COMPARED_NAMESPACE;
    assert_eq!(
        policy["spec"]["mutations"][0]["jsonPatch"]["expression"],
        json!(format!(
            concat!(
                r#"((!{is_ns} && {request_ns} != "") && ({compared} == "" && !{is_ns} || {compared}.startsWith("shop-")))"#,
                r#" ? (!(has(object.metadata) && has(object.metadata.labels)) ? [JSONPatch{{op: "add", path: "/metadata/labels", value: {{"example.com/owner": "shop"}}}}]"#,
                r#" : ("example.com/owner" in object.metadata.labels ? [] : [JSONPatch{{op: "add", path: "/metadata/labels/example.com~1owner", value: "shop"}}])) : []"#,
            ),
            is_ns = IS_NAMESPACE,
            request_ns = REQUEST_NAMESPACE,
            compared = compared
        ))
    );
}

#[test]
fn what_sartor_never_mutates_is_left_out_of_a_policy_for_every_kind() {
    let exported = export(&[label("any", "a", None)]);
    let spec = &exported.objects[0]["spec"];
    let every = json!(["*"]);
    let mut excluded: Vec<Value> = [
        "templates.gatekeeper.sh",
        "constraints.gatekeeper.sh",
        "mutations.gatekeeper.sh",
        "config.gatekeeper.sh",
        "externaldata.gatekeeper.sh",
        "expansion.gatekeeper.sh",
        "status.gatekeeper.sh",
    ]
    .iter()
    .map(|group| json!({"apiGroups": [group], "apiVersions": every, "resources": every, "operations": every}))
    .collect();
    excluded.push(
        json!({"apiGroups": ["admissionregistration.k8s.io"], "apiVersions": every,
        "resources": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations",
                      "validatingadmissionpolicies", "validatingadmissionpolicybindings",
                      "mutatingadmissionpolicies", "mutatingadmissionpolicybindings"],
        "operations": every}),
    );
    assert_eq!(
        spec["matchConstraints"]["excludeResourceRules"],
        Value::Array(excluded)
    );
    assert_eq!(
        spec["matchConditions"],
        json!([{"name": "not-sartors-own-api",
                "expression": r#"!(request.kind.group == "sartor.dev" || request.kind.group.endsWith(".sartor.dev"))"#}])
    );
    // A policy of named built-in kinds reaches none of it.
    let exported = export(&[assign(
        "pods",
        json!({"applyTo": pods(), "location": "spec.priority", "parameters": {"assign": {"value": 1}}}),
    )]);
    let spec = &exported.objects[0]["spec"];
    assert_eq!(spec.get("matchConditions"), None);
    assert_eq!(spec["matchConstraints"].get("excludeResourceRules"), None);
}

/// The mutation's expression of the only mutator exported.
fn expression(exported: &Export) -> &str {
    exported.objects[0]["spec"]["mutations"][0]["jsonPatch"]["expression"]
        .as_str()
        .unwrap()
}

#[test]
fn a_glob_sets_every_element_there_is_and_creates_none() {
    let exported = export(&[assign(
        "pull",
        json!({"applyTo": pods(), "location": "spec.containers[name: *].securityContext.privileged",
               "parameters": {"assign": {"value": false}}}),
    )]);
    assert_eq!(
        expression(&exported),
        concat!(
            r#"(request.kind.group == "" && request.kind.version == "v1" && request.kind.kind == "Pod" && request.operation in ["CREATE", "UPDATE"])"#,
            r#" ? (has(object.spec) ? (has(object.spec.containers) ? lists.range(size(object.spec.containers)).map(g,"#,
            r#" (has(object.spec.containers[g].securityContext) ? [JSONPatch{op: "add", path: "/spec/containers/" + string(g) + "/securityContext/privileged", value: false}]"#,
            r#" : [JSONPatch{op: "add", path: "/spec/containers/" + string(g) + "/securityContext", value: {"privileged": false}}])).flatten()"#,
            r#" : []) : []) : []"#,
        )
    );
}

#[test]
fn a_glob_path_test_is_checked_per_element() {
    // gatekeeper-library's pod-security-policy pattern: set the field on
    // every container that has none.
    let exported = export(&[assign(
        "run-as-non-root",
        json!({"applyTo": pods(), "location": "spec.containers[name: *].securityContext.runAsNonRoot",
               "parameters": {"pathTests": [{"subPath": "spec.containers[name: *].securityContext.runAsNonRoot", "condition": "MustNotExist"}],
                              "assign": {"value": true}}}),
    )]);
    assert_eq!(exported.refused, []);
    assert_eq!(
        expression(&exported),
        concat!(
            r#"(request.kind.group == "" && request.kind.version == "v1" && request.kind.kind == "Pod" && request.operation in ["CREATE", "UPDATE"])"#,
            r#" ? (has(object.spec) ? (has(object.spec.containers) ? lists.range(size(object.spec.containers)).map(g,"#,
            r#" (has(object.spec.containers[g].securityContext) ? (has(object.spec.containers[g].securityContext.runAsNonRoot) ? []"#,
            r#" : [JSONPatch{op: "add", path: "/spec/containers/" + string(g) + "/securityContext/runAsNonRoot", value: true}])"#,
            r#" : [JSONPatch{op: "add", path: "/spec/containers/" + string(g) + "/securityContext", value: {"runAsNonRoot": true}}])).flatten()"#,
            r#" : []) : []) : []"#,
        )
    );
}

#[test]
fn a_must_exist_below_a_glob_creates_nothing_that_is_missing() {
    // The parent must be there in each element.
    let parent = export(&[assign(
        "parent-there",
        json!({"applyTo": pods(), "location": "spec.containers[name: *].securityContext.privileged",
               "parameters": {"pathTests": [{"subPath": "spec.containers[name: *].securityContext", "condition": "MustExist"}],
                              "assign": {"value": false}}}),
    )]);
    assert_eq!(parent.refused, []);
    assert!(
        expression(&parent).contains(concat!(
            r#"lists.range(size(object.spec.containers)).map(g, (has(object.spec.containers[g].securityContext)"#,
            r#" ? [JSONPatch{op: "add", path: "/spec/containers/" + string(g) + "/securityContext/privileged", value: false}]"#,
            r#" : [])).flatten()"#,
        )),
        "{}",
        expression(&parent)
    );
    // A MustNotExist on the glob itself stops at any list, an empty one
    // too.
    let no_list = export(&[assign(
        "no-list",
        json!({"applyTo": pods(), "location": "spec.initContainers[name: *].securityContext.privileged",
               "parameters": {"pathTests": [{"subPath": "spec.initContainers[name: *]", "condition": "MustNotExist"}],
                              "assign": {"value": false}}}),
    )]);
    assert_eq!(no_list.refused, []);
    // It writes nothing anywhere: a typed empty list, as the API server
    // refuses `[]` alone (list(dyn)).
    assert_eq!(
        expression(&no_list),
        concat!(
            r#"(request.kind.group == "" && request.kind.version == "v1" && request.kind.kind == "Pod" && request.operation in ["CREATE", "UPDATE"])"#,
            r#" ? [].map(p, JSONPatch{op: "test", path: "", value: p}) : []"#,
        )
    );
}

#[test]
fn no_branch_that_writes_is_a_typed_empty_list_whatever_the_names_say() {
    // The field's name reads like a patch; the tests still leave nothing to
    // write: the parent must exist and the list below it must not.
    let named = export(&[assign(
        "named",
        json!({"applyTo": pods(), "location": "spec.\"JSONPatch{\".containers[name: *].image",
               "parameters": {"pathTests": [
                   {"subPath": "spec.\"JSONPatch{\"", "condition": "MustExist"},
                   {"subPath": "spec.\"JSONPatch{\".containers[name: *]", "condition": "MustNotExist"}],
                              "assign": {"value": "x"}}}),
    )]);
    assert_eq!(named.refused, []);
    assert_eq!(
        expression(&named),
        concat!(
            r#"((request.kind.group == "" && request.kind.version == "v1" && request.kind.kind == "Pod" && request.operation in ["CREATE", "UPDATE"])"#,
            r#" && (has(object.spec) && "JSONPatch{" in object.spec))"#,
            r#" ? [].map(p, JSONPatch{op: "test", path: "", value: p}) : []"#,
        )
    );
}

#[test]
fn a_keyed_element_is_changed_or_appended_with_its_key() {
    let exported = export(&[assign(
        "port",
        json!({"applyTo": pods(), "location": "spec.containers[name: app].ports[containerPort: 8080].protocol",
               "parameters": {"assign": {"value": "TCP"}}}),
    )]);
    let containers = "object.spec.containers";
    let app = format!(r#"{containers}.map(x, x.name).indexOf("app")"#);
    let ports = format!("{containers}[{app}].ports");
    let port = format!("{ports}.map(x, x.containerPort).indexOf(8080)");
    assert_eq!(
        expression(&exported),
        format!(
            concat!(
                r#"(request.kind.group == "" && request.kind.version == "v1" && request.kind.kind == "Pod" && request.operation in ["CREATE", "UPDATE"])"#,
                r#" ? (has(object.spec) ? (has({c}) ? ({app} >= 0"#,
                r#" ? (has({c}[{app}].ports) ? ({port} >= 0"#,
                r#" ? [JSONPatch{{op: "add", path: "/spec/containers/" + string({app}) + "/ports/" + string({port}) + "/protocol", value: "TCP"}}]"#,
                r#" : [JSONPatch{{op: "add", path: "/spec/containers/" + string({app}) + "/ports/-", value: {{"containerPort": dyn(8080), "protocol": dyn("TCP")}}}}])"#,
                r#" : [JSONPatch{{op: "add", path: "/spec/containers/" + string({app}) + "/ports", value: [{{"containerPort": dyn(8080), "protocol": dyn("TCP")}}]}}])"#,
                r#" : [JSONPatch{{op: "add", path: "/spec/containers/-", value: {{"name": dyn("app"), "ports": dyn([{{"containerPort": dyn(8080), "protocol": dyn("TCP")}}])}}}}])"#,
                r#" : [JSONPatch{{op: "add", path: "/spec/containers", value: [{{"name": dyn("app"), "ports": dyn([{{"containerPort": dyn(8080), "protocol": dyn("TCP")}}])}}]}}])"#,
                r#" : [JSONPatch{{op: "add", path: "/spec", value: {{"containers": [{{"name": dyn("app"), "ports": dyn([{{"containerPort": dyn(8080), "protocol": dyn("TCP")}}])}}]}}}}]) : []"#,
            ),
            c = containers,
            app = app,
            port = port,
        )
    );
    let _ = ports;
}

/// An Assign of `spec.priority`-like field `name` to `value` on Pods.
fn assign_value(name: &str, location: &str, value: Value) -> Value {
    assign(
        name,
        json!({"applyTo": pods(), "location": location, "parameters": {"assign": {"value": value}}}),
    )
}

fn refusals(exported: &Export) -> Vec<String> {
    exported.refused.iter().map(ToString::to_string).collect()
}

#[test]
fn expressions_past_the_api_servers_limits_are_refused() {
    let exported = export(&[
        assign_value(
            "deep",
            &format!("spec.deep{}", ".a".repeat(100)),
            json!("x"),
        ),
        assign_value("long", "spec.long", json!({"a": "x".repeat(100_000)})),
        assign_value("fits", "spec.fits", json!({"a": "x".repeat(40_000)})),
    ]);
    assert_eq!(
        exported.exported,
        [MutatorId::new(MutatorKind::Assign, "fits")]
    );
    let refused = refusals(&exported);
    assert_eq!(refused.len(), 2);
    assert_eq!(
        refused[0],
        "Assign/deep: not exported: its expression would nest 304 levels deep, and the API server's CEL parser stops at 250"
    );
    assert!(
        refused[1].starts_with("Assign/long: not exported: its expression would be 2")
            && refused[1].ends_with(" characters long, and the API server takes at most 100000"),
        "{}",
        refused[1]
    );
}

#[test]
fn mutators_past_what_a_policy_can_hold_are_refused_last_first() {
    let mutators: Vec<Value> = (0..20)
        .map(|i| {
            assign_value(
                &format!("m-{i:02}"),
                &format!("spec.a{i}"),
                json!("x".repeat(40_000)),
            )
        })
        .collect();
    let exported = export(&mutators);
    let bytes = exported.objects[0].to_string().len();
    assert!(bytes <= limits::MAX_POLICY_BYTES, "{bytes}");
    assert!(!exported.refused.is_empty() && !exported.exported.is_empty());
    // The refused are the last in order, each with the size that left it out.
    let last_exported = exported.exported.last().unwrap().name.clone();
    for refusal in &exported.refused {
        assert!(refusal.mutator.name > last_exported, "{refusal}");
        assert!(
            matches!(refusal.reason, Reason::PolicyTooLarge(b) if b > limits::MAX_POLICY_BYTES)
        );
    }
}

fn assign_image(name: &str, location: &str, parameters: Value) -> Value {
    json!({"apiVersion": "mutations.sartor.dev/v1", "kind": "AssignImage",
           "metadata": {"name": name},
           "spec": {"applyTo": pods(), "location": location, "parameters": parameters}})
}

#[test]
fn an_assign_image_splits_the_image_there_as_gatekeeper_does() {
    let exported = export(&[assign_image(
        "tag",
        "spec.image",
        json!({"assignTag": ":v2"}),
    )]);
    assert_eq!(refusals(&exported), Vec::<String>::new());
    assert_eq!(
        expression(&exported),
        concat!(
            r#"(request.kind.group == "" && request.kind.version == "v1" && request.kind.kind == "Pod" && request.operation in ["CREATE", "UPDATE"])"#,
            r#" ? (has(object.spec) ? [JSONPatch{op: "add", path: "/spec/image", value: (has(object.spec.image) ? "#,
            r#"[object.spec.image].map(img, [img.indexOf("/")].map(slash, [slash >= 0 ? img.substring(0, slash) : ""].map(head, "#,
            r#"[head.contains(".") || head.contains(":") || head == "localhost" ? head : ""].map(domain, "#,
            r#"[domain != "" ? img.substring(slash + 1) : img].map(rest, [rest.find("(?s)[:@].*")].map(tag, "#,
            r#"(domain != "" ? domain + "/" : "") + rest.substring(0, size(rest) - size(tag)) + ":v2")[0])[0])[0])[0])[0])[0]"#,
            r#" : ":v2")}] : [JSONPatch{op: "add", path: "/spec", value: {"image": ":v2"}}]) : []"#,
        )
    );
}

#[test]
fn an_assign_image_of_a_path_alone_is_refused() {
    let exported = export(&[assign_image(
        "path",
        "spec.image",
        json!({"assignPath": "app"}),
    )]);
    assert_eq!(
        refusals(&exported),
        [
            "AssignImage/path: not exported: it assigns only a path without a `/`, which may change the image again on the next pass (sartor may apply it three times, the API server runs a policy at most twice)"
        ]
    );
}

#[test]
fn every_resource_of_a_group_is_named_once() {
    let metadata = |name: &str, kinds: Value| {
        json!({"apiVersion": "mutations.sartor.dev/v1", "kind": "AssignMetadata",
            "metadata": {"name": name},
            "spec": {"match": {"kinds": [{"apiGroups": ["apps"], "kinds": kinds}]},
                     "location": format!("metadata.labels.{name}"),
                     "parameters": {"assign": {"value": "b"}}}})
    };
    let exported = export(&[
        metadata("deployments", json!(["Deployment"])),
        metadata("every", json!([])),
    ]);
    assert_eq!(
        exported.objects[0]["spec"]["matchConstraints"]["resourceRules"],
        json!([{"apiGroups": ["apps"], "apiVersions": ["*"], "resources": ["*"],
                "operations": ["CREATE", "UPDATE"]}])
    );
}

fn modify_set(name: &str, location: &str, operation: &str, values: Value) -> Value {
    json!({"apiVersion": "mutations.sartor.dev/v1", "kind": "ModifySet",
           "metadata": {"name": name},
           "spec": {"applyTo": pods(), "location": location,
                    "parameters": {"operation": operation, "values": {"fromList": values}}}})
}

#[test]
fn a_merge_appends_what_the_list_lacks_and_makes_a_missing_one() {
    let exported = export(&[modify_set(
        "merge",
        "spec.args",
        "merge",
        json!(["-v", 2, "-v", 2.0]),
    )]);
    assert_eq!(
        expression(&exported),
        concat!(
            r#"(request.kind.group == "" && request.kind.version == "v1" && request.kind.kind == "Pod" && request.operation in ["CREATE", "UPDATE"])"#,
            r#" ? (has(object.spec) ? (has(object.spec.args)"#,
            r#" ? [dyn("-v"), dyn(2)].filter(v, !(v in object.spec.args)).map(v, JSONPatch{op: "add", path: "/spec/args/-", value: v})"#,
            r#" : [JSONPatch{op: "add", path: "/spec/args", value: [dyn("-v"), dyn(2), dyn("-v"), dyn(2.0)]}])"#,
            r#" : [JSONPatch{op: "add", path: "/spec", value: {"args": [dyn("-v"), dyn(2), dyn("-v"), dyn(2.0)]}}]) : []"#,
        )
    );
}

#[test]
fn a_prune_removes_where_the_list_is_and_creates_only_its_parents() {
    let exported = export(&[modify_set(
        "prune",
        "spec.containers[name: *].securityContext.args",
        "prune",
        json!(["-v"]),
    )]);
    assert_eq!(
        expression(&exported),
        concat!(
            r#"(request.kind.group == "" && request.kind.version == "v1" && request.kind.kind == "Pod" && request.operation in ["CREATE", "UPDATE"])"#,
            r#" ? (has(object.spec) ? (has(object.spec.containers) ? lists.range(size(object.spec.containers)).map(g, (has(object.spec.containers[g].securityContext)"#,
            r#" ? (has(object.spec.containers[g].securityContext.args) ? lists.range(size(object.spec.containers[g].securityContext.args)).map(j, size(object.spec.containers[g].securityContext.args) - 1 - j)"#,
            r#".filter(i, object.spec.containers[g].securityContext.args[i] in ["-v"]).map(i, JSONPatch{op: "remove", path: "/spec/containers/" + string(g) + "/securityContext/args/" + string(i)}) : [])"#,
            r#" : [JSONPatch{op: "add", path: "/spec/containers/" + string(g) + "/securityContext", value: {}}])).flatten() : []) : []) : []"#,
        )
    );
}

#[test]
fn integers_past_what_json_numbers_hold_in_cel_are_refused() {
    let exported = export(&[
        assign_value("big", "spec.big", json!(9_007_199_254_740_993_u64)),
        assign_value(
            "negative",
            "spec.negative",
            json!({"a": [-9_007_199_254_740_992_i64]}),
        ),
        modify_set(
            "set",
            "spec.set",
            "merge",
            json!([18_446_744_073_709_551_615_u64]),
        ),
        assign_value("largest", "spec.largest", json!(9_007_199_254_740_991_u64)),
    ]);
    assert_eq!(
        exported.exported,
        [MutatorId::new(MutatorKind::Assign, "largest")]
    );
    assert_eq!(
        refusals(&exported),
        [
            "Assign/big: not exported: its value holds the integer 9007199254740993, past 2^53 - 1, which the API server writes as a string (CEL gives such integers to JSON as strings)",
            "Assign/negative: not exported: its value holds the integer -9007199254740992, past 2^53 - 1, which the API server writes as a string (CEL gives such integers to JSON as strings)",
            "ModifySet/set: not exported: its value holds the integer 18446744073709551615, past 2^53 - 1, which the API server writes as a string (CEL gives such integers to JSON as strings)",
        ]
    );
}

#[test]
fn a_glob_inside_a_glob_names_its_elements_apart() {
    let exported = export(&[assign(
        "tcp",
        json!({"applyTo": pods(), "location": "spec.containers[name: *].ports[containerPort: *].protocol",
               "parameters": {"assign": {"value": "TCP"}}}),
    )]);
    assert_eq!(
        expression(&exported),
        concat!(
            r#"(request.kind.group == "" && request.kind.version == "v1" && request.kind.kind == "Pod" && request.operation in ["CREATE", "UPDATE"])"#,
            r#" ? (has(object.spec) ? (has(object.spec.containers) ? lists.range(size(object.spec.containers)).map(g,"#,
            r#" (has(object.spec.containers[g].ports) ? lists.range(size(object.spec.containers[g].ports)).map(g1,"#,
            r#" [JSONPatch{op: "add", path: "/spec/containers/" + string(g) + "/ports/" + string(g1) + "/protocol", value: "TCP"}]).flatten() : [])).flatten()"#,
            r#" : []) : []) : []"#,
        )
    );
}

#[test]
fn modify_sets_of_one_list_need_one_pass_unless_they_undo_each_other() {
    // In name order the prune comes first, then the merge writes its list:
    // the prune need not run again, as the merge adds none of its values.
    let exported = export(&[
        modify_set("a-prune", "spec.args", "prune", json!(["--old"])),
        modify_set("b-merge", "spec.args", "merge", json!(["--new"])),
        modify_set("c-merge", "spec.args", "merge", json!(["--newer"])),
    ]);
    assert_eq!(refusals(&exported), Vec::<String>::new());
    // A merge of what a prune removes never settles: refused (numbers
    // compared by value).
    let exported = export(&[
        modify_set("a-prune", "spec.args", "prune", json!([1])),
        modify_set("b-merge", "spec.args", "merge", json!([1.0])),
        modify_set("c-prune", "spec.args", "prune", json!(["--x"])),
    ]);
    assert!(!exported.refused.is_empty(), "{:?}", refusals(&exported));
}

#[test]
fn a_custom_kind_exports_once_its_resource_is_known() {
    let widget = assign(
        "size",
        json!({"applyTo": [{"groups": ["example.com"], "versions": ["v1"], "kinds": ["Widget"]}],
               "location": "spec.size", "parameters": {"assign": {"value": 3}}}),
    );
    assert_eq!(
        refusals(&export(std::slice::from_ref(&widget))),
        [
            "Assign/size: not exported: it applies to Widget (example.com/v1), whose resource (plural) is not known offline: give its CRD or --api-resources"
        ]
    );
    let mut resources = Scopes::builtin().clone();
    resources.extend([sartor_engine::ApiResource {
        group: "example.com".to_string(),
        kind: "Widget".to_string(),
        namespaced: true,
        plural: Some("widgets".to_string()),
    }]);
    let options = Options {
        resources,
        ..Options::default()
    };
    let object = sartor_api::parse_mutator(&widget).unwrap();
    let mutator = Mutator::compile(&object).unwrap();
    let mut system = System::new();
    let specs = HashMap::from([(mutator.id().clone(), object)]);
    system.upsert(mutator);
    let exported = map(&system, &specs, &options);
    assert_eq!(refusals(&exported), Vec::<String>::new());
    assert_eq!(
        exported.objects[0]["spec"]["matchConstraints"]["resourceRules"],
        json!([{"apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["widgets"],
                "operations": ["CREATE", "UPDATE"]}])
    );
}

#[test]
fn a_notin_visits_every_element_whose_key_is_missing_or_not_listed() {
    let exported = export(&[assign(
        "no-escalation",
        json!({"applyTo": pods(), "location": "spec.containers[name notin (side, \"log\")].stdin",
               "parameters": {"assign": {"value": false}}}),
    )]);
    assert_eq!(
        expression(&exported),
        concat!(
            r#"(request.kind.group == "" && request.kind.version == "v1" && request.kind.kind == "Pod" && request.operation in ["CREATE", "UPDATE"])"#,
            r#" ? (has(object.spec) ? (has(object.spec.containers) ? lists.range(size(object.spec.containers))"#,
            r#".filter(g, !(has(object.spec.containers[g].name)) || !(object.spec.containers[g].name in ["log", "side"]))"#,
            r#".map(g, [JSONPatch{op: "add", path: "/spec/containers/" + string(g) + "/stdin", value: false}]).flatten()"#,
            r#" : []) : []) : []"#,
        )
    );
}
