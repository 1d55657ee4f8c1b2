//! Originals against a kept copy: after any edits saved as the walk saves
//! them, the originals rebuild the admitted object, know whether the object
//! is as admitted, and give `json_patch::diff`'s patch.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::patch;

/// The only field names: saved paths borrow them.
const KEYS: [&str; 4] = ["a", "b", "c/~", "d"];

/// A field name among [`KEYS`].
fn key() -> BoxedStrategy<String> {
    proptest::sample::select(&KEYS[..])
        .prop_map(str::to_string)
        .boxed()
}

fn json() -> impl Strategy<Value = Value> {
    patch::tests::json_keyed(key())
}

/// An object whose field names are [`KEYS`].
fn object_of(inner: impl Strategy<Value = Value>) -> impl Strategy<Value = Value> {
    proptest::collection::btree_map(key(), inner, 0..4)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

/// One edit: where to go (a choice per level, taken modulo what is
/// there), what to do there, and with what.
#[derive(Debug, Clone)]
struct Edit {
    choices: Vec<usize>,
    action: u8,
    key: usize,
    value: Value,
}

fn edit() -> impl Strategy<Value = Edit> {
    (
        proptest::collection::vec(0..4usize, 0..4),
        0..3u8,
        0..KEYS.len(),
        json(),
    )
        .prop_map(|(choices, action, key, value)| Edit {
            choices,
            action,
            key,
            value,
        })
}

/// The place `choices` lead to in `object`.
fn place(object: &Value, choices: &[usize]) -> Vec<At<'static>> {
    let mut path = Vec::new();
    let mut current = object;
    for choice in choices {
        let next = match current {
            Value::Object(map) if !map.is_empty() => {
                let key = map.keys().nth(choice % map.len()).unwrap();
                let key = KEYS.iter().find(|k| **k == key).unwrap();
                (At::Field(key), &map[*key])
            }
            Value::Array(list) if !list.is_empty() => {
                let index = choice % list.len();
                (At::Index(index), &list[index])
            }
            _ => break,
        };
        path.push(next.0);
        current = next.1;
    }
    path
}

