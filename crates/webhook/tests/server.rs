//! The real server on 127.0.0.1 with a generated certificate, driven over
//! real TLS by a real HTTP client.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    missing_docs
)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use prometheus_client::registry::Registry;
use sartor_api::{Input, MutatorKind, Wildcard, load_mutators};
use sartor_controller::{Feed, SelfSigned};
use sartor_engine::{Mutator, System};
use sartor_state::{Fixed, MutatorCrd, Namespaces, Snapshot, Unlabelled};
use sartor_tests::https::{self, Answer, HttpsClient, Options};
use sartor_webhook::{
    Config, Limits, Metrics, OnError, Providers, Server, Settings, TlsFiles, Webhook,
};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

// === harness ===

struct Harness {
    addr: SocketAddr,
    metrics_addr: SocketAddr,
    /// Where snapshots and CRD facts are published, as the controller does.
    feed: Feed,
    certs: SelfSigned,
    /// The certificates' directory, removed when the harness is dropped
    /// (also when a test fails).
    dir: TempDir,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

struct Setup {
    settings: Settings,
    namespaces: Box<dyn Namespaces>,
    limits: Limits,
    client_ca: Option<String>,
    mutators: Option<&'static str>,
}

impl Setup {
    fn new() -> Setup {
        Setup {
            settings: Settings::new("sartor-system", "sartor"),
            namespaces: Box::new(Unlabelled::default()),
            limits: Limits {
                header_read_timeout: Duration::from_millis(500),
                body_read_timeout: Duration::from_millis(500),
                handshake_timeout: Duration::from_millis(500),
                shutdown_grace: Duration::from_secs(5),
                tls_reload_interval: Duration::from_millis(50),
                ..Limits::default()
            },
            client_ca: None,
            mutators: Some("mutators.yaml"),
        }
    }

    async fn start(self, name: &str) -> Harness {
        let dir = tempfile::Builder::new()
            .prefix(&format!("sartor-webhook-{name}-"))
            .tempdir()
            .unwrap();
        let certs = SelfSigned::generate("sartor", &["localhost", "127.0.0.1"]).unwrap();
        let files = certs.write(dir.path()).unwrap();
        let client_ca = self.client_ca.map(|pem| {
            let path = dir.path().join("client-ca.crt");
            std::fs::write(&path, pem).unwrap();
            path
        });
        let config = Config {
            addr: "127.0.0.1:0".parse().unwrap(),
            metrics_addr: "127.0.0.1:0".parse().unwrap(),
            tls: TlsFiles {
                cert: files.cert,
                key: files.key,
                client_ca,
            },
            limits: self.limits,
        };
        // Wired as the binary wires it: one registry, the controller's
        // metrics and the webhook's in it.
        let mut registry = Registry::with_prefix("sartor");
        let source_metrics = Arc::new(sartor_controller::Metrics::new(&mut registry));
        let metrics = Arc::new(Metrics::with_registry(registry));
        let providers = Arc::new(Providers::new(
            self.settings.provider_cache_ttl,
            metrics.clone(),
        ));
        let (publisher, state) = sartor_state::channel(providers.clone());
        let feed = Feed::new(publisher, source_metrics);
        let webhook = Arc::new(Webhook::new(
            self.settings,
            state,
            self.namespaces,
            providers,
            metrics,
        ));
        if let Some(fixture) = self.mutators {
            feed.publish(Snapshot {
                system: system(fixture),
                errors: Vec::new(),
            });
        }
        let server = Server::bind(&config, webhook).await.unwrap();
        let (addr, metrics_addr) = (server.addr(), server.metrics_addr());
        let (shutdown, stop) = oneshot::channel::<()>();
        let task = tokio::spawn(server.run(async {
            let _ = stop.await;
        }));
        Harness {
            addr,
            metrics_addr,
            feed,
            certs,
            dir,
            shutdown: Some(shutdown),
            task,
        }
    }
}

impl Harness {
    async fn client(&self) -> HttpsClient {
        https::connect(self.addr, &self.certs.ca_pem).await.unwrap()
    }

    /// A raw TLS connection (HTTP/1.1 by ALPN) that has had one answer to
    /// `body` on `/v1/mutate`, and so is kept alive.
    async fn kept_alive(
        &self,
        body: &str,
    ) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
        let options = Options {
            server_name: None,
            ca_pem: self.certs.ca_pem.clone(),
            ..Options::default()
        };
        let mut kept = https::tls_stream(self.addr, &options).await.unwrap();
        kept.write_all(mutate_request(body).as_bytes())
            .await
            .unwrap();
        let (head, _) = read_response(&mut kept).await.unwrap();
        assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
        kept
    }

    /// Begins shutdown; the server's task, to await, and the certificates'
    /// directory, to keep until then.
    fn begin_shutdown(mut self) -> (JoinHandle<()>, TempDir) {
        let _ = self.shutdown.take().unwrap().send(());
        (self.task, self.dir)
    }

    async fn mutate(&self, review: &Value) -> Value {
        let answer = self
            .client()
            .await
            .post("/v1/mutate", review.to_string())
            .await
            .unwrap();
        assert_eq!(answer.status, 200, "{}", answer.body);
        serde_json::from_str(&answer.body).unwrap()
    }

    async fn metrics(&self) -> String {
        https::http_get(self.metrics_addr, "/metrics")
            .await
            .unwrap()
            .body
    }

    /// Asserts that `/metrics` has `line` (name, labels and value).
    async fn assert_metric(&self, line: &str) {
        let metrics = self.metrics().await;
        assert!(
            metrics.lines().any(|l| l == line),
            "missing {line:?} in\n{metrics}"
        );
    }

    async fn stop(mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        tokio::time::timeout(Duration::from_secs(10), &mut self.task)
            .await
            .expect("server stops")
            .unwrap();
    }
}

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn system(name: &str) -> System {
    let loaded = load_mutators(&[Input::from_arg(&fixture(name))]);
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let mut system = System::new();
    for mutator in &loaded.mutators {
        system.upsert(Mutator::compile(&mutator.object).unwrap());
    }
    system
}

fn pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]},
    })
}

fn review(version: &str, operation: &str, namespace: &str, object: Value) -> Value {
    let kind = &object["kind"];
    let group = object["apiVersion"]
        .as_str()
        .and_then(|v| v.rsplit_once('/'))
        .map_or("", |(g, _)| g);
    json!({
        "apiVersion": version,
        "kind": "AdmissionReview",
        "request": {
            "uid": "0c9a8d74-9cb7-44dd-b98e-09fd62def2f4",
            "kind": {"group": group, "version": "v1", "kind": kind},
            "resource": {"group": group, "version": "v1", "resource": "pods"},
            "name": object["metadata"]["name"],
            "namespace": namespace,
            "operation": operation,
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": object,
            "oldObject": null,
            "dryRun": false,
        },
    })
}

