//! The relation pair by pair: each rule of `Reads::may_change`, with a case
//! it lets through and one it stops.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use sartor_api::{Assign, AssignImage, AssignMetadata, ModifySet, MutatorObject};
use serde_json::{Value, json};

use super::*;

/// A mutator of `kind` (for Pods, but AssignMetadata) at `location`.
fn mutator(kind: &str, location: &str, parameters: Value) -> Mutator {
    mutator_matching(kind, location, parameters, json!({}))
}

fn mutator_matching(kind: &str, location: &str, parameters: Value, criteria: Value) -> Mutator {
    let mut spec = json!({"location": location, "parameters": parameters, "match": criteria});
    if kind != "AssignMetadata" {
        spec["applyTo"] = json!([{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}]);
    }
    let doc = json!({
        "apiVersion": "mutations.sartor.dev/v1",
        "kind": kind,
        "metadata": {"name": "m"},
        "spec": spec,
    });
    let object = match kind {
        "Assign" => MutatorObject::Assign(serde_json::from_value::<Assign>(doc).unwrap()),
        "AssignMetadata" => {
            MutatorObject::AssignMetadata(serde_json::from_value::<AssignMetadata>(doc).unwrap())
        }
        "ModifySet" => MutatorObject::ModifySet(serde_json::from_value::<ModifySet>(doc).unwrap()),
        _ => MutatorObject::AssignImage(serde_json::from_value::<AssignImage>(doc).unwrap()),
    };
    Mutator::compile(&object).unwrap()
}

fn assign(location: &str) -> Mutator {
    mutator("Assign", location, json!({"assign": {"value": "x"}}))
}

fn merge(location: &str, tests: Value) -> Mutator {
    mutator(
        "ModifySet",
        location,
        json!({"values": {"fromList": ["--v"]}, "pathTests": tests}),
    )
}

/// Whether a change by `writer`, run after `reader`, keeps the reader from
/// being skipped (`None`: the reader is never skipped).
fn disturbs(writer: &Mutator, reader: &Mutator) -> Option<bool> {
    let interference = Interference::of([reader, writer].into_iter());
    let mut writers = Writers::default();
    writers.insert(1);
    let skips = interference.skips(0, &writers);
    let never = !interference.skips(0, &Writers::default());
    (!never).then_some(!skips)
}

#[test]
fn places_apart_do_not_disturb_each_other() {
    let reader = assign("spec.containers[name: *].env[name: A].value");
    for writer in [
        "spec.containers[name: *].env[name: B].value",
        "spec.containers[name: *].image",
        "spec.dnsPolicy",
        "spec.containers[name: *].env[name: *].valueFrom",
    ] {
        assert_eq!(disturbs(&assign(writer), &reader), Some(false), "{writer}");
    }
}

#[test]
fn a_place_at_inside_or_around_the_readers_disturbs_it() {
    let reader = assign("spec.containers[name: *].env[name: A].value");
    for writer in [
        "spec.containers[name: *].env[name: A].value",
        "spec.containers[name: *].env[name: A].value.inner",
        "spec.containers[name: *].env",
        "spec.containers[name: c].env[name: A].value",
    ] {
        assert_eq!(disturbs(&assign(writer), &reader), Some(true), "{writer}");
    }
}

#[test]
fn an_element_a_concrete_selector_creates_is_one_a_glob_visits() {
    let reader = assign("spec.containers[name: *].imagePullPolicy");
    let creates = assign("spec.containers[name: sidecar].image");
    assert_eq!(disturbs(&creates, &reader), Some(true));
    let excluding = assign("spec.containers[name notin (sidecar)].imagePullPolicy");
    assert_eq!(disturbs(&creates, &excluding), Some(false));
    let other = assign("spec.containers[name notin (web)].imagePullPolicy");
    assert_eq!(disturbs(&creates, &other), Some(true));
}

