//! The Helm chart `charts/sartor`, checked with the pinned `helm` and
//! `kubectl` and on a real kube-apiserver.
//!
//! ```text
//! helm template (defaults) ──┐
//!                            ├─ object by object, Helm's labels removed ─> equal
//! kubectl kustomize manifests/
//! charts/sartor/crds/*.yaml ─── byte-equal ─> crds/*.yaml
//! helm install / upgrade / uninstall ─> etcd + kube-apiserver (no kubelet: Pods never run)
//! ```
//!
//! The tools come from `tests/k8s/provision`, as for the cluster suite; where
//! this machine cannot build them, every trial that needs them is reported as
//! ignored and the reason printed. The checks of files alone (the CRD copies,
//! the README's values table) need no tool and always run. The trials run one after another; the first that needs a control
//! plane starts it, and the others reuse it.
//!
//! Run it: `cargo test -p sartor-tests --test helm` (add a trial name to filter).

// Test code: indexing a JSON value that is not the shape expected panics,
// which is a failed test.
#![allow(clippy::indexing_slicing)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use sartor_tests::cluster::{ControlPlane, TempDir, Tools, run};
use sartor_tests::suite::{Check, Needs, json, same};
use serde::Deserialize as _;
use serde_json::{Value, json};

/// The chart, relative to the repository root (where every command runs).
const CHART: &str = "charts/sartor";

/// The labels Helm charts add by convention; the only allowed difference
/// between the chart's objects and manifests/'.
const HELM_LABELS: [&str; 4] = [
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
];

/// The CRDs the chart installs.
const CRDS: [&str; 4] = [
    "assign.mutations.sartor.dev",
    "assignimage.mutations.sartor.dev",
    "assignmetadata.mutations.sartor.dev",
    "modifyset.mutations.sartor.dev",
];

/// Every trial, in the order they run.
const TRIALS: &[Check<ControlPlane>] = &[
    (
        "chart_crds_are_the_generated_crds",
        Needs::Files(chart_crds_are_the_generated_crds),
    ),
    (
        "chart_readme_documents_every_value",
        Needs::Files(chart_readme_documents_every_value),
    ),
    (
        "chart_renders_like_the_kustomize_install",
        Needs::Tools(chart_renders_like_the_kustomize_install),
    ),
    ("helm_lint_is_clean", Needs::Tools(helm_lint_is_clean)),
    (
        "cert_manager_values_render",
        Needs::Tools(cert_manager_values_render),
    ),
    (
        "pinned_rules_render_the_flag_and_need_no_grant",
        Needs::Tools(pinned_rules_render_the_flag_and_need_no_grant),
    ),
    (
        "the_audit_renders_its_flag_and_the_optional_rbac",
        Needs::Tools(the_audit_renders_its_flag_and_the_optional_rbac),
    ),
    (
        "the_kustomize_components_render_what_the_chart_does",
        Needs::Tools(the_kustomize_components_render_what_the_chart_does),
    ),
    (
        "release_name_and_namespace_reach_every_reference",
        Needs::Tools(release_name_and_namespace_reach_every_reference),
    ),
    (
        "the_example_repository_previews_through_kustomize",
        Needs::Tools(the_example_repository_previews_through_kustomize),
    ),
    (
        "helm_install_creates_the_install",
        Needs::Cluster(helm_install_creates_the_install),
    ),
];

fn main() -> ExitCode {
    sartor_tests::suite::main("helm", TRIALS, ControlPlane::start)
}

// === the trials ===

/// charts/sartor/crds/ holds exactly the generated CRDs of crds/, byte for
/// byte: copies, since `helm package` does not follow symlinks.
fn chart_crds_are_the_generated_crds() -> Result<(), String> {
    let generated = yaml_files("crds")?;
    let copied = yaml_files(&format!("{CHART}/crds"))?;
    let mut problems = Vec::new();
    for (name, bytes) in &generated {
        match copied.get(name) {
            None => problems.push(format!("{CHART}/crds/{name} is missing")),
            Some(copy) if copy != bytes => {
                problems.push(format!("{CHART}/crds/{name} differs from crds/{name}"));
            }
            Some(_) => {}
        }
    }
    for name in copied.keys().filter(|name| !generated.contains_key(*name)) {
        problems.push(format!(
            "{CHART}/crds/{name} is not in crds/ (remove it: rm {CHART}/crds/{name})"
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}\nresync the chart's copies with: cp crds/*.yaml {CHART}/crds/",
            problems.join("\n")
        ))
    }
}

/// The values table of charts/sartor/README.md has one row per value of
/// values.yaml, and no other.
fn chart_readme_documents_every_value() -> Result<(), String> {
    let values: Value = serde_yaml::from_str(&read(&format!("{CHART}/values.yaml"))?)
        .map_err(|e| format!("{CHART}/values.yaml: {e}"))?;
    let mut expected = BTreeSet::new();
    value_paths("", &values, &mut expected);
    let readme = read(&format!("{CHART}/README.md"))?;
    let table = readme
        .split_once("\n## Values\n")
        .map(|(_, rest)| rest.split("\n## ").next().unwrap_or_default())
        .ok_or(format!("{CHART}/README.md has no `## Values` section"))?;
    let documented: BTreeSet<String> = table
        .lines()
        .filter_map(|line| line.strip_prefix("| `")?.split_once('`'))
        .map(|(path, _)| path.to_string())
        .collect();
    same(
        "the values in the README's table (left) and in values.yaml (right)",
        documented,
        expected,
    )
}

