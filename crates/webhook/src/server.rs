//! The transport: a TLS listener for admission (HTTP/1.1 and HTTP/2), a
//! plain-HTTP listener for metrics and probes, limits on everything a client
//! controls, certificate reloads and graceful shutdown. Which path is
//! answered how is [`crate::routes`]' job; the deadline and the bound on
//! requests at once are [`crate::overload`]'s.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt as _, LengthLimitError, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONNECTION, CONTENT_LENGTH, HeaderValue};
use hyper::service::service_fn;
use hyper::{Request, Version};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulConnection;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::admission::Webhook;
use crate::overload::{
    DEFAULT_REQUEST_TIMEOUT, Deadline, Gate, default_max_in_flight, default_max_queued,
};
use crate::routes;
use crate::tls::{Certificate, TlsError, TlsFiles};

/// The API server's own request size limit; larger bodies get 413.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// How long a closed admission connection keeps reading what the client
/// still sends (see [`Lingering`]).
const LINGER: Duration = Duration::from_secs(2);

/// How long an idle kept-alive HTTP/1.1 connection is kept (the default
/// [`Limits::header_read_timeout`]): longer than the API server keeps one
/// for reuse (90 s, Go's `http.DefaultTransport`), so that the API server
/// closes it, never sartor while the API server may be writing to it (see
/// [`IDLE_DRAIN`]). Go's webhook servers (controller-runtime's, which
/// Gatekeeper's is) keep theirs 90 s.
const KEPT_IDLE: Duration = Duration::from_secs(120);

/// How long, once shutdown begins, an idle kept-alive HTTP/1.1 admission
/// connection is left open for one more request before it is closed idle.
///
/// The API server calls a Service's webhook over HTTP/1.1 (it turns HTTP/2
/// off for them, so that calls spread over the replicas) and keeps idle
/// connections to reuse. Closing one while it is idle races with the API
/// server's next request on it: a request written as the close arrives
/// fails with `EOF` (the API server retries no POST), so the write is
/// refused (failurePolicy Fail) or admitted unmutated (Ignore). From the
/// start of shutdown every HTTP/1.1 answer says `Connection: close`, so a
/// connection that carries one more request closes after it, which the
/// client expects; only one idle for all of this time is closed idle.
const IDLE_DRAIN: Duration = Duration::from_secs(2);

/// Bounds on what a client can make the server wait for or hold, and on
/// the admission work it takes on at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest request body accepted.
    pub max_body_bytes: usize,
    /// Time allowed for the TLS handshake (and for the first byte of it).
    pub handshake_timeout: Duration,
    /// Time allowed for a request's headers to arrive, counted (by hyper)
    /// from the end of the previous answer on a kept-alive connection, so
    /// also how long an idle HTTP/1.1 connection is kept.
    pub header_read_timeout: Duration,
    /// Time allowed for a request's body to arrive.
    pub body_read_timeout: Duration,
    /// How long shutdown waits for the connections to close: requests in
    /// flight, a kept-alive HTTP/1.1 connection's next request (for up to
    /// 2 s) and each close's lingering (up to 2 s).
    pub shutdown_grace: Duration,
    /// How often the certificate files are checked for changes.
    pub tls_reload_interval: Duration,
    /// How long the API server waits for an answer when the request does
    /// not say (`?timeout=`, which it writes on every call); sartor answers
    /// every admission request before its deadline
    /// ([`crate::overload::Deadline`]).
    pub request_timeout: Duration,
    /// Admission requests worked on at once (bodies read, slot taken); more
    /// wait for a slot. Probes and metrics never take one.
    pub max_in_flight: usize,
    /// Admission requests waiting for a slot at most; one more is answered
    /// early at once (503), as is one whose deadline comes while it waits.
    pub max_queued: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_body_bytes: MAX_BODY_BYTES,
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: KEPT_IDLE,
            body_read_timeout: Duration::from_secs(10),
            // Under Kubernetes' default 30 s termination grace period.
            shutdown_grace: Duration::from_secs(20),
            tls_reload_interval: Duration::from_secs(2),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_in_flight: default_max_in_flight(),
            max_queued: default_max_queued(),
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
        // External data providers see the serving certificate as the client's.
        webhook.providers().present(certificate.clone());
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
        // Every connection, and then its lingering close, holds a sender:
        // all gone, all closed.
        let (lingering, mut lingered) = mpsc::channel::<()>(1);
        let (closing, closing_seen) = watch::channel(false);
        let gate = Arc::new(Gate::new(
            limits.max_in_flight,
            limits.max_queued,
            webhook.metrics().clone(),
        ));
        let connection = |peer| Connection {
            builder: builder.clone(),
            closing: closing_seen.clone(),
            webhook: webhook.clone(),
            gate: gate.clone(),
            lingering: lingering.clone(),
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
            connections = lingering.strong_count().saturating_sub(1),
            "shutting down: no new connections, finishing requests in flight"
        );
        closing.send_replace(true);
        drop(lingering);
        if tokio::time::timeout(limits.shutdown_grace, lingered.recv())
            .await
            .is_err()
        {
            tracing::warn!(
                grace = ?limits.shutdown_grace,
                "connections still open after the grace period"
            );
        }
        tracing::info!("shut down");
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
    /// Turns true when shutdown begins.
    closing: watch::Receiver<bool>,
    webhook: Arc<Webhook>,
    gate: Arc<Gate>,
    limits: Limits,
    peer: SocketAddr,
    /// Held while the connection is served and by its lingering close, so
    /// shutdown can wait for both.
    lingering: mpsc::Sender<()>,
}

