//! The audit kept in the cluster: the replica holding the audit's Lease
//! scans in full every interval, and at once when the mutators change or it
//! takes the Lease; between scans it watches the kinds the scan listed and
//! puts each write and deletion into the reports within about a second.
//!
//! ```text
//!  mutators published | interval | Lease taken ──▶ (leader only) full scan(System, UPDATE)
//!    ──▶ Reports (a result per object and mutator) ──▶ ReportWriter: apply all, delete the stale
//!  a watch per kind listed: Apply(o) | Delete(o) | a relist (Init…InitDone, that kind's results replaced)
//!    ──▶ Reports, object by object ──(events settle for 1s)──▶ ReportWriter: apply what changed
//!  NamespaceCache (the webhook's): a Namespace's labels or annotations changed ──▶ its objects
//!    scanned again (what namespaceSelectors, values from it, the exemption and repair labels read)
//!    ──▶ each mutator's status.audit.wouldChange (when it changed)
//!    ──▶ sartor_audit_* gauges; no CRDs: logged once, /readyz says so, admission goes on
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use sartor_api::{API_VERSION, Exclusions, REPAIR_LABEL};
use sartor_audit::{ObjectKey, Resource, audit, key, left_out};
use sartor_engine::{MutatorId, Operation, System, is_namespace_kind};
use sartor_state::{Lookup, Namespaces as _, Snapshot};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::{
    Audited, Forbidden, Keep, Outcome, Repaired, Repairer, ReportWriter, Reports, ScanOf, Stored,
    Write, namespace_and_name, scan_listing,
};
use crate::api_errors::is_not_found;
use crate::feed::Feed;
use crate::namespaces::{NamespaceCache, NamespaceChange};
use crate::pager::PAGE;
use crate::relist::{Change, Relist, Step};
use crate::status::resource;
use crate::watch::to_value;

/// The field manager of `status.audit`, the same on every replica: the one
/// holding the Lease owns the field.
const STATUS_MANAGER: &str = "sartor-audit";

/// The write the in-cluster audit mutates stored objects as: their next
/// one. Its kinds are what [`super::rbac`] grants.
pub(super) const OPERATION: Operation = Operation::Update;

/// How long the watches' events gather before the reports are written.
const SETTLE: Duration = Duration::from_secs(1);

/// How long a watch's failure is said after it last failed. A watch that
/// keeps failing fails again within kube-runtime's backoff (30 s at most,
/// jitter aside); one that resumed is quiet.
const WATCH_FAILURE_SAID: Duration = Duration::from_secs(60);

/// The most namespaces scanned again one by one after their labels
/// changed; past it, one full scan.
const RESCANS_AT_MOST: usize = 4;

/// How long after a failed write it is tried again (say, the CRDs missing).
const RETRY: Duration = Duration::from_secs(5);

/// When a failed full scan is tried again: [`RETRY`] after the first
/// failure, doubling with each one after, never later than the interval.
/// A scan that fails while the API server restarts is not left for a whole
/// interval (an hour, say), with no watches started meanwhile.
fn scan_retry(failures: u32, interval: Duration) -> Duration {
    RETRY
        .saturating_mul(2u32.saturating_pow(failures.saturating_sub(1)))
        .min(interval)
}

/// The in-cluster audit of one replica.
pub struct InClusterAudit {
    /// The API server's client (its identity needs `list` and `watch` on
    /// every kind the mutators can change, and the reports' and the Lease's
    /// writes).
    pub client: Client,
    /// The mutators in force, and where the audit's problem is said.
    pub feed: Feed,
    /// The namespaces the webhook never sees, left out as it leaves them.
    pub exclusions: Exclusions,
    /// The time between full scans.
    pub interval: Duration,
    /// Whether this replica holds the Lease ([`crate::LeaseHolder::run`]).
    pub leader: watch::Receiver<bool>,
    /// The webhook's Namespaces: a change of one's labels or annotations
    /// has its objects scanned again.
    pub namespaces: NamespaceCache,
}

/// One event of the watch of an audited kind.
struct KindEvent {
    /// Which start of the watches it comes from: events of watches stopped
    /// since are dropped.
    generation: u64,
    resource: Arc<ApiResource>,
    event: Result<watcher::Event<DynamicObject>, watcher::Error>,
}

