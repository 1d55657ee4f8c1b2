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
//!
//! A map with many saved fields (a ConfigMap through 1,000 Assigns) keeps
//! those saved after the first [`FLAT_FROM`] in a flat list, in the order
//! saved: keeping them sorted cost a search per save, and copying the map
//! whole cost more than everything else a save does. The readers sort the
//! list when they need its order (the patch), and most never do: a changed
//! place among the sorted ones already answers [`Originals::unchanged`].

use serde_json::Value;

use crate::walk::same_key;

/// Past this many places below one, a save bisects them (they are sorted)
/// instead of scanning: a ConfigMap's or a label map's many keys.
const BISECT_PAST: usize = 16;

/// From this many places below a map, the map's fields are saved in its
/// flat list ([`Node::flat`]) instead.
const FLAT_FROM: usize = 32;

/// A place below a node, as the readers in key order see it: one of the
/// places below, or a field saved flat.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Place<'n, 's> {
    Below(&'n Node<'s>),
    Flat(&'n Option<Value>),
}

/// A map's fields saved flat ([`Node::flat`]).
type Flat<'s> = Vec<(&'s str, Option<Value>)>;

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
    /// The places below on the way to saved ones, sorted by step: fields
    /// in the object's key order, which the patch follows.
    pub(crate) below: Vec<(At<'s>, Node<'s>)>,
    /// What few places have: a grown list's length, a map's flat list.
    /// Boxed, so that a node stays 64 bytes: its size is paid on every save
    /// and drop (and a larger one moved the load sets' lists of places into
    /// another size of the allocator's, costing 4% more instructions).
    more: Option<Box<More<'s>>>,
}

/// The rarer parts of a [`Node`].
#[derive(Debug, Clone, Default)]
struct More<'s> {
    /// For a list that elements were added to at its end (and none taken
    /// away before that): how many it held before. The places below are
    /// among those.
    kept: Option<u32>,
    /// Fields of this map saved once `below` held [`FLAT_FROM`] places,
    /// unsorted, each with what it held before (`None`: absent). A field
    /// saved again is listed again: its first listing holds its original.
    /// A field that is a place in `below` too is saved there, and that
    /// original is the one that counts.
    flat: Flat<'s>,
    /// Whether, since the flat list began, some place in `below` may not be
    /// saved itself (it leads to saved ones, or it is a list that grew):
    /// then a field saved flat is looked for in `below` first, to save it
    /// there.
    open: bool,
}

// === impl Place ===

impl Place<'_, '_> {
    /// What the place held before its first change, when it is saved.
    pub(crate) fn saved(&self) -> Option<&Option<Value>> {
        match self {
            Place::Below(node) => node.saved.as_ref(),
            Place::Flat(original) => Some(original),
        }
    }
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
        self.root.saved.is_none() && self.root.below.is_empty() && self.root.flat().is_empty()
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

