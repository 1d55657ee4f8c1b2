//! Value conditions (sartor only): when they hold, and the condition
//! conflicts that keep a mutator from reading what another one writes.

use std::collections::BTreeSet;

use sartor_api::MutatorKind;
use sartor_engine::{MutatorId, Request, System};
use serde_json::{Value, json};

use super::{compile, compile_error, mutate, system};

/// An Assign on v1 Services (CREATE and UPDATE) with the given location,
/// `assign` and `conditions` (YAML flow sequences).
fn assign(name: &str, location: &str, assign: &str, conditions: &str) -> String {
    format!(
        "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {{name: {name}}}\n\
         spec:\n  applyTo: [{{groups: [\"\"], versions: [v1], kinds: [Service]}}]\n  \
         location: '{location}'\n  parameters:\n    assign: {assign}\n    conditions: {conditions}\n"
    )
}

/// The README's example: `spec.externalTrafficPolicy: Local` under `conditions`.
fn lb_local(conditions: &str) -> String {
    assign(
        "lb-local",
        "spec.externalTrafficPolicy",
        "{value: Local}",
        conditions,
    )
}

fn service(spec: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "default", "labels": {"tier": "edge"}},
        "spec": spec,
    })
}

/// `object` with `spec.externalTrafficPolicy: Local`.
fn with_local(object: &Value) -> Value {
    let mut object = object.clone();
    object["spec"]["externalTrafficPolicy"] = json!("Local");
    object
}

fn id(kind: MutatorKind, name: &str) -> MutatorId {
    MutatorId::new(kind, name)
}

