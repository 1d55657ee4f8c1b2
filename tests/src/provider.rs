//! A tag-to-digest external data provider for the end-to-end tests: a real
//! HTTPS server on 127.0.0.1 with its own CA, speaking Gatekeeper's
//! `ProviderRequest` / `ProviderResponse`, asking for a client certificate
//! signed by the CA it is given and recording what it was sent.
//!
//! What it answers for a key, like Gatekeeper's own test provider:
//! - `error_...`: the item error `<key>_invalid`;
//! - `..._systemError`: the whole response's `systemError: testing system error`;
//! - `slow...`: the answer, two seconds late;
//! - a key holding `@sha256:`: the key itself (idempotent);
//! - any other `repo:tag`: `repo@sha256:` and a digest made from the key.
//!
//! [`TestProvider::set_idempotent`] makes it declare its answers not
//! idempotent, which mutation refuses.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use serde_json::{Value, json};

use crate::cluster::Pki;

/// One request the provider received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The keys, in the order sent.
    pub keys: Vec<String>,
    /// DER of the client certificate presented, if any.
    pub client_certificate: Option<Vec<u8>>,
}

/// A running provider; stops when dropped.
pub struct TestProvider {
    addr: SocketAddr,
    ca_pem: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    idempotent: Arc<AtomicBool>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestProvider {
    /// Starts a provider on a free port of 127.0.0.1. With `client_ca_pem`,
    /// clients may present a certificate that CA signed (and one that it did
    /// not sign fails the handshake).
    ///
    /// # Errors
    /// What failed: certificates, the listener, the TLS configuration.
    pub fn start(client_ca_pem: Option<&str>) -> Result<TestProvider, String> {
        let pki = Pki::new().map_err(|e| e.to_string())?;
        let (cert, key) = pki
            .issue("test-provider", &[], &["127.0.0.1"], true)
            .map_err(|e| e.to_string())?;
        let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|e| e.to_string())?;
        let crypto = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(crypto.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?;
        let builder = match client_ca_pem {
            None => builder.with_no_client_auth(),
            Some(pem) => {
                let mut roots = RootCertStore::empty();
                for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                    roots
                        .add(cert.map_err(|e| e.to_string())?)
                        .map_err(|e| e.to_string())?;
                }
                let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), crypto)
                    .allow_unauthenticated()
                    .build()
                    .map_err(|e| e.to_string())?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(|e| e.to_string())?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let idempotent = Arc::new(AtomicBool::new(true));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let state = (seen.clone(), idempotent.clone());
        let thread = std::thread::Builder::new()
            .name("test-provider".to_string())
            .spawn(move || {
                let Ok(runtime) = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                else {
                    return;
                };
                runtime.block_on(serve(listener, acceptor, state, stopped));
            })
            .map_err(|e| e.to_string())?;
        Ok(TestProvider {
            addr,
            ca_pem: pki.ca_cert.clone(),
            seen,
            idempotent,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// `https://127.0.0.1:PORT/validate`.
    pub fn url(&self) -> String {
        format!("https://{}/validate", self.addr)
    }

    /// A Provider object for it, as Gatekeeper's docs write one.
    pub fn provider_yaml(&self, name: &str, timeout_seconds: u32) -> String {
        let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        format!(
            "apiVersion: externaldata.gatekeeper.sh/v1beta1\nkind: Provider\nmetadata:\n  name: {name}\n\
             spec:\n  url: {}\n  timeout: {timeout_seconds}\n  caBundle: {ca_bundle}\n",
            self.url()
        )
    }

    /// Every request received so far.
    pub fn seen(&self) -> Vec<Seen> {
        match self.seen.lock() {
            Ok(seen) => seen.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Whether its answers declare themselves idempotent (they do at first).
    pub fn set_idempotent(&self, idempotent: bool) {
        self.idempotent.store(idempotent, Ordering::SeqCst);
    }
}

impl Drop for TestProvider {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What the provider answers for `keys`.
pub fn answer(keys: &[String], idempotent: bool) -> Value {
    let mut items = Vec::new();
    let mut system_error = None;
    for key in keys {
        if key.ends_with("_systemError") {
            system_error = Some("testing system error");
        } else if key.starts_with("error_") {
            items.push(json!({"key": key, "error": format!("{key}_invalid")}));
        } else {
            items.push(json!({"key": key, "value": digest(key)}));
        }
    }
    let mut response = serde_json::Map::new();
    response.insert("idempotent".to_string(), json!(idempotent));
    response.insert("items".to_string(), json!(items));
    if let Some(error) = system_error {
        response.insert("systemError".to_string(), json!(error));
    }
    json!({
        "apiVersion": "externaldata.gatekeeper.sh/v1beta1",
        "kind": "ProviderResponse",
        "response": response,
    })
}

/// `repo@sha256:<64 hex>` for `repo:tag`; a digest reference stays as it is.
pub fn digest(key: &str) -> String {
    if key.contains("@sha256:") {
        return key.to_string();
    }
    let repository = match key.rsplit_once(':') {
        Some((repository, tag)) if !tag.contains('/') => repository,
        _ => key,
    };
    // FNV-1a, four rounds with different seeds: 64 hex digits.
    let hex: String = (0u64..4)
        .map(|round| {
            let mut hash = 0xcbf2_9ce4_8422_2325_u64 ^ round;
            for byte in key.bytes() {
                hash ^= u64::from(byte);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
            format!("{hash:016x}")
        })
        .collect();
    format!("{repository}@sha256:{hex}")
}

async fn serve(
    listener: std::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    (seen, idempotent): (Arc<Mutex<Vec<Seen>>>, Arc<AtomicBool>),
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = &mut stopped => return,
        };
        let Ok((stream, _)) = accepted else { continue };
        let acceptor = acceptor.clone();
        let seen = seen.clone();
        let idempotent = idempotent.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(stream).await else {
                return;
            };
            let client_certificate = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|certs| certs.first())
                .map(|cert| cert.as_ref().to_vec());
            let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                let seen = seen.clone();
                let idempotent = idempotent.clone();
                let client_certificate = client_certificate.clone();
                async move {
                    let body = request
                        .into_body()
                        .collect()
                        .await
                        .map(|b| b.to_bytes())
                        .unwrap_or_default();
                    let keys: Vec<String> = serde_json::from_slice::<Value>(&body)
                        .ok()
                        .and_then(|v| {
                            let keys = v.get("request")?.get("keys")?.clone();
                            serde_json::from_value(keys).ok()
                        })
                        .unwrap_or_default();
                    if let Ok(mut seen) = seen.lock() {
                        seen.push(Seen {
                            keys: keys.clone(),
                            client_certificate,
                        });
                    }
                    if keys.iter().any(|k| k.starts_with("slow")) {
                        tokio::time::sleep(Duration::from_secs(2)).await;
                    }
                    let answer = answer(&keys, idempotent.load(Ordering::SeqCst));
                    hyper::Response::builder()
                        .header("content-type", "application/json")
                        .body(Full::new(Bytes::from(answer.to_string())))
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tls), service)
                .await;
        });
    }
}