/// With the default release name and namespace, the chart renders the
/// objects `kubectl kustomize manifests/` does, except the Namespace (made by
/// `helm --create-namespace` or the admin) and Helm's labels.
fn chart_renders_like_the_kustomize_install(tools: &Tools) -> Result<(), String> {
    let chart = render(tools, "sartor", "sartor-system", &[])?;
    helm_labels_are_set(&chart, "sartor")?;
    let mut kustomize = parse(&tool(tools, "kubectl", &["kustomize", "manifests/"])?)?;
    kustomize
        .remove("Namespace sartor-system")
        .ok_or("kubectl kustomize manifests/ rendered no Namespace sartor-system")?;
    compare(
        "kubectl kustomize manifests/",
        &without_helm_labels(kustomize),
        "helm template sartor charts/sartor --namespace sartor-system",
        &without_helm_labels(chart),
    )
}

/// `helm lint --strict` finds nothing, with either certificate mode.
fn helm_lint_is_clean(tools: &Tools) -> Result<(), String> {
    for extra in [&[][..], &["--set", "certificate.mode=certManager"]] {
        let args = [&["lint", CHART, "--strict"][..], extra].concat();
        let out = tool(tools, "helm", &args)?;
        let findings: Vec<&str> = out
            .lines()
            .filter(|line| line.starts_with("[WARNING]") || line.starts_with("[ERROR]"))
            .collect();
        same(
            &format!("helm {}: findings", args.join(" ")),
            findings,
            vec![],
        )?;
        same(
            &format!("helm {}: summary", args.join(" ")),
            out.lines().last().unwrap_or_default(),
            "1 chart(s) linted, 0 chart(s) failed",
        )?;
    }
    Ok(())
}

/// certificate.mode certManager changes the default rendering exactly so:
/// a CA Issuer chain and the serving Certificate are added, the webhook
/// configurations ask cert-manager for the CA, sartor serves the mounted
/// Secret, and the grants for the managed certificate go (but for the
/// mutating configuration's, whose rules the replicas still derive).
fn cert_manager_values_render(tools: &Tools) -> Result<(), String> {
    let mut expected = without_helm_labels(render(tools, "sartor", "sartor-system", &[])?);
    let actual = render(
        tools,
        "sartor",
        "sartor-system",
        &["--set", "certificate.mode=certManager"],
    )?;
    helm_labels_are_set(&actual, "sartor")?;
    for unused in [
        "Role sartor-system/sartor",
        "RoleBinding sartor-system/sartor",
    ] {
        expected
            .remove(unused)
            .ok_or(format!("no {unused} by default"))?;
    }
    // The mutating configuration's grant stays: the replicas derive its rules.
    pointer_mut(&mut expected, "ClusterRole sartor", "/rules")?
        .as_array_mut()
        .ok_or("ClusterRole rules: not a list")?
        .retain(|rule| rule["resources"] != json!(["validatingwebhookconfigurations"]));
    let deployment = "Deployment sartor-system/sartor";
    set(
        &mut expected,
        deployment,
        "/spec/template/spec/containers/0/args",
        json!([
            "serve",
            "--cert-mode=external",
            "--tls-cert-file=/certs/tls.crt",
            "--tls-key-file=/certs/tls.key",
            "--log-format=json"
        ]),
    )?;
    set(
        &mut expected,
        deployment,
        "/spec/template/spec/volumes",
        json!([{"name": "certs", "secret": {"secretName": "sartor-webhook-tls"}}]),
    )?;
    for config in [
        "MutatingWebhookConfiguration sartor-mutating",
        "ValidatingWebhookConfiguration sartor-validating",
    ] {
        set(
            &mut expected,
            config,
            "/metadata/annotations",
            json!({"cert-manager.io/inject-ca-from": "sartor-system/sartor-webhook"}),
        )?;
    }
    let cert_manager = |kind: &str, name: &str, spec: Value| {
        json!({
            "apiVersion": "cert-manager.io/v1",
            "kind": kind,
            "metadata": {
                "name": name,
                "namespace": "sartor-system",
                "labels": {"app.kubernetes.io/name": "sartor", "app.kubernetes.io/part-of": "sartor"},
            },
            "spec": spec,
        })
    };
    for object in [
        cert_manager("Issuer", "sartor-selfsigned", json!({"selfSigned": {}})),
        cert_manager(
            "Certificate",
            "sartor-ca",
            json!({
                "isCA": true,
                "commonName": "sartor-ca",
                "secretName": "sartor-ca",
                "duration": "87600h",
                "privateKey": {"algorithm": "ECDSA", "size": 256},
                "issuerRef": {"kind": "Issuer", "name": "sartor-selfsigned"},
            }),
        ),
        cert_manager(
            "Issuer",
            "sartor-ca",
            json!({"ca": {"secretName": "sartor-ca"}}),
        ),
        cert_manager(
            "Certificate",
            "sartor-webhook",
            json!({
                "secretName": "sartor-webhook-tls",
                "duration": "2160h",
                "dnsNames": [
                    "sartor-webhook.sartor-system.svc",
                    "sartor-webhook.sartor-system.svc.cluster.local"
                ],
                "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
                "issuerRef": {"kind": "Issuer", "name": "sartor-ca"},
            }),
        ),
    ] {
        expected.insert(key(&object), object);
    }
    compare(
        "the default rendering with the certManager changes",
        &expected,
        "helm template sartor charts/sartor --set certificate.mode=certManager",
        &without_helm_labels(actual),
    )
}

