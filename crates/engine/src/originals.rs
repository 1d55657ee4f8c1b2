//! The admitted object, kept as the original values of the places a mutation
//! changed.
//!
//! [`System::mutate`](crate::System::mutate) changes the caller's object in
//! place rather than a copy of it. Before the first change at a place, the
//! walk saves what the place held (or that it was absent); a later change
//! inside a saved place saves nothing, and a save around earlier ones folds
//! them in, so the saved places never nest. Outside them the object is as
//! admitted. That is enough to answer everything the copy answered:
//!
//! - whether the object is as admitted ([`Originals::unchanged`]): every saved
//!   place holds its original again;
//! - the admitted object itself ([`Originals::restore`]), for a replay of the
//!   passes, an error or a run waiting for external data;
//! - the patch, which diffs only the saved places
//!   ([`patch::between`](crate::patch)).
//!
//! A place is a path of object fields and list indexes. Indexes stay valid:
//! replacing or removing list elements saves the whole list first, so no
//! index below a saved place is read again, and no list above one changes
//! shape. Adding elements at a list's end keeps the indexes before them: the
//! list only notes how many elements it kept ([`Originals::save_grown`]),
//! and nothing is saved inside the added ones.

use serde_json::{Map, Value};

use crate::walk::same_key;

/// Past this many places below one, a save bisects them (they are sorted)
/// instead of scanning: a ConfigMap's or a label map's many keys.
const BISECT_PAST: usize = 16;

/// From this many places below a map, and half its entries, a save of one
/// more saves the map whole instead ([`Originals::save_field`]).
const WHOLE_FROM: usize = 64;

/// One step of a place's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum At<'s> {
    /// An object field.
    Field(&'s str),
    /// A list element, by position.
    Index(usize),
}

/// The original value of every place a mutation changed, as a tree of the
/// places' paths: finding whether a place is saved, or inside a saved one,
/// follows its path once.
#[derive(Debug, Default)]
pub(crate) struct Originals<'s> {
    root: Node<'s>,
    /// The path buffer walks borrow ([`Originals::lend_path`]).
    path: Vec<At<'s>>,
}

/// A place on the path to saved places, or saved itself.
#[derive(Debug, Clone, Default)]
pub(crate) struct Node<'s> {
    /// What the place held before its first change, when it is saved
    /// (`Some(None)`: it was absent). Nothing below a saved place is kept.
    pub(crate) saved: Option<Option<Value>>,
    /// For a list that elements were added to at its end (and none taken
    /// away before that): how many it held before. The places below are
    /// among those.
    pub(crate) kept: Option<u32>,
    /// The places below on the way to saved ones, sorted by step: fields
    /// in the object's key order, which the patch follows.
    pub(crate) below: Vec<(At<'s>, Node<'s>)>,
}

// === impl At ===

impl At<'_> {
    /// Whether two steps are the same; field names compare as keyed-list
    /// keys do ([`same_key`]): the places below one are often labels that
    /// share a prefix.
    fn same(&self, other: &At<'_>) -> bool {
        match (self, other) {
            (At::Field(a), At::Field(b)) => same_key(a, b),
            (At::Index(a), At::Index(b)) => a == b,
            _ => false,
        }
    }
}

// === impl Originals ===

