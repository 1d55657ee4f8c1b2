//! The walk every mutator kind shares: follow a location through an object,
//! check pathTests on the way, create what is missing, and let the kind's
//! [`Setter`] make the final change.
//!
//! The rules are Gatekeeper's (`pkg/mutation/mutators/core/mutation_function.go`):
//! - a missing field is created as `{}` (or `[]` when a list selector follows);
//! - `[key: value]` visits every element whose key equals the value (a string
//!   never equals a number) and, when there is none, appends `{key: value}`;
//! - `[key: *]` visits every element, even those without the key, and never
//!   creates one;
//! - `[key notin (a, b)]` (sartor only) is a glob that skips the elements
//!   `[key: a]` or `[key: b]` would visit: elements without the key, or with a
//!   key of another type, are visited. It creates nothing and, like a glob,
//!   cannot end a location;
//! - anything created is attached only if the walk below it changed something,
//!   so a pathTest that fails deep down leaves no half-created parents;
//! - a field that is present counts as existing even when it is `null`.

use std::fmt;

use sartor_api::json_type as kind_of;
use sartor_location::{Condition, KeyValue, ListSelector, Literal, Node, Path, PathTests};
use serde_json::{Map, Value};

use crate::originals::{At, Originals};

/// How one mutator kind changes the value at the end of its location.
pub trait Setter {
    /// Sets `key` in `object`; the location ends at this field. Returns
    /// whether the object changed (setting a field to the value it already
    /// has is not a change).
    ///
    /// # Errors
    /// A [`SetError`] when the existing value cannot take the change.
    fn set_value(&self, object: &mut Map<String, Value>, key: &str) -> Result<bool, SetError>;

    /// [`Setter::set_value`] for a walk that saves originals: hands back
    /// what `key` held before a change, which the walk then keeps instead of
    /// a copy taken beforehand (one search of the map and one copy fewer).
    /// `None` for a setter that cannot (the default): the walk copies first.
    ///
    /// # Errors
    /// As [`Setter::set_value`].
    fn replace_value(
        &self,
        _object: &mut Map<String, Value>,
        _key: &str,
    ) -> Option<Result<Replaced, SetError>> {
        None
    }

    /// The element to put in a keyed list when the location ends at
    /// `[key: value]`, borrowed: the walk copies it only when it puts it in
    /// (a re-application that finds it there, or stops at a pathTest, copies
    /// nothing). Kinds that cannot end at a list element keep the default.
    ///
    /// # Errors
    /// [`SetError::KeyedListUnsupported`] by default.
    fn keyed_list_value(&self) -> Result<&Map<String, Value>, SetError> {
        Err(SetError::KeyedListUnsupported)
    }

    /// Whether a location ending at a list selector removes the elements it
    /// selects (a removal, which may end at a glob or exclusion) rather than
    /// setting one.
    fn removes(&self) -> bool {
        false
    }
}

/// What [`Setter::replace_value`] did to a field.
#[derive(Debug, Clone, PartialEq)]
pub enum Replaced {
    /// Nothing: the field already held what the setter sets.
    Unchanged,
    /// The field changed; it held `before` (`None`: it was absent).
    Changed {
        /// What the field held before.
        before: Option<Value>,
    },
}

/// Why a setter could not set its value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SetError {
    /// This kind cannot end its location at a keyed-list element.
    #[error("this mutator kind cannot set a keyed-list element")]
    KeyedListUnsupported,
    /// The value to put in a keyed list is not an object.
    #[error("the value for a keyed-list element must be an object, got {0}")]
    NotAnObjectValue(&'static str),
    /// External data sends the string at the location as its key; something
    /// else is there.
    #[error("{0} is there, not a string to send to the external data provider as the key")]
    ExternalKeyNotAString(&'static str),
    /// The existing value is not what the kind works on.
    #[error("{found} is not {expected}")]
    Unexpected {
        /// What the kind works on, such as "a list".
        expected: &'static str,
        /// What is there, such as "a string".
        found: &'static str,
    },
}

/// Why the walk stopped with an error (the object may be partly changed; the
/// caller discards it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WalkError {
    /// An object was needed to look up a field.
    #[error("{at} is {found}, not an object")]
    NotAnObject {
        /// The location prefix holding the value.
        at: Place,
        /// What it holds.
        found: &'static str,
    },
    /// A list was needed for a list selector.
    #[error("{at} is {found}, not a list")]
    NotAList {
        /// The location prefix holding the value.
        at: Place,
        /// What it holds.
        found: &'static str,
    },
    /// A keyed list holding something other than objects.
    #[error("element {index} of {list} is {found}, not an object with a {key} field")]
    ElementNotAnObject {
        /// The list.
        list: Place,
        /// The element's position, from 0.
        index: usize,
        /// What it is.
        found: &'static str,
        /// The key field the selector looks for.
        key: String,
    },
    /// A location ending in `[key: *]`: there is no single element to set.
    #[error("{at}: a location cannot end in a glob")]
    GlobAtEnd {
        /// The location.
        at: Place,
    },
    /// A location ending in `[key notin (...)]`: no single element either.
    #[error("{at}: a location cannot end in a notin selector")]
    ExclusionAtEnd {
        /// The location.
        at: Place,
    },
    /// The element replacing a keyed-list element has a different key.
    #[error("{at}: the new element must keep {key}: {value}")]
    KeyChanged {
        /// The location.
        at: Place,
        /// The key field.
        key: String,
        /// The key value it must keep.
        value: String,
    },
    /// The setter refused.
    #[error("{at}: {source}")]
    Set {
        /// The location.
        at: Place,
        /// Why.
        #[source]
        source: SetError,
    },
}

