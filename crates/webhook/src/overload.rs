//! The overload policy: every admission request is answered before the API
//! server gives up on it, and a replica with more work than it can do says
//! so at once instead of working on requests nobody waits for any more.
//!
//! ```text
//! headers in ─▶ Deadline (arrival + ?timeout=, else Limits::request_timeout)
//!   ─▶ body, by the deadline ─▶ Gate: a slot of max_in_flight, waiting in a
//!      queue of max_queued only while the deadline allows ─▶ the handler
//!      (external data and the Namespace fetch end by the deadline too)
//!   any step that cannot finish in time ─▶ the early answer (503), counted
//! ```
//!
//! **The early answer is an HTTP 503 with a plain-text reason, not an
//! AdmissionReview.** The API server treats any answer but a 200 review as
//! a failed call and applies the webhook's `failurePolicy`: `Ignore` admits
//! the object unmutated (and records it as failed open), `Fail` refuses it.
//! Answering "allowed, no patch" instead would quietly turn `Fail` into
//! `Ignore`; denying would turn `Ignore` into `Fail`; and the webhook does
//! not know which policy its configuration names. The 503 carries no
//! `Retry-After`: the API server's client retries such answers, and a retry
//! would land on the replica that just said it is overloaded.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::admission::Reply;
use crate::metrics::{Endpoint, Metrics, Outcome, Shed};

/// The deadline of a request that names none (`?timeout=`): Kubernetes'
/// default `timeoutSeconds`. The API server names one on every call.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Time kept back from a request's timeout for the answer to travel back,
/// at most; a tenth of the timeout when that is less.
pub const ANSWER_MARGIN: Duration = Duration::from_millis(100);

/// Timeouts longer than this are taken as this (the API server allows 30 s).
pub const MAX_REQUEST_TIMEOUT: Duration = Duration::from_secs(3600);

/// How often the shedding warning is logged at most; the line counts the
/// requests shed since the last one.
const LOG_EVERY: Duration = Duration::from_secs(1);

/// The default [`crate::Limits::max_in_flight`]: 64 per core the process
/// may use (`available_parallelism`, which follows the container's CPU
/// limit), from 64 to 1,024. A typical admission takes well under a
/// millisecond of CPU, so 64 per core keep at most tens of milliseconds of
/// work ahead of a request, far inside a one-second deadline, while leaving
/// room for requests that only wait (on external data or a Namespace fetch).
pub fn default_max_in_flight() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    cores.saturating_mul(64).clamp(64, 1024)
}

/// The default [`crate::Limits::max_queued`]: eight times
/// [`default_max_in_flight`] (512 per core). The deadline bounds how long a
/// request waits; this bounds how many wait, so memory (each holds its body)
/// and, at one core's 10,000 to 25,000 typical admissions a second, the wait
/// at its full length to tens of milliseconds. A burst of a few hundred
/// requests waits rather than being shed.
pub fn default_max_queued() -> usize {
    default_max_in_flight().saturating_mul(8)
}

// === Deadline ===

/// When the API server stops waiting for one request's answer, and the
/// instant by which sartor answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    arrived: Instant,
    timeout: Duration,
}

impl Deadline {
    /// A request that arrived (its headers received) at `arrived` and is
    /// waited for `timeout` (at most [`MAX_REQUEST_TIMEOUT`]).
    pub fn new(arrived: Instant, timeout: Duration) -> Deadline {
        Deadline {
            arrived,
            timeout: timeout.min(MAX_REQUEST_TIMEOUT),
        }
    }

    /// The deadline of a request whose URI query is `query`: its `timeout`
    /// parameter, as the API server writes it (`?timeout=1s`), else
    /// `default`. A value that is not a Go duration is logged (debug) and
    /// `default` used.
    pub fn from_query(arrived: Instant, query: Option<&str>, default: Duration) -> Deadline {
        let timeout = match query.and_then(timeout_parameter) {
            None => default,
            Some(text) => parse_go_duration(text).unwrap_or_else(|| {
                tracing::debug!(timeout = text, "not a duration; using the default timeout");
                default
            }),
        };
        Deadline::new(arrived, timeout)
    }

    /// When the request's headers were received.
    pub fn arrived(&self) -> Instant {
        self.arrived
    }

