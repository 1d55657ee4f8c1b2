//! The webhook asks its Namespace provider only when a mutator that may apply
//! to the object needs the Namespace, from memory first, and fetches (once)
//! only what memory does not know.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sartor_api::{mutators_from_documents, read_documents_from_str};
use sartor_engine::{Mutator, System};
use sartor_state::{Lookup, Namespaces, Snapshot};
use sartor_webhook::{Deadline, Metrics, Providers, Settings, Webhook};
use serde_json::{Value, json};

/// Knows `labelled` in memory once fetched; records every question.
#[derive(Default)]
struct Recording {
    asked: Mutex<Vec<String>>,
    fetched: Mutex<Option<Arc<Value>>>,
}

/// The provider the webhook owns, sharing the record with the test.
struct Provider(Arc<Recording>);

impl Namespaces for Provider {
    fn lookup(&self, name: &str) -> Lookup {
        self.0.asked.lock().unwrap().push(format!("lookup {name}"));
        match &*self.0.fetched.lock().unwrap() {
            Some(namespace) => Lookup::Found(namespace.clone()),
            None => Lookup::Unknown,
        }
    }

    fn fetch<'a>(&'a self, name: &'a str) -> Pin<Box<dyn Future<Output = Lookup> + Send + 'a>> {
        self.0.asked.lock().unwrap().push(format!("fetch {name}"));
        let namespace = Arc::new(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"team": "payments"}}}));
        *self.0.fetched.lock().unwrap() = Some(namespace.clone());
        Box::pin(std::future::ready(Lookup::Found(namespace)))
    }
}

const PULL: &str = "apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata: {name: pull}
spec:
  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]
  location: 'spec.containers[name: *].imagePullPolicy'
  parameters: {assign: {value: Always}}
";

const TEAM_ONLY: &str = "apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata: {name: team-only}
spec:
  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]
  match: {namespaceSelector: {matchLabels: {team: payments}}}
  location: spec.priority
  parameters: {assign: {value: 1}}
";

fn webhook(yaml: &str, namespaces: Arc<Recording>) -> Webhook {
    let (documents, errors) = read_documents_from_str("test.yaml", yaml, false);
    let loaded = mutators_from_documents(&documents, errors);
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let mut system = System::new();
    for mutator in &loaded.mutators {
        system.upsert(Mutator::compile(&mutator.object).unwrap());
    }
    let metrics = Arc::new(Metrics::new());
    let providers = Arc::new(Providers::new(Duration::ZERO, metrics.clone()));
    let (publisher, state) = sartor_state::channel(providers.clone());
    let webhook = Webhook::new(
        Settings::new("sartor-system", "sartor"),
        state,
        Box::new(Provider(namespaces)),
        providers,
        metrics,
    );
    publisher.publish(Snapshot {
        system,
        errors: Vec::new(),
    });
    webhook
}

/// The patch answered for a Pod in namespace `shop`.
fn patch(webhook: &Webhook) -> Value {
    use base64::Engine as _;
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "namespace": "shop", "operation": "CREATE",
                    "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
                               "spec": {"containers": [{"name": "app", "image": "nginx"}]}}},
    });
    let deadline = Deadline::new(Instant::now(), Duration::from_secs(1));
    let reply =
        futures::executor::block_on(webhook.mutate(review.to_string().as_bytes(), &deadline));
    assert_eq!(reply.status, 200);
    let answer: Value = serde_json::from_slice(&reply.body).unwrap();
    let patch = answer["response"]["patch"].as_str().expect("a patch");
    serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(patch)
            .unwrap(),
    )
    .unwrap()
}

#[test]
fn no_mutator_reads_the_namespace_so_none_is_asked_for() {
    let namespaces = Arc::new(Recording::default());
    let webhook = webhook(PULL, namespaces.clone());
    assert_eq!(
        patch(&webhook),
        json!([{"op": "add", "path": "/spec/containers/0/imagePullPolicy", "value": "Always"}])
    );
    assert!(namespaces.asked.lock().unwrap().is_empty());
}

#[test]
fn a_namespace_selector_asks_memory_then_fetches_once() {
    let namespaces = Arc::new(Recording::default());
    let webhook = webhook(&format!("{PULL}---\n{TEAM_ONLY}"), namespaces.clone());
    let want = json!([
        {"op": "add", "path": "/spec/containers/0/imagePullPolicy", "value": "Always"},
        {"op": "add", "path": "/spec/priority", "value": 1},
    ]);
    assert_eq!(patch(&webhook), want);
    assert_eq!(patch(&webhook), want);
    assert_eq!(
        *namespaces.asked.lock().unwrap(),
        ["lookup shop", "fetch shop", "lookup shop"]
    );
}
