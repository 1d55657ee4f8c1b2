//! The static analysis: for each rule, the smallest set that triggers it and
//! a near miss that must not.

use sartor_engine::analysis::{Finding, Rule, Severity, analyze};
use sartor_engine::{Request, Scopes, System};
use serde_json::json;

use super::{assign, mutate, pod, system};

/// An Assign on v1 Pods on CREATE only (so no breaks-update finding).
fn create(name: &str, location: &str, parameters: &str) -> String {
    with_kinds(
        name,
        location,
        parameters,
        "  applyTo: [{groups: [''], versions: [v1], kinds: [Pod], operations: [CREATE]}]\n",
    )
}

/// Every finding as `rule | mutators | path | message`.
fn findings(system: &System) -> Vec<String> {
    analyze(system, Scopes::builtin())
        .iter()
        .map(|f| {
            let mutators: Vec<String> = f.mutators.iter().map(ToString::to_string).collect();
            let path = f.path.as_ref().map(ToString::to_string).unwrap_or_default();
            format!(
                "{} | {} | {path} | {}",
                f.rule,
                mutators.join(", "),
                f.message
            )
        })
        .collect()
}

fn only(system: &System) -> Finding {
    let all = analyze(system, Scopes::builtin());
    assert_eq!(all.len(), 1, "{:#?}", all);
    all.into_iter().next().unwrap()
}

fn with_kinds(name: &str, location: &str, parameters: &str, extra: &str) -> String {
    format!(
        "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: {{name: {name}}}\n\
         spec:\n{extra}  location: '{location}'\n  parameters: {parameters}\n"
    )
}

fn label(name: &str, key: &str, assign: &str, criteria: &str) -> String {
    format!(
        "apiVersion: mutations.sartor.dev/v1\nkind: AssignMetadata\nmetadata: {{name: {name}}}\n\
         spec:\n  match: {criteria}\n  location: 'metadata.labels.{key}'\n  parameters: {{assign: {assign}}}\n"
    )
}

const PROXY: &str = "{assign: {value: {name: proxy, image: 'envoy:1'}}}";

// === shadowed and kept by order ===

#[test]
fn a_field_inside_an_element_replaced_later_is_shadowed() {
    let set = system(&format!(
        "{}---\n{}",
        create(
            "a-pull",
            "spec.containers[name: proxy].imagePullPolicy",
            "{assign: {value: Always}}"
        ),
        create("b-proxy", "spec.containers[name: proxy]", PROXY),
    ));
    let finding = only(&set);
    assert_eq!(finding.severity(), Severity::Warning);
    assert_eq!(
        findings(&set),
        [
            "shadowed | Assign a-pull, Assign b-proxy | spec.containers[name: proxy] | it never has an effect: Assign b-proxy comes later in the order and replaces spec.containers[name: proxy] on every object it applies to, so what it writes at spec.containers[name: proxy].imagePullPolicy is undone in every pass"
        ]
    );
    assert_eq!(
        finding.example,
        Some(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "example"},
            "spec": {"containers": [{"name": "proxy"}]},
        }))
    );
    // The engine agrees: without a-pull, the same Pod.
    let request = Request::create(Some("default"));
    let alone = system(&create("b-proxy", "spec.containers[name: proxy]", PROXY));
    let object = pod(&["app", "proxy"]);
    assert_eq!(
        mutate(&set, &object, &request).unwrap().0,
        mutate(&alone, &object, &request).unwrap().0
    );
}

#[test]
fn the_same_pair_in_the_other_order_is_kept_by_order() {
    let set = system(&format!(
        "{}---\n{}",
        create(
            "z-pull",
            "spec.containers[name: proxy].imagePullPolicy",
            "{assign: {value: Always}}"
        ),
        create("b-proxy", "spec.containers[name: proxy]", PROXY),
    ));
    assert_eq!(
        findings(&set),
        [
            "kept-by-order | Assign z-pull, Assign b-proxy | spec.containers[name: proxy] | what it writes at spec.containers[name: proxy].imagePullPolicy survives only because its name sorts after Assign b-proxy, which replaces spec.containers[name: proxy] on every object it applies to; renamed, or with the other renamed, it would never have an effect"
        ]
    );
}

