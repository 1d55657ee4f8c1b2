//! The mutators the cluster holds, compiled into one [`System`], and what each
//! replica reports about each of them. Pure state: the watch loop feeds it
//! objects, it answers with snapshots to publish and statuses to write.

use std::collections::{BTreeMap, BTreeSet};

use sartor_api::{
    GATEKEEPER_GROUP, GROUP, MutatorError, MutatorKind, MutatorPodStatus, parse_mutator,
};
use sartor_engine::{Conflict, Mutator, MutatorId, Operation, System};
use sartor_state::Snapshot;
use serde_json::Value;

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
        if object.pointer("/metadata/deletionTimestamp").is_some() {
            // Being deleted (finalizers pending): no longer in force, as in Gatekeeper.
            return self.delete(group, kind, name);
        }
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
        let compiled = compile(object);
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
            errors: self.failed(),
        }
    }

    /// The mutators that did not compile (what the webhook's metrics count as errors).
    pub fn failed(&self) -> Vec<MutatorId> {
        self.entries
            .iter()
            .filter(|(_, entry)| entry.compiled.is_err())
            .map(|(key, _)| key.id())
            .collect()
    }

    /// The System of the mutators in force (the snapshot carries it).
    #[cfg(test)]
    pub fn system(&self) -> &System {
        &self.system
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
                    kind: Some(
                        match conflict {
                            Conflict::Schema(_) => "schema_conflict",
                            Conflict::Condition(_) => "condition_conflict",
                        }
                        .to_string(),
                    ),
                    message: conflict.to_string(),
                })
                .collect(),
        };
        MutatorPodStatus {
            id: pod.to_string(),
            observed_generation: entry.generation,
            mutator_uid: entry.uid.clone(),
            // The operations a replica mutates on.
            operations: Operation::ALL.iter().map(ToString::to_string).collect(),
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
            .next()
            // sartor's object wins even when it does not compile: a typo while
            // moving off Gatekeeper must not silently restore Gatekeeper's spec.
            .and_then(|entry| entry.compiled.as_ref().ok());
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
fn compile(object: &Value) -> Result<Mutator, String> {
    let mutator = parse_mutator(object).map_err(|error| error.problem.to_string())?;
    Mutator::compile(&mutator).map_err(|error| error.problem.to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use serde_json::json;

    use super::*;

    fn assign(name: &str, location: &str, generation: i64) -> Value {
        json!({
            "apiVersion": "mutations.sartor.dev/v1",
            "kind": "Assign",
            "metadata": {"name": name, "uid": format!("uid-{name}"), "generation": generation},
            "spec": {
                "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
                "location": location,
                "parameters": {"assign": {"value": "x"}},
            },
        })
    }

    fn enforced(generation: i64, uid: &str) -> MutatorPodStatus {
        MutatorPodStatus {
            id: "pod-a".to_string(),
            observed_generation: Some(generation),
            mutator_uid: Some(uid.to_string()),
            operations: vec!["CREATE".to_string(), "UPDATE".to_string()],
            enforced: true,
            errors: Vec::new(),
        }
    }

    fn key(group: Group, name: &str) -> MutatorKey {
        MutatorKey {
            group,
            kind: MutatorKind::Assign,
            name: name.to_string(),
        }
    }

    fn ids(set: &MutatorSet) -> Vec<String> {
        set.system()
            .mutators()
            .map(|m| m.id().to_string())
            .collect()
    }

    #[test]
    fn a_compiled_mutator_is_in_force_and_reported_enforced_once() {
        let mut set = MutatorSet::new();
        assert!(set.apply(
            Group::Sartor,
            MutatorKind::Assign,
            &assign("a", "spec.x", 1)
        ));
        assert_eq!(ids(&set), ["Assign a"]);
        assert_eq!(
            set.status_changes("pod-a"),
            [(key(Group::Sartor, "a"), enforced(1, "uid-a"))]
        );
        assert_eq!(set.status_changes("pod-a"), []);

        // Our own status write coming back through the watch changes nothing.
        let mut written = assign("a", "spec.x", 1);
        written["status"] = json!({"byPod": [{"id": "pod-a", "enforced": true}]});
        assert!(!set.apply(Group::Sartor, MutatorKind::Assign, &written));
        assert_eq!(set.status_changes("pod-a"), []);

        // A new generation is recompiled and reported.
        assert!(set.apply(
            Group::Sartor,
            MutatorKind::Assign,
            &assign("a", "spec.y", 2)
        ));
        assert_eq!(
            set.status_changes("pod-a"),
            [(key(Group::Sartor, "a"), enforced(2, "uid-a"))]
        );
    }

    #[test]
    fn a_mutator_that_does_not_compile_is_reported_with_the_reason() {
        let mut set = MutatorSet::new();
        assert!(!set.apply(
            Group::Sartor,
            MutatorKind::Assign,
            &assign("bad", "metadata.labels.x", 3)
        ));
        assert!(set.system().is_empty());
        assert_eq!(
            set.snapshot().errors,
            [MutatorId::new(MutatorKind::Assign, "bad")]
        );
        let status = MutatorPodStatus {
            enforced: false,
            errors: vec![MutatorError {
                kind: Some("compile".to_string()),
                message: "spec.location: Assign cannot change metadata; use AssignMetadata for labels and annotations"
                    .to_string(),
            }],
            ..enforced(3, "uid-bad")
        };
        assert_eq!(
            set.status_changes("pod-a"),
            [(key(Group::Sartor, "bad"), status)]
        );
    }

    #[test]
    fn a_conflict_is_reported_on_both_mutators_and_clears_when_one_goes() {
        let mut set = MutatorSet::new();
        set.apply(
            Group::Sartor,
            MutatorKind::Assign,
            &assign("a", "spec.x.y", 1),
        );
        set.apply(
            Group::Sartor,
            MutatorKind::Assign,
            &assign("b", "spec.x[name: n].y", 1),
        );
        let conflicted = |name: &str, message: &str| MutatorPodStatus {
            enforced: false,
            errors: vec![MutatorError {
                kind: Some("schema_conflict".to_string()),
                message: message.to_string(),
            }],
            ..enforced(1, &format!("uid-{name}"))
        };
        assert_eq!(
            set.status_changes("pod-a"),
            [
                (
                    key(Group::Sartor, "a"),
                    conflicted(
                        "a",
                        "conflicts with Assign b about spec.x: this mutator treats it as an object, Assign b as a list keyed by name (v1 Pod CREATE and 1 more)"
                    )
                ),
                (
                    key(Group::Sartor, "b"),
                    conflicted(
                        "b",
                        "conflicts with Assign a about spec.x: this mutator treats it as a list keyed by name, Assign a as an object (v1 Pod CREATE and 1 more)"
                    )
                ),
            ]
        );
        assert!(set.delete(Group::Sartor, MutatorKind::Assign, "b"));
        assert_eq!(
            set.status_changes("pod-a"),
            [(key(Group::Sartor, "a"), enforced(1, "uid-a"))]
        );
    }

    #[test]
    fn a_condition_conflict_is_reported_on_the_reader_only_and_clears_with_the_writer() {
        let mut set = MutatorSet::new();
        let mut reader = assign("reader", "spec.y", 1);
        reader["spec"]["parameters"]["conditions"] =
            json!([{"path": "spec.x", "operator": "DoesNotExist"}]);
        set.apply(Group::Sartor, MutatorKind::Assign, &reader);
        set.apply(
            Group::Sartor,
            MutatorKind::Assign,
            &assign("writer", "spec.x", 1),
        );
        let status = MutatorPodStatus {
            enforced: false,
            errors: vec![MutatorError {
                kind: Some("condition_conflict".to_string()),
                message: "its condition on spec.x reads what Assign writer writes (spec.x) (v1 Pod CREATE and 1 more)".to_string(),
            }],
            ..enforced(1, "uid-reader")
        };
        assert_eq!(
            set.status_changes("pod-a"),
            [
                (key(Group::Sartor, "reader"), status),
                (key(Group::Sartor, "writer"), enforced(1, "uid-writer")),
            ]
        );
        assert!(set.delete(Group::Sartor, MutatorKind::Assign, "writer"));
        assert_eq!(
            set.status_changes("pod-a"),
            [(key(Group::Sartor, "reader"), enforced(1, "uid-reader"))]
        );
    }

    #[test]
    fn sartor_wins_over_gatekeeper_for_the_same_kind_and_name() {
        let mut set = MutatorSet::new();
        let mut gatekeeper = assign("a", "spec.gatekeeper", 1);
        gatekeeper["apiVersion"] = json!("mutations.gatekeeper.sh/v1");
        assert!(set.apply(Group::Gatekeeper, MutatorKind::Assign, &gatekeeper));
        assert!(set.apply(
            Group::Sartor,
            MutatorKind::Assign,
            &assign("a", "spec.sartor", 1)
        ));
        let location = |set: &MutatorSet| {
            set.system()
                .mutators()
                .map(|m| m.location().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(location(&set), ["spec.sartor"]);
        // Gatekeeper's objects get no status from sartor.
        assert_eq!(
            set.status_changes("pod-a"),
            [(key(Group::Sartor, "a"), enforced(1, "uid-a"))]
        );
        assert!(set.delete(Group::Sartor, MutatorKind::Assign, "a"));
        assert_eq!(location(&set), ["spec.gatekeeper"]);
        assert!(set.delete(Group::Gatekeeper, MutatorKind::Assign, "a"));
        assert!(set.system().is_empty());
    }

    #[test]
    fn a_broken_sartor_mutator_does_not_hand_its_name_back_to_gatekeeper() {
        let mut set = MutatorSet::new();
        let mut gatekeeper = assign("a", "spec.gatekeeper", 1);
        gatekeeper["apiVersion"] = json!("mutations.gatekeeper.sh/v1");
        set.apply(Group::Gatekeeper, MutatorKind::Assign, &gatekeeper);
        assert!(set.apply(
            Group::Sartor,
            MutatorKind::Assign,
            &assign("a", "metadata.x", 1)
        ));
        assert!(set.system().is_empty());
        assert_eq!(set.failed(), [MutatorId::new(MutatorKind::Assign, "a")]);
    }

    #[test]
    fn a_mutator_being_deleted_is_no_longer_in_force() {
        let mut set = MutatorSet::new();
        set.apply(
            Group::Sartor,
            MutatorKind::Assign,
            &assign("a", "spec.a", 1),
        );
        let mut deleting = assign("a", "spec.a", 2);
        deleting["metadata"]["deletionTimestamp"] = json!("2026-11-22T10:00:00Z");
        assert!(set.apply(Group::Sartor, MutatorKind::Assign, &deleting));
        assert!(set.system().is_empty());
        assert_eq!(set.status_changes("pod-a"), []);
    }

    #[test]
    fn a_relist_drops_what_is_gone_and_keeps_the_rest() {
        let mut set = MutatorSet::new();
        set.apply(
            Group::Sartor,
            MutatorKind::Assign,
            &assign("a", "spec.a", 1),
        );
        set.apply(
            Group::Sartor,
            MutatorKind::Assign,
            &assign("b", "spec.b", 1),
        );
        assert!(set.replace(
            Group::Sartor,
            MutatorKind::Assign,
            &[assign("b", "spec.b", 1)]
        ));
        assert_eq!(ids(&set), ["Assign b"]);
        assert!(!set.replace(
            Group::Sartor,
            MutatorKind::Assign,
            &[assign("b", "spec.b", 1)]
        ));
    }
}