/// The watches of the kinds the last scan listed (dropped: stopped).
struct Watches {
    resources: Vec<ApiResource>,
    generation: u64,
    _tasks: JoinSet<()>,
}

impl Watches {
    /// A watch per resource, its events sent to `events`.
    fn start(
        client: &Client,
        resources: Vec<ApiResource>,
        generation: u64,
        events: &mpsc::Sender<KindEvent>,
    ) -> Watches {
        let mut tasks = JoinSet::new();
        for listed in &resources {
            let api: Api<DynamicObject> = Api::all_with(client.clone(), listed);
            let resource = Arc::new(listed.clone());
            let events = events.clone();
            tasks.spawn(async move {
                let config = watcher::Config::default().page_size(PAGE);
                let mut stream = watcher(api, config).default_backoff().boxed();
                while let Some(event) = stream.next().await {
                    let event = KindEvent {
                        generation,
                        resource: resource.clone(),
                        event,
                    };
                    if events.send(event).await.is_err() {
                        return;
                    }
                }
            });
        }
        Watches {
            resources,
            generation,
            _tasks: tasks,
        }
    }
}

/// What the leader found, kept current between scans.
struct Findings {
    /// The mutators the findings are of.
    snapshot: Arc<Snapshot>,
    reports: Reports,
    /// Namespace objects by name: from the scan, and fetched for a
    /// namespace seen first in an event.
    namespaces: HashMap<String, Value>,
    /// The relist of each kind (`Kind.group/version`): its findings so far.
    relisting: HashMap<String, Relist<Reports>>,
    /// Namespaces whose labels or annotations changed since the last scan
    /// of their objects, to scan again.
    rescan: BTreeSet<String>,
    /// Objects found to change in namespaces labelled for repair, to patch.
    to_repair: BTreeMap<ObjectKey, Stored>,
    /// Each object whose repair failed, with what was said of it (so a
    /// lasting refusal is logged once).
    not_repaired: HashMap<ObjectKey, String>,
}

/// `object`'s key.
fn object_key(object: &Stored) -> ObjectKey {
    key(&object.resource, object.namespace.as_deref(), &object.name)
}

impl Findings {
    /// Marks `audited`'s object for repair when it would change.
    fn mark_changed(&mut self, audited: Audited) {
        if let Outcome::Changes { .. } = audited.outcome {
            self.mark_for_repair(audited.object);
        }
    }

    /// Marks `object` (one the mutators would change) for repair when its
    /// namespace is labelled [`REPAIR_LABEL`]`=true`.
    fn mark_for_repair(&mut self, object: Stored) {
        let labelled = object
            .namespace
            .as_ref()
            .and_then(|namespace| self.namespaces.get(namespace))
            .and_then(|namespace| namespace.pointer("/metadata/labels"))
            .and_then(|labels| labels.get(REPAIR_LABEL))
            .and_then(Value::as_str)
            == Some("true");
        if labelled {
            self.to_repair.insert(object_key(&object), object);
        }
    }
}

/// What the audit says is wrong, on `/readyz` and in its log.
#[derive(Default)]
struct Problems {
    /// The last scan's or write's.
    work: Option<String>,
    /// The kinds the last scan could not list (RBAC).
    forbidden: Option<String>,
    /// The last failed scan of a namespace whose labels changed.
    rescan: Option<String>,
    /// Each failing watch's, by kind, with when it last failed: a watch that
    /// resumes where it was sends nothing until something changes, so a
    /// failure not repeated within [`WATCH_FAILURE_SAID`] is taken as over.
    watches: BTreeMap<String, (String, Instant)>,
    /// What `/readyz` says now.
    said: Option<String>,
}

/// What the replica holding the Lease keeps from one turn of its loop to
/// the next: the findings and the watches that keep them current, what is
/// due to be written, and what is said wrong.
struct Leadership {
    writer: ReportWriter,
    problems: Problems,
    /// Each mutator's count as last written to its status.
    written: HashMap<MutatorId, u64>,
    /// Where the watches send their events.
    events: mpsc::Sender<KindEvent>,
    watches: Option<Watches>,
    findings: Option<Findings>,
    /// The watches' start: events of watches stopped since are dropped.
    generation: u64,
    scan_now: bool,
    next_scan: Instant,
    /// Full scans failed in a row.
    scan_failures: u32,
    /// When the watches' changes (or a failed write again) are written.
    due: Option<(Instant, Write)>,
}

