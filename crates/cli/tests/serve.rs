//! `sartor serve` as a user runs it: the real binary, a self-signed
//! certificate, real TLS on 127.0.0.1, and a mutator directory edited while
//! it serves. Cluster mode against a real API server is in the end-to-end
//! crate, `tests/tests/cluster/`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    missing_docs
)]

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use sartor_tests::https;
use serde_json::{Value, json};

#[path = "serve/churn.rs"]
mod churn;
#[path = "serve/external_data.rs"]
mod external_data;
#[path = "serve/overload.rs"]
mod overload;

const ALWAYS_PULL: &str = r#"
apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata:
  name: always-pull
spec:
  applyTo:
  - groups: [""]
    versions: [v1]
    kinds: [Pod]
  location: "spec.containers[name: *].imagePullPolicy"
  parameters:
    assign:
      value: Always
"#;

const SECCOMP: &str = r#"
apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata:
  name: seccomp
spec:
  applyTo:
  - groups: [""]
    versions: [v1]
    kinds: [Pod]
  location: spec.securityContext.seccompProfile.type
  parameters:
    assign:
      value: RuntimeDefault
"#;

/// A running `sartor serve` and its log lines.
struct Served {
    child: Child,
    logs: mpsc::Receiver<Value>,
    seen: Vec<Value>,
    addr: SocketAddr,
    metrics_addr: SocketAddr,
    ca_pem: String,
}

impl Served {
    /// `sartor serve` in file mode on `DIR/mutators`, with a self-signed
    /// certificate in `DIR/certs`, on ports of its choosing, logging JSON.
    fn start(dir: &Path) -> Served {
        Served::start_with(dir, &[])
    }

    /// [`Served::start`] with more flags.
    fn start_with(dir: &Path, flags: &[&str]) -> Served {
        let certs = dir.join("certs").to_string_lossy().to_string();
        let mut served = Served::spawn(dir, &["--self-signed", "--cert-dir", &certs], flags);
        served.ca_pem = std::fs::read_to_string(dir.join("certs/ca.crt")).unwrap();
        served
    }

    /// `sartor serve` on `DIR/mutators` with `tls` (certificate flags) and
    /// `flags`; waits until it listens.
    fn spawn(dir: &Path, tls: &[&str], flags: &[&str]) -> Served {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sartor"))
            .arg("serve")
            .args(flags)
            .args(["--mutators", &dir.join("mutators").to_string_lossy()])
            .args(tls)
            .args(["--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"])
            .args(["--log-format", "json", "--poll-interval-ms", "50"])
            .env("RUST_LOG", "info")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (sender, logs) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let value = serde_json::from_str(&line).unwrap_or(json!({"unparsed": line}));
                if sender.send(value).is_err() {
                    break;
                }
            }
        });
        let mut served = Served {
            child,
            logs,
            seen: Vec::new(),
            addr: "127.0.0.1:0".parse().unwrap(),
            metrics_addr: "127.0.0.1:0".parse().unwrap(),
            ca_pem: String::new(),
        };
        let listening = served.wait_for_log("listening");
        served.addr = listening["addr"].as_str().unwrap().parse().unwrap();
        served.metrics_addr = listening["metrics_addr"].as_str().unwrap().parse().unwrap();
        served
    }

    /// Waits up to 10 s for a log line whose message is `message`.
    fn wait_for_log(&mut self, message: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.logs.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line["message"] == message {
                        return line;
                    }
                }
                Err(_) => panic!("no log line {message:?}; saw {:#?}", self.seen),
            }
        }
    }

    /// The patch the webhook answers for a Pod `web` with one container.
    async fn patch(&self) -> Value {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"containers": [{"name": "app", "image": "nginx"}]},
        });
        let response = self.admit(&pod).await;
        match response["patch"].as_str() {
            None => json!([]),
            Some(patch) => serde_json::from_slice(
                &base64::engine::general_purpose::STANDARD
                    .decode(patch)
                    .unwrap(),
            )
            .unwrap(),
        }
    }

    /// Sends the Pod `object` for admission (CREATE, in its namespace, by
    /// user alice); the AdmissionResponse.
    async fn admit(&self, object: &Value) -> Value {
        let review = review(object);
        let options = https::Options {
            ca_pem: self.ca_pem.clone(),
            ..https::Options::default()
        };
        let mut client = https::connect_with(self.addr, &options).await.unwrap();
        let answer = client.post("/v1/mutate", review.to_string()).await.unwrap();
        assert_eq!(answer.status, 200, "{}", answer.body);
        let answer: Value = serde_json::from_str(&answer.body).unwrap();
        answer["response"].clone()
    }
}