/// mutatingWebhook.rulesMode pinned passes `--webhook-rules=pinned` and
/// nothing else changes; with certificate.mode certManager too, sartor
/// writes no webhook configuration, so neither grant is rendered. An
/// unknown mode fails the rendering (the values schema), naming the value.
fn pinned_rules_render_the_flag_and_need_no_grant(tools: &Tools) -> Result<(), String> {
    let pinned = ["--set", "mutatingWebhook.rulesMode=pinned"];
    let mut expected = without_helm_labels(render(tools, "sartor", "sartor-system", &[])?);
    let deployment = "Deployment sartor-system/sartor";
    pointer_mut(
        &mut expected,
        deployment,
        "/spec/template/spec/containers/0/args",
    )?
    .as_array_mut()
    .ok_or("args: not a list")?
    .push(json!("--webhook-rules=pinned"));
    compare(
        "the default rendering with --webhook-rules=pinned",
        &expected,
        "helm template sartor charts/sartor --set mutatingWebhook.rulesMode=pinned",
        &without_helm_labels(render(tools, "sartor", "sartor-system", &pinned)?),
    )?;
    let cert_manager = render(
        tools,
        "sartor",
        "sartor-system",
        &[
            "--set",
            "mutatingWebhook.rulesMode=pinned",
            "--set",
            "certificate.mode=certManager",
        ],
    )?;
    let grants: Vec<Value> = field(&cert_manager, "ClusterRole sartor", "/rules")
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|rule| rule["apiGroups"] == json!(["admissionregistration.k8s.io"]))
        .collect();
    same("webhook configuration grants", grants, Vec::new())?;
    match render(
        tools,
        "sartor",
        "sartor-system",
        &["--set", "mutatingWebhook.rulesMode=static"],
    ) {
        Ok(_) => Err("rulesMode=static rendered".to_string()),
        Err(error)
            if error.contains(
                "at '/mutatingWebhook/rulesMode': value must be one of 'derived', 'pinned'",
            ) =>
        {
            Ok(())
        }
        Err(error) => Err(format!(
            "rulesMode=static failed without naming it: {error}"
        )),
    }
}

/// `audit.intervalSeconds` turns the in-cluster audit on: the default
/// rendering plus its flag and exactly the objects of
/// manifests/optional/audit/rbac.yaml (Helm's labels aside); `audit.rules`
/// from `sartor audit rbac -o helm-values` adds the objects it prints with
/// `-o yaml`; `audit.repair.enabled` adds those of manifests/optional/audit-repair, and
/// alone is refused by name.
fn the_audit_renders_its_flag_and_the_optional_rbac(tools: &Tools) -> Result<(), String> {
    let mut expected = without_helm_labels(render(tools, "sartor", "sartor-system", &[])?);
    pointer_mut(
        &mut expected,
        "Deployment sartor-system/sartor",
        "/spec/template/spec/containers/0/args",
    )?
    .as_array_mut()
    .ok_or("args: not a list")?
    .push(json!("--audit-interval=300"));
    expected.extend(parse(&read("manifests/optional/audit/rbac.yaml")?)?);
    compare(
        "the default rendering, --audit-interval=300 and manifests/optional/audit/rbac.yaml",
        &expected,
        "helm template sartor charts/sartor --set audit.intervalSeconds=300",
        &without_helm_labels(render(
            tools,
            "sartor",
            "sartor-system",
            &["--set", "audit.intervalSeconds=300"],
        )?),
    )?;
    // What the audit may list: `sartor audit rbac`'s role, from its values.
    let generated = AuditRbac::of(AUDITED_MUTATORS)?;
    let mut with_objects = expected.clone();
    with_objects.extend(parse(&generated.objects)?);
    compare(
        "the audit's rendering and `sartor audit rbac`",
        &with_objects,
        "helm template sartor charts/sartor --set audit.intervalSeconds=300 -f <sartor audit rbac -o helm-values>",
        &without_helm_labels(render(
            tools,
            "sartor",
            "sartor-system",
            &[
                "--set",
                "audit.intervalSeconds=300",
                "-f",
                &generated.values_file(),
            ],
        )?),
    )?;
    expected.extend(parse(&read("manifests/optional/audit-repair/rbac.yaml")?)?);
    compare(
        "the audit's rendering and manifests/optional/audit-repair/rbac.yaml",
        &expected,
        "helm template sartor charts/sartor --set audit.intervalSeconds=300 --set audit.repair.enabled=true",
        &without_helm_labels(render(
            tools,
            "sartor",
            "sartor-system",
            &[
                "--set",
                "audit.intervalSeconds=300",
                "--set",
                "audit.repair.enabled=true",
            ],
        )?),
    )?;
    match render(
        tools,
        "sartor",
        "sartor-system",
        &["--set", "audit.repair.enabled=true"],
    ) {
        Ok(_) => Err("audit.repair.enabled rendered without the audit".to_string()),
        Err(error)
            if error.contains(
                "audit.repair.enabled needs audit.intervalSeconds above 0: the in-cluster audit makes the repairs",
            ) =>
        {
            Ok(())
        }
        Err(error) => Err(format!(
            "audit.repair.enabled alone failed without saying why: {error}"
        )),
    }
}

