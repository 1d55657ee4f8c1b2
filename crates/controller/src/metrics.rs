//! The controller's Prometheus metrics, registered into the process's one
//! registry (the binary builds it; the webhook serves it on the metrics port).
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `sartor_mutators` | gauge | `kind`, `state` (`enforced`, `error`, `conflict`: schema or condition) |
//! | `sartor_mutator_reloads_total` | counter | `result` (`ok`, `error`) |
//! | `sartor_mutator_crd_installed` | gauge (1, 0) | `group`, `kind` |
//! | `sartor_webhook_rule_resources` | gauge (1) | `api_group`, `api_version`, `resource` |
//! | `sartor_webhook_rules_state` | gauge (1, 0) | `state` (`derived`, `off`, `missing`, `error`) |
//! | `sartor_webhook_condition_installed` | gauge (1, 0) | whether the derived match condition `sartor-may-change` is what this replica last kept (0: none is needed, it would pass the API server's limits, or `--webhook-match-condition none`) |
//! | `sartor_webhook_condition_mutators` | gauge | `decided` (`change`: sent only what it would change; `match`: sent all it matches; `never`: generated objects only) |
//! | `sartor_audit_objects` | gauge | `result` (`scanned`, `changed`, `failed`): the last in-cluster scan |
//! | `sartor_audit_scan_seconds` | gauge | the last in-cluster scan's duration |
//! | `sartor_audit_reports_written` | gauge (1, 0) | whether the last scan's reports were written (0: no OpenReports CRDs, or a write failed) |
//! | `sartor_audit_leader` | gauge (1, 0) | whether this replica holds the audit's Lease (writes the reports) |
//! | `sartor_audit_repairs_total` | counter | `result` (`repaired`, `unchanged`, `gone`, `fix_owner`, `refused`, `failed`, `conflict`): the in-cluster audit's repairs in namespaces labelled `audit.sartor.dev/repair=true` |
//!
//! A gauge family is replaced series by series (new values set, then
//! vanished series removed), never cleared and refilled: a scrape in between
//! may see old and new values side by side for an instant (two rule states
//! at 1, say), but never a gap where a series that stays was missing.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use sartor_engine::System;
use sartor_state::{MutatorCrd, Snapshot};
use std::sync::atomic::AtomicU64;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    kind: &'static str,
    state: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CrdLabels {
    group: &'static str,
    kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RuleLabels {
    api_group: String,
    api_version: String,
    resource: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RulesStateLabels {
    state: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecidedLabels {
    decided: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

/// Where the mutating webhook's rules stand, as the replica that keeps them
/// derived from the mutators last found them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RulesState {
    /// They send exactly what the enforced mutators can mutate.
    Derived,
    /// They are empty: an admin switched mutation off, and they are left so.
    Off,
    /// The configuration, or its sartor webhook, does not exist.
    Missing,
    /// The last attempt to read or write them failed; it is retried.
    Error,
}

impl RulesState {
    /// Every state, in the order the metric lists them.
    pub const ALL: [RulesState; 4] = [
        RulesState::Derived,
        RulesState::Off,
        RulesState::Missing,
        RulesState::Error,
    ];

    /// The metric's label value.
    pub fn as_str(self) -> &'static str {
        match self {
            RulesState::Derived => "derived",
            RulesState::Off => "off",
            RulesState::Missing => "missing",
            RulesState::Error => "error",
        }
    }
}

/// A gauge family and the series it holds now.
#[derive(Debug)]
struct Gauges<L> {
    family: Family<L, Gauge>,
    series: Mutex<HashSet<L>>,
}

impl<L: EncodeLabelSet + Clone + Hash + Eq + std::fmt::Debug + Send + Sync + 'static> Gauges<L> {
    fn register(registry: &mut Registry, name: &str, help: &str) -> Gauges<L> {
        let family = Family::<L, Gauge>::default();
        registry.register(name, help, family.clone());
        Gauges {
            family,
            series: Mutex::new(HashSet::new()),
        }
    }

    /// Makes `values` the family's series: each set, every other removed.
    fn replace(&self, values: HashMap<L, i64>) {
        let mut series = match self.series.lock() {
            Ok(series) => series,
            Err(poisoned) => poisoned.into_inner(),
        };
        for (labels, value) in &values {
            self.family.get_or_create(labels).set(*value);
        }
        for gone in series.iter().filter(|labels| !values.contains_key(*labels)) {
            self.family.remove(gone);
        }
        *series = values.into_keys().collect();
    }
}

/// Every metric the controller exports.
#[derive(Debug)]
pub struct Metrics {
    mutators: Gauges<StateLabels>,
    mutator_reloads: Family<ResultLabels, Counter>,
    crds: Gauges<CrdLabels>,
    rules: Gauges<RuleLabels>,
    rules_state: Gauges<RulesStateLabels>,
    condition_installed: Gauge,
    condition_mutators: Gauges<DecidedLabels>,
    audit_objects: Family<ResultLabels, Gauge>,
    audit_seconds: Gauge<f64, AtomicU64>,
    audit_written: Gauge,
    audit_leader: Gauge,
    audit_repairs: Family<ResultLabels, Counter>,
}

impl Metrics {
    /// The controller's metrics, all zero, registered into `registry`.
    pub fn new(registry: &mut Registry) -> Metrics {
        let mutators = Gauges::register(
            registry,
            "mutators",
            "Mutators known to the server, by kind and state (enforced, error, conflict)",
        );
        let mutator_reloads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "mutator_reloads",
            "Attempts to load a new mutator snapshot, by result",
            mutator_reloads.clone(),
        );
        let crds = Gauges::register(
            registry,
            "mutator_crd_installed",
            "Whether each watched mutator kind's CRD is served (1) or not installed (0: its mutators are not enforced)",
        );
        let rules = Gauges::register(
            registry,
            "webhook_rule_resources",
            "Cluster mode: each resource the mutating webhook's rules send to sartor (1), as this replica last read or wrote them",
        );
        let rules_state = Gauges::register(
            registry,
            "webhook_rules_state",
            "Cluster mode, derived rules: 1 for the state the mutating webhook's rules are in (derived, off, missing, error), 0 for the others",
        );
        let condition_installed = Gauge::default();
        registry.register(
            "webhook_condition_installed",
            "Cluster mode, derived rules: whether the mutating webhook carries the derived match condition sartor-may-change, as this replica last kept it",
            condition_installed.clone(),
        );
        let condition_mutators = Gauges::register(
            registry,
            "webhook_condition_mutators",
            "Cluster mode, derived rules: the enforced mutators by how the derived match condition decides them (change: sent only objects they would change; match: all they match; never: generated objects only)",
        );
        let audit_objects = Family::<ResultLabels, Gauge>::default();
        registry.register(
            "audit_objects",
            "The last in-cluster audit scan: objects scanned, those the mutators would change, those they cannot mutate",
            audit_objects.clone(),
        );
        let audit_seconds = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "audit_scan_seconds",
            "How long the last in-cluster audit scan took, listing and mutating",
            audit_seconds.clone(),
        );
        let audit_written = Gauge::default();
        registry.register(
            "audit_reports_written",
            "Whether the last in-cluster audit's OpenReports reports were written (0: the CRDs are not installed, or a write failed)",
            audit_written.clone(),
        );
        let audit_leader = Gauge::default();
        registry.register(
            "audit_leader",
            "Whether this replica holds the audit's Lease and so writes the reports",
            audit_leader.clone(),
        );
        let audit_repairs = Family::<ResultLabels, Counter>::default();
        registry.register(
            "audit_repairs",
            "Repairs the in-cluster audit made in namespaces labelled audit.sartor.dev/repair=true, by result",
            audit_repairs.clone(),
        );
        Metrics {
            mutators,
            mutator_reloads,
            crds,
            rules,
            rules_state,
            condition_installed,
            condition_mutators,
            audit_objects,
            audit_seconds,
            audit_written,
            audit_leader,
            audit_repairs,
        }
    }

    /// Sets the mutator gauges from a snapshot about to be published: every
    /// mutator in its system is enforced or in conflict; its errors are those
    /// that did not compile.
    pub fn set_mutators(&self, snapshot: &Snapshot) {
        let Snapshot { system, errors } = snapshot;
        let mut counts: HashMap<StateLabels, i64> = HashMap::new();
        for mutator in System::mutators(system) {
            let state = if system.is_conflicted(mutator.id()) {
                "conflict"
            } else {
                "enforced"
            };
            let kind = mutator.id().kind.as_str();
            *counts.entry(StateLabels { kind, state }).or_default() += 1;
        }
        for id in errors {
            let kind = id.kind.as_str();
            *counts
                .entry(StateLabels {
                    kind,
                    state: "error",
                })
                .or_default() += 1;
        }
        self.mutators.replace(counts);
    }

    /// Sets the audit gauges from a finished scan.
    pub fn set_audit_scan(&self, scanned: usize, changed: usize, failed: usize, seconds: f64) {
        for (result, count) in [
            ("scanned", scanned),
            ("changed", changed),
            ("failed", failed),
        ] {
            self.audit_objects
                .get_or_create(&ResultLabels { result })
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
        self.audit_seconds.set(seconds);
    }

    /// Sets whether the audit's reports were written.
    pub fn set_audit_reports_written(&self, written: bool) {
        self.audit_written.set(i64::from(written));
    }

    /// Counts one repair by the in-cluster audit, by its result.
    pub fn count_audit_repair(&self, result: &'static str) {
        self.audit_repairs
            .get_or_create(&ResultLabels { result })
            .inc();
    }

    /// Sets whether this replica leads the audit.
    pub fn set_audit_leader(&self, leader: bool) {
        self.audit_leader.set(i64::from(leader));
    }

    /// Counts an attempt to load a new mutator snapshot.
    pub fn record_mutator_reload(&self, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.mutator_reloads
            .get_or_create(&ResultLabels { result })
            .inc();
    }

    /// Sets the CRD gauges: 1 for each CRD installed, 0 for each missing;
    /// kinds not in `crds` are dropped.
    pub fn set_crds(&self, crds: &[MutatorCrd]) {
        self.crds.replace(
            crds.iter()
                .map(|crd| {
                    let labels = CrdLabels {
                        group: crd.group,
                        kind: crd.kind.as_str(),
                    };
                    (labels, i64::from(crd.installed))
                })
                .collect(),
        );
    }

    /// Sets the match condition gauges: whether one is `installed`, and how
    /// `condition` decides each enforced mutator.
    pub fn set_webhook_condition(
        &self,
        condition: &sartor_export::WebhookCondition,
        installed: bool,
    ) {
        self.condition_installed.set(i64::from(installed));
        let tally = condition.tally();
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.condition_mutators.replace(
            [
                ("change", tally.change),
                ("match", tally.matched),
                ("never", tally.never),
            ]
            .into_iter()
            .map(|(decided, n)| (DecidedLabels { decided }, count(n)))
            .collect(),
        );
    }

    /// Sets the webhook rule gauges: `state`, and the resources installed as
    /// `(apiGroup, apiVersion, resource)` (left as they were when `None`:
    /// the rules could not be read).
    pub fn set_webhook_rules(
        &self,
        state: RulesState,
        resources: Option<&[(String, String, String)]>,
    ) {
        self.rules_state.replace(
            RulesState::ALL
                .into_iter()
                .map(|each| {
                    let labels = RulesStateLabels {
                        state: each.as_str(),
                    };
                    (labels, i64::from(each == state))
                })
                .collect(),
        );
        if let Some(resources) = resources {
            self.rules.replace(
                resources
                    .iter()
                    .map(|(api_group, api_version, resource)| {
                        let labels = RuleLabels {
                            api_group: api_group.clone(),
                            api_version: api_version.clone(),
                            resource: resource.clone(),
                        };
                        (labels, 1)
                    })
                    .collect(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;
    use sartor_api::MutatorKind;

    use super::*;

    fn rendered(registry: &Registry) -> String {
        let mut text = String::new();
        encode(&mut text, registry).unwrap_or_default();
        text
    }

    fn crd(kind: MutatorKind, installed: bool) -> MutatorCrd {
        MutatorCrd::new("mutations.sartor.dev", kind, installed)
    }

    #[test]
    fn a_replaced_gauge_keeps_no_vanished_series() {
        let mut registry = Registry::with_prefix("sartor");
        let metrics = Metrics::new(&mut registry);
        metrics.set_crds(&[
            crd(MutatorKind::Assign, true),
            crd(MutatorKind::ModifySet, false),
        ]);
        let text = rendered(&registry);
        assert!(
            text.contains(
                "sartor_mutator_crd_installed{group=\"mutations.sartor.dev\",kind=\"Assign\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "sartor_mutator_crd_installed{group=\"mutations.sartor.dev\",kind=\"ModifySet\"} 0"
            ),
            "{text}"
        );
        metrics.set_crds(&[crd(MutatorKind::Assign, false)]);
        let text = rendered(&registry);
        assert!(
            text.contains(
                "sartor_mutator_crd_installed{group=\"mutations.sartor.dev\",kind=\"Assign\"} 0"
            ),
            "{text}"
        );
        assert!(!text.contains("ModifySet"), "{text}");
        metrics.set_webhook_rules(RulesState::Off, Some(&[]));
        let text = rendered(&registry);
        assert!(
            text.contains("sartor_webhook_rules_state{state=\"off\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("sartor_webhook_rules_state{state=\"derived\"} 0"),
            "{text}"
        );
    }
}
