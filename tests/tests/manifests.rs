#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
//! The install under `manifests/` (kustomize, with the CRDs from `crds/`):
//! every document is the Kubernetes type its kind names, with no field that
//! type does not know; the kustomizations list exactly the files there; the
//! names, ports and paths agree with each other and with the defaults that
//! `sartor serve --help` shows; RBAC grants exactly what sartor needs; the
//! mutating webhook never selects sartor's own namespace; and the Deployment
//! runs locked down.
//!
//! The test reads the kustomizations itself instead of running kustomize (which
//! CI does not have), so it accepts only the kustomization fields it models.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations,
    ServiceReference, ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    Capabilities, Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, HTTPGetAction,
    LifecycleHandler, Namespace, ObjectFieldSelector, PodSpec, SeccompProfile, SecurityContext,
    Service, ServiceAccount, SleepAction, Volume, VolumeMount,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Deserialize as _;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

// === The install, read from disk ===

/// Every object the install creates, by kind, each with the file it came from.
#[derive(Default)]
struct Install {
    namespaces: Vec<(String, Namespace)>,
    service_accounts: Vec<(String, ServiceAccount)>,
    cluster_roles: Vec<(String, ClusterRole)>,
    cluster_role_bindings: Vec<(String, ClusterRoleBinding)>,
    roles: Vec<(String, Role)>,
    role_bindings: Vec<(String, RoleBinding)>,
    deployments: Vec<(String, Deployment)>,
    services: Vec<(String, Service)>,
    disruption_budgets: Vec<(String, PodDisruptionBudget)>,
    mutating: Vec<(String, MutatingWebhookConfiguration)>,
    validating: Vec<(String, ValidatingWebhookConfiguration)>,
    crds: Vec<(String, CustomResourceDefinition)>,
    /// `images:` of every kustomization read.
    images: Vec<Image>,
}

/// The kustomization fields this test understands. Any other field (a
/// `namespace:` transformer, patches, labels) would change the rendered
/// objects in a way the test does not model, so it fails to parse.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Kustomization {
    #[serde(rename = "apiVersion")]
    api_version: String,
    kind: String,
    resources: Vec<String>,
    #[serde(default)]
    images: Vec<Image>,
}

#[derive(serde::Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Image {
    name: String,
    new_tag: String,
}

/// The names kustomize looks for in a directory, in its order.
const KUSTOMIZATION_NAMES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

fn root() -> PathBuf {
    sartor_tests::workspace_root()
}

/// `path` relative to the workspace root, with `/`, for messages.
fn shown(path: &Path) -> String {
    let path = path.canonicalize().unwrap();
    let root = root().canonicalize().unwrap();
    path.strip_prefix(&root)
        .unwrap_or(&path)
        .to_string_lossy()
        .replace('\\', "/")
}

/// The kustomization file of `dir`.
fn kustomization_file(dir: &Path) -> PathBuf {
    let found: Vec<PathBuf> = KUSTOMIZATION_NAMES
        .iter()
        .map(|name| dir.join(name))
        .filter(|path| path.is_file())
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{}: expected exactly one of {KUSTOMIZATION_NAMES:?}, found {found:?}",
        shown(dir)
    );
    found.into_iter().next().unwrap()
}

/// Reads the kustomization in `dir` and everything it lists (directories
/// recursively) into `install`, adding every file it reads to `read`.
fn read_kustomization(dir: &Path, install: &mut Install, read: &mut BTreeSet<PathBuf>) {
    let file = kustomization_file(dir);
    let text = std::fs::read_to_string(&file).unwrap();
    let kustomization: Kustomization = serde_yaml::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "{}: not a kustomization this test models: {e}",
            shown(&file)
        )
    });
    assert_eq!(
        (
            kustomization.api_version.as_str(),
            kustomization.kind.as_str()
        ),
        ("kustomize.config.k8s.io/v1beta1", "Kustomization"),
        "{}",
        shown(&file)
    );
    read.insert(file.canonicalize().unwrap());
    install.images.extend(kustomization.images);
    for resource in &kustomization.resources {
        let path = dir.join(resource);
        if path.is_dir() {
            read_kustomization(&path, install, read);
        } else {
            assert!(
                path.is_file(),
                "{} lists {resource}, which does not exist",
                shown(&file)
            );
            let canonical = path.canonicalize().unwrap();
            assert!(
                read.insert(canonical),
                "{} lists {resource} a second time",
                shown(&file)
            );
            read_objects(&path, install);
        }
    }
}

/// Reads every document of `file` into `install` as the type its kind names.
fn read_objects(file: &Path, install: &mut Install) {
    let name = shown(file);
    let text = std::fs::read_to_string(file).unwrap();
    for (index, document) in serde_yaml::Deserializer::from_str(&text).enumerate() {
        let value = Value::deserialize(document)
            .unwrap_or_else(|e| panic!("{name}: document {}: {e}", index + 1));
        if value.is_null() {
            continue; // an empty document, e.g. after a trailing `---`
        }
        let at = format!("{name} (document {})", index + 1);
        let api_version = value["apiVersion"].as_str().unwrap_or_default();
        let kind = value["kind"].as_str().unwrap_or_default();
        match (api_version, kind) {
            ("v1", "Namespace") => install.namespaces.push(typed(&at, &value)),
            ("v1", "ServiceAccount") => install.service_accounts.push(typed(&at, &value)),
            ("rbac.authorization.k8s.io/v1", "ClusterRole") => {
                install.cluster_roles.push(typed(&at, &value));
            }
            ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
                install.cluster_role_bindings.push(typed(&at, &value));
            }
            ("rbac.authorization.k8s.io/v1", "Role") => install.roles.push(typed(&at, &value)),
            ("rbac.authorization.k8s.io/v1", "RoleBinding") => {
                install.role_bindings.push(typed(&at, &value));
            }
            ("apps/v1", "Deployment") => install.deployments.push(typed(&at, &value)),
            ("v1", "Service") => install.services.push(typed(&at, &value)),
            ("policy/v1", "PodDisruptionBudget") => {
                install.disruption_budgets.push(typed(&at, &value));
            }
            ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration") => {
                install.mutating.push(typed(&at, &value));
            }
            ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration") => {
                install.validating.push(typed(&at, &value));
            }
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => {
                install.crds.push(typed(&at, &value));
            }
            _ => panic!(
                "{at}: unexpected object {api_version:?} {kind:?}; the install holds only \
                 the kinds this test knows (add the kind here, with checks, if it belongs)"
            ),
        }
    }
}

