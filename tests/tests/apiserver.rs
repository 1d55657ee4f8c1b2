#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
//! The in-memory stand-in (`sartor_tests::apiserver`) against a real kube-rs
//! client: what kube sends, that the answers it needs come back, and that
//! failures, holds and call records work. Only what the stand-in's users
//! need is here; the real API server is tested in tests/tests/cluster.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
    WatchEvent, WatchParams,
};
use kube::runtime::watcher::{self, Event};
use kube::{Client, Config};
use sartor_tests::apiserver::{ApiServer, Call};
use serde_json::{Value, json};

const IN_TIME: Duration = Duration::from_secs(10);
const ASSIGN_PATH: &str = "/apis/mutations.sartor.dev/v1/assign";
const SECRETS_PATH: &str = "/api/v1/namespaces/default/secrets";

/// Any serialisable value as JSON.
macro_rules! to_json {
    ($value:expr) => {
        serde_json::to_value($value).unwrap()
    };
}

/// How to point kube at the server: `Config::new` with the `http://` URL
/// (default namespace `default`, no auth; kube's rustls connector also
/// speaks plain HTTP).
fn client(server: &ApiServer) -> Client {
    Client::try_from(Config::new(server.url().parse().unwrap())).unwrap()
}

fn assign_api(client: Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("mutations.sartor.dev", "v1", "Assign");
    Api::all_with(client, &ApiResource::from_gvk_with_plural(&gvk, "assign"))
}

fn assign(name: &str, location: &str) -> Value {
    json!({
        "apiVersion": "mutations.sartor.dev/v1",
        "kind": "Assign",
        "metadata": {"name": name},
        "spec": {"location": location},
    })
}

