//! The audit's findings as OpenReports reports, and their writer.
//!
//! One `Report` named `sartor-audit` per namespace with findings, one
//! `ClusterReport` of the same name for cluster-scoped objects: a result per
//! object and mutator that would change it (`fail`, the paths in
//! `properties.paths`), and one per object the mutators cannot mutate
//! (`error`). A scan's reports replace the previous scan's whole: each is
//! server-side applied, and sartor's reports of namespaces without findings
//! any more are deleted, so a deleted object or mutator leaves no result.

use crate::api_errors::{is_forbidden, is_not_found};
use std::collections::{BTreeMap, HashMap, HashSet};

use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use sartor_api::{ObjectReference, REPORT_NAME, REPORT_SOURCE, Report, ReportResult};
use sartor_engine::MutatorId;

use super::{Audited, Outcome};

/// At most this many results in one report (an object's size is bounded by
/// etcd): the summary still counts them all, and an annotation says how
/// many were left out.
pub const MAX_RESULTS: usize = 1000;

/// The field manager of sartor's report writes.
const FIELD_MANAGER: &str = "sartor-audit";

/// The label that finds sartor's reports again.
const MANAGED: &str = "app.kubernetes.io/managed-by=sartor";

/// The audit's findings, by namespace (`None`: cluster-scoped objects) and
/// object: kept from scan to scan and changed object by object as the
/// watches report writes and deletions.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Reports {
    by_namespace: BTreeMap<Option<String>, BTreeMap<ObjectKey, Found>>,
}

/// An object within its namespace: its group, kind and name (the version
/// it was read as does not make it another object). With the namespace,
/// the audit's key of a stored object.
pub(super) type ObjectKey = (String, String, String);

/// One object's results, and the mutators that would change it.
#[derive(Debug, Clone, PartialEq)]
struct Found {
    results: Vec<ReportResult>,
    mutators: Vec<MutatorId>,
}

/// `name` of `resource` as [`Reports`] keys it.
pub(super) fn key(resource: &ApiResource, name: &str) -> ObjectKey {
    (
        resource.group.clone(),
        resource.kind.clone(),
        name.to_string(),
    )
}

/// Why reports could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportsError {
    /// The OpenReports CRDs are not installed.
    #[error(
        "the OpenReports CRDs (reports.openreports.io, clusterreports.openreports.io) are not \
         installed: the audit's findings are not written (install them from \
         github.com/openreports/reports-api)"
    )]
    NoCrds,
    /// A write or list failed.
    #[error("writing the audit's reports: {}", super::api_message(.0, "patch"))]
    Write(kube::Error),
    /// The API server did not answer a request in [`REQUEST_TIMEOUT`].
    #[error(
        "writing the audit's reports: the API server did not answer a {0} within {secs}s",
        secs = REQUEST_TIMEOUT.as_secs()
    )]
    TimedOut(&'static str),
}

