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
//!
//! The patch is written as JSON while it is found, as `serde_json` would
//! write `json_patch::diff`'s result byte for byte: an admission response
//! carries it as that text, so no operation, pointer or value is built or
//! copied on the way.

use std::iter::Peekable;

use serde_json::Value;

use crate::system::{Change, Key, MUTATIONS_ANNOTATION, Step};

/// An RFC 6902 JSON patch, held as its JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    /// `[...]`, as `serde_json::to_vec` writes the operations.
    json: Vec<u8>,
    operations: usize,
}

/// The places changes were made under, as a tree: a leaf is diffed whole.
#[derive(Debug, Default)]
struct Touched<'a> {
    /// Diff everything below this point.
    whole: bool,
    /// The object fields changed under, sorted by name (few: a sorted
    /// list costs less to build than a map).
    fields: Vec<(&'a str, Touched<'a>)>,
    /// The list elements changed under, by key field and key. A list with
    /// an element added, replaced or removed (a change ending at the
    /// element) or visited without a usable key is diffed whole instead.
    elements: Vec<(&'a str, Key<'a>, Touched<'a>)>,
}

/// The patch from `admitted` to `mutated`, given every change made between them.
pub(crate) fn between(admitted: &Value, mutated: &Value, changes: &[Change]) -> Patch {
    let mut touched = Touched::default();
    for change in changes {
        touched.insert(change.steps());
    }
    // The mutations annotation is written without a change of its own.
    let annotated = mutated
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(MUTATIONS_ANNOTATION))
        .is_some();
    if annotated {
        touched.insert([Step::Field("metadata"), Step::Field("annotations")].into_iter());
    }
    let mut patch = Patch::default();
    let mut pointer = Pointer::default();
    touched.diff(admitted, mutated, &mut pointer, &mut patch);
    patch.finish()
}

// === impl Patch ===

impl Default for Patch {
    /// The empty patch, `[]`.
    fn default() -> Patch {
        Patch {
            json: b"[".to_vec(),
            operations: 0,
        }
    }
}

impl Patch {
    /// Whether it has no operation.
    pub fn is_empty(&self) -> bool {
        self.operations == 0
    }

    /// Its number of operations.
    pub fn len(&self) -> usize {
        self.operations
    }

    /// Its JSON text, `[...]`.
    pub fn json(&self) -> &[u8] {
        &self.json
    }

    /// Its JSON text, `[...]`, taken.
    pub fn into_json(self) -> Vec<u8> {
        self.json
    }

    /// Its operations, read back from its JSON.
    ///
    /// # Errors
    /// None in practice: the JSON is written from the operations.
    pub fn operations(&self) -> Result<json_patch::Patch, serde_json::Error> {
        serde_json::from_slice(&self.json)
    }

    fn add(&mut self, path: &Pointer, value: &Value) {
        self.operation("add", &path.escaped, Some(value));
    }

    fn remove(&mut self, path: &Pointer) {
        self.operation("remove", &path.escaped, None);
    }

    fn replace(&mut self, path: &Pointer, value: &Value) {
        self.operation("replace", &path.escaped, Some(value));
    }

    /// One operation; `path` is an escaped JSON pointer.
    fn operation(&mut self, op: &str, path: &str, value: Option<&Value>) {
        if self.operations > 0 {
            self.json.push(b',');
        }
        self.operations += 1;
        self.json.extend_from_slice(b"{\"op\":\"");
        self.json.extend_from_slice(op.as_bytes());
        self.json.extend_from_slice(b"\",\"path\":");
        write_str(&mut self.json, path);
        if let Some(value) = value {
            self.json.extend_from_slice(b",\"value\":");
            write_value(&mut self.json, value);
        }
        self.json.push(b'}');
    }

    /// Closes the list (the text is `[` plus operations until then).
    fn finish(mut self) -> Patch {
        self.json.push(b']');
        self
    }
}

