//! The writer of the audit's OpenReports reports ([`sartor_audit::Reports`]
//! makes them). A scan's reports replace the previous scan's whole: each is
//! server-side applied, and sartor's reports of namespaces without findings
//! any more are deleted, so a deleted object or mutator leaves no result.

use crate::api_errors::{is_forbidden, is_not_found};
use crate::pager::{self, KindPages};
use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use sartor_api::{REPORT_NAME, Report};
use sartor_audit::namespace_and_name;
use serde_json::Value;

/// The field manager of sartor's report writes.
const FIELD_MANAGER: &str = "sartor-audit";

/// The label that finds sartor's reports again.
const MANAGED: &str = "app.kubernetes.io/managed-by=sartor";

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
    /// The API server did not answer a request in time (20 s).
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
                    let pages = KindPages {
                        client: &self.client,
                        resource: &resource,
                        namespace: None,
                        labels: Some(MANAGED),
                        body: &mut Vec::new(),
                    };
                    let each = |items: Vec<Value>| {
                        for report in &items {
                            let (namespace, name) = namespace_and_name(report);
                            let namespace = Some(namespace.to_string()).filter(|ns| !ns.is_empty());
                            if name == REPORT_NAME && !kept(&namespace, cluster) {
                                stale.push(namespace);
                            }
                        }
                        ControlFlow::Continue(())
                    };
                    // `each` never stops the list.
                    let _: ControlFlow<()> = bounded("list", pager::list(pages, each))
                        .await?
                        .map_err(written)?;
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
