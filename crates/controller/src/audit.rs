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

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ops::ControlFlow;

use futures::AsyncBufReadExt as _;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::discovery::{Discovery, Scope, verbs};
use kube::{Api, Client};
use sartor_api::{Exclusions, namespace_of};
use sartor_engine::{Admission, Gvk, Mutation, MutatorId, Operation, System, Targets};
use sartor_state::Snapshot;
use serde_json::Value;

use crate::api_errors::{is_forbidden, is_gone, is_not_found};
use crate::mutators::{Group, MutatorSet};
use crate::watch::{to_value, watched};

mod in_cluster;
mod listed;
pub mod rbac;
mod repair;
mod reports;

pub use in_cluster::InClusterAudit;
pub use repair::{Plan, Planned, REPAIRS_AT_ONCE, Repaired, Repairer};
pub use reports::{ReportWriter, Reports, ReportsError, Write};

/// Objects asked for per list call.
pub const PAGE: u32 = 250;

/// One object the mutators would change, or could not mutate.
#[derive(Debug, Clone, PartialEq)]
pub struct Audited {
    /// Which object.
    pub object: Stored,
    /// What the mutators would do to it.
    pub outcome: Outcome,
}

/// Where a stored object is: its resource (group, version, kind, plural),
/// namespace and name.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// The resource it was listed as.
    pub resource: ApiResource,
    /// Its namespace; `None` for a cluster-scoped object.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// Its uid, as listed (for the reports' object references).
    pub uid: Option<String>,
}

/// What the mutators would do to one object.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// They would change it.
    Changes {
        /// The mutators that would change it, in the order they would.
        mutators: Vec<MutatorId>,
        /// Every path they would change (concrete: globs pinned to elements).
        paths: Vec<String>,
        /// The object as listed (managed fields left out), when the audit
        /// was asked to keep it ([`Keep::Before`]: a diff). Kept or not,
        /// the engine mutates the listed object itself, never a copy.
        before: Option<Value>,
        /// The object as the webhook would store it.
        after: Value,
        /// The mutation itself: each change with its pass.
        mutation: Box<Mutation>,
    },
    /// The webhook could not mutate it (it would answer per `--on-error`).
    Failed(String),
}

/// What an audit keeps of an object that would change, beyond its
/// mutators, paths and mutation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Nothing more (a listing, the reports).
    Changes,
    /// The object as listed too, for a diff: a copy of each object before
    /// its mutation, the one copy a scan otherwise never makes.
    Before,
    /// The JSON patch of the change (a repair).
    Patch,
}

/// Whether the webhook never sees `object` (of `resource`), so an audit
/// leaves it out: it lives in (or, a Namespace, is) a namespace `exclusions`
/// leave out; `namespaces` are the Namespace objects, for their exemption
/// label. Sartor's own audit reports are left out too: sartor writes them,
/// and its own writes are never mutated, so a mutator of every kind would
/// find them every scan.
fn left_out(
    exclusions: &Exclusions,
    object: &Value,
    resource: &ApiResource,
    namespaces: &HashMap<String, Value>,
) -> bool {
    if is_sartors_report(object, resource) {
        return true;
    }
    let (namespace, name) = namespace_and_name(object);
    let namespace = namespace_of(&resource.group, &resource.kind, namespace, name);
    let labels = namespaces
        .get(namespace)
        .and_then(|object| object.pointer("/metadata/labels"))
        .and_then(Value::as_object);
    exclusions.of(namespace, labels).is_some()
}

/// Whether `object` is one of the audit's own reports.
fn is_sartors_report(object: &Value, resource: &ApiResource) -> bool {
    resource.group == "openreports.io"
        && object.pointer("/metadata/name").and_then(Value::as_str) == Some(sartor_api::REPORT_NAME)
        && object
            .pointer("/metadata/labels/app.kubernetes.io~1managed-by")
            .and_then(Value::as_str)
            == Some(sartor_api::REPORT_SOURCE)
}

/// What a scan went through.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Each kind listed, as `Kind.group/version`, with how many objects.
    pub kinds: BTreeMap<String, usize>,
    /// Objects the mutators would change.
    pub changed: usize,
    /// Objects they could not mutate.
    pub failed: usize,
    /// The kinds left out because RBAC does not let sartor list them, as the
    /// API server refused (only when the scan goes on past them).
    pub forbidden: Vec<String>,
}

