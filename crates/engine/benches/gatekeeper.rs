//! Gatekeeper's own benchmark shapes (pkg/mutation/*_benchmark_test.go),
//! rebuilt row by row so the two can be compared. Single-threaded.
//! Run: `cargo bench -p sartor-engine --bench gatekeeper`; beside Gatekeeper
//! itself on the same machine: `benches/gatekeeper/compare.sh`.

#![allow(clippy::panic, clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use sartor_engine::{Admission, Mutator, Request, System};
use serde_json::{Value, json};

use common::{apply_to, mutator};

const DEPTHS: [usize; 5] = [1, 2, 5, 10, 20];

/// `spec.spec.spec...` with `depth` fields.
fn location(depth: usize) -> String {
    vec!["spec"; depth].join(".")
}

/// A mutator at `depth`, optionally blocked by MustNotExist on its whole
/// location, already applied once to an empty object (as Gatekeeper's
/// benchmark does before timing).
fn prepared(kind: &str, depth: usize, blocked: bool, parameters: Value) -> (Mutator, Value) {
    let location = location(depth);
    let mut parameters = parameters;
    if blocked {
        parameters["pathTests"] = json!([{"subPath": location, "condition": "MustNotExist"}]);
    }
    let m = mutator(
        kind,
        "bench",
        json!({"applyTo": apply_to("", "v1", "Pod"), "location": location, "parameters": parameters}),
    );
    let mut object = json!({});
    m.apply(&mut object, &Request::create(None)).unwrap();
    (m, object)
}

fn per_kind(c: &mut Criterion, name: &str, kind: &str, parameters: &Value) {
    let mut group = c.benchmark_group(name);
    for (label, blocked) in [("always mutate", false), ("never mutate", true)] {
        for depth in DEPTHS {
            let (m, mut object) = prepared(kind, depth, blocked, parameters.clone());
            let request = Request::create(None);
            group.bench_function(BenchmarkId::new(label, format!("{depth}-depth")), |b| {
                b.iter(|| m.apply(black_box(&mut object), &request))
            });
        }
    }
    group.finish();
}

fn system_mutate(c: &mut Criterion) {
    let mut group = c.benchmark_group("System_Mutate");
    let mut system = System::new();
    system.upsert(mutator(
        "Assign",
        "bench",
        json!({"applyTo": apply_to("", "v1", "Pod"), "location": "spec",
               "parameters": {"assign": {"value": ""}}}),
    ));
    // Gatekeeper's shape (system_benchmark_test.go): an empty object with no
    // kind, which its `applyTo: ["*"]` never matches either. Gatekeeper
    // v3.23.1 makes its object inside the timed loop; here the object and
    // its admission are made once, outside it (nothing changes the object),
    // so the figure is System::mutate's alone and says whether the engine
    // slowed.
    let mut empty = Value::Object(serde_json::Map::new());
    let admission = Admission::new(&empty);
    group.bench_function("empty object, no kind", |b| {
        b.iter(|| {
            system.mutate(&admission, black_box(&mut empty)).unwrap();
        })
    });
    // The same Assign actually applying: two passes, one change (on a copy
    // made in the loop, as the engine made one before it mutated in place).
    let pod = json!({"apiVersion": "v1", "kind": "Pod"});
    let admission = Admission::new(&pod);
    group.bench_function("empty Pod, Assign applies", |b| {
        b.iter(|| {
            let mut pod = pod.clone();
            system.mutate(&admission, &mut pod).unwrap();
            pod
        })
    });
    group.finish();
}

fn mutators(c: &mut Criterion) {
    per_kind(
        c,
        "AssignMutator_Mutate",
        "Assign",
        &json!({"assign": {"value": "foo"}}),
    );
    per_kind(
        c,
        "AssignImageMutator_Mutate",
        "AssignImage",
        &json!({"assignDomain": "a.b.c", "assignPath": "lib/repo", "assignTag": ":latest"}),
    );
    per_kind(
        c,
        "ModifySetMutator_Mutate",
        "ModifySet",
        // Gatekeeper merges one value (modify_set_mutator_benchmark_test.go).
        &json!({"values": {"fromList": ["foo"]}}),
    );
}

/// Gatekeeper's AssignMetadata benchmarks (assignmeta_mutator_benchmark_test.go):
/// "Always" adds the label to a fresh empty object made inside the timed loop;
/// "Never" re-applies to the empty object it already mutated once.
fn assign_metadata(c: &mut Criterion) {
    let mut group = c.benchmark_group("AssignMetadataMutator_Mutate");
    let m = mutator(
        "AssignMetadata",
        "bench",
        json!({"location": "metadata.labels.foo", "parameters": {"assign": {"value": "bar"}}}),
    );
    let request = Request::create(None);
    group.bench_function("always", |b| {
        b.iter(|| {
            let mut object = Value::Object(serde_json::Map::new());
            m.apply(&mut object, &request).unwrap();
            object
        })
    });
    let mut present = json!({});
    m.apply(&mut present, &request).unwrap();
    group.bench_function("never", |b| {
        b.iter(|| m.apply(black_box(&mut present), &request))
    });
    group.finish();
}

criterion_group!(benches, system_mutate, mutators, assign_metadata);
criterion_main!(benches);
