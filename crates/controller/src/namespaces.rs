//! The webhook's Namespace objects, from a watch of the cluster's Namespaces
//! kept in memory, so an admission request never waits on the API server.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client};
use sartor_state::{Lookup, Namespaces};
use serde_json::Value;
use tokio::sync::{OnceCell, broadcast, watch};

use crate::relist::{Change, Relist};

/// How long a direct fetch may take on the request path (the mutating
/// webhook's own timeout is 1 s).
const FETCH_TIMEOUT: Duration = Duration::from_millis(500);
/// A namespace fetched directly and not found is not fetched again for this long.
const MISS_TTL: Duration = Duration::from_secs(30);

/// Namespaces by name, fed by a watch; a namespace not in the cache yet (one
/// created a moment before an object in it) is fetched once, directly, as
/// Gatekeeper does.
#[derive(Clone)]
pub struct NamespaceCache {
    inner: Arc<Inner>,
}

/// One direct fetch of a Namespace: its answer, once there.
type Fetch = OnceCell<Option<Arc<Value>>>;

struct Inner {
    client: Client,
    by_name: RwLock<HashMap<String, Arc<Value>>>,
    /// Names a direct fetch found missing, and when: not fetched again for
    /// [`MISS_TTL`] (an error or a timeout is not remembered).
    missing: Mutex<HashMap<String, Instant>>,
    /// Fetches under way, by name: requests that arrive together (a Namespace
    /// and the objects in it, from one `kubectl apply`) share one.
    fetching: Mutex<HashMap<String, Arc<Fetch>>>,
    listed: watch::Sender<bool>,
    /// What changed of Namespaces held.
    changed: broadcast::Sender<NamespaceChange>,
}

/// A change to a Namespace the cache held, as it matters to what the
/// mutators do to the objects in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespaceChange {
    /// Its labels or annotations changed (what namespaceSelectors and
    /// values from the Namespace read).
    Described(String),
    /// It is gone.
    Deleted(String),
}

/// How many changed Namespaces a slow listener of
/// [`NamespaceCache::changes`] may fall behind by before it is told it lagged.
const CHANGES_KEPT: usize = 256;

impl std::fmt::Debug for NamespaceCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamespaceCache")
            .field("namespaces", &self.len())
            .field("listed", &*self.inner.listed.borrow())
            .finish_non_exhaustive()
    }
}

impl NamespaceCache {
    /// An empty cache; [`NamespaceCache::run`] fills it.
    pub fn new(client: Client) -> NamespaceCache {
        NamespaceCache {
            inner: Arc::new(Inner {
                client,
                by_name: RwLock::new(HashMap::new()),
                missing: Mutex::new(HashMap::new()),
                fetching: Mutex::new(HashMap::new()),
                listed: watch::channel(false).0,
                changed: broadcast::channel(CHANGES_KEPT).0,
            }),
        }
    }

    /// Turns `true` once the first full list has been loaded.
    pub fn listed(&self) -> watch::Receiver<bool> {
        self.inner.listed.subscribe()
    }

    /// Each Namespace held whose labels or annotations change from now on,
    /// or that is deleted, by a watch event or found by a relist. A
    /// Namespace first seen is not a change: nothing was read of it before.
    pub fn changes(&self) -> broadcast::Receiver<NamespaceChange> {
        self.inner.changed.subscribe()
    }

