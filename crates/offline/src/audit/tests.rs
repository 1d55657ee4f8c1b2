use sartor_audit::Resource;

use super::*;

#[test]
fn the_summary_names_each_kind_and_the_counts() {
    let summary = Summary {
        kinds: [
            ("Pod.core/v1".to_string(), 3),
            ("Deployment.apps/v1".to_string(), 1),
        ]
        .into_iter()
        .collect(),
        changed: 2,
        failed: 1,
        forbidden: Vec::new(),
    };
    assert_eq!(
        summary_line(&summary),
        "4 objects scanned (Deployment.apps/v1 1, Pod.core/v1 3): 2 would change, 1 cannot be mutated"
    );
    let mut with_empty = summary.clone();
    with_empty.kinds.insert("Secret.core/v1".to_string(), 0);
    assert_eq!(
        summary_line(&with_empty),
        "4 objects scanned (Deployment.apps/v1 1, Pod.core/v1 3, 1 listed kinds without objects): 2 would change, 1 cannot be mutated"
    );
    assert_eq!(
        summary_line(&Summary::default()),
        "0 objects scanned (no kind the mutators can change is served): 0 would change, 0 cannot be mutated"
    );
}

#[test]
fn a_secrets_values_never_reach_a_diff() {
    let resource = |kind: &str| Resource::new("", "v1", kind, &format!("{}s", kind.to_lowercase()));
    let audited = Audited {
        object: Stored {
            resource: resource("Secret"),
            namespace: Some("shop".to_string()),
            name: "db".to_string(),
            uid: None,
        },
        outcome: Outcome::Failed(String::new()),
    };
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
                        "data": {"password": "aHVudGVyMg=="}, "stringData": {"user": "admin"},
                        "metadata": {"name": "db"}});
    assert_eq!(
        redacted(&audited, &secret),
        json!({"apiVersion": "v1", "kind": "Secret",
               "data": {"password": "(redacted)"}, "stringData": {"user": "(redacted)"},
               "metadata": {"name": "db"}})
    );
    let config = Audited {
        object: Stored {
            resource: resource("ConfigMap"),
            ..audited.object.clone()
        },
        ..audited
    };
    assert_eq!(redacted(&config, &secret), secret);
}
