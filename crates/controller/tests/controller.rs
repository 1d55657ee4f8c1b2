//! The controller's real kube-rs watch and status code against the in-memory
//! stand-in (sartor_tests::apiserver) for what kube-apiserver cannot do on
//! demand: held lists, injected failures, exact calls and counts. Mutators
//! added, deleted and enforced, Gatekeeper compat and status entries kept per
//! replica are tested against kube-apiserver in tests/tests/cluster.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    missing_docs
)]

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use sartor_controller::{
    Feed, Metrics, MutatorWatch, NamespaceCache, StatusLimits, StatusQueue, StatusWriter, Watched,
    watched,
};
use sartor_state::{Accepting, MutatorCrd, State};
use sartor_tests::apiserver::{ApiServer, Call};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);

fn client(server: &ApiServer) -> kube::Client {
    kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap()
}

/// Polls `condition` until it holds; fails the test naming `what` otherwise.
async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A replica's controller tasks running against `server`, publishing into
/// `state` and counting into `registry`.
struct Replica {
    state: State,
    registry: Registry,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// The status writer's task, until a test takes it to see it end.
    writer: Option<tokio::task::JoinHandle<()>>,
    /// Its queue, as serve keeps it for the shutdown.
    status: StatusQueue,
}

impl Drop for Replica {
    fn drop(&mut self) {
        for task in self.tasks.iter().chain(&self.writer) {
            task.abort();
        }
    }
}

async fn replica(server: &ApiServer, gatekeeper_compat: bool) -> Replica {
    let limits = StatusLimits {
        per_second: 1000.0,
        first_retry: Duration::from_millis(20),
        max_retry: Duration::from_millis(100),
    };
    replica_with(server, gatekeeper_compat, limits).await
}

async fn replica_with(
    server: &ApiServer,
    gatekeeper_compat: bool,
    limits: StatusLimits,
) -> Replica {
    let client = client(server);
    let namespaces = NamespaceCache::new(client.clone());
    let (publisher, state) = sartor_state::channel(Arc::new(Accepting));
    let mut registry = Registry::with_prefix("sartor");
    let metrics = Arc::new(Metrics::new(&mut registry));
    let (writer, queue) = StatusWriter::new(client.clone(), "pod-a", limits);
    let status = queue.clone();
    let listed = namespaces.listed();
    let watch = MutatorWatch {
        client: client.clone(),
        feed: Feed::new(publisher, metrics),
        pod: "pod-a".to_string(),
        watched: watched(&client, gatekeeper_compat).await,
    };
    let tasks = vec![
        tokio::spawn(namespaces.run()),
        tokio::spawn(watch.run(listed, queue)),
    ];
    Replica {
        state,
        registry,
        tasks,
        writer: Some(tokio::spawn(writer.run())),
        status,
    }
}

impl Replica {
    /// The metrics page its registry renders.
    fn metrics(&self) -> String {
        let mut text = String::new();
        encode(&mut text, &self.registry).unwrap();
        text
    }

    /// `Kind name: location` of every mutator in force.
    fn mutators(&self) -> Vec<String> {
        let Some(snapshot) = self.state.current() else {
            return Vec::new();
        };
        snapshot
            .system
            .mutators()
            .map(|m| format!("{}: {}", m.id(), m.location()))
            .collect()
    }
}

fn pod_mutators() -> Vec<Value> {
    let apply_to = json!([{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}]);
    vec![
        json!({"apiVersion": "mutations.sartor.dev/v1", "kind": "Assign", "metadata": {"name": "pull"},
               "spec": {"applyTo": apply_to, "location": "spec.containers[name: *].imagePullPolicy",
                        "parameters": {"assign": {"value": "Always"}}}}),
        json!({"apiVersion": "mutations.sartor.dev/v1", "kind": "AssignImage", "metadata": {"name": "mirror"},
               "spec": {"applyTo": apply_to, "location": "spec.containers[name: *].image",
                        "parameters": {"assignDomain": "mirror.example.com"}}}),
        json!({"apiVersion": "mutations.sartor.dev/v1", "kind": "AssignMetadata", "metadata": {"name": "team"},
               "spec": {"location": "metadata.labels.team", "parameters": {"assign": {"value": "core"}}}}),
        json!({"apiVersion": "mutations.sartor.dev/v1", "kind": "ModifySet", "metadata": {"name": "args"},
               "spec": {"applyTo": apply_to, "location": "spec.containers[name: *].args",
                        "parameters": {"values": {"fromList": ["--verbose"]}}}}),
    ]
}

