//! What a mutation returns: the [`Mutation`] with its trace of
//! [`Change`]s, or the [`MutateError`] that names the object and says what
//! went wrong ([`Failure`]).
//!
//! These are the engine's results, apart from the loop that makes them
//! (`passes`), so that the convergence check and the patch can read changes
//! without depending on the system.

use std::fmt;
use std::sync::Arc;

use sartor_api::Protection;
use sartor_location::{KeyValue, Node, Path};
use serde_json::Value;

use crate::external::{self, Asks};
use crate::matching::{MatchError, metadata_str, namespace_of};
use crate::mutator::{Mutator, MutatorId};
use crate::originals::Originals;
use crate::patch::{self, Patch};
use crate::request::{Admission, Gvk, Request};
use crate::walk::{WalkError, pinned};

/// What one [`System::mutate`](crate::System::mutate) did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mutation {
    /// Passes run (0 when no mutator applies to the object's kind).
    pub passes: usize,
    /// Every change, in the order it happened.
    pub changes: Vec<Change>,
    /// Whether the object now differs from how it was admitted (`false`
    /// when nothing applied, or the changes cancelled out).
    pub mutated: bool,
    /// The RFC 6902 patch from the admitted object to the mutated one, when
    /// the admission asked for one ([`Admission::with_patch`]) and the
    /// object was `mutated`.
    pub patch: Option<Patch>,
    /// The keys externalData mutators ask their providers for, once the
    /// object converged; empty when none applied.
    pub asks: Asks,
    /// Whether a key in `asks` had no answer in the admission: then the
    /// object is put back as admitted and `patch` is unset; ask the
    /// providers and mutate it again with their answers
    /// ([`Admission::answers`]).
    pub unanswered: bool,
    /// Why no mutator ran, when the object is one sartor never mutates
    /// ([`sartor_api::protected`]); `None` for every other object.
    pub protected: Option<Protection>,
}

/// One mutator changing one place of the object.
///
/// It shares the mutator (one reference count per change: a ConfigMap
/// through 1,000 Assigns spent 9% of its time counting two) and keeps only
/// the keys of the elements its globs and exclusions visited:
/// [`Change::path`] builds the concrete path when a trace is wanted.
#[derive(Clone)]
pub struct Change {
    /// The pass, from 1.
    pub pass: usize,
    by: Arc<Mutator>,
    /// For each glob or exclusion of the location, in order, the key of the
    /// element changed (the selector itself for an element without a string
    /// or integer key).
    keys: Vec<KeyValue>,
}

/// One step of a change's concrete path, borrowed: what overlap checks and
/// the patch compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Step<'a> {
    /// An object field.
    Field(&'a str),
    /// A list element, by key field and key.
    Element(&'a str, Key<'a>),
}

/// A list element's key in a [`Step`]; `Open` for a glob or exclusion left
/// unpinned (an element without a usable key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Key<'a> {
    Integer(i64),
    String(&'a str),
    Open,
}

/// Why an object could not be mutated; names the object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{object}: {reason}")]
pub struct MutateError {
    /// The object.
    pub object: Box<ObjectRef>,
    /// What went wrong.
    pub reason: Box<Failure>,
}

/// What went wrong in a mutation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Failure {
    /// A mutator's match criteria could not be decided.
    #[error("{mutator}: {source}")]
    Match {
        /// The mutator.
        mutator: MutatorId,
        /// Why.
        #[source]
        source: MatchError,
    },
    /// A mutator could not be applied.
    #[error("{mutator} failed: {source}")]
    Apply {
        /// The mutator.
        mutator: MutatorId,
        /// Why.
        #[source]
        source: WalkError,
    },
    /// External data could not be put in place and a failurePolicy is `Fail`
    /// (Gatekeeper's message).
    #[error("{0}")]
    ExternalData(String),
    /// The admitted object holds the field name placeholders are stored
    /// under, which no Kubernetes object uses.
    #[error(
        "the object holds the field name {:?}, reserved for sartor's external data placeholders",
        external::PLACEHOLDER_FIELD
    )]
    ReservedField,
    /// The object kept changing.
    #[error("{}", not_converging(*passes, changing))]
    NotConverging {
        /// Passes run.
        passes: usize,
        /// The mutators that changed it in the last pass, with where.
        changing: Vec<(MutatorId, Vec<Path>)>,
    },
}

