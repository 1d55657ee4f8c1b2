//! The real API server calls sartor: objects are stored as `sartor mutate`
//! predicts, and broken mutators are denied with the engine's message.

use std::time::Duration;

use sartor_tests::EXAMPLE_MUTATORS;
use serde_json::Value;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use crate::{Sartor, Suite, eventually, json, probe_pod, repo_path, same};

/// Starts the replica the webhook configurations point at, unless running,
/// and waits until the API server trusts it (the managed CA is injected into
/// both webhook configurations).
pub fn replica(suite: &mut Suite) -> Result<&Sartor, String> {
    if suite.replica.is_none() {
        let port = crate::install::ensure(suite)?.webhook_port;
        let sartor = Sartor::start(suite, "replica-a", port, &[])?;
        suite.replica = Some(sartor);
    }
    wait_ca_injected(suite)?;
    suite
        .replica
        .as_ref()
        .ok_or_else(|| "no replica".to_string())
}

/// The CA bundles (PEM) of the mutating and the validating webhook
/// configuration; empty when none is injected.
pub fn ca_bundles(suite: &Suite) -> Result<(String, String), String> {
    let get = |config: &str| -> Result<String, String> {
        let encoded = suite.plane.kubectl(&[
            "get",
            config,
            "-o",
            "jsonpath={.webhooks[0].clientConfig.caBundle}",
        ])?;
        let pem = BASE64.decode(encoded.trim()).map_err(|e| e.to_string())?;
        String::from_utf8(pem).map_err(|e| e.to_string())
    };
    Ok((
        get("mutatingwebhookconfiguration/sartor-mutating")?,
        get("validatingwebhookconfiguration/sartor-validating")?,
    ))
}

/// Waits until a replica has injected its CA into both webhook
/// configurations (the API server cannot call sartor before).
pub fn wait_ca_injected(suite: &Suite) -> Result<(), String> {
    eventually(
        "caBundle injected",
        Duration::from_secs(30),
        || match ca_bundles(suite)? {
            (mutating, validating) if !mutating.is_empty() && !validating.is_empty() => Ok(()),
            bundles => Err(format!("not yet: {bundles:?}")),
        },
    )
}

