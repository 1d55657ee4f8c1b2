//! The mutator system: every compiled mutator in Gatekeeper's fixed order,
//! indexed by the kinds they apply to, checked for schema conflicts and
//! condition conflicts, and applied to an object pass after pass until it
//! stops changing.
//!
//! A `System` is a plain value: clone it to take a snapshot, change the clone,
//! and swap it in (an `Arc<System>` behind a lock or `ArcSwap`) while requests
//! keep using the old one. Mutators are shared between clones (`Arc`), so a
//! clone copies only the indexes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;

use sartor_location::Path;
use serde_json::{Map, Value};

use crate::condition::{ConditionConflict, may_write};
use crate::conflict::Conflict;
use crate::matching::{MatchError, metadata_str};
use crate::mutator::{Applies, Mutator, MutatorId};
use crate::request::{Gvk, Request};
use crate::schema::{Binding, Entry, SchemaDb};
use crate::targets::Targets;
use crate::walk::WalkError;

/// The annotation listing the mutators that changed an object, when enabled.
pub const MUTATIONS_ANNOTATION: &str = "sartor.dev/mutations";

/// Compiled mutators, ready to mutate objects.
#[derive(Debug, Clone, Default)]
pub struct System {
    mutators: BTreeMap<MutatorId, Arc<Mutator>>,
    /// Mutators with `applyTo`, by the kinds they list.
    by_gvk: HashMap<Gvk, BTreeMap<MutatorId, Arc<Mutator>>>,
    /// Mutators that apply to every kind (AssignMetadata).
    everywhere: BTreeMap<MutatorId, Arc<Mutator>>,
    schema: SchemaDb,
    /// The mutators with value conditions (few, usually none).
    readers: BTreeSet<MutatorId>,
    /// The mutators in condition conflict, with what they conflict with.
    condition_conflicts: BTreeMap<MutatorId, Vec<ConditionConflict>>,
    /// Every mutator in schema or condition conflict: skipped.
    conflicted: BTreeSet<MutatorId>,
    annotate: bool,
}

/// What one `System::mutate` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mutation {
    /// Passes run (0 when no mutator applies to the object's kind).
    pub passes: usize,
    /// Every change, in the order it happened.
    pub changes: Vec<Change>,
}

