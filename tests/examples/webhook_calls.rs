//! How many of a realistic mix of writes reach a mutating webhook, and what
//! they add: sartor's, with and without the match condition sartor derives
//! (`sartor export condition`), and Gatekeeper's own: writes through the test
//! control plane with `sartor serve` (the mutators from a file, with a
//! self-signed certificate, the example Namespace given with `--namespaces`)
//! and Gatekeeper v3.23.1's manager (the same mutators in Gatekeeper's
//! apiVersion) running beside it, in four modes, in interleaved rounds (the
//! order of the modes turns every round):
//!
//! - `none`: no mutating webhook (but the marker that shows which
//!   configuration is in force);
//! - `rules`: a MutatingWebhookConfiguration calling sartor for every
//!   resource on CREATE and UPDATE (what sartor derives for
//!   examples/mutators, which hold an AssignMetadata of every namespaced
//!   kind), kube-system excluded by its namespaceSelector, no match
//!   condition;
//! - `condition`: the same with the `sartor-may-change` match condition that
//!   `sartor export condition` prints for the mutators;
//! - `gatekeeper`: Gatekeeper's mutation webhook as its Helm chart installs
//!   it (`mutation.gatekeeper.sh`: every group and resource plus the chart's
//!   subresources, CREATE and UPDATE, failurePolicy Ignore, timeout 1 s,
//!   reinvocation Never, namespaceSelector: no `admission.gatekeeper.sh/ignore`
//!   label and not gatekeeper-system), called by URL instead of its Service,
//!   with sartor's self-signed certificate. kube-system carries the
//!   `admission.gatekeeper.sh/ignore` label (Gatekeeper's documented way to
//!   leave a namespace out of its webhooks), so the same writes are left out
//!   as with `rules`.
//!
//! Gatekeeper is its own manager binary (`tests/gatekeeper/manager` builds it
//! from source; `GATEKEEPER_MANAGER` names another build, with the chart's
//! CRDs in `crds/` beside it) run out of cluster with the control plane's
//! kubeconfig: `--operation=mutation-webhook --operation=mutation-status`
//! (its webhook Pod's mutation part, and the status that says a mutator is
//! enforced), `--debug-use-fake-pod`, `--disable-cert-rotation`, every CRD of
//! its chart applied and a `gatekeeper-system` namespace. Its mutators are the
//! bench's with the apiVersion rewritten (`mutations.gatekeeper.sh/v1`,
//! AssignImage `v1alpha1`); before measuring, the bench checks that the
//! modes apply the same mutations: `sartor mutate` must give the same Pod
//! from both apiVersions (it refuses sartor's extensions in Gatekeeper's
//! apiVersion), the API server must take the rewritten objects, Gatekeeper
//! must report each enforced (`status.byPod[].enforced`), and a dry-run
//! create of the example Pod and of an app ConfigMap must come back the same
//! through Gatekeeper as through sartor. examples/mutators hold sartor
//! extensions, so the `gatekeeper` mode refuses them;
//! tests/fixtures/webhook-calls/mutators.yaml is the part of them Gatekeeper
//! can express (in sartor's apiVersion).
//!
//! The writes of a round, in a fixed shuffled order, by default: 40% Pods
//! that already conform (examples/objects/pod.yaml as `sartor mutate`
//! predicts it), 10% Pods needing mutation (the example Pod as written), 20%
//! kube-system churn (ConfigMaps created and updated there, by turns), 15%
//! ConfigMaps created in the example's namespace without labels
//! (owner-from-namespace labels them), 15% updates of ConfigMaps there that
//! already carry the `owner` label the mutators add. For each mode: the
//! calls the webhook received per 1,000 writes (sartor's
//! `sartor_admission_requests_total{endpoint="mutate"}`, Gatekeeper's
//! `gatekeeper_mutation_request_count`, which does not say which calls
//! mutated), the latency of a write as the client sees it (mean, p50, p99),
//! kube-apiserver's CPU per write (its own `process_cpu_seconds_total`) and
//! sartor's and Gatekeeper's (from /proc); then the calls per 1,000 writes
//! of each kind, from a few more writes of each kind per round and mode,
//! outside the measured windows.
//!
//! ```text
//! cargo build --release -p sartor
//! SARTOR_BIN=target/release/sartor cargo run --release -p sartor-tests --example webhook_calls -- tests/fixtures/webhook-calls/mutators.yaml 4 200
//! WEBHOOK_CALLS_MIX=conforming:55,mutate:5,system:20,new:5,update:15 SARTOR_BIN=target/release/sartor cargo run --release -p sartor-tests --example webhook_calls -- tests/fixtures/webhook-calls/mutators.yaml 4 200
//! WEBHOOK_CALLS_MODES=none,rules,condition SARTOR_BIN=target/release/sartor cargo run --release -p sartor-tests --example webhook_calls -- examples/mutators 6 200
//! ```
//!
//! Arguments: the mutators (a file or directory, default
//! tests/fixtures/webhook-calls/mutators.yaml), the rounds (default 6), the
//! writes per round and mode (default 200). Environment:
//!
//! - `WEBHOOK_CALLS_MIX`: the mix, as `KIND:WEIGHT` pairs separated by commas,
//!   KIND one of `conforming`, `mutate`, `system`, `new`, `update` (the five
//!   kinds above, in that order); a kind not named gets none, the weights
//!   need not add up to 100 (each kind gets `writes * weight / sum`, the
//!   first kind with a weight the rest). Default
//!   `conforming:40,mutate:10,system:20,new:15,update:15`. A settled cluster,
//!   where few writes need mutation:
//!   `conforming:55,mutate:5,system:20,new:5,update:15`.
//! - `WEBHOOK_CALLS_MODES`: the modes, separated by commas (default
//!   `none,rules,condition,gatekeeper`); without `gatekeeper` nothing of
//!   Gatekeeper's is built or started.
//! - `GATEKEEPER_MANAGER`: Gatekeeper's manager binary (default: what
//!   `tests/gatekeeper/manager` prints, built first if needed).
//!
//! A benchmark, not a test: it prints what it measured. Needs the control
//! plane (`tests/k8s/provision`) and, for `gatekeeper`, Go (the first time).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
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
        .unwrap_or_else(|| "tests/fixtures/webhook-calls/mutators.yaml".to_string());
    let number = |at: usize, default: usize| {
        args.get(at)
            .and_then(|arg| arg.parse().ok())
            .unwrap_or(default)
    };
    let (rounds, writes) = (number(1, 6), number(2, 200));
    let settings = std::env::var("WEBHOOK_CALLS_MIX")
        .ok()
        .map_or_else(|| Mix::parse(Mix::DEFAULT), |text| Mix::parse(&text))
        .and_then(|mix| {
            let modes = std::env::var("WEBHOOK_CALLS_MODES")
                .ok()
                .map_or_else(|| Ok(Mode::ALL.to_vec()), |text| Mode::parse(&text))?;
            Ok((mix, modes))
        });
    let (mix, modes) = match settings {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("webhook_calls: {error}");
            return ExitCode::FAILURE;
        }
    };
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
    let setup = Setup {
        mutators,
        rounds,
        writes,
        mix,
        modes,
    };
    match runtime.block_on(run(&setup)) {
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

/// What a run measures.
struct Setup {
    /// The mutators (a file or directory, relative to the repository).
    mutators: String,
    rounds: usize,
    /// Writes per round and mode.
    writes: usize,
    mix: Mix,
    /// The modes, in [`Mode::ALL`]'s order.
    modes: Vec<Mode>,
}

/// Which mutating webhook is in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// No mutating webhook (but the marker).
    None,
    /// sartor for every resource on CREATE and UPDATE, no match condition.
    Rules,
    /// The same, with the derived match condition.
    Condition,
    /// Gatekeeper's mutation webhook as its chart installs it.
    Gatekeeper,
}

