//! Objects sartor never mutates (`sartor_api::protected`) are answered
//! "allowed, no patch" and counted as skipped, whatever matches them and
//! before any snapshot is loaded; the same mutator still mutates the rest.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use sartor_api::{mutators_from_documents, read_documents_from_str};
use sartor_engine::{Mutator, System};
use sartor_state::{Snapshot, Unlabelled};
use sartor_webhook::{Deadline, Metrics, Outcome, Providers, Settings, Webhook};
use serde_json::{Value, json};

/// An AssignMetadata that matches every object of every kind.
const LABEL_EVERYTHING: &str = "apiVersion: mutations.sartor.dev/v1\nkind: AssignMetadata\n\
     metadata: {name: label-everything}\nspec:\n  match:\n    kinds: [{apiGroups: ['*'], kinds: ['*']}]\n  \
     location: metadata.labels.mutated\n  parameters: {assign: {value: 'yes'}}\n";

const UID: &str = "7d1f0e0a-5b7e-4c5e-9a55-2f3c1d9b6e11";

fn webhook(published: bool) -> Webhook {
    let metrics = Arc::new(Metrics::new());
    let providers = Arc::new(Providers::new(Duration::ZERO, metrics.clone()));
    let (publisher, state) = sartor_state::channel(providers.clone());
    let webhook = Webhook::new(
        Settings::new("sartor-system", "sartor"),
        state,
        Box::new(Unlabelled::default()),
        providers,
        metrics,
    );
    if published {
        let (documents, errors) = read_documents_from_str("test.yaml", LABEL_EVERYTHING, false);
        let loaded = mutators_from_documents(&documents, errors);
        assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
        let mut system = System::new();
        for mutator in &loaded.mutators {
            system.upsert(Mutator::compile(&mutator.object).unwrap());
        }
        publisher.publish(Snapshot {
            system,
            errors: Vec::new(),
        });
    }
    webhook
}

/// A v1 AdmissionReview of `operation` on `object`, as the API server sends
/// it (kind and resource from the object).
fn review(operation: &str, resource: &str, object: &Value) -> Vec<u8> {
    let (group, version) = object["apiVersion"]
        .as_str()
        .and_then(|v| v.rsplit_once('/'))
        .unwrap_or(("", "v1"));
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": UID,
            "kind": {"group": group, "version": version, "kind": object["kind"]},
            "resource": {"group": group, "version": version, "resource": resource},
            "name": object["metadata"]["name"],
            "namespace": object["metadata"]["namespace"].as_str().unwrap_or_default(),
            "operation": operation,
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": object,
            "oldObject": if operation == "UPDATE" { object.clone() } else { Value::Null },
            "dryRun": false,
        },
    })
    .to_string()
    .into_bytes()
}

/// (HTTP status, the answer as JSON, the outcome).
async fn answer(webhook: &Webhook, body: &[u8]) -> (u16, Value, Outcome) {
    let reply = webhook
        .mutate(
            body,
            &Deadline::new(Instant::now(), Duration::from_secs(10)),
        )
        .await;
    let answer = serde_json::from_slice(&reply.body).unwrap();
    (reply.status, answer, reply.outcome)
}

/// The protected objects, with the resource they are served as: the
/// webhook decides by the request's kind, whatever the object holds.
fn protected() -> Vec<(&'static str, Value)> {
    [
        (
            "constraints.gatekeeper.sh/v1beta1",
            "K8sRequiredLabels",
            "k8srequiredlabels",
        ),
        (
            "externaldata.gatekeeper.sh/v1beta1",
            "Provider",
            "providers",
        ),
        ("mutations.sartor.dev/v1", "Assign", "assign"),
        (
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        ),
    ]
    .into_iter()
    .map(|(api_version, kind, resource)| {
        let object = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}});
        (resource, object)
    })
    .collect()
}

fn config_map() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "shop"},
        "data": {"mode": "fast"},
    })
}

fn allowed() -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": UID, "allowed": true},
    })
}

#[tokio::test]
async fn protected_objects_are_allowed_unpatched_and_counted_as_skipped() {
    let webhook = webhook(true);
    for operation in ["CREATE", "UPDATE"] {
        for (resource, object) in protected() {
            let body = review(operation, resource, &object);
            assert_eq!(
                answer(&webhook, &body).await,
                (200, allowed(), Outcome::Skipped),
                "{operation} {}",
                object["kind"]
            );
        }
    }
}

#[tokio::test]
async fn the_same_mutator_patches_a_config_map() {
    let webhook = webhook(true);
    let (status, answer, outcome) =
        answer(&webhook, &review("CREATE", "configmaps", &config_map())).await;
    assert_eq!((status, outcome), (200, Outcome::Mutated));
    let patch = base64::engine::general_purpose::STANDARD
        .decode(answer["response"]["patch"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&patch).unwrap(),
        json!([{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}])
    );
    assert_eq!(
        answer,
        json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {
                "uid": UID,
                "allowed": true,
                "patch": answer["response"]["patch"],
                "patchType": "JSONPatch",
            },
        })
    );
}

#[tokio::test]
async fn protected_objects_are_skipped_before_any_mutators_are_loaded() {
    // Without a snapshot, an object that could be mutated fails (allowed
    // with a warning); a protected one needs no snapshot to be answered.
    let webhook = webhook(false);
    for (resource, object) in protected() {
        assert_eq!(
            answer(&webhook, &review("CREATE", resource, &object)).await,
            (200, allowed(), Outcome::Skipped),
            "{}",
            object["kind"]
        );
    }
    let (_, answer, outcome) =
        answer(&webhook, &review("CREATE", "configmaps", &config_map())).await;
    assert_eq!(outcome, Outcome::Error);
    assert_eq!(
        answer["response"]["warnings"],
        json!(["sartor did not mutate this object: sartor has not loaded its mutators yet"])
    );
}
