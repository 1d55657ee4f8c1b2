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
//! adding, replacing or removing list elements saves the whole list first,
//! so no index below a saved place is read again, and no list above one
//! changes shape.

use serde_json::Value;

/// One step of a place's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum At<'s> {
    /// An object field.
    Field(&'s str),
    /// A list element, by position.
    Index(usize),
}

/// The original value of every place a mutation changed.
#[derive(Debug, Default)]
pub(crate) struct Originals<'s> {
    /// Places, none inside another, each with what it held before its first
    /// change (`None`: it was absent), in the order saved.
    saved: Vec<(Vec<At<'s>>, Option<Value>)>,
}

// === impl Originals ===

impl<'s> Originals<'s> {
    /// Whether nothing was saved: nothing was changed.
    pub(crate) fn is_empty(&self) -> bool {
        self.saved.is_empty()
    }

    /// Saves what `path` holds, `original()`, before it is changed: only the
    /// first time (a place inside a saved one is saved already). Places saved
    /// inside `path` are folded into its original.
    pub(crate) fn save(&mut self, path: &[At<'s>], original: impl FnOnce() -> Option<Value>) {
        if self.saved.iter().any(|(saved, _)| path.starts_with(saved)) {
            return;
        }
        let mut value = original();
        let mut index = self.saved.len();
        while index > 0 {
            index -= 1;
            if self
                .saved
                .get(index)
                .is_some_and(|(saved, _)| saved.starts_with(path))
            {
                let (saved, inner) = self.saved.remove(index);
                if let Some(value) = &mut value {
                    put(value, saved.get(path.len()..).unwrap_or_default(), inner);
                }
            }
        }
        self.saved.push((path.to_vec(), value));
    }

    /// Whether every saved place holds its original again: then the object
    /// is as admitted.
    pub(crate) fn unchanged(&self, object: &Value) -> bool {
        self.saved
            .iter()
            .all(|(path, original)| get(object, path) == original.as_ref())
    }

    /// Puts every saved place's original back into `object`, which makes it
    /// the admitted object again.
    pub(crate) fn restore(&self, object: &mut Value) {
        for (path, original) in self.saved.iter().rev() {
            put(object, path, original.clone());
        }
    }

    /// The saved places with their originals, sorted by path.
    pub(crate) fn sorted(&self) -> Vec<(&[At<'s>], Option<&Value>)> {
        let mut sorted: Vec<(&[At<'s>], Option<&Value>)> = self
            .saved
            .iter()
            .map(|(path, original)| (path.as_slice(), original.as_ref()))
            .collect();
        sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
        sorted
    }
}

/// What `path` holds in `value`, if anything.
pub(crate) fn get<'v>(value: &'v Value, path: &[At<'_>]) -> Option<&'v Value> {
    path.iter().try_fold(value, |current, at| match at {
        At::Field(name) => current.as_object()?.get(*name),
        At::Index(index) => current.as_array()?.get(*index),
    })
}

/// Makes `path` in `value` hold `original` (`None`: absent).
fn put(value: &mut Value, path: &[At<'_>], original: Option<Value>) {
    let Some((last, parents)) = path.split_last() else {
        if let Some(original) = original {
            *value = original;
        }
        return;
    };
    let parent = parents.iter().try_fold(value, |current, at| match at {
        At::Field(name) => current.as_object_mut()?.get_mut(*name),
        At::Index(index) => current.as_array_mut()?.get_mut(*index),
    });
    match (parent, last, original) {
        (Some(Value::Object(map)), At::Field(name), Some(original)) => {
            map.insert((*name).to_string(), original);
        }
        (Some(Value::Object(map)), At::Field(name), None) => {
            map.remove(*name);
        }
        (Some(Value::Array(list)), At::Index(index), Some(original)) => {
            if let Some(element) = list.get_mut(*index) {
                *element = original;
            }
        }
        // A list element is never saved absent (adding one saves the list),
        // and a saved place's parents are never taken away.
        _ => {}
    }
}

#[cfg(test)]
mod tests;
