//! The shapes the scale bench times and `crates/engine/perf/guard` counts
//! instructions of (through `examples/instructions.rs`): one definition, so
//! the guard watches exactly what the bench measures. Also the shapes of the
//! system benchmarks Gatekeeper's performance branch adds, which the
//! gatekeeper bench times (`gatekeeper/go/shapes/system_shapes_test.go`
//! copies those benchmarks, to run them against Gatekeeper v3.23.1 too), and
//! [`dump`], with which `gatekeeper/compare.sh` checks that sartor and
//! Gatekeeper make the same objects.

#![allow(
    dead_code,
    clippy::panic,
    clippy::unwrap_used,
    clippy::indexing_slicing
)]

use std::collections::HashMap;
use std::path::Path;

use sartor_api::{Input, load_mutators};
use sartor_engine::{Admission, Mutator, System};
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

/// Gatekeeper's System.Mutate shape: one Assign setting `spec` to `""` on
/// v1 Pods.
pub fn assign_at_spec() -> System {
    let mut system = System::new();
    system.upsert(mutator(
        "Assign",
        "bench",
        json!({"applyTo": apply_to("", "v1", "Pod"), "location": "spec",
               "parameters": {"assign": {"value": ""}}}),
    ));
    system
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

/// With `SARTOR_BENCH_DUMP=dir`, writes what sartor makes of a shape (the
/// object through `system`, admitted by `admission`) to `dir/name.json`, so
/// `benches/gatekeeper/compare.sh` can check that Gatekeeper, driven with the
/// same shape, ends with the same object.
pub fn dump(name: &str, system: &System, admission: &Admission<'_>, object: &Value) {
    if let Some(dir) = std::env::var_os("SARTOR_BENCH_DUMP") {
        let mut object = object.clone();
        system.mutate(admission, &mut object).unwrap();
        let path = Path::new(&dir).join(format!("{name}.json"));
        std::fs::write(path, serde_json::to_vec(&object).unwrap()).unwrap();
    }
}

// --- Gatekeeper's performance branch -----------------------------------------
// The system benchmarks that Gatekeeper's unreleased branch
// agent/perf-bottleneck-followups (commit f04df15) adds to
// pkg/mutation/system_benchmark_test.go, each built as there: Assigns of a
// constant value at `spec.<field><i>`, for ConfigMaps (`applyTo` core `v1`
// ConfigMap, they apply) or for Deployments (`apps/v1`, they never do), named
// as there, through a ConfigMap `cm` in `default`.

/// Gatekeeper's `benchmarkLargeObjectData`: `key<i>: value<i>`, `entries` of
/// them.
pub fn large_object_data(entries: usize) -> Map<String, Value> {
    (0..entries)
        .map(|i| (format!("key{i}"), json!(format!("value{i}"))))
        .collect()
}

/// Gatekeeper's `benchmarkMutationObject`: the ConfigMap `cm` in `default`,
/// with `data_entries` entries of [`large_object_data`] (no `data` at all
/// for `None`) and, for `pre_mutated` > 0, what the first `pre_mutated`
/// mutators of [`configmap_assigns`] set already there.
pub fn gk_configmap(data_entries: Option<usize>, pre_mutated: usize) -> Value {
    let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "cm", "namespace": "default"}});
    if let Some(entries) = data_entries {
        object["data"] = Value::Object(large_object_data(entries));
    }
    if pre_mutated > 0 {
        let spec: Map<String, Value> = (0..pre_mutated)
            .map(|i| (format!("field{i}"), json!(format!("matched{i}"))))
            .collect();
        object["spec"] = Value::Object(spec);
    }
    object
}

/// `n` Assigns for `apps/v1` Deployments, which never apply to the
/// ConfigMap: `<name><i>` sets `spec.<field><i>` to `""`.
pub fn deployment_assigns(system: &mut System, name: &str, field: &str, n: usize) {
    for i in 0..n {
        system.upsert(mutator(
            "Assign",
            &format!("{name}{i}"),
            json!({"applyTo": apply_to("apps", "v1", "Deployment"),
                   "location": format!("spec.{field}{i}"),
                   "parameters": {"assign": {"value": ""}}}),
        ));
    }
}

