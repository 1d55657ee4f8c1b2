//! What an operator does to a running install: several replicas and their
//! status, certificates, the off switch, another webhook after sartor's.

use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use sartor_tests::cluster::free_port;

use crate::admission::{ca_bundles, examples_enforced, replica, wait_ca_injected, wait_enforced};
use crate::{Sartor, Suite, eventually, json, probe_pod, same};

/// The probe's (image, imagePullPolicy) as the API server would store it.
pub fn probe(suite: &Suite) -> Result<(String, String), String> {
    let pod = probe_pod(suite)?;
    let container = &pod["spec"]["containers"][0];
    Ok((
        container["image"].as_str().unwrap_or_default().to_string(),
        container["imagePullPolicy"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    ))
}

/// The probe mutated by sartor.
pub fn mutated() -> (String, String) {
    ("mirror.example.com/shop/app:1.0".into(), "Always".into())
}

/// The probe as the API server stores it without sartor (its own default).
pub fn unmutated() -> (String, String) {
    ("shop/app:1.0".into(), "IfNotPresent".into())
}

/// Waits until the probe comes back as `expected`; returns how long it took.
fn probe_until(
    suite: &Suite,
    expected: &(String, String),
    limit: Duration,
) -> Result<Duration, String> {
    let start = Instant::now();
    eventually("the probe Pod", limit, || {
        let got = probe(suite)?;
        if &got == expected {
            Ok(start.elapsed())
        } else {
            Err(format!("got {got:?}, want {expected:?}"))
        }
    })
}

/// Two replicas each write their own `status.byPod` entry (server-side apply
/// under their own field manager); `kubectl get` shows the printer columns;
/// a replica stopped with SIGTERM withdraws its entry and leaves the other.
pub fn two_replicas_each_own_their_status_entry(suite: &mut Suite) -> Result<(), String> {
    examples_enforced(suite)?;
    let second = Sartor::start(suite, "replica-b", free_port()?, &[])?;
    let plane = &suite.plane;
    wait_enforced(
        suite,
        "assign.mutations.sartor.dev",
        &["always-pull-pods"],
        "replica-b",
    )?;
    wait_enforced(
        suite,
        "assign.mutations.sartor.dev",
        &["always-pull-pods"],
        "replica-a",
    )?;
    let object = json(&plane.kubectl(&[
        "get",
        "assign.mutations.sartor.dev",
        "always-pull-pods",
        "--show-managed-fields",
        "-o",
        "json",
    ])?)?;
    let mut ids: Vec<&str> = object["status"]["byPod"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["id"].as_str())
        .collect();
    ids.sort_unstable();
    same("status.byPod ids", ids, vec!["replica-a", "replica-b"])?;
    let mut status_managers: Vec<&str> = object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        // Managers that own an entry (one that withdrew keeps an empty record).
        .filter(|f| f["subresource"] == "status" && !f["fieldsV1"]["f:status"]["f:byPod"].is_null())
        .filter_map(|f| f["manager"].as_str())
        .collect();
    status_managers.sort_unstable();
    same(
        "status field managers",
        status_managers,
        vec!["sartor/replica-a", "sartor/replica-b"],
    )?;

    let table = plane.kubectl(&["get", "assign.mutations.sartor.dev", "always-pull-pods"])?;
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    // The location holds a space, so it is two words; AGE's value varies.
    same(
        "kubectl get (printer columns)",
        rows.iter()
            .map(|r| r.iter().take(4).copied().collect::<Vec<_>>())
            .collect::<Vec<_>>(),
        vec![
            vec!["NAME", "LOCATION", "ENFORCED", "AGE"],
            vec![
                "always-pull-pods",
                "spec.containers[name:",
                "*].imagePullPolicy",
                "true",
            ],
        ],
    )?;

    let (code, log) = second.stop();
    same("replica-b's exit code on SIGTERM", code, Some(0))?;
    for line in ["SIGTERM received", "status entries withdrawn"] {
        if !log.lines().any(|l| l.ends_with(line)) {
            return Err(format!("replica-b's log lacks {line:?}:\n{log}"));
        }
    }
    eventually(
        "replica-b's entry withdrawn",
        Duration::from_secs(10),
        || {
            let ids = plane.kubectl(&[
                "get",
                "assign.mutations.sartor.dev",
                "always-pull-pods",
                "-o",
                "jsonpath={.status.byPod[*].id}",
            ])?;
            same("status.byPod ids", ids.as_str(), "replica-a")
        },
    )
}

/// `--cert-mode managed`: the Secret holds a CA and a serving certificate,
/// both webhook configurations carry exactly its CA, and admission works
/// with it. Deleting the Secret (the documented way to start over) makes
/// the replica issue a new CA, inject it, serve the new certificate, and
/// admission keeps working.
pub fn managed_certificates_are_created_injected_and_replaced(
    suite: &mut Suite,
) -> Result<(), String> {
    examples_enforced(suite)?;
    let secret = json(&suite.plane.kubectl(&[
        "-n",
        "sartor-system",
        "get",
        "secret",
        "sartor-webhook-server-cert",
        "-o",
        "json",
    ])?)?;
    let mut keys: Vec<&str> = secret["data"]
        .as_object()
        .map(|d| d.keys().map(String::as_str).collect())
        .unwrap_or_default();
    keys.sort_unstable();
    same(
        "Secret keys",
        keys,
        vec!["ca.crt", "ca.key", "tls.crt", "tls.key"],
    )?;
    let ca = secret_field(suite, "ca.crt")?;
    same("caBundles", ca_bundles(suite)?, (ca.clone(), ca.clone()))?;
    probe_until(suite, &mutated(), Duration::from_secs(10))?;

    suite.plane.kubectl(&[
        "-n",
        "sartor-system",
        "delete",
        "secret",
        "sartor-webhook-server-cert",
    ])?;
    let new_ca = eventually("a new CA", Duration::from_secs(30), || {
        let new = secret_field(suite, "ca.crt")?;
        if new.is_empty() || new == ca {
            Err("not yet".into())
        } else if new.matches("BEGIN CERTIFICATE").count() == 1 {
            Ok(new)
        } else {
            Err(format!("ca.crt holds {new}"))
        }
    })?;
    eventually("the new CA injected", Duration::from_secs(30), || {
        same(
            "caBundles",
            ca_bundles(suite)?,
            (new_ca.clone(), new_ca.clone()),
        )
    })?;
    probe_until(suite, &mutated(), Duration::from_secs(30)).map(|_| ())
}

fn secret_field(suite: &Suite, key: &str) -> Result<String, String> {
    let encoded = suite.plane.kubectl(&[
        "-n",
        "sartor-system",
        "get",
        "secret",
        "sartor-webhook-server-cert",
        "-o",
        &format!("jsonpath={{.data.{}}}", key.replace('.', "\\.")),
    ])?;
    let bytes = BASE64.decode(encoded.trim()).map_err(|e| e.to_string())?;
    String::from_utf8(bytes).map_err(|e| e.to_string())
}

/// A serving certificate a day from expiry (put into the Secret here, signed
/// by the kept CA) is replaced under the same CA at the next check: the CA
/// and both caBundles stay, the replica writes the new certificate out, and
/// admission works with it.
pub fn a_certificate_near_expiry_is_rotated_under_the_same_ca(
    suite: &mut Suite,
) -> Result<(), String> {
    let pod = examples_enforced(suite)?;
    let (ca_cert, ca_key) = (
        secret_field(suite, "ca.crt")?,
        secret_field(suite, "ca.key")?,
    );
    let bundles = ca_bundles(suite)?;
    let (short, short_key) = sartor_tests::cluster::issue_serving(
        &ca_cert,
        &ca_key,
        &["sartor-webhook.sartor-system.svc"],
        Duration::from_secs(24 * 3600),
    )
    .map_err(|e| e.to_string())?;
    let patch = serde_json::json!({"data": {
        "tls.crt": BASE64.encode(&short),
        "tls.key": BASE64.encode(&short_key),
    }});
    suite.plane.kubectl(&[
        "-n",
        "sartor-system",
        "patch",
        "secret",
        "sartor-webhook-server-cert",
        "--type=merge",
        "-p",
        &patch.to_string(),
    ])?;
    let rotated = eventually("the certificate rotated", Duration::from_secs(30), || {
        let cert = secret_field(suite, "tls.crt")?;
        if cert == short {
            Err("still the short-lived certificate".into())
        } else {
            Ok(cert)
        }
    })?;
    same(
        "ca.crt after rotation",
        secret_field(suite, "ca.crt")?,
        ca_cert,
    )?;
    same("caBundles after rotation", ca_bundles(suite)?, bundles)?;
    let served = suite.plane.dir().join(format!("certs-{pod}/tls.crt"));
    eventually(
        "the new certificate written out",
        Duration::from_secs(10),
        || {
            same(
                "tls.crt in --cert-dir",
                std::fs::read_to_string(&served).map_err(|e| e.to_string())?,
                rotated.clone(),
            )
        },
    )?;
    probe_until(suite, &mutated(), Duration::from_secs(10)).map(|_| ())
}

/// The off switch exactly as docs/operations.md gives it: deleting the
/// MutatingWebhookConfiguration stops mutation at once; re-applying the
/// install and waiting for the injected caBundle turns it back on; emptying
/// the rules (the other documented variant) stops it too; with sartor
/// stopped and failurePolicy Ignore, objects are admitted unmutated.
pub fn the_documented_off_switch_turns_mutation_off(suite: &mut Suite) -> Result<(), String> {
    examples_enforced(suite)?;
    let overlay = suite.applied()?.overlay_arg();
    probe_until(suite, &mutated(), Duration::from_secs(10))?;
    let plane = &suite.plane;
    plane.kubectl(&["delete", "mutatingwebhookconfiguration", "sartor-mutating"])?;
    let took = probe_until(suite, &unmutated(), Duration::from_secs(10))?;
    eprintln!("off switch (delete): unmutated after {took:?}");

    plane.kubectl(&["apply", "-k", &overlay])?;
    // As the guide says: wait until a replica has injected the CA again.
    wait_ca_injected(suite)?;
    probe_until(suite, &mutated(), Duration::from_secs(10))?;

    plane.kubectl(&[
        "patch",
        "mutatingwebhookconfiguration",
        "sartor-mutating",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/webhooks/0/rules","value":[]}]"#,
    ])?;
    let took = probe_until(suite, &unmutated(), Duration::from_secs(10))?;
    eprintln!("off switch (empty rules): unmutated after {took:?}");
    // The replica derives the rules from the mutators every second here,
    // and leaves empty ones alone: the switch stays off.
    std::thread::sleep(Duration::from_secs(3));
    same(
        "rules 3 s after emptying them",
        crate::rules::installed(suite)?,
        serde_json::json!([]),
    )?;
    same("the probe 3 s after", probe(suite)?, unmutated())?;
    let log = suite.replica.as_ref().ok_or("no replica")?.log();
    if !log.contains("the webhook's rules are empty: mutation is switched off") {
        return Err(format!("no warning about the empty rules:\n{log}"));
    }
    plane.kubectl(&["apply", "-k", &overlay])?;
    probe_until(suite, &mutated(), Duration::from_secs(10))?;

    if let Some(replica) = suite.replica.take() {
        let _ = replica.stop();
    }
    let start = Instant::now();
    same("the probe with sartor stopped", probe(suite)?, unmutated())?;
    eprintln!(
        "sartor stopped, failurePolicy Ignore: admitted unmutated in {:?}",
        start.elapsed()
    );
    replica(suite)?;
    probe_until(suite, &mutated(), Duration::from_secs(10)).map(|_| ())
}

/// Another mutating webhook called after sartor's (here a second sartor,
/// serving a file that injects a container) adds a container; the API
/// server calls sartor again (reinvocationPolicy IfNeeded) and sartor's
/// mutators reach the injected container too.
pub fn sartor_is_reinvoked_after_another_webhook(suite: &mut Suite) -> Result<(), String> {
    examples_enforced(suite)?;
    let plane = &suite.plane;
    let dir = plane.dir().join("injector");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    std::fs::write(
        dir.join("inject.yaml"),
        "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata:\n  name: inject-sidecar\nspec:\n  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]\n  location: 'spec.containers[name: injected]'\n  parameters:\n    assign:\n      value: {name: injected, image: 'sidecar/proxy:2.0'}\n",
    )
    .map_err(|e| e.to_string())?;
    let port = free_port()?;
    let metrics = free_port()?;
    let injector = sartor_tests::cluster::Guarded::spawn(
        "injector",
        sartor_tests::binary::sartor()?,
        &[
            "serve".into(),
            "--mutators".into(),
            dir.join("inject.yaml").display().to_string(),
            "--self-signed".into(),
            "--cert-dir".into(),
            dir.join("certs").display().to_string(),
            "--addr".into(),
            format!("127.0.0.1:{port}"),
            "--metrics-addr".into(),
            format!("127.0.0.1:{metrics}"),
        ],
        &[],
        &dir.join("injector.log"),
    )?;
    let metrics_addr = std::net::SocketAddr::from(([127, 0, 0, 1], metrics));
    eventually(
        "the injector ready",
        Duration::from_secs(20),
        || match crate::http_get(metrics_addr, "/readyz") {
            Ok((200, _)) => Ok(()),
            other => Err(format!("{other:?}\n{}", injector.log_tail(5))),
        },
    )?;
    let ca = std::fs::read(dir.join("certs/ca.crt")).map_err(|e| e.to_string())?;
    let config = format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: zz-test-injector
webhooks:
- name: injector.test.sartor.dev
  clientConfig:
    url: https://127.0.0.1:{port}/v1/mutate
    caBundle: {ca}
  failurePolicy: Fail
  reinvocationPolicy: Never
  sideEffects: None
  admissionReviewVersions: [v1]
  rules:
  - apiGroups: [""]
    apiVersions: [v1]
    resources: [pods]
    operations: [CREATE]
"#,
        ca = BASE64.encode(ca)
    );
    plane.kubectl_with_input(&["apply", "-f", "-"], Some(&config))?;
    let result = eventually(
        "the injected container mutated",
        Duration::from_secs(20),
        || {
            let pod = probe_pod(suite)?;
            let containers: Vec<(String, String, String)> = pod["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    let field = |name: &str| c[name].as_str().unwrap_or_default().to_string();
                    (field("name"), field("image"), field("imagePullPolicy"))
                })
                .collect();
            same(
                "containers",
                containers,
                vec![
                    (
                        "app".into(),
                        "mirror.example.com/shop/app:1.0".into(),
                        "Always".into(),
                    ),
                    (
                        "injected".into(),
                        "mirror.example.com/sidecar/proxy:2.0".into(),
                        "Always".into(),
                    ),
                ],
            )
        },
    );
    plane.kubectl(&["delete", "mutatingwebhookconfiguration", "zz-test-injector"])?;
    drop(injector);
    result
}
