//! Audit: what the mutators would change in objects already in the cluster.
//! A mutating webhook only sees writes; an object stored before a mutator
//! existed stays as it was until it is next updated. The scan lists every
//! object of the kinds the mutators can change, a page at a time, and runs
//! each through `System::mutate` as the webhook would on its next write.
//!
//! ```text
//!  System::targets ──discovery──▶ the served kinds they name (one version a kind)
//!    ──list, page by page (limit/continue)──▶ each object, as the webhook would see it
//!    ──System::mutate (UPDATE by default; the Namespace from one list of Namespaces)──▶
//!  Audited: would change (mutators, paths, the object after) | could not be mutated (why)
//! ```
//!
//! Only one page of objects is held at a time; what comes back is what
//! would change, not the objects that would not.
//!
//! A [`Repairer`] puts into stored objects what the webhook would: each is
//! read again and mutated, the patch tried with a server-side dry run, then
//! sent with the object's `resourceVersion` as a precondition, so a
//! concurrent writer is never overwritten (a conflict is retried once from a
//! fresh read). A Pod a workload owns is not patched: its owner is named.

use std::collections::{BTreeSet, HashMap};
use std::ops::ControlFlow;

use kube::Client;
use kube::api::ApiResource;
use kube::discovery::{Discovery, Scope, verbs};
use sartor_api::Exclusions;
use sartor_audit::{audit, left_out, namespace_and_name};
use sartor_engine::{Gvk, Operation, System, Targets};
use sartor_state::Snapshot;
use serde_json::Value;

use crate::api_errors::{is_forbidden, is_not_found};
use crate::mutators::{Group, MutatorSet};
use crate::pager::{self, KindPages};
use crate::watch::watched;

mod in_cluster;
pub mod rbac;
mod repair;
mod reports;

pub use in_cluster::InClusterAudit;
pub use repair::{Plan, Planned, REPAIRS_AT_ONCE, Repaired, Repairer};
pub use reports::{ReportWriter, ReportsError, Write};
pub use sartor_audit::{Audited, Keep, Outcome, Reports, Resource, Stored, Summary};

/// Why a scan stopped.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// Discovery failed.
    #[error("discovering the API server's resources: {0}")]
    Discovery(kube::Error),
    /// None of sartor's mutator kinds is served: a wrong cluster or an
    /// install without the CRDs (`sartor serve` stays not ready then).
    #[error(
        "none of sartor's mutator CRDs is served by this API server (is it the right cluster? \
         kubectl apply --server-side -f crds/); --mutators audits with a set from files"
    )]
    NoMutatorCrds,
    /// Listing a kind failed; a 403 says RBAC does not let this user list it.
    #[error("listing {resource}: {}", api_message(error, "list"))]
    List {
        /// `plural.group/version`, and the namespace when one was asked for.
        resource: String,
        /// The API server's answer (in the message, so not also a `source`).
        error: kube::Error,
    },
}

/// The API server's message (`configmaps is forbidden: User ... cannot list
/// ...`), its reason, and for a 403 that the user needs `verb` on it; other
/// errors as kube words them. One line: a message that goes on (a Pod's
/// refused update adds a diff of its spec) keeps its first line.
pub(crate) fn api_message(error: &kube::Error, verb: &str) -> String {
    match error {
        kube::Error::Api(status) => {
            let message = status.message.lines().next().unwrap_or_default();
            let reason = &status.reason;
            if is_forbidden(error) {
                format!("{message} ({reason}): the user needs the `{verb}` verb on it (RBAC)")
            } else {
                format!("{message} ({reason})")
            }
        }
        other => other.to_string(),
    }
}

/// The mutators in the cluster, compiled as the webhook compiles them (one
/// that does not compile is in the snapshot's errors, not its system);
/// Gatekeeper's kinds too with `gatekeeper_compat`. A kind whose CRD is not
/// served has none.
///
/// # Errors
/// Listing a kind failed other than with a 404.
pub async fn mutators_in_cluster(
    client: &Client,
    gatekeeper_compat: bool,
) -> Result<Snapshot, AuditError> {
    let mut set = MutatorSet::new();
    let mut sartors_served = false;
    let mut body = Vec::new();
    for kind in watched(client, gatekeeper_compat).await {
        let pages = KindPages {
            client,
            resource: &kind.resource,
            namespace: None,
            labels: None,
            body: &mut body,
        };
        let mut objects = Vec::new();
        let listed = pager::list(pages, |items| {
            objects.extend(items);
            ControlFlow::Continue(())
        });
        match listed.await {
            Ok(_) => {}
            Err(error) if is_not_found(&error) => continue,
            Err(error) => {
                return Err(AuditError::List {
                    resource: kind.crd(),
                    error,
                });
            }
        }
        sartors_served |= kind.group == Group::Sartor;
        set.replace(kind.group, kind.kind, &objects);
    }
    if !sartors_served {
        return Err(AuditError::NoMutatorCrds);
    }
    Ok(set.snapshot())
}