fn messages(system: &System, id: &MutatorId) -> Vec<String> {
    system
        .conflicts(id)
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn each_operator_applies_only_where_it_holds() {
    let request = Request::create(Some("default"));
    let cases = [
        // In: present and equal to a value.
        (
            "[{path: spec.type, operator: In, values: [LoadBalancer, NodePort]}]",
            json!({"type": "LoadBalancer"}),
            true,
        ),
        (
            "[{path: spec.type, operator: In, values: [LoadBalancer]}]",
            json!({"type": "ClusterIP"}),
            false,
        ),
        (
            "[{path: spec.type, operator: In, values: [LoadBalancer]}]",
            json!({}),
            false,
        ),
        // NotIn: absent, or equal to none.
        (
            "[{path: spec.type, operator: NotIn, values: [ClusterIP]}]",
            json!({"type": "LoadBalancer"}),
            true,
        ),
        (
            "[{path: spec.type, operator: NotIn, values: [ClusterIP]}]",
            json!({"type": "ClusterIP"}),
            false,
        ),
        (
            "[{path: spec.type, operator: NotIn, values: [ClusterIP]}]",
            json!({}),
            true,
        ),
        // Exists: a present null counts, as for a pathTest's MustExist.
        (
            "[{path: spec.type, operator: Exists}]",
            json!({"type": "ClusterIP"}),
            true,
        ),
        (
            "[{path: spec.type, operator: Exists}]",
            json!({"type": null}),
            true,
        ),
        ("[{path: spec.type, operator: Exists}]", json!({}), false),
        // DoesNotExist: the opposite.
        (
            "[{path: spec.type, operator: DoesNotExist}]",
            json!({}),
            true,
        ),
        (
            "[{path: spec.type, operator: DoesNotExist}]",
            json!({"type": null}),
            false,
        ),
        (
            "[{path: spec.type, operator: DoesNotExist}]",
            json!({"type": "ClusterIP"}),
            false,
        ),
        // A keyed element: the first one whose key equals the value; a
        // string key never equals a number.
        (
            "[{path: 'spec.ports[port: 443].protocol', operator: In, values: [TCP]}]",
            json!({"ports": [{"port": 80, "protocol": "UDP"}, {"port": 443, "protocol": "TCP"}]}),
            true,
        ),
        (
            "[{path: 'spec.ports[port: 443].protocol', operator: In, values: [TCP]}]",
            json!({"ports": [{"port": 443, "protocol": "UDP"}, {"port": 443, "protocol": "TCP"}]}),
            false,
        ),
        (
            "[{path: 'spec.ports[port: 443].protocol', operator: In, values: [TCP]}]",
            json!({"ports": [{"port": "443", "protocol": "TCP"}]}),
            false,
        ),
        (
            "[{path: 'spec.ports[port: 443]', operator: DoesNotExist}]",
            json!({"ports": [{"port": 80}]}),
            true,
        ),
        // Numbers compare by value; a string is not a number.
        (
            "[{path: spec.healthCheckNodePort, operator: In, values: [30000]}]",
            json!({"healthCheckNodePort": 30000.0}),
            true,
        ),
        (
            "[{path: spec.healthCheckNodePort, operator: In, values: [30000.0]}]",
            json!({"healthCheckNodePort": 30000}),
            true,
        ),
        (
            "[{path: spec.healthCheckNodePort, operator: In, values: [30000]}]",
            json!({"healthCheckNodePort": "30000"}),
            false,
        ),
        (
            "[{path: spec.healthCheckNodePort, operator: In, values: ['30000']}]",
            json!({"healthCheckNodePort": 30000}),
            false,
        ),
        // Whole values: an object equals an object with the same fields.
        (
            "[{path: spec.selector, operator: In, values: [{app: web}]}]",
            json!({"selector": {"app": "web"}}),
            true,
        ),
        // A selector on a non-list, a field of a non-object: absent.
        (
            "[{path: 'spec.type[name: x]', operator: DoesNotExist}]",
            json!({"type": "ClusterIP"}),
            true,
        ),
        (
            "[{path: spec.type.x, operator: NotIn, values: [a]}]",
            json!({"type": "ClusterIP"}),
            true,
        ),
        // Metadata may be read; conditions are ANDed.
        (
            "[{path: metadata.labels.tier, operator: In, values: [edge]}]",
            json!({}),
            true,
        ),
        (
            "[{path: metadata.labels.tier, operator: In, values: [edge]}, {path: spec.type, operator: Exists}]",
            json!({}),
            false,
        ),
    ];
    for (conditions, spec, applies) in cases {
        let system = system(&lb_local(conditions));
        let object = service(spec);
        let (out, _) = mutate(&system, &object, &request).unwrap();
        let want = if applies {
            with_local(&object)
        } else {
            object.clone()
        };
        assert_eq!(out, want, "{conditions} on {object}");
    }
}

#[test]
fn conditions_are_compiled_and_exposed() {
    let mutator = compile(&lb_local(
        "[{path: 'spec.ports[port: 443].protocol', operator: In, values: [TCP, 1]}, {path: metadata.labels.tier, operator: Exists}]",
    ));
    let conditions: Vec<(String, &str, &[Value])> = mutator
        .conditions()
        .iter()
        .map(|c| (c.path().to_string(), c.operator().as_str(), c.values()))
        .collect();
    assert_eq!(
        conditions,
        [
            (
                "spec.ports[port: 443].protocol".to_string(),
                "In",
                &[json!("TCP"), json!(1)][..]
            ),
            ("metadata.labels.tier".to_string(), "Exists", &[][..]),
        ]
    );
}

#[test]
fn compile_rejects_conditions_that_cannot_be_read_or_compared() {
    let cases = [
        (
            "[{path: spec.type, operator: Exists}, {path: 'spec.ports[port: *].protocol', operator: In, values: [TCP]}]",
            "Assign lb-local: spec.parameters.conditions[1].path: [port: *] may select several elements; a condition reads one value, so select one element with [key: value]",
        ),
        (
            "[{path: 'spec.ports[name notin (http)].protocol', operator: Exists}]",
            "Assign lb-local: spec.parameters.conditions[0].path: [name notin (http)] may select several elements; a condition reads one value, so select one element with [key: value]",
        ),
        (
            "[{path: spec.type, operator: Exists}, {path: spec.type, operator: In}]",
            "Assign lb-local: spec.parameters.conditions[1].values: In needs at least one value",
        ),
        (
            "[{path: spec.type, operator: NotIn, values: []}]",
            "Assign lb-local: spec.parameters.conditions[0].values: NotIn needs at least one value",
        ),
        (
            "[{path: spec.type, operator: Exists, values: [x]}]",
            "Assign lb-local: spec.parameters.conditions[0].values: Exists takes no values",
        ),
        (
            "[{path: spec.type, operator: DoesNotExist, values: [x]}]",
            "Assign lb-local: spec.parameters.conditions[0].values: DoesNotExist takes no values",
        ),
        (
            "[{path: 'spec..type', operator: Exists}]",
            "Assign lb-local: spec.parameters.conditions[0].path: invalid location \"spec..type\": expected a field name at 5, found '.'\n  spec..type\n       ^",
        ),
    ];
    for (conditions, want) in cases {
        assert_eq!(compile_error(&lb_local(conditions)), want, "{conditions}");
    }
}

#[test]
fn a_condition_reading_what_another_mutator_writes_is_a_conflict_until_it_goes() {
    let lb_local = lb_local("[{path: spec.type, operator: In, values: [LoadBalancer]}]");
    let set_type = assign("set-type", "spec.type", "{value: LoadBalancer}", "[]");
    let mut system = system(&lb_local);
    let (reader, writer) = (
        id(MutatorKind::Assign, "lb-local"),
        id(MutatorKind::Assign, "set-type"),
    );
    let conflicted = system.upsert(compile(&set_type));
    assert_eq!(conflicted, BTreeSet::from([reader.clone()]));
    assert!(system.is_conflicted(&reader));
    assert!(!system.is_conflicted(&writer));
    assert_eq!(system.conflicted(), &BTreeSet::from([reader.clone()]));
    assert_eq!(
        messages(&system, &reader),
        [
            "its condition on spec.type reads what Assign set-type writes (spec.type) (v1 Service CREATE and 1 more)"
        ]
    );
    assert_eq!(messages(&system, &writer), Vec::<String>::new());
    // Only the writer applies: the reader would otherwise apply in pass 2.
    let request = Request::create(Some("default"));
    let object = service(json!({"type": "ClusterIP"}));
    let (out, mutation) = mutate(&system, &object, &request).unwrap();
    assert_eq!(out, service(json!({"type": "LoadBalancer"})));
    assert_eq!(mutation.passes, 2);
    // Removing the writer clears the conflict.
    system.remove(&writer);
    assert!(!system.is_conflicted(&reader));
    assert_eq!(messages(&system, &reader), Vec::<String>::new());
    assert!(system.conflicted().is_empty());
    let object = service(json!({"type": "LoadBalancer"}));
    let (out, _) = mutate(&system, &object, &request).unwrap();
    assert_eq!(out, with_local(&object));
    // So does changing it to write elsewhere.
    system.upsert(compile(&set_type));
    assert!(system.is_conflicted(&reader));
    system.upsert(compile(&assign(
        "set-type",
        "spec.other",
        "{value: LoadBalancer}",
        "[]",
    )));
    assert!(!system.is_conflicted(&reader));
}

#[test]
fn writes_at_inside_or_around_the_path_read_conflict() {
    let reader = id(MutatorKind::Assign, "lb-local");
    let lb_local = lb_local(
        "[{path: 'spec.ports[port: 443].protocol', operator: In, values: [TCP]}, {path: metadata.labels.tier, operator: Exists}]",
    );
    let cases = [
        // The whole list, one element of it, the element a glob may pick.
        (
            assign("w", "spec.ports", "{value: []}", "[]"),
            "its condition on spec.ports[port: 443].protocol reads what Assign w writes (spec.ports) (v1 Service CREATE and 1 more)",
        ),
        (
            assign("w", "spec.ports[port: *].protocol", "{value: UDP}", "[]"),
            "its condition on spec.ports[port: 443].protocol reads what Assign w writes (spec.ports[port: *].protocol) (v1 Service CREATE and 1 more)",
        ),
        // The element's key field, through another key: it may change
        // which element is the first with port 443.
        (
            assign("w", "spec.ports[name: https].port", "{value: 443}", "[]"),
            "its condition on spec.ports[port: 443].protocol reads what Assign w writes (spec.ports[name: https].port) (v1 Service CREATE and 1 more)",
        ),
        // AssignMetadata applies to every kind, so to Services too.
        (
            "apiVersion: mutations.sartor.dev/v1\nkind: AssignMetadata\nmetadata: {name: w}\n\
             spec:\n  location: metadata.labels.tier\n  parameters: {assign: {value: edge}}\n"
                .to_string(),
            "its condition on metadata.labels.tier reads what AssignMetadata w writes (metadata.labels.tier) (v1 Service CREATE and 1 more)",
        ),
    ];
    for (writer, want) in cases {
        let system = system(&format!("{lb_local}---\n{writer}"));
        assert_eq!(messages(&system, &reader), [want], "{writer}");
    }
}

#[test]
fn near_misses_are_not_conflicts() {
    let reader = id(MutatorKind::Assign, "lb-local");
    let lb_local = lb_local(
        "[{path: spec.type, operator: In, values: [LoadBalancer]}, {path: 'spec.ports[port: 443].protocol', operator: NotIn, values: [UDP]}]",
    );
    let cases = [
        // A sibling field, another element of the list, another label.
        assign("w", "spec.other", "{value: x}", "[]"),
        assign("w", "spec.ports[port: 80].protocol", "{value: UDP}", "[]"),
        assign(
            "w",
            "spec.ports[port notin (443)].protocol",
            "{value: UDP}",
            "[]",
        ),
        "apiVersion: mutations.sartor.dev/v1\nkind: AssignMetadata\nmetadata: {name: w}\n\
         spec:\n  location: metadata.labels.tier\n  parameters: {assign: {value: edge}}\n"
            .to_string(),
        // spec.type, but of Pods: no object is mutated by both.
        "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {name: w}\n\
         spec:\n  applyTo: [{groups: [\"\"], versions: [v1], kinds: [Pod]}]\n  \
         location: spec.type\n  parameters: {assign: {value: LoadBalancer}}\n"
            .to_string(),
    ];
    for writer in cases {
        let system = system(&format!("{lb_local}---\n{writer}"));
        assert_eq!(messages(&system, &reader), Vec::<String>::new(), "{writer}");
        assert!(system.conflicted().is_empty(), "{writer}");
    }
    // Both apply.
    let system = system(&format!(
        "{lb_local}---\n{}",
        assign("w", "spec.other", "{value: x}", "[]")
    ));
    let object = service(json!({"type": "LoadBalancer"}));
    let (out, _) = mutate(&system, &object, &Request::create(Some("default"))).unwrap();
    assert_eq!(
        out,
        service(json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local", "other": "x"}))
    );
}

#[test]
fn a_mutator_reading_what_it_writes_itself_converges() {
    let yaml = format!(
        "{}---\n{}",
        assign(
            "default-type",
            "spec.type",
            "{value: ClusterIP}",
            "[{path: spec.type, operator: DoesNotExist}]",
        ),
        assign(
            "flip",
            "spec.mode",
            "{value: b}",
            "[{path: spec.mode, operator: NotIn, values: [b]}]",
        ),
    );
    let system = system(&yaml);
    assert!(system.conflicted().is_empty());
    let request = Request::create(Some("default"));
    let (out, mutation) = mutate(&system, &service(json!({"mode": "a"})), &request).unwrap();
    assert_eq!(out, service(json!({"type": "ClusterIP", "mode": "b"})));
    assert_eq!(mutation.passes, 2);
    let unchanged = service(json!({"type": "NodePort", "mode": "b"}));
    let (out, mutation) = mutate(&system, &unchanged, &request).unwrap();
    assert_eq!(out, unchanged);
    assert!(!mutation.changed());
}

#[test]
fn mutators_that_would_oscillate_are_all_left_out() {
    // Without condition conflicts, a Pod with b: x would go (a: x, b: y),
    // then (a: y, b: x), then back, pass after pass: each mutator reads what
    // another writes. Every one of them is in conflict, so none applies.
    let yaml = [
        ("m1", "spec.a", "x", "spec.b", "x"),
        ("m2", "spec.a", "y", "spec.b", "y"),
        ("m3", "spec.b", "y", "spec.a", "x"),
        ("m4", "spec.b", "x", "spec.a", "y"),
    ]
    .map(|(name, location, value, reads, equals)| {
        assign(
            name,
            location,
            &format!("{{value: {value}}}"),
            &format!("[{{path: {reads}, operator: In, values: [{equals}]}}]"),
        )
    })
    .join("---\n");
    let system = system(&yaml);
    assert_eq!(
        system
            .conflicted()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        ["Assign m1", "Assign m2", "Assign m3", "Assign m4"]
    );
    assert_eq!(
        messages(&system, &id(MutatorKind::Assign, "m1")),
        [
            "its condition on spec.b reads what Assign m3 writes (spec.b) (v1 Service CREATE and 1 more)",
            "its condition on spec.b reads what Assign m4 writes (spec.b) (v1 Service CREATE and 1 more)",
        ]
    );
    let object = service(json!({"b": "x"}));
    let (out, mutation) = mutate(&system, &object, &Request::create(Some("default"))).unwrap();
    assert_eq!(out, object);
    assert_eq!(mutation.passes, 0);
}
