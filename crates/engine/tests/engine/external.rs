//! External data through `System::mutate`: what is asked, and what the
//! answers (and each failurePolicy) make of the object. Gatekeeper v3.23.1's
//! behaviour, checked against its module (see crates/engine/README.md).

use sartor_api::ProviderResponse;
use sartor_engine::{Admission, Answers, Asks, Mutation, System};
use serde_json::{Value, json};

use super::{assign, compile_error, pod, system};

/// An Assign of every container's image from provider `tags`.
fn images(policy: &str) -> String {
    assign(
        "images",
        "spec.containers[name: *].image",
        &format!(
            "{{assign: {{externalData: {{provider: tags, failurePolicy: {policy}, default: 'busybox:latest'}}}}}}"
        ),
    )
}

fn asks(pairs: &[(&str, &[&str])]) -> Asks {
    pairs
        .iter()
        .map(|(p, keys)| (p.to_string(), keys.iter().map(|k| k.to_string()).collect()))
        .collect()
}

fn response(value: Value) -> ProviderResponse {
    serde_json::from_value(value).unwrap()
}

/// Mutates `object` twice, as callers do: without answers (what is
/// asked), then with `answers`; checks the patch against a whole diff.
fn run(system: &System, object: &Value, answers: &Answers) -> (Asks, Result<Value, String>) {
    let mut mutated = object.clone();
    let first = system
        .mutate(&Admission::new(object).username("alice"), &mut mutated)
        .unwrap();
    assert!(first.unanswered, "asks before answers: {first:?}");
    assert!(!first.mutated);
    assert_eq!(mutated, *object, "put back as admitted");
    let second = system.mutate(
        &Admission::new(object)
            .username("alice")
            .answers(answers)
            .with_patch(),
        &mut mutated,
    );
    let result = second.map_err(|e| e.to_string()).map(|m: Mutation| {
        assert_eq!(m.asks, first.asks, "the second run asks the same");
        assert!(!m.unanswered);
        if m.mutated {
            assert_eq!(
                m.patch.unwrap().operations().unwrap(),
                json_patch::diff(object, &mutated)
            );
        }
        mutated.clone()
    });
    if result.is_err() {
        assert_eq!(mutated, *object, "put back as admitted");
    }
    (first.asks, result)
}

fn tags(items: Value) -> Answers {
    let mut answers = Answers::new();
    answers.response(
        "tags",
        &response(json!({"response": {"idempotent": true, "items": items}})),
    );
    answers
}

fn with_images(images: &[&str]) -> Value {
    let mut pod = pod(&[]);
    pod["spec"]["containers"] = images
        .iter()
        .enumerate()
        .map(|(i, image)| json!({"name": format!("c{i}"), "image": image}))
        .collect();
    pod
}

#[test]
fn every_key_is_asked_once_in_one_request_and_the_answers_replace_them() {
    let system = system(&images("Fail"));
    let object = with_images(&["nginx", "redis", "nginx"]);
    let answers = tags(json!([
        {"key": "nginx", "value": "nginx@sha256:1"},
        {"key": "redis", "value": "redis@sha256:2"},
    ]));
    let (asked, result) = run(&system, &object, &answers);
    assert_eq!(asked, asks(&[("tags", &["nginx", "redis"])]));
    assert_eq!(
        result.unwrap(),
        with_images(&["nginx@sha256:1", "redis@sha256:2", "nginx@sha256:1"])
    );
}

#[test]
fn errors_follow_the_failure_policy() {
    let object = with_images(&["nginx", "redis"]);
    let answers = tags(json!([
        {"key": "nginx", "value": "nginx@sha256:1"},
        {"key": "redis", "error": "not found"},
    ]));
    let cases = [
        (
            "Fail",
            Err("v1 Pod default/web: failed to resolve external data placeholders: failed to retrieve external data item from provider tags: not found".to_string()),
        ),
        // Gatekeeper puts the key back (its docs say "no mutation").
        ("Ignore", Ok(with_images(&["nginx@sha256:1", "redis"]))),
        (
            "UseDefault",
            Ok(with_images(&["nginx@sha256:1", "busybox:latest"])),
        ),
    ];
    for (policy, expected) in cases {
        let (_, result) = run(&system(&images(policy)), &object, &answers);
        assert_eq!(result, expected, "{policy}");
    }
}

