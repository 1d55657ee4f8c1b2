//! Which mutators a second pass can leave out.
//!
//! Most objects converge in two passes: the first changes them, the second
//! changes nothing and so shows they converged. A mutator X changes nothing
//! in the second pass when
//!
//! - it is idempotent ([`Mutator::idempotent`]): applied again to what it
//!   left, with what it reads unchanged, it changes nothing;
//! - no mutator that changed the object *after* X in the first pass may have
//!   written anything X reads (what came before, X already saw);
//! - nothing has changed the object yet in the second pass.
//!
//! What X reads is known without an object: the places along its location
//! (their values, and which elements a list it globs over holds), whether
//! what its pathTests name exists, and the labels and identity its `match`
//! reads. So "a write by W may change what X reads" is worked out once for a
//! kind's candidates, a bit per pair, and a mutation only intersects X's row
//! with the candidates that changed its object in the first pass.
//!
//! The relation errs towards "may": a false "may" costs running a mutator, a
//! false "may not" would skip a change Gatekeeper makes.
//!
//! ```text
//!  candidates of a kind ──(once)──▶ Interference: for each idempotent X,
//!                                   the later W whose writes may reach X
//!  pass 1 ──▶ writers (positions that changed the object)
//!  pass 2 ──▶ X skipped while nothing changed and row(X) ∩ writers = ∅
//! ```

use sartor_location::{Node, Path};

use crate::condition::{agreed_nodes, may_write};
use crate::matching::{MatchInput, input_written};
use crate::mutator::{Effect, Mutator};

/// The most candidates a kind may have for a second pass to skip any of
/// them: the relation grows with the square of their number.
pub(crate) const MOST: usize = 512;

const WORDS: usize = MOST / 64;

/// A set of candidate positions, each below [`MOST`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Positions([u64; WORDS]);

/// For a kind's candidates, in order: which of them a second pass skips,
/// given which changed the object in the first.
#[derive(Debug, Clone)]
pub(crate) struct Interference {
    /// For each candidate, the later candidates whose writes may change what
    /// it reads; `None` for one that is not idempotent.
    disturbed_by: Vec<Option<Positions>>,
}

/// What a reader reads besides its location: the labels its selectors
/// read, and where its pathTests start.
struct Reads<'m> {
    mutator: &'m Mutator,
    /// `metadata.labels.<key>` for each label key its selectors read (a
    /// namespaceSelector's too: a Namespace is its own namespace).
    labels: Vec<Path>,
    /// `metadata.labels` when it has selectors: they read every label's
    /// value (a map holding a value that is not a string reads as no
    /// labels at all), which only a removal can change, since the values
    /// mutators add are strings.
    label_map: Option<Path>,
    /// The shallowest depth a pathTest tests.
    shallowest_test: Option<usize>,
}

// === impl Positions ===

impl Positions {
    /// Adds `position` (ignored at or past [`MOST`]).
    pub(crate) fn insert(&mut self, position: usize) {
        if let Some(word) = self.0.get_mut(position / 64) {
            *word |= 1 << (position % 64);
        }
    }

    fn meets(&self, other: &Positions) -> bool {
        self.0.iter().zip(&other.0).any(|(a, b)| a & b != 0)
    }
}

// === impl Interference ===

impl Interference {
    /// The relation for `mutators`, a kind's candidates in the order a pass
    /// runs them; `None` when there are more than [`MOST`].
    pub(crate) fn of<'m>(mutators: impl Iterator<Item = &'m Mutator>) -> Option<Interference> {
        let mutators: Vec<&Mutator> = mutators.collect();
        if mutators.len() > MOST {
            return None;
        }
        let disturbed_by = mutators
            .iter()
            .enumerate()
            .map(|(position, reader)| {
                if !reader.idempotent() {
                    return None;
                }
                let reads = Reads::of(reader);
                let mut by = Positions::default();
                for (later, writer) in mutators.iter().enumerate().skip(position + 1) {
                    if reads.may_change(writer) {
                        by.insert(later);
                    }
                }
                Some(by)
            })
            .collect();
        Some(Interference { disturbed_by })
    }

    /// Whether the candidate at `position` changes nothing in a second pass
    /// in which nothing has changed yet, when `writers` changed the object in
    /// the first.
    pub(crate) fn skips(&self, position: usize, writers: &Positions) -> bool {
        matches!(self.disturbed_by.get(position), Some(Some(by)) if !by.meets(writers))
    }
}

// === impl Reads ===

impl<'m> Reads<'m> {
    fn of(mutator: &'m Mutator) -> Reads<'m> {
        let labels = mutator
            .matcher()
            .label_keys(true)
            .into_iter()
            .filter_map(|key| fields(&["metadata", "labels", key]))
            .collect();
        let label_map = mutator
            .matcher()
            .reads_labels()
            .then(|| fields(&["metadata", "labels"]))
            .flatten();
        let location = mutator.location();
        let shallowest_test =
            (0..location.len()).find(|depth| mutator.tests().condition_at(*depth).is_some());
        Reads {
            mutator,
            labels,
            label_map,
            shallowest_test,
        }
    }

    /// Whether a change `writer` makes may change what this reader reads.
    fn may_change(&self, writer: &Mutator) -> bool {
        let written = writer.location();
        // Name, generateName and namespace (only AssignMetadata writes under
        // metadata, and only labels and annotations: kept for safety).
        if input_written(written) == MatchInput::Identity {
            return true;
        }
        if self.labels.iter().any(|label| may_write(written, label)) {
            return true;
        }
        if let Some(label_map) = &self.label_map
            && writer.effect() == Effect::Remove
            && may_write(written, label_map)
        {
            return true;
        }
        let read = self.mutator.location();
        let agreed = agreed_nodes(written, read);
        if agreed == written.len().min(read.len()) {
            // At, inside or around the reader's place. Two merges into one
            // list leave each other's values there, unless a pathTest of the
            // reader reads whether the list exists.
            let merges_alongside = writer.merges()
                && self.mutator.merges()
                && written == read
                && self.shallowest_test.is_none();
            return !merges_alongside;
        }
        // Renaming the element the reader's selector picks.
        if may_write(written, read) {
            return true;
        }
        // The writer may create the places the paths share, whose existence
        // a pathTest of the reader may test...
        if self.shallowest_test.is_some_and(|depth| depth < agreed) {
            return true;
        }
        // ...and an element its concrete selector names, which the reader's
        // glob or exclusion would then visit.
        written
            .nodes()
            .iter()
            .zip(read.nodes())
            .take(agreed)
            .any(|pair| match pair {
                (Node::List(w), Node::List(r)) => {
                    w.key_value.is_concrete() && !r.key_value.is_concrete()
                }
                _ => false,
            })
    }
}

/// The path through these object fields.
fn fields(names: &[&str]) -> Option<Path> {
    Path::from_nodes(
        names
            .iter()
            .map(|name| Node::Field(name.to_string()))
            .collect(),
    )
    .ok()
}

#[cfg(test)]
mod tests;
