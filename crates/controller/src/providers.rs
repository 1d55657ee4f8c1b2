//! Watches Gatekeeper's `Provider` objects (`externaldata.gatekeeper.sh`,
//! cluster-scoped) and keeps the external data providers in force equal to
//! them.
//!
//! A Provider that Gatekeeper would refuse (no https, no caBundle, ...) or
//! whose CA bundle does not parse is left out and logged, the others stay in
//! force. Without the Provider CRD (no Gatekeeper and no copy installed),
//! there are no providers: externalData mutators then fail per their
//! `failurePolicy`, and the watch keeps retrying until the CRD appears.

use std::collections::BTreeMap;

use futures::StreamExt as _;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client};
use sartor_api::{EXTERNAL_DATA_GROUP, Provider, parse_provider};
use serde_json::Value;
use tokio::sync::watch;

use crate::feed::Feed;
use crate::relist::{Change, Relist};
use crate::watch::{is_not_served, to_value};

/// The version watched: the one Gatekeeper stores.
const VERSION: &str = "v1beta1";

/// Keeps the providers in force equal to the cluster's Provider objects.
pub struct ProviderWatch {
    /// The API server.
    pub client: Client,
    /// Where providers go.
    pub feed: Feed,
    /// Turns `true` once the Providers have been listed, found not
    /// installed, or failed to list once (logged): the replica turns ready
    /// only after, so an externalData mutator does not meet an unknown
    /// provider because the replica just started.
    pub listed: watch::Sender<bool>,
}

/// Where the API serves Providers.
pub fn provider_resource() -> ApiResource {
    ApiResource {
        group: EXTERNAL_DATA_GROUP.to_string(),
        version: VERSION.to_string(),
        api_version: format!("{EXTERNAL_DATA_GROUP}/{VERSION}"),
        kind: "Provider".to_string(),
        plural: "providers".to_string(),
    }
}

impl ProviderWatch {
    /// Watches until the process ends.
    pub async fn run(self) {
        let resource = provider_resource();
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
        let mut stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut relist = Relist::default();
        // The Provider objects by name.
        let mut objects: BTreeMap<String, Value> = BTreeMap::new();
        let mut missing_logged = false;
        while let Some(event) = stream.next().await {
            match event {
                Ok(event) => {
                    let Some(change) = relist.fold(event) else {
                        continue;
                    };
                    missing_logged = false;
                    match change {
                        Change::Listed(listed) => {
                            objects = listed
                                .into_iter()
                                .filter_map(|object| named(object, &resource))
                                .collect();
                        }
                        Change::Applied(object) => {
                            if let Some((name, value)) = named(object, &resource) {
                                objects.insert(name, value);
                            }
                        }
                        Change::Deleted(object) => {
                            if let Some(name) = &object.metadata.name {
                                objects.remove(name);
                            }
                        }
                    }
                    self.set(usable(objects.values()));
                    self.listed.send_replace(true);
                }
                Err(error) if is_not_served(&error) => {
                    relist.abandon();
                    // As for mutators: only a list that answers 404 says
                    // there are none; a watch that cannot restart after a
                    // list keeps what the list and the events since left
                    // (a passing 404 takes nothing out of force).
                    let listing_failed = matches!(error, watcher::Error::InitialListFailed(_));
                    if listing_failed {
                        objects.clear();
                    }
                    if !missing_logged {
                        tracing::warn!(
                            crd = "providers.externaldata.gatekeeper.sh",
                            "the Provider CRD is not installed: no external data providers (externalData mutators fail per their failurePolicy) until it is"
                        );
                        missing_logged = true;
                    }
                    if listing_failed {
                        self.set(Vec::new());
                    }
                    self.listed.send_replace(true);
                }
                Err(error) => {
                    tracing::warn!(%error, "watching Providers; retrying");
                    self.listed.send_replace(true);
                }
            }
        }
    }

    /// Puts `providers` in force, leaving out those whose client cannot be
    /// built.
    fn set(&self, mut providers: Vec<Provider>) {
        let names = |providers: &[Provider]| -> Vec<String> {
            providers.iter().map(|p| p.name().to_string()).collect()
        };
        loop {
            match self.feed.set_providers(&providers) {
                Ok(()) => {
                    tracing::debug!(providers = ?names(&providers), "external data providers");
                    return;
                }
                Err(errors) => {
                    for error in &errors {
                        tracing::error!(%error, "external data provider left out");
                    }
                    let before = providers.len();
                    providers.retain(|p| errors.iter().all(|e| e.name != p.name()));
                    if providers.len() == before {
                        // Refused without naming one of them: nothing to
                        // leave out, so the providers in force stay.
                        return;
                    }
                }
            }
        }
    }
}

/// A Provider object's name and its value as the loader reads it.
fn named(object: DynamicObject, resource: &ApiResource) -> Option<(String, Value)> {
    let name = object.metadata.name.clone()?;
    Some((name, to_value(object, resource)?))
}

/// The Providers among `objects` that Gatekeeper would accept; the others
/// are logged.
fn usable<'a>(objects: impl Iterator<Item = &'a Value>) -> Vec<Provider> {
    objects
        .filter_map(|value| match parse_provider(value) {
            Ok(provider) => Some(provider),
            Err(error) => {
                tracing::error!(%error, "external data provider left out");
                None
            }
        })
        .collect()
}
