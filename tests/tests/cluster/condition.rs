//! The webhook's derived match condition (`sartor export condition`, what
//! `sartor serve` keeps on its webhook as `sartor-may-change`) on the real
//! API server: it is taken, it never errors, and every object it keeps from
//! sartor is one `sartor mutate` predicts no change for.
//!
//! The condition is put on a probe webhook that nothing answers
//! (`https://127.0.0.1:1`, `failurePolicy: Fail`): an object the condition
//! skips is created, one it sends is refused with "failed calling webhook",
//! and a condition that errors is refused with the expression's error. So
//! the API server's own CEL decides, with no sartor replica in the way.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sartor_differential::generate::{self, Mode};
use sartor_tests::cluster::ControlPlane;
use serde_json::{Value, json};

use crate::export::{
    Proof, WIDGET_CRD, create, env_number, examples_proof, library_proof, sartor_output,
    valid_name, without_allocations, without_invalid,
};
use crate::{Suite, eventually, json, same};

mod replica;
pub use replica::a_replica_installs_the_condition_and_stores_what_sartor_mutate_predicts;

/// Where the probe's round marker is created.
const ROUND_NAMESPACE: &str = "condition-probe";

/// Generated sets (the differential generator, the seed of
/// `SARTOR_CONDITION_SEED`, 1 by default; `SARTOR_CONDITION_CASES` of them,
/// 40 by default, the documented long run takes 400) and the examples:
/// each set's condition is taken by the API server, never errors, and
/// skips only objects `sartor mutate` leaves unchanged. Creates the sets'
/// namespaces and leaves them (a deleted one would stay terminating, with
/// no namespace controller, for the trials after).
pub fn skipped_objects_are_ones_sartor_would_not_change(suite: &mut Suite) -> Result<(), String> {
    let count = env_number("SARTOR_CONDITION_CASES", 40)?;
    let seed = env_number("SARTOR_CONDITION_SEED", 1)?;
    let plane = &suite.plane;
    let dir = plane.dir().join("condition-proof");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut proofs = vec![examples_proof()?, library_proof()?];
    proofs.extend(generate::cases(seed, Mode::Normal, count).map(|case| Proof::of(&case)));
    let existing = plane.kubectl(&["get", "namespaces", "-o", "name"])?;
    let needed: BTreeSet<&str> = proofs
        .iter()
        .filter_map(|proof| proof.namespace["metadata"]["name"].as_str())
        .chain([ROUND_NAMESPACE])
        .collect();
    for name in needed {
        if !existing
            .lines()
            .any(|line| line == format!("namespace/{name}"))
        {
            plane.kubectl(&["create", "namespace", name])?;
        }
    }
    plane.kubectl_with_input(&["apply", "-f", "-"], Some(WIDGET_CRD))?;
    plane.wait_established(Some("widgets.example.com"))?;
    let resources = dir.join("api-resources.txt");
    let listed = plane.kubectl(&["api-resources"])?;
    std::fs::write(&resources, listed).map_err(|e| format!("{}: {e}", resources.display()))?;
    let result = prove(plane, &dir, &resources, &proofs, count);
    let _ = plane.kubectl(&[
        "delete",
        "mutatingwebhookconfiguration",
        PROBE,
        "--ignore-not-found",
    ]);
    let _ = plane.kubectl_with_input(&["delete", "-f", "-"], Some(WIDGET_CRD));
    result
}

/// The probe webhook configuration's name.
const PROBE: &str = "sartor-condition-probe";

/// Predicts every set's objects, then admits them under each set's
/// condition; fails with every object skipped that sartor would change,
/// every condition refused or erroring, or when too few objects were seen.
fn prove(
    plane: &ControlPlane,
    dir: &Path,
    resources: &Path,
    proofs: &[Proof],
    count: usize,
) -> Result<(), String> {
    let mut tally = Tally::default();
    let mut prepared = Vec::new();
    for (index, proof) in proofs.iter().enumerate() {
        let files = dir.join(index.to_string());
        if let Some(ready) = prepare(plane, proof, &files, resources, &mut tally)? {
            prepared.push(ready);
        }
    }
    let mut differences = Vec::new();
    for (round, ready) in prepared.iter().enumerate() {
        differences.extend(admit(plane, ready, round, &mut tally)?);
    }
    eprintln!("{tally}");
    if !differences.is_empty() {
        return Err(format!(
            "{} differences:\n{}",
            differences.len(),
            differences.join("\n\n")
        ));
    }
    if tally.objects() < count / 3 {
        return Err(format!("too few objects seen:\n{tally}"));
    }
    Ok(())
}

