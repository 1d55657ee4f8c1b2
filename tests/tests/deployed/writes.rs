//! A steady stream of writes through the API server while a fault happens,
//! and what became of each: admitted and mutated as `sartor mutate`
//! predicts, admitted unmutated, refused (with the API server's reason), or
//! not taken at all because the API server itself was unavailable.
//!
//! ```text
//! Writes::start ── every 1/rate s, alternately ──> POST a Pod  ┐ each in a task of
//!      │                                          POST a ConfigMap ┘ its own, so a slow
//!      │                                                             answer slows no other
//!      ├── every 100 ms: the webhook Service's EndpointSlices (who is ready)
//!      └── Writes::stop ──> Tally (every write, in the order sent)
//! ```
//!
//! The Pods carry a scheduling gate, so they cost the node no containers;
//! both kinds are created for real (stored in etcd), in the namespace
//! [`NAMESPACE`], and deleted by [`clear`].

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde_json::Value;

use crate::{json, repo_path, sartor};

/// Where the writes go.
pub const NAMESPACE: &str = "faults";

/// The fixtures: the mutators and the two objects written.
pub const MUTATORS: &str = "tests/fixtures/faults/mutators.yaml";
const POD: &str = "tests/fixtures/faults/pod.yaml";
const CONFIG_MAP: &str = "tests/fixtures/faults/configmap.yaml";

/// The two kinds written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Pod,
    ConfigMap,
}

/// What became of one write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Stored with every field the prediction (its index among
    /// [`Predictions`]) sets.
    Mutated(usize),
    /// Stored with none of them: the webhook was skipped (failurePolicy
    /// Ignore) or not called.
    Unmutated,
    /// Stored with some of them, or other values: a wrong answer.
    Wrong(String),
    /// Refused because calling the webhook failed (failurePolicy Fail).
    Refused(String),
    /// Not admitted for another reason: the API server or etcd down, or
    /// no answer in time. Not the webhook's doing.
    Unavailable(String),
}

/// One write.
#[derive(Debug, Clone)]
pub struct Write {
    pub kind: Kind,
    pub name: String,
    /// When it was sent, from the start of the stream.
    pub sent: Duration,
    /// How long the API server took to answer.
    pub took: Duration,
    pub outcome: Outcome,
}

/// What each kind is expected to look like after sartor, as leaves:
/// (JSON pointer, value) where `sartor mutate` changed the object. More
/// than one when the mutators change during a trial.
#[derive(Debug, Clone)]
pub struct Predictions {
    by_kind: BTreeMap<Kind, Vec<Vec<(String, Value)>>>,
}

impl Predictions {
    /// The predictions of `sartor mutate` with the fixture's mutators, and
    /// with each of `variants` (the fixture's text with one replacement).
    pub fn new(dir: &Path, variants: &[(&str, &str)]) -> Result<Predictions, String> {
        let fixture =
            std::fs::read_to_string(repo_path(MUTATORS)).map_err(|e| format!("{MUTATORS}: {e}"))?;
        let mut sets = vec![repo_path(MUTATORS)];
        for (i, (from, to)) in variants.iter().enumerate() {
            let path = dir.join(format!("mutators-{i}.yaml"));
            std::fs::write(&path, fixture.replace(from, to))
                .map_err(|e| format!("{}: {e}", path.display()))?;
            sets.push(path.display().to_string());
        }
        let mut by_kind = BTreeMap::new();
        for (kind, object) in [(Kind::Pod, POD), (Kind::ConfigMap, CONFIG_MAP)] {
            let original = template(object)?;
            let mut predictions = Vec::new();
            for set in &sets {
                let mutated = json(&sartor(&[
                    "mutate",
                    "--mutators",
                    set,
                    "-o",
                    "json",
                    &repo_path(object),
                ])?)?;
                let mut changed = Vec::new();
                leaves_changed("", &mutated, &original, &mut changed);
                if changed.is_empty() {
                    return Err(format!("sartor mutate changes nothing in {object}"));
                }
                predictions.push(changed);
            }
            by_kind.insert(kind, predictions);
        }
        Ok(Predictions { by_kind })
    }