    /// How many namespaces it holds.
    pub fn len(&self) -> usize {
        read(&self.inner.by_name).len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Watches Namespaces and keeps the cache current; runs until dropped.
    pub async fn run(self) {
        let api: Api<Namespace> = Api::all(self.inner.client.clone());
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut relist = Relist::default();
        while let Some(event) = events.next().await {
            let change = match event {
                Ok(event) => relist.fold(event),
                Err(error) => {
                    relist.abandon();
                    tracing::warn!(%error, "watching namespaces");
                    None
                }
            };
            match change {
                None => {}
                Some(Change::Listed(namespaces)) => {
                    let listed: HashMap<String, Arc<Value>> =
                        namespaces.iter().filter_map(entry).collect();
                    tracing::debug!(namespaces = listed.len(), "namespaces listed");
                    let before = std::mem::replace(&mut *write(&self.inner.by_name), listed);
                    let changes: Vec<NamespaceChange> = {
                        let now = read(&self.inner.by_name);
                        before
                            .into_iter()
                            .filter_map(|(name, namespace)| match now.get(&name) {
                                None => Some(NamespaceChange::Deleted(name)),
                                Some(now) if !described_alike(&namespace, now) => {
                                    Some(NamespaceChange::Described(name))
                                }
                                Some(_) => None,
                            })
                            .collect()
                    };
                    for change in changes {
                        self.tell(change);
                    }
                    self.inner.listed.send_replace(true);
                }
                Some(Change::Applied(namespace)) => {
                    if let Some((name, value)) = entry(&namespace) {
                        let before = write(&self.inner.by_name).insert(name.clone(), value.clone());
                        if before.is_some_and(|before| !described_alike(&before, &value)) {
                            self.tell(NamespaceChange::Described(name));
                        }
                    }
                }
                Some(Change::Deleted(namespace)) => {
                    if let Some(name) = namespace.metadata.name {
                        let held = write(&self.inner.by_name).remove(&name).is_some();
                        if held {
                            self.tell(NamespaceChange::Deleted(name));
                        }
                    }
                }
            }
        }
    }

    /// Tells the listeners of [`NamespaceCache::changes`] (none: nobody
    /// asked).
    fn tell(&self, change: NamespaceChange) {
        let _ = self.inner.changed.send(change);
    }

    /// Fetches `name` from the API server within [`FETCH_TIMEOUT`]: one
    /// fetch per name at a time, shared by every request that asks meanwhile;
    /// a name found missing is not fetched again for [`MISS_TTL`].
    async fn fetch_from_server(&self, name: &str) -> Option<Arc<Value>> {
        let cell = {
            // Under the fetching lock, so a request arriving just as a fetch
            // ends (its cell removed) sees what that fetch found rather than
            // fetching again: a fetch records its answer before it removes
            // its cell.
            let mut fetching = lock(&self.inner.fetching);
            if let Some(found) = read(&self.inner.by_name).get(name) {
                return Some(found.clone());
            }
            let mut missing = lock(&self.inner.missing);
            let now = Instant::now();
            missing.retain(|_, at| now.duration_since(*at) < MISS_TTL);
            if missing.contains_key(name) {
                return None;
            }
            fetching.entry(name.to_string()).or_default().clone()
        };
        let found = cell
            .get_or_init(|| async {
                let found = self.get(name).await;
                match &found {
                    Ok(Some(value)) => {
                        write(&self.inner.by_name).insert(name.to_string(), value.clone());
                    }
                    Ok(None) => {
                        lock(&self.inner.missing).insert(name.to_string(), Instant::now());
                    }
                    Err(()) => {}
                }
                found.ok().flatten()
            })
            .await
            .clone();
        let mut fetching = lock(&self.inner.fetching);
        if fetching.get(name).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
            fetching.remove(name);
        }
        found
    }

    /// One GET of `name`: the Namespace, `None` when it does not exist, or
    /// `Err` (logged) when the API server failed or did not answer in time.
    async fn get(&self, name: &str) -> Result<Option<Arc<Value>>, ()> {
        let api: Api<Namespace> = Api::all(self.inner.client.clone());
        match tokio::time::timeout(FETCH_TIMEOUT, api.get_opt(name)).await {
            Ok(Ok(Some(namespace))) => Ok(entry(&namespace).map(|(_, value)| value)),
            Ok(Ok(None)) => Ok(None),
            Ok(Err(error)) => {
                tracing::warn!(namespace = name, %error, "fetching a namespace missing from the cache");
                Err(())
            }
            Err(_) => {
                tracing::warn!(
                    namespace = name,
                    "fetching a namespace missing from the cache timed out"
                );
                Err(())
            }
        }
    }
}

impl Namespaces for NamespaceCache {
    fn lookup(&self, name: &str) -> Lookup {
        match read(&self.inner.by_name).get(name) {
            Some(namespace) => Lookup::Found(namespace.clone()),
            None => Lookup::Unknown,
        }
    }

    /// A namespace the watch has not delivered yet (one created a moment
    /// before an object in it) is fetched once, directly, as Gatekeeper does;
    /// the request waits for it asynchronously, never blocking a thread.
    fn fetch<'a>(&'a self, name: &'a str) -> Pin<Box<dyn Future<Output = Lookup> + Send + 'a>> {
        Box::pin(async move {
            if let Lookup::Found(namespace) = self.lookup(name) {
                return Lookup::Found(namespace);
            }
            match self.fetch_from_server(name).await {
                Some(namespace) => Lookup::Found(namespace),
                None => Lookup::Unknown,
            }
        })
    }
}

/// Whether two versions of a Namespace have the same labels and
/// annotations: all that a mutator reads of it.
fn described_alike(before: &Value, after: &Value) -> bool {
    ["/metadata/labels", "/metadata/annotations"]
        .iter()
        .all(|field| before.pointer(field) == after.pointer(field))
}

/// The cache entry of a Namespace: its name and the object the engine matches
/// against (managed fields dropped).
fn entry(namespace: &Namespace) -> Option<(String, Arc<Value>)> {
    let name = namespace.metadata.name.clone()?;
    let mut namespace = namespace.clone();
    namespace.metadata.managed_fields = None;
    // k8s-openapi writes apiVersion and kind itself.
    let value = serde_json::to_value(&namespace).ok()?;
    Some((name, Arc::new(value)))
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn lock<T>(lock: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    lock.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