#[test]
fn every_kind_of_error_has_gatekeepers_message() {
    let object = with_images(&["nginx"]);
    let system = system(&images("Fail"));
    let prefix = "v1 Pod default/web: failed to resolve external data placeholders: ";
    let mut failed = Answers::new();
    failed.failed(
        "tags",
        "failed to send external data request to provider tags: timed out",
    );
    let mut system_error = Answers::new();
    system_error.response(
        "tags",
        &response(json!({"response": {"idempotent": true, "systemError": "down"}})),
    );
    let mut not_idempotent = Answers::new();
    not_idempotent.response(
        "tags",
        &response(json!({"response": {"items": [{"key": "nginx", "value": "x"}]}})),
    );
    let mut other_provider = Answers::new();
    other_provider.failed("other", "unused");
    let cases = [
        (
            failed,
            "failed to send external data request to provider tags: timed out",
        ),
        (
            system_error,
            "failed to validate external data response from provider tags: non-empty system error: down",
        ),
        (
            not_idempotent,
            "failed to validate external data response from provider tags: non-idempotent response",
        ),
        (
            tags(json!([])),
            "failed to find external data item in response for provider tags",
        ),
        (
            tags(json!([{"key": "nginx", "value": 3}])),
            "failed to convert external data item value from provider tags to string, got type float64",
        ),
        (
            tags(json!([{"key": "nginx"}])),
            "failed to convert external data item value from provider tags to string, got type <nil>",
        ),
    ];
    for (answers, message) in cases {
        let (_, result) = run(&system, &object, &answers);
        assert_eq!(result, Err(format!("{prefix}{message}")));
    }
    // A provider nobody answered for (unknown to the caller): asked again.
    let mut unknown = Answers::new();
    unknown.failed("other", "unused");
    let again = system
        .mutate(
            &Admission::new(&object).answers(&unknown),
            &mut object.clone(),
        )
        .unwrap();
    assert!(again.unanswered);
    // Distinct errors are all listed.
    let two = with_images(&["nginx", "redis"]);
    let (_, result) = run(
        &system,
        &two,
        &tags(json!([{"key": "nginx", "error": "a"}, {"key": "redis", "error": "b"}])),
    );
    assert_eq!(
        result,
        Err(format!(
            "{prefix}[failed to retrieve external data item from provider tags: a, failed to retrieve external data item from provider tags: b]"
        ))
    );
}

#[test]
fn a_missing_field_asks_with_an_empty_key_and_username_asks_by_user() {
    let system = system(&assign(
        "a",
        "spec.owner",
        "{assign: {externalData: {provider: tags, failurePolicy: Ignore}}}",
    ));
    let object = pod(&[]);
    let (asked, result) = run(&system, &object, &tags(json!([])));
    assert_eq!(asked, asks(&[("tags", &[""])]));
    // Ignore puts the key back: the field is created, empty, as in Gatekeeper.
    let mut expected = object.clone();
    expected["spec"]["owner"] = json!("");
    assert_eq!(result.unwrap(), expected);

    let system = system_of_users();
    let (asked, result) = run(
        &system,
        &object,
        &tags(json!([{"key": "alice", "value": "alice@example.com"}])),
    );
    assert_eq!(asked, asks(&[("tags", &["alice"])]));
    let mut expected = object.clone();
    expected["metadata"]["annotations"] = json!({"owner": "alice@example.com"});
    assert_eq!(result.unwrap(), expected);
}