    /// Which prediction `stored` meets, or how it misses all of them.
    fn judge(&self, kind: Kind, stored: &Value) -> Outcome {
        let Some(predictions) = self.by_kind.get(&kind) else {
            return Outcome::Wrong(format!("no prediction for {kind:?}"));
        };
        let mut misses = Vec::new();
        let mut any_set = false;
        for (i, prediction) in predictions.iter().enumerate() {
            let missed: Vec<String> = prediction
                .iter()
                .filter(|(pointer, value)| stored.pointer(pointer) != Some(value))
                .map(|(pointer, value)| {
                    format!("{pointer}: {:?}, not {value}", stored.pointer(pointer))
                })
                .collect();
            if missed.is_empty() {
                return Outcome::Mutated(i);
            }
            any_set |= missed.len() < prediction.len();
            misses.push(missed.join("; "));
        }
        if any_set {
            Outcome::Wrong(misses.join(" | "))
        } else {
            Outcome::Unmutated
        }
    }
}

/// A fixture object as JSON.
fn template(path: &str) -> Result<Value, String> {
    let text = std::fs::read_to_string(repo_path(path)).map_err(|e| format!("{path}: {e}"))?;
    serde_yaml::from_str(&text).map_err(|e| format!("{path}: {e}"))
}

/// The leaves of `new` that differ from `old` (or are not in it).
fn leaves_changed(pointer: &str, new: &Value, old: &Value, out: &mut Vec<(String, Value)>) {
    match new {
        Value::Object(map) => {
            for (key, value) in map {
                let escaped = key.replace('~', "~0").replace('/', "~1");
                let old = old.get(key).unwrap_or(&Value::Null);
                leaves_changed(&format!("{pointer}/{escaped}"), value, old, out);
            }
        }
        Value::Array(items) => {
            for (i, value) in items.iter().enumerate() {
                let old = old.get(i).unwrap_or(&Value::Null);
                leaves_changed(&format!("{pointer}/{i}"), value, old, out);
            }
        }
        leaf if leaf != old => out.push((pointer.to_string(), leaf.clone())),
        _ => {}
    }
}

/// The webhook Service's endpoints at one moment: (Pod name, ready,
/// terminating) for each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    pub at: Duration,
    pub endpoints: Vec<(String, bool, bool)>,
}

impl Endpoints {
    /// The Pods ready at that moment.
    pub fn ready(&self) -> Vec<&str> {
        self.endpoints
            .iter()
            .filter(|(_, ready, _)| *ready)
            .map(|(pod, _, _)| pod.as_str())
            .collect()
    }
}

/// Every write of a stream, and the endpoints seen while it ran.
#[derive(Debug, Clone)]
pub struct Tally {
    pub writes: Vec<Write>,
    pub endpoints: Vec<Endpoints>,
    /// How long the stream ran.
    pub ran: Duration,
    /// When it started, by the wall clock (the writes' times count from it).
    pub started: SystemTime,
}

/// A running stream of writes; [`Writes::stop`] ends it.
pub struct Writes {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<Tally, String>>>,
    started: Instant,
}

impl Writes {
    /// Starts writing `rate` objects a second (Pods and ConfigMaps in
    /// turn) named `prefix-N`, with `predictions` to judge them by.
    pub fn start(
        kubeconfig: &Path,
        service: &str,
        prefix: &str,
        rate: u32,
        predictions: &Predictions,
    ) -> Result<Writes, String> {
        let kubeconfig = kubeconfig.to_path_buf();
        let service = service.to_string();
        let prefix = prefix.to_string();
        let predictions = Arc::new(predictions.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let thread = {
            let stream = Stream {
                kubeconfig,
                service,
                prefix,
                rate,
                predictions,
                stop: stop.clone(),
                started,
            };
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .map_err(|e| format!("a runtime for the writes: {e}"))?;
                runtime.block_on(stream.run())
            })
        };
        Ok(Writes {
            stop,
            thread: Some(thread),
            started,
        })
    }

    /// How long the stream has run.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Stops sending, waits for the writes in flight, and returns them all.
    pub fn stop(mut self) -> Result<Tally, String> {
        self.stop.store(true, Ordering::SeqCst);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(tally)) => tally,
            Some(Err(_)) => Err("the writes' thread panicked".to_string()),
            None => Err("the writes were already stopped".to_string()),
        }
    }
}

