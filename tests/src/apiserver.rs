//! An in-memory stand-in for the Kubernetes API server, over plain HTTP on
//! 127.0.0.1, for tests that drive kube-rs (watchers, reflectors, writes)
//! without a cluster.
//!
//! What it serves, as Kubernetes does where kube-rs depends on it:
//! discovery (`/api`, `/apis`, `/api/v1`, `/apis/GROUP[/VERSION]`, aggregated
//! discovery v2 when asked for it, `/version`), list, watch (replayed from a
//! history kept forever, then live; `sendInitialEvents` streaming lists too),
//! get, create, replace, patch (merge, JSON, strategic-as-merge, server-side
//! apply), delete (finalizers honoured) and delete-collection, with Kubernetes'
//! `Status` bodies for errors. Every request is recorded as a [`Call`];
//! failures can be injected ([`ApiServer::fail`]) and lists held back
//! ([`ApiServer::hold`]).
//!
//! Deliberate simplifications are listed on [`ApiServer`].

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::future::Future as _;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use http_body_util::{BodyExt as _, Either, Full};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Map, Value, json};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};

/// One HTTP request the server received.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// `GET`, `POST`, `PUT`, `PATCH`, `DELETE`.
    pub method: String,
    /// The URL path, without the query.
    pub path: String,
    /// The query parameters, percent-decoded (the last wins when repeated;
    /// empty pairs, as in kube's `?&watch=true`, are skipped).
    pub query: BTreeMap<String, String>,
    /// The `Content-Type` header, if any.
    pub content_type: Option<String>,
    /// The body parsed as JSON; a body that is not JSON is kept as a string.
    pub body: Option<Value>,
}

impl Call {
    /// Whether this is a watch request (`watch=true` or `watch=1`).
    pub fn is_watch(&self) -> bool {
        self.query
            .get("watch")
            .is_some_and(|w| w == "true" || w == "1")
    }
}

/// Holds back list requests to one path until released; see [`ApiServer::hold`].
///
/// Dropping it releases too.
pub struct Hold {
    id: u64,
    shared: Arc<Shared>,
    _release: watch::Sender<bool>,
}

impl Hold {
    /// Lets the held requests (and later ones) through.
    pub fn release(self) {
        drop(self);
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.shared.lock().holds.retain(|h| h.id != self.id);
        // Dropping `_release` wakes the requests waiting on it.
    }
}

/// A running in-memory API server. Cloning shares the server; it stops
/// (listener and open connections, watches included) when the last clone is
/// dropped.
///
/// Faithful to Kubernetes where clients depend on it:
/// - a write that changes nothing is a no-op: no new `resourceVersion`, no
///   watch event (controllers that patch unchanged status do not wake
///   themselves);
/// - `metadata.generation` starts at 1 and grows when anything other than
///   `metadata`/`status` changes (or `deletionTimestamp` is set);
/// - with a status subresource, writes to the object ignore `status` and
///   writes to `/status` change only `status`;
/// - replacing a custom resource (a group that is not `""` or `*.k8s.io`)
///   requires `metadata.resourceVersion`, as for CRDs;
/// - objects with `metadata.finalizers` get a `deletionTimestamp` on delete
///   and go when the last finalizer is removed;
/// - defaults: Secret `stringData` folded into `data`, `type: Opaque`;
///   Namespace `kubernetes.io/metadata.name` label, `spec.finalizers`,
///   `status.phase: Active`; admission webhook configurations' webhook
///   defaults (`failurePolicy`, `matchPolicy`, selectors, `timeoutSeconds`,
///   `reinvocationPolicy`, rule `scope`, service `port`).
///
/// Simplifications: no `managedFields`, no apply conflicts (every apply acts
/// as if forced), apply outside `/status` is a merge patch, strategic merge
/// is a merge patch, `limit`/`continue` are ignored (everything in one page),
/// `resourceVersion` on a list is ignored (the current state is returned),
/// `dryRun` is ignored (the write happens), field selectors know only
/// `metadata.name` and `metadata.namespace`, no periodic bookmarks.
#[derive(Clone)]
pub struct ApiServer {
    shared: Arc<Shared>,
    _task: Arc<TaskGuard>,
}

struct TaskGuard(JoinHandle<()>);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

struct Shared {
    addr: SocketAddr,
    state: Mutex<State>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ApiServer {
    /// Binds 127.0.0.1 on a free port and serves HTTP/1.1 (and h2c) until dropped.
    ///
    /// # Panics
    /// If no port can be bound.
    #[allow(clippy::panic, reason = "test support: no port means no test")]
    pub async fn start() -> ApiServer {
        let listener = match TcpListener::bind("127.0.0.1:0").await {
            Ok(listener) => listener,
            Err(e) => panic!("apiserver: bind 127.0.0.1:0: {e}"),
        };
        let addr = match listener.local_addr() {
            Ok(addr) => addr,
            Err(e) => panic!("apiserver: local_addr: {e}"),
        };
        let shared = Arc::new(Shared {
            addr,
            state: Mutex::new(State::new(addr.port())),
        });
        let task = tokio::spawn(serve(listener, Arc::clone(&shared)));
        let server = ApiServer {
            shared,
            _task: Arc::new(TaskGuard(task)),
        };
        server.register("v1", "namespaces", "Namespace", false, true);
        server.register("v1", "secrets", "Secret", true, false);
        for (plural, kind) in [
            (
                "mutatingwebhookconfigurations",
                "MutatingWebhookConfiguration",
            ),
            (
                "validatingwebhookconfigurations",
                "ValidatingWebhookConfiguration",
            ),
        ] {
            server.register(
                "admissionregistration.k8s.io/v1",
                plural,
                kind,
                false,
                false,
            );
        }
        for (plural, kind) in [
            ("assign", "Assign"),
            ("assignimage", "AssignImage"),
            ("assignmetadata", "AssignMetadata"),
            ("modifyset", "ModifySet"),
        ] {
            server.register("mutations.sartor.dev/v1", plural, kind, false, true);
        }
        server
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.shared.addr)
    }

    /// Writes a kubeconfig (cluster `server` = [`ApiServer::url`], no
    /// credentials, context `sartor-test` current, with `namespace`) for
    /// running a real binary with `KUBECONFIG=path`.
    ///
    /// # Panics
    /// If the file cannot be written.
    #[allow(clippy::panic, reason = "test support: a test cannot go on without it")]
    pub fn write_kubeconfig(&self, path: &Path, namespace: &str) {
        let text = format!(
            "apiVersion: v1\n\
             kind: Config\n\
             clusters:\n\
             - name: sartor-test\n  cluster:\n    server: {url}\n\
             users:\n\
             - name: sartor-test\n  user: {{}}\n\
             contexts:\n\
             - name: sartor-test\n  context:\n    cluster: sartor-test\n    user: sartor-test\n    namespace: {namespace}\n\
             current-context: sartor-test\n\
             preferences: {{}}\n",
            url = self.url(),
            namespace = json!(namespace),
        );
        if let Err(e) = std::fs::write(path, text) {
            panic!("apiserver: write {}: {e}", path.display());
        }
    }

