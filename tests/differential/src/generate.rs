//! Random cases from a seed: realistic objects (Pods, Deployments, Services,
//! ConfigMaps, Namespaces, a custom resource, now and then one of the policy
//! system's own) and mutator sets of every kind in Gatekeeper's apiVersions,
//! drawn from small pools so that mutators meet: the same fields, the same
//! list keys, the same names.
//!
//! [`Mode::Normal`] writes locations a cluster admin would write;
//! [`Mode::Wild`] takes them from random walks over the object (and a step or
//! two past it), with values of any JSON type. [`Mode::Expansion`] admits a
//! workload (Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, CronJob)
//! with one or two ExpansionTemplates, now and then a malformed one, and
//! mutators of the Pods it generates, `match.source` set more often.
//!
//! The generator is its own splitmix64 rather than a crate's RNG so that a
//! seed names the same cases for as long as this file does not change.

use serde_json::{Map, Value, json};

use crate::case::Case;

/// How locations are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// From pools of locations admins write.
    Normal,
    /// From random walks over the admitted object.
    Wild,
    /// A workload and ExpansionTemplates: what it generates is compared too.
    Expansion,
}

impl Mode {
    /// `normal` or `wild`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Normal => "normal",
            Mode::Wild => "wild",
            Mode::Expansion => "expansion",
        }
    }
}

/// The cases of one seed and mode, in order.
pub fn cases(seed: u64, mode: Mode, count: usize) -> impl Iterator<Item = Case> {
    (0..count).map(move |index| case(seed, mode, index))
}

/// Case `index` of `seed` and `mode`, the same every time.
pub fn case(seed: u64, mode: Mode, index: usize) -> Case {
    let mut rng =
        Rng::new(seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ mode_salt(mode));
    if mode == Mode::Expansion {
        return expansion_case(&mut rng, format!("{seed}/{}/{index}", mode.as_str()));
    }
    let namespace_name = *rng.pick(&["default", "prod", "prod-eu", "dev", "kube-system"]);
    let mut object = object(&mut rng, namespace_name);
    // A manifest as a GitOps repository holds it: the namespace comes from
    // the request (kubectl -n, kustomize, the Argo CD/Flux destination).
    let namespace_less = rng.chance(25) && without_namespace(&mut object);
    let mut names: Vec<&str> = NAMES.to_vec();
    let count = 1 + rng.below(5);
    let mutators = (0..count)
        .map(|_| {
            let name = rng.take(&mut names).unwrap_or("extra");
            // Now and then a name the API server refuses (upper case, `_`).
            let name = if rng.chance(3) {
                *rng.pick(&INVALID_NAMES)
            } else {
                name
            };
            mutator(&mut rng, mode, name, &object)
        })
        .collect();
    // In a cluster the Namespace of a namespaced object exists, and
    // Gatekeeper's webhook fails an admission whose Namespace it cannot get.
    let namespace = (group_kind(&object).1 != "Namespace"
        && (namespace_less || object.pointer("/metadata/namespace").is_some()))
    .then(|| namespace_object(&mut rng, namespace_name));
    let operation = match rng.below(20) {
        0 => "DELETE",
        1..=4 => "UPDATE",
        _ => "CREATE",
    };
    let username = if rng.chance(50) { "alice" } else { "" };
    Case {
        id: format!("{seed}/{}/{index}", mode.as_str()),
        mutators,
        object,
        namespace,
        operation: operation.to_string(),
        username: username.to_string(),
        templates: Vec::new(),
    }
}

fn mode_salt(mode: Mode) -> u64 {
    match mode {
        Mode::Normal => 0,
        Mode::Wild => 0x5A5A_5A5A_0000_0001,
        Mode::Expansion => 0x5A5A_5A5A_0000_0002,
    }
}

/// Mutator names: byte order is run order, so a few sort differently.
const NAMES: [&str; 8] = ["a", "b", "c", "set-1", "set-2", "z", "a-1", "m"];

/// Names the API server refuses for a custom resource (Gatekeeper's
/// published samples have had such names).
const INVALID_NAMES: [&str; 4] = ["k8spspfsGroup", "set_fs_group", "trailing-", "a..b"];

const IMAGES: [&str; 6] = [
    "nginx",
    "nginx:1.25",
    "registry.example.com/team/app:v1",
    "docker.io/library/busybox@sha256:3fbc632167424a6d997e74f52b878d7cc478225cffac6bc977eedfe51c7f4e79",
    "localhost:5000/tools/debug",
    "ghcr.io/org/app:2.0",
];

const CONTAINER_NAMES: [&str; 4] = ["app", "sidecar", "istio-proxy", "log"];

// === objects ===

fn object(rng: &mut Rng, namespace: &str) -> Value {
    match rng.below(20) {
        0..=6 => pod(rng, namespace),
        7..=10 => deployment(rng, namespace),
        11..=12 => service(rng, namespace),
        13 => config_map(rng, namespace),
        14 => namespace_object(rng, namespace),
        15..=17 => widget(rng, namespace),
        _ => policy_object(rng, namespace),
    }
}

/// Removes `metadata.namespace` from a namespaced object (the policy
/// objects and Namespaces are left as they are); whether it did.
fn without_namespace(object: &mut Value) -> bool {
    let namespaced = matches!(
        group_kind(object),
        ("", "Pod" | "Service" | "ConfigMap") | ("apps" | "batch", _) | ("example.com", "Widget")
    );
    namespaced
        && object
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .and_then(|metadata| metadata.remove("namespace"))
            .is_some()
}

