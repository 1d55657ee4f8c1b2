//! The admission decisions, without the network: an AdmissionReview body in,
//! a reply out. [`Webhook`] holds the current mutator snapshot; everything on
//! the request path reads it and never waits on an update.

use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use sartor_api::{
    Exclusion, Exclusions, GATEKEEPER_GROUP, GROUP, MutatorKind, Protection, Wildcard, json_type,
    namespace_of, parse_mutator, protected,
};
use sartor_engine::{
    Admission, Conflict, Failure, MutateError, Mutation, Mutator, MutatorId, NamespaceLookup,
    Operation, Patch, is_namespace_kind,
};
use sartor_location::{KeyValue, Node, Path};
use serde_json::Value;

use sartor_state::{Lookup, MutatorCrd, Namespaces, Snapshot, State};

use crate::metrics::{Metrics, Outcome};
use crate::overload::Deadline;
use crate::providers::{DEFAULT_PROVIDER_CACHE_TTL, Providers};
use crate::review::{
    AdmissionRequest, AdmissionResponse, AdmissionReview, GroupVersionKind, ReviewError,
};

/// What the server does with an object it could not mutate
/// (`sartor serve --on-error`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum OnError {
    /// Admit it unmutated, with a warning and the reason (Gatekeeper's
    /// `failurePolicy: Ignore` spirit: sartor never blocks the cluster).
    #[default]
    Allow,
    /// Deny it with the reason.
    Deny,
}

/// The skip rules and error policy of one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// sartor's own service account username
    /// (`system:serviceaccount:NAMESPACE:NAME`); its requests are never mutated.
    pub service_account: String,
    /// The namespaces whose objects are never mutated: sartor's own and
    /// exact names or globs with a leading and/or trailing `*` (`kube-*`,
    /// `*-system`), as Gatekeeper's exempt namespaces.
    pub exclusions: Exclusions,
    /// What to answer when a mutation fails.
    pub on_error: OnError,
    /// Namespaces that may be given the exemption label [`EXEMPTION_LABEL`]
    /// (names or globs), besides sartor's own; `/v1/validate` denies it to
    /// every other (`--exemptable-namespace`).
    pub exemptable_namespaces: Vec<Wildcard>,
    /// Whether a mutated object gets the `sartor.dev/mutations` annotation
    /// naming the mutators that changed it (`--mutation-annotations`).
    pub mutation_annotations: bool,
    /// Whether each mutated request is logged at `info` (`--log-mutations`,
    /// off by default like Gatekeeper's flag); otherwise at `debug`.
    pub log_mutations: bool,
    /// How long after a request arrives external data providers may still
    /// be answering it (`--provider-deadline-ms`), and never past the time
    /// the request's answer is due ([`Deadline::answer_by`]).
    pub provider_deadline: Duration,
    /// How long an external data provider's answer for a key is reused
    /// (`--provider-cache-ttl`); zero: never.
    pub provider_cache_ttl: Duration,
}

impl Settings {
    /// Settings for a server in `namespace` running as service account
    /// `service_account`, excluding `kube-system` and its own namespace,
    /// without mutation annotations.
    pub fn new(namespace: &str, service_account: &str) -> Settings {
        Settings {
            service_account: format!("system:serviceaccount:{namespace}:{service_account}"),
            exclusions: Exclusions::new(namespace, Exclusions::default().namespaces),
            on_error: OnError::Allow,
            exemptable_namespaces: Vec::new(),
            mutation_annotations: false,
            log_mutations: false,
            provider_deadline: DEFAULT_PROVIDER_DEADLINE,
            provider_cache_ttl: DEFAULT_PROVIDER_CACHE_TTL,
        }
    }
}

/// The default [`Settings::provider_deadline`]: the install's mutating
/// webhook waits 1 s, and the rest of the answer takes well under 100 ms.
pub const DEFAULT_PROVIDER_DEADLINE: Duration = Duration::from_millis(800);

/// An HTTP answer to one admission call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The HTTP status: 200 for every AdmissionReview answer, 400 for a body
    /// that is not one.
    pub status: u16,
    /// `application/json` for reviews, `text/plain` otherwise.
    pub content_type: &'static str,
    /// The body.
    pub body: Vec<u8>,
    /// How the request ended, for metrics and logs.
    pub outcome: Outcome,
}