/// An object as error messages name it: `v1 Pod default/web`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    /// Its kind.
    pub gvk: Gvk,
    /// Its namespace, if any.
    pub namespace: Option<String>,
    /// Its name, or `generateName` followed by `*`, or empty.
    pub name: String,
}

fn not_converging(passes: usize, changing: &[(MutatorId, Vec<Path>)]) -> String {
    let mut message =
        format!("mutation did not converge after {passes} passes; still changing it in the last:");
    for (i, (mutator, paths)) in changing.iter().enumerate() {
        let paths: Vec<String> = paths.iter().map(ToString::to_string).collect();
        message.push_str(if i == 0 { " " } else { "; " });
        message.push_str(&format!("{mutator} ({})", paths.join(", ")));
    }
    message
}

// === impl MutateError ===

impl MutateError {
    /// The error of a mutation of `object` (of kind `gvk`, in `request`)
    /// that failed for `reason`.
    pub(crate) fn of(
        object: &Value,
        gvk: &Gvk,
        request: &Request<'_>,
        reason: Box<Failure>,
    ) -> MutateError {
        MutateError {
            object: Box::new(ObjectRef::of(object, gvk, request)),
            reason,
        }
    }
}

// === impl Change ===

impl fmt::Debug for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Change")
            .field("pass", &self.pass)
            .field("mutator", self.mutator())
            .field("location", self.location())
            .field("keys", &self.keys)
            .finish()
    }
}

/// Changes are equal when they are the same mutator's (by id and
/// location) in the same pass at the same elements.
impl PartialEq for Change {
    fn eq(&self, other: &Change) -> bool {
        self.pass == other.pass
            && self.keys == other.keys
            && (Arc::ptr_eq(&self.by, &other.by)
                || (self.mutator() == other.mutator() && self.location() == other.location()))
    }
}

impl Eq for Change {}

impl Change {
    /// A change by `mutator` at its location, the location's globs and
    /// exclusions pinned to `keys`.
    pub fn new(pass: usize, mutator: Arc<Mutator>, keys: Vec<KeyValue>) -> Change {
        Change {
            pass,
            by: mutator,
            keys,
        }
    }

    /// The mutator.
    pub fn mutator(&self) -> &MutatorId {
        self.by.id()
    }

    /// The mutator's location, as written.
    pub fn location(&self) -> &Path {
        self.by.location()
    }

    /// Where: the mutator's location, each glob and exclusion pinned to the
    /// element changed (left as written in a first-pass change of an
    /// admission [`without_paths`](crate::Admission::without_paths)).
    pub fn path(&self) -> Path {
        pinned(self.location(), &self.keys)
    }

    /// The concrete path, step by step, without building it.
    pub(crate) fn steps(&self) -> impl Iterator<Item = Step<'_>> {
        let mut keys = self.keys.iter();
        self.location().nodes().iter().map(move |node| match node {
            Node::Field(name) => Step::Field(name),
            Node::List(selector) => {
                let key = if selector.key_value.is_concrete() {
                    &selector.key_value
                } else {
                    keys.next().unwrap_or(&selector.key_value)
                };
                Step::Element(
                    &selector.key_field,
                    match key {
                        KeyValue::String(s) => Key::String(s),
                        KeyValue::Integer(n) => Key::Integer(*n),
                        _ => Key::Open,
                    },
                )
            }
        })
    }
}

// === impl Mutation ===

impl Mutation {
    /// Whether any mutator changed the object, even if a later change undid
    /// it (then it is not [`mutated`](Mutation::mutated)).
    pub fn changed(&self) -> bool {
        !self.changes.is_empty()
    }

    /// Sets [`mutated`](Mutation::mutated), and the [`patch`](Mutation::patch)
    /// when `with_patch`: how `object` now differs from the admitted object,
    /// which `originals` keeps.
    pub(crate) fn compare_with_admitted(
        &mut self,
        originals: &Originals<'_>,
        object: &Value,
        with_patch: bool,
    ) {
        if with_patch && !originals.is_empty() {
            let patch = patch::between(originals, object);
            self.mutated = !patch.is_empty();
            self.patch = Some(patch).filter(|_| self.mutated);
        } else {
            self.mutated = !originals.unchanged(object);
        }
    }