impl Leadership {
    fn new(audit: &InClusterAudit, events: mpsc::Sender<KindEvent>) -> Leadership {
        Leadership {
            writer: ReportWriter::new(audit.client.clone()),
            problems: Problems::default(),
            written: HashMap::new(),
            events,
            watches: None,
            findings: None,
            generation: 0,
            scan_now: true,
            next_scan: Instant::now() + audit.interval,
            scan_failures: 0,
            due: None,
        }
    }

    /// Another replica writes (and says its problems); counts are written
    /// again in full if this one leads again.
    fn step_down(&mut self, audit: &InClusterAudit) {
        self.written.clear();
        self.watches = None;
        self.findings = None;
        self.due = None;
        self.problems = Problems::default();
        audit.say(&mut self.problems);
    }

    /// A full scan under `snapshot`: its findings replace what was found,
    /// the watches follow the kinds it listed, and the reports are written
    /// whole. A failed scan leaves the reports as the last one did, and
    /// `/readyz` says why they are not kept current.
    async fn scan(&mut self, audit: &InClusterAudit, snapshot: Arc<Snapshot>) {
        self.next_scan = Instant::now() + audit.interval;
        match audit.scan(&snapshot).await {
            Ok((reports, listing, forbidden, changed)) => {
                self.scan_failures = 0;
                self.problems.work = None;
                // A full scan covers any namespace left to rescan.
                self.problems.rescan = None;
                self.problems.forbidden = (!forbidden.is_empty()).then(|| {
                    format!(
                        "{}; objects of these kinds are not audited",
                        forbidden.join("; ")
                    )
                });
                if self.watches.as_ref().map(|w| &w.resources) != Some(&listing.resources) {
                    self.generation += 1;
                    self.problems.watches.clear();
                    self.watches = Some(Watches::start(
                        &audit.client,
                        listing.resources,
                        self.generation,
                        &self.events,
                    ));
                }
                let not_repaired = self
                    .findings
                    .take()
                    .map(|found| found.not_repaired)
                    .unwrap_or_default();
                let mut found = Findings {
                    snapshot,
                    reports,
                    rescan: BTreeSet::new(),
                    namespaces: listing.namespaces,
                    relisting: HashMap::new(),
                    to_repair: BTreeMap::new(),
                    not_repaired,
                };
                for object in changed {
                    found.mark_for_repair(object);
                }
                self.due = audit
                    .write(
                        &mut self.writer,
                        &found,
                        Write::Full,
                        &mut self.written,
                        &mut self.problems,
                    )
                    .await;
                audit.repair(&mut found).await;
                self.findings = Some(found);
            }
            Err(error) => {
                self.scan_failures = self.scan_failures.saturating_add(1);
                let retry = scan_retry(self.scan_failures, audit.interval);
                self.next_scan = Instant::now() + retry;
                self.problems.work = Some(format!(
                    "the last scan failed, scanning again in {}s: {error}",
                    retry.as_secs()
                ));
            }
        }
        audit.say(&mut self.problems);
    }

    /// A Namespace's labels or annotations changed (its objects are
    /// scanned again before the next write), or it was deleted (its
    /// objects go with it, each with its own event; a namespace made again
    /// by that name is read afresh).
    fn namespace_changed(&mut self, audit: &InClusterAudit, change: NamespaceChange) {
        let Some(found) = &mut self.findings else {
            return;
        };
        match change {
            NamespaceChange::Described(name) => {
                if let Lookup::Found(namespace) = audit.namespaces.lookup(&name) {
                    found
                        .namespaces
                        .insert(name.clone(), Value::clone(&namespace));
                }
                found.rescan.insert(name);
                self.due
                    .get_or_insert((Instant::now() + SETTLE, Write::Changed));
            }
            NamespaceChange::Deleted(name) => {
                found.namespaces.remove(&name);
                found.rescan.remove(&name);
            }
        }
    }