#[test]
fn near_misses_of_shadowing() {
    let pull = create(
        "a-pull",
        "spec.containers[name: proxy].imagePullPolicy",
        "{assign: {value: Always}}",
    );
    // A pathTest on the later mutator: it may not apply.
    let guarded = create(
        "b-proxy",
        "spec.containers[name: proxy]",
        "{pathTests: [{subPath: 'spec.containers[name: proxy]', condition: MustNotExist}], assign: {value: {name: proxy, image: 'envoy:1'}}}",
    );
    // A narrower match on the later mutator: not every object.
    let narrower = with_kinds(
        "b-proxy",
        "spec.containers[name: proxy]",
        PROXY,
        "  applyTo: [{groups: [''], versions: [v1], kinds: [Pod], operations: [CREATE]}]\n  match: {namespaces: [mesh]}\n",
    );
    // A glob where the earlier one names the element: that one creates it.
    let glob = create(
        "a-pull",
        "spec.containers[name: *].securityContext.privileged",
        "{assign: {value: false}}",
    );
    let by_name = create(
        "b-ctx",
        "spec.containers[name: app].securityContext",
        "{assign: {value: {}}}",
    );
    // Another element.
    let other = create(
        "b-proxy",
        "spec.containers[name: sidecar]",
        "{assign: {value: {name: sidecar}}}",
    );
    for set in [
        format!("{pull}---\n{guarded}"),
        format!("{pull}---\n{narrower}"),
        format!("{glob}---\n{by_name}"),
        format!("{pull}---\n{other}"),
    ] {
        let found: Vec<String> = findings(&system(&set))
            .into_iter()
            .filter(|f| f.starts_with("shadowed") || f.starts_with("kept-by-order"))
            .collect();
        assert!(found.is_empty(), "{set}\n{found:#?}");
    }
}

#[test]
fn a_value_the_inner_walk_cannot_enter_is_not_shadowing() {
    // b sets securityContext to a string: a's walk into it fails instead.
    let set = system(&format!(
        "{}---\n{}",
        create(
            "a",
            "spec.containers[name: app].securityContext.privileged",
            "{assign: {value: false}}"
        ),
        create(
            "b",
            "spec.containers[name: app].securityContext",
            "{assign: {value: none}}"
        ),
    ));
    // Not shadowed, and not the same place either: nothing to say.
    assert_eq!(findings(&set), Vec::<String>::new());
}

#[test]
fn a_later_removal_of_the_parent_is_not_shadowing() {
    // b removes the ports, but the containers a created on the way stay:
    // a is not without effect.
    let set = system(&format!(
        "{}---\n{}",
        create(
            "a-port",
            "spec.containers[name: app].ports[containerPort: 80].hostPort",
            "{assign: {value: 8080}}"
        ),
        create(
            "b-no-ports",
            "spec.containers[name: app].ports",
            "{assign: {remove: true}}"
        ),
    ));
    assert_eq!(findings(&set), Vec::<String>::new());
    let request = Request::create(Some("default"));
    let (object, _) = mutate(&set, &pod(&[]), &request).unwrap();
    assert_eq!(object["spec"], json!({"containers": [{"name": "app"}]}));
}

#[test]
fn two_label_adds_the_later_never_applies() {
    let set = system(&format!(
        "{}---\n{}",
        label("a-owner", "owner", "{value: platform}", "{}"),
        label("b-owner", "owner", "{value: shop}", "{}"),
    ));
    assert_eq!(
        findings(&set),
        [
            "shadowed | AssignMetadata b-owner, AssignMetadata a-owner | metadata.labels.owner | it never has an effect: AssignMetadata a-owner comes earlier in the order and sets metadata.labels.owner on every object it applies to, and AssignMetadata never changes a label or annotation that is there"
        ]
    );
    // The earlier one limited to some namespaces: the later one still applies elsewhere.
    let set = system(&format!(
        "{}---\n{}",
        label(
            "a-owner",
            "owner",
            "{value: platform}",
            "{namespaces: [prod]}"
        ),
        label("b-owner", "owner", "{value: shop}", "{}"),
    ));
    assert_eq!(
        findings(&set),
        [
            "overlap | AssignMetadata a-owner, AssignMetadata b-owner | metadata.labels.owner | it and AssignMetadata b-owner both write metadata.labels.owner on *.*/* objects with different values; AssignMetadata a-owner wins where both apply (it comes first)"
        ]
    );
}

