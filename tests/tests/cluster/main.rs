//! The cluster suite: sartor against a real Kubernetes control plane.
//!
//! etcd, kube-apiserver, kubectl and helm are built at pinned versions by
//! `tests/k8s/provision` (once per machine, into ~/.cache/sartor/k8s) and
//! started on loopback by `sartor_tests::cluster`. The real `sartor` binary
//! runs out of cluster against that API server, which calls it as a webhook:
//! the install's Service is made an ExternalName for `localhost`, so the API
//! server dials 127.0.0.1 and verifies the certificate against the name
//! `sartor-webhook.sartor-system.svc`, exactly as in a cluster.
//!
//! The trials share one control plane and run one after another, in the order
//! of [`TRIALS`] (`sartor_tests::suite`). Where this machine cannot build the
//! control plane (no Go), every trial is reported as ignored and the reason
//! printed; nothing passes. Each trial sets up what it needs that earlier
//! trials would have (the install, a replica, the examples), so any one runs
//! alone.
//!
//! Run it alone: `cargo test -p sartor-tests --test cluster` (add a trial name to
//! filter; `SARTOR_KEEP_TEST_DIRS=1` keeps the logs and kubeconfig).

// Test code: a panic here is a failed test, not a crash on user input.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

mod admission;
mod audit;
mod compat;
mod condition;
mod crds;
mod export;
mod external;
mod install;
mod lifecycle;
mod protection;
mod resilience;
mod rules;
mod scope;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use sartor_tests::cluster::{ControlPlane, Guarded, free_port};
use sartor_tests::suite::Check;
pub use sartor_tests::suite::{eventually, json, same};
use serde_json::Value;

/// Every trial, in the order they run.
const TRIALS: &[Check<Suite>] = sartor_tests::trials![
    scope::builtin_scopes_are_the_api_servers_discovery,
    crds::apply_to_the_real_api_server,
    crds::cel_rules_reject_invalid_mutators,
    crds::kubectl_explain_shows_the_docs,
    condition::skipped_objects_are_ones_sartor_would_not_change,
    condition::the_condition_stays_within_the_api_servers_limits,
    export::exported_policies_store_what_sartor_mutate_predicts,
    export::generated_sets_store_what_sartor_mutate_predicts,
    export::the_api_servers_limits_are_checked_at_export,
    install::kustomize_client_side_then_server_side,
    install::examples_apply_with_only_sartors_crds,
    admission::objects_are_stored_as_sartor_mutate_predicts,
    scope::namespace_less_manifests_are_stored_as_sartor_mutate_predicts,
    scope::invalid_names_are_refused_as_the_api_server_refuses_them,
    admission::validating_webhook_denies_a_broken_mutator,
    admission::each_kind_created_updated_and_deleted_takes_effect,
    admission::mutation_annotations_name_the_mutators_with_the_flag,
    admission::debug_containers_are_mutated_through_their_subresource,
    admission::the_exemption_label_is_guarded,
    lifecycle::two_replicas_each_own_their_status_entry,
    lifecycle::managed_certificates_are_created_injected_and_replaced,
    lifecycle::a_certificate_near_expiry_is_rotated_under_the_same_ca,
    lifecycle::sartor_is_reinvoked_after_another_webhook,
    lifecycle::the_documented_off_switch_turns_mutation_off,
    rules::derived_from_the_mutators,
    rules::pinned_rules_stay_as_installed,
    rules::two_replicas_converge_without_flapping,
    rules::an_outage_blocks_only_what_sartor_would_change,
    condition::a_replica_installs_the_condition_and_stores_what_sartor_mutate_predicts,
    compat::gatekeeper_mutators_are_enforced_with_gatekeeper_compat,
    compat::a_missing_crd_is_named_and_the_other_kinds_served,
    compat::no_crd_of_sartors_keeps_the_replica_not_ready,
    external::providers_are_watched_and_images_pinned,
    audit::stored_objects_the_mutators_would_change_are_listed,
    audit::fix_repairs_stored_objects_as_sartor_mutate_predicts,
    audit::findings_are_kept_as_openreports_reports_in_the_cluster,
    protection::protected_objects_are_stored_unmutated_as_sartor_mutate_predicts,
    resilience::the_webhook_answers_while_the_api_server_is_down_and_catches_up_after,
];

/// What the trials share: the control plane and what earlier trials set up.
///
/// Fields drop in order: the replica stops (and withdraws its status
/// entries) while the API server still runs.
pub struct Suite {
    /// The sartor replica the webhook configurations point at, once started.
    pub replica: Option<Sartor>,
    /// The install (manifests/ with the local overlay), once applied.
    pub install: Option<Install>,
    /// The running control plane.
    pub plane: ControlPlane,
}

/// The install as applied: where the webhook is served.
pub struct Install {
    /// The port the webhook configurations send to (on localhost).
    pub webhook_port: u16,
    /// The overlay directory (`kubectl apply -k` it again to restore).
    pub overlay: PathBuf,
}

impl Suite {
    /// The install, once a trial has applied it ([`install::ensure`]).
    pub fn applied(&self) -> Result<&Install, String> {
        self.install
            .as_ref()
            .ok_or_else(|| "no install".to_string())
    }
}

impl Install {
    /// The overlay directory, for `kubectl apply -k`.
    pub fn overlay_arg(&self) -> String {
        self.overlay.display().to_string()
    }
}