const UID: &str = "0c9a8d74-9cb7-44dd-b98e-09fd62def2f4";

/// A v1 AdmissionReview carrying `response`.
fn answered(response: Value) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

fn allowed(version: &str) -> Value {
    json!({"apiVersion": version, "kind": "AdmissionReview", "response": {"uid": UID, "allowed": true}})
}

fn decode_patch(response: &Value) -> Value {
    let patch = response["response"]["patch"].as_str().unwrap();
    serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(patch)
            .unwrap(),
    )
    .unwrap()
}

// === mutation ===

#[tokio::test]
async fn a_pod_is_mutated_and_the_patch_turns_the_original_into_the_result() {
    let harness = Setup::new().start("mutated").await;
    let answer = harness
        .mutate(&review("admission.k8s.io/v1", "CREATE", "shop", pod()))
        .await;
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(answer["response"]["uid"], UID);
    assert_eq!(answer["response"]["allowed"], true);
    assert_eq!(answer["response"]["patchType"], "JSONPatch");
    let patch = decode_patch(&answer);
    // The namespace comes from the request and is not patched into the object.
    assert_eq!(
        patch,
        json!([
            {"op": "add", "path": "/metadata/labels/owner", "value": "shop"},
            {"op": "add", "path": "/spec/containers/0/imagePullPolicy", "value": "Always"},
        ])
    );
    let mut object = pod();
    json_patch::patch(
        &mut object,
        &serde_json::from_value::<json_patch::Patch>(patch).unwrap(),
    )
    .unwrap();
    assert_eq!(
        object,
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web", "labels": {"app": "web", "owner": "shop"}},
            "spec": {"containers": [{"name": "app", "image": "nginx", "imagePullPolicy": "Always"}]},
        })
    );
    harness.stop().await;
}

#[tokio::test]
async fn an_ephemeral_container_request_gets_a_patch_confined_to_ephemeral_containers() {
    let mut setup = Setup::new();
    setup.mutators = Some("ephemeral.yaml");
    let harness = setup.start("ephemeral").await;
    // kubectl debug: an UPDATE of pods/ephemeralcontainers carrying the whole
    // Pod, of which only spec.ephemeralContainers may change.
    let mut debugged = pod();
    debugged["spec"]["ephemeralContainers"] = json!([{"name": "debugger", "image": "busybox"}]);
    let mut request = review("admission.k8s.io/v1", "UPDATE", "shop", debugged);
    request["request"]["subResource"] = json!("ephemeralcontainers");
    let answer = harness.mutate(&request).await;
    // always-pull and the owner label would change the containers and the
    // labels: left out; only the debug container's pull policy is patched.
    assert_eq!(
        decode_patch(&answer),
        json!([
            {"op": "add", "path": "/spec/ephemeralContainers/0/imagePullPolicy", "value": "Always"},
        ])
    );
    // A Pod that already has a debug container: that one may not change
    // (the API server refuses it), only the one this request adds.
    let mut before = pod();
    before["spec"]["ephemeralContainers"] = json!([{"name": "old", "image": "busybox"}]);
    let mut again = before.clone();
    again["spec"]["ephemeralContainers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "debugger", "image": "busybox"}));
    let mut request = review("admission.k8s.io/v1", "UPDATE", "shop", again);
    request["request"]["subResource"] = json!("ephemeralcontainers");
    request["request"]["oldObject"] = before;
    assert_eq!(
        decode_patch(&harness.mutate(&request).await),
        json!([
            {"op": "add", "path": "/spec/ephemeralContainers/1/imagePullPolicy", "value": "Always"},
        ])
    );
    // Only the mutator whose change was kept counts as applied, twice.
    let applied: Vec<String> = harness
        .metrics()
        .await
        .lines()
        .filter(|l| l.starts_with("sartor_mutations_applied_total{"))
        .map(str::to_string)
        .collect();
    assert_eq!(
        applied,
        ["sartor_mutations_applied_total{kind=\"Assign\",name=\"always-pull-debug\"} 2"]
    );
    // Other subresources stay skipped, even with a Pod in them.
    let mut status = review("admission.k8s.io/v1", "UPDATE", "shop", pod());
    status["request"]["subResource"] = json!("status");
    assert_eq!(
        harness.mutate(&status).await,
        allowed("admission.k8s.io/v1")
    );
    // Nothing to change in the ephemeral containers: no patch at all.
    let mut request = review("admission.k8s.io/v1", "UPDATE", "shop", pod());
    request["request"]["subResource"] = json!("ephemeralcontainers");
    assert_eq!(
        harness.mutate(&request).await,
        allowed("admission.k8s.io/v1")
    );
    harness.stop().await;
}

#[tokio::test]
async fn mutation_annotations_name_the_mutators_only_when_enabled() {
    let mut setup = Setup::new();
    setup.settings.mutation_annotations = true;
    let harness = setup.start("annotations").await;
    let answer = harness
        .mutate(&review("admission.k8s.io/v1", "CREATE", "shop", pod()))
        .await;
    assert_eq!(
        decode_patch(&answer),
        json!([
            {"op": "add", "path": "/metadata/annotations", "value": {
                "sartor.dev/mutations": "Assign/always-pull:0, AssignMetadata/owner:0",
            }},
            {"op": "add", "path": "/metadata/labels/owner", "value": "shop"},
            {"op": "add", "path": "/spec/containers/0/imagePullPolicy", "value": "Always"},
        ])
    );
    // Nothing to change, nothing to annotate.
    let mut mutated = pod();
    mutated["metadata"]["labels"]["owner"] = json!("shop");
    mutated["spec"]["containers"][0]["imagePullPolicy"] = json!("Always");
    assert_eq!(
        harness
            .mutate(&review("admission.k8s.io/v1", "CREATE", "shop", mutated))
            .await,
        allowed("admission.k8s.io/v1")
    );
    harness.stop().await;
    // Off by default: the patch of a_pod_is_mutated_and_the_patch_turns_the_original_into_the_result.
}

#[tokio::test]
async fn an_object_already_mutated_gets_no_patch() {
    let harness = Setup::new().start("unchanged").await;
    let mut object = pod();
    object["metadata"]["labels"]["owner"] = json!("shop");
    object["spec"]["containers"][0]["imagePullPolicy"] = json!("Always");
    let answer = harness
        .mutate(&review("admission.k8s.io/v1", "UPDATE", "shop", object))
        .await;
    assert_eq!(answer, allowed("admission.k8s.io/v1"));
    harness.stop().await;
}

#[tokio::test]
async fn v1beta1_is_answered_in_v1beta1() {
    let harness = Setup::new().start("v1beta1").await;
    let answer = harness
        .mutate(&review("admission.k8s.io/v1beta1", "CREATE", "shop", pod()))
        .await;
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(answer["kind"], "AdmissionReview");
    assert_eq!(
        decode_patch(&answer),
        json!([
            {"op": "add", "path": "/metadata/labels/owner", "value": "shop"},
            {"op": "add", "path": "/spec/containers/0/imagePullPolicy", "value": "Always"},
        ])
    );
    harness.stop().await;
}

#[tokio::test]
async fn http2_is_negotiated_by_alpn() {
    let harness = Setup::new().start("http2").await;
    let options = Options {
        server_name: None,
        ca_pem: harness.certs.ca_pem.clone(),
        http2: true,
        client_identity: None,
    };
    let mut client = https::connect_with(harness.addr, &options).await.unwrap();
    assert_eq!(client.alpn.as_deref(), Some(&b"h2"[..]));
    let answer = client
        .post(
            "/v1/mutate",
            review("admission.k8s.io/v1", "CREATE", "shop", pod()).to_string(),
        )
        .await
        .unwrap();
    assert_eq!(answer.status, 200);
    let answer: Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(answer["response"]["patchType"], "JSONPatch");
    harness.stop().await;
}

// === skip rules ===

#[tokio::test]
async fn each_skip_rule_allows_without_a_patch() {
    let mut setup = Setup::new();
    setup
        .settings
        .exclusions
        .namespaces
        .extend(["legacy", "team-*", "*-sandbox"].map(|glob| Wildcard::new(glob).unwrap()));
    let harness = setup.start("skips").await;
    let v1 = "admission.k8s.io/v1";
    let mut cases: Vec<(&str, Value)> = vec![
        ("DELETE", review(v1, "DELETE", "shop", pod())),
        ("CONNECT", review(v1, "CONNECT", "shop", pod())),
        ("kube-system", review(v1, "CREATE", "kube-system", pod())),
        (
            "own namespace",
            review(v1, "CREATE", "sartor-system", pod()),
        ),
        ("--exclude-namespace", review(v1, "CREATE", "legacy", pod())),
        (
            "--exclude-namespace team-*",
            review(v1, "CREATE", "team-a", pod()),
        ),
        (
            "--exclude-namespace *-sandbox",
            review(v1, "CREATE", "dev-sandbox", pod()),
        ),
    ];
    let mut own_account = review(v1, "CREATE", "shop", pod());
    own_account["request"]["userInfo"]["username"] =
        json!("system:serviceaccount:sartor-system:sartor");
    cases.push(("own service account", own_account));
    let mut status = review(v1, "UPDATE", "shop", pod());
    status["request"]["subResource"] = json!("status");
    cases.push(("subresource", status));
    let mutator = json!({
        "apiVersion": "mutations.sartor.dev/v1",
        "kind": "Assign",
        "metadata": {"name": "x"},
        "spec": {"location": "spec.x", "parameters": {"assign": {"value": 1}}},
    });
    cases.push(("a mutator", review(v1, "CREATE", "", mutator)));
    let namespace =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}});
    cases.push((
        "the kube-system Namespace",
        review(v1, "UPDATE", "", namespace),
    ));
    for (rule, review) in cases {
        assert_eq!(harness.mutate(&review).await, allowed(v1), "{rule}");
    }
    harness
        .assert_metric(
            "sartor_admission_requests_total{endpoint=\"mutate\",outcome=\"skipped\"} 11",
        )
        .await;
    harness.stop().await;
}