// === overlap ===

#[test]
fn two_assigns_of_one_field_overlap_and_the_last_wins() {
    let set = system(&format!(
        "{}---\n{}",
        with_kinds(
            "a",
            "spec.dnsPolicy",
            "{assign: {value: Default}}",
            "  applyTo: [{groups: [''], versions: [v1], kinds: [Pod], operations: [CREATE]}]\n  match: {labelSelector: {matchLabels: {app: web}}}\n",
        ),
        with_kinds(
            "b",
            "spec.dnsPolicy",
            "{assign: {value: ClusterFirst}}",
            "  applyTo: [{groups: [''], versions: [v1], kinds: [Pod], operations: [CREATE]}]\n  match: {namespaces: [shop]}\n",
        ),
    ));
    let finding = only(&set);
    assert_eq!(finding.severity(), Severity::Info);
    assert_eq!(
        findings(&set),
        [
            "overlap | Assign a, Assign b | spec.dnsPolicy | it and Assign b both write spec.dnsPolicy on Pod.core/v1 objects with different values; Assign b wins where both apply (it comes last)"
        ]
    );
    // Same value, disjoint scopes, or another kind: nothing to say.
    for (b_parameters, extra) in [
        (
            "{assign: {value: Default}}",
            "  applyTo: [{groups: [''], versions: [v1], kinds: [Pod], operations: [CREATE]}]\n  match: {namespaces: [shop]}\n",
        ),
        (
            "{assign: {value: ClusterFirst}}",
            "  applyTo: [{groups: [''], versions: [v1], kinds: [Pod], operations: [CREATE]}]\n  match: {name: other, scope: Namespaced}\n",
        ),
        (
            "{assign: {value: ClusterFirst}}",
            "  applyTo: [{groups: [''], versions: [v1], kinds: [PodTemplate]}]\n",
        ),
    ] {
        let set = system(&format!(
            "{}---\n{}",
            with_kinds(
                "a",
                "spec.dnsPolicy",
                "{assign: {value: Default}}",
                "  applyTo: [{groups: [''], versions: [v1], kinds: [Pod], operations: [CREATE]}]\n  match: {name: web}\n",
            ),
            with_kinds("b", "spec.dnsPolicy", b_parameters, extra),
        ));
        assert_eq!(
            findings(&set),
            Vec::<String>::new(),
            "{b_parameters} {extra}"
        );
    }
}

// === never applies ===

#[test]
fn apply_to_and_match_kinds_that_never_meet() {
    let set = system(&with_kinds(
        "pods-of-deployments",
        "spec.dnsPolicy",
        "{assign: {value: Default}}",
        "  applyTo: [{groups: [''], versions: [v1], kinds: [Pod], operations: [CREATE]}]\n  match: {kinds: [{apiGroups: [apps], kinds: [Deployment]}]}\n",
    ));
    let finding = only(&set);
    assert_eq!(finding.severity(), Severity::Error);
    assert_eq!(
        findings(&set),
        [
            "never-applies | Assign pods-of-deployments |  | no kind in its applyTo (v1 Pod) is allowed by its match.kinds, so it applies to nothing"
        ]
    );
    // Near miss: match.kinds names Pods too.
    let set = system(&with_kinds(
        "pods",
        "spec.dnsPolicy",
        "{assign: {value: Default}}",
        "  applyTo: [{groups: [''], versions: [v1], kinds: [Pod], operations: [CREATE]}]\n  match: {kinds: [{apiGroups: [apps, ''], kinds: [Deployment, Pod]}]}\n",
    ));
    assert_eq!(findings(&set), Vec::<String>::new());
}

