//! Writes this replica's `status.byPod` entry of each mutator with
//! server-side apply, under its own field manager, so replicas never fight
//! over the list. Writes are queued (the newest entry per mutator wins),
//! rate-limited and retried with backoff; mutation never waits on them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::{Api, Client};
use sartor_api::{
    API_VERSION, Assign, AssignImage, AssignMetadata, ModifySet, MutatorKind, MutatorPodStatus,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::mutators::MutatorKey;

/// How fast and how patiently status is written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StatusLimits {
    /// Writes per second at most, across all mutators.
    pub per_second: f64,
    /// The first retry's delay; it doubles per failure.
    pub first_retry: Duration,
    /// The longest delay between retries.
    pub max_retry: Duration,
}

impl Default for StatusLimits {
    fn default() -> StatusLimits {
        StatusLimits {
            per_second: 10.0,
            first_retry: Duration::from_millis(250),
            max_retry: Duration::from_secs(60),
        }
    }
}

/// The field manager of sartor's writes that any replica may make (the
/// webhook configurations' CA bundles and derived rules), so that a
/// server-side apply over them names sartor in its conflict, not "unknown".
pub const FIELD_MANAGER: &str = "sartor";

/// The same, as `PostParams` for a create or replace.
pub(crate) fn post_params() -> kube::api::PostParams {
    kube::api::PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..kube::api::PostParams::default()
    }
}

/// The field manager of replica `pod`'s own status entries: `sartor/POD`.
pub fn field_manager(pod: &str) -> String {
    format!("{FIELD_MANAGER}/{pod}")
}

/// The API resource of one of sartor's mutator kinds, as its type declares it.
pub fn resource(kind: MutatorKind) -> ApiResource {
    match kind {
        MutatorKind::Assign => ApiResource::erase::<Assign>(&()),
        MutatorKind::AssignImage => ApiResource::erase::<AssignImage>(&()),
        MutatorKind::AssignMetadata => ApiResource::erase::<AssignMetadata>(&()),
        MutatorKind::ModifySet => ApiResource::erase::<ModifySet>(&()),
    }
}

/// The server-side apply body that sets `status` as this replica's entry
/// (`None`: withdraw the entry).
pub fn apply_body(key: &MutatorKey, status: Option<&MutatorPodStatus>) -> Value {
    let status = match status {
        Some(entry) => json!({"byPod": [entry]}),
        None => json!({}),
    };
    json!({
        "apiVersion": API_VERSION,
        "kind": key.kind.as_str(),
        "metadata": {"name": key.name},
        "status": status,
    })
}

/// What the writer is asked to do.
#[derive(Debug)]
enum Command {
    /// Write this entry for this mutator (`None`: withdraw it).
    Write(MutatorKey, Option<MutatorPodStatus>),
    /// The replica is stopping: withdraw every entry written, then stop.
    WithdrawAll,
}

/// The sending side of the status queue.
#[derive(Debug, Clone)]
pub struct StatusQueue {
    sender: mpsc::UnboundedSender<Command>,
}

impl StatusQueue {
    /// Queues `status` as the entry to write for `key` (`None`: withdraw it).
    pub fn push(&self, key: MutatorKey, status: Option<MutatorPodStatus>) {
        // The writer outlives every sender but at shutdown; nothing is lost
        // that would still matter then.
        let _ = self.sender.send(Command::Write(key, status));
    }

    /// Asks the writer to withdraw every entry it wrote (an apply of an empty
    /// status under this replica's field manager removes only its own entry),
    /// without rate limit, and then to stop; later pushes are ignored. For a
    /// replica that is shutting down, so no entry of a gone pod stays behind.
    pub fn withdraw_all(&self) {
        let _ = self.sender.send(Command::WithdrawAll);
    }
}

/// One queued write.
#[derive(Debug)]
struct Pending {
    status: Option<MutatorPodStatus>,
    failures: u32,
    due: Instant,
}