/// `value` as `K`, and the file it came from. Fails when `value` has a field
/// `K` does not (k8s-openapi ignores unknown fields, as the API server would
/// silently drop them): the typed object must serialise back to `value`.
fn typed<K>(at: &str, value: &Value) -> (String, K)
where
    K: DeserializeOwned + Serialize + k8s_openapi::Resource,
{
    let object: K = serde_json::from_value(value.clone())
        .unwrap_or_else(|e| panic!("{at}: not a valid {}: {e}", K::KIND));
    let back = serde_json::to_value(&object).unwrap();
    if let Some(difference) = first_difference(value, &back, "") {
        panic!(
            "{at}: {} {} does not survive a round trip through the Kubernetes type \
             (a misspelt or misplaced field?): {difference}",
            K::KIND,
            value["metadata"]["name"]
        );
    }
    (at.to_string(), object)
}

/// Where `written` and `typed` first differ, as a JSON path and both values.
fn first_difference(written: &Value, typed: &Value, path: &str) -> Option<String> {
    match (written, typed) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            keys.into_iter().find_map(|key| {
                let here = format!("{path}.{key}");
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => first_difference(x, y, &here),
                    (Some(_), None) => Some(format!("{here} is not a field of this type")),
                    (None, Some(y)) => Some(format!("{here} appeared as {y}")),
                    (None, None) => None,
                }
            })
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (x, y))| first_difference(x, y, &format!("{path}[{i}]"))),
        _ if written == typed => None,
        _ => Some(format!("{path}: written {written}, read back {typed}")),
    }
}

/// The install as `kubectl apply -k manifests/` would create it.
fn install() -> Install {
    let mut install = Install::default();
    let mut read = BTreeSet::new();
    read_kustomization(&root().join("manifests"), &mut install, &mut read);
    install
}

/// Every YAML file under `dir`, recursively.
fn yaml_files(dir: &Path, out: &mut BTreeSet<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml")
            || path.file_name().is_some_and(|n| n == "Kustomization")
        {
            out.insert(path.canonicalize().unwrap());
        }
    }
}

/// The only object of a kind, failing unless there is exactly one.
fn only<'a, K>(objects: &'a [(String, K)], what: &str) -> &'a K {
    assert_eq!(
        objects.len(),
        1,
        "expected one {what}, found {:?}",
        objects.iter().map(|(at, _)| at).collect::<Vec<_>>()
    );
    &objects[0].1
}

fn name(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

fn deployment(install: &Install) -> &Deployment {
    only(&install.deployments, "Deployment")
}

fn pod_spec(install: &Install) -> &PodSpec {
    deployment(install)
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
}

fn container(install: &Install) -> &Container {
    let containers = &pod_spec(install).containers;
    assert_eq!(containers.len(), 1, "one container in the sartor Pod");
    &containers[0]
}

fn mutating_webhook(install: &Install) -> &MutatingWebhook {
    let webhooks = only(&install.mutating, "MutatingWebhookConfiguration")
        .webhooks
        .as_deref()
        .unwrap_or_default();
    assert_eq!(webhooks.len(), 1);
    &webhooks[0]
}

/// The validating webhook called `name`; the configuration holds exactly
/// the mutator check and the exemption-label guard.
fn validating_webhook_named<'a>(install: &'a Install, name: &str) -> &'a ValidatingWebhook {
    let webhooks = only(&install.validating, "ValidatingWebhookConfiguration")
        .webhooks
        .as_deref()
        .unwrap_or_default();
    let names: Vec<&str> = webhooks.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["validation.sartor.dev", "exemption.sartor.dev"]);
    webhooks.iter().find(|w| w.name == name).unwrap()
}

fn validating_webhook(install: &Install) -> &ValidatingWebhook {
    validating_webhook_named(install, "validation.sartor.dev")
}

/// The container port called `port_name`.
fn container_port(container: &Container, port_name: &str) -> i32 {
    container
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some(port_name))
        .unwrap_or_else(|| panic!("no container port named {port_name}"))
        .container_port
}

/// The port of a probe or Service target: a number, or a container port's name.
fn resolve_port(container: &Container, port: &IntOrString) -> i32 {
    match port {
        IntOrString::Int(number) => *number,
        IntOrString::String(port_name) => container_port(container, port_name),
    }
}

// === What the binary says ===

/// One option of `sartor serve --help`: its default, environment variable and
/// possible values, as clap prints them.
#[derive(Debug, Default)]
struct Flag {
    default: Option<String>,
    env: Option<String>,
    possible_values: Vec<String>,
}

