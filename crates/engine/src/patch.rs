//! The RFC 6902 patch of a mutation, diffing only where the mutation changed
//! something.
//!
//! Every change the engine makes is recorded with its path, so two objects
//! that differ only under those paths need not be compared anywhere else.
//! [`between`] follows the changed paths' leading fields down both objects and
//! diffs only below them (at the first list or the changed place itself),
//! skipping equal subtrees. The result is the same patch `json_patch::diff` of
//! the whole objects gives, in the same order: both walk an object's keys in
//! order, and the parts left out are equal. Every test of the engine that
//! mutates checks this (`tests/engine/in_place.rs`).

use std::collections::BTreeMap;

use json_patch::jsonptr::PointerBuf;
use json_patch::{Patch, PatchOperation};
use serde_json::Value;

use crate::system::{Change, MUTATIONS_ANNOTATION, Step};

/// The fields changes were made under, as a tree: a leaf is diffed whole.
#[derive(Debug, Default)]
struct Touched<'a> {
    /// Diff everything below this point.
    whole: bool,
    fields: BTreeMap<&'a str, Touched<'a>>,
}

/// The patch from `admitted` to `mutated`, given every change made between them.
pub(crate) fn between(admitted: &Value, mutated: &Value, changes: &[Change]) -> Patch {
    let mut touched = Touched::default();
    for change in changes {
        touched.insert(change.steps());
    }
    // The mutations annotation is written without a change of its own.
    let annotated = mutated
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(MUTATIONS_ANNOTATION))
        .is_some();
    if annotated {
        touched.insert_fields(&["metadata", "annotations"]);
    }
    let mut patch = Patch::default();
    let mut pointer = PointerBuf::new();
    touched.diff(admitted, mutated, &mut pointer, &mut patch);
    patch
}

// === impl Touched ===

impl<'a> Touched<'a> {
    fn insert(&mut self, steps: impl Iterator<Item = Step<'a>>) {
        let mut at = self;
        for step in steps {
            if at.whole {
                return;
            }
            match step {
                Step::Field(name) => at = at.fields.entry(name).or_default(),
                Step::Element(..) => break,
            }
        }
        at.whole = true;
        at.fields.clear();
    }

