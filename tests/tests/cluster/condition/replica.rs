//! The derived condition as a replica keeps it: generated sets put in the
//! cluster as mutator objects, the condition the replica installs on its
//! own webhook (`failurePolicy: Fail`), and objects created and updated
//! through it.

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;
use std::time::Duration;

use sartor_differential::generate::{self, Mode};
use sartor_tests::cluster::ControlPlane;
use serde_json::{Value, json};

use super::{Object, Ready, Tally, prepare};
use crate::admission::{replica, without_server_fields};
use crate::export::{
    Fields, Proof, WIDGET_CRD, create, create_elsewhere, env_number, examples_proof, library_proof,
    sartor_output, without_allocations,
};
use crate::rules::{
    delete_all_mutators, mutate_requests, mutating_webhook, restore, set_failure_policy,
};
use crate::{Sartor, Suite, eventually, json};

/// What the trial saw, beyond what [`prepare`] counts.
#[derive(Default)]
struct Seen {
    /// Sets whose installed condition is the one `sartor export condition`
    /// prints.
    derived: usize,
    /// Sets whose installed condition has every term printed, and more.
    wider: usize,
    /// Creates and updates sartor received, and those it did not.
    sent: [usize; 2],
    skipped: [usize; 2],
    /// Stored as predicted once the prediction went through the API
    /// server's own admission plugins, where sartor does not reach.
    replayed: usize,
    /// Sets in a namespace sartor's install leaves out.
    excluded: usize,
}

impl fmt::Display for Seen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "  {} sets with the condition `sartor export condition` prints, {} with a wider one; creates: {} sent, {} skipped; updates: {} sent, {} skipped; all stored as predicted ({} once replayed where sartor does not reach); {} sets in namespaces the install leaves out",
            self.derived,
            self.wider,
            self.sent[0],
            self.skipped[0],
            self.sent[1],
            self.skipped[1],
            self.replayed,
            self.excluded
        )
    }
}

/// Generated sets (the differential generator with the seed of
/// `SARTOR_REPLICA_SEED`, 1 by default; `SARTOR_REPLICA_CASES` of them, 20
/// by default) and the examples, applied in turn as sartor's mutator
/// objects with the replica's derivation on and its webhook's
/// `failurePolicy: Fail`: the condition the replica installs is the one
/// `sartor export condition` prints; each object, created and then updated
/// (a label added), is stored as `sartor mutate` predicts; every write sartor
/// did not receive is one it predicts no change for.
pub fn a_replica_installs_the_condition_and_stores_what_sartor_mutate_predicts(
    suite: &mut Suite,
) -> Result<(), String> {
    let count = env_number("SARTOR_REPLICA_CASES", 20)?;
    let seed = env_number("SARTOR_REPLICA_SEED", 1)?;
    replica(suite)?;
    delete_all_mutators(suite)?;
    let plane = &suite.plane;
    let dir = plane.dir().join("replica-proof");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut proofs = vec![examples_proof()?, library_proof()?];
    proofs.extend(generate::cases(seed, Mode::Normal, count).map(|case| {
        let mut proof = Proof::of(&case);
        // The replica serves sartor's group; its v1 takes Gatekeeper's
        // fields and means the same.
        for mutator in &mut proof.mutators {
            mutator["apiVersion"] = json!("mutations.sartor.dev/v1");
        }
        proof
    }));
    let existing = plane.kubectl(&["get", "namespaces", "-o", "name"])?;
    let needed: BTreeSet<&str> = proofs
        .iter()
        .filter_map(|proof| proof.namespace["metadata"]["name"].as_str())
        .collect();
    let mut saved = Vec::new();
    for name in needed {
        if existing
            .lines()
            .any(|line| line == format!("namespace/{name}"))
        {
            let namespace = json(&plane.kubectl(&["get", "namespace", name, "-o", "json"])?)?;
            let metadata = &namespace["metadata"];
            saved.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {
                "name": name, "labels": metadata["labels"], "annotations": metadata["annotations"]}}));
        } else {
            // Left after: with no namespace controller, a deleted one
            // would stay terminating for the trials after.
            plane.kubectl(&["create", "namespace", name])?;
        }
    }
    plane.kubectl_with_input(&["apply", "-f", "-"], Some(WIDGET_CRD))?;
    plane.wait_established(Some("widgets.example.com"))?;
    let resources = dir.join("api-resources.txt");
    let listed = plane.kubectl(&["api-resources"])?;
    std::fs::write(&resources, listed).map_err(|e| format!("{}: {e}", resources.display()))?;
    set_failure_policy(suite, "Fail")?;
    let result = prove(suite, &dir, &resources, proofs, count);
    // Whatever happened: Ignore again, the Namespaces as they were, the
    // examples back.
    let _ = set_failure_policy(suite, "Ignore");
    let _ = delete_all_mutators(suite);
    for namespace in saved {
        let _ = suite
            .plane
            .kubectl_with_input(&["replace", "-f", "-"], Some(&namespace.to_string()));
    }
    let _ = suite
        .plane
        .kubectl_with_input(&["delete", "-f", "-"], Some(WIDGET_CRD));
    restore(suite)?;
    result
}

