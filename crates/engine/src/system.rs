//! The mutator system: every compiled mutator in Gatekeeper's fixed order,
//! indexed by the kinds they apply to, checked for schema conflicts and
//! condition conflicts, and applied to an object pass after pass until it
//! stops changing.
//!
//! A `System` is a plain value: clone it to take a snapshot, change the clone,
//! and swap it in (an `Arc<System>` behind a lock or `ArcSwap`) while requests
//! keep using the old one. Mutators, their ids and locations are shared
//! between clones (`Arc`), so a clone copies only the indexes; each kind's
//! index also lists the mutators of every kind (AssignMetadata), so the
//! indexes grow with kinds x AssignMetadata.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::Value;

use crate::condition::{ConditionConflict, may_write};
use crate::conflict::Conflict;
use crate::external;
use crate::index::{Candidate, Index};
use crate::mutation::{Failure, MutateError, Mutation};
use crate::mutator::{Applies, Mutator, MutatorId, Operations};
use crate::originals::Originals;
use crate::passes::Run;
use crate::request::{Admission, Gvk, Operation};
use crate::schema::{Binding, Entry, SchemaDb};
use crate::targets::Targets;

/// Compiled mutators, ready to mutate objects.
#[derive(Debug, Clone, Default)]
pub struct System {
    mutators: BTreeMap<MutatorId, Arc<Mutator>>,
    /// For each kind some mutator's `applyTo` lists, every mutator that may
    /// apply to it, in order: those listing it and those that apply to every
    /// kind. A request reads its candidates off one entry.
    by_gvk: HashMap<Gvk, Index>,
    /// Mutators that apply to every kind (AssignMetadata): the candidates of
    /// a kind no `applyTo` lists.
    everywhere: Index,
    schema: SchemaDb,
    /// The mutators with value conditions (few, usually none).
    readers: BTreeSet<MutatorId>,
    /// The mutators in condition conflict, with what they conflict with.
    condition_conflicts: BTreeMap<MutatorId, Vec<ConditionConflict>>,
    /// Every mutator in schema or condition conflict: skipped.
    conflicted: BTreeSet<MutatorId>,
}

// === impl System ===

impl System {
    /// An empty system.
    pub fn new() -> System {
        System::default()
    }

    /// Adds or replaces a mutator. Returns the mutators this puts in schema
    /// conflict (itself included) or newly puts in condition conflict; they
    /// stay loaded but are skipped until the conflict clears.
    pub fn upsert(&mut self, mutator: Mutator) -> BTreeSet<MutatorId> {
        let id = mutator.id().clone();
        if self.mutators.get(&id).is_some_and(|m| **m == mutator) {
            return BTreeSet::new();
        }
        let before: BTreeSet<MutatorId> = self.condition_conflicts.keys().cloned().collect();
        self.detach(&id);
        let mutator = Arc::new(mutator);
        let mut conflicts = match mutator.terminal() {
            Some(terminal) => self.schema.upsert(
                &id,
                Entry {
                    bindings: mutator
                        .applies()
                        .bindings()
                        .map(|(gvk, op)| (gvk.clone(), op))
                        .collect(),
                    path: mutator.location().clone(),
                    terminal,
                    must_terminate: mutator.must_terminate(),
                },
            ),
            None => BTreeSet::new(),
        };
        // One id and one location per mutator, shared by its index entries
        // and every change it makes.
        let shared_id = Arc::new(id.clone());
        let location = Arc::new(mutator.location().clone());
        match mutator.applies() {
            Applies::Everything => {
                let candidate = Candidate::new(&mutator, &shared_id, &location, Operations::ALL);
                for index in self.by_gvk.values_mut() {
                    index.insert(Arc::clone(&shared_id), candidate.clone());
                }
                self.everywhere.insert(Arc::clone(&shared_id), candidate);
            }
            Applies::Kinds(kinds) => {
                for (gvk, operations) in kinds {
                    let candidate = Candidate::new(&mutator, &shared_id, &location, *operations);
                    self.by_gvk
                        .entry(gvk.clone())
                        .or_insert_with(|| self.everywhere.clone())
                        .insert(Arc::clone(&shared_id), candidate);
                }
            }
        }
        if !mutator.conditions().is_empty() {
            self.readers.insert(id.clone());
        }
        self.mutators.insert(id.clone(), mutator);
        self.check_conditions();
        conflicts.extend(
            self.condition_conflicts
                .keys()
                .filter(|other| **other == id || !before.contains(*other))
                .cloned(),
        );
        conflicts
    }

    /// Removes a mutator, clearing the conflicts it caused. Returns it.
    pub fn remove(&mut self, id: &MutatorId) -> Option<Arc<Mutator>> {
        let mutator = self.detach(id)?;
        self.check_conditions();
        Some(mutator)
    }