fn system_of_users() -> System {
    system(
        "apiVersion: mutations.gatekeeper.sh/v1beta1\nkind: AssignMetadata\nmetadata: {name: annotate-owner}\n\
         spec:\n  match:\n    scope: Namespaced\n    kinds: [{apiGroups: ['*'], kinds: [Pod]}]\n  \
         location: metadata.annotations.owner\n  \
         parameters:\n    assign:\n      externalData:\n        provider: tags\n        dataSource: Username\n",
    )
}

#[test]
fn assign_metadata_asks_by_user_name_only() {
    assert_eq!(
        compile_error(
            "apiVersion: mutations.gatekeeper.sh/v1\nkind: AssignMetadata\nmetadata: {name: md}\n\
             spec:\n  location: metadata.labels.owner\n  \
             parameters: {assign: {externalData: {provider: tags}}}\n"
        ),
        "AssignMetadata md: spec.parameters.assign.externalData.dataSource: only Username is supported for AssignMetadata"
    );
}

#[test]
fn nothing_is_asked_when_nothing_applies_and_a_forged_placeholder_is_refused() {
    let system = system(&images("Fail"));
    let empty = pod(&[]);
    let mutation = system
        .mutate(&Admission::new(&empty), &mut empty.clone())
        .unwrap();
    assert!(!mutation.unanswered);
    assert!(mutation.asks.is_empty());
    assert!(!mutation.mutated);

    let mut forged = with_images(&["nginx"]);
    forged["spec"]["x"] = json!({"\u{0}sartor.dev/external-data": {}});
    assert_eq!(
        system
            .mutate(&Admission::new(&forged), &mut forged.clone())
            .unwrap_err()
            .to_string(),
        "v1 Pod default/web: the object holds the field name \"\\0sartor.dev/external-data\", reserved for sartor's external data placeholders"
    );
}

#[test]
fn a_value_assigned_later_replaces_the_placeholder_and_nothing_is_asked() {
    // Gatekeeper's ordering caveat: `z-fixed` runs after `images`.
    let yaml = format!(
        "{}---\n{}",
        images("Fail"),
        assign(
            "z-fixed",
            "spec.containers[name: *].image",
            "{assign: {value: 'fixed:1'}}"
        )
    );
    let system = system(&yaml);
    let mut object = with_images(&["nginx"]);
    let mutation = system
        .mutate(&Admission::new(&object), &mut object)
        .unwrap();
    assert!(mutation.asks.is_empty());
    assert!(mutation.mutated);
    assert_eq!(object, with_images(&["fixed:1"]));
}

#[test]
fn a_mutator_under_an_external_location_is_a_schema_conflict() {
    let yaml = format!(
        "{}---\n{}",
        images("Fail"),
        assign(
            "deeper",
            "spec.containers[name: *].image.test",
            "{assign: {value: 1}}"
        )
    );
    let system = system(&yaml);
    assert_eq!(system.conflicted().len(), 2, "{:?}", system.conflicted());
}

#[test]
fn a_mutator_meeting_a_placeholder_says_what_it_met() {
    let yaml = format!(
        "{}---\n{}",
        images("Fail"),
        "apiVersion: mutations.sartor.dev/v1\nkind: AssignImage\nmetadata: {name: mirror}\n\
         spec:\n  applyTo: [{groups: [\"\"], versions: [v1], kinds: [Pod]}]\n  \
         location: 'spec.containers[name: *].image'\n  parameters: {assignDomain: mirror.example.com}\n"
    );
    let system = system(&yaml);
    let object = with_images(&["nginx"]);
    let mut mutated = object.clone();
    assert_eq!(
        system
            .mutate(&Admission::new(&object), &mut mutated)
            .unwrap_err()
            .to_string(),
        "v1 Pod default/web: AssignImage mirror failed: spec.containers[name: *].image: the placeholder of an externalData mutator (its provider's answer is put in place only after every mutator ran; keep other mutators off that field) is not a string"
    );
    assert_eq!(mutated, object, "put back as admitted");
}
