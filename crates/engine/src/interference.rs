//! Which mutators a pass after the first can leave out.
//!
//! Most objects converge in two passes: the first changes them, the second
//! changes nothing and so shows they converged. A mutator X changes nothing
//! in a pass after the first when
//!
//! - it is idempotent ([`Mutator::idempotent`]): applied again to what it
//!   left, with what it reads unchanged, it changes nothing;
//! - no mutator that changed the object *after* X in the pass before may
//!   have written anything X reads (what came before, X already saw; or, if
//!   X was skipped there, nothing came before it);
//! - nothing has changed the object yet in this pass.
//!
//! A sidecar added in pass 1 makes pass 2 change it, and pass 3 then skips
//! what the sidecar's changes cannot reach.
//!
//! What X reads is known without an object: the places along its location
//! (their values, and which elements a list it globs over holds), whether
//! what its pathTests name exists, and the labels and identity its `match`
//! reads. So "a write by W may change what X reads" is worked out once for a
//! kind's candidates, a bit per pair, and a mutation only intersects X's row
//! with the candidates that changed its object in the pass before.
//!
//! The relation errs towards "may": a false "may" costs running a mutator, a
//! false "may not" would skip a change Gatekeeper makes.
//!
//! Comparing every pair would grow with the square of the candidates (a
//! ConfigMap's 1,000 Assigns). A writer can reach a reader only through a
//! path they share, so the writers are sorted by the object fields their
//! locations start with, and a reader is compared with those whose fields
//! agree with one of its read paths as far as both go (plus the few that
//! write an object's identity). A reader with more such writers than
//! [`LISTED_AT_MOST`] is taken to be disturbed by every later one.
//!
//! ```text
//!  candidates of a kind ──(once)──▶ Interference: for each idempotent X,
//!                                   the later W whose writes may reach X
//!  pass n ──▶ writers (positions that changed the object)
//!  pass n+1 ──▶ X skipped while nothing changed and none of X's W wrote
//! ```

use std::ops::Range;

use sartor_location::{Node, Path};

use crate::condition::{agreed_nodes, may_write};
use crate::matching::{MatchInput, input_written};
use crate::mutator::{Effect, Mutator};

/// The most writers a reader is compared with, or keeps as its disturbers:
/// past it, every later writer counts (building the relation stays linear
/// in the candidates, times this).
pub(crate) const LISTED_AT_MOST: usize = 512;

/// The candidates that changed the object in a pass, by position:
/// the first [`INLINE`] words inline, so a mutation of a kind with few
/// candidates allocates nothing for them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Writers {
    inline: [u64; INLINE],
    more: Vec<u64>,
    last: Option<usize>,
}

const INLINE: usize = 8;

/// For a kind's candidates, in order: which of them a later pass skips,
/// given which changed the object in the pass before.
#[derive(Debug, Clone)]
pub(crate) struct Interference {
    readers: Vec<Reader>,
    /// The disturbers of every [`Reader::Listed`], one run after another.
    disturbers: Vec<u32>,
}

/// What a later pass needs to know of one candidate.
#[derive(Debug, Clone, Copy)]
enum Reader {
    /// Not idempotent: it always runs.
    Runs,
    /// Disturbed by the later candidates at these positions of
    /// [`Interference::disturbers`].
    Listed(u32, u32),
    /// Disturbed by any later candidate that wrote.
    ByAnyLater,
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

/// The writers, sorted by the object fields their locations start with:
/// those sharing a run of leading fields are neighbours.
struct ByFields<'m> {
    /// Each writer's leading fields (up to its first list), with its position.
    sorted: Vec<(Vec<&'m str>, u32)>,
    /// The writers of an object's name, generateName or namespace: they
    /// may change whether any reader applies.
    identity: Vec<u32>,
}

// === impl Writers ===

impl Writers {
    /// Adds the candidate at `position`.
    pub(crate) fn insert(&mut self, position: usize) {
        let word = position / 64;
        let bits = match word.checked_sub(INLINE) {
            None => self.inline.get_mut(word),
            Some(more) => {
                if self.more.len() <= more {
                    self.more.resize(more + 1, 0);
                }
                self.more.get_mut(more)
            }
        };
        if let Some(bits) = bits {
            *bits |= 1 << (position % 64);
        }
        self.last = self.last.max(Some(position));
    }

    fn contains(&self, position: u32) -> bool {
        let position = position as usize;
        let word = position / 64;
        let bits = match word.checked_sub(INLINE) {
            None => self.inline.get(word),
            Some(more) => self.more.get(more),
        };
        bits.is_some_and(|bits| bits & (1 << (position % 64)) != 0)
    }