    /// One event of a current watch, into the findings.
    async fn watched(&mut self, audit: &InClusterAudit, event: KindEvent) {
        let current = self.watches.as_ref().map(|w| w.generation) == Some(event.generation);
        if let Some(found) = self.findings.as_mut().filter(|_| current)
            && audit.follow(found, event, &mut self.problems).await
        {
            self.due
                .get_or_insert((Instant::now() + SETTLE, Write::Changed));
        }
        audit.say(&mut self.problems);
    }

    /// The write that was due: namespaces to scan again first (past
    /// [`RESCANS_AT_MOST`], one full scan instead), then the reports, then
    /// the repairs.
    async fn write(&mut self, audit: &InClusterAudit) {
        let how = self.due.map_or(Write::Changed, |(_, how)| how);
        self.due = None;
        let Some(found) = &mut self.findings else {
            return;
        };
        let rescanned = match found.rescan.len() > RESCANS_AT_MOST {
            // Many at once (a relabelling of every namespace): one full
            // scan lists less than a scan of each.
            true => {
                found.rescan.clear();
                self.scan_now = true;
                true
            }
            false => audit.rescan(found, &mut self.problems).await,
        };
        self.due = audit
            .write(
                &mut self.writer,
                found,
                how,
                &mut self.written,
                &mut self.problems,
            )
            .await;
        if !rescanned {
            self.due = self.due.or(Some((Instant::now() + RETRY, Write::Changed)));
        }
        audit.say(&mut self.problems);
        audit.repair(found).await;
    }

    /// When a watch's failure is no longer said, if one is.
    fn watch_failure_over(&self) -> Option<Instant> {
        self.problems
            .watches
            .values()
            .map(|(_, failed)| *failed + WATCH_FAILURE_SAID)
            .min()
    }
}

