//! The mutating webhook's rules, kept equal to what the enforced mutators can
//! mutate, so the API server calls sartor only for those objects.
//!
//! [`derived`] maps the engine's [`Targets`] to rules through API discovery
//! (kind to resource); a kind discovery does not know yet (a CRD not
//! installed) widens to every resource of its group and version, so the
//! rules are never narrower than a mutator needs. [`RulesWriter`] writes them
//! into the configuration the way the CA is injected: every replica
//! reconciles, the API server's optimistic concurrency settles a race, and
//! replicas that see the same mutators derive the same rules, so a second
//! writer finds nothing to change. Empty rules are an admin's off switch and
//! are left alone.
//!
//! Beside the rules, the writer keeps one match condition of its own,
//! [`MAY_CHANGE`]: `sartor_export::WebhookCondition`, true only when an
//! enforced mutator matches the request and would change the object, so the
//! API server skips sartor for everything else (an object that already
//! conforms, another namespace, another name). The install's own conditions
//! are left as they are.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::MatchCondition;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations,
};
use kube::{Api, Client, Discovery};
use sartor_engine::{Operation, Operations, Scopes, System, Targets};
use sartor_export::WebhookCondition;
use sartor_state::Snapshot;
use tokio::sync::watch;

use crate::metrics::{Metrics, RulesState};

/// The resource named by the rule installed while no mutator is enforced:
/// no such resource exists, so the API server calls sartor for nothing.
pub const NO_MUTATOR_ENFORCED: &str = "no-mutator-is-enforced";

/// The subresource `kubectl debug` adds ephemeral containers through.
const EPHEMERAL_CONTAINERS: &str = "pods/ephemeralcontainers";

/// The resources the API server serves: for each kind, its resource name
/// (plural) in each group and version that serves it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Served {
    /// (group, version, kind) to its resources (nearly always one).
    resources: BTreeMap<(String, String, String), BTreeSet<String>>,
}

/// A group, a version and the operations: one rule's worth of resources.
type Key = (String, String, Operations);

/// Why a round of [`RulesWriter::reconcile`] failed; the next round retries.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    /// Discovery or an API call failed.
    #[error("{action}: {source}")]
    Api {
        /// What was being done.
        action: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
}

/// Why a round runs: the mutators changed (derive afresh), or the periodic
/// check (only widen rules a replica derived).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Round {
    /// The first round, or the mutators changed since the last.
    Changed,
    /// The periodic check.
    Periodic,
}

/// The configuration's annotation holding the rules a replica last derived
/// (as [`summary`] gives them): rules equal to it were derived, any others
/// (the install's) were not. Also what `kubectl get -o yaml` shows of them.
pub const DERIVED_RULES: &str = "mutations.sartor.dev/derived-rules";

/// The name of the match condition the writer keeps: the API server calls
/// sartor only when it holds.
pub use sartor_export::WEBHOOK_CONDITION as MAY_CHANGE;

/// The configuration's annotation saying what the [`MAY_CHANGE`] condition
/// decides: how many mutators it tells by whether they would change the
/// object, how many by their match only (and why not more, in the log).
pub const DERIVED_CONDITION: &str = "mutations.sartor.dev/derived-condition";

/// What a round found or did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RulesAction {
    /// The rules were already the derived ones.
    Kept,
    /// The rules were replaced by the derived ones (summed up as by `summary`).
    Written(String),
    /// The rules are empty (an admin's off switch): left alone.
    Off,
    /// No such configuration, or no webhook of that name in it: nothing to do.
    Missing,
    /// Another replica changed the configuration first; the next round
    /// derives again from what it wrote.
    Raced,
}

// === impl Served ===

impl Served {
    /// Adds that `kind` of `group`/`version` is served as `resource`.
    pub fn insert(&mut self, group: &str, version: &str, kind: &str, resource: &str) {
        self.resources
            .entry((group.to_string(), version.to_string(), kind.to_string()))
            .or_default()
            .insert(resource.to_string());
    }

