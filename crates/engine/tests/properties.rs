#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
//! Properties of the engine over generated mutators and objects.

use proptest::prelude::*;
use sartor_api::MutatorKind;
use sartor_api::{Assign, AssignImage, AssignMetadata, ModifySet, MutatorObject};
use sartor_engine::analysis::{Rule, analyze};
use sartor_engine::{Failure, Mutator, Request, Scopes, System};
use serde_json::{Value, json};

#[path = "engine/in_place.rs"]
mod in_place;
use in_place::mutate_in_place;

/// Locations near the grammar: valid ones, and broken variants of them.
fn location() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "spec",
        ".",
        "containers",
        "[",
        "]",
        "name",
        ":",
        " ",
        "*",
        "\"x\"",
        "'",
        "80",
        "metadata",
        "labels",
        "a",
        "-",
        "\\",
        "é",
        " notin ",
        "(",
        ")",
        ",",
        "(c, 80)",
    ]);
    prop_oneof![
        prop::collection::vec(pieces, 1..10).prop_map(|p| p.concat()),
        any::<String>(),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-3i64..100).prop_map(Value::from),
        Just(json!(1.5)),
        prop::sample::select(vec!["a", "b", "c", "nginx", "x/y:z", "80", "Always"])
            .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 40, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop::sample::select(vec![
                    "spec",
                    "name",
                    "image",
                    "containers",
                    "args",
                    "list",
                    "a",
                    "x",
                    "labels",
                    "metadata",
                    "port",
                ]),
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        ]
    })
}

fn object_of(kind: &str, location: &str, parameters: Value) -> Option<MutatorObject> {
    let mut spec = json!({"location": location, "parameters": parameters});
    if kind != "AssignMetadata" {
        spec["applyTo"] = json!([{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}]);
    }
    let doc = json!({
        "apiVersion": "mutations.sartor.dev/v1",
        "kind": kind,
        "metadata": {"name": "m"},
        "spec": spec,
    });
    Some(match kind {
        "Assign" => MutatorObject::Assign(serde_json::from_value::<Assign>(doc).ok()?),
        "AssignMetadata" => {
            MutatorObject::AssignMetadata(serde_json::from_value::<AssignMetadata>(doc).ok()?)
        }
        "ModifySet" => MutatorObject::ModifySet(serde_json::from_value::<ModifySet>(doc).ok()?),
        _ => MutatorObject::AssignImage(serde_json::from_value::<AssignImage>(doc).ok()?),
    })
}

/// How many mutators [`pool`] holds.
const POOL: usize = 31;