impl InClusterAudit {
    /// Scans, watches and reports until the mutators' or the Lease's
    /// sender is gone.
    pub async fn run(mut self) {
        let mut mutators = self.feed.state().subscribe();
        let mut namespace_changes = self.namespaces.changes();
        let (sender, mut events) = mpsc::channel::<KindEvent>(256);
        let mut turn = Leadership::new(&self, sender);
        loop {
            let leading = *self.leader.borrow_and_update();
            self.feed.metrics().set_audit_leader(leading);
            if !leading {
                turn.step_down(&self);
            }
            if leading
                && turn.scan_now
                && let Some(snapshot) = self.feed.state().current()
            {
                turn.scan(&self, snapshot).await;
            }
            turn.scan_now = false;
            let write_at = turn.due.map(|(at, _)| at);
            let watch_failure_over = turn.watch_failure_over();
            // Whatever comes first: the interval, new mutators, the Lease,
            // a watch's event, the write of what changed.
            tokio::select! {
                () = tokio::time::sleep_until(turn.next_scan) => turn.scan_now = true,
                changed = mutators.changed() => match changed {
                    Ok(()) => turn.scan_now = true,
                    Err(_) => return,
                },
                changed = self.leader.changed() => match changed {
                    Ok(()) => turn.scan_now = true,
                    Err(_) => return,
                },
                changed = namespace_changes.recv() => match changed {
                    Ok(change) => turn.namespace_changed(&self, change),
                    // Changes were missed: all of them are caught up with.
                    Err(broadcast::error::RecvError::Lagged(_)) => turn.scan_now = true,
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                Some(event) = events.recv() => turn.watched(&self, event).await,
                // A watch's failure no longer said.
                () = tokio::time::sleep_until(watch_failure_over.unwrap_or_else(Instant::now)), if watch_failure_over.is_some() => {
                    self.say(&mut turn.problems);
                },
                () = tokio::time::sleep_until(write_at.unwrap_or_else(Instant::now)), if write_at.is_some() => {
                    turn.write(&self).await;
                },
            }
        }
    }
    /// A full scan of `snapshot`'s kinds: the findings, what was listed, the
    /// kinds RBAC left out (the API server's refusals), and the objects that
    /// would change.
    async fn scan(
        &self,
        snapshot: &Snapshot,
    ) -> Result<(Reports, super::Listing, Vec<String>, Vec<Stored>), super::AuditError> {
        let started = std::time::Instant::now();
        let (reports, listing, summary, changed) = self.scan_in(snapshot, None).await?;
        self.feed.metrics().set_audit_scan(
            summary.scanned(),
            summary.changed,
            summary.failed,
            started.elapsed().as_secs_f64(),
        );
        Ok((reports, listing, summary.forbidden, changed))
    }

    /// A scan of every namespace (`None`) or of one: the findings, what was
    /// listed, the summary, and the objects that would change.
    async fn scan_in(
        &self,
        snapshot: &Snapshot,
        namespace: Option<&str>,
    ) -> Result<(Reports, super::Listing, super::Summary, Vec<Stored>), super::AuditError> {
        let mut reports = Reports::default();
        let mut changed = Vec::new();
        let of = ScanOf {
            system: &snapshot.system,
            namespace,
            exclusions: &self.exclusions,
            operation: OPERATION,
            forbidden: Forbidden::LeftOut,
            keep: Keep::Changes,
        };
        let found = |audited: Audited| {
            reports.add(&audited);
            if let Outcome::Changes { .. } = audited.outcome {
                changed.push(audited.object);
            }
            ControlFlow::Continue(())
        };
        let (summary, listing) = scan_listing(&self.client, &of, found, |_, _| {}).await?;
        Ok((reports, listing, summary, changed))
    }

    /// Puts one watch event into `found`: whether the findings changed. A
    /// relist's objects are gathered and replace the kind's findings when it
    /// is done (objects deleted while the watch was down leave with it).
    async fn follow(
        &self,
        found: &mut Findings,
        event: KindEvent,
        problems: &mut Problems,
    ) -> bool {
        let listed = &event.resource;
        let resource = &super::resource(listed);
        let kind = resource.label();
        let event = match event.event {
            Ok(event) => {
                // A list done or an event seen: the watch works again (a
                // list alone can succeed where the watch after it fails).
                if !matches!(event, watcher::Event::Init | watcher::Event::InitApply(_)) {
                    problems.watches.remove(&kind);
                }
                event
            }
            Err(error) => {
                if let Some(relist) = found.relisting.get_mut(&kind) {
                    relist.abandon();
                }
                let said = format!(
                    "watching {} failed, retrying: {error}",
                    super::listed_name(listed, None)
                );
                problems.watches.insert(kind, (said, Instant::now()));
                return false;
            }
        };
        let relist = found.relisting.entry(kind).or_default();
        match relist.step(event) {
            Step::Pending => false,
            Step::Add(relisted, object) => {
                if let Some(value) = to_value(object, listed) {
                    self.learn_namespace(&mut found.namespaces, &value).await;
                    // Not marked for repair: the full scan before marked
                    // what it found, and a relist's objects can be older
                    // than a repair made since.
                    if let Some(audited) =
                        self.audit(&found.snapshot.system, &found.namespaces, value, resource)
                    {
                        relisted.add(&audited);
                    }
                }
                false
            }
            Step::Changed(Change::Listed(relisted)) => {
                found.reports.replace_kind(resource, relisted);
                true
            }
            Step::Changed(Change::Applied(object)) => {
                let Some(value) = to_value(object, listed) else {
                    return false;
                };
                let (namespace, name) = namespace_and_name(&value);
                let name = name.to_string();
                found
                    .reports
                    .remove(resource, Some(namespace).filter(|ns| !ns.is_empty()), &name);
                if is_namespace_kind(&resource.group, &resource.kind) {
                    found.namespaces.insert(name, value.clone());
                }
                self.learn_namespace(&mut found.namespaces, &value).await;
                if let Some(audited) =
                    self.audit(&found.snapshot.system, &found.namespaces, value, resource)
                {
                    found.reports.add(&audited);
                    found.mark_changed(audited);
                }
                true
            }
            Step::Changed(Change::Deleted(object)) => {
                let (namespace, name) = (object.metadata.namespace, object.metadata.name);
                found.to_repair.remove(&key(
                    resource,
                    namespace.as_deref(),
                    name.as_deref().unwrap_or_default(),
                ));
                found.reports.remove(
                    resource,
                    namespace.as_deref(),
                    name.as_deref().unwrap_or_default(),
                );
                true
            }
        }
    }

    /// Scans again the objects of each namespace whose labels or
    /// annotations changed, their findings in place of those before (and
    /// those that would change marked for repair, if it is now labelled for
    /// it): whether every one was. A namespace that failed stays to be
    /// scanned again, and the failure is said until one succeeds.
    async fn rescan(&self, found: &mut Findings, problems: &mut Problems) -> bool {
        let snapshot = found.snapshot.clone();
        let mut failed = BTreeSet::new();
        for namespace in std::mem::take(&mut found.rescan) {
            match self.scan_in(&snapshot, Some(&namespace)).await {
                Ok((reports, _, summary, changed)) => {
                    tracing::info!(
                        namespace,
                        scanned = summary.scanned(),
                        changed = summary.changed,
                        "audit scanned a namespace again: its labels or annotations changed"
                    );
                    found.reports.replace_namespace(&namespace, reports);
                    for object in changed {
                        found.mark_for_repair(object);
                    }
                }
                Err(error) => {
                    problems.rescan = Some(format!(
                        "scanning namespace {namespace} again after its labels changed failed, \
                         retrying in {}s: {error}",
                        RETRY.as_secs()
                    ));
                    failed.insert(namespace);
                }
            }
        }
        if failed.is_empty() {
            problems.rescan = None;
        }
        found.rescan = failed;
        found.rescan.is_empty()
    }

    /// Puts the Namespace of `object` into `namespaces` when it is not there
    /// (created after the scan), from the webhook's cache or fetched through
    /// it; left out when it cannot be read.
    async fn learn_namespace(&self, namespaces: &mut HashMap<String, Value>, object: &Value) {
        let (namespace, _) = namespace_and_name(object);
        if namespace.is_empty() || namespaces.contains_key(namespace) {
            return;
        }
        if let Lookup::Found(found) = self.namespaces.fetch(namespace).await {
            namespaces.insert(namespace.to_string(), Value::clone(&found));
        }
    }

    /// What the mutators would do to `object` on its next write, unless the
    /// webhook never sees it.
    fn audit(
        &self,
        system: &System,
        namespaces: &HashMap<String, Value>,
        object: Value,
        resource: &Resource,
    ) -> Option<super::Audited> {
        if left_out(&self.exclusions, &object, resource, namespaces) {
            return None;
        }
        audit(
            system,
            namespaces,
            OPERATION,
            object,
            resource,
            Keep::Changes,
        )
    }

    /// Repairs the objects marked for repair, [`super::REPAIRS_AT_ONCE`] at a time, as
    /// `sartor audit --fix` repairs them; each repaired one comes back as a
    /// watch event and leaves the reports. A failure is logged once while it
    /// lasts, and counted.
    async fn repair(&self, found: &mut Findings) {
        if found.to_repair.is_empty() {
            return;
        }
        let objects = std::mem::take(&mut found.to_repair);
        let repairer = Repairer::with_namespaces(
            &self.client,
            &found.snapshot.system,
            OPERATION,
            found.namespaces.clone(),
        );
        // The events and reports wait while repairs are made.
        let repaired: Vec<(Stored, Repaired)> =
            repairer.repair_each(objects.into_values()).collect().await;
        for (object, repaired) in repaired {
            let key = object_key(&object);
            let name = format!(
                "{} {}",
                object.resource.label(),
                match &object.namespace {
                    Some(namespace) => format!("{namespace}/{}", object.name),
                    None => object.name.clone(),
                }
            );
            self.feed
                .metrics()
                .count_audit_repair(repair_result(&repaired));
            if repaired.is_done() {
                found.not_repaired.remove(&key);
                if let Repaired::Patched { paths } = &repaired {
                    tracing::info!(object = %name, paths = %paths.join(", "), "audit repaired a stored object");
                }
                continue;
            }
            let said = repaired.to_string();
            if found.not_repaired.get(&key) != Some(&said) {
                match repaired {
                    Repaired::FixOwner { .. } => {
                        tracing::info!(object = %name, outcome = %said, "audit did not repair a stored object");
                    }
                    _ => {
                        tracing::warn!(object = %name, outcome = %said, "audit could not repair a stored object")
                    }
                }
                found.not_repaired.insert(key, said);
            }
        }
    }

    /// Writes the findings' reports (all, or only what changed) and the
    /// mutators' counts; a failed write is said and tried again, in full, in
    /// [`RETRY`] (returned as the next write).
    async fn write(
        &self,
        writer: &mut ReportWriter,
        found: &Findings,
        how: Write,
        written: &mut HashMap<MutatorId, u64>,
        problems: &mut Problems,
    ) -> Option<(Instant, Write)> {
        let reports = found.reports.to_reports();
        let again = match writer.write(&reports, how).await {
            Ok(()) => {
                problems.work = None;
                tracing::debug!(reports = reports.len(), "audit reports written");
                None
            }
            Err(error) => {
                problems.work = Some(error.to_string());
                Some((Instant::now() + RETRY, Write::Full))
            }
        };
        self.write_status(&found.snapshot.system, &found.reports.counts(), written)
            .await;
        again
    }

    /// Writes `status.audit.wouldChange` of each mutator of `system` whose
    /// count is not the one last written (`written`). A mutator sartor has no
    /// object of (Gatekeeper's, read with --gatekeeper-compat) is left alone;
    /// another refusal is logged and retried at the next scan.
    async fn write_status(
        &self,
        system: &System,
        counts: &HashMap<MutatorId, u64>,
        written: &mut HashMap<MutatorId, u64>,
    ) {
        let params = PatchParams::apply(STATUS_MANAGER).force();
        for mutator in system.mutators() {
            let id = mutator.id();
            let count = counts.get(id).copied().unwrap_or(0);
            if written.get(id) == Some(&count) {
                continue;
            }
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource(id.kind));
            let body = json!({
                "apiVersion": API_VERSION,
                "kind": id.kind.as_str(),
                "metadata": {"name": id.name},
                "status": {"audit": {"wouldChange": count}},
            });
            let patched = super::reports::bounded(
                "patch",
                api.patch_status(&id.name, &params, &Patch::Apply(&body)),
            )
            .await;
            match patched {
                Ok(Ok(_)) => {
                    written.insert(id.clone(), count);
                }
                Ok(Err(error)) if is_not_found(&error) => {
                    written.insert(id.clone(), count);
                }
                Err(timed_out) => {
                    tracing::warn!(mutator = %id, error = %timed_out, "cannot write the audit's count to the mutator's status; retried at the next scan");
                }
                Ok(Err(error)) => {
                    tracing::warn!(mutator = %id, %error, "cannot write the audit's count to the mutator's status; retried at the next scan");
                }
            }
        }
    }

