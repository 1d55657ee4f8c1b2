//! The webhook's admission handlers: bytes as the HTTP body of `/v1/mutate`
//! and of `/v1/validate`, on a `Webhook` built once with the example
//! mutators (examples/mutators, the webhook's value-condition fixtures) and
//! unlabelled Namespaces. `mutate` is async: it runs on a current-thread
//! tokio runtime.
//!
//! Oracle: never a panic; a reply is 200 with a JSON AdmissionReview body
//! (its `response.uid` is the request's) or a 4xx with text. A 500 (sartor's
//! own failure) is a bug for any input.
#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use sartor_api::{mutators_from_documents, read_documents_from_str};
use sartor_engine::{Mutator, System};
use sartor_state::{Snapshot, Unlabelled};
use sartor_webhook::{Deadline, Metrics, Providers, Reply, Settings, Webhook, parse_go_duration};
use serde_json::Value;

const MUTATORS: &[&str] = &[
    include_str!("../../examples/mutators/always-pull.yaml"),
    include_str!("../../examples/mutators/log-sidecar.yaml"),
    include_str!("../../examples/mutators/no-host-ports.yaml"),
    include_str!("../../examples/mutators/owner-label.yaml"),
    include_str!("../../examples/mutators/pin-registry.yaml"),
    include_str!("../../examples/mutators/prune-debug-flag.yaml"),
    include_str!("../../examples/mutators/read-only-root.yaml"),
    include_str!("../../examples/mutators/seccomp-default.yaml"),
    include_str!("../../examples/mutators/team-from-namespace.yaml"),
    include_str!("../../crates/webhook/tests/fixtures/conditions.yaml"),
];

struct Harness {
    runtime: tokio::runtime::Runtime,
    webhook: Webhook,
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let mut system = System::new();
        for (i, text) in MUTATORS.iter().enumerate() {
            let (documents, errors) = read_documents_from_str(&format!("{i}.yaml"), text, false);
            let loaded = mutators_from_documents(&documents, errors);
            for mutator in &loaded.mutators {
                if let Ok(compiled) = Mutator::compile(&mutator.object) {
                    system.upsert(compiled);
                }
            }
        }
        assert!(system.len() >= 8, "the example mutators did not load");
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
        publisher.publish(Snapshot {
            system,
            errors: Vec::new(),
        });
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(e) => panic!("no runtime: {e}"),
        };
        Harness { runtime, webhook }
    })
}

fn check(endpoint: &str, body: &[u8], reply: &Reply) {
    match reply.status {
        200 => {
            let review: Value = match serde_json::from_slice(&reply.body) {
                Ok(review) => review,
                Err(e) => panic!("{endpoint}: a 200 whose body is not JSON: {e}"),
            };
            assert!(
                review.get("response").is_some_and(Value::is_object),
                "{endpoint}: a 200 without a response: {review}"
            );
            assert!(
                review.get("kind").and_then(Value::as_str) == Some("AdmissionReview"),
                "{endpoint}: a 200 that is not an AdmissionReview: {review}"
            );
            // The uid is echoed (when the request had a string one).
            if let Ok(request) = serde_json::from_slice::<Value>(body)
                && let Some(uid) = request.pointer("/request/uid").and_then(Value::as_str)
            {
                assert_eq!(
                    review.pointer("/response/uid").and_then(Value::as_str),
                    Some(uid),
                    "{endpoint}: the uid is not echoed"
                );
            }
        }
        400..=499 => {
            assert!(
                reply.content_type.starts_with("text/plain"),
                "{endpoint}: a {} that is not text",
                reply.status
            );
            assert!(
                std::str::from_utf8(&reply.body).is_ok(),
                "{endpoint}: not UTF-8"
            );
        }
        status => panic!(
            "{endpoint}: status {status}: {}",
            String::from_utf8_lossy(&reply.body)
        ),
    }
}

fuzz_target!(|data: &[u8]| {
    let harness = harness();
    // The API server's `?timeout=`, as any bytes may spell it: never a panic.
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = parse_go_duration(text);
    }
    let deadline = Deadline::new(Instant::now(), Duration::from_secs(10));
    let reply = harness
        .runtime
        .block_on(harness.webhook.mutate(data, &deadline));
    check("mutate", data, &reply);
    let reply = harness.webhook.validate(data);
    check("validate", data, &reply);
});