/// Serves `connection` until it ends. Once `closing` turns true it is
/// closed gracefully (requests in flight are answered first): at once, or,
/// with a `drain` (HTTP/1.1 admission, see [`IDLE_DRAIN`]), once it ends by
/// itself after one more answer or `drain` has passed.
async fn serve_until_closed<C: GracefulConnection>(
    connection: C,
    mut closing: watch::Receiver<bool>,
    drain: Option<Duration>,
) -> Result<(), C::Error> {
    tokio::pin!(connection);
    tokio::select! {
        served = connection.as_mut() => return served,
        // The server gone counts as closing.
        _ = closing.wait_for(|closing| *closing) => {}
    }
    if let Some(drain) = drain
        && let Ok(served) = tokio::time::timeout(drain, connection.as_mut()).await
    {
        return served;
    }
    connection.as_mut().graceful_shutdown();
    connection.await
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
        let http2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        let webhook = self.webhook.clone();
        let gate = self.gate.clone();
        let limits = self.limits;
        let closing = self.closing.clone();
        let service = service_fn(move |request: Request<Incoming>| {
            let http1 = request.version() < Version::HTTP_2;
            let answer = routes::admission(request, webhook.clone(), gate.clone(), limits);
            let closing = closing.clone();
            async move {
                let mut response = answer.await?;
                if http1 && *closing.borrow() {
                    response
                        .headers_mut()
                        .insert(CONNECTION, HeaderValue::from_static("close"));
                }
                Ok::<_, Infallible>(response)
            }
        });
        let tls = Lingering {
            stream: Some(tls),
            held: Some(self.lingering.clone()),
        };
        let connection = self
            .builder
            .serve_connection(TokioIo::new(tls), service)
            .into_owned();
        // HTTP/2 is told to go elsewhere at once (GOAWAY names the requests
        // it will still answer; the client sends the others elsewhere).
        let drain = (!http2).then_some(IDLE_DRAIN);
        if let Err(error) = serve_until_closed(connection, self.closing, drain).await {
            tracing::debug!(%peer, %error, "connection ended with an error");
        }
    }

    async fn serve_metrics(self, tcp: TcpStream) {
        let peer = self.peer;
        let webhook = self.webhook.clone();
        let service = service_fn(move |request| routes::metrics(request, webhook.clone()));
        let connection = self
            .builder
            .serve_connection(TokioIo::new(tcp), service)
            .into_owned();
        if let Err(error) = serve_until_closed(connection, self.closing, None).await {
            tracing::debug!(%peer, %error, "metrics connection ended with an error");
        }
    }
}

