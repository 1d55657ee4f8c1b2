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
use sartor_webhook::{Lookup, Namespaces};
use serde_json::Value;
use tokio::sync::watch;

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

struct Inner {
    client: Client,
    by_name: RwLock<HashMap<String, Arc<Value>>>,
    /// Names fetched directly, and when: each is fetched once per [`MISS_TTL`].
    fetched: Mutex<HashMap<String, Instant>>,
    listed: watch::Sender<bool>,
}

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
                fetched: Mutex::new(HashMap::new()),
                listed: watch::channel(false).0,
            }),
        }
    }

    /// Turns `true` once the first full list has been loaded.
    pub fn listed(&self) -> watch::Receiver<bool> {
        self.inner.listed.subscribe()
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
        let mut relist: Option<HashMap<String, Arc<Value>>> = None;
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Init) => relist = Some(HashMap::new()),
                Ok(watcher::Event::InitApply(namespace)) => {
                    if let (Some(relist), Some((name, value))) = (&mut relist, entry(&namespace)) {
                        relist.insert(name, value);
                    }
                }
                Ok(watcher::Event::InitDone) => {
                    if let Some(relist) = relist.take() {
                        tracing::debug!(namespaces = relist.len(), "namespaces listed");
                        *write(&self.inner.by_name) = relist;
                    }
                    self.inner.listed.send_replace(true);
                }
                Ok(watcher::Event::Apply(namespace)) => {
                    if let Some((name, value)) = entry(&namespace) {
                        write(&self.inner.by_name).insert(name, value);
                    }
                }
                Ok(watcher::Event::Delete(namespace)) => {
                    if let Some(name) = &namespace.metadata.name {
                        write(&self.inner.by_name).remove(name);
                    }
                }
                Err(error) => tracing::warn!(%error, "watching namespaces"),
            }
        }
    }

    /// Fetches `name` from the API server, at most once per [`MISS_TTL`],
    /// within [`FETCH_TIMEOUT`].
    async fn fetch_from_server(&self, name: &str) -> Option<Arc<Value>> {
        {
            let mut fetched = lock(&self.inner.fetched);
            let now = Instant::now();
            fetched.retain(|_, at| now.duration_since(*at) < MISS_TTL);
            if fetched.contains_key(name) {
                return None;
            }
            fetched.insert(name.to_string(), now);
        }
        let api: Api<Namespace> = Api::all(self.inner.client.clone());
        match tokio::time::timeout(FETCH_TIMEOUT, api.get_opt(name)).await {
            Ok(Ok(Some(namespace))) => {
                let (name, value) = entry(&namespace)?;
                write(&self.inner.by_name).insert(name, value.clone());
                Some(value)
            }
            Ok(Ok(None)) => None,
            Ok(Err(error)) => {
                tracing::warn!(namespace = name, %error, "fetching a namespace missing from the cache");
                None
            }
            Err(_) => {
                tracing::warn!(
                    namespace = name,
                    "fetching a namespace missing from the cache timed out"
                );
                None
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
