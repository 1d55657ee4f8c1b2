#![allow(clippy::unwrap_used)]

use sartor_api::{mutators_from_documents, read_documents_from_str};
use sartor_engine::{ApiResource, compile};

use super::*;

/// The system of the mutators in `yaml`, compiled as `sartor lint` does.
fn system(yaml: &str) -> System {
    let (documents, errors) = read_documents_from_str("mutators.yaml", yaml, false);
    let compiled = compile(mutators_from_documents(&documents, errors));
    assert!(compiled.errors.is_empty(), "{:?}", compiled.errors);
    compiled.system
}

fn yaml(rbac: &AuditRbac) -> String {
    let mut out = Vec::new();
    rbac.write_yaml(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn helm_values(rbac: &AuditRbac) -> String {
    let mut out = Vec::new();
    rbac.write_helm_values(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// The comment every output starts with.
const HEADER: &str = "\
# What the in-cluster audit (sartor serve --audit-interval) may list and
# watch: the resources these mutators can change on an object's next write,
# and Namespaces. Printed by `sartor audit rbac` from the mutators: print
# and apply it again when they change; a kind not granted is left out of
# the audit and named on /readyz.
";

/// Gatekeeper's Assign of Pods, sartor's of Secrets.
const PODS_AND_SECRETS: &str = "\
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: always-pull}
spec:
  applyTo:
  - {groups: [''], versions: [v1], kinds: [Pod]}
  location: spec.containers[name:*].imagePullPolicy
  parameters: {assign: {value: Always}}
---
apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata: {name: secret-owner}
spec:
  applyTo:
  - {groups: [''], versions: [v1], kinds: [Secret]}
  location: data.audited
  parameters: {assign: {value: eWVz}}
";

/// An AssignMetadata of every kind.
const EVERY_KIND: &str = "\
---
apiVersion: mutations.sartor.dev/v1
kind: AssignMetadata
metadata: {name: team-label}
spec:
  location: metadata.labels.team
  parameters: {assign: {value: platform}}
";

#[test]
fn the_role_grants_the_resources_the_mutators_change_and_namespaces() {
    let rbac = audit_rbac(
        &system(PODS_AND_SECRETS),
        Scopes::builtin(),
        RbacOptions::default(),
    )
    .unwrap();
    assert!(!rbac.is_wide());
    assert_eq!(
        yaml(&rbac),
        HEADER.to_string()
            + "\
# Apply it beside manifests/optional/audit/rbac.yaml.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: sartor-audit-objects
  labels:
    app.kubernetes.io/name: sartor
    app.kubernetes.io/part-of: sartor
rules:
# namespaces: the audit itself (namespaceSelectors, the exemption and repair labels)
# pods: Assign/always-pull
# secrets: Assign/secret-owner
- apiGroups: ['']
  resources: [namespaces, pods, secrets]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: sartor-audit-objects
  labels:
    app.kubernetes.io/name: sartor
    app.kubernetes.io/part-of: sartor
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: sartor-audit-objects
subjects:
- kind: ServiceAccount
  name: sartor
  namespace: sartor-system
"
    );
}

#[test]
fn a_mutator_of_every_kind_needs_every_resource_and_says_so() {
    let rbac = audit_rbac(
        &system(&format!("{PODS_AND_SECRETS}{EVERY_KIND}")),
        Scopes::builtin(),
        RbacOptions {
            name: "audit".to_string(),
            service_account: "sartor".to_string(),
            namespace: "mutation".to_string(),
        },
    )
    .unwrap();
    assert!(rbac.is_wide());
    assert_eq!(
        yaml(&rbac),
        HEADER.to_string()
            + "\
# Apply it beside manifests/optional/audit/rbac.yaml.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: audit
  labels:
    app.kubernetes.io/name: sartor
    app.kubernetes.io/part-of: sartor
rules:
# every resource of every group, Secrets included: AssignMetadata/team-label
#   it applies to every kind: this cannot be narrowed but by narrowing its match.kinds
# namespaces: the audit itself (namespaceSelectors, the exemption and repair labels)
# pods: Assign/always-pull
# secrets: Assign/secret-owner
- apiGroups: ['*']
  resources: ['*']
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: audit
  labels:
    app.kubernetes.io/name: sartor
    app.kubernetes.io/part-of: sartor
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: audit
subjects:
- kind: ServiceAccount
  name: sartor
  namespace: mutation
"
    );
}

/// Deployments (sartor's), a CRD's Widgets (through --api-resources), every
/// kind of `batch` (an AssignMetadata), Jobs (covered by that), a kind
/// `apps` does not serve, and StatefulSets only on CREATE (never audited).
const GROUPS: &str = "\
apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata: {name: replicas}
spec:
  applyTo:
  - {groups: [apps], versions: [v1], kinds: [Deployment, Deploymnt]}
  - {groups: [apps], versions: [v1], kinds: [StatefulSet], operations: [CREATE]}
  location: spec.revisionHistoryLimit
  parameters: {assign: {value: 3}}
---
apiVersion: mutations.gatekeeper.sh/v1beta1
kind: Assign
metadata: {name: widget-size}
spec:
  applyTo:
  - {groups: [example.com], versions: [v2], kinds: [Widget]}
  - {groups: [batch], versions: [v1], kinds: [Job]}
  location: spec.size
  parameters: {assign: {value: 3}}
---
apiVersion: mutations.sartor.dev/v1
kind: AssignMetadata
metadata: {name: batch-team}
spec:
  match:
    kinds: [{apiGroups: [batch], kinds: ['*']}]
  location: metadata.labels.team
  parameters: {assign: {value: batch}}
";

/// `kubectl api-resources` of a cluster serving Widgets.
const WIDGETS: &str = "\
NAME      SHORTNAMES   APIVERSION           NAMESPACED   KIND
widgets   wd           example.com/v2       true         Widget
";

fn with_widgets() -> Scopes {
    let mut scopes = Scopes::builtin().clone();
    scopes.extend_listed(ApiResource::parse(WIDGETS).unwrap());
    scopes
}

#[test]
fn each_group_gets_a_rule_and_a_group_of_every_kind_covers_its_own() {
    let rbac = audit_rbac(&system(GROUPS), &with_widgets(), RbacOptions::default()).unwrap();
    assert!(rbac.is_wide());
    assert_eq!(
        helm_values(&rbac),
        HEADER.to_string()
            + "\
# Give it to the chart beside your values (helm upgrade -f THIS): it renders
# these rules as the ClusterRole RELEASE-audit-objects and its binding.
# Not granted: Deploymnt.apps/*, which Assign/replicas applies to, is not served (Kubernetes 1.37.2, --api-resources).
# Not granted: StatefulSet.apps/*, which Assign/replicas changes only on CREATE: the audit looks at the next UPDATE.
audit:
  rules:
  # namespaces: the audit itself (namespaceSelectors, the exemption and repair labels)
  - apiGroups: ['']
    resources: [namespaces]
  # deployments.apps: Assign/replicas
  - apiGroups: [apps]
    resources: [deployments]
  # every resource of batch: AssignMetadata/batch-team
  #   it applies to every kind of batch: this cannot be narrowed but by narrowing its match.kinds
  # jobs.batch: Assign/widget-size
  - apiGroups: [batch]
    resources: ['*']
  # widgets.example.com: Assign/widget-size
  - apiGroups: [example.com]
    resources: [widgets]
"
    );
}

#[test]
fn a_kind_of_unknown_resource_is_refused_with_its_mutators() {
    let refused =
        audit_rbac(&system(GROUPS), Scopes::builtin(), RbacOptions::default()).unwrap_err();
    assert_eq!(
        refused,
        [UnknownKind {
            kind: "Widget.example.com/*".to_string(),
            mutators: vec![MutatorId {
                kind: sartor_api::MutatorKind::Assign,
                name: "widget-size".to_string()
            }],
        }]
    );
    assert_eq!(
        refused[0].to_string(),
        "Widget.example.com/*, which Assign/widget-size applies to, has no resource (plural) known offline: give its CRD among the mutator paths, or `kubectl api-resources` output with --api-resources"
    );
}

#[test]
fn no_mutator_grants_namespaces_alone_and_names_are_quoted_when_yaml_needs_it() {
    let rbac = audit_rbac(
        &System::new(),
        Scopes::builtin(),
        RbacOptions {
            name: "true".to_string(),
            service_account: "Sartor Audit".to_string(),
            namespace: "1.5".to_string(),
        },
    )
    .unwrap();
    let printed = yaml(&rbac);
    let documents: Vec<serde_json::Value> = printed
        .split("\n---\n")
        .map(|document| {
            serde_json::to_value(serde_yaml::from_str::<serde_yaml::Value>(document).unwrap())
                .unwrap()
        })
        .collect();
    assert_eq!(
        documents[0]["rules"],
        serde_json::json!([{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]}])
    );
    assert_eq!(documents[0]["metadata"]["name"], "true");
    assert_eq!(
        documents[1]["subjects"],
        serde_json::json!([{"kind": "ServiceAccount", "name": "Sartor Audit", "namespace": "1.5"}])
    );
}
