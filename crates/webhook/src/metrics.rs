//! Prometheus metrics, served as text on the metrics port.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `sartor_admission_requests_total` | counter | `endpoint`, `outcome` |
//! | `sartor_admission_request_duration_seconds` | histogram | `endpoint`, `outcome` |
//! | `sartor_mutations_applied_total` | counter | `kind`, `name` (mutator) |
//! | `sartor_convergence_passes` | histogram | |
//! | `sartor_tls_certificate_reloads_total` | counter | `result` (`ok`, `error`) |
//! | `sartor_provider_requests_total` | counter | `provider`, `result` (`ok`, `invalid`, `error`, `timeout`, `busy`) |
//! | `sartor_provider_request_duration_seconds` | histogram | `provider` |
//! | `sartor_provider_cache_lookups_total` | counter | `provider`, `result` (`hit`, `miss`) |
//! | `sartor_admission_shed_total` | counter | `endpoint`, `reason` ([`Shed`]) |
//! | `sartor_admission_in_flight` | gauge | |
//! | `sartor_admission_queued` | gauge | |
//! | `sartor_admission_queue_wait_seconds` | histogram | |

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::Duration;

use std::fmt::{self, Write as _};

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use sartor_engine::MutatorId;

/// Latency buckets: 100 µs to 2.5 s, dense where sartor answers (well under 5 ms).
const LATENCY_BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// Convergence passes: 1 (nothing matched or one pass sufficed) upwards.
const PASS_BUCKETS: [f64; 7] = [1.0, 2.0, 3.0, 4.0, 6.0, 10.0, 20.0];

/// Which endpoint answered and how.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    endpoint: Endpoint,
    outcome: Outcome,
}

/// An admission endpoint: the `endpoint` label, and the name in logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `/v1/mutate`, the mutating webhook.
    Mutate,
    /// `/v1/validate`, the validating webhook (mutators and the exemption label).
    Validate,
}

/// How an admission call ended: the `outcome` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// `/v1/mutate`: the object was mutated (a patch answered).
    Mutated,
    /// `/v1/mutate`: mutators ran and changed nothing.
    Unchanged,
    /// Not for sartor: another operation, a subresource, a skipped namespace
    /// or user, an object sartor never mutates (`sartor_api::protected`).
    Skipped,
    /// `/v1/mutate`: the mutation failed and the object was admitted unmutated
    /// (`--on-error allow`).
    Error,
    /// Denied: a failed mutation with `--on-error deny`, an invalid mutator,
    /// a namespace given the exemption label.
    Denied,
    /// `/v1/validate`: allowed without a warning.
    Allowed,
    /// `/v1/validate`: allowed with warnings (conflicts, analysis findings).
    Warned,
    /// A body that is not a usable AdmissionReview (400).
    Invalid,
    /// A failure of sartor's own (500).
    InternalError,
    /// A body over the size limit (413).
    TooLarge,
    /// A body that did not arrive in time (408).
    Timeout,
    /// The connection failed while the body was read (400).
    Aborted,
    /// A method other than the endpoint's (405).
    MethodNotAllowed,
    /// No such endpoint (404).
    NotFound,
    /// `/readyz` before the first snapshot (503).
    NotReady,
    /// A probe answered 200.
    Ok,
    /// Answered early (503) under overload or past the deadline, unmutated,
    /// so the API server applies the webhook's failurePolicy; why is
    /// counted in `sartor_admission_shed_total` ([`Shed`]).
    Shed,
}

/// Why an admission request was answered early (`crate::overload`): the
/// `reason` label of `sartor_admission_shed_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shed {
    /// Every slot taken and the queue full: shed on arrival.
    QueueFull,
    /// No slot came free before the deadline (less the margin), or none
    /// was left on arrival.
    Deadline,
    /// The body was still arriving at the deadline.
    SlowBody,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ShedLabels {
    endpoint: Endpoint,
    reason: Shed,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MutatorLabels {
    kind: &'static str,
    name: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProviderLabels {
    provider: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProviderResultLabels {
    provider: String,
    result: &'static str,
}

/// How one call to an external data provider ended: the `result` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderCall {
    /// A valid answer.
    Ok,
    /// An answer with a `systemError` or not declared idempotent.
    Invalid,
    /// No answer: connection, TLS, HTTP or decoding error.
    Error,
    /// No answer by the deadline.
    Timeout,
    /// Not sent: every slot for the provider stayed taken until the deadline.
    Busy,
}

impl ProviderCall {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderCall::Ok => "ok",
            ProviderCall::Invalid => "invalid",
            ProviderCall::Error => "error",
            ProviderCall::Timeout => "timeout",
            ProviderCall::Busy => "busy",
        }
    }
}