/// Why a request body was not read whole.
#[derive(Debug)]
pub(crate) enum BodyError {
    /// It is larger than [`Limits::max_body_bytes`] (declared or sent).
    TooLarge,
    /// It did not arrive within [`Limits::body_read_timeout`].
    Timeout,
    /// It was still arriving when the request's answer was due
    /// ([`Deadline::answer_by`]), before [`Limits::body_read_timeout`].
    Late,
    /// The connection failed while it was read.
    Aborted(Box<dyn std::error::Error + Send + Sync>),
}

/// Reads the whole body within the size and time limits, and by the time
/// the request's answer is due.
pub(crate) async fn read_body(
    request: Request<Incoming>,
    limits: &Limits,
    deadline: &Deadline,
) -> Result<Bytes, BodyError> {
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limits.max_body_bytes as u64) {
        return Err(BodyError::TooLarge);
    }
    let body = Limited::new(request.into_body(), limits.max_body_bytes);
    let read_by = Instant::now()
        .checked_add(limits.body_read_timeout)
        .map_or(deadline.answer_by(), |at| at.min(deadline.answer_by()));
    let late = read_by == deadline.answer_by();
    match tokio::time::timeout_at(read_by.into(), body.collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(error)) if error.downcast_ref::<LengthLimitError>().is_some() => {
            Err(BodyError::TooLarge)
        }
        Ok(Err(error)) => Err(BodyError::Aborted(error)),
        Err(_) if late => Err(BodyError::Late),
        Err(_) => Err(BodyError::Timeout),
    }
}

/// An admission connection's stream, closed gracefully once hyper is done
/// with it: FIN (after TLS's close_notify) first, then whatever the client
/// still sends is read and dropped, for at most [`LINGER`], before the
/// socket is closed. Closed at once, a socket with unread data in it
/// answers with a RST, which makes the client discard what it had not read
/// yet (the last answer, with its `Connection: close`; over HTTP/2 the
/// GOAWAY saying which requests to send elsewhere) and fail the request it
/// was writing ("write: broken pipe"): a write refused, or admitted
/// unmutated, when a replica stops while the API server's kept-alive
/// connection still reaches it. Go's HTTP server closes the same way.
struct Lingering {
    stream: Option<TlsStream<TcpStream>>,
    held: Option<mpsc::Sender<()>>,
}

impl AsyncRead for Lingering {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut().stream.as_mut() {
            Some(stream) => Pin::new(stream).poll_read(cx, buf),
            None => Poll::Ready(Ok(())),
        }
    }
}

impl AsyncWrite for Lingering {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut().stream.as_mut() {
            Some(stream) => Pin::new(stream).poll_write(cx, buf),
            None => Poll::Ready(Err(io::ErrorKind::NotConnected.into())),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut().stream.as_mut() {
            Some(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
            None => Poll::Ready(Err(io::ErrorKind::NotConnected.into())),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.stream
            .as_ref()
            .is_some_and(AsyncWrite::is_write_vectored)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut().stream.as_mut() {
            Some(stream) => Pin::new(stream).poll_flush(cx),
            None => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut().stream.as_mut() {
            Some(stream) => Pin::new(stream).poll_shutdown(cx),
            None => Poll::Ready(Ok(())),
        }
    }
}

impl Drop for Lingering {
    fn drop(&mut self) {
        let (Some(stream), Ok(runtime)) =
            (self.stream.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let held = self.held.take();
        runtime.spawn(async move {
            linger(stream).await;
            drop(held);
        });
    }
}

/// Closes `stream` as [`Lingering`] says.
async fn linger(mut stream: TlsStream<TcpStream>) {
    let _ = tokio::time::timeout(LINGER, async {
        let _ = stream.shutdown().await;
        let mut unread = [0u8; 4096];
        while let Ok(1..) = stream.read(&mut unread).await {}
    })
    .await;
}