/// A pool of valid mutators over a small, shared vocabulary of fields, so
/// generated sets interact (and sometimes conflict).
fn pool() -> Vec<Mutator> {
    let docs = [
        ("Assign", "a1", "spec.a", json!({"assign": {"value": 1}})),
        (
            "Assign",
            "a2",
            "spec.a",
            json!({"assign": {"value": {"x": [1]}}}),
        ),
        (
            "Assign",
            "a3",
            "spec.containers[name: *].x",
            json!({"assign": {"value": "Always"}}),
        ),
        (
            "Assign",
            "a4",
            "spec.containers[name: c]",
            json!({"assign": {"value": {"name": "c", "image": "nginx"}},
            "pathTests": [{"subPath": "spec.containers[name: c]", "condition": "MustNotExist"}]}),
        ),
        (
            "Assign",
            "a5",
            "spec.containers[name: d].args",
            json!({"assign": {"fromMetadata": {"field": "name"}}}),
        ),
        (
            "Assign",
            "a6",
            "spec.list",
            json!({"assign": {"value": ["b"]},
            "pathTests": [{"subPath": "spec.list", "condition": "MustNotExist"}]}),
        ),
        (
            "ModifySet",
            "s1",
            "spec.list",
            json!({"values": {"fromList": ["a", "b"]}}),
        ),
        (
            "ModifySet",
            "s2",
            "spec.list",
            json!({"operation": "prune", "values": {"fromList": ["b"]}}),
        ),
        (
            "ModifySet",
            "s3",
            "spec.containers[name: *].args",
            json!({"values": {"fromList": ["--v"]}}),
        ),
        (
            "AssignImage",
            "i1",
            "spec.containers[name: *].image",
            json!({"assignDomain": "r.example.com", "assignTag": ":v1"}),
        ),
        (
            "AssignImage",
            "i2",
            "spec.containers[name: *].image",
            json!({"assignPath": "lib/app"}),
        ),
        (
            "Assign",
            "a7",
            "spec.containers[name notin (c)].x",
            json!({"assign": {"value": "IfNotPresent"}}),
        ),
        (
            "Assign",
            "a8",
            "spec.containers[name notin (a, d)].image",
            json!({"assign": {"value": "pinned"},
            "pathTests": [{"subPath": "spec.containers[name notin (d, a)].image", "condition": "MustNotExist"}]}),
        ),
        (
            "ModifySet",
            "s4",
            "spec.containers[name notin (a)].args",
            json!({"operation": "prune", "values": {"fromList": ["--v", "x"]}}),
        ),
        (
            "AssignImage",
            "i3",
            "spec.containers[name notin (c)].image",
            json!({"assignTag": ":v2"}),
        ),
        (
            "AssignMetadata",
            "m1",
            "metadata.labels.team",
            json!({"assign": {"value": "a"}}),
        ),
        (
            "AssignMetadata",
            "m2",
            "metadata.annotations.owner",
            json!({"assign": {"fromMetadata": {"field": "namespace"}}}),
        ),
        // sartor's extensions: removals against the sets above, and values
        // from the Namespace.
        (
            "Assign",
            "r1",
            "spec.a",
            json!({"assign": {"remove": true}}),
        ),
        (
            "Assign",
            "r2",
            "spec.containers[name: c]",
            json!({"assign": {"remove": true}}),
        ),
        (
            "Assign",
            "r3",
            "spec.containers[name notin (a)].args",
            json!({"assign": {"remove": true}}),
        ),
        (
            "AssignMetadata",
            "m3",
            "metadata.labels.team",
            json!({"assign": {"remove": true}}),
        ),
        (
            "AssignMetadata",
            "m4",
            "metadata.labels.tier",
            json!({"assign": {"fromNamespace": {"label": "tier", "default": "none"}}}),
        ),
        (
            "Assign",
            "n1",
            "spec.containers[name: *].x",
            json!({"assign": {"fromNamespace": {"label": "team"}}}),
        ),
        // Matches on a label m1 adds and m3 removes (its match is set
        // below): the engine's match answers, kept across passes, must follow.
        (
            "Assign",
            "l1",
            "spec.l",
            json!({"assign": {"value": "team-a"}}),
        ),
        // For the second pass's skips: a pathTest on a parent that z1, run
        // later, creates; a label selector on what m4 writes (set below); a
        // second merge into s1's list; an image path whose second
        // application may differ.
        (
            "Assign",
            "a9",
            "spec.b.c",
            json!({"assign": {"value": 1},
            "pathTests": [{"subPath": "spec.b", "condition": "MustExist"}]}),
        ),
        ("Assign", "z1", "spec.b.d", json!({"assign": {"value": 2}})),
        (
            "Assign",
            "l2",
            "spec.l2",
            json!({"assign": {"value": "tiered"}}),
        ),
        (
            "ModifySet",
            "s5",
            "spec.list",
            json!({"values": {"fromList": ["c"]}}),
        ),
        (
            "AssignImage",
            "i4",
            "spec.containers[name: *].image",
            json!({"assignPath": "p"}),
        ),
        // Takes away a label value that is not a string, which hid every
        // label from the selectors (l3's `app` is on the generated Pods).
        (
            "AssignMetadata",
            "m5",
            "metadata.labels.bad",
            json!({"assign": {"remove": true}}),
        ),
        (
            "Assign",
            "l3",
            "spec.l3",
            json!({"assign": {"value": "web"}}),
        ),
    ];
    docs.into_iter()
        .map(|(kind, name, location, parameters)| {
            let mut object = object_of(kind, location, parameters).unwrap();
            if let MutatorObject::Assign(m) = &mut object
                && let Some(label) = match name {
                    "l1" => Some(("team", "a")),
                    "l2" => Some(("tier", "none")),
                    "l3" => Some(("app", "web")),
                    _ => None,
                }
            {
                m.spec.r#match.label_selector = Some(sartor_api::LabelSelector {
                    match_labels: [(label.0.to_string(), label.1.to_string())].into(),
                    match_expressions: Vec::new(),
                });
            }
            match &mut object {
                MutatorObject::Assign(m) => m.metadata.name = Some(name.into()),
                MutatorObject::AssignImage(m) => m.metadata.name = Some(name.into()),
                MutatorObject::AssignMetadata(m) => m.metadata.name = Some(name.into()),
                MutatorObject::ModifySet(m) => m.metadata.name = Some(name.into()),
            }
            Mutator::compile(&object).unwrap()
        })
        .collect()
}