impl From<&json_patch::Patch> for Patch {
    /// The operations of `patch`, as JSON.
    fn from(patch: &json_patch::Patch) -> Patch {
        use json_patch::PatchOperation;
        let mut out = Patch::default();
        for operation in &patch.0 {
            match operation {
                PatchOperation::Add(add) => {
                    out.operation("add", add.path.as_str(), Some(&add.value))
                }
                PatchOperation::Remove(remove) => {
                    out.operation("remove", remove.path.as_str(), None)
                }
                PatchOperation::Replace(replace) => {
                    out.operation("replace", replace.path.as_str(), Some(&replace.value))
                }
                // Never in a diff; written by serde.
                other => {
                    if out.operations > 0 {
                        out.json.push(b',');
                    }
                    out.operations += 1;
                    if let Ok(json) = serde_json::to_vec(other) {
                        out.json.extend_from_slice(&json);
                    }
                }
            }
        }
        out.finish()
    }
}

/// `value` as serde_json writes it compactly.
fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::String(text) => write_str(out, text),
        Value::Array(items) => {
            out.push(b'[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (index, (key, item)) in map.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_str(out, key);
                out.push(b':');
                write_value(out, item);
            }
            out.push(b'}');
        }
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        // serde_json's own formatting (writing to memory cannot fail).
        Value::Number(number) => {
            let _ = serde_json::to_writer(out, number);
        }
    }
}

/// A JSON string: copied whole when nothing in it needs escaping (nearly
/// always), else escaped by serde_json (writing to memory cannot fail).
fn write_str(out: &mut Vec<u8>, text: &str) {
    // A fold without an early exit, which the compiler vectorizes.
    let escapes = text.bytes().fold(false, |found, b| {
        found | (b < 0x20) | (b == b'"') | (b == b'\\')
    });
    if escapes {
        let _ = serde_json::to_writer(out, text);
        return;
    }
    out.push(b'"');
    out.extend_from_slice(text.as_bytes());
    out.push(b'"');
}

/// The RFC 6901 pointer to the place being diffed, grown and cut back as the
/// diff goes down and up. Cheaper than `jsonptr`'s `PointerBuf`, whose
/// `pop_back` hands back the token it cut off as a new string.
#[derive(Debug, Default)]
struct Pointer {
    /// Escaped: `~` as `~0`, `/` as `~1`.
    escaped: String,
    /// Where each pushed token starts.
    starts: Vec<usize>,
}

/// A token of a [`Pointer`]: an object key or a list index.
trait Token {
    fn write_escaped(&self, out: &mut String);
}

// === impl Pointer ===

impl Pointer {
    fn push_back(&mut self, token: impl Token) {
        self.starts.push(self.escaped.len());
        self.escaped.push('/');
        token.write_escaped(&mut self.escaped);
    }

    fn pop_back(&mut self) {
        if let Some(start) = self.starts.pop() {
            self.escaped.truncate(start);
        }
    }
}

impl Token for &str {
    fn write_escaped(&self, out: &mut String) {
        if self.bytes().any(|b| b == b'~' || b == b'/') {
            for c in self.chars() {
                match c {
                    '~' => out.push_str("~0"),
                    '/' => out.push_str("~1"),
                    c => out.push(c),
                }
            }
        } else {
            out.push_str(self);
        }
    }
}

impl Token for usize {
    fn write_escaped(&self, out: &mut String) {
        // Digits last to first, without the formatting machinery.
        let mut digits = [0u8; 20];
        let mut n = *self;
        let mut start = digits.len();
        loop {
            start -= 1;
            if let Some(digit) = digits.get_mut(start) {
                *digit = b'0' + (n % 10) as u8;
            }
            n /= 10;
            if n == 0 || start == 0 {
                break;
            }
        }
        for &digit in digits.get(start..).unwrap_or_default() {
            out.push(char::from(digit));
        }
    }
}

// === impl Touched ===

impl<'a> Touched<'a> {
    fn insert(&mut self, steps: impl Iterator<Item = Step<'a>>) {
        self.insert_steps(&mut steps.peekable());
    }