/// The admission logic of one server: skip rules, the published state it
/// reads (the current snapshot, the CRDs' facts), the namespace provider,
/// the external data providers and the metrics.
pub struct Webhook {
    settings: Settings,
    state: State,
    namespaces: Box<dyn Namespaces>,
    providers: Arc<Providers>,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("settings", &self.settings)
            .field("ready", &self.is_ready())
            .finish_non_exhaustive()
    }
}

/// The label that exempts a namespace from mutation (sartor-api's).
pub use sartor_api::EXEMPTION_LABEL;

/// Whether `request` adds or changes a Pod's ephemeral containers
/// (`kubectl debug`): the `pods/ephemeralcontainers` subresource, whose
/// object is the whole Pod but of which the API server keeps only
/// `spec.ephemeralContainers`.
fn is_ephemeral_containers(request: &AdmissionRequest) -> bool {
    is_ephemeral_containers_of(&request.sub_resource, &request.kind)
}

/// [`is_ephemeral_containers`] of a request's sub-resource and kind.
fn is_ephemeral_containers_of(sub_resource: &str, kind: &GroupVersionKind) -> bool {
    sub_resource == "ephemeralcontainers" && kind.group.is_empty() && kind.kind == "Pod"
}

/// The names of the ephemeral containers `object` has that `old` has not:
/// those the request adds, the only ones sartor may change.
fn added_ephemeral_containers(object: &Value, old: Option<&Value>) -> Vec<Value> {
    let names = |object: Option<&Value>| -> Vec<Value> {
        object
            .and_then(|o| o.pointer("/spec/ephemeralContainers"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|container| container.get("name").cloned())
            .collect()
    };
    let existing = names(old);
    names(Some(object))
        .into_iter()
        .filter(|name| !existing.contains(name))
        .collect()
}

/// `original` with the ephemeral containers named in `added` as in
/// `mutated`, and nothing else of `mutated`: the API server ignores or
/// refuses any other change through this subresource, including one to an
/// ephemeral container the Pod already had.
fn with_ephemeral_containers_of(original: &Value, mutated: &Value, added: &[Value]) -> Value {
    let mutated: &[Value] = mutated
        .pointer("/spec/ephemeralContainers")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let mut confined = original.clone();
    if let Some(Value::Array(containers)) = confined.pointer_mut("/spec/ephemeralContainers") {
        for container in containers.iter_mut() {
            let Some(name) = container.get("name").filter(|name| added.contains(name)) else {
                continue;
            };
            if let Some(changed) = mutated.iter().find(|m| m.get("name") == Some(name)) {
                *container = changed.clone();
            }
        }
    }
    confined
}

/// Whether a change at `path` reaches the API server through the
/// confinement: inside one of the ephemeral containers named in `added`
/// (`spec.ephemeralContainers[name: N]...`, globs pinned by the engine), or
/// the whole of one that `mutated` still has (replaced; a removal is not
/// kept, since the confinement copies only containers `mutated` has).
fn kept_by_confinement(path: &Path, added: &[Value], mutated: &Value) -> bool {
    let [
        Node::Field(spec),
        Node::Field(list),
        Node::List(selector),
        rest @ ..,
    ] = path.nodes()
    else {
        return false;
    };
    let KeyValue::String(name) = &selector.key_value else {
        return false;
    };
    if spec != "spec"
        || list != "ephemeralContainers"
        || selector.key_field != "name"
        || !added.iter().any(|added| added.as_str() == Some(name))
    {
        return false;
    }
    !rest.is_empty()
        || mutated
            .pointer("/spec/ephemeralContainers")
            .and_then(Value::as_array)
            .is_some_and(|containers| {
                containers
                    .iter()
                    .any(|c| c.get("name").and_then(Value::as_str) == Some(name))
            })
}

/// What the skip rules decided about a `/v1/mutate` request.
enum Admit {
    /// Answered without mutating.
    Answer(AdmissionResponse, Outcome),
    /// To be mutated.
    Mutate(Admitted),
}

/// A request to mutate, with the snapshot it is mutated under.
struct Admitted {
    /// Borrows nothing yet: the Namespace and the user are added when the
    /// object is mutated.
    admission: Admission<'static>,
    /// Whether a mutator that may apply reads the Namespace.
    needs_namespace: bool,
    snapshot: Arc<Snapshot>,
}

/// The Namespace object fetched for one request, if any.
struct Prefetched(Option<Arc<Value>>);

impl NamespaceLookup for Prefetched {
    fn namespace(&self, _name: &str) -> Option<&Value> {
        self.0.as_deref()
    }
}

/// Why a mutation was skipped, for the debug log (counted as
/// [`Outcome::Skipped`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Skip {
    Subresource,
    /// An object sartor never mutates ([`sartor_api::protected`]), skipped
    /// before the snapshot is read; `System::mutate` would leave it too.
    Protected(Protection),
    OwnServiceAccount,
    OwnNamespace,
    ExcludedNamespace,
}

