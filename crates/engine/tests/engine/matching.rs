//! Every `match` criterion and `applyTo`, as Gatekeeper evaluates them.

use sartor_engine::{Operation, Request, Source};
use serde_json::{Value, json};

use super::{mutate, system};

/// Whether an Assign with these criteria (on Pods, ConfigMaps, Namespaces
/// and apps/v1 Deployments) mutates `object`.
fn matches(criteria: &str, object: &Value, request: &Request<'_>) -> Result<bool, String> {
    let yaml = format!(
        "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {{name: a}}\n\
         spec:\n  applyTo:\n  - {{groups: [\"\"], versions: [v1], kinds: [Pod, ConfigMap, Namespace]}}\n  \
         - {{groups: [apps], versions: [v1], kinds: [Deployment], operations: [CREATE]}}\n  \
         match: {criteria}\n  location: spec.marked\n  parameters: {{assign: {{value: true}}}}\n"
    );
    let system = system(&yaml);
    mutate(&system, object, request).map(|(_, m)| m.changed())
}

fn object(kind: &str, namespace: Option<&str>, name: &str, labels: Value) -> Value {
    let api_version = if kind == "Deployment" {
        "apps/v1"
    } else {
        "v1"
    };
    let mut metadata = json!({"name": name, "labels": labels});
    if let Some(ns) = namespace {
        metadata["namespace"] = json!(ns);
    }
    json!({"apiVersion": api_version, "kind": kind, "metadata": metadata})
}

fn pod_in(namespace: &str) -> Value {
    object("Pod", Some(namespace), "web", json!({"app": "web"}))
}

#[test]
fn apply_to_needs_kind_and_operation_in_one_entry() {
    let deployment = object("Deployment", Some("default"), "web", json!({}));
    let create = Request::create(Some("default"));
    let update = Request {
        operation: Some(Operation::Update),
        ..create
    };
    assert_eq!(matches("{}", &deployment, &create), Ok(true));
    assert_eq!(matches("{}", &deployment, &update), Ok(false));
    assert_eq!(matches("{}", &pod_in("default"), &update), Ok(true));
    let secret = object("Secret", Some("default"), "s", json!({}));
    assert_eq!(matches("{}", &secret, &create), Ok(false));
    let other_version = json!({"apiVersion": "apps/v1beta1", "kind": "Deployment"});
    assert_eq!(matches("{}", &other_version, &create), Ok(false));
}

/// What expansion generates is admitted by no operation: Gatekeeper's
/// `MatchesOperation("")` takes only mutators that apply on every
/// operation (found by tests/differential, reproducer generated-operation).
#[test]
fn no_operation_matches_only_mutators_of_every_operation() {
    let generated = Request {
        operation: None,
        source: Source::Generated,
        ..Request::create(Some("default"))
    };
    let deployment = object("Deployment", Some("default"), "web", json!({}));
    assert_eq!(matches("{}", &deployment, &generated), Ok(false));
    assert_eq!(matches("{}", &pod_in("default"), &generated), Ok(true));
    // sartor's API sees it as the CREATE a controller will make of it.
    let yaml = "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {name: a}\n\
         spec:\n  applyTo: [{groups: [apps], versions: [v1], kinds: [Deployment], operations: [CREATE]}]\n  \
         location: spec.marked\n  parameters: {assign: {value: true}}\n";
    let mut created = sartor_engine::System::new();
    for mutator in system(yaml).mutators() {
        created.upsert(mutator.as_ref().clone().generated_as_created());
    }
    let changed = |system: &sartor_engine::System| {
        mutate(system, &deployment, &generated).map(|(_, m)| m.changed())
    };
    assert_eq!(changed(&system(yaml)), Ok(false));
    assert_eq!(changed(&created), Ok(true));
    let update = Request {
        operation: Some(Operation::Update),
        ..generated
    };
    assert_eq!(
        mutate(&created, &deployment, &update).map(|(_, m)| m.changed()),
        Ok(false)
    );
    // Gatekeeper checks each applyTo entry on its own: CREATE in one and
    // UPDATE in another is not every operation in one.
    let split = "apiVersion: mutations.gatekeeper.sh/v1\nkind: Assign\nmetadata: {name: a}\n\
         spec:\n  applyTo:\n  - {groups: [apps], versions: [v1], kinds: [Deployment], operations: [CREATE]}\n  \
         - {groups: [apps], versions: [v1], kinds: [Deployment], operations: [UPDATE]}\n  \
         location: spec.marked\n  parameters: {assign: {value: true}}\n";
    assert_eq!(changed(&system(split)), Ok(false));
    let whole = split.replace("operations: [UPDATE]", "operations: [CREATE, UPDATE]");
    assert_eq!(changed(&system(&whole)), Ok(true));
}