#[tokio::test]
async fn a_namespace_is_its_own_namespace_and_cluster_scoped_objects_are_mutated() {
    let harness = Setup::new().start("cluster-scoped").await;
    // The owner label applies to namespaced objects only: a Namespace in
    // "shop" is cluster-scoped and gets nothing, though not skipped.
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}});
    let answer = harness
        .mutate(&review("admission.k8s.io/v1", "CREATE", "", namespace))
        .await;
    assert_eq!(answer, allowed("admission.k8s.io/v1"));
    harness
        .assert_metric(
            "sartor_admission_requests_total{endpoint=\"mutate\",outcome=\"unchanged\"} 1",
        )
        .await;
    harness.stop().await;
}

// === errors ===

fn namespace_setup(on_error: OnError) -> Setup {
    let mut setup = Setup::new();
    setup.mutators = Some("namespace-selector.yaml");
    setup.settings.on_error = on_error;
    setup.namespaces = Box::new(Fixed::new([json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "gold-team", "labels": {"tier": "gold"}},
    })]));
    setup
}

const UNKNOWN_NAMESPACE: &str = "v1 Pod shop/web: Assign team-priority: its namespaceSelector needs the labels of Namespace \"shop\", which was not provided";

#[tokio::test]
async fn a_failed_mutation_is_allowed_with_a_warning_by_default() {
    let harness = namespace_setup(OnError::Allow)
        .start("on-error-allow")
        .await;
    let answer = harness
        .mutate(&review("admission.k8s.io/v1", "CREATE", "gold-team", pod()))
        .await;
    assert_eq!(
        decode_patch(&answer),
        json!([{"op": "add", "path": "/spec/priorityClassName", "value": "gold"}])
    );
    let answer = harness
        .mutate(&review("admission.k8s.io/v1", "CREATE", "shop", pod()))
        .await;
    assert_eq!(
        answer,
        answered(json!({
                "uid": UID,
                "allowed": true,
                "status": {"code": 500, "message": UNKNOWN_NAMESPACE},
                "warnings": [format!("sartor did not mutate this object: {UNKNOWN_NAMESPACE}")],
        }))
    );
    harness
        .assert_metric("sartor_admission_requests_total{endpoint=\"mutate\",outcome=\"error\"} 1")
        .await;
    harness.stop().await;
}

