//! What `sartor export map`'s policy costs the API server, beside sartor's
//! webhook with the same mutators: Pods created through the test control
//! plane with no mutation, with the exported MutatingAdmissionPolicy in
//! force, and with `sartor serve` (the mutators the policy holds, from a
//! file, with a self-signed certificate) called as a mutating webhook, in
//! interleaved rounds (the order of the three turns every round), and for
//! each: the latency of a create as the client sees it (mean, p50, p99),
//! kube-apiserver's CPU per create (its own `process_cpu_seconds_total`) and
//! sartor's (from /proc).
//!
//! ```text
//! cargo build --release -p sartor
//! SARTOR_BIN=target/release/sartor cargo run --release -p sartor-tests --example map_cost -- examples/mutators 6 200
//! ```
//!
//! Arguments: the mutators (a file or directory; what exports of them is
//! applied), the rounds, the Pods created per round and mode. A benchmark,
//! not a test: it prints what it measured. Needs the control plane
//! (`tests/k8s/provision`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use sartor_tests::cluster::{ControlPlane, Guarded, Tools, free_port};
use serde::Deserialize as _;
use serde_json::{Value, json};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mutators = args
        .first()
        .cloned()
        .unwrap_or_else(|| "examples/mutators".to_string());
    let number = |at: usize, default: usize| {
        args.get(at)
            .and_then(|arg| arg.parse().ok())
            .unwrap_or(default)
    };
    let (rounds, creates) = (number(1, 6), number(2, 200));
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("map_cost: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&mutators, rounds, creates)) {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("map_cost: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The ways a Pod is admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// No mutating admission of sartor's.
    None,
    /// The exported policy in force.
    Policy,
    /// sartor's webhook, with the mutators the policy holds.
    Webhook,
}

impl Mode {
    const ALL: [Mode; 3] = [Mode::None, Mode::Policy, Mode::Webhook];

    fn name(self) -> &'static str {
        match self {
            Mode::None => "no mutation",
            Mode::Policy => "exported MutatingAdmissionPolicy",
            Mode::Webhook => "sartor's webhook",
        }
    }

    /// The prefix of the Pods created in this mode.
    fn prefix(self) -> &'static str {
        match self {
            Mode::None => "plain",
            Mode::Policy => "policy",
            Mode::Webhook => "webhook",
        }
    }
}

/// What one round of one mode measured.
#[derive(Debug, Default, Clone)]
struct Measured {
    /// Each create's latency.
    latencies: Vec<Duration>,
    /// kube-apiserver's CPU seconds over the creates.
    cpu: f64,
    /// sartor's CPU seconds over the creates.
    sartor_cpu: f64,
}

async fn run(mutators: &str, rounds: usize, creates: usize) -> Result<String, String> {
    let tools = Tools::provision().map_err(|e| format!("{e:?}"))?;
    let plane = ControlPlane::start(&tools)?;
    let repository = sartor_tests::workspace_root();
    let mutators = repository.join(mutators);
    let sartor = sartor_tests::binary::sartor()?;
    let exported = Command::new(sartor)
        .args(["export", "map"])
        .arg(&mutators)
        .output()
        .map_err(|e| format!("sartor export map: {e}"))?;
    let policy = String::from_utf8_lossy(&exported.stdout).into_owned();
    let said = String::from_utf8_lossy(&exported.stderr).into_owned();
    if policy.trim().is_empty() {
        return Err(format!(
            "nothing of {} exports:\n{said}",
            mutators.display()
        ));
    }
    let webhook = Webhook::start(&plane, &exported_mutators(&mutators, &policy)?)?;
    plane.kubectl_with_input(
        &["apply", "-f", "-"],
        Some("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: cost\n  labels: {team: shop}\n"),
    )?;
    let client = client(&plane).await?;
    let pods: Api<DynamicObject> = Api::namespaced_with(
        client,
        "cost",
        &ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk("", "v1", "Pod")),
    );
    let unmutated = dry_run(&plane, "probe")?;

    let mut measured: Vec<(Mode, Measured)> = Vec::new();
    for round in 0..rounds {
        let mut order = Mode::ALL;
        order.rotate_left(round % Mode::ALL.len());
        for mode in order {
            set_mode(&plane, mode, &policy, &webhook.configuration, &unmutated)?;
            let cpu_before = apiserver_cpu(&plane)?;
            let sartor_before = webhook.cpu()?;
            let mut latencies = Vec::with_capacity(creates);
            for i in 0..creates {
                let pod: DynamicObject =
                    serde_json::from_value(pod(&format!("{}-{round}-{i}", mode.prefix())))
                        .map_err(|e| e.to_string())?;
                let started = Instant::now();
                pods.create(&PostParams::default(), &pod)
                    .await
                    .map_err(|e| format!("creating a Pod: {e}"))?;
                latencies.push(started.elapsed());
            }
            let cpu = apiserver_cpu(&plane)? - cpu_before;
            let sartor_cpu = webhook.cpu()? - sartor_before;
            measured.push((
                mode,
                Measured {
                    latencies,
                    cpu,
                    sartor_cpu,
                },
            ));
        }
    }
    Ok(report(&said, rounds, creates, &measured))
}

