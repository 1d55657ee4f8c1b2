//! Overload end to end: `sartor serve` (the real binary, real TLS) with one
//! slot and room for one to wait, the slot held by an admission that waits
//! on a slow external data provider (`sartor_tests::provider`: keys
//! starting with `slow` are answered after 2 s). What is asserted is the
//! answers and the metrics, never how long anything took.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use base64::Engine as _;
use sartor_tests::https::{self, Answer};
use sartor_tests::provider::{TestProvider, digest};
use serde_json::{Value, json};

use super::external_data::{images, pod};
use super::{Served, review, temp_dir};

/// POSTs the review of `object` to `path` on a connection of its own.
async fn post(addr: SocketAddr, ca_pem: String, path: &'static str, object: Value) -> Answer {
    let options = https::Options {
        ca_pem,
        ..https::Options::default()
    };
    let mut client = https::connect_with(addr, &options).await.unwrap();
    client
        .post(path, review(&object).to_string())
        .await
        .unwrap()
}

impl Served {
    /// Waits up to 10 s for the metrics page to have the line `line`.
    async fn wait_for_metric(&self, line: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let metrics = self.metrics().await;
            if metrics.lines().any(|l| l == line) {
                return;
            }
            assert!(Instant::now() < deadline, "{line} not in\n{metrics}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

const SHED: &str = "answered early and unmutated, so the API server applies the webhook's \
                    failurePolicy\n";

#[tokio::test]
async fn a_full_replica_answers_at_once_and_a_waiting_request_before_its_deadline() {
    let dir = temp_dir("overload");
    let mut mutators = images("slow", "tags", "Ignore", "slow");
    mutators.push_str("---\n");
    mutators.push_str(&images("slow-fail", "tags", "Fail", "slow-fail"));
    std::fs::write(dir.join("mutators/images.yaml"), mutators).unwrap();
    let flags = [
        "--max-in-flight",
        "1",
        "--max-queued",
        "1",
        // Far off: the request's own deadline bounds the calls.
        "--provider-deadline-ms",
        "5000",
    ];
    let mut served = Served::start_with(&dir, &flags);
    let listening = served
        .seen
        .iter()
        .find(|line| line["message"] == "listening")
        .cloned()
        .unwrap();
    assert_eq!(
        (&listening["max_in_flight"], &listening["max_queued"]),
        (&Value::from(1), &Value::from(1))
    );
    served.wait_for_log("mutators loaded");
    let provider = TestProvider::start(Some(&served.ca_pem)).unwrap();
    std::fs::write(
        dir.join("mutators/providers.yaml"),
        provider.provider_yaml("tags", 5),
    )
    .unwrap();
    served.wait_for_log("mutators loaded");
    let (addr, ca) = (served.addr, served.ca_pem.clone());

    // The slot: an admission waiting 2 s for its provider.
    let holder = tokio::spawn(post(
        addr,
        ca.clone(),
        "/v1/mutate?timeout=10s",
        pod("slow", &["slow:1"]),
    ));
    served.wait_for_metric("sartor_admission_in_flight 1").await;
    // The queue: a request the API server waits 1 s for.
    let waiter = tokio::spawn(post(
        addr,
        ca.clone(),
        "/v1/mutate?timeout=1s",
        pod("shop", &["nginx"]),
    ));
    served.wait_for_metric("sartor_admission_queued 1").await;

    // One more: shed at once.
    let full = post(addr, ca.clone(), "/v1/mutate", pod("shop", &["nginx"])).await;
    assert_eq!(
        (
            full.status,
            full.content_type.as_deref(),
            full.body.as_str()
        ),
        (
            503,
            Some("text/plain; charset=utf-8"),
            format!(
                "sartor is overloaded: every slot busy (--max-in-flight 1) and the queue full \
                 (--max-queued 1); {SHED}"
            )
            .as_str()
        )
    );
    // Probes are never shed, on either port.
    let mut client = https::connect(addr, &ca).await.unwrap();
    let health = client.get("/healthz").await.unwrap();
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));
    let ready = https::http_get(served.metrics_addr, "/readyz")
        .await
        .unwrap();
    assert_eq!(ready.status, 200);

    // The one waiting gets its answer before its deadline, not a slot.
    let waited = waiter.await.unwrap();
    assert_eq!(
        (waited.status, waited.body.as_str()),
        (
            503,
            format!(
                "sartor is overloaded: no slot came free (--max-in-flight 1) before the \
                 request's deadline (1s after it arrived, less 100ms for the answer); {SHED}"
            )
            .as_str()
        )
    );
    // The holder finishes, mutated.
    let held = holder.await.unwrap();
    assert_eq!(held.status, 200, "{}", held.body);
    let held: Value = serde_json::from_str(&held.body).unwrap();
    assert_eq!(held["response"]["allowed"], true, "{held}");
    let patch = base64::engine::general_purpose::STANDARD
        .decode(held["response"]["patch"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&patch).unwrap(),
        json!([{"op": "replace", "path": "/spec/containers/0/image", "value": digest("slow:1")}])
    );

    // External data ends by the request's deadline, not --provider-deadline-ms:
    // with a 1 s timeout the call is cut at 900 ms and failurePolicy Fail denies.
    let denied = post(
        addr,
        ca.clone(),
        "/v1/mutate?timeout=1s",
        pod("slow-fail", &["slow:2"]),
    )
    .await;
    assert_eq!(denied.status, 200, "{}", denied.body);
    let denied: Value = serde_json::from_str(&denied.body).unwrap();
    let message = denied["response"]["status"]["message"].as_str().unwrap();
    let within = "failed to send external data request to provider tags: no answer within ";
    let millis: u64 = message
        .split_once(within)
        .and_then(|(_, rest)| rest.split_once(" ms"))
        .and_then(|(ms, _)| ms.parse().ok())
        .unwrap_or_else(|| panic!("{message}"));
    assert!(millis <= 900, "{message}");
    assert_eq!(denied["response"]["allowed"], false);

    for line in [
        "sartor_admission_shed_total{endpoint=\"mutate\",reason=\"queue_full\"} 1",
        "sartor_admission_shed_total{endpoint=\"mutate\",reason=\"deadline\"} 1",
        "sartor_admission_requests_total{endpoint=\"mutate\",outcome=\"shed\"} 2",
        "sartor_admission_in_flight 0",
        "sartor_admission_queued 0",
        // The holder, the denied one (at once) and the waiter that got none.
        "sartor_admission_queue_wait_seconds_count 2",
    ] {
        served.wait_for_metric(line).await;
    }
    let warned = served.wait_for_log(
        "shedding admission requests: answered early (503), the API server applies the failurePolicy",
    );
    assert_eq!(warned["level"], "WARN", "{warned}");
    let _ = std::fs::remove_dir_all(&dir);
}
