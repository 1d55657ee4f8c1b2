//! External data end to end: `sartor serve` (the real binary, real TLS)
//! calling a real HTTPS tag-to-digest provider on 127.0.0.1
//! (`sartor_tests::provider`), and `sartor mutate` with recorded answers
//! giving the same Pod.

use std::time::Duration;

use base64::Engine as _;
use rustls::pki_types::pem::PemObject as _;
use sartor_tests::https;
use sartor_tests::provider::{TestProvider, answer, digest};
use serde_json::{Value, json};

use super::{Served, temp_dir};

/// An Assign of every container's image from `provider`, for Pods in
/// namespace `namespace`, with `policy`.
pub(super) fn images(name: &str, provider: &str, policy: &str, namespace: &str) -> String {
    format!(
        "apiVersion: mutations.gatekeeper.sh/v1beta1\nkind: Assign\nmetadata:\n  name: {name}\n\
         spec:\n  applyTo:\n  - groups: [\"\"]\n    kinds: [Pod]\n    versions: [v1]\n  \
         match:\n    scope: Namespaced\n    namespaces: [{namespace}]\n  \
         location: \"spec.containers[name:*].image\"\n  parameters:\n    assign:\n      \
         externalData:\n        provider: {provider}\n        dataSource: ValueAtLocation\n        \
         failurePolicy: {policy}\n        default: busybox:latest\n"
    )
}

pub(super) fn pod(namespace: &str, images: &[&str]) -> Value {
    let containers: Vec<Value> = images
        .iter()
        .enumerate()
        .map(|(i, image)| json!({"name": format!("c{i}"), "image": image}))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {"containers": containers},
    })
}

impl Served {
    /// `object` as the webhook's patch leaves it; panics on a denial.
    async fn mutated(&self, object: &Value) -> Value {
        let response = self.admit(object).await;
        assert_eq!(response["allowed"], true, "{response}");
        let mut object = object.clone();
        if let Some(patch) = response["patch"].as_str() {
            let patch: json_patch::Patch = serde_json::from_slice(
                &base64::engine::general_purpose::STANDARD
                    .decode(patch)
                    .unwrap(),
            )
            .unwrap();
            json_patch::patch(&mut object, &patch).unwrap();
        }
        object
    }

    /// The denial message for `object`; panics when it is admitted.
    async fn denied(&self, object: &Value) -> String {
        let response = self.admit(object).await;
        assert_eq!(response["allowed"], false, "{response}");
        assert_eq!(response["status"]["code"], 500, "{response}");
        response["status"]["message"].as_str().unwrap().to_string()
    }

    pub(super) async fn metrics(&self) -> String {
        https::http_get(self.metrics_addr, "/metrics")
            .await
            .unwrap()
            .body
    }
}

/// A closed port: a provider there is down.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// sartor serving the six image mutators ({tags, down} x {Fail, Ignore,
/// UseDefault}, each in its own namespace), and the provider `tags`
/// trusting sartor's CA for client certificates.
fn start(dir: &std::path::Path) -> (Served, TestProvider) {
    let mut mutators = String::new();
    for provider in ["tags", "down"] {
        for policy in ["Fail", "Ignore", "UseDefault"] {
            let namespace = format!("{provider}-{}", policy.to_lowercase());
            mutators.push_str(&images(&namespace, provider, policy, &namespace));
            mutators.push_str("---\n");
        }
    }
    std::fs::write(dir.join("mutators/images.yaml"), mutators).unwrap();
    let mut served = Served::start(dir);
    served.wait_for_log("mutators loaded");
    let provider = TestProvider::start(Some(&served.ca_pem)).unwrap();
    let down = provider.provider_yaml("down", 1).replace(
        &provider.url(),
        &format!("https://127.0.0.1:{}/", closed_port()),
    );
    std::fs::write(
        dir.join("mutators/providers.yaml"),
        format!("{}---\n{down}", provider.provider_yaml("tags", 1)),
    )
    .unwrap();
    let loaded = served.wait_for_log("mutators loaded");
    assert_eq!(loaded["providers"], 2, "{loaded}");
    (served, provider)
}