/// The kustomize components manifests/optional/audit and audit-repair, in a
/// kustomization of the admin's own over manifests/, render what the chart
/// renders with the audit and its repairs on.
///
/// The objects' role `sartor audit rbac` prints, a resource of that
/// kustomization, is what the chart renders from the `audit.rules` it
/// prints with `-o helm-values`.
fn the_kustomize_components_render_what_the_chart_does(tools: &Tools) -> Result<(), String> {
    let generated = AuditRbac::of(AUDITED_MUTATORS)?;
    let values_file = generated.values_file();
    let objects = [("audit-objects.yaml", generated.objects.as_str())];
    for (components, resources, values) in [
        (
            &["audit"][..],
            &[][..],
            &["--set", "audit.intervalSeconds=300"][..],
        ),
        (
            &["audit"][..],
            &objects[..],
            &["--set", "audit.intervalSeconds=300", "-f", &values_file][..],
        ),
        (
            &["audit", "audit-repair"][..],
            &[][..],
            &[
                "--set",
                "audit.intervalSeconds=300",
                "--set",
                "audit.repair.enabled=true",
            ][..],
        ),
    ] {
        let names: Vec<&str> = resources.iter().map(|(name, _)| *name).collect();
        compare(
            &format!(
                "kubectl kustomize of manifests/ with components {components:?} and resources {names:?}"
            ),
            &without_helm_labels(kustomize_with(tools, components, resources)?),
            &format!("helm template sartor charts/sartor {}", values.join(" ")),
            &without_helm_labels(render(tools, "sartor", "sartor-system", values)?),
        )?;
    }
    Ok(())
}

/// Gatekeeper's Assign of Pods, sartor's of Secrets, and an AssignMetadata
/// of every kind of `apps`: what the audit's generated role is tried with.
const AUDITED_MUTATORS: &str = "\
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: always-pull}
spec:
  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]
  location: spec.containers[name:*].imagePullPolicy
  parameters: {assign: {value: Always}}
---
apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata: {name: secret-audited}
spec:
  applyTo: [{groups: [''], versions: [v1], kinds: [Secret]}]
  location: data.audited
  parameters: {assign: {value: eWVz}}
---
apiVersion: mutations.sartor.dev/v1
kind: AssignMetadata
metadata: {name: apps-team}
spec:
  match:
    kinds: [{apiGroups: [apps], kinds: ['*']}]
  location: metadata.labels.team
  parameters: {assign: {value: platform}}
";

/// What `sartor audit rbac` prints for some mutators: the objects and the
/// chart's values, the latter kept in a file for `helm -f`.
struct AuditRbac {
    /// `-o yaml`.
    objects: String,
    /// Holds `values.yaml`, `-o helm-values`.
    dir: TempDir,
}

impl AuditRbac {
    fn of(mutators: &str) -> Result<AuditRbac, String> {
        let dir = TempDir::new("sartor-audit-rbac")?;
        let file = dir.path().join("mutators.yaml");
        std::fs::write(&file, mutators).map_err(|e| format!("{}: {e}", file.display()))?;
        let print = |format: &str| {
            run(
                Command::new(sartor_tests::binary::sartor()?)
                    .args(["audit", "rbac", "--mutators"])
                    .arg(&file)
                    .args(["-o", format]),
                None,
            )
        };
        let objects = print("yaml")?;
        let values = print("helm-values")?;
        let values_file = dir.path().join("values.yaml");
        std::fs::write(&values_file, values)
            .map_err(|e| format!("{}: {e}", values_file.display()))?;
        Ok(AuditRbac { objects, dir })
    }

    fn values_file(&self) -> String {
        self.dir.path().join("values.yaml").display().to_string()
    }
}

/// The README's preview of the example repository: `kubectl kustomize` of
/// its production overlay piped into `sartor mutate --expand` prints the
/// Deployment (3 replicas), the Pod it creates mutated, and the Namespace;
/// the mutators and the ExpansionTemplate are used, not printed.
fn the_example_repository_previews_through_kustomize(tools: &Tools) -> Result<(), String> {
    let built = tool(
        tools,
        "kubectl",
        &["kustomize", "examples/repo/overlays/prod"],
    )?;
    let preview = run(
        Command::new(sartor_tests::binary::sartor()?)
            .current_dir(repo())
            .args(["mutate", "--expand"]),
        Some(&built),
    )?;
    same(
        "kubectl kustomize examples/repo/overlays/prod | sartor mutate --expand",
        preview.as_str(),
        "apiVersion: v1
kind: Namespace
metadata:
  labels:
    team: checkout
  name: shop
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: cart
  namespace: shop
spec:
  replicas: 3
  selector:
    matchLabels:
      app: cart
  template:
    metadata:
      labels:
        app: cart
    spec:
      containers:
      - image: shop/cart:1.4
        name: app
---
apiVersion: v1
kind: Pod
metadata:
  labels:
    app: cart
    team: checkout
  name: cart-pod
  namespace: shop
  ownerReferences:
  - apiVersion: apps/v1
    kind: Deployment
    name: cart
spec:
  containers:
  - image: shop/cart:1.4
    imagePullPolicy: Always
    name: app
",
    )
}

