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

/// An object of `kind` in `namespace` that would change, or (`reason`)
/// cannot be mutated.
fn found(kind: &str, namespace: Option<&str>, name: &str, reason: Option<&str>) -> Audited {
    let resource = Resource::new("", "v1", kind, &format!("{}s", kind.to_lowercase()));
    let outcome = match reason {
        Some(reason) => Outcome::Failed(reason.to_string()),
        None => Outcome::Changes {
            mutators: Vec::new(),
            paths: vec![
                "spec.containers[name: app].imagePullPolicy".to_string(),
                "metadata.labels.\"a\\\"b\"".to_string(),
            ],
            before: None,
            after: json!({}),
            mutation: Box::default(),
        },
    };
    Audited {
        object: Stored {
            resource,
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
            uid: None,
        },
        outcome,
    }
}

#[test]
fn json_is_written_as_found_and_is_serde_jsons_document_byte_for_byte() {
    let change = |name: &str| found("Pod", Some("shop"), name, None);
    let scans: Vec<(Vec<Audited>, Summary)> = vec![
        (Vec::new(), Summary::default()),
        (vec![change("web")], Summary::default()),
        (
            vec![
                change("web"),
                found(
                    "Namespace",
                    None,
                    "shop",
                    Some("its \"value\"\ncomes from\tno one"),
                ),
                change("api"),
                change("db"),
                found("ConfigMap", Some("shop"), "cfg", Some("no")),
            ],
            Summary {
                kinds: [
                    ("Pod.core/v1".to_string(), 7),
                    ("Secret.core/v1".to_string(), 0),
                ]
                .into_iter()
                .collect(),
                changed: 3,
                failed: 2,
                forbidden: Vec::new(),
            },
        ),
        (
            vec![found("Node", None, "n1", Some("x"))],
            Summary::default(),
        ),
        // Past the buffer's size: written in several pieces.
        (
            (0..1500).map(|i| change(&format!("web-{i}"))).collect(),
            Summary::default(),
        ),
    ];
    for (audited, summary) in scans {
        let mut json = sink(AuditFormat::Json, false, false);
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut io = Io {
            stdin: &mut std::io::empty(),
            out: &mut out,
            err: &mut err,
            colour: false,
        };
        for each in &audited {
            json.found(each, &mut io).unwrap();
        }
        json.finish(&summary, &mut io).unwrap();
        // What printing the whole document at once gives.
        let (changes, errors): (Vec<_>, Vec<_>) =
            audited.iter().map(entry).partition(Result::is_ok);
        let document = json!({
            "scanned": summary.scanned(),
            "kinds": kinds(&summary),
            "changes": changes.into_iter().flatten().collect::<Vec<_>>(),
            "errors": errors.into_iter().filter_map(Result::err).collect::<Vec<_>>(),
        });
        let whole = serde_json::to_string_pretty(&document).unwrap() + "\n";
        assert_eq!(String::from_utf8(out).unwrap(), whole);
        assert!(err.is_empty());
    }
}