fn assign(name: &str, location: &str) -> Value {
    json!({
        "apiVersion": "mutations.sartor.dev/v1", "kind": "Assign", "metadata": {"name": name},
        "spec": {"applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
                 "location": location, "parameters": {"assign": {"value": "x"}}},
    })
}

fn status_patches(server: &ApiServer, plural: &str, name: &str) -> Vec<Call> {
    let path = format!("/apis/mutations.sartor.dev/v1/{plural}/{name}/status");
    server
        .calls()
        .into_iter()
        .filter(|call| call.method == "PATCH" && call.path == path)
        .collect()
}

fn by_pod(server: &ApiServer, kind: &str, name: &str) -> Value {
    server
        .get("mutations.sartor.dev/v1", kind, None, name)
        .and_then(|object| object.pointer("/status/byPod").cloned())
        .unwrap_or(Value::Null)
}

/// A mutator updated in place replaces its old version (adding and deleting
/// are in the cluster suite; an update is not yet).
#[tokio::test]
async fn an_update_of_each_kind_reaches_the_system() {
    let server = ApiServer::start().await;
    let replica = replica(&server, false).await;
    eventually("ready", || replica.state.is_ready()).await;
    assert_eq!(replica.mutators(), Vec::<String>::new());

    for mutator in pod_mutators() {
        server.put(mutator);
    }
    eventually("all four kinds", || replica.mutators().len() == 4).await;
    assert_eq!(
        replica.mutators(),
        [
            "Assign pull: spec.containers[name: *].imagePullPolicy",
            "AssignImage mirror: spec.containers[name: *].image",
            "AssignMetadata team: metadata.labels.team",
            "ModifySet args: spec.containers[name: *].args",
        ]
    );

    for (kind, mut mutator) in ["Assign", "AssignImage", "AssignMetadata", "ModifySet"]
        .into_iter()
        .zip(pod_mutators())
    {
        let location = match kind {
            "AssignMetadata" => "metadata.annotations.team",
            "ModifySet" => "spec.initContainers[name: *].args",
            "AssignImage" => "spec.initContainers[name: *].image",
            _ => "spec.initContainers[name: *].imagePullPolicy",
        };
        mutator["spec"]["location"] = json!(location);
        server.put(mutator);
        eventually(&format!("{kind} updated"), || {
            replica.mutators().iter().any(|m| m.ends_with(location))
        })
        .await;
    }
    assert_eq!(
        replica.mutators(),
        [
            "Assign pull: spec.initContainers[name: *].imagePullPolicy",
            "AssignImage mirror: spec.initContainers[name: *].image",
            "AssignMetadata team: metadata.annotations.team",
            "ModifySet args: spec.initContainers[name: *].args",
        ]
    );
}

#[tokio::test]
async fn a_conflict_is_in_both_statuses_and_clears_when_one_is_deleted() {
    let server = ApiServer::start().await;
    let replica = replica(&server, false).await;
    eventually("ready", || replica.state.is_ready()).await;
    let a = server.put(assign("a", "spec.x.y"));
    let b = server.put(assign("b", "spec.x[name: n].y"));
    let entry = |object: &Value, enforced: bool, errors: Value| {
        json!([{
            "id": "pod-a",
            "observedGeneration": 1,
            "mutatorUID": object["metadata"]["uid"],
            "operations": ["CREATE", "UPDATE"],
            "enforced": enforced,
            "errors": errors,
        }])
    };
    let a_conflicted = entry(
        &a,
        false,
        json!([{"type": "schema_conflict", "message": "conflicts with Assign b about spec.x: this mutator treats it as an object, Assign b as a list keyed by name (v1 Pod CREATE and 1 more)"}]),
    );
    let b_conflicted = entry(
        &b,
        false,
        json!([{"type": "schema_conflict", "message": "conflicts with Assign a about spec.x: this mutator treats it as a list keyed by name, Assign a as an object (v1 Pod CREATE and 1 more)"}]),
    );
    eventually("both statuses conflicted", || {
        by_pod(&server, "Assign", "a") == a_conflicted
            && by_pod(&server, "Assign", "b") == b_conflicted
    })
    .await;
    // Neither is applied while they conflict.
    let snapshot = replica.state.current().unwrap();
    assert_eq!(snapshot.system.conflicted().len(), 2);

    // Every status write is a server-side apply of this replica's entry alone.
    let patch = status_patches(&server, "assign", "a").pop().unwrap();
    assert_eq!(
        patch.content_type.as_deref(),
        Some("application/apply-patch+yaml")
    );
    assert_eq!(
        patch.query.get("fieldManager").map(String::as_str),
        Some("sartor/pod-a")
    );
    assert_eq!(patch.query.get("force").map(String::as_str), Some("true"));
    assert_eq!(
        patch.body,
        Some(json!({
            "apiVersion": "mutations.sartor.dev/v1",
            "kind": "Assign",
            "metadata": {"name": "a"},
            "status": {"byPod": a_conflicted},
        }))
    );

    assert!(server.delete("mutations.sartor.dev/v1", "Assign", None, "b"));
    let a_enforced = json!([{
        "id": "pod-a",
        "observedGeneration": 1,
        "mutatorUID": a["metadata"]["uid"],
        "operations": ["CREATE", "UPDATE"],
        "enforced": true,
    }]);
    eventually("a's conflict cleared", || {
        by_pod(&server, "Assign", "a") == a_enforced
    })
    .await;
    assert_eq!(replica.mutators(), ["Assign a: spec.x.y"]);
    assert!(
        replica
            .state
            .current()
            .unwrap()
            .system
            .conflicted()
            .is_empty()
    );
}