impl Webhook {
    /// A webhook serving from `state` (not ready until a snapshot is
    /// published there), calling `providers` for external data.
    pub fn new(
        settings: Settings,
        state: State,
        namespaces: Box<dyn Namespaces>,
        providers: Arc<Providers>,
        metrics: Arc<Metrics>,
    ) -> Webhook {
        Webhook {
            settings,
            state,
            namespaces,
            providers,
            metrics,
        }
    }

    /// The external data providers it calls; a source sets them
    /// ([`Providers::set`]).
    pub fn providers(&self) -> &Arc<Providers> {
        &self.providers
    }

    /// The settings it runs with.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The metrics it records into.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The current snapshot, `None` before the first is published.
    pub fn current(&self) -> Option<Arc<Snapshot>> {
        self.state.current()
    }

    /// Whether a snapshot has been published (`/readyz`).
    pub fn is_ready(&self) -> bool {
        self.state.is_ready()
    }

    /// Why the in-cluster audit's findings are not written (`/readyz`).
    pub fn audit_problem(&self) -> Option<String> {
        self.state.audit_problem()
    }

    /// The watched mutator kinds whose CRDs are not installed (`/readyz`).
    pub fn missing_crds(&self) -> Vec<MutatorCrd> {
        self.state.missing_crds()
    }

