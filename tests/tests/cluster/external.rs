//! External data in a cluster: Gatekeeper's Provider (sartor's optional
//! copy of its CRD, `crds/optional/provider.yaml`) watched through the real
//! API server with the install's RBAC, and a Pod created through the API
//! server stored with the images a real HTTPS provider on 127.0.0.1 pinned.

use std::time::Duration;

use sartor_tests::cluster::ControlPlane;
use sartor_tests::provider::{TestProvider, digest};

use crate::admission::{examples_enforced, wait_enforced};
use crate::{Sartor, Suite, eventually, json, repo_path, same};

const ASSIGN: &str = r#"
apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata:
  name: pin-images
spec:
  applyTo:
  - groups: [""]
    kinds: [Pod]
    versions: [v1]
  match:
    namespaces: [pinned]
  location: "spec.containers[name:*].image"
  parameters:
    assign:
      externalData:
        provider: tags
"#;

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: pinned
spec:
  containers:
  - name: app
    image: nginx:1.27
  - name: cache
    image: redis:7
"#;

/// Installs sartor's copy of Gatekeeper's Provider CRD and waits until it
/// is served.
pub fn install_provider_crd(plane: &ControlPlane) -> Result<(), String> {
    plane.kubectl(&[
        "apply",
        "--server-side",
        "-f",
        &repo_path("crds/optional/provider.yaml"),
    ])?;
    plane.wait_established(Some("providers.externaldata.gatekeeper.sh"))
}

/// A replica watching Providers pins the images of a Pod created in the
/// cluster, in one call to the provider.
pub fn providers_are_watched_and_images_pinned(suite: &mut Suite) -> Result<(), String> {
    examples_enforced(suite)?;
    let plane = &suite.plane;
    install_provider_crd(plane)?;
    let provider = TestProvider::start(None)?;
    plane.kubectl_with_input(
        &["apply", "-f", "-"],
        Some(&provider.provider_yaml("tags", 1)),
    )?;
    // The examples' AssignImage rewrites the same images, and would meet the
    // placeholder (a mutation error, as in Gatekeeper): out for this trial.
    plane.kubectl(&["delete", "assignimage.mutations.sartor.dev", "pin-registry"])?;
    plane.kubectl_with_input(&["apply", "-f", "-"], Some(ASSIGN))?;
    plane.kubectl_with_input(
        &["apply", "-f", "-"],
        Some("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: pinned\n"),
    )?;
    // A replica started with the CRD in place lists the Provider at once.
    if let Some(old) = suite.replica.take() {
        let _ = old.stop();
    }
    let port = suite.applied()?.webhook_port;
    suite.replica = Some(Sartor::start(suite, "replica-x", port, &[])?);
    wait_enforced(
        suite,
        "assign.mutations.sartor.dev",
        &["pin-images"],
        "replica-x",
    )?;
    let plane = &suite.plane;
    // failurePolicy Fail: until the replica knows the provider, creation is denied.
    eventually("the Pod admitted", Duration::from_secs(30), || {
        plane.kubectl_with_input(&["create", "-f", "-"], Some(POD))
    })?;
    let stored = json(&plane.kubectl(&["get", "pod", "web", "-n", "pinned", "-o", "json"])?)?;
    let images: Vec<String> = stored["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|c| c["image"].as_str().unwrap_or_default().to_string())
        .collect();
    same(
        "stored images",
        images,
        vec![digest("nginx:1.27"), digest("redis:7")],
    )?;
    let calls: Vec<Vec<String>> = provider.seen().into_iter().map(|s| s.keys).collect();
    same(
        "provider calls",
        calls.last().cloned(),
        Some(vec!["nginx:1.27".to_string(), "redis:7".to_string()]),
    )?;
    plane.kubectl(&["delete", "assign.mutations.sartor.dev", "pin-images"])?;
    plane.kubectl(&["apply", "-f", &repo_path("examples/mutators")])?;
    plane.kubectl(&["delete", "namespace", "pinned", "--wait=false"])?;
    Ok(())
}