    /// Removes a mutator from the indexes and the schema, leaving condition
    /// conflicts to the caller.
    fn detach(&mut self, id: &MutatorId) -> Option<Arc<Mutator>> {
        let mutator = self.mutators.remove(id)?;
        self.readers.remove(id);
        self.schema.remove(id);
        match mutator.applies() {
            Applies::Everything => {
                self.everywhere.remove(id);
                for index in self.by_gvk.values_mut() {
                    index.remove(id);
                }
            }
            Applies::Kinds(kinds) => {
                for gvk in kinds.keys() {
                    if let Some(index) = self.by_gvk.get_mut(gvk) {
                        index.remove(id);
                        // Only the mutators of every kind left: the kind
                        // needs no entry of its own.
                        if index.len() == self.everywhere.len() {
                            self.by_gvk.remove(gvk);
                        }
                    }
                }
            }
        }
        Some(mutator)
    }

    /// Recomputes the condition conflicts of every mutator with value
    /// conditions (there are few), and the set of mutators to skip.
    ///
    /// A mutator X is in condition conflict when another mutator Y may write
    /// a path one of X's conditions reads ([`may_write`]), on kinds and
    /// operations both apply to: Y could then make X's condition start or
    /// stop holding from one pass to the next, and the two could oscillate.
    /// Every loaded Y counts, even one that is itself skipped: whether X is
    /// enforced then does not depend on the order mutators arrived in.
    ///
    /// X's own location does not count. X applies only while its condition
    /// holds, so its write can only keep the condition holding or make it
    /// stop; once it stops, X no longer applies and nothing else writes what
    /// it reads, so the object stays as X left it: that converges.
    fn check_conditions(&mut self) {
        let mut found: BTreeMap<MutatorId, Vec<ConditionConflict>> = BTreeMap::new();
        for reader in self.readers.iter().filter_map(|id| self.mutators.get(id)) {
            let mut conflicts: Vec<ConditionConflict> = Vec::new();
            for condition in reader.conditions() {
                for writer in self.mutators.values() {
                    if writer.id() == reader.id() || !may_write(writer.location(), condition.path())
                    {
                        continue;
                    }
                    let Some(bindings) = shared_bindings(reader.applies(), writer.applies()) else {
                        continue;
                    };
                    let conflict = ConditionConflict {
                        condition: condition.path().clone(),
                        with: writer.id().clone(),
                        writes: writer.location().clone(),
                        bindings,
                    };
                    if !conflicts.contains(&conflict) {
                        conflicts.push(conflict);
                    }
                }
            }
            if !conflicts.is_empty() {
                found.insert(reader.id().clone(), conflicts);
            }
        }
        self.conflicted = self
            .schema
            .conflicted()
            .iter()
            .chain(found.keys())
            .cloned()
            .collect();
        self.condition_conflicts = found;
    }

    /// The mutator with this id.
    pub fn get(&self, id: &MutatorId) -> Option<&Arc<Mutator>> {
        self.mutators.get(id)
    }

    /// Every mutator, in application order.
    pub fn mutators(&self) -> impl Iterator<Item = &Arc<Mutator>> {
        self.mutators.values()
    }

    /// How many mutators are loaded (conflicting ones included).
    pub fn len(&self) -> usize {
        self.mutators.len()
    }

    /// Whether no mutator is loaded.
    pub fn is_empty(&self) -> bool {
        self.mutators.is_empty()
    }

    /// The kinds and operations the enforced mutators (those not in schema or
    /// condition conflict) can mutate: what the webhook's rules must send.
    pub fn targets(&self) -> Targets {
        Targets::of(
            self.mutators()
                .filter(|mutator| !self.is_conflicted(mutator.id()))
                .map(|mutator| &**mutator),
        )
    }

    /// Whether a mutator is in schema or condition conflict and so skipped.
    pub fn is_conflicted(&self, id: &MutatorId) -> bool {
        self.conflicted.contains(id)
    }

    /// Every mutator in schema or condition conflict.
    pub fn conflicted(&self) -> &BTreeSet<MutatorId> {
        &self.conflicted
    }

    /// What a mutator conflicts with, and about which field: its schema
    /// conflicts, then its condition conflicts; empty when it is not in
    /// conflict.
    pub fn conflicts(&self, id: &MutatorId) -> Vec<Conflict> {
        let schema = self.schema.conflicts(id).into_iter().map(Conflict::from);
        let conditions = self
            .condition_conflicts
            .get(id)
            .into_iter()
            .flatten()
            .cloned()
            .map(Conflict::from);
        schema.chain(conditions).collect()
    }

