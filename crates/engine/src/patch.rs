//! The RFC 6902 patch of a mutation, diffing only the places it changed.
//!
//! The engine changes the object in place and saves what each place held
//! before its first change ([`Originals`]); outside those places the object
//! is as admitted. [`between`] diffs each saved place's original against what
//! it holds now, in the order `json_patch::diff` of the whole objects would
//! reach it, and writes nothing for the rest, which is equal. The result is
//! that diff's patch, operation for operation. Every test of the engine that
//! mutates checks this (`tests/engine/in_place.rs`).
//!
//! The patch is written as JSON while it is found, as `serde_json` would
//! write `json_patch::diff`'s result byte for byte: an admission response
//! carries it as that text, so no operation, pointer or value is built or
//! copied on the way.

use serde_json::Value;

use crate::originals::{At, Node, Originals, Place, step};

/// An RFC 6902 JSON patch, held as its JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    /// `[...]`, as `serde_json::to_vec` writes the operations.
    json: Vec<u8>,
    operations: usize,
}

/// The patch from the admitted object to `mutated`, which differs from it
/// only at the places `originals` saved.
pub(crate) fn between(originals: &Originals<'_>, mutated: &Value) -> Patch {
    let root = originals.root();
    let mut patch = Patch::with_capacity(1024);
    let mut pointer = Pointer::default();
    match &root.saved {
        // The whole object saved (never, from a walk): diff it whole.
        Some(Some(original)) => diff_below(original, mutated, &mut pointer, &mut patch),
        _ => diff_places(root, mutated, &mut pointer, &mut patch),
    }
    patch.finish()
}

/// Diffs the places saved below `node`, whose place holds `current` (as
/// admitted but for them), where they are.
fn diff_places(node: &Node<'_>, current: &Value, pointer: &mut Pointer, patch: &mut Patch) {
    // A map's fields saved flat are sorted in among the places below.
    let flat = match node.flat().is_empty() {
        true => Vec::new(),
        false => node.flat_sorted(),
    };
    // Fields come in key order, which is the object's (as json_patch): added
    // or changed ones first...
    let mut removed = false;
    for (at, place) in node.places(&flat) {
        match (place.saved(), step(current, at)) {
            (Some(Some(original)), Some(value)) => {
                push(pointer, at);
                diff_below(original, value, pointer, patch);
                pointer.pop_back();
            }
            (Some(None), Some(value)) => {
                push(pointer, at);
                patch.add(pointer, value);
                pointer.pop_back();
            }
            (Some(Some(_)), None) => removed = true,
            (None, Some(value)) => {
                if let Place::Below(below) = place {
                    push(pointer, at);
                    diff_places(below, value, pointer, patch);
                    pointer.pop_back();
                }
            }
            // Absent before and after; or the parents of saved places,
            // which are never taken away.
            (Some(None), None) | (None, None) => {}
        }
    }
    // A list's elements added after those it kept come after its changed
    // ones, as `diff_lists` adds them.
    if let (Some(kept), Value::Array(list)) = (node.kept(), current) {
        for (index, value) in list.iter().enumerate().skip(kept as usize) {
            pointer.push_back(index);
            patch.add(pointer, value);
            pointer.pop_back();
        }
    }
    // ...then removed ones (rare), in key order too.
    if removed {
        for (at, place) in node.places(&flat) {
            if let Some(Some(_)) = place.saved()
                && step(current, at).is_none()
            {
                push(pointer, at);
                patch.remove(pointer);
                pointer.pop_back();
            }
        }
    }
}

fn push(pointer: &mut Pointer, at: At<'_>) {
    match at {
        At::Field(name) => pointer.push_back(name),
        At::Index(index) => pointer.push_back(index),
    }
}

/// Each operation's text up to its path, written in one piece.
const ADD: &[u8] = b"{\"op\":\"add\",\"path\":";
const REMOVE: &[u8] = b"{\"op\":\"remove\",\"path\":";
const REPLACE: &[u8] = b"{\"op\":\"replace\",\"path\":";

// === impl Patch ===

impl Default for Patch {
    /// The empty patch, `[]`.
    fn default() -> Patch {
        Patch::with_capacity(1)
    }
}

