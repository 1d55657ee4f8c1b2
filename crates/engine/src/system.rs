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
use std::fmt;
use std::sync::{Arc, OnceLock};

use sartor_api::Protection;
use sartor_location::{KeyValue, Node, Path};
use serde_json::{Map, Value};

use crate::condition::{ConditionConflict, may_write};
use crate::conflict::Conflict;
use crate::convergence::Convergence;
use crate::external::{self, Asks, Resolution};
use crate::interference::{Interference, Writers};
use crate::matching::{self, MatchError, MatchInput, metadata_str};
use crate::mutator::{Applies, Mutator, MutatorId, Operations};
use crate::originals::{At, Originals};
use crate::patch::{self, Patch};
use crate::request::{Admission, Gvk, Operation, Request};
use crate::schema::{Binding, Entry, SchemaDb};
use crate::targets::Targets;
use crate::walk::{Changed, KeyReader, WalkError};

/// The annotation listing the mutators that changed an object, when enabled.
pub const MUTATIONS_ANNOTATION: &str = "sartor.dev/mutations";

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

/// The candidates of a kind, in order, with which of them a later pass may
/// skip and which share a `match` (each worked out when first asked,
/// forgotten on every change).
#[derive(Debug, Clone, Default)]
struct Index {
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
struct SharedMatches {
    /// For each candidate, the position of the first with the same `match`
    /// criteria (its own when none before it has them).
    first: Vec<usize>,
    /// Those first positions whose `match` reads labels: a change to the
    /// labels forgets their answers.
    reading_labels: Vec<usize>,
}

/// A mutator in the index of a kind, with the operations it applies on
/// there, and its id and location shared with every change it makes.
#[derive(Debug, Clone)]
struct Candidate {
    operations: Operations,
    mutator: Arc<Mutator>,
    id: Arc<MutatorId>,
    location: Arc<Path>,
    /// What a change at its location may change of what `match` reads.
    writes: MatchInput,
}

impl Candidate {
    /// The candidate entry of `mutator`, sharing `id` and `location` with
    /// its entries for other kinds.
    fn new(
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
}

/// What one [`System::mutate`] did.
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
/// It shares the mutator's id and location and keeps only the keys of the
/// elements its globs and exclusions visited: [`Change::path`] builds the
/// concrete path when a trace is wanted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The pass, from 1.
    pub pass: usize,
    /// The mutator.
    pub mutator: Arc<MutatorId>,
    location: Arc<Path>,
    /// For each glob or exclusion of `location`, in order, the key of the
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
        let namespace = admission.namespace.as_deref();
        let namespace_object = match namespace {
            Some(name) if candidates.iter().any(|(_, c)| c.mutator.needs_namespace()) => {
                admission.namespaces.namespace(name)
            }
            _ => None,
        };
        let request = Request {
            operation: admission.operation,
            source: admission.source,
            namespace,
            namespace_object,
            username: admission.username,
        };
        let external = candidates
            .iter()
            .any(|(_, c)| c.mutator.provider().is_some());
        if external && external::holds_placeholder_field(object) {
            return Err(fail(object, gvk, &request, Failure::ReservedField));
        }
        let run = Run {
            candidates: &candidates,
            index,
            gvk,
            request: &request,
            external,
            answers: admission.answers,
            paths: admission.paths,
            annotate: admission.annotate,
        };
        let mut originals = Originals::default();
        let settled = self.settle(&run, object, &mut originals, &mut mutation);
        if let Err(error) = settled {
            originals.restore(object);
            return Err(error);
        }
        if mutation.unanswered {
            originals.restore(object);
            return Ok(mutation);
        }
        if admission.patch && !originals.is_empty() {
            let patch = patch::between(&originals, object);
            mutation.mutated = !patch.is_empty();
            mutation.patch = Some(patch).filter(|_| mutation.mutated);
        } else {
            mutation.mutated = !originals.unchanged(object);
        }
        Ok(mutation)
    }

