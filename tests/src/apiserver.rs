//! An in-memory stand-in for the Kubernetes API server, over plain HTTP on
//! 127.0.0.1, for what a real API server cannot do on demand: answer the next
//! requests to a path with an injected failure ([`ApiServer::fail`]), hold
//! lists back until the test releases them ([`ApiServer::hold`]), and record
//! every request ([`ApiServer::calls`]) so a test can assert the exact calls
//! made or count them.
//!
//! How sartor behaves against the real thing (CRDs, watches, status written
//! by server-side apply under one field manager per replica, the managed
//! certificate and caBundle injection, RBAC, Gatekeeper's kinds, a missing
//! CRD) is tested in `tests/tests/cluster`, against kube-apiserver. This
//! serves only what the tests that need failures, holds or call records use;
//! see [`ApiServer`] for exactly what.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use http_body_util::{BodyExt as _, Either, Full};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderValue};
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
/// What it serves, for the resources it knows (Namespaces, Secrets, the two
/// admission webhook configuration kinds and sartor's four mutator kinds,
/// plus any [`ApiServer::register`]ed):
/// - `GET /apis/GROUP/VERSION`: the resource list (404 for a group version
///   it does not serve), which is how sartor discovers Gatekeeper's kinds;
/// - list, and watch: the changes after the watch's `resourceVersion`
///   (history is kept forever), then each change as it happens;
/// - get, create, replace;
/// - server-side apply to `/status`, which replaces `status` with the
///   body's;
/// - errors as Kubernetes `Status` bodies (`NotFound`, `AlreadyExists`).
///
/// Objects get a `uid`, `metadata.generation` 1 and a `resourceVersion` from
/// one global counter; a write that changes nothing is a no-op (no new
/// `resourceVersion`, no watch event).
///
/// Not modelled, because the tests that use it do not need it and the real
/// API server's behaviour is tested in the cluster suite: field ownership
/// (every apply acts as if it were the only manager), optimistic concurrency
/// (a `resourceVersion` on a write is not checked: inject a 409 instead),
/// generation bumps, defaults, validation, selectors, pagination, bookmarks,
/// watch timeouts, deletion through the API, finalizers, `dryRun`.
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
        server.register("v1", "namespaces", "Namespace", false, false);
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

    /// Makes a resource routable and discoverable (registering the same
    /// `api_version` and `plural` again replaces it). `api_version` is `v1`
    /// for the core group, else `GROUP/VERSION`; `status_subresource` makes
    /// `.../NAME/status` routable.
    pub fn register(
        &self,
        api_version: &str,
        plural: &str,
        kind: &str,
        namespaced: bool,
        status_subresource: bool,
    ) {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
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

    /// Creates or replaces an object directly, not recorded as a call: keeps
    /// the stored `uid` (a new object gets one, and `generation` 1), sets
    /// `resourceVersion` from the global counter and tells watchers (ADDED or
    /// MODIFIED). Returns the stored object (unchanged, and no event, if
    /// nothing changed).
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

    /// Deletes an object directly, telling watchers (DELETED, carrying a new
    /// `resourceVersion`). False if there was none.
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
    let call = Call {
        method: parts.method.as_str().to_string(),
        path: parts.uri.path().to_string(),
        query: parse_query(parts.uri.query().unwrap_or("")),
        content_type: parts
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        body: (!bytes.is_empty()).then(|| {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        }),
    };
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
    let reply = shared.lock().dispatch(&call);
    Ok(reply)
}

fn json_reply(code: u16, body: &Value) -> Reply {
    let mut reply = hyper::Response::new(Either::Left(Full::new(Bytes::from(body.to_string()))));
    *reply.status_mut() =
        hyper::StatusCode::from_u16(code).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    reply
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    reply
}

/// The streaming body of a watch: events as they are sent, until the server
/// goes away.
struct WatchBody {
    events: mpsc::UnboundedReceiver<Bytes>,
}

impl hyper::body::Body for WatchBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.events
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

    fn key(&self, namespace: Option<&str>, name: &str) -> ObjKey {
        ObjKey::new(&self.api_version(), &self.kind, namespace, name)
    }

    /// Whether `key` is in this resource's collection in `namespace` (all
    /// of it for a cluster-scoped resource).
    fn holds(&self, namespace: Option<&str>, key: &ObjKey) -> bool {
        key.api_version == self.api_version()
            && key.kind == self.kind
            && namespace.is_none_or(|ns| ns == key.namespace)
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

/// One change, kept forever for watch replay.
struct Change {
    rv: u64,
    key: ObjKey,
    /// `ADDED`, `MODIFIED` or `DELETED`.
    kind: &'static str,
    object: Value,
}

struct Watcher {
    res: Resource,
    namespace: Option<String>,
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
}

/// A failed request: HTTP code and `Status` body.
struct ApiError {
    code: u16,
    body: Value,
}

type ApiResult = Result<(u16, Value), ApiError>;

fn status_error(code: u16, reason: &str, message: impl Into<String>) -> ApiError {
    ApiError {
        code,
        body: json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message.into(),
            "reason": reason,
            "code": code,
        }),
    }
}