#[test]
fn a_scope_the_kinds_never_have() {
    let pods = "  applyTo: [{groups: [''], versions: [v1], kinds: [Pod], operations: [CREATE]}]\n";
    let set = system(&with_kinds(
        "cluster-pods",
        "spec.dnsPolicy",
        "{assign: {value: Default}}",
        &format!("{pods}  match: {{scope: Cluster, namespaces: [shop]}}\n"),
    ));
    assert_eq!(
        findings(&set),
        [
            "never-applies | Assign cluster-pods |  | its scope is Cluster but the kinds it applies to (v1 Pod are namespaced), so it matches no object in a cluster"
        ]
    );
    let set = system(&with_kinds(
        "namespaced-nodes",
        "spec.unschedulable",
        "{assign: {value: true}}",
        "  applyTo: [{groups: [''], versions: [v1], kinds: [Node]}]\n  match: {scope: Namespaced}\n",
    ));
    assert_eq!(
        findings(&set),
        [
            "never-applies | Assign namespaced-nodes |  | its scope is Namespaced but the kinds it applies to (v1 Node are cluster-scoped), so it matches no object"
        ]
    );
    // Near miss: a kind sartor does not know may be cluster-scoped.
    let set = system(&with_kinds(
        "widgets",
        "spec.size",
        "{assign: {value: 1}}",
        "  applyTo: [{groups: [example.com], versions: [v1], kinds: [Widget]}]\n  match: {scope: Cluster}\n",
    ));
    assert_eq!(findings(&set), Vec::<String>::new());
}

#[test]
fn a_kind_the_given_scopes_know_is_judged_by_scope() {
    // A CRD among the inputs (or --api-resources) makes Widget known.
    let set = system(&with_kinds(
        "widgets",
        "spec.size",
        "{assign: {value: 1}}",
        "  applyTo: [{groups: [example.com], versions: [v1], kinds: [Widget]}]\n  match: {scope: Cluster}\n",
    ));
    let mut scopes = Scopes::builtin().clone();
    scopes.insert("example.com", "Widget", true);
    let found: Vec<String> = analyze(&set, &scopes)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        found,
        [
            "Assign widgets: never-applies: its scope is Cluster but the kinds it applies to (example.com/v1 Widget are namespaced), so it matches no object in a cluster"
        ]
    );
}

#[test]
fn generated_objects_only_on_one_operation() {
    // Gatekeeper's rule (the mutator as the file loader compiles a
    // Gatekeeper apiVersion): expansion admits by no operation.
    let on_create =
        "  applyTo: [{groups: [''], versions: [v1], kinds: [Pod], operations: [CREATE]}]\n";
    let set = system(&with_kinds(
        "generated-on-create",
        "spec.containers[name: app].image",
        "{assign: {value: 'app:1'}}",
        &format!("{on_create}  match: {{source: Generated}}\n"),
    ));
    assert_eq!(
        findings(&set),
        [
            "never-applies | Assign generated-on-create |  | its match.source is Generated, and what expansion generates is admitted by no operation, which only an applyTo entry allowing every operation takes (as in Gatekeeper); each of its applyTo entries lists operations without \"*\", so it matches no object"
        ]
    );
    // Near misses: an entry for every operation; sartor's API, where a
    // generated object is the CREATE its controller will make; any source.
    let every = "  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]\n";
    let mutators = [
        with_kinds(
            "every-operation",
            "spec.containers[name: app].image",
            "{assign: {value: 'app:1'}}",
            &format!("{every}  match: {{source: Generated}}\n"),
        ),
        with_kinds(
            "any-source",
            "spec.containers[name: app].image",
            "{assign: {value: 'app:1'}}",
            on_create,
        ),
    ];
    for mutator in &mutators {
        assert_eq!(
            findings(&system(mutator)),
            Vec::<String>::new(),
            "{mutator}"
        );
    }
    let mut as_created = System::new();
    for object in super::objects(&with_kinds(
        "generated-on-create",
        "spec.containers[name: app].image",
        "{assign: {value: 'app:1'}}",
        &format!("{on_create}  match: {{source: Generated}}\n"),
    )) {
        as_created.upsert(
            sartor_engine::Mutator::compile(&object)
                .unwrap()
                .generated_as_created(),
        );
    }
    assert_eq!(findings(&as_created), Vec::<String>::new());
}