#[test]
fn a_path_test_reads_the_places_a_writer_may_create() {
    let guarded = mutator(
        "Assign",
        "spec.a.b",
        json!({"assign": {"value": 1}, "pathTests": [{"subPath": "spec.a", "condition": "MustExist"}]}),
    );
    assert_eq!(disturbs(&assign("spec.a.c"), &guarded), Some(true));
    assert_eq!(disturbs(&assign("spec.d"), &guarded), Some(false));
    let unguarded = mutator("Assign", "spec.a.b", json!({"assign": {"value": 1}}));
    assert_eq!(disturbs(&assign("spec.a.c"), &unguarded), Some(false));
}

#[test]
fn merges_into_one_list_leave_each_other_alone() {
    let reader = merge("spec.containers[name: *].args", json!([]));
    let writer = merge("spec.containers[name: *].args", json!([]));
    assert_eq!(disturbs(&writer, &reader), Some(false));
    let prune = mutator(
        "ModifySet",
        "spec.containers[name: *].args",
        json!({"operation": "prune", "values": {"fromList": ["--v"]}}),
    );
    assert_eq!(disturbs(&prune, &reader), Some(true));
    assert_eq!(disturbs(&writer, &prune), Some(true));
    let tested = merge(
        "spec.containers[name: *].args",
        json!([{"subPath": "spec.containers[name: *].args", "condition": "MustExist"}]),
    );
    assert_eq!(disturbs(&writer, &tested), Some(true));
    assert_eq!(
        disturbs(&assign("spec.containers[name: *].args"), &reader),
        Some(true)
    );
}

#[test]
fn labels_disturb_only_the_selectors_that_read_them() {
    let label = |key: &str| {
        mutator(
            "AssignMetadata",
            &format!("metadata.labels.\"{key}\""),
            json!({"assign": {"value": "x"}}),
        )
    };
    let selects = |field: &str| {
        mutator_matching(
            "Assign",
            "spec.x",
            json!({"assign": {"value": 1}}),
            json!({field: {"matchLabels": {"app": "web"}}}),
        )
    };
    for field in ["labelSelector", "namespaceSelector"] {
        assert_eq!(disturbs(&label("app"), &selects(field)), Some(true));
        assert_eq!(
            disturbs(&label("example.com/team"), &selects(field)),
            Some(false)
        );
    }
    assert_eq!(disturbs(&label("app"), &assign("spec.x")), Some(false));
    // A removal may take away the one value that is not a string, which
    // made every selector read no labels at all.
    let removes = mutator(
        "AssignMetadata",
        "metadata.labels.bad",
        json!({"assign": {"remove": true}}),
    );
    for field in ["labelSelector", "namespaceSelector"] {
        assert_eq!(disturbs(&removes, &selects(field)), Some(true));
    }
    assert_eq!(disturbs(&removes, &assign("spec.x")), Some(false));
    // A label is a place like any other for the AssignMetadata reading it.
    assert_eq!(disturbs(&label("app"), &label("app")), Some(true));
    assert_eq!(disturbs(&label("tier"), &label("app")), Some(false));
}

#[test]
fn only_mutators_that_settle_in_one_application_are_skipped() {
    let writer = assign("spec.elsewhere");
    let never = [
        mutator(
            "Assign",
            "spec.x",
            json!({"assign": {"fromMetadata": {"field": "name"}}}),
        ),
        mutator(
            "AssignMetadata",
            "metadata.labels.tier",
            json!({"assign": {"fromNamespace": {"label": "tier"}}}),
        ),
        mutator(
            "Assign",
            "spec.x",
            json!({"assign": {"externalData": {"provider": "p"}}}),
        ),
        // The one AssignImage whose second application may differ.
        mutator(
            "AssignImage",
            "spec.containers[name: *].image",
            json!({"assignPath": "p"}),
        ),
    ];
    for reader in &never {
        assert_eq!(disturbs(&writer, reader), None, "{reader:?}");
    }
    let always = [
        mutator(
            "AssignImage",
            "spec.containers[name: *].image",
            json!({"assignDomain": "r.example.com"}),
        ),
        mutator("Assign", "spec.x", json!({"assign": {"remove": true}})),
        merge("spec.list", json!([])),
        assign("spec.x"),
    ];
    for reader in &always {
        assert_eq!(disturbs(&writer, reader), Some(false), "{reader:?}");
    }
}