#[tokio::test]
async fn a_failed_mutation_is_denied_with_on_error_deny() {
    let harness = namespace_setup(OnError::Deny).start("on-error-deny").await;
    let answer = harness
        .mutate(&review("admission.k8s.io/v1", "CREATE", "shop", pod()))
        .await;
    assert_eq!(
        answer,
        answered(json!({
                "uid": UID,
                "allowed": false,
                "status": {
                    "code": 500,
                    "message": format!("sartor could not mutate this object: {UNKNOWN_NAMESPACE}"),
                },
        }))
    );
    harness.stop().await;
}

async fn post_raw(harness: &Harness, path: &str, body: impl Into<hyper::body::Bytes>) -> Answer {
    harness.client().await.post(path, body).await.unwrap()
}

#[tokio::test]
async fn bad_bodies_get_400_with_the_reason() {
    let harness = Setup::new().start("bad-bodies").await;
    let text = Some("text/plain; charset=utf-8".to_string());
    let cases: Vec<(String, &str)> = vec![
        (
            "not json".to_string(),
            "the body is not an AdmissionReview: expected ident at line 1 column 2\n",
        ),
        (
            json!({"apiVersion": "v1", "kind": "Pod"}).to_string(),
            "unsupported AdmissionReview apiVersion \"v1\" kind \"Pod\": expected kind AdmissionReview, apiVersion admission.k8s.io/v1 or admission.k8s.io/v1beta1\n",
        ),
        (
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).to_string(),
            "the AdmissionReview has no request\n",
        ),
        (
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u"}}).to_string(),
            "the body is not an AdmissionReview: request: missing field `kind` at line 1 column 82\n",
        ),
        (
            {
                let mut r = review("admission.k8s.io/v1", "CREATE", "shop", pod());
                r["request"]["object"] = json!([1, 2]);
                r.to_string()
            },
            "request.object must be a JSON object, got a list\n",
        ),
    ];
    for (body, reason) in cases {
        let answer = post_raw(&harness, "/v1/mutate", body.clone()).await;
        assert_eq!(
            answer,
            Answer {
                status: 400,
                content_type: text.clone(),
                body: reason.to_string()
            },
            "{body}"
        );
    }
    harness
        .assert_metric("sartor_admission_requests_total{endpoint=\"mutate\",outcome=\"invalid\"} 5")
        .await;
    harness.stop().await;
}

#[tokio::test]
async fn a_body_over_3_mib_gets_413_and_the_server_stays_up() {
    let harness = Setup::new().start("too-large").await;
    let body = vec![b' '; 3 * 1024 * 1024 + 1];
    let answer = post_raw(&harness, "/v1/mutate", body).await;
    assert_eq!(answer.status, 413);
    assert_eq!(answer.body, "request body larger than 3145728 bytes\n");
    // Chunked, no Content-Length: the limit holds while reading.
    let mut tls = https::tls_stream(
        harness.addr,
        &Options {
            server_name: None,
            ca_pem: harness.certs.ca_pem.clone(),
            ..Options::default()
        },
    )
    .await
    .unwrap();
    tls.write_all(
        b"POST /v1/mutate HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    .await
    .unwrap();
    let chunk = vec![b' '; 1024 * 1024];
    for _ in 0..4 {
        tls.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
            .await
            .unwrap();
        if tls.write_all(&chunk).await.is_err() {
            break;
        }
        let _ = tls.write_all(b"\r\n").await;
    }
    let mut response = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut response)).await;
    let response = String::from_utf8_lossy(&response);
    assert!(
        response.starts_with("HTTP/1.1 413 Payload Too Large\r\n"),
        "{response}"
    );
    let answer = harness
        .mutate(&review("admission.k8s.io/v1", "CREATE", "shop", pod()))
        .await;
    assert_eq!(answer["response"]["allowed"], true);
    harness.stop().await;
}

#[tokio::test]
async fn plain_http_to_the_tls_port_is_told_so() {
    let harness = Setup::new().start("plain-http").await;
    let mut tcp = tokio::net::TcpStream::connect(harness.addr).await.unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut response = String::new();
    tcp.read_to_string(&mut response).await.unwrap();
    assert_eq!(
        response,
        "HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"
    );
    harness.stop().await;
}

#[tokio::test]
async fn slow_and_vanishing_clients_do_not_hold_the_server() {
    let harness = Setup::new().start("slow-clients").await;
    let options = Options {
        server_name: None,
        ca_pem: harness.certs.ca_pem.clone(),
        ..Options::default()
    };
    // Headers that never finish: the connection is closed after the header timeout.
    let mut slow = https::tls_stream(harness.addr, &options).await.unwrap();
    slow.write_all(b"POST /v1/mutate HTTP/1.1\r\nHost: loc")
        .await
        .unwrap();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut rest)).await;
    assert!(
        closed.is_ok(),
        "the server kept a slow client's connection open"
    );
    // A body that never finishes: 408 after the body timeout.
    let mut stalled = https::tls_stream(harness.addr, &options).await.unwrap();
    stalled
        .write_all(
            b"POST /v1/mutate HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{\"api",
        )
        .await
        .unwrap();
    let mut response = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stalled.read_to_end(&mut response)).await;
    let response = String::from_utf8_lossy(&response);
    assert!(
        response.starts_with("HTTP/1.1 408 Request Timeout\r\n"),
        "{response}"
    );
    assert!(
        response.ends_with("the request body did not arrive within 500ms\n"),
        "{response}"
    );
    // A client that disconnects mid-body.
    let mut gone = https::tls_stream(harness.addr, &options).await.unwrap();
    gone.write_all(b"POST /v1/mutate HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{")
        .await
        .unwrap();
    drop(gone);
    // A TCP client that never starts the handshake.
    let idle = tokio::net::TcpStream::connect(harness.addr).await.unwrap();
    // The server still answers.
    let answer = harness
        .mutate(&review("admission.k8s.io/v1", "CREATE", "shop", pod()))
        .await;
    assert_eq!(answer["response"]["allowed"], true);
    drop(idle);
    harness.stop().await;
}

// === probes and metrics ===