/// Pod specs that mostly fit the pool's locations, with odd values mixed in.
fn spec() -> impl Strategy<Value = Value> {
    let container = (
        prop::sample::select(vec!["a", "c", "d"]),
        prop::option::of(prop::sample::select(vec![
            "nginx",
            "a/b:c/d",
            "x.io/y@sha256:0",
            "",
        ])),
        prop::option::of(prop::collection::vec(
            prop::sample::select(vec!["--v", "b", "x"]),
            0..3,
        )),
    )
        .prop_map(|(name, image, args)| {
            let mut c = json!({"name": name});
            if let Some(image) = image {
                c["image"] = json!(image);
            }
            if let Some(args) = args {
                c["args"] = json!(args);
            }
            c
        });
    prop_oneof![
        1 => json_value(),
        3 => (
            prop::collection::vec(container, 0..4),
            prop::option::of(prop::collection::vec(prop::sample::select(vec!["a", "b", "c"]), 0..4)),
        )
            .prop_map(|(containers, list)| {
                let mut spec = json!({"containers": containers});
                if let Some(list) = list {
                    spec["list"] = json!(list);
                }
                spec
            }),
    ]
}

#[test]
fn the_pool_size_is_right() {
    assert_eq!(pool().len(), POOL);
}

/// A system of the pool's mutators at `picks` (repeats are upserts).
fn system_of(picks: &[usize]) -> System {
    let pool = pool();
    let mut system = System::new();
    for &i in picks {
        system.upsert(pool[i].clone());
    }
    system
}

/// The Namespace `ns` of every generated Pod, for `fromNamespace`.
fn namespace() -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns", "labels": {"team": "t1"}}})
}

/// A CREATE in `ns`, with its Namespace.
fn request(namespace: &Value) -> Request<'_> {
    Request {
        namespace_object: Some(namespace),
        ..Request::create(Some("ns"))
    }
}

fn pod(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": spec})
}

/// Gatekeeper's system.go loop, written plainly: copy the object at the start
/// of every pass, stop when a pass applied nothing or ended equal to its copy.
/// Returns the passes run, or `None` for an error or non-convergence.
fn gatekeeper_loop(system: &System, object: &mut Value, request: &Request<'_>) -> Option<usize> {
    let gvk = sartor_engine::Gvk::of(object);
    for pass in 1..=system.len() + 1 {
        let before = object.clone();
        let mut applied = false;
        for m in system.mutators().filter(|m| !system.is_conflicted(m.id())) {
            if m.matches(object, &gvk, request).ok()? {
                applied |= m.apply(object, request).ok()?;
            }
        }
        if !applied || *object == before {
            return Some(pass);
        }
    }
    None
}

/// Mutator `i` of a generated set with value conditions: an Assign (or, for
/// `metadata.labels.t`, an AssignMetadata) of `value` at `location`.
fn conditional(
    i: usize,
    location: &str,
    value: &Value,
    conditions: &[(String, String, Vec<Value>)],
) -> Mutator {
    let metadata = location.starts_with("metadata");
    let conditions: Vec<Value> = conditions
        .iter()
        .map(|(path, operator, values)| json!({"path": path, "operator": operator, "values": values}))
        .collect();
    let mut spec = json!({
        "location": location,
        "parameters": {
            "assign": {"value": if metadata { json!("x") } else { value.clone() }},
            "conditions": conditions,
        },
    });
    if !metadata {
        spec["applyTo"] = json!([{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}]);
    }
    let doc = json!({
        "apiVersion": "mutations.sartor.dev/v1",
        "kind": if metadata { "AssignMetadata" } else { "Assign" },
        "metadata": {"name": format!("m{i}")},
        "spec": spec,
    });
    let object = if metadata {
        MutatorObject::AssignMetadata(serde_json::from_value(doc).unwrap())
    } else {
        MutatorObject::Assign(serde_json::from_value(doc).unwrap())
    };
    Mutator::compile(&object).unwrap()
}