    /// Answers a `/v1/mutate` body due by `deadline`. Waits only when a
    /// mutator that may apply needs the object's Namespace and the provider
    /// must fetch it, or asks external data; neither wait outlasts
    /// [`Deadline::answer_by`].
    pub async fn mutate(&self, body: &[u8], deadline: &Deadline) -> Reply {
        let started = Instant::now();
        let (version, mut request) = match AdmissionReview::parse(body) {
            Ok(parsed) => parsed,
            Err(error) => return bad_request(&error),
        };
        let admitted = match self.admit(&request) {
            Ok(Admit::Answer(response, outcome)) => {
                return review_reply(response, &version, outcome);
            }
            Ok(Admit::Mutate(admitted)) => admitted,
            Err(error) => return bad_request(&error),
        };
        let namespace = match admitted
            .admission
            .namespace
            .as_deref()
            .filter(|_| admitted.needs_namespace)
        {
            Some(name) => match self.namespaces.lookup(name) {
                Lookup::Found(namespace) => Some(namespace),
                // A fetch still going when the answer is due counts as a
                // failed one: the mutation then fails per --on-error.
                // Polled once first: a fetch that answers at once needs no
                // timer (nor a tokio runtime).
                Lookup::Unknown => {
                    let mut fetch = self.namespaces.fetch(name);
                    let fetched = match futures::poll!(fetch.as_mut()) {
                        Poll::Ready(lookup) => Some(lookup),
                        Poll::Pending => {
                            let by = deadline.answer_by().into();
                            tokio::time::timeout_at(by, fetch).await.ok()
                        }
                    };
                    match fetched {
                        Some(Lookup::Found(namespace)) => Some(namespace),
                        Some(Lookup::Unknown) => None,
                        None => {
                            tracing::debug!(
                                namespace = name,
                                "namespace fetch outran the deadline"
                            );
                            None
                        }
                    }
                }
            },
            None => None,
        };
        let namespaces = Prefetched(namespace);
        // `admit` found an object there.
        let Some(object) = request.object.as_mut() else {
            return bad_request(&ReviewError::ObjectNotAnObject("nothing"));
        };
        // Only the ephemeral containers the request adds may change: the
        // patch is worked out from a copy of the object as admitted.
        let ephemeral = is_ephemeral_containers_of(&request.sub_resource, &request.kind);
        let admitted_copy = ephemeral.then(|| object.clone());
        let mut admission = admitted
            .admission
            .namespaces(&namespaces)
            .username(&request.user_info.username);
        // The ephemeral-container answer keeps only the changes inside the
        // containers the request adds, by their paths; the usual answer
        // reads no path.
        if !ephemeral {
            admission = admission.with_patch().without_paths();
        }
        let system = &admitted.snapshot.system;
        // External data: the cached answers first; when some key is not
        // cached, ask the providers what the run asked, then mutate again
        // with their answers (a run left unanswered puts the object back).
        let cached = self.providers.cached();
        let mut result = system.mutate(&admission.clone().answers(&cached), object);
        let answers;
        match &result {
            Ok(first) if first.unanswered => {
                let by = deadline.answer_by();
                let until = deadline
                    .arrived()
                    .checked_add(self.settings.provider_deadline)
                    .map_or(by, |at| at.min(by));
                answers = self.providers.ask(&first.asks, until).await;
                result = system.mutate(&admission.clone().answers(&answers), object);
            }
            Ok(first) => self.providers.record_cache_hits(&first.asks),
            Err(_) => {}
        }
        let (response, outcome) = self.answer(&request, &admission, admitted_copy, result, started);
        review_reply(response, &version, outcome)
    }

    /// The skip rules, then what mutating `request` needs.
    fn admit(&self, request: &AdmissionRequest) -> Result<Admit, ReviewError> {
        let uid = request.uid.as_str();
        let Ok(operation) = request.operation.parse::<Operation>() else {
            tracing::debug!(uid, operation = %request.operation, "skipped: not CREATE or UPDATE");
            return Ok(Admit::Answer(
                AdmissionResponse::allow(uid),
                Outcome::Skipped,
            ));
        };
        if let Some(skip) = self.skip(request) {
            tracing::debug!(uid, reason = ?skip, "skipped");
            return Ok(Admit::Answer(
                AdmissionResponse::allow(uid),
                Outcome::Skipped,
            ));
        }
        let object = match &request.object {
            Some(object @ Value::Object(_)) => object,
            Some(other) => return Err(ReviewError::ObjectNotAnObject(json_type(other))),
            None => return Err(ReviewError::ObjectNotAnObject("nothing")),
        };
        let Some(snapshot) = self.current() else {
            let (response, outcome) =
                self.failed(uid, "sartor has not loaded its mutators yet".to_string());
            return Ok(Admit::Answer(response, outcome));
        };
        let admission = Admission::new(object)
            .operation(operation)
            .annotate(self.settings.mutation_annotations);
        // The request's namespace: the object may omit it.
        let namespace = (!admission.gvk.is_namespace() && !request.namespace.is_empty())
            .then_some(request.namespace.as_str());
        let needs_namespace =
            namespace.is_some() && snapshot.system.needs_namespace(&admission.gvk, operation);
        Ok(Admit::Mutate(Admitted {
            admission: admission.namespace(namespace),
            needs_namespace,
            snapshot,
        }))
    }