#[tokio::test]
async fn readyz_turns_ready_with_the_first_snapshot() {
    let mut setup = Setup::new();
    setup.mutators = None;
    let harness = setup.start("readyz").await;
    let not_ready = Answer {
        status: 503,
        content_type: Some("text/plain; charset=utf-8".to_string()),
        body: "not ready: no mutator snapshot loaded yet\n".to_string(),
    };
    let ok = Answer {
        status: 200,
        content_type: Some("text/plain; charset=utf-8".to_string()),
        body: "ok\n".to_string(),
    };
    assert_eq!(
        https::http_get(harness.metrics_addr, "/readyz")
            .await
            .unwrap(),
        not_ready
    );
    assert_eq!(
        harness.client().await.get("/readyz").await.unwrap(),
        not_ready
    );
    assert_eq!(
        https::http_get(harness.metrics_addr, "/healthz")
            .await
            .unwrap(),
        ok
    );
    // Before the first snapshot a request is answered per --on-error.
    let answer = harness
        .mutate(&review("admission.k8s.io/v1", "CREATE", "shop", pod()))
        .await;
    assert_eq!(
        answer["response"]["warnings"],
        json!(["sartor did not mutate this object: sartor has not loaded its mutators yet"])
    );
    harness.feed.publish(Snapshot {
        system: system("mutators.yaml"),
        errors: Vec::new(),
    });
    assert_eq!(
        https::http_get(harness.metrics_addr, "/readyz")
            .await
            .unwrap(),
        ok
    );
    assert_eq!(harness.client().await.get("/readyz").await.unwrap(), ok);
    harness.stop().await;
}

#[tokio::test]
async fn readyz_names_the_crds_not_installed_and_stays_ready() {
    let harness = Setup::new().start("readyz-crds").await;
    let crd = |kind: MutatorKind, group: &'static str, installed: bool| {
        MutatorCrd::new(group, kind, installed)
    };
    harness.feed.set_crds(vec![
        crd(MutatorKind::Assign, "mutations.sartor.dev", true),
        crd(MutatorKind::AssignImage, "mutations.sartor.dev", false),
        crd(MutatorKind::ModifySet, "mutations.gatekeeper.sh", false),
    ]);
    let ready = |body: &str| Answer {
        status: 200,
        content_type: Some("text/plain; charset=utf-8".to_string()),
        body: format!("{body}\n"),
    };
    let missing = ready(
        "ok; not installed: assignimage.mutations.sartor.dev (AssignImage mutators are not enforced), \
         modifyset.mutations.gatekeeper.sh (ModifySet mutators are not enforced)",
    );
    assert_eq!(
        https::http_get(harness.metrics_addr, "/readyz")
            .await
            .unwrap(),
        missing
    );
    assert_eq!(
        harness.client().await.get("/readyz").await.unwrap(),
        missing
    );
    for line in [
        "sartor_mutator_crd_installed{group=\"mutations.sartor.dev\",kind=\"Assign\"} 1",
        "sartor_mutator_crd_installed{group=\"mutations.sartor.dev\",kind=\"AssignImage\"} 0",
        "sartor_mutator_crd_installed{group=\"mutations.gatekeeper.sh\",kind=\"ModifySet\"} 0",
    ] {
        harness.assert_metric(line).await;
    }

    harness.feed.set_crds(vec![
        crd(MutatorKind::Assign, "mutations.sartor.dev", true),
        crd(MutatorKind::AssignImage, "mutations.sartor.dev", true),
    ]);
    assert_eq!(
        https::http_get(harness.metrics_addr, "/readyz")
            .await
            .unwrap(),
        ready("ok")
    );
    harness
        .assert_metric(
            "sartor_mutator_crd_installed{group=\"mutations.sartor.dev\",kind=\"AssignImage\"} 1",
        )
        .await;
    // A kind no longer reported has no gauge.
    let metrics = harness.metrics().await;
    assert!(!metrics.contains("kind=\"ModifySet\""), "{metrics}");
    harness.stop().await;
}

#[tokio::test]
async fn metrics_count_requests_mutations_passes_and_mutators() {
    let harness = Setup::new().start("metrics").await;
    for _ in 0..2 {
        harness
            .mutate(&review("admission.k8s.io/v1", "CREATE", "shop", pod()))
            .await;
    }
    for line in [
        "sartor_admission_requests_total{endpoint=\"mutate\",outcome=\"mutated\"} 2",
        "sartor_admission_request_duration_seconds_count{endpoint=\"mutate\",outcome=\"mutated\"} 2",
        "sartor_mutations_applied_total{kind=\"Assign\",name=\"always-pull\"} 2",
        "sartor_mutations_applied_total{kind=\"AssignMetadata\",name=\"owner\"} 2",
        "sartor_convergence_passes_count 2",
        "sartor_convergence_passes_bucket{le=\"2.0\"} 2",
        "sartor_mutators{kind=\"Assign\",state=\"enforced\"} 1",
        "sartor_mutators{kind=\"AssignMetadata\",state=\"enforced\"} 1",
    ] {
        harness.assert_metric(line).await;
    }
    let answer = https::http_get(harness.metrics_addr, "/nothing")
        .await
        .unwrap();
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (404, "no such endpoint: /nothing\n")
    );
    let answer = harness.client().await.get("/v1/mutate").await.unwrap();
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (405, "method not allowed; use POST\n")
    );
    harness.stop().await;
}

// === validation of mutators ===

fn mutator_review(object: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": UID,
            "kind": {"group": "mutations.sartor.dev", "version": "v1", "kind": object["kind"]},
            "name": object["metadata"]["name"],
            "operation": "CREATE",
            "object": object,
        },
    })
}

#[tokio::test]
async fn validate_denies_invalid_mutators_and_warns_of_conflicts() {
    let harness = Setup::new().start("validate").await;
    let mut client = harness.client().await;
    let invalid = json!({
        "apiVersion": "mutations.sartor.dev/v1",
        "kind": "Assign",
        "metadata": {"name": "bad"},
        "spec": {
            "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
            "location": "metadata.name",
            "parameters": {"assign": {"value": "x"}},
        },
    });
    let answer = client
        .post("/v1/validate", mutator_review(invalid).to_string())
        .await
        .unwrap();
    let answer: Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(
        answer["response"],
        json!({
            "uid": UID,
            "allowed": false,
            "status": {"code": 422, "message": "Assign bad: spec.location: Assign cannot change metadata; use AssignMetadata for labels and annotations"},
        })
    );
    // Treats spec.containers as a list of values where always-pull keys it by name.
    let conflicting = json!({
        "apiVersion": "mutations.sartor.dev/v1",
        "kind": "ModifySet",
        "metadata": {"name": "extra"},
        "spec": {
            "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
            "location": "spec.containers",
            "parameters": {"values": {"fromList": [{"name": "x"}]}},
        },
    });
    let answer = client
        .post("/v1/validate", mutator_review(conflicting).to_string())
        .await
        .unwrap();
    let answer: Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(
        answer["response"],
        json!({
            "uid": UID,
            "allowed": true,
            "warnings": ["ModifySet extra conflicts with Assign always-pull about spec.containers: this mutator treats it as a list of values, Assign always-pull as a list keyed by name (v1 Pod CREATE and 1 more); neither is enforced until one changes"],
        })
    );
    harness.stop().await;
}

