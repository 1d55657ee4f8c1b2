//! External data: a fuzzed ProviderResponse (the input after its first byte,
//! as JSON) is the answer of provider `p` to an externalData Assign of
//! `spec.containers[name: *].image`, its failurePolicy (and dataSource)
//! picked by the first byte, for a Pod-like object (fixed, or the
//! response's own `object` field when it is a JSON object). Two runs, as the
//! webhook does: without answers, then, when unanswered, with them.
//! No panic; a resolved object never holds the placeholder field.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sartor_api::{ProviderResponse, parse_mutator};
use sartor_engine::external::PLACEHOLDER_FIELD;
use sartor_engine::{Admission, Answers, Mutator, System};
use serde_json::{Value, json};

fn holds_placeholder(value: &Value) -> bool {
    match value {
        Value::Object(fields) => {
            fields.contains_key(PLACEHOLDER_FIELD) || fields.values().any(holds_placeholder)
        }
        Value::Array(items) => items.iter().any(holds_placeholder),
        _ => false,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((first, rest)) = data.split_first() else {
        return;
    };
    let Ok(input) = serde_json::from_slice::<Value>(rest) else {
        return;
    };
    let Ok(response) = serde_json::from_value::<ProviderResponse>(input.clone()) else {
        return;
    };
    let policy = ["Fail", "Ignore", "UseDefault"][usize::from(first % 3)];
    let source = if first & 4 == 0 {
        "ValueAtLocation"
    } else {
        "Username"
    };
    let mut external = json!({"provider": "p", "failurePolicy": policy, "dataSource": source});
    if policy == "UseDefault" {
        external["default"] = json!("busybox:latest");
    }
    let document = json!({
        "apiVersion": "mutations.sartor.dev/v1", "kind": "Assign",
        "metadata": {"name": "images"},
        "spec": {
            "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
            "location": "spec.containers[name: *].image",
            "parameters": {"assign": {"externalData": external}},
        },
    });
    let Ok(parsed) = parse_mutator(&document) else {
        panic!("the externalData Assign does not parse");
    };
    let compiled = match Mutator::compile(&parsed) {
        Ok(compiled) => compiled,
        Err(e) => panic!("the externalData Assign does not compile: {e}"),
    };
    let mut system = System::new();
    system.upsert(compiled);
    if first & 8 != 0 {
        // A second mutator of the same field, so placeholders meet values.
        let pin = json!({
            "apiVersion": "mutations.sartor.dev/v1", "kind": "AssignImage",
            "metadata": {"name": "pin"},
            "spec": {
                "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
                "location": "spec.containers[name: *].image",
                "parameters": {"assignDomain": "mirror.example.com"},
            },
        });
        if let Ok(compiled) = parse_mutator(&pin)
            .map_err(|e| e.to_string())
            .and_then(|p| Mutator::compile(&p).map_err(|e| e.to_string()))
        {
            system.upsert(compiled);
        }
    }
    let object = match input.get("object") {
        Some(Value::Object(fields)) => {
            let mut fields = fields.clone();
            fields.insert("apiVersion".into(), json!("v1"));
            fields.insert("kind".into(), json!("Pod"));
            Value::Object(fields)
        }
        _ => json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"containers": [
                {"name": "app", "image": "nginx"},
                {"name": "side", "image": "busybox"},
                {"name": "none"},
            ]},
        }),
    };
    let mut answers = Answers::new();
    answers.response("p", &response);
    let check = |result: Result<sartor_engine::Mutation, sartor_engine::MutateError>,
                 mutated: &Value| match result {
        Ok(mutation) => {
            if mutation.mutated {
                assert!(!mutation.unanswered);
                assert!(
                    !holds_placeholder(mutated),
                    "a placeholder was left in {mutated}"
                );
            } else {
                assert_eq!(*mutated, object, "not mutated, yet changed");
            }
            Some(mutation)
        }
        Err(e) => {
            let _ = e.to_string();
            assert_eq!(*mutated, object, "a failed mutation left the object changed");
            None
        }
    };
    let admission = Admission::new(&object).username("kubernetes-admin");
    let mut mutated = object.clone();
    let result = system.mutate(&admission, &mut mutated);
    let Some(first_run) = check(result, &mutated) else {
        return;
    };
    if first_run.unanswered {
        let result = system.mutate(&admission.clone().answers(&answers), &mut mutated);
        let second = check(result, &mutated);
        if let Some(second) = second {
            assert!(!second.unanswered, "answered, and still unanswered");
        }
    }
});
