//! [`System::mutate`](crate::System::mutate)'s pass loop: every candidate in
//! order, pass after pass, until a pass leaves the object as it found it;
//! then the finishing steps, each in its own module: external data put in
//! place ([`external::put_in_place`]) and the annotation written
//! ([`annotation::write`]), or the report of the mutators that kept changing
//! it ([`Mutation::still_changing`]).
//!
//! The loop asks each `match` once while nothing it reads changes
//! ([`MatchAnswers`]), skips in a later pass the candidates no change of the
//! pass before can have disturbed (`interference`), and leaves whether a
//! pass converged to [`Convergence`].

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::annotation;
use crate::convergence::Convergence;
use crate::external::{self, ProviderAnswers, Resolution};
use crate::index::{Candidate, Index, SharedMatches};
use crate::interference::Writers;
use crate::matching::{MatchError, MatchInput};
use crate::mutation::{Change, Failure, Mutation};
use crate::mutator::{Mutator, MutatorId};
use crate::originals::Originals;
use crate::request::{Gvk, Request};
use crate::walk::{Changed, KeyReader, WalkError};

/// The mutators one mutation runs, with what they match against and what
/// the admission asked for.
pub(crate) struct Run<'a> {
    pub(crate) candidates: &'a [(usize, &'a Candidate)],
    /// The index the candidates come from (for pass 2's skips).
    pub(crate) index: &'a Index,
    pub(crate) gvk: &'a Gvk,
    pub(crate) request: &'a Request<'a>,
    /// Every mutator loaded: their number bounds the passes, and the
    /// annotation names their generations.
    pub(crate) loaded: &'a BTreeMap<MutatorId, Arc<Mutator>>,
    /// Whether a candidate takes external data.
    pub(crate) external: bool,
    pub(crate) answers: &'a dyn ProviderAnswers,
    /// Whether pass 1's changes keep their keys ([`Admission::paths`](crate::Admission::paths)).
    pub(crate) paths: bool,
    /// Whether to write the annotation ([`Admission::annotate`](crate::Admission::annotate)).
    pub(crate) annotate: bool,
}

/// What each `match` answered when last asked, at the position of the first
/// candidate that has it ([`SharedMatches`]). `match` reads only the
/// request and the object's name, generateName, namespace and labels, so an
/// answer holds until a change there (to the labels: only answers of label
/// and namespace selectors); value conditions are read every time.
struct MatchAnswers<'a> {
    shared: &'a SharedMatches,
    answers: Vec<Option<bool>>,
}

/// What the passes of one mutation carry from candidate to candidate and
/// from pass to pass.
struct PassState<'a> {
    matched: MatchAnswers<'a>,
    /// The candidates that changed the object in the pass before: a pass
    /// skips those none of them can have disturbed, while it changes
    /// nothing (see `Interference`). Not with external data, whose
    /// placeholders are settled after convergence.
    writers: Writers,
    /// Those changing it in this pass.
    writing: Writers,
    /// Where a candidate's walk changed the object, one buffer for all.
    walked: Vec<Changed>,
    convergence: Convergence,
}

// === impl Run ===

impl<'a> Run<'a> {
    /// Runs the passes until the object settles, then finishes it: puts
    /// external data in place and writes the annotation. Saves what it
    /// changes in `originals`; sets [`Mutation::unanswered`] (and stops)
    /// when a provider must be asked first.
    pub(crate) fn settle(
        &self,
        object: &mut Value,
        originals: &mut Originals<'a>,
        mutation: &mut Mutation,
    ) -> Result<(), Box<Failure>> {
        if !self.converge(object, originals, mutation)? {
            return Err(Box::new(Failure::NotConverging {
                passes: mutation.passes,
                changing: mutation.still_changing(),
            }));
        }
        if self.external && !originals.is_empty() {
            let (asks, resolution) = external::put_in_place(object, self.answers);
            mutation.asks = asks;
            match resolution {
                Resolution::Done => {}
                Resolution::Unanswered => {
                    mutation.unanswered = true;
                    return Ok(());
                }
                Resolution::Failed(message) => {
                    return Err(Box::new(Failure::ExternalData(message)));
                }
            }
        }
        if self.annotate && !mutation.changes.is_empty() {
            let generation = |id: &MutatorId| self.loaded.get(id).and_then(|m| m.generation());
            annotation::write(object, &mutation.changes, originals, generation);
        }
        Ok(())
    }

