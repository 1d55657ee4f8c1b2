//! How many of a realistic mix of writes reach sartor's webhook, and what
//! they add, with and without the match condition sartor derives
//! (`sartor export condition`): writes through the test control plane with
//! `sartor serve` (the mutators from a file, with a self-signed certificate,
//! the example Namespace given with `--namespaces`) in three modes, in
//! interleaved rounds (the order of the three turns every round):
//!
//! - `none`: no mutating webhook of sartor's;
//! - `rules`: a MutatingWebhookConfiguration calling sartor for every
//!   resource on CREATE and UPDATE (what sartor derives for
//!   examples/mutators, which hold an AssignMetadata of every namespaced
//!   kind), kube-system excluded by its namespaceSelector, no match
//!   condition;
//! - `condition`: the same with the `sartor-may-change` match condition that
//!   `sartor export condition` prints for the mutators.
//!
//! The writes of a round, in a fixed shuffled order: 40% Pods that already
//! conform (examples/objects/pod.yaml as `sartor mutate` predicts it), 10%
//! Pods needing mutation (the example Pod as written), 20% kube-system churn
//! (ConfigMaps created and updated there, by turns), 15% ConfigMaps created
//! in the example's namespace without labels (owner-from-namespace labels
//! them), 15% updates of ConfigMaps there that already carry the `owner`
//! label sartor adds. For each mode: the calls sartor received per 1,000
//! writes (its `sartor_admission_requests_total{endpoint="mutate"}`), the
//! latency of a write as the client sees it (mean, p50, p99),
//! kube-apiserver's CPU per write (its own `process_cpu_seconds_total`) and
//! sartor's (from /proc); then the calls per 1,000 writes of each kind, from
//! a few more writes of each kind per round and mode, outside the measured
//! windows.
//!
//! ```text
//! cargo build --release -p sartor
//! SARTOR_BIN=target/release/sartor cargo run --release -p sartor-tests --example webhook_calls -- examples/mutators 6 200
//! ```
//!
//! Arguments: the mutators (a file or directory), the rounds, the writes per
//! round and mode. A benchmark, not a test: it prints what it measured.
//! Needs the control plane (`tests/k8s/provision`).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use sartor_tests::cluster::{ControlPlane, Guarded, Tools, free_port};
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
    let (rounds, writes) = (number(1, 6), number(2, 200));
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("webhook_calls: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&mutators, rounds, writes)) {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("webhook_calls: {error}");
            ExitCode::FAILURE
        }
    }
}

/// How sartor's webhook is configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// No webhook of sartor's.
    None,
    /// Every resource on CREATE and UPDATE, no match condition.
    Rules,
    /// The same, with the derived match condition.
    Condition,
}

impl Mode {
    const ALL: [Mode; 3] = [Mode::None, Mode::Rules, Mode::Condition];

    fn name(self) -> &'static str {
        match self {
            Mode::None => "none",
            Mode::Rules => "rules",
            Mode::Condition => "condition",
        }
    }
}

/// The kinds of write in the mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A Pod created from the template sartor already mutated.
    ConformingPod,
    /// The example Pod as written.
    PodToMutate,
    /// A ConfigMap in kube-system, created or updated by turns.
    SystemConfigMap,
    /// A ConfigMap created in the app namespace without labels.
    NewConfigMap,
    /// An update of a ConfigMap in the app namespace with the owner label.
    OwnedUpdate,
}

impl Kind {
    const ALL: [Kind; 5] = [
        Kind::ConformingPod,
        Kind::PodToMutate,
        Kind::SystemConfigMap,
        Kind::NewConfigMap,
        Kind::OwnedUpdate,
    ];

    /// Its share of the writes, in percent.
    fn percent(self) -> usize {
        match self {
            Kind::ConformingPod => 40,
            Kind::PodToMutate => 10,
            Kind::SystemConfigMap => 20,
            Kind::NewConfigMap | Kind::OwnedUpdate => 15,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::ConformingPod => "Pod create, already conforming",
            Kind::PodToMutate => "Pod create, needing mutation",
            Kind::SystemConfigMap => "kube-system ConfigMap create/update",
            Kind::NewConfigMap => "app ConfigMap create, no labels",
            Kind::OwnedUpdate => "app ConfigMap update, owner label",
        }
    }

