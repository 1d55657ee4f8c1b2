//! Repair: the stored objects an audit lists, changed as the webhook would
//! have changed them on their next write.
//!
//! ```text
//!  Stored ──GET──▶ the object now ──System::mutate (as the audit)──▶ Plan: its JSON patch,
//!    first op `replace /metadata/resourceVersion` with the version read
//!    ──PATCH ?dryRun=All──▶ what the API server would refuse, refused without a change
//!    ──PATCH──▶ Patched | 409: read again, plan again, once | Refused (its message)
//! ```
//!
//! The version in the patch makes the API server apply it only to the object
//! as it was read: a writer in between gets the patch refused (409), never
//! overwritten. A Pod a workload owns is not patched: the workload would
//! make it again as it was, and most of a Pod's spec cannot be changed; its
//! owner is named instead.

use crate::api_errors::{is_conflict, is_not_found};
use std::collections::HashMap;
use std::fmt;

use futures::{Stream, StreamExt as _};
use kube::Client;
use kube::api::{DynamicObject, GetParams, Patch, PatchParams};
use sartor_engine::{Operation, System};
use serde_json::{Value, json};

use sartor_audit::{Keep, Outcome, Resource, Stored, audit, without_managed_fields};

use super::{AuditError, api_message, api_resource, namespace_objects};

/// How many repairs [`Repairer::repair_each`] has under way at once.
pub const REPAIRS_AT_ONCE: usize = 8;

/// Repairs stored objects with one mutator set, as the webhook would mutate
/// them for `operation`.
pub struct Repairer<'a> {
    client: &'a Client,
    system: &'a System,
    /// The Namespace objects, for mutators that read them.
    namespaces: HashMap<String, Value>,
    operation: Operation,
}

/// A repair planned from one read of the object.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Which object.
    pub object: Stored,
    /// The JSON patch, its first operation the `resourceVersion` read.
    pub patch: Value,
    /// The paths the mutators change.
    pub paths: Vec<String>,
}

/// What a read found to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Planned {
    /// Send this patch.
    Patch(Box<Plan>),
    /// Nothing to send: the outcome already.
    Done(Repaired),
}

/// What a repair did to one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repaired {
    /// Patched: the object holds what the webhook would have stored.
    Patched {
        /// The paths the mutators changed.
        paths: Vec<String>,
    },
    /// Read again, it needed nothing (another writer changed it meanwhile).
    Unchanged,
    /// Deleted before it could be read again.
    Gone,
    /// A Pod a workload owns: not patched; the owner (`Kind/name`) is what
    /// to repair (its next rollout makes the Pod through the webhook).
    FixOwner {
        /// `Kind/name` of the controlling owner.
        owner: String,
    },
    /// The API server refused the patch (in the dry run or for real): its
    /// message (an immutable field, a validating webhook, RBAC).
    Refused(String),
    /// The mutators cannot mutate it (as the audit reports it).
    Failed(String),
    /// Another writer changed it between read and patch, and again on the
    /// retry from a fresh read.
    Conflict,
}

impl fmt::Display for Repaired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Repaired::Patched { paths } => write!(f, "repaired ({})", paths.join(", ")),
            Repaired::Unchanged => f.write_str("needs nothing any more (changed meanwhile)"),
            Repaired::Gone => f.write_str("deleted meanwhile"),
            Repaired::FixOwner { owner } => {
                write!(f, "not patched: owned by {owner}; repair its owner")
            }
            Repaired::Refused(message) => write!(f, "refused: {message}"),
            Repaired::Failed(reason) => write!(f, "cannot be mutated: {reason}"),
            Repaired::Conflict => {
                f.write_str("changed by another writer while being repaired, twice; audit it again")
            }
        }
    }
}

impl Repaired {
    /// Whether the object is now as the mutators would have it (or gone).
    pub fn is_done(&self) -> bool {
        matches!(
            self,
            Repaired::Patched { .. } | Repaired::Unchanged | Repaired::Gone
        )
    }
}

