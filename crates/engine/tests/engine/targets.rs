//! Targets: the kinds and operations a system's enforced mutators can mutate.

use sartor_engine::{System, Targets};

fn targets_of(yaml: &str) -> Targets {
    let mut system = System::new();
    for object in super::objects(yaml) {
        system.upsert(sartor_engine::Mutator::compile(&object).unwrap());
    }
    system.targets()
}

/// The targets of the mutators in `yaml`, one line each.
fn targets(yaml: &str) -> String {
    targets_of(yaml).to_string()
}

#[test]
fn apply_to_kinds_are_kept_when_match_kinds_allows_them() {
    let yaml = "\
apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata: {name: pull}
spec:
  applyTo:
  - {groups: [''], versions: [v1], kinds: [Pod]}
  - {groups: [apps], versions: [v1], kinds: [Deployment, StatefulSet], operations: [CREATE]}
  match:
    kinds: [{apiGroups: ['', apps], kinds: [Pod, Deployment]}]
  location: spec.x
  parameters: {assign: {value: 1}}
";
    assert_eq!(
        targets(yaml),
        "Pod.core/v1: CREATE, UPDATE\nDeployment.apps/v1: CREATE\n"
    );
}

#[test]
fn assign_metadata_targets_its_match_kinds_in_every_version() {
    let yaml = "\
apiVersion: mutations.sartor.dev/v1
kind: AssignMetadata
metadata: {name: owner}
spec:
  match:
    kinds:
    - {apiGroups: [apps], kinds: [Deployment]}
    - {apiGroups: ['*'], kinds: [Pod]}
    - {apiGroups: [batch]}
  location: metadata.labels.owner
  parameters: {assign: {value: team-a}}
";
    assert_eq!(
        targets(yaml),
        "Pod.*/*: CREATE, UPDATE\nDeployment.apps/*: CREATE, UPDATE\n*.batch/*: CREATE, UPDATE\n"
    );
}

#[test]
fn a_mutator_without_match_kinds_targets_everything() {
    let yaml = "\
apiVersion: mutations.sartor.dev/v1
kind: AssignMetadata
metadata: {name: owner}
spec:
  location: metadata.labels.owner
  parameters: {assign: {value: team-a}}
";
    assert!(targets_of(yaml).is_everything());
    assert_eq!(targets(yaml), "*.*/*: CREATE, UPDATE\n");
}

#[test]
fn operations_of_the_same_kind_are_merged_and_conflicted_mutators_target_nothing() {
    let yaml = "\
apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata: {name: pull}
spec:
  applyTo: [{groups: [''], versions: [v1], kinds: [Pod], operations: [CREATE]}]
  location: 'spec.containers[name: *].imagePullPolicy'
  parameters: {assign: {value: Always}}
---
apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata: {name: update-only}
spec:
  applyTo: [{groups: [''], versions: [v1], kinds: [Pod], operations: [UPDATE]}]
  location: spec.priorityClassName
  parameters: {assign: {value: y}}
---
apiVersion: mutations.sartor.dev/v1
kind: ModifySet
metadata: {name: containers-set}
spec:
  applyTo: [{groups: [''], versions: [v1], kinds: [Pod], operations: [CREATE]}]
  location: spec.containers
  parameters: {values: {fromList: [x]}}
---
apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata: {name: config}
spec:
  applyTo: [{groups: [''], versions: [v1], kinds: [ConfigMap], operations: [CREATE]}]
  location: data.x
  parameters: {assign: {value: y}}
";
    // pull and containers-set conflict about spec.containers: only
    // update-only and config are enforced.
    assert_eq!(
        targets(yaml),
        "ConfigMap.core/v1: CREATE\nPod.core/v1: UPDATE\n"
    );
}

#[test]
fn an_empty_system_targets_nothing() {
    assert!(System::new().targets().is_empty());
    assert_eq!(System::new().targets().to_string(), "");
}

#[test]
fn the_targets_on_an_operation_are_those_mutated_on_it() {
    let yaml = "\
apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata: {name: pull}
spec:
  applyTo:
  - {groups: [''], versions: [v1], kinds: [Pod]}
  - {groups: [apps], versions: [v1], kinds: [Deployment], operations: [CREATE]}
  location: spec.x
  parameters: {assign: {value: 1}}
";
    let all = targets_of(yaml);
    assert_eq!(
        all.on(sartor_engine::Operation::Update).to_string(),
        "Pod.core/v1: CREATE, UPDATE\n"
    );
    assert_eq!(all.on(sartor_engine::Operation::Create), all);
}
