//! The deployed fault trials: what a rollout, a deleted or killed replica,
//! a restarted API server or etcd, and an eviction cost the writes flowing
//! through the API server at the time ([`crate::writes`]), with the
//! install's own availability settings (3 replicas, `maxUnavailable: 0`,
//! the PodDisruptionBudget, the `preStop` pause, the drain at SIGTERM).
//!
//! Each step prints one line, `faults: STEP (POLICY): N written: ...`,
//! the figures docs/operations.md quotes.

use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::jiff::Timestamp;

use sartor_tests::cluster::run;
use sartor_tests::node::Node;
use serde_json::Value;

use crate::install::{NAMESPACE, REPLICAS, ensure, replica_names, replicas};
use crate::writes::{self, Counts, Predictions, Tally, Writes};
use crate::{Suite, eventually, json, repo_path, same};

/// Writes a second through the API server during every step: half Pods,
/// half ConfigMaps.
pub const RATE: u32 = 20;

/// How long the writes run before and after each fault.
const AROUND: Duration = Duration::from_secs(3);

/// The mutating webhook's failure policy during a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Fail,
    Ignore,
}

/// The fixture's mutators (v1), and the value the restart trials change the
/// stamp to afterwards.
const STAMPS: [(&str, &str); 2] = [("value: v1", "value: v2"), ("value: v1", "value: v3")];

/// Everything in place for writing: the install (kustomize) Available, the
/// namespace, the fixture's mutators enforced by every replica, and the
/// predictions of `sartor mutate`.
fn prepare(suite: &mut Suite) -> Result<Predictions, String> {
    ensure(suite)?;
    prepare_mutators(suite.node()?)
}

/// The namespace and the fixture's mutators, enforced by every replica, and
/// the predictions of `sartor mutate`.
fn prepare_mutators(node: &Node) -> Result<Predictions, String> {
    node.kubectl_with_input(
        &["apply", "-f", "-"],
        Some(&format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {}\n",
            writes::NAMESPACE
        )),
    )?;
    apply_mutators(node)?;
    let pods = replica_names(node, "sartor")?;
    crate::install::enforced_by(
        node,
        &[
            ("assign.mutations.sartor.dev", &["faults-read-only-root"]),
            ("assignmetadata.mutations.sartor.dev", &["faults-stamp"]),
        ],
        &pods,
    )?;
    Predictions::new(node.dir(), &STAMPS)
}

/// Applies the fixture's mutators (again: the restart trial changes one).
fn apply_mutators(node: &Node) -> Result<(), String> {
    node.kubectl(&["apply", "-f", &repo_path(writes::MUTATORS)])
        .map(|_| ())
}