/// A set ready to admit: its mutators (those sartor loads), its
/// Namespace, its condition (`None`: every object is sent) and its objects.
struct Ready {
    id: String,
    mutators: Vec<Value>,
    namespace: Value,
    condition: Option<String>,
    objects: Vec<Object>,
    /// Where its files are: `mutators.yaml`, `namespace.yaml`.
    files: PathBuf,
    /// The cluster's `kubectl api-resources`.
    resources: PathBuf,
}

impl Ready {
    fn namespace_name(&self) -> &str {
        self.namespace["metadata"]["name"]
            .as_str()
            .unwrap_or("default")
    }
}

/// An object of a set, and what sartor makes of it.
struct Object {
    /// As written.
    written: Value,
    /// Whether sartor changes it (or fails on it).
    changed: bool,
    /// `sartor mutate`'s output (`Err`: why the mutation fails).
    predicted: Result<Value, String>,
}

/// What the proof saw.
#[derive(Default)]
struct Tally {
    sets: usize,
    conditions: usize,
    terms: usize,
    /// Sent, and sartor changes (or fails on) it.
    sent_changed: usize,
    /// Sent, though sartor leaves it as it is.
    sent_unchanged: usize,
    /// Skipped, and sartor leaves it as it is.
    skipped: usize,
    /// Objects the API server refuses as written, or Namespaces.
    left_out: usize,
}

impl Tally {
    fn objects(&self) -> usize {
        self.sent_changed + self.sent_unchanged + self.skipped
    }
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "condition proof: {} sets, {} with a condition ({} terms); {} objects: {} sent that sartor changes, {} sent that it leaves as they are, {} skipped (all left as they are); {} left out (refused as written, or Namespaces)",
            self.sets,
            self.conditions,
            self.terms,
            self.objects(),
            self.sent_changed,
            self.sent_unchanged,
            self.skipped,
            self.left_out
        )
    }
}

/// The set's condition and its objects' predictions, with no probe in
/// force; `None` when no mutator of the set loads.
fn prepare(
    plane: &ControlPlane,
    proof: &Proof,
    files: &Path,
    resources: &Path,
    tally: &mut Tally,
) -> Result<Option<Ready>, String> {
    std::fs::create_dir_all(files).map_err(|e| format!("{}: {e}", files.display()))?;
    let write = |name: &str, documents: &[Value]| -> Result<String, String> {
        let path = files.join(name);
        let text: Vec<String> = documents.iter().map(Value::to_string).collect();
        std::fs::write(&path, text.join("\n---\n"))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path.display().to_string())
    };
    tally.sets += 1;
    let mut mutators = proof.mutators.clone();
    mutators.retain(|mutator| valid_name(mutator["metadata"]["name"].as_str().unwrap_or("")));
    let mut printed = None;
    for _ in 0..3 {
        if mutators.is_empty() {
            break;
        }
        let file = write("mutators.yaml", &mutators)?;
        let (code, stdout, stderr) = sartor_output(&["export", "condition", "-m", &file])?;
        if code == 0 {
            printed = Some(stdout);
            break;
        }
        // What sartor refuses to load never reaches a cluster.
        if code != 2 || !without_invalid(&mut mutators, &stderr) {
            return Err(format!(
                "{}: sartor export condition exited {code}: {stderr}",
                proof.id
            ));
        }
    }
    let Some(printed) = printed else {
        return Ok(None);
    };
    let condition = match printed.trim().is_empty() {
        true => None,
        false => {
            let entries: Value = serde_yaml::from_str(&printed)
                .map_err(|e| format!("{}: the printed condition: {e}", proof.id))?;
            let expression = entries[0]["expression"]
                .as_str()
                .ok_or_else(|| format!("{}: no expression in {printed}", proof.id))?;
            tally.conditions += 1;
            tally.terms += expression.matches("\n|| ").count() + 1;
            Some(expression.to_string())
        }
    };
    let mutators_file = write("mutators.yaml", &mutators)?;
    let namespace_file = write("namespace.yaml", std::slice::from_ref(&proof.namespace))?;
    let name = proof.namespace["metadata"]["name"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    let mut objects = Vec::new();
    for object in &proof.objects {
        if object["kind"] == "Namespace" {
            tally.left_out += 1;
            continue;
        }
        let Ok(stored) = create(plane, object, &name) else {
            tally.left_out += 1;
            continue;
        };
        let defaulted = without_allocations(stored, object);
        let input = write("object.yaml", std::slice::from_ref(&defaulted))?;
        let (code, stdout, stderr) = sartor_output(&[
            "mutate",
            "--mutators",
            &mutators_file,
            "--namespaces",
            &namespace_file,
            "--api-resources",
            &resources.display().to_string(),
            "-n",
            &name,
            "-o",
            "json",
            &input,
        ])?;
        let predicted = match code {
            0 => Ok(json(&stdout)?),
            // A mutation that fails must reach sartor, which says so.
            1 => Err(stderr),
            // Mutators in conflict: sartor's webhook enforces the others,
            // so the set is proven without them.
            2 if without_invalid(&mut mutators, &stderr) => {
                let reduced = Proof {
                    mutators,
                    ..proof.clone()
                };
                return prepare(plane, &reduced, files, resources, tally);
            }
            _ => {
                return Err(format!(
                    "{}: sartor mutate exited {code}: {stderr}",
                    proof.id
                ));
            }
        };
        objects.push(Object {
            written: object.clone(),
            changed: predicted.as_ref() != Ok(&defaulted),
            predicted,
        });
    }
    Ok(Some(Ready {
        id: proof.id.clone(),
        mutators,
        namespace: proof.namespace.clone(),
        condition,
        objects,
        files: files.to_path_buf(),
        resources: resources.to_path_buf(),
    }))
}