/// The Pod created, named `name`: two containers, as a Deployment's would be.
fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "cost", "labels": {"app": "shop"}},
           "spec": {"containers": [
               {"name": "app", "image": "shop/app:1.0"},
               {"name": "proxy", "image": "shop/proxy:1.0"}]}})
}

/// An admin client of the plane.
async fn client(plane: &ControlPlane) -> Result<Client, String> {
    let kubeconfig = Kubeconfig::read_from(&plane.kubeconfig).map_err(|e| e.to_string())?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    Client::try_from(config).map_err(|e| e.to_string())
}

/// A Pod named `name` as a server-side dry run admits it.
fn dry_run(plane: &ControlPlane, name: &str) -> Result<Value, String> {
    let created = plane.kubectl_with_input(
        &["create", "--dry-run=server", "-o", "json", "-f", "-"],
        Some(&pod(name).to_string()),
    )?;
    let mut created: Value = serde_json::from_str(&created).map_err(|e| e.to_string())?;
    // What differs from one dry run to the next.
    if let Some(metadata) = created.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in ["uid", "creationTimestamp"] {
            metadata.remove(field);
        }
    }
    Ok(created)
}

/// Puts the policy or the webhook configuration in force (and the other
/// out), or neither, and waits until a dry run shows it.
fn set_mode(
    plane: &ControlPlane,
    mode: Mode,
    policy: &str,
    webhook: &str,
    unmutated: &Value,
) -> Result<(), String> {
    let (on, off): (&[&str], &[&str]) = match mode {
        Mode::None => (&[], &[policy, webhook]),
        Mode::Policy => (&[policy], &[webhook]),
        Mode::Webhook => (&[webhook], &[policy]),
    };
    for objects in off {
        plane.kubectl_with_input(&["delete", "--ignore-not-found", "-f", "-"], Some(objects))?;
    }
    for objects in on {
        plane.kubectl_with_input(&["apply", "--server-side", "-f", "-"], Some(objects))?;
    }
    let started = Instant::now();
    loop {
        let mutated = dry_run(plane, "probe")? != *unmutated;
        if mutated == (mode != Mode::None) {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(30) {
            return Err(format!("{}: not in force after 30 s", mode.name()));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The documents of `mutators` (a file or a directory) that the exported
/// `policy` holds (its `mutations.sartor.dev/exported` annotation), as one
/// file's text: what the webhook is given, so both run the same mutations.
fn exported_mutators(mutators: &Path, policy: &str) -> Result<String, String> {
    let policy: Value = serde_yaml::Deserializer::from_str(policy)
        .next()
        .map(Value::deserialize)
        .transpose()
        .map_err(|e| format!("the exported policy: {e}"))?
        .ok_or("the export printed no policy")?;
    let exported: Vec<&str> = policy
        .pointer("/metadata/annotations/mutations.sartor.dev~1exported")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .split(", ")
        .collect();
    let mut kept = Vec::new();
    for mutator in sartor_tests::documents(mutators)? {
        let named = format!(
            "{}/{}",
            mutator
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default(),
            mutator
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
        );
        if exported.contains(&named.as_str()) {
            kept.push(mutator.to_string());
        }
    }
    Ok(kept.join("\n---\n"))
}

/// `sartor serve` from a file of mutators, with a self-signed certificate,
/// and a MutatingWebhookConfiguration that sends it Pods.
struct Webhook {
    /// The configuration to apply (and delete) to turn it on (and off).
    configuration: String,
    /// Where it was told to write its certificate: how its process is
    /// found in /proc.
    cert_dir: PathBuf,
    _process: Guarded,
}

impl Webhook {
    fn start(plane: &ControlPlane, mutators: &str) -> Result<Webhook, String> {
        let file = plane.dir().join("cost-mutators.yaml");
        std::fs::write(&file, mutators).map_err(|e| format!("{}: {e}", file.display()))?;
        let cert_dir = plane.dir().join("cost-certs");
        let addr = format!("127.0.0.1:{}", free_port()?);
        let args: Vec<String> = [
            "serve",
            "--mutators",
            &file.display().to_string(),
            "--self-signed",
            "--cert-dir",
            &cert_dir.display().to_string(),
            "--addr",
            &addr,
            "--metrics-addr",
            &format!("127.0.0.1:{}", free_port()?),
        ]
        .iter()
        .map(|arg| (*arg).to_string())
        .collect();
        let process = Guarded::spawn(
            "sartor serve",
            sartor_tests::binary::sartor()?,
            &args,
            &[("RUST_LOG", "warn".to_string())],
            &plane.dir().join("cost-sartor.log"),
        )?;
        let ca = cert_dir.join("ca.crt");
        let started = Instant::now();
        while !ca.exists() {
            if started.elapsed() > Duration::from_secs(30) {
                return Err(format!("sartor serve wrote no {}", ca.display()));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let ca = std::fs::read(&ca).map_err(|e| e.to_string())?;
        let configuration = json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "sartor-cost"},
            "webhooks": [{
                "name": "mutate.sartor.dev",
                "clientConfig": {"url": format!("https://{addr}/v1/mutate"), "caBundle": BASE64.encode(ca)},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}],
                "namespaceSelector": {"matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}]},
                "failurePolicy": "Ignore",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "reinvocationPolicy": "IfNeeded",
                "timeoutSeconds": 10,
            }],
        })
        .to_string();
        Ok(Webhook {
            configuration,
            cert_dir,
            _process: process,
        })
    }

    /// sartor's CPU seconds so far (user and system, from /proc).
    fn cpu(&self) -> Result<f64, String> {
        let marker = self.cert_dir.display().to_string();
        for entry in std::fs::read_dir("/proc").map_err(|e| e.to_string())? {
            let path = entry.map_err(|e| e.to_string())?.path();
            let Ok(cmdline) = std::fs::read(path.join("cmdline")) else {
                continue;
            };
            let cmdline = String::from_utf8_lossy(&cmdline);
            // The guard (`sh -c`) carries the same arguments: skip it.
            if !cmdline.contains(&marker) || cmdline.starts_with("sh\0") {
                continue;
            }
            let stat = std::fs::read_to_string(path.join("stat")).map_err(|e| e.to_string())?;
            // Fields after the command's closing parenthesis; utime and
            // stime are the 14th and 15th of the whole line.
            let fields: Vec<&str> = stat
                .rsplit_once(')')
                .map(|(_, rest)| rest.split_whitespace().collect())
                .unwrap_or_default();
            let ticks = |at: usize| fields.get(at).and_then(|f| f.parse::<f64>().ok());
            let (Some(user), Some(system)) = (ticks(11), ticks(12)) else {
                return Err(format!("{}: unexpected stat: {stat}", path.display()));
            };
            // Linux reports in USER_HZ, 100 per second.
            return Ok((user + system) / 100.0);
        }
        Err("sartor serve is not running".to_string())
    }
}

/// kube-apiserver's `process_cpu_seconds_total`.
fn apiserver_cpu(plane: &ControlPlane) -> Result<f64, String> {
    let metrics = plane.kubectl(&["get", "--raw", "/metrics"])?;
    metrics
        .lines()
        .find_map(|line| line.strip_prefix("process_cpu_seconds_total "))
        .and_then(|value| value.trim().parse().ok())
        .ok_or_else(|| "no process_cpu_seconds_total in /metrics".to_string())
}

/// Milliseconds.
fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// The figures per mode over every round, and the policy's added cost.
fn report(said: &str, rounds: usize, creates: usize, measured: &[(Mode, Measured)]) -> String {
    let mut out = String::new();
    let exported = said.lines().last().unwrap_or_default();
    let _ = writeln!(
        out,
        "{rounds} rounds x {creates} Pod creates per mode, interleaved; {exported}"
    );
    let mut means = Vec::new();
    for mode in Mode::ALL {
        let mut all: Vec<Duration> = measured
            .iter()
            .filter(|(m, _)| *m == mode)
            .flat_map(|(_, round)| round.latencies.iter().copied())
            .collect();
        all.sort();
        let count = all.len().max(1);
        let mean = all.iter().map(|d| ms(*d)).sum::<f64>() / count as f64;
        let at = |quantile: f64| {
            let index = ((all.len() as f64 * quantile).ceil() as usize).saturating_sub(1);
            all.get(index).map_or(0.0, |d| ms(*d))
        };
        let cpu: f64 = measured
            .iter()
            .filter(|(m, _)| *m == mode)
            .map(|(_, round)| round.cpu)
            .sum();
        let sartor_cpu: f64 = measured
            .iter()
            .filter(|(m, _)| *m == mode)
            .map(|(_, round)| round.sartor_cpu)
            .sum();
        let per_create = |seconds: f64| seconds * 1000.0 / count as f64;
        let _ = writeln!(
            out,
            "{:<34} mean {mean:.2} ms, p50 {:.2} ms, p99 {:.2} ms; CPU per create: kube-apiserver {:.2} ms, sartor {:.2} ms",
            mode.name(),
            at(0.5),
            at(0.99),
            per_create(cpu),
            per_create(sartor_cpu),
        );
        means.push((
            mean,
            at(0.5),
            at(0.99),
            per_create(cpu),
            per_create(sartor_cpu),
        ));
    }
    if let [none, modes @ ..] = means.as_slice() {
        for (mode, added) in [Mode::Policy, Mode::Webhook].iter().zip(modes) {
            let _ = writeln!(
                out,
                "added by {}: mean {:+.2} ms, p50 {:+.2} ms, p99 {:+.2} ms; CPU per create: kube-apiserver {:+.2} ms, sartor {:+.2} ms",
                mode.name(),
                added.0 - none.0,
                added.1 - none.1,
                added.2 - none.2,
                added.3 - none.3,
                added.4 - none.4,
            );
        }
    }
    out
}