    /// Makes a resource routable and discoverable (registering the same
    /// `api_version` and `plural` again replaces it). `api_version` is `v1`
    /// for the core group, else `GROUP/VERSION`.
    pub fn register(
        &self,
        api_version: &str,
        plural: &str,
        kind: &str,
        namespaced: bool,
        status_subresource: bool,
    ) {
        let (group, version) = split_api_version(api_version);
        let resource = Resource {
            group: group.to_string(),
            version: version.to_string(),
            plural: plural.to_string(),
            kind: kind.to_string(),
            namespaced,
            status: status_subresource,
        };
        let mut state = self.shared.lock();
        match state
            .resources
            .iter_mut()
            .find(|r| r.api_version() == api_version && r.plural == plural)
        {
            Some(existing) => *existing = resource,
            None => state.resources.push(resource),
        }
    }

    /// Creates or replaces an object directly, not recorded as a call and
    /// without preconditions: keeps the stored `uid` and `creationTimestamp`
    /// (else fills them), sets `resourceVersion` from the global counter and
    /// `generation` (1 when new, +1 when anything but `metadata`/`status`
    /// changed), applies the defaults listed on [`ApiServer`], and tells
    /// watchers (ADDED or MODIFIED). `status` is stored as given. Returns the
    /// stored object (unchanged, and no event, if nothing changed).
    ///
    /// # Panics
    /// If the object has no `apiVersion`, `kind` or `metadata.name`.
    #[allow(
        clippy::panic,
        reason = "test support: a malformed fixture is a bug in the test"
    )]
    pub fn put(&self, object: Value) -> Value {
        let Some(key) = key_of(&object) else {
            panic!("apiserver: put needs apiVersion, kind and metadata.name: {object}");
        };
        let Value::Object(object) = object else {
            panic!("apiserver: put needs an object");
        };
        self.shared.lock().commit(&key, object)
    }

    /// Deletes an object directly (finalizers ignored), telling watchers
    /// (DELETED, carrying a new `resourceVersion`). False if there was none.
    pub fn delete(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> bool {
        let key = ObjKey::new(api_version, kind, namespace, name);
        self.shared.lock().remove(&key).is_some()
    }

    /// The stored object, if any.
    pub fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let key = ObjKey::new(api_version, kind, namespace, name);
        self.shared.lock().objects.get(&key).cloned()
    }

    /// Every HTTP request received so far, in order (failed and held ones too).
    pub fn calls(&self) -> Vec<Call> {
        self.shared.lock().calls.clone()
    }

    /// Forgets the recorded calls.
    pub fn clear_calls(&self) {
        self.shared.lock().calls.clear();
    }

    /// The next `times` requests with `method` and exactly `path` (no query)
    /// are answered with `status` and a Kubernetes `Status` body (500 is
    /// `InternalError`, 409 `Conflict`, 429 `TooManyRequests`, ...), before
    /// any hold. Watch requests to a collection path match too.
    pub fn fail(&self, method: &str, path: &str, status: u16, times: usize) {
        if times == 0 {
            return;
        }
        self.shared.lock().failures.push(Failure {
            method: method.to_ascii_uppercase(),
            path: path.to_string(),
            status,
            remaining: times,
        });
    }

    /// Non-watch `GET` requests to exactly `path` (a collection: lists; an
    /// object path holds gets) wait until the returned [`Hold`] is released
    /// or dropped, then are answered from the state at that moment. They are
    /// recorded on arrival.
    pub fn hold(&self, path: &str) -> Hold {
        let (tx, rx) = watch::channel(false);
        let mut state = self.shared.lock();
        state.next_hold += 1;
        let id = state.next_hold;
        state.holds.push(HoldEntry {
            id,
            path: path.to_string(),
            released: rx,
        });
        drop(state);
        Hold {
            id,
            shared: Arc::clone(&self.shared),
            _release: tx,
        }
    }

    /// The first recorded call (from the start, not only new ones) matching
    /// `pred`, polling every 5 ms until `timeout`.
    pub async fn wait_for_call(
        &self,
        pred: impl Fn(&Call) -> bool,
        timeout: Duration,
    ) -> Option<Call> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(call) = self.shared.lock().calls.iter().find(|c| pred(c)) {
                return Some(call.clone());
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The current global `resourceVersion` (that of the last write).
    pub fn resource_version(&self) -> u64 {
        self.shared.lock().resource_version
    }

    /// Number of watch streams currently open (closed ones are noticed on
    /// the next event sent).
    pub fn open_watches(&self) -> usize {
        let mut state = self.shared.lock();
        state.watchers.retain(|w| !w.tx.is_closed());
        state.watchers.len()
    }
}