#[test]
fn kinds_match_group_and_kind_within_one_entry() {
    let pod = pod_in("default");
    let deployment = object("Deployment", Some("default"), "web", json!({}));
    let create = Request::create(Some("default"));
    let criteria =
        "{kinds: [{apiGroups: [''], kinds: [Pod]}, {apiGroups: [apps], kinds: [StatefulSet]}]}";
    assert_eq!(matches(criteria, &pod, &create), Ok(true));
    assert_eq!(matches(criteria, &deployment, &create), Ok(false));
    assert_eq!(
        matches(
            "{kinds: [{apiGroups: ['*'], kinds: [Deployment]}]}",
            &deployment,
            &create
        ),
        Ok(true)
    );
    assert_eq!(
        matches("{kinds: [{kinds: ['*']}]}", &deployment, &create),
        Ok(true)
    );
    assert_eq!(
        matches("{kinds: [{apiGroups: [apps]}]}", &pod, &create),
        Ok(false)
    );
}

#[test]
fn scope_tells_namespaced_from_cluster_objects() {
    let pod = pod_in("default");
    let namespace = object("Namespace", None, "default", json!({}));
    let in_default = Request::create(Some("default"));
    let cluster = Request::create(None);
    assert_eq!(matches("{scope: Namespaced}", &pod, &in_default), Ok(true));
    assert_eq!(matches("{scope: Cluster}", &pod, &in_default), Ok(false));
    // A Namespace is cluster-scoped.
    assert_eq!(matches("{scope: Cluster}", &namespace, &cluster), Ok(true));
    assert_eq!(
        matches("{scope: Namespaced}", &namespace, &cluster),
        Ok(false)
    );
    assert_eq!(matches("{scope: '*'}", &namespace, &cluster), Ok(true));
}

#[test]
fn namespaces_and_exclusions_take_globs_at_either_end() {
    let request = |ns| Request::create(Some(ns));
    let criteria = "{namespaces: ['team-*', prod], excludedNamespaces: ['*-sandbox']}";
    assert_eq!(
        matches(criteria, &pod_in("team-a"), &request("team-a")),
        Ok(true)
    );
    assert_eq!(
        matches(criteria, &pod_in("prod"), &request("prod")),
        Ok(true)
    );
    assert_eq!(
        matches(criteria, &pod_in("production"), &request("production")),
        Ok(false)
    );
    assert_eq!(
        matches(criteria, &pod_in("team-sandbox"), &request("team-sandbox")),
        Ok(false)
    );
    // The request's namespace counts even when the object omits it.
    let bare = object("Pod", None, "web", json!({}));
    assert_eq!(matches(criteria, &bare, &request("team-b")), Ok(true));
    // A Namespace is its own namespace; other cluster-scoped objects pass.
    let namespace = object("Namespace", None, "team-c", json!({}));
    assert_eq!(
        matches(criteria, &namespace, &Request::create(None)),
        Ok(true)
    );
    let namespace = object("Namespace", None, "kube-system", json!({}));
    assert_eq!(
        matches(criteria, &namespace, &Request::create(None)),
        Ok(false)
    );
    let cluster_map = object("ConfigMap", None, "x", json!({}));
    assert_eq!(
        matches(criteria, &cluster_map, &Request::create(None)),
        Ok(true)
    );
}