fn get_mut<'v>(value: &'v mut Value, path: &[At<'_>]) -> &'v mut Value {
    path.iter().fold(value, |current, at| match at {
        At::Field(name) => current.get_mut(*name).unwrap(),
        At::Index(index) => current.get_mut(*index).unwrap(),
    })
}

/// What the originals must answer of `object`, mutated from `admitted`:
/// json_patch's patch, the admitted object restored, and unchanged only
/// for the admitted object.
fn assert_answers(originals: &Originals<'_>, object: &Value, admitted: &Value) {
    assert_eq!(
        patch::between(originals, object).operations().unwrap(),
        json_patch::diff(admitted, object)
    );
    let mut restored = object.clone();
    originals.restore(&mut restored);
    assert_eq!(&restored, admitted);
    assert!(!originals.unchanged(object));
    assert!(originals.unchanged(admitted));
}

/// Makes `edit` in `object`, saving first as the walk does: a field set or
/// removed saves the field, an element replaced saves the element, an
/// element removed saves the list, an element added keeps its length.
fn apply(object: &mut Value, edit: &Edit, originals: &mut Originals<'static>) {
    let mut path = place(object, &edit.choices);
    let at = get_mut(object, &path);
    match at {
        Value::Object(map) => {
            let key = KEYS[edit.key];
            path.push(At::Field(key));
            match edit.action {
                0 | 1 => {
                    originals.save(&path, || map.get(key).cloned());
                    map.insert(key.to_string(), edit.value.clone());
                }
                _ => {
                    if map.contains_key(key) {
                        originals.save(&path, || map.get(key).cloned());
                        map.remove(key);
                    }
                }
            }
        }
        Value::Array(list) => match edit.action {
            0 => {
                originals.save_grown(&path, list);
                list.push(edit.value.clone());
            }
            1 if !list.is_empty() => {
                originals.save(&path, || Some(Value::Array(list.clone())));
                list.remove(edit.key % list.len());
            }
            _ if !list.is_empty() => {
                let index = edit.key % list.len();
                path.push(At::Index(index));
                originals.save(&path, || list.get(index).cloned());
                list[index] = edit.value.clone();
            }
            _ => {}
        },
        _ => {}
    }
}

proptest! {
    #[test]
    fn originals_rebuild_compare_and_diff_like_a_kept_copy(
        admitted in object_of(json()),
        edits in proptest::collection::vec(edit(), 0..8),
    ) {
        let mut object = admitted.clone();
        let mut originals = Originals::default();
        for edit in &edits {
            apply(&mut object, edit, &mut originals);
        }
        like_a_kept_copy(&originals, &object, &admitted)?;
    }
}

/// What the originals answer of `object`, edited from `admitted`, against
/// the kept copy: whether it is unchanged, json_patch's patch (operations
/// and bytes), and `admitted` restored.
fn like_a_kept_copy(
    originals: &Originals<'_>,
    object: &Value,
    admitted: &Value,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(originals.unchanged(object), object == admitted);
    prop_assert!(originals.unchanged(admitted));
    let want = json_patch::diff(admitted, object);
    let patch = patch::between(originals, object);
    prop_assert_eq!(patch.operations().unwrap(), want.clone());
    prop_assert_eq!(patch.json(), serde_json::to_vec(&want).unwrap());
    let mut restored = object.clone();
    originals.restore(&mut restored);
    prop_assert_eq!(&restored, admitted);
    Ok(())
}

#[test]
fn a_save_around_earlier_ones_folds_them_in() {
    let admitted = json!({"a": {"b": [1, 2], "d": "x"}});
    let mut object = admitted.clone();
    let mut originals = Originals::default();
    originals.save(&[At::Field("a"), At::Field("d")], || Some(json!("x")));
    object["a"]["d"] = json!("y");
    originals.save(&[At::Field("a"), At::Field("b"), At::Index(0)], || {
        Some(json!(1))
    });
    object["a"]["b"][0] = json!(5);
    // Around both: what is saved is what `a` held before either change.
    originals.save(&[At::Field("a")], || object.get("a").cloned());
    object["a"] = json!("gone");
    let (at, saved) = &originals.root().below[0];
    assert_eq!((originals.root().below.len(), *at), (1, At::Field("a")));
    assert_eq!(saved.saved, Some(Some(admitted["a"].clone())));
    assert!(saved.below.is_empty());
    // Inside a saved place: nothing more is saved.
    originals.save(&[At::Field("a"), At::Field("b")], || panic!("not read"));
    assert_answers(&originals, &object, &admitted);
}

#[test]
fn many_places_below_one_are_found_and_kept_in_order() {
    // Many places below one, saved out of order and twice each.
    const NAMES: [&str; 12] = ["k", "b", "j", "a", "l", "c", "i", "d", "h", "e", "g", "f"];
    let admitted = json!({"labels": {"a": "0", "c": "0", "e": "0", "x": "0"}});
    let mut object = admitted.clone();
    let mut originals = Originals::default();
    for name in NAMES.iter().chain(&NAMES) {
        let labels = object["labels"].as_object_mut().unwrap();
        originals.save(&[At::Field("labels"), At::Field(name)], || {
            labels.get(*name).cloned()
        });
        labels.insert((*name).to_string(), json!("1"));
    }
    let below = &originals.root().below[0].1.below;
    let order: Vec<At<'_>> = below.iter().map(|(at, _)| *at).collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!((below.len(), &order), (12, &sorted));
    assert_eq!(
        patch::between(&originals, &object).operations().unwrap(),
        json_patch::diff(&admitted, &object)
    );
    let mut restored = object.clone();
    originals.restore(&mut restored);
    assert_eq!(restored, admitted);
}

#[test]
fn places_past_the_bisect_threshold_are_found_and_kept_in_order() {
    // More places below one than BISECT_PAST, so saves bisect: saved in a
    // scattered order, twice each, some already in the object.
    let names: Vec<String> = (0..3 * BISECT_PAST)
        .map(|i| format!("key-{}", (i * 7) % (3 * BISECT_PAST)))
        .collect();
    let admitted = json!({"data": {"key-0": "0", "key-10": "0", "key-47": "0", "other": "0"}});
    let mut object = admitted.clone();
    let mut originals = Originals::default();
    for name in names.iter().chain(&names) {
        let data = object["data"].as_object_mut().unwrap();
        originals.save(&[At::Field("data"), At::Field(name)], || {
            data.get(name.as_str()).cloned()
        });
        data.insert(name.clone(), json!("1"));
    }
    let below = &originals.root().below[0].1.below;
    let order: Vec<At<'_>> = below.iter().map(|(at, _)| *at).collect();
    let mut sorted = order.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!((below.len(), &order), (3 * BISECT_PAST, &sorted));
    assert_answers(&originals, &object, &admitted);
}

#[test]
fn many_fields_saved_below_a_map_go_to_its_flat_list() {
    // Fields of the map saved one by one, scattered, twice each, new keys
    // among them: the first FLAT_FROM become places below, the rest are
    // listed flat, in the order saved.
    let admitted = json!({"data": (0..100)
        .map(|i| (format!("key-{i}"), json!("0")))
        .collect::<serde_json::Map<String, Value>>()});
    let names: Vec<String> = (0..100)
        .map(|i| (i * 7) % 100)
        .chain(100..200)
        .map(|i| format!("key-{i}"))
        .collect();
    let mut object = admitted.clone();
    let mut originals = Originals::default();
    for (round, value) in [json!("1"), json!("2")].iter().enumerate() {
        for name in &names {
            let data = object["data"].as_object_mut().unwrap();
            let before = data.insert(name.clone(), value.clone());
            originals.save_field(&[At::Field("data")], name, || before);
        }
        if round == 0 {
            assert_answers(&originals, &object, &admitted);
        }
    }
    let data = &originals.root().below[0].1;
    assert_eq!(data.saved, None);
    assert_eq!(data.below.len(), FLAT_FROM);
    // Listed again in the second round, with what the first set.
    assert_eq!(data.flat().len(), 2 * names.len() - FLAT_FROM);
    let listed: Vec<&str> = data.flat().iter().map(|(name, _)| *name).collect();
    assert_eq!(listed[..3], ["key-24", "key-31", "key-38"]);
    assert_answers(&originals, &object, &admitted);
}

#[test]
fn a_map_listing_fields_flat_keeps_what_was_saved_below_it() {
    // Saved before the map's fields go flat: a place inside one entry, an
    // entry removed, an entry added. Then many entries changed, the first
    // two again among them, and the entry with a saved place inside.
    let admitted = json!({"data": (0..100)
        .map(|i| (format!("key-{i:02}"), json!({"sub": "0", "other": i})))
        .collect::<serde_json::Map<String, Value>>()});
    let names: Vec<String> = (0..80).map(|i| format!("key-{i:02}")).collect();
    let mut object = admitted.clone();
    let mut originals = Originals::default();
    originals.save(
        &[At::Field("data"), At::Field("key-00"), At::Field("sub")],
        || Some(json!("0")),
    );
    object["data"]["key-00"]["sub"] = json!("1");
    {
        let data = object["data"].as_object_mut().unwrap();
        let before = data.remove("key-01");
        originals.save_field(&[At::Field("data")], "key-01", || before);
        originals.save_field(&[At::Field("data")], "added", || None);
        data.insert("added".into(), json!("new"));
    }
    for name in &names {
        let data = object["data"].as_object_mut().unwrap();
        let before = data.insert(name.clone(), json!("changed"));
        originals.save_field(&[At::Field("data")], name, || before);
    }
    let data = &originals.root().below[0].1;
    assert!(!data.flat().is_empty());
    // key-00 is a place below: saved there, with its inner change folded in.
    let (_, key_00) = data
        .below
        .iter()
        .find(|(at, _)| *at == At::Field("key-00"))
        .unwrap();
    assert_eq!(key_00.saved, Some(Some(admitted["data"]["key-00"].clone())));
    assert!(key_00.below.is_empty());
    // Inside a field saved flat: nothing more is saved.
    originals.save(
        &[At::Field("data"), At::Field("key-79"), At::Field("sub")],
        || panic!("not read"),
    );
    assert_answers(&originals, &object, &admitted);
    // Every field put back as it was: unchanged again, the flat list read.
    let mut restored = object.clone();
    originals.restore(&mut restored);
    assert!(originals.unchanged(&restored));
}

/// Field names for the flat-list property: more than [`FLAT_FROM`].
static MANY_KEYS: std::sync::LazyLock<Vec<&'static str>> = std::sync::LazyLock::new(|| {
    (0..2 * FLAT_FROM)
        .map(|i| &*Box::leak(format!("k{i:02}").into_boxed_str()))
        .collect()
});