fn query(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

fn get_call(path: &str, pairs: &[(&str, &str)]) -> Call {
    Call {
        method: "GET".into(),
        path: path.into(),
        query: query(pairs),
        content_type: None,
        body: None,
    }
}

async fn next_event<S>(events: &mut S) -> Event<DynamicObject>
where
    S: Stream<Item = Result<Event<DynamicObject>, watcher::Error>> + Unpin,
{
    tokio::time::timeout(IN_TIME, events.next())
        .await
        .expect("an event in time")
        .expect("the stream goes on")
        .expect("no watcher error")
}

/// The `Status` of a failed kube call, as JSON.
fn api_error<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> Value {
    match result {
        Err(kube::Error::Api(status)) => to_json!(&*status),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// The object the server holds, with `resourceVersion` as the DELETED event
/// carries it.
fn deleted(mut object: Value, resource_version: u64) -> Value {
    object["metadata"]["resourceVersion"] = json!(resource_version.to_string());
    object
}

#[tokio::test]
async fn watcher_lists_then_watches_put_and_delete() {
    let server = ApiServer::start().await;
    let a = server.put(assign("a", "spec.a"));
    let mut events =
        watcher::watcher(assign_api(client(&server)), watcher::Config::default()).boxed();

    assert!(matches!(next_event(&mut events).await, Event::Init));
    match next_event(&mut events).await {
        Event::InitApply(object) => assert_eq!(to_json!(&object), a),
        other => panic!("expected InitApply(a), got {other:?}"),
    }
    assert!(matches!(next_event(&mut events).await, Event::InitDone));

    let b = server.put(assign("b", "spec.b"));
    match next_event(&mut events).await {
        Event::Apply(object) => assert_eq!(to_json!(&object), b),
        other => panic!("expected Apply(b), got {other:?}"),
    }
    assert!(server.delete("mutations.sartor.dev/v1", "Assign", None, "a"));
    match next_event(&mut events).await {
        Event::Delete(object) => assert_eq!(to_json!(&object), deleted(a.clone(), 3)),
        other => panic!("expected Delete(a), got {other:?}"),
    }

    // Exactly what kube-runtime 5's default watcher sends: a list with
    // `limit=500` (no resourceVersion: MostRecent), then a watch from the
    // list's resourceVersion with bookmarks and the 290 s server timeout.
    assert_eq!(
        server.calls(),
        vec![
            get_call(ASSIGN_PATH, &[("limit", "500")]),
            get_call(
                ASSIGN_PATH,
                &[
                    ("watch", "true"),
                    ("timeoutSeconds", "290"),
                    ("allowWatchBookmarks", "true"),
                    ("resourceVersion", "1"),
                ]
            ),
        ]
    );
    assert!(server.calls()[1].is_watch());
}

#[tokio::test]
async fn a_watch_replays_the_changes_after_its_resource_version() {
    let server = ApiServer::start().await;
    let a = server.put(assign("a", "spec.a"));
    let b = server.put(assign("b", "spec.b"));
    let a2 = server.put(assign("a", "spec.a2"));
    let api = assign_api(client(&server));

    let from_a = a["metadata"]["resourceVersion"].as_str().unwrap();
    let stream = api.watch(&WatchParams::default(), from_a).await.unwrap();
    let mut events = stream.boxed();
    let mut seen = Vec::new();
    for _ in 0..2 {
        let event = tokio::time::timeout(IN_TIME, events.next())
            .await
            .expect("an event in time")
            .expect("the stream goes on")
            .unwrap();
        seen.push(match event {
            WatchEvent::Added(o) => json!({"ADDED": to_json!(&o)}),
            WatchEvent::Modified(o) => json!({"MODIFIED": to_json!(&o)}),
            other => json!({"other": format!("{other:?}")}),
        });
    }
    assert_eq!(seen, [json!({"ADDED": b}), json!({"MODIFIED": a2})]);
    // Then live.
    assert!(server.delete("mutations.sartor.dev/v1", "Assign", None, "b"));
    let event = tokio::time::timeout(IN_TIME, events.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    match event {
        WatchEvent::Deleted(o) => assert_eq!(to_json!(&o), deleted(b, 4)),
        other => panic!("expected DELETED b, got {other:?}"),
    }
}

#[tokio::test]
async fn create_get_and_replace_with_kubernetes_errors() {
    let server = ApiServer::start().await;
    let secrets: Api<Secret> = Api::namespaced(client(&server), "default");
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("x".into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            "k".to_string(),
            k8s_openapi::ByteString(b"v".to_vec()),
        )])),
        ..Secret::default()
    };

    let created = secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let stored = server.get("v1", "Secret", Some("default"), "x").unwrap();
    assert_eq!(to_json!(&created), stored);
    assert_eq!(
        stored,
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "x",
                "namespace": "default",
                "uid": stored["metadata"]["uid"],
                "generation": 1,
                "resourceVersion": "1",
            },
            "data": {"k": "dg=="},
        })
    );
    assert_eq!(stored["metadata"]["uid"].as_str().unwrap().len(), 36);

    let again = secrets.create(&PostParams::default(), &secret).await;
    assert_eq!(
        api_error(again),
        json!({
            "status": "Failure",
            "code": 409,
            "message": "secrets \"x\" already exists",
            "metadata": {},
            "reason": "AlreadyExists",
        })
    );
    let calls = server.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].method, "POST");
    assert_eq!(calls[0].path, SECRETS_PATH);
    assert_eq!(calls[0].content_type.as_deref(), Some("application/json"));
    assert_eq!(calls[0].body, Some(to_json!(&secret)));
    assert_eq!(calls[0], calls[1]);

    let mut changed = secrets.get("x").await.unwrap();
    changed
        .data
        .as_mut()
        .unwrap()
        .insert("k2".into(), k8s_openapi::ByteString(b"w".to_vec()));
    let replaced = secrets
        .replace("x", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_eq!(replaced.metadata.resource_version.as_deref(), Some("2"));
    assert_eq!(replaced.metadata.uid, created.metadata.uid);
    assert_eq!(replaced.data.unwrap().len(), 2);

    let missing = secrets.get_opt("nope").await.unwrap();
    assert_eq!(missing, None, "a 404 with reason NotFound");
    let replace_missing = secrets
        .replace("nope", &PostParams::default(), &secret)
        .await;
    assert_eq!(
        api_error(replace_missing),
        json!({
            "status": "Failure",
            "code": 404,
            "message": "secrets \"nope\" not found",
            "metadata": {},
            "reason": "NotFound",
        })
    );
}