#[test]
fn name_matches_the_name_or_a_generated_name() {
    let create = Request::create(Some("default"));
    assert_eq!(
        matches("{name: web}", &pod_in("default"), &create),
        Ok(true)
    );
    assert_eq!(
        matches("{name: 'we*'}", &pod_in("default"), &create),
        Ok(true)
    );
    assert_eq!(
        matches("{name: api}", &pod_in("default"), &create),
        Ok(false)
    );
    let generated =
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "web-"}});
    assert_eq!(matches("{name: 'web-*'}", &generated, &create), Ok(true));
    assert_eq!(matches("{name: 'web-'}", &generated, &create), Ok(false));
    // A missing name reads as "": only `*` matches it.
    let nameless = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {}});
    assert_eq!(matches("{name: '*'}", &nameless, &create), Ok(true));
    assert_eq!(matches("{name: 'web*'}", &nameless, &create), Ok(false));
    // An empty name is no criterion.
    assert_eq!(matches("{name: ''}", &pod_in("default"), &create), Ok(true));
}

#[test]
fn label_selectors_use_every_operator() {
    let create = Request::create(Some("default"));
    let labelled = object(
        "Pod",
        Some("default"),
        "web",
        json!({"app": "web", "tier": "front"}),
    );
    let cases = [
        ("{matchLabels: {app: web}}", true),
        ("{matchLabels: {app: api}}", false),
        (
            "{matchExpressions: [{key: tier, operator: In, values: [front, back]}]}",
            true,
        ),
        (
            "{matchExpressions: [{key: tier, operator: NotIn, values: [front]}]}",
            false,
        ),
        (
            "{matchExpressions: [{key: team, operator: NotIn, values: [a]}]}",
            true,
        ),
        ("{matchExpressions: [{key: app, operator: Exists}]}", true),
        (
            "{matchExpressions: [{key: app, operator: DoesNotExist}]}",
            false,
        ),
        (
            "{matchLabels: {app: web}, matchExpressions: [{key: team, operator: Exists}]}",
            false,
        ),
        ("{}", true),
    ];
    for (selector, want) in cases {
        let criteria = format!("{{labelSelector: {selector}}}");
        assert_eq!(
            matches(&criteria, &labelled, &create),
            Ok(want),
            "{selector}"
        );
    }
}

#[test]
fn namespace_selectors_read_the_namespace_object() {
    let prod = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": {"env": "prod"}}});
    let criteria = "{namespaceSelector: {matchLabels: {env: prod}}}";
    let with_ns = Request {
        namespace_object: Some(&prod),
        ..Request::create(Some("shop"))
    };
    assert_eq!(matches(criteria, &pod_in("shop"), &with_ns), Ok(true));
    assert_eq!(
        matches(
            "{namespaceSelector: {matchLabels: {env: dev}}}",
            &pod_in("shop"),
            &with_ns
        ),
        Ok(false)
    );
    // A Namespace being admitted is its own namespace.
    assert_eq!(matches(criteria, &prod, &Request::create(None)), Ok(true));
    // Cluster-scoped objects pass.
    let cluster_map = object("ConfigMap", None, "x", json!({}));
    assert_eq!(
        matches(criteria, &cluster_map, &Request::create(None)),
        Ok(true)
    );
    // An unknown Namespace is an error, never a guess.
    assert_eq!(
        matches(criteria, &pod_in("shop"), &Request::create(Some("shop"))),
        Err("v1 Pod shop/web: Assign a: its namespaceSelector needs the labels of Namespace \"shop\", which was not provided".to_string())
    );
    // ...reached only when the earlier criteria pass.
    let criteria = "{namespaces: [other], namespaceSelector: {matchLabels: {env: prod}}}";
    assert_eq!(
        matches(criteria, &pod_in("shop"), &Request::create(Some("shop"))),
        Ok(false)
    );
}

