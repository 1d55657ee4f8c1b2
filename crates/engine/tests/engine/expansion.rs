//! Expansion: what workloads generate, as Gatekeeper's pkg/expansion builds it.

use sartor_api::{ExpansionTemplate, GroupVersionKind};
use sartor_engine::{ExpandFailure, Expander, Template, TemplatesError};
use serde_json::{Value, json};

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "Cart", "namespace": "shop", "labels": {"app": "cart"}},
        "spec": {
            "replicas": 2,
            "template": {
                "metadata": {"labels": {"app": "cart"}, "annotations": {"a": "b"}},
                "spec": {"containers": [{"name": "app", "image": "cart:1"}]},
            },
        },
    })
}

/// Expands with no mutation, returning each generated object and its template.
fn expand(expander: &Expander, parent: &Value, namespace: Option<&str>) -> Vec<(String, Value)> {
    expander
        .expand(parent, namespace, &mut |_: &mut Value| Ok::<(), ()>(()))
        .unwrap()
        .into_iter()
        .map(|g| (g.template, g.object))
        .collect()
}

fn template(name: &str, apply_to: Value, source: &str, generated: (&str, &str, &str)) -> Template {
    let mut t = ExpansionTemplate::default();
    t.metadata.name = Some(name.into());
    t.spec.apply_to = serde_json::from_value(apply_to).unwrap();
    t.spec.template_source = source.into();
    t.spec.generated_gvk = GroupVersionKind {
        group: generated.0.into(),
        version: generated.1.into(),
        kind: generated.2.into(),
    };
    Template::compile(&t)
}

#[test]
fn a_deployment_generates_its_pod() {
    let expander = Expander::with_builtins(Vec::new()).unwrap();
    assert_eq!(
        expand(&expander, &deployment(), Some("shop")),
        [(
            "sartor-builtin-workloads".to_string(),
            json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "cart-pod",
                    "namespace": "shop",
                    "labels": {"app": "cart"},
                    "annotations": {"a": "b"},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "Cart"}],
                },
                "spec": {"containers": [{"name": "app", "image": "cart:1"}]},
            })
        )]
    );
}

#[test]
fn a_cronjob_expands_twice_parent_first() {
    let cronjob = json!({
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": "ops"},
        "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": {
            "spec": {"restartPolicy": "Never", "containers": [{"name": "run", "image": "job:1"}]},
        }}}},
    });
    let expander = Expander::with_builtins(Vec::new()).unwrap();
    let mut count = 0;
    let generated = expander
        .expand(&cronjob, Some("ops"), &mut |object: &mut Value| {
            count += 1;
            object["metadata"]["labels"] = json!({"seen": count.to_string()});
            Ok::<usize, ()>(count)
        })
        .unwrap();
    let summary: Vec<(usize, &str, Value, usize)> = generated
        .iter()
        .map(|g| {
            (
                g.depth,
                g.template.as_str(),
                g.object["metadata"].clone(),
                g.outcome,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                1,
                "sartor-builtin-cronjobs",
                json!({"name": "nightly-job", "namespace": "ops", "labels": {"seen": "1"},
                       "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly"}]}),
                1
            ),
            // Built from the Job as mutated: its label reached the Pod's parent.
            (
                2,
                "sartor-builtin-workloads",
                json!({"name": "nightly-job-pod", "namespace": "ops", "labels": {"seen": "2"},
                       "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "nightly-job"}]}),
                2
            ),
        ]
    );
    // The original is what was generated, before the caller's mutation.
    assert_eq!(generated[1].original["metadata"].get("labels"), None);
}