/// A place in the object named by a prefix of the location; the root when empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place(Option<Path>);

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(path) => write!(f, "{path}"),
            None => f.write_str("the object"),
        }
    }
}

/// What one walk did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Walked {
    /// Whether the setter ran at least once (Gatekeeper's "mutated": the
    /// value may be the same as before).
    pub applied: bool,
    /// Every place the object actually changed, in walk order.
    pub changed: Vec<Changed>,
}

/// One place where a walk changed the object: the location, with each glob
/// or exclusion selector pinned to the element it visited.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changed {
    /// For each `[key: *]` or `[key notin (...)]` of the location, in order,
    /// the index of the element.
    elements: Vec<usize>,
}

// === impl Changed ===

impl Changed {
    /// The concrete path that changed: each glob or exclusion of `location`
    /// replaced by the key of the element visited, read from `object` (the
    /// object after the walk). An element without a string or integer key
    /// keeps the glob or exclusion.
    #[cfg(test)]
    pub fn path(&self, location: &Path, object: &Value) -> Path {
        pinned(location, &self.keys(location, object))
    }

    /// The key of each element visited for a glob or exclusion of
    /// `location`, in order, read from `object` (the object after the walk);
    /// the selector itself for an element without a string or integer key.
    /// What [`Changed::path`] pins, without building the path.
    #[cfg(test)]
    pub fn keys(&self, location: &Path, object: &Value) -> Vec<KeyValue> {
        KeyReader::new(location, object).keys(self)
    }
}

/// Reads the keys of a walk's changes ([`Changed::keys`]), finding the list
/// of the location's first glob or exclusion once for all of them.
#[derive(Debug)]
pub struct KeyReader<'l, 'v> {
    location: &'l Path,
    /// The index of the location's first glob or exclusion.
    first: usize,
    /// The list it selects in, if the object has one there.
    list: Option<&'v Value>,
}

// === impl KeyReader ===

impl<'l, 'v> KeyReader<'l, 'v> {
    /// The reader for changes at `location` in `object` (after the walk).
    pub fn new(location: &'l Path, object: &'v Value) -> KeyReader<'l, 'v> {
        let nodes = location.nodes();
        let first = nodes
            .iter()
            .position(|node| matches!(node, Node::List(s) if !s.key_value.is_concrete()))
            .unwrap_or(nodes.len());
        // Without a glob or exclusion no change has keys: nothing to find.
        let list = match nodes.get(..first) {
            Some(before) if first < nodes.len() => before
                .iter()
                .try_fold(object, |current, node| step_concrete(current, node)),
            _ => None,
        };
        KeyReader {
            location,
            first,
            list,
        }
    }

    /// [`Changed::keys`] of `changed`.
    pub fn keys(&self, changed: &Changed) -> Vec<KeyValue> {
        if changed.elements.is_empty() {
            return Vec::new();
        }
        let mut elements = changed.elements.iter();
        let mut current = self.list;
        let mut keys = Vec::with_capacity(changed.elements.len());
        for node in self.location.nodes().get(self.first..).unwrap_or_default() {
            if keys.len() == changed.elements.len() {
                // Past the last glob or exclusion: nothing more to read.
                break;
            }
            match node {
                Node::List(selector) if !selector.key_value.is_concrete() => {
                    let element = elements
                        .next()
                        .and_then(|i| current.and_then(|v| v.get(*i)));
                    keys.push(match element.and_then(|e| e.get(&selector.key_field)) {
                        Some(Value::String(s)) => KeyValue::String(s.clone()),
                        Some(Value::Number(n)) => match n.as_i64() {
                            Some(n) => KeyValue::Integer(n),
                            None => selector.key_value.clone(),
                        },
                        _ => selector.key_value.clone(),
                    });
                    current = element;
                }
                node => current = current.and_then(|v| step_concrete(v, node)),
            }
        }
        keys
    }
}

/// The value a field or a concrete selector leads to from `current`.
fn step_concrete<'v>(current: &'v Value, node: &Node) -> Option<&'v Value> {
    match node {
        Node::Field(name) => current.get(name),
        Node::List(selector) => current
            .as_array()
            .and_then(|list| list.iter().find(|e| key_matches(e, selector))),
    }
}

/// `location` with its globs and exclusions, in order, replaced by `keys`
/// (one left as it is when `keys` runs out): a change's concrete path.
pub fn pinned(location: &Path, keys: &[KeyValue]) -> Path {
    let mut keys = keys.iter();
    let nodes: Vec<Node> = location
        .nodes()
        .iter()
        .map(|node| match node {
            Node::List(selector) if !selector.key_value.is_concrete() => Node::List(ListSelector {
                key_field: selector.key_field.clone(),
                key_value: keys
                    .next()
                    .cloned()
                    .unwrap_or_else(|| selector.key_value.clone()),
            }),
            node => node.clone(),
        })
        .collect();
    // The nodes have the location's shape, so this cannot fail.
    Path::from_nodes(nodes).unwrap_or_else(|_| location.clone())
}

/// Walks `location` through `object`, honouring `tests`, and lets `setter`
/// change the value at its end.
///
/// # Errors
/// A [`WalkError`] naming the place where the object does not fit the location.
#[cfg(test)]
pub fn mutate(
    location: &Path,
    tests: &PathTests,
    setter: &dyn Setter,
    object: &mut Value,
) -> Result<Walked, WalkError> {
    Walk {
        location,
        tests,
        setter,
        records: Records::Pinned,
    }
    .run(object, None)
}

/// [`mutate`] for a caller that reads no change: whether the setter ran
/// (Gatekeeper's "mutated"), with nothing recorded.
pub(crate) fn set(
    location: &Path,
    tests: &PathTests,
    setter: &dyn Setter,
    object: &mut Value,
) -> Result<bool, WalkError> {
    Walk {
        location,
        tests,
        setter,
        records: Records::Nothing,
    }
    .run(object, None)
    .map(|walked| walked.applied)
}