/// Sets a member of an object built by `json!` (an object by construction).
fn set(object: &mut Value, key: &str, value: Value) {
    if let Some(map) = object.as_object_mut() {
        map.insert(key.to_string(), value);
    }
}

fn metadata(rng: &mut Rng, name: &str, namespace: Option<&str>) -> Value {
    let mut meta = Map::new();
    meta.insert("name".into(), json!(name));
    if let Some(ns) = namespace {
        meta.insert("namespace".into(), json!(ns));
    }
    if rng.chance(70) {
        meta.insert("labels".into(), labels(rng));
    }
    if rng.chance(30) {
        meta.insert(
            "annotations".into(),
            json!({"owner": *rng.pick(&["alice", "team-a"])}),
        );
    }
    if rng.chance(10) {
        meta.insert("finalizers".into(), json!(["example.com/keep"]));
    }
    Value::Object(meta)
}

fn labels(rng: &mut Rng) -> Value {
    let mut labels = Map::new();
    for (key, values) in [
        ("app", &["web", "api"][..]),
        ("tier", &["front", "back"][..]),
        ("env", &["prod", "dev"][..]),
    ] {
        if rng.chance(50) {
            labels.insert(key.into(), json!(*rng.pick(values)));
        }
    }
    Value::Object(labels)
}

fn pod(rng: &mut Rng, namespace: &str) -> Value {
    let name = *rng.pick(&["web", "api-0", "db"]);
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata(rng, name, Some(namespace)),
        "spec": pod_spec(rng),
    })
}

fn deployment(rng: &mut Rng, namespace: &str) -> Value {
    let name = *rng.pick(&["web", "api"]);
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(rng, name, Some(namespace)),
        "spec": {
            "replicas": rng.below(4),
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": pod_spec(rng),
            },
        },
    })
}

fn pod_spec(rng: &mut Rng) -> Value {
    let mut names: Vec<&str> = CONTAINER_NAMES.to_vec();
    let mut containers = Vec::new();
    for _ in 0..1 + rng.below(3) {
        if let Some(name) = rng.take(&mut names) {
            containers.push(container(rng, name));
        }
    }
    let mut spec = Map::new();
    spec.insert("containers".into(), Value::Array(containers));
    if rng.chance(20) {
        let name = rng.take(&mut names).unwrap_or("init");
        spec.insert("initContainers".into(), json!([container(rng, name)]));
    }
    if rng.chance(25) {
        spec.insert("tolerations".into(), json!([toleration(rng)]));
    }
    if rng.chance(20) {
        spec.insert("nodeSelector".into(), json!({"disk": "ssd"}));
    }
    if rng.chance(20) {
        spec.insert("volumes".into(), json!([{"name": "data", "emptyDir": {}}]));
    }
    if rng.chance(15) {
        spec.insert("securityContext".into(), json!({"runAsUser": 1000}));
    }
    Value::Object(spec)
}

fn container(rng: &mut Rng, name: &str) -> Value {
    let mut c = Map::new();
    c.insert("name".into(), json!(name));
    c.insert("image".into(), json!(*rng.pick(&IMAGES)));
    if rng.chance(40) {
        let port = *rng.pick(&[80, 8080, 9090]);
        c.insert(
            "ports".into(),
            json!([{"containerPort": port, "name": "http", "protocol": "TCP"}]),
        );
    }
    if rng.chance(30) {
        c.insert("securityContext".into(), security_context(rng));
    }
    if rng.chance(25) {
        c.insert("args".into(), json!(["--port=8080"]));
    }
    if rng.chance(20) {
        c.insert("env".into(), json!([{"name": "A", "value": "1"}]));
    }
    if rng.chance(20) {
        c.insert("resources".into(), json!({"limits": {"memory": "64Mi"}}));
    }
    Value::Object(c)
}

fn security_context(rng: &mut Rng) -> Value {
    match rng.below(4) {
        0 => json!({}),
        1 => json!({"privileged": rng.chance(50)}),
        2 => json!({"runAsNonRoot": true}),
        _ => json!({"privileged": false, "runAsNonRoot": rng.chance(50)}),
    }
}

fn toleration(rng: &mut Rng) -> Value {
    match rng.below(3) {
        0 => {
            json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
        }
        1 => {
            json!({"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"})
        }
        _ => {
            json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
        }
    }
}

fn service(rng: &mut Rng, namespace: &str) -> Value {
    let mut spec = json!({
        "selector": {"app": "web"},
        "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
    });
    if rng.chance(50) {
        set(
            &mut spec,
            "type",
            json!(*rng.pick(&["ClusterIP", "LoadBalancer", "NodePort"])),
        );
    }
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(rng, "web", Some(namespace)),
        "spec": spec,
    })
}

fn config_map(rng: &mut Rng, namespace: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(rng, "settings", Some(namespace)),
        "data": {"mode": "fast", "level": "2"},
    })
}

fn namespace_object(rng: &mut Rng, name: &str) -> Value {
    let mut labels = labels(rng);
    if let Value::Object(map) = &mut labels {
        map.insert("kubernetes.io/metadata.name".into(), json!(name));
    }
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": labels},
    })
}