/// Sets the mutating webhook's failurePolicy (the replicas leave it alone:
/// they own the CA bundle and the rules only).
fn set_policy(node: &Node, policy: Policy) -> Result<(), String> {
    node.kubectl(&[
        "patch",
        "mutatingwebhookconfiguration",
        "sartor-mutating",
        "--type=json",
        "-p",
        &format!(r#"[{{"op":"replace","path":"/webhooks/0/failurePolicy","value":"{policy:?}"}}]"#),
    ])?;
    std::thread::sleep(Duration::from_secs(2));
    same(
        "the failurePolicy two seconds after setting it",
        node.kubectl(&[
            "get",
            "mutatingwebhookconfiguration",
            "sartor-mutating",
            "-o",
            "jsonpath={.webhooks[0].failurePolicy}",
        ])?,
        format!("{policy:?}"),
    )
}

/// Runs `fault` with writes flowing from [`AROUND`] before it until
/// [`AROUND`] after, prints the step's counts, deletes what was written,
/// and returns the tally with `fault`'s own result.
fn during<T>(
    node: &Node,
    step: &str,
    policy: Policy,
    predictions: &Predictions,
    fault: impl FnOnce(&Writes) -> Result<T, String>,
) -> Result<(Tally, T), String> {
    let prefix = step.replace(' ', "-").to_lowercase();
    let writes = Writes::start(
        &node.kubeconfig,
        "sartor-webhook",
        &prefix,
        RATE,
        predictions,
    )?;
    std::thread::sleep(AROUND);
    let done = fault(&writes);
    std::thread::sleep(AROUND);
    let tally = writes.stop()?;
    writes::clear(node)?;
    let done = done?;
    println!(
        "faults: {step} ({policy:?}): {} in {:.1}s",
        tally.counts(|_| true),
        tally.ran.as_secs_f64()
    );
    Ok((tally, done))
}

/// `Ok` when every write was mutated as predicted, else the counts, the
/// endpoints over time, the writes that were not mutated, and what the API
/// server logged of the webhook calls that failed (a timeout, a reset, ...):
/// the last, as a log cut short keeps its end.
fn none_lost(node: &Node, step: &str, tally: &Tally) -> Result<(), String> {
    let counts = tally.counts(|_| true);
    let expected = Counts {
        mutated: counts.written,
        ..counts_of(counts.written)
    };
    if counts == expected && counts.written > 0 {
        return Ok(());
    }
    Err(format!(
        "{step}: {counts}\nthe stream started at {}\nendpoints:\n{}\nnot mutated:\n{}\nkube-apiserver, failed webhook calls (the last 12):\n{}",
        Timestamp::try_from(tally.started).map_or_else(|e| e.to_string(), |t| t.to_string()),
        tally.endpoint_changes(),
        tally.losses(),
        node.log_matching("kube-apiserver", "Failed calling webhook", 12)
    ))
}

fn counts_of(written: usize) -> Counts {
    Counts {
        written,
        ..Counts::default()
    }
}

/// A new tag of the image under test, in the node's containerd, so that a
/// rollout changes the Pod template as an upgrade does.
fn tag(node: &Node, suite_image: &crate::Image, tag: &str) -> Result<String, String> {
    let from = format!("{}:{}", suite_image.repository, suite_image.tag);
    let to = format!("{}:{tag}", suite_image.repository);
    run(
        Command::new("ctr")
            .arg("--address")
            .arg(node.node_dir().join("containerd/containerd.sock"))
            .args(["-n", "k8s.io", "images", "tag", "--force", &from, &to]),
        None,
    )
    .map_err(|e| format!("ctr images tag {from} {to}: {e}"))?;
    Ok(to)
}

/// Waits until the Deployment has rolled out: [`REPLICAS`] replicas ready
/// and none left terminating (an old replica serves until it exits).
fn rolled_out(node: &Node) -> Result<(), String> {
    node.kubectl(&[
        "rollout",
        "status",
        "deployment/sartor",
        "-n",
        NAMESPACE,
        "--timeout=240s",
    ])
    .map_err(|e| format!("{e}\n--- kubelet\n{}", node.log_tail("kubelet", 30)))?;
    eventually(
        "every replica ready, none terminating",
        Duration::from_secs(90),
        || {
            let pods = json(&node.kubectl(&[
                "get",
                "pods",
                "-n",
                NAMESPACE,
                "-l",
                "app.kubernetes.io/name=sartor",
                "-o",
                "json",
            ])?)?;
            let pods = pods["items"].as_array().cloned().unwrap_or_default();
            let ready = pods
                .iter()
                .filter(|p| p["status"]["containerStatuses"][0]["ready"] == true)
                .count();
            same(
                "(replicas, ready)",
                (pods.len(), ready),
                (REPLICAS, REPLICAS),
            )
        },
    )
}

/// Rolls the Deployment out to `image` (`kubectl set image`).
fn roll_to(node: &Node, image: &str) -> Result<(), String> {
    node.kubectl(&[
        "set",
        "image",
        "deployment/sartor",
        &format!("sartor={image}"),
        "-n",
        NAMESPACE,
    ])?;
    rolled_out(node)
}

/// A rollout to a new image tag while writes flow, with failurePolicy Fail
/// and then Ignore: every write mutated, none refused.
pub fn a_rollout_loses_no_write(suite: &mut Suite) -> Result<(), String> {
    let predictions = prepare(suite)?;
    let node = suite.node()?;
    for (n, policy) in [Policy::Fail, Policy::Ignore].into_iter().enumerate() {
        set_policy(node, policy)?;
        let image = tag(node, &suite.image, &format!("rollout-{n}"))?;
        let step = format!("rollout {}", policy_name(policy));
        let (tally, ()) = during(node, &step, policy, &predictions, |_| roll_to(node, &image))?;
        none_lost(node, &step, &tally)?;
    }
    // Back to the image the other trials expect.
    roll_to(
        node,
        &format!("{}:{}", suite.image.repository, suite.image.tag),
    )
}

fn policy_name(policy: Policy) -> &'static str {
    match policy {
        Policy::Fail => "fail",
        Policy::Ignore => "ignore",
    }
}

