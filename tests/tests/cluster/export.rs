//! `sartor export map` on the real API server: objects admitted through
//! the exported MutatingAdmissionPolicy are what `sartor mutate` predicts.

use std::time::Duration;

use sartor_tests::cluster::ControlPlane;
use serde_json::Value;

use crate::admission::without_server_fields;
use crate::{Suite, eventually, json, repo_path, same};

/// The fixture's mutators exported as a policy; the fixture's objects,
/// created through the API server (a server-side dry run: admission runs,
/// nothing is stored), equal `sartor mutate`'s prediction from the same
/// files with the API server's own defaults added (the prediction created
/// the same way before the policy existed). Runs before the install, so no
/// webhook of sartor's is in the way.
pub fn exported_policies_store_what_sartor_mutate_predicts(
    suite: &mut Suite,
) -> Result<(), String> {
    let plane = &suite.plane;
    let mutators = repo_path("tests/fixtures/export/mutators.yaml");
    let namespaces = repo_path("tests/fixtures/export/namespaces.yaml");
    let objects = repo_path("tests/fixtures/export/objects.yaml");
    plane.kubectl(&["apply", "-f", &namespaces])?;
    let prediction = crate::sartor(&[
        "mutate",
        "--mutators",
        &mutators,
        "--namespaces",
        &namespaces,
        "-o",
        "json",
        &objects,
    ])?;
    let expected = dry_run(plane, Some(&prediction), "-")?;

    let policy = crate::sartor(&["export", "map", &mutators])?;
    plane.kubectl_with_input(&["apply", "-f", "-"], Some(&policy))?;
    let result = admitted_as_predicted(suite, &objects, &expected);
    let plane = &suite.plane;
    let _ = plane.kubectl_with_input(&["delete", "-f", "-"], Some(&policy));
    let _ = plane.kubectl(&["delete", "-f", &namespaces, "--wait=false"]);
    result
}

/// Once the policy is in force (a probe ConfigMap is mutated), the objects
/// as admitted equal `expected`.
fn admitted_as_predicted(suite: &Suite, objects: &str, expected: &[Value]) -> Result<(), String> {
    let probe =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-probe\n  namespace: export-a\n";
    eventually("the policy in force", Duration::from_secs(30), || {
        let created = json(&suite.plane.kubectl_with_input(
            &["create", "--dry-run=server", "-o", "json", "-f", "-"],
            Some(probe),
        )?)?;
        same(
            "the probe's data.exported",
            created["data"]["exported"].clone(),
            Value::from("yes"),
        )
    })?;
    let actual = dry_run(&suite.plane, None, objects)?;
    same(
        "objects admitted through the policy",
        actual,
        expected.to_vec(),
    )
}

/// `kubectl create --dry-run=server` of `file` (`-`: `input`): the objects
/// as the API server would store them, server fields aside.
fn dry_run(plane: &ControlPlane, input: Option<&str>, file: &str) -> Result<Vec<Value>, String> {
    let created = plane.kubectl_with_input(
        &["create", "--dry-run=server", "-o", "json", "-f", file],
        input,
    )?;
    // kubectl prints one JSON object after the other.
    serde_json::Deserializer::from_str(&created)
        .into_iter::<Value>()
        .map(|object| object.map(without_server_fields).map_err(|e| e.to_string()))
        .collect()
}