    /// How long the API server waits, from [`Deadline::arrived`].
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The time kept for the answer to travel back: [`ANSWER_MARGIN`], or
    /// a tenth of the timeout when that is less.
    pub fn margin(&self) -> Duration {
        ANSWER_MARGIN.min(self.timeout / 10)
    }

    /// The instant by which sartor answers: the timeout less the margin,
    /// after arrival.
    pub fn answer_by(&self) -> Instant {
        // Cannot overflow: the timeout is at most an hour.
        self.arrived + (self.timeout - self.margin())
    }
}

/// The value of the `timeout` parameter in a URI query, the last if repeated.
fn timeout_parameter(query: &str) -> Option<&str> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .filter(|(name, _)| *name == "timeout")
        .map(|(_, value)| value)
        .next_back()
}

/// Parses a Go duration (`time.ParseDuration`): a sequence of decimal
/// numbers, each with an optional fraction and a unit (`ns`, `us`, `µs`,
/// `ms`, `s`, `m`, `h`), such as `10s`, `1m0s`, `1.5s`, `500ms`; or `0`.
/// `None` for anything else, a negative duration or one that overflows
/// Go's (about 292 years).
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    let text = text.strip_prefix('+').unwrap_or(text);
    if text == "0" {
        return Some(Duration::ZERO);
    }
    if text.is_empty() {
        return None;
    }
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let mut nanos: u128 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let (whole, after) = rest.split_at_checked(digits(rest))?;
        let (fraction, after) = match after.strip_prefix('.') {
            Some(after) => after.split_at_checked(digits(after))?,
            None => ("", after),
        };
        if whole.is_empty() && fraction.is_empty() {
            return None;
        }
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at_checked(unit_len)?;
        let per_unit: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().ok()?
        };
        // Digits past the 18th are below a nanosecond of any unit.
        let (mut numerator, mut denominator) = (0u128, 1u128);
        for digit in fraction.bytes().take(18) {
            numerator = numerator * 10 + u128::from(digit - b'0');
            denominator *= 10;
        }
        nanos = whole
            .checked_mul(per_unit)?
            .checked_add(numerator * per_unit / denominator)?
            .checked_add(nanos)?;
        if nanos > i64::MAX as u128 {
            return None;
        }
        rest = after;
    }
    u64::try_from(nanos).ok().map(Duration::from_nanos)
}

// === Gate ===

/// The bound on admission requests worked on at once, and on those waiting
/// for a slot: a request waits only while its deadline allows and the queue
/// has room, and is shed otherwise.
pub(crate) struct Gate {
    slots: Semaphore,
    max_in_flight: usize,
    max_queued: usize,
    queued: AtomicUsize,
    metrics: std::sync::Arc<Metrics>,
    log: ShedLog,
}

/// A slot in the gate, given back when dropped.
pub(crate) struct Slot<'a> {
    _permit: SemaphorePermit<'a>,
    in_flight: &'a Gauge,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.in_flight.dec();
    }
}

/// A place in the queue, given back when dropped.
struct Place<'a>(&'a Gate);

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.0.queued.fetch_sub(1, Ordering::Relaxed);
        self.0.metrics.queued().dec();
    }
}

impl Gate {
    /// `max_in_flight` slots (at least 1) and room for `max_queued` to wait.
    pub(crate) fn new(
        max_in_flight: usize,
        max_queued: usize,
        metrics: std::sync::Arc<Metrics>,
    ) -> Gate {
        let max_in_flight = max_in_flight.clamp(1, Semaphore::MAX_PERMITS);
        Gate {
            slots: Semaphore::new(max_in_flight),
            max_in_flight,
            max_queued,
            queued: AtomicUsize::new(0),
            metrics,
            log: ShedLog::default(),
        }
    }