impl Mode {
    const ALL: [Mode; 4] = [Mode::None, Mode::Rules, Mode::Condition, Mode::Gatekeeper];

    fn name(self) -> &'static str {
        match self {
            Mode::None => "none",
            Mode::Rules => "rules",
            Mode::Condition => "condition",
            Mode::Gatekeeper => "gatekeeper",
        }
    }

    /// The modes named in `text` (comma-separated), in [`Mode::ALL`]'s order.
    fn parse(text: &str) -> Result<Vec<Mode>, String> {
        let mut named = Vec::new();
        for name in text
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
        {
            let mode = Mode::ALL
                .into_iter()
                .find(|mode| mode.name() == name)
                .ok_or_else(|| {
                    format!("WEBHOOK_CALLS_MODES: unknown mode {name:?} (none, rules, condition, gatekeeper)")
                })?;
            named.push(mode);
        }
        let modes: Vec<Mode> = Mode::ALL
            .into_iter()
            .filter(|mode| named.contains(mode))
            .collect();
        if modes.is_empty() {
            return Err("WEBHOOK_CALLS_MODES names no mode".to_string());
        }
        Ok(modes)
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

    /// Its name in `WEBHOOK_CALLS_MIX`.
    fn key(self) -> &'static str {
        match self {
            Kind::ConformingPod => "conforming",
            Kind::PodToMutate => "mutate",
            Kind::SystemConfigMap => "system",
            Kind::NewConfigMap => "new",
            Kind::OwnedUpdate => "update",
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

/// The share of each kind of write in a round, as weights.
#[derive(Debug, Clone)]
struct Mix(Vec<(Kind, usize)>);

impl Mix {
    /// The mix of a busy cluster: a quarter of the writes need mutation.
    const DEFAULT: &str = "conforming:40,mutate:10,system:20,new:15,update:15";

    /// `KIND:WEIGHT` pairs separated by commas; a kind not named gets none.
    fn parse(text: &str) -> Result<Mix, String> {
        let mut weights: Vec<(Kind, usize)> = Kind::ALL.iter().map(|kind| (*kind, 0)).collect();
        for pair in text
            .split(',')
            .map(str::trim)
            .filter(|pair| !pair.is_empty())
        {
            let (key, weight) = pair
                .split_once(':')
                .ok_or_else(|| format!("WEBHOOK_CALLS_MIX: {pair:?} is not KIND:WEIGHT"))?;
            let weight: usize = weight
                .trim()
                .parse()
                .map_err(|e| format!("WEBHOOK_CALLS_MIX: {pair:?}: {e}"))?;
            let entry = weights
                .iter_mut()
                .find(|(kind, _)| kind.key() == key.trim())
                .ok_or_else(|| {
                    format!(
                        "WEBHOOK_CALLS_MIX: unknown kind {key:?} (conforming, mutate, system, new, update)"
                    )
                })?;
            entry.1 = weight;
        }
        if weights.iter().all(|(_, weight)| *weight == 0) {
            return Err(format!(
                "WEBHOOK_CALLS_MIX: {text:?} gives no kind a weight"
            ));
        }
        Ok(Mix(weights))
    }

    fn total(&self) -> usize {
        self.0.iter().map(|(_, weight)| weight).sum()
    }

    /// `kind`'s share, in percent.
    fn percent(&self, kind: Kind) -> f64 {
        let weight = self
            .0
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(0, |(_, weight)| *weight);
        weight as f64 * 100.0 / self.total().max(1) as f64
    }

    /// As `WEBHOOK_CALLS_MIX` takes it.
    fn text(&self) -> String {
        let pairs: Vec<String> = self
            .0
            .iter()
            .map(|(kind, weight)| format!("{}:{weight}", kind.key()))
            .collect();
        pairs.join(",")
    }
}

/// The kinds of a round of `writes`, shuffled by a fixed seed: the same
/// order every round and mode.
fn mix(writes: usize, shares: &Mix) -> Vec<Kind> {
    let total = shares.total().max(1);
    let mut counts: Vec<(Kind, usize)> = shares
        .0
        .iter()
        .map(|(kind, weight)| (*kind, writes * weight / total))
        .collect();
    let rest = writes - counts.iter().map(|(_, count)| count).sum::<usize>();
    if let Some((_, count)) = shares
        .0
        .iter()
        .position(|(_, weight)| *weight > 0)
        .and_then(|first| counts.get_mut(first))
    {
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
    /// Gatekeeper's CPU seconds over the writes (0 without it).
    gatekeeper_cpu: f64,
    /// Calls the webhooks (sartor's and Gatekeeper's) answered over the
    /// writes.
    calls: Calls,
    /// Per kind: writes and calls in the attribution pass.
    kinds: Vec<(Kind, usize, u64)>,
}

/// Mutate requests so far.
#[derive(Debug, Default, Clone, Copy)]
struct Calls {
    /// Every outcome.
    total: u64,
    /// Those answered with a patch (sartor's; Gatekeeper does not count
    /// them).
    mutated: u64,
}

impl std::ops::Add for Calls {
    type Output = Calls;

    fn add(self, other: Calls) -> Calls {
        Calls {
            total: self.total + other.total,
            mutated: self.mutated + other.mutated,
        }
    }
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

async fn run(setup: &Setup) -> Result<String, String> {
    let (rounds, writes) = (setup.rounds, setup.writes);
    let tools = Tools::provision().map_err(|e| format!("{e:?}"))?;
    let plane = ControlPlane::start(&tools)?;
    let repository = sartor_tests::workspace_root();
    let mutators = repository.join(&setup.mutators);
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
    // Gatekeeper's copy of the mutators, refused before anything starts
    // when it would not do what sartor does.
    let gatekeeper_mutators = if setup.modes.contains(&Mode::Gatekeeper) {
        let file = plane.dir().join("webhook-calls-gatekeeper-mutators.yaml");
        write_gatekeeper_mutators(&mutators, &file)?;
        same_in_gatekeeper_api(
            sartor,
            &setup.mutators,
            &file,
            &namespace_file,
            &pod_file,
            &app,
            &conforming,
        )?;
        Some(file)
    } else {
        None
    };

    let webhook = Webhook::start(&plane, &mutators, &namespace_file)?;
    plane.kubectl_with_input(&["apply", "-f", "-"], Some(&namespace.to_string()))?;
    plane.kubectl(&["create", "namespace", MARKER_NAMESPACE])?;
    let gatekeeper = match &gatekeeper_mutators {
        Some(file) => Some(Gatekeeper::start(&plane, &webhook.cert_dir, file).await?),
        None => None,
    };
    let client = client(&plane).await?;
    let mut switches = 0;
    if let Some(gatekeeper) = &gatekeeper {
        same_admission(&plane, &webhook, gatekeeper, &plain, &app, &mut switches)?;
    }
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

    let calls = async |gatekeeper: Option<&Gatekeeper>| -> Result<Calls, String> {
        let sartor = webhook.calls().await?;
        Ok(match gatekeeper {
            Some(gatekeeper) => sartor + gatekeeper.calls().await?,
            None => sartor,
        })
    };
    let gatekeeper_cpu =
        |gatekeeper: Option<&Gatekeeper>| gatekeeper.map_or(Ok(0.0), Gatekeeper::cpu);
    let order = mix(writes, &setup.mix);
    let mut measured: Vec<(Mode, Measured)> = Vec::new();
    for round in 0..rounds {
        let mut modes = setup.modes.clone();
        modes.rotate_left(round % setup.modes.len());
        for mode in modes {
            switches += 1;
            set_mode(
                &plane,
                &webhook,
                gatekeeper.as_ref(),
                mode,
                condition.as_ref(),
                switches,
            )?;
            let calls_before = calls(gatekeeper.as_ref()).await?;
            let sartor_before = webhook.cpu()?;
            let gatekeeper_before = gatekeeper_cpu(gatekeeper.as_ref())?;
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
            let gatekeeper_cpu = gatekeeper_cpu(gatekeeper.as_ref())? - gatekeeper_before;
            let calls_over = calls(gatekeeper.as_ref()).await? - calls_before;
            // Which kinds the calls come from: a few more writes of each,
            // the counter read around each kind's.
            let mut kinds = Vec::new();
            for kind in Kind::ALL {
                let before = calls(gatekeeper.as_ref()).await?;
                for j in 0..ATTRIBUTION {
                    let tag = format!("{}-{round}-a-{j}", mode.name());
                    bench.write(kind, &tag).await?;
                }
                let after = calls(gatekeeper.as_ref()).await?;
                kinds.push((kind, ATTRIBUTION, (after - before).total));
            }
            measured.push((
                mode,
                Measured {
                    latencies,
                    cpu,
                    sartor_cpu,
                    gatekeeper_cpu,
                    calls: calls_over,
                    kinds,
                },
            ));
        }
        bench.delete_created().await?;
    }
    Ok(report(setup, condition.is_some(), &measured))
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
    gatekeeper: Option<&Gatekeeper>,
    mode: Mode,
    condition: Option<&Value>,
    switch: usize,
) -> Result<(), String> {
    let mut webhooks = Vec::new();
    match mode {
        Mode::None => {}
        Mode::Rules | Mode::Condition => {
            let mut entry = webhook.entry.clone();
            if let (Mode::Condition, Some(condition), Some(object)) =
                (mode, condition, entry.as_object_mut())
            {
                object.insert("matchConditions".to_string(), json!([condition]));
            }
            webhooks.push(entry);
        }
        Mode::Gatekeeper => {
            let gatekeeper = gatekeeper.ok_or("the gatekeeper mode without Gatekeeper")?;
            webhooks.push(gatekeeper.entry.clone());
        }
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
        process_cpu(&self.cert_dir, "sartor serve")
    }
}

/// The CPU seconds so far (user and system, from /proc) of the process
/// whose command line names `marker` (its own certificate directory).
fn process_cpu(marker: &Path, what: &str) -> Result<f64, String> {
    let marker = marker.display().to_string();
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
    Err(format!("{what} is not running"))
}

/// Gatekeeper's namespace (its `POD_NAMESPACE`).
const GATEKEEPER_NAMESPACE: &str = "gatekeeper-system";

/// The label that leaves a namespace out of Gatekeeper's webhooks.
const GATEKEEPER_IGNORE: &str = "admission.gatekeeper.sh/ignore";

/// The subresources Gatekeeper's chart adds to its mutating webhook's rules
/// (`mutatingWebhookSubResources` in charts/gatekeeper/values.yaml).
const GATEKEEPER_SUBRESOURCES: [&str; 15] = [
    "pods/ephemeralcontainers",
    "pods/exec",
    "pods/log",
    "pods/eviction",
    "pods/portforward",
    "pods/proxy",
    "pods/attach",
    "pods/binding",
    "deployments/scale",
    "replicasets/scale",
    "statefulsets/scale",
    "replicationcontrollers/scale",
    "services/proxy",
    "nodes/proxy",
    "services/status",
];

/// Gatekeeper's mutator resources.
const GATEKEEPER_MUTATORS: &str = "assign.mutations.gatekeeper.sh,assignmetadata.mutations.gatekeeper.sh,modifyset.mutations.gatekeeper.sh,assignimage.mutations.gatekeeper.sh";

/// Writes the mutators of `mutators` to `file` in Gatekeeper's apiVersion:
/// `mutations.gatekeeper.sh/v1`, AssignImage `v1alpha1` (the only version
/// of it v3.23.1 serves).
fn write_gatekeeper_mutators(mutators: &Path, file: &Path) -> Result<(), String> {
    let mut text = String::new();
    for mut document in sartor_tests::documents(mutators)? {
        let field = |pointer: &str| {
            document
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let (api_version, kind, name) = (
            field("/apiVersion"),
            field("/kind"),
            field("/metadata/name"),
        );
        let what = format!("{}: {kind} {name}", mutators.display());
        let group = api_version.split('/').next().unwrap_or_default();
        if group != "mutations.sartor.dev" && group != "mutations.gatekeeper.sh" {
            return Err(format!(
                "{what}: apiVersion {api_version:?} is no mutator's"
            ));
        }
        let version = match kind.as_str() {
            "Assign" | "AssignMetadata" | "ModifySet" => "v1",
            "AssignImage" => "v1alpha1",
            _ => return Err(format!("{what}: Gatekeeper v3.23.1 has no such mutator")),
        };
        let object = document
            .as_object_mut()
            .ok_or_else(|| format!("{what}: not an object"))?;
        object.insert(
            "apiVersion".to_string(),
            json!(format!("mutations.gatekeeper.sh/{version}")),
        );
        let _ = writeln!(text, "---\n{document}");
    }
    std::fs::write(file, text).map_err(|e| format!("{}: {e}", file.display()))
}

/// Checks that `file` (`given` in Gatekeeper's apiVersion) does what
/// `given` does: `sartor mutate` takes it (it refuses sartor's extensions in
/// Gatekeeper's apiVersion) and gives the Pod `conforming`.
fn same_in_gatekeeper_api(
    sartor: &Path,
    given: &str,
    file: &Path,
    namespaces: &Path,
    pod: &Path,
    app: &str,
    conforming: &Value,
) -> Result<(), String> {
    let advice = "the gatekeeper mode needs mutators Gatekeeper v3.23.1 can express, so that \
                  every mode applies the same mutations: use tests/fixtures/webhook-calls/mutators.yaml \
                  (examples/mutators without sartor's extensions), or leave the mode out \
                  (WEBHOOK_CALLS_MODES=none,rules,condition)";
    let mutated = mutated_pod(sartor, file, namespaces, pod, app).map_err(|e| {
        format!(
            "{given} in Gatekeeper's apiVersion ({}): {e}\n{advice}",
            file.display()
        )
    })?;
    if mutated != *conforming {
        return Err(format!(
            "{given}: sartor mutates the example Pod otherwise in Gatekeeper's apiVersion:\n{mutated}\nthan in its own:\n{conforming}\n{advice}"
        ));
    }
    Ok(())
}

/// A dry-run create of `object`, as admitted, without what differs from
/// one create to the next.
fn dry_run(plane: &ControlPlane, object: &Value) -> Result<Value, String> {
    let admitted = plane.kubectl_with_input(
        &["create", "--dry-run=server", "-o", "json", "-f", "-"],
        Some(&object.to_string()),
    )?;
    let mut admitted: Value = serde_json::from_str(&admitted)
        .map_err(|e| format!("kubectl create --dry-run=server printed no JSON: {e}"))?;
    if let Some(metadata) = admitted.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "uid",
            "creationTimestamp",
            "resourceVersion",
            "generation",
            "managedFields",
        ] {
            metadata.remove(field);
        }
    }
    Ok(admitted)
}

/// Checks that Gatekeeper admits the example Pod and an app ConfigMap as
/// sartor does: a dry-run create of each through `rules`, then through
/// `gatekeeper` until they come back the same (Gatekeeper's webhook may
/// lag its status), for at most 60 s.
fn same_admission(
    plane: &ControlPlane,
    webhook: &Webhook,
    gatekeeper: &Gatekeeper,
    plain: &Value,
    app: &str,
    switches: &mut usize,
) -> Result<(), String> {
    let mut pod = plain.clone();
    if let Some(metadata) = pod.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert("name".to_string(), json!("same-admission"));
        metadata.insert("namespace".to_string(), json!(app));
    }
    let map = serde_json::to_value(config_map("same-admission", app, None, "0")?)
        .map_err(|e| e.to_string())?;
    let probes = [pod, map];
    let admit = |mode: Mode, switches: &mut usize| -> Result<Vec<Value>, String> {
        *switches += 1;
        set_mode(plane, webhook, Some(gatekeeper), mode, None, *switches)?;
        probes.iter().map(|probe| dry_run(plane, probe)).collect()
    };
    let by_sartor = admit(Mode::Rules, switches)?;
    let started = Instant::now();
    let mut by_gatekeeper = admit(Mode::Gatekeeper, switches)?;
    while by_gatekeeper != by_sartor {
        if started.elapsed() > Duration::from_secs(60) {
            let show = |objects: &[Value]| {
                objects
                    .iter()
                    .map(Value::to_string)
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            return Err(format!(
                "Gatekeeper does not admit as sartor does (dry-run creates, after 60 s):\nsartor:\n{}\nGatekeeper:\n{}\nGatekeeper's log:\n{}",
                show(&by_sartor),
                show(&by_gatekeeper),
                gatekeeper.process.log_tail(30)
            ));
        }
        std::thread::sleep(Duration::from_millis(500));
        by_gatekeeper = probes
            .iter()
            .map(|probe| dry_run(plane, probe))
            .collect::<Result<_, _>>()?;
    }
    Ok(())
}

/// Gatekeeper's manager binary: `GATEKEEPER_MANAGER`, else what
/// `tests/gatekeeper/manager` prints (building it when needed).
fn gatekeeper_manager() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("GATEKEEPER_MANAGER") {
        return Ok(PathBuf::from(path));
    }
    let script = sartor_tests::workspace_root().join("tests/gatekeeper/manager");
    let built = Command::new(&script)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    if !built.status.success() {
        return Err(format!("{}: {}", script.display(), built.status));
    }
    String::from_utf8_lossy(&built.stdout)
        .lines()
        .last()
        .map(|line| PathBuf::from(line.trim()))
        .ok_or_else(|| format!("{} printed no path", script.display()))
}

/// Gatekeeper's manager, run out of cluster with the control plane's
/// kubeconfig as its mutation webhook (and mutator status), and its entry
/// of the MutatingWebhookConfiguration. Dropping it stops the manager.
struct Gatekeeper {
    /// The chart's `mutation.gatekeeper.sh` entry, called by URL.
    entry: Value,
    /// Its Prometheus exporter (`--prometheus-port`).
    metrics: SocketAddr,
    /// Its certificate directory: how its process is found in /proc.
    cert_dir: PathBuf,
    process: Guarded,
}

impl Gatekeeper {
    /// Applies the chart's CRDs, starts the manager with sartor's
    /// certificate (`sartor_certs`), creates the mutators of `mutators`
    /// (Gatekeeper's apiVersion) and waits until Gatekeeper enforces each.
    async fn start(
        plane: &ControlPlane,
        sartor_certs: &Path,
        mutators: &Path,
    ) -> Result<Gatekeeper, String> {
        let manager = gatekeeper_manager()?;
        let crds = manager
            .parent()
            .map(|dir| dir.join("crds"))
            .ok_or_else(|| format!("{}: no directory", manager.display()))?;
        plane.kubectl(&["create", "-f", &crds.display().to_string()])?;
        plane.wait_established(None)?;
        plane.kubectl(&["create", "namespace", GATEKEEPER_NAMESPACE])?;
        plane.kubectl(&[
            "label",
            "namespace",
            "kube-system",
            &format!("{GATEKEEPER_IGNORE}=no-self-managing"),
        ])?;
        let cert_dir = plane.dir().join("webhook-calls-gatekeeper-certs");
        std::fs::create_dir_all(&cert_dir).map_err(|e| format!("{}: {e}", cert_dir.display()))?;
        for file in ["tls.crt", "tls.key"] {
            std::fs::copy(sartor_certs.join(file), cert_dir.join(file))
                .map_err(|e| format!("copying {file} of sartor's: {e}"))?;
        }
        let ca = std::fs::read(sartor_certs.join("ca.crt")).map_err(|e| e.to_string())?;
        let port = free_port()?;
        let prometheus = free_port()?;
        let metrics: SocketAddr = format!("127.0.0.1:{prometheus}")
            .parse()
            .map_err(|e| format!("metrics address: {e}"))?;
        let args: Vec<String> = vec![
            "--operation=mutation-webhook".to_string(),
            "--operation=mutation-status".to_string(),
            "--debug-use-fake-pod".to_string(),
            "--disable-cert-rotation".to_string(),
            format!("--cert-dir={}", cert_dir.display()),
            "--host=127.0.0.1".to_string(),
            format!("--port={port}"),
            format!("--health-addr=127.0.0.1:{}", free_port()?),
            "--metrics-addr=0".to_string(),
            "--metrics-backend=prometheus".to_string(),
            format!("--prometheus-port={prometheus}"),
            format!("--exempt-namespace={GATEKEEPER_NAMESPACE}"),
            "--log-level=INFO".to_string(),
            "--shutdown-delay=0".to_string(),
        ];
        let mut process = Guarded::spawn(
            "gatekeeper manager",
            &manager,
            &args,
            &[
                ("KUBECONFIG", plane.kubeconfig.display().to_string()),
                ("POD_NAMESPACE", GATEKEEPER_NAMESPACE.to_string()),
                ("POD_NAME", "no-pod".to_string()),
            ],
            &plane.dir().join("webhook-calls-gatekeeper.log"),
        )?;
        let started = Instant::now();
        while !sartor_tests::https::http_get(metrics, "/metrics")
            .await
            .is_ok_and(|answer| answer.status == 200)
        {
            if !process.is_running() || started.elapsed() > Duration::from_secs(60) {
                return Err(format!(
                    "Gatekeeper's manager does not serve its metrics:\n{}",
                    process.log_tail(30)
                ));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let resources: Vec<&str> = std::iter::once("*")
            .chain(GATEKEEPER_SUBRESOURCES)
            .collect();
        let entry = json!({
            "name": "mutation.gatekeeper.sh",
            "admissionReviewVersions": ["v1", "v1beta1"],
            "clientConfig": {"url": format!("https://127.0.0.1:{port}/v1/mutate"), "caBundle": BASE64.encode(ca)},
            "failurePolicy": "Ignore",
            "matchPolicy": "Exact",
            "namespaceSelector": {"matchExpressions": [
                {"key": GATEKEEPER_IGNORE, "operator": "DoesNotExist"},
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": [GATEKEEPER_NAMESPACE]}]},
            "objectSelector": {},
            "reinvocationPolicy": "Never",
            "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": resources, "scope": "*"}],
            "sideEffects": "None",
            "timeoutSeconds": 1,
        });
        let mut gatekeeper = Gatekeeper {
            entry,
            metrics,
            cert_dir,
            process,
        };
        plane
            .kubectl(&["create", "-f", &mutators.display().to_string()])
            .map_err(|e| {
                format!("the API server refuses the mutators in Gatekeeper's apiVersion: {e}")
            })?;
        gatekeeper.wait_enforced(plane)?;
        Ok(gatekeeper)
    }

    /// Waits until every mutator says Gatekeeper enforces it
    /// (`status.byPod[].enforced`), for at most 120 s.
    fn wait_enforced(&mut self, plane: &ControlPlane) -> Result<(), String> {
        let started = Instant::now();
        loop {
            let listed = plane.kubectl(&["get", GATEKEEPER_MUTATORS, "-o", "json"])?;
            let listed: Value = serde_json::from_str(&listed)
                .map_err(|e| format!("kubectl get {GATEKEEPER_MUTATORS} printed no JSON: {e}"))?;
            let items = listed
                .get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let waiting: Vec<String> = items
                .iter()
                .filter(|item| {
                    !item
                        .pointer("/status/byPod")
                        .and_then(Value::as_array)
                        .is_some_and(|pods| {
                            pods.iter()
                                .any(|pod| pod.get("enforced") == Some(&Value::Bool(true)))
                        })
                })
                .map(|item| {
                    let field = |pointer: &str| {
                        item.pointer(pointer)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                    };
                    let status = item
                        .get("status")
                        .map_or("no status".to_string(), Value::to_string);
                    format!("{} {}: {status}", field("/kind"), field("/metadata/name"))
                })
                .collect();
            if waiting.is_empty() && !items.is_empty() {
                return Ok(());
            }
            if !self.process.is_running() {
                return Err(format!(
                    "Gatekeeper's manager stopped:\n{}",
                    self.process.log_tail(30)
                ));
            }
            if started.elapsed() > Duration::from_secs(120) {
                return Err(format!(
                    "Gatekeeper does not enforce every mutator after 120 s:\n{}\nits log:\n{}",
                    waiting.join("\n"),
                    self.process.log_tail(30)
                ));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The mutation requests Gatekeeper has counted
    /// (`gatekeeper_mutation_request_count`, every status); it does not
    /// count which mutated.
    async fn calls(&self) -> Result<Calls, String> {
        let answer = sartor_tests::https::http_get(self.metrics, "/metrics")
            .await
            .map_err(|e| format!("Gatekeeper's /metrics: {e}"))?;
        if answer.status != 200 {
            return Err(format!("Gatekeeper's /metrics: {}", answer.status));
        }
        let mut calls = Calls::default();
        for line in answer.body.lines() {
            let name = line.split(['{', ' ']).next().unwrap_or_default();
            if name != "gatekeeper_mutation_request_count"
                && name != "gatekeeper_mutation_request_count_total"
            {
                continue;
            }
            let value = line.rsplit(' ').next().unwrap_or_default();
            let value: f64 = value.parse().map_err(|e| format!("{line:?}: {e}"))?;
            calls.total += value as u64;
        }
        Ok(calls)
    }

    /// Gatekeeper's CPU seconds so far (user and system, from /proc).
    fn cpu(&self) -> Result<f64, String> {
        process_cpu(&self.cert_dir, "Gatekeeper's manager")
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
    gatekeeper_cpu: f64,
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
        gatekeeper_cpu: sum(|round| round.gatekeeper_cpu) * 1000.0 / count,
    }
}

/// The figures per mode over every round, what each webhook adds, and the
/// calls per kind of write.
fn report(setup: &Setup, condition: bool, measured: &[(Mode, Measured)]) -> String {
    let (rounds, writes) = (setup.rounds, setup.writes);
    let mut out = String::new();
    let order = mix(writes, &setup.mix);
    let shares: Vec<String> = Kind::ALL
        .iter()
        .map(|kind| {
            let count = order.iter().filter(|k| *k == kind).count();
            format!("{:.0}% {} ({count})", setup.mix.percent(*kind), kind.name())
        })
        .collect();
    let names: Vec<&str> = setup.modes.iter().map(|mode| mode.name()).collect();
    let _ = writeln!(
        out,
        "mutators {}; modes {}; {rounds} rounds x {writes} writes per mode, interleaved",
        setup.mutators,
        names.join(", ")
    );
    let _ = writeln!(
        out,
        "mix WEBHOOK_CALLS_MIX={}; each round: {}",
        setup.mix.text(),
        shares.join(", ")
    );
    if !condition && setup.modes.contains(&Mode::Condition) {
        let _ = writeln!(
            out,
            "sartor export condition printed no condition: `condition` is `rules`"
        );
    }
    let all: Vec<(Mode, Figures)> = setup
        .modes
        .iter()
        .map(|mode| (*mode, figures(*mode, measured)))
        .collect();
    for (mode, f) in &all {
        let mutated = if *mode == Mode::Gatekeeper {
            "mutated not counted".to_string()
        } else {
            format!("{:.0} mutated", f.mutated)
        };
        let _ = writeln!(
            out,
            "{:<10} {} writes: webhook calls per 1,000 writes {:.0} ({mutated}); latency mean {:.2} ms, p50 {:.2} ms, p99 {:.2} ms; CPU per write: kube-apiserver {:.3} ms, sartor {:.3} ms, gatekeeper {:.3} ms",
            mode.name(),
            f.writes,
            f.calls,
            f.mean,
            f.p50,
            f.p99,
            f.cpu,
            f.sartor_cpu,
            f.gatekeeper_cpu,
        );
    }
    let of = |wanted: Mode| {
        all.iter()
            .find(|(mode, _)| *mode == wanted)
            .map(|(_, figures)| *figures)
    };
    if let Some(none) = of(Mode::None) {
        for (mode, added) in &all {
            if *mode == Mode::None {
                continue;
            }
            let _ = writeln!(
                out,
                "added by {:<10}: mean {:+.2} ms, p50 {:+.2} ms, p99 {:+.2} ms; CPU per write: kube-apiserver {:+.3} ms, sartor {:+.3} ms, gatekeeper {:+.3} ms",
                mode.name(),
                added.mean - none.mean,
                added.p50 - none.p50,
                added.p99 - none.p99,
                added.cpu - none.cpu,
                added.sartor_cpu - none.sartor_cpu,
                added.gatekeeper_cpu - none.gatekeeper_cpu,
            );
        }
        if let (Some(with_condition), Some(gatekeeper)) =
            (of(Mode::Condition), of(Mode::Gatekeeper))
        {
            let by_condition = with_condition.mean - none.mean;
            let ratio = if by_condition > 0.0 {
                format!("{:.2}", (gatekeeper.mean - none.mean) / by_condition)
            } else {
                "n/a (condition adds nothing)".to_string()
            };
            let _ = writeln!(out, "added mean latency gatekeeper/condition: {ratio}");
        }
    }
    for (a, b) in [
        (Mode::Condition, Mode::Rules),
        (Mode::Condition, Mode::Gatekeeper),
    ] {
        if let (Some(fa), Some(fb)) = (of(a), of(b)) {
            let ratio = if fb.calls > 0.0 {
                format!("{:.3}", fa.calls / fb.calls)
            } else {
                format!("n/a (no calls with {})", b.name())
            };
            let _ = writeln!(out, "calls {}/{}: {ratio}", a.name(), b.name());
        }
    }
    let _ = writeln!(
        out,
        "calls per 1,000 writes by kind ({ATTRIBUTION} more writes of each per round and mode, outside the measured windows):"
    );
    let mut header = format!("  {:<38}", "kind");
    for name in &names {
        let _ = write!(header, " {name:>10}");
    }
    let _ = writeln!(out, "{header}");
    for kind in Kind::ALL {
        let mut line = format!("  {:<38}", kind.name());
        for mode in &setup.modes {
            let (writes, calls) = measured
                .iter()
                .filter(|(m, _)| m == mode)
                .flat_map(|(_, round)| round.kinds.iter())
                .filter(|(k, _, _)| *k == kind)
                .fold((0usize, 0u64), |(w, c), (_, writes, calls)| {
                    (w + writes, c + calls)
                });
            let per = format!("{:.0}", calls as f64 * 1000.0 / writes.max(1) as f64);
            let _ = write!(line, " {per:>10}");
        }
        let _ = writeln!(out, "{line}");
    }
    out
}
