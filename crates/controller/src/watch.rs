//! Watches the mutator kinds, keeps the [`MutatorSet`] current, publishes a
//! new snapshot into the webhook on every change and queues status entries.
//!
//! A kind whose CRD is not installed (listing it answers 404) has no
//! objects, so the set is exact without it: the kind counts as listed with
//! none, the webhook is told the CRD is missing (`/readyz` names it, a gauge
//! is 0) and the watcher keeps retrying; once a list succeeds the kind's
//! objects arrive as usual.

use crate::api_errors::is_not_found;
use futures::StreamExt as _;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client};
use sartor_api::{GATEKEEPER_GROUP, MutatorKind};
use sartor_state::MutatorCrd;
use serde_json::Value;
use tokio::sync::watch;

use crate::feed::Feed;
use crate::mutators::{Group, MutatorSet};
use crate::relist::{Change, Relist};
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

/// How to install sartor's CRDs, for the log line of one that is missing.
const INSTALL_SARTOR: &str =
    "kubectl apply --server-side -k manifests/ (or: kubectl apply --server-side -f crds/)";

/// The same for Gatekeeper's, which sartor only reads.
const INSTALL_GATEKEEPER: &str = "installed with Gatekeeper (its mutation CRDs)";

impl Watched {
    /// The name of the CRD that defines it: `PLURAL.GROUP`.
    pub fn crd(&self) -> String {
        format!("{}.{}", self.resource.plural, self.resource.group)
    }

    fn install_hint(&self) -> &'static str {
        match self.group {
            Group::Sartor => INSTALL_SARTOR,
            Group::Gatekeeper => INSTALL_GATEKEEPER,
        }
    }
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
            Err(error) if is_not_found(&error) => {}
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
    /// Where snapshots and the CRDs' facts go.
    pub feed: Feed,
    /// The replica's name (its status entries' id).
    pub pod: String,
    /// The kinds to watch (see [`watched`]).
    pub watched: Vec<Watched>,
}