/// `sartor serve --help`, without the environment variables that would show
/// up in it.
fn serve_help() -> String {
    let out = Command::new(sartor_tests::binary::sartor().unwrap())
        .args(["serve", "--help"])
        .env_remove("POD_NAMESPACE")
        .env_remove("POD_NAME")
        .output()
        .unwrap();
    assert!(out.status.success(), "sartor serve --help: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The option `flag` (`--addr`) of `help`, failing when the binary has none.
fn flag(help: &str, flag: &str) -> Flag {
    // An option starts on a line indented less than its description
    // (`  -m, --mutators <PATH>`, `      --addr <ADDR>`) and runs to the next.
    let mut block: Option<Vec<&str>> = None;
    for line in help.lines() {
        let indent = line.len() - line.trim_start().len();
        if line.trim_start().starts_with('-') && indent < 10 {
            if block.is_some() {
                break;
            }
            let names = line
                .split(|c: char| c.is_whitespace() || c == ',')
                .collect::<Vec<_>>();
            if names.contains(&flag) {
                block = Some(vec![line]);
            }
        } else if let Some(lines) = &mut block {
            lines.push(line);
        }
    }
    let block = block
        .unwrap_or_else(|| panic!("`sartor serve --help` shows no {flag}"))
        .join("\n");
    let bracket = |label: &str| {
        let start = block.find(&format!("[{label}: "))? + label.len() + 3;
        let end = start + block[start..].find(']')?;
        Some(block[start..end].to_string())
    };
    Flag {
        default: bracket("default"),
        env: bracket("env").map(|e| e.trim_end_matches('=').to_string()),
        possible_values: bracket("possible values")
            .map(|v| v.split(", ").map(str::to_string).collect())
            .unwrap_or_default(),
    }
}

/// The default `sartor serve --help` shows for `name`.
fn default_of(help: &str, name: &str) -> String {
    flag(help, name)
        .default
        .unwrap_or_else(|| panic!("`sartor serve --help` shows no default for {name}"))
}

/// The port of an `IP:PORT` default.
fn port_of(address: &str) -> i32 {
    address
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse().ok())
        .unwrap_or_else(|| panic!("{address:?} has no port"))
}

// === Files and kinds ===

#[test]
fn every_yaml_file_is_listed_by_a_kustomization_and_every_document_has_its_kind() {
    let mut install = Install::default();
    let mut read = BTreeSet::new();
    read_kustomization(&root().join("manifests"), &mut install, &mut read);
    let mut present = BTreeSet::new();
    yaml_files(&root().join("manifests"), &mut present);
    yaml_files(&root().join("crds"), &mut present);
    // crds/optional/ and manifests/optional/ hold what an admin installs by
    // hand when it applies (Gatekeeper's Provider CRD, where Gatekeeper is
    // not installed; the audit's RBAC, when the audit is turned on).
    let optional = [
        root().join("crds/optional"),
        root().join("manifests/optional"),
    ];
    let orphans: Vec<String> = present
        .difference(&read)
        .filter(|p| !optional.iter().any(|dir| p.starts_with(dir)))
        .map(|p| shown(p))
        .collect();
    assert_eq!(
        orphans,
        Vec::<String>::new(),
        "YAML files no kustomization lists (kubectl apply -k manifests/ would not install them)"
    );
    let counts = [
        ("Namespace", install.namespaces.len()),
        ("ServiceAccount", install.service_accounts.len()),
        ("ClusterRole", install.cluster_roles.len()),
        ("ClusterRoleBinding", install.cluster_role_bindings.len()),
        ("Role", install.roles.len()),
        ("RoleBinding", install.role_bindings.len()),
        ("Deployment", install.deployments.len()),
        ("Service", install.services.len()),
        ("PodDisruptionBudget", install.disruption_budgets.len()),
        ("MutatingWebhookConfiguration", install.mutating.len()),
        ("ValidatingWebhookConfiguration", install.validating.len()),
        ("CustomResourceDefinition", install.crds.len()),
    ];
    assert_eq!(
        counts,
        [
            ("Namespace", 1),
            ("ServiceAccount", 1),
            ("ClusterRole", 1),
            ("ClusterRoleBinding", 1),
            ("Role", 1),
            ("RoleBinding", 1),
            ("Deployment", 1),
            ("Service", 1),
            ("PodDisruptionBudget", 1),
            ("MutatingWebhookConfiguration", 1),
            ("ValidatingWebhookConfiguration", 1),
            ("CustomResourceDefinition", 4),
        ]
    );
}

#[test]
fn kustomizations_list_their_files() {
    let resources = |dir: &str| -> Vec<String> {
        let text = std::fs::read_to_string(kustomization_file(&root().join(dir))).unwrap();
        serde_yaml::from_str::<Kustomization>(&text)
            .unwrap()
            .resources
    };
    assert_eq!(
        resources("manifests"),
        [
            "../crds",
            "namespace.yaml",
            "rbac.yaml",
            "deployment.yaml",
            "service.yaml",
            "webhooks.yaml"
        ]
    );
    assert_eq!(
        resources("crds"),
        [
            "assign.yaml",
            "assignimage.yaml",
            "assignmetadata.yaml",
            "modifyset.yaml"
        ]
    );
    // `kubectl apply -f crds/` reads every *.yaml there: the kustomization
    // must not be one.
    assert!(root().join("crds/Kustomization").is_file());
}

#[test]
fn the_image_is_set_through_kustomize() {
    let install = install();
    assert_eq!(
        install.images,
        [Image {
            name: "ghcr.io/sartor-dev/sartor".to_string(),
            new_tag: "v0.1.0".to_string(),
        }]
    );
    // The file says what kustomize renders, so `kubectl apply -f` agrees.
    assert_eq!(
        container(&install).image.as_deref(),
        Some("ghcr.io/sartor-dev/sartor:v0.1.0")
    );
}

#[test]
fn no_secret_and_no_ca_bundle_are_shipped() {
    // The binary creates the certificate Secret and injects the CA; a caBundle
    // in the files would be replaced on every apply.
    let install = install();
    assert_eq!(mutating_webhook(&install).client_config.ca_bundle, None);
    assert_eq!(validating_webhook(&install).client_config.ca_bundle, None);
}

// === Names, ports and paths: the files against each other and the binary ===

#[test]
fn the_webhook_port_is_the_binarys_addr_default() {
    let install = install();
    let help = serve_help();
    let port = port_of(&default_of(&help, "--addr"));
    assert_eq!(port, 8443);
    let container = container(&install);
    assert_eq!(container_port(container, "webhook"), port);
    let service = only(&install.services, "Service");
    let ports = service.spec.as_ref().unwrap().ports.as_deref().unwrap();
    assert_eq!(ports.len(), 1);
    assert_eq!(ports[0].port, 443);
    assert_eq!(
        ports[0].target_port,
        Some(IntOrString::String("webhook".to_string()))
    );
    assert_eq!(
        resolve_port(container, ports[0].target_port.as_ref().unwrap()),
        port
    );
    for service in [
        mutating_webhook(&install).client_config.service.as_ref(),
        validating_webhook(&install).client_config.service.as_ref(),
    ] {
        assert_eq!(service.unwrap().port, Some(443));
    }
}

#[test]
fn the_service_selects_the_deployments_pods() {
    let install = install();
    let deployment = deployment(&install);
    let spec = deployment.spec.as_ref().unwrap();
    let pod_labels = spec.template.metadata.as_ref().unwrap().labels.clone();
    let pod_labels = pod_labels.unwrap_or_default();
    let service = only(&install.services, "Service");
    let selector = service.spec.as_ref().unwrap().selector.clone().unwrap();
    assert_eq!(
        selector,
        BTreeMap::from([("app.kubernetes.io/name".to_string(), "sartor".to_string())])
    );
    for (key, value) in &selector {
        assert_eq!(pod_labels.get(key), Some(value), "{key}");
    }
    assert!(selects(&spec.selector, &pod_labels));
}

#[test]
fn probes_and_scraping_use_the_binarys_metrics_addr_default() {
    let install = install();
    let help = serve_help();
    let port = port_of(&default_of(&help, "--metrics-addr"));
    assert_eq!(port, 8888);
    let container = container(&install);
    assert_eq!(container_port(container, "metrics"), port);
    let probe = |probe: &Option<k8s_openapi::api::core::v1::Probe>| {
        let get = probe.as_ref().unwrap().http_get.clone().unwrap();
        (
            get.path.clone().unwrap(),
            resolve_port(container, &get.port),
            get.scheme.clone(),
        )
    };
    assert_eq!(
        probe(&container.liveness_probe),
        ("/healthz".to_string(), port, Some("HTTP".to_string()))
    );
    assert_eq!(
        probe(&container.readiness_probe),
        ("/readyz".to_string(), port, Some("HTTP".to_string()))
    );
    for path in ["/metrics", "/healthz", "/readyz"] {
        assert!(help.contains(path), "--help does not mention {path}");
    }
    let annotations = deployment(&install)
        .spec
        .as_ref()
        .unwrap()
        .template
        .metadata
        .as_ref()
        .unwrap()
        .annotations
        .clone()
        .unwrap();
    let annotations: Vec<(&str, &str)> = annotations
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        annotations,
        [
            ("prometheus.io/path", "/metrics"),
            ("prometheus.io/port", "8888"),
            ("prometheus.io/scheme", "http"),
            ("prometheus.io/scrape", "true"),
        ]
    );
}