impl<'a> Repairer<'a> {
    /// A repairer for `system`'s mutations for `operation`; lists the
    /// Namespace objects once, for the mutators that read them.
    ///
    /// # Errors
    /// The Namespaces could not be listed.
    pub async fn new(
        client: &'a Client,
        system: &'a System,
        operation: Operation,
    ) -> Result<Repairer<'a>, AuditError> {
        Ok(Repairer {
            client,
            system,
            namespaces: namespace_objects(client).await?,
            operation,
        })
    }

    /// A repairer that mutates with `namespaces` (the Namespace objects by
    /// name, as the in-cluster audit keeps them) instead of listing them.
    pub(crate) fn with_namespaces(
        client: &'a Client,
        system: &'a System,
        operation: Operation,
        namespaces: HashMap<String, Value>,
    ) -> Repairer<'a> {
        Repairer {
            client,
            system,
            namespaces,
            operation,
        }
    }

    /// Repairs each of `objects`, [`REPAIRS_AT_ONCE`] at a time, each with
    /// what became of it, in the order given. Each repair is a read, a dry
    /// run and a patch of its own object, so they do not wait on each other.
    pub fn repair_each<'r>(
        &'r self,
        objects: impl IntoIterator<Item = Stored> + 'r,
    ) -> impl Stream<Item = (Stored, Repaired)> + 'r {
        futures::stream::iter(objects)
            .map(move |object| async move {
                let repaired = self.repair(&object).await;
                (object, repaired)
            })
            .buffered(REPAIRS_AT_ONCE)
    }

    /// Repairs `object`: [`Repairer::plan`], then [`Repairer::apply`].
    pub async fn repair(&self, object: &Stored) -> Repaired {
        match self.plan(object).await {
            Planned::Patch(plan) => self.apply(*plan).await,
            Planned::Done(repaired) => repaired,
        }
    }

    /// Reads `object` and works out its patch.
    pub async fn plan(&self, object: &Stored) -> Planned {
        let url = <DynamicObject as kube::Resource>::url_path(
            &api_resource(&object.resource),
            object.namespace.as_deref(),
        );
        let request = match kube::core::Request::new(url).get(&object.name, &GetParams::default()) {
            Ok(request) => request,
            Err(error) => return Planned::Done(Repaired::Refused(error.to_string())),
        };
        let mut read: Value = match self.client.request(request).await {
            Ok(read) => read,
            Err(error) if is_not_found(&error) => {
                return Planned::Done(Repaired::Gone);
            }
            Err(error) => return Planned::Done(Repaired::Refused(api_message(&error, "get"))),
        };
        if let Some(fields) = read.as_object_mut() {
            fields.insert(
                "apiVersion".into(),
                Value::from(object.resource.api_version.as_str()),
            );
            fields.insert("kind".into(), Value::from(object.resource.kind.as_str()));
        }
        if let Some(owner) = controlling_owner(&object.resource, &read) {
            return Planned::Done(Repaired::FixOwner { owner });
        }
        let version = read
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string);
        let audited = audit(
            self.system,
            &self.namespaces,
            self.operation,
            without_managed_fields(read),
            &object.resource,
            Keep::Patch,
        );
        let Some(audited) = audited else {
            return Planned::Done(Repaired::Unchanged);
        };
        match audited.outcome {
            Outcome::Failed(reason) => Planned::Done(Repaired::Failed(reason)),
            Outcome::Changes {
                paths, mutation, ..
            } => {
                let operations = mutation
                    .patch
                    .as_ref()
                    .and_then(|patch| serde_json::from_slice::<Vec<Value>>(patch.json()).ok());
                let (Some(version), Some(operations)) = (version, operations) else {
                    return Planned::Done(Repaired::Failed(
                        "the API server gave the object no resourceVersion, or the patch could \
                         not be built"
                            .to_string(),
                    ));
                };
                let mut patch = vec![json!({
                    "op": "replace",
                    "path": "/metadata/resourceVersion",
                    "value": version,
                })];
                patch.extend(operations);
                Planned::Patch(Box::new(Plan {
                    object: audited.object,
                    patch: Value::Array(patch),
                    paths,
                }))
            }
        }
    }

    /// Sends `plan`'s patch: a server-side dry run first, then for real.
    /// A conflict (the object changed since it was read) is retried once
    /// from a fresh read.
    pub async fn apply(&self, plan: Plan) -> Repaired {
        let mut plan = plan;
        for attempt in 0..2 {
            match self.send(&plan).await {
                Ok(()) => return Repaired::Patched { paths: plan.paths },
                Err(Sent::Refused(message)) => return Repaired::Refused(message),
                Err(Sent::Conflict) if attempt == 0 => match self.plan(&plan.object).await {
                    Planned::Patch(again) => plan = *again,
                    Planned::Done(repaired) => return repaired,
                },
                Err(Sent::Conflict) => {}
            }
        }
        Repaired::Conflict
    }

    /// The dry run, then the patch.
    async fn send(&self, plan: &Plan) -> Result<(), Sent> {
        for dry_run in [true, false] {
            let params = PatchParams {
                dry_run,
                ..PatchParams::default()
            };
            let url = <DynamicObject as kube::Resource>::url_path(
                &api_resource(&plan.object.resource),
                plan.object.namespace.as_deref(),
            );
            // kube builds JSON patches only with its own json-patch version;
            // the body is the same array, so the request is built as a
            // merge patch and given JSON patch's content type.
            let mut request = kube::core::Request::new(url)
                .patch(&plan.object.name, &params, &Patch::Merge(&plan.patch))
                .map_err(|error| Sent::Refused(error.to_string()))?;
            if let Ok(value) = "application/json-patch+json".parse() {
                request.headers_mut().insert("content-type", value);
            }
            match self.client.request::<Value>(request).await {
                Ok(_) => {}
                Err(error) if is_conflict(&error) => return Err(Sent::Conflict),
                Err(error) => return Err(Sent::Refused(api_message(&error, "patch"))),
            }
        }
        Ok(())
    }
}

