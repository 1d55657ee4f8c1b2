//! The documented install, from the image, on the node: kustomize with only
//! the image changed, then Helm; both uninstalled without a webhook left
//! behind.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sartor_tests::EXAMPLE_MUTATORS;
use sartor_tests::cluster::relative_to;
use sartor_tests::node::Node;
use serde_json::Value;

use crate::{Suite, eventually, json, repo, repo_path, same};

/// The webhook's Deployment, as both installs name it.
pub const NAMESPACE: &str = "sartor-system";
/// The replicas the install asks for (manifests/deployment.yaml, the
/// chart's `replicaCount`).
pub const REPLICAS: usize = 3;

/// Writes a kustomization in `dir` that installs manifests/ with only the
/// image changed (`images:`, as a user would for a mirror or a local tag),
/// plus `components` (paths in the repository).
pub fn overlay(suite: &Suite, dir: &Path, components: &[&str]) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let from = |path: &str| relative_to(dir, &repo().join(path));
    let components: String = components
        .iter()
        .map(|c| format!("- {}\n", from(c)))
        .collect();
    let kustomization = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- {manifests}\n{components}images:\n- name: ghcr.io/sartor-dev/sartor\n  newName: {repository}\n  newTag: {tag}\n",
        manifests = from("manifests"),
        components = if components.is_empty() {
            String::new()
        } else {
            format!("components:\n{components}")
        },
        repository = suite.image.repository,
        tag = suite.image.tag,
    );
    std::fs::write(dir.join("kustomization.yaml"), kustomization)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir.to_path_buf())
}

/// The install applied with kustomize unless an earlier trial did, and its
/// Deployment Available.
pub fn ensure(suite: &mut Suite) -> Result<(), String> {
    if suite.overlay.is_none() {
        let dir = overlay(suite, &suite.node()?.dir().join("overlay"), &[])?;
        let node = suite.node()?;
        node.kubectl(&["apply", "--server-side", "-k", &dir.display().to_string()])?;
        node.kubectl(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd",
            "--all",
        ])?;
        suite.overlay = Some(dir);
    }
    available(suite.node()?, "sartor", &suite.image).map(|_| ())
}

