//! Routing and the small handlers: which path goes to which handler, and
//! the answers of `/metrics`, `/healthz` and `/readyz`. Admission itself is
//! [`Webhook`]'s; accepting, TLS and limits are [`crate::server`]'s; the
//! deadline, the slots and the early answer are [`crate::overload`]'s.
//! Probes and metrics never wait for a slot and are never shed.
//!
//! | port | path | method | answer |
//! |---|---|---|---|
//! | admission (TLS) | `/v1/mutate`, `/v1/validate` | POST | [`Webhook::mutate`], [`Webhook::validate`] |
//! | metrics (plain) | `/metrics` | GET | Prometheus text |
//! | both | `/healthz`, `/readyz` | GET | `ok`, or 503 until a snapshot is published |

use std::convert::Infallible;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{ALLOW, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use sartor_state::MutatorCrd;

use crate::admission::{Reply, Webhook, internal_error};
use crate::metrics::{Endpoint, Outcome, Shed};
use crate::overload::{Deadline, Gate};
use crate::server::{BodyError, Limits, read_body};

/// Every answer is small and whole.
type Body = Full<Bytes>;

/// The admission port: `/v1/mutate` and `/v1/validate`, then the probes.
/// Called once the request's headers are in: its deadline counts from now.
pub(crate) async fn admission(
    request: Request<Incoming>,
    webhook: Arc<Webhook>,
    gate: Arc<Gate>,
    limits: Limits,
) -> Result<Response<Body>, Infallible> {
    let started = Instant::now();
    let endpoint = match request.uri().path() {
        "/v1/mutate" => Endpoint::Mutate,
        "/v1/validate" => Endpoint::Validate,
        _ => return Ok(probes(&request, &webhook)),
    };
    if request.method() != Method::POST {
        return Ok(method_not_allowed("POST"));
    }
    let deadline = Deadline::from_query(started, request.uri().query(), limits.request_timeout);
    let reply = match answer(request, endpoint, &webhook, &gate, &limits, &deadline).await {
        Ok(reply) => reply,
        Err(reason) => gate.shed(endpoint, reason, &deadline),
    };
    webhook
        .metrics()
        .record_request(endpoint, reply.outcome, started.elapsed());
    Ok(response(reply))
}

/// The body, read by the deadline, then a slot, then the handler; or why
/// the request is shed.
async fn answer(
    request: Request<Incoming>,
    endpoint: Endpoint,
    webhook: &Webhook,
    gate: &Gate,
    limits: &Limits,
    deadline: &Deadline,
) -> Result<Reply, Shed> {
    // Read before a slot is taken: a slow client holds no slot.
    let body = match read_body(request, limits, deadline).await {
        Ok(body) => body,
        Err(BodyError::Late) => return Err(Shed::SlowBody),
        Err(error) => return Ok(body_error(&error, limits)),
    };
    let _slot = gate.enter(deadline).await?;
    Ok(match endpoint {
        Endpoint::Mutate => guard(webhook.mutate(&body, deadline)).await,
        Endpoint::Validate => guard(async { webhook.validate(&body) }).await,
    })
}

/// The answer to a body that was not read whole (except in time: shed).
fn body_error(error: &BodyError, limits: &Limits) -> Reply {
    match error {
        BodyError::TooLarge => text_reply(
            413,
            format!("request body larger than {} bytes", limits.max_body_bytes),
            Outcome::TooLarge,
        ),
        BodyError::Aborted(error) => text_reply(
            400,
            format!("reading the request body: {error}"),
            Outcome::Aborted,
        ),
        BodyError::Timeout | BodyError::Late => text_reply(
            408,
            format!(
                "the request body did not arrive within {:?}",
                limits.body_read_timeout
            ),
            Outcome::Timeout,
        ),
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

/// The plain-HTTP port: `/metrics`, then the probes.
pub(crate) async fn metrics(
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
        "/healthz" => text_reply(200, "ok".to_string(), Outcome::Ok),
        "/readyz" if webhook.is_ready() => text_reply(
            200,
            ready_message(&webhook.missing_crds(), webhook.audit_problem()),
            Outcome::Ok,
        ),
        "/readyz" => text_reply(
            503,
            not_ready_message(&webhook.missing_crds()),
            Outcome::NotReady,
        ),
        path => text_reply(404, format!("no such endpoint: {path}"), Outcome::NotFound),
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

/// `ok`, naming the CRDs not installed and why the audit's findings are not
/// written: still ready, since the replica enforces the kinds that are
/// served exactly as they are.
fn ready_message(missing: &[MutatorCrd], audit_problem: Option<String>) -> String {
    let mut message = "ok".to_string();
    if !missing.is_empty() {
        let missing: Vec<String> = missing
            .iter()
            .map(|crd| format!("{} ({} mutators are not enforced)", crd.name, crd.kind))
            .collect();
        message.push_str("; not installed: ");
        message.push_str(&missing.join(", "));
    }
    if let Some(problem) = audit_problem {
        message.push_str("; audit: ");
        message.push_str(&problem);
    }
    message
}

fn method_not_allowed(allow: &'static str) -> Response<Body> {
    let mut response = response(text_reply(
        405,
        format!("method not allowed; use {allow}"),
        Outcome::MethodNotAllowed,
    ));
    response
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    response
}

fn text_reply(status: u16, message: String, outcome: Outcome) -> Reply {
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
        assert_eq!(reply.outcome, Outcome::InternalError);
        assert_eq!(
            String::from_utf8_lossy(&reply.body),
            "internal error: the handler panicked: boom\n"
        );
    }
}