/// Puts `ready`'s condition on the probe and admits its objects; each
/// difference described.
fn admit(
    plane: &ControlPlane,
    ready: &Ready,
    round: usize,
    tally: &mut Tally,
) -> Result<Vec<String>, String> {
    let probe = probe(ready.namespace_name(), ready.condition.as_deref(), round);
    if let Err(refused) = plane.kubectl_with_input(&["apply", "-f", "-"], Some(&probe.to_string()))
    {
        return Ok(vec![format!(
            "{}: the API server refused the condition: {refused}",
            ready.id
        )]);
    }
    // The round's marker refused: the configuration is in force.
    eventually(
        "the probe's round in force",
        Duration::from_secs(30),
        || {
            let marker = json!({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": format!("round-{round}")}});
            match create(plane, &marker, ROUND_NAMESPACE) {
                Err(refusal) if refusal.contains("failed calling webhook") => Ok(()),
                other => Err(format!("round {round} not in force yet: {other:?}")),
            }
        },
    )?;
    let mut differences = Vec::new();
    // A cluster-scoped object: its request has no namespace, which the
    // condition must read without erring.
    let cluster_scoped = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                                "metadata": {"name": format!("condition-probe-{round}")}, "rules": []});
    if let Err(refusal) = create(plane, &cluster_scoped, ready.namespace_name())
        && !refusal.contains("failed calling webhook")
    {
        differences.push(format!(
            "{}: a ClusterRole was refused otherwise than by the probe: {refusal}",
            ready.id
        ));
    }
    for Object {
        written: object,
        changed,
        ..
    } in &ready.objects
    {
        let outcome = create(plane, object, ready.namespace_name());
        let sent = match &outcome {
            Ok(_) => false,
            Err(refusal) if refusal.contains("failed calling webhook") => true,
            Err(refusal) => {
                differences.push(format!(
                    "{}: the condition erred or the object was refused otherwise: {refusal}\n  object: {object}",
                    ready.id
                ));
                continue;
            }
        };
        match (sent, changed) {
            (true, true) => tally.sent_changed += 1,
            (true, false) => tally.sent_unchanged += 1,
            (false, false) => tally.skipped += 1,
            (false, true) => differences.push(format!(
                "{}: skipped, but sartor would change it\n  object:    {object}\n  condition: {}",
                ready.id,
                ready.condition.as_deref().unwrap_or("(none)")
            )),
        }
    }
    Ok(differences)
}