/// Waits until every mutator of `kind` named in `names` reports itself
/// enforced by `pod` in its status.
pub fn wait_enforced(suite: &Suite, kind: &str, names: &[&str], pod: &str) -> Result<(), String> {
    for name in names {
        eventually(
            &format!("{kind}/{name} enforced by {pod}"),
            Duration::from_secs(30),
            || {
                let status = json(&suite.plane.kubectl(&["get", kind, name, "-o", "json"])?)?;
                let entries = status["status"]["byPod"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let entry = entries.iter().find(|e| e["id"] == pod);
                match entry {
                    Some(e) if e["enforced"] == true => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            },
        )?;
    }
    Ok(())
}

/// The replica running, with examples/mutators applied and in force; the
/// replica's pod name.
pub fn examples_enforced(suite: &mut Suite) -> Result<String, String> {
    let pod = replica(suite)?.pod.clone();
    suite
        .plane
        .kubectl(&["apply", "-f", &repo_path("examples/mutators")])?;
    for (kind, names) in EXAMPLE_MUTATORS {
        wait_enforced(suite, kind, names, &pod)?;
    }
    Ok(pod)
}

/// Server-set fields that say nothing about mutation.
pub fn without_server_fields(mut object: Value) -> Value {
    if let Some(metadata) = object["metadata"].as_object_mut() {
        for field in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
            "generation",
        ] {
            metadata.remove(field);
        }
    }
    if let Some(fields) = object.as_object_mut() {
        fields.remove("status");
    }
    object
}

/// The examples' Pod, Deployment and Namespace, created through the API
/// server with sartor's webhook in the way, are stored exactly as `sartor
/// mutate` predicts from the same files, once the API server's own defaults
/// are added to the prediction. The defaults come from the same API server:
/// the predicted Pod and Deployment are created in a twin namespace that
/// the webhook ignores (`admission.sartor.dev/ignore`), then moved back to
/// `prod-shop`; the Namespace's defaults are its name label and finalizer.
pub fn objects_are_stored_as_sartor_mutate_predicts(suite: &mut Suite) -> Result<(), String> {
    examples_enforced(suite)?;

    let prediction = json(&crate::sartor(&[
        "mutate",
        "--mutators",
        &repo_path("examples/mutators"),
        "--namespaces",
        &repo_path("examples/objects/namespace.yaml"),
        "-o",
        "json",
        &repo_path("examples/objects/namespace.yaml"),
        &repo_path("examples/objects/pod.yaml"),
        &repo_path("examples/objects/deployment.yaml"),
    ])?)?;
    let predicted = prediction["items"].as_array().cloned().unwrap_or_default();

    // The objects are created once; first make sure the API server reaches
    // sartor (a failed call would admit them unmutated under Ignore).
    eventually("the webhook answering", Duration::from_secs(10), || {
        same(
            "probe",
            crate::lifecycle::probe(suite)?,
            crate::lifecycle::mutated(),
        )
    })?;
    let plane = &suite.plane;
    let mut actual = Vec::new();
    for file in ["namespace.yaml", "pod.yaml", "deployment.yaml"] {
        let stored = plane.kubectl(&[
            "create",
            "-f",
            &repo_path(&format!("examples/objects/{file}")),
            "-o",
            "json",
        ])?;
        actual.push(without_server_fields(json(&stored)?));
    }

    plane.kubectl_with_input(
        &["apply", "-f", "-"],
        Some("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: prod-shop-twin\n  labels:\n    admission.sartor.dev/ignore: twin\n"),
    )?;
    let mut expected = Vec::new();
    for object in predicted {
        if object["kind"] == "Namespace" {
            let mut namespace = object.clone();
            namespace["metadata"]["labels"]["kubernetes.io/metadata.name"] =
                Value::from("prod-shop");
            namespace["spec"] = serde_json::json!({"finalizers": ["kubernetes"]});
            expected.push(namespace);
            continue;
        }
        let mut twin = object.clone();
        twin["metadata"]["namespace"] = Value::from("prod-shop-twin");
        let stored = plane.kubectl_with_input(
            &["create", "--dry-run=server", "-f", "-", "-o", "json"],
            Some(&twin.to_string()),
        )?;
        let mut stored = without_server_fields(json(&stored)?);
        stored["metadata"]["namespace"] = Value::from("prod-shop");
        expected.push(stored);
    }
    if actual != expected {
        return Err(format!(
            "stored objects differ from the prediction\n--- stored\n{}\n--- predicted (with the API server's defaults)\n{}",
            serde_json::to_string_pretty(&actual).unwrap_or_default(),
            serde_json::to_string_pretty(&expected).unwrap_or_default()
        ));
    }
    // The prediction is not vacuous: the mutators did change the Pod.
    let pod_object = &actual[1];
    same(
        "the Pod's mutated fields",
        (
            pod_object["metadata"]["labels"]["owner"].as_str(),
            pod_object["spec"]["containers"][0]["image"].as_str(),
            pod_object["spec"]["containers"][1]["name"].as_str(),
        ),
        (
            Some("prod-shop"),
            Some("mirror.example.com/shop/checkout:2.1"),
            Some("log-shipper"),
        ),
    )
}

/// A mutator whose location does not parse is denied by the validating
/// webhook, through kubectl, with the engine's message.
pub fn validating_webhook_denies_a_broken_mutator(suite: &mut Suite) -> Result<(), String> {
    replica(suite)?;
    let broken = "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata:\n  name: broken-location\nspec:\n  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]\n  location: 'spec.containers[name: *.image'\n  parameters:\n    assign: {value: Always}\n";
    match suite
        .plane
        .kubectl_with_input(&["create", "-f", "-"], Some(broken))
    {
        Ok(out) => return Err(format!("accepted: {out}")),
        Err(error) => same(
            "kubectl's error",
            error.as_str(),
            "kubectl create -f -: Error from server: error when creating \"STDIN\": admission webhook \"validation.sartor.dev\" denied the request: Assign broken-location: spec.location: invalid location \"spec.containers[name: *.image\": expected ']' at 23, found '.'\n  spec.containers[name: *.image\n                         ^",
        )?,
    }
    // CEL cannot see a value condition's untyped `values`: the webhook is
    // what refuses values given to Exists.
    let broken = "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata:\n  name: broken-condition\nspec:\n  applyTo: [{groups: [''], versions: [v1], kinds: [Service]}]\n  location: spec.externalTrafficPolicy\n  parameters:\n    assign: {value: Local}\n    conditions: [{path: spec.type, operator: Exists, values: [LoadBalancer]}]\n";
    match suite
        .plane
        .kubectl_with_input(&["create", "-f", "-"], Some(broken))
    {
        Ok(out) => Err(format!("accepted: {out}")),
        Err(error) => same(
            "kubectl's error",
            error.as_str(),
            "kubectl create -f -: Error from server: error when creating \"STDIN\": admission webhook \"validation.sartor.dev\" denied the request: Assign broken-condition: spec.parameters.conditions[0].values: Exists takes no values",
        ),
    }
}

/// One mutator of each kind for the probe Pod in `default`, in `round` 1 or 2
/// (different values).
fn trial_mutators(round: u8) -> String {
    let only_default =
        "applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]\n  match: {namespaces: [default]}";
    format!(
        "apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata: {{name: trial-grace}}
spec:
  {only_default}
  location: spec.terminationGracePeriodSeconds
  parameters: {{assign: {{value: {grace}}}}}
---
apiVersion: mutations.sartor.dev/v1
kind: AssignMetadata
metadata: {{name: trial-team}}
spec:
  match: {{namespaces: [default]}}
  location: metadata.labels.team
  parameters: {{assign: {{value: team-{round}}}}}
---
apiVersion: mutations.sartor.dev/v1
kind: ModifySet
metadata: {{name: trial-args}}
spec:
  {only_default}
  location: 'spec.containers[name: app].args'
  parameters: {{operation: merge, values: {{fromList: ['--v={round}']}}}}
---
apiVersion: mutations.sartor.dev/v1
kind: AssignImage
metadata: {{name: trial-tag}}
spec:
  {only_default}
  location: 'spec.containers[name: app].image'
  parameters: {{assignTag: ':trial-{round}'}}
",
        grace = 5 + 2 * u32::from(round),
    )
}

/// What the trial mutators change on the probe Pod: (grace period, team
/// label, args, image).
fn trial_fields(suite: &Suite) -> Result<Value, String> {
    let pod = probe_pod(suite)?;
    Ok(serde_json::json!([
        pod["spec"]["terminationGracePeriodSeconds"],
        pod["metadata"]["labels"]["team"],
        pod["spec"]["containers"][0]["args"],
        pod["spec"]["containers"][0]["image"],
    ]))
}

const TRIAL_KINDS: [(&str, &str); 4] = [
    ("assign.mutations.sartor.dev", "trial-grace"),
    ("assignmetadata.mutations.sartor.dev", "trial-team"),
    ("modifyset.mutations.sartor.dev", "trial-args"),
    ("assignimage.mutations.sartor.dev", "trial-tag"),
];

/// Waits until `pod`'s status entry of every trial mutator is exactly: this
/// replica, the object's uid and `generation`, both operations, enforced.
fn wait_status(suite: &Suite, pod: &str, generation: i64) -> Result<(), String> {
    for (kind, name) in TRIAL_KINDS {
        eventually(
            &format!("{kind}/{name} status"),
            Duration::from_secs(30),
            || {
                let object = json(&suite.plane.kubectl(&["get", kind, name, "-o", "json"])?)?;
                let entry = object["status"]["byPod"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|e| e["id"] == pod)
                    .cloned();
                same(
                    &format!("{kind}/{name} status entry"),
                    entry,
                    Some(serde_json::json!({
                        "id": pod,
                        "mutatorUID": object["metadata"]["uid"],
                        "observedGeneration": generation,
                        "operations": ["CREATE", "UPDATE"],
                        "enforced": true,
                    })),
                )
            },
        )?;
    }
    Ok(())
}

/// A mutator of each kind created, updated in place and deleted through the
/// API server takes effect at each step, and its status entry says exactly
/// what the replica enforces (uid, observed generation, operations).
pub fn each_kind_created_updated_and_deleted_takes_effect(suite: &mut Suite) -> Result<(), String> {
    let pod = examples_enforced(suite)?;
    for (round, generation) in [(1_u8, 1_i64), (2, 2)] {
        suite
            .plane
            .kubectl_with_input(&["apply", "-f", "-"], Some(&trial_mutators(round)))?;
        wait_status(suite, &pod, generation)?;
        eventually(
            &format!("round {round} in force"),
            Duration::from_secs(10),
            || {
                same(
                    "the probe's fields",
                    trial_fields(suite)?,
                    serde_json::json!([
                        5 + 2 * i64::from(round),
                        format!("team-{round}"),
                        [format!("--v={round}")],
                        format!("mirror.example.com/shop/app:trial-{round}"),
                    ]),
                )
            },
        )?;
    }
    suite
        .plane
        .kubectl_with_input(&["delete", "-f", "-"], Some(&trial_mutators(2)))?;
    eventually("the trial mutators gone", Duration::from_secs(10), || {
        same(
            "the probe's fields",
            trial_fields(suite)?,
            serde_json::json!([30, null, null, "mirror.example.com/shop/app:1.0"]),
        )
    })
}

/// With `--mutation-annotations`, an object sartor changed names the
/// mutators that changed it, with their objects' generations; without the
/// flag (every other trial), nothing is annotated.
pub fn mutation_annotations_name_the_mutators_with_the_flag(
    suite: &mut Suite,
) -> Result<(), String> {
    examples_enforced(suite)?;
    same(
        "annotations without the flag",
        probe_pod(suite)?["metadata"]["annotations"].clone(),
        Value::Null,
    )?;
    if let Some(old) = suite.replica.take() {
        let _ = old.stop();
    }
    let port = crate::install::ensure(suite)?.webhook_port;
    let annotating = Sartor::start(
        suite,
        "replica-annotating",
        port,
        &["--mutation-annotations"],
    );
    let result = annotating.and_then(|sartor| {
        suite.replica = Some(sartor);
        eventually("the annotation", Duration::from_secs(10), || {
            same(
                "annotations",
                probe_pod(suite)?["metadata"]["annotations"].clone(),
                serde_json::json!({"sartor.dev/mutations": "Assign/always-pull-pods:1, Assign/read-only-root:1, Assign/seccomp-runtime-default:1, AssignImage/pin-registry:1, AssignMetadata/owner-from-namespace:1"}),
            )
        })
    });
    // The other trials expect a replica without the flag.
    if let Some(annotating) = suite.replica.take() {
        let _ = annotating.stop();
    }
    result
}

/// `kubectl debug` adds a container through the `pods/ephemeralcontainers`
/// subresource: the install's rules send it to sartor, a mutator whose
/// location is under `spec.ephemeralContainers` reaches the debug
/// container, and nothing else of the Pod is patched.
pub fn debug_containers_are_mutated_through_their_subresource(
    suite: &mut Suite,
) -> Result<(), String> {
    examples_enforced(suite)?;
    let pod = suite
        .replica
        .as_ref()
        .map(|r| r.pod.clone())
        .ok_or("no replica")?;
    let plane = &suite.plane;
    let _ = plane.kubectl(&[
        "delete",
        "pod",
        "debug-target",
        "-n",
        "default",
        "--ignore-not-found",
    ]);
    plane.kubectl_with_input(
        &["create", "-f", "-"],
        Some("apiVersion: v1\nkind: Pod\nmetadata:\n  name: debug-target\n  namespace: default\nspec:\n  containers:\n  - name: app\n    image: shop/app:1.0\n"),
    )?;
    let before =
        json(&plane.kubectl(&["get", "pod", "debug-target", "-n", "default", "-o", "json"])?)?;
    plane.kubectl_with_input(
        &["apply", "-f", "-"],
        Some(
            "apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata: {name: always-pull-debug}
spec:
  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]
  location: 'spec.ephemeralContainers[name: *].imagePullPolicy'
  parameters: {assign: {value: Always}}
---
apiVersion: mutations.sartor.dev/v1
kind: AssignMetadata
metadata: {name: debugged-label}
spec:
  location: metadata.labels.debugged
  parameters: {assign: {value: 'yes'}}
",
        ),
    )?;
    wait_enforced(
        suite,
        "assign.mutations.sartor.dev",
        &["always-pull-debug"],
        &pod,
    )?;
    wait_enforced(
        suite,
        "assignmetadata.mutations.sartor.dev",
        &["debugged-label"],
        &pod,
    )?;
    plane.kubectl(&[
        "debug",
        "debug-target",
        "-n",
        "default",
        "--image=busybox:1.36",
        "--container=debugger",
    ])?;
    let after =
        json(&plane.kubectl(&["get", "pod", "debug-target", "-n", "default", "-o", "json"])?)?;
    let debugger = &after["spec"]["ephemeralContainers"][0];
    let result = same(
        "the debug container and the rest of the Pod",
        (
            debugger["name"].as_str(),
            debugger["image"].as_str(),
            debugger["imagePullPolicy"].as_str(),
            &after["metadata"]["labels"],
            &after["spec"]["containers"],
        ),
        (
            Some("debugger"),
            Some("busybox:1.36"),
            Some("Always"),
            &before["metadata"]["labels"],
            &before["spec"]["containers"],
        ),
    );
    plane.kubectl(&["delete", "assign.mutations.sartor.dev", "always-pull-debug"])?;
    plane.kubectl(&[
        "delete",
        "assignmetadata.mutations.sartor.dev",
        "debugged-label",
    ])?;
    plane.kubectl(&[
        "delete",
        "pod",
        "debug-target",
        "-n",
        "default",
        "--wait=false",
    ])?;
    result
}

