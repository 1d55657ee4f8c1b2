#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
//! The in-memory API server (`sartor_tests::apiserver`) against a real
//! kube-rs client: what kube sends, and that Kubernetes' answers come back.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::{Discovery, Scope};
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
    assert_eq!(server.open_watches(), 1);
}

#[tokio::test]
async fn watcher_streaming_list_gets_initial_events_then_changes() {
    let server = ApiServer::start().await;
    let a = server.put(assign("a", "spec.a"));
    let config = watcher::Config::default().streaming_lists();
    let mut events = watcher::watcher(assign_api(client(&server)), config).boxed();

    assert!(matches!(next_event(&mut events).await, Event::Init));
    match next_event(&mut events).await {
        Event::InitApply(object) => assert_eq!(to_json!(&object), a),
        other => panic!("expected InitApply(a), got {other:?}"),
    }
    assert!(matches!(next_event(&mut events).await, Event::InitDone));
    let a2 = server.put(assign("a", "spec.a2"));
    match next_event(&mut events).await {
        Event::Apply(object) => assert_eq!(to_json!(&object), a2),
        other => panic!("expected Apply(a), got {other:?}"),
    }
    assert_eq!(a2["metadata"]["generation"], json!(2));
    assert_eq!(
        server.calls(),
        vec![get_call(
            ASSIGN_PATH,
            &[
                ("watch", "true"),
                ("timeoutSeconds", "290"),
                ("allowWatchBookmarks", "true"),
                ("sendInitialEvents", "true"),
                ("resourceVersionMatch", "NotOlderThan"),
                ("resourceVersion", "0"),
            ]
        )]
    );
}

#[tokio::test]
async fn watch_replays_from_a_resource_version_filters_by_label_and_times_out() {
    let server = ApiServer::start().await;
    let mut labelled = assign("a", "spec.a");
    labelled["metadata"]["labels"] = json!({"team": "x"});
    let a = server.put(labelled.clone());
    server.put(assign("b", "spec.b"));
    // A label change moving `a` out of the selection is a DELETED for it.
    let a_unlabelled = server.put(assign("a", "spec.a"));
    let api = assign_api(client(&server));

    let params = WatchParams::default().labels("team=x").timeout(1);
    let stream = api.watch(&params, "0").await.unwrap();
    let from_zero: Vec<_> = tokio::time::timeout(IN_TIME, stream.collect())
        .await
        .expect("the watch ends after timeoutSeconds");
    assert!(from_zero.is_empty(), "nothing matches now: {from_zero:?}");

    let a_version = a["metadata"]["resourceVersion"].as_str().unwrap();
    let stream = api.watch(&params, a_version).await;
    let replayed: Vec<_> = tokio::time::timeout(IN_TIME, stream.unwrap().collect())
        .await
        .expect("the watch ends after timeoutSeconds");
    let replayed: Vec<Value> = replayed
        .into_iter()
        .map(|e| match e.unwrap() {
            WatchEvent::Deleted(object) => json!({"DELETED": to_json!(&object)}),
            other => json!({"other": format!("{other:?}")}),
        })
        .collect();
    assert_eq!(replayed, vec![json!({"DELETED": a_unlabelled})]);

    let all = api
        .watch(&WatchParams::default().timeout(1), "1")
        .await
        .unwrap();
    let all: Vec<_> = tokio::time::timeout(IN_TIME, all.collect()).await.unwrap();
    let types: Vec<String> = all
        .into_iter()
        .map(|e| match e.unwrap() {
            WatchEvent::Added(o) => format!(
                "ADDED {} {}",
                o.metadata.name.unwrap(),
                o.metadata.resource_version.unwrap()
            ),
            WatchEvent::Modified(o) => format!(
                "MODIFIED {} {}",
                o.metadata.name.unwrap(),
                o.metadata.resource_version.unwrap()
            ),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(types, ["ADDED b 2", "MODIFIED a 3"]);
    assert_eq!(server.open_watches(), 0);
}

#[tokio::test]
async fn create_twice_is_already_exists_and_secret_defaults_apply() {
    let server = ApiServer::start().await;
    let secrets: Api<Secret> = Api::namespaced(client(&server), "default");
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("x".into()),
            ..ObjectMeta::default()
        },
        string_data: Some(BTreeMap::from([("k".to_string(), "v".to_string())])),
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
                "creationTimestamp": stored["metadata"]["creationTimestamp"],
                "generation": 1,
                "resourceVersion": "1",
            },
            "data": {"k": "dg=="},
            "type": "Opaque",
        })
    );
    assert!(stored["metadata"]["uid"].as_str().unwrap().len() == 36);

    let again = secrets.create(&PostParams::default(), &secret).await;
    assert_eq!(
        api_error(again),
        json!({
            "status": "Failure",
            "code": 409,
            "message": "secrets \"x\" already exists",
            "metadata": {},
            "reason": "AlreadyExists",
            "details": {"name": "x", "kind": "secrets"},
        })
    );

    let calls = server.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].method, "POST");
    assert_eq!(calls[0].path, SECRETS_PATH);
    assert_eq!(calls[0].content_type.as_deref(), Some("application/json"));
    assert_eq!(calls[0].body, Some(to_json!(&secret)));
    assert_eq!(calls[0], calls[1]);

    let missing = secrets.get("nope").await;
    assert_eq!(
        api_error(missing),
        json!({
            "status": "Failure",
            "code": 404,
            "message": "secrets \"nope\" not found",
            "metadata": {},
            "reason": "NotFound",
            "details": {"name": "nope", "kind": "secrets"},
        })
    );
}