    /// [`System::mutate`]'s passes, until the object settles; then external
    /// data is put in place and the annotation written. Saves what it changes
    /// in `originals`; sets [`Mutation::unanswered`] (and stops) when a
    /// provider must be asked first.
    fn settle<'s>(
        &self,
        run: &Run<'s>,
        object: &mut Value,
        originals: &mut Originals<'s>,
        mutation: &mut Mutation,
    ) -> Result<(), MutateError> {
        let Run {
            candidates,
            index,
            external,
            answers,
            ..
        } = *run;
        let mut convergence = Convergence::new();
        // What each `match` answered when last asked, at the position of the
        // first candidate that has it (`shared`). `match` reads only the
        // request and the object's name, generateName, namespace and labels,
        // so an answer holds until a change there (to the labels: only
        // answers of label and namespace selectors); value conditions are
        // read every time.
        let shared = index.shared_matches();
        let mut matched: Vec<Option<bool>> = vec![None; index.len()];
        // The candidates that changed the object in the pass before: a pass
        // skips those none of them can have disturbed, while it changes
        // nothing (see `interference`). Not with external data, whose
        // placeholders are settled after convergence.
        let mut writers = Writers::default();
        let mut writing = Writers::default();
        // Where each candidate's walk changed the object, one buffer for all.
        let mut walked = Vec::new();
        // About one change per candidate, most of them in pass 1.
        mutation.changes.reserve(candidates.len());
        let max_passes = self.mutators.len() + 1;
        for pass in 1..=max_passes {
            mutation.passes = pass;
            let first_change = mutation.changes.len();
            let interference = (pass > 1 && !external).then(|| index.interference());
            for (position, candidate) in candidates {
                if let Some(interference) = interference
                    && mutation.changes.len() == first_change
                    && interference.skips(*position, &writers)
                {
                    continue;
                }
                let mutator: &'s Mutator = &candidate.mutator;
                let slot = shared.first.get(*position).copied().unwrap_or(*position);
                let mut unshared = None;
                let criteria = matched.get_mut(slot).unwrap_or(&mut unshared);
                if !run.matches(mutator, object, criteria)? {
                    continue;
                }
                convergence.before_first_change(object);
                walked.clear();
                run.apply(mutator, pass, object, originals, &mut walked)?;
                let before = mutation.changes.len();
                if !walked.is_empty() {
                    let keys = run
                        .pins(pass)
                        .then(|| KeyReader::new(&candidate.location, object));
                    for changed in &walked {
                        mutation.changes.push(Change {
                            pass,
                            mutator: Arc::clone(&candidate.id),
                            location: Arc::clone(&candidate.location),
                            keys: keys.as_ref().map(|k| k.keys(changed)).unwrap_or_default(),
                        });
                    }
                }
                let new = mutation.changes.get(before..).unwrap_or_default();
                if !new.is_empty() {
                    writing.insert(*position);
                }
                // Every change of one candidate is at its location.
                match (!new.is_empty()).then_some(candidate.writes) {
                    Some(MatchInput::Identity) => matched.fill(None),
                    Some(MatchInput::Labels) => {
                        for first in &shared.reading_labels {
                            if let Some(answer) = matched.get_mut(*first) {
                                *answer = None;
                            }
                        }
                    }
                    Some(MatchInput::Untouched) | None => {}
                }
            }
            writers = std::mem::take(&mut writing);
            let changes = mutation.changes.get(first_change..).unwrap_or_default();
            let mut replay = |start: &mut Value, passes: usize| run.replay(start, passes);
            if convergence.converged(pass, changes, object, originals, &mut replay)? {
                if external && !originals.is_empty() {
                    mutation.asks = external::asks(object);
                    if !mutation.asks.is_empty() {
                        match external::resolve(object, answers) {
                            Resolution::Done => {}
                            Resolution::Unanswered => {
                                mutation.unanswered = true;
                                return Ok(());
                            }
                            Resolution::Failed(message) => {
                                return Err(fail(
                                    object,
                                    run.gvk,
                                    run.request,
                                    Failure::ExternalData(message),
                                ));
                            }
                        }
                    }
                }
                if run.annotate && !mutation.changes.is_empty() {
                    self.annotate_object(object, mutation, originals);
                }
                return Ok(());
            }
        }
        let last = mutation.passes;
        let mut changing: Vec<(MutatorId, Vec<Path>)> = Vec::new();
        for change in mutation.changes.iter().filter(|c| c.pass == last) {
            let path = change.path();
            match changing.iter_mut().find(|(id, _)| *id == *change.mutator) {
                Some((_, paths)) => {
                    if !paths.contains(&path) {
                        paths.push(path);
                    }
                }
                None => changing.push(((*change.mutator).clone(), vec![path])),
            }
        }
        Err(fail(
            object,
            run.gvk,
            run.request,
            Failure::NotConverging {
                passes: last,
                changing,
            },
        ))
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
        index
            .candidates
            .values()
            .enumerate()
            .filter(move |(_, candidate)| {
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

    /// Lists the mutators that changed the object, sorted, in the
    /// `sartor.dev/mutations` annotation: `Assign/always-pull:3, ...`
    /// (kind/name:generation, as Gatekeeper's `gatekeeper.sh/mutations`).
    /// Saves in `originals` what it replaces.
    fn annotate_object<'s>(
        &self,
        object: &mut Value,
        mutation: &Mutation,
        originals: &mut Originals<'s>,
    ) {
        let applied: BTreeSet<String> = mutation
            .changes
            .iter()
            .map(|c| {
                let generation = self
                    .mutators
                    .get(&c.mutator)
                    .and_then(|m| m.generation())
                    .unwrap_or(0);
                format!("{}/{}:{generation}", c.mutator.kind, c.mutator.name)
            })
            .collect();
        let value = Value::String(applied.into_iter().collect::<Vec<_>>().join(", "));
        const METADATA: At<'static> = At::Field("metadata");
        const ANNOTATIONS: At<'static> = At::Field("annotations");
        let Value::Object(root) = object else {
            return;
        };
        let metadata = match root.get_mut("metadata") {
            Some(Value::Object(metadata)) => metadata,
            Some(_) => return,
            None => {
                originals.save(&[METADATA], || None);
                let mut metadata = Map::new();
                metadata.insert("annotations".to_string(), Value::Object(Map::new()));
                let Value::Object(metadata) =
                    root.entry("metadata").or_insert(Value::Object(metadata))
                else {
                    return;
                };
                metadata
            }
        };
        let annotations = match metadata.get_mut("annotations") {
            Some(Value::Object(annotations)) => {
                originals.save(
                    &[METADATA, ANNOTATIONS, At::Field(MUTATIONS_ANNOTATION)],
                    || annotations.get(MUTATIONS_ANNOTATION).cloned(),
                );
                annotations
            }
            Some(annotations @ Value::Null) => {
                originals.save(&[METADATA, ANNOTATIONS], || Some(Value::Null));
                *annotations = Value::Object(Map::new());
                let Value::Object(annotations) = annotations else {
                    return;
                };
                annotations
            }
            Some(_) => return,
            None => {
                originals.save(&[METADATA, ANNOTATIONS], || None);
                let Value::Object(annotations) = metadata
                    .entry("annotations")
                    .or_insert(Value::Object(Map::new()))
                else {
                    return;
                };
                annotations
            }
        };
        annotations.insert(MUTATIONS_ANNOTATION.to_string(), value);
    }
}

/// The mutators one mutation runs, with what they match against.
struct Run<'a> {
    candidates: &'a [(usize, &'a Candidate)],
    /// The index the candidates come from (for pass 2's skips).
    index: &'a Index,
    gvk: &'a Gvk,
    request: &'a Request<'a>,
    /// Whether a candidate takes external data.
    external: bool,
    answers: &'a dyn external::ProviderAnswers,
    /// Whether pass 1's changes keep their keys ([`Admission::paths`]).
    paths: bool,
    /// Whether a changed object is annotated ([`Admission::annotate`]).
    annotate: bool,
}