async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    // Dropped (and so aborted) with this task: open connections and watches.
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let Ok((stream, _)) = listener.accept().await else {
            // Out of file descriptors or the like: do not spin.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let shared = Arc::clone(&shared);
        connections.spawn(async move {
            let service = service_fn(move |req| handle(Arc::clone(&shared), req));
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            // A connection error (client gone) ends only that connection.
            let _ = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

type Reply = hyper::Response<Either<Full<Bytes>, WatchBody>>;

async fn handle(shared: Arc<Shared>, req: hyper::Request<Incoming>) -> Result<Reply, Infallible> {
    let (parts, body) = req.into_parts();
    let bytes = body
        .collect()
        .await
        .map(http_body_util::Collected::to_bytes)
        .unwrap_or_default();
    let header = |name| {
        parts
            .headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
            .map(str::to_string)
    };
    let call = Call {
        method: parts.method.as_str().to_string(),
        path: parts.uri.path().to_string(),
        query: parse_query(parts.uri.query().unwrap_or("")),
        content_type: header(CONTENT_TYPE),
        body: (!bytes.is_empty()).then(|| {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        }),
    };
    let accept = header(ACCEPT).unwrap_or_default();
    let holds: Vec<watch::Receiver<bool>> = {
        let mut state = shared.lock();
        state.calls.push(call.clone());
        if let Some(code) = state.take_failure(&call.method, &call.path) {
            return Ok(json_reply(code, &injected_failure(code)));
        }
        if call.method == "GET" && !call.is_watch() {
            state
                .holds
                .iter()
                .filter(|h| h.path == call.path)
                .map(|h| h.released.clone())
                .collect()
        } else {
            Vec::new()
        }
    };
    for mut released in holds {
        // An error means the Hold was dropped: released as well.
        let _ = released.wait_for(|r| *r).await;
    }
    let reply = shared.lock().dispatch(&call, &accept, shared.addr);
    Ok(reply)
}

fn json_reply(code: u16, body: &Value) -> Reply {
    json_reply_typed(code, body, "application/json")
}

fn json_reply_typed(code: u16, body: &Value, content_type: &'static str) -> Reply {
    let mut reply = hyper::Response::new(Either::Left(Full::new(Bytes::from(body.to_string()))));
    *reply.status_mut() =
        hyper::StatusCode::from_u16(code).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    reply
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    reply
}

fn text_reply(code: u16, body: &'static str) -> Reply {
    let mut reply = json_reply(code, &Value::Null);
    *reply.body_mut() = Either::Left(Full::new(Bytes::from_static(body.as_bytes())));
    reply.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    reply
}

/// The streaming body of a watch: events as they are sent, until the
/// deadline (`timeoutSeconds`) or the server goes away.
struct WatchBody {
    events: mpsc::UnboundedReceiver<Bytes>,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl hyper::body::Body for WatchBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        if let Some(deadline) = this.deadline.as_mut()
            && deadline.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(None);
        }
        this.events
            .poll_recv(cx)
            .map(|event| event.map(|bytes| Ok(Frame::data(bytes))))
    }
}

// ---------------------------------------------------------------------------
// State

#[derive(Debug, Clone, PartialEq, Eq)]
struct Resource {
    group: String,
    version: String,
    plural: String,
    kind: String,
    namespaced: bool,
    status: bool,
}

impl Resource {
    fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `secrets`, `assign.mutations.sartor.dev`: how Kubernetes names the
    /// resource in messages.
    fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// `details` of a Status about `name`.
    fn details(&self, name: &str) -> Value {
        let mut details = Map::new();
        details.insert("name".into(), json!(name));
        if !self.group.is_empty() {
            details.insert("group".into(), json!(self.group));
        }
        details.insert("kind".into(), json!(self.plural));
        Value::Object(details)
    }

    /// Built-in resources allow updates without `resourceVersion`; custom
    /// resources do not.
    fn builtin(&self) -> bool {
        self.group.is_empty()
            || self.group.ends_with(".k8s.io")
            || ["apps", "batch", "autoscaling", "policy"].contains(&self.group.as_str())
    }

    fn key(&self, namespace: Option<&str>, name: &str) -> ObjKey {
        ObjKey::new(&self.api_version(), &self.kind, namespace, name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ObjKey {
    api_version: String,
    kind: String,
    /// Empty for cluster-scoped objects.
    namespace: String,
    name: String,
}

impl ObjKey {
    fn new(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> ObjKey {
        ObjKey {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            namespace: namespace.unwrap_or_default().to_string(),
            name: name.to_string(),
        }
    }
}

fn key_of(object: &Value) -> Option<ObjKey> {
    let meta = object.get("metadata");
    Some(ObjKey::new(
        object.get("apiVersion")?.as_str()?,
        object.get("kind")?.as_str()?,
        meta.and_then(|m| m.get("namespace"))
            .and_then(Value::as_str)
            .filter(|ns| !ns.is_empty()),
        meta?.get("name")?.as_str()?,
    ))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EventType {
    Added,
    Modified,
    Deleted,
}

/// One change, kept forever for watch replay.
struct Change {
    rv: u64,
    key: ObjKey,
    kind: EventType,
    object: Value,
    /// The object before a MODIFIED, for selector transitions.
    prev: Option<Value>,
}

struct Watcher {
    scope: Scope,
    tx: mpsc::UnboundedSender<Bytes>,
}

struct Failure {
    method: String,
    path: String,
    status: u16,
    remaining: usize,
}

struct HoldEntry {
    id: u64,
    path: String,
    released: watch::Receiver<bool>,
}

/// What one field manager owns in an object's status, from its last apply.
#[derive(Debug, Clone, Default)]
struct Owned {
    by_pod: BTreeSet<String>,
    keys: BTreeSet<String>,
}

struct State {
    port: u16,
    resources: Vec<Resource>,
    objects: BTreeMap<ObjKey, Value>,
    resource_version: u64,
    history: Vec<Change>,
    watchers: Vec<Watcher>,
    calls: Vec<Call>,
    failures: Vec<Failure>,
    holds: Vec<HoldEntry>,
    next_hold: u64,
    next_uid: u64,
    /// Status ownership by object, then by field manager.
    ownership: BTreeMap<ObjKey, BTreeMap<String, Owned>>,
}

/// A failed request: HTTP code and `Status` body.
struct ApiError {
    code: u16,
    body: Value,
}

type ApiResult = Result<(u16, Value), ApiError>;

fn status_error(code: u16, reason: &str, message: impl Into<String>, details: Value) -> ApiError {
    ApiError {
        code,
        body: json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message.into(),
            "reason": reason,
            "details": details,
            "code": code,
        }),
    }
}

fn bad_request(message: impl Into<String>) -> ApiError {
    status_error(400, "BadRequest", message, Value::Null).without_details()
}

impl ApiError {
    fn without_details(mut self) -> ApiError {
        if let Some(body) = self.body.as_object_mut() {
            body.remove("details");
        }
        self
    }
}

fn not_found_path() -> ApiError {
    status_error(
        404,
        "NotFound",
        "the server could not find the requested resource",
        json!({}),
    )
}

fn method_not_allowed() -> ApiError {
    status_error(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
        json!({}),
    )
}

fn not_found(res: &Resource, name: &str) -> ApiError {
    status_error(
        404,
        "NotFound",
        format!("{} \"{name}\" not found", res.group_resource()),
        res.details(name),
    )
}

fn conflict(res: &Resource, name: &str) -> ApiError {
    status_error(
        409,
        "Conflict",
        format!(
            "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
             please apply your changes to the latest version and try again",
            res.group_resource()
        ),
        res.details(name),
    )
}

fn invalid(res: &Resource, name: &str, field: &str, reason: &str, message: &str) -> ApiError {
    let kind = if res.group.is_empty() {
        res.kind.clone()
    } else {
        format!("{}.{}", res.kind, res.group)
    };
    let mut details = res.details(name);
    if let Some(d) = details.as_object_mut() {
        d.insert("kind".into(), json!(res.kind));
        d.insert(
            "causes".into(),
            json!([{"reason": reason, "message": message, "field": field}]),
        );
    }
    status_error(
        422,
        "Invalid",
        format!("{kind} \"{name}\" is invalid: {field}: {message}"),
        details,
    )
}

fn injected_failure(code: u16) -> Value {
    let (reason, message) = match code {
        400 => ("BadRequest", "injected failure".to_string()),
        401 => ("Unauthorized", "Unauthorized".to_string()),
        403 => ("Forbidden", "forbidden: injected failure".to_string()),
        404 => (
            "NotFound",
            "the server could not find the requested resource".to_string(),
        ),
        405 => (
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource".to_string(),
        ),
        409 => ("Conflict", "injected conflict".to_string()),
        410 => ("Expired", "too old resource version".to_string()),
        422 => ("Invalid", "injected failure".to_string()),
        429 => ("TooManyRequests", "injected failure".to_string()),
        500 => (
            "InternalError",
            "Internal error occurred: injected failure".to_string(),
        ),
        503 => ("ServiceUnavailable", "injected failure".to_string()),
        504 => ("Timeout", "injected failure".to_string()),
        _ => ("", format!("injected failure {code}")),
    };
    let mut body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "code": code,
    });
    if !reason.is_empty()
        && let Some(b) = body.as_object_mut()
    {
        b.insert("reason".into(), json!(reason));
    }
    body
}

/// Where a request path leads.
enum Target {
    Version,
    CoreVersions,
    Groups,
    Group(String),
    GroupVersion(String, String),
    Collection {
        res: Resource,
        namespace: Option<String>,
    },
    Object {
        res: Resource,
        namespace: Option<String>,
        name: String,
        status: bool,
    },
    Health,
    Unknown,
}

impl State {
    fn new(port: u16) -> State {
        State {
            port,
            resources: Vec::new(),
            objects: BTreeMap::new(),
            resource_version: 0,
            history: Vec::new(),
            watchers: Vec::new(),
            calls: Vec::new(),
            failures: Vec::new(),
            holds: Vec::new(),
            next_hold: 0,
            next_uid: 0,
            ownership: BTreeMap::new(),
        }
    }

    fn take_failure(&mut self, method: &str, path: &str) -> Option<u16> {
        let failure = self
            .failures
            .iter_mut()
            .find(|f| f.method == method && f.path == path && f.remaining > 0)?;
        failure.remaining -= 1;
        let status = failure.status;
        self.failures.retain(|f| f.remaining > 0);
        Some(status)
    }

    fn resource(&self, group: &str, version: &str, plural: &str) -> Option<&Resource> {
        self.resources
            .iter()
            .find(|r| r.group == group && r.version == version && r.plural == plural)
    }

    fn route(&self, path: &str) -> Target {
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        match segments.as_slice() {
            ["version"] => Target::Version,
            ["healthz" | "readyz" | "livez"] => Target::Health,
            ["api"] => Target::CoreVersions,
            ["apis"] => Target::Groups,
            ["apis", group] => Target::Group((*group).to_string()),
            ["api", version, rest @ ..] => self.route_in("", version, rest),
            ["apis", group, version, rest @ ..] => self.route_in(group, version, rest),
            _ => Target::Unknown,
        }
    }

    fn route_in(&self, group: &str, version: &str, rest: &[&str]) -> Target {
        if !self
            .resources
            .iter()
            .any(|r| r.group == group && r.version == version)
        {
            return Target::Unknown;
        }
        let namespaced = match rest {
            ["namespaces", namespace, plural, tail @ ..] => self
                .resource(group, version, plural)
                .filter(|r| r.namespaced)
                .map(|r| (r.clone(), Some((*namespace).to_string()), tail)),
            _ => None,
        };
        let (res, namespace, tail) = match (namespaced, rest) {
            (Some(found), _) => found,
            (None, []) => return Target::GroupVersion(group.to_string(), version.to_string()),
            (None, [plural, tail @ ..]) => match self.resource(group, version, plural) {
                // A namespaced resource without a namespace: only the
                // all-namespaces collection.
                Some(r) if !r.namespaced || tail.is_empty() => (r.clone(), None, tail),
                _ => return Target::Unknown,
            },
        };
        match tail {
            [] => Target::Collection { res, namespace },
            [name] => Target::Object {
                res,
                namespace,
                name: (*name).to_string(),
                status: false,
            },
            [name, "status"] if res.status => Target::Object {
                res,
                namespace,
                name: (*name).to_string(),
                status: true,
            },
            _ => Target::Unknown,
        }
    }

    fn dispatch(&mut self, call: &Call, accept: &str, addr: SocketAddr) -> Reply {
        let aggregated = accept.contains("as=APIGroupDiscoveryList");
        let get = call.method == "GET";
        let result = match self.route(&call.path) {
            Target::Health if get => return text_reply(200, "ok"),
            Target::Version if get => Ok((200, version_info())),
            Target::CoreVersions if get && aggregated => {
                return json_reply_typed(200, &self.aggregated(true), AGGREGATED_CONTENT_TYPE);
            }
            Target::Groups if get && aggregated => {
                return json_reply_typed(200, &self.aggregated(false), AGGREGATED_CONTENT_TYPE);
            }
            Target::CoreVersions if get => Ok((
                200,
                json!({
                    "kind": "APIVersions",
                    "versions": self.versions_of(""),
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": addr.to_string()}
                    ],
                }),
            )),
            Target::Groups if get => Ok((
                200,
                json!({
                    "kind": "APIGroupList",
                    "apiVersion": "v1",
                    "groups": self.groups().iter().map(|g| self.api_group(g)).collect::<Vec<_>>(),
                }),
            )),
            Target::Group(group) if get => {
                if self.groups().contains(&group) {
                    Ok((200, self.api_group(&group)))
                } else {
                    Err(not_found_path())
                }
            }
            Target::GroupVersion(group, version) if get => {
                Ok((200, self.resource_list(&group, &version)))
            }
            Target::Collection { res, namespace } => match call.method.as_str() {
                "GET" if call.is_watch() => return self.watch(&res, namespace, &call.query),
                "GET" => self.list(&res, namespace.as_deref(), &call.query),
                "POST" => match namespace {
                    Some(ns) => self.create(&res, Some(&ns), call.body.as_ref()),
                    None if !res.namespaced => self.create(&res, None, call.body.as_ref()),
                    None => Err(method_not_allowed()),
                },
                "DELETE" if namespace.is_some() || !res.namespaced => {
                    self.delete_collection(&res, namespace.as_deref(), &call.query)
                }
                _ => Err(method_not_allowed()),
            },
            Target::Object {
                res,
                namespace,
                name,
                status,
            } => {
                let key = res.key(namespace.as_deref(), &name);
                match call.method.as_str() {
                    "GET" => self
                        .objects
                        .get(&key)
                        .map(|o| (200, o.clone()))
                        .ok_or_else(|| not_found(&res, &name)),
                    "PUT" => self.replace(&res, &key, status, call.body.as_ref()),
                    "PATCH" => self.patch(&res, &key, status, call),
                    "DELETE" if !status => self.delete_object(&res, &key),
                    _ => Err(method_not_allowed()),
                }
            }
            Target::Unknown => Err(not_found_path()),
            _ => Err(method_not_allowed()),
        };
        match result {
            Ok((code, body)) => json_reply(code, &body),
            Err(e) => json_reply(e.code, &e.body),
        }
    }

    // ---- discovery

    /// Groups in registration order (the core group excluded).
    fn groups(&self) -> Vec<String> {
        let mut groups: Vec<String> = Vec::new();
        for r in &self.resources {
            if !r.group.is_empty() && !groups.contains(&r.group) {
                groups.push(r.group.clone());
            }
        }
        groups
    }

    fn versions_of(&self, group: &str) -> Vec<String> {
        let mut versions: Vec<String> = Vec::new();
        for r in self.resources.iter().filter(|r| r.group == group) {
            if !versions.contains(&r.version) {
                versions.push(r.version.clone());
            }
        }
        versions
    }

    fn api_group(&self, group: &str) -> Value {
        let versions: Vec<Value> = self
            .versions_of(group)
            .iter()
            .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
            .collect();
        json!({
            "kind": "APIGroup",
            "apiVersion": "v1",
            "name": group,
            "versions": versions,
            "preferredVersion": versions.first().cloned().unwrap_or(Value::Null),
        })
    }

    fn resource_list(&self, group: &str, version: &str) -> Value {
        let mut resources = Vec::new();
        for r in self
            .resources
            .iter()
            .filter(|r| r.group == group && r.version == version)
        {
            resources.push(json!({
                "name": r.plural,
                "singularName": r.kind.to_lowercase(),
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": VERBS,
            }));
            if r.status {
                resources.push(json!({
                    "name": format!("{}/status", r.plural),
                    "singularName": "",
                    "namespaced": r.namespaced,
                    "kind": r.kind,
                    "verbs": STATUS_VERBS,
                }));
            }
        }
        let group_version = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group_version,
            "resources": resources,
        })
    }

    /// Aggregated discovery (`apidiscovery.k8s.io/v2`) of the core group
    /// (`core`) or of the named groups.
    fn aggregated(&self, core: bool) -> Value {
        let groups = if core {
            vec![String::new()]
        } else {
            self.groups()
        };
        let items: Vec<Value> = groups
            .iter()
            .map(|group| {
                let versions: Vec<Value> = self
                    .versions_of(group)
                    .iter()
                    .map(|version| {
                        let resources: Vec<Value> = self
                            .resources
                            .iter()
                            .filter(|r| &r.group == group && &r.version == version)
                            .map(|r| {
                                let gvk = json!({"group": group, "version": version, "kind": r.kind});
                                let subresources: Vec<Value> = if r.status {
                                    vec![json!({"subresource": "status", "responseKind": gvk, "verbs": STATUS_VERBS})]
                                } else {
                                    Vec::new()
                                };
                                json!({
                                    "resource": r.plural,
                                    "responseKind": gvk,
                                    "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                                    "singularResource": r.kind.to_lowercase(),
                                    "verbs": VERBS,
                                    "subresources": subresources,
                                })
                            })
                            .collect();
                        json!({"version": version, "resources": resources, "freshness": "Current"})
                    })
                    .collect();
                let metadata = if group.is_empty() {
                    json!({"creationTimestamp": null})
                } else {
                    json!({"name": group, "creationTimestamp": null})
                };
                json!({"metadata": metadata, "versions": versions})
            })
            .collect();
        json!({
            "kind": "APIGroupDiscoveryList",
            "apiVersion": "apidiscovery.k8s.io/v2",
            "metadata": {},
            "items": items,
        })
    }

    // ---- reads

    fn list(
        &self,
        res: &Resource,
        namespace: Option<&str>,
        query: &BTreeMap<String, String>,
    ) -> ApiResult {
        let scope = Scope::new(res, namespace, query)?;
        let items: Vec<Value> = self
            .objects
            .iter()
            .filter(|(key, object)| scope.selects(key, object))
            .map(|(_, object)| object.clone())
            .collect();
        Ok((200, self.list_of(res, items)))
    }

    fn list_of(&self, res: &Resource, items: Vec<Value>) -> Value {
        json!({
            "apiVersion": res.api_version(),
            "kind": format!("{}List", res.kind),
            "metadata": {"resourceVersion": self.resource_version.to_string()},
            "items": items,
        })
    }

    fn watch(
        &mut self,
        res: &Resource,
        namespace: Option<String>,
        query: &BTreeMap<String, String>,
    ) -> Reply {
        let scope = match Scope::new(res, namespace.as_deref(), query) {
            Ok(scope) => scope,
            Err(e) => return json_reply(e.code, &e.body),
        };
        let rv = query.get("resourceVersion").map_or("", String::as_str);
        let initial_events = query.get("sendInitialEvents").is_some_and(|v| v == "true");
        let (tx, rx) = mpsc::unbounded_channel();
        // Under the lock: what is replayed now plus what is sent later is
        // every change exactly once.
        if initial_events || rv.is_empty() || rv == "0" {
            for (key, object) in &self.objects {
                if scope.selects(key, object) {
                    let _ = tx.send(event_line("ADDED", object));
                }
            }
            if initial_events {
                let bookmark = json!({
                    "apiVersion": res.api_version(),
                    "kind": res.kind,
                    "metadata": {
                        "resourceVersion": self.resource_version.to_string(),
                        "annotations": {"k8s.io/initial-events-end": "true"},
                    },
                });
                let _ = tx.send(event_line("BOOKMARK", &bookmark));
            }
        } else {
            let Ok(from) = rv.parse::<u64>() else {
                let e = bad_request(format!("invalid resource version: {rv:?}"));
                return json_reply(e.code, &e.body);
            };
            for change in self.history.iter().filter(|c| c.rv > from) {
                if let Some((kind, object)) = scope.translate(change) {
                    let _ = tx.send(event_line(kind, object));
                }
            }
        }
        self.watchers.push(Watcher { scope, tx });
        let deadline = query
            .get("timeoutSeconds")
            .and_then(|t| t.parse::<u64>().ok())
            .filter(|t| *t > 0)
            .map(|t| Box::pin(tokio::time::sleep(Duration::from_secs(t))));
        let mut reply = hyper::Response::new(Either::Right(WatchBody {
            events: rx,
            deadline,
        }));
        reply
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        reply
    }

    // ---- writes

    fn create(
        &mut self,
        res: &Resource,
        namespace: Option<&str>,
        body: Option<&Value>,
    ) -> ApiResult {
        let Some(Value::Object(mut object)) = body.cloned() else {
            return Err(bad_request(
                "the body of the request was in an unknown format",
            ));
        };
        let meta = metadata_mut(&mut object);
        let body_namespace = meta.get("namespace").and_then(Value::as_str).unwrap_or("");
        match namespace {
            Some(ns) => {
                if !body_namespace.is_empty() && body_namespace != ns {
                    return Err(bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                meta.insert("namespace".into(), json!(ns));
            }
            None => {
                meta.remove("namespace");
            }
        }
        let name = match meta.get("name").and_then(Value::as_str) {
            Some(name) if !name.is_empty() => name.to_string(),
            _ => match meta.get("generateName").and_then(Value::as_str) {
                Some(prefix) if !prefix.is_empty() => {
                    let name = format!("{prefix}{}", generated_suffix(self.next_uid + 1));
                    meta.insert("name".into(), json!(name));
                    name
                }
                _ => {
                    return Err(invalid(
                        res,
                        "",
                        "metadata.name",
                        "FieldValueRequired",
                        "Required value: name or generateName is required",
                    ));
                }
            },
        };
        // System fields are the server's, as on a real create.
        for field in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
            "deletionTimestamp",
        ] {
            meta.remove(field);
        }
        let key = res.key(namespace, &name);
        if self.objects.contains_key(&key) {
            return Err(status_error(
                409,
                "AlreadyExists",
                format!("{} \"{name}\" already exists", res.group_resource()),
                res.details(&name),
            ));
        }
        if res.status {
            object.remove("status");
        }
        Ok((201, self.commit(&key, object)))
    }

    fn replace(
        &mut self,
        res: &Resource,
        key: &ObjKey,
        status: bool,
        body: Option<&Value>,
    ) -> ApiResult {
        let Some(prev) = self.objects.get(key).cloned() else {
            return Err(not_found(res, &key.name));
        };
        let Some(Value::Object(body)) = body.cloned() else {
            return Err(bad_request(
                "the body of the request was in an unknown format",
            ));
        };
        let body_meta = body.get("metadata");
        if let Some(name) = body_meta
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            && name != key.name
        {
            return Err(bad_request(format!(
                "the name of the object ({name}) does not match the name on the URL ({})",
                key.name
            )));
        }
        match body_meta
            .and_then(|m| m.get("resourceVersion"))
            .and_then(Value::as_str)
            .filter(|rv| !rv.is_empty())
        {
            Some(rv) if Some(rv) != resource_version_of(&prev) => {
                return Err(conflict(res, &key.name));
            }
            Some(_) => {}
            None if !res.builtin() => {
                return Err(invalid(
                    res,
                    &key.name,
                    "metadata.resourceVersion",
                    "FieldValueInvalid",
                    "Invalid value: 0x0: must be specified for an update",
                ));
            }
            None => {}
        }
        let object = restrict(res, status, &prev, body);
        Ok((200, self.commit(key, object)))
    }

    fn patch(&mut self, res: &Resource, key: &ObjKey, status: bool, call: &Call) -> ApiResult {
        let content_type = call
            .content_type
            .as_deref()
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        let apply = content_type == "application/apply-patch+yaml";
        let field_manager = call.query.get("fieldManager").filter(|m| !m.is_empty());
        if apply && field_manager.is_none() {
            return Err(patch_options_invalid(
                "fieldManager",
                "FieldValueRequired",
                "Required value: is required for apply patch",
            ));
        }
        if !apply && call.query.contains_key("force") {
            return Err(patch_options_invalid(
                "force",
                "FieldValueForbidden",
                "Forbidden: may not be specified for non-apply patch",
            ));
        }
        let Some(body) = call.body.clone() else {
            return Err(bad_request("empty patch"));
        };
        let prev = self.objects.get(key).cloned();
        let current = match (&prev, apply && !status) {
            (Some(prev), _) => prev.clone(),
            // Apply creates a missing object; other patches do not.
            (None, true) => json!({}),
            (None, false) => return Err(not_found(res, &key.name)),
        };
        let patched = match content_type.as_str() {
            "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
                if !body.is_object() {
                    return Err(bad_request("error decoding patch: not a JSON object"));
                }
                let mut doc = current;
                json_patch::merge(&mut doc, &body);
                doc
            }
            "application/json-patch+json" => {
                let operations: json_patch::Patch = serde_json::from_value(body)
                    .map_err(|e| bad_request(format!("error decoding patch: {e}")))?;
                let mut doc = current;
                json_patch::patch(&mut doc, &operations.0).map_err(|e| {
                    status_error(422, "Invalid", e.to_string(), Value::Null).without_details()
                })?;
                doc
            }
            "application/apply-patch+yaml" => {
                let Value::Object(applied) = &body else {
                    return Err(bad_request(
                        "error decoding YAML: the apply patch is not a JSON object",
                    ));
                };
                for field in ["apiVersion", "kind"] {
                    if applied
                        .get(field)
                        .and_then(Value::as_str)
                        .is_none_or(str::is_empty)
                    {
                        let field = if field == "kind" { "Kind" } else { field };
                        return Err(bad_request(format!(
                            "Object '{field}' is missing in '{body}'"
                        )));
                    }
                }
                if let Some(name) = applied
                    .get("metadata")
                    .and_then(|m| m.get("name"))
                    .and_then(Value::as_str)
                    && name != key.name
                {
                    return Err(bad_request(format!(
                        "the name of the object ({name}) does not match the name on the URL ({})",
                        key.name
                    )));
                }
                let manager = field_manager.map_or("", String::as_str);
                if status {
                    let Some(prev) = &prev else {
                        return Err(not_found(res, &key.name));
                    };
                    check_precondition(res, key, prev, &body)?;
                    let object = self.apply_status(key, prev, applied, manager);
                    return Ok((200, self.commit(key, object)));
                }
                let mut doc = current;
                json_patch::merge(&mut doc, &body);
                doc
            }
            other => {
                return Err(status_error(
                    415,
                    "UnsupportedMediaType",
                    format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got {other:?})"),
                    Value::Null,
                )
                .without_details());
            }
        };
        let Value::Object(patched) = patched else {
            return Err(bad_request("the patched object is not a JSON object"));
        };
        let Some(prev) = prev else {
            // Apply creating the object.
            let mut object = patched;
            let meta = metadata_mut(&mut object);
            for field in ["uid", "resourceVersion", "creationTimestamp", "generation"] {
                meta.remove(field);
            }
            if res.status {
                object.remove("status");
            }
            return Ok((201, self.commit(key, object)));
        };
        if let Some(rv) = patched
            .get("metadata")
            .and_then(|m| m.get("resourceVersion"))
            .and_then(Value::as_str)
            .filter(|rv| !rv.is_empty())
            && Some(rv) != resource_version_of(&prev)
        {
            return Err(conflict(res, &key.name));
        }
        let object = restrict(res, status, &prev, patched);
        Ok((200, self.commit(key, object)))
    }

    /// Server-side apply of `applied.status` by `manager`: `status.byPod` as
    /// a list-map keyed by `id`, each manager owning the entries of its last
    /// apply; other status fields owned by the managers that set them.
    fn apply_status(
        &mut self,
        key: &ObjKey,
        prev: &Value,
        applied: &Map<String, Value>,
        manager: &str,
    ) -> Map<String, Value> {
        let applied_status = applied
            .get("status")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut object = prev.as_object().cloned().unwrap_or_default();
        let mut status = object
            .get("status")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let managers = self.ownership.entry(key.clone()).or_default();
        let mine = managers.get(manager).cloned().unwrap_or_default();
        let mut others = Owned::default();
        for (name, owned) in managers.iter() {
            if name != manager {
                others.by_pod.extend(owned.by_pod.iter().cloned());
                others.keys.extend(owned.keys.iter().cloned());
            }
        }

        let new_entries: Vec<Value> = applied_status
            .get("byPod")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let new_ids: BTreeSet<String> = new_entries.iter().map(entry_id).collect();
        let mut entries: Vec<Value> = status
            .get("byPod")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        entries.retain(|e| {
            let id = entry_id(e);
            // Re-applied entries are replaced; this manager's dropped ones
            // go unless another manager still owns them.
            let replaced = new_ids.contains(&id);
            let dropped = mine.by_pod.contains(&id) && !others.by_pod.contains(&id);
            !replaced && !dropped
        });
        entries.extend(new_entries);
        entries.sort_by_key(entry_id);
        if entries.is_empty() {
            status.remove("byPod");
        } else {
            status.insert("byPod".into(), Value::Array(entries));
        }

        let mut keys = BTreeSet::new();
        for (field, value) in &applied_status {
            if field != "byPod" {
                status.insert(field.clone(), value.clone());
                keys.insert(field.clone());
            }
        }
        for field in &mine.keys {
            if !keys.contains(field) && !others.keys.contains(field) {
                status.remove(field);
            }
        }
        managers.insert(
            manager.to_string(),
            Owned {
                by_pod: new_ids,
                keys,
            },
        );

        if status.is_empty() {
            object.remove("status");
        } else {
            object.insert("status".into(), Value::Object(status));
        }
        object
    }

    fn delete_object(&mut self, res: &Resource, key: &ObjKey) -> ApiResult {
        let Some(prev) = self.objects.get(key).cloned() else {
            return Err(not_found(res, &key.name));
        };
        let has_finalizers = prev
            .get("metadata")
            .and_then(|m| m.get("finalizers"))
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        if !has_finalizers {
            return Ok((200, self.remove(key).unwrap_or(prev)));
        }
        let Value::Object(mut object) = prev.clone() else {
            return Ok((200, prev));
        };
        let meta = metadata_mut(&mut object);
        if meta.get("deletionTimestamp").is_some() {
            return Ok((200, prev));
        }
        meta.insert("deletionTimestamp".into(), json!(now_rfc3339()));
        meta.insert("deletionGracePeriodSeconds".into(), json!(0));
        Ok((200, self.commit(key, object)))
    }

    fn delete_collection(
        &mut self,
        res: &Resource,
        namespace: Option<&str>,
        query: &BTreeMap<String, String>,
    ) -> ApiResult {
        let scope = Scope::new(res, namespace, query)?;
        let keys: Vec<ObjKey> = self
            .objects
            .iter()
            .filter(|(key, object)| scope.selects(key, object))
            .map(|(key, _)| key.clone())
            .collect();
        let mut items = Vec::new();
        for key in keys {
            if let Ok((_, object)) = self.delete_object(res, &key) {
                items.push(object);
            }
        }
        Ok((200, self.list_of(res, items)))
    }

    /// Stores `object` under `key` (see [`ApiServer::put`]) and tells
    /// watchers; an object whose deletion waited for finalizers goes when
    /// they are gone. Returns what was stored (or deleted).
    fn commit(&mut self, key: &ObjKey, mut object: Map<String, Value>) -> Value {
        let prev = self.objects.get(key).cloned();
        object.insert("apiVersion".into(), json!(key.api_version));
        object.insert("kind".into(), json!(key.kind));
        apply_defaults(key, &mut object);
        let meta = metadata_mut(&mut object);
        meta.insert("name".into(), json!(key.name));
        if key.namespace.is_empty() {
            meta.remove("namespace");
        } else {
            meta.insert("namespace".into(), json!(key.namespace));
        }
        match &prev {
            Some(prev) => {
                let prev_meta = prev.get("metadata");
                for field in ["uid", "creationTimestamp"] {
                    match prev_meta.and_then(|m| m.get(field)) {
                        Some(v) => meta.insert(field.into(), v.clone()),
                        None => meta.remove(field),
                    };
                }
                let newly_deleted = meta.contains_key("deletionTimestamp")
                    && prev_meta.and_then(|m| m.get("deletionTimestamp")).is_none();
                let generation = prev_meta
                    .and_then(|m| m.get("generation"))
                    .and_then(Value::as_i64)
                    .unwrap_or(1);
                meta.insert("generation".into(), json!(generation));
                if let Some(rv) = prev_meta.and_then(|m| m.get("resourceVersion")) {
                    meta.insert("resourceVersion".into(), rv.clone());
                }
                let bump =
                    newly_deleted || spec_part(prev) != spec_part(&Value::Object(object.clone()));
                let meta = metadata_mut(&mut object);
                if bump {
                    meta.insert("generation".into(), json!(generation + 1));
                }
                if Value::Object(object.clone()) == *prev {
                    return prev.clone();
                }
            }
            None => {
                if meta
                    .get("uid")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    self.next_uid += 1;
                    let uid = format!("{:08x}-0000-4000-8000-{:012x}", self.port, self.next_uid);
                    meta.insert("uid".into(), json!(uid));
                }
                if meta
                    .get("creationTimestamp")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
                }
                meta.insert("generation".into(), json!(1));
            }
        }
        self.resource_version += 1;
        let meta = metadata_mut(&mut object);
        meta.insert(
            "resourceVersion".into(),
            json!(self.resource_version.to_string()),
        );
        let finalized = meta.contains_key("deletionTimestamp")
            && meta
                .get("finalizers")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty);
        let object = Value::Object(object);
        if finalized {
            self.objects.remove(key);
            self.ownership.remove(key);
            self.emit(key, EventType::Deleted, &object, prev);
        } else {
            self.objects.insert(key.clone(), object.clone());
            let kind = if prev.is_some() {
                EventType::Modified
            } else {
                EventType::Added
            };
            self.emit(key, kind, &object, prev);
        }
        object
    }

    /// Removes an object now, with a new `resourceVersion` on the DELETED event.
    fn remove(&mut self, key: &ObjKey) -> Option<Value> {
        let mut object = self.objects.remove(key)?;
        self.ownership.remove(key);
        self.resource_version += 1;
        if let Value::Object(map) = &mut object {
            metadata_mut(map).insert(
                "resourceVersion".into(),
                json!(self.resource_version.to_string()),
            );
        }
        self.emit(key, EventType::Deleted, &object, None);
        Some(object)
    }

    fn emit(&mut self, key: &ObjKey, kind: EventType, object: &Value, prev: Option<Value>) {
        let change = Change {
            rv: self.resource_version,
            key: key.clone(),
            kind,
            object: object.clone(),
            prev,
        };
        self.watchers.retain(|w| match w.scope.translate(&change) {
            Some((kind, object)) => w.tx.send(event_line(kind, object)).is_ok(),
            None => !w.tx.is_closed(),
        });
        self.history.push(change);
    }
}

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
const STATUS_VERBS: [&str; 3] = ["get", "patch", "update"];
const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