#[tokio::test]
async fn validate_warns_of_what_the_analysis_finds_about_the_mutator() {
    let harness = Setup::new().start("validate-analysis").await;
    let mut client = harness.client().await;
    let dns = |operations: Value| {
        json!({
            "apiVersion": "mutations.sartor.dev/v1",
            "kind": "Assign",
            "metadata": {"name": "dns"},
            "spec": {
                "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"], "operations": operations}],
                "location": "spec.dnsPolicy",
                "parameters": {"assign": {"value": "Default"}},
            },
        })
    };
    let mut validate = async |mutator: Value| -> Value {
        let answer = client
            .post("/v1/validate", mutator_review(mutator).to_string())
            .await
            .unwrap();
        serde_json::from_str::<Value>(&answer.body).unwrap()["response"].clone()
    };
    assert_eq!(
        validate(dns(json!(["CREATE", "UPDATE"]))).await,
        json!({
            "uid": UID,
            "allowed": true,
            "warnings": ["warning: Assign dns: breaks-update: it applies to v1 Pod on UPDATE and writes spec.dnsPolicy, which the API server does not let change once the object exists (spec is immutable: ValidatePodUpdate, Kubernetes v1.37.2); an update of a Pod created before this mutator, or that it did not mutate, is then refused. Limit its applyTo operations to CREATE"],
        })
    );
    assert_eq!(
        validate(dns(json!(["CREATE"]))).await,
        json!({"uid": UID, "allowed": true})
    );
    harness.stop().await;
}

#[tokio::test]
async fn a_mutator_in_condition_conflict_is_skipped_and_validate_warns_of_it() {
    let harness = Setup {
        mutators: Some("conditions.yaml"),
        ..Setup::new()
    }
    .start("conditions")
    .await;
    // owned-priority would set spec.priorityClassName once owner has
    // labelled the Pod; it reads what owner writes, so it is skipped.
    let answer = harness
        .mutate(&review("admission.k8s.io/v1", "CREATE", "shop", pod()))
        .await;
    assert_eq!(
        decode_patch(&answer),
        json!([
            {"op": "add", "path": "/metadata/labels/owner", "value": "shop"},
            {"op": "add", "path": "/spec/restartPolicy", "value": "Never"},
        ])
    );
    for line in [
        "sartor_mutators{kind=\"Assign\",state=\"enforced\"} 1",
        "sartor_mutators{kind=\"Assign\",state=\"conflict\"} 1",
        "sartor_mutators{kind=\"AssignMetadata\",state=\"enforced\"} 1",
    ] {
        harness.assert_metric(line).await;
    }
    let mut client = harness.client().await;
    let mut validate = async |object: Value| -> Value {
        let answer = client
            .post("/v1/validate", mutator_review(object).to_string())
            .await
            .unwrap();
        serde_json::from_str::<Value>(&answer.body).unwrap()["response"].take()
    };
    // A new mutator reading the label: warned about its own conflict.
    let reader = json!({
        "apiVersion": "mutations.sartor.dev/v1",
        "kind": "Assign",
        "metadata": {"name": "owned-dns"},
        "spec": {
            "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
            "location": "spec.dnsPolicy",
            "parameters": {
                "assign": {"value": "Default"},
                "conditions": [{"path": "metadata.labels.owner", "operator": "In", "values": ["shop"]}],
            },
        },
    });
    assert_eq!(
        validate(reader).await,
        json!({
            "uid": UID,
            "allowed": true,
            "warnings": ["Assign owned-dns: its condition on metadata.labels.owner reads what AssignMetadata owner writes (metadata.labels.owner) (v1 Pod CREATE and 1 more); it is not enforced until one of them changes"],
        })
    );
    // A new mutator writing what never-restart reads: warned about the
    // mutator it would stop enforcing.
    let writer = json!({
        "apiVersion": "mutations.sartor.dev/v1",
        "kind": "Assign",
        "metadata": {"name": "scheduler"},
        "spec": {
            "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
            "location": "spec.schedulerName",
            "parameters": {"assign": {"value": "custom"}},
        },
    });
    assert_eq!(
        validate(writer).await,
        json!({
            "uid": UID,
            "allowed": true,
            "warnings": [
                "Assign never-restart: its condition on spec.schedulerName reads what Assign scheduler writes (spec.schedulerName) (v1 Pod CREATE and 1 more); it is not enforced until one of them changes",
                "warning: Assign scheduler: breaks-update: it applies to v1 Pod on UPDATE and writes spec.schedulerName, which the API server does not let change once the object exists (spec is immutable: ValidatePodUpdate, Kubernetes v1.37.2); an update of a Pod created before this mutator, or that it did not mutate, is then refused. Limit its applyTo operations to CREATE",
            ],
        })
    );
    harness.stop().await;
}

/// A v1 review of a Namespace `name` going from `old` labels (no old object
/// when `None`: a CREATE) to `new` labels.
fn namespace_review(name: &str, old: Option<Value>, new: Value) -> Value {
    let namespace = |labels: Value| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}});
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": UID,
            "kind": {"group": "", "version": "v1", "kind": "Namespace"},
            "resource": {"group": "", "version": "v1", "resource": "namespaces"},
            "name": name,
            "operation": if old.is_some() { "UPDATE" } else { "CREATE" },
            "userInfo": {"username": "alice"},
            "object": namespace(new),
            "oldObject": old.map(namespace),
        },
    })
}