/// Lists every object of the kinds `system` can change (only those in
/// `namespace`, when given), runs each through it as the webhook would for
/// `operation`, and hands each one that would change or fail to `found`,
/// which may stop the scan (its reader gone); after each page, `paged`
/// hears the kind being listed and how many objects have been scanned so
/// far (for a progress line).
///
/// # Errors
/// Discovery or a list failed; what was found before is already handed on.
pub async fn scan(
    client: &Client,
    of: &ScanOf<'_>,
    found: impl FnMut(Audited) -> ControlFlow<()>,
    paged: impl FnMut(&str, usize),
) -> Result<Summary, AuditError> {
    let (summary, _) = scan_listing(client, of, found, paged).await?;
    Ok(summary)
}

/// What a scan does with a kind RBAC does not let it list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forbidden {
    /// The scan stops with the API server's refusal (`sartor audit`: the
    /// user asked for every kind).
    Stops,
    /// The kind is left out, said in the summary, and the others scanned
    /// (the in-cluster audit: the other kinds' reports stay current).
    LeftOut,
}

/// What a scan listed, for the watches that follow it: the resources that
/// can be watched (`componentstatuses` can be listed only), and the
/// Namespace objects by name.
pub(crate) struct Listing {
    pub(crate) resources: Vec<ApiResource>,
    pub(crate) namespaces: HashMap<String, Value>,
}

/// What a scan runs through which mutators, what it leaves out, and what it
/// keeps of each object found.
pub struct ScanOf<'a> {
    /// The mutators each object goes through.
    pub system: &'a System,
    /// Only this namespace's objects, when given.
    pub namespace: Option<&'a str>,
    /// The namespaces left out, as the webhook leaves them out.
    pub exclusions: &'a Exclusions,
    /// The operation each object is mutated as (UPDATE: its next write).
    pub operation: Operation,
    /// What a kind RBAC does not let the scan list does to it.
    pub forbidden: Forbidden,
    /// What is kept of each object that would change.
    pub keep: Keep,
}

/// [`scan`], handing back what it listed too.
pub(crate) async fn scan_listing(
    client: &Client,
    of: &ScanOf<'_>,
    mut found: impl FnMut(Audited) -> ControlFlow<()>,
    mut paged: impl FnMut(&str, usize),
) -> Result<(Summary, Listing), AuditError> {
    let ScanOf {
        system,
        namespace,
        exclusions,
        operation,
        forbidden,
        keep,
    } = *of;
    let discovery = Discovery::new(client.clone())
        .run_aggregated()
        .await
        .map_err(AuditError::Discovery)?;
    let targets = system.targets().on(operation);
    let resources = listed_resources(&discovery, &targets);
    // Namespaces are listed when a mutator reads them or for the exemption
    // label of the namespaces whose objects are listed.
    let needs_namespaces = resources.iter().any(|(resource, scope, _)| {
        let gvk = Gvk::new(&resource.group, &resource.version, &resource.kind);
        *scope == Scope::Namespaced || system.needs_namespace(&gvk, operation)
    });
    // The engine reads a map of Namespace objects by name as is.
    let namespaces: HashMap<String, Value> = if needs_namespaces {
        namespace_objects(client).await?
    } else {
        HashMap::new()
    };
    let mut summary = Summary::default();
    let mut scanned = 0;
    let mut listing = Listing {
        resources: Vec::new(),
        namespaces: HashMap::new(),
    };
    // One response body's bytes, its room kept from page to page.
    let mut body = Vec::new();
    for (resource, scope, watchable) in resources {
        let listed_in = match (scope, namespace) {
            (Scope::Cluster, Some(_)) => continue,
            (Scope::Namespaced, Some(namespace)) => Some(namespace),
            _ => None,
        };
        let core = self::resource(&resource);
        let label = core.label();
        let mut listed = 0;
        let page = KindPages {
            client,
            resource: &resource,
            namespace: listed_in,
            labels: None,
            body: &mut body,
        };
        let each = |items: Vec<Value>| {
            listed += items.len();
            scanned += items.len();
            for object in items {
                if left_out(exclusions, &object, &core, &namespaces) {
                    continue;
                }
                if let Some(audited) = audit(system, &namespaces, operation, object, &core, keep) {
                    match audited.outcome {
                        Outcome::Changes { .. } => summary.changed += 1,
                        Outcome::Failed(_) => summary.failed += 1,
                    }
                    found(audited)?;
                }
            }
            paged(&label, scanned);
            ControlFlow::Continue(())
        };
        match pager::list(page, each).await {
            Ok(ControlFlow::Continue(())) => {}
            // Asked to stop: what was found is handed on, the rest unlisted.
            Ok(ControlFlow::Break(())) => {
                summary.kinds.insert(label, listed);
                break;
            }
            Err(error) if is_forbidden(&error) && forbidden == Forbidden::LeftOut => {
                let refused = AuditError::List {
                    resource: listed_name(&resource, namespace),
                    error,
                };
                summary.forbidden.push(refused.to_string());
                continue;
            }
            Err(error) => {
                return Err(AuditError::List {
                    resource: listed_name(&resource, namespace),
                    error,
                });
            }
        }
        summary.kinds.insert(label, listed);
        if watchable {
            listing.resources.push(resource);
        }
    }
    listing.namespaces = namespaces;
    Ok((summary, listing))
}

