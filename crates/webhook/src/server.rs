//! The network side: a TLS listener for admission (HTTP/1.1 and HTTP/2),
//! a plain-HTTP listener for metrics and probes, limits on everything a
//! client controls, certificate reloads and graceful shutdown.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt as _, Full, LengthLimitError, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{ALLOW, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use crate::admission::{MUTATE, MutatorCrd, Reply, VALIDATE, Webhook, internal_error};
use crate::tls::{Certificate, TlsError, TlsFiles};

/// The API server's own request size limit; larger bodies get 413.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Bounds on what a client can make the server wait for or hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest request body accepted.
    pub max_body_bytes: usize,
    /// Time allowed for the TLS handshake (and for the first byte of it).
    pub handshake_timeout: Duration,
    /// Time allowed for a request's headers to arrive.
    pub header_read_timeout: Duration,
    /// Time allowed for a request's body to arrive.
    pub body_read_timeout: Duration,
    /// How long shutdown waits for requests in flight.
    pub shutdown_grace: Duration,
    /// How often the certificate files are checked for changes.
    pub tls_reload_interval: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_body_bytes: MAX_BODY_BYTES,
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(10),
            // Under Kubernetes' default 30 s termination grace period.
            shutdown_grace: Duration::from_secs(20),
            tls_reload_interval: Duration::from_secs(2),
        }
    }
}

/// Where the server listens and what it serves with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The TLS admission address (`0.0.0.0:8443`).
    pub addr: SocketAddr,
    /// The plain-HTTP metrics and probe address (`0.0.0.0:8888`).
    pub metrics_addr: SocketAddr,
    /// The serving certificate files.
    pub tls: TlsFiles,
    /// Limits.
    pub limits: Limits,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// A listener could not bind.
    #[error("listening on {addr}: {error}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why (in the message, so not also a `source`).
        error: std::io::Error,
    },
    /// The TLS configuration is unusable.
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// A bound server, ready to [`Server::run`].
pub struct Server {
    listener: TcpListener,
    metrics_listener: TcpListener,
    certificate: Arc<Certificate>,
    acceptor: TlsAcceptor,
    webhook: Arc<Webhook>,
    limits: Limits,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr())
            .field("metrics_addr", &self.metrics_addr())
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Loads the certificate and binds both listeners (port 0 picks a free
    /// port; see [`Server::addr`]).
    ///
    /// # Errors
    /// A [`ServeError`] for an unusable certificate or an address in use.
    pub async fn bind(config: &Config, webhook: Arc<Webhook>) -> Result<Server, ServeError> {
        let certificate = Arc::new(Certificate::load(&config.tls)?);
        let acceptor = TlsAcceptor::from(Arc::new(certificate.server_config()?));
        let bind = |addr: SocketAddr| async move {
            TcpListener::bind(addr)
                .await
                .map_err(|error| ServeError::Bind { addr, error })
        };
        Ok(Server {
            listener: bind(config.addr).await?,
            metrics_listener: bind(config.metrics_addr).await?,
            certificate,
            acceptor,
            webhook,
            limits: config.limits,
        })
    }

    /// The admission address actually bound.
    pub fn addr(&self) -> SocketAddr {
        self.listener.local_addr().unwrap_or_else(|_| unspecified())
    }

    /// The metrics address actually bound.
    pub fn metrics_addr(&self) -> SocketAddr {
        self.metrics_listener
            .local_addr()
            .unwrap_or_else(|_| unspecified())
    }

    /// Serves until `shutdown` completes, then stops accepting, lets requests
    /// in flight finish (up to [`Limits::shutdown_grace`]) and returns.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let Server {
            listener,
            metrics_listener,
            certificate,
            acceptor,
            webhook,
            limits,
        } = self;
        let reloader = tokio::spawn(reload_certificate(
            certificate,
            webhook.clone(),
            limits.tls_reload_interval,
        ));
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout);
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(256);
        let graceful = GracefulShutdown::new();
        let connection = |peer| Connection {
            builder: builder.clone(),
            watcher: graceful.watcher(),
            webhook: webhook.clone(),
            limits,
            peer,
        };
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                accepted = listener.accept() => match accepted {
                    Ok((tcp, peer)) => {
                        tokio::spawn(connection(peer).serve_tls(tcp, acceptor.clone()));
                    }
                    Err(error) => accept_failed(&error).await,
                },
                accepted = metrics_listener.accept() => match accepted {
                    Ok((tcp, peer)) => {
                        tokio::spawn(connection(peer).serve_metrics(tcp));
                    }
                    Err(error) => accept_failed(&error).await,
                },
            }
        }
        drop(listener);
        drop(metrics_listener);
        reloader.abort();
        tracing::info!(
            connections = graceful.count(),
            "shutting down: no new connections, finishing requests in flight"
        );
        match tokio::time::timeout(limits.shutdown_grace, graceful.shutdown()).await {
            Ok(()) => tracing::info!("shut down"),
            Err(_) => tracing::warn!(
                grace = ?limits.shutdown_grace,
                "shut down with connections still open after the grace period"
            ),
        }
    }
}