#[tokio::test]
async fn readiness_waits_for_the_initial_list_of_every_kind() {
    let server = ApiServer::start().await;
    for mutator in pod_mutators() {
        server.put(mutator);
    }
    let hold = server.hold("/apis/mutations.sartor.dev/v1/modifyset");
    let replica = replica(&server, false).await;
    server
        .wait_for_call(
            |c| c.path == "/apis/mutations.sartor.dev/v1/modifyset" && !c.is_watch(),
            WAIT,
        )
        .await
        .unwrap();
    eventually("the other kinds watched", || {
        let calls = server.calls();
        ["assign", "assignimage", "assignmetadata"]
            .iter()
            .all(|plural| {
                let path = format!("/apis/mutations.sartor.dev/v1/{plural}");
                calls.iter().any(|c| c.path == path && c.is_watch())
            })
    })
    .await;
    assert!(!replica.state.is_ready());
    hold.release();
    eventually("ready", || replica.state.is_ready()).await;
    // The first snapshot already holds every kind: never a partial set.
    assert_eq!(replica.mutators().len(), 4);
}

#[tokio::test]
async fn a_kind_whose_crd_is_not_installed_is_left_out_until_it_is() {
    let server = ApiServer::start().await;
    for mutator in pod_mutators() {
        server.put(mutator);
    }
    // The first two lists of AssignImage answer 404, as without its CRD. The
    // watcher retries 0.8 s to 1.6 s after each (its backoff restarts with
    // the `Init` event of every attempt), so the third list, which finds it
    // installed, comes at least 1.6 s after the first.
    let path = "/apis/mutations.sartor.dev/v1/assignimage";
    server.fail("GET", path, 404, 2);
    let replica = replica(&server, false).await;
    eventually("ready", || replica.state.is_ready()).await;
    assert_eq!(
        replica.mutators(),
        [
            "Assign pull: spec.containers[name: *].imagePullPolicy",
            "AssignMetadata team: metadata.labels.team",
            "ModifySet args: spec.containers[name: *].args",
        ]
    );
    assert_eq!(
        replica.state.missing_crds(),
        [MutatorCrd {
            group: "mutations.sartor.dev",
            kind: sartor_api::MutatorKind::AssignImage,
            name: "assignimage.mutations.sartor.dev".to_string(),
            installed: false,
        }]
    );
    let installed = |kind: &str, value: u8| {
        format!(
            "sartor_mutator_crd_installed{{group=\"mutations.sartor.dev\",kind=\"{kind}\"}} {value}"
        )
    };
    let metrics = replica.metrics();
    for line in [
        installed("Assign", 1),
        installed("AssignImage", 0),
        installed("AssignMetadata", 1),
        installed("ModifySet", 1),
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in\n{metrics}");
    }

    eventually("AssignImage in force", || replica.mutators().len() == 4).await;
    assert_eq!(
        replica.mutators()[1],
        "AssignImage mirror: spec.containers[name: *].image"
    );
    assert_eq!(replica.state.missing_crds(), []);
    let metrics = replica.metrics();
    assert!(
        metrics.lines().any(|l| l == installed("AssignImage", 1)),
        "{metrics}"
    );
    let lists = server
        .calls()
        .into_iter()
        .filter(|c| c.method == "GET" && c.path == path && !c.is_watch())
        .count();
    assert_eq!(lists, 3);
}