#[tokio::test]
async fn replace_with_a_stale_resource_version_is_a_conflict() {
    let server = ApiServer::start().await;
    let secrets: Api<Secret> = Api::namespaced(client(&server), "default");
    server.put(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "x", "namespace": "default"},
        "data": {"k": "dg=="},
    }));
    let original = secrets.get("x").await.unwrap();
    let mut changed = original.clone();
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
    assert_eq!(replaced.metadata.generation, Some(2));
    assert_eq!(replaced.metadata.uid, original.metadata.uid);

    let stale = secrets
        .replace("x", &PostParams::default(), &original)
        .await;
    assert_eq!(
        api_error(stale),
        json!({
            "status": "Failure",
            "code": 409,
            "message": "Operation cannot be fulfilled on secrets \"x\": the object has been modified; \
                        please apply your changes to the latest version and try again",
            "metadata": {},
            "reason": "Conflict",
            "details": {"name": "x", "kind": "secrets"},
        })
    );

    // Custom resources need a resourceVersion to be replaced, as CRDs do.
    server.put(assign("a", "spec.a"));
    let api = assign_api(client(&server));
    let mut unconditional: DynamicObject = serde_json::from_value(assign("a", "spec.b")).unwrap();
    unconditional.metadata.resource_version = None;
    let refused = api
        .replace("a", &PostParams::default(), &unconditional)
        .await;
    assert_eq!(
        api_error(refused),
        json!({
            "status": "Failure",
            "code": 422,
            "message": "Assign.mutations.sartor.dev \"a\" is invalid: metadata.resourceVersion: \
                        Invalid value: 0x0: must be specified for an update",
            "metadata": {},
            "reason": "Invalid",
            "details": {
                "name": "a",
                "group": "mutations.sartor.dev",
                "kind": "Assign",
                "causes": [{
                    "reason": "FieldValueInvalid",
                    "message": "Invalid value: 0x0: must be specified for an update",
                    "field": "metadata.resourceVersion",
                }],
            },
        })
    );
}

fn by_pod(id: &str) -> Value {
    json!({"id": id, "observedGeneration": 1, "operations": ["mutation-status"], "enforced": true})
}

fn status_apply(entries: &[Value]) -> Patch<Value> {
    let status = if entries.is_empty() {
        json!({})
    } else {
        json!({"byPod": entries})
    };
    Patch::Apply(json!({
        "apiVersion": "mutations.sartor.dev/v1",
        "kind": "Assign",
        "status": status,
    }))
}