/// One mutator changing one place of the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The pass, from 1.
    pub pass: usize,
    /// The mutator.
    pub mutator: MutatorId,
    /// Where: its location, with globs and exclusions pinned to the element changed.
    pub path: Path,
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

    /// Adds the `sartor.dev/mutations` annotation to every object it changes
    /// (off by default, like Gatekeeper's `--mutation-annotations`).
    pub fn set_annotate(&mut self, annotate: bool) {
        self.annotate = annotate;
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
        match mutator.applies() {
            Applies::Everything => {
                self.everywhere.insert(id.clone(), Arc::clone(&mutator));
            }
            Applies::Kinds(kinds) => {
                for gvk in kinds.keys() {
                    self.by_gvk
                        .entry(gvk.clone())
                        .or_default()
                        .insert(id.clone(), Arc::clone(&mutator));
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
            }
            Applies::Kinds(kinds) => {
                for gvk in kinds.keys() {
                    if let Some(index) = self.by_gvk.get_mut(gvk) {
                        index.remove(id);
                        if index.is_empty() {
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

    /// Mutates `object` in place: applies every matching mutator in order,
    /// pass after pass, until a whole pass leaves the object as it found it.
    ///
    /// Matching is evaluated again in every pass, on the object as it is
    /// then. The number of passes is bounded by the number of mutators loaded
    /// plus one, as in Gatekeeper.
    ///
    /// # Errors
    /// A [`MutateError`] naming the object and the mutator; `object` is then
    /// partly mutated and should be discarded.
    pub fn mutate(
        &self,
        object: &mut Value,
        request: &Request<'_>,
    ) -> Result<Mutation, MutateError> {
        let gvk = Gvk::of(object);
        let candidates = self.candidates(&gvk);
        let mut mutation = Mutation::default();
        if candidates.is_empty() {
            return Ok(mutation);
        }
        let max_passes = self.mutators.len() + 1;
        // A pass has converged when it changed nothing, or when it ended where
        // it started. The second needs the object as the pass found it, but a
        // pass whose changes touch disjoint places cannot end where it started,
        // so sartor keeps a copy of the input only, and rebuilds a pass's
        // start by replaying the earlier passes when changes overlap (two
        // mutators fighting over a field).
        let mut original: Option<Value> = None;
        let mut snapshots = false;
        // Replays cost a pass each; a set that keeps overlapping (an
        // oscillation) switches to a copy per pass instead.
        let mut replays = 2u8;
        for pass in 1..=max_passes {
            mutation.passes = pass;
            let first_change = mutation.changes.len();
            let mut before: Option<Value> = None;
            for mutator in &candidates {
                if !self.matches(mutator, object, &gvk, request)? {
                    continue;
                }
                if original.is_none() {
                    original = Some(object.clone());
                }
                if snapshots && before.is_none() {
                    before = Some(object.clone());
                }
                let walked = self.apply(mutator, object, &gvk, request)?;
                for changed in walked.changed {
                    mutation.changes.push(Change {
                        pass,
                        mutator: mutator.id().clone(),
                        path: changed.path(mutator.location(), object),
                    });
                }
            }
            let changes = mutation.changes.get(first_change..).unwrap_or_default();
            let converged = if changes.is_empty() {
                true
            } else if snapshots {
                before.as_ref() == Some(object)
            } else if !overlapping(changes) {
                false
            } else if pass == 1 {
                original.as_ref() == Some(object)
            } else {
                replays -= 1;
                snapshots = replays == 0;
                let mut start = original.clone().unwrap_or_default();
                for _ in 1..pass {
                    self.replay_pass(&candidates, &mut start, &gvk, request)?;
                }
                start == *object
            };
            if converged {
                if self.annotate && !mutation.changes.is_empty() {
                    self.annotate_object(object, &mutation);
                }
                return Ok(mutation);
            }
        }
        let last = mutation.passes;
        let mut changing: Vec<(MutatorId, Vec<Path>)> = Vec::new();
        for change in mutation.changes.iter().filter(|c| c.pass == last) {
            match changing.iter_mut().find(|(id, _)| *id == change.mutator) {
                Some((_, paths)) => {
                    if !paths.contains(&change.path) {
                        paths.push(change.path.clone());
                    }
                }
                None => changing.push((change.mutator.clone(), vec![change.path.clone()])),
            }
        }
        Err(fail(
            object,
            &gvk,
            request,
            Failure::NotConverging {
                passes: last,
                changing,
            },
        ))
    }

    fn matches(
        &self,
        mutator: &Mutator,
        object: &Value,
        gvk: &Gvk,
        request: &Request<'_>,
    ) -> Result<bool, MutateError> {
        mutator.matches(object, gvk, request).map_err(|source| {
            let mutator = mutator.id().clone();
            fail(object, gvk, request, Failure::Match { mutator, source })
        })
    }

    fn apply(
        &self,
        mutator: &Mutator,
        object: &mut Value,
        gvk: &Gvk,
        request: &Request<'_>,
    ) -> Result<crate::walk::Walked, MutateError> {
        mutator.apply(object, request).map_err(|source| {
            let mutator = mutator.id().clone();
            fail(object, gvk, request, Failure::Apply { mutator, source })
        })
    }

    /// Runs one pass again on a copy, to rebuild the state a later pass
    /// started from (mutation is deterministic).
    fn replay_pass(
        &self,
        candidates: &[&Arc<Mutator>],
        object: &mut Value,
        gvk: &Gvk,
        request: &Request<'_>,
    ) -> Result<(), MutateError> {
        for mutator in candidates {
            if self.matches(mutator, object, gvk, request)? {
                self.apply(mutator, object, gvk, request)?;
            }
        }
        Ok(())
    }

    /// The mutators that may apply to `gvk`, in order, conflicting ones left out.
    fn candidates(&self, gvk: &Gvk) -> Vec<&Arc<Mutator>> {
        let mut specific = self
            .by_gvk
            .get(gvk)
            .into_iter()
            .flat_map(|m| m.iter())
            .peekable();
        let mut everywhere = self.everywhere.iter().peekable();
        let mut candidates = Vec::new();
        loop {
            let next = match (specific.peek(), everywhere.peek()) {
                (Some((a, _)), Some((b, _))) if a <= b => specific.next(),
                (Some(_), Some(_)) => everywhere.next(),
                (Some(_), None) => specific.next(),
                (None, Some(_)) => everywhere.next(),
                (None, None) => break,
            };
            if let Some((id, mutator)) = next
                && !self.conflicted.contains(id)
            {
                candidates.push(mutator);
            }
        }
        candidates
    }

    /// Lists the mutators that changed the object, sorted, in the
    /// `sartor.dev/mutations` annotation: `Assign/always-pull:3, ...`
    /// (kind/name:generation, as Gatekeeper's `gatekeeper.sh/mutations`).
    fn annotate_object(&self, object: &mut Value, mutation: &Mutation) {
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
        let value = applied.into_iter().collect::<Vec<_>>().join(", ");
        let Value::Object(root) = object else {
            return;
        };
        let metadata = root
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        let Value::Object(metadata) = metadata else {
            return;
        };
        let annotations = metadata
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::new()));
        if annotations.is_null() {
            *annotations = Value::Object(Map::new());
        }
        if let Value::Object(annotations) = annotations {
            annotations.insert(MUTATIONS_ANNOTATION.to_string(), Value::String(value));
        }
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

/// Whether some change of a pass may have undone another: two changes at the
/// same place, or one inside the other. Conservative (a glob or exclusion left
/// in a path counts as overlapping): a false "overlapping" costs a replay, a
/// false "disjoint" would be a bug.
fn overlapping(changes: &[Change]) -> bool {
    let mut seen: std::collections::HashSet<&[sartor_location::Node]> =
        std::collections::HashSet::with_capacity(changes.len());
    for change in changes {
        if change.path.has_glob()
            || change.path.uses_exclusion()
            || !seen.insert(change.path.nodes())
        {
            return true;
        }
    }
    changes.iter().any(|change| {
        let nodes = change.path.nodes();
        (1..nodes.len()).any(|len| nodes.get(..len).is_some_and(|prefix| seen.contains(prefix)))
    })
}

fn fail(object: &Value, gvk: &Gvk, request: &Request<'_>, reason: Failure) -> MutateError {
    MutateError {
        object: Box::new(ObjectRef::of(object, gvk, request)),
        reason: Box::new(reason),
    }
}

// === impl Mutation ===

impl Mutation {
    /// Whether anything changed.
    pub fn changed(&self) -> bool {
        !self.changes.is_empty()
    }

    /// The mutators that changed something, in the order they first did.
    pub fn applied(&self) -> Vec<&MutatorId> {
        let mut applied: Vec<&MutatorId> = Vec::new();
        for change in &self.changes {
            if !applied.contains(&&change.mutator) {
                applied.push(&change.mutator);
            }
        }
        applied
    }
}

// === impl ObjectRef ===

impl ObjectRef {
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
    use super::*;
    use sartor_api::MutatorKind;

    fn changes(paths: &[&str]) -> Vec<Change> {
        paths
            .iter()
            .map(|p| Change {
                pass: 1,
                mutator: MutatorId::new(MutatorKind::Assign, "a"),
                path: Path::parse(p).unwrap(),
            })
            .collect()
    }

    #[test]
    fn changes_overlap_when_one_is_at_or_inside_another() {
        let cases = [
            (&["spec.a", "spec.b"][..], false),
            (&["spec.a", "spec.ab", "spec.a-b"][..], false),
            (
                &["spec.c[name: x].image", "spec.c[name: y].image"][..],
                false,
            ),
            (&["spec.a", "spec.a"][..], true),
            (&["spec.a.b", "spec.a"][..], true),
            (&["spec.c[name: x]", "spec.c[name: x].image"][..], true),
            (&["spec.c", "spec.c[name: x].image"][..], true),
            (&["spec.c[name: *].image"][..], true),
        ];
        for (paths, want) in cases {
            assert_eq!(overlapping(&changes(paths)), want, "{paths:?}");
        }
    }
}