    fn insert_steps<I: Iterator<Item = Step<'a>>>(&mut self, steps: &mut Peekable<I>) {
        if self.whole {
            return;
        }
        let Some(step) = steps.next() else {
            return self.make_whole();
        };
        let last = steps.peek().is_none();
        match step {
            Step::Field(name) if self.elements.is_empty() => {
                // Changes by one mutator share its location's names: compare
                // the pointers first.
                let found =
                    self.fields
                        .binary_search_by(|(field, _)| match std::ptr::eq(*field, name) {
                            true => std::cmp::Ordering::Equal,
                            false => (*field).cmp(name),
                        });
                match found.map(|index| self.fields.get_mut(index)) {
                    Ok(Some((_, touched))) => touched.insert_steps(steps),
                    Ok(None) => {}
                    Err(index) => {
                        let mut touched = Touched::default();
                        touched.insert_steps(steps);
                        self.fields.insert(index, (name, touched));
                    }
                }
            }
            Step::Element(field, key) if !last && key != Key::Open && self.fields.is_empty() => {
                match self
                    .elements
                    .iter_mut()
                    .find(|(f, k, _)| *f == field && *k == key)
                {
                    Some((_, _, touched)) => touched.insert_steps(steps),
                    None => {
                        let mut touched = Touched::default();
                        touched.insert_steps(steps);
                        self.elements.push((field, key, touched));
                    }
                }
            }
            // The element itself changed, or this place is reached both as
            // an object and as a list.
            _ => self.make_whole(),
        }
    }

    fn make_whole(&mut self) {
        self.whole = true;
        self.fields.clear();
        self.elements.clear();
    }

    fn diff(&self, left: &Value, right: &Value, pointer: &mut Pointer, patch: &mut Patch) {
        match (left, right) {
            // A place touched as the other shape than it has (not reached
            // by a walk, which makes such a place whole) is diffed whole.
            (Value::Object(left), Value::Object(right))
                if !self.whole && self.elements.is_empty() =>
            {
                // Touched fields in key order, which is the right object's
                // order (as json_patch): added or changed ones first...
                let mut removed = false;
                for (key, touched) in &self.fields {
                    let left_value = left.get(*key);
                    let Some(right_value) = right.get(*key) else {
                        removed |= left_value.is_some();
                        continue;
                    };
                    pointer.push_back(*key);
                    match left_value {
                        Some(left_value) => touched.diff(left_value, right_value, pointer, patch),
                        None => patch.add(pointer, right_value),
                    }
                    pointer.pop_back();
                }
                // ...then removed ones (rare), in the left object's order.
                if removed {
                    for (key, _) in &self.fields {
                        if left.contains_key(*key) && !right.contains_key(*key) {
                            pointer.push_back(*key);
                            patch.remove(pointer);
                            pointer.pop_back();
                        }
                    }
                }
            }
            (Value::Array(left), Value::Array(right)) if !self.whole && self.fields.is_empty() => {
                match self.element_indexes(left, right) {
                    // Elements kept their places: json_patch diffs a list
                    // index by index, and only these may differ.
                    Some(indexes) => {
                        for (index, touched) in indexes {
                            if let (Some(l), Some(r)) = (left.get(index), right.get(index)) {
                                pointer.push_back(index);
                                touched.diff(l, r, pointer, patch);
                                pointer.pop_back();
                            }
                        }
                    }
                    None => diff_lists(left, right, pointer, patch),
                }
            }
            _ if left != right => diff_below(left, right, pointer, patch),
            _ => {}
        }
    }

    /// Where each touched element is, in index order, when it is at the
    /// same index in both lists and is the only element with its key in
    /// each, no two selectors name one element, and the lists are as long:
    /// then no element was added, removed or moved. `None` otherwise (a
    /// change renamed an element, or created it).
    fn element_indexes<'t>(
        &'t self,
        left: &[Value],
        right: &[Value],
    ) -> Option<Vec<(usize, &'t Touched<'a>)>> {
        if left.len() != right.len() {
            return None;
        }
        let only = |list: &[Value], field: &str, key: Key<'_>| -> Option<usize> {
            let mut found = None;
            for (index, element) in list.iter().enumerate() {
                if element.get(field).is_some_and(|value| key.equals(value)) {
                    if found.is_some() {
                        return None;
                    }
                    found = Some(index);
                }
            }
            found
        };
        let mut indexes = self
            .elements
            .iter()
            .map(|(field, key, touched)| {
                let index = only(left, field, *key)?;
                (only(right, field, *key)? == index).then_some((index, touched))
            })
            .collect::<Option<Vec<_>>>()?;
        // Two selectors (on different key fields) of one element: whole.
        indexes.sort_unstable_by_key(|(index, _)| *index);
        if indexes
            .windows(2)
            .any(|pair| matches!(pair, [a, b] if a.0 == b.0))
        {
            return None;
        }
        Some(indexes)
    }
}