#[test]
fn every_namespaced_object_is_in_the_binarys_namespace_default() {
    let install = install();
    let help = serve_help();
    let namespace = flag(&help, "--namespace");
    assert_eq!(namespace.default.as_deref(), Some("sartor-system"));
    assert_eq!(namespace.env.as_deref(), Some("POD_NAMESPACE"));
    let namespace = namespace.default.unwrap();
    let ns = only(&install.namespaces, "Namespace");
    assert_eq!(name(&ns.metadata), namespace);
    let namespaced = install
        .service_accounts
        .iter()
        .map(|(at, o)| (at, &o.metadata))
        .chain(install.roles.iter().map(|(at, o)| (at, &o.metadata)))
        .chain(
            install
                .role_bindings
                .iter()
                .map(|(at, o)| (at, &o.metadata)),
        )
        .chain(install.deployments.iter().map(|(at, o)| (at, &o.metadata)))
        .chain(install.services.iter().map(|(at, o)| (at, &o.metadata)))
        .chain(
            install
                .disruption_budgets
                .iter()
                .map(|(at, o)| (at, &o.metadata)),
        );
    for (at, meta) in namespaced {
        assert_eq!(meta.namespace.as_deref(), Some(namespace.as_str()), "{at}");
    }
    let cluster_scoped = install
        .namespaces
        .iter()
        .map(|(at, o)| (at, &o.metadata))
        .chain(
            install
                .cluster_roles
                .iter()
                .map(|(at, o)| (at, &o.metadata)),
        )
        .chain(
            install
                .cluster_role_bindings
                .iter()
                .map(|(at, o)| (at, &o.metadata)),
        )
        .chain(install.mutating.iter().map(|(at, o)| (at, &o.metadata)))
        .chain(install.validating.iter().map(|(at, o)| (at, &o.metadata)))
        .chain(install.crds.iter().map(|(at, o)| (at, &o.metadata)));
    for (at, meta) in cluster_scoped {
        assert_eq!(meta.namespace, None, "{at}");
    }
    for service in [
        mutating_webhook(&install).client_config.service.as_ref(),
        validating_webhook(&install).client_config.service.as_ref(),
    ] {
        assert_eq!(service.unwrap().namespace, namespace);
    }
}

#[test]
fn the_pod_tells_the_binary_its_namespace_and_name() {
    let install = install();
    let help = serve_help();
    assert_eq!(
        flag(&help, "--namespace").env.as_deref(),
        Some("POD_NAMESPACE")
    );
    assert_eq!(flag(&help, "--pod-name").env.as_deref(), Some("POD_NAME"));
    let from_field = |env: &str, field: &str| EnvVar {
        name: env.to_string(),
        value: None,
        value_from: Some(EnvVarSource {
            // With the apiVersion the API server would default in, so that
            // server-side apply after client-side apply does not conflict.
            field_ref: Some(ObjectFieldSelector {
                api_version: Some("v1".to_string()),
                field_path: field.to_string(),
            }),
            ..EnvVarSource::default()
        }),
    };
    assert_eq!(
        container(&install).env.as_deref(),
        Some(
            [
                from_field("POD_NAMESPACE", "metadata.namespace"),
                from_field("POD_NAME", "metadata.name"),
            ]
            .as_slice()
        )
    );
}

#[test]
fn the_service_account_is_the_binarys_default() {
    let install = install();
    let help = serve_help();
    let account = default_of(&help, "--service-account");
    assert_eq!(account, "sartor");
    let namespace = default_of(&help, "--namespace");
    let sa = only(&install.service_accounts, "ServiceAccount");
    assert_eq!(name(&sa.metadata), account);
    assert_eq!(
        pod_spec(&install).service_account_name.as_deref(),
        Some(account.as_str())
    );
    let subject = Subject {
        api_group: None,
        kind: "ServiceAccount".to_string(),
        name: account.clone(),
        namespace: Some(namespace),
    };
    let crb = only(&install.cluster_role_bindings, "ClusterRoleBinding");
    assert_eq!(crb.subjects.as_deref(), Some([subject.clone()].as_slice()));
    let rb = only(&install.role_bindings, "RoleBinding");
    assert_eq!(rb.subjects.as_deref(), Some([subject].as_slice()));
}

#[test]
fn the_certificate_secret_is_the_binarys_default() {
    let install = install();
    let help = serve_help();
    let secret = default_of(&help, "--cert-secret");
    assert_eq!(secret, "sartor-webhook-server-cert");
    let role = only(&install.roles, "Role");
    let named: Vec<&String> = role
        .rules
        .iter()
        .flatten()
        .filter(|r| r.resources.as_deref() == Some(&["secrets".to_string()][..]))
        .flat_map(|r| r.resource_names.iter().flatten())
        .collect();
    assert_eq!(named, [&secret]);
    let mode = flag(&help, "--cert-mode");
    assert_eq!(mode.default.as_deref(), Some("managed"));
    assert_eq!(mode.possible_values, ["managed", "external"]);
}