/// Another release name and namespace reach every name and reference, and
/// the names that differ from `sartor serve`'s defaults are passed to it;
/// exemptNamespaces reach the webhook and the binary.
fn release_name_and_namespace_reach_every_reference(tools: &Tools) -> Result<(), String> {
    let objects = render(
        tools,
        "platform",
        "platform",
        &["--set", "exemptNamespaces={kube-node-lease}"],
    )?;
    let mut names: Vec<&str> = objects.keys().map(String::as_str).collect();
    names.retain(|name| !name.starts_with("CustomResourceDefinition "));
    same(
        "objects",
        names,
        vec![
            "ClusterRole platform-sartor",
            "ClusterRoleBinding platform-sartor",
            "Deployment platform/platform-sartor",
            "MutatingWebhookConfiguration platform-sartor-mutating",
            "PodDisruptionBudget platform/platform-sartor",
            "Role platform/platform-sartor",
            "RoleBinding platform/platform-sartor",
            "Service platform/platform-sartor-webhook",
            "ServiceAccount platform/platform-sartor",
            "ValidatingWebhookConfiguration platform-sartor-validating",
        ],
    )?;
    let subjects =
        json!([{"kind": "ServiceAccount", "name": "platform-sartor", "namespace": "platform"}]);
    let service = |path: &str| json!({"namespace": "platform", "name": "platform-sartor-webhook", "path": path, "port": 443});
    let checks = [
        (
            "Deployment platform/platform-sartor",
            "/spec/template/spec/containers/0/args",
            json!([
                "serve",
                "--cert-dir=/certs",
                "--cert-secret=platform-sartor-webhook-server-cert",
                "--webhook-service=platform-sartor-webhook",
                "--mutating-webhook-configuration=platform-sartor-mutating",
                "--validating-webhook-configuration=platform-sartor-validating",
                "--service-account=platform-sartor",
                "--log-format=json",
                "--exclude-namespace=kube-system",
                "--exclude-namespace=kube-node-lease"
            ]),
        ),
        (
            "Deployment platform/platform-sartor",
            "/spec/template/spec/serviceAccountName",
            json!("platform-sartor"),
        ),
        (
            "MutatingWebhookConfiguration platform-sartor-mutating",
            "/webhooks/0/clientConfig/service",
            service("/v1/mutate"),
        ),
        (
            "MutatingWebhookConfiguration platform-sartor-mutating",
            "/webhooks/0/namespaceSelector/matchExpressions/1",
            json!({
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", "platform", "kube-node-lease"],
            }),
        ),
        (
            "ValidatingWebhookConfiguration platform-sartor-validating",
            "/webhooks/0/clientConfig/service",
            service("/v1/validate"),
        ),
        (
            "ClusterRole platform-sartor",
            "/rules/5/resourceNames",
            json!(["platform-sartor-mutating"]),
        ),
        (
            "ClusterRole platform-sartor",
            "/rules/6/resourceNames",
            json!(["platform-sartor-validating"]),
        ),
        (
            "Role platform/platform-sartor",
            "/rules/1/resourceNames",
            json!(["platform-sartor-webhook-server-cert"]),
        ),
        (
            "ClusterRoleBinding platform-sartor",
            "/subjects",
            subjects.clone(),
        ),
        (
            "RoleBinding platform/platform-sartor",
            "/subjects",
            subjects,
        ),
    ];
    fields_are(&objects, &checks)
}