    /// A slot, at once or after waiting in the queue until `deadline`'s
    /// [`Deadline::answer_by`] at the latest.
    ///
    /// # Errors
    /// [`Shed::Deadline`] when the answer is due already (the request waited
    /// for the runtime, or for its body, until then) or no slot came free in
    /// time; [`Shed::QueueFull`] when every slot is taken and the queue is
    /// full.
    pub(crate) async fn enter(&self, deadline: &Deadline) -> Result<Slot<'_>, Shed> {
        let waited = Instant::now();
        let by = deadline.answer_by();
        if waited >= by {
            return Err(Shed::Deadline);
        }
        let permit = match self.slots.try_acquire() {
            Ok(permit) => permit,
            Err(_) => {
                let max = self.max_queued;
                if self
                    .queued
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                        (n < max).then_some(n + 1)
                    })
                    .is_err()
                {
                    return Err(Shed::QueueFull);
                }
                self.metrics.queued().inc();
                let _place = Place(self);
                match tokio::time::timeout_at(by.into(), self.slots.acquire()).await {
                    Ok(Ok(permit)) => permit,
                    // Timed out, or closed (never: the gate does not close it).
                    Ok(Err(_)) | Err(_) => return Err(Shed::Deadline),
                }
            }
        };
        self.metrics.record_queue_wait(waited.elapsed());
        let in_flight = self.metrics.in_flight();
        in_flight.inc();
        Ok(Slot {
            _permit: permit,
            in_flight,
        })
    }

    /// The early answer to a request shed for `reason`, counted and logged
    /// (one line a second at most, with the count since the last).
    pub(crate) fn shed(&self, endpoint: Endpoint, reason: Shed, deadline: &Deadline) -> Reply {
        self.metrics.record_shed(endpoint, reason);
        self.log
            .shed(endpoint, reason, self.max_in_flight, self.max_queued);
        early_answer(reason, deadline, self.max_in_flight, self.max_queued)
    }
}

/// The answer to a request shed for `reason`: 503, the reason in plain
/// text, no `Retry-After` (see the module's documentation).
pub(crate) fn early_answer(
    reason: Shed,
    deadline: &Deadline,
    max_in_flight: usize,
    max_queued: usize,
) -> Reply {
    let why = match reason {
        Shed::QueueFull => format!(
            "sartor is overloaded: every slot busy (--max-in-flight {max_in_flight}) and the \
             queue full (--max-queued {max_queued})"
        ),
        Shed::Deadline => format!(
            "sartor is overloaded: no slot came free (--max-in-flight {max_in_flight}) before \
             the request's deadline ({:?} after it arrived, less {:?} for the answer)",
            deadline.timeout(),
            deadline.margin()
        ),
        Shed::SlowBody => format!(
            "the request body was still arriving at the request's deadline ({:?} after it \
             arrived, less {:?} for the answer)",
            deadline.timeout(),
            deadline.margin()
        ),
    };
    Reply {
        status: 503,
        content_type: "text/plain; charset=utf-8",
        body: format!(
            "{why}; answered early and unmutated, so the API server applies the webhook's \
             failurePolicy\n"
        )
        .into_bytes(),
        outcome: Outcome::Shed,
    }
}

/// The shedding warning, once a second at most.
#[derive(Default)]
struct ShedLog(Mutex<ShedLogState>);

#[derive(Default)]
struct ShedLogState {
    last: Option<Instant>,
    /// Shed since the last line.
    count: u64,
}

