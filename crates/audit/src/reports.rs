//! The audit's findings as OpenReports reports: one `Report` named
//! `sartor-audit` per namespace with findings, one `ClusterReport` of the
//! same name for cluster-scoped objects; a result per object and mutator
//! that would change it (`fail`, the paths in `properties.paths`), and one
//! per object the mutators cannot mutate (`error`). The controller's
//! `ReportWriter` writes them.

use std::collections::{BTreeMap, HashMap};

use sartor_api::{ObjectReference, REPORT_SOURCE, Report, ReportResult};
use sartor_engine::MutatorId;

use crate::{Audited, Outcome, Resource};

/// At most this many results in one report (an object's size is bounded by
/// etcd): the summary still counts them all, and an annotation says how
/// many were left out.
pub const MAX_RESULTS: usize = 1000;

/// The audit's findings, by namespace (`None`: cluster-scoped objects) and
/// object: kept from scan to scan and changed object by object as the
/// watches report writes and deletions.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Reports {
    by_namespace: BTreeMap<Option<String>, BTreeMap<InNamespace, Found>>,
}

/// A stored object as the audit keys it: its namespace (`None`:
/// cluster-scoped), and its group, kind and name within it (the version it
/// was read as does not make it another object).
pub type ObjectKey = (Option<String>, InNamespace);

/// An object within its namespace: its group, kind and name.
type InNamespace = (String, String, String);

/// One object's results, and the mutators that would change it.
#[derive(Debug, Clone, PartialEq)]
struct Found {
    results: Vec<ReportResult>,
    mutators: Vec<MutatorId>,
}

/// The object `name` of `resource` in `namespace`, as the audit keys it.
pub fn key(resource: &Resource, namespace: Option<&str>, name: &str) -> ObjectKey {
    (namespace.map(str::to_string), in_namespace(resource, name))
}

fn in_namespace(resource: &Resource, name: &str) -> InNamespace {
    (
        resource.group.clone(),
        resource.kind.clone(),
        name.to_string(),
    )
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
                in_namespace(&object.resource, &object.name),
                Found { results, mutators },
            );
    }

    /// Forgets what was found of the object `name` (of `resource`, in
    /// `namespace`): it is gone, or nothing would change it any more.
    pub fn remove(&mut self, resource: &Resource, namespace: Option<&str>, name: &str) {
        let namespace = namespace.map(str::to_string);
        if let Some(found) = self.by_namespace.get_mut(&namespace) {
            found.remove(&in_namespace(resource, name));
            if found.is_empty() {
                self.by_namespace.remove(&namespace);
            }
        }
    }

    /// Puts `listed`, the findings of a fresh list of `resource`'s objects,
    /// in place of what was found of that kind before.
    pub fn replace_kind(&mut self, resource: &Resource, listed: Reports) {
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use sartor_api::{Input, load_mutators};
    use sartor_engine::{Operation, compile};
    use serde_json::{Value, json};

    use super::*;
    use crate::{Keep, audit};

    const MUTATORS: &str = "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata:\n  name: non-root\nspec:\n  applyTo:\n  - {groups: [''], versions: [v1], kinds: [Pod]}\n  location: spec.securityContext.runAsNonRoot\n  parameters:\n    assign:\n      value: true\n---\napiVersion: mutations.sartor.dev/v1\nkind: AssignMetadata\nmetadata:\n  name: team\nspec:\n  location: metadata.labels.team\n  parameters:\n    assign:\n      value: shop\n";

    fn pods() -> Resource {
        Resource::new("", "v1", "Pod", "pods")
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
