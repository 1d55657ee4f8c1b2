use serde_json::json;

use super::*;

#[test]
fn go_type_names_what_gatekeeper_prints() {
    assert_eq!(go_type(&json!(null)), "<nil>");
    assert_eq!(go_type(&json!(1.5)), "float64");
    assert_eq!(go_type(&json!(true)), "bool");
    assert_eq!(go_type(&json!([])), "[]interface {}");
    assert_eq!(go_type(&json!({})), "map[string]interface {}");
}

#[test]
fn placeholders_round_trip_and_only_field_values_count() {
    let placeholder = Placeholder {
        provider: "tags",
        key: "nginx",
        failure_policy: FailurePolicy::UseDefault,
        default: "busybox",
    };
    let value = placeholder.to_value();
    assert_eq!(Placeholder::read(&value), Some(placeholder));
    let object = json!({"a": value.clone(), "list": [value.clone()], "b": {"c": value}});
    let expected: Asks = [("tags".to_string(), ["nginx".to_string()].into())].into();
    assert_eq!(asks(&object), expected);
    let mut fields = 0;
    visit(&object, &mut |_| fields += 1);
    assert_eq!(fields, 2, "the one directly in a list is not resolved");
}

#[test]
fn a_later_item_for_the_same_key_wins() {
    let mut answers = Answers::new();
    let response: ProviderResponse = serde_json::from_value(json!({"response": {
        "idempotent": true,
        "items": [{"key": "k", "value": "first"}, {"key": "k", "value": "second"}],
    }}))
    .unwrap_or_default();
    answers.response("p", &response);
    assert_eq!(answers.answer("p", "k"), Some(Ok(json!("second"))));
    assert_eq!(
        answers.answer("p", "other"),
        Some(Err(
            "failed to find external data item in response for provider p".to_string()
        ))
    );
    assert_eq!(answers.answer("q", "k"), None);
}
