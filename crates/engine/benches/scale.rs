//! How mutation cost grows with the number of mutators loaded and matching.
//! Run: `cargo bench -p sartor-engine --bench scale` (and, for the load
//! test's sets, `python3 crates/webhook/load/make-load.py DIR` first, then
//! the bench with `SARTOR_LOAD_DIR=DIR`).
//!
//! Objects are admitted as the webhook admits them: without change paths
//! (`Admission::without_paths`: the webhook reads none, and Gatekeeper
//! records none).

#![allow(clippy::panic, clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
mod shapes;

use criterion::{BatchSize, Bencher, BenchmarkId, Criterion, criterion_group, criterion_main};
use sartor_engine::{Admission, Request, System};
use serde_json::{Value, json};

use common::{apply_to, mutator};
use shapes::dump;

/// Times `System::mutate` on fresh copies of `object`, made and dropped
/// outside the timer as Gatekeeper's side of `compare.sh` makes its deep
/// copies: the engine mutates the object the webhook parsed, in place.
fn time_mutate(b: &mut Bencher<'_>, system: &System, admission: &Admission<'_>, object: &Value) {
    b.iter_batched(
        || object.clone(),
        |mut object| {
            system.mutate(admission, &mut object).unwrap();
            object
        },
        BatchSize::LargeInput,
    );
}

fn pod_through_many(c: &mut Criterion) {
    let mut group = c.benchmark_group("pod through N mutators, 10 matching");
    for total in [10usize, 100, 1_000, 10_000] {
        let (system, pod) = shapes::pod_through(total);
        let admission = Admission::new(&pod).without_paths();
        dump(&format!("pod-{total}"), &system, &admission, &pod);
        group.bench_function(BenchmarkId::from_parameter(total), |b| {
            time_mutate(b, &system, &admission, &pod)
        });
    }
    group.finish();
}

fn configmap_through_many(c: &mut Criterion) {
    let mut group = c.benchmark_group("configmap with 500 entries, N matching Assigns");
    for n in [1usize, 10, 100, 1_000] {
        let (system, configmap) = shapes::configmap_through(n);
        let admission = Admission::new(&configmap).without_paths();
        dump(&format!("configmap-{n}"), &system, &admission, &configmap);
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            time_mutate(b, &system, &admission, &configmap)
        });
    }
    group.finish();
}

/// The webhook load test's Pod through each of its sets of 100 mutators
/// (`crates/webhook/load/make-load.py`, written to `SARTOR_LOAD_DIR`; the
/// group is skipped without it): the engine's share of a load-test request,
/// and the shape `benches/gatekeeper/compare.sh` times Gatekeeper on.
fn load_sets(c: &mut Criterion) {
    let Some(dir) = std::env::var_os("SARTOR_LOAD_DIR") else {
        eprintln!("load test's sets skipped: SARTOR_LOAD_DIR is not set");
        return;
    };
    let dir = std::path::Path::new(&dir);
    let mut group = c.benchmark_group("load test's Pod through a set of 100");
    for set in ["typical", "heavy"] {
        let (system, pod) = shapes::load_set(dir, set);
        let pod = &pod;
        let admission = Admission::new(pod).without_paths();
        dump(&format!("load-{set}"), &system, &admission, pod);
        group.bench_function(BenchmarkId::from_parameter(set), |b| {
            time_mutate(b, &system, &admission, pod)
        });
    }
    group.finish();
}

/// One Assign over the 3-container Pod's containers, through a glob and
/// through sartor's exclusion, re-applied to a Pod it already mutated (the
/// setter runs on each selected container, nothing changes).
fn glob_vs_exclusion(c: &mut Criterion) {
    let mut group = c.benchmark_group("assign over 3 containers");
    for (label, location) in [
        ("glob [name: *]", "spec.containers[name: *].imagePullPolicy"),
        (
            "exclusion [name notin (proxy, log)]",
            "spec.containers[name notin (proxy, log)].imagePullPolicy",
        ),
    ] {
        let m = mutator(
            "Assign",
            "pull",
            json!({"applyTo": apply_to("", "v1", "Pod"), "location": location,
                   "parameters": {"assign": {"value": "Always"}}}),
        );
        let request = Request::create(Some("shop"));
        let mut pod = shapes::three_container_pod();
        m.apply(&mut pod, &request).unwrap();
        group.bench_function(label, |b| {
            b.iter(|| m.apply(std::hint::black_box(&mut pod), &request))
        });
    }
    group.finish();
}

/// sartor's removal and Namespace values beside the Gatekeeper-shaped
/// mutator nearest to each (same location, a constant value), applied to a
/// fresh copy of a 3-container Pod whose ports all bind a host port.
fn extensions(c: &mut Criterion) {
    let mut group = c.benchmark_group("extensions vs their Gatekeeper shape");
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": "shop", "labels": {"team": "checkout"}}});
    let request = Request {
        namespace_object: Some(&namespace),
        ..Request::create(Some("shop"))
    };
    let container = |name: &str| {
        json!({"name": name, "image": format!("{name}:1"),
               "ports": [{"containerPort": 8080, "hostPort": 8080}]})
    };
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"containers": [container("app"), container("proxy"), container("log")]},
    });
    let host_port = "spec.containers[name: *].ports[containerPort: *].hostPort";
    let label = |assign: Value| {
        mutator(
            "AssignMetadata",
            "team",
            json!({"location": "metadata.labels.team", "parameters": {"assign": assign}}),
        )
    };
    let port = |assign: Value| {
        mutator(
            "Assign",
            "ports",
            json!({"applyTo": apply_to("", "v1", "Pod"), "location": host_port,
                   "parameters": {"assign": assign}}),
        )
    };
    for (label, m) in [
        ("label: value", label(json!({"value": "checkout"}))),
        (
            "label: fromNamespace",
            label(json!({"fromNamespace": {"label": "team"}})),
        ),
        ("hostPort: assign 80", port(json!({"value": 80}))),
        ("hostPort: remove", port(json!({"remove": true}))),
    ] {
        group.bench_function(label, |b| {
            b.iter_batched(
                || pod.clone(),
                |mut pod| m.apply(&mut pod, &request),
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    pod_through_many,
    configmap_through_many,
    load_sets,
    glob_vs_exclusion,
    extensions
);
criterion_main!(benches);