    /// The answer to an admitted object's mutation: `request` holds the
    /// object as mutated, and `admitted` a copy of it as admitted when it
    /// adds ephemeral containers (no patch is asked of the engine then).
    fn answer(
        &self,
        request: &AdmissionRequest,
        admission: &Admission<'_>,
        admitted: Option<Value>,
        result: Result<Mutation, MutateError>,
        started: Instant,
    ) -> (AdmissionResponse, Outcome) {
        let uid = request.uid.as_str();
        let mut mutation = match result {
            Ok(mutation) if mutation.unanswered => {
                // Every provider asked is answered, if only with an error.
                return self.failed(uid, "external data providers left unasked".to_string());
            }
            Ok(mutation) => mutation,
            // An externalData mutator with `failurePolicy: Fail` asks for
            // the admission to fail, as in Gatekeeper, whatever --on-error says.
            Err(error) if matches!(*error.reason, Failure::ExternalData(_)) => {
                tracing::warn!(uid, %error, "external data failed");
                return (
                    AdmissionResponse::deny(uid, 500, error.to_string()),
                    Outcome::Denied,
                );
            }
            Err(error) => {
                tracing::warn!(uid, %error, "mutation failed");
                return self.failed(uid, error.to_string());
            }
        };
        if !mutation.mutated {
            return (AdmissionResponse::allow(uid), Outcome::Unchanged);
        }
        let patch = match (mutation.patch.take(), admitted, request.object.as_ref()) {
            (Some(patch), _, _) => patch,
            (None, Some(object), Some(mutated)) => {
                // Only the ephemeral containers the request adds reach the
                // API server: only their changes and mutators count.
                let added = added_ephemeral_containers(&object, request.old_object.as_ref());
                let confined = with_ephemeral_containers_of(&object, mutated, &added);
                mutation
                    .changes
                    .retain(|change| kept_by_confinement(&change.path(), &added, mutated));
                Patch::from(&json_patch::diff(&object, &confined))
            }
            (None, _, _) => return (AdmissionResponse::allow(uid), Outcome::Unchanged),
        };
        if patch.is_empty() {
            return (AdmissionResponse::allow(uid), Outcome::Unchanged);
        }
        let applied = mutation.applied();
        self.metrics
            .record_mutation(applied.iter().copied(), mutation.passes);
        // Field values are built only when the event's level is enabled.
        macro_rules! log_mutated {
            ($level:expr) => {
                tracing::event!(
                    $level,
                    uid,
                    kind = %admission.gvk,
                    object = %object_name(request),
                    mutators = %applied
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                    passes = mutation.passes,
                    duration_us = started.elapsed().as_micros() as u64,
                    "mutated"
                )
            };
        }
        if self.settings.log_mutations {
            log_mutated!(tracing::Level::INFO);
        } else {
            log_mutated!(tracing::Level::DEBUG);
        }
        let response = AdmissionResponse {
            patch: Some(patch.into_json()),
            ..AdmissionResponse::allow(uid)
        };
        (response, Outcome::Mutated)
    }

    /// The answer to a mutation that failed, per `on_error`.
    fn failed(&self, uid: &str, reason: String) -> (AdmissionResponse, Outcome) {
        match self.settings.on_error {
            OnError::Allow => {
                let mut response = AdmissionResponse::deny(uid, 500, reason.clone());
                response.allowed = true;
                response.warnings = vec![format!("sartor did not mutate this object: {reason}")];
                (response, Outcome::Error)
            }
            OnError::Deny => (
                AdmissionResponse::deny(
                    uid,
                    500,
                    format!("sartor could not mutate this object: {reason}"),
                ),
                Outcome::Denied,
            ),
        }
    }

    fn skip(&self, request: &AdmissionRequest) -> Option<Skip> {
        if !request.sub_resource.is_empty() && !is_ephemeral_containers(request) {
            return Some(Skip::Subresource);
        }
        if let Some(protection) = protected(&request.kind.group, &request.kind.kind) {
            return Some(Skip::Protected(protection));
        }
        if request.user_info.username == self.settings.service_account {
            return Some(Skip::OwnServiceAccount);
        }
        let namespace = namespace_of(
            &request.kind.group,
            &request.kind.kind,
            &request.namespace,
            namespace_object_name(request),
        );
        // The exemption label is the API server's to apply (the install's
        // namespaceSelector): the request carries no Namespace labels.
        match self.settings.exclusions.of(namespace, None)? {
            Exclusion::OwnNamespace => Some(Skip::OwnNamespace),
            Exclusion::Excluded | Exclusion::Exempt => Some(Skip::ExcludedNamespace),
        }
    }