    /// What `discovery` found: every top-level resource of every group and version.
    pub fn of(discovery: &Discovery) -> Served {
        let mut served = Served::default();
        for group in discovery.groups() {
            for version in group.versions() {
                for (resource, _) in group.versioned_resources(version) {
                    served.insert(
                        &resource.group,
                        &resource.version,
                        &resource.kind,
                        &resource.plural,
                    );
                }
            }
        }
        served
    }

    /// What an offline listing knows (`Scopes`: the built-in kinds,
    /// `kubectl api-resources` output, CRDs): each kind's resource, under
    /// the version `*`, since a listing has no versions. `derived` finds
    /// such a kind only from a pattern of any version, so this is for rules
    /// that are not versioned either (RBAC: [`crate::audit::rbac`]).
    pub fn of_scopes(scopes: &Scopes) -> Served {
        let mut served = Served::default();
        for (group, kind, resource) in scopes.resources() {
            served.insert(group, "*", kind, resource);
        }
        served
    }

    /// Asks the API server (aggregated discovery, falling back to the
    /// per-group kind for servers without it).
    ///
    /// # Errors
    /// When neither kind of discovery works.
    pub async fn discover(client: &Client) -> Result<Served, RulesError> {
        let discovery = match Discovery::new(client.clone()).run_aggregated().await {
            Ok(discovery) => discovery,
            Err(error) => {
                tracing::debug!(%error, "aggregated discovery failed; discovering per group");
                Discovery::new(client.clone())
                    .run()
                    .await
                    .map_err(|source| RulesError::Api {
                        action: "discovering the API server's resources".to_string(),
                        source,
                    })?
            }
        };
        Ok(Served::of(&discovery))
    }

    /// Every (group, version, resource) serving `kind` in `group` and
    /// `version` (`None`: any).
    fn find<'a>(
        &'a self,
        group: Option<&'a str>,
        version: Option<&'a str>,
        kind: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a str, &'a str)> + 'a {
        self.resources
            .iter()
            .filter(move |((g, v, k), _)| {
                k == kind
                    && group.is_none_or(|group| group == g)
                    && version.is_none_or(|v2| v2 == v)
            })
            .flat_map(|((g, v, _), resources)| {
                resources
                    .iter()
                    .map(move |resource| (g.as_str(), v.as_str(), resource.as_str()))
            })
    }
}

/// The rules that send exactly what `targets` can mutate, as far as `served`
/// knows the kinds: normalized (sorted), so every replica derives the same list.
pub fn derived(targets: &Targets, served: &Served) -> Vec<RuleWithOperations> {
    if targets.is_empty() {
        return vec![rule(
            "mutations.sartor.dev",
            "*",
            Operations::ALL,
            vec![NO_MUTATOR_ENFORCED.to_string()],
        )];
    }
    let mut sent: BTreeMap<Key, BTreeSet<String>> = BTreeMap::new();
    let mut send = |group: &str, version: &str, ops: Operations, resource: &str| {
        let key = (group.to_string(), version.to_string(), ops);
        sent.entry(key).or_default().insert(resource.to_string());
        if (group.is_empty() || group == "*")
            && (resource == "pods" || resource == "*")
            && (version == "v1" || version == "*")
            && ops.contains(Operation::Update)
        {
            // Debug containers come as an UPDATE of this subresource, which
            // `*` does not match.
            let key = (String::new(), "v1".to_string(), Operations::UPDATE);
            sent.entry(key)
                .or_default()
                .insert(EPHEMERAL_CONTAINERS.to_string());
        }
    };
    for (pattern, ops) in targets.iter() {
        let group = pattern.group.as_deref();
        let version = pattern.version.as_deref();
        let Some(kind) = pattern.kind.as_deref() else {
            send(group.unwrap_or("*"), version.unwrap_or("*"), ops, "*");
            continue;
        };
        let mut found = false;
        for (g, v, resource) in served.find(group, version, kind) {
            found = true;
            // A pattern of any group or version keeps any group or version:
            // one served later (a CRD installed after) is sent too.
            send(
                group.map_or("*", |_| g),
                version.map_or("*", |_| v),
                ops,
                resource,
            );
        }
        if !found {
            send(group.unwrap_or("*"), version.unwrap_or("*"), ops, "*");
        }
    }
    // A resource some `*` rule of its group (or of every group) and version
    // already sends for its operations needs no rule of its own.
    let wildcards: Vec<Key> = sent
        .iter()
        .filter(|(_, resources)| resources.contains("*"))
        .map(|(key, _)| key.clone())
        .collect();
    for ((group, version, ops), resources) in &mut sent {
        let covered = wildcards.iter().any(|(g, v, o)| {
            (g == group || g == "*")
                && (v == version || v == "*")
                && o.union(*ops) == *o
                && (g, v, o) != (&*group, &*version, &*ops)
        });
        if covered {
            resources.retain(|r| r.contains('/'));
        }
    }
    sent.retain(|_, resources| !resources.is_empty());
    let rules: Vec<RuleWithOperations> = sent
        .into_iter()
        .map(|((group, version, ops), resources)| {
            // `*` covers every resource of the group, not subresources.
            let resources = if resources.contains("*") {
                resources
                    .into_iter()
                    .filter(|r| r == "*" || r.contains('/'))
                    .collect()
            } else {
                resources.into_iter().collect()
            };
            rule(&group, &version, ops, resources)
        })
        .collect();
    normalized(&rules)
}