/// [`mutate`], saving in `originals` what each place held before the walk
/// first changed it, and putting each change in `changed` (a buffer the
/// caller reuses) rather than a list of its own: whether the setter ran.
/// Without `pin`, each change leaves out the elements its globs visited (a
/// caller that reads no change's keys).
pub(crate) fn mutate_saving<'s>(
    location: &'s Path,
    tests: &PathTests,
    setter: &dyn Setter,
    object: &mut Value,
    (originals, pin): (&mut Originals<'s>, bool),
    changed: &mut Vec<Changed>,
) -> Result<bool, WalkError> {
    let walk = Walk {
        location,
        tests,
        setter,
        records: match pin {
            true => Records::Pinned,
            false => Records::Unpinned,
        },
    };
    // The trail's path is the originals' own buffer, lent for the walk: a
    // walk allocates nothing until it changes something.
    let mut path = originals.lend_path();
    path.clear();
    let mut trail = Trail { path, originals };
    let applied = walk.step(object, 0, None, changed, Some(&mut trail));
    let Trail { path, originals } = trail;
    originals.return_path(path);
    applied
}

/// One walk: the location's names live for `'a`, what a saving walk saves
/// paths with.
struct Walk<'a, 'w> {
    location: &'a Path,
    tests: &'w PathTests,
    setter: &'w dyn Setter,
    records: Records,
}

/// What a walk records of each change.
#[derive(Debug, Clone, Copy)]
enum Records {
    /// The change, with the elements its globs visited.
    Pinned,
    /// The change alone.
    Unpinned,
    /// Nothing.
    Nothing,
}

/// The list elements a glob (or exclusion) visit is inside, innermost first,
/// kept on the stack so a walk that changes nothing allocates nothing.
struct Frame<'f> {
    parent: Option<&'f Frame<'f>>,
    element: usize,
}

impl Frame<'_> {
    /// The elements, outermost first, in a list allocated once.
    fn elements(frame: Option<&Frame<'_>>) -> Vec<usize> {
        let chain = || std::iter::successors(frame, |f| f.parent);
        let mut elements = vec![0; chain().count()];
        for (slot, f) in elements.iter_mut().rev().zip(chain()) {
            *slot = f.element;
        }
        elements
    }
}

/// Where a saving walk is in the object, and where it saves originals.
struct Trail<'s, 'o> {
    path: Vec<At<'s>>,
    originals: &'o mut Originals<'s>,
}

impl<'s> Trail<'s, '_> {
    /// Saves the place at the trail, followed by `last` if given.
    fn save(&mut self, last: Option<At<'s>>, original: impl FnOnce() -> Option<Value>) {
        match last {
            Some(last) => {
                self.path.push(last);
                self.originals.save(&self.path, original);
                self.path.pop();
            }
            None => self.originals.save(&self.path, original),
        }
    }

    /// Saves the field `name` of the map at the trail
    /// ([`Originals::save_field`]).
    fn save_field(&mut self, name: &'s str, original: impl FnOnce() -> Option<Value>) {
        self.originals.save_field(&self.path, name, original);
    }

    /// Saves the list at the trail, before elements are removed.
    fn save_list(&mut self, list: &[Value]) {
        self.save(None, || Some(Value::Array(list.to_vec())));
    }
}