/// How long one request of the writer may take: a request the API server
/// never answers (one sent as it restarts) must not hold the audit for the
/// client's whole read timeout (295 s); the write is tried again instead.
pub const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// `request`, or [`ReportsError::TimedOut`] after [`REQUEST_TIMEOUT`].
pub(super) async fn bounded<T>(
    what: &'static str,
    request: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<Result<T, kube::Error>, ReportsError> {
    tokio::time::timeout(REQUEST_TIMEOUT, request)
        .await
        .map_err(|_| ReportsError::TimedOut(what))
}

impl Reports {
    /// Adds what the audit found of one object.
    pub fn add(&mut self, audited: &Audited) {
        let object = &audited.object;
        let reference = ObjectReference {
            api_version: object.resource.api_version.clone(),
            kind: object.resource.kind.clone(),
            name: object.name.clone(),
            namespace: object.namespace.clone(),
            uid: object.uid.clone(),
        };
        let result =
            |policy: String, result: &str, message: String, paths: Option<String>| ReportResult {
                policy,
                result: result.to_string(),
                message,
                properties: paths
                    .map(|paths| BTreeMap::from([("paths".to_string(), paths)]))
                    .unwrap_or_default(),
                resources: vec![reference.clone()],
                source: REPORT_SOURCE.to_string(),
            };
        let mut results = Vec::new();
        let mut mutators = Vec::new();
        match &audited.outcome {
            Outcome::Changes {
                mutation,
                mutators: audited_mutators,
                ..
            } => {
                // Each mutator's paths, in the order the mutators ran.
                let mut by_mutator: Vec<(String, Vec<String>)> = Vec::new();
                for change in &mutation.changes {
                    let id = change.mutator();
                    let policy = format!("{}/{}", id.kind, id.name);
                    let path = change.path().to_string();
                    match by_mutator.iter_mut().find(|(id, _)| *id == policy) {
                        Some((_, paths)) if paths.contains(&path) => {}
                        Some((_, paths)) => paths.push(path),
                        None => by_mutator.push((policy, vec![path])),
                    }
                }
                for (policy, paths) in by_mutator {
                    let paths = paths.join(", ");
                    let message = format!("would set {paths} on the object's next write");
                    results.push(result(policy, "fail", message, Some(paths)));
                }
                mutators.clone_from(audited_mutators);
            }
            Outcome::Failed(reason) => results.push(result(
                REPORT_SOURCE.to_string(),
                "error",
                format!("cannot be mutated: {reason}"),
                None,
            )),
        }
        self.by_namespace
            .entry(object.namespace.clone())
            .or_default()
            .insert(
                key(&object.resource, &object.name),
                Found { results, mutators },
            );
    }

    /// Forgets what was found of the object `name` (of `resource`, in
    /// `namespace`): it is gone, or nothing would change it any more.
    pub fn remove(&mut self, resource: &ApiResource, namespace: Option<&str>, name: &str) {
        let namespace = namespace.map(str::to_string);
        if let Some(found) = self.by_namespace.get_mut(&namespace) {
            found.remove(&key(resource, name));
            if found.is_empty() {
                self.by_namespace.remove(&namespace);
            }
        }
    }

    /// Puts `listed`, the findings of a fresh list of `resource`'s objects,
    /// in place of what was found of that kind before.
    pub fn replace_kind(&mut self, resource: &ApiResource, listed: Reports) {
        for found in self.by_namespace.values_mut() {
            found.retain(|(group, kind, _), _| *group != resource.group || *kind != resource.kind);
        }
        self.by_namespace.retain(|_, found| !found.is_empty());
        for (namespace, found) in listed.by_namespace {
            self.by_namespace
                .entry(namespace)
                .or_default()
                .extend(found);
        }
    }

    /// Puts `listed`, the findings of a fresh scan of `namespace`'s objects,
    /// in place of what was found there before.
    pub fn replace_namespace(&mut self, namespace: &str, mut listed: Reports) {
        let namespace = Some(namespace.to_string());
        match listed.by_namespace.remove(&namespace) {
            Some(found) => self.by_namespace.insert(namespace, found),
            None => self.by_namespace.remove(&namespace),
        };
    }

    /// How many objects each mutator would change.
    pub fn counts(&self) -> HashMap<MutatorId, u64> {
        let mut counts: HashMap<MutatorId, u64> = HashMap::new();
        for found in self.by_namespace.values().flat_map(BTreeMap::values) {
            for id in &found.mutators {
                *counts.entry(id.clone()).or_default() += 1;
            }
        }
        counts
    }

    /// The reports: a namespace's results by the object's group, kind and
    /// name, an object's in the order its mutators would change it.
    pub fn to_reports(&self) -> Vec<Report> {
        self.by_namespace
            .iter()
            .map(|(namespace, found)| {
                let mut results: Vec<ReportResult> = found
                    .values()
                    .flat_map(|found| found.results.iter().cloned())
                    .collect();
                let all = results.len();
                let errors = results.iter().filter(|r| r.result == "error").count();
                results.truncate(MAX_RESULTS);
                let mut report = Report::new(namespace.as_deref(), results);
                if all > MAX_RESULTS {
                    // The summary counts every result, listed or not.
                    report.summary.error = errors;
                    report.summary.fail = all - errors;
                    report.metadata.labels.insert(
                        "sartor.dev/results-left-out".to_string(),
                        (all - MAX_RESULTS).to_string(),
                    );
                }
                report
            })
            .collect()
    }
}

/// Writes the audit's reports in place of those it wrote before.
pub struct ReportWriter {
    client: Client,
    /// Each report as last written, by namespace (`None`: the
    /// ClusterReport), so a report that did not change is not sent again.
    written: HashMap<Option<String>, Report>,
}

/// How much of what is in the cluster a write makes sure of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// Every report is applied, and sartor's reports of namespaces without
    /// findings now are found by a list and deleted (after a full scan).
    Full,
    /// Only the reports changed since the last write are applied, and only
    /// those it wrote of namespaces without findings now are deleted (after
    /// the watches' events).
    Changed,
}