fn widget(rng: &mut Rng, namespace: &str) -> Value {
    let size = rng
        .pick(&[
            json!(3),
            json!(1.5),
            json!(9_007_199_254_740_993_u64),
            json!(-1),
        ])
        .clone();
    json!({
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": metadata(rng, "w", Some(namespace)),
        "spec": {
            "size": size,
            "items": [{"name": "a", "value": 1}, {"name": "b", "value": "x"}],
            "flags": {"fast": true},
            "tags": ["blue"],
        },
    })
}

fn policy_object(rng: &mut Rng, namespace: &str) -> Value {
    match rng.below(8) {
        0 => json!({
            "apiVersion": "constraints.gatekeeper.sh/v1beta1",
            "kind": "K8sRequiredLabels",
            "metadata": {"name": "must-have-owner"},
            "spec": {"match": {"kinds": [{"apiGroups": [""], "kinds": ["Namespace"]}]}},
        }),
        1 => json!({
            "apiVersion": "externaldata.gatekeeper.sh/v1beta1",
            "kind": "Provider",
            "metadata": {"name": "tags"},
            "spec": {"url": "https://tags.example:8443", "timeout": 3},
        }),
        2 => json!({
            "apiVersion": "mutations.gatekeeper.sh/v1",
            "kind": "Assign",
            "metadata": {"name": "other", "labels": {"app": "web"}},
            "spec": {"applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
                     "location": "spec.dnsPolicy", "parameters": {"assign": {"value": "None"}}},
        }),
        // Gatekeeper groups its webhook does not protect (a fixed list).
        4 => json!({
            "apiVersion": "syncset.gatekeeper.sh/v1alpha1",
            "kind": "SyncSet",
            "metadata": metadata(rng, "pods", None),
            "spec": {"gvks": [{"group": "", "version": "v1", "kind": "Pod"}]},
        }),
        5 => json!({
            "apiVersion": "status.gatekeeper.sh/v1beta1",
            "kind": "MutatorPodStatus",
            "metadata": metadata(rng, "pod-1-assign", Some("gatekeeper-system")),
            "status": {"id": "pod-1", "enforced": true},
        }),
        6 => json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingAdmissionPolicy",
            "metadata": metadata(rng, "policy", None),
            "spec": {"failurePolicy": "Fail"},
        }),
        _ => json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": metadata(rng, "policy", None),
            "webhooks": [{"name": "v.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                          "clientConfig": {"service": {"name": "v", "namespace": namespace}}}],
        }),
    }
}

// === expansion ===

/// A workload, its templates, mutators of the Pods it generates.
fn expansion_case(rng: &mut Rng, id: String) -> Case {
    let namespace_name = *rng.pick(&["default", "prod", "prod-eu", "dev", "kube-system"]);
    let (mut object, pod) = workload(rng, namespace_name);
    if rng.chance(25) {
        without_namespace(&mut object);
    }
    let mut names: Vec<&str> = NAMES.to_vec();
    let count = 1 + rng.below(4);
    let mutators = (0..count)
        .map(|_| {
            let name = rng.take(&mut names).unwrap_or("extra");
            let mode = if rng.chance(75) {
                Mode::Normal
            } else {
                Mode::Wild
            };
            let mut mutator = mutator(rng, mode, name, &pod);
            if rng.chance(50)
                && let Some(spec) = mutator.get_mut("spec")
            {
                let source = *rng.pick(&["All", "Original", "Generated", "Generated"]);
                match spec.get_mut("match") {
                    Some(m) => set(m, "source", json!(source)),
                    None => set(spec, "match", json!({"source": source})),
                }
            }
            mutator
        })
        .collect();
    let mut template_names: Vec<&str> = vec!["expand-workloads", "expand-cronjobs", "pods", "jobs"];
    let templates = (0..1 + rng.below(2))
        .map(|_| {
            let name = rng.take(&mut template_names).unwrap_or("more");
            expansion_template(rng, name)
        })
        .collect();
    let namespace = Some(namespace_object(rng, namespace_name));
    let operation = if rng.chance(80) { "CREATE" } else { "UPDATE" };
    let username = if rng.chance(50) { "alice" } else { "" };
    Case {
        id,
        mutators,
        object,
        namespace,
        operation: operation.to_string(),
        username: username.to_string(),
        templates,
    }
}

/// A workload with a pod template, and the Pod it stands for (what
/// mutators are written against).
fn workload(rng: &mut Rng, namespace: &str) -> (Value, Value) {
    let name = *rng.pick(&["web", "api", "nightly"]);
    let mut pod_metadata = Map::new();
    if rng.chance(80) {
        pod_metadata.insert("labels".into(), json!({"app": name}));
    }
    if rng.chance(20) {
        pod_metadata.insert("annotations".into(), json!({"owner": "team-a"}));
    }
    if rng.chance(5) {
        pod_metadata.insert("name".into(), json!("given"));
    }
    let mut template = json!({"metadata": Value::Object(pod_metadata), "spec": pod_spec(rng)});
    if rng.chance(10) {
        set(&mut template, "metadata", json!({}));
    }
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata(rng, name, Some(namespace)),
        "spec": template.get("spec").cloned().unwrap_or_default(),
    });
    let selector = json!({"matchLabels": {"app": name}});
    let (api_version, kind, mut spec) = match rng.below(12) {
        0..=3 => (
            "apps/v1",
            "Deployment",
            json!({"replicas": rng.below(4), "selector": selector, "template": template}),
        ),
        4 => (
            "apps/v1",
            "ReplicaSet",
            json!({"replicas": 1, "selector": selector, "template": template}),
        ),
        5 => (
            "apps/v1",
            "StatefulSet",
            json!({"serviceName": name, "selector": selector, "template": template}),
        ),
        6 => (
            "apps/v1",
            "DaemonSet",
            json!({"selector": selector, "template": template}),
        ),
        7..=8 => (
            "batch/v1",
            "Job",
            json!({"backoffLimit": 2, "template": template}),
        ),
        _ => (
            "batch/v1",
            "CronJob",
            json!({"schedule": "0 0 * * *", "jobTemplate": {"spec": {"template": template}}}),
        ),
    };
    // Now and then nothing (or no object) where the templates look.
    match rng.below(40) {
        0 => {
            if let Some(map) = spec.as_object_mut() {
                map.remove("template");
                map.remove("jobTemplate");
            }
        }
        1 => set(&mut spec, "template", json!("none")),
        _ => {}
    }
    let object = json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": metadata(rng, name, Some(namespace)),
        "spec": spec,
    });
    (object, pod)
}

