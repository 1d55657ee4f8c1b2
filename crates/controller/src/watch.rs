//! Watches the mutator kinds, keeps the [`MutatorSet`] current, publishes a
//! new snapshot into the webhook on every change and queues status entries.

use std::sync::Arc;

use futures::StreamExt as _;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client};
use sartor_api::{GATEKEEPER_GROUP, MutatorKind};
use sartor_webhook::Webhook;
use serde_json::Value;
use tokio::sync::watch;

use crate::mutators::{Group, MutatorSet};
use crate::status::{StatusQueue, resource};

/// One watched kind.
#[derive(Debug, Clone)]
pub struct Watched {
    /// Its group.
    pub group: Group,
    /// Its kind.
    pub kind: MutatorKind,
    /// Where the API serves it.
    pub resource: ApiResource,
}

/// The kinds to watch: sartor's four, and with `gatekeeper_compat` each of
/// Gatekeeper's whose CRD the API server serves (its first served version of
/// `v1`, `v1beta1`, `v1alpha1`).
pub async fn watched(client: &Client, gatekeeper_compat: bool) -> Vec<Watched> {
    let mut watched: Vec<Watched> = MutatorKind::ALL
        .into_iter()
        .map(|kind| Watched {
            group: Group::Sartor,
            kind,
            resource: resource(kind),
        })
        .collect();
    if !gatekeeper_compat {
        return watched;
    }
    let mut served = Vec::new();
    for version in ["v1", "v1beta1", "v1alpha1"] {
        let group_version = format!("{GATEKEEPER_GROUP}/{version}");
        match client.list_api_group_resources(&group_version).await {
            Ok(list) => served.push((version, list.resources)),
            Err(kube::Error::Api(status)) if status.is_not_found() => {}
            Err(error) => {
                tracing::warn!(%error, group_version, "discovering Gatekeeper's mutator CRDs");
            }
        }
    }
    for kind in MutatorKind::ALL {
        let plural = kind.as_str().to_lowercase();
        let version = kind.gatekeeper_versions().iter().find(|version| {
            served
                .iter()
                .any(|(v, resources)| v == *version && resources.iter().any(|r| r.name == plural))
        });
        match version {
            Some(version) => watched.push(Watched {
                group: Group::Gatekeeper,
                kind,
                resource: ApiResource {
                    group: GATEKEEPER_GROUP.to_string(),
                    version: (*version).to_string(),
                    api_version: format!("{GATEKEEPER_GROUP}/{version}"),
                    kind: kind.as_str().to_string(),
                    plural,
                },
            }),
            None => tracing::info!(
                kind = kind.as_str(),
                "Gatekeeper's CRD for this kind is not installed; not watched"
            ),
        }
    }
    watched
}

/// The watch loop of one replica.
pub struct MutatorWatch {
    /// The API client.
    pub client: Client,
    /// Where snapshots go.
    pub webhook: Arc<Webhook>,
    /// The replica's name (its status entries' id).
    pub pod: String,
    /// The kinds to watch (see [`watched`]).
    pub watched: Vec<Watched>,
}

impl MutatorWatch {
    /// Runs until dropped. Publishes the first snapshot only once every
    /// watched kind has been listed and `namespaces_listed` is true, so the
    /// replica never admits with a partial set.
    pub async fn run(self, mut namespaces_listed: watch::Receiver<bool>, status: StatusQueue) {
        let streams = self.watched.iter().enumerate().map(|(index, watched)| {
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &watched.resource);
            watcher(api, watcher::Config::default())
                .default_backoff()
                .map(move |event| (index, event))
                .boxed()
        });
        let mut events = futures::stream::select_all(streams);
        let mut set = MutatorSet::new();
        let mut listed = vec![false; self.watched.len()];
        let mut relists: Vec<Option<Vec<Value>>> = vec![None; self.watched.len()];
        let mut published = false;
        let mut failed = Vec::new();
        loop {
            let changed = tokio::select! {
                event = events.next() => {
                    let Some((index, event)) = event else { return };
                    let (Some(watched), Some(relist), Some(done)) =
                        (self.watched.get(index), relists.get_mut(index), listed.get_mut(index))
                    else {
                        continue;
                    };
                    apply(&mut set, watched, event, relist, done)
                }
                changed = namespaces_listed.changed(), if !published => {
                    if changed.is_err() {
                        // The namespace cache is gone: nothing more will be listed.
                        return;
                    }
                    false
                }
            };
            if !listed.iter().all(|done| *done) || !*namespaces_listed.borrow() {
                continue;
            }
            // A mutator that does not compile changes no System, but the
            // webhook's metrics count it.
            let now_failed = set.failed();
            if changed || !published || now_failed != failed {
                failed = now_failed;
                let snapshot = set.snapshot();
                let mutators = snapshot.system.len();
                let conflicted = snapshot.system.conflicted().len();
                let failed = snapshot.errors.len();
                self.webhook.metrics().record_mutator_reload(true);
                // Published before it is logged: whoever reads the log finds it in force.
                self.webhook.publish(snapshot);
                tracing::info!(mutators, conflicted, failed, "mutators loaded");
                published = true;
            }
            for (key, entry) in set.status_changes(&self.pod) {
                for error in &entry.errors {
                    tracing::warn!(mutator = %key, problem = %error.message, "mutator not enforced");
                }
                status.push(key, Some(entry));
            }
        }
    }
}

/// Applies one watch event; returns whether the System changed.
fn apply(
    set: &mut MutatorSet,
    watched: &Watched,
    event: Result<watcher::Event<DynamicObject>, watcher::Error>,
    relist: &mut Option<Vec<Value>>,
    listed: &mut bool,
) -> bool {
    let (group, kind) = (watched.group, watched.kind);
    match event {
        Ok(watcher::Event::Init) => {
            *relist = Some(Vec::new());
            false
        }
        Ok(watcher::Event::InitApply(object)) => {
            if let (Some(relist), Some(value)) = (relist, to_value(object, &watched.resource)) {
                relist.push(value);
            }
            false
        }
        Ok(watcher::Event::InitDone) => {
            let objects = relist.take().unwrap_or_default();
            tracing::debug!(kind = %kind, group = group.as_str(), objects = objects.len(), "listed");
            *listed = true;
            set.replace(group, kind, &objects)
        }
        Ok(watcher::Event::Apply(object)) => match to_value(object, &watched.resource) {
            Some(value) => set.apply(group, kind, &value),
            None => false,
        },
        Ok(watcher::Event::Delete(object)) => match &object.metadata.name {
            Some(name) => set.delete(group, kind, name),
            None => false,
        },
        Err(error) => {
            tracing::warn!(%error, kind = %kind, group = group.as_str(), "watching mutators");
            false
        }
    }
}

/// The object as the loader reads it, with its `apiVersion` and `kind`
/// (list items may lack them).
fn to_value(object: DynamicObject, resource: &ApiResource) -> Option<Value> {
    let mut value = serde_json::to_value(object).ok()?;
    let fields = value.as_object_mut()?;
    fields.insert(
        "apiVersion".into(),
        Value::from(resource.api_version.clone()),
    );
    fields.insert("kind".into(), Value::from(resource.kind.clone()));
    Some(value)
}
