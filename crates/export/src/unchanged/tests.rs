#![allow(clippy::unwrap_used)]

use serde_json::json;

use super::*;
use sartor_location::Path;

fn written(location: &str, effect: Effect) -> Option<String> {
    unchanged(Path::parse(location).unwrap().nodes(), &effect)
}

fn value(value: serde_json::Value) -> Effect {
    Effect::Write(Leaf::Value(Literal::Json(value)))
}

#[test]
fn a_field_is_unchanged_when_it_holds_the_value() {
    assert_eq!(
        written("spec.dnsPolicy", value(json!("None"))).unwrap(),
        r#"type(object) == map && (has(object.spec) ? type(object.spec) == map && has(object.spec.dnsPolicy) && object.spec.dnsPolicy == "None" : false)"#
    );
}

#[test]
fn a_glob_visits_every_element_and_creates_none() {
    assert_eq!(
        written(
            "spec.containers[name: *].imagePullPolicy",
            value(json!("Always"))
        )
        .unwrap(),
        r#"type(object) == map && (has(object.spec) ? type(object.spec) == map && (has(object.spec.containers) ? type(object.spec.containers) == list && object.spec.containers.all(e, type(e) == map && (type(e) == map && has(e.imagePullPolicy) && e.imagePullPolicy == "Always")) : true) : true)"#
    );
}

#[test]
fn notin_skips_the_elements_it_names() {
    assert_eq!(
        written("spec.containers[name notin (sidecar)].x", value(json!(1))).unwrap(),
        r#"type(object) == map && (has(object.spec) ? type(object.spec) == map && (has(object.spec.containers) ? type(object.spec.containers) == list && object.spec.containers.all(e, type(e) == map && ((has(e.name) && e.name in ["sidecar"]) || type(e) == map && has(e.x) && e.x == 1)) : true) : true)"#
    );
}

#[test]
fn a_keyed_element_must_be_there_and_hold_the_value() {
    assert_eq!(
        written("spec.ports[port: 80].protocol", value(json!("TCP"))).unwrap(),
        r#"type(object) == map && (has(object.spec) ? type(object.spec) == map && (has(object.spec.ports) ? type(object.spec.ports) == list && object.spec.ports.all(e, type(e) == map && (!(has(e.port) && type(e.port) == int && e.port == 80) || type(e) == map && has(e.protocol) && e.protocol == "TCP")) && object.spec.ports.exists(e, type(e) == map && (has(e.port) && type(e.port) == int && e.port == 80)) : false) : false)"#
    );
}

#[test]
fn a_removal_is_unchanged_where_nothing_is() {
    assert_eq!(
        written("metadata.annotations.debug", Effect::Remove).unwrap(),
        r#"type(object) == map && (!(has(object.metadata)) || type(object.metadata) == map && (!(has(object.metadata.annotations)) || type(object.metadata.annotations) == map && !(has(object.metadata.annotations.debug))))"#
    );
}

#[test]
fn sets_compare_their_members() {
    assert_eq!(
        written(
            "spec.args",
            Effect::Write(Leaf::Prune(vec![json!("--debug")]))
        )
        .unwrap(),
        r#"type(object) == map && (has(object.spec) ? type(object.spec) == map && (!(has(object.spec.args)) || type(object.spec.args) == list && !object.spec.args.exists(v, v in ["--debug"])) : false)"#
    );
    assert_eq!(
        written("spec.args", Effect::Write(Leaf::Merge(vec![json!("-v")]))).unwrap(),
        r#"type(object) == map && (has(object.spec) ? type(object.spec) == map && has(object.spec.args) && type(object.spec.args) == list && ["-v"].all(v, v in object.spec.args) : false)"#
    );
}

#[test]
fn what_cel_would_compare_otherwise_is_left_undecided() {
    // CEL finds 1.0 equal to 1; the engine compares the JSON.
    assert_eq!(written("spec.replicas", value(json!(1.0))), None);
    // Every element replaced: not exported, not decided.
    assert_eq!(written("spec.containers[name: *]", value(json!({}))), None);
}

#[test]
fn presence_and_absence_are_typed_on_the_way() {
    let path = Path::parse("metadata.labels.team").unwrap();
    let names = path.nodes();
    assert_eq!(
        present(names).unwrap(),
        r#"type(object) == map && has(object.metadata) && type(object.metadata) == map && has(object.metadata.labels) && type(object.metadata.labels) == map && has(object.metadata.labels.team)"#
    );
    assert_eq!(
        absent(names).unwrap(),
        r#"type(object) == map && (!(has(object.metadata)) || type(object.metadata) == map && (!(has(object.metadata.labels)) || type(object.metadata.labels) == map && (!(has(object.metadata.labels.team)))))"#
    );
}

#[test]
fn a_keyed_element_is_present_when_every_one_so_named_holds_the_rest() {
    let path = Path::parse("spec.containers[name: sidecar]").unwrap();
    assert_eq!(
        present(path.nodes()).unwrap(),
        r#"type(object) == map && has(object.spec) && type(object.spec) == map && has(object.spec.containers) && type(object.spec.containers) == list && object.spec.containers.all(e, type(e) == map) && object.spec.containers.exists(e, (has(e.name) && e.name == "sidecar"))"#
    );
    assert_eq!(
        absent(path.nodes()).unwrap(),
        r#"type(object) == map && (!(has(object.spec)) || type(object.spec) == map && (!(has(object.spec.containers)) || type(object.spec.containers) == list && object.spec.containers.all(e, type(e) == map && !(has(e.name) && e.name == "sidecar"))))"#
    );
    let below = Path::parse("spec.ports[port: 80].protocol").unwrap();
    assert_eq!(
        present(below.nodes()).unwrap(),
        r#"type(object) == map && has(object.spec) && type(object.spec) == map && has(object.spec.ports) && type(object.spec.ports) == list && object.spec.ports.all(e, type(e) == map) && object.spec.ports.exists(e, (has(e.port) && type(e.port) == int && e.port == 80)) && object.spec.ports.all(e, !(has(e.port) && type(e.port) == int && e.port == 80) || type(e) == map && has(e.protocol))"#
    );
    assert_eq!(
        present(Path::parse("spec.containers[name: *].x").unwrap().nodes()),
        None
    );
}