/// Gatekeeper's documented `expand-deployments` and its CronJob template
/// in a few shapes, now and then a malformed one.
fn expansion_template(rng: &mut Rng, name: &str) -> Value {
    let workloads = [
        ("apps", "Deployment"),
        ("apps", "ReplicaSet"),
        ("apps", "StatefulSet"),
        ("apps", "DaemonSet"),
        ("batch", "Job"),
    ];
    let apply = |entries: &[(&str, &str)]| -> Value {
        entries
            .iter()
            .map(|(group, kind)| json!({"groups": [group], "versions": ["v1"], "kinds": [kind]}))
            .collect()
    };
    let pod = json!({"group": "", "version": "v1", "kind": "Pod"});
    let (apply_to, source, generated) = match rng.below(10) {
        0..=3 => (apply(&workloads), "spec.template", pod),
        4 => (
            // One entry naming them all.
            json!([{"groups": ["apps", "batch"], "versions": ["v1"],
                    "kinds": ["Deployment", "StatefulSet", "Job"]}]),
            "spec.template",
            pod,
        ),
        5 => {
            let some = [*rng.pick(&workloads), *rng.pick(&workloads)];
            (apply(&some), "spec.template", pod)
        }
        6..=8 => (
            apply(&[("batch", "CronJob")]),
            "spec.jobTemplate",
            json!({"group": "batch", "version": "v1", "kind": "Job"}),
        ),
        _ => (
            apply(&[("batch", "CronJob")]),
            "spec.jobTemplate.spec.template",
            pod,
        ),
    };
    let mut spec =
        json!({"applyTo": apply_to, "templateSource": source, "generatedGVK": generated});
    if rng.chance(10) {
        set(&mut spec, "enforcementAction", json!("warn"));
    }
    let version = *rng.pick(&["v1beta1", "v1beta1", "v1alpha1"]);
    let mut template = json!({
        "apiVersion": format!("expansion.gatekeeper.sh/{version}"),
        "kind": "ExpansionTemplate",
        "metadata": {"name": name},
        "spec": spec,
    });
    if rng.chance(12) {
        malformed(rng, &mut template);
    }
    template
}

/// Breaks a template the way a hand-written one may be broken.
fn malformed(rng: &mut Rng, template: &mut Value) {
    let Some(spec) = template.get_mut("spec") else {
        return;
    };
    match rng.below(9) {
        0 => set(spec, "templateSource", json!("")),
        1 => set(spec, "generatedGVK", json!({})),
        2 => set(spec, "applyTo", json!([])),
        // Generates a kind it expands.
        3 => set(
            spec,
            "applyTo",
            json!([{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}]),
        ),
        // Expands the Pods into Deployments: a cycle with a Pod template.
        4 => {
            set(
                spec,
                "applyTo",
                json!([{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}]),
            );
            set(spec, "templateSource", json!("spec"));
            set(
                spec,
                "generatedGVK",
                json!({"group": "apps", "version": "v1", "kind": "Deployment"}),
            );
        }
        5 => set(spec, "templateSource", json!("spec.nothing")),
        6 => set(
            spec,
            "generatedGVK",
            json!({"version": "v1", "kind": "Pod"}),
        ),
        // A misspelt optional field.
        7 => set(spec, "enforcmentAction", json!("warn")),
        // Too long for a Kubernetes name (253), yet unique: two objects
        // of one kind never share a name in a cluster.
        _ => {
            let name = template
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("t");
            let long = format!("{name}-{}", "x".repeat(254));
            set(template, "metadata", json!({ "name": long }));
        }
    }
}

// === mutators ===

/// A target kind: how mutators name it and where its pod spec is.
struct Target {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    pod_spec: Option<&'static str>,
}

const TARGETS: [Target; 6] = [
    Target {
        group: "",
        version: "v1",
        kind: "Pod",
        pod_spec: Some("spec"),
    },
    Target {
        group: "apps",
        version: "v1",
        kind: "Deployment",
        pod_spec: Some("spec.template.spec"),
    },
    Target {
        group: "",
        version: "v1",
        kind: "Service",
        pod_spec: None,
    },
    Target {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        pod_spec: None,
    },
    Target {
        group: "",
        version: "v1",
        kind: "Namespace",
        pod_spec: None,
    },
    Target {
        group: "example.com",
        version: "v1",
        kind: "Widget",
        pod_spec: None,
    },
];

fn group_kind(object: &Value) -> (&str, &str) {
    let group = crate::case::group_of(object);
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    (group, kind)
}