    /// Mutates one admitted object in place: applies every matching mutator
    /// in order, pass after pass, until a whole pass leaves the object as it
    /// found it. The one entry point of the webhook, `sartor mutate` and
    /// `sartor test`.
    ///
    /// Matching is evaluated again in every pass, on the object as it is
    /// then. The number of passes is bounded by the number of mutators loaded
    /// plus one, as in Gatekeeper. The object is changed where it lies, never
    /// copied: what each place held before its first change is saved, and
    /// that is what the patch and the convergence check compare with. The
    /// Namespace is asked for only when a mutator that may apply needs it.
    ///
    /// On an error, and when external data is
    /// [`unanswered`](Mutation::unanswered), `object` is put back as
    /// admitted.
    ///
    /// An object sartor never mutates ([`sartor_api::protected`]: its own
    /// API, Gatekeeper's policy objects, admission configuration) is left as
    /// it is, whatever matches it, and [`Mutation::protected`] says why.
    ///
    /// # Errors
    /// A [`MutateError`] naming the object and the mutator.
    pub fn mutate(
        &self,
        admission: &Admission<'_>,
        object: &mut Value,
    ) -> Result<Mutation, MutateError> {
        let gvk = &admission.gvk;
        let mut mutation = Mutation::default();
        if let Some(protection) = sartor_api::protected(&gvk.group, &gvk.kind) {
            mutation.protected = Some(protection);
            return Ok(mutation);
        }
        let index = self.index(gvk);
        let candidates: Vec<(usize, &Candidate)> = self
            .candidate_iter(index, gvk, admission.operation)
            .collect();
        if candidates.is_empty() {
            return Ok(mutation);
        }
        let request =
            admission.request(|| candidates.iter().any(|(_, c)| c.mutator.needs_namespace()));
        let external = candidates
            .iter()
            .any(|(_, c)| c.mutator.provider().is_some());
        let run = Run {
            candidates: &candidates,
            index,
            gvk,
            request: &request,
            loaded: &self.mutators,
            external,
            answers: admission.answers,
            paths: admission.paths,
            annotate: admission.annotate,
        };
        let mut originals = Originals::default();
        let settled = if external && external::holds_placeholder_field(object) {
            Err(Box::new(Failure::ReservedField))
        } else {
            run.settle(object, &mut originals, &mut mutation)
        };
        match settled {
            Ok(()) if !mutation.unanswered => {
                mutation.compare_with_admitted(&originals, object, admission.patch);
                Ok(mutation)
            }
            Ok(()) => {
                originals.restore(object);
                Ok(mutation)
            }
            Err(reason) => {
                let error = MutateError::of(object, gvk, &request, reason);
                originals.restore(object);
                Err(error)
            }
        }
    }

    /// Whether a mutator that may apply to objects of `gvk` on `operation`
    /// needs the object's Namespace (a `namespaceSelector`, a value from the
    /// Namespace): a caller that must fetch the Namespace asks this first.
    pub fn needs_namespace(&self, gvk: &Gvk, operation: Operation) -> bool {
        self.candidate_iter(self.index(gvk), gvk, Some(operation))
            .any(|(_, candidate)| candidate.mutator.needs_namespace())
    }

    /// The mutators of `index` (the one of `gvk`) that may apply on
    /// `operation`, in order, conflicting ones left out: the one filter both
    /// callers share. Each comes with its position in `index`.
    fn candidate_iter<'s, 'g>(
        &'s self,
        index: &'s Index,
        gvk: &'g Gvk,
        operation: Option<Operation>,
    ) -> impl Iterator<Item = (usize, &'s Candidate)> + use<'s, 'g> {
        index.positions().filter(move |(_, candidate)| {
            let applies = match operation {
                Some(operation) => candidate.operations.contains(operation),
                None => candidate.mutator.applies_to(gvk, None),
            };
            applies && (self.conflicted.is_empty() || !self.conflicted.contains(&*candidate.id))
        })
    }

    /// The index a request for `gvk` reads its candidates from.
    fn index(&self, gvk: &Gvk) -> &Index {
        self.by_gvk.get(gvk).unwrap_or(&self.everywhere)
    }
}

/// The (kind, operation) pairs two mutators both apply to, sorted; `None`
/// when there is none. Empty when both apply to everything (AssignMetadata).
fn shared_bindings(a: &Applies, b: &Applies) -> Option<Vec<Binding>> {
    let shared: Vec<Binding> = match (a, b) {
        (Applies::Everything, Applies::Everything) => return Some(Vec::new()),
        (Applies::Everything, other) | (other, Applies::Everything) => other
            .bindings()
            .map(|(gvk, op)| (gvk.clone(), op))
            .collect(),
        (Applies::Kinds(_), Applies::Kinds(_)) => a
            .bindings()
            .filter(|(gvk, op)| b.allows(gvk, *op))
            .map(|(gvk, op)| (gvk.clone(), op))
            .collect(),
    };
    (!shared.is_empty()).then_some(shared)
}