// === impl Index ===

impl Index {
    fn insert(&mut self, id: Arc<MutatorId>, candidate: Candidate) {
        self.candidates.insert(id, candidate);
        self.forget();
    }

    fn remove(&mut self, id: &MutatorId) {
        if self.candidates.remove(id).is_some() {
            self.forget();
        }
    }

    /// Forgets what was worked out from the candidates.
    fn forget(&mut self) {
        self.interference = OnceLock::new();
        self.shared_matches = OnceLock::new();
    }

    fn len(&self) -> usize {
        self.candidates.len()
    }

    /// Which candidates a pass after the first may skip.
    fn interference(&self) -> &Interference {
        self.interference
            .get_or_init(|| Interference::of(self.candidates.values().map(|c| &*c.mutator)))
    }

    /// Which candidates share a `match`. Each is compared with the first
    /// [`DISTINCT_MATCHES_COMPARED`] distinct ones before it, so working it
    /// out stays linear in the candidates.
    fn shared_matches(&self) -> &SharedMatches {
        self.shared_matches.get_or_init(|| {
            let matchers: Vec<&crate::matching::Matcher> = self
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

// === impl Run ===

impl<'a> Run<'a> {
    /// Whether `mutator` applies to `object`. `criteria` is what its `match`
    /// answered when that is known (candidates that share a `match` share
    /// it), and gets the answer when it is not; value conditions and a
    /// Namespace its value comes from are asked every time.
    fn matches(
        &self,
        mutator: &Mutator,
        object: &Value,
        criteria: &mut Option<bool>,
    ) -> Result<bool, MutateError> {
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
            fail(
                object,
                self.gvk,
                self.request,
                Failure::Match { mutator, source },
            )
        })
    }

    /// Applies `mutator` in `pass`, saving in `originals` what it changes
    /// first; its changes pin the elements they visited when the caller
    /// reads paths, and after the first pass always.
    fn apply(
        &self,
        mutator: &'a Mutator,
        pass: usize,
        object: &mut Value,
        originals: &mut Originals<'a>,
        changed: &mut Vec<Changed>,
    ) -> Result<bool, MutateError> {
        mutator
            .apply_saving(object, self.request, originals, self.pins(pass), changed)
            .map_err(|source| self.apply_failed(mutator, object, source))
    }

    /// Whether the changes of `pass` keep the keys of the elements they
    /// changed: when the caller reads paths, and after the first pass
    /// always, since whether those changes overlap decides convergence and
    /// they name the mutators that do not converge.
    fn pins(&self, pass: usize) -> bool {
        self.paths || pass > 1
    }

    fn apply_failed(&self, mutator: &Mutator, object: &Value, source: WalkError) -> MutateError {
        let mutator = mutator.id().clone();
        fail(
            object,
            self.gvk,
            self.request,
            Failure::Apply { mutator, source },
        )
    }

    /// Runs the first `passes` passes again on `object`, to rebuild the state
    /// a later pass started from (mutation is deterministic).
    fn replay(&self, object: &mut Value, passes: usize) -> Result<(), MutateError> {
        for _ in 0..passes {
            for (_, candidate) in self.candidates {
                let mutator = &candidate.mutator;
                if self.matches(mutator, object, &mut None)? {
                    mutator
                        .apply(object, self.request)
                        .map_err(|source| self.apply_failed(mutator, object, source))?;
                }
            }
        }
        Ok(())
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

fn fail(object: &Value, gvk: &Gvk, request: &Request<'_>, reason: Failure) -> MutateError {
    MutateError {
        object: Box::new(ObjectRef::of(object, gvk, request)),
        reason: Box::new(reason),
    }
}

// === impl Change ===

impl Change {
    /// A change at `location`, its globs and exclusions pinned to `keys`.
    pub fn new(
        pass: usize,
        mutator: Arc<MutatorId>,
        location: Arc<Path>,
        keys: Vec<KeyValue>,
    ) -> Change {
        Change {
            pass,
            mutator,
            location,
            keys,
        }
    }

    /// The mutator's location, as written.
    pub fn location(&self) -> &Path {
        &self.location
    }

    /// Where: the mutator's location, each glob and exclusion pinned to the
    /// element changed (left as written in a first-pass change of an
    /// admission [`without_paths`](crate::Admission::without_paths)).
    pub fn path(&self) -> Path {
        crate::walk::pinned(&self.location, &self.keys)
    }

    /// The concrete path, step by step, without building it.
    pub(crate) fn steps(&self) -> impl Iterator<Item = Step<'_>> {
        let mut keys = self.keys.iter();
        self.location.nodes().iter().map(move |node| match node {
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

    /// The mutators that changed something, in the order they first did.
    pub fn applied(&self) -> Vec<&MutatorId> {
        let mut applied: Vec<&Arc<MutatorId>> = Vec::new();
        // Pass 1 runs mutators in id order, so the ids first seen there come
        // ascending: `applied[..sorted]` is searched by bisection, the few
        // first seen later one by one.
        let mut sorted = 0;
        for change in &self.changes {
            let id = &change.mutator;
            // A mutator's changes come together.
            if applied
                .last()
                .is_some_and(|last| Arc::ptr_eq(last, id) || ***last == **id)
            {
                continue;
            }
            let (ordered, rest) = applied.split_at_checked(sorted).unwrap_or((&applied, &[]));
            let ascending = rest.is_empty() && ordered.last().is_none_or(|last| ***last < **id);
            if !ascending
                && (ordered
                    .binary_search_by(|seen| (***seen).cmp(&**id))
                    .is_ok()
                    || rest.iter().any(|seen| ***seen == **id))
            {
                continue;
            }
            applied.push(id);
            if ascending {
                sorted += 1;
            }
        }
        applied.into_iter().map(|id| &**id).collect()
    }
}

// === impl ObjectRef ===

impl ObjectRef {
    /// Names `object`, admitted as `admission` says.
    pub fn admitted(object: &Value, admission: &Admission<'_>) -> ObjectRef {
        let request = Request {
            operation: admission.operation,
            source: admission.source,
            namespace: admission.namespace.as_deref(),
            namespace_object: None,
            username: admission.username,
        };
        ObjectRef::of(object, &admission.gvk, &request)
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
            namespace: crate::matching::namespace_of(object, request).map(str::to_string),
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
    use sartor_api::MutatorKind;

    proptest! {
        /// Whatever order ids come in, and whether or not equal ids share
        /// their `Arc`, `applied` lists each once, in the order first seen.
        #[test]
        fn applied_lists_each_mutator_once_in_first_order(
            picks in proptest::collection::vec((0..6usize, any::<bool>()), 0..24),
        ) {
            let shared: Vec<Arc<MutatorId>> = (0..6)
                .map(|i| Arc::new(MutatorId::new(MutatorKind::Assign, format!("m{i}"))))
                .collect();
            let location = Arc::new(Path::parse("spec.x").unwrap());
            let changes: Vec<Change> = picks
                .iter()
                .map(|&(i, fresh)| {
                    let id = match fresh {
                        true => Arc::new((*shared[i]).clone()),
                        false => Arc::clone(&shared[i]),
                    };
                    Change::new(1, id, Arc::clone(&location), Vec::new())
                })
                .collect();
            let mutation = Mutation { changes, ..Mutation::default() };
            let mut want: Vec<&MutatorId> = Vec::new();
            for &(i, _) in &picks {
                if !want.contains(&&*shared[i]) {
                    want.push(&shared[i]);
                }
            }
            prop_assert_eq!(mutation.applied(), want);
        }
    }
}