#[tokio::test]
async fn status_apply_keeps_each_managers_by_pod_entries() {
    let server = ApiServer::start().await;
    let a = server.put(assign("a", "spec.a"));
    let api = assign_api(client(&server));
    let pod_a = PatchParams::apply("sartor/pod-a").force();
    let pod_b = PatchParams::apply("sartor/pod-b").force();

    api.patch_status("a", &pod_b, &status_apply(&[by_pod("pod-b")]))
        .await
        .unwrap();
    let both = api
        .patch_status("a", &pod_a, &status_apply(&[by_pod("pod-a")]))
        .await
        .unwrap();
    let mut expected = a.clone();
    expected["metadata"]["resourceVersion"] = json!("3");
    expected["status"] = json!({"byPod": [by_pod("pod-a"), by_pod("pod-b")]});
    assert_eq!(to_json!(&both), expected);
    assert_eq!(
        server.get("mutations.sartor.dev/v1", "Assign", None, "a"),
        Some(expected.clone())
    );

    // The same apply again changes nothing: no new resourceVersion.
    let same = api
        .patch_status("a", &pod_a, &status_apply(&[by_pod("pod-a")]))
        .await
        .unwrap();
    assert_eq!(to_json!(&same), expected);

    let only_b = api
        .patch_status("a", &pod_a, &status_apply(&[]))
        .await
        .unwrap();
    expected["metadata"]["resourceVersion"] = json!("4");
    expected["status"] = json!({"byPod": [by_pod("pod-b")]});
    assert_eq!(to_json!(&only_b), expected);
    assert_eq!(
        only_b.metadata.generation,
        Some(1),
        "a status write keeps generation"
    );

    let calls = server.calls();
    assert_eq!(calls.len(), 4);
    assert_eq!(
        calls[1],
        Call {
            method: "PATCH".into(),
            path: format!("{ASSIGN_PATH}/a/status"),
            query: query(&[("fieldManager", "sartor/pod-a"), ("force", "true")]),
            content_type: Some("application/apply-patch+yaml".into()),
            body: Some(json!({
                "apiVersion": "mutations.sartor.dev/v1",
                "kind": "Assign",
                "status": {"byPod": [by_pod("pod-a")]},
            })),
        }
    );

    // Writes to the object itself ignore status (status subresource).
    let mut main = assign("a", "spec.changed");
    main["status"] = json!({"byPod": []});
    let patched = api
        .patch("a", &PatchParams::default(), &Patch::Merge(&main))
        .await
        .unwrap();
    expected["metadata"]["resourceVersion"] = json!("5");
    expected["metadata"]["generation"] = json!(2);
    expected["spec"] = json!({"location": "spec.changed"});
    assert_eq!(to_json!(&patched), expected);

    // Apply needs a field manager (kube does not check; the server does).
    let no_manager = api
        .patch_status("a", &PatchParams::default(), &status_apply(&[]))
        .await;
    assert_eq!(
        api_error(no_manager),
        json!({
            "status": "Failure",
            "code": 422,
            "message": "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            "metadata": {},
            "reason": "Invalid",
            "details": {
                "group": "meta.k8s.io",
                "kind": "PatchOptions",
                "causes": [{
                    "reason": "FieldValueRequired",
                    "message": "Required value: is required for apply patch",
                    "field": "fieldManager",
                }],
            },
        })
    );

    // Apply needs apiVersion and kind in the body.
    let bare = api
        .patch_status("a", &pod_a, &Patch::Apply(json!({"status": {}})))
        .await;
    assert_eq!(api_error(bare)["code"], json!(400));
}