impl<'a> Walk<'a, '_> {
    fn run(
        &self,
        object: &mut Value,
        trail: Option<&mut Trail<'a, '_>>,
    ) -> Result<Walked, WalkError> {
        let mut changed = Vec::new();
        let applied = self.step(object, 0, None, &mut changed, trail)?;
        Ok(Walked { applied, changed })
    }

    /// Steps into `next`, found at `at` below the place at `depth`, with the
    /// trail following it there.
    fn descend(
        &self,
        next: &mut Value,
        at: At<'a>,
        depth: usize,
        frame: Option<&Frame<'_>>,
        changed: &mut Vec<Changed>,
        mut trail: Option<&mut Trail<'a, '_>>,
    ) -> Result<bool, WalkError> {
        if let Some(trail) = trail.as_deref_mut() {
            trail.path.push(at);
        }
        let stepped = self.step(next, depth + 1, frame, changed, trail.as_deref_mut());
        if let Some(trail) = trail {
            trail.path.pop();
        }
        stepped
    }

    /// One node of the walk at `current`. `trail` is where `current` is in
    /// the object, when saving; `None` below a place the walk created and has
    /// not attached yet (nothing there to save).
    fn step(
        &self,
        current: &mut Value,
        depth: usize,
        frame: Option<&Frame<'_>>,
        changed: &mut Vec<Changed>,
        mut trail: Option<&mut Trail<'a, '_>>,
    ) -> Result<bool, WalkError> {
        let Some(node) = self.location.nodes().get(depth) else {
            return Ok(false);
        };
        let last = depth + 1 == self.location.len();
        match node {
            Node::Field(name) => {
                let Value::Object(map) = current else {
                    return Err(WalkError::NotAnObject {
                        at: self.place(depth),
                        found: kind_of(current),
                    });
                };
                // Each lookup costs a search of the map with a string compare
                // per key visited, so the key is looked up once per field
                // (twice when a pathTest names the last one): most of a deep
                // walk's time is these searches.
                if last {
                    if let Some(condition) = self.tests.condition_at(depth) {
                        let exists = map.contains_key(name);
                        let stop = match condition {
                            Condition::MustExist => !exists,
                            Condition::MustNotExist => exists,
                        };
                        if stop {
                            return Ok(false);
                        }
                    }
                    let change =
                        self.set_field(map, name, trail)
                            .map_err(|source| WalkError::Set {
                                at: self.place(depth + 1),
                                source,
                            })?;
                    if change {
                        self.record(frame, changed);
                    }
                    return Ok(true);
                }
                if let Some(next) = map.get_mut(name) {
                    if !self.tests.exists_ok(depth) {
                        return Ok(false);
                    }
                    return self.descend(next, At::Field(name), depth, frame, changed, trail);
                }
                if !self.tests.missing_ok(depth) {
                    return Ok(false);
                }
                let mut next = self.missing(depth);
                let before = changed.len();
                let mutated = self.step(&mut next, depth + 1, frame, changed, None)?;
                if mutated {
                    if let Some(trail) = trail {
                        trail.save_field(name, || None);
                    }
                    map.insert(name.clone(), next);
                    // Creating the parents is a change even when the setter
                    // left its own field alone (a ModifySet prune).
                    if changed.len() == before {
                        self.record(frame, changed);
                    }
                }
                Ok(mutated)
            }
            Node::List(selector) => {
                let Value::Array(list) = current else {
                    return Err(WalkError::NotAList {
                        at: self.place(depth),
                        found: kind_of(current),
                    });
                };
                if last {
                    let mutated = self.set_element(list, selector, depth, trail)?;
                    if let Some(true) = mutated {
                        self.record(frame, changed);
                    }
                    return Ok(mutated.is_some());
                }
                if !selector.key_value.is_concrete() {
                    if !self.tests.exists_ok(depth) {
                        return Ok(false);
                    }
                    let mut mutated = false;
                    for (element, value) in list.iter_mut().enumerate() {
                        if !pattern_selects(value, selector) {
                            continue;
                        }
                        let frame = Frame {
                            parent: frame,
                            element,
                        };
                        let at = At::Index(element);
                        let trail = trail.as_deref_mut();
                        mutated |= self.descend(value, at, depth, Some(&frame), changed, trail)?;
                    }
                    return Ok(mutated);
                }
                let mut mutated = false;
                let mut found = false;
                for (index, element) in list.iter_mut().enumerate() {
                    if key_matches(element, selector) {
                        if !self.tests.exists_ok(depth) {
                            return Ok(false);
                        }
                        let at = At::Index(index);
                        let trail = trail.as_deref_mut();
                        mutated |= self.descend(element, at, depth, frame, changed, trail)?;
                        found = true;
                    }
                }
                if !found {
                    if !self.tests.missing_ok(depth) {
                        return Ok(false);
                    }
                    let mut next = self.missing(depth);
                    let before = changed.len();
                    if self.step(&mut next, depth + 1, frame, changed, None)? {
                        if let Some(trail) = trail {
                            trail.originals.save_grown(&trail.path, list);
                        }
                        list.push(next);
                        mutated = true;
                        if changed.len() == before {
                            self.record(frame, changed);
                        }
                    }
                }
                Ok(mutated)
            }
        }
    }

    /// The location ends at the field `name` of `map`: lets the setter set
    /// it, saving on `trail` what it held, as the setter hands it back or,
    /// from a setter that cannot, as copied first.
    fn set_field(
        &self,
        map: &mut Map<String, Value>,
        name: &'a str,
        trail: Option<&mut Trail<'a, '_>>,
    ) -> Result<bool, SetError> {
        let Some(trail) = trail else {
            return self.setter.set_value(map, name);
        };
        match self.setter.replace_value(map, name) {
            Some(Ok(Replaced::Changed { before })) => {
                trail.save_field(name, || before);
                Ok(true)
            }
            Some(Ok(Replaced::Unchanged)) => Ok(false),
            Some(Err(error)) => Err(error),
            None => {
                trail.save_field(name, || map.get(name).cloned());
                self.setter.set_value(map, name)
            }
        }
    }

    /// The location ends at `[key: value]`: replace the first matching element
    /// with the setter's element, or append it. `None` when a pathTest stopped
    /// the walk, otherwise whether the list changed.
    fn set_element(
        &self,
        list: &mut Vec<Value>,
        selector: &ListSelector,
        depth: usize,
        mut trail: Option<&mut Trail<'a, '_>>,
    ) -> Result<Option<bool>, WalkError> {
        let at = || self.place(depth + 1);
        if self.setter.removes() {
            return self.remove_elements(list, selector, depth, trail);
        }
        match selector.key_value {
            KeyValue::Glob => return Err(WalkError::GlobAtEnd { at: at() }),
            KeyValue::NotIn(_) => return Err(WalkError::ExclusionAtEnd { at: at() }),
            KeyValue::String(_) | KeyValue::Integer(_) => {}
        }
        let element = self
            .setter
            .keyed_list_value()
            .map_err(|source| WalkError::Set { at: at(), source })?;
        for (index, existing) in list.iter_mut().enumerate() {
            let Value::Object(existing_map) = existing else {
                return Err(WalkError::ElementNotAnObject {
                    list: self.place(depth),
                    index,
                    found: kind_of(existing),
                    key: selector.key_field.clone(),
                });
            };
            if existing_map
                .get(&selector.key_field)
                .is_some_and(|v| value_equals(v, &selector.key_value))
            {
                if !element
                    .get(&selector.key_field)
                    .is_some_and(|v| value_equals(v, &selector.key_value))
                {
                    return Err(WalkError::KeyChanged {
                        at: at(),
                        key: selector.key_field.clone(),
                        value: selector.key_value.to_string(),
                    });
                }
                if !self.tests.exists_ok(depth) {
                    return Ok(None);
                }
                if existing_map == element {
                    return Ok(Some(false));
                }
                if let Some(trail) = trail.as_deref_mut() {
                    trail.save(Some(At::Index(index)), || {
                        Some(Value::Object(existing_map.clone()))
                    });
                }
                existing_map.clone_from(element);
                return Ok(Some(true));
            }
        }
        if !self.tests.missing_ok(depth) {
            return Ok(None);
        }
        if let Some(trail) = trail {
            trail.originals.save_grown(&trail.path, list);
        }
        list.push(Value::Object(element.clone()));
        Ok(Some(true))
    }

    /// The location ends at a selector and the setter removes: every element
    /// it selects goes (for `[key: value]`, every element with that key).
    /// `None` when a pathTest stopped the walk (nothing selected, under the
    /// removal's MustExist), otherwise whether the list changed.
    fn remove_elements(
        &self,
        list: &mut Vec<Value>,
        selector: &ListSelector,
        depth: usize,
        trail: Option<&mut Trail<'a, '_>>,
    ) -> Result<Option<bool>, WalkError> {
        let mut selected = Vec::new();
        for (index, element) in list.iter().enumerate() {
            if !element.is_object() {
                return Err(WalkError::ElementNotAnObject {
                    list: self.place(depth),
                    index,
                    found: kind_of(element),
                    key: selector.key_field.clone(),
                });
            }
            // Every element with the key (the elements a `[key: value]`
            // inside a location visits), so a list holding the key twice
            // loses both at once and the removal settles in one pass.
            let picked = if selector.key_value.is_concrete() {
                key_matches(element, selector)
            } else {
                pattern_selects(element, selector)
            };
            if picked {
                selected.push(index);
            }
        }
        if selected.is_empty() {
            return Ok(self.tests.missing_ok(depth).then_some(false));
        }
        if !self.tests.exists_ok(depth) {
            return Ok(None);
        }
        if let Some(trail) = trail {
            trail.save_list(list);
        }
        let mut index = 0;
        list.retain(|_| {
            let keep = !selected.contains(&index);
            index += 1;
            keep
        });
        Ok(Some(true))
    }

    fn record(&self, frame: Option<&Frame<'_>>, changed: &mut Vec<Changed>) {
        let elements = match self.records {
            Records::Pinned => Frame::elements(frame),
            Records::Unpinned => Vec::new(),
            Records::Nothing => return,
        };
        changed.push(Changed { elements });
    }

    /// What to create for the missing node at `depth`: `{}` or `[]` depending
    /// on the node after it, seeded with the key when `depth` is a list selector.
    fn missing(&self, depth: usize) -> Value {
        let nodes = self.location.nodes();
        if let Some(Node::List(selector)) = nodes.get(depth) {
            let mut element = Map::new();
            element.insert(
                selector.key_field.clone(),
                key_value_json(&selector.key_value),
            );
            return Value::Object(element);
        }
        match nodes.get(depth + 1) {
            Some(Node::List(_)) => Value::Array(Vec::new()),
            _ => Value::Object(Map::new()),
        }
    }

    fn place(&self, len: usize) -> Place {
        Place(self.location.prefix(len))
    }
}