/// The target of the admitted object most of the time, another some times.
fn target<'t>(rng: &mut Rng, object: &Value) -> &'t Target {
    let (group, kind) = group_kind(object);
    let own = TARGETS.iter().find(|t| t.group == group && t.kind == kind);
    match own {
        Some(own) if rng.chance(80) => own,
        _ => rng.pick(&TARGETS),
    }
}

fn mutator(rng: &mut Rng, mode: Mode, name: &str, object: &Value) -> Value {
    let target = target(rng, object);
    let (kind, mut spec) = match rng.below(20) {
        0..=9 => ("Assign", assign(rng, mode, target, object)),
        10..=13 => ("AssignMetadata", assign_metadata(rng)),
        14..=16 => ("ModifySet", modify_set(rng, mode, target, object)),
        _ => ("AssignImage", assign_image(rng, target)),
    };
    if kind != "AssignMetadata" {
        spec.insert("applyTo".into(), apply_to(rng, target));
    }
    if rng.chance(60) {
        spec.insert("match".into(), match_block(rng, target));
    }
    let version = match kind {
        "AssignImage" => "v1alpha1",
        _ => *rng.pick(&["v1", "v1", "v1", "v1beta1", "v1alpha1"]),
    };
    json!({
        "apiVersion": format!("mutations.gatekeeper.sh/{version}"),
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    })
}

fn apply_to(rng: &mut Rng, target: &Target) -> Value {
    let mut entry = json!({
        "groups": [target.group],
        "versions": [target.version],
        "kinds": [target.kind],
    });
    if rng.chance(5) {
        set(&mut entry, "versions", json!(["v1beta1"]));
    }
    if rng.chance(10) {
        let operations = match rng.below(4) {
            0 => json!(["CREATE", "UPDATE"]),
            _ => json!([*rng.pick(&["CREATE", "UPDATE", "*"])]),
        };
        set(&mut entry, "operations", operations);
    }
    if rng.chance(8) {
        // As Gatekeeper's docs write a set for workloads: several kinds and
        // groups in one entry, namespaced and cluster-scoped kinds together.
        let mut kinds = vec![json!(target.kind)];
        let mut groups = vec![json!(target.group)];
        for other in [rng.pick(&TARGETS), rng.pick(&TARGETS)] {
            kinds.push(json!(other.kind));
            groups.push(json!(other.group));
        }
        if rng.chance(30) {
            kinds.push(json!("Namespace"));
            groups.push(json!(""));
        }
        set(&mut entry, "kinds", json!(kinds));
        set(&mut entry, "groups", json!(groups));
        return json!([entry]);
    }
    if rng.chance(10) {
        // Another kind, or the same one on other operations (Gatekeeper
        // checks each entry on its own).
        let other = if rng.chance(50) {
            target
        } else {
            rng.pick(&TARGETS)
        };
        let mut second = json!({
            "groups": [other.group],
            "versions": [other.version],
            "kinds": [other.kind],
        });
        if rng.chance(50) {
            set(
                &mut second,
                "operations",
                json!([*rng.pick(&["CREATE", "UPDATE"])]),
            );
        }
        return json!([entry, second]);
    }
    json!([entry])
}

fn match_block(rng: &mut Rng, target: &Target) -> Value {
    let mut m = Map::new();
    if rng.chance(40) {
        let groups = if rng.chance(50) {
            json!(["*"])
        } else {
            json!([target.group])
        };
        let kinds = if rng.chance(20) {
            json!(["*"])
        } else {
            json!([target.kind])
        };
        m.insert(
            "kinds".into(),
            json!([{"apiGroups": groups, "kinds": kinds}]),
        );
    }
    if rng.chance(20) {
        m.insert(
            "scope".into(),
            json!(*rng.pick(&[
                "*",
                "Namespaced",
                "Cluster",
                "*",
                "Namespaced",
                "Cluster",
                "Global"
            ])),
        );
    }
    if rng.chance(20) {
        m.insert(
            "namespaces".into(),
            json!([*rng.pick(&["default", "prod-*", "dev", "kube-*"])]),
        );
    }
    if rng.chance(15) {
        m.insert(
            "excludedNamespaces".into(),
            json!([*rng.pick(&["kube-system", "prod*", "dev"])]),
        );
    }
    if rng.chance(20) {
        m.insert(
            "labelSelector".into(),
            selector(rng, "app", &["web", "api"]),
        );
    }
    if rng.chance(15) {
        m.insert(
            "namespaceSelector".into(),
            selector(rng, "env", &["prod", "dev"]),
        );
    }
    if rng.chance(10) {
        m.insert(
            "name".into(),
            json!(*rng.pick(&["web", "we*", "*-0", "settings"])),
        );
    }
    if rng.chance(10) {
        m.insert(
            "source".into(),
            json!(*rng.pick(&["All", "Original", "Generated"])),
        );
    }
    Value::Object(m)
}