#[test]
fn namespaces_all_excluded_and_selectors_nothing_satisfies() {
    let pods = "  applyTo: [{groups: [''], versions: [v1], kinds: [Pod], operations: [CREATE]}]\n";
    let cases = [
        (
            "{namespaces: [kube-system, kube-public], excludedNamespaces: ['kube-*']}",
            "every namespace in match.namespaces is also in match.excludedNamespaces, and the kinds it applies to are namespaced, so it matches no object",
        ),
        (
            "{labelSelector: {matchLabels: {tier: web}, matchExpressions: [{key: tier, operator: NotIn, values: [web, db]}]}}",
            "its labelSelector requires a label to be both present and absent, or to have a value none of its requirements allows, so it matches no object",
        ),
        (
            "{namespaceSelector: {matchExpressions: [{key: env, operator: Exists}, {key: env, operator: DoesNotExist}]}}",
            "its namespaceSelector requires a label to be both present and absent, or to have a value none of its requirements allows, and the kinds it applies to are namespaced, so it matches no object",
        ),
    ];
    for (criteria, message) in cases {
        let set = system(&with_kinds(
            "m",
            "spec.dnsPolicy",
            "{assign: {value: Default}}",
            &format!("{pods}  match: {criteria}\n"),
        ));
        assert_eq!(
            findings(&set),
            [format!("never-applies | Assign m |  | {message}")],
            "{criteria}"
        );
    }
    // Near misses: one namespace left; In with a value NotIn allows; a Node
    // (cluster-scoped) passes the namespace criteria.
    for (kinds, criteria) in [
        (
            pods,
            "{namespaces: [kube-system, shop], excludedNamespaces: ['kube-*']}",
        ),
        (
            pods,
            "{labelSelector: {matchExpressions: [{key: tier, operator: In, values: [web, db]}, {key: tier, operator: NotIn, values: [web]}]}}",
        ),
        (
            "  applyTo: [{groups: [''], versions: [v1], kinds: [Node]}]\n",
            "{namespaces: [a], excludedNamespaces: [a]}",
        ),
    ] {
        let set = system(&with_kinds(
            "m",
            "spec.dnsPolicy",
            "{assign: {value: Default}}",
            &format!("{kinds}  match: {criteria}\n"),
        ));
        assert_eq!(findings(&set), Vec::<String>::new(), "{criteria}");
    }
}

// === breaks UPDATE ===

#[test]
fn a_pod_field_written_on_update_breaks_updates() {
    let set = system(&assign(
        "pull",
        "spec.containers[name: *].imagePullPolicy",
        "{assign: {value: Always}}",
    ));
    let finding = only(&set);
    assert_eq!(finding.rule, Rule::BreaksUpdate);
    assert_eq!(
        finding.message,
        "it applies to v1 Pod on UPDATE and writes spec.containers[name: *].imagePullPolicy, which the API server does not let change once the object exists (spec is immutable: ValidatePodUpdate, Kubernetes v1.37.2); an update of a Pod created before this mutator, or that it did not mutate, is then refused. Limit its applyTo operations to CREATE"
    );
    // Near misses: CREATE only; the image (which may change); a Deployment's template.
    for (location, extra) in [
        (
            "spec.containers[name: *].imagePullPolicy",
            "  applyTo: [{groups: [''], versions: [v1], kinds: [Pod], operations: [CREATE]}]\n",
        ),
        (
            "spec.containers[name: app].image",
            "  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]\n",
        ),
        (
            "spec.template.spec.containers[name: *].imagePullPolicy",
            "  applyTo: [{groups: [apps], versions: [v1], kinds: [Deployment]}]\n",
        ),
    ] {
        let set = system(&with_kinds("m", location, "{assign: {value: x}}", extra));
        assert_eq!(findings(&set), Vec::<String>::new(), "{location}");
    }
}