fn bad_request(message: impl Into<String>) -> ApiError {
    status_error(400, "BadRequest", message)
}

fn not_found_path() -> ApiError {
    status_error(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}

fn method_not_allowed() -> ApiError {
    status_error(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
    )
}

fn not_found(res: &Resource, name: &str) -> ApiError {
    status_error(
        404,
        "NotFound",
        format!("{} \"{name}\" not found", res.plural),
    )
}

fn injected_failure(code: u16) -> Value {
    let (reason, message) = match code {
        400 => ("BadRequest", "injected failure"),
        401 => ("Unauthorized", "Unauthorized"),
        403 => ("Forbidden", "forbidden: injected failure"),
        404 => (
            "NotFound",
            "the server could not find the requested resource",
        ),
        409 => ("Conflict", "injected conflict"),
        410 => ("Expired", "too old resource version"),
        429 => ("TooManyRequests", "injected failure"),
        500 => ("InternalError", "Internal error occurred: injected failure"),
        503 => ("ServiceUnavailable", "injected failure"),
        504 => ("Timeout", "injected failure"),
        _ => ("", "injected failure"),
    };
    let mut body = status_error(code, reason, message).body;
    if reason.is_empty()
        && let Some(b) = body.as_object_mut()
    {
        b.remove("reason");
    }
    body
}

/// Where a request path leads.
enum Target {
    /// `/api/VERSION` or `/apis/GROUP/VERSION`: discovery.
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
        let (group, version, rest) = match segments.as_slice() {
            ["api", version, rest @ ..] => ("", *version, rest),
            ["apis", group, version, rest @ ..] => (*group, *version, rest),
            _ => return Target::Unknown,
        };
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
                Some(r) if !r.namespaced => (r.clone(), None, tail),
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

    fn dispatch(&mut self, call: &Call) -> Reply {
        let result = match self.route(&call.path) {
            Target::GroupVersion(group, version) if call.method == "GET" => {
                Ok((200, self.resource_list(&group, &version)))
            }
            Target::Collection { res, namespace } => match call.method.as_str() {
                "GET" if call.is_watch() => return self.watch(res, namespace, &call.query),
                "GET" => Ok((200, self.list(&res, namespace.as_deref()))),
                "POST" => self.create(&res, namespace.as_deref(), call.body.as_ref()),
                _ => Err(method_not_allowed()),
            },
            Target::Object {
                res,
                namespace,
                name,
                status,
            } => {
                let key = res.key(namespace.as_deref(), &name);
                match (call.method.as_str(), status) {
                    ("GET", false) => self
                        .objects
                        .get(&key)
                        .map(|o| (200, o.clone()))
                        .ok_or_else(|| not_found(&res, &name)),
                    ("PUT", false) => self.replace(&res, &key, call.body.as_ref()),
                    ("PATCH", true) => self.apply_status(&res, &key, call),
                    _ => Err(method_not_allowed()),
                }
            }
            Target::Unknown => Err(not_found_path()),
            Target::GroupVersion(..) => Err(method_not_allowed()),
        };
        match result {
            Ok((code, body)) => json_reply(code, &body),
            Err(e) => json_reply(e.code, &e.body),
        }
    }

    /// The `APIResourceList` of a group version.
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
                "verbs": ["create", "get", "list", "update", "watch"],
            }));
            if r.status {
                resources.push(json!({
                    "name": format!("{}/status", r.plural),
                    "singularName": "",
                    "namespaced": r.namespaced,
                    "kind": r.kind,
                    "verbs": ["patch"],
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

    fn list(&self, res: &Resource, namespace: Option<&str>) -> Value {
        let items: Vec<&Value> = self
            .objects
            .iter()
            .filter(|(key, _)| res.holds(namespace, key))
            .map(|(_, object)| object)
            .collect();
        json!({
            "apiVersion": res.api_version(),
            "kind": format!("{}List", res.kind),
            "metadata": {"resourceVersion": self.resource_version.to_string()},
            "items": items,
        })
    }

    /// Replays the changes after the request's `resourceVersion` (none
    /// without one), then streams changes as they happen.
    fn watch(
        &mut self,
        res: Resource,
        namespace: Option<String>,
        query: &BTreeMap<String, String>,
    ) -> Reply {
        let from = match query.get("resourceVersion").map(String::as_str) {
            None | Some("") => self.resource_version,
            Some(rv) => match rv.parse::<u64>() {
                Ok(from) => from,
                Err(_) => {
                    let e = bad_request(format!("invalid resource version: {rv:?}"));
                    return json_reply(e.code, &e.body);
                }
            },
        };
        let (tx, rx) = mpsc::unbounded_channel();
        // Under the lock: what is replayed now plus what is sent later is
        // every change exactly once.
        for change in self.history.iter().filter(|c| c.rv > from) {
            if res.holds(namespace.as_deref(), &change.key) {
                let _ = tx.send(event_line(change.kind, &change.object));
            }
        }
        self.watchers.push(Watcher { res, namespace, tx });
        let mut reply = hyper::Response::new(Either::Right(WatchBody { events: rx }));
        reply
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        reply
    }

    fn create(
        &mut self,
        res: &Resource,
        namespace: Option<&str>,
        body: Option<&Value>,
    ) -> ApiResult {
        let Some(Value::Object(object)) = body.cloned() else {
            return Err(bad_request(
                "the body of the request was in an unknown format",
            ));
        };
        let Some(name) = object
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            return Err(bad_request("metadata.name: Required value"));
        };
        let key = res.key(namespace, &name);
        if self.objects.contains_key(&key) {
            return Err(status_error(
                409,
                "AlreadyExists",
                format!("{} \"{name}\" already exists", res.plural),
            ));
        }
        Ok((201, self.commit(&key, object)))
    }

    fn replace(&mut self, res: &Resource, key: &ObjKey, body: Option<&Value>) -> ApiResult {
        if !self.objects.contains_key(key) {
            return Err(not_found(res, &key.name));
        }
        let Some(Value::Object(object)) = body.cloned() else {
            return Err(bad_request(
                "the body of the request was in an unknown format",
            ));
        };
        Ok((200, self.commit(key, object)))
    }

    /// Server-side apply to `/status`: the stored object with `status`
    /// replaced by the body's (no field ownership: one manager per object).
    fn apply_status(&mut self, res: &Resource, key: &ObjKey, call: &Call) -> ApiResult {
        let content_type = call.content_type.as_deref().unwrap_or("");
        if !content_type.starts_with("application/apply-patch+yaml") {
            return Err(status_error(
                415,
                "UnsupportedMediaType",
                format!("only server-side apply is served on /status, not {content_type:?}"),
            ));
        }
        let Some(Value::Object(mut object)) = self.objects.get(key).cloned() else {
            return Err(not_found(res, &key.name));
        };
        match call.body.as_ref().and_then(|b| b.get("status")) {
            Some(status) => object.insert("status".into(), status.clone()),
            None => object.remove("status"),
        };
        Ok((200, self.commit(key, object)))
    }

    /// Stores `object` under `key` (see [`ApiServer::put`]) and tells
    /// watchers. Returns what was stored.
    fn commit(&mut self, key: &ObjKey, mut object: Map<String, Value>) -> Value {
        let prev = self.objects.get(key).cloned();
        object.insert("apiVersion".into(), json!(key.api_version));
        object.insert("kind".into(), json!(key.kind));
        let meta = metadata_mut(&mut object);
        meta.insert("name".into(), json!(key.name));
        if key.namespace.is_empty() {
            meta.remove("namespace");
        } else {
            meta.insert("namespace".into(), json!(key.namespace));
        }
        if let Some(prev) = &prev {
            for field in ["uid", "generation", "resourceVersion"] {
                match prev.pointer(&format!("/metadata/{field}")) {
                    Some(v) => meta.insert(field.into(), v.clone()),
                    None => meta.remove(field),
                };
            }
            if Value::Object(object.clone()) == *prev {
                return prev.clone();
            }
        } else {
            self.next_uid += 1;
            let uid = format!("{:08x}-0000-4000-8000-{:012x}", self.port, self.next_uid);
            meta.insert("uid".into(), json!(uid));
            meta.insert("generation".into(), json!(1));
        }
        self.resource_version += 1;
        let meta = metadata_mut(&mut object);
        meta.insert(
            "resourceVersion".into(),
            json!(self.resource_version.to_string()),
        );
        let object = Value::Object(object);
        self.objects.insert(key.clone(), object.clone());
        let kind = if prev.is_some() { "MODIFIED" } else { "ADDED" };
        self.emit(key, kind, &object);
        object
    }

    /// Removes an object now, with a new `resourceVersion` on the DELETED event.
    fn remove(&mut self, key: &ObjKey) -> Option<Value> {
        let mut object = self.objects.remove(key)?;
        self.resource_version += 1;
        if let Value::Object(map) = &mut object {
            metadata_mut(map).insert(
                "resourceVersion".into(),
                json!(self.resource_version.to_string()),
            );
        }
        self.emit(key, "DELETED", &object);
        Some(object)
    }

    fn emit(&mut self, key: &ObjKey, kind: &'static str, object: &Value) {
        self.watchers.retain(|w| {
            if w.res.holds(w.namespace.as_deref(), key) {
                w.tx.send(event_line(kind, object)).is_ok()
            } else {
                !w.tx.is_closed()
            }
        });
        self.history.push(Change {
            rv: self.resource_version,
            key: key.clone(),
            kind,
            object: object.clone(),
        });
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

fn event_line(kind: &str, object: &Value) -> Bytes {
    let mut line = json!({"type": kind, "object": object}).to_string();
    line.push('\n');
    Bytes::from(line)
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