#[test]
fn a_namespace_selector_sees_labels_a_mutator_gave_the_namespace() {
    // A Namespace is its own namespace: the label added in pass 1 makes the
    // Assign selecting it apply in pass 2 (differential reproducer
    // namespace-labels-rematch).
    let system = system(
        "apiVersion: mutations.sartor.dev/v1\nkind: AssignMetadata\nmetadata: {name: b}\n\
         spec: {location: metadata.labels.env, parameters: {assign: {value: prod}}}\n---\n\
         apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {name: a-1}\n\
         spec:\n  applyTo: [{groups: [\"\"], versions: [v1], kinds: [Namespace]}]\n  \
         location: spec\n  match: {namespaceSelector: {matchExpressions: [{key: env, operator: Exists}]}}\n  \
         parameters: {assign: {value: []}}\n",
    );
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod"}});
    let (mutated, mutation) = mutate(&system, &namespace, &Request::create(None)).unwrap();
    assert_eq!(
        mutated,
        json!({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": "prod", "labels": {"env": "prod"}}, "spec": []})
    );
    assert_eq!(mutation.passes, 3);
}

#[test]
fn source_selects_original_or_generated_objects() {
    let original = Request::create(Some("default"));
    let generated = Request {
        source: Source::Generated,
        ..original
    };
    let pod = pod_in("default");
    assert_eq!(matches("{source: All}", &pod, &generated), Ok(true));
    assert_eq!(matches("{source: Original}", &pod, &original), Ok(true));
    assert_eq!(matches("{source: Original}", &pod, &generated), Ok(false));
    assert_eq!(matches("{source: Generated}", &pod, &generated), Ok(true));
}

/// Mutators with the same `match` share its answer within a pass; a label
/// written between them makes the later one ask again, and the earlier one
/// in the next pass.
#[test]
fn a_label_written_between_two_mutators_of_one_match_is_seen_by_the_later() {
    let selector = "{labelSelector: {matchLabels: {tier: gold}}}";
    let assign = |name: &str, field: &str| {
        format!(
            "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {{name: {name}}}\n\
             spec:\n  applyTo: [{{groups: [\"\"], versions: [v1], kinds: [Pod]}}]\n  \
             match: {selector}\n  location: spec.{field}\n  parameters: {{assign: {{value: true}}}}\n"
        )
    };
    // Gatekeeper's order, kind then name: Assign a-first, AssignMetadata
    // b-tier (which writes the label), ModifySet c-flags; a-first and
    // c-flags have the same `match`.
    let yaml = format!(
        "{}---\n\
         apiVersion: mutations.sartor.dev/v1\nkind: AssignMetadata\nmetadata: {{name: b-tier}}\n\
         spec:\n  location: metadata.labels.tier\n  parameters: {{assign: {{value: gold}}}}\n---\n\
         apiVersion: mutations.sartor.dev/v1\nkind: ModifySet\nmetadata: {{name: c-flags}}\n\
         spec:\n  applyTo: [{{groups: [\"\"], versions: [v1], kinds: [Pod]}}]\n  \
         match: {selector}\n  location: spec.flags\n  parameters: {{values: {{fromList: [on]}}}}\n",
        assign("a-first", "first")
    );
    let system = system(&yaml);
    let pod = object("Pod", Some("default"), "web", json!({"app": "web"}));
    let (mutated, mutation) = mutate(&system, &pod, &Request::create(Some("default"))).unwrap();
    assert_eq!(
        mutated,
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "web", "namespace": "default",
                            "labels": {"app": "web", "tier": "gold"}},
               "spec": {"first": true, "flags": ["on"]}})
    );
    let trace: Vec<String> = mutation
        .changes
        .iter()
        .map(|c| format!("{} {} {}", c.pass, c.mutator(), c.path()))
        .collect();
    assert_eq!(
        trace,
        [
            "1 AssignMetadata b-tier metadata.labels.tier",
            "1 ModifySet c-flags spec.flags",
            "2 Assign a-first spec.first",
        ]
    );
    assert_eq!(mutation.passes, 3);
}