    /// Runs pass after pass, at most one more than the mutators loaded (as
    /// in Gatekeeper); whether the last left the object as it found it.
    fn converge(
        &self,
        object: &mut Value,
        originals: &mut Originals<'a>,
        mutation: &mut Mutation,
    ) -> Result<bool, Box<Failure>> {
        let mut state = PassState {
            matched: MatchAnswers::new(self.index),
            writers: Writers::default(),
            writing: Writers::default(),
            walked: Vec::new(),
            convergence: Convergence::new(),
        };
        // About one change per candidate, most of them in pass 1.
        mutation.changes.reserve(self.candidates.len());
        let max_passes = self.loaded.len() + 1;
        for pass in 1..=max_passes {
            mutation.passes = pass;
            let first_change = mutation.changes.len();
            self.pass(pass, object, originals, &mut mutation.changes, &mut state)?;
            let changes = mutation.changes.get(first_change..).unwrap_or_default();
            let mut replay = |start: &mut Value, passes: usize| self.replay(start, passes);
            if state
                .convergence
                .converged(pass, changes, object, originals, &mut replay)?
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Runs pass `pass`: applies each candidate that matches, in order,
    /// saving in `originals` what it changes first, and records its changes
    /// in `changes`.
    fn pass(
        &self,
        pass: usize,
        object: &mut Value,
        originals: &mut Originals<'a>,
        changes: &mut Vec<Change>,
        state: &mut PassState<'_>,
    ) -> Result<(), Box<Failure>> {
        let first_change = changes.len();
        let interference = (pass > 1 && !self.external).then(|| self.index.interference());
        for &(position, candidate) in self.candidates {
            if let Some(interference) = interference
                && changes.len() == first_change
                && interference.skips(position, &state.writers)
            {
                continue;
            }
            let mut unshared = None;
            let criteria = state.matched.slot(position).unwrap_or(&mut unshared);
            if !self.matches(&candidate.mutator, object, criteria)? {
                continue;
            }
            state.convergence.before_first_change(object);
            let mutator: &'a Mutator = &candidate.mutator;
            let walked = &mut state.walked;
            walked.clear();
            mutator
                .apply_saving(object, self.request, originals, self.pins(pass), walked)
                .map_err(|source| apply_failed(mutator, source))?;
            if !walked.is_empty() {
                let keys = self
                    .pins(pass)
                    .then(|| KeyReader::new(&candidate.location, object));
                candidate.record(pass, keys.as_ref(), walked, changes);
                state.writing.insert(position);
                // Every change of one candidate is at its location.
                state.matched.forget(candidate.writes);
            }
        }
        state.writers = std::mem::take(&mut state.writing);
        Ok(())
    }

    /// Whether `mutator` applies to `object`. `criteria` is what its `match`
    /// answered when that is known (candidates that share a `match` share
    /// it), and gets the answer when it is not; value conditions and a
    /// Namespace its value comes from are asked every time.
    fn matches(
        &self,
        mutator: &Mutator,
        object: &Value,
        criteria: &mut Option<bool>,
    ) -> Result<bool, Box<Failure>> {
        let mut ask = || -> Result<bool, MatchError> {
            let admitted = match *criteria {
                Some(admitted) => admitted,
                None => {
                    *criteria.insert(mutator.matcher().matches(object, self.gvk, self.request)?)
                }
            };
            Ok(admitted && mutator.matches_beyond_criteria(object, self.gvk, self.request)?)
        };
        ask().map_err(|source| {
            let mutator = mutator.id().clone();
            Box::new(Failure::Match { mutator, source })
        })
    }

    /// Whether the changes of `pass` keep the keys of the elements they
    /// changed: when the caller reads paths, and after the first pass
    /// always, since whether those changes overlap decides convergence and
    /// they name the mutators that do not converge.
    fn pins(&self, pass: usize) -> bool {
        self.paths || pass > 1
    }

    /// Runs the first `passes` passes again on `object`, to rebuild the state
    /// a later pass started from (mutation is deterministic).
    fn replay(&self, object: &mut Value, passes: usize) -> Result<(), Box<Failure>> {
        for _ in 0..passes {
            for (_, candidate) in self.candidates {
                let mutator = &candidate.mutator;
                if self.matches(mutator, object, &mut None)? {
                    mutator
                        .apply(object, self.request)
                        .map_err(|source| apply_failed(mutator, source))?;
                }
            }
        }
        Ok(())
    }
}

/// The failure of `mutator`'s walk.
fn apply_failed(mutator: &Mutator, source: WalkError) -> Box<Failure> {
    let mutator = mutator.id().clone();
    Box::new(Failure::Apply { mutator, source })
}

// === impl MatchAnswers ===

impl<'a> MatchAnswers<'a> {
    /// No answer yet, for each candidate of `index`.
    fn new(index: &'a Index) -> MatchAnswers<'a> {
        MatchAnswers {
            shared: index.shared_matches(),
            answers: vec![None; index.len()],
        }
    }

    /// Where the answer of the candidate at `position` is kept: at the
    /// first candidate with its `match`.
    #[inline]
    fn slot(&mut self, position: usize) -> Option<&mut Option<bool>> {
        let first = self.shared.first.get(position).copied().unwrap_or(position);
        self.answers.get_mut(first)
    }

    /// Forgets the answers a change that `writes` may have made wrong.
    #[inline]
    fn forget(&mut self, writes: MatchInput) {
        match writes {
            MatchInput::Identity => self.answers.fill(None),
            MatchInput::Labels => {
                for first in &self.shared.reading_labels {
                    if let Some(answer) = self.answers.get_mut(*first) {
                        *answer = None;
                    }
                }
            }
            MatchInput::Untouched => {}
        }
    }
}
