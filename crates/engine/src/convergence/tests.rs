//! The convergence check against Gatekeeper's plain loop: copy the object
//! before each pass, stop when a pass ends where it started.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::Mutator;
use crate::originals::At;

/// A toy mutator: when `when`'s field holds its value (or always, when
/// `when` is `None`), set `field` to `value`. Fights and chains of such
/// writers oscillate, converge late or never, like real mutator sets.
#[derive(Debug, Clone)]
struct Writer {
    field: usize,
    when: Option<(usize, u8)>,
    value: u8,
}

fn field(i: usize) -> &'static str {
    ["f0", "f1", "f2"][i]
}

/// One pass of `writers` over `object`, with the changes it made; saving
/// originals as the engine's walk does, when given them.
fn pass(
    writers: &[Writer],
    object: &mut Value,
    number: usize,
    mut originals: Option<&mut Originals<'static>>,
) -> Vec<Change> {
    let mut changes = Vec::new();
    for (i, w) in writers.iter().enumerate() {
        let holds = w
            .when
            .is_none_or(|(f, v)| object.get(field(f)) == Some(&json!(v)));
        if !holds || object.get(field(w.field)) == Some(&json!(w.value)) {
            continue;
        }
        if let Some(originals) = originals.as_deref_mut() {
            let name = field(w.field);
            originals.save(&[At::Field(name)], || object.get(name).cloned());
        }
        object[field(w.field)] = json!(w.value);
        let writer = Mutator::assign_at(&format!("w{i}"), field(w.field));
        changes.push(Change::new(number, Arc::new(writer), Vec::new()));
    }
    changes
}

/// Passes until converged by Gatekeeper's rule, or `None` past `max`.
fn plain(writers: &[Writer], object: &Value, max: usize) -> Option<(usize, Value)> {
    let mut object = object.clone();
    for number in 1..=max {
        let before = object.clone();
        pass(writers, &mut object, number, None);
        if before == object {
            return Some((number, object));
        }
    }
    None
}

/// The same with [`Convergence`], keeping a copy only when it asks for one.
fn checked(writers: &[Writer], admitted: &Value, max: usize) -> Option<(usize, Value)> {
    let mut convergence = Convergence::new();
    let mut originals = Originals::default();
    let mut object = admitted.clone();
    for number in 1..=max {
        convergence.before_first_change(&object);
        let changes = pass(writers, &mut object, number, Some(&mut originals));
        let mut replay = |start: &mut Value, passes: usize| {
            for n in 1..=passes {
                pass(writers, start, n, None);
            }
            Ok(())
        };
        if convergence
            .converged(number, &changes, &object, &originals, &mut replay)
            .unwrap()
        {
            return Some((number, object));
        }
    }
    None
}

fn writer() -> impl Strategy<Value = Writer> {
    (0..3usize, proptest::option::of((0..3usize, 0..3u8)), 0..3u8)
        .prop_map(|(field, when, value)| Writer { field, when, value })
}

proptest! {
    #[test]
    fn convergence_agrees_with_gatekeepers_loop(
        writers in proptest::collection::vec(writer(), 0..7),
        start in proptest::collection::vec(proptest::option::of(0..3u8), 3),
    ) {
        let mut admitted = json!({});
        for (i, value) in start.iter().enumerate() {
            if let Some(value) = value {
                admitted[field(i)] = json!(value);
            }
        }
        let max = writers.len() + 1;
        prop_assert_eq!(checked(&writers, &admitted, max), plain(&writers, &admitted, max));
    }
}

fn changes(paths: &[&str]) -> Vec<Change> {
    paths
        .iter()
        .map(|p| Change::new(1, Arc::new(Mutator::assign_at("a", p)), Vec::new()))
        .collect()
}

#[test]
fn changes_overlap_when_one_is_at_or_inside_another() {
    let cases = [
        (&["spec.a", "spec.b"][..], false),
        (&["spec.a", "spec.ab", "spec.a-b"][..], false),
        (
            &["spec.c[name: x].image", "spec.c[name: y].image"][..],
            false,
        ),
        (&["spec.a", "spec.a"][..], true),
        (&["spec.a.b", "spec.a"][..], true),
        (&["spec.c[name: x]", "spec.c[name: x].image"][..], true),
        (&["spec.c", "spec.c[name: x].image"][..], true),
        (&["spec.c[name: *].image"][..], true),
    ];
    for (paths, want) in cases {
        assert_eq!(overlapping(&changes(paths)), want, "{paths:?}");
    }
}

#[test]
fn many_changes_are_checked_the_same_way() {
    let many: Vec<String> = (0..40).map(|i| format!("spec.f{i}")).collect();
    let mut paths: Vec<&str> = many.iter().map(String::as_str).collect();
    assert!(!overlapping(&changes(&paths)));
    paths.push("spec.f7.inner");
    assert!(overlapping(&changes(&paths)));
    paths.pop();
    paths.push("spec");
    assert!(overlapping(&changes(&paths)));
    paths.pop();
    paths.push("spec.f3");
    assert!(overlapping(&changes(&paths)));
}