fn unspecified() -> SocketAddr {
    SocketAddr::from(([0, 0, 0, 0], 0))
}

/// Accept errors (out of file descriptors, mostly) must not spin the loop.
async fn accept_failed(error: &std::io::Error) {
    tracing::warn!(%error, "accepting a connection");
    tokio::time::sleep(Duration::from_millis(50)).await;
}

async fn reload_certificate(certificate: Arc<Certificate>, webhook: Arc<Webhook>, every: Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        match certificate.reload_if_changed() {
            Ok(false) => {}
            Ok(true) => {
                webhook.metrics().record_tls_reload(true);
                tracing::info!(cert = %certificate.files().cert.display(), "serving certificate reloaded");
            }
            Err(error) => {
                webhook.metrics().record_tls_reload(false);
                tracing::warn!(%error, "serving certificate files changed but cannot be used; keeping the current one");
            }
        }
    }
}

/// Everything one accepted connection needs.
struct Connection {
    builder: auto::Builder<TokioExecutor>,
    watcher: Watcher,
    webhook: Arc<Webhook>,
    limits: Limits,
    peer: SocketAddr,
}

/// The answer to plain HTTP sent to the TLS port, as Go's servers give it.
const PLAIN_HTTP_TO_TLS: &[u8] = b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";

/// The first byte of every TLS handshake record.
const TLS_HANDSHAKE: u8 = 0x16;

impl Connection {
    async fn serve_tls(self, mut tcp: TcpStream, acceptor: TlsAcceptor) {
        let peer = self.peer;
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%peer, %error, "setting TCP_NODELAY");
        }
        let mut first = [0u8; 1];
        match tokio::time::timeout(self.limits.handshake_timeout, tcp.peek(&mut first)).await {
            Ok(Ok(1)) => {
                let [byte] = first;
                if byte != TLS_HANDSHAKE {
                    tracing::debug!(%peer, "plain HTTP on the TLS port");
                    // Best effort: the client may already be gone.
                    let _ = tcp.write_all(PLAIN_HTTP_TO_TLS).await;
                    let _ = tcp.shutdown().await;
                    return;
                }
            }
            Ok(Ok(_)) => return,
            Ok(Err(error)) => {
                tracing::debug!(%peer, %error, "reading from a new connection");
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "no TLS handshake within the timeout");
                return;
            }
        }
        let tls =
            match tokio::time::timeout(self.limits.handshake_timeout, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(error)) => {
                    tracing::debug!(%peer, %error, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
        let webhook = self.webhook.clone();
        let limits = self.limits;
        let service = service_fn(move |request| admission_routes(request, webhook.clone(), limits));
        let connection = self
            .builder
            .serve_connection(TokioIo::new(tls), service)
            .into_owned();
        if let Err(error) = self.watcher.watch(connection).await {
            tracing::debug!(%peer, %error, "connection ended with an error");
        }
    }

    async fn serve_metrics(self, tcp: TcpStream) {
        let peer = self.peer;
        let webhook = self.webhook.clone();
        let service = service_fn(move |request| metrics_routes(request, webhook.clone()));
        let connection = self
            .builder
            .serve_connection(TokioIo::new(tcp), service)
            .into_owned();
        if let Err(error) = self.watcher.watch(connection).await {
            tracing::debug!(%peer, %error, "metrics connection ended with an error");
        }
    }
}

type Body = Full<Bytes>;

async fn admission_routes(
    request: Request<Incoming>,
    webhook: Arc<Webhook>,
    limits: Limits,
) -> Result<Response<Body>, Infallible> {
    let started = Instant::now();
    let endpoint = match request.uri().path() {
        "/v1/mutate" => MUTATE,
        "/v1/validate" => VALIDATE,
        _ => return Ok(probes(&request, &webhook)),
    };
    if request.method() != Method::POST {
        return Ok(method_not_allowed("POST"));
    }
    let reply = match read_body(request, &limits).await {
        Ok(body) if endpoint == MUTATE => guard(webhook.mutate(&body)).await,
        Ok(body) => guard(async { webhook.validate(&body) }).await,
        Err(reply) => reply,
    };
    webhook
        .metrics()
        .record_request(endpoint, reply.outcome, started.elapsed());
    Ok(response(reply))
}