/// Predicts every set (no mutator in the cluster), then puts each in force
/// and writes its objects through the replica.
fn prove(
    suite: &Suite,
    dir: &Path,
    resources: &Path,
    proofs: Vec<Proof>,
    count: usize,
) -> Result<(), String> {
    let plane = &suite.plane;
    let sartor = suite.replica.as_ref().ok_or("no replica")?;
    let mut tally = Tally::default();
    let mut seen = Seen::default();
    let mut prepared = Vec::new();
    for (index, mut proof) in proofs.into_iter().enumerate() {
        // What the API server refuses (its schema, sartor's validating
        // webhook) never reaches a replica; what it takes, the replica
        // reads as stored (a whole number written `1.0` is stored as `1`,
        // defaults added), and so does the prediction.
        proof.mutators = proof
            .mutators
            .iter()
            .filter_map(|mutator| {
                let stored = create(plane, mutator, "default").ok()?;
                Some(
                    json!({"apiVersion": stored["apiVersion"], "kind": stored["kind"],
                            "metadata": {"name": stored["metadata"]["name"]},
                            "spec": stored["spec"]}),
                )
            })
            .collect();
        let files = dir.join(index.to_string());
        if let Some(ready) = prepare(plane, &proof, &files, resources, &mut tally)? {
            prepared.push(ready);
        }
    }
    let mut differences = Vec::new();
    for ready in &prepared {
        let namespace = ready.namespace_name();
        if ["kube-system", "sartor-system"].contains(&namespace)
            || ready.namespace["metadata"]["labels"]
                .get("admission.sartor.dev/ignore")
                .is_some()
        {
            seen.excluded += 1;
            continue;
        }
        differences.extend(
            admit(suite, sartor, ready, &mut seen)
                .unwrap_or_else(|error| vec![format!("{}: {error}", ready.id)]),
        );
    }
    eprintln!(
        "replica proof: {} sets ({} with a condition, {} terms; {} objects left out: refused as written, or Namespaces)",
        tally.sets, tally.conditions, tally.terms, tally.left_out
    );
    eprintln!("{seen}");
    // The API server's own count: no evaluation of the webhook's
    // conditions has ever erred (an error falls to failurePolicy).
    let (errors, exclusions) = match_condition_counts(plane, "mutation.sartor.dev")?;
    eprintln!(
        "  the API server's metrics for mutation.sartor.dev since it started: {exclusions} writes excluded by its match conditions, {errors} evaluation errors"
    );
    if errors > 0 {
        differences.push(format!(
            "the API server counts {errors} errors evaluating mutation.sartor.dev's match conditions"
        ));
    }
    if !differences.is_empty() {
        return Err(format!(
            "{} differences:\n{}",
            differences.len(),
            differences.join("\n\n")
        ));
    }
    if seen.sent[0] + seen.skipped[0] < count / 3 {
        return Err(format!("too few objects seen: {seen}"));
    }
    Ok(())
}