    /// Answers a `/v1/validate` body: denies a mutator that does not compile,
    /// warns about conflicts with the mutators loaded now.
    pub fn validate(&self, body: &[u8]) -> Reply {
        let (version, request) = match AdmissionReview::parse(body) {
            Ok(parsed) => parsed,
            Err(error) => return bad_request(&error),
        };
        let uid = request.uid.as_str();
        if request.operation.parse::<Operation>().is_err() {
            return review_reply(AdmissionResponse::allow(uid), &version, Outcome::Skipped);
        }
        if is_namespace_kind(&request.kind.group, &request.kind.kind) {
            let (response, outcome) = self.validate_namespace(&request);
            return review_reply(response, &version, outcome);
        }
        let is_mutator = (request.kind.group == GROUP || request.kind.group == GATEKEEPER_GROUP)
            && request.kind.kind.parse::<MutatorKind>().is_ok();
        if !is_mutator {
            return review_reply(AdmissionResponse::allow(uid), &version, Outcome::Skipped);
        }
        let object = match &request.object {
            Some(object @ Value::Object(_)) => object,
            Some(other) => return bad_request(&ReviewError::ObjectNotAnObject(json_type(other))),
            None => return bad_request(&ReviewError::ObjectNotAnObject("nothing")),
        };
        let (response, outcome) = self.validate_mutator(uid, object);
        review_reply(response, &version, outcome)
    }

    /// Guards the exemption label: a Namespace may be given
    /// [`EXEMPTION_LABEL`], or have its value changed, only if it is sartor's
    /// own or allowed by `exemptable_namespaces`. Removing the label (which
    /// only brings mutation back) and updates that leave it as it was are
    /// always allowed.
    fn validate_namespace(&self, request: &AdmissionRequest) -> (AdmissionResponse, Outcome) {
        let uid = request.uid.as_str();
        let label = |object: &Option<Value>| {
            object
                .as_ref()
                .and_then(|o| o.pointer("/metadata/labels"))
                .and_then(|labels| labels.get(EXEMPTION_LABEL))
                .cloned()
        };
        let (new, old) = (label(&request.object), label(&request.old_object));
        if new.is_none() || new == old {
            return (AdmissionResponse::allow(uid), Outcome::Allowed);
        }
        let name = namespace_object_name(request);
        let exemptable = &self.settings.exemptable_namespaces;
        let own = self.settings.exclusions.own_namespace.as_str();
        if name == own || exemptable.iter().any(|w| w.matches(name)) {
            return (AdmissionResponse::allow(uid), Outcome::Allowed);
        }
        let allowed: Vec<&str> = std::iter::once(own)
            .chain(exemptable.iter().map(Wildcard::as_str))
            .collect();
        let message = format!(
            "namespace {name:?} may not be given the label {EXEMPTION_LABEL}: it exempts the \
             namespace from sartor's mutations, and only these namespaces may carry it: {} \
             (sartor serve --exemptable-namespace)",
            allowed.join(", ")
        );
        (AdmissionResponse::deny(uid, 403, message), Outcome::Denied)
    }

    fn validate_mutator(&self, uid: &str, object: &Value) -> (AdmissionResponse, Outcome) {
        let parsed = match parse_mutator(object) {
            Ok(parsed) => parsed,
            Err(error) => {
                return (
                    AdmissionResponse::deny(uid, 422, error.to_string()),
                    Outcome::Denied,
                );
            }
        };
        let mutator = match Mutator::compile(&parsed) {
            Ok(mutator) => mutator,
            Err(error) => {
                return (
                    AdmissionResponse::deny(uid, 422, error.to_string()),
                    Outcome::Denied,
                );
            }
        };
        let id = mutator.id().clone();
        let mut response = AdmissionResponse::allow(uid);
        if let Some(snapshot) = self.current() {
            let mut system = snapshot.system.clone();
            let conflicted = system.upsert(mutator);
            response.warnings = system
                .conflicts(&id)
                .iter()
                .map(|conflict| conflict_warning(&id, conflict))
                .collect();
            // A mutator whose condition reads what this one writes is not
            // enforced because of it, though this one has no conflict itself.
            for other in conflicted.iter().filter(|other| **other != id) {
                response.warnings.extend(
                    system
                        .conflicts(other)
                        .iter()
                        .filter(|c| matches!(c, Conflict::Condition(_)) && *c.with() == id)
                        .map(|conflict| conflict_warning(other, conflict)),
                );
            }
            // What the analysis finds about the set with this mutator in
            // it, as far as it involves this mutator: warnings, never a denial.
            response.warnings.extend(
                sartor_engine::analysis::analyze(&system, sartor_engine::Scopes::builtin())
                    .iter()
                    .filter(|finding| finding.involves(&id))
                    .map(|finding| format!("{}: {finding}", finding.severity())),
            );
        }
        let outcome = if response.warnings.is_empty() {
            Outcome::Allowed
        } else {
            Outcome::Warned
        };
        (response, outcome)
    }
}