fn version_info() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-sartor-tests",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// The object a write leaves: for `/status`, `prev` with only `status`
/// taken from `new`; for the object itself, `new` but (with a status
/// subresource) `prev`'s status.
fn restrict(
    res: &Resource,
    status: bool,
    prev: &Value,
    new: Map<String, Value>,
) -> Map<String, Value> {
    let (mut object, status_from) = if status {
        (
            prev.as_object().cloned().unwrap_or_default(),
            new.get("status").cloned(),
        )
    } else if res.status {
        let status = prev.get("status").cloned();
        (new, status)
    } else {
        return new;
    };
    match status_from {
        Some(s) => object.insert("status".into(), s),
        None => object.remove("status"),
    };
    object
}

fn patch_options_invalid(field: &str, reason: &str, message: &str) -> ApiError {
    status_error(
        422,
        "Invalid",
        format!("PatchOptions.meta.k8s.io \"\" is invalid: {field}: {message}"),
        json!({
            "group": "meta.k8s.io",
            "kind": "PatchOptions",
            "causes": [{"reason": reason, "message": message, "field": field}],
        }),
    )
}

fn check_precondition(
    res: &Resource,
    key: &ObjKey,
    prev: &Value,
    body: &Value,
) -> Result<(), ApiError> {
    match body
        .get("metadata")
        .and_then(|m| m.get("resourceVersion"))
        .and_then(Value::as_str)
        .filter(|rv| !rv.is_empty())
    {
        Some(rv) if Some(rv) != resource_version_of(prev) => Err(conflict(res, &key.name)),
        _ => Ok(()),
    }
}