/// Puts `ready` in force (its Namespace, its mutators enforced, the
/// condition installed) and writes each object; each difference described.
fn admit(
    suite: &Suite,
    sartor: &Sartor,
    ready: &Ready,
    seen: &mut Seen,
) -> Result<Vec<String>, String> {
    let plane = &suite.plane;
    delete_all_mutators(suite)?;
    let namespace = ready.namespace_name();
    eventually("the set's Namespace", Duration::from_secs(20), || {
        plane.kubectl_with_input(&["replace", "-f", "-"], Some(&ready.namespace.to_string()))?;
        let stored = json(&plane.kubectl(&["get", "namespace", namespace, "-o", "json"])?)?;
        // Until the last set's mutators are gone, they may mutate it.
        crate::same(
            "the Namespace's labels and annotations",
            (
                &stored["metadata"]["labels"],
                &stored["metadata"]["annotations"],
            ),
            (
                &ready.namespace["metadata"]["labels"],
                &ready.namespace["metadata"]["annotations"],
            ),
        )
    })?;
    let documents: Vec<String> = ready.mutators.iter().map(Value::to_string).collect();
    plane.kubectl_with_input(&["apply", "-f", "-"], Some(&documents.join("\n---\n")))?;
    for mutator in &ready.mutators {
        let kind = format!(
            "{}.mutations.sartor.dev",
            mutator["kind"].as_str().unwrap_or("").to_lowercase()
        );
        let name = mutator["metadata"]["name"].as_str().unwrap_or("");
        wait_seen(suite, &kind, name, &sartor.pod)?;
    }
    let mut differences = Vec::new();
    let installed = || -> Result<Option<String>, String> {
        let conditions = mutating_webhook(suite)?["matchConditions"].clone();
        Ok(conditions
            .as_array()
            .and_then(|all| all.iter().find(|c| c["name"] == "sartor-may-change"))
            .and_then(|condition| condition["expression"].as_str())
            .map(str::to_string))
    };
    // A replica that has not compiled every mutator yet derives from fewer.
    let equal = eventually("the derived condition", Duration::from_secs(20), || {
        let derived = installed()?;
        match derived == ready.condition {
            true => Ok(()),
            false => Err(format!("installed {derived:?}")),
        }
    });
    match (equal, installed()?) {
        (Ok(()), _) => seen.derived += 1,
        // It may be wider, never narrower: a periodic round only adds
        // terms (a replica never removes one a newer replica wrote), so a
        // term derived from a snapshot a moment old would stay until the
        // mutators change again.
        (Err(_), Some(derived))
            if ready
                .condition
                .as_deref()
                .is_some_and(|printed| terms(printed).is_subset(&terms(&derived))) =>
        {
            seen.wider += 1;
        }
        (Err(error), _) => differences.push(format!(
            "{}: the replica's condition is narrower than `sartor export condition`'s: {error}\n  printed: {:?}",
            ready.id, ready.condition
        )),
    }
    for object in &ready.objects {
        // Created where sartor does not reach, for the API server's
        // defaults; fields the kind does not have dropped, as the API
        // server drops them from what a webhook's patch leaves. A mutation
        // that fails admits the object as written (`--on-error allow`, the
        // default).
        let expected = create_elsewhere(
            plane,
            object.predicted.as_ref().unwrap_or(&object.written),
            namespace,
            Fields::Dropped,
        );
        let allocated = |stored: Value| without_allocations(stored, &object.written);
        match through_sartor(plane, sartor, namespace, &expected, allocated, seen, || {
            create(plane, &object.written, namespace)
        }) {
            Ok(sent) => tally(seen, 0, sent, object.changed, object, &mut differences),
            Err(difference) => {
                differences.push(format!(
                    "{} (create):\n  object:    {}\n  {difference}",
                    ready.id, object.written
                ));
                continue;
            }
        }
        // A cluster-scoped object's prediction would be created where it
        // is stored: only namespaced ones are updated.
        if let Ok(predicted) = &expected
            && object.predicted.is_ok()
            && predicted["metadata"].get("namespace").is_some()
            && let Err(difference) = update(plane, sartor, ready, object, seen, &mut differences)
        {
            differences.push(format!(
                "{} (update): {difference}\n  object: {}",
                ready.id, object.written
            ));
        }
    }
    Ok(differences)
}

