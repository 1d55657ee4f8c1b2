//! The audit kept in the cluster: the replica holding the audit's Lease
//! scans every interval, and at once when the mutators change or it takes
//! the Lease, and writes the findings as OpenReports reports in place of the
//! last scan's.
//!
//! ```text
//!  mutators published | interval | Lease taken ──▶ (leader only) scan(System, UPDATE)
//!    ──▶ Reports (a result per object and mutator) ──▶ ReportWriter: apply, delete the stale
//!    ──▶ each mutator's status.audit.wouldChange (when it changed)
//!    ──▶ sartor_audit_* gauges; no CRDs: logged once, /readyz says so, admission goes on
//! ```

use std::collections::HashMap;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use sartor_api::API_VERSION;
use sartor_engine::{MutatorId, Operation, System};
use serde_json::json;
use tokio::sync::watch;

use super::{Excluded, Outcome, ReportWriter, Reports, scan};
use crate::feed::Feed;
use crate::status::resource;

/// The field manager of `status.audit`, the same on every replica: the one
/// holding the Lease owns the field.
const STATUS_MANAGER: &str = "sartor-audit";

/// The in-cluster audit of one replica.
pub struct InClusterAudit {
    /// The API server's client (its identity needs `list` on every kind the
    /// mutators can change, and the reports' and the Lease's writes).
    pub client: Client,
    /// The mutators in force, and where the audit's problem is said.
    pub feed: Feed,
    /// The namespaces the webhook never sees, left out as it leaves them.
    pub excluded: Excluded,
    /// The time between full scans.
    pub interval: Duration,
    /// Whether this replica holds the Lease ([`crate::LeaseHolder::run`]).
    pub leader: watch::Receiver<bool>,
}

impl InClusterAudit {
    /// Scans and reports until the mutators' or the Lease's sender is gone.
    pub async fn run(mut self) {
        let writer = ReportWriter::new(self.client.clone());
        let mut mutators = self.feed.state().subscribe();
        // The problem last logged, so a lasting one is logged once.
        let mut told: Option<String> = None;
        // Each mutator's count as last written to its status.
        let mut written: HashMap<MutatorId, u64> = HashMap::new();
        loop {
            let leading = *self.leader.borrow_and_update();
            self.feed.metrics().set_audit_leader(leading);
            if !leading {
                // Another replica writes (and says its problems); counts
                // are written again in full if this one leads again.
                written.clear();
                if told.take().is_some() {
                    self.feed.set_audit_problem(None);
                }
            }
            if leading && let Some(snapshot) = self.feed.state().current() {
                let started = Instant::now();
                let mut reports = Reports::default();
                let mut counts: HashMap<MutatorId, u64> = HashMap::new();
                let scanned = scan(
                    &self.client,
                    &snapshot.system,
                    None,
                    &self.excluded,
                    Operation::Update,
                    |audited| {
                        if let Outcome::Changes { mutators, .. } = &audited.outcome {
                            for id in mutators {
                                *counts.entry(id.clone()).or_default() += 1;
                            }
                        }
                        reports.add(&audited);
                    },
                    |_, _| {},
                )
                .await;
                match scanned {
                    Ok(summary) => {
                        let seconds = started.elapsed().as_secs_f64();
                        let metrics = self.feed.metrics();
                        metrics.set_audit_scan(
                            summary.scanned(),
                            summary.changed,
                            summary.failed,
                            seconds,
                        );
                        self.write(&writer, reports, &mut told).await;
                        self.write_status(&snapshot.system, &counts, &mut written)
                            .await;
                    }
                    // The reports stay as the last scan left them, and
                    // /readyz says why they are not being kept current.
                    Err(error) => self.tell(
                        &mut told,
                        format!(
                            "the last scan failed, scanning again in {}s: {error}",
                            self.interval.as_secs()
                        ),
                    ),
                }
            }
            // Whatever comes first: the interval, new mutators, the Lease.
            tokio::select! {
                () = tokio::time::sleep(self.interval) => {}
                changed = mutators.changed() => if changed.is_err() { return },
                changed = self.leader.changed() => if changed.is_err() { return },
            }
        }
    }

    /// Writes a scan's reports; a problem (no CRDs, a refused write) is
    /// logged once while it lasts and said on `/readyz`.
    async fn write(&self, writer: &ReportWriter, reports: Reports, told: &mut Option<String>) {
        let reports = reports.into_reports();
        match writer.write(&reports).await {
            Ok(()) => {
                if told.take().is_some() {
                    tracing::info!("audit reports written again");
                }
                self.feed.set_audit_problem(None);
                tracing::debug!(reports = reports.len(), "audit reports written");
            }
            Err(error) => self.tell(told, error.to_string()),
        }
    }

    /// Writes `status.audit.wouldChange` of each mutator of `system` whose
    /// count is not the one last written (`written`). A mutator sartor has no
    /// object of (Gatekeeper's, read with --gatekeeper-compat) is left alone;
    /// another refusal is logged and retried at the next scan.
    async fn write_status(
        &self,
        system: &System,
        counts: &HashMap<MutatorId, u64>,
        written: &mut HashMap<MutatorId, u64>,
    ) {
        let params = PatchParams::apply(STATUS_MANAGER).force();
        for mutator in system.mutators() {
            let id = mutator.id();
            let count = counts.get(id).copied().unwrap_or(0);
            if written.get(id) == Some(&count) {
                continue;
            }
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource(id.kind));
            let body = json!({
                "apiVersion": API_VERSION,
                "kind": id.kind.as_str(),
                "metadata": {"name": id.name},
                "status": {"audit": {"wouldChange": count}},
            });
            match api
                .patch_status(&id.name, &params, &Patch::Apply(&body))
                .await
            {
                Ok(_) => {
                    written.insert(id.clone(), count);
                }
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    written.insert(id.clone(), count);
                }
                Err(error) => {
                    tracing::warn!(mutator = %id, %error, "cannot write the audit's count to the mutator's status; retried at the next scan");
                }
            }
        }
    }

    /// Says `problem` on `/readyz` and in the gauge, and logs it unless it
    /// is the one logged last.
    fn tell(&self, told: &mut Option<String>, problem: String) {
        if told.as_ref() != Some(&problem) {
            tracing::warn!(%problem, "audit reports not kept current; admission goes on");
        }
        *told = Some(problem.clone());
        self.feed.set_audit_problem(Some(problem));
    }
}