impl Served {
    /// Sends SIGTERM and expects a clean exit.
    fn terminate(&mut self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        self.wait_for_log("SIGTERM received");
        self.wait_for_log("shut down");
        let deadline = Instant::now() + Duration::from_secs(10);
        let exit = loop {
            if let Some(exit) = self.child.try_wait().unwrap() {
                break exit;
            }
            assert!(
                Instant::now() < deadline,
                "sartor serve did not exit after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(exit.success(), "{exit}");
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

/// The AdmissionReview of a CREATE of the Pod `object` in its namespace,
/// by user alice.
fn review(object: &Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "namespace": object["metadata"]["namespace"], "name": "web",
            "operation": "CREATE", "object": object,
            "userInfo": {"username": "alice"},
        },
    })
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sartor-serve-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("mutators")).unwrap();
    dir
}

/// The patch of ALWAYS_PULL and SECCOMP together.
fn both_patch() -> Value {
    json!([
        {"op": "add", "path": "/spec/containers/0/imagePullPolicy", "value": "Always"},
        {"op": "add", "path": "/spec/securityContext", "value": {"seccompProfile": {"type": "RuntimeDefault"}}},
    ])
}

fn always_pull_patch() -> Value {
    json!([{"op": "add", "path": "/spec/containers/0/imagePullPolicy", "value": "Always"}])
}

