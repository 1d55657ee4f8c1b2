//! Objects sartor never mutates: `System::mutate` leaves them as admitted,
//! whatever matches them, and says why.

use sartor_api::Protection;
use sartor_engine::{Admission, Mutation, Operation, System};
use serde_json::{Value, json};

use super::system;

/// An AssignMetadata that matches every object of every kind.
const LABEL_EVERYTHING: &str = "apiVersion: mutations.sartor.dev/v1\nkind: AssignMetadata\n\
     metadata: {name: label-everything}\nspec:\n  match:\n    kinds: [{apiGroups: ['*'], kinds: ['*']}]\n  \
     location: metadata.labels.mutated\n  parameters: {assign: {value: 'yes'}}\n";

/// `object` through `System::mutate` (with a patch asked for): the object as
/// it comes out, and what happened.
/// Mutates a copy of `object`, annotating it when `annotate`.
fn admit(
    system: &System,
    object: &Value,
    operation: Operation,
    annotate: bool,
) -> (Value, Mutation) {
    let admission = Admission::new(object)
        .operation(operation)
        .with_patch()
        .annotate(annotate);
    let mut out = object.clone();
    let mutation = system.mutate(&admission, &mut out).unwrap();
    (out, mutation)
}

fn constraint() -> Value {
    json!({
        "apiVersion": "constraints.gatekeeper.sh/v1beta1",
        "kind": "K8sRequiredLabels",
        "metadata": {"name": "must-have-owner"},
        "spec": {
            "match": {"kinds": [{"apiGroups": [""], "kinds": ["Namespace"]}]},
            "parameters": {"labels": [{"key": "owner"}]},
        },
    })
}

fn provider() -> Value {
    json!({
        "apiVersion": "externaldata.gatekeeper.sh/v1beta1",
        "kind": "Provider",
        "metadata": {"name": "tags"},
        "spec": {"url": "https://tags.example.com/", "timeout": 3, "caBundle": "Q0E="},
    })
}

fn sartor_assign() -> Value {
    json!({
        "apiVersion": "mutations.sartor.dev/v1",
        "kind": "Assign",
        "metadata": {"name": "pull"},
        "spec": {
            "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
            "location": "spec.containers[name: *].imagePullPolicy",
            "parameters": {"assign": {"value": "Always"}},
        },
    })
}

fn webhook_configuration() -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "policy"},
        "webhooks": [{
            "name": "policy.example.com",
            "clientConfig": {"url": "https://policy.example.com/validate"},
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
        }],
    })
}

#[test]
fn a_mutator_matching_everything_leaves_protected_objects_unchanged() {
    let system = system(LABEL_EVERYTHING);
    let protected = [
        (constraint(), Protection::Gatekeeper),
        (provider(), Protection::Gatekeeper),
        (sartor_assign(), Protection::Sartor),
        (webhook_configuration(), Protection::AdmissionConfiguration),
    ];
    for operation in [Operation::Create, Operation::Update] {
        for (object, protection) in &protected {
            // Not annotated either: nothing is written to a protected object.
            let (out, mutation) = admit(&system, object, operation, true);
            assert_eq!(out, *object, "{operation:?}");
            assert_eq!(
                mutation,
                Mutation {
                    protected: Some(*protection),
                    ..Mutation::default()
                },
                "{operation:?} {}",
                object["kind"]
            );
        }
    }
}

#[test]
fn the_same_mutator_labels_a_config_map() {
    let system = system(LABEL_EVERYTHING);
    let config_map = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "default"},
        "data": {"mode": "fast"},
    });
    let (out, mutation) = admit(&system, &config_map, Operation::Create, false);
    assert_eq!(
        out,
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "default", "labels": {"mutated": "yes"}},
            "data": {"mode": "fast"},
        })
    );
    assert_eq!(mutation.protected, None);
    assert_eq!(mutation.passes, 2);
}

#[test]
fn gatekeepers_groups_outside_its_webhooks_list_are_mutated() {
    // Gatekeeper's webhook protects a fixed list of groups, not every
    // `*.gatekeeper.sh`: a SyncSet is mutated by Gatekeeper, so by sartor too.
    let system = system(LABEL_EVERYTHING);
    let sync_set = json!({
        "apiVersion": "syncset.gatekeeper.sh/v1alpha1",
        "kind": "SyncSet",
        "metadata": {"name": "pods"},
        "spec": {"gvks": [{"group": "", "version": "v1", "kind": "Pod"}]},
    });
    let (out, mutation) = admit(&system, &sync_set, Operation::Create, false);
    assert_eq!(out["metadata"]["labels"], json!({"mutated": "yes"}));
    assert_eq!(mutation.protected, None);
}