/// Why a patch was not applied.
enum Sent {
    /// The object changed since it was read.
    Conflict,
    /// Anything else, in the API server's words.
    Refused(String),
}

/// `Kind/name` of the workload that controls `object`, when it is a Pod.
fn controlling_owner(resource: &Resource, object: &Value) -> Option<String> {
    if !(resource.group.is_empty() && resource.kind == "Pod") {
        return None;
    }
    object
        .pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|owner| owner.get("controller").and_then(Value::as_bool) == Some(true))
        .map(|owner| {
            let field = |name: &str| owner.get(name).and_then(Value::as_str).unwrap_or("?");
            format!("{}/{}", field("kind"), field("name"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(group: &str, kind: &str) -> Resource {
        Resource::new(group, "v1", kind, &format!("{}s", kind.to_lowercase()))
    }

    #[test]
    fn a_pod_a_workload_controls_names_its_owner() {
        let owned = json!({"metadata": {"name": "web-1", "ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": "n1"},
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f", "controller": true},
        ]}});
        assert_eq!(
            controlling_owner(&resource("", "Pod"), &owned),
            Some("ReplicaSet/web-5d8f".to_string())
        );
        // Owned, but by nothing that controls it: patched as any Pod.
        let referenced = json!({"metadata": {"ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": "n1"}]}});
        assert_eq!(controlling_owner(&resource("", "Pod"), &referenced), None);
        assert_eq!(controlling_owner(&resource("", "Pod"), &json!({})), None);
        // Only Pods: a controlled ReplicaSet is patched (its Deployment
        // leaves the fields a mutator sets alone).
        assert_eq!(
            controlling_owner(&resource("apps", "ReplicaSet"), &owned),
            None
        );
    }

    #[test]
    fn what_a_repair_did_is_said_in_one_line() {
        let lines = [
            Repaired::Patched {
                paths: vec!["spec.replicas".into(), "metadata.labels.team".into()],
            },
            Repaired::FixOwner {
                owner: "ReplicaSet/web-5d8f".into(),
            },
            Repaired::Refused("Pod \"p\" is invalid: spec: Forbidden".into()),
            Repaired::Conflict,
        ]
        .map(|repaired| repaired.to_string());
        assert_eq!(
            lines,
            [
                "repaired (spec.replicas, metadata.labels.team)",
                "not patched: owned by ReplicaSet/web-5d8f; repair its owner",
                "refused: Pod \"p\" is invalid: spec: Forbidden",
                "changed by another writer while being repaired, twice; audit it again",
            ]
        );
    }
}
