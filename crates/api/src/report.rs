//! The OpenReports objects the in-cluster audit writes: a `Report` per
//! namespace and a `ClusterReport` for cluster-scoped objects
//! (`openreports.io/v1alpha1`, the CRDs of the
//! `github.com/openreports/reports-api` module, which Kyverno 1.15+ writes
//! and Policy Reporter reads). sartor does not install those CRDs; it writes
//! reports when they are served.
//!
//! Only the fields sartor sets are here, named as the CRDs name them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The reports' API group and version.
pub const REPORTS_API_VERSION: &str = "openreports.io/v1alpha1";

/// The name of each report sartor writes (one per namespace, and one
/// ClusterReport).
pub const REPORT_NAME: &str = "sartor-audit";

/// `source` of sartor's reports and results.
pub const REPORT_SOURCE: &str = "sartor";

/// A Report (namespaced) or ClusterReport: what the mutators would change in
/// the objects of one namespace, or in cluster-scoped objects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// [`REPORTS_API_VERSION`].
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// `Report` or `ClusterReport`.
    pub kind: String,
    /// Name, namespace (a Report) and labels.
    pub metadata: ReportMetadata,
    /// [`REPORT_SOURCE`].
    pub source: String,
    /// How many results of each outcome.
    pub summary: ReportSummary,
    /// One per object and mutator that would change it, and one per object
    /// the mutators cannot mutate.
    pub results: Vec<ReportResult>,
}

/// The metadata sartor sets on a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportMetadata {
    /// [`REPORT_NAME`].
    pub name: String,
    /// The namespace, for a Report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// `app.kubernetes.io/managed-by: sartor`, which finds them again.
    pub labels: BTreeMap<String, String>,
}

/// Counts of results by outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportSummary {
    /// Always 0: objects that would not change are not listed.
    pub pass: usize,
    /// Results whose object a mutator would change.
    pub fail: usize,
    /// Always 0.
    pub warn: usize,
    /// Objects the mutators cannot mutate.
    pub error: usize,
    /// Always 0.
    pub skip: usize,
}

/// One object and one mutator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportResult {
    /// The mutator, `Kind/name` (`sartor` for an object no mutator can be
    /// named for).
    pub policy: String,
    /// `fail`: the mutator would change the object on its next write;
    /// `error`: the mutators cannot mutate it.
    pub result: String,
    /// What would change, or why it cannot be mutated, in one sentence.
    pub message: String,
    /// `paths`: the paths the mutator would change, comma-separated.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub properties: BTreeMap<String, String>,
    /// The object.
    pub resources: Vec<ObjectReference>,
    /// [`REPORT_SOURCE`].
    pub source: String,
}

/// A reference to the object a result is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectReference {
    /// Its `apiVersion`.
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// Its kind.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Its namespace, when namespaced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Its uid, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

impl Report {
    /// sartor's report of `namespace` (`None`: the ClusterReport) with
    /// `results`, counted in its summary.
    pub fn new(namespace: Option<&str>, results: Vec<ReportResult>) -> Report {
        let summary = ReportSummary {
            fail: results.iter().filter(|r| r.result == "fail").count(),
            error: results.iter().filter(|r| r.result == "error").count(),
            ..ReportSummary::default()
        };
        Report {
            api_version: REPORTS_API_VERSION.to_string(),
            kind: match namespace {
                Some(_) => "Report",
                None => "ClusterReport",
            }
            .to_string(),
            metadata: ReportMetadata {
                name: REPORT_NAME.to_string(),
                namespace: namespace.map(str::to_string),
                labels: BTreeMap::from([(
                    "app.kubernetes.io/managed-by".to_string(),
                    REPORT_SOURCE.to_string(),
                )]),
            },
            source: REPORT_SOURCE.to_string(),
            summary,
            results,
        }
    }
}