#[tokio::test]
async fn json_and_merge_patches_and_preconditions() {
    let server = ApiServer::start().await;
    let client = client(&server);
    server.put(assign("a", "spec.a"));

    let patch = |ops: Value| {
        hyper::Request::patch(format!("{ASSIGN_PATH}/a"))
            .header("content-type", "application/json-patch+json")
            .body(serde_json::to_vec(&ops).unwrap())
            .unwrap()
    };
    let text = client
        .request_text(patch(
            json!([{"op": "replace", "path": "/spec/location", "value": "spec.j"}]),
        ))
        .await
        .unwrap();
    let patched: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(patched["spec"], json!({"location": "spec.j"}));
    assert_eq!(patched["metadata"]["generation"], json!(2));

    let failed_test = client
        .request_text(patch(
            json!([{"op": "test", "path": "/spec/location", "value": "nope"}]),
        ))
        .await;
    assert_eq!(api_error(failed_test)["code"], json!(422));

    let stale = assign_api(client.clone())
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"resourceVersion": "1"}, "spec": {"location": "x"}})),
        )
        .await;
    assert_eq!(api_error(stale)["reason"], json!("Conflict"));
    assert_eq!(
        server
            .get("mutations.sartor.dev/v1", "Assign", None, "a")
            .unwrap()["spec"],
        json!({"location": "spec.j"})
    );

    let missing = assign_api(client)
        .patch(
            "zzz",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {}})),
        )
        .await;
    assert_eq!(
        api_error(missing),
        json!({
            "status": "Failure",
            "code": 404,
            "message": "assign.mutations.sartor.dev \"zzz\" not found",
            "metadata": {},
            "reason": "NotFound",
            "details": {"name": "zzz", "group": "mutations.sartor.dev", "kind": "assign"},
        })
    );
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
async fn discovery_serves_registered_groups_only() {
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
            "details": {},
        })
    );

    server.register(
        "mutations.gatekeeper.sh/v1",
        "assign",
        "Assign",
        false,
        true,
    );
    server.register(
        "mutations.gatekeeper.sh/v1",
        "modifyset",
        "ModifySet",
        false,
        true,
    );
    let listed = client
        .list_api_group_resources("mutations.gatekeeper.sh/v1")
        .await
        .unwrap();
    let verbs = [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ];
    let status_verbs = ["get", "patch", "update"];
    assert_eq!(
        to_json!(&listed),
        json!({
            "apiVersion": "v1",
            "kind": "APIResourceList",
            "groupVersion": "mutations.gatekeeper.sh/v1",
            "resources": [
                {"name": "assign", "singularName": "assign", "namespaced": false, "kind": "Assign", "verbs": verbs},
                {"name": "assign/status", "singularName": "", "namespaced": false, "kind": "Assign", "verbs": status_verbs},
                {"name": "modifyset", "singularName": "modifyset", "namespaced": false, "kind": "ModifySet", "verbs": verbs},
                {"name": "modifyset/status", "singularName": "", "namespaced": false, "kind": "ModifySet", "verbs": status_verbs},
            ],
        })
    );

    let core = client.list_core_api_resources("v1").await.unwrap();
    let names: Vec<_> = core.resources.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["namespaces", "namespaces/status", "secrets"]);

    let gvk = GroupVersionKind::gvk("mutations.gatekeeper.sh", "v1", "Assign");
    for discovery in [
        Discovery::new(client.clone()).run().await.unwrap(),
        Discovery::new(client.clone())
            .run_aggregated()
            .await
            .unwrap(),
    ] {
        let (resource, caps) = discovery.resolve_gvk(&gvk).expect("gatekeeper's Assign");
        assert_eq!(resource.plural, "assign");
        assert_eq!(caps.scope, Scope::Cluster);
        let subresources: Vec<_> = caps
            .subresources
            .iter()
            .map(|(r, _)| r.plural.as_str())
            .collect();
        assert_eq!(subresources, ["status"]);
        assert!(discovery.has_group("mutations.sartor.dev"));
        assert!(discovery.has_group("admissionregistration.k8s.io"));
        let secret = GroupVersionKind::gvk("", "v1", "Secret");
        assert_eq!(
            discovery.resolve_gvk(&secret).unwrap().1.scope,
            Scope::Namespaced
        );
    }

    let version = client.apiserver_version().await.unwrap();
    assert_eq!(
        (version.major.as_str(), version.minor.as_str()),
        ("1", "33")
    );
}

#[tokio::test]
async fn kubeconfig_points_kube_at_the_server() {
    let server = ApiServer::start().await;
    let path = std::env::temp_dir().join(format!(
        "sartor-apiserver-kubeconfig-{}-{}",
        std::process::id(),
        server.url().rsplit(':').next().unwrap()
    ));
    server.write_kubeconfig(&path, "team-a");
    let kubeconfig = Kubeconfig::read_from(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    assert_eq!(config.cluster_url.to_string(), format!("{}/", server.url()));
    assert_eq!(config.default_namespace, "team-a");

    server.put(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}));
    let client = Client::try_from(config).unwrap();
    let namespaces: Api<Namespace> = Api::all(client);
    let team_a = namespaces.get("team-a").await.unwrap();
    assert_eq!(
        to_json!(&team_a),
        json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": "team-a",
                "labels": {"kubernetes.io/metadata.name": "team-a"},
                "uid": team_a.metadata.uid,
                "creationTimestamp": to_json!(&team_a.metadata.creation_timestamp),
                "generation": 1,
                "resourceVersion": "1",
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        })
    );
}