/// One replica's Pod deleted (gracefully, as `kubectl delete pod` does)
/// while writes flow: none lost, and the Deployment back to full strength.
pub fn a_deleted_replica_loses_no_write(suite: &mut Suite) -> Result<(), String> {
    let predictions = prepare(suite)?;
    let node = suite.node()?;
    set_policy(node, Policy::Fail)?;
    let victim = first_replica(node)?;
    let (tally, ()) = during(node, "delete", Policy::Fail, &predictions, |_| {
        node.kubectl(&["delete", "pod", &victim, "-n", NAMESPACE, "--wait=true"])?;
        rolled_out(node)
    })?;
    none_lost(node, "a replica deleted", &tally)
}

fn first_replica(node: &Node) -> Result<String, String> {
    replica_names(node, "sartor")?
        .into_iter()
        .next()
        .ok_or_else(|| "no replica".to_string())
}

/// One replica's container killed with SIGKILL through the runtime while
/// writes flow (failurePolicy Fail): the writes lost are those that reached
/// it before its endpoint left the Service, counted and printed; none sent
/// after that is lost.
pub fn a_killed_replica_loses_only_what_reached_it(suite: &mut Suite) -> Result<(), String> {
    let predictions = prepare(suite)?;
    let node = suite.node()?;
    set_policy(node, Policy::Fail)?;
    let (tally, (killed_at, victim)) =
        during(node, "sigkill", Policy::Fail, &predictions, |writes| {
            // The replica the API server's connections reached most: the one
            // whose count of answered requests grows most (the API server
            // reuses its kept-alive HTTP/1.1 connections to the Service, the
            // most recent first, each sent to one replica by kube-proxy).
            let pods = replica_names(node, "sartor")?;
            let before: Vec<u64> = pods
                .iter()
                .map(|p| crate::install::answered(node, std::slice::from_ref(p)))
                .collect::<Result<_, _>>()?;
            std::thread::sleep(Duration::from_secs(1));
            let mut busiest = (0, String::new());
            for (pod, before) in pods.iter().zip(before) {
                let grew = crate::install::answered(node, std::slice::from_ref(pod))?
                    .saturating_sub(before);
                if grew > busiest.0 {
                    busiest = (grew, pod.clone());
                }
            }
            let (grew, victim) = busiest;
            if victim.is_empty() {
                return Err("no replica answered a request in a second of writes".to_string());
            }
            println!("faults: sigkill: {victim} answered {grew} requests in the second before");
            let pod =
                json(&node.kubectl(&["get", "pod", &victim, "-n", NAMESPACE, "-o", "json"])?)?;
            let container = pod["status"]["containerStatuses"][0]["containerID"]
                .as_str()
                .and_then(|id| id.strip_prefix("containerd://"))
                .ok_or_else(|| format!("{victim} has no containerd container: {pod}"))?
                .to_string();
            let killed_at = writes.elapsed();
            run(
                Command::new("ctr")
                    .arg("--address")
                    .arg(node.node_dir().join("containerd/containerd.sock"))
                    .args([
                        "-n", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", &container,
                    ]),
                None,
            )
            .map_err(|e| format!("ctr tasks kill {container}: {e}"))?;
            // The kubelet restarts the container; it serves again once ready.
            eventually(
                "the killed replica restarted and ready",
                Duration::from_secs(90),
                || {
                    let pod = json(
                        &node.kubectl(&["get", "pod", &victim, "-n", NAMESPACE, "-o", "json"])?,
                    )?;
                    let status = &pod["status"]["containerStatuses"][0];
                    same(
                        "restarts and ready",
                        (status["restartCount"].as_u64(), status["ready"].as_bool()),
                        (Some(1), Some(true)),
                    )
                },
            )?;
            Ok((killed_at, victim))
        })?;
    // When the victim's endpoint stopped being ready.
    let gone = tally
        .endpoints
        .iter()
        .find(|e| e.at >= killed_at && !e.ready().contains(&victim.as_str()))
        .map(|e| e.at)
        .ok_or_else(|| {
            format!(
                "the killed replica's endpoint never left the ready set:\n{}",
                tally.endpoint_changes()
            )
        })?;
    let before_gone = tally.counts(|w| w.sent < gone);
    let after_gone = tally.counts(|w| w.sent >= gone);
    println!(
        "faults: sigkill: killed at {:.3}s, endpoint not ready at {:.3}s ({:.3}s later); \
         sent before: {before_gone}; sent after: {after_gone}",
        killed_at.as_secs_f64(),
        gone.as_secs_f64(),
        (gone - killed_at).as_secs_f64()
    );
    same(
        "writes sent after the killed replica's endpoint left (counts)",
        after_gone,
        Counts {
            mutated: after_gone.written,
            ..counts_of(after_gone.written)
        },
    )
    .map_err(|e| {
        format!(
            "{e}\n{}\nendpoints:\n{}",
            tally.losses(),
            tally.endpoint_changes()
        )
    })?;
    // What was lost is refused with the API server's reason, never
    // admitted unmutated or wrong (failurePolicy Fail).
    same(
        "writes sent before: unmutated and wrong",
        (
            before_gone.unmutated,
            before_gone.wrong,
            before_gone.unavailable,
        ),
        (0, 0, 0),
    )?;
    // In flight at the API server when the container died: sent before,
    // answered after.
    let in_flight = tally
        .writes
        .iter()
        .filter(|w| w.sent <= killed_at && w.sent + w.took >= killed_at)
        .count();
    println!(
        "faults: sigkill: {in_flight} writes in flight at the kill; lost:\n{}",
        tally.losses()
    );
    // A fresh replica in place of the restarted one, for the trials after.
    node.kubectl(&["delete", "pod", &victim, "-n", NAMESPACE, "--wait=true"])?;
    rolled_out(node)
}