/// Waits until the Deployment `name` is rolled out and Available with
/// [`REPLICAS`] ready replicas of `image`, each Running, ready and never
/// restarted; returns the Pods' names.
pub fn available(node: &Node, name: &str, image: &crate::Image) -> Result<Vec<String>, String> {
    node.kubectl(&[
        "rollout",
        "status",
        &format!("deployment/{name}"),
        "-n",
        NAMESPACE,
        "--timeout=240s",
    ])
    .map_err(|e| format!("{e}\n--- kubelet\n{}", node.log_tail("kubelet", 30)))?;
    let deployment =
        json(&node.kubectl(&["get", "deployment", name, "-n", NAMESPACE, "-o", "json"])?)?;
    let status = &deployment["status"];
    let available = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Available")
        .map(|c| c["status"].clone());
    same(
        "the Deployment's replicas (spec, ready, available) and Available",
        (
            deployment["spec"]["replicas"].as_u64(),
            status["readyReplicas"].as_u64(),
            status["availableReplicas"].as_u64(),
            available,
        ),
        (
            Some(REPLICAS as u64),
            Some(REPLICAS as u64),
            Some(REPLICAS as u64),
            Some(Value::from("True")),
        ),
    )?;
    let pods = replicas(node, name)?;
    let mut names = Vec::new();
    for pod in &pods {
        let container = &pod["status"]["containerStatuses"][0];
        same(
            "a replica's phase, image, ready and restarts",
            (
                pod["status"]["phase"].as_str(),
                container["image"].as_str(),
                container["ready"].as_bool(),
                container["restartCount"].as_u64(),
            ),
            (
                Some("Running"),
                Some(format!("{}:{}", image.repository, image.tag).as_str()),
                Some(true),
                Some(0),
            ),
        )
        .map_err(|e| {
            format!(
                "{e}\n{}: last state {}",
                pod["metadata"]["name"], container["lastState"]
            )
        })?;
        names.push(
            pod["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
    }
    Ok(names)
}

/// The running Pods of the Deployment `name` (not those terminating).
pub fn replicas(node: &Node, name: &str) -> Result<Vec<Value>, String> {
    let selector = if name == "sartor" {
        "app.kubernetes.io/name=sartor".to_string()
    } else {
        format!("app.kubernetes.io/instance={name}")
    };
    let pods = json(&node.kubectl(&[
        "get", "pods", "-n", NAMESPACE, "-l", &selector, "-o", "json",
    ])?)?;
    Ok(pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .cloned()
        .collect())
}

/// The names of [`replicas`].
pub fn replica_names(node: &Node, name: &str) -> Result<Vec<String>, String> {
    let mut names: Vec<String> = replicas(node, name)?
        .iter()
        .map(|p| {
            p["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    names.sort();
    Ok(names)
}

/// `kubectl apply -k` of manifests/ with only `images:` changed: the
/// Deployment comes up Available with its three replicas from the image
/// built here, probes passing, and the replicas inject their CA into both
/// webhook configurations.
pub fn kustomize_install_comes_up_from_the_image(suite: &mut Suite) -> Result<(), String> {
    ensure(suite)?;
    let node = suite.node()?;
    let pods = replicas(node, "sartor")?;
    // The image the kubelet runs is the one built here, by its ID.
    for pod in &pods {
        let image_id = pod["status"]["containerStatuses"][0]["imageID"]
            .as_str()
            .unwrap_or_default();
        if image_id != suite.image.id {
            return Err(format!(
                "a replica runs {image_id}, not the image built here ({})",
                suite.image.id
            ));
        }
    }
    wait_ca_injected(node, &["sartor-mutating", "sartor-validating"])
}

/// Waits until both webhook configurations carry a CA bundle.
pub fn wait_ca_injected(node: &Node, names: &[&str; 2]) -> Result<(), String> {
    eventually("caBundle injected", Duration::from_secs(60), || {
        for (kind, name) in [
            ("mutatingwebhookconfiguration", names[0]),
            ("validatingwebhookconfiguration", names[1]),
        ] {
            let bundle = node.kubectl(&[
                "get",
                kind,
                name,
                "-o",
                "jsonpath={.webhooks[0].clientConfig.caBundle}",
            ])?;
            if bundle.trim().is_empty() {
                return Err(format!("{kind}/{name}: no caBundle yet"));
            }
        }
        Ok(())
    })
}

/// Applies examples/mutators and waits until every one lists exactly the
/// replicas `pods` in `status.byPod`, each enforcing it.
pub fn examples_enforced_by(node: &Node, pods: &[String]) -> Result<(), String> {
    node.kubectl(&["apply", "-f", &repo_path("examples/mutators")])?;
    enforced_by(node, EXAMPLE_MUTATORS, pods)
}

/// Waits until every mutator of `mutators` ((resource, names) pairs) lists
/// exactly the replicas `pods` in `status.byPod`, each enforcing its
/// current generation.
pub fn enforced_by(
    node: &Node,
    mutators: &[(&str, &[&str])],
    pods: &[String],
) -> Result<(), String> {
    let mut want: Vec<(String, bool)> = pods.iter().map(|p| (p.clone(), true)).collect();
    want.sort();
    for (kind, names) in mutators {
        for name in *names {
            eventually(
                &format!("{kind}/{name} enforced by every replica"),
                Duration::from_secs(60),
                || {
                    let mutator = json(&node.kubectl(&["get", kind, name, "-o", "json"])?)?;
                    let generation = &mutator["metadata"]["generation"];
                    let mut by_pod: Vec<(String, bool)> = mutator["status"]["byPod"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|e| {
                            (
                                e["id"].as_str().unwrap_or_default().to_string(),
                                e["enforced"] == true && &e["observedGeneration"] == generation,
                            )
                        })
                        .collect();
                    by_pod.sort();
                    same(
                        "status.byPod (replica, enforcing the current generation)",
                        by_pod,
                        want.clone(),
                    )
                },
            )?;
        }
    }
    Ok(())
}

/// A Pod the example mutators change (pull policy, registry, owner label).
const PROBE: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: probe\n  namespace: default\nspec:\n  containers:\n  - name: app\n    image: shop/app:1.0\n";

/// The probe Pod as the API server would store it now (server-side dry
/// run, through every webhook): (image, pull policy, owner label).
pub fn probe(node: &Node) -> Result<(String, String, String), String> {
    let pod = json(&node.kubectl_with_input(
        &["create", "--dry-run=server", "-f", "-", "-o", "json"],
        Some(PROBE),
    )?)?;
    let container = &pod["spec"]["containers"][0];
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    Ok((
        text(&container["image"]),
        text(&container["imagePullPolicy"]),
        text(&pod["metadata"]["labels"]["owner"]),
    ))
}

/// The probe as the example mutators leave it.
pub fn mutated() -> (String, String, String) {
    (
        "mirror.example.com/shop/app:1.0".into(),
        "Always".into(),
        "default".into(),
    )
}

/// The probe as the API server stores it with no webhook.
pub fn unmutated() -> (String, String, String) {
    ("shop/app:1.0".into(), "IfNotPresent".into(), String::new())
}

/// The admission requests the replicas `pods` have answered, read from
/// their `/metrics` through the API server's Pod proxy.
pub fn answered(node: &Node, pods: &[String]) -> Result<u64, String> {
    let mut total = 0;
    for pod in pods {
        let metrics = node.kubectl(&[
            "get",
            "--raw",
            &format!("/api/v1/namespaces/{NAMESPACE}/pods/http:{pod}:8888/proxy/metrics"),
        ])?;
        total += metrics
            .lines()
            .filter(|l| {
                l.starts_with("sartor_admission_requests_total{")
                    && l.contains("endpoint=\"mutate\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .map(|v| v as u64)
            .sum::<u64>();
    }
    Ok(total)
}

/// With the example mutators applied, every replica reports each of them
/// enforced, and the API server calls the webhook through its Service: the
/// examples' objects are stored as `sartor mutate` predicts, and the
/// replicas count the requests.
pub fn examples_are_enforced_through_the_service(suite: &mut Suite) -> Result<(), String> {
    ensure(suite)?;
    let node = suite.node()?;
    let pods = replica_names(node, "sartor")?;
    examples_enforced_by(node, &pods)?;
    let before = answered(node, &pods)?;
    eventually("the probe mutated", Duration::from_secs(30), || {
        same("the probe Pod", probe(node)?, mutated())
    })?;
    stored_as_predicted(node)?;
    let after = answered(node, &pods)?;
    if after <= before {
        return Err(format!(
            "the replicas counted no admission request ({before} before, {after} after)"
        ));
    }
    Ok(())
}

/// The examples' Namespace, Pod and Deployment, created with kubectl, are
/// stored with every field `sartor mutate` predicts from the same files
/// (the API server adds its defaults besides; the cluster suite compares
/// whole objects, defaults included, against a webhook run on the host).
fn stored_as_predicted(node: &Node) -> Result<(), String> {
    let files = ["namespace.yaml", "pod.yaml", "deployment.yaml"];
    let paths: Vec<String> = files
        .iter()
        .map(|f| repo_path(&format!("examples/objects/{f}")))
        .collect();
    let mutators = repo_path("examples/mutators");
    let namespaces = repo_path("examples/objects/namespace.yaml");
    let mut args = vec![
        "mutate",
        "--mutators",
        &mutators,
        "--namespaces",
        &namespaces,
        "-o",
        "json",
    ];
    args.extend(paths.iter().map(String::as_str));
    let prediction = json(&crate::sartor(&args)?)?;
    let predicted = prediction["items"].as_array().cloned().unwrap_or_default();
    for (path, predicted) in paths.iter().zip(&predicted) {
        if path.ends_with("pod.yaml") {
            // The ServiceAccount admission plugin needs the namespace's
            // `default` ServiceAccount, which the controller-manager makes.
            eventually(
                "prod-shop's default ServiceAccount",
                Duration::from_secs(30),
                || node.kubectl(&["get", "serviceaccount", "default", "-n", "prod-shop"]),
            )?;
        }
        let stored = json(&node.kubectl(&["create", "-f", path, "-o", "json"])?)?;
        contains(&stored, predicted, "").map_err(|e| {
            format!("{path} as stored differs from sartor mutate's prediction at {e}")
        })?;
    }
    // Not vacuous: the prediction changes what the file says.
    same(
        "the predicted Pod's owner label and image",
        (
            predicted[1]["metadata"]["labels"]["owner"].as_str(),
            predicted[1]["spec"]["containers"][0]["image"].as_str(),
        ),
        (
            Some("prod-shop"),
            Some("mirror.example.com/shop/checkout:2.1"),
        ),
    )
}

/// `Ok` when every field of `expected` is in `actual` with the same value
/// (objects may have more fields; lists must have the same length, element
/// by element); else the path of the first difference and both values.
fn contains(actual: &Value, expected: &Value, path: &str) -> Result<(), String> {
    match (actual, expected) {
        (Value::Object(actual), Value::Object(expected)) => {
            for (key, want) in expected {
                let got = actual.get(key).unwrap_or(&Value::Null);
                contains(got, want, &format!("{path}.{key}"))?;
            }
            Ok(())
        }
        (Value::Array(got), Value::Array(want)) if got.len() == want.len() => {
            for (i, (got, want)) in got.iter().zip(want).enumerate() {
                contains(got, want, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        _ if actual == expected => Ok(()),
        _ => Err(format!("{path}: stored {actual}, predicted {expected}")),
    }
}

/// `kubectl delete -k` of the install leaves no webhook configuration: a
/// cluster is never left calling a webhook that is gone, and writes are
/// stored unmutated at once.
pub fn kubectl_delete_leaves_no_webhook_configuration(suite: &mut Suite) -> Result<(), String> {
    ensure(suite)?;
    let overlay = suite.overlay.take().unwrap_or_default();
    let node = suite.node()?;
    node.kubectl(&[
        "delete",
        "-k",
        &overlay.display().to_string(),
        "--wait=true",
        "--timeout=180s",
    ])?;
    no_webhook_left(node)?;
    same(
        "the namespace",
        node.kubectl(&[
            "get",
            "namespace",
            NAMESPACE,
            "--ignore-not-found",
            "-o",
            "name",
        ])?,
        String::new(),
    )
}

/// No webhook configuration in the cluster, and the probe stored unmutated.
fn no_webhook_left(node: &Node) -> Result<(), String> {
    same(
        "webhook configurations left",
        node.kubectl(&[
            "get",
            "mutatingwebhookconfigurations,validatingwebhookconfigurations",
            "-o",
            "name",
        ])?,
        String::new(),
    )?;
    same("the probe Pod with no webhook", probe(node)?, unmutated())
}

/// `helm install` with only `image.repository` and `image.tag` set, into the
/// namespace labelled as the chart's README says: Available with its
/// replicas, the examples enforced by each; `helm uninstall` leaves no
/// webhook configuration.
pub fn helm_install_comes_up_and_uninstall_leaves_nothing(suite: &mut Suite) -> Result<(), String> {
    let node = suite.node()?;
    // The namespace as documented (the chart does not render it).
    node.kubectl(&["apply", "-f", &repo_path("manifests/namespace.yaml")])?;
    node.helm(&[
        "install",
        "sartor",
        &repo_path("charts/sartor"),
        "--namespace",
        NAMESPACE,
        "--set",
        &format!("image.repository={}", suite.image.repository),
        "--set",
        &format!("image.tag={}", suite.image.tag),
        "--wait",
        "--timeout=4m",
    ])?;
    let pods = available(node, "sartor", &suite.image)?;
    wait_ca_injected(node, &["sartor-mutating", "sartor-validating"])?;
    examples_enforced_by(node, &pods)?;
    eventually("the probe mutated", Duration::from_secs(30), || {
        same("the probe Pod", probe(node)?, mutated())
    })?;
    helm_uninstall(node)?;
    no_webhook_left(node)
}

/// `helm uninstall` of the release `sartor`, waiting until its objects are gone.
pub fn helm_uninstall(node: &Node) -> Result<(), String> {
    node.helm(&[
        "uninstall",
        "sartor",
        "--namespace",
        NAMESPACE,
        "--wait",
        "--timeout=3m",
    ])
    .map(|_| ())
}