/// Whether `element` is an object whose key field equals the selector's value.
fn key_matches(element: &Value, selector: &ListSelector) -> bool {
    element
        .get(&selector.key_field)
        .is_some_and(|v| value_equals(v, &selector.key_value))
}

/// Whether the glob or exclusion `selector` visits `element`: a glob every
/// element; `notin` every element whose key field is missing or equals none
/// of its values (so exactly the glob's elements minus what `[key: value]`
/// would visit for each value). Elements that are not objects have no key and
/// are visited, to fail as they do under a glob.
fn pattern_selects(element: &Value, selector: &ListSelector) -> bool {
    let KeyValue::NotIn(set) = &selector.key_value else {
        return true;
    };
    match element.get(&selector.key_field) {
        Some(key) => !set.values().iter().any(|value| literal_equals(key, value)),
        None => true,
    }
}

/// Gatekeeper compares with Go `==` on decoded JSON: strings with strings,
/// integers with integers; a float never equals an integer key.
pub(crate) fn value_equals(value: &Value, key_value: &KeyValue) -> bool {
    match key_value {
        KeyValue::String(s) => value.as_str().is_some_and(|v| same_key(v, s)),
        KeyValue::Integer(n) => integer_equals(value, *n),
        KeyValue::Glob | KeyValue::NotIn(_) => false,
    }
}

/// String equality for keys that often share a prefix (keyed-list keys such
/// as `VAR_01` and `VAR_02`, label keys): the last bytes are compared before
/// the whole, so most keys a scan passes over cost no call to `memcmp`.
pub(crate) fn same_key(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.as_bytes().last() == b.as_bytes().last() && a == b
}

/// [`value_equals`] for one value of a `notin` set.
fn literal_equals(value: &Value, literal: &Literal) -> bool {
    match literal {
        Literal::String(s) => value.as_str().is_some_and(|v| same_key(v, s)),
        Literal::Integer(n) => integer_equals(value, *n),
    }
}

fn integer_equals(value: &Value, n: i64) -> bool {
    match value {
        Value::Number(number) => number.as_i64() == Some(n),
        _ => false,
    }
}