    /// The prefix of the names of the objects it creates.
    fn prefix(self) -> &'static str {
        match self {
            Kind::ConformingPod => "conforming",
            Kind::PodToMutate => "plain",
            Kind::SystemConfigMap => "churn",
            Kind::NewConfigMap => "new",
            Kind::OwnedUpdate => "owned",
        }
    }
}

/// ConfigMaps updated by turns, in kube-system and in the app namespace.
const POOL: usize = 10;

/// Writes of each kind per round and mode in the pass that attributes
/// sartor's calls to the kinds.
const ATTRIBUTION: usize = 5;

/// The namespace of the marker ConfigMaps.
const MARKER_NAMESPACE: &str = "webhook-calls-marker";

/// The kinds of a round of `writes`, shuffled by a fixed seed: the same
/// order every round and mode.
fn mix(writes: usize) -> Vec<Kind> {
    let mut counts: Vec<(Kind, usize)> = Kind::ALL
        .iter()
        .map(|kind| (*kind, writes * kind.percent() / 100))
        .collect();
    let rest = writes - counts.iter().map(|(_, count)| count).sum::<usize>();
    if let Some((_, count)) = counts.first_mut() {
        *count += rest;
    }
    let mut order: Vec<Kind> = counts
        .iter()
        .flat_map(|(kind, count)| std::iter::repeat_n(*kind, *count))
        .collect();
    // xorshift64, Fisher-Yates.
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in (1..order.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let j = (state % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

/// What one round of one mode measured.
#[derive(Debug, Default, Clone)]
struct Measured {
    /// Each write's latency.
    latencies: Vec<Duration>,
    /// kube-apiserver's CPU seconds over the writes.
    cpu: f64,
    /// sartor's CPU seconds over the writes.
    sartor_cpu: f64,
    /// Calls sartor answered over the writes.
    calls: Calls,
    /// Per kind: writes and calls in the attribution pass.
    kinds: Vec<(Kind, usize, u64)>,
}

/// sartor's mutate requests so far.
#[derive(Debug, Default, Clone, Copy)]
struct Calls {
    /// Every outcome.
    total: u64,
    /// Those it answered with a patch.
    mutated: u64,
}

impl std::ops::Sub for Calls {
    type Output = Calls;

    fn sub(self, before: Calls) -> Calls {
        Calls {
            total: self.total.saturating_sub(before.total),
            mutated: self.mutated.saturating_sub(before.mutated),
        }
    }
}

async fn run(mutators: &str, rounds: usize, writes: usize) -> Result<String, String> {
    let tools = Tools::provision().map_err(|e| format!("{e:?}"))?;
    let plane = ControlPlane::start(&tools)?;
    let repository = sartor_tests::workspace_root();
    let mutators = repository.join(mutators);
    let namespace_file = repository.join("examples/objects/namespace.yaml");
    let pod_file = repository.join("examples/objects/pod.yaml");
    let sartor = sartor_tests::binary::sartor()?;

    let condition = match_condition(sartor, &mutators)?;
    let plain = only_document(&pod_file)?;
    let namespace = only_document(&namespace_file)?;
    let app = namespace
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{}: no metadata.name", namespace_file.display()))?
        .to_string();
    let conforming = mutated_pod(sartor, &mutators, &namespace_file, &pod_file, &app)?;

    let webhook = Webhook::start(&plane, &mutators, &namespace_file)?;
    plane.kubectl_with_input(&["apply", "-f", "-"], Some(&namespace.to_string()))?;
    plane.kubectl(&["create", "namespace", MARKER_NAMESPACE])?;
    let client = client(&plane).await?;
    let mut bench = Bench {
        pods: Api::namespaced(client.clone(), &app),
        app_maps: Api::namespaced(client.clone(), &app),
        system_maps: Api::namespaced(client, "kube-system"),
        app,
        conforming,
        plain,
        turn: 0,
        created: Vec::new(),
    };
    bench.create_pools().await?;

    let order = mix(writes);
    let mut switches = 0;
    let mut measured: Vec<(Mode, Measured)> = Vec::new();
    for round in 0..rounds {
        let mut modes = Mode::ALL;
        modes.rotate_left(round % Mode::ALL.len());
        for mode in modes {
            switches += 1;
            set_mode(&plane, &webhook, mode, condition.as_ref(), switches)?;
            let calls_before = webhook.calls().await?;
            let sartor_before = webhook.cpu()?;
            let cpu_before = apiserver_cpu(&plane)?;
            let mut latencies = Vec::with_capacity(writes);
            for (i, kind) in order.iter().enumerate() {
                let tag = format!("{}-{round}-{i}", mode.name());
                let started = Instant::now();
                bench.write(*kind, &tag).await?;
                latencies.push(started.elapsed());
            }
            let cpu = apiserver_cpu(&plane)? - cpu_before;
            let sartor_cpu = webhook.cpu()? - sartor_before;
            let calls = webhook.calls().await? - calls_before;
            // Which kinds the calls come from: a few more writes of each,
            // the counter read around each kind's.
            let mut kinds = Vec::new();
            for kind in Kind::ALL {
                let before = webhook.calls().await?;
                for j in 0..ATTRIBUTION {
                    let tag = format!("{}-{round}-a-{j}", mode.name());
                    bench.write(kind, &tag).await?;
                }
                let after = webhook.calls().await?;
                kinds.push((kind, ATTRIBUTION, (after - before).total));
            }
            measured.push((
                mode,
                Measured {
                    latencies,
                    cpu,
                    sartor_cpu,
                    calls,
                    kinds,
                },
            ));
        }
        bench.delete_created().await?;
    }
    Ok(report(rounds, writes, condition.is_some(), &measured))
}

/// The `sartor-may-change` entry `sartor export condition` prints for
/// `mutators`, or `None` when it prints none.
fn match_condition(sartor: &Path, mutators: &Path) -> Result<Option<Value>, String> {
    let exported = Command::new(sartor)
        .args(["export", "condition", "-m"])
        .arg(mutators)
        .output()
        .map_err(|e| format!("sartor export condition: {e}"))?;
    if !exported.status.success() {
        return Err(format!(
            "sartor export condition: {}\n{}",
            exported.status,
            String::from_utf8_lossy(&exported.stderr)
        ));
    }
    let stdout = String::from_utf8_lossy(&exported.stdout);
    if stdout.trim().is_empty() {
        return Ok(None);
    }
    let entries: Vec<Value> = serde_yaml::from_str(&stdout)
        .map_err(|e| format!("sartor export condition printed no list: {e}"))?;
    match entries.as_slice() {
        [entry] if entry.get("name").is_some() && entry.get("expression").is_some() => {
            Ok(Some(entry.clone()))
        }
        _ => Err(format!(
            "sartor export condition printed no one entry with name and expression:\n{stdout}"
        )),
    }
}

/// The one document of `file`.
fn only_document(file: &Path) -> Result<Value, String> {
    match sartor_tests::documents(file)?.as_slice() {
        [document] => Ok(document.clone()),
        _ => Err(format!("{}: not one document", file.display())),
    }
}

/// The example Pod as `sartor mutate` predicts sartor admits it in `app`.
fn mutated_pod(
    sartor: &Path,
    mutators: &Path,
    namespaces: &Path,
    pod: &Path,
    app: &str,
) -> Result<Value, String> {
    let mutated = Command::new(sartor)
        .arg("mutate")
        .arg("-m")
        .arg(mutators)
        .arg("--namespaces")
        .arg(namespaces)
        .args(["-n", app, "-o", "json"])
        .arg(pod)
        .output()
        .map_err(|e| format!("sartor mutate: {e}"))?;
    if !mutated.status.success() {
        return Err(format!(
            "sartor mutate: {}\n{}",
            mutated.status,
            String::from_utf8_lossy(&mutated.stderr)
        ));
    }
    let mut pod: Value = serde_json::from_slice(&mutated.stdout)
        .map_err(|e| format!("sartor mutate printed no JSON object: {e}"))?;
    if let Some(metadata) = pod.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "generation",
            "managedFields",
        ] {
            metadata.remove(field);
        }
    }
    Ok(pod)
}

/// The writes, and what they need.
struct Bench {
    pods: Api<Pod>,
    app_maps: Api<ConfigMap>,
    system_maps: Api<ConfigMap>,
    /// The app namespace.
    app: String,
    /// The Pod as sartor mutates it.
    conforming: Value,
    /// The Pod as written.
    plain: Value,
    /// Writes so far: what the updates write, and which kube-system write
    /// is a create.
    turn: usize,
    /// What was created since the last cleanup: Pod or not, and the name.
    created: Vec<(Kind, String)>,
}

impl Bench {
    /// The ConfigMaps updated: in kube-system, and in the app namespace with
    /// the label sartor adds (made while no webhook is in force).
    async fn create_pools(&self) -> Result<(), String> {
        for i in 0..POOL {
            let system = config_map(&format!("pool-{i}"), "kube-system", None, "0")?;
            self.system_maps
                .create(&PostParams::default(), &system)
                .await
                .map_err(|e| format!("creating kube-system/pool-{i}: {e}"))?;
            let owned = config_map(&format!("owned-{i}"), &self.app, Some(&self.app), "0")?;
            self.app_maps
                .create(&PostParams::default(), &owned)
                .await
                .map_err(|e| format!("creating {}/owned-{i}: {e}", self.app))?;
        }
        Ok(())
    }

    /// One write of `kind`; what it creates is named after `tag`.
    async fn write(&mut self, kind: Kind, tag: &str) -> Result<(), String> {
        self.turn += 1;
        let turn = self.turn;
        let name = format!("{}-{tag}-{turn}", kind.prefix());
        let data = turn.to_string();
        let created = match kind {
            Kind::ConformingPod | Kind::PodToMutate => {
                let mut pod = if kind == Kind::ConformingPod {
                    self.conforming.clone()
                } else {
                    self.plain.clone()
                };
                if let Some(metadata) = pod.get_mut("metadata").and_then(Value::as_object_mut) {
                    metadata.insert("name".to_string(), json!(name));
                    metadata.insert("namespace".to_string(), json!(self.app));
                }
                let pod: Pod = serde_json::from_value(pod).map_err(|e| e.to_string())?;
                self.pods
                    .create(&PostParams::default(), &pod)
                    .await
                    .map(|_| ())
            }
            Kind::SystemConfigMap if turn.is_multiple_of(2) => {
                let map = config_map(&name, "kube-system", None, &data)?;
                self.system_maps
                    .create(&PostParams::default(), &map)
                    .await
                    .map(|_| ())
            }
            Kind::SystemConfigMap => self
                .system_maps
                .patch(
                    &format!("pool-{}", turn % POOL),
                    &PatchParams::default(),
                    &Patch::Merge(json!({"data": {"turn": data}})),
                )
                .await
                .map(|_| ()),
            Kind::NewConfigMap => {
                let map = config_map(&name, &self.app, None, &data)?;
                self.app_maps
                    .create(&PostParams::default(), &map)
                    .await
                    .map(|_| ())
            }
            Kind::OwnedUpdate => self
                .app_maps
                .patch(
                    &format!("owned-{}", turn % POOL),
                    &PatchParams::default(),
                    &Patch::Merge(json!({"data": {"turn": data}})),
                )
                .await
                .map(|_| ()),
        };
        created.map_err(|e| format!("{} ({name}): {e}", kind.name()))?;
        let creates = match kind {
            Kind::SystemConfigMap => turn.is_multiple_of(2),
            Kind::OwnedUpdate => false,
            _ => true,
        };
        if creates {
            self.created.push((kind, name));
        }
        Ok(())
    }

    /// Deletes what was created since the last call.
    async fn delete_created(&mut self) -> Result<(), String> {
        let params = DeleteParams::default();
        for (kind, name) in std::mem::take(&mut self.created) {
            let deleted = match kind {
                Kind::ConformingPod | Kind::PodToMutate => {
                    self.pods.delete(&name, &params).await.map(|_| ())
                }
                Kind::SystemConfigMap => self.system_maps.delete(&name, &params).await.map(|_| ()),
                Kind::NewConfigMap | Kind::OwnedUpdate => {
                    self.app_maps.delete(&name, &params).await.map(|_| ())
                }
            };
            deleted.map_err(|e| format!("deleting {name}: {e}"))?;
        }
        Ok(())
    }
}

/// A ConfigMap `namespace/name` holding `turn`, labelled `owner: owner`
/// when given.
fn config_map(
    name: &str,
    namespace: &str,
    owner: Option<&str>,
    turn: &str,
) -> Result<ConfigMap, String> {
    let mut metadata = json!({"name": name, "namespace": namespace});
    if let (Some(owner), Some(metadata)) = (owner, metadata.as_object_mut()) {
        metadata.insert("labels".to_string(), json!({"owner": owner}));
    }
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": metadata,
        "data": {"turn": turn},
    }))
    .map_err(|e| e.to_string())
}