/// One edit of a map with many fields: set a field (`action` 0), remove it
/// (1), set the field `x` inside it (2) or add an element to its list (3),
/// each saved as the walk saves it.
fn many_fields_edit(
    object: &mut Value,
    (action, key, value): (u8, usize, i64),
    originals: &mut Originals<'static>,
) {
    let key = MANY_KEYS[key % MANY_KEYS.len()];
    let map = object.as_object_mut().unwrap();
    match action {
        0 => {
            let before = map.insert(key.to_string(), json!({"x": value, "l": [value]}));
            originals.save_field(&[], key, || before);
        }
        1 => {
            if let Some(before) = map.remove(key) {
                originals.save_field(&[], key, || Some(before));
            }
        }
        2 => {
            if let Some(Value::Object(inner)) = map.get_mut(key) {
                let before = inner.insert("x".into(), json!(value));
                originals.save(&[At::Field(key), At::Field("x")], || before);
            }
        }
        _ => {
            if let Some(Value::Object(inner)) = map.get_mut(key)
                && let Some(Value::Array(list)) = inner.get_mut("l")
            {
                originals.save_grown(&[At::Field(key), At::Field("l")], list);
                list.push(json!(value));
            }
        }
    }
}

proptest! {
    #[test]
    fn a_map_with_many_saved_fields_rebuilds_compares_and_diffs_like_a_kept_copy(
        admitted in proptest::collection::btree_map(0..2 * FLAT_FROM, 0..3i64, 0..2 * FLAT_FROM),
        edits in proptest::collection::vec((0..4u8, 0..2 * FLAT_FROM, 0..3i64), 0..160),
    ) {
        let admitted: Value = admitted
            .into_iter()
            .map(|(key, value)| (MANY_KEYS[key].to_string(), json!({"x": value, "l": []})))
            .collect::<serde_json::Map<String, Value>>()
            .into();
        let mut object = admitted.clone();
        let mut originals = Originals::default();
        for edit in &edits {
            many_fields_edit(&mut object, *edit, &mut originals);
        }
        like_a_kept_copy(&originals, &object, &admitted)?;
    }
}
