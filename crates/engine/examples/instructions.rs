//! One shape's `System::mutate`, repeated, for an instruction counter:
//! `crates/engine/perf/guard` runs it under callgrind and counts only
//! [`guarded_call`], so building the system and the object costs nothing.
//!
//! ```text
//! cargo build --release -p sartor-engine --example instructions
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*guarded_call*' \
//!     target/release/examples/instructions configmap-1000 10
//! ```
//!
//! Arguments: the shape (`instructions list` names them), how many calls,
//! and `--twice` to mutate twice per call: the deliberate slowdown the
//! guard's self-test must catch; `--patch` to build the patch too, as the
//! webhook does (the guard leaves it out). The load test's sets read the directory
//! `make-load.py` wrote from `SARTOR_LOAD_DIR`.
#![allow(
    clippy::print_stdout,
    clippy::panic,
    clippy::unwrap_used,
    clippy::indexing_slicing
)]

#[path = "../benches/common.rs"]
mod common;
#[path = "../benches/shapes.rs"]
mod shapes;

use std::hint::black_box;

use common::{apply_to, mutator};
use sartor_engine::{Admission, System};
use serde_json::{Value, json};

/// Every shape, in the guard's order.
const SHAPES: [&str; 16] = [
    "assign-empty-pod",
    "assign-glob-3-containers",
    "assignimage-3-containers",
    "modifyset-3-containers",
    "assignmetadata-label",
    "nothing-applies",
    "pod-10",
    "pod-100",
    "pod-1000",
    "pod-10000",
    "configmap-1",
    "configmap-10",
    "configmap-100",
    "configmap-1000",
    "load-typical",
    "load-heavy",
];

/// One mutator for the 3-container Pod.
fn one_for_pod(kind: &str, location: &str, parameters: Value) -> (System, Value) {
    let mut system = System::new();
    let applies = (kind != "AssignMetadata").then(|| apply_to("", "v1", "Pod"));
    let mut spec = json!({"location": location, "parameters": parameters});
    if let Some(applies) = applies {
        spec["applyTo"] = applies;
    }
    system.upsert(mutator(kind, "guarded", spec));
    (system, shapes::three_container_pod())
}

fn shape(name: &str) -> (System, Value) {
    let through = |prefix: &str| -> Option<usize> { name.strip_prefix(prefix)?.parse().ok() };
    if let Some(total) = through("pod-") {
        return shapes::pod_through(total);
    }
    if let Some(n) = through("configmap-") {
        return shapes::configmap_through(n);
    }
    if let Some(set) = name.strip_prefix("load-") {
        let dir = std::env::var_os("SARTOR_LOAD_DIR")
            .unwrap_or_else(|| panic!("{name}: set SARTOR_LOAD_DIR (make-load.py's directory)"));
        return shapes::load_set(std::path::Path::new(&dir), set);
    }
    match name {
        // Gatekeeper's System.Mutate shape, on a Pod: two passes, one change.
        "assign-empty-pod" => (
            shapes::assign_at_spec(),
            json!({"apiVersion": "v1", "kind": "Pod"}),
        ),
        "assign-glob-3-containers" => one_for_pod(
            "Assign",
            "spec.containers[name: *].imagePullPolicy",
            json!({"assign": {"value": "Always"}}),
        ),
        "assignimage-3-containers" => one_for_pod(
            "AssignImage",
            "spec.containers[name: *].image",
            json!({"assignDomain": "mirror.example.com"}),
        ),
        "modifyset-3-containers" => one_for_pod(
            "ModifySet",
            "spec.containers[name: *].args",
            json!({"values": {"fromList": ["--log-level=info"]}}),
        ),
        "assignmetadata-label" => one_for_pod(
            "AssignMetadata",
            "metadata.labels.owner",
            json!({"assign": {"value": "shop"}}),
        ),
        // A mutator for another kind: the index finds no candidate.
        "nothing-applies" => {
            let (system, _) =
                one_for_pod("Assign", "spec.hostname", json!({"assign": {"value": "x"}}));
            (
                system,
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "c", "namespace": "shop"}}),
            )
        }
        _ => panic!("unknown shape {name:?}; `instructions list` names them"),
    }
}

/// What is counted: a copy of the admitted object mutated in place (the
/// webhook mutates the object it parsed; the copy stands for that parse's
/// result), twice with `twice`.
#[inline(never)]
fn guarded_call(system: &System, admission: &Admission<'_>, object: &Value, twice: bool) -> usize {
    let mut copy = object.clone();
    let mut changes = system.mutate(admission, &mut copy).unwrap().changes.len();
    if twice {
        let mut copy = object.clone();
        changes += system.mutate(admission, &mut copy).unwrap().changes.len();
    }
    black_box(copy);
    changes
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let name = args.first().map(String::as_str).unwrap_or("list");
    if name == "list" {
        for shape in SHAPES {
            println!("{shape}");
        }
        return;
    }
    let calls: usize = args.get(1).map_or(10, |n| n.parse().unwrap());
    let twice = args.iter().any(|a| a == "--twice");
    let (system, object) = shape(name);
    // As the webhook asks: no change's path is read.
    let admission = Admission::new(&object).without_paths();
    // With `--patch`, the patch the webhook answers with too (the guard
    // leaves it out, as Gatekeeper's benchmarks do).
    let admission = match args.iter().any(|a| a == "--patch") {
        true => admission.with_patch(),
        false => admission,
    };
    // Uncounted: first-use costs (lazy statics, the allocator's first pages).
    let mut changes = warm_up(&system, &admission, &object);
    for _ in 0..calls {
        changes += guarded_call(&system, &admission, &object, twice);
    }
    println!("{name}: {calls} calls, {changes} changes");
}

/// The same work as one [`guarded_call`], under another name, so it is
/// not counted.
#[inline(never)]
fn warm_up(system: &System, admission: &Admission<'_>, object: &Value) -> usize {
    let mut copy = object.clone();
    system.mutate(admission, &mut copy).unwrap().changes.len()
}
