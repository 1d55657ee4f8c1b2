//! The managed serving certificate against the in-memory stand-in
//! (sartor_tests::apiserver), for what kube-apiserver cannot show: the exact
//! calls made to create it, rotate it and inject the CA, rotation before
//! expiry (which a test cannot wait for), a lost create race (an injected
//! 409). The Secret, the caBundle of both configurations and a deleted
//! Secret replaced by a new CA are tested against kube-apiserver in
//! tests/tests/cluster.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    missing_docs
)]

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use sartor_controller::{CertManager, CertOptions, SecretAction};
use sartor_tests::apiserver::ApiServer;
use serde_json::{Value, json};

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

fn client(server: &ApiServer) -> kube::Client {
    kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sartor-certs-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn webhook_configurations(server: &ApiServer) {
    let webhook = |name: &str, path: &str| {
        json!({"name": name, "clientConfig": {"service": {"namespace": "sartor-system", "name": "sartor-webhook", "path": path, "port": 443}},
               "sideEffects": "None", "admissionReviewVersions": ["v1"]})
    };
    server.put(json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                      "metadata": {"name": "sartor-mutating"}, "webhooks": [webhook("mutation.sartor.dev", "/v1/mutate")]}));
    server.put(json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                      "metadata": {"name": "sartor-validating"}, "webhooks": [webhook("validation.sartor.dev", "/v1/validate")]}));
}

/// `METHOD path` of every call, in order.
fn calls(server: &ApiServer) -> Vec<String> {
    server
        .calls()
        .into_iter()
        .map(|c| format!("{} {}", c.method, c.path))
        .collect()
}

fn secret_data(server: &ApiServer, key: &str) -> String {
    let secret = server
        .get(
            "v1",
            "Secret",
            Some("sartor-system"),
            "sartor-webhook-server-cert",
        )
        .unwrap();
    let encoded = secret["data"][key].as_str().unwrap();
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .unwrap(),
    )
    .unwrap()
}

fn ca_bundle(server: &ApiServer, kind: &str, name: &str) -> Value {
    let config = server
        .get("admissionregistration.k8s.io/v1", kind, None, name)
        .unwrap();
    match config["webhooks"][0]["clientConfig"]["caBundle"].as_str() {
        Some(bundle) => json!(
            String::from_utf8(
                base64::engine::general_purpose::STANDARD
                    .decode(bundle)
                    .unwrap()
            )
            .unwrap()
        ),
        None => Value::Null,
    }
}

const SECRET: &str = "/api/v1/namespaces/sartor-system/secrets/sartor-webhook-server-cert";
const MUTATING: &str =
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/sartor-mutating";
const VALIDATING: &str =
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/sartor-validating";