fn selector(rng: &mut Rng, key: &str, values: &[&str]) -> Value {
    let value = *rng.pick(values);
    match rng.below(16) {
        0..=8 => json!({"matchLabels": {key: value}}),
        9..=10 => json!({"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}),
        11..=12 => {
            json!({"matchExpressions": [{"key": key, "operator": "NotIn", "values": [value]}]})
        }
        13..=14 => {
            json!({"matchExpressions": [{"key": key, "operator": *rng.pick(&["Exists", "DoesNotExist"])}]})
        }
        // Malformed: In without values, an unknown operator, Exists with values.
        _ => match rng.below(3) {
            0 => json!({"matchExpressions": [{"key": key, "operator": "In"}]}),
            _ => {
                json!({"matchExpressions": [{"key": key, "operator": *rng.pick(&["Contains", "Exists"]), "values": [value]}]})
            }
        },
    }
}

fn assign(rng: &mut Rng, mode: Mode, target: &Target, object: &Value) -> Map<String, Value> {
    let (location, value) = match mode {
        Mode::Normal | Mode::Expansion => normal_assign(rng, target),
        Mode::Wild => {
            let location = walk(rng, object, false);
            (location, wild_value(rng, 2))
        }
    };
    let mut assign = Map::new();
    if rng.chance(8) {
        assign.insert(
            "fromMetadata".into(),
            json!({"field": *rng.pick(&["namespace", "name"])}),
        );
    } else {
        assign.insert("value".into(), value);
    }
    let mut parameters = Map::new();
    parameters.insert("assign".into(), Value::Object(assign));
    if rng.chance(35) {
        parameters.insert("pathTests".into(), path_tests(rng, &location));
    }
    if rng.chance(1) {
        parameters.insert("assignIf".into(), json!({"in": ["x"]}));
    }
    let mut spec = Map::new();
    spec.insert("location".into(), json!(location));
    spec.insert("parameters".into(), Value::Object(parameters));
    spec
}

fn containers(rng: &mut Rng) -> &'static str {
    rng.pick::<&str>(&[
        "containers[name: *]",
        "containers[name: *]",
        "containers[name: app]",
        "containers[name: sidecar]",
        "containers[name: \"istio-proxy\"]",
        "initContainers[name: *]",
    ])
}

/// A location and value an admin would write for `target`.
fn normal_assign(rng: &mut Rng, target: &Target) -> (String, Value) {
    if let Some(spec) = target.pod_spec
        && rng.chance(90)
    {
        let c = containers(rng);
        let (tail, value) = match rng.below(16) {
            0 => (
                format!("{c}.securityContext.privileged"),
                json!(rng.chance(50)),
            ),
            1 => (format!("{c}.securityContext.runAsNonRoot"), json!(true)),
            2 => (format!("{c}.securityContext"), security_context(rng)),
            3 => (
                format!("{c}.imagePullPolicy"),
                json!(*rng.pick(&["Always", "IfNotPresent"])),
            ),
            4 => (format!("{c}.resources.limits.memory"), json!("128Mi")),
            5 => (format!("{c}.ports[containerPort: 80].name"), json!("web")),
            6 => (
                format!("{c}.ports[containerPort: *].protocol"),
                json!("UDP"),
            ),
            7 => (format!("{c}.env[name: A].value"), json!("2")),
            8 => (format!("{c}.args"), json!(["--verbose"])),
            9 => {
                let name = c
                    .split_once(": ")
                    .map_or("app", |(_, n)| n.trim_end_matches(']').trim_matches('"'));
                let element = if rng.chance(80) { name } else { "other" };
                (c.to_string(), json!({"name": element, "image": "nginx"}))
            }
            10 => ("tolerations".into(), json!([toleration(rng)])),
            11 => ("nodeSelector.disk".into(), json!("hdd")),
            12 => ("dnsPolicy".into(), json!("None")),
            13 => (
                "volumes[name: data].emptyDir".into(),
                json!({"medium": "Memory"}),
            ),
            14 => (format!("{c}.image.tag"), json!("v2")),
            _ => (
                "securityContext.runAsUser".into(),
                json!(rng.pick(&[json!(0), json!(1000), json!(1.5)])),
            ),
        };
        let location = if tail.starts_with("spec") || rng.chance(3) {
            tail
        } else {
            format!("{spec}.{tail}")
        };
        if target.kind == "Deployment" && rng.chance(10) {
            return (
                "spec.replicas".into(),
                json!(rng.pick(&[json!(3), json!(9_007_199_254_740_993_u64)])),
            );
        }
        return (location, value);
    }
    match target.kind {
        "Service" => match rng.below(4) {
            0 => ("spec.type".into(), json!("LoadBalancer")),
            1 => (
                "spec.ports[port: 80].targetPort".into(),
                json!(rng.pick(&[json!(9090), json!("http")])),
            ),
            2 => ("spec.ports[name: *].protocol".into(), json!("UDP")),
            _ => ("spec.externalTrafficPolicy".into(), json!("Local")),
        },
        "ConfigMap" => (
            "data.mode".into(),
            json!(rng.pick(&[json!("slow"), json!(2)])),
        ),
        "Namespace" => ("spec.finalizers".into(), json!(["kubernetes"])),
        "Widget" => match rng.below(5) {
            0 => (
                "spec.size".into(),
                json!(rng.pick(&[
                    json!(5),
                    json!(9_007_199_254_740_993_u64),
                    json!(2.5),
                    json!(-9_007_199_254_740_993_i64)
                ])),
            ),
            1 => ("spec.items[name: a].value".into(), json!(2)),
            2 => ("spec.items[name: *].value".into(), json!({"nested": true})),
            3 => ("spec.flags".into(), json!({"fast": false})),
            _ => ("metadata.labels.app".into(), json!("web")),
        },
        _ => ("spec.nodeName".into(), json!("node-1")),
    }
}

fn path_tests(rng: &mut Rng, location: &str) -> Value {
    let prefixes = prefixes(location);
    let tests: Vec<Value> = (0..1 + rng.below(2))
        .map(|_| {
            let sub = rng.pick(&prefixes).clone();
            match rng.below(40) {
                0 => json!({"subPath": sub}),
                1..=18 => json!({"subPath": sub, "condition": "MustExist"}),
                _ => json!({"subPath": sub, "condition": "MustNotExist"}),
            }
        })
        .collect();
    Value::Array(tests)
}

/// `a`, `a.b`, `a.b[k: v]`, ...: every prefix of a location ending at a
/// segment, the location itself included.
fn prefixes(location: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut quoted = false;
    for (i, ch) in location.char_indices() {
        match ch {
            '"' => quoted = !quoted,
            '[' if !quoted => {
                if depth == 0
                    && let Some(prefix) = location.get(..i).filter(|p| !p.is_empty())
                {
                    out.push(prefix.to_string());
                }
                depth += 1;
            }
            ']' if !quoted => depth -= 1,
            '.' if !quoted && depth == 0 => {
                out.extend(location.get(..i).map(str::to_string));
            }
            _ => {}
        }
    }
    out.push(location.to_string());
    out.dedup();
    out
}

fn assign_metadata(rng: &mut Rng) -> Map<String, Value> {
    let field = *rng.pick(&["labels", "annotations"]);
    let key = *rng.pick(&["owner", "env", "team", "\"example.com/managed\"", "app"]);
    let assign = match rng.below(10) {
        0 => json!({"fromMetadata": {"field": *rng.pick(&["namespace", "name"])}}),
        1 => json!({"value": 7}),
        _ => json!({"value": *rng.pick(&["alice", "prod", "yes", "web"])}),
    };
    let mut spec = Map::new();
    spec.insert("location".into(), json!(format!("metadata.{field}.{key}")));
    spec.insert("parameters".into(), json!({"assign": assign}));
    spec
}

fn modify_set(rng: &mut Rng, mode: Mode, target: &Target, object: &Value) -> Map<String, Value> {
    let (location, values) = match (mode, target.pod_spec) {
        (Mode::Wild, _) => (
            walk(rng, object, true),
            vec![wild_value(rng, 1), wild_value(rng, 0)],
        ),
        (Mode::Normal | Mode::Expansion, Some(spec)) => match rng.below(16) {
            0..=4 => (
                format!("{spec}.{}.args", containers(rng)),
                vec![json!("--verbose"), json!("--port=8080")],
            ),
            5..=7 => (
                format!("{spec}.{}.command", containers(rng)),
                vec![json!("/bin/sh")],
            ),
            8..=14 => (format!("{spec}.tolerations"), vec![toleration(rng)]),
            _ => (
                "metadata.finalizers".into(),
                vec![json!("example.com/keep")],
            ),
        },
        (Mode::Normal | Mode::Expansion, None) => match target.kind {
            "Widget" => (
                "spec.tags".into(),
                vec![
                    json!("blue"),
                    json!(rng.pick(&[json!(1), json!(1.0), json!("red")])),
                ],
            ),
            "Namespace" => ("spec.finalizers".into(), vec![json!("kubernetes")]),
            "Service" => (
                "spec.ports".into(),
                vec![json!({"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"})],
            ),
            _ => ("spec.items".into(), vec![json!({"name": "a", "value": 1})]),
        },
    };
    let count = 1 + rng.below(values.len());
    let values: Vec<Value> = values.into_iter().take(count).collect();
    let mut parameters = Map::new();
    if rng.chance(70) {
        parameters.insert("operation".into(), json!("merge"));
    } else if rng.chance(80) {
        parameters.insert("operation".into(), json!("prune"));
    }
    parameters.insert("values".into(), json!({"fromList": values}));
    if rng.chance(25) {
        parameters.insert("pathTests".into(), path_tests(rng, &location));
    }
    let mut spec = Map::new();
    spec.insert("location".into(), json!(location));
    spec.insert("parameters".into(), Value::Object(parameters));
    spec
}

fn assign_image(rng: &mut Rng, target: &Target) -> Map<String, Value> {
    let spec = target.pod_spec.unwrap_or("spec");
    let location = format!("{spec}.{}.image", containers(rng));
    let mut parameters = Map::new();
    if rng.chance(60) {
        parameters.insert(
            "assignDomain".into(),
            json!(*rng.pick(&[
                "registry.example.com",
                "localhost:5000",
                "docker.io",
                "mirror.example.com:5000",
                "registry.example.com",
                "a@b"
            ])),
        );
    }
    if rng.chance(40) {
        parameters.insert(
            "assignPath".into(),
            json!(*rng.pick(&[
                "library/nginx",
                "team/app",
                "mirror/app",
                "library/nginx",
                "team/app",
                "Bad Path"
            ])),
        );
    }
    if rng.chance(50) || parameters.is_empty() {
        parameters.insert(
            "assignTag".into(),
            json!(*rng.pick(&[
                ":latest",
                ":v2",
                "@sha256:3fbc632167424a6d997e74f52b878d7cc478225cffac6bc977eedfe51c7f4e79",
                ":latest",
                ":v2",
                "v3"
            ])),
        );
    }
    if rng.chance(15) {
        parameters.insert("pathTests".into(), path_tests(rng, &location));
    }
    let mut out = Map::new();
    out.insert("location".into(), json!(location));
    out.insert("parameters".into(), Value::Object(parameters));
    out
}

// === wild ===

const WILD_KEYS: [&str; 6] = ["spec", "extra", "name", "items", "x-y", "a"];

/// A location from a random walk over `object`, past its end now and then;
/// `list` asks for one ending at a list (a ModifySet's), when there is one.
fn walk(rng: &mut Rng, object: &Value, list: bool) -> String {
    let mut location = String::new();
    let mut here = Some(object);
    let steps = 1 + rng.below(5);
    let into_metadata = rng.chance(5);
    for step in 0..steps {
        match here {
            Some(Value::Object(map)) if !map.is_empty() && rng.chance(85) => {
                // The first step goes to the object's body; metadata (which
                // only AssignMetadata may change) now and then.
                let keys: Vec<&String> = map
                    .keys()
                    .filter(|k| {
                        step > 0
                            || !matches!(k.as_str(), "apiVersion" | "kind" | "metadata")
                            || (k.as_str() == "metadata" && into_metadata)
                    })
                    .collect();
                let Some(key) = rng.pick_opt(&keys) else {
                    break;
                };
                let key: &str = key;
                push_field(&mut location, key);
                here = map.get(key);
            }
            Some(Value::Array(items)) => {
                let Some(item) = rng.pick_opt(items) else {
                    break;
                };
                let Some(fields) = item.as_object() else {
                    break;
                };
                let keyed: Vec<(&String, &Value)> = fields
                    .iter()
                    .filter(|(_, v)| v.is_string() || v.is_i64())
                    .collect();
                let Some(&(field, value)) = rng.pick_opt(&keyed) else {
                    break;
                };
                let selector = match rng.below(4) {
                    0 => "*".to_string(),
                    1 => "\"new\"".to_string(),
                    _ => match value {
                        Value::String(s) => quote(s),
                        other => other.to_string(),
                    },
                };
                location.push_str(&format!("[{}: {selector}]", quote(field)));
                here = (selector != "\"new\"").then_some(item);
            }
            _ => {
                push_field(&mut location, rng.pick::<&str>(&WILD_KEYS));
                here = None;
            }
        }
        if list && matches!(here, Some(Value::Array(_))) {
            break;
        }
        if matches!(
            here,
            Some(Value::String(_) | Value::Number(_) | Value::Bool(_))
        ) && !rng.chance(10)
        {
            break;
        }
    }
    if location.is_empty() {
        location.push_str("spec");
    }
    location
}

fn push_field(location: &mut String, key: &str) {
    if !location.is_empty() {
        location.push('.');
    }
    location.push_str(&quote(key));
}

/// A name as a location writes it: bare when it is an identifier, quoted otherwise.
fn quote(name: &str) -> String {
    let bare = !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if bare {
        name.to_string()
    } else {
        serde_json::to_string(name).unwrap_or_default()
    }
}

fn wild_value(rng: &mut Rng, depth: usize) -> Value {
    let scalar = |rng: &mut Rng| match rng.below(8) {
        0 => json!(null),
        1 => json!(rng.chance(50)),
        2 => json!(rng.pick(&[json!(0), json!(300), json!(-7), json!(2.5)])),
        3 => json!(9_007_199_254_740_993_u64),
        4 => json!(""),
        _ => json!(*rng.pick(&["app", "x", "nginx", "web"])),
    };
    if depth == 0 {
        return scalar(rng);
    }
    match rng.below(6) {
        0 => {
            let key = *rng.pick(&["name", "value", "x"]);
            json!({"name": *rng.pick(&["app", "new"]), key: wild_value(rng, depth - 1)})
        }
        1 => json!({}),
        2 => json!([wild_value(rng, depth - 1)]),
        _ => scalar(rng),
    }
}

// === randomness ===

/// splitmix64: small, fast, and the same sequence for a seed forever.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// 0..n (0 when n is 0).
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        (self.next() % n as u64) as usize
    }

    /// True `percent` times in a hundred.
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    /// A random item of a pool; the pools are constants, never empty.
    #[allow(clippy::indexing_slicing)]
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        let i = self.below(items.len());
        &items[i]
    }

    fn pick_opt<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        let i = self.below(items.len());
        items.get(i)
    }

    /// Removes and returns a random item.
    fn take<T>(&mut self, items: &mut Vec<T>) -> Option<T> {
        if items.is_empty() {
            return None;
        }
        let i = self.below(items.len());
        Some(items.remove(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_names_the_same_cases() {
        let first: Vec<Case> = cases(7, Mode::Normal, 20).collect();
        let again: Vec<Case> = cases(7, Mode::Normal, 20).collect();
        assert_eq!(first, again);
        let other: Vec<Case> = cases(8, Mode::Normal, 20).collect();
        assert_ne!(first, other);
    }

    #[test]
    fn prefixes_end_at_segments() {
        assert_eq!(
            prefixes("spec.containers[name: \"a.b\"].securityContext"),
            vec![
                "spec",
                "spec.containers",
                "spec.containers[name: \"a.b\"]",
                "spec.containers[name: \"a.b\"].securityContext",
            ]
        );
    }

    #[test]
    fn wild_locations_parse() {
        for case in cases(3, Mode::Wild, 200) {
            for mutator in &case.mutators {
                let Some(location) = mutator.pointer("/spec/location").and_then(Value::as_str)
                else {
                    continue;
                };
                assert!(
                    sartor_location_parses(location),
                    "{location} does not parse ({})",
                    case.id
                );
            }
        }
    }

    fn sartor_location_parses(location: &str) -> bool {
        sartor_location::Path::parse(location).is_ok()
    }
}