    /// Saves the field `name` of the map at `path`, as [`Originals::save`]
    /// would; `original()` is what `name` held before (the map may hold its
    /// change already). Past [`FLAT_FROM`] places below the map, the field
    /// goes to its flat list, unsearched.
    #[inline]
    pub(crate) fn save_field(
        &mut self,
        path: &[At<'s>],
        name: &'s str,
        original: impl FnOnce() -> Option<Value>,
    ) {
        let Some(node) = self.node_at(path) else {
            return;
        };
        if node.saved.is_some() {
            return;
        }
        let field = At::Field(name);
        let flat = node.below.len() >= FLAT_FROM;
        if flat && !node.open() {
            node.list_flat(name, original());
            return;
        }
        match node.find(&field) {
            Ok(index) => {
                if let Some((_, field)) = node.below.get_mut(index) {
                    field.save(original);
                }
            }
            Err(_) if flat => node.list_flat(name, original()),
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
        if node.saved.is_some() || node.kept().is_some() {
            return;
        }
        match u32::try_from(list.len()) {
            Ok(len) => node.more.get_or_insert_default().kept = Some(len),
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
            _ => fold(object, self.root.clone()),
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
        match (self.kept(), at) {
            (Some(kept), At::Index(index)) => *index >= kept as usize,
            _ => false,
        }
    }

    /// The place `at` below this one, added when missing; `None` when it is
    /// a field saved flat (a saved place).
    #[inline(always)]
    fn place(&mut self, at: &At<'s>) -> Option<&mut Node<'s>> {
        let index = match self.find(at) {
            Ok(index) => index,
            Err(index) => {
                if let At::Field(name) = at
                    && self.flat().iter().any(|(field, _)| same_key(field, name))
                {
                    return None;
                }
                self.below.insert(index, (*at, Node::default()));
                index
            }
        };
        // The place may lead to saved ones without being saved itself.
        if let Some(more) = &mut self.more {
            more.open = true;
        }
        self.below.get_mut(index).map(|(_, node)| node)
    }

    /// For a list grown at its end, how many elements it held before.
    pub(crate) fn kept(&self) -> Option<u32> {
        self.more.as_ref().and_then(|more| more.kept)
    }

    /// The fields saved flat, in the order saved.
    pub(crate) fn flat(&self) -> &[(&'s str, Option<Value>)] {
        self.more.as_ref().map_or(&[], |more| more.flat.as_slice())
    }

    /// Whether a field to save flat must be looked for below first
    /// ([`More::open`]).
    fn open(&self) -> bool {
        match &self.more {
            Some(more) if !more.flat.is_empty() => more.open,
            // The flat list begins: any place below not saved itself.
            _ => self.below.iter().any(|(_, node)| node.saved.is_none()),
        }
    }

    /// Lists the field `name` as saved flat, holding `original` before.
    fn list_flat(&mut self, name: &'s str, original: Option<Value>) {
        let open = self.flat().is_empty() && self.open();
        let more = self.more.get_or_insert_default();
        if more.flat.is_empty() {
            more.open = open;
        }
        more.flat.push((name, original));
    }

    /// The places below and the fields of `flat` (this node's
    /// [`Node::flat_sorted`]) merged, in key order.
    pub(crate) fn places<'n>(
        &'n self,
        flat: &'n [(&'s str, &'n Option<Value>)],
    ) -> impl Iterator<Item = (At<'s>, Place<'n, 's>)> + 'n {
        let mut below = self.below.iter().peekable();
        let mut flat = flat.iter().peekable();
        std::iter::from_fn(move || {
            let flat_first = match (below.peek(), flat.peek()) {
                (Some((at, _)), Some((name, _))) => At::Field(name) < *at,
                (None, Some(_)) => true,
                (_, None) => false,
            };
            match flat_first {
                true => flat
                    .next()
                    .map(|(name, original)| (At::Field(name), Place::Flat(original))),
                false => below.next().map(|(at, node)| (*at, Place::Below(node))),
            }
        })
    }

    /// The first listing of each field in the flat list that is not a
    /// place below, sorted: the flat list as the sorted places would hold
    /// it.
    pub(crate) fn flat_sorted(&self) -> Vec<(&'s str, &Option<Value>)> {
        let mut fields: Vec<(&'s str, &Option<Value>)> = self
            .flat()
            .iter()
            .map(|(name, original)| (*name, original))
            .collect();
        // Stable: a field's first listing stays first among its listings.
        fields.sort_by(|a, b| a.0.cmp(b.0));
        fields.dedup_by(|later, first| later.0 == first.0);
        if !self.below.is_empty() {
            fields.retain(|(name, _)| self.find(&At::Field(name)).is_err());
        }
        fields
    }

    /// Saves `original()` here unless saved already, folding in the places
    /// saved below.
    #[inline]
    fn save(&mut self, original: impl FnOnce() -> Option<Value>) {
        if self.saved.is_some() {
            return;
        }
        let mut value = original();
        // Most saved places have nothing below to fold in.
        if !self.below.is_empty() || self.more.is_some() {
            let below = std::mem::take(self);
            if let Some(value) = &mut value {
                fold(value, below);
            }
        }
        self.saved = Some(value);
    }
}

impl Node<'_> {
    /// Whether the saved places at and below this one, which holds
    /// `current`, hold their originals.
    fn unchanged(&self, current: Option<&Value>) -> bool {
        match &self.saved {
            Some(original) => original.as_ref() == current,
            None if self.kept().is_some_and(|kept| {
                current.and_then(Value::as_array).map(Vec::len) != Some(kept as usize)
            }) =>
            {
                false
            }
            None => {
                self.below.iter().all(|(at, node)| {
                    current.is_some_and(|current| node.unchanged(step(current, *at)))
                }) && (self.flat().is_empty()
                    // Sorting the flat list is left to the last: a changed
                    // place below has mostly answered already.
                    || self.flat_sorted().into_iter().all(|(name, original)| {
                        original.as_ref() == current.and_then(|c| step(c, At::Field(name)))
                    }))
            }
        }
    }
}

/// Puts the originals saved below `node` (the place holding `value`) into
/// `value`: the flat list first, latest listing first so that each field's
/// first is what stays, then the places below, whose originals count over
/// the flat list's.
fn fold(value: &mut Value, node: Node<'_>) {
    let (kept, flat) = match node.more {
        Some(more) => (more.kept, more.flat),
        None => (None, Vec::new()),
    };
    truncate(value, kept);
    for (name, original) in flat.into_iter().rev() {
        put(value, At::Field(name), original);
    }
    for (at, node) in node.below {
        match node.saved {
            Some(original) => put(value, at, original),
            None => {
                if let Some(next) = step_mut(value, at) {
                    fold(next, node);
                }
            }
        }
    }
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