#[test]
fn the_webhook_service_is_the_binarys_default() {
    let install = install();
    let help = serve_help();
    let service_name = default_of(&help, "--webhook-service");
    assert_eq!(service_name, "sartor-webhook");
    let service = only(&install.services, "Service");
    assert_eq!(name(&service.metadata), service_name);
    for service in [
        mutating_webhook(&install).client_config.service.as_ref(),
        validating_webhook(&install).client_config.service.as_ref(),
    ] {
        assert_eq!(service.unwrap().name, service_name);
    }
}

#[test]
fn the_webhook_configurations_are_the_binarys_defaults() {
    let install = install();
    let help = serve_help();
    let mutating = default_of(&help, "--mutating-webhook-configuration");
    let validating = default_of(&help, "--validating-webhook-configuration");
    assert_eq!(
        (mutating.as_str(), validating.as_str()),
        ("sartor-mutating", "sartor-validating")
    );
    let mwc = only(&install.mutating, "MutatingWebhookConfiguration");
    assert_eq!(name(&mwc.metadata), mutating);
    let vwc = only(&install.validating, "ValidatingWebhookConfiguration");
    assert_eq!(name(&vwc.metadata), validating);
    // The ClusterRole lets the binary update exactly these two.
    let role = only(&install.cluster_roles, "ClusterRole");
    let names = |resource: &str| -> Vec<String> {
        role.rules
            .iter()
            .flatten()
            .filter(|r| r.resources.iter().flatten().any(|x| x == resource))
            .flat_map(|r| r.resource_names.clone().unwrap_or_default())
            .collect()
    };
    assert_eq!(names("mutatingwebhookconfigurations"), [mutating]);
    assert_eq!(names("validatingwebhookconfigurations"), [validating]);
}

#[test]
fn the_webhook_paths_are_the_servers() {
    let install = install();
    let help = serve_help();
    let path = |service: Option<&ServiceReference>| service.unwrap().path.clone().unwrap();
    let mutate = path(mutating_webhook(&install).client_config.service.as_ref());
    let validate = path(validating_webhook(&install).client_config.service.as_ref());
    assert_eq!(
        (mutate.as_str(), validate.as_str()),
        ("/v1/mutate", "/v1/validate")
    );
    assert!(help.contains("POST /v1/mutate"), "{help}");
    assert!(help.contains("POST /v1/validate"), "{help}");
    // Both AdmissionReview versions the server answers, and only those.
    let versions: Vec<String> = sartor_webhook::review::ADMISSION_VERSIONS
        .iter()
        .map(|v| v.trim_start_matches("admission.k8s.io/").to_string())
        .collect();
    assert_eq!(
        mutating_webhook(&install).admission_review_versions,
        versions
    );
    assert_eq!(
        validating_webhook(&install).admission_review_versions,
        versions
    );
}

#[test]
fn the_excluded_namespaces_are_the_binarys_own_and_its_exclude_default() {
    let install = install();
    let help = serve_help();
    let mut excluded = vec![
        default_of(&help, "--exclude-namespace"),
        default_of(&help, "--namespace"),
    ];
    excluded.sort();
    let selector = mutating_webhook(&install)
        .namespace_selector
        .as_ref()
        .unwrap();
    let not_in: Vec<&LabelSelectorRequirement> = selector
        .match_expressions
        .iter()
        .flatten()
        .filter(|r| r.key == "kubernetes.io/metadata.name")
        .collect();
    assert_eq!(not_in.len(), 1);
    assert_eq!(not_in[0].operator, "NotIn");
    assert_eq!(not_in[0].values.as_deref(), Some(excluded.as_slice()));
}

#[test]
fn the_deployment_passes_only_flags_the_binary_knows() {
    let install = install();
    let help = serve_help();
    let args = container(&install).args.clone().unwrap();
    assert_eq!(
        args,
        ["serve", "--cert-dir=/certs", "--log-format=json"],
        "the Deployment's arguments"
    );
    for arg in &args[1..] {
        let (name, value) = arg.split_once('=').unwrap();
        let known = flag(&help, name);
        if !known.possible_values.is_empty() {
            assert!(
                known.possible_values.iter().any(|v| v == value),
                "{arg}: {:?}",
                known.possible_values
            );
        }
    }
    // No --mutators: the binary watches the CRDs (cluster mode).
    assert!(!args.iter().any(|a| a.starts_with("--mutators")));
    // --cert-dir is the emptyDir the binary writes its certificate to.
    assert_eq!(
        container(&install).volume_mounts.as_deref(),
        Some(
            [VolumeMount {
                name: "certs".to_string(),
                mount_path: "/certs".to_string(),
                ..VolumeMount::default()
            }]
            .as_slice()
        )
    );
    assert_eq!(
        pod_spec(&install).volumes.as_deref(),
        Some(
            [Volume {
                name: "certs".to_string(),
                empty_dir: Some(EmptyDirVolumeSource {
                    medium: Some("Memory".to_string()),
                    size_limit: Some(Quantity("1Mi".to_string())),
                }),
                ..Volume::default()
            }]
            .as_slice()
        )
    );
}

// === RBAC ===

/// A rule flattened to what it grants: (apiGroup, resource, resourceName or
/// "" for any, verb).
type Grant = (String, String, String, String);

fn grants(rules: &[PolicyRule]) -> BTreeSet<Grant> {
    let mut out = BTreeSet::new();
    for rule in rules {
        assert_eq!(rule.non_resource_urls, None, "{rule:?}");
        let names = match rule.resource_names.as_deref() {
            None | Some([]) => vec![String::new()],
            Some(names) => names.to_vec(),
        };
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                for name in &names {
                    for verb in &rule.verbs {
                        out.insert((group.clone(), resource.clone(), name.clone(), verb.clone()));
                    }
                }
            }
        }
    }
    out
}

/// Fails naming every grant `got` has beyond `want`, and every one it lacks.
fn assert_grants(what: &str, got: &BTreeSet<Grant>, want: &BTreeSet<Grant>) {
    let extra: Vec<&Grant> = got.difference(want).collect();
    let missing: Vec<&Grant> = want.difference(got).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "{what}: grants beyond what sartor needs: {extra:?}; grants missing: {missing:?}"
    );
}

