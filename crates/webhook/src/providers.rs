//! External data providers: the HTTPS calls behind `assign.externalData`.
//!
//! The engine says which keys each provider is asked for
//! ([`Mutation::asks`](sartor_engine::Mutation::asks)); [`Providers::ask`]
//! gets the answers: from the cache when fresh, else in **one** POST per
//! provider per admission (all its keys in one `ProviderRequest`), every
//! provider at once, within the admission's deadline and the provider's
//! `timeout`. As Gatekeeper does, it POSTs to `spec.url` exactly, speaks TLS
//! 1.3 only, trusts only the provider's `caBundle`, presents sartor's
//! serving certificate as its client certificate, and ignores the HTTP
//! status (the body decides).
//!
//! A slow or dead provider never stalls the server: calls are bounded per
//! provider ([`MAX_IN_FLIGHT`]; a call that finds no slot before the
//! deadline fails at once), every call ends by the deadline, and nothing
//! queues beyond that. Failures become the answer's error, which each
//! mutator's `failurePolicy` decides on.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use futures::future::join_all;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::client::ResolvesClientCert;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls::{ClientConfig, RootCertStore};
use sartor_api::{Provider, ProviderItem, ProviderRequest, ProviderResponse, ProviderSpec};
use sartor_engine::external::item_error;
use sartor_engine::{Answers, Asks, ProviderAnswers};
use sartor_state::{ProviderError, ProviderSet};
use serde_json::Value;
use tokio::sync::Semaphore;

use crate::metrics::{Metrics, ProviderCall};

/// Calls in flight to one provider at most; more fail at once (`busy`).
pub const MAX_IN_FLIGHT: usize = 64;

/// The longest a provider's answer may be.
pub const MAX_RESPONSE_BYTES: usize = 4 << 20;

/// Answers kept in the cache at most (over all providers).
pub const MAX_CACHED: usize = 100_000;

/// How long answers are reused by default: Gatekeeper's default for its
/// response cache (`--external-data-provider-response-cache-ttl`).
pub const DEFAULT_PROVIDER_CACHE_TTL: Duration = Duration::from_secs(180);

/// Used when a Provider's `timeout` is 0 or unset: Gatekeeper's default.
/// (Gatekeeper v3.23.1 documents this default, but its client then fails
/// such calls at once; see the README's compatibility section.)
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// The external data providers one server knows, their clients and the
/// cache of their answers.
pub struct Providers {
    clients: RwLock<HashMap<String, Arc<ProviderClient>>>,
    cache: Mutex<HashMap<(String, String), Cached>>,
    /// How long an answer is reused; zero turns the cache off.
    ttl: Duration,
    client_cert: Arc<ClientCertificate>,
    metrics: Arc<Metrics>,
}

/// The certificate presented to providers, set once the server has one
/// ([`Providers::present`]); none until then.
#[derive(Debug, Default)]
struct ClientCertificate(RwLock<Option<Arc<dyn ResolvesClientCert>>>);

/// The providers in force, as the published state sets them.
impl ProviderSet for Providers {
    fn set(&self, providers: &[Provider]) -> Result<(), Vec<ProviderError>> {
        Providers::set(self, providers)
    }
}

/// One provider's client.
struct ProviderClient {
    spec: ProviderSpec,
    uri: hyper::Uri,
    http: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    permits: Semaphore,
}

/// A cached answer for one key: its value or its error.
struct Cached {
    at: Instant,
    answer: Result<Value, String>,
}

impl std::fmt::Debug for Providers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Providers")
            .field("names", &self.names())
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

// === impl Providers ===

impl Providers {
    /// No providers yet; answers are cached for `ttl` (zero: never).
    pub fn new(ttl: Duration, metrics: Arc<Metrics>) -> Providers {
        Providers {
            clients: RwLock::new(HashMap::new()),
            cache: Mutex::new(HashMap::new()),
            ttl,
            client_cert: Arc::new(ClientCertificate::default()),
            metrics,
        }
    }

    /// Presents `certificate` (sartor's serving certificate, followed as it
    /// rotates) to providers from now on, as Gatekeeper presents its
    /// webhook's.
    pub fn present(&self, certificate: Arc<dyn ResolvesClientCert>) {
        match self.client_cert.0.write() {
            Ok(mut current) => *current = Some(certificate),
            Err(poisoned) => *poisoned.into_inner() = Some(certificate),
        }
    }