impl ShedLog {
    fn shed(&self, endpoint: Endpoint, reason: Shed, max_in_flight: usize, max_queued: usize) {
        let mut state = match self.0.lock() {
            Ok(state) => state,
            Err(poisoned) => poisoned.into_inner(),
        };
        state.count += 1;
        let now = Instant::now();
        if state
            .last
            .is_some_and(|last| now.duration_since(last) < LOG_EVERY)
        {
            return;
        }
        tracing::warn!(
            %endpoint,
            %reason,
            shed = state.count,
            max_in_flight,
            max_queued,
            "shedding admission requests: answered early (503), the API server applies the failurePolicy"
        );
        state.last = Some(now);
        state.count = 0;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn go_durations_as_the_api_server_writes_them() {
        let ms = Duration::from_millis;
        for (text, expected) in [
            ("10s", ms(10_000)),
            ("1s", ms(1_000)),
            ("30s", ms(30_000)),
            ("1m0s", ms(60_000)),
            ("1m30s", ms(90_000)),
            ("500ms", ms(500)),
            ("1.5s", ms(1_500)),
            (".5s", ms(500)),
            ("1h", ms(3_600_000)),
            ("2us", Duration::from_micros(2)),
            ("2µs", Duration::from_micros(2)),
            ("7ns", Duration::from_nanos(7)),
            ("0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("+3s", ms(3_000)),
            ("1.000000000000000000001s", ms(1_000)),
        ] {
            assert_eq!(parse_go_duration(text), Some(expected), "{text}");
        }
        for text in [
            "",
            "10",
            "s",
            "-1s",
            "1x",
            "1 s",
            "1s ",
            "1..5s",
            ".s",
            "1e3s",
            "9999999999h",
            "99999999999999999999999999999999999999999s",
            "é",
            "1sé",
        ] {
            assert_eq!(parse_go_duration(text), None, "{text:?}");
        }
    }

    #[test]
    fn the_deadline_comes_from_the_query_or_the_default() {
        let arrived = Instant::now();
        let default = Duration::from_secs(10);
        let timeout = |query: Option<&str>| Deadline::from_query(arrived, query, default).timeout();
        assert_eq!(timeout(Some("timeout=1s")), Duration::from_secs(1));
        assert_eq!(timeout(Some("a=b&timeout=5s")), Duration::from_secs(5));
        assert_eq!(
            timeout(Some("timeout=1s&timeout=2s")),
            Duration::from_secs(2)
        );
        assert_eq!(timeout(None), default);
        assert_eq!(timeout(Some("")), default);
        assert_eq!(timeout(Some("timeouts=1s")), default);
        // Malformed: the default.
        assert_eq!(timeout(Some("timeout=soon")), default);
        assert_eq!(timeout(Some("timeout=-1s")), default);
        // Absurdly long: an hour.
        assert_eq!(timeout(Some("timeout=1000h")), MAX_REQUEST_TIMEOUT);
    }

    #[test]
    fn the_answer_is_due_a_margin_before_the_deadline() {
        let arrived = Instant::now();
        let by = |timeout: Duration| Deadline::new(arrived, timeout).answer_by() - arrived;
        assert_eq!(by(Duration::from_secs(1)), Duration::from_millis(900));
        assert_eq!(by(Duration::from_secs(10)), Duration::from_millis(9_900));
        // A short timeout keeps a tenth.
        assert_eq!(by(Duration::from_millis(500)), Duration::from_millis(450));
        assert_eq!(by(Duration::ZERO), Duration::ZERO);
    }

    #[tokio::test]
    async fn a_full_gate_queues_until_the_deadline_then_sheds() {
        let gate = Gate::new(1, 1, Arc::new(Metrics::new()));
        let now = Instant::now();
        let soon = Deadline::new(now, Duration::from_millis(200));
        let held = gate.enter(&soon).await.unwrap();
        // The queue has room for one: it waits, and the deadline comes first.
        let waiting = gate.enter(&soon);
        // While it waits, the queue is full.
        let (waited, full) = tokio::join!(waiting, async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            gate.enter(&soon).await.map(|_| ())
        });
        assert_eq!(waited.map(|_| ()), Err(Shed::Deadline));
        assert_eq!(full, Err(Shed::QueueFull));
        // A slot given back goes to the one waiting.
        let later = Deadline::new(Instant::now(), Duration::from_secs(10));
        let (got, ()) = tokio::join!(gate.enter(&later), async { drop(held) });
        assert!(got.is_ok());
        // No time left: shed at once, without queueing, and even with a
        // slot free.
        let past = Deadline::new(now, Duration::ZERO);
        assert_eq!(gate.enter(&past).await.map(|_| ()), Err(Shed::Deadline));
        let free = Gate::new(1, 1, Arc::new(Metrics::new()));
        assert_eq!(free.enter(&past).await.map(|_| ()), Err(Shed::Deadline));
        let text = gate.metrics.render();
        assert!(text.contains("sartor_admission_in_flight 1\n"), "{text}");
        assert!(text.contains("sartor_admission_queued 0\n"), "{text}");
    }

    #[test]
    fn the_early_answer_names_why_and_the_failure_policy() {
        let deadline = Deadline::new(Instant::now(), Duration::from_secs(1));
        let reply = early_answer(Shed::Deadline, &deadline, 64, 64);
        assert_eq!((reply.status, reply.outcome), (503, Outcome::Shed));
        assert_eq!(
            String::from_utf8_lossy(&reply.body),
            "sartor is overloaded: no slot came free (--max-in-flight 64) before the request's \
             deadline (1s after it arrived, less 100ms for the answer); answered early and \
             unmutated, so the API server applies the webhook's failurePolicy\n"
        );
    }
}