impl MutatorWatch {
    /// Runs until dropped. Publishes the first snapshot only once every
    /// watched kind has been listed (or found not installed) and
    /// `namespaces_listed` is true, so the replica never admits with a
    /// partial set.
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
        let mut kinds: Vec<KindState> = self.watched.iter().map(|_| KindState::default()).collect();
        let mut published = false;
        let mut failed = Vec::new();
        // Which kinds were missing when the webhook was last told.
        let mut reported_missing: Option<Vec<bool>> = None;
        loop {
            let changed = tokio::select! {
                event = events.next() => {
                    let Some((index, event)) = event else { return };
                    let (Some(watched), Some(kind)) =
                        (self.watched.get(index), kinds.get_mut(index))
                    else {
                        continue;
                    };
                    kind.apply(&mut set, watched, event).changed
                }
                changed = namespaces_listed.changed(), if !published => {
                    if changed.is_err() {
                        // The namespace cache is gone: nothing more will be listed.
                        return;
                    }
                    false
                }
            };
            if !kinds.iter().all(|kind| kind.listed) || !*namespaces_listed.borrow() {
                continue;
            }
            // Told before the snapshot is published: `/readyz` turns 200
            // already naming the CRDs that are missing.
            let missing: Vec<bool> = kinds.iter().map(|kind| kind.missing).collect();
            // With no kind of sartor's served at all the install (or the
            // API server's address) is wrong: a replica that turned ready
            // would silently enforce nothing.
            let hold = !published && none_of_sartors_served(&self.watched, &missing);
            if reported_missing.as_ref() != Some(&missing) {
                self.feed.set_crds(crds(&self.watched, &missing));
                if hold {
                    tracing::warn!(
                        install = INSTALL_SARTOR,
                        "none of sartor's mutator CRDs is served; not ready until one is"
                    );
                }
                reported_missing = Some(missing);
            }
            if hold {
                continue;
            }
            // A mutator that does not compile changes no System, but the
            // controller's metrics count it.
            let now_failed = set.failed();
            if changed || !published || now_failed != failed {
                failed = now_failed;
                let snapshot = set.snapshot();
                let mutators = snapshot.system.len();
                let conflicted = snapshot.system.conflicted().len();
                let failed = snapshot.errors.len();
                // Published before it is logged: whoever reads the log finds it in force.
                self.feed.publish(snapshot);
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

/// Whether every one of sartor's own kinds is missing (`missing` in the
/// order of `watched`).
fn none_of_sartors_served(watched: &[Watched], missing: &[bool]) -> bool {
    watched
        .iter()
        .zip(missing)
        .filter(|(watched, _)| watched.group == Group::Sartor)
        .all(|(_, missing)| *missing)
}

/// Each watched kind's CRD, installed unless `missing` says otherwise (same order).
fn crds(watched: &[Watched], missing: &[bool]) -> Vec<MutatorCrd> {
    watched
        .iter()
        .zip(missing)
        .map(|(watched, missing)| MutatorCrd {
            group: watched.group.as_str(),
            kind: watched.kind,
            name: watched.crd(),
            installed: !missing,
        })
        .collect()
}

/// What the watch loop knows of one watched kind.
#[derive(Debug, Default)]
struct KindState {
    /// The list in progress (from `Init` to `InitDone`).
    relist: Relist<Vec<DynamicObject>>,
    /// Listed at least once, or found not installed: the set holds exactly
    /// the kind's objects.
    listed: bool,
    /// The last list or watch answered 404: the CRD is not installed.
    missing: bool,
}

/// What one event did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Applied {
    /// Whether the System changed.
    changed: bool,
    /// How the kind's CRD was seen to change, if it was.
    crd: Option<CrdChange>,
}

/// A change of a kind's CRD, each logged once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CrdChange {
    /// A 404 for a kind not known to be missing (`warn`).
    Missing,
    /// Another 404 for a kind already missing (`debug`).
    StillMissing,
    /// A missing kind was listed, or an object of it watched (`info`).
    Installed,
}

impl KindState {
    /// Applies one watch event of `watched` to `set`.
    fn apply(
        &mut self,
        set: &mut MutatorSet,
        watched: &Watched,
        event: Result<watcher::Event<DynamicObject>, watcher::Error>,
    ) -> Applied {
        let (group, kind) = (watched.group, watched.kind);
        // A list's objects are in force only once it is done.
        let served = matches!(
            event,
            Ok(watcher::Event::InitDone | watcher::Event::Apply(_) | watcher::Event::Delete(_))
        );
        let mut crd = None;
        if served && self.missing {
            self.missing = false;
            crd = Some(CrdChange::Installed);
        }
        let changed = match event {
            Ok(event) => match self.relist.fold(event) {
                None => false,
                Some(Change::Listed(objects)) => {
                    let objects: Vec<Value> = objects
                        .into_iter()
                        .filter_map(|object| to_value(object, &watched.resource))
                        .collect();
                    tracing::debug!(kind = %kind, group = group.as_str(), objects = objects.len(), "listed");
                    self.listed = true;
                    set.replace(group, kind, &objects)
                }
                Some(Change::Applied(object)) => match to_value(object, &watched.resource) {
                    Some(value) => set.apply(group, kind, &value),
                    None => false,
                },
                Some(Change::Deleted(object)) => match &object.metadata.name {
                    Some(name) => set.delete(group, kind, name),
                    None => false,
                },
            },
            Err(error) if is_not_served(&error) => {
                crd = Some(if self.missing {
                    CrdChange::StillMissing
                } else {
                    CrdChange::Missing
                });
                self.missing = true;
                self.relist.abandon();
                if matches!(error, watcher::Error::InitialListFailed(_)) {
                    // No CRD, no objects: the set is exact with none of this kind.
                    self.listed = true;
                    set.replace(group, kind, &[])
                } else {
                    // A watch that cannot restart after a list: the objects
                    // stay as the list and the events since left them (a
                    // CRD's deletion deletes its objects first, and their
                    // deletions arrive as events), so a passing 404 takes
                    // nothing out of force.
                    false
                }
            }
            Err(error) => {
                tracing::warn!(%error, kind = %kind, group = group.as_str(), "watching mutators");
                false
            }
        };
        if let Some(change) = crd {
            log_crd_change(watched, change);
        }
        Applied { changed, crd }
    }
}

fn log_crd_change(watched: &Watched, change: CrdChange) {
    let (kind, crd) = (watched.kind, watched.crd());
    match change {
        CrdChange::Missing => tracing::warn!(
            kind = %kind,
            crd = %crd,
            install = watched.install_hint(),
            "mutator CRD not installed; mutators of this kind are not enforced until it is"
        ),
        CrdChange::StillMissing => {
            tracing::debug!(kind = %kind, crd = %crd, "mutator CRD still not installed");
        }
        CrdChange::Installed => tracing::info!(kind = %kind, crd = %crd, "mutator CRD installed"),
    }
}

/// Whether listing or watching failed with 404: the API server does not serve
/// the kind (its CRD, or the whole group, is not installed).
pub(crate) fn is_not_served(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::InitialListFailed(error) | watcher::Error::WatchStartFailed(error) => {
            is_not_found(error)
        }
        _ => false,
    }
}