// === impl Endpoint ===

impl Endpoint {
    /// The label value: `mutate` or `validate`.
    pub fn as_str(self) -> &'static str {
        match self {
            Endpoint::Mutate => "mutate",
            Endpoint::Validate => "validate",
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl EncodeLabelValue for Endpoint {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> fmt::Result {
        encoder.write_str(self.as_str())
    }
}

// === impl Outcome ===

impl Outcome {
    /// The label value, in snake case (`internal_error`).
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Mutated => "mutated",
            Outcome::Unchanged => "unchanged",
            Outcome::Skipped => "skipped",
            Outcome::Error => "error",
            Outcome::Denied => "denied",
            Outcome::Allowed => "allowed",
            Outcome::Warned => "warned",
            Outcome::Invalid => "invalid",
            Outcome::InternalError => "internal_error",
            Outcome::TooLarge => "too_large",
            Outcome::Timeout => "timeout",
            Outcome::Aborted => "aborted",
            Outcome::MethodNotAllowed => "method_not_allowed",
            Outcome::NotFound => "not_found",
            Outcome::NotReady => "not_ready",
            Outcome::Ok => "ok",
            Outcome::Shed => "shed",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl EncodeLabelValue for Outcome {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> fmt::Result {
        encoder.write_str(self.as_str())
    }
}

// === impl Shed ===

impl Shed {
    /// The label value: `queue_full`, `deadline` or `slow_body`.
    pub fn as_str(self) -> &'static str {
        match self {
            Shed::QueueFull => "queue_full",
            Shed::Deadline => "deadline",
            Shed::SlowBody => "slow_body",
        }
    }
}

impl fmt::Display for Shed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl EncodeLabelValue for Shed {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> fmt::Result {
        encoder.write_str(self.as_str())
    }
}

/// Every metric the server exports, and the registry that renders them.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RequestLabels, Histogram, fn() -> Histogram>,
    applied: Family<MutatorLabels, Counter>,
    /// The `applied` counter of each mutator counted so far, by id: counting
    /// a mutator again hashes its id once with a fast hasher instead of
    /// copying its name into labels and SipHashing them (a tenth of a
    /// request that 66 mutators change). Holds the ids `applied` has series
    /// for, so it grows no faster than the family.
    applied_counters: RwLock<HashMap<MutatorId, Counter, foldhash::fast::RandomState>>,
    passes: Histogram,
    tls_reloads: Family<ResultLabels, Counter>,
    provider_calls: Family<ProviderResultLabels, Counter>,
    provider_latency: Family<ProviderLabels, Histogram, fn() -> Histogram>,
    provider_cache: Family<ProviderResultLabels, Counter>,
    shed: Family<ShedLabels, Counter>,
    in_flight: Gauge,
    queued: Gauge,
    queue_wait: Histogram,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    /// A fresh set of metrics, all zero, in a registry of their own.
    pub fn new() -> Metrics {
        Metrics::with_registry(Registry::with_prefix("sartor"))
    }

    /// The webhook's metrics, all zero, registered into `registry` beside
    /// what other parts of the process registered there (the binary builds
    /// one registry; the metrics port renders all of it).
    pub fn with_registry(mut registry: Registry) -> Metrics {
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "admission_requests",
            "Admission requests answered, by endpoint and outcome",
            requests.clone(),
        );
        let latency = Family::<RequestLabels, Histogram>::new_with_constructor(
            (|| Histogram::new(LATENCY_BUCKETS)) as fn() -> Histogram,
        );
        registry.register(
            "admission_request_duration_seconds",
            "Time from the request's headers to the answer, by endpoint and outcome",
            latency.clone(),
        );
        let applied = Family::<MutatorLabels, Counter>::default();
        registry.register(
            "mutations_applied",
            "Objects each mutator changed",
            applied.clone(),
        );
        let passes = Histogram::new(PASS_BUCKETS);
        registry.register(
            "convergence_passes",
            "Passes over the mutators until an object stopped changing",
            passes.clone(),
        );
        let tls_reloads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "tls_certificate_reloads",
            "Serving certificate reloads after the files changed, by result",
            tls_reloads.clone(),
        );
        let provider_calls = Family::<ProviderResultLabels, Counter>::default();
        registry.register(
            "provider_requests",
            "Calls to external data providers, by provider and result (ok, invalid, error, timeout, busy)",
            provider_calls.clone(),
        );
        let provider_latency = Family::<ProviderLabels, Histogram>::new_with_constructor(
            (|| Histogram::new(LATENCY_BUCKETS)) as fn() -> Histogram,
        );
        registry.register(
            "provider_request_duration_seconds",
            "Time of each call to an external data provider, by provider",
            provider_latency.clone(),
        );
        let provider_cache = Family::<ProviderResultLabels, Counter>::default();
        registry.register(
            "provider_cache_lookups",
            "Keys looked up in the external data cache, by provider and result (hit, miss)",
            provider_cache.clone(),
        );
        let shed = Family::<ShedLabels, Counter>::default();
        registry.register(
            "admission_shed",
            "Admission requests answered early (503) under overload or past their deadline, by endpoint and reason (queue_full, deadline, slow_body)",
            shed.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "admission_in_flight",
            "Admission requests holding a slot (--max-in-flight) now",
            in_flight.clone(),
        );
        let queued = Gauge::default();
        registry.register(
            "admission_queued",
            "Admission requests waiting for a slot now (--max-queued at most)",
            queued.clone(),
        );
        let queue_wait = Histogram::new(LATENCY_BUCKETS);
        registry.register(
            "admission_queue_wait_seconds",
            "Time admission requests waited for a slot, of those that got one (0 for most)",
            queue_wait.clone(),
        );
        Metrics {
            shed,
            in_flight,
            queued,
            queue_wait,
            provider_calls,
            provider_latency,
            provider_cache,
            registry,
            requests,
            latency,
            applied,
            applied_counters: RwLock::default(),
            passes,
            tls_reloads,
        }
    }

    /// Counts one answered request.
    pub fn record_request(&self, endpoint: Endpoint, outcome: Outcome, took: Duration) {
        let labels = RequestLabels { endpoint, outcome };
        self.requests.get_or_create(&labels).inc();
        self.latency
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    /// Counts one mutated object: the mutators that changed it and the passes it took.
    pub fn record_mutation<'a>(
        &self,
        applied: impl IntoIterator<Item = &'a MutatorId>,
        passes: usize,
    ) {
        let mut unseen = Vec::new();
        match self.applied_counters.read() {
            Ok(counters) => {
                for id in applied {
                    match counters.get(id) {
                        Some(counter) => {
                            counter.inc();
                        }
                        None => unseen.push(id),
                    }
                }
            }
            // A writer panicked: count through the family alone.
            Err(_) => unseen.extend(applied),
        }
        for id in unseen {
            let counter = self
                .applied
                .get_or_create(&MutatorLabels {
                    kind: id.kind.as_str(),
                    name: id.name.clone(),
                })
                .clone();
            counter.inc();
            if let Ok(mut counters) = self.applied_counters.write() {
                counters.insert(id.clone(), counter);
            }
        }
        self.passes.observe(passes as f64);
    }

    /// Counts an attempt to reload the serving certificate.
    pub fn record_tls_reload(&self, ok: bool) {
        self.tls_reloads.get_or_create(&result(ok)).inc();
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail; an encoder error would be a bug in a
        // metric's labels, and then a partial page beats none.
        if let Err(error) = encode(&mut text, &self.registry) {
            tracing::error!(%error, "encoding metrics");
        }
        text
    }
}