    /// Says the first problem on `/readyz` (the scan's or write's, else a
    /// kind it may not list, else a watch's), and logs it when it is not the
    /// one said before.
    fn say(&self, problems: &mut Problems) {
        problems
            .watches
            .retain(|_, (_, failed)| failed.elapsed() < WATCH_FAILURE_SAID);
        let now = problems
            .work
            .clone()
            .or_else(|| problems.rescan.clone())
            .or_else(|| problems.forbidden.clone())
            .or_else(|| {
                problems
                    .watches
                    .values()
                    .next()
                    .map(|(said, _)| said.clone())
            });
        self.feed
            .metrics()
            .set_audit_reports_written(problems.work.is_none());
        if now == problems.said {
            return;
        }
        match &now {
            Some(problem) => {
                tracing::warn!(%problem, "audit reports not kept current; admission goes on");
            }
            None => tracing::info!("audit reports kept current again"),
        }
        self.feed.set_audit_problem(now.clone());
        problems.said = now;
    }
}

/// The `result` label of a repair's outcome.
fn repair_result(repaired: &Repaired) -> &'static str {
    match repaired {
        Repaired::Patched { .. } => "repaired",
        Repaired::Unchanged => "unchanged",
        Repaired::Gone => "gone",
        Repaired::FixOwner { .. } => "fix_owner",
        Repaired::Refused(_) => "refused",
        Repaired::Failed(_) => "failed",
        Repaired::Conflict => "conflict",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_scan_is_retried_sooner_than_the_interval_and_backs_off() {
        let hour = Duration::from_secs(3600);
        let retries: Vec<u64> = (1..=12)
            .map(|failures| scan_retry(failures, hour).as_secs())
            .collect();
        assert_eq!(
            retries,
            [5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 3600, 3600]
        );
        // Never later than a short interval.
        assert_eq!(
            scan_retry(1, Duration::from_secs(3)),
            Duration::from_secs(3)
        );
        assert_eq!(scan_retry(u32::MAX, hour), hour);
    }
}
