#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};

use super::*;
use sartor_engine::Mutator;

fn system(mutators: &[Value]) -> System {
    let mut system = System::new();
    for value in mutators {
        let object = sartor_api::parse_mutator(value).unwrap();
        system.upsert(Mutator::compile(&object).unwrap());
    }
    system
}

fn pods() -> Value {
    json!([{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}])
}

#[test]
fn one_term_per_mutator_each_on_its_line() {
    let condition = WebhookCondition::of(&system(&[
        json!({"apiVersion": "mutations.gatekeeper.sh/v1", "kind": "Assign",
               "metadata": {"name": "dns"},
               "spec": {"applyTo": pods(), "match": {"namespaces": ["shop"]},
                        "location": "spec.dnsPolicy",
                        "parameters": {"assign": {"value": "None"}}}}),
        json!({"apiVersion": "mutations.gatekeeper.sh/v1", "kind": "AssignMetadata",
               "metadata": {"name": "team"},
               "spec": {"match": {"labelSelector": {"matchLabels": {"app": "web"}}},
                        "location": "metadata.labels.team",
                        "parameters": {"assign": {"value": "a"}}}}),
    ]));
    let expression = condition.expression.clone().unwrap();
    assert_eq!(
        expression,
        [
            r#"request.operation in ["CREATE", "UPDATE"] && ("#,
            r#"((((has(object.metadata.labels) && "app" in object.metadata.labels) && object.metadata.labels["app"] == "web")) && !(type(object) == map && has(object.metadata) && type(object.metadata) == map && has(object.metadata.labels) && type(object.metadata.labels) == map && has(object.metadata.labels.team)))"#,
            r#"|| ((request.kind.group == "" && request.kind.version == "v1" && request.kind.kind == "Pod" && request.operation in ["CREATE", "UPDATE"]) && (((request.kind.group == "" && request.kind.kind == "Namespace") ? (has(object.metadata.name) ? object.metadata.name : "") : (has(request.namespace) ? request.namespace : "")) == "" && !(request.kind.group == "" && request.kind.kind == "Namespace") || ((request.kind.group == "" && request.kind.kind == "Namespace") ? (has(object.metadata.name) ? object.metadata.name : "") : (has(request.namespace) ? request.namespace : "")) == "shop") && !(type(object) == map && (has(object.spec) ? type(object.spec) == map && has(object.spec.dnsPolicy) && object.spec.dnsPolicy == "None" : false)))"#,
            ")",
        ]
        .join("\n")
    );
    assert_eq!(
        WebhookCondition::terms_of(&expression),
        Some(condition.terms.clone())
    );
    assert_eq!(
        condition.explained(),
        [
            "Assign/dns: sent when it matches and would change the object",
            "AssignMetadata/team: sent when it matches and would change the object",
        ]
    );
}

#[test]
fn a_mutator_matching_everything_leaves_no_condition() {
    let condition = WebhookCondition::of(&system(&[json!({
        "apiVersion": "mutations.sartor.dev/v1", "kind": "AssignMetadata",
        "metadata": {"name": "owner"},
        "spec": {"location": "metadata.labels.owner",
                 "parameters": {"assign": {"externalData": {"provider": "p", "dataSource": "Username"}}}}})]));
    assert_eq!(condition.expression, None);
    assert_eq!(condition.withheld(), Some(Withheld::Unbounded));
    assert_eq!(
        condition.explained(),
        ["AssignMetadata/owner: sent whenever it matches: its value comes from external data"]
    );
}

#[test]
fn a_condition_past_the_api_servers_length_is_withheld_with_its_length() {
    let long = |count: usize| {
        let mutators: Vec<Value> = (0..count)
            .map(|index| {
                json!({"apiVersion": "mutations.sartor.dev/v1", "kind": "Assign",
                       "metadata": {"name": format!("long-{index}")},
                       "spec": {"applyTo": pods(), "location": format!("spec.x{index}"),
                                "parameters": {"assign": {"value": "x".repeat(30_000)}}}})
            })
            .collect();
        WebhookCondition::of(&system(&mutators))
    };
    let three = long(3);
    assert_eq!(three.withheld(), None);
    let length = three.expression.unwrap().chars().count();
    assert!(
        (90_000..=limits::MAX_CODE_POINTS).contains(&length),
        "{length}"
    );
    let four = long(4);
    assert_eq!(four.expression, None);
    let Some(Withheld::Limits(Reason::ExpressionTooLong(length))) = four.withheld() else {
        panic!("{:?}", four.withheld());
    };
    assert!(length > limits::MAX_CODE_POINTS, "{length}");
    assert_eq!(
        four.withheld().unwrap().to_string(),
        format!(
            "the condition would pass the API server's limits: its expression would be {length} characters long, and the API server takes at most 100000"
        )
    );
}

#[test]
fn generated_only_mutators_never_send() {
    let condition = WebhookCondition::of(&system(&[json!({
        "apiVersion": "mutations.gatekeeper.sh/v1", "kind": "Assign",
        "metadata": {"name": "generated"},
        "spec": {"applyTo": pods(), "match": {"source": "Generated"},
                 "location": "spec.dnsPolicy",
                 "parameters": {"assign": {"value": "None"}}}})]));
    assert_eq!(condition.expression.as_deref(), Some("false"));
    assert_eq!(WebhookCondition::terms_of("false"), Some(BTreeSet::new()));
}

#[test]
fn a_namespace_selector_is_left_to_sartor() {
    let condition = WebhookCondition::of(&system(&[json!({
        "apiVersion": "mutations.gatekeeper.sh/v1", "kind": "ModifySet",
        "metadata": {"name": "args"},
        "spec": {"applyTo": pods(),
                 "match": {"namespaceSelector": {"matchLabels": {"env": "prod"}}},
                 "location": "spec.containers[name: *].args",
                 "parameters": {"operation": "prune", "values": {"fromList": ["--debug"]}}}})]));
    let terms: Vec<&String> = condition.terms.iter().collect();
    assert_eq!(
        terms,
        [
            r#"((request.kind.group == "" && request.kind.version == "v1" && request.kind.kind == "Pod" && request.operation in ["CREATE", "UPDATE"]) && (!(request.kind.group == "" && request.kind.kind == "Namespace") || (((has(object.metadata.labels) && "env" in object.metadata.labels) && object.metadata.labels["env"] == "prod"))) && !(type(object) == map && (has(object.spec) ? type(object.spec) == map && (has(object.spec.containers) ? type(object.spec.containers) == list && object.spec.containers.all(e, type(e) == map && (type(e) == map && (!(has(e.args)) || type(e.args) == list && !e.args.exists(v, v in ["--debug"])))) : true) : true)))"#
        ]
    );
}

#[test]
fn an_expression_of_other_hands_has_no_terms() {
    assert_eq!(WebhookCondition::terms_of("true"), None);
    assert_eq!(
        WebhookCondition::terms_of("request.operation == \"CREATE\""),
        None
    );
}