#[test]
fn objects_no_template_expands_generate_nothing_and_a_missing_source_is_an_error() {
    let expander = Expander::with_builtins(Vec::new()).unwrap();
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
    assert_eq!(expand(&expander, &pod, None), []);
    let mut broken = deployment();
    broken["spec"]["template"] = json!("not an object");
    let failure = |object: &Value| match expander
        .expand(object, None, &mut |_: &mut Value| Ok::<(), ()>(()))
    {
        Err(ExpandFailure::Expand(error)) => error.to_string(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        failure(&broken),
        "expansion template sartor-builtin-workloads: spec.template of Deployment Cart is not an object"
    );
    let mut missing = deployment();
    missing["spec"].as_object_mut().unwrap().remove("template");
    assert_eq!(
        failure(&missing),
        "expansion template sartor-builtin-workloads: Deployment Cart has no spec.template"
    );
}

#[test]
fn your_template_replaces_the_builtin_for_its_kinds_only() {
    let mine = template(
        "my-deployments",
        json!([{"groups": ["apps"], "versions": ["v1"], "kinds": ["Deployment"]}]),
        "spec.template",
        ("", "v1", "Pod"),
    );
    let expander = Expander::with_builtins(vec![mine]).unwrap();
    let templates: Vec<String> = expand(&expander, &deployment(), None)
        .into_iter()
        .map(|(t, _)| t)
        .collect();
    assert_eq!(templates, ["my-deployments"]);
    let mut statefulset = deployment();
    statefulset["kind"] = json!("StatefulSet");
    let templates: Vec<String> = expand(&expander, &statefulset, None)
        .into_iter()
        .map(|(t, _)| t)
        .collect();
    assert_eq!(templates, ["sartor-builtin-workloads"]);
    // Without the built-ins, only yours.
    let only = Expander::new(vec![template(
        "my-deployments",
        json!([{"groups": ["apps"], "versions": ["v1"], "kinds": ["Deployment"]}]),
        "spec.template",
        ("", "v1", "Pod"),
    )])
    .unwrap();
    assert_eq!(expand(&only, &statefulset, None), []);
}

#[test]
fn templates_that_generate_each_other_are_refused() {
    let a = template(
        "a",
        json!([{"groups": ["x.io"], "versions": ["v1"], "kinds": ["A"]}]),
        "spec.b",
        ("x.io", "v1", "B"),
    );
    let b = template(
        "b",
        json!([{"groups": ["x.io"], "versions": ["v1"], "kinds": ["B"]}]),
        "spec.a",
        ("x.io", "v1", "A"),
    );
    assert_eq!(
        Expander::new(vec![b, a]),
        Err(TemplatesError::Cycle(vec!["a".into(), "b".into()]))
    );
    assert_eq!(
        TemplatesError::Cycle(vec!["a".into(), "b".into()]).to_string(),
        "expansion templates a, b form a cycle: each generates a kind another expands"
    );
}

/// A chain of `n` templates: K0 generates K1 from spec.next, ..., K(n-1) Kn.
fn chain(n: usize) -> Expander {
    let templates: Vec<Template> = (0..n)
        .map(|i| {
            template(
                &format!("t{i:02}"),
                json!([{"groups": ["x.io"], "versions": ["v1"], "kinds": [format!("K{i}")]}]),
                "spec.next",
                ("x.io", "v1", &format!("K{}", i + 1)),
            )
        })
        .collect();
    Expander::new(templates).unwrap()
}

#[test]
fn twenty_nine_generated_levels_are_the_most_as_in_gatekeeper() {
    let mut next = json!({});
    for _ in 0..40 {
        next = json!({"spec": {"next": next}});
    }
    let parent = json!({"apiVersion": "x.io/v1", "kind": "K0", "metadata": {"name": "top"}, "spec": {"next": next}});
    let generated = chain(29)
        .expand(&parent, None, &mut |_: &mut Value| Ok::<(), ()>(()))
        .unwrap();
    assert_eq!(generated.len(), 29);
    assert_eq!(generated.last().map(|g| g.depth), Some(29));
    match chain(30).expand(&parent, None, &mut |_: &mut Value| Ok::<(), ()>(())) {
        Err(ExpandFailure::Expand(error)) => {
            assert_eq!(error.to_string(), "expansion of K0 top reaches 30 levels");
        }
        other => panic!("{other:?}"),
    }
}
