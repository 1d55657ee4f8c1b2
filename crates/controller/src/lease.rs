//! One writer among the replicas: a `coordination.k8s.io` Lease, held by
//! the replica that last renewed it within its duration.
//!
//! Written with kube's client rather than taken from a crate: the loop is
//! small (read, then create, renew or take over an expired lease, each
//! write conditional on the version read, so two replicas racing for an
//! expired lease cannot both win), and the leader-election crates for kube
//! either pull in their own kube version or hold more than one lease needs.

use crate::api_errors::is_conflict;
use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A Lease this replica competes for.
pub struct LeaseHolder {
    api: Api<Lease>,
    name: String,
    identity: String,
    duration: Duration,
}

impl LeaseHolder {
    /// The lease `name` in `namespace`, held as `identity` (the pod's name)
    /// for `duration` from each renewal.
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        identity: &str,
        duration: Duration,
    ) -> LeaseHolder {
        LeaseHolder {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            identity: identity.to_string(),
            duration,
        }
    }

    /// Competes for the lease until the receiver is dropped or `stop`
    /// completes, renewing it every third of its duration; the receiver says
    /// whether this replica holds it now. A replica that cannot reach the API
    /// server keeps the lease until its last renewal's duration has passed
    /// (no other replica can take it before), so a short outage does not stop
    /// its work. When `stop` completes (the replica is shutting down), the
    /// receiver turns `false` first, then a lease held is released, so
    /// another replica takes it at its next round rather than after the
    /// lease's whole duration; the task ends after that one write.
    pub fn run(
        self,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> (watch::Receiver<bool>, JoinHandle<()>) {
        let (holding, held) = watch::channel(false);
        let task = tokio::spawn(async move {
            tokio::pin!(stop);
            // When this replica last renewed the lease, while it holds it.
            let mut renewed: Option<Instant> = None;
            loop {
                let asked = Instant::now();
                let now = match self.try_hold().await {
                    Ok(true) => {
                        renewed = Some(asked);
                        true
                    }
                    Ok(false) => {
                        renewed = None;
                        false
                    }
                    Err(error) => {
                        tracing::warn!(lease = %self.name, %error, "cannot read or write the lease");
                        renewed.is_some_and(|at| at.elapsed() < self.duration)
                    }
                };
                holding.send_if_modified(|was| std::mem::replace(was, now) != now);
                tokio::select! {
                    () = tokio::time::sleep(self.duration / 3) => {}
                    () = holding.closed() => return,
                    () = &mut stop => {
                        holding.send_replace(false);
                        if renewed.is_some() {
                            match self.release().await {
                                Ok(true) => tracing::info!(lease = %self.name, "lease released"),
                                Ok(false) => {}
                                Err(error) => tracing::warn!(
                                    lease = %self.name, %error,
                                    "cannot release the lease; another replica takes it once it expires"
                                ),
                            }
                        }
                        return;
                    }
                }
            }
        });
        (held, task)
    }

    /// Gives the lease up if this replica holds it: no holder, renewed now
    /// for one second, conditional on the version read. Whether it was
    /// released.
    async fn release(&self) -> Result<bool, kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            return Ok(false);
        };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(false);
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        lease.spec = Some(spec);
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(true),
            Err(error) if is_conflict(&error) => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// One round: whether this replica holds the lease after it.
    async fn try_hold(&self) -> Result<bool, kube::Error> {
        let now = MicroTime(Timestamp::now());
        let seconds = i32::try_from(self.duration.as_secs()).unwrap_or(i32::MAX);
        let spec = |transitions: i32, acquired: Option<MicroTime>| LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(seconds),
            acquire_time: acquired.or_else(|| Some(now.clone())),
            renew_time: Some(now.clone()),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        };
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec(0, None)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                // Another replica created it first.
                Err(error) if is_conflict(&error) => Ok(false),
                Err(error) => Err(error),
            };
        };
        let current = lease.spec.clone().unwrap_or_default();
        let mine = current.holder_identity.as_deref() == Some(self.identity.as_str());
        // Released by its holder ([`LeaseHolder::release`]): free at once.
        let released = current.holder_identity.as_deref().is_none_or(str::is_empty);
        let expired = released
            || match (&current.renew_time, current.lease_duration_seconds) {
                (Some(renewed), Some(seconds)) => renewed
                    .0
                    .checked_add(Duration::from_secs(u64::try_from(seconds).unwrap_or(0)))
                    .map_or(true, |until| until < Timestamp::now()),
                _ => true,
            };
        if !mine && !expired {
            return Ok(false);
        }
        let transitions = current.lease_transitions.unwrap_or(0) + i32::from(!mine);
        let acquired = if mine { current.acquire_time } else { None };
        lease.spec = Some(spec(transitions, acquired));
        // The version read is kept: a replica that renewed or took it since
        // makes this write fail with a conflict, and this one holds nothing.
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(true),
            Err(error) if is_conflict(&error) => Ok(false),
            Err(error) => Err(error),
        }
    }
}