/// The probe configuration: one webhook with the set's condition for
/// every object in `namespace` (and every cluster-scoped one), one that
/// refuses only this round's marker; nothing answers either.
fn probe(namespace: &str, condition: Option<&str>, round: usize) -> Value {
    let webhook = |name: &str, selected: &str, conditions: Value| {
        json!({
            "name": name,
            "clientConfig": {"url": "https://127.0.0.1:1/probe"},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 1,
            "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"],
                       "operations": ["CREATE", "UPDATE"], "scope": "*"}],
            "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                                                        "operator": "In", "values": [selected]}]},
            "matchConditions": conditions,
        })
    };
    let set = match condition {
        Some(expression) => json!([{"name": "sartor-may-change", "expression": expression}]),
        None => json!([]),
    };
    let marker = json!([{"name": "round",
                         "expression": format!("object.metadata.name == \"round-{round}\"")}]);
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": PROBE},
        "webhooks": [
            webhook("set.probe.sartor.dev", namespace, set),
            webhook("round.probe.sartor.dev", ROUND_NAMESPACE, marker),
        ],
    })
}

/// The condition stays within what the API server takes: a set whose
/// condition is just under 100,000 characters gets one, which the API
/// server stores on a webhook; one more mutator and `sartor export
/// condition` prints none, saying why, where the API server refuses the
/// expression those terms would make.
pub fn the_condition_stays_within_the_api_servers_limits(suite: &mut Suite) -> Result<(), String> {
    let plane = &suite.plane;
    // Each term compares the value, so it is a little over 30,000
    // characters long.
    let assign = |index: usize| {
        json!({"apiVersion": "mutations.sartor.dev/v1", "kind": "Assign",
               "metadata": {"name": format!("long-{index}")},
               "spec": {"applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["ConfigMap"]}],
                        "location": format!("data.key{index}"),
                        "parameters": {"assign": {"value": "x".repeat(30_000)}}}})
    };
    let export = |count: usize| -> Result<(i32, String, String), String> {
        let file = plane.dir().join(format!("condition-limits-{count}.yaml"));
        let text: Vec<String> = (0..count).map(|i| assign(i).to_string()).collect();
        std::fs::write(&file, text.join("\n---\n"))
            .map_err(|e| format!("{}: {e}", file.display()))?;
        sartor_output(&["export", "condition", "-m", &file.display().to_string()])
    };
    let (code, printed, _) = export(3)?;
    same("sartor export condition's exit code for 3", code, 0)?;
    let entries: Value = serde_yaml::from_str(&printed).map_err(|e| format!("{e}: {printed}"))?;
    let expression = entries[0]["expression"]
        .as_str()
        .ok_or_else(|| format!("no condition printed for 3 mutators: {printed}"))?
        .to_string();
    let length = expression.chars().count();
    if !(90_000..=100_000).contains(&length) {
        return Err(format!("the condition of 3 is {length} characters long"));
    }
    probe_taken(plane, &expression)?;

    let (code, printed, stderr) = export(4)?;
    same("sartor export condition's exit code for 4", code, 0)?;
    same("what it prints for 4", printed.as_str(), "")?;
    if !stderr.contains("no condition") || !stderr.contains("limits") {
        return Err(format!("it does not say why: {stderr}"));
    }
    // The four terms the condition would have: the API server refuses them.
    let term = |index: usize| expression_term(&expression, &format!("data.key{index}"));
    let mut terms = vec![term(0)?, term(1)?, term(2)?];
    terms.push(terms[2].replace("key2", "key3"));
    let longer = format!(
        "request.operation in [\"CREATE\", \"UPDATE\"] && (\n{}\n)",
        terms.join("\n|| ")
    );
    match probe_taken(plane, &longer) {
        Err(refusal) if refusal.contains("exceeds limit") => Ok(()),
        other => Err(format!(
            "the API server took or refused otherwise {} characters: {other:?}",
            longer.chars().count()
        )),
    }
}

/// The term of `expression` (one per line) that reads `field`.
fn expression_term(expression: &str, field: &str) -> Result<String, String> {
    let needle = format!("object.{field}");
    expression
        .lines()
        .find(|line| line.contains(&needle))
        .map(|line| line.trim_start_matches("|| ").to_string())
        .ok_or_else(|| format!("no term reads {field}"))
}

/// Whether the API server stores a webhook whose condition is `expression`
/// (a server-side dry run): its refusal when it does not.
fn probe_taken(plane: &ControlPlane, expression: &str) -> Result<(), String> {
    let mut configuration = probe("default", Some(expression), 0);
    configuration["metadata"]["name"] = json!("sartor-condition-limits");
    plane.kubectl_with_input(
        &["apply", "--server-side", "--dry-run=server", "-f", "-"],
        Some(&configuration.to_string()),
    )?;
    Ok(())
}
