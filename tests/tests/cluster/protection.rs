//! Objects sartor never mutates (`sartor_api::protected`), through the real
//! API server: a mutator matching every kind labels a ConfigMap, while a
//! Gatekeeper constraint, a Provider, a sartor mutator and a
//! ValidatingWebhookConfiguration are stored without the label, as `sartor
//! mutate` predicts from the same files; the policy objects never reach the
//! mutating webhook (its match condition).

use std::time::Duration;

use sartor_tests::provider::TestProvider;
use serde_json::Value;

use crate::admission::{replica, wait_enforced};
use crate::external::install_provider_crd;
use crate::{Suite, eventually, json, repo_path, same};

/// The mutator: `mutated: "yes"` on every object of every kind. A fixture
/// of the binary's own tests (`crates/cli/tests/cli.rs`), read from there.
const MUTATOR: &str = "crates/cli/tests/fixtures/label-everything.yaml";

/// Its name, and the label it writes.
const MUTATOR_NAME: &str = "label-everything";
const LABEL: &str = "mutated";

/// The name of every object the trial creates.
const NAME: &str = "protection-trial";

/// A CRD for one Gatekeeper constraint kind (Gatekeeper generates one per
/// ConstraintTemplate), so a `constraints.gatekeeper.sh` object can be stored.
const CONSTRAINT_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: k8srequiredlabels.constraints.gatekeeper.sh
spec:
  group: constraints.gatekeeper.sh
  names:
    kind: K8sRequiredLabels
    listKind: K8sRequiredLabelsList
    plural: k8srequiredlabels
    singular: k8srequiredlabels
  scope: Cluster
  versions:
  - name: v1beta1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
"#;

/// The objects `sartor mutate` prints (it reads Providers and mutators
/// among its inputs as the mutator set, never as objects to print).
const OBJECTS: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: protection-trial
  namespace: default
data:
  mode: fast
---
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sRequiredLabels
metadata:
  name: protection-trial
spec:
  parameters:
    labels:
    - key: owner
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: protection-trial
webhooks: []
"#;

/// A sartor mutator that changes nothing that exists.
const INERT_MUTATOR: &str = r#"
apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata:
  name: protection-trial
spec:
  applyTo:
  - groups: [example.com]
    versions: [v1]
    kinds: [Nothing]
  location: spec.nothing
  parameters:
    assign:
      value: 1
"#;

/// The objects a mutator matching every kind leaves unlabelled in the
/// cluster are exactly those `sartor mutate` leaves unlabelled.
pub fn protected_objects_are_stored_unmutated_as_sartor_mutate_predicts(
    suite: &mut Suite,
) -> Result<(), String> {
    let pod = replica(suite)?.pod.clone();
    let observed = stored_and_predicted(suite, &pod);
    // A mutator of every kind left behind would change what later trials see.
    for args in [
        vec!["assignmetadata.mutations.sartor.dev", MUTATOR_NAME],
        vec!["assign.mutations.sartor.dev", NAME],
        vec!["provider.externaldata.gatekeeper.sh", NAME],
        vec!["validatingwebhookconfiguration", NAME],
        vec!["configmap", NAME, "-n", "default"],
        vec![
            "crd",
            "k8srequiredlabels.constraints.gatekeeper.sh",
            "--wait=false",
        ],
    ] {
        let mut args = args;
        args.splice(0..0, ["delete", "--ignore-not-found"]);
        suite.plane.kubectl(&args)?;
    }
    let (stored, predicted) = observed?;
    let labelled = Some("yes".to_string());
    same(
        "the label stored on ConfigMap, K8sRequiredLabels, ValidatingWebhookConfiguration, Provider, Assign",
        stored,
        vec![labelled.clone(), None, None, None, None],
    )?;
    same(
        "sartor mutate's objects and labels",
        predicted,
        vec![
            ("ConfigMap".to_string(), labelled),
            ("K8sRequiredLabels".to_string(), None),
            ("ValidatingWebhookConfiguration".to_string(), None),
        ],
    )
}