/// Writes queued status entries until every [`StatusQueue`] is dropped and
/// the queue is empty.
pub struct StatusWriter {
    client: Client,
    manager: String,
    limits: StatusLimits,
    receiver: mpsc::UnboundedReceiver<Command>,
}

impl StatusWriter {
    /// A writer for replica `pod`, and the queue that feeds it.
    pub fn new(client: Client, pod: &str, limits: StatusLimits) -> (StatusWriter, StatusQueue) {
        let (sender, receiver) = mpsc::unbounded_channel();
        let writer = StatusWriter {
            client,
            manager: field_manager(pod),
            limits,
            receiver,
        };
        (writer, StatusQueue { sender })
    }

    /// Writes until the queue closes (or [`StatusQueue::withdraw_all`]) and drains.
    pub async fn run(mut self) {
        let mut spacing = Duration::from_secs_f64(1.0 / self.limits.per_second.max(0.001));
        let mut pending: BTreeMap<MutatorKey, Pending> = BTreeMap::new();
        let mut written: BTreeSet<MutatorKey> = BTreeSet::new();
        let mut open = true;
        let mut next_slot = Instant::now();
        loop {
            let due = pending
                .iter()
                .min_by_key(|(_, p)| p.due)
                .map(|(key, p)| (key.clone(), p.due.max(next_slot)));
            if !open && due.is_none() {
                return;
            }
            tokio::select! {
                received = self.receiver.recv(), if open => match received {
                    Some(Command::Write(key, status)) => {
                        pending.insert(key, Pending { status, failures: 0, due: Instant::now() });
                    }
                    Some(Command::WithdrawAll) => {
                        open = false;
                        spacing = Duration::ZERO;
                        next_slot = Instant::now();
                        pending.clear();
                        for key in std::mem::take(&mut written) {
                            pending.insert(key, Pending { status: None, failures: 0, due: Instant::now() });
                        }
                    }
                    None => open = false,
                },
                () = sleep_until(due.as_ref().map(|(_, at)| *at)) => {
                    let Some((key, _)) = due else { continue };
                    let Some(write) = pending.remove(&key) else { continue };
                    next_slot = Instant::now() + spacing;
                    match self.write(&key, &write).await {
                        Ok(()) if write.status.is_some() => {
                            written.insert(key);
                        }
                        Ok(()) => {
                            written.remove(&key);
                        }
                        Err(failures) => {
                            // The API server may have applied it all the
                            // same (an answer lost, a timeout): withdrawn at
                            // shutdown whatever the retry makes of it.
                            if write.status.is_some() {
                                written.insert(key.clone());
                            }
                            // A newer entry received later replaces this retry.
                            let due = Instant::now() + self.backoff(failures);
                            pending.insert(key, Pending { status: write.status, failures, due });
                        }
                    }
                }
            }
        }
    }

    fn backoff(&self, failures: u32) -> Duration {
        let factor = 2u32.saturating_pow(failures.saturating_sub(1));
        self.limits
            .first_retry
            .saturating_mul(factor)
            .min(self.limits.max_retry)
    }

    /// Writes one entry; on failure, the number of failures so far.
    async fn write(&self, key: &MutatorKey, write: &Pending) -> Result<(), u32> {
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource(key.kind));
        let params = PatchParams::apply(&self.manager).force();
        let body = apply_body(key, write.status.as_ref());
        match api
            .patch_status(&key.name, &params, &Patch::Apply(&body))
            .await
        {
            Ok(_) => {
                tracing::debug!(mutator = %key, "status written");
                Ok(())
            }
            Err(kube::Error::Api(status)) if status.is_not_found() => {
                tracing::debug!(mutator = %key, "mutator gone; status not written");
                Ok(())
            }
            Err(error) => {
                let failures = write.failures.saturating_add(1);
                tracing::warn!(mutator = %key, %error, failures, "writing mutator status; will retry");
                Err(failures)
            }
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
