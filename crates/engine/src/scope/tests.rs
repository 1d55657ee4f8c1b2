use serde_json::json;

use super::*;

/// `kubectl api-resources -o wide` as kubectl 1.37 prints it (rows cut).
const WIDE: &str = "\
NAME                                SHORTNAMES   APIVERSION                        NAMESPACED   KIND                               VERBS                                                        CATEGORIES
bindings                                         v1                                true         Binding                            create
namespaces                          ns           v1                                false        Namespace                          create,delete,get,list,patch,update,watch
pods                                po           v1                                true         Pod                                create,delete,deletecollection,get,list,patch,update,watch   all
widgets                             wd           example.com/v1alpha1              true         Widget                             delete,deletecollection,get,list,patch,create,update,watch
clusterroles                                     rbac.authorization.k8s.io/v1      false        ClusterRole                        create,delete,deletecollection,get,list,patch,update,watch
";

#[test]
fn api_resources_are_read_under_their_headers_wide_or_not() {
    let rows = ApiResource::parse(WIDE).unwrap();
    let brief: Vec<(&str, &str, bool)> = rows
        .iter()
        .map(|r| (r.group.as_str(), r.kind.as_str(), r.namespaced))
        .collect();
    assert_eq!(
        brief,
        [
            ("", "Binding", true),
            ("", "Namespace", false),
            ("", "Pod", true),
            ("example.com", "Widget", true),
            ("rbac.authorization.k8s.io", "ClusterRole", false),
        ]
    );
    let narrow = "NAME   SHORTNAMES   APIVERSION   NAMESPACED   KIND\nnodes  no           v1           false        Node\n";
    assert_eq!(
        ApiResource::parse(narrow).unwrap(),
        [ApiResource {
            group: String::new(),
            kind: "Node".to_string(),
            namespaced: false,
            plural: Some("nodes".to_string()),
        }]
    );
    assert_eq!(ApiResource::parse("\n  \n").unwrap(), []);
}

#[test]
fn text_that_is_not_api_resources_is_refused_with_its_line() {
    assert_eq!(
        ApiResource::parse("\npods   po   v1   true   Pod\n")
            .unwrap_err()
            .to_string(),
        "line 2: expected the header of `kubectl api-resources` (with APIVERSION, NAMESPACED and KIND columns); run it without --no-headers"
    );
    let header = "NAME   APIVERSION   NAMESPACED   KIND\n";
    assert_eq!(
        ApiResource::parse(&format!("{header}pods   v1           maybe        Pod\n"))
            .unwrap_err()
            .to_string(),
        "line 2: NAMESPACED is \"maybe\", expected true or false"
    );
    assert_eq!(
        ApiResource::parse(&format!("{header}pods   v1\n"))
            .unwrap_err()
            .to_string(),
        "line 2: no NAMESPACED value under its header"
    );
}

#[test]
fn the_builtin_table_is_the_pinned_discovery() {
    let rows = ApiResource::parse(BUILTIN).unwrap();
    assert!(rows.len() > 50, "{} rows", rows.len());
    let builtin = Scopes::builtin();
    assert_eq!(builtin.namespaced("", "Pod"), Some(true));
    assert_eq!(builtin.namespaced("apps", "Deployment"), Some(true));
    assert_eq!(builtin.namespaced("", "Namespace"), Some(false));
    assert_eq!(builtin.namespaced("", "Node"), Some(false));
    assert_eq!(
        builtin.namespaced("rbac.authorization.k8s.io", "ClusterRoleBinding"),
        Some(false)
    );
    assert_eq!(builtin.namespaced("example.com", "Widget"), None);
}

fn crd(scope: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": scope,
                 "names": {"kind": "Widget", "plural": "widgets"}}
    })
}

#[test]
fn a_crd_among_the_inputs_gives_its_kind_a_scope() {
    let widget = |namespaced| ApiResource {
        group: "example.com".to_string(),
        kind: "Widget".to_string(),
        namespaced,
        plural: Some("widgets".to_string()),
    };
    assert_eq!(
        ApiResource::of_crd(&crd("Cluster")),
        Ok(Some(widget(false)))
    );
    assert_eq!(
        ApiResource::of_crd(&crd("Namespaced")),
        Ok(Some(widget(true)))
    );
    assert_eq!(
        ApiResource::of_crd(&json!({"apiVersion": "v1", "kind": "Pod"})),
        Ok(None)
    );
    assert_eq!(
        ApiResource::of_crd(&crd("namespaced"))
            .unwrap_err()
            .to_string(),
        "CustomResourceDefinition \"widgets.example.com\": spec.scope is \"namespaced\", expected \"Namespaced\" or \"Cluster\""
    );
    let mut scopes = Scopes::default();
    scopes.extend([widget(true)]);
    assert_eq!(scopes.namespaced("example.com", "Widget"), Some(true));
}

#[test]
fn objects_are_placed_by_their_kind_not_by_a_namespace_field() {
    let scopes = Scopes::builtin();
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
    assert_eq!(scopes.place(&pod, "default"), Placement::Assumed("default"));
    assert_eq!(scopes.place(&pod, "default").namespace(), Some("default"));
    let in_shop = json!({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": "p", "namespace": "shop"}});
    assert_eq!(
        scopes.place(&in_shop, "default"),
        Placement::Declared("shop")
    );
    // The API server clears a namespace on a cluster-scoped object.
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                      "metadata": {"name": "r", "namespace": "shop"}});
    assert_eq!(scopes.place(&role, "default"), Placement::Cluster);
    assert_eq!(scopes.place(&role, "default").namespace(), None);
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}});
    assert_eq!(scopes.place(&namespace, "default"), Placement::Cluster);
    // Unknown kinds: a declared namespace is taken, none is cluster-scoped.
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget",
                        "metadata": {"name": "w"}});
    assert_eq!(scopes.place(&widget, "default"), Placement::Unknown);
    let mut placed = widget.clone();
    placed["metadata"]["namespace"] = json!("shop");
    assert_eq!(
        scopes.place(&placed, "default"),
        Placement::Declared("shop")
    );
    assert_eq!(
        Placement::Assumed("default").to_string(),
        "in namespace default (assumed: namespaced kind without metadata.namespace; -n sets it)"
    );
}

#[test]
fn a_listing_gives_each_kind_its_resource_and_knows_its_groups_whole() {
    let builtin = Scopes::builtin();
    assert_eq!(builtin.plural("", "Pod"), Some("pods"));
    assert_eq!(
        builtin.plural("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
        Some("validatingadmissionpolicies")
    );
    assert!(builtin.lists_group("apps") && !builtin.lists_group("example.com"));
    let mut scopes = builtin.clone();
    scopes.extend(ApiResource::of_crd(&crd("Namespaced")).unwrap());
    assert_eq!(scopes.plural("example.com", "Widget"), Some("widgets"));
    // A CRD names one kind of its group, not all of them.
    assert!(!scopes.lists_group("example.com"));
    assert!(
        scopes
            .resources()
            .any(|resource| resource == ("example.com", "Widget", "widgets"))
    );
    assert_eq!(scopes.resources().count(), builtin.resources().count() + 1);
}