/// `n` Assigns for ConfigMaps: `<name><i>` sets `spec.field<i>` to
/// `matched<i>`; with `selectors`, only on objects labelled `app: gatekeeper`
/// in a Namespace labelled `env: prod`.
pub fn configmap_assigns(system: &mut System, name: &str, n: usize, selectors: bool) {
    for i in 0..n {
        let mut spec = json!({"applyTo": apply_to("", "v1", "ConfigMap"),
                              "location": format!("spec.field{i}"),
                              "parameters": {"assign": {"value": format!("matched{i}")}}});
        if selectors {
            spec["match"] = json!({
                "labelSelector": {"matchLabels": {"app": "gatekeeper"}},
                "namespaceSelector": {"matchLabels": {"env": "prod"}},
            });
        }
        system.upsert(mutator("Assign", &format!("{name}{i}"), spec));
    }
}

/// The one Assign for ConfigMaps of `SkipsPlaceholderScan...` and
/// `CandidateIndexScale`: `assign-matching` sets `spec.matched` to `matched`.
fn assign_matching(system: &mut System) {
    system.upsert(mutator(
        "Assign",
        "assign-matching",
        json!({"applyTo": apply_to("", "v1", "ConfigMap"), "location": "spec.matched",
               "parameters": {"assign": {"value": "matched"}}}),
    ));
}

/// `BenchmarkSystem_MutateNonMatchingMutatorsLargeObject`: 100 Assigns for
/// Deployments, a ConfigMap of 500 entries.
pub fn non_matching_large_object() -> (System, Value) {
    let mut system = System::new();
    deployment_assigns(&mut system, "assign-", "field", 100);
    (system, gk_configmap(Some(500), 0))
}

/// `BenchmarkSystem_MutateNonMatchingMutatorScale/<n>`: `n` Assigns for
/// Deployments, a ConfigMap without data.
pub fn non_matching_scale(n: usize) -> (System, Value) {
    let mut system = System::new();
    deployment_assigns(&mut system, "assign-", "field", n);
    (system, gk_configmap(None, 0))
}

/// `BenchmarkSystem_MutateMatchingMutatorsLargeObject/matching-<n>/data-<data>/...`:
/// `n` Assigns that apply, a ConfigMap of `data` entries; `already_mutated`:
/// with what they set already there.
pub fn matching_large_object(n: usize, data: usize, already_mutated: bool) -> (System, Value) {
    let mut system = System::new();
    configmap_assigns(&mut system, "assign-matching-", n, false);
    let pre_mutated = if already_mutated { n } else { 0 };
    (system, gk_configmap(Some(data), pre_mutated))
}

/// `BenchmarkSystem_MutateSkipsPlaceholderScanWithoutTerminatingMutators/data-<data>`:
/// one Assign of a constant (no external data), a ConfigMap of `data`
/// entries.
pub fn placeholder_scan(data: usize) -> (System, Value) {
    let mut system = System::new();
    assign_matching(&mut system);
    (system, gk_configmap(Some(data), 0))
}

/// `BenchmarkSystem_MutateSelectorMatchingScale/matching-<n>`: `n` Assigns
/// with a label and a namespace selector, all matching, through a ConfigMap
/// of 10 entries labelled `app: gatekeeper` that already has what they set,
/// in `default`, labelled `env: prod` (the Namespace, by name).
pub fn selector_matching(n: usize) -> (System, Value, HashMap<String, Value>) {
    let mut system = System::new();
    configmap_assigns(&mut system, "assign-selector-", n, true);
    let mut object = gk_configmap(Some(10), n);
    object["metadata"]["labels"] = json!({"app": "gatekeeper"});
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": "default", "labels": {"env": "prod"}}});
    let namespaces = HashMap::from([("default".to_string(), namespace)]);
    (system, object, namespaces)
}

/// `BenchmarkSystem_MutateCandidateIndexScale/matching-1/nonmatching-<n>`:
/// `assign-matching` and `n` Assigns for Deployments, a ConfigMap without
/// data.
pub fn candidate_index(nonmatching: usize) -> (System, Value) {
    let mut system = System::new();
    assign_matching(&mut system);
    deployment_assigns(
        &mut system,
        "assign-nonmatching-",
        "nonmatching",
        nonmatching,
    );
    (system, gk_configmap(None, 0))
}