fn resource_version_of(object: &Value) -> Option<&str> {
    object
        .get("metadata")
        .and_then(|m| m.get("resourceVersion"))
        .and_then(Value::as_str)
}

fn entry_id(entry: &Value) -> String {
    match entry.get("id") {
        Some(Value::String(id)) => id.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// The object's `metadata`, made an object if it was missing or not one.
fn metadata_mut(object: &mut Map<String, Value>) -> &mut Map<String, Value> {
    let meta = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    match meta {
        Value::Object(map) => map,
        _ => unreachable!("metadata was just made an object"),
    }
}

/// Everything but `metadata`, `status`, `apiVersion` and `kind`: what a
/// change of bumps `generation`.
fn spec_part(object: &Value) -> Value {
    let mut rest = object.as_object().cloned().unwrap_or_default();
    for field in ["metadata", "status", "apiVersion", "kind"] {
        rest.remove(field);
    }
    Value::Object(rest)
}

fn apply_defaults(key: &ObjKey, object: &mut Map<String, Value>) {
    match (key.api_version.as_str(), key.kind.as_str()) {
        ("v1", "Secret") => {
            if let Some(Value::Object(string_data)) = object.remove("stringData") {
                let data = object
                    .entry("data")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(data) = data {
                    for (field, value) in string_data {
                        if let Some(text) = value.as_str() {
                            let encoded = base64::engine::general_purpose::STANDARD.encode(text);
                            data.insert(field, json!(encoded));
                        }
                    }
                }
            }
            object.entry("type").or_insert_with(|| json!("Opaque"));
        }
        ("v1", "Namespace") => {
            let labels = metadata_mut(object)
                .entry("labels")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(labels) = labels {
                labels.insert("kubernetes.io/metadata.name".into(), json!(key.name));
            }
            if let Value::Object(spec) = object.entry("spec").or_insert_with(|| json!({})) {
                spec.entry("finalizers")
                    .or_insert_with(|| json!(["kubernetes"]));
            }
            if let Value::Object(status) = object.entry("status").or_insert_with(|| json!({})) {
                status.entry("phase").or_insert_with(|| json!("Active"));
            }
        }
        (
            "admissionregistration.k8s.io/v1",
            kind @ ("MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration"),
        ) => {
            let mutating = kind == "MutatingWebhookConfiguration";
            let Some(Value::Array(webhooks)) = object.get_mut("webhooks") else {
                return;
            };
            for webhook in webhooks.iter_mut().filter_map(Value::as_object_mut) {
                webhook
                    .entry("failurePolicy")
                    .or_insert_with(|| json!("Fail"));
                webhook
                    .entry("matchPolicy")
                    .or_insert_with(|| json!("Equivalent"));
                webhook
                    .entry("namespaceSelector")
                    .or_insert_with(|| json!({}));
                webhook.entry("objectSelector").or_insert_with(|| json!({}));
                webhook.entry("timeoutSeconds").or_insert_with(|| json!(10));
                if mutating {
                    webhook
                        .entry("reinvocationPolicy")
                        .or_insert_with(|| json!("Never"));
                }
                if let Some(Value::Array(rules)) = webhook.get_mut("rules") {
                    for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
                        rule.entry("scope").or_insert_with(|| json!("*"));
                    }
                }
                if let Some(service) = webhook
                    .get_mut("clientConfig")
                    .and_then(|c| c.get_mut("service"))
                    .and_then(Value::as_object_mut)
                {
                    service.entry("port").or_insert_with(|| json!(443));
                }
            }
        }
        _ => {}
    }
}

fn event_line(kind: &str, object: &Value) -> Bytes {
    let mut line = json!({"type": kind, "object": object}).to_string();
    line.push('\n');
    Bytes::from(line)
}

// ---------------------------------------------------------------------------
// Selectors

/// A collection as a request names it: type, namespace, selectors.
struct Scope {
    api_version: String,
    kind: String,
    namespace: Option<String>,
    labels: Vec<LabelReq>,
    fields: Vec<FieldReq>,
}

enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

struct FieldReq {
    field: String,
    value: String,
    equal: bool,
}

impl Scope {
    fn new(
        res: &Resource,
        namespace: Option<&str>,
        query: &BTreeMap<String, String>,
    ) -> Result<Scope, ApiError> {
        let labels = match query.get("labelSelector") {
            Some(selector) => parse_label_selector(selector)
                .map_err(|e| bad_request(format!("unable to parse requirement: {e}")))?,
            None => Vec::new(),
        };
        let mut fields = Vec::new();
        for requirement in query
            .get("fieldSelector")
            .map(String::as_str)
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|r| !r.is_empty())
        {
            let (field, value, equal) = if let Some((f, v)) = requirement.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = requirement.split_once("==") {
                (f, v, true)
            } else if let Some((f, v)) = requirement.split_once('=') {
                (f, v, true)
            } else {
                return Err(bad_request(format!("invalid selector: '{requirement}'")));
            };
            let field = field.trim();
            if field != "metadata.name" && field != "metadata.namespace" {
                return Err(bad_request(format!("field label not supported: {field}")));
            }
            fields.push(FieldReq {
                field: field.to_string(),
                value: value.trim().to_string(),
                equal,
            });
        }
        Ok(Scope {
            api_version: res.api_version(),
            kind: res.kind.clone(),
            namespace: namespace.map(str::to_string),
            labels,
            fields,
        })
    }

    fn same_collection(&self, key: &ObjKey) -> bool {
        key.api_version == self.api_version
            && key.kind == self.kind
            && self
                .namespace
                .as_ref()
                .is_none_or(|ns| *ns == key.namespace)
    }

    fn selected(&self, key: &ObjKey, object: &Value) -> bool {
        let empty = Map::new();
        let labels = object
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let label = |k: &str| labels.get(k).and_then(Value::as_str);
        let labels_ok = self.labels.iter().all(|req| match req {
            LabelReq::Eq(k, v) => label(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => label(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelReq::NotIn(k, vs) => label(k).is_none_or(|l| !vs.iter().any(|v| v == l)),
            LabelReq::Exists(k) => labels.contains_key(k),
            LabelReq::NotExists(k) => !labels.contains_key(k),
        });
        labels_ok
            && self.fields.iter().all(|f| {
                let actual = if f.field == "metadata.name" {
                    &key.name
                } else {
                    &key.namespace
                };
                (actual == &f.value) == f.equal
            })
    }

    fn selects(&self, key: &ObjKey, object: &Value) -> bool {
        self.same_collection(key) && self.selected(key, object)
    }

    /// The event a watcher of this scope sees for `change`, if any: a
    /// modification moving an object into or out of the selection is an
    /// ADDED or DELETED, as Kubernetes sends.
    fn translate<'c>(&self, change: &'c Change) -> Option<(&'static str, &'c Value)> {
        if !self.same_collection(&change.key) {
            return None;
        }
        let now = self.selected(&change.key, &change.object);
        match change.kind {
            EventType::Added => now.then_some(("ADDED", &change.object)),
            EventType::Deleted => now.then_some(("DELETED", &change.object)),
            EventType::Modified => {
                let before = change
                    .prev
                    .as_ref()
                    .is_some_and(|p| self.selected(&change.key, p));
                match (before, now) {
                    (true, true) => Some(("MODIFIED", &change.object)),
                    (false, true) => Some(("ADDED", &change.object)),
                    (true, false) => Some(("DELETED", &change.object)),
                    (false, false) => None,
                }
            }
        }
    }
}

fn parse_label_selector(selector: &str) -> Result<Vec<LabelReq>, String> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for c in selector.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current);
    let set = |values: &str| -> Result<Vec<String>, String> {
        let inner = values
            .trim()
            .strip_prefix('(')
            .and_then(|v| v.strip_suffix(')'))
            .ok_or_else(|| format!("expected a parenthesised set, got {values:?}"))?;
        Ok(inner.split(',').map(|v| v.trim().to_string()).collect())
    };
    let mut requirements = Vec::new();
    for part in parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
        let requirement = if let Some(key) = part.strip_prefix('!') {
            LabelReq::NotExists(key.trim().to_string())
        } else if let Some((key, values)) = part.split_once(" notin ") {
            LabelReq::NotIn(key.trim().to_string(), set(values)?)
        } else if let Some((key, values)) = part.split_once(" in ") {
            LabelReq::In(key.trim().to_string(), set(values)?)
        } else if let Some((key, value)) = part.split_once("!=") {
            LabelReq::NotEq(key.trim().to_string(), value.trim().to_string())
        } else if let Some((key, value)) = part.split_once("==") {
            LabelReq::Eq(key.trim().to_string(), value.trim().to_string())
        } else if let Some((key, value)) = part.split_once('=') {
            LabelReq::Eq(key.trim().to_string(), value.trim().to_string())
        } else if part.contains(char::is_whitespace) {
            return Err(format!("{part:?}"));
        } else {
            LabelReq::Exists(part.to_string())
        };
        requirements.push(requirement);
    }
    Ok(requirements)
}

// ---------------------------------------------------------------------------
// Small helpers

fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

fn parse_query(query: &str) -> BTreeMap<String, String> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = |at: usize| bytes.get(at).and_then(|h| (*h as char).to_digit(16));
        match b {
            b'+' => out.push(b' '),
            b'%' => match (hex(i + 1), hex(i + 2)) {
                (Some(hi), Some(lo)) => {
                    out.push(u8::try_from(hi * 16 + lo).unwrap_or(b'?'));
                    i += 3;
                    continue;
                }
                _ => out.push(b),
            },
            _ => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Five characters from Kubernetes' `generateName` alphabet.
fn generated_suffix(n: u64) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut n = n.wrapping_mul(2_654_435_761) % 14_348_907; // 27^5
    let mut suffix = String::new();
    for _ in 0..5 {
        let digit = usize::try_from(n % 27).unwrap_or(0);
        suffix.push(ALPHABET.get(digit).map_or('x', |c| *c as char));
        n /= 27;
    }
    suffix
}

/// Now as RFC 3339 in UTC, whole seconds, as Kubernetes writes timestamps.
fn now_rfc3339() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60
    )
}
