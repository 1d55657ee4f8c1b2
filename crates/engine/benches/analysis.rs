//! What the static analysis of a whole mutator set costs; it runs when the
//! set changes (lint, /v1/validate), never per admission request.
//! Run: `cargo bench -p sartor-engine --bench analysis`.

#![allow(clippy::panic, clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use sartor_engine::analysis::analyze;
use sartor_engine::{Scopes, System};
use serde_json::json;

use common::{apply_to, mutator};

/// `n` Assigns that all write under `spec.containers` of Pods (every pair
/// is compared: the worst case for the pair rules), one in ten a whole
/// element, so that shadowing and overlaps are found.
fn containers(n: usize) -> System {
    let mut system = System::new();
    for i in 0..n {
        let spec = if i % 10 == 0 {
            json!({"applyTo": apply_to("", "v1", "Pod"),
                   "location": format!("spec.containers[name: side-{i}]"),
                   "parameters": {"assign": {"value": {"name": format!("side-{i}"), "image": "busybox"}}}})
        } else {
            json!({"applyTo": apply_to("", "v1", "Pod"),
                   "location": format!("spec.containers[name: *].env[name: VAR_{i}].value"),
                   "parameters": {"assign": {"value": format!("v{i}")}}})
        };
        system.upsert(mutator("Assign", &format!("m-{i:05}"), spec));
    }
    system
}

/// `n` mutators of every kind over many kinds and fields, with label
/// selectors and label writes (what a large real set looks like).
fn mixed(n: usize) -> System {
    let mut system = System::new();
    let kinds = [
        ("", "Pod"),
        ("apps", "Deployment"),
        ("", "Service"),
        ("batch", "Job"),
    ];
    for i in 0..n {
        let (group, kind) = kinds[i % kinds.len()];
        let name = format!("m-{i:05}");
        let selector = json!({"labelSelector": {"matchLabels": {format!("l{}", i % 7): "on"}}});
        let m = match i % 4 {
            0 => mutator(
                "Assign",
                &name,
                json!({"applyTo": apply_to(group, "v1", kind), "match": selector,
                   "location": format!("spec.f{}.x", i % 50), "parameters": {"assign": {"value": i}}}),
            ),
            1 => mutator(
                "AssignMetadata",
                &name,
                json!({"match": selector,
                   "location": format!("metadata.labels.l{}", i % 11), "parameters": {"assign": {"value": "on"}}}),
            ),
            2 => mutator(
                "ModifySet",
                &name,
                json!({"applyTo": apply_to(group, "v1", kind),
                   "location": format!("spec.list{}", i % 30), "parameters": {"values": {"fromList": [i]}}}),
            ),
            _ => mutator(
                "AssignImage",
                &name,
                json!({"applyTo": apply_to("", "v1", "Pod"),
                   "location": format!("spec.containers[name: c{}].image", i % 40), "parameters": {"assignDomain": "mirror.example.com"}}),
            ),
        };
        system.upsert(m);
    }
    system
}

fn bench(c: &mut Criterion) {
    let scopes = Scopes::builtin().clone();
    let mut group = c.benchmark_group("analysis");
    group.sample_size(10);
    for n in [100, 1_000] {
        let system = containers(n);
        group.bench_with_input(BenchmarkId::new("containers", n), &system, |b, system| {
            b.iter(|| analyze(system, &scopes))
        });
        let system = mixed(n);
        group.bench_with_input(BenchmarkId::new("mixed", n), &system, |b, system| {
            b.iter(|| analyze(system, &scopes))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