/// An admin client of the plane.
async fn client(plane: &ControlPlane) -> Result<Client, String> {
    let kubeconfig = Kubeconfig::read_from(&plane.kubeconfig).map_err(|e| e.to_string())?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    Client::try_from(config).map_err(|e| e.to_string())
}

/// The webhook that shows a configuration is in force: it refuses (it
/// cannot be reached, and fails closed) only a ConfigMap named
/// `marker-<switch>` in [`MARKER_NAMESPACE`].
fn marker(switch: usize) -> Value {
    json!({
        "name": "marker.webhook-calls.sartor.dev",
        "clientConfig": {"url": "https://127.0.0.1:1/x"},
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"], "scope": "Namespaced"}],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": MARKER_NAMESPACE}},
        "matchConditions": [{"name": "marker", "expression": format!("object.metadata.name == \"marker-{switch}\"")}],
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 1,
    })
}

/// Puts `mode`'s configuration in force (switch number `switch`) and waits
/// until its marker refuses a dry-run create.
fn set_mode(
    plane: &ControlPlane,
    webhook: &Webhook,
    mode: Mode,
    condition: Option<&Value>,
    switch: usize,
) -> Result<(), String> {
    let mut webhooks = Vec::new();
    if mode != Mode::None {
        let mut entry = webhook.entry.clone();
        if let (Mode::Condition, Some(condition), Some(object)) =
            (mode, condition, entry.as_object_mut())
        {
            object.insert("matchConditions".to_string(), json!([condition]));
        }
        webhooks.push(entry);
    }
    webhooks.push(marker(switch));
    let configuration = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "sartor-webhook-calls"},
        "webhooks": webhooks,
    })
    .to_string();
    let verb = if switch == 1 { "create" } else { "replace" };
    plane.kubectl_with_input(&[verb, "-f", "-"], Some(&configuration))?;
    let probe = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("marker-{switch}"), "namespace": MARKER_NAMESPACE},
    })
    .to_string();
    let started = Instant::now();
    loop {
        match plane.kubectl_with_input(
            &["create", "--dry-run=server", "-o", "name", "-f", "-"],
            Some(&probe),
        ) {
            Err(refused) if refused.contains("marker.webhook-calls.sartor.dev") => return Ok(()),
            Err(other) => return Err(other),
            Ok(_) => {}
        }
        if started.elapsed() > Duration::from_secs(30) {
            return Err(format!("{}: not in force after 30 s", mode.name()));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `sartor serve` from the mutators, with a self-signed certificate, and
/// its entry of the MutatingWebhookConfiguration.
struct Webhook {
    /// sartor's webhook entry, without match conditions.
    entry: Value,
    /// Its metrics address.
    metrics: SocketAddr,
    /// Where it was told to write its certificate: how its process is
    /// found in /proc.
    cert_dir: PathBuf,
    _process: Guarded,
}

impl Webhook {
    fn start(plane: &ControlPlane, mutators: &Path, namespaces: &Path) -> Result<Webhook, String> {
        let cert_dir = plane.dir().join("webhook-calls-certs");
        let addr = format!("127.0.0.1:{}", free_port()?);
        let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()?)
            .parse()
            .map_err(|e| format!("metrics address: {e}"))?;
        let args: Vec<String> = [
            "serve",
            "--mutators",
            &mutators.display().to_string(),
            "--namespaces",
            &namespaces.display().to_string(),
            "--self-signed",
            "--cert-dir",
            &cert_dir.display().to_string(),
            "--addr",
            &addr,
            "--metrics-addr",
            &metrics.to_string(),
        ]
        .iter()
        .map(|arg| (*arg).to_string())
        .collect();
        let process = Guarded::spawn(
            "sartor serve",
            sartor_tests::binary::sartor()?,
            &args,
            &[("RUST_LOG", "warn".to_string())],
            &plane.dir().join("webhook-calls-sartor.log"),
        )?;
        let ca = cert_dir.join("ca.crt");
        let started = Instant::now();
        while !ca.exists() {
            if started.elapsed() > Duration::from_secs(30) {
                return Err(format!(
                    "sartor serve wrote no {}:\n{}",
                    ca.display(),
                    process.log_tail(20)
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let ca = std::fs::read(&ca).map_err(|e| e.to_string())?;
        let entry = json!({
            "name": "mutate.sartor.dev",
            "clientConfig": {"url": format!("https://{addr}/v1/mutate"), "caBundle": BASE64.encode(ca)},
            "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["*"], "scope": "*"}],
            "namespaceSelector": {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}]},
            "failurePolicy": "Ignore",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "reinvocationPolicy": "IfNeeded",
            "timeoutSeconds": 1,
        });
        Ok(Webhook {
            entry,
            metrics,
            cert_dir,
            _process: process,
        })
    }

    /// The mutate requests sartor has answered
    /// (`sartor_admission_requests_total{endpoint="mutate"}`), waiting
    /// until its metrics answer.
    async fn calls(&self) -> Result<Calls, String> {
        let started = Instant::now();
        let body = loop {
            match sartor_tests::https::http_get(self.metrics, "/metrics").await {
                Ok(answer) if answer.status == 200 => break answer.body,
                Ok(answer) if started.elapsed() > Duration::from_secs(30) => {
                    return Err(format!("sartor's /metrics: {}", answer.status));
                }
                Err(error) if started.elapsed() > Duration::from_secs(30) => {
                    return Err(format!("sartor's /metrics: {error}"));
                }
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        let mut calls = Calls::default();
        for line in body.lines() {
            if !line.starts_with("sartor_admission_requests_total{")
                || !line.contains("endpoint=\"mutate\"")
            {
                continue;
            }
            let value = line.rsplit(' ').next().unwrap_or_default();
            let value: u64 = value.parse().map_err(|e| format!("{line:?}: {e}"))?;
            calls.total += value;
            if line.contains("outcome=\"mutated\"") {
                calls.mutated += value;
            }
        }
        Ok(calls)
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

/// One mode's figures over every round.
#[derive(Debug, Clone, Copy)]
struct Figures {
    writes: usize,
    calls: f64,
    mutated: f64,
    mean: f64,
    p50: f64,
    p99: f64,
    cpu: f64,
    sartor_cpu: f64,
}

fn figures(mode: Mode, measured: &[(Mode, Measured)]) -> Figures {
    let rounds: Vec<&Measured> = measured
        .iter()
        .filter(|(m, _)| *m == mode)
        .map(|(_, round)| round)
        .collect();
    let mut all: Vec<Duration> = rounds
        .iter()
        .flat_map(|round| round.latencies.iter().copied())
        .collect();
    all.sort();
    let count = all.len().max(1) as f64;
    let at = |quantile: f64| {
        let index = ((all.len() as f64 * quantile).ceil() as usize).saturating_sub(1);
        all.get(index).map_or(0.0, |d| ms(*d))
    };
    let sum = |of: fn(&Measured) -> f64| rounds.iter().map(|round| of(round)).sum::<f64>();
    Figures {
        writes: all.len(),
        calls: sum(|round| round.calls.total as f64) * 1000.0 / count,
        mutated: sum(|round| round.calls.mutated as f64) * 1000.0 / count,
        mean: all.iter().map(|d| ms(*d)).sum::<f64>() / count,
        p50: at(0.5),
        p99: at(0.99),
        cpu: sum(|round| round.cpu) * 1000.0 / count,
        sartor_cpu: sum(|round| round.sartor_cpu) * 1000.0 / count,
    }
}

/// The figures per mode over every round, what the webhook adds, and the
/// calls per kind of write.
fn report(rounds: usize, writes: usize, condition: bool, measured: &[(Mode, Measured)]) -> String {
    let mut out = String::new();
    let mix: Vec<String> = {
        let order = mix(writes);
        Kind::ALL
            .iter()
            .map(|kind| {
                let count = order.iter().filter(|k| *k == kind).count();
                format!("{}% {} ({count})", kind.percent(), kind.name())
            })
            .collect()
    };
    let _ = writeln!(
        out,
        "{rounds} rounds x {writes} writes per mode, interleaved; each round: {}",
        mix.join(", ")
    );
    if !condition {
        let _ = writeln!(
            out,
            "sartor export condition printed no condition: `condition` is `rules`"
        );
    }
    let all: Vec<(Mode, Figures)> = Mode::ALL
        .iter()
        .map(|mode| (*mode, figures(*mode, measured)))
        .collect();
    for (mode, f) in &all {
        let _ = writeln!(
            out,
            "{:<9} {} writes: sartor calls per 1,000 writes {:.0} ({:.0} mutated); latency mean {:.2} ms, p50 {:.2} ms, p99 {:.2} ms; CPU per write: kube-apiserver {:.3} ms, sartor {:.3} ms",
            mode.name(),
            f.writes,
            f.calls,
            f.mutated,
            f.mean,
            f.p50,
            f.p99,
            f.cpu,
            f.sartor_cpu,
        );
    }
    if let [(_, none), (_, rules), (_, with_condition)] = all.as_slice() {
        for (name, added) in [("rules", rules), ("condition", with_condition)] {
            let _ = writeln!(
                out,
                "added by {name:<9}: mean {:+.2} ms, p50 {:+.2} ms, p99 {:+.2} ms; CPU per write: kube-apiserver {:+.3} ms, sartor {:+.3} ms",
                added.mean - none.mean,
                added.p50 - none.p50,
                added.p99 - none.p99,
                added.cpu - none.cpu,
                added.sartor_cpu - none.sartor_cpu,
            );
        }
        let ratio = if rules.calls > 0.0 {
            format!("{:.3}", with_condition.calls / rules.calls)
        } else {
            "n/a (no calls with rules)".to_string()
        };
        let _ = writeln!(out, "calls condition/rules: {ratio}");
    }
    let _ = writeln!(
        out,
        "calls per 1,000 writes by kind ({ATTRIBUTION} more writes of each per round and mode, outside the measured windows):"
    );
    let _ = writeln!(
        out,
        "  {:<38} {:>6} {:>6} {:>9}",
        "kind", "none", "rules", "condition"
    );
    for kind in Kind::ALL {
        let per_mode: Vec<String> = Mode::ALL
            .iter()
            .map(|mode| {
                let (writes, calls) = measured
                    .iter()
                    .filter(|(m, _)| m == mode)
                    .flat_map(|(_, round)| round.kinds.iter())
                    .filter(|(k, _, _)| *k == kind)
                    .fold((0usize, 0u64), |(w, c), (_, writes, calls)| {
                        (w + writes, c + calls)
                    });
                format!("{:.0}", calls as f64 * 1000.0 / writes.max(1) as f64)
            })
            .collect();
        if let [none, rules, with_condition] = per_mode.as_slice() {
            let _ = writeln!(
                out,
                "  {:<38} {none:>6} {rules:>6} {with_condition:>9}",
                kind.name()
            );
        }
    }
    out
}