/// Creates the objects with the trial's mutator enforced by `pod`: the
/// label each is stored with, and the kinds and labels `sartor mutate`
/// prints for the same files.
#[allow(clippy::type_complexity)]
fn stored_and_predicted(
    suite: &Suite,
    pod: &str,
) -> Result<(Vec<Option<String>>, Vec<(String, Option<String>)>), String> {
    let plane = &suite.plane;
    // The CRDs first, so the trial's mutator does not label them.
    install_provider_crd(plane)?;
    plane.kubectl_with_input(&["apply", "--server-side", "-f", "-"], Some(CONSTRAINT_CRD))?;
    plane.wait_established(Some("k8srequiredlabels.constraints.gatekeeper.sh"))?;
    let provider = TestProvider::start(None)?.provider_yaml(NAME, 1);

    let mutator = repo_path(MUTATOR);
    plane.kubectl(&["apply", "-f", &mutator])?;
    wait_enforced(
        suite,
        "assignmetadata.mutations.sartor.dev",
        &[MUTATOR_NAME],
        pod,
    )?;
    // Until the derived webhook rules send every kind, a ConfigMap would
    // be stored unmutated: wait for a dry run to come back labelled.
    let config_map = OBJECTS.split("---").next().unwrap_or_default();
    eventually("a ConfigMap labelled", Duration::from_secs(30), || {
        let stored = json(&plane.kubectl_with_input(
            &["create", "--dry-run=server", "-f", "-", "-o", "json"],
            Some(config_map),
        )?)?;
        same("the label", label(&stored), Some("yes".to_string()))
    })?;

    let replica = suite.replica.as_ref().ok_or("no replica")?;
    let before = crate::rules::mutate_requests(replica)?;
    plane.kubectl_with_input(&["create", "-f", "-"], Some(OBJECTS))?;
    plane.kubectl_with_input(&["create", "-f", "-"], Some(&provider))?;
    plane.kubectl_with_input(&["create", "-f", "-"], Some(INERT_MUTATOR))?;
    // The rules send every kind (the mutator matches `*`), but the
    // webhook's match condition keeps the policy objects from sartor: of the
    // five, only the ConfigMap is sent (a ValidatingWebhookConfiguration
    // never is).
    same(
        "mutate requests for the five objects",
        crate::rules::mutate_requests(replica)? - before,
        1,
    )?;
    let stored = |resource: &str, namespace: Option<&str>| -> Result<Option<String>, String> {
        let mut args = vec!["get", resource, NAME, "-o", "json"];
        args.extend(namespace.map(|ns| ["-n", ns]).into_iter().flatten());
        Ok(label(&json(&plane.kubectl(&args)?)?))
    };
    let stored = vec![
        stored("configmap", Some("default"))?,
        stored("k8srequiredlabels.constraints.gatekeeper.sh", None)?,
        stored("validatingwebhookconfiguration", None)?,
        stored("provider.externaldata.gatekeeper.sh", None)?,
        stored("assign.mutations.sartor.dev", None)?,
    ];

    let dir = plane.dir().join("protection-trial");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let write = |name: &str, text: &str| -> Result<String, String> {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path.display().to_string())
    };
    let objects = write("objects.yaml", OBJECTS)?;
    let provider = write("provider.yaml", &provider)?;
    let inert = write("inert.yaml", INERT_MUTATOR)?;
    let prediction = json(&crate::sartor(&[
        "mutate", "-m", &mutator, "-o", "json", &objects, &provider, &inert,
    ])?)?;
    let predicted = prediction["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|item| (kind(item), label(item)))
        .collect();
    Ok((stored, predicted))
}

/// The trial's label on `object`, if it has it.
fn label(object: &Value) -> Option<String> {
    object["metadata"]["labels"][LABEL]
        .as_str()
        .map(str::to_string)
}

fn kind(object: &Value) -> String {
    object["kind"].as_str().unwrap_or_default().to_string()
}
