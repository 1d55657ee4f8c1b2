//! What a source of mutators writes into: the published state's writer half
//! and the controller's metrics, kept in step (a snapshot is counted as it
//! is published, the CRD gauges follow the CRDs' facts).

use std::sync::Arc;

use sartor_api::Provider;
use sartor_state::{MutatorCrd, ProviderError, Publisher, Snapshot, State};

use crate::metrics::Metrics;

/// The writer half of the published state, with the metrics that count
/// what goes through it. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Feed {
    publisher: Publisher,
    metrics: Arc<Metrics>,
}

impl Feed {
    /// A feed writing through `publisher`, counting into `metrics`.
    pub fn new(publisher: Publisher, metrics: Arc<Metrics>) -> Feed {
        Feed { publisher, metrics }
    }

    /// Counts a reload that worked, sets the mutator gauges, and swaps the
    /// snapshot in.
    pub fn publish(&self, snapshot: Snapshot) {
        self.metrics.record_mutator_reload(true);
        self.metrics.set_mutators(&snapshot);
        self.publisher.publish(snapshot);
    }

    /// Counts a reload that was refused: the set in force stays.
    pub fn refuse(&self) {
        self.metrics.record_mutator_reload(false);
    }

    /// Records which watched mutator kinds' CRDs are served, in the state
    /// and the CRD gauges.
    pub fn set_crds(&self, crds: Vec<MutatorCrd>) {
        self.metrics.set_crds(&crds);
        self.publisher.set_crds(crds);
    }

    /// Puts `providers` in force.
    ///
    /// # Errors
    /// Every provider that cannot be used; then the providers in force stay.
    pub fn set_providers(&self, providers: &[Provider]) -> Result<(), Vec<ProviderError>> {
        self.publisher.set_providers(providers)
    }

    /// Records what keeps the in-cluster audit's reports from being current
    /// (`/readyz` says it); the audit sets `sartor_audit_reports_written`
    /// itself.
    pub fn set_audit_problem(&self, problem: Option<String>) {
        self.publisher.set_audit_problem(problem);
    }

    /// A reader of what it publishes.
    pub fn state(&self) -> State {
        self.publisher.state()
    }

    /// The metrics it counts into.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }
}
