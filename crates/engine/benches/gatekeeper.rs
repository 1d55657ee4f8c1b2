//! Gatekeeper's own benchmark shapes (pkg/mutation/*_benchmark_test.go),
//! rebuilt row by row so the two can be compared, with those its unreleased
//! performance branch adds (`system_perf_branch`). Single-threaded.
//! Run: `cargo bench -p sartor-engine --bench gatekeeper`; beside Gatekeeper
//! itself on the same machine: `benches/gatekeeper/compare.sh`.

#![allow(clippy::panic, clippy::unwrap_used, clippy::indexing_slicing)]

mod common;
mod shapes;

use std::collections::HashMap;
use std::hint::black_box;

use criterion::{BatchSize, Bencher, BenchmarkId, Criterion, criterion_group, criterion_main};
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
    let system = shapes::assign_at_spec();
    // Gatekeeper's shape (system_benchmark_test.go): an empty object with no
    // kind, which its `applyTo: ["*"]` never matches either. Gatekeeper
    // v3.23.1 makes its object inside the timed loop; here the object and
    // its admission are made once, outside it (nothing changes the object),
    // so the figure is System::mutate's alone and says whether the engine
    // slowed.
    let mut empty = Value::Object(serde_json::Map::new());
    let admission = Admission::new(&empty).without_paths();
    group.bench_function("empty object, no kind", |b| {
        b.iter(|| {
            system.mutate(&admission, black_box(&mut empty)).unwrap();
        })
    });
    // The same Assign actually applying: two passes, one change (on a copy
    // made in the loop, as the engine made one before it mutated in place).
    let pod = json!({"apiVersion": "v1", "kind": "Pod"});
    let admission = Admission::new(&pod).without_paths();
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

/// How one of the performance branch's benchmarks treats its object, which
/// sartor's twin follows (Gatekeeper's `System.Mutate` mutates in place, as
/// sartor's `System::mutate` does).
#[derive(Clone, Copy)]
enum Object {
    /// The same object every time (it never changes, or changes once: the
    /// twin mutates it once before timing).
    InPlace,
    /// A fresh copy each time, made outside the timer.
    CopyUntimed,
    /// A fresh copy each time, made inside the timer.
    CopyTimed,
}

/// The shape of one of the performance branch's (sub-)benchmarks: the name
/// `shapes::dump` writes its result under, the system, the object, the
/// Namespaces (by name) and how the object is treated.
struct Twin {
    dump: String,
    system: System,
    object: Value,
    namespaces: HashMap<String, Value>,
    object_is: Object,
}

impl Twin {
    fn new(dump: String, (system, object): (System, Value), object_is: Object) -> Twin {
        Twin {
            dump,
            system,
            object,
            namespaces: HashMap::new(),
            object_is,
        }
    }