/// The object as the loader reads it, with its `apiVersion` and `kind`
/// (list items may lack them).
pub(crate) fn to_value(object: DynamicObject, resource: &ApiResource) -> Option<Value> {
    let mut value = serde_json::to_value(object).ok()?;
    let fields = value.as_object_mut()?;
    fields.insert(
        "apiVersion".into(),
        Value::from(resource.api_version.clone()),
    );
    fields.insert("kind".into(), Value::from(resource.kind.clone()));
    Some(value)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use kube::core::Status;
    use serde_json::json;

    use super::*;

    fn assign_image() -> Watched {
        Watched {
            group: Group::Sartor,
            kind: MutatorKind::AssignImage,
            resource: resource(MutatorKind::AssignImage),
        }
    }

    /// A kube-apiserver's answer for a resource it does not serve: a plain
    /// text body, which kube cannot parse as a `Status`.
    fn page_not_found() -> kube::Error {
        kube::Error::Api(
            Status::failure("404 page not found", "Failed to parse error data")
                .with_code(404)
                .boxed(),
        )
    }

    fn status(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Status::failure("injected", reason).with_code(code).boxed())
    }

    fn mirror() -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "mutations.sartor.dev/v1", "kind": "AssignImage",
            "metadata": {"name": "mirror"},
            "spec": {"applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
                     "location": "spec.containers[name: *].image",
                     "parameters": {"assignDomain": "mirror.example.com"}},
        }))
        .unwrap()
    }

    fn in_force(set: &MutatorSet) -> Vec<String> {
        set.snapshot()
            .system
            .mutators()
            .map(|m| m.id().to_string())
            .collect()
    }

    type Event = Result<watcher::Event<DynamicObject>, watcher::Error>;

    /// Applies `events` in order; what each did.
    fn feed(state: &mut KindState, set: &mut MutatorSet, events: Vec<Event>) -> Vec<Applied> {
        let watched = assign_image();
        events
            .into_iter()
            .map(|event| state.apply(set, &watched, event))
            .collect()
    }

    fn list(objects: Vec<DynamicObject>) -> Vec<Event> {
        let mut events = vec![Ok(watcher::Event::Init)];
        events.extend(
            objects
                .into_iter()
                .map(|o| Ok(watcher::Event::InitApply(o))),
        );
        events.push(Ok(watcher::Event::InitDone));
        events
    }

    const NOTHING: Applied = Applied {
        changed: false,
        crd: None,
    };

    #[test]
    fn a_plain_text_404_lists_the_kind_with_none_until_its_crd_is_installed() {
        let (mut state, mut set) = (KindState::default(), MutatorSet::new());
        let failed = || -> Vec<Event> {
            vec![
                Ok(watcher::Event::Init),
                Err(watcher::Error::InitialListFailed(page_not_found())),
            ]
        };
        assert_eq!(
            feed(&mut state, &mut set, failed()),
            [
                NOTHING,
                Applied {
                    changed: false,
                    crd: Some(CrdChange::Missing)
                }
            ]
        );
        assert!(state.listed && state.missing);
        // Each retry's 404 is no news.
        assert_eq!(
            feed(&mut state, &mut set, failed()),
            [
                NOTHING,
                Applied {
                    changed: false,
                    crd: Some(CrdChange::StillMissing)
                }
            ]
        );
        assert!(state.listed && state.missing);
        assert_eq!(in_force(&set), Vec::<String>::new());

        // The CRD is installed and the next list succeeds.
        let applied = feed(&mut state, &mut set, list(vec![mirror()]));
        assert_eq!(
            applied,
            [
                NOTHING,
                NOTHING,
                Applied {
                    changed: true,
                    crd: Some(CrdChange::Installed)
                },
            ]
        );
        assert!(state.listed && !state.missing);
        assert_eq!(in_force(&set), ["AssignImage mirror"]);
        // A later relist is no news either.
        assert_eq!(
            feed(&mut state, &mut set, list(vec![mirror()])),
            [NOTHING; 3]
        );
    }

    #[test]
    fn a_crd_removed_while_watched_is_reported_once_its_objects_are_deleted() {
        let (mut state, mut set) = (KindState::default(), MutatorSet::new());
        feed(&mut state, &mut set, list(vec![mirror()]));
        assert_eq!(in_force(&set), ["AssignImage mirror"]);
        // Deleting a CRD deletes its objects first: their deletions arrive,
        // then the watch cannot restart.
        let applied = feed(
            &mut state,
            &mut set,
            vec![
                Ok(watcher::Event::Delete(mirror())),
                Err(watcher::Error::WatchStartFailed(status(404, "NotFound"))),
            ],
        );
        assert_eq!(
            applied,
            [
                Applied {
                    changed: true,
                    crd: None
                },
                Applied {
                    changed: false,
                    crd: Some(CrdChange::Missing)
                }
            ]
        );
        assert!(state.missing);
        assert_eq!(in_force(&set), Vec::<String>::new());
        // The watch resumes: an object proves the kind is served again.
        let applied = feed(
            &mut state,
            &mut set,
            vec![Ok(watcher::Event::Apply(mirror()))],
        );
        assert_eq!(
            applied,
            [Applied {
                changed: true,
                crd: Some(CrdChange::Installed)
            }]
        );
        assert!(!state.missing);
    }

    #[test]
    fn a_passing_404_on_a_watch_takes_nothing_out_of_force() {
        let (mut state, mut set) = (KindState::default(), MutatorSet::new());
        feed(&mut state, &mut set, list(vec![mirror()]));
        let applied = feed(
            &mut state,
            &mut set,
            vec![Err(watcher::Error::WatchStartFailed(page_not_found()))],
        );
        assert_eq!(
            applied,
            [Applied {
                changed: false,
                crd: Some(CrdChange::Missing)
            }]
        );
        assert_eq!(in_force(&set), ["AssignImage mirror"]);
    }

    #[test]
    fn other_errors_leave_the_kind_unlisted() {
        let (mut state, mut set) = (KindState::default(), MutatorSet::new());
        let errors = vec![
            Ok(watcher::Event::Init),
            Err(watcher::Error::InitialListFailed(status(
                500,
                "InternalError",
            ))),
            Err(watcher::Error::InitialListFailed(status(403, "Forbidden"))),
            Err(watcher::Error::WatchError(
                Status::failure("gone", "Expired").with_code(410).boxed(),
            )),
        ];
        assert_eq!(feed(&mut state, &mut set, errors), [NOTHING; 4]);
        assert!(!state.listed && !state.missing);
    }

    #[test]
    fn crds_are_named_plural_dot_group() {
        let gatekeeper = Watched {
            group: Group::Gatekeeper,
            kind: MutatorKind::Assign,
            resource: ApiResource {
                group: GATEKEEPER_GROUP.to_string(),
                version: "v1".to_string(),
                api_version: format!("{GATEKEEPER_GROUP}/v1"),
                kind: "Assign".to_string(),
                plural: "assign".to_string(),
            },
        };
        assert_eq!(
            crds(&[assign_image(), gatekeeper], &[true, false]),
            [
                MutatorCrd {
                    group: "mutations.sartor.dev",
                    kind: MutatorKind::AssignImage,
                    name: "assignimage.mutations.sartor.dev".to_string(),
                    installed: false,
                },
                MutatorCrd {
                    group: "mutations.gatekeeper.sh",
                    kind: MutatorKind::Assign,
                    name: "assign.mutations.gatekeeper.sh".to_string(),
                    installed: true,
                },
            ]
        );
    }
}