#[tokio::test]
async fn serve_mutates_reloads_the_directory_keeps_the_last_good_set_and_stops_on_sigterm() {
    let dir = temp_dir("reload");
    std::fs::write(dir.join("mutators/always-pull.yaml"), ALWAYS_PULL).unwrap();
    let mut served = Served::start(&dir);
    served.wait_for_log("mutators loaded");
    let ready = https::http_get(served.metrics_addr, "/readyz")
        .await
        .unwrap();
    assert_eq!((ready.status, ready.body.as_str()), (200, "ok\n"));
    assert_eq!(served.patch().await, always_pull_patch());

    // A new file: the next request sees both mutators.
    std::fs::write(dir.join("mutators/seccomp.yaml"), SECCOMP).unwrap();
    let loaded = served.wait_for_log("mutators loaded");
    assert_eq!(loaded["mutators"], 2);
    assert_eq!(served.patch().await, both_patch());

    // A broken file: the last good set stays, and the log says why.
    std::fs::write(dir.join("mutators/seccomp.yaml"), "kind: Assign\n  bad: [").unwrap();
    let refused =
        served.wait_for_log("mutators changed but cannot be loaded; keeping the last good set");
    let problems = refused["problems"].as_str().unwrap();
    assert!(problems.contains("seccomp.yaml"), "{problems}");
    assert_eq!(served.patch().await.as_array().unwrap().len(), 2);
    let metrics = https::http_get(served.metrics_addr, "/metrics")
        .await
        .unwrap()
        .body;
    assert!(
        metrics
            .lines()
            .any(|l| l == "sartor_mutator_reloads_total{result=\"error\"} 1"),
        "{metrics}"
    );

    // Removing it goes back to one mutator.
    std::fs::remove_file(dir.join("mutators/seccomp.yaml")).unwrap();
    let loaded = served.wait_for_log("mutators loaded");
    assert_eq!(loaded["mutators"], 1);
    assert_eq!(served.patch().await, always_pull_patch());

    served.terminate();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn mutated_requests_are_logged_at_info_only_with_log_mutations() {
    let dir = temp_dir("log-mutations");
    std::fs::write(dir.join("mutators/always-pull.yaml"), ALWAYS_PULL).unwrap();
    // By default (as Gatekeeper's --log-mutations), not at info.
    let mut served = Served::start(&dir);
    served.wait_for_log("mutators loaded");
    assert_eq!(served.patch().await, always_pull_patch());
    served.terminate();
    assert!(
        !served.seen.iter().any(|line| line["message"] == "mutated"),
        "{:#?}",
        served.seen
    );
    drop(served);

    let mut served = Served::start_with(&dir, &["--log-mutations"]);
    served.wait_for_log("mutators loaded");
    assert_eq!(served.patch().await, always_pull_patch());
    let line = served.wait_for_log("mutated");
    let fields = ["level", "uid", "kind", "object", "mutators", "passes"].map(|f| line[f].clone());
    assert_eq!(
        fields,
        [
            json!("INFO"),
            json!("u1"),
            json!("v1 Pod"),
            json!("shop/web"),
            json!("Assign always-pull"),
            json!(2)
        ]
    );
    assert!(line["duration_us"].is_u64(), "{line}");
    served.terminate();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn serve_is_not_ready_until_the_mutators_load() {
    let dir = temp_dir("not-ready");
    std::fs::write(dir.join("mutators/broken.yaml"), "apiVersion: [").unwrap();
    let mut served = Served::start(&dir);
    served.wait_for_log("mutators cannot be loaded; not ready until they can");
    let ready = https::http_get(served.metrics_addr, "/readyz")
        .await
        .unwrap();
    assert_eq!(
        (ready.status, ready.body.as_str()),
        (503, "not ready: no mutator snapshot loaded yet\n")
    );
    std::fs::write(dir.join("mutators/broken.yaml"), ALWAYS_PULL).unwrap();
    served.wait_for_log("mutators loaded");
    let ready = https::http_get(served.metrics_addr, "/readyz")
        .await
        .unwrap();
    assert_eq!(ready.status, 200);
    assert_eq!(served.patch().await, always_pull_patch());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_names_a_missing_certificate_file() {
    let output = Command::new(env!("CARGO_BIN_EXE_sartor"))
        .args(["serve", "--mutators", "nowhere"])
        .args([
            "--tls-cert-file",
            "/nonexistent/tls.crt",
            "--tls-key-file",
            "/nonexistent/tls.key",
        ])
        .args(["--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "error: reading /nonexistent/tls.crt: No such file or directory (os error 2)\n"
    );
}

#[test]
fn serve_in_cluster_mode_says_what_is_missing() {
    let run = |args: &[&str], envs: &[(&str, &str)]| {
        let output = Command::new(env!("CARGO_BIN_EXE_sartor"))
            .arg("serve")
            .args(args)
            .env_remove("POD_NAME")
            .env_remove("HOSTNAME")
            .envs(envs.iter().copied())
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    assert_eq!(
        run(&[], &[]),
        (
            Some(2),
            "error: cluster mode needs this replica's name: --pod-name, $POD_NAME or $HOSTNAME\n"
                .to_string()
        )
    );
    assert_eq!(
        run(&["--namespaces", "ns.yaml"], &[]),
        (
            Some(2),
            "error: --namespaces goes with --mutators; in cluster mode namespaces come from the API server\n"
                .to_string()
        )
    );
    assert_eq!(
        run(
            &["--cert-mode", "external"],
            &[("POD_NAME", "p"), ("KUBECONFIG", "/nonexistent/kubeconfig")]
        )
        .1,
        "error: no --mutators, so mutators come from the cluster, but no API server is configured \
         (in-cluster service account or kubeconfig: $KUBECONFIG, ~/.kube/config): \
         Failed to infer configuration: failed to infer config: in-cluster: (failed to read an incluster environment variable: environment variable not found), \
         kubeconfig: (failed to read kubeconfig from '\"/nonexistent/kubeconfig\"': No such file or directory (os error 2))\n"
    );
}