/// The Namespace's own name: `request.name`, else the object's `metadata.name`.
fn namespace_object_name(request: &AdmissionRequest) -> &str {
    if !request.name.is_empty() {
        return &request.name;
    }
    request
        .object
        .as_ref()
        .and_then(|o| o.get("metadata"))
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `namespace/name` or `name` for logs.
fn object_name(request: &AdmissionRequest) -> String {
    let name = if request.name.is_empty() {
        request
            .object
            .as_ref()
            .and_then(|o| o.get("metadata"))
            .and_then(|m| m.get("generateName"))
            .and_then(Value::as_str)
            .map(|prefix| format!("{prefix}*"))
            .unwrap_or_default()
    } else {
        request.name.clone()
    };
    if request.namespace.is_empty() {
        name
    } else {
        format!("{}/{name}", request.namespace)
    }
}

fn review_reply(response: AdmissionResponse, version: &str, outcome: Outcome) -> Reply {
    match response.to_review_json(version) {
        Ok(body) => Reply {
            status: 200,
            content_type: "application/json",
            body,
            outcome,
        },
        Err(error) => internal_error(&format!("encoding the AdmissionReview: {error}")),
    }
}

/// The `/v1/validate` warning for a conflict of mutator `id`.
fn conflict_warning(id: &MutatorId, conflict: &Conflict) -> String {
    match conflict {
        Conflict::Schema(_) => format!("{id} {conflict}; neither is enforced until one changes"),
        Conflict::Condition(_) => {
            format!("{id}: {conflict}; it is not enforced until one of them changes")
        }
    }
}

/// A 400 naming why the body is not a usable AdmissionReview.
pub fn bad_request(error: &ReviewError) -> Reply {
    Reply {
        status: 400,
        content_type: "text/plain; charset=utf-8",
        body: format!("{error}\n").into_bytes(),
        outcome: Outcome::Invalid,
    }
}

/// A 500 for a failure of sartor's own (never for bad input).
pub fn internal_error(message: &str) -> Reply {
    tracing::error!(message, "internal error");
    Reply {
        status: 500,
        content_type: "text/plain; charset=utf-8",
        body: format!("internal error: {message}\n").into_bytes(),
        outcome: Outcome::InternalError,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn the_confinement_keeps_changes_in_and_of_added_ephemeral_containers() {
        let added = [json!("debug")];
        let mutated =
            json!({"spec": {"ephemeralContainers": [{"name": "old"}, {"name": "debug"}]}});
        let kept = |path: &str| kept_by_confinement(&Path::parse(path).unwrap(), &added, &mutated);
        assert!(kept(
            "spec.ephemeralContainers[name: debug].imagePullPolicy"
        ));
        assert!(kept("spec.ephemeralContainers[name: debug]"));
        assert!(!kept("spec.ephemeralContainers[name: old].imagePullPolicy"));
        assert!(!kept("spec.containers[name: debug].imagePullPolicy"));
        assert!(!kept("metadata.labels.team"));
        // Removed: the confinement keeps the container as it was.
        let removed = json!({"spec": {"ephemeralContainers": [{"name": "old"}]}});
        let path = Path::parse("spec.ephemeralContainers[name: debug]").unwrap();
        assert!(!kept_by_confinement(&path, &added, &removed));
    }
}