/// The API server (then etcd) killed and started again while the replicas
/// serve: writes fail while it is down (the API server's doing, counted
/// apart); every write it admits is mutated as predicted, the replicas stay
/// up (no restart), and a mutator changed afterwards is enforced by all of
/// them (they catch up).
pub fn an_api_server_or_etcd_restart_gives_no_wrong_answer(
    suite: &mut Suite,
) -> Result<(), String> {
    let predictions = prepare(suite)?;
    let node = suite.node()?;
    set_policy(node, Policy::Fail)?;
    let before = restarts(node)?;
    for (i, component) in ["kube-apiserver", "etcd"].into_iter().enumerate() {
        let step = format!("{component} restart");
        let stamp = STAMPS[i].1.trim_start_matches("value: ");
        let (tally, caught_up_at) = during(node, &step, Policy::Fail, &predictions, |writes| {
            control(node, "kill", component)?;
            std::thread::sleep(Duration::from_secs(3));
            control(node, "start", component)?;
            eventually(
                "the API server ready again",
                Duration::from_secs(90),
                || node.kubectl(&["get", "--raw", "/readyz"]),
            )?;
            // A change made after the restart reaches every replica.
            let changed_at = writes.elapsed();
            node.kubectl(&[
                "patch",
                "assignmetadata.mutations.sartor.dev",
                "faults-stamp",
                "--type=merge",
                "-p",
                &format!(r#"{{"spec":{{"parameters":{{"assign":{{"value":"{stamp}"}}}}}}}}"#),
            ])?;
            let pods = replica_names(node, "sartor")?;
            crate::install::enforced_by(
                node,
                &[("assignmetadata.mutations.sartor.dev", &["faults-stamp"])],
                &pods,
            )?;
            let caught_up_at = writes.elapsed();
            println!(
                "faults: {component} restart: every replica enforced a change made after it {:.1}s later",
                (caught_up_at - changed_at).as_secs_f64()
            );
            Ok(caught_up_at)
        })?;
        let counts = tally.counts(|_| true);
        same(
            &format!("{step}: wrong answers, unmutated, refused"),
            (counts.wrong, counts.unmutated, counts.refused),
            (0, 0, 0),
        )
        .map_err(|e| format!("{e}\n{}", tally.losses()))?;
        // Writes sent once every replica says it enforces the change carry
        // it (the prediction with the new stamp, index i + 1).
        let late: Vec<&writes::Write> = tally
            .writes
            .iter()
            .filter(|w| w.sent > caught_up_at)
            .filter(|w| w.outcome != writes::Outcome::Mutated(i + 1))
            .collect();
        if !late.is_empty() {
            return Err(format!(
                "{step}: {} writes sent after every replica reported the change without it, first {:?}",
                late.len(),
                late.first()
            ));
        }
    }
    same(
        "the replicas' restarts across both",
        restarts(node)?,
        before,
    )?;
    // The fixture's stamp again, for the trials after this one.
    apply_mutators(node)?;
    Ok(())
}

/// (Pod, restart count) of every replica.
fn restarts(node: &Node) -> Result<Vec<(String, u64)>, String> {
    let mut counts: Vec<(String, u64)> = replicas(node, "sartor")?
        .iter()
        .map(|p| {
            (
                p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                p["status"]["containerStatuses"][0]["restartCount"]
                    .as_u64()
                    .unwrap_or_default(),
            )
        })
        .collect();
    counts.sort();
    Ok(counts)
}

/// `tests/k8s/node control DIR VERB COMPONENT`.
fn control(node: &Node, verb: &str, component: &str) -> Result<(), String> {
    run(
        Command::new(sartor_tests::node::script())
            .arg("control")
            .arg(node.node_dir())
            .args([verb, component]),
        None,
    )
    .map(|_| ())
    .map_err(|e| format!("tests/k8s/node control {verb} {component}: {e}"))
}

/// Every replica evicted through the Eviction API, as `kubectl drain`
/// does (retrying while the PodDisruptionBudget refuses): at least one
/// replica ready at every moment, and no write lost.
pub fn an_eviction_keeps_a_replica_serving(suite: &mut Suite) -> Result<(), String> {
    let predictions = prepare(suite)?;
    let node = suite.node()?;
    set_policy(node, Policy::Fail)?;
    let victims = replica_names(node, "sartor")?;
    let (tally, refusals) = during(node, "eviction", Policy::Fail, &predictions, |_| {
        let mut refusals = 0;
        let mut left = victims.clone();
        let deadline = Instant::now() + Duration::from_secs(300);
        while !left.is_empty() {
            if Instant::now() > deadline {
                return Err(format!("not evicted after 5 minutes: {left:?}"));
            }
            let mut still = Vec::new();
            for pod in left {
                match evict(node, &pod)? {
                    Evicted::Yes => {}
                    Evicted::Refused => {
                        refusals += 1;
                        still.push(pod);
                    }
                }
            }
            left = still;
            std::thread::sleep(Duration::from_secs(1));
        }
        rolled_out(node)?;
        Ok(refusals)
    })?;
    println!("faults: eviction: {refusals} evictions refused by the PodDisruptionBudget");
    if refusals == 0 {
        return Err("the PodDisruptionBudget refused no eviction: the trial proves nothing".into());
    }
    let fewest = tally
        .endpoints
        .iter()
        .map(|e| e.ready().len())
        .min()
        .unwrap_or_default();
    if fewest < 1 {
        return Err(format!(
            "a moment with no ready replica:\n{}",
            tally.endpoint_changes()
        ));
    }
    none_lost(node, "eviction", &tally)
}

enum Evicted {
    Yes,
    Refused,
}

/// Asks the Eviction API to evict `pod`.
fn evict(node: &Node, pod: &str) -> Result<Evicted, String> {
    let eviction = format!(
        r#"{{"apiVersion":"policy/v1","kind":"Eviction","metadata":{{"name":"{pod}","namespace":"{NAMESPACE}"}}}}"#
    );
    let path = format!("/api/v1/namespaces/{NAMESPACE}/pods/{pod}/eviction");
    let file = node.dir().join("eviction.json");
    std::fs::write(&file, eviction).map_err(|e| e.to_string())?;
    match node.kubectl(&["create", "--raw", &path, "-f", &file.display().to_string()]) {
        Ok(_) => Ok(Evicted::Yes),
        Err(e) if e.contains("disruption budget") || e.contains("TooManyRequests") => {
            Ok(Evicted::Refused)
        }
        Err(e) if e.contains("NotFound") || e.contains("not found") => Ok(Evicted::Yes),
        Err(e) => Err(e),
    }
}

/// A replica's shutdown, watched: its endpoint stops being ready before it
/// gets SIGTERM (the preStop pause), it answers what it has in flight, and
/// it exits well inside the termination grace period.
pub fn a_replica_shuts_down_in_order(suite: &mut Suite) -> Result<(), String> {
    let predictions = prepare(suite)?;
    let node = suite.node()?;
    set_policy(node, Policy::Fail)?;
    let victim = first_replica(node)?;
    // Its log, followed until the container exits.
    let logs = node
        .kubectl_command()
        .args(["logs", "-f", &victim, "-n", NAMESPACE])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("kubectl logs -f: {e}"))?;
    std::thread::sleep(Duration::from_secs(1));
    let (tally, (deleted_at, exited_at)) =
        during(node, "shutdown", Policy::Fail, &predictions, |writes| {
            let deleted_at = writes.elapsed();
            node.kubectl(&[
                "delete",
                "pod",
                &victim,
                "-n",
                NAMESPACE,
                "--wait=true",
                "--timeout=60s",
            ])?;
            let exited_at = writes.elapsed();
            rolled_out(node)?;
            Ok((deleted_at, exited_at))
        })?;
    let output = logs.wait_with_output().map_err(|e| e.to_string())?;
    let log = String::from_utf8_lossy(&output.stdout).to_string();
    let at = |message: &str| -> Result<f64, String> {
        log.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|l| l["message"] == message)
            .and_then(|l| l["timestamp"].as_str().map(str::to_string))
            .and_then(|t| seconds_since(&t, tally.started))
            .ok_or_else(|| format!("the replica's log has no {message:?}:\n{log}"))
    };
    let sigterm = at("SIGTERM received")?;
    let shut_down = at("shut down")?;
    let not_ready = tally
        .endpoints
        .iter()
        .find(|e| e.at >= deleted_at && !e.ready().contains(&victim.as_str()))
        .map(|e| e.at.as_secs_f64())
        .ok_or("the deleted replica's endpoint never left the ready set")?;
    println!(
        "faults: shutdown: deleted at {:.3}s, endpoint not ready at {:.3}s, SIGTERM at {:.3}s, \
         shut down at {:.3}s, Pod gone at {:.3}s (from the stream's start)",
        deleted_at.as_secs_f64(),
        not_ready,
        sigterm,
        shut_down,
        exited_at.as_secs_f64()
    );
    let deleted = deleted_at.as_secs_f64();
    let order = [
        ("the endpoint not ready before SIGTERM", not_ready < sigterm),
        (
            "SIGTERM after the 5 s preStop pause",
            sigterm >= deleted + 4.5,
        ),
        ("shut down after SIGTERM", shut_down >= sigterm),
        (
            "shut down inside the 30 s grace period",
            shut_down < deleted + 30.0,
        ),
        (
            "the Pod gone after it shut down",
            exited_at.as_secs_f64() >= shut_down,
        ),
    ];
    for (what, held) in order {
        if !held {
            return Err(format!("{what}: it did not\n{log}"));
        }
    }
    none_lost(node, "shutdown", &tally)
}

