//! The candidates of one kind: the mutators that may apply to its objects,
//! in order, with what a pass works out from them once (which a later pass
//! may skip, which share a `match`).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use sartor_location::Path;

use crate::interference::Interference;
use crate::matching::{self, MatchInput, Matcher};
use crate::mutation::Change;
use crate::mutator::{Mutator, MutatorId, Operations};
use crate::walk::{Changed, KeyReader};

/// The candidates of a kind, in order, with which of them a later pass may
/// skip and which share a `match` (each worked out when first asked,
/// forgotten on every change).
#[derive(Debug, Clone, Default)]
pub(crate) struct Index {
    candidates: BTreeMap<Arc<MutatorId>, Candidate>,
    interference: OnceLock<Interference>,
    shared_matches: OnceLock<SharedMatches>,
}

/// How many distinct `match`es of a kind's candidates a candidate's is
/// compared with, to find one it shares.
const DISTINCT_MATCHES_COMPARED: usize = 512;

/// Which candidates of an index share a `match`: they answer alike, so a
/// pass asks each `match` once, at the position of its first candidate.
#[derive(Debug, Clone, Default)]
pub(crate) struct SharedMatches {
    /// For each candidate, the position of the first with the same `match`
    /// criteria (its own when none before it has them).
    pub(crate) first: Vec<usize>,
    /// Those first positions whose `match` reads labels: a change to the
    /// labels forgets their answers.
    pub(crate) reading_labels: Vec<usize>,
}

/// A mutator in the index of a kind, with the operations it applies on
/// there, and its id and location shared with every change it makes.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    /// The operations it applies on, for this kind.
    pub(crate) operations: Operations,
    pub(crate) mutator: Arc<Mutator>,
    pub(crate) id: Arc<MutatorId>,
    pub(crate) location: Arc<Path>,
    /// What a change at its location may change of what `match` reads.
    pub(crate) writes: MatchInput,
}

// === impl Candidate ===

impl Candidate {
    /// The candidate entry of `mutator`, sharing `id` and `location` with
    /// its entries for other kinds.
    pub(crate) fn new(
        mutator: &Arc<Mutator>,
        id: &Arc<MutatorId>,
        location: &Arc<Path>,
        operations: Operations,
    ) -> Candidate {
        Candidate {
            operations,
            mutator: Arc::clone(mutator),
            id: Arc::clone(id),
            location: Arc::clone(location),
            writes: matching::input_written(location),
        }
    }

    /// Records in `changes` a change in `pass` at each place `walked` lists,
    /// sharing the candidate's id and location; `keys`, when the changes
    /// are pinned, reads the keys of the elements its globs and exclusions
    /// visited.
    #[inline]
    pub(crate) fn record(
        &self,
        pass: usize,
        keys: Option<&KeyReader<'_, '_>>,
        walked: &[Changed],
        changes: &mut Vec<Change>,
    ) {
        for changed in walked {
            changes.push(Change::new(
                pass,
                Arc::clone(&self.mutator),
                keys.map(|k| k.keys(changed)).unwrap_or_default(),
            ));
        }
    }
}

// === impl Index ===

impl Index {
    /// Adds or replaces `id`'s entry.
    pub(crate) fn insert(&mut self, id: Arc<MutatorId>, candidate: Candidate) {
        self.candidates.insert(id, candidate);
        self.forget();
    }

    /// Takes `id`'s entry away, if it has one.
    pub(crate) fn remove(&mut self, id: &MutatorId) {
        if self.candidates.remove(id).is_some() {
            self.forget();
        }
    }

    /// Every candidate, in order, with its position.
    #[inline]
    pub(crate) fn positions(&self) -> impl Iterator<Item = (usize, &Candidate)> {
        self.candidates.values().enumerate()
    }

    /// Forgets what was worked out from the candidates.
    fn forget(&mut self) {
        self.interference = OnceLock::new();
        self.shared_matches = OnceLock::new();
    }

    /// How many candidates it lists.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.candidates.len()
    }

    /// Which candidates a pass after the first may skip.
    pub(crate) fn interference(&self) -> &Interference {
        self.interference
            .get_or_init(|| Interference::of(self.candidates.values().map(|c| &*c.mutator)))
    }

    /// Which candidates share a `match`. Each is compared with the first
    /// [`DISTINCT_MATCHES_COMPARED`] distinct ones before it, so working it
    /// out stays linear in the candidates.
    pub(crate) fn shared_matches(&self) -> &SharedMatches {
        self.shared_matches.get_or_init(|| {
            let matchers: Vec<&Matcher> = self
                .candidates
                .values()
                .map(|c| c.mutator.matcher())
                .collect();
            let mut firsts: Vec<usize> = Vec::new();
            let first = matchers
                .iter()
                .enumerate()
                .map(|(position, matcher)| {
                    firsts
                        .iter()
                        .take(DISTINCT_MATCHES_COMPARED)
                        .copied()
                        .find(|first| matchers.get(*first) == Some(matcher))
                        .unwrap_or_else(|| {
                            firsts.push(position);
                            position
                        })
                })
                .collect();
            let reading_labels = firsts
                .into_iter()
                .filter(|first| matchers.get(*first).is_some_and(|m| m.reads_labels()))
                .collect();
            SharedMatches {
                first,
                reading_labels,
            }
        })
    }
}