    /// Dumps the result, then hands `bench` the routine that times it.
    fn time(self, bench: impl FnOnce(&mut dyn FnMut(&mut Bencher<'_>))) {
        let Twin {
            dump,
            system,
            mut object,
            namespaces,
            object_is,
        } = self;
        let admission = Admission::new(&object)
            .namespaces(&namespaces)
            .without_paths();
        shapes::dump(&dump, &system, &admission, &object);
        if let Object::InPlace = object_is {
            system.mutate(&admission, &mut object).unwrap();
        }
        bench(&mut |b: &mut Bencher<'_>| match object_is {
            Object::InPlace => {
                b.iter(|| system.mutate(&admission, black_box(&mut object)).unwrap());
            }
            Object::CopyUntimed => b.iter_batched(
                || object.clone(),
                |mut object| {
                    system.mutate(&admission, &mut object).unwrap();
                    object
                },
                BatchSize::LargeInput,
            ),
            Object::CopyTimed => b.iter(|| {
                let mut object = object.clone();
                system.mutate(&admission, &mut object).unwrap();
                object
            }),
        });
    }
}

/// Times each twin as `name/id`.
fn time_twins(c: &mut Criterion, name: &str, twins: Vec<(String, Twin)>) {
    let mut group = c.benchmark_group(name);
    for (id, twin) in twins {
        twin.time(|routine| {
            group.bench_function(id, routine);
        });
    }
    group.finish();
}

/// The system benchmarks Gatekeeper's unreleased performance branch adds
/// (agent/perf-bottleneck-followups at f04df15, BenchmarkSystem_Mutate* in
/// pkg/mutation/system_benchmark_test.go), one group each, with its
/// sub-benchmarks' names and sizes and the same mutators and objects
/// (`shapes.rs`). Each object is treated as there: mutated in place where
/// Gatekeeper reuses it, a copy made outside the timer where Gatekeeper
/// copies under `StopTimer`, inside where it copies in the timed loop.
/// (Gatekeeper's loops that copy under `StopTimer` stop and restart its
/// timer on every iteration, each a `runtime.ReadMemStats`, part of which
/// Go counts; criterion's `iter_batched` makes its copies a batch at a time.)
///
/// Where the spelling differs: Gatekeeper's benchmarks build the Assign
/// structs in Go (no `match`, `applyTo` replaced) and hand `Mutate` a
/// `Mutable` with no Source and, but in the selector benchmark, no
/// Namespace; sartor's twins compile the same specs from JSON and admit the
/// object as the webhook does, `Admission::new(..).without_paths()` (no
/// change records its path; Gatekeeper records none), a CREATE of an
/// original object in its `metadata.namespace` (`default`), which only the
/// selector mutators read: their Namespace is looked up by name.
fn system_perf_branch(c: &mut Criterion) {
    // 100 Assigns for Deployments, a ConfigMap of 500 entries: no candidate.
    // Gatekeeper's benchmark has no sub-benchmarks: neither has this one.
    let twin = Twin::new(
        "system-nonmatching-large".into(),
        shapes::non_matching_large_object(),
        Object::InPlace,
    );
    twin.time(|routine| {
        c.bench_function("System_MutateNonMatchingMutatorsLargeObject", routine);
    });

    let twins = [100, 1_000].map(|n| {
        let shape = shapes::non_matching_scale(n);
        let dump = format!("system-nonmatching-{n}");
        (n.to_string(), Twin::new(dump, shape, Object::InPlace))
    });
    time_twins(c, "System_MutateNonMatchingMutatorScale", twins.into());

    let mut twins = Vec::new();
    for (state, already, object_is) in [
        ("fresh", false, Object::CopyUntimed),
        ("already-mutated", true, Object::InPlace),
    ] {
        for n in [1, 10, 100, 1_000] {
            let shape = shapes::matching_large_object(n, 500, already);
            let dump = format!("system-matching-{n}-{state}");
            let id = format!("matching-{n}/data-500/{state}");
            twins.push((id, Twin::new(dump, shape, object_is)));
        }
    }
    time_twins(c, "System_MutateMatchingMutatorsLargeObject", twins);

    // Gatekeeper scans the object for external data placeholders once it
    // settles; the branch skips the scan when no mutator can leave one (none
    // takes externalData, no AssignImage). sartor looks for placeholders only
    // when a candidate mutator takes external data, so in sartor this shape
    // (one Assign of a constant) takes the same no-scan path.
    let twins = [500, 5_000].map(|n| {
        let shape = shapes::placeholder_scan(n);
        let dump = format!("system-placeholder-{n}");
        (
            format!("data-{n}"),
            Twin::new(dump, shape, Object::CopyUntimed),
        )
    });
    time_twins(
        c,
        "System_MutateSkipsPlaceholderScanWithoutTerminatingMutators",
        twins.into(),
    );

    let twins = [1, 100, 1_000].map(|n| {
        let (system, object, namespaces) = shapes::selector_matching(n);
        let dump = format!("system-selector-{n}");
        let twin = Twin {
            namespaces,
            ..Twin::new(dump, (system, object), Object::CopyTimed)
        };
        (format!("matching-{n}"), twin)
    });
    time_twins(c, "System_MutateSelectorMatchingScale", twins.into());

    // Gatekeeper mutates the same ConfigMap every time: the first call sets
    // spec.matched, the others find it set.
    let twins = [0, 100, 1_000].map(|n| {
        let shape = shapes::candidate_index(n);
        let dump = format!("system-candidate-{n}");
        let id = format!("matching-1/nonmatching-{n}");
        (id, Twin::new(dump, shape, Object::InPlace))
    });
    time_twins(c, "System_MutateCandidateIndexScale", twins.into());
}

criterion_group!(
    benches,
    system_mutate,
    mutators,
    assign_metadata,
    system_perf_branch
);
criterion_main!(benches);