#[tokio::test]
async fn a_failed_status_write_is_retried_and_never_holds_up_mutation() {
    let server = ApiServer::start().await;
    server.fail(
        "PATCH",
        "/apis/mutations.sartor.dev/v1/assign/a/status",
        500,
        2,
    );
    let replica = replica(&server, false).await;
    eventually("ready", || replica.state.is_ready()).await;
    server.put(assign("a", "spec.x"));
    eventually("a in force", || replica.mutators() == ["Assign a: spec.x"]).await;
    eventually("status written", || {
        by_pod(&server, "Assign", "a")[0]["enforced"] == json!(true)
    })
    .await;
    assert_eq!(status_patches(&server, "assign", "a").len(), 3);
}

/// A status write whose answer was an error may have been applied all the
/// same (an answer lost, a timeout): a replica stopping before its retry
/// withdraws that entry too, or it would stay for a replica that is gone.
#[tokio::test]
async fn a_status_write_that_failed_is_withdrawn_at_shutdown_before_its_retry() {
    let server = ApiServer::start().await;
    let status = "/apis/mutations.sartor.dev/v1/assign/a/status";
    server.fail("PATCH", status, 500, 1);
    // The retry would come long after the test.
    let limits = StatusLimits {
        per_second: 1000.0,
        first_retry: Duration::from_secs(600),
        max_retry: Duration::from_secs(600),
    };
    let mut replica = replica_with(&server, false, limits).await;
    eventually("ready", || replica.state.is_ready()).await;
    server.put(assign("a", "spec.x"));
    eventually("the write refused", || {
        status_patches(&server, "assign", "a").len() == 1
    })
    .await;

    replica.status.withdraw_all();
    let writer = replica.writer.take().unwrap();
    tokio::time::timeout(WAIT, writer).await.unwrap().unwrap();
    let bodies: Vec<Value> = status_patches(&server, "assign", "a")
        .into_iter()
        .filter_map(|call| call.body.map(|body| body["status"].clone()))
        .collect();
    assert_eq!(bodies.len(), 2, "{bodies:?}");
    assert_eq!(bodies.get(1), Some(&json!({})));
}