/// Reads the whole body within the size and time limits.
async fn read_body(request: Request<Incoming>, limits: &Limits) -> Result<Bytes, Reply> {
    let too_large = || {
        text_reply(
            413,
            format!("request body larger than {} bytes", limits.max_body_bytes),
            "too_large",
        )
    };
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limits.max_body_bytes as u64) {
        return Err(too_large());
    }
    let body = Limited::new(request.into_body(), limits.max_body_bytes);
    match tokio::time::timeout(limits.body_read_timeout, body.collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(error)) if error.downcast_ref::<LengthLimitError>().is_some() => Err(too_large()),
        Ok(Err(error)) => Err(text_reply(
            400,
            format!("reading the request body: {error}"),
            "aborted",
        )),
        Err(_) => Err(text_reply(
            408,
            format!(
                "the request body did not arrive within {:?}",
                limits.body_read_timeout
            ),
            "timeout",
        )),
    }
}

/// Runs `handler`, turning a panic (a bug) into a 500 rather than a dead connection.
async fn guard(handler: impl Future<Output = Reply>) -> Reply {
    match futures::FutureExt::catch_unwind(AssertUnwindSafe(handler)).await {
        Ok(reply) => reply,
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            internal_error(&format!("the handler panicked: {message}"))
        }
    }
}

async fn metrics_routes(
    request: Request<Incoming>,
    webhook: Arc<Webhook>,
) -> Result<Response<Body>, Infallible> {
    if request.uri().path() != "/metrics" {
        return Ok(probes(&request, &webhook));
    }
    if request.method() != Method::GET {
        return Ok(method_not_allowed("GET"));
    }
    let mut response = Response::new(Body::from(webhook.metrics().render()));
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    Ok(response)
}

/// `/healthz`, `/readyz`, and 404 for everything else.
fn probes(request: &Request<Incoming>, webhook: &Webhook) -> Response<Body> {
    let reply = match request.uri().path() {
        "/healthz" | "/readyz" if request.method() != Method::GET => {
            return method_not_allowed("GET");
        }
        "/healthz" => text_reply(200, "ok".to_string(), "ok"),
        "/readyz" if webhook.is_ready() => {
            text_reply(200, ready_message(&webhook.missing_crds()), "ok")
        }
        "/readyz" => text_reply(503, not_ready_message(&webhook.missing_crds()), "not_ready"),
        path => text_reply(404, format!("no such endpoint: {path}"), "not_found"),
    };
    response(reply)
}

/// Why the replica is not ready, naming the CRDs it found not installed.
fn not_ready_message(missing: &[MutatorCrd]) -> String {
    let names: Vec<&str> = missing.iter().map(|crd| crd.name.as_str()).collect();
    if names.is_empty() {
        "not ready: no mutator snapshot loaded yet".to_string()
    } else {
        format!(
            "not ready: no mutator snapshot loaded yet; not installed: {}",
            names.join(", ")
        )
    }
}

/// `ok`, naming the CRDs not installed: still ready, since the replica
/// enforces the kinds that are served exactly as they are.
fn ready_message(missing: &[MutatorCrd]) -> String {
    if missing.is_empty() {
        return "ok".to_string();
    }
    let missing: Vec<String> = missing
        .iter()
        .map(|crd| format!("{} ({} mutators are not enforced)", crd.name, crd.kind))
        .collect();
    format!("ok; not installed: {}", missing.join(", "))
}

fn method_not_allowed(allow: &'static str) -> Response<Body> {
    let mut response = response(text_reply(
        405,
        format!("method not allowed; use {allow}"),
        "method_not_allowed",
    ));
    response
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    response
}

fn text_reply(status: u16, message: String, outcome: &'static str) -> Reply {
    Reply {
        status,
        content_type: "text/plain; charset=utf-8",
        body: format!("{message}\n").into_bytes(),
        outcome,
    }
}

fn response(reply: Reply) -> Response<Body> {
    let mut response = Response::new(Body::from(reply.body));
    *response.status_mut() =
        StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(reply.content_type));
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::panic)]

    use super::*;

    #[test]
    fn a_panicking_handler_is_answered_with_a_500() {
        let reply = futures::executor::block_on(guard(async { panic!("boom") }));
        assert_eq!(reply.status, 500);
        assert_eq!(reply.outcome, "internal_error");
        assert_eq!(
            String::from_utf8_lossy(&reply.body),
            "internal error: the handler panicked: boom\n"
        );
    }
}