/// The served resources `targets` name that can be listed, one version a
/// kind (the group's preferred one first), sorted by group, kind, version.
fn listed_resources(discovery: &Discovery, targets: &Targets) -> Vec<(ApiResource, Scope, bool)> {
    let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
    let mut resources = Vec::new();
    for group in discovery.groups() {
        let mut versions: Vec<String> = group.versions().map(str::to_string).collect();
        let preferred = group.preferred_version_or_latest().to_string();
        versions.sort_by_key(|version| *version != preferred);
        for version in versions {
            for (resource, capabilities) in group.versioned_resources(&version) {
                let named = targets.iter().any(|(target, _)| {
                    target.group.as_deref().is_none_or(|g| g == resource.group)
                        && target
                            .version
                            .as_deref()
                            .is_none_or(|v| v == resource.version)
                        && target.kind.as_deref().is_none_or(|k| k == resource.kind)
                });
                if named
                    && capabilities.supports_operation(verbs::LIST)
                    && seen.insert((resource.group.clone(), resource.kind.clone()))
                {
                    let watchable = capabilities.supports_operation(verbs::WATCH);
                    resources.push((resource, capabilities.scope, watchable));
                }
            }
        }
    }
    resources.sort_by(|(a, _, _), (b, _, _)| {
        (&a.group, &a.kind, &a.version).cmp(&(&b.group, &b.kind, &b.version))
    });
    resources
}

/// `plural.group/version` (`plural/version` for the core group), `in NS`
/// when listed in one namespace.
fn listed_name(resource: &ApiResource, namespace: Option<&str>) -> String {
    let mut name = if resource.group.is_empty() {
        format!("{}/{}", resource.plural, resource.version)
    } else {
        format!(
            "{}.{}/{}",
            resource.plural, resource.group, resource.version
        )
    };
    if let Some(namespace) = namespace {
        name.push_str(" in ");
        name.push_str(namespace);
    }
    name
}

/// The core group's Namespaces.
pub(crate) fn namespace_resource() -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".to_string(),
        api_version: "v1".to_string(),
        kind: "Namespace".to_string(),
        plural: "namespaces".to_string(),
    }
}

/// Every Namespace object, by name.
pub(crate) async fn namespace_objects(
    client: &Client,
) -> Result<HashMap<String, Value>, AuditError> {
    let resource = namespace_resource();
    let mut namespaces = HashMap::new();
    let pages = KindPages {
        client,
        resource: &resource,
        namespace: None,
        labels: None,
        body: &mut Vec::new(),
    };
    let each = |items: Vec<Value>| {
        for object in items {
            let (_, name) = namespace_and_name(&object);
            namespaces.insert(name.to_string(), object);
        }
        ControlFlow::Continue(())
    };
    // `each` never stops the list.
    let _: ControlFlow<()> = pager::list(pages, each)
        .await
        .map_err(|error| AuditError::List {
            resource: "namespaces/v1".to_string(),
            error,
        })?;
    Ok(namespaces)
}

/// The served `resource`, as the audit's core names it.
pub(crate) fn resource(resource: &ApiResource) -> Resource {
    Resource {
        group: resource.group.clone(),
        version: resource.version.clone(),
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
        plural: resource.plural.clone(),
    }
}

/// `resource`, as the cluster client serves it.
pub(crate) fn api_resource(resource: &Resource) -> ApiResource {
    ApiResource {
        group: resource.group.clone(),
        version: resource.version.clone(),
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
        plural: resource.plural.clone(),
    }
}