#[tokio::test]
async fn the_exemption_label_is_guarded_outside_the_exemptable_namespaces() {
    let mut setup = Setup::new();
    setup.settings.exemptable_namespaces = vec![Wildcard::new("kube-*").unwrap()];
    let harness = setup.start("exemption").await;
    let mut client = harness.client().await;
    let mut answer = async |review: Value| -> Value {
        let answer = client
            .post("/v1/validate", review.to_string())
            .await
            .unwrap();
        serde_json::from_str::<Value>(&answer.body).unwrap()["response"].clone()
    };
    let allowed = json!({"uid": UID, "allowed": true});
    let denied = |name: &str| {
        json!({"uid": UID, "allowed": false, "status": {"code": 403, "message": format!(
            "namespace \"{name}\" may not be given the label admission.sartor.dev/ignore: it exempts the namespace from sartor's mutations, and only these namespaces may carry it: sartor-system, kube-* (sartor serve --exemptable-namespace)"
        )}})
    };
    let ignore = |value: &str| json!({"admission.sartor.dev/ignore": value, "team": "a"});
    // Added on create, added on update, changed: denied outside the list.
    assert_eq!(
        answer(namespace_review("shop", None, ignore("true"))).await,
        denied("shop")
    );
    assert_eq!(
        answer(namespace_review(
            "shop",
            Some(json!({"team": "a"})),
            ignore("true")
        ))
        .await,
        denied("shop")
    );
    assert_eq!(
        answer(namespace_review(
            "shop",
            Some(ignore("true")),
            ignore("false")
        ))
        .await,
        denied("shop")
    );
    // Removed, or left as it was: allowed.
    assert_eq!(
        answer(namespace_review(
            "shop",
            Some(ignore("true")),
            json!({"team": "a"})
        ))
        .await,
        allowed
    );
    assert_eq!(
        answer(namespace_review(
            "shop",
            Some(ignore("true")),
            ignore("true")
        ))
        .await,
        allowed
    );
    // sartor's own namespace and the allow-list's: allowed.
    assert_eq!(
        answer(namespace_review("sartor-system", None, ignore("true"))).await,
        allowed
    );
    assert_eq!(
        answer(namespace_review(
            "kube-node-lease",
            Some(json!({})),
            ignore("true")
        ))
        .await,
        allowed
    );
    // Other labels are nobody's business here.
    assert_eq!(
        answer(namespace_review(
            "shop",
            Some(json!({})),
            json!({"team": "b"})
        ))
        .await,
        allowed
    );
    harness.stop().await;
}

// === TLS ===

#[tokio::test]
async fn a_new_certificate_is_served_to_new_connections_and_open_ones_keep_working() {
    let harness = Setup::new().start("cert-reload").await;
    let mut open = harness.client().await;
    let old_certificate = open.server_certificate.clone();
    let renewed = SelfSigned::generate("sartor", &["localhost"]).unwrap();
    renewed.write(harness.dir.path()).unwrap();
    let mut reloaded = None;
    for _ in 0..100 {
        if let Ok(client) = https::connect(harness.addr, &renewed.ca_pem).await {
            reloaded = Some(client);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut reloaded = reloaded.expect("new connections see the new certificate");
    assert_ne!(reloaded.server_certificate, old_certificate);
    assert_eq!(reloaded.get("/healthz").await.unwrap().status, 200);
    // The connection opened before the reload still works.
    let answer = open
        .post(
            "/v1/mutate",
            review("admission.k8s.io/v1", "CREATE", "shop", pod()).to_string(),
        )
        .await
        .unwrap();
    assert_eq!(answer.status, 200);
    // And the old CA no longer verifies new connections.
    assert!(
        https::connect(harness.addr, &harness.certs.ca_pem)
            .await
            .is_err()
    );
    harness
        .assert_metric("sartor_tls_certificate_reloads_total{result=\"ok\"} 1")
        .await;
    harness.stop().await;
}

#[tokio::test]
async fn a_client_ca_requires_client_certificates() {
    let (client_ca, cert, key) = client_identity();
    let mut setup = Setup::new();
    setup.client_ca = Some(client_ca);
    let harness = setup.start("client-ca").await;
    let mut options = Options {
        server_name: None,
        ca_pem: harness.certs.ca_pem.clone(),
        ..Options::default()
    };
    // TLS 1.3 reports a refused client certificate on first use, not in the handshake.
    let refused = match https::connect_with(harness.addr, &options).await {
        Err(_) => true,
        Ok(mut client) => client.get("/healthz").await.is_err(),
    };
    assert!(refused, "a client without a certificate was served");
    options.client_identity = Some((cert, key));
    let mut client = https::connect_with(harness.addr, &options).await.unwrap();
    assert_eq!(client.get("/healthz").await.unwrap().status, 200);
    harness.stop().await;
}

/// A fresh CA, and a client certificate (clientAuth) it signed: `(ca, cert, key)`.
fn client_identity() -> (String, String, String) {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, ExtendedKeyUsagePurpose, IsCa,
        KeyPair,
    };
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let mut params = CertificateParams::new(vec!["kube-apiserver".to_string()]).unwrap();
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca).unwrap();
    (ca.pem(), cert.pem(), key.serialize_pem())
}

// === shutdown ===

#[tokio::test]
async fn shutdown_finishes_requests_in_flight_and_refuses_new_connections() {
    let harness = Setup::new().start("shutdown").await;
    let options = Options {
        server_name: None,
        ca_pem: harness.certs.ca_pem.clone(),
        ..Options::default()
    };
    let body = review("admission.k8s.io/v1", "CREATE", "shop", pod()).to_string();
    let (first, rest) = body.split_at(10);
    let mut in_flight = https::tls_stream(harness.addr, &options).await.unwrap();
    in_flight
        .write_all(
            format!(
                "POST /v1/mutate HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n{first}",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let Harness {
        addr,
        mut shutdown,
        task,
        // Kept to the end: the server reads its certificates from it.
        dir: _dir,
        ..
    } = harness;
    let _ = shutdown.take().unwrap().send(());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "still accepting after shutdown began"
    );
    in_flight.write_all(rest.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), in_flight.read_to_end(&mut response))
        .await
        .unwrap()
        .unwrap();
    let response = String::from_utf8_lossy(&response);
    assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
    assert!(
        response.contains("\"patchType\":\"JSONPatch\""),
        "{response}"
    );
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
}

/// One HTTP/1.1 request to `/v1/mutate` carrying `body`, written whole.
fn mutate_request(body: &str) -> String {
    format!(
        "POST /v1/mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Reads one HTTP/1.1 response (head and a `Content-Length` body) from
/// `stream`: its head, lower-cased, and its body.
async fn read_response(
    stream: &mut (impl tokio::io::AsyncRead + Unpin),
) -> Result<(String, String), String> {
    let mut read = Vec::new();
    let mut byte = [0u8; 1];
    while !read.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte).await {
            Ok(1) => read.push(byte[0]),
            Ok(_) => return Err(format!("closed after {read:?}")),
            Err(error) => return Err(error.to_string()),
        }
    }
    let head = String::from_utf8_lossy(&read).to_lowercase();
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length: "))
        .and_then(|length| length.trim().parse().ok())
        .ok_or_else(|| format!("no content-length in {head}"))?;
    let mut body = vec![0u8; length];
    stream
        .read_exact(&mut body)
        .await
        .map_err(|e| e.to_string())?;
    Ok((head, String::from_utf8_lossy(&body).into_owned()))
}

