//! The audit's findings as OpenReports reports, and their writer.
//!
//! One `Report` named `sartor-audit` per namespace with findings, one
//! `ClusterReport` of the same name for cluster-scoped objects: a result per
//! object and mutator that would change it (`fail`, the paths in
//! `properties.paths`), and one per object the mutators cannot mutate
//! (`error`). A scan's reports replace the previous scan's whole: each is
//! server-side applied, and sartor's reports of namespaces without findings
//! any more are deleted, so a deleted object or mutator leaves no result.

use std::collections::BTreeMap;

use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use sartor_api::{ObjectReference, REPORT_NAME, REPORT_SOURCE, Report, ReportResult};

use super::{Audited, Outcome};

/// At most this many results in one report (an object's size is bounded by
/// etcd): the summary still counts them all, and an annotation says how
/// many were left out.
pub const MAX_RESULTS: usize = 1000;

/// The field manager of sartor's report writes.
const FIELD_MANAGER: &str = "sartor-audit";

/// The label that finds sartor's reports again.
const MANAGED: &str = "app.kubernetes.io/managed-by=sartor";

/// The results of one scan, by namespace (`None`: cluster-scoped objects).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Reports {
    results: BTreeMap<Option<String>, Vec<ReportResult>>,
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
        let results = self.results.entry(object.namespace.clone()).or_default();
        match &audited.outcome {
            Outcome::Changes { mutation, .. } => {
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
            }
            Outcome::Failed(reason) => results.push(result(
                REPORT_SOURCE.to_string(),
                "error",
                format!("cannot be mutated: {reason}"),
                None,
            )),
        }
    }

    /// The reports, a namespace's results in the order found.
    pub fn into_reports(self) -> Vec<Report> {
        self.results
            .into_iter()
            .map(|(namespace, mut results)| {
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

/// Writes a scan's reports in place of the last scan's.
pub struct ReportWriter {
    client: Client,
}

impl ReportWriter {
    /// A writer through `client`.
    pub fn new(client: Client) -> ReportWriter {
        ReportWriter { client }
    }

    /// Applies `reports` and deletes sartor's other reports (namespaces
    /// without findings now, the ClusterReport when there are none). A
    /// namespace being deleted gets no report (its objects go with it); a
    /// report the API server refuses does not keep the others from being
    /// written.
    ///
    /// # Errors
    /// The CRDs are not installed, or a write failed (the first refused);
    /// the other reports are written.
    pub async fn write(&self, reports: &[Report]) -> Result<(), ReportsError> {
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let mut refused = None;
        for report in reports {
            let api = self.api(report.metadata.namespace.as_deref());
            match api.patch(REPORT_NAME, &params, &Patch::Apply(report)).await {
                Ok(_) => {}
                Err(error) if namespace_terminating(&error) => {}
                Err(error) => match written(error) {
                    ReportsError::NoCrds => return Err(ReportsError::NoCrds),
                    error => {
                        refused.get_or_insert(error);
                    }
                },
            }
        }
        for (resource, cluster) in [(report_resource(), false), (cluster_resource(), true)] {
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
            let listed = api
                .list(&ListParams::default().labels(MANAGED))
                .await
                .map_err(written)?;
            for stale in listed.items {
                let namespace = stale.metadata.namespace.clone();
                let kept = reports.iter().any(|report| {
                    (report.kind == "ClusterReport") == cluster
                        && report.metadata.namespace == namespace
                });
                let name = stale.metadata.name.clone().unwrap_or_default();
                if kept || name != REPORT_NAME {
                    continue;
                }
                let api = match &namespace {
                    Some(namespace) => Api::<DynamicObject>::namespaced_with(
                        self.client.clone(),
                        namespace,
                        &resource,
                    ),
                    None => Api::all_with(self.client.clone(), &resource),
                };
                match api.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(status)) if status.code == 404 => {}
                    Err(error) => return Err(ReportsError::Write(error)),
                }
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
    matches!(error, kube::Error::Api(status)
    if status.code == 403
        && status.details.as_ref().is_some_and(|details| {
            details.causes.iter().any(|cause| cause.reason == "NamespaceTerminating")
        }))
}

/// A write's error, a 404 being the CRDs' absence.
fn written(error: kube::Error) -> ReportsError {
    match &error {
        kube::Error::Api(status) if status.code == 404 => ReportsError::NoCrds,
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
    use crate::audit::audit;

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
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mutators.yaml");
        std::fs::write(&file, MUTATORS).unwrap();
        let system = compile(load_mutators(&[Input::Path(file)])).system;
        let mut reports = Reports::default();
        for object in objects {
            if let Some(audited) = audit(
                &system,
                &HashMap::new(),
                Operation::Update,
                object,
                &pods(),
                false,
            ) {
                reports.add(&audited);
            }
        }
        serde_json::to_value(reports.into_reports()).unwrap()
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
                        result("Assign/non-root", runs_as_non_root, "shop", "web"),
                        result("AssignMetadata/team", "metadata.labels.team", "shop", "web"),
                        result("Assign/non-root", runs_as_non_root, "shop", "api"),
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
}