#[tokio::test]
async fn put_sets_generation_and_skips_no_op_writes() {
    let server = ApiServer::start().await;
    let first = server.put(assign("a", "spec.a"));
    assert_eq!(first["metadata"]["generation"], json!(1));
    assert_eq!(first["metadata"]["resourceVersion"], json!("1"));

    assert_eq!(
        server.put(assign("a", "spec.a")),
        first,
        "no change, no write"
    );
    assert_eq!(server.resource_version(), 1);

    let mut labelled = assign("a", "spec.a");
    labelled["metadata"]["labels"] = json!({"x": "y"});
    labelled["status"] = json!({"byPod": []});
    let second = server.put(labelled);
    assert_eq!(
        second["metadata"]["generation"],
        json!(1),
        "metadata and status only"
    );
    assert_eq!(second["metadata"]["resourceVersion"], json!("2"));
    assert_eq!(second["metadata"]["uid"], first["metadata"]["uid"]);

    let third = server.put(assign("a", "spec.b"));
    assert_eq!(third["metadata"]["generation"], json!(2));
    assert_eq!(third.get("status"), None);

    let webhook = server.put(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "sartor"},
        "webhooks": [{
            "name": "sartor.sartor.dev",
            "clientConfig": {"service": {"name": "sartor", "namespace": "sartor-system"}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }],
    }));
    assert_eq!(
        webhook["webhooks"],
        json!([{
            "name": "sartor.sartor.dev",
            "clientConfig": {"service": {"name": "sartor", "namespace": "sartor-system", "port": 443}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"], "scope": "*"}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "failurePolicy": "Fail",
            "matchPolicy": "Equivalent",
            "namespaceSelector": {},
            "objectSelector": {},
            "timeoutSeconds": 10,
            "reinvocationPolicy": "Never",
        }])
    );
}

#[tokio::test]
async fn delete_waits_for_finalizers() {
    let server = ApiServer::start().await;
    let api = assign_api(client(&server));
    let mut with_finalizer = assign("a", "spec.a");
    with_finalizer["metadata"]["finalizers"] = json!(["sartor.dev/cleanup"]);
    server.put(with_finalizer);
    server.put(assign("b", "spec.b"));

    let pending = api.delete("a", &DeleteParams::default()).await.unwrap();
    let pending = pending.left().expect("the object, still there");
    assert!(pending.metadata.deletion_timestamp.is_some());
    assert_eq!(pending.metadata.generation, Some(2));
    assert!(
        server
            .get("mutations.sartor.dev/v1", "Assign", None, "a")
            .is_some()
    );

    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(
        server.get("mutations.sartor.dev/v1", "Assign", None, "a"),
        None
    );

    let gone = api.delete("b", &DeleteParams::default()).await.unwrap();
    assert_eq!(gone.left().unwrap().metadata.name.as_deref(), Some("b"));
    assert_eq!(
        server.get("mutations.sartor.dev/v1", "Assign", None, "b"),
        None
    );
    assert!(!server.delete("mutations.sartor.dev/v1", "Assign", None, "b"));
}

#[tokio::test]
async fn unknown_paths_and_methods_get_kubernetes_statuses() {
    let server = ApiServer::start().await;
    let client = client(&server);
    let get = |path: &str| hyper::Request::get(path).body(Vec::new()).unwrap();
    for path in [
        "/apis/mutations.gatekeeper.sh/v1/assign",
        "/api/v1/configmaps",
        "/api/v1/secrets/x",
        "/apis/mutations.sartor.dev/v1/assign/a/scale",
    ] {
        let answer = client.request_text(get(path)).await;
        assert_eq!(api_error(answer)["reason"], json!("NotFound"), "{path}");
    }
    // All-namespaces lists work for namespaced resources.
    server.put(
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "n1"}}),
    );
    let all: Api<Secret> = Api::all(client.clone());
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
    let post = hyper::Request::post("/api/v1/secrets")
        .body(b"{}".to_vec())
        .unwrap();
    assert_eq!(
        api_error(client.request_text(post).await)["code"],
        json!(405)
    );
}