/// Counts a write sartor received (`sent`) or did not, and describes a
/// skipped write that sartor would have changed.
fn tally(
    seen: &mut Seen,
    operation: usize,
    sent: bool,
    changed: bool,
    object: &Object,
    differences: &mut Vec<String>,
) {
    match (sent, changed) {
        (true, _) => seen.sent[operation] += 1,
        (false, false) => seen.skipped[operation] += 1,
        (false, true) => differences.push(format!(
            "skipped, but sartor would change it ({}):\n  object: {}",
            ["create", "update"][operation],
            object.written
        )),
    }
}

/// Writes with `write` until the API server's answer is `expected` (the
/// replica's cache and the API server's configuration catch up within
/// seconds); whether sartor received the last write, or the difference.
/// `without` takes off what the API server allocates (a Service's IPs and
/// node ports), which two creates give differently.
fn through_sartor(
    plane: &ControlPlane,
    sartor: &Sartor,
    namespace: &str,
    expected: &Result<Value, String>,
    without: impl Fn(Value) -> Value,
    seen: &mut Seen,
    mut write: impl FnMut() -> Result<Value, String>,
) -> Result<bool, String> {
    let expected = &expected.clone().map(&without);
    let mut replayed = false;
    let outcome = eventually("stored as predicted", Duration::from_secs(10), || {
        let before = mutate_requests(sartor)?;
        let mut actual = write().map(&without);
        let sent = mutate_requests(sartor)? > before;
        replayed = false;
        if let (Ok(predicted), Ok(stored)) = (expected, &actual)
            && stored != predicted
        {
            // The prediction went through the API server's admission
            // plugins (default tolerations, ...) once; the stored object,
            // mutated, too: once more where sartor does not reach.
            actual = create_elsewhere(plane, stored, namespace, Fields::Dropped).map(&without);
            replayed = true;
        }
        match (expected, &actual) {
            (Ok(predicted), Ok(stored)) if stored == predicted => Ok(sent),
            // The prediction is refused as the object is.
            (Err(predicted), Err(refusal)) if cause(predicted) == cause(refusal) => Ok(sent),
            _ => Err(format!("actual:    {actual:?}\n  predicted: {expected:?}")),
        }
    });
    seen.replayed += usize::from(outcome.is_ok() && replayed);
    outcome
}

/// The last clause of a refusal: its cause.
fn cause(refusal: &str) -> &str {
    refusal.rsplit(": ").next().unwrap_or(refusal)
}