impl ReportWriter {
    /// A writer through `client`.
    pub fn new(client: Client) -> ReportWriter {
        ReportWriter {
            client,
            written: HashMap::new(),
        }
    }

    /// Applies `reports` and deletes sartor's other reports (namespaces
    /// without findings now, the ClusterReport when there are none), all of
    /// them or only what changed (`how`). A namespace being deleted gets no
    /// report (its objects go with it); a report the API server refuses
    /// does not keep the others from being written.
    ///
    /// # Errors
    /// The CRDs are not installed, or a write failed (the first refused);
    /// the other reports are written, and the next write is a full one.
    pub async fn write(&mut self, reports: &[Report], how: Write) -> Result<(), ReportsError> {
        let written = self.apply(reports, how).await;
        if written.is_err() {
            self.written.clear();
        }
        written
    }

    async fn apply(&mut self, reports: &[Report], how: Write) -> Result<(), ReportsError> {
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let mut refused = None;
        let before = std::mem::take(&mut self.written);
        for report in reports {
            let namespace = report.metadata.namespace.clone();
            if how == Write::Changed && before.get(&namespace) == Some(report) {
                self.written.insert(namespace, report.clone());
                continue;
            }
            let api = self.api(namespace.as_deref());
            match bounded(
                "patch",
                api.patch(REPORT_NAME, &params, &Patch::Apply(report)),
            )
            .await?
            {
                Ok(_) => {
                    self.written.insert(namespace, report.clone());
                }
                Err(error) if namespace_terminating(&error) => {}
                Err(error) => match written(error) {
                    ReportsError::NoCrds => return Err(ReportsError::NoCrds),
                    error => {
                        refused.get_or_insert(error);
                    }
                },
            }
        }
        // Looked up once per report written before (or listed): a search of
        // `reports` each would grow with the square of the namespaces.
        let kept_set: HashSet<(bool, Option<&str>)> = reports
            .iter()
            .map(|report| {
                (
                    report.kind == "ClusterReport",
                    report.metadata.namespace.as_deref(),
                )
            })
            .collect();
        let kept = |namespace: &Option<String>, cluster: bool| {
            kept_set.contains(&(cluster, namespace.as_deref()))
        };
        let stale: Vec<Option<String>> = match how {
            Write::Changed => before
                .into_keys()
                .filter(|namespace| !kept(namespace, namespace.is_none()))
                .collect(),
            Write::Full => {
                let mut stale = Vec::new();
                for (resource, cluster) in [(report_resource(), false), (cluster_resource(), true)]
                {
                    let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
                    let listed = bounded("list", api.list(&ListParams::default().labels(MANAGED)))
                        .await?
                        .map_err(written)?;
                    stale.extend(
                        listed
                            .items
                            .into_iter()
                            .filter(|report| report.metadata.name.as_deref() == Some(REPORT_NAME))
                            .map(|report| report.metadata.namespace)
                            .filter(|namespace| !kept(namespace, cluster)),
                    );
                }
                stale
            }
        };
        for namespace in stale {
            match bounded(
                "delete",
                self.api(namespace.as_deref())
                    .delete(REPORT_NAME, &DeleteParams::default()),
            )
            .await?
            {
                Ok(_) => {}
                Err(error) if is_not_found(&error) => {}
                Err(error) => return Err(ReportsError::Write(error)),
            }
        }
        match refused {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// The API of the Report of `namespace`, or of the ClusterReport.
    fn api(&self, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace {
            Some(namespace) => {
                Api::namespaced_with(self.client.clone(), namespace, &report_resource())
            }
            None => Api::all_with(self.client.clone(), &cluster_resource()),
        }
    }
}

/// Whether the API server refused a write into a namespace being deleted.
fn namespace_terminating(error: &kube::Error) -> bool {
    is_forbidden(error)
        && matches!(error, kube::Error::Api(status)
        if status.details.as_ref().is_some_and(|details| {
            details.causes.iter().any(|cause| cause.reason == "NamespaceTerminating")
        }))
}

/// A write's error, a 404 being the CRDs' absence.
fn written(error: kube::Error) -> ReportsError {
    match &error {
        error if is_not_found(error) => ReportsError::NoCrds,
        _ => ReportsError::Write(error),
    }
}

fn report_resource() -> ApiResource {
    reports_resource("Report", "reports")
}

fn cluster_resource() -> ApiResource {
    reports_resource("ClusterReport", "clusterreports")
}

fn reports_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "openreports.io".to_string(),
        version: "v1alpha1".to_string(),
        api_version: sartor_api::REPORTS_API_VERSION.to_string(),
        kind: kind.to_string(),
        plural: plural.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use sartor_api::{Input, load_mutators};
    use sartor_engine::{Operation, compile};
    use serde_json::{Value, json};

    use super::*;
    use crate::audit::{Keep, audit};

    const MUTATORS: &str = "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata:\n  name: non-root\nspec:\n  applyTo:\n  - {groups: [''], versions: [v1], kinds: [Pod]}\n  location: spec.securityContext.runAsNonRoot\n  parameters:\n    assign:\n      value: true\n---\napiVersion: mutations.sartor.dev/v1\nkind: AssignMetadata\nmetadata:\n  name: team\nspec:\n  location: metadata.labels.team\n  parameters:\n    assign:\n      value: shop\n";

    fn pods() -> ApiResource {
        ApiResource {
            group: String::new(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: "Pod".into(),
            plural: "pods".into(),
        }
    }

    fn reports(objects: Vec<Value>) -> Value {
        serde_json::to_value(found(objects).to_reports()).unwrap()
    }

    /// What the mutators would do to `objects`, all Pods.
    fn found(objects: Vec<Value>) -> Reports {
        let mut reports = Reports::default();
        for audited in objects.into_iter().filter_map(audited) {
            reports.add(&audited);
        }
        reports
    }

    /// What the mutators would do to the Pod `object`.
    fn audited(object: Value) -> Option<Audited> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mutators.yaml");
        std::fs::write(&file, MUTATORS).unwrap();
        let system = compile(load_mutators(&[Input::Path(file)])).system;
        audit(
            &system,
            &HashMap::new(),
            Operation::Update,
            object,
            &pods(),
            Keep::Changes,
        )
    }

    fn pod(namespace: &str, name: &str, labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}"), "labels": labels},
               "spec": {"containers": [{"name": "main", "image": "shop:1"}]}})
    }

    #[test]
    fn a_namespaces_report_has_a_result_per_object_and_mutator() {
        let found = reports(vec![
            pod("shop", "web", json!({})),
            // Labelled already: only the Assign would change it.
            pod("shop", "api", json!({"team": "shop"})),
            pod("bank", "vault", json!({})),
        ]);
        let result = |policy: &str, paths: &str, namespace: &str, name: &str| {
            json!({"policy": policy, "result": "fail",
                   "message": format!("would set {paths} on the object's next write"),
                   "properties": {"paths": paths},
                   "resources": [{"apiVersion": "v1", "kind": "Pod", "name": name,
                                  "namespace": namespace, "uid": format!("uid-{name}")}],
                   "source": "sartor"})
        };
        let report = |namespace: &str, results: Vec<Value>| {
            json!({"apiVersion": "openreports.io/v1alpha1", "kind": "Report",
                   "metadata": {"name": "sartor-audit", "namespace": namespace,
                                "labels": {"app.kubernetes.io/managed-by": "sartor"}},
                   "source": "sartor",
                   "summary": {"pass": 0, "fail": results.len(), "warn": 0, "error": 0, "skip": 0},
                   "results": results})
        };
        let runs_as_non_root = "spec.securityContext.runAsNonRoot";
        assert_eq!(
            found,
            json!([
                report(
                    "bank",
                    vec![
                        result("Assign/non-root", runs_as_non_root, "bank", "vault"),
                        result(
                            "AssignMetadata/team",
                            "metadata.labels.team",
                            "bank",
                            "vault"
                        ),
                    ]
                ),
                report(
                    "shop",
                    vec![
                        result("Assign/non-root", runs_as_non_root, "shop", "api"),
                        result("Assign/non-root", runs_as_non_root, "shop", "web"),
                        result("AssignMetadata/team", "metadata.labels.team", "shop", "web"),
                    ]
                ),
            ])
        );
    }

    #[test]
    fn past_the_limit_results_are_counted_and_left_out() {
        let many: Vec<Value> = (0..MAX_RESULTS)
            .map(|i| pod("shop", &format!("p{i:04}"), json!({"team": "shop"})))
            .chain([pod("shop", "last", json!({}))])
            .collect();
        let found = reports(many);
        let report = &found[0];
        assert_eq!(
            report["results"].as_array().map(Vec::len),
            Some(MAX_RESULTS)
        );
        assert_eq!(report["summary"]["fail"], json!(MAX_RESULTS + 2));
        assert_eq!(
            report["metadata"]["labels"]["sartor.dev/results-left-out"],
            json!("2")
        );
    }

    /// The policies of each namespace's results, with the object's name.
    fn policies(reports: &Reports) -> Vec<(Option<String>, Vec<String>)> {
        reports
            .to_reports()
            .into_iter()
            .map(|report| {
                let results = report
                    .results
                    .iter()
                    .map(|result| format!("{} {}", result.resources[0].name, result.policy))
                    .collect();
                (report.metadata.namespace, results)
            })
            .collect()
    }

    #[test]
    fn an_object_is_replaced_removed_and_its_kind_relisted() {
        let mut reports = found(vec![
            pod("shop", "web", json!({})),
            pod("bank", "vault", json!({})),
        ]);
        let counts = |reports: &Reports| {
            let mut counts: Vec<(String, u64)> = reports
                .counts()
                .into_iter()
                .map(|(id, count)| (id.to_string(), count))
                .collect();
            counts.sort();
            counts
        };
        assert_eq!(
            counts(&reports),
            [
                ("Assign non-root".to_string(), 2),
                ("AssignMetadata team".to_string(), 2)
            ]
        );
        // web written with its label: found again, one result fewer.
        let web = audited(pod("shop", "web", json!({"team": "shop"})));
        reports.remove(&pods(), Some("shop"), "web");
        reports.add(&web.unwrap());
        assert_eq!(
            policies(&reports),
            [
                (
                    Some("bank".to_string()),
                    vec![
                        "vault Assign/non-root".to_string(),
                        "vault AssignMetadata/team".to_string()
                    ]
                ),
                (
                    Some("shop".to_string()),
                    vec!["web Assign/non-root".to_string()]
                ),
            ]
        );
        // vault deleted: bank has no report.
        reports.remove(&pods(), Some("bank"), "vault");
        assert_eq!(
            policies(&reports),
            [(
                Some("shop".to_string()),
                vec!["web Assign/non-root".to_string()]
            )]
        );
        assert_eq!(counts(&reports), [("Assign non-root".to_string(), 1)]);
        // Pods relisted: what the list found replaces every Pod's findings.
        reports.replace_kind(
            &pods(),
            found(vec![pod("bank", "ledger", json!({"team": "bank"}))]),
        );
        assert_eq!(
            policies(&reports),
            [(
                Some("bank".to_string()),
                vec!["ledger Assign/non-root".to_string()]
            )]
        );
    }
}