/// A rule for `resources` of `group`/`version`, any scope.
fn rule(group: &str, version: &str, ops: Operations, resources: Vec<String>) -> RuleWithOperations {
    RuleWithOperations {
        api_groups: Some(vec![group.to_string()]),
        api_versions: Some(vec![version.to_string()]),
        operations: Some(
            Operation::ALL
                .into_iter()
                .filter(|op| ops.contains(*op))
                .map(|op| op.as_str().to_string())
                .collect(),
        ),
        resources: Some(resources),
        scope: Some("*".to_string()),
    }
}

/// `rules` with every list sorted and the rules in order, for comparing
/// what is installed with what is derived.
fn normalized(rules: &[RuleWithOperations]) -> Vec<RuleWithOperations> {
    let sorted = |list: &Option<Vec<String>>| {
        let mut list = list.clone().unwrap_or_default();
        list.sort();
        list.dedup();
        Some(list)
    };
    let mut rules: Vec<RuleWithOperations> = rules
        .iter()
        .map(|rule| RuleWithOperations {
            api_groups: sorted(&rule.api_groups),
            api_versions: sorted(&rule.api_versions),
            operations: sorted(&rule.operations),
            resources: sorted(&rule.resources),
            scope: Some(rule.scope.clone().unwrap_or_else(|| "*".to_string())),
        })
        .collect();
    rules.sort_by_key(|rule| {
        (
            rule.api_groups.clone(),
            rule.api_versions.clone(),
            rule.resources.clone(),
            rule.operations.clone(),
            rule.scope.clone(),
        )
    });
    rules.dedup();
    rules
}

/// The rules a round installs, given the `installed` ones (normalized), the
/// [`DERIVED_RULES`] annotation and what this replica derives: the derived
/// rules, except that a periodic round over rules a replica derived only adds
/// what they lack.
fn next_rules(
    installed: &[RuleWithOperations],
    marker: Option<&str>,
    derived: Vec<RuleWithOperations>,
    round: Round,
) -> Vec<RuleWithOperations> {
    let derived = normalized(&derived);
    let installed_is_derived = marker == Some(summary(installed).as_str());
    if round == Round::Changed || !installed_is_derived {
        return derived;
    }
    if covers(installed, &derived) {
        return installed.to_vec();
    }
    normalized(&[installed.to_vec(), derived].concat())
}