    fn insert_fields(&mut self, fields: &[&'a str]) {
        let mut at = self;
        for field in fields {
            if at.whole {
                return;
            }
            at = at.fields.entry(field).or_default();
        }
        at.whole = true;
        at.fields.clear();
    }

    fn diff(&self, left: &Value, right: &Value, pointer: &mut PointerBuf, patch: &mut Patch) {
        let (Value::Object(left), Value::Object(right), false) = (left, right, self.whole) else {
            if left != right {
                diff_below(left, right, pointer, patch);
            }
            return;
        };
        // Added or changed keys, in the right object's order (as json_patch).
        for (key, right_value) in right.iter() {
            let Some(touched) = self.fields.get(key.as_str()) else {
                continue;
            };
            pointer.push_back(key.as_str());
            match left.get(key) {
                Some(left_value) => touched.diff(left_value, right_value, pointer, patch),
                None => patch.0.push(PatchOperation::Add(json_patch::AddOperation {
                    path: pointer.clone(),
                    value: right_value.clone(),
                })),
            }
            pointer.pop_back();
        }
        // Removed keys, in the left object's order.
        for key in left.keys() {
            if self.fields.contains_key(key.as_str()) && !right.contains_key(key) {
                pointer.push_back(key.as_str());
                patch
                    .0
                    .push(PatchOperation::Remove(json_patch::RemoveOperation {
                        path: pointer.clone(),
                    }));
                pointer.pop_back();
            }
        }
    }
}

/// What `json_patch::diff` gives for two values at `pointer`, in the same
/// order, skipping equal subtrees by comparing them first (a linear walk,
/// cheaper than diffing them key by key).
fn diff_below(left: &Value, right: &Value, pointer: &mut PointerBuf, patch: &mut Patch) {
    match (left, right) {
        (Value::Object(left), Value::Object(right)) => {
            for (key, right_value) in right {
                pointer.push_back(key.as_str());
                match left.get(key) {
                    Some(left_value) if left_value == right_value => {}
                    Some(left_value) => diff_below(left_value, right_value, pointer, patch),
                    None => patch.0.push(PatchOperation::Add(json_patch::AddOperation {
                        path: pointer.clone(),
                        value: right_value.clone(),
                    })),
                }
                pointer.pop_back();
            }
            for key in left.keys() {
                if !right.contains_key(key) {
                    pointer.push_back(key.as_str());
                    patch
                        .0
                        .push(PatchOperation::Remove(json_patch::RemoveOperation {
                            path: pointer.clone(),
                        }));
                    pointer.pop_back();
                }
            }
        }
        (Value::Array(left), Value::Array(right)) => {
            // Element by element; extra elements are removed at the index
            // they shift to, or added at the end.
            let mut removed = 0usize;
            for index in 0..left.len().max(right.len()) {
                pointer.push_back(index - removed);
                match (left.get(index), right.get(index)) {
                    (Some(l), Some(r)) if l == r => {}
                    (Some(l), Some(r)) => diff_below(l, r, pointer, patch),
                    (Some(_), None) => {
                        removed += 1;
                        patch
                            .0
                            .push(PatchOperation::Remove(json_patch::RemoveOperation {
                                path: pointer.clone(),
                            }));
                    }
                    (None, Some(r)) => {
                        patch.0.push(PatchOperation::Add(json_patch::AddOperation {
                            path: pointer.clone(),
                            value: r.clone(),
                        }))
                    }
                    (None, None) => {}
                }
                pointer.pop_back();
            }
        }
        _ if left == right => {}
        _ => patch
            .0
            .push(PatchOperation::Replace(json_patch::ReplaceOperation {
                path: pointer.clone(),
                value: right.clone(),
            })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MutatorId;
    use sartor_api::MutatorKind;
    use sartor_location::Path;
    use serde_json::json;

    fn changes(paths: &[&str]) -> Vec<Change> {
        let id = std::sync::Arc::new(MutatorId::new(MutatorKind::Assign, "a"));
        paths
            .iter()
            .map(|p| Change::new(1, id.clone(), Path::parse(p).unwrap().into(), Vec::new()))
            .collect()
    }

    #[test]
    fn the_patch_is_the_whole_diff_restricted_to_changed_places() {
        let before = json!({
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "app", "image": "a:1"}], "dnsPolicy": "Default", "x": 1},
        });
        let after = json!({
            "metadata": {"name": "web", "labels": {"app": "web", "team": "shop"},
                         "annotations": {MUTATIONS_ANNOTATION: "Assign/a:1"}},
            "spec": {"containers": [{"name": "app", "image": "a:2", "imagePullPolicy": "Always"}],
                     "priority": 5},
        });
        let patch = between(
            &before,
            &after,
            &changes(&[
                "metadata.labels.team",
                "spec.containers[name: app].image",
                "spec.containers[name: app].imagePullPolicy",
                "spec.dnsPolicy",
                "spec.x",
                "spec.priority",
            ]),
        );
        assert_eq!(patch, json_patch::diff(&before, &after));
        assert_eq!(patch.0.len(), 7, "{patch:?}");
    }

    fn json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (0..3i64).prop_map(Value::from),
            "[ab]".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                proptest::collection::btree_map("[ab/~]{1,2}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn any_two_values_diff_as_json_patch_does(left in json(), right in json()) {
            let mut patch = Patch::default();
            diff_below(&left, &right, &mut PointerBuf::new(), &mut patch);
            proptest::prop_assert_eq!(patch, json_patch::diff(&left, &right));
        }
    }

    #[test]
    fn a_change_at_the_root_of_a_missing_parent_adds_it_whole() {
        let before = json!({"kind": "Pod"});
        let after = json!({"kind": "Pod", "spec": {"a": {"b": 1}}});
        let patch = between(&before, &after, &changes(&["spec.a.b"]));
        assert_eq!(patch, json_patch::diff(&before, &after));
    }

    #[test]
    fn a_field_replacing_a_scalar_parent_is_diffed_there() {
        let before = json!({"spec": "text"});
        let after = json!({"spec": {"a": 1}});
        let patch = between(&before, &after, &changes(&["spec.a"]));
        assert_eq!(patch, json_patch::diff(&before, &after));
    }
}