// === fights a controller ===

#[test]
fn a_replica_set_template_fights_the_deployment_controller() {
    let set = system(&with_kinds(
        "rs-pull",
        "spec.template.spec.containers[name: *].imagePullPolicy",
        "{assign: {value: Always}}",
        "  applyTo: [{groups: [apps], versions: [v1], kinds: [ReplicaSet]}]\n",
    ));
    assert_eq!(
        findings(&set),
        [
            "fights-controller | Assign rs-pull | spec.template.spec.containers[name: *].imagePullPolicy | it writes spec.template.spec.containers[name: *].imagePullPolicy of ReplicaSet.apps/v1 objects: the Deployment controller makes a Deployment's ReplicaSets from its Pod template and looks for the one whose template equals it; a ReplicaSet whose template a webhook changed never equals it, so the controller makes another, and another (gatekeeper#2963, \"ReplicaSet explosion\"). Mutate the Deployment, or the Pods, instead"
        ]
    );
    // Near misses: a ReplicaSet's replicas; a label on every object.
    let set = system(&format!(
        "{}---\n{}",
        with_kinds(
            "rs-replicas",
            "spec.minReadySeconds",
            "{assign: {value: 5}}",
            "  applyTo: [{groups: [apps], versions: [v1], kinds: [ReplicaSet]}]\n",
        ),
        label("owner", "owner", "{value: shop}", "{}"),
    ));
    assert_eq!(findings(&set), Vec::<String>::new());
}

#[test]
fn removing_the_pod_template_hash_fights_the_replica_set_controller() {
    let set = system(&label(
        "no-hash",
        "pod-template-hash",
        "{remove: true}",
        "{kinds: [{apiGroups: [''], kinds: [Pod]}]}",
    ));
    assert_eq!(
        findings(&set),
        [
            "fights-controller | AssignMetadata no-hash | metadata.labels.pod-template-hash | it writes metadata.labels.pod-template-hash of Pod.core/* objects: the ReplicaSet controller finds its Pods by this label; a Pod without it is not counted, so the controller creates another"
        ]
    );
    // Adding it never changes one that is there.
    let set = system(&label("hash", "pod-template-hash", "{value: x}", "{}"));
    assert_eq!(findings(&set), Vec::<String>::new());
}

// === may not converge ===

#[test]
fn a_label_a_selector_reads_added_and_removed_may_not_converge() {
    let reader = with_kinds(
        "a-mark",
        "spec.priority",
        "{assign: {value: 1}}",
        "  applyTo: [{groups: [''], versions: [v1], kinds: [Pod], operations: [CREATE]}]\n  match: {labelSelector: {matchExpressions: [{key: flip, operator: DoesNotExist}]}}\n",
    );
    let adder = label("b-add", "flip", "{value: 'on'}", "{}");
    let remover = label(
        "c-remove",
        "flip",
        "{remove: true}",
        "{labelSelector: {matchLabels: {flip: 'on'}}}",
    );
    let set = system(&format!("{reader}---\n{adder}---\n{remover}"));
    let messages = findings(&set);
    assert!(
        messages.contains(&"may-not-converge | Assign a-mark, AssignMetadata b-add, AssignMetadata c-remove | metadata.labels.flip | its selector reads the label \"flip\", which AssignMetadata b-add adds and AssignMetadata c-remove removes on the same objects; whether it matches can change from one pass to the next, so the set may not converge. Keep one of them off objects the other touches".to_string()),
        "{messages:#?}"
    );
    // Without the removal, labels only grow: nothing to report.
    let set = system(&format!("{reader}---\n{adder}"));
    assert!(
        findings(&set)
            .iter()
            .all(|f| !f.starts_with("may-not-converge")),
        "{:#?}",
        findings(&set)
    );
}