/// The JSON form of a concrete key value (`Null` for a glob or an exclusion).
pub(crate) fn key_value_json(key_value: &KeyValue) -> Value {
    match key_value {
        KeyValue::String(s) => Value::String(s.clone()),
        KeyValue::Integer(n) => Value::from(*n),
        KeyValue::Glob | KeyValue::NotIn(_) => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sartor_location::{Condition, PathTest};
    use serde_json::json;

    /// Sets a constant, like Assign's `value`.
    struct Constant(Value);

    impl Setter for Constant {
        fn set_value(&self, object: &mut Map<String, Value>, key: &str) -> Result<bool, SetError> {
            Ok(object.insert(key.to_string(), self.0.clone()).as_ref() != Some(&self.0))
        }

        fn keyed_list_value(&self) -> Result<&Map<String, Value>, SetError> {
            match &self.0 {
                Value::Object(map) => Ok(map),
                other => Err(SetError::NotAnObjectValue(kind_of(other))),
            }
        }
    }

    /// Can only set fields, like ModifySet.
    struct FieldsOnly;

    impl Setter for FieldsOnly {
        fn set_value(&self, object: &mut Map<String, Value>, key: &str) -> Result<bool, SetError> {
            Ok(object.insert(key.to_string(), json!([])).is_none())
        }
    }

    fn run(
        location: &str,
        tests: &[(&str, Condition)],
        value: Value,
        mut object: Value,
    ) -> (Result<bool, String>, Value) {
        let location = Path::parse(location).unwrap();
        let tests: Vec<PathTest> = tests
            .iter()
            .map(|(sub_path, condition)| PathTest {
                sub_path: Path::parse(sub_path).unwrap(),
                condition: *condition,
            })
            .collect();
        let tests = PathTests::new(&location, &tests).unwrap();
        let result = mutate(&location, &tests, &Constant(value), &mut object)
            .map(|walked| walked.applied)
            .map_err(|e| e.to_string());
        (result, object)
    }

    #[test]
    fn creates_missing_parents() {
        assert_eq!(
            run("spec.a.b", &[], json!(1), json!({"kind": "X"})),
            (Ok(true), json!({"kind": "X", "spec": {"a": {"b": 1}}}))
        );
        assert_eq!(
            run(
                "spec.containers[name: foo].image",
                &[],
                json!("nginx"),
                json!({})
            ),
            (
                Ok(true),
                json!({"spec": {"containers": [{"name": "foo", "image": "nginx"}]}})
            )
        );
    }

    #[test]
    fn a_keyed_selector_sets_every_match_or_appends() {
        let pod = json!({"spec": {"containers": [
            {"name": "foo", "image": "a"},
            {"name": "bar", "image": "b"},
            {"name": "foo", "image": "c"},
        ]}});
        assert_eq!(
            run(
                "spec.containers[name: foo].image",
                &[],
                json!("x"),
                pod.clone()
            ),
            (
                Ok(true),
                json!({"spec": {"containers": [
                    {"name": "foo", "image": "x"},
                    {"name": "bar", "image": "b"},
                    {"name": "foo", "image": "x"},
                ]}})
            )
        );
        assert_eq!(
            run("spec.containers[name: baz].image", &[], json!("x"), pod),
            (
                Ok(true),
                json!({"spec": {"containers": [
                    {"name": "foo", "image": "a"},
                    {"name": "bar", "image": "b"},
                    {"name": "foo", "image": "c"},
                    {"name": "baz", "image": "x"},
                ]}})
            )
        );
    }

    #[test]
    fn integer_keys_match_numbers_only() {
        let ports = json!({"ports": [{"port": 80}, {"port": "80"}, {"port": 80.0}]});
        assert_eq!(
            run("ports[port: 80].open", &[], json!(true), ports.clone()),
            (
                Ok(true),
                json!({"ports": [{"port": 80, "open": true}, {"port": "80"}, {"port": 80.0}]})
            )
        );
        assert_eq!(
            run(r#"ports[port: "80"].open"#, &[], json!(true), ports),
            (
                Ok(true),
                json!({"ports": [{"port": 80}, {"port": "80", "open": true}, {"port": 80.0}]})
            )
        );
    }

    #[test]
    fn a_glob_visits_every_element_and_creates_none() {
        assert_eq!(
            run(
                "spec.containers[name: *].imagePullPolicy",
                &[],
                json!("Always"),
                json!({"spec": {"containers": [{"name": "a"}, {"image": "no-name"}]}})
            ),
            (
                Ok(true),
                json!({"spec": {"containers": [
                    {"name": "a", "imagePullPolicy": "Always"},
                    {"image": "no-name", "imagePullPolicy": "Always"},
                ]}})
            )
        );
        assert_eq!(
            run(
                "spec.containers[name: *].x",
                &[],
                json!(1),
                json!({"spec": {"containers": []}})
            ),
            (Ok(false), json!({"spec": {"containers": []}}))
        );
        // The missing list is created only if something below changes: here nothing does.
        assert_eq!(
            run("spec.containers[name: *].x", &[], json!(1), json!({})),
            (Ok(false), json!({}))
        );
    }

    #[test]
    fn an_exclusion_visits_what_a_glob_visits_but_the_listed_keys() {
        let pod = json!({"spec": {"containers": [
            {"name": "app"},
            {"name": "istio-proxy"},
            {"image": "no-name"},
            {"name": 7},
            {"name": "7"},
            {"name": 7.0},
            {"name": {"istio-proxy": 1}},
        ]}});
        assert_eq!(
            run(
                "spec.containers[name notin (istio-proxy, 7)].x",
                &[],
                json!(1),
                pod
            ),
            (
                Ok(true),
                json!({"spec": {"containers": [
                    {"name": "app", "x": 1},
                    {"name": "istio-proxy"},
                    {"image": "no-name", "x": 1},
                    {"name": 7},
                    {"name": "7", "x": 1},
                    {"name": 7.0, "x": 1},
                    {"name": {"istio-proxy": 1}, "x": 1},
                ]}})
            )
        );
        // Nothing to visit is nothing to do: no element, no list is created.
        assert_eq!(
            run(
                "spec.containers[name notin (a)].x",
                &[],
                json!(1),
                json!({"spec": {"containers": [{"name": "a"}]}})
            ),
            (Ok(false), json!({"spec": {"containers": [{"name": "a"}]}}))
        );
        assert_eq!(
            run(
                "spec.containers[name notin (a)].x",
                &[],
                json!(1),
                json!({})
            ),
            (Ok(false), json!({}))
        );
        // MustNotExist on the exclusion level blocks whenever the walk gets there.
        assert_eq!(
            run(
                "spec.containers[name notin (a)].x",
                &[("spec.containers[name notin (a)]", Condition::MustNotExist)],
                json!(1),
                json!({"spec": {"containers": [{"name": "b"}]}})
            ),
            (Ok(false), json!({"spec": {"containers": [{"name": "b"}]}}))
        );
        // Elements that are not objects fail as they do under a glob, unless excluded
        // (they cannot be: they have no key).
        assert_eq!(
            run(
                "spec.containers[name notin (a)].x",
                &[],
                json!(1),
                json!({"spec": {"containers": [3]}})
            )
            .0,
            Err("spec.containers[name notin (a)] is a number, not an object".to_string())
        );
        assert_eq!(
            run(
                "spec.containers[name notin (a)]",
                &[],
                json!({"name": "b"}),
                json!({"spec": {"containers": []}})
            )
            .0,
            Err(
                "spec.containers[name notin (a)]: a location cannot end in a notin selector"
                    .to_string()
            )
        );
    }

    #[test]
    fn path_tests_guard_each_depth() {
        use Condition::{MustExist, MustNotExist};
        let pod = json!({"spec": {"containers": [{"name": "a", "imagePullPolicy": "Never"}, {"name": "b"}]}});
        assert_eq!(
            run(
                "spec.containers[name: *].imagePullPolicy",
                &[("spec.containers[name: *].imagePullPolicy", MustNotExist)],
                json!("Always"),
                pod.clone()
            ),
            (
                Ok(true),
                json!({"spec": {"containers": [
                    {"name": "a", "imagePullPolicy": "Never"},
                    {"name": "b", "imagePullPolicy": "Always"},
                ]}})
            )
        );
        // MustExist on a missing keyed element: nothing is created.
        assert_eq!(
            run(
                r#"spec.containers[name: "sidecar"].imagePullPolicy"#,
                &[(r#"spec.containers[name: "sidecar"]"#, MustExist)],
                json!("Always"),
                pod.clone()
            ),
            (Ok(false), pod)
        );
        // A test failing deep down leaves no half-created parents.
        assert_eq!(
            run(
                "spec.a.b.c",
                &[("spec.a.b.c", MustExist)],
                json!(1),
                json!({"spec": {}})
            ),
            (Ok(false), json!({"spec": {}}))
        );
        // A present null counts as existing.
        assert_eq!(
            run(
                "spec.x",
                &[("spec.x", MustNotExist)],
                json!(1),
                json!({"spec": {"x": null}})
            ),
            (Ok(false), json!({"spec": {"x": null}}))
        );
        // MustNotExist on a glob level blocks whenever the walk gets there.
        assert_eq!(
            run(
                "spec.containers[name: *].x",
                &[("spec.containers[name: *]", MustNotExist)],
                json!(1),
                json!({"spec": {"containers": []}})
            ),
            (Ok(false), json!({"spec": {"containers": []}}))
        );
    }

    #[test]
    fn ending_at_a_keyed_element_replaces_the_first_match() {
        let pod = json!({"spec": {"containers": [{"name": "net", "image": "old"}, {"name": "net", "image": "dup"}]}});
        assert_eq!(
            run(
                "spec.containers[name: net]",
                &[],
                json!({"name": "net", "image": "new"}),
                pod.clone()
            ),
            (
                Ok(true),
                json!({"spec": {"containers": [{"name": "net", "image": "new"}, {"name": "net", "image": "dup"}]}})
            )
        );
        assert_eq!(
            run(
                "spec.containers[name: other]",
                &[],
                json!({"name": "other"}),
                pod.clone()
            )
            .1,
            json!({"spec": {"containers": [
                {"name": "net", "image": "old"}, {"name": "net", "image": "dup"}, {"name": "other"}
            ]}})
        );
        assert_eq!(
            run(
                "spec.containers[name: net]",
                &[],
                json!({"name": "web"}),
                pod.clone()
            )
            .0,
            Err("spec.containers[name: net]: the new element must keep name: net".to_string())
        );
        assert_eq!(
            run("spec.containers[name: net]", &[], json!("text"), pod.clone()).0,
            Err("spec.containers[name: net]: the value for a keyed-list element must be an object, got a string".to_string())
        );
        assert_eq!(
            run("spec.containers[name: *]", &[], json!({"name": "x"}), pod).0,
            Err("spec.containers[name: *]: a location cannot end in a glob".to_string())
        );
    }

    #[test]
    fn values_in_the_way_are_errors_naming_the_place() {
        assert_eq!(
            run("spec.a.b", &[], json!(1), json!({"spec": {"a": "text"}})).0,
            Err("spec.a is a string, not an object".to_string())
        );
        assert_eq!(
            run(
                "spec.containers[name: a].x",
                &[],
                json!(1),
                json!({"spec": {"containers": {"a": 1}}})
            )
            .0,
            Err("spec.containers is an object, not a list".to_string())
        );
        assert_eq!(
            run(
                "spec.containers[name: *].x",
                &[],
                json!(1),
                json!({"spec": {"containers": [3]}})
            )
            .0,
            Err("spec.containers[name: *] is a number, not an object".to_string())
        );
        assert_eq!(
            run("spec", &[], json!(1), json!([1])).0,
            Err("the object is a list, not an object".to_string())
        );
    }

    #[test]
    fn a_keyed_list_of_non_objects_names_the_element() {
        assert_eq!(
            run(
                "spec.c[name: x]",
                &[],
                json!({"name": "x"}),
                json!({"spec": {"c": [{"name": "y"}, "s"]}})
            )
            .0,
            Err("element 1 of spec.c is a string, not an object with a name field".to_string())
        );
    }

    #[test]
    fn kinds_without_keyed_list_support_say_so() {
        let location = Path::parse("spec.containers[name: a]").unwrap();
        let tests = PathTests::new(&location, &[]).unwrap();
        let mut object = json!({});
        assert_eq!(
            mutate(&location, &tests, &FieldsOnly, &mut object)
                .unwrap_err()
                .to_string(),
            "spec.containers[name: a]: this mutator kind cannot set a keyed-list element"
        );
    }

    fn changed_paths(location: &str, value: Value, mut object: Value) -> Vec<String> {
        let location = Path::parse(location).unwrap();
        let tests = PathTests::new(&location, &[]).unwrap();
        let walked = mutate(&location, &tests, &Constant(value), &mut object).unwrap();
        walked
            .changed
            .iter()
            .map(|c| c.path(&location, &object).to_string())
            .collect()
    }

    #[test]
    fn changes_name_the_elements_a_glob_visited() {
        let pod = json!({"spec": {"containers": [
            {"name": "a", "x": 1}, {"name": "b"}, {"image": "no-name"}, {"name": 7},
        ]}});
        assert_eq!(
            changed_paths("spec.containers[name: *].x", json!(1), pod.clone()),
            [
                "spec.containers[name: b].x",
                "spec.containers[name: *].x",
                "spec.containers[name: 7].x"
            ]
        );
        assert_eq!(
            changed_paths("spec.containers[name: c].x", json!(1), pod.clone()),
            ["spec.containers[name: c].x"]
        );
        assert_eq!(
            changed_paths("spec.containers[name: a].x", json!(1), pod.clone()),
            Vec::<String>::new()
        );
        assert_eq!(
            changed_paths(
                "spec.containers[name: a]",
                json!({"name": "a", "x": 1}),
                pod
            ),
            Vec::<String>::new()
        );
    }

    #[test]
    fn changes_name_the_elements_an_exclusion_visited() {
        let pod = json!({"spec": {"containers": [
            {"name": "a", "ports": [{"port": 80}, {"port": 443}, {"port": "80"}, {"port": 1.5}]},
            {"name": "skip", "ports": [{"port": 8080}]},
            {"ports": [{"port": 9090}]},
        ]}});
        assert_eq!(
            changed_paths(
                "spec.containers[name notin (skip)].ports[port notin (80)].x",
                json!(1),
                pod
            ),
            [
                "spec.containers[name: a].ports[port: 443].x",
                r#"spec.containers[name: a].ports[port: "80"].x"#,
                "spec.containers[name: a].ports[port notin (80)].x",
                "spec.containers[name notin (skip)].ports[port: 9090].x",
            ]
        );
    }

    #[test]
    fn creating_parents_is_a_change_even_when_the_setter_changes_nothing() {
        struct Noop;
        impl Setter for Noop {
            fn set_value(&self, _: &mut Map<String, Value>, _: &str) -> Result<bool, SetError> {
                Ok(false)
            }
        }
        let location = Path::parse("spec.a[name: x].args").unwrap();
        let tests = PathTests::new(&location, &[]).unwrap();
        let mut object = json!({});
        let walked = mutate(&location, &tests, &Noop, &mut object).unwrap();
        assert_eq!(object, json!({"spec": {"a": [{"name": "x"}]}}));
        assert!(walked.applied);
        assert_eq!(walked.changed.len(), 1);
        let walked = mutate(&location, &tests, &Noop, &mut object).unwrap();
        assert_eq!((walked.applied, walked.changed), (true, Vec::new()));
    }

    #[test]
    fn keys_are_equal_only_when_every_byte_is() {
        let pairs = [
            ("VAR_01", "VAR_01", true),
            ("", "", true),
            ("VAR_01", "VAR_02", false),
            ("a1z", "a2z", false),
            ("VAR_1", "VAR_01", false),
            ("é", "è", false),
        ];
        for (a, b, equal) in pairs {
            assert_eq!(same_key(a, b), equal, "{a} and {b}");
            assert_eq!(same_key(b, a), equal, "{b} and {a}");
        }
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (0i64..100).prop_map(Value::from),
            prop::sample::select(vec!["a", "b", "foo", "80"]).prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop::sample::select(vec!["spec", "name", "port", "a", "containers"]),
                    inner,
                    0..4
                )
                .prop_map(|m| Value::Object(
                    m.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
                )),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn never_panics_and_setting_a_constant_is_idempotent(
            object in json_value(),
            location in proptest::sample::select(vec![
                "spec.a", "spec.containers[name: foo].a", "spec.containers[name: *].a",
                "containers[port: 80].name", "spec.containers[name: foo]", "a[name: *]",
                "spec.containers[name notin (foo, b)].a", "containers[port notin (80)].name",
                "a[name notin (foo)]",
            ]),
            value in json_value(),
        ) {
            let location = Path::parse(location).unwrap();
            let tests = PathTests::new(&location, &[]).unwrap();
            // An element set into a keyed list carries its key (compile rejects
            // anything else); without it every run would append another one.
            let value = match location.nodes().last() {
                Some(Node::List(l)) if l.key_value.is_concrete() => {
                    json!({l.key_field.clone(): key_value_json(&l.key_value), "x": value})
                }
                _ => value,
            };
            let setter = Constant(value);
            let mut once = object;
            if mutate(&location, &tests, &setter, &mut once).is_ok() {
                let mut twice = once.clone();
                let again = mutate(&location, &tests, &setter, &mut twice);
                proptest::prop_assert_eq!(again.map(|w| w.changed), Ok(Vec::new()));
                proptest::prop_assert_eq!(twice, once);
            }
        }
    }
}