#[tokio::test]
async fn a_missing_secret_is_created_written_out_and_its_ca_injected() {
    let server = ApiServer::start().await;
    webhook_configurations(&server);
    let dir = scratch("create");
    let manager = CertManager::new(
        client(&server),
        CertOptions::new("sartor-system", dir.clone()),
    );

    assert_eq!(manager.reconcile().await.unwrap(), SecretAction::Created);
    assert_eq!(
        calls(&server),
        [
            format!("GET {SECRET}"),
            "POST /api/v1/namespaces/sartor-system/secrets".to_string(),
            format!("GET {MUTATING}"),
            format!("PUT {MUTATING}"),
            format!("GET {VALIDATING}"),
            format!("PUT {VALIDATING}"),
        ]
    );
    let ca = secret_data(&server, "ca.crt");
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    assert_eq!(
        ca_bundle(&server, "MutatingWebhookConfiguration", "sartor-mutating"),
        json!(ca)
    );
    assert_eq!(
        ca_bundle(
            &server,
            "ValidatingWebhookConfiguration",
            "sartor-validating"
        ),
        json!(ca)
    );
    for (file, key) in [
        ("ca.crt", "ca.crt"),
        ("tls.crt", "tls.crt"),
        ("tls.key", "tls.key"),
    ] {
        assert_eq!(
            std::fs::read_to_string(dir.join(file)).unwrap(),
            secret_data(&server, key),
            "{file}"
        );
    }
    // The serving certificate names the Service and is valid for a year.
    let pem = secret_data(&server, "tls.crt");
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
    let cert = pem.parse_x509().unwrap();
    let names: Vec<String> = cert
        .subject_alternative_name()
        .unwrap()
        .unwrap()
        .value
        .general_names
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        names,
        [
            "DNSName(sartor-webhook.sartor-system.svc)",
            "DNSName(sartor-webhook.sartor-system.svc.cluster.local)"
        ]
    );
    let lifetime = cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp();
    assert_eq!(lifetime, 365 * 24 * 3600 + 3600);

    // A second round finds everything in place and writes nothing.
    server.clear_calls();
    assert_eq!(manager.reconcile().await.unwrap(), SecretAction::Kept);
    assert_eq!(
        calls(&server),
        [
            format!("GET {SECRET}"),
            format!("GET {MUTATING}"),
            format!("GET {VALIDATING}")
        ]
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_certificate_near_expiry_is_replaced_under_the_same_ca() {
    let server = ApiServer::start().await;
    webhook_configurations(&server);
    let dir = scratch("rotate");
    let mut short = CertOptions::new("sartor-system", dir.clone());
    short.cert_validity = 30 * DAY;
    short.rotate_before = DAY;
    let first = CertManager::new(client(&server), short);
    assert_eq!(first.reconcile().await.unwrap(), SecretAction::Created);
    let (ca, ca_key, old_cert) = (
        secret_data(&server, "ca.crt"),
        secret_data(&server, "ca.key"),
        secret_data(&server, "tls.crt"),
    );

    // With the usual 90 days of notice, 30 days left means: replace it now.
    server.clear_calls();
    let manager = CertManager::new(
        client(&server),
        CertOptions::new("sartor-system", dir.clone()),
    );
    assert_eq!(
        manager.reconcile().await.unwrap(),
        SecretAction::RotatedCertificate
    );
    assert_eq!(
        calls(&server),
        [
            format!("GET {SECRET}"),
            format!("PUT {SECRET}"),
            format!("GET {MUTATING}"),
            format!("GET {VALIDATING}"),
        ]
    );
    assert_eq!(secret_data(&server, "ca.crt"), ca);
    assert_eq!(secret_data(&server, "ca.key"), ca_key);
    let new_cert = secret_data(&server, "tls.crt");
    assert_ne!(new_cert, old_cert);
    assert_eq!(
        std::fs::read_to_string(dir.join("tls.crt")).unwrap(),
        new_cert
    );
    assert_eq!(
        ca_bundle(&server, "MutatingWebhookConfiguration", "sartor-mutating"),
        json!(ca)
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_ca_near_expiry_is_replaced_and_both_cas_are_trusted_meanwhile() {
    let server = ApiServer::start().await;
    webhook_configurations(&server);
    let dir = scratch("rotate-ca");
    let mut short = CertOptions::new("sartor-system", dir.clone());
    short.ca_validity = 100 * DAY;
    short.cert_validity = 30 * DAY;
    short.rotate_before = DAY;
    let first = CertManager::new(client(&server), short);
    assert_eq!(first.reconcile().await.unwrap(), SecretAction::Created);
    let old_ca = secret_data(&server, "ca.crt");

    // A 100-day CA cannot sign a 1-year certificate: replace the CA too.
    server.clear_calls();
    let manager = CertManager::new(
        client(&server),
        CertOptions::new("sartor-system", dir.clone()),
    );
    assert_eq!(manager.reconcile().await.unwrap(), SecretAction::RotatedCa);
    assert_eq!(
        calls(&server),
        [
            format!("GET {SECRET}"),
            format!("PUT {SECRET}"),
            format!("GET {MUTATING}"),
            format!("PUT {MUTATING}"),
            format!("GET {VALIDATING}"),
            format!("PUT {VALIDATING}"),
        ]
    );
    let bundle = secret_data(&server, "ca.crt");
    assert!(bundle.ends_with(&old_ca), "the old CA stays trusted");
    assert_eq!(bundle.matches("-----BEGIN CERTIFICATE-----").count(), 2);
    assert_eq!(
        ca_bundle(&server, "MutatingWebhookConfiguration", "sartor-mutating"),
        json!(bundle)
    );
    assert_eq!(
        ca_bundle(
            &server,
            "ValidatingWebhookConfiguration",
            "sartor-validating"
        ),
        json!(bundle)
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_lost_create_race_is_settled_by_reading_again_and_others_adopt_the_secret() {
    let server = ApiServer::start().await;
    webhook_configurations(&server);
    let winner_dir = scratch("winner");
    let loser_dir = scratch("loser");
    let winner = CertManager::new(
        client(&server),
        CertOptions::new("sartor-system", winner_dir.clone()),
    );
    let loser = CertManager::new(
        client(&server),
        CertOptions::new("sartor-system", loser_dir.clone()),
    );
    // Its create answered 409 AlreadyExists (another replica was first): it
    // reads again and goes on from what it finds.
    server.fail("POST", "/api/v1/namespaces/sartor-system/secrets", 409, 1);
    assert_eq!(winner.reconcile().await.unwrap(), SecretAction::Created);
    let posts = server.calls().iter().filter(|c| c.method == "POST").count();
    assert_eq!(posts, 2);
    // Another replica finds the Secret and serves the same certificate.
    assert_eq!(loser.reconcile().await.unwrap(), SecretAction::Kept);
    for file in ["ca.crt", "tls.crt", "tls.key"] {
        assert_eq!(
            std::fs::read_to_string(loser_dir.join(file)).unwrap(),
            std::fs::read_to_string(winner_dir.join(file)).unwrap(),
            "{file}"
        );
    }
    let _ = std::fs::remove_dir_all(winner_dir);
    let _ = std::fs::remove_dir_all(loser_dir);
}

#[tokio::test]
async fn missing_webhook_configurations_are_skipped_not_fatal() {
    let server = ApiServer::start().await;
    let dir = scratch("no-configs");
    let manager = CertManager::new(
        client(&server),
        CertOptions::new("sartor-system", dir.clone()),
    );
    assert_eq!(manager.reconcile().await.unwrap(), SecretAction::Created);
    assert!(dir.join("tls.crt").exists());
    let _ = std::fs::remove_dir_all(dir);
}

/// A serving certificate made before sartor called external data providers
/// (no `clientAuth` usage) is replaced under the same CA, so providers that
/// ask for a client certificate accept sartor's.
#[tokio::test]
async fn a_certificate_without_client_auth_is_replaced_under_the_same_ca() {
    let server = ApiServer::start().await;
    webhook_configurations(&server);
    let dir = scratch("client-auth");
    let manager = CertManager::new(
        client(&server),
        CertOptions::new("sartor-system", dir.clone()),
    );
    assert_eq!(manager.reconcile().await.unwrap(), SecretAction::Created);
    let (ca, ca_key) = (
        secret_data(&server, "ca.crt"),
        secret_data(&server, "ca.key"),
    );
    let names = CertOptions::new("sartor-system", dir.clone()).dns_names();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let (old_cert, old_key) =
        sartor_tests::cluster::issue_serving(&ca, &ca_key, &names, 365 * DAY).unwrap();
    let mut secret = server
        .get(
            "v1",
            "Secret",
            Some("sartor-system"),
            "sartor-webhook-server-cert",
        )
        .unwrap();
    let encode = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    secret["data"]["tls.crt"] = json!(encode(&old_cert));
    secret["data"]["tls.key"] = json!(encode(&old_key));
    server.put(secret);
    assert_eq!(
        manager.reconcile().await.unwrap(),
        SecretAction::RotatedCertificate
    );
    assert_eq!(secret_data(&server, "ca.crt"), ca);
    assert_ne!(secret_data(&server, "tls.crt"), old_cert);
    assert_eq!(manager.reconcile().await.unwrap(), SecretAction::Kept);
    let _ = std::fs::remove_dir_all(dir);
}