fn main() -> ExitCode {
    sartor_tests::suite::main("cluster", TRIALS, |tools| {
        ControlPlane::start(tools).map(|plane| Suite {
            plane,
            install: None,
            replica: None,
        })
    })
}

// === helpers shared by the trials ===

/// The repository root.
pub fn repo() -> PathBuf {
    sartor_tests::workspace_root()
}

/// A path in the repository, as a string for command lines.
pub fn repo_path(relative: &str) -> String {
    repo().join(relative).display().to_string()
}

/// A plain-HTTP GET on loopback: (status code, body).
pub fn http_get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    let mut stream =
        TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").map_err(|e| e.to_string())?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| e.to_string())?;
    let code = response
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no status line: {response:?}"))?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    Ok((code, body))
}

/// A Pod in `default` that the example mutators change (pull policy,
/// registry) and the trials' own mutators may change further.
pub const PROBE: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: probe\n  namespace: default\nspec:\n  containers:\n  - name: app\n    image: shop/app:1.0\n";

/// [`PROBE`] as the API server would store it now: created with a
/// server-side dry run, through every webhook, leaving nothing behind.
pub fn probe_pod(suite: &Suite) -> Result<Value, String> {
    json(&suite.plane.kubectl_with_input(
        &["create", "--dry-run=server", "-f", "-", "-o", "json"],
        Some(PROBE),
    )?)
}

/// Runs `sartor args...` to completion: stdout, or the error with stderr.
pub fn sartor(args: &[&str]) -> Result<String, String> {
    sartor_tests::cluster::run(
        std::process::Command::new(sartor_tests::binary::sartor()?).args(args),
        None,
    )
    .map_err(|e| format!("sartor {}: {e}", args.join(" ")))
}

/// A `sartor serve` replica running out of cluster against the control plane.
pub struct Sartor {
    /// Its pod name (its status.byPod id).
    pub pod: String,
    /// Where it serves admission (TLS).
    pub addr: SocketAddr,
    /// Where it serves /metrics, /healthz, /readyz.
    pub metrics: SocketAddr,
    process: Guarded,
}

impl Sartor {
    /// Starts `sartor serve` in cluster mode as `pod`, authenticated with the
    /// `sartor` service account's token (so manifests/rbac.yaml is what it
    /// may do), on `port`, with `extra` flags; waits until `/readyz` is 200.
    pub fn start(suite: &Suite, pod: &str, port: u16, extra: &[&str]) -> Result<Sartor, String> {
        let mut sartor = Sartor::spawn(suite, pod, port, extra)?;
        let ready = eventually("sartor /readyz", Duration::from_secs(30), || {
            if !sartor.process.is_running() {
                return Ok(Err(format!(
                    "sartor exited:\n{}",
                    sartor.process.log_tail(20)
                )));
            }
            match http_get(sartor.metrics, "/readyz") {
                Ok((200, _)) => Ok(Ok(())),
                other => Err(format!("{other:?}")),
            }
        });
        match ready {
            Ok(Ok(())) => Ok(sartor),
            Ok(Err(error)) => Err(error),
            Err(error) => Err(format!("{error}\n{}", sartor.process.log_tail(20))),
        }
    }

    /// [`Sartor::start`] without waiting for it to turn ready.
    pub fn spawn(suite: &Suite, pod: &str, port: u16, extra: &[&str]) -> Result<Sartor, String> {
        let plane = &suite.plane;
        let token = plane.kubectl(&[
            "create",
            "token",
            "sartor",
            "-n",
            "sartor-system",
            "--duration=1h",
        ])?;
        let kubeconfig = plane.token_kubeconfig(&format!("sartor-{pod}"), token.trim())?;
        let metrics = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let cert_dir = plane.dir().join(format!("certs-{pod}"));
        let mut args: Vec<String> = [
            "serve",
            "--addr",
            &addr.to_string(),
            "--metrics-addr",
            &metrics.to_string(),
            "--cert-dir",
            &cert_dir.display().to_string(),
            "--cert-check-interval",
            "1",
            // The twin namespace of admission::objects_are_stored_as_sartor_mutate_predicts
            // carries the exemption label, which the validating webhook guards.
            "--exemptable-namespace",
            "prod-shop-twin",
        ]
        .iter()
        .map(|s| (*s).to_string())
        .collect();
        args.extend(extra.iter().map(|s| (*s).to_string()));
        let process = Guarded::spawn(
            &format!("sartor {pod}"),
            sartor_tests::binary::sartor()?,
            &args,
            &[
                ("KUBECONFIG", kubeconfig.display().to_string()),
                ("POD_NAME", pod.to_string()),
                ("POD_NAMESPACE", "sartor-system".to_string()),
                ("RUST_LOG", "info".to_string()),
            ],
            &plane.dir().join(format!("sartor-{pod}.log")),
        )?;
        Ok(Sartor {
            pod: pod.to_string(),
            addr,
            metrics,
            process,
        })
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        self.process.log()
    }

    /// Stops it with SIGTERM and waits until it has exited; its exit code
    /// and its log.
    pub fn stop(mut self) -> (Option<i32>, String) {
        let status = self.process.stop();
        (status.and_then(|s| s.code()), self.process.log())
    }
}