/// Seconds from `start` to the RFC 3339 `timestamp` (a log line's).
fn seconds_since(timestamp: &str, start: SystemTime) -> Option<f64> {
    let at: Timestamp = timestamp.parse().ok()?;
    let start = Timestamp::try_from(start).ok()?;
    Some(at.duration_since(start).as_secs_f64())
}

/// What the `preStop` pause is worth: a rollout with writes flowing after
/// the pause is taken out of the Deployment (failurePolicy Fail). The
/// writes lost are printed beside the rollout with it
/// ([`a_rollout_loses_no_write`]: none); the install is put back after.
pub fn the_pre_stop_pause_is_measured_by_turning_it_off(suite: &mut Suite) -> Result<(), String> {
    let predictions = prepare(suite)?;
    let overlay = suite
        .overlay
        .clone()
        .ok_or("no kustomize install to put back")?;
    let node = suite.node()?;
    set_policy(node, Policy::Fail)?;
    node.kubectl(&[
        "patch",
        "deployment",
        "sartor",
        "-n",
        NAMESPACE,
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/spec/template/spec/containers/0/lifecycle"}]"#,
    ])?;
    rolled_out(node)?;
    let image = tag(node, &suite.image, "no-pre-stop")?;
    let (tally, ()) = during(
        node,
        "rollout without preStop",
        Policy::Fail,
        &predictions,
        |_| roll_to(node, &image),
    )?;
    let counts = tally.counts(|_| true);
    println!(
        "faults: preStop's worth: a rollout without it lost {} of {} writes \
         (refused {}); with it, none (faults::a_rollout_loses_no_write)\n{}",
        counts.written - counts.mutated,
        counts.written,
        counts.refused,
        tally.losses()
    );
    // The install as documented again: the pause, the image under test.
    node.kubectl(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "-k",
        &overlay.display().to_string(),
    ])?;
    rolled_out(node)?;
    same(
        "the preStop command after re-applying the install",
        node.kubectl(&[
            "get",
            "deployment",
            "sartor",
            "-n",
            NAMESPACE,
            "-o",
            "jsonpath={.spec.template.spec.containers[0].lifecycle.preStop.sleep.seconds}",
        ])?,
        "5".to_string(),
    )?;
    same(
        "(wrong answers, unmutated) without the pause",
        (counts.wrong, counts.unmutated),
        (0, 0),
    )
}