fn expected(list: &[(&str, &[&str], &str, &[&str])]) -> BTreeSet<Grant> {
    let mut out = BTreeSet::new();
    for (group, resources, name, verbs) in list {
        for resource in *resources {
            for verb in *verbs {
                out.insert((
                    group.to_string(),
                    resource.to_string(),
                    name.to_string(),
                    verb.to_string(),
                ));
            }
        }
    }
    out
}

const KINDS: &[&str] = &["assign", "assignimage", "assignmetadata", "modifyset"];
const STATUS: &[&str] = &[
    "assign/status",
    "assignimage/status",
    "assignmetadata/status",
    "modifyset/status",
];
const READ: &[&str] = &["get", "list", "watch"];

#[test]
fn the_cluster_role_grants_exactly_what_sartor_needs() {
    let install = install();
    let role = only(&install.cluster_roles, "ClusterRole");
    assert_eq!(name(&role.metadata), "sartor");
    assert_eq!(role.aggregation_rule, None);
    let want = expected(&[
        ("mutations.sartor.dev", KINDS, "", READ),
        // status.byPod, by server-side apply: a PATCH.
        ("mutations.sartor.dev", STATUS, "", &["patch"]),
        // --gatekeeper-compat reads Gatekeeper's mutators, never writes them.
        ("mutations.gatekeeper.sh", KINDS, "", READ),
        ("", &["namespaces"], "", READ),
        // External data: Gatekeeper's Providers, read only.
        ("externaldata.gatekeeper.sh", &["providers"], "", READ),
        (
            "admissionregistration.k8s.io",
            &["mutatingwebhookconfigurations"],
            "sartor-mutating",
            &["get", "update"],
        ),
        (
            "admissionregistration.k8s.io",
            &["validatingwebhookconfigurations"],
            "sartor-validating",
            &["get", "update"],
        ),
    ]);
    assert_grants(
        "ClusterRole",
        &grants(role.rules.as_deref().unwrap()),
        &want,
    );
    let binding = only(&install.cluster_role_bindings, "ClusterRoleBinding");
    assert_eq!(name(&binding.metadata), "sartor");
    assert_eq!(
        binding.role_ref,
        RoleRef {
            api_group: "rbac.authorization.k8s.io".to_string(),
            kind: "ClusterRole".to_string(),
            name: "sartor".to_string(),
        }
    );
}

#[test]
fn the_role_grants_exactly_the_certificate_secret() {
    let install = install();
    let role = only(&install.roles, "Role");
    assert_eq!(name(&role.metadata), "sartor");
    // `create` cannot be limited by name: the Role says so in a comment.
    let want = expected(&[
        ("", &["secrets"], "", &["create"]),
        (
            "",
            &["secrets"],
            "sartor-webhook-server-cert",
            &["get", "update"],
        ),
    ]);
    assert_grants("Role", &grants(role.rules.as_deref().unwrap()), &want);
    let binding = only(&install.role_bindings, "RoleBinding");
    assert_eq!(name(&binding.metadata), "sartor");
    assert_eq!(
        binding.role_ref,
        RoleRef {
            api_group: "rbac.authorization.k8s.io".to_string(),
            kind: "Role".to_string(),
            name: "sartor".to_string(),
        }
    );
}

/// The optional audit's RBAC grants its reports and Lease and nothing on
/// the objects it audits: that role is generated from the mutators by
/// `sartor audit rbac`, which its comment names.
#[test]
fn the_audits_rbac_grants_no_object_kind() {
    let file = root().join("manifests/optional/audit/rbac.yaml");
    let mut audit = Install::default();
    read_objects(&file, &mut audit);
    let role = only(&audit.cluster_roles, "ClusterRole");
    assert_eq!(name(&role.metadata), "sartor-audit");
    assert_grants(
        "the audit's ClusterRole",
        &grants(role.rules.as_deref().unwrap()),
        &expected(&[(
            "openreports.io",
            &["reports", "clusterreports"],
            "",
            &["list", "create", "patch", "delete"],
        )]),
    );
    let lease = only(&audit.roles, "Role");
    assert_grants(
        "the audit's Role",
        &grants(lease.rules.as_deref().unwrap()),
        &expected(&[(
            "coordination.k8s.io",
            &["leases"],
            "",
            &["get", "create", "update"],
        )]),
    );
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains("sartor audit rbac --mutators PATH... | kubectl apply -f -"),
        "{}: the comment no longer says how to grant the objects",
        shown(&file)
    );
}

#[test]
fn the_rbac_kinds_are_the_crds() {
    let install = install();
    let mut plurals: Vec<&str> = install
        .crds
        .iter()
        .map(|(_, crd)| {
            assert_eq!(crd.spec.group, "mutations.sartor.dev");
            crd.spec.names.plural.as_str()
        })
        .collect();
    plurals.sort_unstable();
    assert_eq!(plurals, KINDS);
    let rules = validating_webhook(&install).rules.clone().unwrap();
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0].resources, strings(KINDS));
    let scopes: BTreeSet<&str> = install
        .crds
        .iter()
        .map(|(_, crd)| crd.spec.scope.as_str())
        .collect();
    assert_eq!(scopes, BTreeSet::from(["Cluster"]));
}

// === The webhook configurations ===

fn strings(items: &[&str]) -> Option<Vec<String>> {
    Some(items.iter().map(|s| s.to_string()).collect())
}

#[test]
fn the_mutating_webhook_is_exactly_the_contract() {
    let install = install();
    let want = MutatingWebhook {
        name: "mutation.sartor.dev".to_string(),
        client_config: WebhookClientConfig {
            ca_bundle: None,
            service: Some(ServiceReference {
                namespace: "sartor-system".to_string(),
                name: "sartor-webhook".to_string(),
                path: Some("/v1/mutate".to_string()),
                port: Some(443),
            }),
            url: None,
        },
        failure_policy: Some("Ignore".to_string()),
        reinvocation_policy: Some("IfNeeded".to_string()),
        side_effects: "None".to_string(),
        timeout_seconds: Some(1),
        admission_review_versions: vec!["v1".to_string(), "v1beta1".to_string()],
        match_policy: Some("Exact".to_string()),
        rules: Some(vec![
            RuleWithOperations {
                api_groups: strings(&["*"]),
                api_versions: strings(&["*"]),
                resources: strings(&["*"]),
                operations: strings(&["CREATE", "UPDATE"]),
                scope: Some("*".to_string()),
            },
            // Debug containers: `*` matches no subresource.
            RuleWithOperations {
                api_groups: strings(&[""]),
                api_versions: strings(&["v1"]),
                resources: strings(&["pods/ephemeralcontainers"]),
                operations: strings(&["UPDATE"]),
                scope: Some("Namespaced".to_string()),
            },
        ]),
        namespace_selector: Some(LabelSelector {
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "admission.sartor.dev/ignore".to_string(),
                    operator: "DoesNotExist".to_string(),
                    values: None,
                },
                LabelSelectorRequirement {
                    key: "kubernetes.io/metadata.name".to_string(),
                    operator: "NotIn".to_string(),
                    values: strings(&["kube-system", "sartor-system"]),
                },
            ]),
            match_labels: None,
        }),
        object_selector: None,
        match_conditions: Some(vec![MatchCondition {
            name: "not-a-policy-object".to_string(),
            expression: not_a_policy_object(),
        }]),
    };
    assert_eq!(mutating_webhook(&install), &want);
}