/// The exemption label is guarded by the validating webhook: `kubectl
/// label` is denied outside sartor's namespace and `--exemptable-namespace`
/// with the webhook's message; removing it is allowed; the documented escape
/// hatch (the guard's rule taken out of the validating configuration, then
/// the install re-applied) lets an admin label one anyway.
pub fn the_exemption_label_is_guarded(suite: &mut Suite) -> Result<(), String> {
    replica(suite)?;
    let overlay = suite.applied()?.overlay_arg();
    let plane = &suite.plane;
    plane.kubectl_with_input(
        &["apply", "-f", "-"],
        Some("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: guarded\n"),
    )?;
    let label = [
        "label",
        "namespace",
        "guarded",
        "admission.sartor.dev/ignore=true",
    ];
    same(
        "kubectl label outside the allow-list",
        plane.kubectl(&label),
        Err("kubectl label namespace guarded admission.sartor.dev/ignore=true: Error from server: admission webhook \"exemption.sartor.dev\" denied the request: namespace \"guarded\" may not be given the label admission.sartor.dev/ignore: it exempts the namespace from sartor's mutations, and only these namespaces may carry it: sartor-system, prod-shop-twin (sartor serve --exemptable-namespace)".to_string()),
    )?;
    // Nor through the status subresource, which also writes labels.
    match plane.kubectl(&[
        "patch",
        "namespace",
        "guarded",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"admission.sartor.dev/ignore":"true"}}}"#,
    ]) {
        Err(error) if error.contains("exemption.sartor.dev\" denied the request") => {}
        other => return Err(format!("labelled through namespaces/status: {other:?}")),
    }
    // The escape hatch, as docs/operations.md gives it.
    plane.kubectl(&[
        "patch",
        "validatingwebhookconfiguration",
        "sartor-validating",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/webhooks/1"}]"#,
    ])?;
    eventually(
        "the label allowed without the guard",
        Duration::from_secs(10),
        || plane.kubectl(&label),
    )?;
    plane.kubectl(&["apply", "-k", &overlay])?;
    // Re-applied, the guard's webhook has no caBundle until a replica
    // injects it again (until then the API server fails open).
    eventually(
        "the guard's CA injected again",
        Duration::from_secs(30),
        || {
            let bundle = plane.kubectl(&[
                "get",
                "validatingwebhookconfiguration",
                "sartor-validating",
                "-o",
                "jsonpath={.webhooks[1].clientConfig.caBundle}",
            ])?;
            if bundle.is_empty() {
                Err("not yet".to_string())
            } else {
                Ok(())
            }
        },
    )?;
    match plane.kubectl(&[
        "label",
        "namespace",
        "guarded",
        "--overwrite",
        "admission.sartor.dev/ignore=changed",
    ]) {
        Err(error) if error.contains("exemption.sartor.dev\" denied the request") => {}
        other => return Err(format!("changing the label with the guard back: {other:?}")),
    }
    // Removing it only brings mutation back: allowed.
    plane.kubectl(&[
        "label",
        "namespace",
        "guarded",
        "admission.sartor.dev/ignore-",
    ])?;
    Ok(())
}