/// A value condition over the generated sets' vocabulary.
/// spec.a and spec.b come twice, so that mutators often read what others
/// write. (Random sets rarely oscillate even without the conflict check; the
/// engine test `mutators_that_would_oscillate_are_all_left_out` pins one that does.)
fn value_condition() -> impl Strategy<Value = (String, String, Vec<Value>)> {
    let path = prop::sample::select(vec![
        "spec.a",
        "spec.b",
        "spec.a",
        "spec.b",
        "spec.s.a",
        "spec.l[k: x].v",
        "metadata.labels.t",
    ]);
    let operand = || prop::sample::select(vec![json!("x"), json!("y"), json!(1)]);
    prop_oneof![
        (
            path.clone(),
            prop::sample::select(vec!["In", "NotIn"]),
            prop::collection::vec(operand(), 1..3)
        ),
        (
            path,
            prop::sample::select(vec!["Exists", "DoesNotExist"]),
            Just(Vec::new())
        ),
    ]
    .prop_map(|(path, operator, values)| (path.to_string(), operator.to_string(), values))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Leaving out the mutators in condition conflict is what keeps value
    /// conditions from oscillating: what is left always converges, to a
    /// fixed point.
    #[test]
    fn mutators_with_value_conditions_converge_once_conflicts_are_left_out(
        mutators in prop::collection::vec(
            (
                prop::sample::select(vec![
                    "spec.a", "spec.b", "spec.a", "spec.b", "spec.c", "spec.s", "spec.s.a",
                    "spec.l[k: x].v", "spec.l[k: *].v", "metadata.labels.t",
                ]),
                prop::sample::select(vec![
                    json!("x"), json!("y"), json!("x"), json!("y"), json!(1), json!({"a": "x"}),
                ]),
                prop::collection::vec(value_condition(), 0..3),
            ),
            1..9,
        ),
        spec in prop::sample::select(vec![
            json!({}),
            json!({"a": "x", "b": "y"}),
            json!({"s": {"a": "y"}, "l": [{"k": "x", "v": "y"}]}),
            json!({"a": 1, "l": [{"k": "y"}]}),
        ]),
    ) {
        let mut system = System::new();
        for (i, (location, value, conditions)) in mutators.iter().enumerate() {
            system.upsert(conditional(i, location, value, conditions));
        }
        let namespace = namespace();
        let request = request(&namespace);
        let mut once = pod(spec);
        match mutate_in_place(&system, &mut once, &request) {
            Ok(_) => {
                let mut twice = once.clone();
                prop_assert!(mutate_in_place(&system, &mut twice, &request).is_ok());
                prop_assert_eq!(twice, once);
            }
            // A value in the way of a location (spec.s a string, then
            // spec.s.a) is an error of its own; never a failure to converge.
            Err(error) => prop_assert!(
                !matches!(*error.reason, Failure::NotConverging { .. }),
                "{}",
                error
            ),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn compile_never_panics(
        kind in prop::sample::select(vec!["Assign", "AssignMetadata", "ModifySet", "AssignImage"]),
        location in location(),
        sub_path in location(),
        value in json_value(),
        text in any::<String>(),
    ) {
        let parameters = json!({
            "assign": {"value": value.clone()},
            "pathTests": [{"subPath": sub_path, "condition": "MustExist"}],
        });
        let by_kind = match kind {
            "ModifySet" => json!({"values": {"fromList": [value]},
                                  "pathTests": parameters["pathTests"].clone()}),
            "AssignImage" => json!({"assignDomain": text.clone(), "assignPath": text.clone(),
                                    "assignTag": text, "pathTests": parameters["pathTests"].clone()}),
            "AssignMetadata" => json!({"assign": {"value": value}}),
            _ => parameters,
        };
        if let Some(object) = object_of(kind, &location, by_kind) {
            let _ = Mutator::compile(&object);
        }
    }

    #[test]
    fn mutate_never_panics_on_any_object(
        picks in prop::collection::vec(0usize..POOL, 0..8),
        spec in spec(),
        whole in json_value(),
    ) {
        let system = system_of(&picks);
        let namespace = namespace();
        let request = request(&namespace);
        let _ = mutate_in_place(&system, &mut pod(spec), &request);
        let mut whole = whole;
        let _ = mutate_in_place(&system, &mut whole, &request);
    }

    #[test]
    fn convergence_agrees_with_gatekeepers_snapshot_per_pass_loop(
        picks in prop::collection::vec(0usize..POOL, 1..8),
        spec in spec(),
        bad_label in any::<bool>(),
    ) {
        let system = system_of(&picks);
        let namespace = namespace();
        let request = request(&namespace);
        let mut fast = pod(spec);
        fast["metadata"]["labels"] = match bad_label {
            true => json!({"app": "web", "bad": 5}),
            false => json!({"app": "web"}),
        };
        let mut reference = fast.clone();
        // sartor runs no pass at all when nothing can apply to the kind.
        let got = mutate_in_place(&system, &mut fast, &request).map(|m| m.passes.max(1));
        let want = gatekeeper_loop(&system, &mut reference, &request);
        prop_assert_eq!(got.ok(), want);
        if want.is_some() {
            prop_assert_eq!(fast, reference);
        }
    }

    #[test]
    fn a_converged_result_is_a_fixed_point(
        picks in prop::collection::vec(0usize..POOL, 1..8),
        spec in spec(),
    ) {
        let system = system_of(&picks);
        let namespace = namespace();
        let request = request(&namespace);
        let mut once = pod(spec);
        if mutate_in_place(&system, &mut once, &request).is_ok() {
            let mut twice = once.clone();
            let again = mutate_in_place(&system, &mut twice, &request);
            prop_assert!(again.is_ok(), "{:?}", again);
            prop_assert_eq!(twice, once);
        }
    }

    /// The analysis agrees with the engine: a mutator reported shadowed
    /// never changes the final object (wherever the set mutates without
    /// error, with and without it).
    #[test]
    fn a_shadowed_mutator_never_changes_the_result(
        picks in prop::collection::vec(0usize..POOL, 1..8),
        spec in spec(),
    ) {
        let system = system_of(&picks);
        let namespace = namespace();
        let request = request(&namespace);
        for finding in analyze(&system, Scopes::builtin()) {
            if finding.rule != Rule::Shadowed {
                continue;
            }
            let mut without = system.clone();
            without.remove(&finding.mutators[0]);
            let mut with_it = pod(spec.clone());
            let mut alone = with_it.clone();
            if mutate_in_place(&system, &mut with_it, &request).is_ok()
                && mutate_in_place(&without, &mut alone, &request).is_ok()
            {
                prop_assert_eq!(&with_it, &alone, "{}", finding);
            }
        }
    }

    /// A set the analysis finds free of may-not-converge converges, except
    /// where an AssignImage meets a reference it cannot parse (input
    /// dependent, as in Gatekeeper; see docs/semantics.md).
    #[test]
    fn a_set_free_of_may_not_converge_converges(
        picks in prop::collection::vec(0usize..POOL, 1..8),
        spec in spec(),
    ) {
        let system = system_of(&picks);
        prop_assume!(analyze(&system, Scopes::builtin()).iter().all(|f| f.rule != Rule::MayNotConverge));
        let namespace = namespace();
        let request = request(&namespace);
        if let Err(error) = mutate_in_place(&system, &mut pod(spec), &request)
            && let Failure::NotConverging { changing, .. } = &*error.reason
        {
            prop_assert!(
                changing.iter().any(|(id, _)| id.kind == MutatorKind::AssignImage),
                "{}",
                error
            );
        }
    }
}