/// What `json_patch::diff` gives for two values at `pointer`, in the same
/// order, skipping equal subtrees by comparing them first (a linear walk,
/// cheaper than diffing them key by key).
fn diff_below(left: &Value, right: &Value, pointer: &mut Pointer, patch: &mut Patch) {
    match (left, right) {
        (Value::Object(left), Value::Object(right)) => {
            for (key, right_value) in right {
                pointer.push_back(key.as_str());
                match left.get(key) {
                    Some(left_value) if left_value == right_value => {}
                    Some(left_value) => diff_below(left_value, right_value, pointer, patch),
                    None => patch.add(pointer, right_value),
                }
                pointer.pop_back();
            }
            for key in left.keys() {
                if !right.contains_key(key) {
                    pointer.push_back(key.as_str());
                    patch.remove(pointer);
                    pointer.pop_back();
                }
            }
        }
        (Value::Array(left), Value::Array(right)) => diff_lists(left, right, pointer, patch),
        _ if left == right => {}
        _ => patch.replace(pointer, right),
    }
}

/// [`diff_below`] of two lists.
fn diff_lists(left: &[Value], right: &[Value], pointer: &mut Pointer, patch: &mut Patch) {
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
                patch.remove(pointer);
            }
            (None, Some(r)) => patch.add(pointer, r),
            (None, None) => {}
        }
        pointer.pop_back();
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
        assert_eq!(
            patch.operations().unwrap(),
            json_patch::diff(&before, &after)
        );
        assert_eq!(patch.len(), 7, "{patch:?}");
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
            diff_below(&left, &right, &mut Pointer::default(), &mut patch);
            let patch = patch.finish();
            let want = json_patch::diff(&left, &right);
            proptest::prop_assert_eq!(patch.operations().unwrap(), want.clone());
            proptest::prop_assert_eq!(patch.len(), want.0.len());
            // Byte for byte what serde_json writes: the webhook sends it.
            proptest::prop_assert_eq!(patch.json(), serde_json::to_vec(&want).unwrap());
        }
    }

    #[test]
    fn patches_encode_as_serde_json_writes_them() {
        let patch: json_patch::Patch = serde_json::from_value(json!([
            {"op": "add", "path": "/metadata/labels/a~1b", "value": "plain"},
            {"op": "replace", "path": "/spec/x", "value": {
                "quote\"d": "tab\there \"and\" back\\slash \u{1} é 😀",
                "n": [1, -2, 3.5, 1e300, 18446744073709551615u64, null, true, false],
                "empty": {}, "list": [],
            }},
            {"op": "remove", "path": "/spec/containers/0"},
            {"op": "move", "from": "/a", "path": "/b"},
            {"op": "copy", "from": "/a", "path": "/c"},
            {"op": "test", "path": "/a", "value": 1},
        ]))
        .unwrap();
        let encoded = Patch::from(&patch);
        assert_eq!(
            String::from_utf8(encoded.json().to_vec()).unwrap(),
            String::from_utf8(serde_json::to_vec(&patch).unwrap()).unwrap()
        );
        assert_eq!(encoded.len(), 6);
        assert_eq!(encoded.operations().unwrap(), patch);
        let empty = Patch::from(&json_patch::Patch::default());
        assert_eq!(empty.json(), b"[]");
        assert!(empty.is_empty());
    }

    #[test]
    fn pointers_escape_keys_and_write_indexes() {
        let mut pointer = Pointer::default();
        pointer.push_back("a/b~c");
        pointer.push_back(0usize);
        pointer.push_back(1234usize);
        assert_eq!(pointer.escaped.as_str(), "/a~1b~0c/0/1234");
        pointer.pop_back();
        pointer.push_back(usize::MAX);
        assert_eq!(
            pointer.escaped.as_str(),
            format!("/a~1b~0c/0/{}", usize::MAX)
        );
        pointer.pop_back();
        pointer.pop_back();
        pointer.pop_back();
        pointer.pop_back();
        assert_eq!(pointer.escaped.as_str(), "");
    }

    fn keyed_changes(paths: &[(&str, &[&str])]) -> Vec<Change> {
        let id = std::sync::Arc::new(MutatorId::new(MutatorKind::Assign, "a"));
        paths
            .iter()
            .map(|(p, keys)| {
                let keys = keys
                    .iter()
                    .map(|k| sartor_location::KeyValue::String((*k).to_string()))
                    .collect();
                Change::new(1, id.clone(), Path::parse(p).unwrap().into(), keys)
            })
            .collect()
    }

    #[test]
    fn only_the_elements_changed_inside_are_diffed_when_none_moved() {
        let container = |name: &str, image: &str, env: Value| json!({"name": name, "image": image, "env": env, "ports": [{"containerPort": 80}]});
        let before = json!({"spec": {"containers": [
            container("a", "a:1", json!([{"name": "X", "value": "1"}])),
            container("b", "b:1", json!([])),
            container("c", "c:1", json!([])),
        ]}});
        let after = json!({"spec": {"containers": [
            container("a", "a:1", json!([{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}])),
            container("b", "b:1", json!([])),
            container("c", "mirror/c:1", json!([])),
        ]}});
        let touched = keyed_changes(&[
            ("spec.containers[name: *].image", &["c"]),
            ("spec.containers[name: *].env[name: Y]", &["a"]),
        ]);
        let patch = between(&before, &after, &touched);
        assert_eq!(
            patch.operations().unwrap(),
            json_patch::diff(&before, &after)
        );
        assert_eq!(
            serde_json::from_slice::<Value>(patch.json()).unwrap(),
            json!([
                {"op": "add", "path": "/spec/containers/0/env/1", "value": {"name": "Y", "value": "2"}},
                {"op": "replace", "path": "/spec/containers/2/image", "value": "mirror/c:1"},
            ])
        );
    }

    #[test]
    fn a_list_whose_elements_moved_or_share_a_key_is_diffed_whole() {
        // Renamed: the key changed is not found in the admitted list.
        let before = json!({"l": [{"name": "a", "v": 1}, {"name": "b", "v": 1}]});
        let after = json!({"l": [{"name": "a", "v": 1}, {"name": "c", "v": 2}]});
        let touched = keyed_changes(&[("l[name: *].name", &["c"]), ("l[name: *].v", &["c"])]);
        assert_eq!(
            between(&before, &after, &touched).operations().unwrap(),
            json_patch::diff(&before, &after)
        );
        // Two elements with the key changed.
        let before = json!({"l": [{"name": "a", "v": 1}, {"name": "a", "v": 1}]});
        let after = json!({"l": [{"name": "a", "v": 1}, {"name": "a", "v": 2}]});
        let touched = keyed_changes(&[("l[name: *].v", &["a"])]);
        assert_eq!(
            between(&before, &after, &touched).operations().unwrap(),
            json_patch::diff(&before, &after)
        );
        // One element named by two key fields: diffed once.
        let before = json!({"l": [{"name": "a", "id": 1, "v": 1, "w": 1}]});
        let after = json!({"l": [{"name": "a", "id": 1, "v": 2, "w": 2}]});
        let touched = keyed_changes(&[("l[name: a].w", &[]), ("l[id: 1].v", &[])]);
        assert_eq!(
            between(&before, &after, &touched).operations().unwrap(),
            json_patch::diff(&before, &after)
        );
        // An element added: the change ends at it.
        let before = json!({"l": [{"name": "a"}]});
        let after = json!({"l": [{"name": "b"}, {"name": "a"}]});
        let touched = keyed_changes(&[("l[name: b]", &[])]);
        assert_eq!(
            between(&before, &after, &touched).operations().unwrap(),
            json_patch::diff(&before, &after)
        );
    }

    #[test]
    fn a_change_at_the_root_of_a_missing_parent_adds_it_whole() {
        let before = json!({"kind": "Pod"});
        let after = json!({"kind": "Pod", "spec": {"a": {"b": 1}}});
        let patch = between(&before, &after, &changes(&["spec.a.b"]));
        assert_eq!(
            patch.operations().unwrap(),
            json_patch::diff(&before, &after)
        );
    }

    #[test]
    fn a_field_replacing_a_scalar_parent_is_diffed_there() {
        let before = json!({"spec": "text"});
        let after = json!({"spec": {"a": 1}});
        let patch = between(&before, &after, &changes(&["spec.a"]));
        assert_eq!(
            patch.operations().unwrap(),
            json_patch::diff(&before, &after)
        );
    }
}