/// The [`MAY_CHANGE`] expression a round installs (`None`: no condition,
/// every object the rules send is sent), given the `installed` one and what
/// this replica derives: the derived one, except that a periodic round over
/// a condition a replica derived only adds the terms it lacks.
fn next_condition(
    installed: Option<&str>,
    derived: &WebhookCondition,
    round: Round,
) -> Option<String> {
    let (Round::Periodic, Some(installed), Some(_)) = (round, installed, &derived.expression)
    else {
        return derived.expression.clone();
    };
    let Some(mut terms) = WebhookCondition::terms_of(installed) else {
        return derived.expression.clone();
    };
    if derived.terms.is_subset(&terms) {
        return Some(installed.to_string());
    }
    terms.extend(derived.terms.iter().cloned());
    WebhookCondition::of_terms(terms).expression
}

/// What the [`DERIVED_CONDITION`] annotation says of `condition`.
fn condition_summary(condition: &WebhookCondition, installed: bool) -> String {
    if !installed {
        return match condition.withheld() {
            Some(why) => format!("none: {why}"),
            // A periodic round joins the installed terms to the derived ones.
            None => "none: the installed and the derived terms together would pass the API server's limits".to_string(),
        };
    }
    let sartor_export::Tally {
        change,
        matched,
        never,
    } = condition.tally();
    format!(
        "{MAY_CHANGE}: {change} mutators sent only what they would change, {matched} all they match, {never} nothing (generated objects only)"
    )
}

/// Whether `installed` sends everything `wanted` does (wildcards included).
fn covers(installed: &[RuleWithOperations], wanted: &[RuleWithOperations]) -> bool {
    let installed = sent(installed);
    sent(wanted).iter().all(|(group, version, resource, op)| {
        installed.iter().any(|&(g, v, r, o)| {
            (g == *group || g == "*")
                && (v == *version || v == "*")
                && (r == *resource || (r == "*" && !resource.contains('/')) || r == "*/*")
                && (o == *op || o == "*")
        })
    })
}

/// Every (group, version, resource, operation) `rules` name.
fn sent(rules: &[RuleWithOperations]) -> Vec<(&str, &str, &str, &str)> {
    fn list(l: &Option<Vec<String>>) -> Vec<&str> {
        l.iter().flatten().map(String::as_str).collect()
    }
    let mut all = Vec::new();
    for rule in rules {
        for group in list(&rule.api_groups) {
            for version in list(&rule.api_versions) {
                for resource in list(&rule.resources) {
                    for op in list(&rule.operations) {
                        all.push((group, version, resource, op));
                    }
                }
            }
        }
    }
    all
}