    /// Replaces the known providers with `providers`; a provider whose spec
    /// changed loses its cached answers.
    ///
    /// # Errors
    /// Every provider that cannot be turned into a client (an unusable CA
    /// bundle or url); then nothing changes.
    pub fn set(&self, providers: &[Provider]) -> Result<(), Vec<ProviderError>> {
        let mut errors = Vec::new();
        let old = self.read_clients().clone();
        let mut clients = HashMap::new();
        for provider in providers {
            let name = provider.name().to_string();
            match old.get(&name) {
                Some(client) if client.spec == provider.spec => {
                    clients.insert(name, client.clone());
                }
                _ => match self.client(provider) {
                    Ok(client) => {
                        clients.insert(name, Arc::new(client));
                    }
                    Err(reason) => errors.push(ProviderError { name, reason }),
                },
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let kept: BTreeSet<String> = clients
            .iter()
            .filter(|(name, client)| old.get(*name).is_some_and(|o| Arc::ptr_eq(o, client)))
            .map(|(name, _)| name.clone())
            .collect();
        self.lock_cache()
            .retain(|(provider, _), _| kept.contains(provider));
        match self.clients.write() {
            Ok(mut current) => *current = clients,
            Err(poisoned) => *poisoned.into_inner() = clients,
        }
        Ok(())
    }

    /// The names of the known providers, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.read_clients().keys().cloned().collect();
        names.sort();
        names
    }

    /// The answers to `asks`: cached ones, and one call per provider for
    /// the rest, all providers at once, each call ending by `deadline`.
    pub async fn ask(&self, asks: &Asks, deadline: Instant) -> Answers {
        let calls = asks.iter().map(|(provider, keys)| async move {
            (
                provider.as_str(),
                self.ask_one(provider, keys, deadline).await,
            )
        });
        let mut answers = Answers::new();
        for (provider, result) in join_all(calls).await {
            match result {
                Ok(response) => answers.response(provider, &response),
                Err(reason) => answers.failed(provider, &reason),
            }
        }
        answers
    }

    /// One provider's answer to `keys`, cached items and called ones in one
    /// response; or why the provider could not be asked (Gatekeeper's
    /// messages).
    async fn ask_one(
        &self,
        provider: &str,
        keys: &BTreeSet<String>,
        deadline: Instant,
    ) -> Result<ProviderResponse, String> {
        let Some(client) = self.read_clients().get(provider).cloned() else {
            return Err(format!(
                "failed to find external data provider {provider} in responses"
            ));
        };
        let mut response = ProviderResponse::default();
        response.response.idempotent = true;
        let mut missing = Vec::new();
        {
            let cache = self.lock_cache();
            let now = Instant::now();
            for key in keys {
                match cache.get(&(provider.to_string(), key.clone())) {
                    Some(cached) if now.duration_since(cached.at) < self.ttl => {
                        response.response.items.push(item(key, &cached.answer));
                    }
                    _ => missing.push(key.clone()),
                }
            }
        }
        let hits = keys.len() - missing.len();
        self.metrics
            .record_provider_cache(provider, hits as u64, missing.len() as u64);
        if missing.is_empty() {
            return Ok(response);
        }
        let started = Instant::now();
        let called = client.call(provider, missing, deadline).await;
        let outcome = match &called {
            Ok(r) if r.response.refusal().is_some() => ProviderCall::Invalid,
            Ok(_) => ProviderCall::Ok,
            Err((outcome, _)) => *outcome,
        };
        self.metrics
            .record_provider_call(provider, outcome, started.elapsed());
        let called = called.map_err(|(_, reason)| reason)?;
        if outcome == ProviderCall::Ok && !self.ttl.is_zero() {
            self.remember(provider, &called.response.items);
        }
        response.api_version = called.api_version;
        response.kind = called.kind;
        response.response.idempotent = called.response.idempotent;
        response.response.system_error = called.response.system_error;
        response.response.items.extend(called.response.items);
        Ok(response)
    }

    /// Caches every item of a valid response, errors included (as
    /// Gatekeeper's cache for validation does); a full cache first drops
    /// what has expired, and takes nothing more while still full.
    fn remember(&self, provider: &str, items: &[ProviderItem]) {
        let mut cache = self.lock_cache();
        let now = Instant::now();
        if cache.len() + items.len() > MAX_CACHED {
            cache.retain(|_, cached| now.duration_since(cached.at) < self.ttl);
        }
        for item in items {
            if cache.len() >= MAX_CACHED {
                break;
            }
            let answer = if item.error.is_empty() {
                Ok(item.value.clone().unwrap_or(Value::Null))
            } else {
                Err(item.error.clone())
            };
            cache.insert(
                (provider.to_string(), item.key.clone()),
                Cached { at: now, answer },
            );
        }
    }

    /// A client for `provider`: TLS 1.3, its CA bundle alone, sartor's
    /// certificate as the client's.
    fn client(&self, provider: &Provider) -> Result<ProviderClient, String> {
        let uri: hyper::Uri = provider
            .spec
            .url
            .parse()
            .map_err(|error| format!("spec.url: {error}"))?;
        let pem = provider.ca_pem()?;
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|error| format!("failed to parse caBundle: {error}"))?;
            roots
                .add(cert)
                .map_err(|error| format!("failed to parse caBundle: {error}"))?;
        }
        if roots.is_empty() {
            return Err("bad caBundle".to_string());
        }
        let crypto = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(crypto)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|error| error.to_string())?
            .with_root_certificates(roots);
        let config = builder.with_client_cert_resolver(self.client_cert.clone());
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(config)
            .https_only()
            .enable_http1()
            .build();
        let http = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_max_idle_per_host(MAX_IN_FLIGHT)
            .build(connector);
        Ok(ProviderClient {
            spec: provider.spec.clone(),
            uri,
            http,
            permits: Semaphore::new(MAX_IN_FLIGHT),
        })
    }

    fn read_clients(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<ProviderClient>>> {
        match self.clients.read() {
            Ok(clients) => clients,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Cached>> {
        match self.cache.lock() {
            Ok(cache) => cache,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// A cached answer as the item a provider would have sent.
fn item(key: &str, answer: &Result<Value, String>) -> ProviderItem {
    match answer {
        Ok(value) => ProviderItem {
            key: key.to_string(),
            value: Some(value.clone()),
            error: String::new(),
        },
        Err(error) => ProviderItem {
            key: key.to_string(),
            value: None,
            error: error.clone(),
        },
    }
}

/// The cache's fresh answers, as the engine reads answers: an admission
/// whose keys are all cached is mutated in one run, without a call.
pub struct CachedAnswers<'a>(&'a Providers);

impl ProviderAnswers for CachedAnswers<'_> {
    fn answer(&self, provider: &str, key: &str) -> Option<Result<Value, String>> {
        let providers = self.0;
        if providers.ttl.is_zero() {
            return None;
        }
        let cache = providers.lock_cache();
        let cached = cache.get(&(provider.to_string(), key.to_string()))?;
        if cached.at.elapsed() >= providers.ttl {
            return None;
        }
        Some(
            cached
                .answer
                .clone()
                .map_err(|error| item_error(provider, &error)),
        )
    }
}

impl Providers {
    /// The cache's fresh answers, for a first run of the engine.
    pub fn cached(&self) -> CachedAnswers<'_> {
        CachedAnswers(self)
    }

    /// Counts `asks` as answered from the cache alone.
    pub fn record_cache_hits(&self, asks: &Asks) {
        for (provider, keys) in asks {
            self.metrics
                .record_provider_cache(provider, keys.len() as u64, 0);
        }
    }
}

// === impl ClientCertificate ===

impl ClientCertificate {
    fn current(&self) -> Option<Arc<dyn ResolvesClientCert>> {
        match self.0.read() {
            Ok(current) => current.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

impl ResolvesClientCert for ClientCertificate {
    fn resolve(
        &self,
        root_hint_subjects: &[&[u8]],
        sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        self.current()?.resolve(root_hint_subjects, sigschemes)
    }

    fn has_certs(&self) -> bool {
        self.current().is_some_and(|c| c.has_certs())
    }
}

// === impl ProviderClient ===

impl ProviderClient {
    /// POSTs one `ProviderRequest` for `keys` and reads the answer, by
    /// `deadline` and within the provider's timeout.
    async fn call(
        &self,
        provider: &str,
        keys: Vec<String>,
        deadline: Instant,
    ) -> Result<ProviderResponse, (ProviderCall, String)> {
        let fail = |outcome: ProviderCall, reason: String| {
            (
                outcome,
                format!("failed to send external data request to provider {provider}: {reason}"),
            )
        };
        let timeout = match u64::try_from(self.spec.timeout) {
            Ok(seconds) if seconds > 0 => Duration::from_secs(seconds),
            _ => DEFAULT_TIMEOUT,
        };
        let deadline = deadline.min(Instant::now() + timeout);
        let budget = deadline.saturating_duration_since(Instant::now());
        let deadline = tokio::time::Instant::from_std(deadline);
        let Ok(Ok(_permit)) = tokio::time::timeout_at(deadline, self.permits.acquire()).await
        else {
            return Err(fail(
                ProviderCall::Busy,
                format!("{MAX_IN_FLIGHT} calls already in flight and none ended in time"),
            ));
        };
        let body = serde_json::to_vec(&ProviderRequest::new(keys)).map_err(|error| {
            fail(
                ProviderCall::Error,
                format!("failed to marshal external data request: {error}"),
            )
        })?;
        let request = hyper::Request::post(self.uri.clone())
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|error| {
                fail(
                    ProviderCall::Error,
                    format!("failed to create external data request: {error}"),
                )
            })?;
        let exchange = async {
            let response = self.http.request(request).await.map_err(|error| {
                let mut message = error.to_string();
                let mut source = std::error::Error::source(&error);
                while let Some(cause) = source {
                    message.push_str(&format!(": {cause}"));
                    source = cause.source();
                }
                fail(
                    ProviderCall::Error,
                    format!("failed to send external data request: {message}"),
                )
            })?;
            let body = Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
                .collect()
                .await
                .map_err(|error| {
                    fail(
                        ProviderCall::Error,
                        format!("failed to read external data response: {error}"),
                    )
                })?
                .to_bytes();
            serde_json::from_slice::<ProviderResponse>(&body).map_err(|error| {
                fail(
                    ProviderCall::Error,
                    format!("failed to unmarshal external data response: {error}"),
                )
            })
        };
        match tokio::time::timeout_at(deadline, exchange).await {
            Ok(result) => result,
            Err(_) => Err(fail(
                ProviderCall::Timeout,
                format!(
                    "no answer within {} ms (the provider's timeout of {} s, or what was left of the admission's deadline)",
                    budget.as_millis(),
                    timeout.as_secs()
                ),
            )),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use base64::Engine as _;
    use serde_json::json;

    use super::*;
    use sartor_controller::SelfSigned;

    fn provider(name: &str, url: &str, ca_pem: &str) -> Provider {
        sartor_api::parse_provider(&json!({
            "apiVersion": "externaldata.gatekeeper.sh/v1beta1",
            "kind": "Provider",
            "metadata": {"name": name},
            "spec": {
                "url": url,
                "timeout": 1,
                "caBundle": base64::engine::general_purpose::STANDARD.encode(ca_pem),
            },
        }))
        .unwrap()
    }

    fn ca() -> String {
        SelfSigned::generate("test", &["localhost"]).unwrap().ca_pem
    }

    #[tokio::test]
    async fn a_set_with_an_unusable_provider_changes_nothing() {
        let providers = Providers::new(Duration::from_secs(60), Arc::new(Metrics::new()));
        providers
            .set(&[provider("a", "https://127.0.0.1:1/", &ca())])
            .unwrap();
        let broken = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let errors = providers
            .set(&[
                provider("b", "https://127.0.0.1:1/", &ca()),
                provider("c", "https://127.0.0.1:1/", broken),
            ])
            .unwrap_err();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].name, "c");
        assert!(
            errors[0].reason.starts_with("failed to parse caBundle: "),
            "{}",
            errors[0].reason
        );
        assert_eq!(providers.names(), ["a"]);
    }

    #[tokio::test]
    async fn a_changed_provider_forgets_its_answers_and_an_unknown_one_is_named() {
        let providers = Providers::new(Duration::from_secs(60), Arc::new(Metrics::new()));
        let ca = ca();
        providers
            .set(&[
                provider("a", "https://127.0.0.1:1/", &ca),
                provider("b", "https://127.0.0.1:1/", &ca),
            ])
            .unwrap();
        let item = |key: &str| ProviderItem {
            key: key.to_string(),
            value: Some(json!("v")),
            error: String::new(),
        };
        providers.remember("a", &[item("k")]);
        providers.remember("b", &[item("k")]);
        assert_eq!(providers.cached().answer("a", "k"), Some(Ok(json!("v"))));
        providers
            .set(&[
                provider("a", "https://127.0.0.1:2/", &ca),
                provider("b", "https://127.0.0.1:1/", &ca),
            ])
            .unwrap();
        assert_eq!(providers.cached().answer("a", "k"), None);
        assert_eq!(providers.cached().answer("b", "k"), Some(Ok(json!("v"))));

        let asks: Asks = [("gone".to_string(), ["k".to_string()].into())].into();
        let answers = providers.ask(&asks, Instant::now()).await;
        assert_eq!(
            answers.answer("gone", "k"),
            Some(Err(
                "failed to find external data provider gone in responses".to_string()
            ))
        );
    }

    #[tokio::test]
    async fn a_call_past_its_deadline_fails_at_once() {
        let providers = Providers::new(Duration::ZERO, Arc::new(Metrics::new()));
        // A listener that accepts and never answers.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("https://{}/", listener.local_addr().unwrap());
        let mut slow = provider("slow", &url, &ca());
        // Its own timeout is far off: the admission's deadline ends the call.
        slow.spec.timeout = 60;
        providers.set(&[slow]).unwrap();
        let asks: Asks = [("slow".to_string(), ["k".to_string()].into())].into();
        let started = Instant::now();
        let answers = providers
            .ask(&asks, started + Duration::from_millis(200))
            .await;
        assert!(started.elapsed() < Duration::from_secs(30));
        let error = answers.answer("slow", "k").unwrap().unwrap_err();
        assert!(
            error.starts_with(
                "failed to send external data request to provider slow: no answer within "
            ),
            "{error}"
        );
        drop(listener);
    }
}
