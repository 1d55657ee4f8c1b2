//! What `sartor export map`'s policy costs the API server: Pods created
//! through the test control plane with no mutation and with the exported
//! MutatingAdmissionPolicy in force, in interleaved rounds (the order of
//! the two flips every round), and for each: the latency of a create as the
//! client sees it (mean, p50, p99) and kube-apiserver's CPU per create (its
//! own `process_cpu_seconds_total`).
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
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use sartor_tests::cluster::{ControlPlane, Tools};
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

/// The two ways a Pod is admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// No mutating admission of sartor's.
    None,
    /// The exported policy in force.
    Policy,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::None => "no mutation",
            Mode::Policy => "exported MutatingAdmissionPolicy",
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
        let order = match round % 2 {
            0 => [Mode::None, Mode::Policy],
            _ => [Mode::Policy, Mode::None],
        };
        for mode in order {
            set_mode(&plane, mode, &policy, &unmutated)?;
            let cpu_before = apiserver_cpu(&plane)?;
            let mut latencies = Vec::with_capacity(creates);
            for i in 0..creates {
                let pod: DynamicObject = serde_json::from_value(pod(&format!(
                    "{}-{round}-{i}",
                    match mode {
                        Mode::None => "plain",
                        Mode::Policy => "policy",
                    }
                )))
                .map_err(|e| e.to_string())?;
                let started = Instant::now();
                pods.create(&PostParams::default(), &pod)
                    .await
                    .map_err(|e| format!("creating a Pod: {e}"))?;
                latencies.push(started.elapsed());
            }
            let cpu = apiserver_cpu(&plane)? - cpu_before;
            measured.push((mode, Measured { latencies, cpu }));
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

/// Applies or removes the policy, and waits until a dry run shows it.
fn set_mode(
    plane: &ControlPlane,
    mode: Mode,
    policy: &str,
    unmutated: &Value,
) -> Result<(), String> {
    match mode {
        Mode::Policy => plane.kubectl_with_input(&["apply", "-f", "-"], Some(policy))?,
        Mode::None => {
            plane.kubectl_with_input(&["delete", "--ignore-not-found", "-f", "-"], Some(policy))?
        }
    };
    let started = Instant::now();
    loop {
        let mutated = dry_run(plane, "probe")? != *unmutated;
        if mutated == (mode == Mode::Policy) {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(30) {
            return Err(format!("{}: not in force after 30 s", mode.name()));
        }
        std::thread::sleep(Duration::from_millis(200));
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
    for mode in [Mode::None, Mode::Policy] {
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
        let _ = writeln!(
            out,
            "{:<34} mean {mean:.2} ms, p50 {:.2} ms, p99 {:.2} ms; kube-apiserver CPU {:.2} ms per create",
            mode.name(),
            at(0.5),
            at(0.99),
            cpu * 1000.0 / count as f64
        );
        means.push((mean, at(0.5), at(0.99), cpu * 1000.0 / count as f64));
    }
    if let [none, policy] = means.as_slice() {
        let _ = writeln!(
            out,
            "added by the policy: mean {:+.2} ms, p50 {:+.2} ms, p99 {:+.2} ms, CPU {:+.2} ms per create",
            policy.0 - none.0,
            policy.1 - none.1,
            policy.2 - none.2,
            policy.3 - none.3
        );
    }
    out
}