fn result(ok: bool) -> ResultLabels {
    ResultLabels {
        result: if ok { "ok" } else { "error" },
    }
}

// === impl Metrics: overload ===

impl Metrics {
    /// Counts one request answered early.
    pub fn record_shed(&self, endpoint: Endpoint, reason: Shed) {
        self.shed
            .get_or_create(&ShedLabels { endpoint, reason })
            .inc();
    }

    /// Records how long a request waited for its slot.
    pub fn record_queue_wait(&self, took: Duration) {
        self.queue_wait.observe(took.as_secs_f64());
    }

    /// The requests holding a slot.
    pub(crate) fn in_flight(&self) -> &Gauge {
        &self.in_flight
    }

    /// The requests waiting for a slot.
    pub(crate) fn queued(&self) -> &Gauge {
        &self.queued
    }
}

// === impl Metrics: external data ===

impl Metrics {
    /// Counts one call to `provider` and how long it took.
    pub fn record_provider_call(&self, provider: &str, result: ProviderCall, took: Duration) {
        self.provider_calls
            .get_or_create(&ProviderResultLabels {
                provider: provider.to_string(),
                result: result.as_str(),
            })
            .inc();
        self.provider_latency
            .get_or_create(&ProviderLabels {
                provider: provider.to_string(),
            })
            .observe(took.as_secs_f64());
    }

    /// Counts keys of `provider` found in the cache and not.
    pub fn record_provider_cache(&self, provider: &str, hits: u64, misses: u64) {
        for (result, n) in [("hit", hits), ("miss", misses)] {
            if n > 0 {
                self.provider_cache
                    .get_or_create(&ProviderResultLabels {
                        provider: provider.to_string(),
                        result,
                    })
                    .inc_by(n);
            }
        }
    }
}