/// The API server keeps idle HTTP/1.1 connections to a webhook and reuses
/// them. One that is idle when shutdown begins still answers the next
/// request, with `Connection: close`, and is closed after it: closed at
/// once, that request would fail (`EOF`) and its write be refused or
/// admitted unmutated.
#[tokio::test]
async fn at_shutdown_an_idle_kept_alive_connection_answers_once_more_then_closes() {
    let harness = Setup::new().start("shutdown-kept-alive").await;
    let body = review("admission.k8s.io/v1", "CREATE", "shop", pod()).to_string();
    let mut kept = harness.kept_alive(&body).await;
    let (task, _dir) = harness.begin_shutdown();
    tokio::time::sleep(Duration::from_millis(300)).await;
    kept.write_all(mutate_request(&body).as_bytes())
        .await
        .unwrap();
    let (head, answer) = tokio::time::timeout(Duration::from_secs(5), read_response(&mut kept))
        .await
        .unwrap()
        .unwrap();
    assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
    assert!(head.contains("\r\nconnection: close\r\n"), "{head}");
    assert!(answer.contains("\"patchType\":\"JSONPatch\""), "{answer}");
    closed(&mut kept).await;
    stopped(task).await;
}

/// A kept-alive connection that carries no request after shutdown begins
/// is closed once the drain has passed, and the server then stops.
#[tokio::test]
async fn at_shutdown_a_connection_left_idle_is_closed_after_the_drain() {
    let harness = Setup::new().start("shutdown-idle").await;
    let body = review("admission.k8s.io/v1", "CREATE", "shop", pod()).to_string();
    let mut idle = harness.kept_alive(&body).await;
    let (task, _dir) = harness.begin_shutdown();
    closed(&mut idle).await;
    stopped(task).await;
}

/// Reads until `stream` closes (within 10 s), expecting nothing more.
async fn closed(stream: &mut (impl tokio::io::AsyncRead + Unpin)) {
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut rest))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&rest), "");
}

/// Waits (10 s at most) for the server's task to end.
async fn stopped(task: JoinHandle<()>) {
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();
}

/// hyper closes an idle kept-alive HTTP/1.1 connection once the header read
/// timeout has passed since its last answer (2 s in this test). The
/// API server keeps an idle connection to a webhook for 90 s and reuses it;
/// closed first by the server, it fails the request the API server writes
/// as the close arrives. So the default outlasts the API server's 90 s.
#[tokio::test]
async fn an_idle_kept_alive_connection_lives_as_long_as_the_header_read_timeout() {
    assert!(Limits::default().header_read_timeout > Duration::from_secs(90));
    let mut setup = Setup::new();
    setup.limits.header_read_timeout = Duration::from_secs(2);
    let harness = setup.start("kept-idle").await;
    let body = review("admission.k8s.io/v1", "CREATE", "shop", pod()).to_string();
    let mut kept = harness.kept_alive(&body).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    kept.write_all(mutate_request(&body).as_bytes())
        .await
        .unwrap();
    let (head, _) = read_response(&mut kept).await.unwrap();
    assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
    closed(&mut kept).await;
    harness.stop().await;
}

/// What one busy client saw through a shutdown: answers received once
/// shutdown had begun, and requests written that got no answer.
#[derive(Debug, Default)]
struct Through {
    closing_answers: usize,
    lost: Vec<String>,
}

/// Sends `body` to `/v1/mutate` back to back on one kept-alive HTTP/1.1
/// connection after another, until a new connection is refused.
async fn busy_client(addr: SocketAddr, options: Options, body: String) -> Through {
    use http_body_util::{BodyExt as _, Full};
    use hyper::body::Bytes;
    use hyper::header::{CONNECTION, CONTENT_TYPE, HOST};
    use hyper_util::rt::TokioIo;

    let body = Bytes::from(body);
    let mut through = Through::default();
    // Refused once the listener is gone: nothing was sent.
    while let Ok(tls) = https::tls_stream(addr, &options).await {
        let Ok((mut sender, connection)) =
            hyper::client::conn::http1::handshake(TokioIo::new(tls)).await
        else {
            break;
        };
        tokio::spawn(connection);
        // Closed before a request went out: nothing was sent on it.
        while sender.ready().await.is_ok() {
            let request = hyper::Request::post("/v1/mutate")
                .header(HOST, "localhost")
                .header(CONTENT_TYPE, "application/json")
                .body(Full::new(body.clone()))
                .unwrap();
            match sender.send_request(request).await {
                Ok(response) => {
                    let status = response.status();
                    let closing = response
                        .headers()
                        .get(CONNECTION)
                        .is_some_and(|v| v == "close");
                    let answer = response.into_body().collect().await.map(|b| b.to_bytes());
                    match answer {
                        Ok(_) if status == 200 => {}
                        Ok(answer) => through.lost.push(format!("{status}: {answer:?}")),
                        Err(error) => through.lost.push(format!("the answer's body: {error}")),
                    }
                    if closing {
                        through.closing_answers += 1;
                        break;
                    }
                }
                Err(error) if error.is_canceled() => break,
                Err(error) => {
                    through.lost.push(error.to_string());
                    break;
                }
            }
        }
    }
    through
}

/// Clients that keep their connections busy through a shutdown, as the API
/// server does in a rollout: every request written gets its answer, and
/// those answered once shutdown has begun say `Connection: close`; what
/// fails is only a new connection, refused before anything is sent.
#[tokio::test]
async fn requests_on_busy_kept_alive_connections_through_a_shutdown_are_all_answered() {
    let harness = Setup::new().start("shutdown-busy").await;
    let options = Options {
        server_name: None,
        ca_pem: harness.certs.ca_pem.clone(),
        ..Options::default()
    };
    let body = review("admission.k8s.io/v1", "CREATE", "shop", pod()).to_string();
    let clients: Vec<_> = (0..16)
        .map(|_| tokio::spawn(busy_client(harness.addr, options.clone(), body.clone())))
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (task, _dir) = harness.begin_shutdown();
    let mut lost = Vec::new();
    let mut closing_answers = 0;
    for client in clients {
        let through = tokio::time::timeout(Duration::from_secs(15), client)
            .await
            .unwrap()
            .unwrap();
        lost.extend(through.lost);
        closing_answers += through.closing_answers;
    }
    assert_eq!(lost, Vec::<String>::new());
    assert_eq!(closing_answers, 16);
    stopped(task).await;
}