/// Gatekeeper's kinds are watched only where discovery finds them served,
/// and discovery runs only with compat. (Enforcing them without writing
/// their status is in the cluster suite, with all four of Gatekeeper's CRDs.)
#[tokio::test]
async fn only_the_gatekeeper_kinds_served_are_watched_with_compat() {
    let server = ApiServer::start().await;
    server.register(
        "mutations.gatekeeper.sh/v1",
        "assign",
        "Assign",
        false,
        true,
    );
    let client = client(&server);
    let kinds = |watched: Vec<Watched>| -> Vec<String> {
        watched
            .iter()
            .map(|w| w.resource.api_version.clone() + "/" + &w.resource.plural)
            .collect()
    };
    let sartor = [
        "mutations.sartor.dev/v1/assign",
        "mutations.sartor.dev/v1/assignimage",
        "mutations.sartor.dev/v1/assignmetadata",
        "mutations.sartor.dev/v1/modifyset",
    ];
    assert_eq!(kinds(watched(&client, false).await), sartor);
    assert_eq!(server.calls(), []);

    let mut with_compat = sartor.map(String::from).to_vec();
    with_compat.push("mutations.gatekeeper.sh/v1/assign".to_string());
    assert_eq!(kinds(watched(&client, true).await), with_compat);
    let discovery: Vec<String> = server
        .calls()
        .into_iter()
        .map(|c| format!("{} {}", c.method, c.path))
        .collect();
    assert_eq!(
        discovery,
        [
            "GET /apis/mutations.gatekeeper.sh/v1",
            "GET /apis/mutations.gatekeeper.sh/v1beta1",
            "GET /apis/mutations.gatekeeper.sh/v1alpha1",
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_arriving_together_share_one_fetch_of_a_new_namespace() {
    use sartor_state::{Lookup, Namespaces as _};
    let server = ApiServer::start().await;
    server.put(json!({"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": "fresh", "labels": {"team": "core"}}}));
    // Never run: the namespace is missing from this cache.
    let cache = NamespaceCache::new(client(&server));
    let fetches: Vec<_> = (0..4)
        .map(|_| {
            let cache = cache.clone();
            tokio::task::spawn(async move { cache.fetch("fresh").await })
        })
        .collect();
    for fetch in fetches {
        let Lookup::Found(found) = fetch.await.unwrap() else {
            panic!("a request arriving with others did not get the namespace");
        };
        assert_eq!(found["metadata"]["labels"], json!({"team": "core"}));
    }
    let gets = server
        .calls()
        .into_iter()
        .filter(|c| c.method == "GET" && c.path == "/api/v1/namespaces/fresh")
        .count();
    assert_eq!(gets, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_missing_from_the_cache_is_fetched_once() {
    use sartor_state::{Lookup, Namespaces as _};
    let server = ApiServer::start().await;
    server.put(json!({"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": "fresh", "labels": {"team": "core"}}}));
    // Never run: every namespace is missing from this cache.
    let cache = NamespaceCache::new(client(&server));
    let lookup = |name: &str| {
        let cache = cache.clone();
        let name = name.to_string();
        tokio::task::spawn(async move { cache.fetch(&name).await })
    };
    let Lookup::Found(found) = lookup("fresh").await.unwrap() else {
        panic!("fresh not found");
    };
    assert_eq!(found["metadata"]["labels"], json!({"team": "core"}));
    assert_eq!(lookup("fresh").await.unwrap(), Lookup::Found(found));
    assert_eq!(lookup("gone").await.unwrap(), Lookup::Unknown);
    assert_eq!(lookup("gone").await.unwrap(), Lookup::Unknown);
    let gets: Vec<String> = server
        .calls()
        .into_iter()
        .map(|c| format!("{} {}", c.method, c.path))
        .collect();
    assert_eq!(
        gets,
        [
            "GET /api/v1/namespaces/fresh",
            "GET /api/v1/namespaces/gone"
        ]
    );
}

#[tokio::test]
async fn the_namespace_cache_follows_the_watch() {
    use sartor_state::{Lookup, Namespaces as _};
    let server = ApiServer::start().await;
    server.put(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}));
    let cache = NamespaceCache::new(client(&server));
    let mut listed = cache.listed();
    let task = tokio::spawn(cache.clone().run());
    listed.wait_for(|listed| *listed).await.unwrap();
    assert!(matches!(cache.lookup("a"), Lookup::Found(_)));
    server.put(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "b", "labels": {"x": "y"}}}));
    eventually("b cached", || matches!(cache.lookup("b"), Lookup::Found(ns) if ns["metadata"]["labels"]["x"] == json!("y")))
        .await;
    server.delete("v1", "Namespace", None, "a");
    eventually("a dropped", || cache.len() == 1).await;
    task.abort();
}

#[tokio::test]
async fn the_namespace_cache_tells_of_label_and_annotation_changes_and_deletions() {
    use sartor_controller::NamespaceChange::{Deleted, Described};
    let server = ApiServer::start().await;
    server.put(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}));
    let cache = NamespaceCache::new(client(&server));
    let mut changes = cache.changes();
    let mut listed = cache.listed();
    let task = tokio::spawn(cache.clone().run());
    listed.wait_for(|listed| *listed).await.unwrap();
    // A namespace first seen, and one written again as it was: no change.
    server.put(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "b"}}));
    server.put(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}));
    // Then a label, an annotation, a field no mutator reads, a label again
    // and a deletion.
    server.put(json!({"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": "a", "labels": {"team": "core"}}}));
    server.put(json!({"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": "b", "annotations": {"owner": "shop"}}}));
    server.put(json!({"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": "b", "annotations": {"owner": "shop"}},
                      "spec": {"finalizers": ["kubernetes"]}}));
    server.put(json!({"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": "a", "labels": {"team": "shop"}}}));
    server.delete("v1", "Namespace", None, "b");
    let mut told = Vec::new();
    for _ in 0..4 {
        let change = tokio::time::timeout(Duration::from_secs(10), changes.recv())
            .await
            .expect("a change told within 10 s")
            .unwrap();
        told.push(change);
    }
    assert_eq!(
        told,
        [
            Described("a".to_string()),
            Described("b".to_string()),
            Described("a".to_string()),
            Deleted("b".to_string()),
        ]
    );
    // Nothing else was told.
    assert!(changes.try_recv().is_err());
    task.abort();
}