impl Summary {
    /// Every object listed.
    pub fn scanned(&self) -> usize {
        self.kinds.values().sum()
    }
}

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
    for kind in watched(client, gatekeeper_compat).await {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &kind.resource);
        let listed = match api.list(&ListParams::default()).await {
            Ok(listed) => listed,
            Err(error) if is_not_found(&error) => continue,
            Err(error) => {
                return Err(AuditError::List {
                    resource: kind.crd(),
                    error,
                });
            }
        };
        let objects: Vec<Value> = listed
            .items
            .into_iter()
            .filter_map(|object| to_value(object, &kind.resource))
            .collect();
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
        let label = kind_label(&resource);
        let mut listed = 0;
        let page = KindPages {
            client,
            resource: &resource,
            namespace: listed_in,
            body: &mut body,
        };
        let each = |items: Vec<Value>| {
            listed += items.len();
            scanned += items.len();
            for object in items {
                if left_out(exclusions, &object, &resource, &namespaces) {
                    continue;
                }
                if let Some(audited) =
                    audit(system, &namespaces, operation, object, &resource, keep)
                {
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
        match list_kind(page, each).await {
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

/// One page of a list and the next page's token, or the API server's error.
type Page = Result<(Vec<Value>, Option<String>), kube::Error>;

/// Where [`list_kind`] gets pages: the page after `token` (`None`: the
/// first).
trait Pages {
    fn page(&mut self, token: Option<String>) -> impl Future<Output = Page> + Send;
}

/// One kind's pages from the API server.
struct KindPages<'a> {
    client: &'a Client,
    resource: &'a ApiResource,
    namespace: Option<&'a str>,
    /// Where each page's response is read.
    body: &'a mut Vec<u8>,
}

impl Pages for KindPages<'_> {
    fn page(&mut self, token: Option<String>) -> impl Future<Output = Page> + Send {
        let mut params = ListParams::default().limit(PAGE);
        if let Some(token) = token {
            params = params.continue_token(&token);
        }
        let (client, resource, namespace) = (self.client, self.resource, self.namespace);
        let body = &mut *self.body;
        async move { list_page(client, resource, namespace, &params, body).await }
    }
}

/// Restarts of one kind's list after an expired continue token, before the
/// scan gives up on it.
const RESTARTS: usize = 3;

/// Lists one kind, page by page through `page` (the continue token of the
/// page to fetch: `None` for the first), handing each page's objects to
/// `each`, each object once, until `each` says to stop (`Break`, handed
/// back). An expired continue token (410: a list held up
/// longer than the API server keeps its snapshot, say behind `--diff |
/// less`) lists the kind again from the start, leaving out the objects
/// already handed on (by namespace and name); after [`RESTARTS`] of them,
/// the 410 is the error.
async fn list_kind(
    mut pages: impl Pages,
    mut each: impl FnMut(Vec<Value>) -> ControlFlow<()>,
) -> Result<ControlFlow<()>, kube::Error> {
    let mut handed = HandedOn::default();
    let mut token: Option<String> = None;
    let mut restarts = 0;
    loop {
        match pages.page(token.take()).await {
            Ok((mut items, next)) => {
                if restarts > 0 {
                    items.retain(|object| !handed.before_restart(object));
                }
                for object in &items {
                    handed.add(object);
                }
                if each(items).is_break() {
                    return Ok(ControlFlow::Break(()));
                }
                match next {
                    Some(next) => token = Some(next),
                    None => return Ok(ControlFlow::Continue(())),
                }
            }
            Err(error) if is_gone(&error) && restarts < RESTARTS => {
                restarts += 1;
                handed.restart();
                tracing::info!(
                    restarts,
                    "the list's continue token expired; listing the kind again from the start"
                );
            }
            Err(error) => return Err(error),
        }
    }
}

/// The objects of one kind a list has handed on, by namespace and name:
/// one string of them all (a restart is rare, a kind's objects many, so no
/// allocation per object), looked up only after a restart.
#[derive(Debug, Default)]
struct HandedOn {
    /// Each object's namespace and name, one after another.
    names: String,
    /// Where each object's namespace ends and its name ends, in `names`.
    ends: Vec<(usize, usize)>,
    /// Those handed on before the last restart.
    before: HashSet<(String, String)>,
}

impl HandedOn {
    fn add(&mut self, object: &Value) {
        let (namespace, name) = namespace_and_name(object);
        self.names.push_str(namespace);
        let namespace_end = self.names.len();
        self.names.push_str(name);
        self.ends.push((namespace_end, self.names.len()));
    }

    /// The list starts again: what it handed on so far is what it has to
    /// leave out.
    fn restart(&mut self) {
        let mut start = 0;
        for &(namespace_end, end) in &self.ends {
            let namespace = self.names.get(start..namespace_end).unwrap_or_default();
            let name = self.names.get(namespace_end..end).unwrap_or_default();
            self.before
                .insert((namespace.to_string(), name.to_string()));
            start = end;
        }
    }

    fn before_restart(&self, object: &Value) -> bool {
        let (namespace, name) = namespace_and_name(object);
        self.before
            .contains(&(namespace.to_string(), name.to_string()))
    }
}

/// An object's `metadata.namespace` and `metadata.name` (`""` when absent).
fn namespace_and_name(object: &Value) -> (&str, &str) {
    let metadata = object.get("metadata");
    let field = |name: &str| {
        metadata
            .and_then(|metadata| metadata.get(name))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    (field("namespace"), field("name"))
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

/// `Kind.group/version` (`Kind.core/version` for the core group): how the
/// summary names a kind listed.
pub fn kind_label(resource: &ApiResource) -> String {
    let group = match resource.group.as_str() {
        "" => "core",
        group => group,
    };
    format!("{}.{group}/{}", resource.kind, resource.version)
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
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let mut namespaces = HashMap::new();
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = api.list(&params).await.map_err(|error| AuditError::List {
            resource: "namespaces/v1".to_string(),
            error,
        })?;
        for object in page.items {
            if let Some(name) = object.metadata.name.clone()
                && let Some(value) = to_value(object, &resource)
            {
                namespaces.insert(name, without_managed_fields(value));
            }
        }
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    Ok(namespaces)
}

/// One page of a list, as JSON (parsed once, not through a typed object,
/// and without managed fields), each item with its `apiVersion` and `kind`,
/// and the next page's token. The response is read into `body`, whose room
/// the next page reuses: a page of Pods is megabytes, and growing a fresh
/// buffer for each (then copying it into a string) was a fifth of a scan's
/// CPU.
async fn list_page(
    client: &Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    params: &ListParams,
    body: &mut Vec<u8>,
) -> Result<(Vec<Value>, Option<String>), kube::Error> {
    let url = <DynamicObject as kube::Resource>::url_path(resource, namespace);
    let request = kube::core::Request::new(url)
        .list(params)
        .map_err(kube::Error::BuildRequest)?;
    body.clear();
    // Chunk by chunk: `read_to_end` would zero the buffer's spare room before
    // each read, megabytes for every few kilobytes read.
    let mut response = std::pin::pin!(client.request_stream(request).await?);
    loop {
        let chunk = response.fill_buf().await.map_err(kube::Error::ReadEvents)?;
        if chunk.is_empty() {
            break;
        }
        let read = chunk.len();
        body.extend_from_slice(chunk);
        response.as_mut().consume_unpin(read);
    }
    let page: listed::ListPage = serde_json::from_slice(body).map_err(kube::Error::SerdeError)?;
    Ok(page.into_objects(&resource.api_version, &resource.kind))
}

/// One object through `system`, mutated in place: `None` when it would not
/// change. `keep` says what else is kept of it (the object as listed, the
/// JSON patch a repair sends).
pub(crate) fn audit(
    system: &System,
    namespaces: &HashMap<String, Value>,
    operation: Operation,
    object: Value,
    resource: &ApiResource,
    keep: Keep,
) -> Option<Audited> {
    let metadata = |field: &str| {
        object
            .get("metadata")
            .and_then(|metadata| metadata.get(field))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let name = metadata("name").unwrap_or_default();
    let namespace = metadata("namespace");
    let uid = metadata("uid");
    let mut after = without_managed_fields(object);
    let admission = Admission::new(&after)
        .operation(operation)
        .namespace(namespace.as_deref())
        .namespaces(namespaces);
    let admission = match keep {
        Keep::Patch => admission.with_patch(),
        Keep::Changes | Keep::Before => admission,
    };
    let before = (keep == Keep::Before).then(|| after.clone());
    let outcome = match system.mutate(&admission, &mut after) {
        Err(error) => Outcome::Failed(error.reason.to_string()),
        Ok(mutation) if mutation.unanswered => Outcome::Failed(
            "a mutator takes external data, which an audit does not ask providers for".to_string(),
        ),
        Ok(mutation) if !mutation.mutated => return None,
        Ok(mutation) => {
            let mutators: Vec<MutatorId> = mutation.applied().into_iter().cloned().collect();
            let mut paths: Vec<String> = Vec::new();
            for change in &mutation.changes {
                let path = change.path().to_string();
                if !paths.contains(&path) {
                    paths.push(path);
                }
            }
            Outcome::Changes {
                mutators,
                paths,
                before,
                after,
                mutation: Box::new(mutation),
            }
        }
    };
    Some(Audited {
        object: Stored {
            resource: resource.clone(),
            namespace,
            name,
            uid,
        },
        outcome,
    })
}

/// `object` without `metadata.managedFields` (as `kubectl get` shows it).
pub(crate) fn without_managed_fields(mut object: Value) -> Value {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    object
}

#[cfg(test)]
mod tests {
    use kube::core::Status;
    use serde_json::json;

    use sartor_api::{EXEMPTION_LABEL, Wildcard};

    use super::*;

    #[tokio::test]
    async fn an_expired_continue_token_lists_the_kind_again_without_repeats() {
        let object = |name: &str| json!({"metadata": {"namespace": "shop", "name": name}});
        let expired = || {
            kube::Error::Api(
                Status::failure("the provided continue parameter is too old", "Expired")
                    .with_code(410)
                    .boxed(),
            )
        };
        /// Pages answered by `answer` from the call's number and token.
        struct Scripted<F> {
            calls: usize,
            answer: F,
        }
        impl<F: FnMut(usize, Option<&str>) -> Page> Pages for Scripted<F> {
            fn page(&mut self, token: Option<String>) -> impl Future<Output = Page> + Send {
                self.calls += 1;
                let page = (self.answer)(self.calls, token.as_deref());
                async move { page }
            }
        }
        // a, b | 410 | a, b (again) | c
        let pages = Scripted {
            calls: 0,
            answer: |call: usize, token: Option<&str>| match (call, token) {
                (1, None) => Ok((vec![object("a"), object("b")], Some("t1".into()))),
                (2, Some("t1")) => Err(expired()),
                (3, None) => Ok((vec![object("a"), object("b")], Some("t2".into()))),
                (4, Some("t2")) => Ok((vec![object("c")], None)),
                (call, token) => panic!("call {call} with {token:?}"),
            },
        };
        let mut handed: Vec<Vec<Value>> = Vec::new();
        let listed = list_kind(pages, |items| {
            handed.push(items);
            ControlFlow::Continue(())
        });
        assert_eq!(listed.await.unwrap(), ControlFlow::Continue(()));
        assert_eq!(
            handed,
            [vec![object("a"), object("b")], vec![], vec![object("c")]]
        );
        // A token that keeps expiring: the 410 after RESTARTS restarts.
        let mut calls = 0;
        let always = Scripted {
            calls: 0,
            answer: |_: usize, token: Option<&str>| {
                calls += 1;
                match token {
                    None => Ok((vec![object("a")], Some("t".into()))),
                    Some(_) => Err(expired()),
                }
            },
        };
        let error = list_kind(always, |_| ControlFlow::Continue(()))
            .await
            .unwrap_err();
        assert!(is_gone(&error));
        assert_eq!(calls, 2 * (RESTARTS + 1));
        // Told to stop after the first page: no other page is asked for.
        let mut asked = 0;
        let endless = Scripted {
            calls: 0,
            answer: |call: usize, _: Option<&str>| {
                asked = call;
                Ok((vec![object("a")], Some("more".into())))
            },
        };
        let stopped = list_kind(endless, |_| ControlFlow::Break(())).await;
        assert_eq!(stopped.unwrap(), ControlFlow::Break(()));
        assert_eq!(asked, 1);
    }

    #[test]
    fn the_webhooks_excluded_namespaces_are_left_out() {
        let exclusions = Exclusions::new(
            "sartor-system",
            ["kube-system", "*-sandbox"]
                .into_iter()
                .filter_map(|pattern| Wildcard::new(pattern).ok())
                .collect(),
        );
        let namespaces: HashMap<String, Value> = [
            json!({"metadata": {"name": "quiet", "labels": {EXEMPTION_LABEL: ""}}}),
            json!({"metadata": {"name": "shop", "labels": {"team": "core"}}}),
        ]
        .into_iter()
        .map(|object| (namespace_and_name(&object).1.to_string(), object))
        .collect();
        let pods = ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&());
        let pod = |namespace: &str| json!({"metadata": {"name": "web", "namespace": namespace}});
        let left_out =
            |object: &Value, resource: &ApiResource, namespaces: &HashMap<String, Value>| {
                left_out(&exclusions, object, resource, namespaces)
            };
        let none = HashMap::new();
        assert!(left_out(&pod("sartor-system"), &pods, &none));
        assert!(left_out(&pod("kube-system"), &pods, &none));
        assert!(left_out(&pod("dev-sandbox"), &pods, &none));
        assert!(left_out(&pod("quiet"), &pods, &namespaces));
        assert!(!left_out(&pod("shop"), &pods, &namespaces));
        assert!(!left_out(&pod("shop"), &pods, &none));
        // The audit's own reports, and only those.
        let reports = ApiResource {
            group: "openreports.io".into(),
            version: "v1alpha1".into(),
            api_version: "openreports.io/v1alpha1".into(),
            kind: "Report".into(),
            plural: "reports".into(),
        };
        let report = |name: &str, managed_by: &str| {
            json!({"metadata": {"name": name, "namespace": "shop",
                                "labels": {"app.kubernetes.io/managed-by": managed_by}}})
        };
        assert!(left_out(&report("sartor-audit", "sartor"), &reports, &none));
        assert!(!left_out(
            &report("sartor-audit", "kyverno"),
            &reports,
            &none
        ));
        assert!(!left_out(&report("nightly", "sartor"), &reports, &none));
    }
}