/// `helm install`, `upgrade` and `uninstall` on a real API server:
/// - the install establishes the CRDs and its objects carry the values;
/// - an upgrade leaves the CRDs alone, restores rules an emergency patch
///   emptied, keeps the caBundle sartor injected and changes exactly what
///   its values change;
/// - with failurePolicy Fail and no replica, an upgrade is refused until the
///   emergency off switch is used, and the next upgrade undoes the switch;
/// - the uninstall removes everything but the CRDs.
fn helm_install_creates_the_install(plane: &mut ControlPlane) -> Result<(), String> {
    let helm = |args: &[&str]| {
        run(plane.helm_command().current_dir(repo()).args(args), None)
            .map_err(|e| format!("helm {}: {e}", args.join(" ")))
    };
    let upgrade = |chart: &str, extra: &[&str]| {
        helm(
            &[
                &["upgrade", "sartor", chart, "--namespace", "sartor-system"][..],
                extra,
            ]
            .concat(),
        )
    };
    helm(&[
        "install",
        "sartor",
        CHART,
        "--namespace",
        "sartor-system",
        "--create-namespace",
        "--wait=hookOnly",
    ])?;
    for crd in CRDS {
        plane.kubectl(&[
            "wait",
            "--for=condition=Established",
            "--timeout=30s",
            &format!("crd/{crd}"),
        ])?;
    }
    let installed = live(plane)?;
    same(
        "objects of the release",
        installed.keys().map(String::as_str).collect(),
        vec![
            "ClusterRole sartor",
            "ClusterRoleBinding sartor",
            "Deployment sartor-system/sartor",
            "MutatingWebhookConfiguration sartor-mutating",
            "PodDisruptionBudget sartor-system/sartor",
            "Role sartor-system/sartor",
            "RoleBinding sartor-system/sartor",
            "Service sartor-system/sartor-webhook",
            "ServiceAccount sartor-system/sartor",
            "ValidatingWebhookConfiguration sartor-validating",
        ],
    )?;
    let deployment = "Deployment sartor-system/sartor";
    let (mutating, validating) = (
        "MutatingWebhookConfiguration sartor-mutating",
        "ValidatingWebhookConfiguration sartor-validating",
    );
    let subjects =
        json!([{"kind": "ServiceAccount", "name": "sartor", "namespace": "sartor-system"}]);
    let checks = [
        (deployment, "/spec/replicas", json!(3)),
        (
            deployment,
            "/spec/template/spec/containers/0/args",
            json!(["serve", "--cert-dir=/certs", "--log-format=json"]),
        ),
        (
            deployment,
            "/spec/template/spec/containers/0/image",
            json!("ghcr.io/sartor-dev/sartor:v0.1.0"),
        ),
        (
            deployment,
            "/spec/template/spec/serviceAccountName",
            json!("sartor"),
        ),
        (mutating, "/webhooks/0/failurePolicy", json!("Ignore")),
        (mutating, "/webhooks/0/timeoutSeconds", json!(1)),
        (validating, "/webhooks/0/failurePolicy", json!("Ignore")),
        (validating, "/webhooks/0/timeoutSeconds", json!(3)),
        ("ClusterRoleBinding sartor", "/subjects", subjects.clone()),
        (
            "ClusterRoleBinding sartor",
            "/roleRef",
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "sartor"}),
        ),
        ("RoleBinding sartor-system/sartor", "/subjects", subjects),
        (
            "RoleBinding sartor-system/sartor",
            "/roleRef",
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "sartor"}),
        ),
    ];
    fields_are(&installed, &checks)?;

    // An upgrade restores the webhook rules an emergency patch emptied, and
    // leaves the CRDs alone even when the chart's crds/ changed them (Helm
    // applies crds/ at install only).
    let rules = "/webhooks/0/rules";
    let patch = format!(r#"[{{"op":"replace","path":"{rules}","value":[]}}]"#);
    plane.kubectl(&[
        "patch",
        "mutatingwebhookconfiguration",
        "sartor-mutating",
        "--type=json",
        "-p",
        &patch,
    ])?;
    let changed = TempDir::new("sartor-chart")?;
    copy_dir(&repo().join(CHART), changed.path())?;
    let crd = changed.path().join("crds/assign.yaml");
    let text = std::fs::read_to_string(&crd).map_err(|e| format!("{}: {e}", crd.display()))?;
    let text = text.replacen(
        "\nmetadata:\n",
        "\nmetadata:\n  annotations:\n    sartor.dev/changed: \"true\"\n",
        1,
    );
    std::fs::write(&crd, text).map_err(|e| format!("{}: {e}", crd.display()))?;
    upgrade(&changed.path().display().to_string(), &["--reuse-values"])?;
    fields_are(
        &live(plane)?,
        &[(mutating, rules, field(&installed, mutating, rules))],
    )?;
    same(
        "annotations of the CRD after an upgrade whose crds/ changed it",
        plane.kubectl(&[
            "get",
            &format!("crd/{}", CRDS[0]),
            "-o",
            "jsonpath={.metadata.annotations}",
        ])?,
        String::new(),
    )?;

    // sartor (managed certificate) sets caBundle with an update of its own;
    // an upgrade keeps it and changes exactly what its values change.
    let ca_bundle = json!(BASE64.encode(&plane.pki.ca_cert));
    for name in [
        "mutatingwebhookconfiguration/sartor-mutating",
        "validatingwebhookconfiguration/sartor-validating",
    ] {
        let mut config = json(&plane.kubectl(&["get", name, "-o", "json"])?)?;
        let hooks = config["webhooks"].as_array_mut().ok_or("no webhooks")?;
        for hook in hooks {
            hook["clientConfig"]["caBundle"] = ca_bundle.clone();
        }
        plane.kubectl_with_input(&["replace", "-f", "-"], Some(&config.to_string()))?;
    }
    let before = live(plane)?;
    let values = "replicaCount=2,failurePolicy=Fail";
    upgrade(CHART, &["--set", values])?;
    let mut expected = before;
    set(&mut expected, deployment, "/spec/replicas", json!(2))?;
    for config in [mutating, validating] {
        set(
            &mut expected,
            config,
            "/webhooks/0/failurePolicy",
            json!("Fail"),
        )?;
    }
    compare(
        "the objects before the upgrade, with replicas 2 and failurePolicy Fail",
        &expected,
        &format!("after helm upgrade --set {values}"),
        &live(plane)?,
    )?;

    // No replica answers here. With failurePolicy Fail the API server then
    // refuses the release's cluster-scoped objects (the ClusterRole, ...),
    // so an upgrade fails until the emergency off switch is used; the
    // upgrade after it recreates the configuration, without a caBundle until
    // a replica injects it again.
    match upgrade(CHART, &["--reuse-values"]) {
        Err(error) if error.contains(r#"failed calling webhook "mutation.sartor.dev""#) => {}
        other => {
            return Err(format!(
                "helm upgrade with failurePolicy Fail and no replica: {other:?}, expected a refusal by the webhook"
            ));
        }
    }
    plane.kubectl(&["delete", "mutatingwebhookconfiguration", "sartor-mutating"])?;
    upgrade(CHART, &["--reuse-values", "--set", "failurePolicy=Ignore"])?;
    fields_are(
        &live(plane)?,
        &[
            (mutating, "/webhooks/0/failurePolicy", json!("Ignore")),
            (mutating, "/webhooks/0/clientConfig/caBundle", Value::Null),
        ],
    )?;

    helm(&["uninstall", "sartor", "--namespace", "sartor-system"])?;
    same(
        "objects of the release after helm uninstall",
        live(plane)?.keys().cloned().collect(),
        Vec::<String>::new(),
    )?;
    let crds: Vec<String> = CRDS.iter().map(|crd| format!("crd/{crd}")).collect();
    let kept = plane.kubectl(
        &[
            &["get", "-o", "name"][..],
            &crds.iter().map(String::as_str).collect::<Vec<_>>(),
        ]
        .concat(),
    )?;
    same(
        "CRDs after helm uninstall (Helm never deletes crds/)",
        kept.lines().map(str::to_string).collect(),
        CRDS.iter()
            .map(|crd| format!("customresourcedefinition.apiextensions.k8s.io/{crd}"))
            .collect::<Vec<_>>(),
    )?;
    match helm(&["status", "sartor", "--namespace", "sartor-system"]) {
        Err(error) if error.ends_with("release: not found") => Ok(()),
        other => Err(format!(
            "helm status after helm uninstall: {other:?}, expected `release: not found`"
        )),
    }
}

// === helpers ===

/// Objects by `Kind namespace/name` (or `Kind name` when cluster-scoped).
type Objects = BTreeMap<String, Value>;

/// The repository root, where every command runs.
fn repo() -> PathBuf {
    sartor_tests::workspace_root()
}

/// A file of the repository.
fn read(relative: &str) -> Result<String, String> {
    sartor_tests::read_repo_file(relative).map_err(|e| e.to_string())
}

/// The `*.yaml` files of a directory of the repository, by name.
fn yaml_files(dir: &str) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let path = repo().join(dir);
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(&path).map_err(|e| format!("{}: {e}", path.display()))? {
        let path = entry.map_err(|e| format!("{dir}: {e}"))?.path();
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if name.ends_with(".yaml") {
            let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            files.insert(name, bytes);
        }
    }
    Ok(files)
}

