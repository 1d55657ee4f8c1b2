//! The shapes the scale bench times and `crates/engine/perf/guard` counts
//! instructions of (through `examples/instructions.rs`): one definition, so
//! the guard watches exactly what the bench measures.

#![allow(
    dead_code,
    clippy::panic,
    clippy::unwrap_used,
    clippy::indexing_slicing
)]

use std::path::Path;

use sartor_api::{Input, load_mutators};
use sartor_engine::{Mutator, System};
use serde_json::{Map, Value, json};

use crate::common::{apply_to, mutator};

/// A Pod of three containers, each with a port and requests.
pub fn three_container_pod() -> Value {
    let container = |name: &str, image: &str| {
        json!({"name": name, "image": image, "ports": [{"containerPort": 8080}],
               "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}})
    };
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-7d9f", "namespace": "shop", "labels": {"app": "web", "tier": "front"}},
        "spec": {
            "containers": [
                container("app", "registry.example.com/shop/web:1.4.2"),
                container("proxy", "envoyproxy/envoy:v1.30"),
                container("log", "fluent/fluent-bit:3.0"),
            ],
            "serviceAccountName": "web",
        },
    })
}

/// Ten realistic mutators that apply to Pods.
pub fn matching_ten(system: &mut System) {
    let pod = || apply_to("", "v1", "Pod");
    let specs = [
        (
            "Assign",
            "pull-always",
            json!({"applyTo": pod(), "location": "spec.containers[name: *].imagePullPolicy", "parameters": {"assign": {"value": "Always"}}}),
        ),
        (
            "Assign",
            "seccomp",
            json!({"applyTo": pod(), "location": "spec.securityContext.seccompProfile.type", "parameters": {"assign": {"value": "RuntimeDefault"}}}),
        ),
        (
            "Assign",
            "non-root",
            json!({"applyTo": pod(), "location": "spec.containers[name: *].securityContext.runAsNonRoot", "parameters": {"assign": {"value": true}}}),
        ),
        (
            "Assign",
            "no-priv-esc",
            json!({"applyTo": pod(), "location": "spec.containers[name: *].securityContext.allowPrivilegeEscalation", "parameters": {"assign": {"value": false}}}),
        ),
        (
            "Assign",
            "host-from-name",
            json!({"applyTo": pod(), "location": "spec.hostname", "parameters": {"assign": {"fromMetadata": {"field": "name"}}}}),
        ),
        (
            "Assign",
            "sidecar",
            json!({"applyTo": pod(), "location": "spec.containers[name: metrics]", "parameters": {"assign": {"value": {"name": "metrics", "image": "prom/exporter:1"}}, "pathTests": [{"subPath": "spec.containers[name: metrics]", "condition": "MustNotExist"}]}}),
        ),
        (
            "AssignImage",
            "mirror",
            json!({"applyTo": pod(), "location": "spec.containers[name: *].image", "parameters": {"assignDomain": "mirror.example.com"}}),
        ),
        (
            "ModifySet",
            "drop-debug",
            json!({"applyTo": pod(), "location": "spec.containers[name: *].args", "parameters": {"operation": "prune", "values": {"fromList": ["--debug"]}}}),
        ),
        (
            "AssignMetadata",
            "owner",
            json!({"match": {"namespaces": ["shop"]}, "location": "metadata.labels.owner", "parameters": {"assign": {"fromMetadata": {"field": "namespace"}}}}),
        ),
        (
            "AssignMetadata",
            "policy",
            json!({"location": "metadata.annotations.\"example.com/policy\"", "parameters": {"assign": {"value": "strict"}}}),
        ),
    ];
    for (kind, name, spec) in specs {
        system.upsert(mutator(kind, name, spec));
    }
}

/// The 3-container Pod through `total` mutators: [`matching_ten`] and the
/// rest for other kinds (100 CRDs), as in a cluster with many teams'
/// mutators: none can ever apply to a Pod.
pub fn pod_through(total: usize) -> (System, Value) {
    let mut system = System::new();
    matching_ten(&mut system);
    for i in 0..total.saturating_sub(10) {
        let kind = format!("Widget{}", i % 100);
        system.upsert(mutator(
            "Assign",
            &format!("other-{i:05}"),
            json!({"applyTo": apply_to("example.com", "v1", &kind),
                   "location": format!("spec.field{i}"),
                   "parameters": {"assign": {"value": i}}}),
        ));
    }
    (system, three_container_pod())
}

/// A ConfigMap of 500 entries through `n` Assigns that apply to it, half
/// overwriting entries, half adding new ones.
pub fn configmap_through(n: usize) -> (System, Value) {
    let mut data = Map::new();
    for i in 0..500 {
        data.insert(format!("key-{i:03}"), json!(format!("value-{i}")));
    }
    let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "settings", "namespace": "shop"}, "data": data});
    let mut system = System::new();
    for i in 0..n {
        system.upsert(mutator(
            "Assign",
            &format!("set-{i:04}"),
            json!({"applyTo": apply_to("", "v1", "ConfigMap"),
                   "location": format!("data.key-{:03}", i * 2),
                   "parameters": {"assign": {"value": "mutated"}}}),
        ));
    }
    (system, configmap)
}

/// The webhook load test's Pod through its set `set` (`typical`, `heavy`)
/// of 100 mutators, from the directory `make-load.py` wrote.
pub fn load_set(dir: &Path, set: &str) -> (System, Value) {
    let review: Value =
        serde_json::from_slice(&std::fs::read(dir.join("review.json")).unwrap()).unwrap();
    let pod = review["request"]["object"].clone();
    assert!(pod.is_object(), "review.json has no request.object");
    let loaded = load_mutators(&[Input::Path(dir.join(set))]);
    assert!(loaded.errors.is_empty(), "{set}: {:?}", loaded.errors);
    assert_eq!(loaded.mutators.len(), 100, "{set}: mutators loaded");
    let mut system = System::new();
    for mutator in &loaded.mutators {
        system.upsert(Mutator::compile(&mutator.object).unwrap());
    }
    (system, pod)
}