    /// The mutators that changed the object in the last pass, with where
    /// (each place once): what a mutation that did not converge reports.
    pub(crate) fn still_changing(&self) -> Vec<(MutatorId, Vec<Path>)> {
        let mut changing: Vec<(MutatorId, Vec<Path>)> = Vec::new();
        for change in self.changes.iter().filter(|c| c.pass == self.passes) {
            let path = change.path();
            match changing.iter_mut().find(|(id, _)| id == change.mutator()) {
                Some((_, paths)) => {
                    if !paths.contains(&path) {
                        paths.push(path);
                    }
                }
                None => changing.push((change.mutator().clone(), vec![path])),
            }
        }
        changing
    }

    /// The mutators that changed something, in the order they first did.
    pub fn applied(&self) -> Vec<&MutatorId> {
        let mut applied: Vec<&MutatorId> = Vec::new();
        // Pass 1 runs mutators in id order, so the ids first seen there come
        // ascending: `applied[..sorted]` is searched by bisection, the few
        // first seen later one by one.
        let mut sorted = 0;
        let mut last_by: Option<&Arc<Mutator>> = None;
        for change in &self.changes {
            let id = change.mutator();
            // A mutator's changes come together.
            if last_by.is_some_and(|last| Arc::ptr_eq(last, &change.by))
                || applied.last().is_some_and(|last| *last == id)
            {
                continue;
            }
            last_by = Some(&change.by);
            let (ordered, rest) = applied.split_at_checked(sorted).unwrap_or((&applied, &[]));
            let ascending = rest.is_empty() && ordered.last().is_none_or(|last| *last < id);
            if !ascending
                && (ordered.binary_search_by(|seen| (*seen).cmp(id)).is_ok() || rest.contains(&id))
            {
                continue;
            }
            applied.push(id);
            if ascending {
                sorted += 1;
            }
        }
        applied
    }
}

// === impl ObjectRef ===

impl ObjectRef {
    /// Names `object`, admitted as `admission` says.
    pub fn admitted(object: &Value, admission: &Admission<'_>) -> ObjectRef {
        ObjectRef::of(object, &admission.gvk, &admission.request(|| false))
    }

    /// Names `object` of kind `gvk` in `request`'s namespace.
    pub fn of(object: &Value, gvk: &Gvk, request: &Request<'_>) -> ObjectRef {
        let name = match metadata_str(object, "name").filter(|n| !n.is_empty()) {
            Some(name) => name.to_string(),
            None => metadata_str(object, "generateName")
                .map(|prefix| format!("{prefix}*"))
                .unwrap_or_default(),
        };
        ObjectRef {
            gvk: gvk.clone(),
            namespace: namespace_of(object, request).map(str::to_string),
            name,
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.gvk)?;
        match (&self.namespace, self.name.is_empty()) {
            (Some(ns), false) => write!(f, " {ns}/{}", self.name),
            (Some(ns), true) => write!(f, " in namespace {ns}"),
            (None, false) => write!(f, " {}", self.name),
            (None, true) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever order ids come in, and whether or not equal ids share
        /// their `Arc`, `applied` lists each once, in the order first seen.
        #[test]
        fn applied_lists_each_mutator_once_in_first_order(
            picks in proptest::collection::vec((0..6usize, any::<bool>()), 0..24),
        ) {
            let shared: Vec<Arc<Mutator>> = (0..6)
                .map(|i| Arc::new(Mutator::assign_at(&format!("m{i}"), "spec.x")))
                .collect();
            let changes: Vec<Change> = picks
                .iter()
                .map(|&(i, fresh)| {
                    let mutator = match fresh {
                        true => Arc::new((*shared[i]).clone()),
                        false => Arc::clone(&shared[i]),
                    };
                    Change::new(1, mutator, Vec::new())
                })
                .collect();
            let mutation = Mutation { changes, ..Mutation::default() };
            let mut want: Vec<&MutatorId> = Vec::new();
            for &(i, _) in &picks {
                if !want.contains(&shared[i].id()) {
                    want.push(shared[i].id());
                }
            }
            prop_assert_eq!(mutation.applied(), want);
        }
    }
}