/// Copies a directory tree.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| format!("{}: {e}", to.display()))?;
    for entry in std::fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))? {
        let path = entry
            .map_err(|e| format!("{}: {e}", from.display()))?
            .path();
        let target = to.join(path.file_name().unwrap_or_default());
        if path.is_dir() {
            copy_dir(&path, &target)?;
        } else {
            std::fs::copy(&path, &target).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// The dotted paths of the values a user sets: maps are descended into,
/// except empty ones and `resources` (a Kubernetes object); anything else is
/// one value.
fn value_paths(prefix: &str, value: &Value, out: &mut BTreeSet<String>) {
    match value.as_object() {
        Some(map) if !map.is_empty() && prefix != "resources" => {
            for (key, value) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                value_paths(&path, value, out);
            }
        }
        _ => {
            out.insert(prefix.to_string());
        }
    }
}

/// Runs a pinned tool (no cluster) in the repository root; helm's caches
/// and configuration go to a temporary directory.
fn tool(tools: &Tools, name: &str, args: &[&str]) -> Result<String, String> {
    let home = TempDir::new("sartor-helm")?;
    let mut command = Command::new(tools.path(name));
    command
        .current_dir(repo())
        .args(args)
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_DATA_HOME", home.path().join("data"));
    run(&mut command, None).map_err(|e| format!("{name} {}: {e}", args.join(" ")))
}

/// `kubectl kustomize` of a kustomization of the admin's own: manifests/
/// and the `components` under manifests/optional, the Namespace left out
/// (as in [`chart_renders_like_the_kustomize_install`]).
fn kustomize_with(
    tools: &Tools,
    components: &[&str],
    resources: &[(&str, &str)],
) -> Result<Objects, String> {
    let dir = TempDir::new("sartor-kustomization")?;
    // kustomize takes other kustomizations by relative path only, from the
    // directory with its links resolved.
    let real = dir
        .path()
        .canonicalize()
        .map_err(|e| format!("{}: {e}", dir.path().display()))?;
    let up = "../".repeat(real.components().count().saturating_sub(1));
    let repo = repo()
        .canonicalize()
        .map_err(|e| format!("{}: {e}", repo().display()))?;
    let root = format!("{up}{}", repo.display().to_string().trim_start_matches('/'));
    let mut text = format!("resources:\n- {root}/manifests\n");
    for (name, objects) in resources {
        let file = dir.path().join(name);
        std::fs::write(&file, objects).map_err(|e| format!("{}: {e}", file.display()))?;
        text.push_str(&format!("- {name}\n"));
    }
    text.push_str("components:\n");
    for component in components {
        text.push_str(&format!("- {root}/manifests/optional/{component}\n"));
    }
    let file = dir.path().join("kustomization.yaml");
    std::fs::write(&file, text).map_err(|e| format!("{}: {e}", file.display()))?;
    let built = tool(
        tools,
        "kubectl",
        &["kustomize", &real.display().to_string()],
    )?;
    let mut objects = parse(&built)?;
    objects
        .remove("Namespace sartor-system")
        .ok_or("the kustomization rendered no Namespace sartor-system")?;
    Ok(objects)
}

/// `helm template RELEASE charts/sartor --namespace NAMESPACE --include-crds ...`, parsed.
fn render(
    tools: &Tools,
    release: &str,
    namespace: &str,
    extra: &[&str],
) -> Result<Objects, String> {
    let args = [
        &[
            "template",
            release,
            CHART,
            "--namespace",
            namespace,
            "--include-crds",
        ][..],
        extra,
    ]
    .concat();
    parse(&tool(tools, "helm", &args)?)
}

/// The objects of a multi-document YAML stream.
fn parse(yaml: &str) -> Result<Objects, String> {
    let mut objects = Objects::new();
    for document in serde_yaml::Deserializer::from_str(yaml) {
        let object = Value::deserialize(document).map_err(|e| format!("not YAML: {e}"))?;
        if object.is_null() {
            continue;
        }
        let key = key(&object);
        if objects.insert(key.clone(), object).is_some() {
            return Err(format!("{key} is rendered twice"));
        }
    }
    Ok(objects)
}

/// `Kind namespace/name`, or `Kind name` for a cluster-scoped object.
fn key(object: &Value) -> String {
    let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
    let kind = text("/kind").unwrap_or_default();
    let name = text("/metadata/name").unwrap_or_default();
    match text("/metadata/namespace") {
        Some(namespace) => format!("{kind} {namespace}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// Every object the chart templates (all but the CRDs) carries Helm's
/// labels, with the chart's version and `release`.
fn helm_labels_are_set(objects: &Objects, release: &str) -> Result<(), String> {
    let chart: Value = serde_yaml::from_str(&read(&format!("{CHART}/Chart.yaml"))?)
        .map_err(|e| format!("{CHART}/Chart.yaml: {e}"))?;
    let text = |field: &str| chart[field].as_str().unwrap_or_default().to_string();
    let expected = json!({
        "helm.sh/chart": format!("sartor-{}", text("version")),
        "app.kubernetes.io/managed-by": "Helm",
        "app.kubernetes.io/instance": release,
        "app.kubernetes.io/version": text("appVersion"),
    });
    for (key, object) in objects {
        if object["kind"] == "CustomResourceDefinition" {
            continue;
        }
        let actual: serde_json::Map<String, Value> = HELM_LABELS
            .iter()
            .filter_map(|label| {
                let value = object.pointer("/metadata/labels")?.get(*label)?;
                Some(((*label).to_string(), value.clone()))
            })
            .collect();
        same(
            &format!("{key}: Helm's labels"),
            Value::Object(actual),
            expected.clone(),
        )?;
    }
    Ok(())
}

/// The objects with Helm's labels removed.
fn without_helm_labels(mut objects: Objects) -> Objects {
    for object in objects.values_mut() {
        if let Some(labels) = object
            .pointer_mut("/metadata/labels")
            .and_then(Value::as_object_mut)
        {
            labels.retain(|label, _| !HELM_LABELS.contains(&label.as_str()));
        }
    }
    objects
}

/// The release's objects on the API server (selected by Helm's instance
/// label), without status and with only the metadata a chart sets.
fn live(plane: &ControlPlane) -> Result<Objects, String> {
    let selector = "--selector=app.kubernetes.io/instance=sartor";
    let namespaced = "serviceaccounts,roles,rolebindings,deployments,poddisruptionbudgets,services";
    let cluster = "clusterroles,clusterrolebindings,mutatingwebhookconfigurations,validatingwebhookconfigurations";
    let mut objects = Objects::new();
    for args in [
        &[
            "get",
            namespaced,
            "--namespace",
            "sartor-system",
            selector,
            "-o",
            "json",
        ][..],
        &["get", cluster, selector, "-o", "json"],
    ] {
        let list = json(&plane.kubectl(args)?)?;
        for mut object in list["items"].as_array().cloned().unwrap_or_default() {
            if let Some(fields) = object.as_object_mut() {
                fields.remove("status");
            }
            if let Some(metadata) = object["metadata"].as_object_mut() {
                metadata.retain(|field, _| {
                    matches!(
                        field.as_str(),
                        "name" | "namespace" | "labels" | "annotations"
                    )
                });
            }
            objects.insert(key(&object), object);
        }
    }
    Ok(objects)
}

/// The value at `pointer` in the object `key`.
fn pointer_mut<'a>(
    objects: &'a mut Objects,
    key: &str,
    pointer: &str,
) -> Result<&'a mut Value, String> {
    objects
        .get_mut(key)
        .and_then(|object| object.pointer_mut(pointer))
        .ok_or(format!("{key} has no {pointer}"))
}

/// Sets the field at `pointer` in the object `key`; its parent must exist.
fn set(objects: &mut Objects, key: &str, pointer: &str, value: Value) -> Result<(), String> {
    let (parent, field) = pointer
        .rsplit_once('/')
        .ok_or(format!("bad pointer {pointer}"))?;
    pointer_mut(objects, key, parent)?
        .as_object_mut()
        .ok_or(format!("{key} {parent} is not a map"))?
        .insert(field.to_string(), value);
    Ok(())
}

/// The field at `pointer` in the object `key`; null when absent.
fn field(objects: &Objects, key: &str, pointer: &str) -> Value {
    objects
        .get(key)
        .and_then(|object| object.pointer(pointer))
        .cloned()
        .unwrap_or(Value::Null)
}

/// Checks fields of objects, given as (object, JSON pointer, value; null for
/// a field that must be absent), and names every one that differs.
fn fields_are(objects: &Objects, checks: &[(&str, &str, Value)]) -> Result<(), String> {
    let problems: Vec<String> = checks
        .iter()
        .filter_map(|(object, pointer, expected)| {
            let actual = field(objects, object, pointer);
            (actual != *expected).then(|| {
                format!("{object} {pointer}:\n  actual:   {actual}\n  expected: {expected}")
            })
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

/// Compares two sets of objects; on a difference, names the objects found in
/// only one and shows a unified YAML diff of each object that differs.
fn compare(
    left_name: &str,
    left: &Objects,
    right_name: &str,
    right: &Objects,
) -> Result<(), String> {
    let mut problems = Vec::new();
    for (key, expected) in left {
        match right.get(key) {
            None => problems.push(format!("{key}: only in {left_name}")),
            Some(actual) if actual != expected => {
                let (expected, actual) = (yaml(expected), yaml(actual));
                let diff = similar::TextDiff::from_lines(&expected, &actual)
                    .unified_diff()
                    .header(left_name, right_name)
                    .to_string();
                problems.push(format!("{key} differs:\n{diff}"));
            }
            Some(_) => {}
        }
    }
    for key in right.keys().filter(|key| !left.contains_key(*key)) {
        problems.push(format!("{key}: only in {right_name}"));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{left_name} (-) and {right_name} (+) differ:\n{}",
            problems.join("\n")
        ))
    }
}

/// An object as YAML, for diffs.
fn yaml(object: &Value) -> String {
    serde_yaml::to_string(object).unwrap_or_else(|e| format!("{object} ({e})"))
}