impl Drop for Writes {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

async fn client(kubeconfig: &Path) -> Result<Client, String> {
    let config = kube::config::Kubeconfig::read_from(kubeconfig).map_err(|e| e.to_string())?;
    let mut config =
        kube::Config::from_custom_kubeconfig(config, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| e.to_string())?;
    // A write the API server has not answered in 30 s counts as unavailable.
    config.read_timeout = Some(Duration::from_secs(30));
    config.connect_timeout = Some(Duration::from_secs(5));
    Client::try_from(config).map_err(|e| e.to_string())
}

/// What the writes' thread runs with.
struct Stream {
    kubeconfig: std::path::PathBuf,
    service: String,
    prefix: String,
    rate: u32,
    predictions: Arc<Predictions>,
    stop: Arc<AtomicBool>,
    started: Instant,
}

impl Stream {
    async fn run(self) -> Result<Tally, String> {
        let Stream {
            kubeconfig,
            service,
            prefix,
            rate,
            predictions,
            stop,
            started,
        } = self;
        let wall = SystemTime::now() - started.elapsed();
        let client = client(&kubeconfig).await?;
        let pod = template(POD)?;
        let config_map = template(CONFIG_MAP)?;
        let sampler = {
            let client = client.clone();
            let stop = stop.clone();
            tokio::spawn(async move { sample_endpoints(client, &service, stop, started).await })
        };
        let mut tasks = tokio::task::JoinSet::new();
        let mut ticks = tokio::time::interval(Duration::from_secs(1) / rate.max(1));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let mut n = 0u64;
        while !stop.load(Ordering::SeqCst) {
            ticks.tick().await;
            n += 1;
            let kind = if n % 2 == 1 {
                Kind::Pod
            } else {
                Kind::ConfigMap
            };
            let name = format!("{prefix}-{n}");
            let mut object = match kind {
                Kind::Pod => pod.clone(),
                Kind::ConfigMap => config_map.clone(),
            };
            object["metadata"]["name"] = Value::from(name.clone());
            object["metadata"]["labels"] = serde_json::json!({ "faults.sartor.dev/run": prefix });
            let client = client.clone();
            let predictions = predictions.clone();
            tasks.spawn(async move {
                let sent = started.elapsed();
                let stored = create(client, kind, object).await;
                let took = started.elapsed().saturating_sub(sent);
                let outcome = match stored {
                    Ok(stored) => predictions.judge(kind, &stored),
                    Err(outcome) => outcome,
                };
                Write {
                    kind,
                    name,
                    sent,
                    took,
                    outcome,
                }
            });
        }
        let ran = started.elapsed();
        let mut writes = Vec::new();
        while let Some(write) = tasks.join_next().await {
            writes.push(write.map_err(|e| format!("a write's task: {e}"))?);
        }
        writes.sort_by_key(|w| w.sent);
        let endpoints = sampler
            .await
            .map_err(|e| format!("the endpoint sampler: {e}"))?;
        Ok(Tally {
            writes,
            endpoints,
            ran,
            started: wall,
        })
    }
}

/// Creates `object` and returns it as stored, or the outcome of a refusal.
async fn create(client: Client, kind: Kind, object: Value) -> Result<Value, Outcome> {
    let params = PostParams::default();
    let stored = match kind {
        Kind::Pod => {
            let pod: Pod = serde_json::from_value(object)
                .map_err(|e| Outcome::Wrong(format!("the Pod template: {e}")))?;
            Api::<Pod>::namespaced(client, NAMESPACE)
                .create(&params, &pod)
                .await
                .map(|p| serde_json::to_value(p).unwrap_or_default())
        }
        Kind::ConfigMap => {
            let config_map: ConfigMap = serde_json::from_value(object)
                .map_err(|e| Outcome::Wrong(format!("the ConfigMap template: {e}")))?;
            Api::<ConfigMap>::namespaced(client, NAMESPACE)
                .create(&params, &config_map)
                .await
                .map(|c| serde_json::to_value(c).unwrap_or_default())
        }
    };
    stored.map_err(|error| match error {
        kube::Error::Api(status) if status.message.contains("failed calling webhook") => {
            Outcome::Refused(status.message)
        }
        kube::Error::Api(status) => Outcome::Unavailable(format!(
            "{} {}: {}",
            status.code, status.reason, status.message
        )),
        other => Outcome::Unavailable(other.to_string()),
    })
}

async fn sample_endpoints(
    client: Client,
    service: &str,
    stop: Arc<AtomicBool>,
    started: Instant,
) -> Vec<Endpoints> {
    let api = Api::<EndpointSlice>::namespaced(client, crate::install::NAMESPACE);
    let params = ListParams::default().labels(&format!("kubernetes.io/service-name={service}"));
    let mut seen: Vec<Endpoints> = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        if let Ok(Ok(slices)) =
            tokio::time::timeout(Duration::from_secs(2), api.list(&params)).await
        {
            let mut endpoints: Vec<(String, bool, bool)> = slices
                .items
                .iter()
                .flat_map(|s| s.endpoints.iter())
                .map(|e| {
                    let conditions = e.conditions.clone().unwrap_or_default();
                    (
                        e.target_ref
                            .as_ref()
                            .and_then(|r| r.name.clone())
                            .unwrap_or_default(),
                        conditions.ready.unwrap_or(false),
                        conditions.terminating.unwrap_or(false),
                    )
                })
                .collect();
            endpoints.sort();
            // Only the changes.
            if seen.last().is_none_or(|last| last.endpoints != endpoints) {
                seen.push(Endpoints {
                    at: started.elapsed(),
                    endpoints,
                });
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    seen
}

/// Counts by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub written: usize,
    pub mutated: usize,
    pub unmutated: usize,
    pub refused: usize,
    pub wrong: usize,
    pub unavailable: usize,
}

impl Tally {
    /// Counts of the writes `which` selects.
    pub fn counts(&self, which: impl Fn(&Write) -> bool) -> Counts {
        let mut counts = Counts::default();
        for write in self.writes.iter().filter(|w| which(w)) {
            counts.written += 1;
            match write.outcome {
                Outcome::Mutated(_) => counts.mutated += 1,
                Outcome::Unmutated => counts.unmutated += 1,
                Outcome::Refused(_) => counts.refused += 1,
                Outcome::Wrong(_) => counts.wrong += 1,
                Outcome::Unavailable(_) => counts.unavailable += 1,
            }
        }
        counts
    }

    /// The writes that were not mutated as predicted, for an error message.
    pub fn losses(&self) -> String {
        let lost: Vec<String> = self
            .writes
            .iter()
            .filter(|w| !matches!(w.outcome, Outcome::Mutated(_)))
            .take(12)
            .map(|w| {
                format!(
                    "  {:>7.3}s +{:.3}s {:?} {}: {:?}",
                    w.sent.as_secs_f64(),
                    w.took.as_secs_f64(),
                    w.kind,
                    w.name,
                    w.outcome
                )
            })
            .collect();
        lost.join("\n")
    }

    /// The endpoint changes, one line each.
    pub fn endpoint_changes(&self) -> String {
        self.endpoints
            .iter()
            .map(|e| {
                let list: Vec<String> = e
                    .endpoints
                    .iter()
                    .map(|(pod, ready, terminating)| {
                        let state = match (ready, terminating) {
                            (true, _) => "ready",
                            (false, true) => "terminating",
                            (false, false) => "not ready",
                        };
                        format!("{pod} {state}")
                    })
                    .collect();
                format!("  {:>7.3}s {}", e.at.as_secs_f64(), list.join(", "))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} written: {} mutated, {} unmutated, {} refused, {} wrong, {} API server unavailable",
            self.written, self.mutated, self.unmutated, self.refused, self.wrong, self.unavailable
        )
    }
}

/// Deletes every object the writes made.
pub fn clear(node: &sartor_tests::node::Node) -> Result<(), String> {
    node.kubectl(&[
        "delete",
        "pods,configmaps",
        "-n",
        NAMESPACE,
        "-l",
        "faults.sartor.dev/run",
        "--wait=false",
    ])
    .map(|_| ())
}
