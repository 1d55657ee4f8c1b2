//! Churn under load, short (the CI check; `crates/webhook/load/churn.sh`
//! is the long run with figures): while clients send the same Pod over
//! keep-alive TLS connections, the mutator file is rewritten every 100 ms
//! (two valid sets, a broken file, a set with a schema conflict) and the
//! serving certificate every second. Every answer must be 200 with the patch
//! of one of the two sets, never a mix; no request may fail.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use sartor_tests::cluster::Pki;
use sartor_tests::https;
use serde_json::{Value, json};

use super::{ALWAYS_PULL, SECCOMP, Served, always_pull_patch, both_patch, review, temp_dir};

/// Two Assigns naming different key fields of one list: in schema conflict,
/// so neither is enforced (the Pod has no volumes anyway).
const CONFLICT: &str = r#"
apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata:
  name: volume-by-name
spec:
  applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
  location: "spec.volumes[name: data].emptyDir.medium"
  parameters: {assign: {value: Memory}}
---
apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata:
  name: volume-by-path
spec:
  applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
  location: 'spec.volumes[path: "/data"].emptyDir.medium'
  parameters: {assign: {value: Memory}}
"#;

/// The mutator file's contents in turn: always-pull; always-pull and
/// seccomp; a broken file (the last good set stays); always-pull beside a
/// conflicting pair.
fn variants() -> [String; 4] {
    [
        ALWAYS_PULL.to_string(),
        format!("{ALWAYS_PULL}---\n{SECCOMP}"),
        "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: [broken\n".to_string(),
        format!("{ALWAYS_PULL}---\n{CONFLICT}"),
    ]
}

/// Writes `text` to `path` at once (a rename), as a sync tool would.
fn replace(path: &Path, text: &str) {
    let staged = path.with_extension("staged");
    std::fs::write(&staged, text).unwrap();
    std::fs::rename(&staged, path).unwrap();
}

fn issue(pki: &Pki, dir: &Path) {
    let (cert, key) = pki
        .issue("localhost", &[], &["localhost", "127.0.0.1"], true)
        .unwrap();
    replace(&dir.join("certs/tls.key"), &key);
    replace(&dir.join("certs/tls.crt"), &cert);
}

#[derive(Default)]
struct Tally {
    requests: AtomicU64,
    failed: AtomicU64,
    mixed: AtomicU64,
    always_pull: AtomicU64,
    both: AtomicU64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutator_churn_and_certificate_rotation_never_fail_or_mix_a_request() {
    let dir = temp_dir("churn");
    let pki = Pki::new().unwrap();
    std::fs::create_dir_all(dir.join("certs")).unwrap();
    issue(&pki, &dir);
    let set = dir.join("mutators/set.yaml");
    replace(&set, ALWAYS_PULL);
    let (cert, key) = (dir.join("certs/tls.crt"), dir.join("certs/tls.key"));
    let mut served = Served::spawn(
        &dir,
        &[
            "--tls-cert-file",
            &cert.to_string_lossy(),
            "--tls-key-file",
            &key.to_string_lossy(),
        ],
        &[],
    );
    served.ca_pem = pki.ca_cert.clone();
    served.wait_for_log("mutators loaded");

    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let (stop, dir) = (stop.clone(), dir.clone());
        std::thread::spawn(move || {
            let variants = variants();
            let mut turn = 0usize;
            let mut last_rotation = Instant::now();
            while !stop.load(Ordering::SeqCst) {
                turn += 1;
                replace(
                    &dir.join("mutators/set.yaml"),
                    &variants[turn % variants.len()],
                );
                if last_rotation.elapsed() >= Duration::from_secs(1) {
                    issue(&pki, &dir);
                    last_rotation = Instant::now();
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };

    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]},
    });
    let body = review(&pod).to_string();
    let tally = Arc::new(Tally::default());
    let until = Instant::now() + Duration::from_secs(5);
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let (tally, body) = (tally.clone(), body.clone());
            let options = https::Options {
                ca_pem: served.ca_pem.clone(),
                ..https::Options::default()
            };
            let addr = served.addr;
            tokio::spawn(async move {
                while Instant::now() < until {
                    // A new connection every 20 requests: handshakes meet
                    // every certificate the rotation serves.
                    let Ok(mut client) = https::connect_with(addr, &options).await else {
                        tally.failed.fetch_add(1, Ordering::SeqCst);
                        continue;
                    };
                    for _ in 0..20 {
                        tally.requests.fetch_add(1, Ordering::SeqCst);
                        let answer = match client.post("/v1/mutate", body.clone()).await {
                            Ok(answer) if answer.status == 200 => answer,
                            _ => {
                                tally.failed.fetch_add(1, Ordering::SeqCst);
                                break;
                            }
                        };
                        let answer: Value = serde_json::from_str(&answer.body).unwrap();
                        let patch: Value = answer["response"]["patch"]
                            .as_str()
                            .map(|p| {
                                serde_json::from_slice(
                                    &base64::engine::general_purpose::STANDARD.decode(p).unwrap(),
                                )
                                .unwrap()
                            })
                            .unwrap_or(Value::Null);
                        if patch == always_pull_patch() {
                            tally.always_pull.fetch_add(1, Ordering::SeqCst);
                        } else if patch == both_patch() {
                            tally.both.fetch_add(1, Ordering::SeqCst);
                        } else {
                            tally.mixed.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                }
            })
        })
        .collect();
    for client in clients {
        client.await.unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    churn.join().unwrap();

    let count = |n: &AtomicU64| n.load(Ordering::SeqCst);
    eprintln!(
        "churn: {} requests, {} always-pull, {} both, {} failed, {} mixed",
        count(&tally.requests),
        count(&tally.always_pull),
        count(&tally.both),
        count(&tally.failed),
        count(&tally.mixed)
    );
    assert_eq!(count(&tally.failed), 0);
    assert_eq!(count(&tally.mixed), 0);
    assert!(count(&tally.always_pull) > 0 && count(&tally.both) > 0);
    // The conflicting pair was loaded (and left out), not refused.
    served.wait_for_log("mutator conflict: not enforced until it clears");
    let metrics = https::http_get(served.metrics_addr, "/metrics")
        .await
        .unwrap()
        .body;
    let value = |name: &str| -> u64 {
        metrics
            .lines()
            .find(|line| line.starts_with(name))
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    assert!(
        value("sartor_mutator_reloads_total{result=\"error\"}") > 0,
        "broken files were refused:\n{metrics}"
    );
    assert!(
        value("sartor_mutator_reloads_total{result=\"ok\"}") > 3,
        "{metrics}"
    );
    assert!(
        value("sartor_tls_certificate_reloads_total{result=\"ok\"}") >= 2,
        "{metrics}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