#[tokio::test]
async fn server_side_apply_to_status_replaces_the_status() {
    let server = ApiServer::start().await;
    let a = server.put(assign("a", "spec.a"));
    let api = assign_api(client(&server));
    let pod_a = PatchParams::apply("sartor/pod-a").force();
    let entry = json!({"id": "pod-a", "observedGeneration": 1, "enforced": true});
    let apply = |status: Value| {
        Patch::Apply(json!({
            "apiVersion": "mutations.sartor.dev/v1", "kind": "Assign",
            "metadata": {"name": "a"}, "status": status,
        }))
    };

    let applied = api
        .patch_status("a", &pod_a, &apply(json!({"byPod": [entry]})))
        .await
        .unwrap();
    let mut expected = a.clone();
    expected["metadata"]["resourceVersion"] = json!("2");
    expected["status"] = json!({"byPod": [entry]});
    assert_eq!(to_json!(&applied), expected);
    assert_eq!(
        server.get("mutations.sartor.dev/v1", "Assign", None, "a"),
        Some(expected.clone())
    );
    assert_eq!(
        server.calls(),
        [Call {
            method: "PATCH".into(),
            path: format!("{ASSIGN_PATH}/a/status"),
            query: query(&[("fieldManager", "sartor/pod-a"), ("force", "true")]),
            content_type: Some("application/apply-patch+yaml".into()),
            body: Some(json!({
                "apiVersion": "mutations.sartor.dev/v1", "kind": "Assign",
                "metadata": {"name": "a"}, "status": {"byPod": [entry]},
            })),
        }]
    );

    // The same apply again changes nothing: no new resourceVersion.
    let same = api
        .patch_status("a", &pod_a, &apply(json!({"byPod": [entry]})))
        .await
        .unwrap();
    assert_eq!(to_json!(&same), expected);

    let emptied = api
        .patch_status("a", &pod_a, &apply(json!({})))
        .await
        .unwrap();
    assert_eq!(to_json!(&emptied)["status"], json!({}));
    assert_eq!(emptied.metadata.resource_version.as_deref(), Some("3"));

    // Only server-side apply is served on /status; only on objects there.
    let merge = api
        .patch_status("a", &PatchParams::default(), &Patch::Merge(json!({})))
        .await;
    assert_eq!(api_error(merge)["code"], json!(415));
    let missing = api.patch_status("zzz", &pod_a, &apply(json!({}))).await;
    assert_eq!(api_error(missing)["reason"], json!("NotFound"));
}

#[tokio::test]
async fn hold_delays_a_list_until_released() {
    let server = ApiServer::start().await;
    let secrets: Api<Secret> = Api::namespaced(client(&server), "default");
    let hold = server.hold(SECRETS_PATH);
    let list = tokio::spawn({
        let secrets = secrets.clone();
        async move { secrets.list(&ListParams::default()).await }
    });
    let arrived = server
        .wait_for_call(|c| c.path == SECRETS_PATH, IN_TIME)
        .await
        .expect("the list arrives");
    assert_eq!(arrived, get_call(SECRETS_PATH, &[]));
    assert!(!list.is_finished());

    // Put while the list is held: the answer, given on release, has it.
    server.put(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "late", "namespace": "default"},
    }));
    hold.release();
    let listed = tokio::time::timeout(IN_TIME, list)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let names: Vec<_> = listed
        .items
        .iter()
        .map(|s| s.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["late"]);
    assert_eq!(listed.metadata.resource_version.as_deref(), Some("1"));

    // Released for good.
    assert_eq!(
        secrets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
}