/// `(apiGroup, apiVersion, resource)` for every combination `rules` sends.
pub fn resources(rules: &[RuleWithOperations]) -> Vec<(String, String, String)> {
    sent(rules)
        .into_iter()
        .map(|(group, version, resource, _)| {
            (group.to_string(), version.to_string(), resource.to_string())
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// `rules` on one line for the log: `pods, apps/v1 deployments (CREATE)`.
pub fn summary(rules: &[RuleWithOperations]) -> String {
    rules
        .iter()
        .map(|rule| {
            let list = |list: &Option<Vec<String>>| list.clone().unwrap_or_default().join(",");
            let group = list(&rule.api_groups);
            let prefix = if group.is_empty() {
                list(&rule.api_versions)
            } else {
                format!("{group}/{}", list(&rule.api_versions))
            };
            format!(
                "{prefix} {} ({})",
                list(&rule.resources),
                list(&rule.operations)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// How long the mutators must stay unchanged before the rules follow them:
/// a bulk apply or delete is one write, not one per mutator.
const SETTLE: Duration = Duration::from_millis(250);

/// The longest the rules wait for the mutators to settle.
const SETTLE_AT_MOST: Duration = Duration::from_secs(2);

/// Waits until no snapshot has been published for [`SETTLE`] (at most
/// [`SETTLE_AT_MOST`]); `false` when the publisher is gone.
async fn settled(snapshots: &mut watch::Receiver<Option<Arc<Snapshot>>>) -> bool {
    let deadline = tokio::time::Instant::now() + SETTLE_AT_MOST;
    loop {
        tokio::select! {
            changed = snapshots.changed() => {
                if changed.is_err() {
                    return false;
                }
                if tokio::time::Instant::now() >= deadline {
                    return true;
                }
            }
            () = tokio::time::sleep(SETTLE) => return true,
        }
    }
}

/// Keeps one webhook's rules derived from the mutators.
#[derive(Clone)]
pub struct RulesWriter {
    client: Client,
    metrics: Arc<Metrics>,
    /// The MutatingWebhookConfiguration.
    configuration: String,
    /// The webhook in it whose rules are kept.
    webhook: String,
    /// Whether the [`MAY_CHANGE`] condition is derived (else it is removed).
    condition: bool,
}

impl std::fmt::Debug for RulesWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RulesWriter")
            .field("configuration", &self.configuration)
            .field("webhook", &self.webhook)
            .finish_non_exhaustive()
    }
}

impl RulesWriter {
    /// A writer for webhook `webhook` of MutatingWebhookConfiguration
    /// `configuration`, recording into `metrics`.
    pub fn new(
        client: Client,
        metrics: Arc<Metrics>,
        configuration: &str,
        webhook: &str,
    ) -> RulesWriter {
        RulesWriter {
            client,
            metrics,
            configuration: configuration.to_string(),
            webhook: webhook.to_string(),
            condition: true,
        }
    }

    /// The same writer, deriving the [`MAY_CHANGE`] match condition
    /// (`true`, the default) or keeping none (`false`: it is removed when
    /// there, and the install's own conditions stand alone).
    #[must_use]
    pub fn deriving_condition(self, condition: bool) -> RulesWriter {
        RulesWriter { condition, ..self }
    }

    /// One round: derives the rules and the [`MAY_CHANGE`] condition for
    /// `system`'s enforced mutators and installs them unless they are
    /// installed already or the rules are empty (switched off). A
    /// `Round::Periodic` round only widens what a replica derived (the
    /// annotation `DERIVED_RULES` says which rules; a condition only gains
    /// terms): a replica whose view of the mutators lags never narrows what
    /// a newer one wrote; it narrows when its own mutators change
    /// (`Round::Changed`) or when the installed rules are not derived ones
    /// (the install applied again).
    ///
    /// When discovery fails, every kind widens to its group and version (or
    /// to everything), those rules are installed, and the discovery error is
    /// returned.
    ///
    /// # Errors
    /// Discovery, reading or writing the configuration failed.
    pub async fn reconcile(
        &self,
        system: &System,
        round: Round,
    ) -> Result<RulesAction, RulesError> {
        let targets = system.targets();
        let Some(mut config) = self.read().await? else {
            self.metrics
                .set_webhook_rules(RulesState::Missing, Some(&[]));
            return Ok(RulesAction::Missing);
        };
        let marker = config
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(DERIVED_RULES))
            .cloned();
        let Some(webhook) = self.own_webhook(&mut config) else {
            self.metrics
                .set_webhook_rules(RulesState::Missing, Some(&[]));
            return Ok(RulesAction::Missing);
        };
        let installed = normalized(&webhook.rules.clone().unwrap_or_default());
        if installed.is_empty() {
            self.metrics.set_webhook_rules(RulesState::Off, Some(&[]));
            return Ok(RulesAction::Off);
        }
        let (served, discovery) = if targets.iter().any(|(pattern, _)| pattern.kind.is_some()) {
            match Served::discover(&self.client).await {
                Ok(served) => (served, None),
                Err(error) => (Served::default(), Some(error)),
            }
        } else {
            (Served::default(), None)
        };
        let want = next_rules(
            &installed,
            marker.as_deref(),
            derived(&targets, &served),
            round,
        );
        let conditions = webhook.match_conditions.clone().unwrap_or_default();
        let installed_condition = conditions
            .iter()
            .find(|condition| condition.name == MAY_CHANGE)
            .map(|condition| condition.expression.as_str());
        let derived_condition = WebhookCondition::of(system);
        let want_condition = match self.condition {
            true => next_condition(installed_condition, &derived_condition, round),
            false => None,
        };
        self.metrics
            .set_webhook_condition(&derived_condition, want_condition.is_some());
        let state = if discovery.is_some() {
            RulesState::Error
        } else {
            RulesState::Derived
        };
        let action = if installed == want && installed_condition == want_condition.as_deref() {
            self.metrics
                .set_webhook_rules(state, Some(&resources(&installed)));
            RulesAction::Kept
        } else {
            webhook.rules = Some(want.clone());
            let mut conditions: Vec<MatchCondition> = conditions
                .into_iter()
                .filter(|condition| condition.name != MAY_CHANGE)
                .collect();
            if let Some(expression) = &want_condition {
                conditions.push(MatchCondition {
                    name: MAY_CHANGE.to_string(),
                    expression: expression.clone(),
                });
            }
            webhook.match_conditions = Some(conditions).filter(|c| !c.is_empty());
            let annotations = config
                .metadata
                .annotations
                .get_or_insert_with(BTreeMap::new);
            annotations.insert(DERIVED_RULES.to_string(), summary(&want));
            match self.condition {
                true => annotations.insert(
                    DERIVED_CONDITION.to_string(),
                    condition_summary(&derived_condition, want_condition.is_some()),
                ),
                false => annotations.remove(DERIVED_CONDITION),
            };
            match self.write(&config).await {
                Ok(true) => {
                    self.metrics
                        .set_webhook_rules(state, Some(&resources(&want)));
                    tracing::info!(
                        configuration = %self.configuration,
                        webhook = %self.webhook,
                        rules = %summary(&want),
                        condition = %match want_condition {
                            Some(_) => condition_summary(&derived_condition, true),
                            None => "none".to_string(),
                        },
                        "webhook rules installed"
                    );
                    for line in derived_condition.explained() {
                        tracing::debug!(mutator = %line, "webhook match condition");
                    }
                    RulesAction::Written(summary(&want))
                }
                Ok(false) => RulesAction::Raced,
                Err(error) => return Err(error),
            }
        };
        match discovery {
            Some(error) => Err(error),
            None => Ok(action),
        }
    }

    /// Reconciles for every snapshot published to `snapshots`, and every
    /// `every` in between (the rules may have been re-applied, a CRD
    /// installed); retries sooner after a failure. Nothing is written before
    /// the first snapshot: until then the install's own rules stand.
    pub async fn run(self, mut snapshots: watch::Receiver<Option<Arc<Snapshot>>>, every: Duration) {
        let mut last: Option<RulesAction> = None;
        // The first round, and every one after the mutators changed, derives
        // afresh; the others only widen.
        let mut round = Round::Changed;
        loop {
            let snapshot = snapshots.borrow_and_update().clone();
            let mut wait = every;
            if let Some(snapshot) = snapshot {
                match self.reconcile(&snapshot.system, round).await {
                    Ok(action) => {
                        self.log(&action, last.as_ref());
                        if action == RulesAction::Raced {
                            wait = Duration::from_millis(200);
                        } else {
                            round = Round::Periodic;
                        }
                        last = Some(action);
                    }
                    Err(error) => {
                        self.metrics.set_webhook_rules(RulesState::Error, None);
                        tracing::warn!(%error, "deriving the webhook rules; retrying (a failed discovery widens them meanwhile)");
                        wait = every.min(Duration::from_secs(5));
                        last = None;
                    }
                }
            }
            tokio::select! {
                changed = snapshots.changed() => {
                    if changed.is_err() || !settled(&mut snapshots).await {
                        return;
                    }
                    round = Round::Changed;
                }
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// With the rules pinned (`--webhook-rules pinned`) no replica keeps
    /// the [`MAY_CHANGE`] condition in step with the mutators, so one left
    /// by a replica that derived it (before the switch) would go on keeping
    /// from sartor the objects of every mutator applied since: removes it,
    /// and its annotation, leaving the rules and the install's own
    /// conditions as they are. `Ok(true)` when it removed one; a write that
    /// raced another is left to the next round (`Ok(false)`).
    ///
    /// # Errors
    /// Reading or writing the configuration failed.
    pub async fn remove_condition(&self) -> Result<bool, RulesError> {
        let Some(mut config) = self.read().await? else {
            return Ok(false);
        };
        let Some(webhook) = self.own_webhook(&mut config) else {
            return Ok(false);
        };
        let conditions = webhook.match_conditions.take().unwrap_or_default();
        let kept: Vec<MatchCondition> = conditions
            .iter()
            .filter(|condition| condition.name != MAY_CHANGE)
            .cloned()
            .collect();
        if kept.len() == conditions.len() {
            return Ok(false);
        }
        webhook.match_conditions = Some(kept).filter(|c| !c.is_empty());
        if let Some(annotations) = config.metadata.annotations.as_mut() {
            annotations.remove(DERIVED_CONDITION);
        }
        self.write(&config).await
    }

    /// The configuration, `None` when it is not installed.
    async fn read(&self) -> Result<Option<MutatingWebhookConfiguration>, RulesError> {
        Api::<MutatingWebhookConfiguration>::all(self.client.clone())
            .get_opt(&self.configuration)
            .await
            .map_err(|source| self.error("reading", source))
    }

    /// The webhook of `config` this writer keeps (the install's
    /// `mutation.sartor.dev`); `None` when someone removed it.
    fn own_webhook<'a>(
        &self,
        config: &'a mut MutatingWebhookConfiguration,
    ) -> Option<&'a mut MutatingWebhook> {
        config
            .webhooks
            .iter_mut()
            .flatten()
            .find(|webhook| webhook.name == self.webhook)
    }

    /// Replaces the configuration with `config`: `Ok(false)` when another
    /// writer changed it since it was read (409).
    async fn write(&self, config: &MutatingWebhookConfiguration) -> Result<bool, RulesError> {
        match Api::<MutatingWebhookConfiguration>::all(self.client.clone())
            .replace(&self.configuration, &crate::status::post_params(), config)
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.is_conflict() => Ok(false),
            Err(source) => Err(self.error("writing", source)),
        }
    }

    fn error(&self, action: &str, source: kube::Error) -> RulesError {
        RulesError::Api {
            action: format!(
                "{action} MutatingWebhookConfiguration {}",
                self.configuration
            ),
            source,
        }
    }

    /// [`RulesWriter::remove_condition`] at once and every `every` (a
    /// replica still deriving, in a rollout from derived to pinned rules,
    /// may write it again), until dropped.
    pub async fn run_pinned(self, every: Duration) {
        loop {
            match self.remove_condition().await {
                Ok(true) => tracing::info!(
                    configuration = %self.configuration,
                    webhook = %self.webhook,
                    condition = MAY_CHANGE,
                    "the rules are pinned: removed the match condition a replica deriving them left"
                ),
                Ok(false) => {}
                Err(error) => {
                    tracing::warn!(%error, "removing the derived match condition; retrying")
                }
            }
            tokio::time::sleep(every).await;
        }
    }

    /// Logs what changed since the last round.
    fn log(&self, action: &RulesAction, last: Option<&RulesAction>) {
        let configuration = &self.configuration;
        match action {
            RulesAction::Off if last != Some(action) => tracing::warn!(
                %configuration,
                webhook = %self.webhook,
                "the webhook's rules are empty: mutation is switched off, and the rules are left so until the install is applied again"
            ),
            RulesAction::Missing if last != Some(action) => tracing::warn!(
                %configuration,
                webhook = %self.webhook,
                "webhook configuration or webhook not found; rules not kept"
            ),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