#[tokio::test]
async fn a_provider_pins_images_in_one_request_with_sartors_certificate_and_cached_answers() {
    let dir = temp_dir("external-data");
    let (served, provider) = start(&dir);
    let object = pod("tags-fail", &["nginx:1.27", "redis:7", "busybox:1.36"]);
    let expected = pod(
        "tags-fail",
        &[
            &digest("nginx:1.27"),
            &digest("redis:7"),
            &digest("busybox:1.36"),
        ],
    );
    assert_eq!(served.mutated(&object).await, expected);
    let seen = provider.seen();
    assert_eq!(seen.len(), 1, "one request for three containers: {seen:?}");
    assert_eq!(seen[0].keys, ["busybox:1.36", "nginx:1.27", "redis:7"]);
    // The client certificate is sartor's serving certificate.
    let served_cert = std::fs::read_to_string(dir.join("certs/tls.crt")).unwrap();
    let served_der = rustls::pki_types::CertificateDer::from_pem_slice(served_cert.as_bytes())
        .unwrap()
        .to_vec();
    assert_eq!(seen[0].client_certificate.as_deref(), Some(&served_der[..]));

    // The same Pod again: every key from the cache, no call.
    assert_eq!(served.mutated(&object).await, expected);
    assert_eq!(provider.seen().len(), 1);
    let metrics = served.metrics().await;
    for line in [
        "sartor_provider_cache_lookups_total{provider=\"tags\",result=\"hit\"} 3",
        "sartor_provider_cache_lookups_total{provider=\"tags\",result=\"miss\"} 3",
        "sartor_provider_requests_total{provider=\"tags\",result=\"ok\"} 1",
        "sartor_provider_request_duration_seconds_count{provider=\"tags\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} not in\n{metrics}");
    }

    // `sartor mutate` with the provider's answers recorded gives the same Pod.
    let keys: Vec<String> = seen[0].keys.clone();
    let recording = json!({"providers": {"tags": answer(&keys, true)}});
    std::fs::write(dir.join("answers.yaml"), recording.to_string()).unwrap();
    std::fs::write(dir.join("pod.json"), object.to_string()).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_sartor"))
        .args(["mutate", "-o", "json", "--mutators"])
        .arg(dir.join("mutators"))
        .arg("--provider-answers")
        .arg(dir.join("answers.yaml"))
        .arg(dir.join("pod.json"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let offline: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(offline, expected);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn each_failure_policy_decides_on_an_item_error_a_timeout_and_a_provider_down() {
    let dir = temp_dir("external-data-failures");
    let (served, provider) = start(&dir);
    let fail = "failed to resolve external data placeholders: ";
    // An item error.
    assert_eq!(
        served.denied(&pod("tags-fail", &["error_nginx"])).await,
        format!(
            "v1 Pod tags-fail/web: {fail}failed to retrieve external data item from provider tags: error_nginx_invalid"
        )
    );
    assert_eq!(
        served.mutated(&pod("tags-ignore", &["error_nginx"])).await,
        pod("tags-ignore", &["error_nginx"])
    );
    assert_eq!(
        served
            .mutated(&pod("tags-usedefault", &["error_nginx"]))
            .await,
        pod("tags-usedefault", &["busybox:latest"])
    );
    // A system error.
    assert_eq!(
        served.denied(&pod("tags-fail", &["x_systemError"])).await,
        format!(
            "v1 Pod tags-fail/web: {fail}failed to validate external data response from provider tags: non-empty system error: testing system error"
        )
    );
    // A provider slower than the deadline (800 ms by default).
    let message = served.denied(&pod("tags-fail", &["slow:1"])).await;
    assert!(
        message.starts_with(&format!(
            "v1 Pod tags-fail/web: {fail}failed to send external data request to provider tags: no answer within "
        )),
        "{message}"
    );
    assert_eq!(
        served.mutated(&pod("tags-ignore", &["slow:2"])).await,
        pod("tags-ignore", &["slow:2"])
    );
    assert_eq!(
        served.mutated(&pod("tags-usedefault", &["slow:3"])).await,
        pod("tags-usedefault", &["busybox:latest"])
    );
    // A provider that is down.
    let message = served.denied(&pod("down-fail", &["nginx:1"])).await;
    assert!(
        message.starts_with(&format!(
            "v1 Pod down-fail/web: {fail}failed to send external data request to provider down: failed to send external data request: "
        )) && message.contains("Connection refused"),
        "{message}"
    );
    assert_eq!(
        served.mutated(&pod("down-ignore", &["nginx:1"])).await,
        pod("down-ignore", &["nginx:1"])
    );
    assert_eq!(
        served.mutated(&pod("down-usedefault", &["nginx:1"])).await,
        pod("down-usedefault", &["busybox:latest"])
    );
    // Answers not declared idempotent are refused.
    provider.set_idempotent(false);
    assert_eq!(
        served.denied(&pod("tags-fail", &["fresh:1"])).await,
        format!(
            "v1 Pod tags-fail/web: {fail}failed to validate external data response from provider tags: non-idempotent response"
        )
    );
    assert_eq!(
        served.mutated(&pod("tags-usedefault", &["fresh:2"])).await,
        pod("tags-usedefault", &["busybox:latest"])
    );
    let metrics = served.metrics().await;
    for line in [
        "sartor_provider_requests_total{provider=\"tags\",result=\"timeout\"} 3",
        "sartor_provider_requests_total{provider=\"tags\",result=\"invalid\"} 3",
        "sartor_provider_requests_total{provider=\"down\",result=\"error\"} 3",
    ] {
        assert!(metrics.contains(line), "{line} not in\n{metrics}");
    }
    // The slow calls did not hold anything up: every answer came back.
    tokio::time::sleep(Duration::from_millis(10)).await;
    let _ = std::fs::remove_dir_all(&dir);
}