    /// Whether a candidate after `position` wrote.
    fn any_after(&self, position: usize) -> bool {
        self.last.is_some_and(|last| last > position)
    }
}

// === impl Interference ===

impl Interference {
    /// The relation for `mutators`, a kind's candidates in the order a pass
    /// runs them.
    pub(crate) fn of<'m>(mutators: impl Iterator<Item = &'m Mutator>) -> Interference {
        let mutators: Vec<&Mutator> = mutators.collect();
        let by_fields = ByFields::of(&mutators);
        let mut disturbers = Vec::new();
        let mut compared = Vec::new();
        let readers = mutators
            .iter()
            .enumerate()
            .map(|(position, reader)| {
                if !reader.idempotent() {
                    return Reader::Runs;
                }
                let reads = Reads::of(reader);
                compared.clear();
                if !by_fields.reaching(&reads, position, &mut compared) {
                    return Reader::ByAnyLater;
                }
                let start = disturbers.len();
                disturbers.extend(compared.iter().copied().filter(|later| {
                    mutators
                        .get(*later as usize)
                        .is_some_and(|writer| reads.may_change(writer))
                }));
                let (Ok(start), Ok(end)) = (u32::try_from(start), u32::try_from(disturbers.len()))
                else {
                    return Reader::ByAnyLater;
                };
                Reader::Listed(start, end)
            })
            .collect();
        Interference {
            readers,
            disturbers,
        }
    }

    /// Whether the candidate at `position` changes nothing in a pass in
    /// which nothing has changed yet, when `writers` changed the object in
    /// the pass before.
    pub(crate) fn skips(&self, position: usize, writers: &Writers) -> bool {
        match self.readers.get(position) {
            None | Some(Reader::Runs) => false,
            Some(Reader::ByAnyLater) => !writers.any_after(position),
            Some(Reader::Listed(start, end)) => {
                !writers.any_after(position)
                    || !self
                        .disturbers
                        .get(*start as usize..*end as usize)
                        .unwrap_or_default()
                        .iter()
                        .any(|later| writers.contains(*later))
            }
        }
    }
}

// === impl ByFields ===

impl<'m> ByFields<'m> {
    fn of(mutators: &[&'m Mutator]) -> ByFields<'m> {
        let mut sorted = Vec::with_capacity(mutators.len());
        let mut identity = Vec::new();
        for (position, writer) in (0u32..).zip(mutators) {
            let written = writer.location();
            if input_written(written) == MatchInput::Identity {
                identity.push(position);
            }
            sorted.push((leading_fields(written), position));
        }
        sorted.sort_unstable();
        ByFields { sorted, identity }
    }

    /// Puts in `found`, sorted, the writers after `position` whose writes may
    /// reach what `reads` reads; `false` when there are more than
    /// [`LISTED_AT_MOST`] to compare.
    fn reaching(&self, reads: &Reads<'_>, position: usize, found: &mut Vec<u32>) -> bool {
        let location = reads.mutator.location();
        let fields = leading_fields(location);
        // A pathTest at depth t reads whether the places down to t exist,
        // which a writer sharing more than t fields may create.
        let whole = reads
            .shallowest_test
            .map_or(fields.len(), |t| fields.len().min(t + 1));
        let mut ranges = self.sharing(&fields, whole);
        for path in reads.labels.iter().chain(&reads.label_map) {
            let fields = leading_fields(path);
            ranges.extend(self.sharing(&fields, fields.len()));
        }
        let total = self.identity.len() + ranges.iter().map(Range::len).sum::<usize>();
        if total > LISTED_AT_MOST {
            return false;
        }
        let later = |p: &u32| *p as usize > position;
        found.extend(self.identity.iter().copied().filter(later));
        for range in ranges {
            let writers = self.sorted.get(range).unwrap_or_default();
            found.extend(writers.iter().map(|(_, p)| *p).filter(later));
        }
        found.sort_unstable();
        found.dedup();
        true
    }

    /// The ranges of writers whose leading fields agree with `fields` as far
    /// as both go: those ending on the way (at fewer than `whole` of them),
    /// and all that start with the first `whole`.
    fn sharing(&self, fields: &[&str], whole: usize) -> Vec<Range<usize>> {
        let mut ranges = Vec::with_capacity(whole + 1);
        for end in 0..whole {
            let prefix = fields.get(..end).unwrap_or_default();
            let from = self.sorted.partition_point(|(f, _)| f.as_slice() < prefix);
            let to = self.sorted.partition_point(|(f, _)| f.as_slice() <= prefix);
            ranges.push(from..to);
        }
        let prefix = fields.get(..whole).unwrap_or(fields);
        let from = self.sorted.partition_point(|(f, _)| f.as_slice() < prefix);
        let to = self
            .sorted
            .partition_point(|(f, _)| f.as_slice() < prefix || f.starts_with(prefix));
        ranges.push(from..to);
        ranges
    }
}

/// The object fields `path` starts with, up to its first list.
fn leading_fields(path: &Path) -> Vec<&str> {
    path.nodes()
        .iter()
        .map_while(|node| match node {
            Node::Field(name) => Some(name.as_str()),
            Node::List(_) => None,
        })
        .collect()
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