/// The CEL of the mutating webhook's match condition: no group sartor never
/// mutates (`sartor_api::protected`: its own groups, Gatekeeper's; admission
/// configuration is never sent to webhooks anyway), from the same constants.
fn not_a_policy_object() -> String {
    let sartor = sartor_api::SARTOR_DOMAIN;
    let gatekeeper: Vec<String> = sartor_api::GATEKEEPER_PROTECTED_GROUPS
        .iter()
        .map(|group| format!("'{group}'"))
        .collect();
    format!(
        "!(request.kind.group == '{sartor}' || request.kind.group.endsWith('.{sartor}') || request.kind.group in [{}])",
        gatekeeper.join(", ")
    )
}

#[test]
fn the_validating_webhook_is_exactly_the_contract() {
    let install = install();
    let want = ValidatingWebhook {
        name: "validation.sartor.dev".to_string(),
        client_config: WebhookClientConfig {
            ca_bundle: None,
            service: Some(ServiceReference {
                namespace: "sartor-system".to_string(),
                name: "sartor-webhook".to_string(),
                path: Some("/v1/validate".to_string()),
                port: Some(443),
            }),
            url: None,
        },
        failure_policy: Some("Ignore".to_string()),
        side_effects: "None".to_string(),
        timeout_seconds: Some(3),
        admission_review_versions: vec!["v1".to_string(), "v1beta1".to_string()],
        rules: Some(vec![RuleWithOperations {
            api_groups: strings(&["mutations.sartor.dev"]),
            api_versions: strings(&["*"]),
            resources: strings(KINDS),
            operations: strings(&["CREATE", "UPDATE"]),
            scope: Some("Cluster".to_string()),
        }]),
        ..ValidatingWebhook::default()
    };
    assert_eq!(validating_webhook(&install), &want);
    // The exemption-label guard: the same endpoint, only namespaces that
    // carry the label (before or after), every way of writing their labels,
    // and never blocking when sartor is down.
    let guard = ValidatingWebhook {
        name: "exemption.sartor.dev".to_string(),
        rules: Some(vec![RuleWithOperations {
            api_groups: strings(&[""]),
            api_versions: strings(&["v1"]),
            resources: strings(&["namespaces", "namespaces/status", "namespaces/finalize"]),
            operations: strings(&["CREATE", "UPDATE"]),
            scope: Some("Cluster".to_string()),
        }]),
        object_selector: Some(LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "admission.sartor.dev/ignore".to_string(),
                operator: "Exists".to_string(),
                values: None,
            }]),
            match_labels: None,
        }),
        ..want
    };
    assert_eq!(
        validating_webhook_named(&install, "exemption.sartor.dev"),
        &guard
    );
}

// === namespaceSelector ===

/// Whether `selector` selects an object with `labels`, as the API server
/// decides it: every matchLabels pair and every expression must hold.
fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let pairs = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(key, value)| labels.get(key) == Some(value));
    let expressions = selector.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        let label = labels.get(&e.key);
        match e.operator.as_str() {
            "In" => label.is_some_and(|l| values.contains(l)),
            "NotIn" => label.is_none_or(|l| !values.contains(l)),
            "Exists" => label.is_some(),
            "DoesNotExist" => label.is_none(),
            other => panic!("unknown label selector operator {other:?}"),
        }
    });
    pairs && expressions
}

/// A namespace's labels as the API server sees them: its own plus the
/// `kubernetes.io/metadata.name` label it sets on every Namespace.
fn namespace_labels(name: &str, labels: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    out.insert("kubernetes.io/metadata.name".to_string(), name.to_string());
    out
}

#[test]
fn selector_evaluation_follows_the_api_server() {
    let labels = namespace_labels("a", &[("env", "prod")]);
    let selector = |expressions: &[(&str, &str, &[&str])], pairs: &[(&str, &str)]| LabelSelector {
        match_expressions: Some(
            expressions
                .iter()
                .map(|(key, operator, values)| LabelSelectorRequirement {
                    key: key.to_string(),
                    operator: operator.to_string(),
                    values: (!values.is_empty()).then(|| strings(values).unwrap()),
                })
                .collect(),
        ),
        match_labels: Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
    };
    let cases: [(LabelSelector, bool); 10] = [
        (selector(&[], &[]), true),
        (selector(&[], &[("env", "prod")]), true),
        (selector(&[], &[("env", "dev")]), false),
        (selector(&[("env", "In", &["prod", "dev"])], &[]), true),
        (selector(&[("env", "In", &["dev"])], &[]), false),
        (selector(&[("tier", "NotIn", &["gold"])], &[]), true),
        (selector(&[("env", "NotIn", &["prod"])], &[]), false),
        (selector(&[("env", "Exists", &[])], &[]), true),
        (selector(&[("env", "DoesNotExist", &[])], &[]), false),
        (
            selector(&[("tier", "DoesNotExist", &[])], &[("env", "prod")]),
            true,
        ),
    ];
    for (i, (selector, want)) in cases.iter().enumerate() {
        assert_eq!(selects(selector, &labels), *want, "case {i}: {selector:?}");
    }
}