impl Patch {
    /// The empty patch, with room for `bytes` of text before it grows (room
    /// for a typical patch took 2k instructions off a typical request).
    fn with_capacity(bytes: usize) -> Patch {
        let mut json = Vec::with_capacity(bytes);
        json.push(b'[');
        Patch {
            json,
            operations: 0,
        }
    }

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
        self.operation(ADD, &path.escaped, Some(value));
    }

    fn remove(&mut self, path: &Pointer) {
        self.operation(REMOVE, &path.escaped, None);
    }

    fn replace(&mut self, path: &Pointer, value: &Value) {
        self.operation(REPLACE, &path.escaped, Some(value));
    }

    /// One operation: `start` is its text up to the path ([`ADD`], ...),
    /// `path` an escaped JSON pointer.
    fn operation(&mut self, start: &[u8], path: &str, value: Option<&Value>) {
        if self.operations > 0 {
            self.json.push(b',');
        }
        self.operations += 1;
        self.json.extend_from_slice(start);
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
                PatchOperation::Add(add) => out.operation(ADD, add.path.as_str(), Some(&add.value)),
                PatchOperation::Remove(remove) => out.operation(REMOVE, remove.path.as_str(), None),
                PatchOperation::Replace(replace) => {
                    out.operation(REPLACE, replace.path.as_str(), Some(&replace.value))
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
        // The text between escapes is copied whole (a label key such as
        // `example.com/team` has one).
        let mut rest = *self;
        while let Some(at) = rest.bytes().position(|b| b == b'~' || b == b'/') {
            let (plain, special) = rest.split_at(at);
            out.push_str(plain);
            out.push_str(if special.starts_with('~') { "~0" } else { "~1" });
            rest = special.get(1..).unwrap_or_default();
        }
        out.push_str(rest);
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
pub(crate) mod tests {
    use super::*;
    use crate::MUTATIONS_ANNOTATION;
    use crate::originals;
    use serde_json::json;

    /// The patch from `before` to `after`, which differ only at `places`,
    /// each saved with what `before` holds there.
    fn patch_of(before: &Value, after: &Value, places: &[&[At<'static>]]) -> Patch {
        let mut saved = Originals::default();
        for path in places {
            saved.save(path, || originals::get(before, path).cloned());
        }
        between(&saved, after)
    }

    use At::{Field as F, Index as I};

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
        let patch = patch_of(
            &before,
            &after,
            &[
                &[F("spec"), F("x")],
                &[F("metadata"), F("labels"), F("team")],
                &[F("spec"), F("containers"), I(0), F("image")],
                &[F("spec"), F("containers"), I(0), F("imagePullPolicy")],
                &[F("spec"), F("dnsPolicy")],
                &[F("metadata"), F("annotations")],
                &[F("spec"), F("priority")],
            ],
        );
        assert_eq!(
            patch.operations().unwrap(),
            json_patch::diff(&before, &after)
        );
        assert_eq!(patch.len(), 7, "{patch:?}");
    }

    #[test]
    fn only_the_places_saved_are_diffed() {
        let container = |name: &str, image: &str, env: Value| json!({"name": name, "image": image, "env": env, "ports": [{"containerPort": 80}]});
        let before = json!({"spec": {"containers": [
            container("a", "a:1", json!([{"name": "X", "value": "1"}])),
            container("b", "b:1", json!([])),
            container("c", "c:1", json!([])),
        ]}});
        let after = json!({"spec": {"containers": [
            container("a", "a:1", json!([{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}])),
            // Not saved: taken as unchanged.
            container("b", "b:2", json!([])),
            container("c", "mirror/c:1", json!([])),
        ]}});
        let patch = patch_of(
            &before,
            &after,
            &[
                &[F("spec"), F("containers"), I(2), F("image")],
                &[F("spec"), F("containers"), I(0), F("env")],
            ],
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
    fn a_place_holding_its_original_again_adds_nothing() {
        let before = json!({"spec": {"a": 1, "b": {"c": [1]}}});
        let patch = patch_of(
            &before,
            &before,
            &[
                &[F("spec"), F("a")],
                &[F("spec"), F("b")],
                &[F("spec"), F("z")],
            ],
        );
        assert!(patch.is_empty());
        assert_eq!(patch.json(), b"[]");
    }

    #[test]
    fn a_change_at_the_root_of_a_missing_parent_adds_it_whole() {
        let before = json!({"kind": "Pod"});
        let after = json!({"kind": "Pod", "spec": {"a": {"b": 1}}});
        let patch = patch_of(&before, &after, &[&[F("spec")]]);
        assert_eq!(
            patch.operations().unwrap(),
            json_patch::diff(&before, &after)
        );
    }

    use proptest::prelude::*;

    /// Small JSON values whose objects' field names come from `keys`.
    pub(crate) fn json_keyed(keys: BoxedStrategy<String>) -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (0..3i64).prop_map(Value::from),
            "[ab]".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                proptest::collection::btree_map(keys.clone(), inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn json() -> impl Strategy<Value = Value> {
        json_keyed("[ab/~]{1,2}".boxed())
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
}
