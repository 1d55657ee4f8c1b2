//! The mutators the cluster holds, compiled into one [`System`], and what each
//! replica reports about each of them. Pure state: the watch loop feeds it
//! objects, it answers with snapshots to publish and statuses to write.

use std::collections::{BTreeMap, BTreeSet};

use sartor_api::{
    Document, GATEKEEPER_GROUP, GROUP, MutatorError, MutatorKind, MutatorPodStatus, Origin,
    parse_mutator,
};
use sartor_engine::{Mutator, MutatorId, System};
use sartor_webhook::Snapshot;
use serde_json::Value;

/// The admission operations a replica mutates, reported in every status entry.
pub const OPERATIONS: [&str; 2] = ["CREATE", "UPDATE"];

/// The API group a mutator object was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Group {
    /// `mutations.sartor.dev`: sartor's own; status is written back.
    Sartor,
    /// `mutations.gatekeeper.sh` (with `--gatekeeper-compat`): read only.
    Gatekeeper,
}

impl Group {
    /// The group's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Group::Sartor => GROUP,
            Group::Gatekeeper => GATEKEEPER_GROUP,
        }
    }
}

/// One mutator object in the cluster: group, kind and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MutatorKey {
    /// The API group it was read from.
    pub group: Group,
    /// Its kind.
    pub kind: MutatorKind,
    /// Its `metadata.name`.
    pub name: String,
}

impl MutatorKey {
    /// The engine's name for it (sartor's and Gatekeeper's objects of the same
    /// kind and name share one).
    pub fn id(&self) -> MutatorId {
        MutatorId::new(self.kind, self.name.clone())
    }
}

impl std::fmt::Display for MutatorKey {
    /// `Assign x (mutations.sartor.dev)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} ({})", self.kind, self.name, self.group.as_str())
    }
}

/// What the set holds for one object.
#[derive(Debug, Clone)]
struct Entry {
    uid: Option<String>,
    generation: Option<i64>,
    /// `spec` as last seen: an event with the same spec (such as our own
    /// status write coming back) changes nothing.
    spec: Value,
    compiled: Result<Mutator, String>,
}

/// Every mutator object seen, the System of those in force, and the status
/// this replica last computed for each.
#[derive(Debug, Clone, Default)]
pub struct MutatorSet {
    entries: BTreeMap<MutatorKey, Entry>,
    system: System,
    reported: BTreeMap<MutatorKey, MutatorPodStatus>,
}

impl MutatorSet {
    /// An empty set.
    pub fn new() -> MutatorSet {
        MutatorSet::default()
    }

    /// Adds or updates the object `object` of `group` and `kind` (as the API
    /// server returns it). Returns whether the System changed.
    pub fn apply(&mut self, group: Group, kind: MutatorKind, object: &Value) -> bool {
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let key = MutatorKey {
            group,
            kind,
            name: name.to_string(),
        };
        let spec = object.get("spec").cloned().unwrap_or(Value::Null);
        let uid = object
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .map(str::to_string);
        let generation = object
            .pointer("/metadata/generation")
            .and_then(Value::as_i64);
        if let Some(entry) = self.entries.get_mut(&key)
            && entry.spec == spec
            && entry.uid == uid
        {
            entry.generation = generation;
            return false;
        }
        let compiled = compile(&key, object);
        self.entries.insert(
            key.clone(),
            Entry {
                uid,
                generation,
                spec,
                compiled,
            },
        );
        self.sync(&key.id())
    }

    /// Removes the object; returns whether the System changed.
    pub fn delete(&mut self, group: Group, kind: MutatorKind, name: &str) -> bool {
        let key = MutatorKey {
            group,
            kind,
            name: name.to_string(),
        };
        self.reported.remove(&key);
        if self.entries.remove(&key).is_none() {
            return false;
        }
        self.sync(&key.id())
    }