#[test]
fn the_mutating_webhook_never_selects_sartors_own_namespace() {
    let install = install();
    let selector = mutating_webhook(&install)
        .namespace_selector
        .clone()
        .unwrap();
    let ns = only(&install.namespaces, "Namespace");
    let own = name(&ns.metadata).to_string();
    let mut own_labels = ns.metadata.labels.clone().unwrap_or_default();
    own_labels.insert("kubernetes.io/metadata.name".to_string(), own.clone());
    assert!(!selects(&selector, &own_labels), "{own}: {own_labels:?}");
    // Not even with its ignore label removed.
    own_labels.remove("admission.sartor.dev/ignore");
    assert!(!selects(&selector, &own_labels), "{own}: {own_labels:?}");
    let cases = [
        (namespace_labels("kube-system", &[]), false),
        (
            namespace_labels("shop", &[("admission.sartor.dev/ignore", "true")]),
            false,
        ),
        // Any value of the label exempts a namespace, even "false".
        (
            namespace_labels("shop", &[("admission.sartor.dev/ignore", "false")]),
            false,
        ),
        (namespace_labels("default", &[]), true),
        (namespace_labels("shop", &[("env", "prod")]), true),
    ];
    for (labels, want) in cases {
        assert_eq!(selects(&selector, &labels), want, "{labels:?}");
    }
}

#[test]
fn the_namespace_is_ignored_by_the_webhook_and_enforces_restricted() {
    let install = install();
    let ns = only(&install.namespaces, "Namespace");
    let labels = ns.metadata.labels.clone().unwrap();
    let labels: Vec<(&str, &str)> = labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        labels,
        [
            ("admission.sartor.dev/ignore", "true"),
            ("app.kubernetes.io/name", "sartor"),
            ("app.kubernetes.io/part-of", "sartor"),
            ("pod-security.kubernetes.io/audit", "restricted"),
            ("pod-security.kubernetes.io/audit-version", "latest"),
            ("pod-security.kubernetes.io/enforce", "restricted"),
            ("pod-security.kubernetes.io/enforce-version", "latest"),
            ("pod-security.kubernetes.io/warn", "restricted"),
            ("pod-security.kubernetes.io/warn-version", "latest"),
        ]
    );
}

// === The Deployment ===

#[test]
fn the_deployment_runs_three_replicas_locked_down() {
    let install = install();
    let deployment = deployment(&install);
    assert_eq!(name(&deployment.metadata), "sartor");
    let spec = deployment.spec.as_ref().unwrap();
    assert_eq!(spec.replicas, Some(3));
    let container = container(&install);
    assert_eq!(container.name, "sartor");
    assert_eq!(
        container.security_context,
        Some(SecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(65532),
            run_as_group: Some(65532),
            read_only_root_filesystem: Some(true),
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                add: None,
                drop: strings(&["ALL"]),
            }),
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".to_string(),
                localhost_profile: None,
            }),
            ..SecurityContext::default()
        })
    );
    let pod = pod_spec(&install);
    let pod_security = pod.security_context.as_ref().unwrap();
    assert_eq!(pod_security.run_as_non_root, Some(true));
    assert_eq!(pod_security.run_as_user, Some(65532));
    assert_eq!(pod_security.run_as_group, Some(65532));
    assert_eq!(
        pod_security
            .seccomp_profile
            .as_ref()
            .map(|p| p.type_.as_str()),
        Some("RuntimeDefault")
    );
    assert_eq!(pod.host_network, None);
    assert_eq!(pod.host_pid, None);
    assert_eq!(pod.automount_service_account_token, None); // the controller needs its token
    let resources = container.resources.as_ref().unwrap();
    let quantities = |map: &Option<BTreeMap<String, Quantity>>| -> Vec<(String, String)> {
        map.iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.0.clone()))
            .collect()
    };
    assert_eq!(
        quantities(&resources.requests),
        [
            ("cpu".to_string(), "100m".to_string()),
            ("memory".to_string(), "128Mi".to_string())
        ]
    );
    // No CPU limit (throttling against a 1 s timeout); deployment.yaml says why.
    assert_eq!(
        quantities(&resources.limits),
        [("memory".to_string(), "512Mi".to_string())]
    );
}

#[test]
fn the_deployment_probes_and_drains_within_its_grace_period() {
    let install = install();
    let container = container(&install);
    let probe = |probe: &Option<k8s_openapi::api::core::v1::Probe>| {
        probe.as_ref().unwrap().http_get.clone().unwrap()
    };
    let get = |path: &str| HTTPGetAction {
        path: Some(path.to_string()),
        port: IntOrString::String("metrics".to_string()),
        scheme: Some("HTTP".to_string()),
        ..HTTPGetAction::default()
    };
    assert_eq!(probe(&container.liveness_probe), get("/healthz"));
    assert_eq!(probe(&container.readiness_probe), get("/readyz"));
    let pod = pod_spec(&install);
    assert_eq!(pod.termination_grace_period_seconds, Some(30));
    // The 5 s preStop pause and the server's drain of at most 20 s fit in
    // the 30 s grace period.
    let pre_stop = container
        .lifecycle
        .as_ref()
        .unwrap()
        .pre_stop
        .clone()
        .unwrap();
    assert_eq!(
        pre_stop,
        LifecycleHandler {
            sleep: Some(SleepAction { seconds: 5 }),
            ..LifecycleHandler::default()
        }
    );
}

#[test]
fn the_replicas_spread_and_a_drain_takes_one_at_a_time() {
    let install = install();
    let pod = pod_spec(&install);
    let spread: Vec<(i32, &str, &str)> = pod
        .topology_spread_constraints
        .iter()
        .flatten()
        .map(|c| {
            (
                c.max_skew,
                c.topology_key.as_str(),
                c.when_unsatisfiable.as_str(),
            )
        })
        .collect();
    assert_eq!(
        spread,
        [
            (1, "kubernetes.io/hostname", "ScheduleAnyway"),
            (1, "topology.kubernetes.io/zone", "ScheduleAnyway"),
        ]
    );
    let pod_labels = deployment(&install)
        .spec
        .as_ref()
        .unwrap()
        .template
        .metadata
        .as_ref()
        .unwrap()
        .labels
        .clone()
        .unwrap();
    for constraint in pod.topology_spread_constraints.iter().flatten() {
        assert!(selects(
            constraint.label_selector.as_ref().unwrap(),
            &pod_labels
        ));
    }
    let pdb = only(&install.disruption_budgets, "PodDisruptionBudget");
    assert_eq!(name(&pdb.metadata), "sartor");
    let spec = pdb.spec.as_ref().unwrap();
    assert_eq!(spec.max_unavailable, Some(IntOrString::Int(1)));
    assert_eq!(spec.min_available, None);
    assert!(selects(spec.selector.as_ref().unwrap(), &pod_labels));
}