/// Creates `object` through sartor, then updates it with a label added:
/// stored as `sartor mutate --operation UPDATE` predicts from the object as
/// stored with the label. Deletes it after.
fn update(
    plane: &ControlPlane,
    sartor: &Sartor,
    ready: &Ready,
    object: &Object,
    seen: &mut Seen,
    differences: &mut Vec<String>,
) -> Result<(), String> {
    let namespace = ready.namespace_name();
    let stored = json(&plane.kubectl_with_input(
        &["create", "-o", "json", "-n", namespace, "-f", "-"],
        Some(&object.written.to_string()),
    )?)?;
    let result = (|| {
        let mut updated = stored.clone();
        updated["metadata"]["labels"]["sartor.dev/updated"] = json!("yes");
        let input = set_file(
            ready,
            "updated.yaml",
            &without_server_fields(updated.clone()),
        )?;
        let (code, stdout, stderr) = sartor_output(&[
            "mutate",
            "--mutators",
            &ready.files.join("mutators.yaml").display().to_string(),
            "--namespaces",
            &ready.files.join("namespace.yaml").display().to_string(),
            "--api-resources",
            &ready.resources.display().to_string(),
            "-n",
            namespace,
            "--operation",
            "UPDATE",
            "-o",
            "json",
            &input,
        ])?;
        let unchanged = without_server_fields(updated.clone());
        let (expected, changed) = match code {
            0 => {
                let predicted = json(&stdout)?;
                let changed = predicted != unchanged;
                // Its IPs and node ports are the stored object's, which a
                // second create cannot take: compared without them.
                let predicted = without_allocations(predicted, &json!({}));
                (
                    create_elsewhere(plane, &predicted, namespace, Fields::Dropped),
                    changed,
                )
            }
            // Admitted as written (`--on-error allow`).
            1 => (Ok(unchanged), true),
            _ => return Err(format!("sartor mutate exited {code}: {stderr}")),
        };
        let allocated = |stored: Value| without_allocations(stored, &json!({}));
        let sent = through_sartor(plane, sartor, namespace, &expected, allocated, seen, || {
            let replaced = plane.kubectl_with_input(
                &[
                    "replace",
                    "--dry-run=server",
                    "-o",
                    "json",
                    "-n",
                    namespace,
                    "-f",
                    "-",
                ],
                Some(&updated.to_string()),
            )?;
            json(&replaced).map(without_server_fields)
        })?;
        tally(seen, 1, sent, changed, object, differences);
        Ok(())
    })();
    let kind = object.written["kind"].as_str().unwrap_or("");
    let name = stored["metadata"]["name"].as_str().unwrap_or("");
    let api_version = object.written["apiVersion"].as_str().unwrap_or("v1");
    let resource = match api_version.split_once('/') {
        Some((group, _)) => format!("{kind}.{group}"),
        None => kind.to_string(),
    };
    // Gone before the next set writes the same name: no finalizer (the
    // generator writes some), no grace period (a Pod bound to a node would
    // wait for a kubelet).
    let _ = plane.kubectl(&[
        "patch",
        &resource,
        name,
        "-n",
        namespace,
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    plane.kubectl(&[
        "delete",
        &resource,
        name,
        "-n",
        namespace,
        "--ignore-not-found",
        "--grace-period=0",
        "--force",
        "--wait=true",
        "--timeout=30s",
    ])?;
    result
}

/// `document` written to `name` in the set's directory; its path.
fn set_file(ready: &Ready, name: &str, document: &Value) -> Result<String, String> {
    let path = ready.files.join(name);
    std::fs::write(&path, document.to_string()).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path.display().to_string())
}

/// kube-apiserver's counts, since it started, of the evaluation errors and
/// the exclusions of `webhook`'s match conditions
/// (`apiserver_admission_match_condition_{evaluation_errors,exclusions}_total`).
fn match_condition_counts(plane: &ControlPlane, webhook: &str) -> Result<(u64, u64), String> {
    let metrics = plane.kubectl(&["get", "--raw", "/metrics"])?;
    let name = format!("name=\"{webhook}\"");
    let sum = |metric: &str| -> Result<u64, String> {
        let mut total = 0.0;
        for line in metrics.lines() {
            if line.starts_with(&format!("{metric}{{")) && line.contains(&name) {
                let value = line.rsplit(' ').next().unwrap_or_default();
                total += value.parse::<f64>().map_err(|e| format!("{line:?}: {e}"))?;
            }
        }
        Ok(total as u64)
    };
    Ok((
        sum("apiserver_admission_match_condition_evaluation_errors_total")?,
        sum("apiserver_admission_match_condition_exclusions_total")?,
    ))
}

/// Waits until `pod` has judged the mutator `kind`/`name`: its status has
/// an entry of `pod`'s, enforced or not (a mutator in a schema conflict is
/// not, and `sartor export condition` leaves it out too).
fn wait_seen(suite: &Suite, kind: &str, name: &str, pod: &str) -> Result<(), String> {
    eventually(
        &format!("{kind}/{name} judged by {pod}"),
        Duration::from_secs(30),
        || {
            let status = json(&suite.plane.kubectl(&["get", kind, name, "-o", "json"])?)?;
            let entries = status["status"]["byPod"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            match entries.iter().any(|entry| entry["id"] == pod) {
                true => Ok(()),
                false => Err(format!("no entry: {entries:?}")),
            }
        },
    )
}

/// The terms of a condition `sartor export condition` wrote, one per line.
fn terms(expression: &str) -> BTreeSet<&str> {
    let lines: Vec<&str> = expression.lines().collect();
    match lines.as_slice() {
        [_, inner @ .., _] => inner
            .iter()
            .map(|line| line.trim_start_matches("|| "))
            .collect(),
        _ => lines.into_iter().collect(),
    }
}