    /// Replaces every object of `group` and `kind` with `objects` (a fresh
    /// list after the watch was re-established); returns whether the System changed.
    pub fn replace(&mut self, group: Group, kind: MutatorKind, objects: &[Value]) -> bool {
        let listed: BTreeSet<&str> = objects
            .iter()
            .filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str))
            .collect();
        let gone: Vec<String> = self
            .entries
            .keys()
            .filter(|k| k.group == group && k.kind == kind && !listed.contains(k.name.as_str()))
            .map(|k| k.name.clone())
            .collect();
        let mut changed = false;
        for name in gone {
            changed |= self.delete(group, kind, &name);
        }
        for object in objects {
            changed |= self.apply(group, kind, object);
        }
        changed
    }

    /// The mutators in force, and those that failed, for the webhook.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            system: self.system.clone(),
            errors: self
                .entries
                .iter()
                .filter(|(_, entry)| entry.compiled.is_err())
                .map(|(key, _)| key.id())
                .collect(),
        }
    }

    /// The System of the mutators in force.
    pub fn system(&self) -> &System {
        &self.system
    }

    /// How many mutator objects it holds (in force or not).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The status entry of every sartor mutator whose entry differs from the
    /// one last returned, as `pod` would report it. Gatekeeper's objects get
    /// none: they are Gatekeeper's to report on.
    pub fn status_changes(&mut self, pod: &str) -> Vec<(MutatorKey, MutatorPodStatus)> {
        let mut changes = Vec::new();
        for (key, entry) in &self.entries {
            if key.group != Group::Sartor {
                continue;
            }
            let status = self.status_of(key, entry, pod);
            if self.reported.get(key) != Some(&status) {
                changes.push((key.clone(), status));
            }
        }
        for (key, status) in &changes {
            self.reported.insert(key.clone(), status.clone());
        }
        changes
    }

    /// Every sartor mutator it holds.
    pub fn sartor_keys(&self) -> impl Iterator<Item = &MutatorKey> {
        self.entries.keys().filter(|k| k.group == Group::Sartor)
    }

    fn status_of(&self, key: &MutatorKey, entry: &Entry, pod: &str) -> MutatorPodStatus {
        let id = key.id();
        let errors = match &entry.compiled {
            Err(message) => vec![MutatorError {
                kind: Some("compile".to_string()),
                message: message.clone(),
            }],
            Ok(_) => self
                .system
                .conflicts(&id)
                .into_iter()
                .map(|conflict| MutatorError {
                    kind: Some("schema_conflict".to_string()),
                    message: conflict.to_string(),
                })
                .collect(),
        };
        MutatorPodStatus {
            id: pod.to_string(),
            observed_generation: entry.generation,
            mutator_uid: entry.uid.clone(),
            operations: OPERATIONS.iter().map(|o| (*o).to_string()).collect(),
            enforced: errors.is_empty() && self.system.get(&id).is_some(),
            errors,
        }
    }

    /// Puts the System's mutator `id` in line with the entries: sartor's
    /// object wins over Gatekeeper's of the same kind and name.
    fn sync(&mut self, id: &MutatorId) -> bool {
        let winner = [Group::Sartor, Group::Gatekeeper]
            .into_iter()
            .filter_map(|group| {
                self.entries.get(&MutatorKey {
                    group,
                    kind: id.kind,
                    name: id.name.clone(),
                })
            })
            .find_map(|entry| entry.compiled.as_ref().ok());
        match winner {
            Some(mutator) => {
                let unchanged = self.system.get(id).is_some_and(|m| **m == *mutator);
                self.system.upsert(mutator.clone());
                !unchanged
            }
            None => self.system.remove(id).is_some(),
        }
    }
}

/// Reads and compiles one object; the error is the message for its status.
fn compile(key: &MutatorKey, object: &Value) -> Result<Mutator, String> {
    let document = Document {
        origin: Origin {
            file: key.to_string(),
            document: None,
            item: None,
        },
        value: object.clone(),
    };
    let loaded = parse_mutator(&document).map_err(|error| error.problem.to_string())?;
    Mutator::compile(&loaded.object).map_err(|error| error.problem.to_string())
}