#[tokio::test]
async fn fail_answers_the_next_requests_with_an_error_status() {
    let server = ApiServer::start().await;
    let secrets: Api<Secret> = Api::namespaced(client(&server), "default");
    server.put(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "x", "namespace": "default"},
    }));
    let path = format!("{SECRETS_PATH}/x");
    server.fail("GET", &path, 500, 1);

    assert_eq!(
        api_error(secrets.get("x").await),
        json!({
            "status": "Failure",
            "code": 500,
            "message": "Internal error occurred: injected failure",
            "metadata": {},
            "reason": "InternalError",
        })
    );
    assert_eq!(
        secrets.get("x").await.unwrap().metadata.name.as_deref(),
        Some("x")
    );
    assert_eq!(
        server.calls(),
        vec![get_call(&path, &[]), get_call(&path, &[])]
    );

    server.clear_calls();
    assert!(server.calls().is_empty());
}

#[tokio::test]
async fn discovery_serves_registered_group_versions_only() {
    let server = ApiServer::start().await;
    let client = client(&server);

    let missing = client
        .list_api_group_resources("mutations.gatekeeper.sh/v1")
        .await;
    assert_eq!(
        api_error(missing),
        json!({
            "status": "Failure",
            "code": 404,
            "message": "the server could not find the requested resource",
            "metadata": {},
            "reason": "NotFound",
        })
    );

    server.register(
        "mutations.gatekeeper.sh/v1",
        "assign",
        "Assign",
        false,
        true,
    );
    let listed = client
        .list_api_group_resources("mutations.gatekeeper.sh/v1")
        .await
        .unwrap();
    assert_eq!(
        to_json!(&listed),
        json!({
            "apiVersion": "v1",
            "kind": "APIResourceList",
            "groupVersion": "mutations.gatekeeper.sh/v1",
            "resources": [
                {"name": "assign", "singularName": "assign", "namespaced": false, "kind": "Assign",
                 "verbs": ["create", "get", "list", "update", "watch"]},
                {"name": "assign/status", "singularName": "", "namespaced": false, "kind": "Assign",
                 "verbs": ["patch"]},
            ],
        })
    );
}

#[tokio::test]
async fn put_keeps_the_uid_and_skips_no_op_writes() {
    let server = ApiServer::start().await;
    let first = server.put(assign("a", "spec.a"));
    assert_eq!(first["metadata"]["generation"], json!(1));
    assert_eq!(first["metadata"]["resourceVersion"], json!("1"));
    assert_eq!(
        server.put(assign("a", "spec.a")),
        first,
        "no change, no write"
    );

    let second = server.put(assign("a", "spec.b"));
    assert_eq!(second["metadata"]["resourceVersion"], json!("2"));
    assert_eq!(second["metadata"]["uid"], first["metadata"]["uid"]);
    assert_eq!(second["spec"], json!({"location": "spec.b"}));

    let other = server.put(assign("b", "spec.b"));
    assert_ne!(other["metadata"]["uid"], first["metadata"]["uid"]);
}

#[tokio::test]
async fn unknown_paths_and_methods_get_kubernetes_statuses() {
    let server = ApiServer::start().await;
    let client = client(&server);
    let get = |path: &str| hyper::Request::get(path).body(Vec::new()).unwrap();
    for path in [
        "/version",
        "/apis/mutations.gatekeeper.sh/v1/assign",
        "/api/v1/configmaps",
        "/api/v1/secrets",
        "/apis/mutations.sartor.dev/v1/assign/a/scale",
    ] {
        let answer = client.request_text(get(path)).await;
        assert_eq!(api_error(answer)["reason"], json!("NotFound"), "{path}");
    }
    let delete = hyper::Request::delete(format!("{ASSIGN_PATH}/a"))
        .body(Vec::new())
        .unwrap();
    assert_eq!(
        api_error(client.request_text(delete).await)["code"],
        json!(405)
    );
}