impl<'s> Originals<'s> {
    /// A buffer for a walk's path, to give back with
    /// [`Originals::return_path`]: one allocation for every walk of a
    /// mutation.
    pub(crate) fn lend_path(&mut self) -> Vec<At<'s>> {
        std::mem::take(&mut self.path)
    }

    /// Takes back the buffer [`Originals::lend_path`] lent.
    pub(crate) fn return_path(&mut self, path: Vec<At<'s>>) {
        self.path = path;
    }

    /// Whether nothing was saved: nothing was changed.
    pub(crate) fn is_empty(&self) -> bool {
        self.root.saved.is_none() && self.root.below.is_empty()
    }

    /// The tree of saved places, from the object itself.
    pub(crate) fn root(&self) -> &Node<'s> {
        &self.root
    }

    /// Saves what `path` holds, `original()`, before it is changed: only the
    /// first time (a place inside a saved one is saved already). Places saved
    /// inside `path` are folded into its original.
    #[inline]
    pub(crate) fn save(&mut self, path: &[At<'s>], original: impl FnOnce() -> Option<Value>) {
        if let Some(node) = self.node_at(path) {
            node.save(original);
        }
    }

    /// Saves the field `name` of `map`, the map at `path`, as
    /// [`Originals::save`] would; `original()` is what `name` held before
    /// (`map` may hold its change already). Once the fields saved there are
    /// many and half the map's entries, the map is saved whole instead: one
    /// copy of it costs less than keeping the many saved fields sorted, the
    /// more so the more follow (a ConfigMap through 1,000 Assigns).
    #[inline]
    pub(crate) fn save_field(
        &mut self,
        path: &[At<'s>],
        name: &'s str,
        map: &Map<String, Value>,
        original: impl FnOnce() -> Option<Value>,
    ) {
        let Some(node) = self.node_at(path) else {
            return;
        };
        if node.saved.is_some() {
            return;
        }
        let field = At::Field(name);
        let whole = node.below.len() >= WHOLE_FROM && 2 * node.below.len() >= map.len();
        match node.find(&field) {
            Err(index) if whole => {
                let this = Node {
                    saved: Some(original()),
                    ..Node::default()
                };
                node.below.insert(index, (field, this));
                let below = std::mem::take(&mut node.below);
                node.saved = Some(Some(Value::Object(original_map(map, below))));
            }
            Ok(index) => {
                if let Some((_, field)) = node.below.get_mut(index) {
                    field.save(original);
                }
            }
            Err(index) => {
                node.below.insert(index, (field, Node::default()));
                if let Some((_, field)) = node.below.get_mut(index) {
                    field.save(original);
                }
            }
        }
    }

    /// Notes that elements are about to be added at the end of `list`, the
    /// list at `path`: the places before them stay where they are, so only
    /// its length is kept (the list is saved whole when that cannot be).
    pub(crate) fn save_grown(&mut self, path: &[At<'s>], list: &[Value]) {
        let Some(node) = self.node_at(path) else {
            return;
        };
        if node.saved.is_some() || node.kept.is_some() {
            return;
        }
        match u32::try_from(list.len()) {
            Ok(len) => node.kept = Some(len),
            Err(_) => node.save(|| Some(Value::Array(list.to_vec()))),
        }
    }

    /// The node of `path`, added on the way when missing; `None` inside a
    /// saved place.
    #[inline(always)]
    fn node_at(&mut self, path: &[At<'s>]) -> Option<&mut Node<'s>> {
        let mut node = &mut self.root;
        for at in path {
            if node.saved.is_some() || node.added(at) {
                return None;
            }
            node = node.place(at)?;
        }
        Some(node)
    }

    /// Whether every saved place holds its original again: then the object
    /// is as admitted.
    pub(crate) fn unchanged(&self, object: &Value) -> bool {
        self.root.unchanged(Some(object))
    }

    /// Puts every saved place's original back into `object`, which makes it
    /// the admitted object again.
    pub(crate) fn restore(&self, object: &mut Value) {
        match &self.root.saved {
            Some(Some(original)) => *object = original.clone(),
            _ => fold(object, self.root.below.clone()),
        }
    }
}

// === impl Node ===

impl<'s> Node<'s> {
    /// Where `at` is among the places below, or where it would go.
    #[inline(always)]
    fn find(&self, at: &At<'s>) -> Result<usize, usize> {
        // Few places below one, mostly found: an equality scan (lengths
        // first) costs less than ordering strings. Many (a ConfigMap's
        // entries, 1,000 Assigns under `data`): the scan made each save
        // linear in the places saved, so they are bisected (they are kept
        // sorted).
        if self.below.len() > BISECT_PAST {
            self.below.binary_search_by(|(step, _)| step.cmp(at))
        } else {
            self.below
                .iter()
                .position(|(step, _)| step.same(at))
                .ok_or_else(|| self.below.partition_point(|(step, _)| step < at))
        }
    }

    /// Whether `at` is an element added to this list (nothing to save).
    #[inline(always)]
    fn added(&self, at: &At<'_>) -> bool {
        match (self.kept, at) {
            (Some(kept), At::Index(index)) => *index >= kept as usize,
            _ => false,
        }
    }

    /// The place `at` below this one, added when missing.
    #[inline(always)]
    fn place(&mut self, at: &At<'s>) -> Option<&mut Node<'s>> {
        let index = match self.find(at) {
            Ok(index) => index,
            Err(index) => {
                self.below.insert(index, (*at, Node::default()));
                index
            }
        };
        self.below.get_mut(index).map(|(_, node)| node)
    }

    /// Saves `original()` here unless saved already, folding in the places
    /// saved below.
    #[inline]
    fn save(&mut self, original: impl FnOnce() -> Option<Value>) {
        if self.saved.is_some() {
            return;
        }
        let mut value = original();
        let below = std::mem::take(&mut self.below);
        if let Some(value) = &mut value {
            truncate(value, self.kept.take());
            fold(value, below);
        }
        self.saved = Some(value);
    }
}

impl Node<'_> {
    /// What this place held as admitted, when it holds `current` now
    /// (`None`: absent).
    fn original(self, current: Option<&Value>) -> Option<Value> {
        match self.saved {
            Some(original) => original,
            None => current.map(|current| {
                let mut value = current.clone();
                truncate(&mut value, self.kept);
                fold(&mut value, self.below);
                value
            }),
        }
    }

    /// Whether the saved places at and below this one, which holds
    /// `current`, hold their originals.
    fn unchanged(&self, current: Option<&Value>) -> bool {
        match &self.saved {
            Some(original) => original.as_ref() == current,
            None if self.kept.is_some_and(|kept| {
                current.and_then(Value::as_array).map(Vec::len) != Some(kept as usize)
            }) =>
            {
                false
            }
            None => self.below.iter().all(|(at, node)| {
                current.is_some_and(|current| node.unchanged(step(current, *at)))
            }),
        }
    }
}

/// Puts the originals saved in `below` (the places below the one holding
/// `value`) into `value`.
fn fold(value: &mut Value, below: Vec<(At<'_>, Node<'_>)>) {
    for (at, node) in below {
        match node.saved {
            Some(original) => put(value, at, original),
            None => {
                if let Some(next) = step_mut(value, at) {
                    truncate(next, node.kept);
                    fold(next, node.below);
                }
            }
        }
    }
}

/// The map whose places below are `below` (sorted, as nodes keep them) and
/// which holds `current` now: `current`'s entries, each saved one as it
/// was. Both are in key order, so they are merged in one pass and the map
/// built from sorted entries, without a search.
fn original_map(
    current: &Map<String, Value>,
    below: Vec<(At<'_>, Node<'_>)>,
) -> Map<String, Value> {
    let mut entries: Vec<(String, Value)> = Vec::with_capacity(current.len() + below.len());
    let mut now = current.iter().peekable();
    let mut saved = below
        .into_iter()
        .filter_map(|(at, node)| match at {
            At::Field(name) => Some((name, node)),
            At::Index(_) => None,
        })
        .peekable();
    loop {
        let (key, value) = match (now.peek(), saved.peek()) {
            (None, None) => break,
            (Some((key, _)), Some((name, _))) if key.as_str() > *name => match saved.next() {
                Some((name, node)) => (name.to_string(), node.original(None)),
                None => break,
            },
            (None, Some(_)) => match saved.next() {
                Some((name, node)) => (name.to_string(), node.original(None)),
                None => break,
            },
            (Some((key, _)), Some((name, _))) if key.as_str() == *name => {
                match (now.next(), saved.next()) {
                    (Some((key, value)), Some((_, node))) => {
                        (key.clone(), node.original(Some(value)))
                    }
                    _ => break,
                }
            }
            (Some(_), _) => match now.next() {
                Some((key, value)) => (key.clone(), Some(value.clone())),
                None => break,
            },
        };
        if let Some(value) = value {
            entries.push((key, value));
        }
    }
    entries.into_iter().collect()
}

/// Takes away the elements added to the list `value` after the `kept` it
/// held.
fn truncate(value: &mut Value, kept: Option<u32>) {
    if let (Some(kept), Value::Array(list)) = (kept, value) {
        list.truncate(kept as usize);
    }
}

/// What `at` leads to from `current`.
pub(crate) fn step<'v>(current: &'v Value, at: At<'_>) -> Option<&'v Value> {
    match at {
        At::Field(name) => current.as_object()?.get(name),
        At::Index(index) => current.as_array()?.get(index),
    }
}

fn step_mut<'v>(current: &'v mut Value, at: At<'_>) -> Option<&'v mut Value> {
    match at {
        At::Field(name) => current.as_object_mut()?.get_mut(name),
        At::Index(index) => current.as_array_mut()?.get_mut(index),
    }
}

/// What `path` holds in `value`, if anything.
#[cfg(test)]
pub(crate) fn get<'v>(value: &'v Value, path: &[At<'_>]) -> Option<&'v Value> {
    path.iter()
        .try_fold(value, |current, at| step(current, *at))
}

/// Makes `at` in `parent` hold `original` (`None`: absent).
fn put(parent: &mut Value, at: At<'_>, original: Option<Value>) {
    match (parent, at, original) {
        (Value::Object(map), At::Field(name), Some(original)) => {
            map.insert(name.to_string(), original);
        }
        (Value::Object(map), At::Field(name), None) => {
            map.remove(name);
        }
        (Value::Array(list), At::Index(index), Some(original)) => {
            if let Some(element) = list.get_mut(index) {
                *element = original;
            }
        }
        // A list element is never saved absent (adding one saves the list),
        // and a saved place's parents keep their shape.
        _ => {}
    }
}

#[cfg(test)]
pub(crate) mod tests;