#[test]
fn only_later_writers_count() {
    let reader = assign("spec.x");
    let writer = assign("spec.x");
    let interference = Interference::of([&writer, &reader].into_iter());
    let mut writers = Writers::default();
    writers.insert(0);
    assert!(interference.skips(1, &writers));
    writers.insert(1);
    assert!(interference.skips(1, &writers));
    assert!(!interference.skips(0, &writers));
}

#[test]
fn a_thousand_assigns_to_distinct_keys_are_all_skipped() {
    let many: Vec<Mutator> = (0..1000)
        .map(|i| assign(&format!("data.key-{i:04}")))
        .collect();
    let interference = Interference::of(many.iter());
    let mut writers = Writers::default();
    for position in 0..many.len() {
        writers.insert(position);
    }
    assert!((0..many.len()).all(|position| interference.skips(position, &writers)));
}

#[test]
fn a_reader_with_too_many_writers_to_compare_waits_for_any_later_one() {
    let mut candidates = vec![assign("spec")];
    candidates.extend((0..=LISTED_AT_MOST).map(|i| assign(&format!("spec.f{i}"))));
    candidates.push(assign("status.phase"));
    let interference = Interference::of(candidates.iter());
    assert!(interference.skips(0, &Writers::default()));
    let mut writers = Writers::default();
    writers.insert(candidates.len() - 1);
    assert!(!interference.skips(0, &writers), "any later writer counts");
    // Those the reader is not among the writers of are still listed.
    assert!(interference.skips(1, &writers));
}

/// Every pair of these, compared alone, disturbs exactly when the relation
/// over all of them (sorted by fields) says so.
#[test]
fn sorting_by_fields_finds_what_comparing_every_pair_finds() {
    let label = |key: &str, parameters: Value| {
        mutator(
            "AssignMetadata",
            &format!("metadata.labels.{key}"),
            parameters,
        )
    };
    let tested = |location: &str, sub_path: &str| {
        mutator(
            "Assign",
            location,
            json!({"assign": {"value": 1},
                   "pathTests": [{"subPath": sub_path, "condition": "MustNotExist"}]}),
        )
    };
    let selecting = mutator_matching(
        "Assign",
        "spec.priority",
        json!({"assign": {"value": 1}}),
        json!({"labelSelector": {"matchLabels": {"app": "web"}}}),
    );
    let candidates = vec![
        assign("spec"),
        assign("spec.a"),
        assign("spec.a.b"),
        assign("spec.a.c"),
        assign("spec.b"),
        assign("status"),
        assign("spec.containers[name: *].image"),
        assign("spec.containers[name: web].image"),
        assign("spec.containers[name: web].env[name: A].value"),
        assign("spec.containers"),
        assign("spec.containers.x"),
        assign("spec.initContainers[name: *].image"),
        merge("spec.containers[name: *].args", json!([])),
        merge("spec.containers[name: *].args", json!([])),
        tested("spec.a.b", "spec.a"),
        tested("spec.x.y.z", "spec.x"),
        tested("spec.x.y.z", "spec.x.y.z"),
        assign("spec.x.q"),
        assign("spec.x.y.w"),
        label("app", json!({"assign": {"value": "web"}})),
        label("tier", json!({"assign": {"value": "x"}})),
        label("gone", json!({"assign": {"remove": true}})),
        selecting.clone(),
        assign("spec.priority"),
        mutator(
            "AssignMetadata",
            "metadata.annotations.a",
            json!({"assign": {"value": "x"}}),
        ),
        selecting,
        assign("data.key-1"),
        assign("data.key-10"),
        assign("data.key-100"),
    ];
    let interference = Interference::of(candidates.iter());
    for (position, reader) in candidates.iter().enumerate() {
        if !reader.idempotent() {
            continue;
        }
        let reads = Reads::of(reader);
        for (later, writer) in candidates.iter().enumerate().skip(position + 1) {
            let mut writers = Writers::default();
            writers.insert(later);
            assert_eq!(
                !interference.skips(position, &writers),
                reads.may_change(writer),
                "{:?} after {:?}",
                writer.location().to_string(),
                reader.location().to_string(),
            );
        }
    }
}