/// `helm install` with failurePolicy Fail, then `helm upgrade` with a
/// changed value that rolls the replicas, with writes flowing: none lost;
/// again with failurePolicy Ignore. Uninstalled after.
pub fn a_helm_upgrade_loses_no_write(suite: &mut Suite) -> Result<(), String> {
    // Run alone, the kustomize install is still there: not two installs.
    if suite.overlay.is_some() {
        crate::install::kubectl_delete_leaves_no_webhook_configuration(suite)?;
    }
    let node = suite.node()?;
    node.kubectl(&["apply", "-f", &repo_path("manifests/namespace.yaml")])?;
    let image = [
        "--set".to_string(),
        format!("image.repository={}", suite.image.repository),
        "--set".to_string(),
        format!("image.tag={}", suite.image.tag),
    ];
    let helm = |verb: &str, values: &[&str]| -> Result<String, String> {
        let chart = repo_path("charts/sartor");
        let mut args = vec![verb, "sartor", &chart];
        args.extend(["--namespace", NAMESPACE, "--wait", "--timeout=4m"]);
        if verb == "upgrade" {
            // The replicas own the webhook's derived rules (field manager
            // `sartor`); Helm 4 applies server-side, as the chart's README
            // says.
            args.push("--force-conflicts");
        }
        args.extend(image.iter().map(String::as_str));
        for value in values {
            args.extend(["--set", value]);
        }
        node.helm(&args)
    };
    helm("install", &["failurePolicy=Fail"])?;
    rolled_out(node)?;
    let predictions = prepare_mutators(node)?;
    for (policy, cpu) in [(Policy::Fail, "50m"), (Policy::Ignore, "60m")] {
        let failure_policy = format!("failurePolicy={policy:?}");
        // The policy first (no rollout), then the change that rolls.
        helm("upgrade", &[&failure_policy, "resources.requests.cpu=40m"])?;
        rolled_out(node)?;
        let step = format!("helm upgrade {}", policy_name(policy));
        let requests = format!("resources.requests.cpu={cpu}");
        let (tally, ()) = during(node, &step, policy, &predictions, |_| {
            helm("upgrade", &[&failure_policy, &requests])?;
            rolled_out(node)
        })?;
        none_lost(node, &step, &tally)?;
    }
    crate::install::helm_uninstall(node)
}
