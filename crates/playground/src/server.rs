//! The page's server: plain HTTP/1.1, the page's three files and two API
//! routes.
//!
//! | route | what |
//! |---|---|
//! | `GET /`, `/playground.js`, `/playground.css` | the page, embedded |
//! | `GET /api/examples` | [`crate::examples`] as JSON |
//! | `POST /api/evaluate` | an [`Input`] as JSON: its [`crate::Output`], or `{"error"}` |
//!
//! A browser on another site cannot use it: the API takes only
//! `Content-Type: application/json` (a cross-site form cannot send it
//! without the server's consent, which it never gives), and on loopback
//! only requests naming a loopback host (a DNS name rebound to 127.0.0.1
//! is refused). Evaluations run one at a time, off the async threads.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, HOST, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::{Input, MAX_PANE_BYTES, evaluate, examples};

/// The largest request body: four panes at their limit, and the JSON
/// around them.
const MAX_BODY_BYTES: usize = 4 * MAX_PANE_BYTES + 4096;

const INDEX: &str = include_str!("page/index.html");
const SCRIPT: &str = include_str!("page/playground.js");
const STYLE: &str = include_str!("page/playground.css");

/// The page's policy: its own files only, no inline script, no framing.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// A bound listener, ready to serve.
#[derive(Debug)]
pub struct Listening {
    listener: TcpListener,
    addr: SocketAddr,
}

/// Binds `addr` (port 0: any free one).
///
/// # Errors
/// The address cannot be bound (in use, not this machine's).
pub async fn listen(addr: SocketAddr) -> std::io::Result<Listening> {
    let listener = TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    Ok(Listening { listener, addr })
}

impl Listening {
    /// The address bound, with the port chosen.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves connections until the task is dropped; a connection that
    /// fails ends alone.
    ///
    /// # Errors
    /// Accepting connections failed.
    pub async fn serve(self) -> std::io::Result<()> {
        let shared = Arc::new(Shared {
            addr: self.addr,
            evaluating: Semaphore::new(1),
        });
        loop {
            let (stream, _) = self.listener.accept().await?;
            let shared = Arc::clone(&shared);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let shared = Arc::clone(&shared);
                    async move { Ok::<_, Infallible>(shared.respond(request).await) }
                });
                // A client that goes away mid-request is no error of ours.
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    }
}

/// What every connection shares.
struct Shared {
    addr: SocketAddr,
    evaluating: Semaphore,
}

impl Shared {
    async fn respond(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        if !self.host_allowed(request.headers().get(HOST)) {
            return error(
                StatusCode::FORBIDDEN,
                "the playground answers only requests to a loopback address (http://127.0.0.1:PORT/ or http://localhost:PORT/)",
            );
        }
        let path = request.uri().path().to_string();
        match (request.method(), path.as_str()) {
            (&Method::GET, "/" | "/index.html") => file("text/html; charset=utf-8", INDEX),
            (&Method::GET, "/playground.js") => file("text/javascript; charset=utf-8", SCRIPT),
            (&Method::GET, "/playground.css") => file("text/css; charset=utf-8", STYLE),
            (&Method::GET, "/api/examples") => json(StatusCode::OK, &examples()),
            (&Method::POST, "/api/evaluate") => self.evaluate(request).await,
            (_, "/" | "/index.html" | "/playground.js" | "/playground.css" | "/api/examples") => {
                error(StatusCode::METHOD_NOT_ALLOWED, "use GET")
            }
            (_, "/api/evaluate") => error(StatusCode::METHOD_NOT_ALLOWED, "use POST"),
            _ => error(StatusCode::NOT_FOUND, &format!("no page at {path}")),
        }
    }

    /// Whether the request names a host this listener answers for: any,
    /// when it listens beyond loopback (`--listen`); else a loopback one.
    fn host_allowed(&self, host: Option<&HeaderValue>) -> bool {
        if !self.addr.ip().is_loopback() {
            return true;
        }
        let Some(host) = host.and_then(|h| h.to_str().ok()) else {
            return false;
        };
        let name = match host.rsplit_once(':') {
            Some((name, port)) if port.parse::<u16>().is_ok() => name,
            _ => host,
        };
        matches!(name, "localhost" | "127.0.0.1" | "[::1]")
            || name
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }

    async fn evaluate(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let json_sent = request
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("application/json"));
        if !json_sent {
            return error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "send the input as Content-Type: application/json",
            );
        }
        let too_large = || {
            error(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!(
                    "the request is larger than the {MAX_BODY_BYTES} bytes the playground takes"
                ),
            )
        };
        let declared = request
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<usize>().ok());
        if declared.is_some_and(|length| length > MAX_BODY_BYTES) {
            return too_large();
        }
        let body = match Limited::new(request.into_body(), MAX_BODY_BYTES)
            .collect()
            .await
        {
            Ok(body) => body.to_bytes(),
            Err(cause) if cause.is::<http_body_util::LengthLimitError>() => return too_large(),
            Err(cause) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    &format!("reading the request: {cause}"),
                );
            }
        };
        let input: Input = match serde_json::from_slice(&body) {
            Ok(input) => input,
            Err(cause) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    &format!("the request is not an input: {cause}"),
                );
            }
        };
        // One evaluation at a time: a burst of requests waits, it does not
        // multiply the work.
        let Ok(_permit) = self.evaluating.acquire().await else {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "the playground is stopping",
            );
        };
        match tokio::task::spawn_blocking(move || evaluate(&input)).await {
            Ok(Ok(output)) => json(StatusCode::OK, &output),
            Ok(Err(refused)) => error(StatusCode::PAYLOAD_TOO_LARGE, &refused.to_string()),
            Err(failed) => error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("the evaluation failed: {failed}"),
            ),
        }
    }
}

/// An embedded file, with the page's headers.
fn file(content_type: &'static str, body: &'static str) -> Response<Full<Bytes>> {
    respond(
        StatusCode::OK,
        content_type,
        Bytes::from_static(body.as_bytes()),
    )
}

/// `value` as JSON.
fn json(status: StatusCode, value: &impl serde::Serialize) -> Response<Full<Bytes>> {
    match serde_json::to_vec(value) {
        Ok(body) => respond(status, "application/json", Bytes::from(body)),
        Err(cause) => error(StatusCode::INTERNAL_SERVER_ERROR, &cause.to_string()),
    }
}

/// `{"error": message}` with `status`.
fn error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    let body = serde_json::json!({ "error": message }).to_string();
    respond(status, "application/json", Bytes::from(body))
}

fn respond(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        "content-security-policy",
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    headers.insert("cache-control", HeaderValue::from_static("no-store"));
    response
}
