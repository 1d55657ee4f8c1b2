//! The mutating webhook's rules follow the mutators (`--webhook-rules
//! derived`, the default): the API server sends sartor only the objects its
//! mutators can change.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::admission::{examples_enforced, replica, wait_ca_injected};
use crate::{Sartor, Suite, eventually, free_port, http_get, json, same};

/// The rules of the mutating webhook, as installed.
pub fn installed(suite: &Suite) -> Result<Value, String> {
    let rules = suite.plane.kubectl(&[
        "get",
        "mutatingwebhookconfiguration",
        "sartor-mutating",
        "-o",
        "jsonpath={.webhooks[0].rules}",
    ])?;
    if rules.trim().is_empty() {
        return Ok(json!([]));
    }
    json(&rules)
}

/// Waits until the installed rules are `want`.
/// Waits until the mutating webhook's match conditions are named `names`.
fn wait_conditions(suite: &Suite, names: &[&str]) -> Result<(), String> {
    eventually("the match conditions", Duration::from_secs(20), || {
        let installed: Vec<Value> = mutating_webhook(suite)?["matchConditions"]
            .as_array()
            .map(|conditions| conditions.iter().map(|c| c["name"].clone()).collect())
            .unwrap_or_default();
        same(
            "the match conditions",
            installed,
            names.iter().map(|n| json!(n)).collect(),
        )
    })
}

fn wait_rules(suite: &Suite, what: &str, want: &Value) -> Result<(), String> {
    eventually(what, Duration::from_secs(20), || {
        same(what, &installed(suite)?, want)
    })
}

/// The configuration's resourceVersion: it changes with every write.
fn resource_version(suite: &Suite) -> Result<String, String> {
    suite.plane.kubectl(&[
        "get",
        "mutatingwebhookconfiguration",
        "sartor-mutating",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ])
}

/// The lines of `sartor`'s /metrics that start with `prefix`, sorted.
fn metric(sartor: &Sartor, prefix: &str) -> Result<Vec<String>, String> {
    let (_, body) = http_get(sartor.metrics, "/metrics")?;
    let mut lines: Vec<String> = body
        .lines()
        .filter(|l| l.starts_with(prefix))
        .map(str::to_string)
        .collect();
    lines.sort();
    Ok(lines)
}

/// How many mutate requests `sartor` has answered.
pub fn mutate_requests(sartor: &Sartor) -> Result<u64, String> {
    let mut total = 0;
    for line in metric(sartor, "sartor_admission_requests_total{")? {
        if line.contains("endpoint=\"mutate\"") {
            let value = line.rsplit(' ').next().unwrap_or_default();
            total += value.parse::<u64>().map_err(|e| format!("{line:?}: {e}"))?;
        }
    }
    Ok(total)
}

const POD_MUTATOR: &str = "\
apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata: {name: rules-pods}
spec:
  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]
  location: spec.enableServiceLinks
  parameters: {assign: {value: false}}
";

const DEPLOYMENT_MUTATOR: &str = "\
apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata: {name: rules-deployments}
spec:
  applyTo: [{groups: [apps], versions: [v1], kinds: [Deployment], operations: [CREATE]}]
  location: spec.revisionHistoryLimit
  parameters: {assign: {value: 3}}
";

/// What [`POD_MUTATOR`] and [`DEPLOYMENT_MUTATOR`] install.
fn pod_and_deployment_rules() -> Value {
    let mut rules = pod_rules();
    if let Some(list) = rules.as_array_mut() {
        list.push(json!({"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments"], "scope": "*"}));
    }
    rules
}

/// What a set of only [`POD_MUTATOR`] installs.
fn pod_rules() -> Value {
    json!([
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"], "scope": "*"},
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods/ephemeralcontainers"], "scope": "*"},
    ])
}

/// One object of each of several kinds, created with a server-side dry run
/// (every admission webhook is called, nothing is stored): the mutate
/// requests sartor answered meanwhile.
fn workload(suite: &Suite, sartor: &Sartor) -> Result<u64, String> {
    let before = mutate_requests(sartor)?;
    let objects = "\
apiVersion: v1
kind: ConfigMap
metadata: {name: rules-config, namespace: default}
data: {a: b}
---
apiVersion: v1
kind: Secret
metadata: {name: rules-secret, namespace: default}
stringData: {a: b}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: rules-account, namespace: default}
---
apiVersion: v1
kind: Service
metadata: {name: rules-service, namespace: default}
spec:
  ports: [{port: 80}]
---
apiVersion: v1
kind: Pod
metadata: {name: rules-pod, namespace: default}
spec:
  containers: [{name: app, image: shop/app:1.0}]
";
    suite
        .plane
        .kubectl_with_input(&["create", "--dry-run=server", "-f", "-"], Some(objects))?;
    Ok(mutate_requests(sartor)? - before)
}

/// The trials' own mutators gone, the examples back and in force.
pub(crate) fn restore(suite: &mut Suite) -> Result<(), String> {
    suite.plane.kubectl(&[
        "delete",
        "assign.mutations.sartor.dev",
        "rules-pods",
        "rules-deployments",
        "--ignore-not-found",
    ])?;
    examples_enforced(suite).map(|_| ())
}

pub(crate) fn delete_all_mutators(suite: &Suite) -> Result<(), String> {
    suite.plane.kubectl(&[
        "delete",
        "assign.mutations.sartor.dev,assignimage.mutations.sartor.dev,assignmetadata.mutations.sartor.dev,modifyset.mutations.sartor.dev",
        "--all",
        "--wait=true",
    ])?;
    Ok(())
}

/// The rules follow the mutators: the examples (an AssignMetadata of every
/// kind) keep `*`; with no mutator a rule naming a resource that does not
/// exist; only a Pod mutator sends pods and debug containers; a Deployment
/// mutator adds deployments. The install's `*` rule is narrowed again after
/// a re-apply, and the request count reaching sartor drops to the Pods.
pub fn derived_from_the_mutators(suite: &mut Suite) -> Result<(), String> {
    examples_enforced(suite)?;
    let everything = json!([
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods/ephemeralcontainers"], "scope": "*"},
        {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["*"], "scope": "*"},
    ]);
    wait_rules(suite, "rules with the examples", &everything)?;

    delete_all_mutators(suite)?;
    let nothing = json!([
        {"apiGroups": ["mutations.sartor.dev"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["no-mutator-is-enforced"], "scope": "*"},
    ]);
    wait_rules(suite, "rules with no mutator", &nothing)?;

    suite
        .plane
        .kubectl_with_input(&["apply", "-f", "-"], Some(POD_MUTATOR))?;
    wait_rules(suite, "rules with a Pod mutator", &pod_rules())?;
    replica(suite)?;
    let sartor = suite.replica.as_ref().ok_or("no replica")?;
    let derived = workload(suite, sartor)?;
    same(
        "mutate requests for 5 objects, 1 a Pod (derived rules)",
        derived,
        1,
    )?;
    same(
        "sartor_webhook_rules_state",
        metric(sartor, "sartor_webhook_rules_state{")?,
        vec![
            "sartor_webhook_rules_state{state=\"derived\"} 1".to_string(),
            "sartor_webhook_rules_state{state=\"error\"} 0".to_string(),
            "sartor_webhook_rules_state{state=\"missing\"} 0".to_string(),
            "sartor_webhook_rules_state{state=\"off\"} 0".to_string(),
        ],
    )?;
    same(
        "sartor_webhook_rule_resources",
        metric(sartor, "sartor_webhook_rule_resources{")?,
        vec![
            "sartor_webhook_rule_resources{api_group=\"\",api_version=\"v1\",resource=\"pods\"} 1"
                .to_string(),
            "sartor_webhook_rule_resources{api_group=\"\",api_version=\"v1\",resource=\"pods/ephemeralcontainers\"} 1"
                .to_string(),
        ],
    )?;
    same(
        "the derived-rules annotation",
        suite.plane.kubectl(&[
            "get",
            "mutatingwebhookconfiguration",
            "sartor-mutating",
            "-o",
            r"jsonpath={.metadata.annotations.mutations\.sartor\.dev/derived-rules}",
        ])?,
        "v1 pods (CREATE,UPDATE); v1 pods/ephemeralcontainers (UPDATE)".to_string(),
    )?;
    if !sartor.log().lines().any(|l| {
        l.contains("webhook rules installed")
            && l.contains("v1 pods (CREATE,UPDATE); v1 pods/ephemeralcontainers (UPDATE)")
    }) {
        return Err(format!("no log line for the Pod rules:\n{}", sartor.log()));
    }

    let with_deployments = pod_and_deployment_rules();
    let start = Instant::now();
    suite
        .plane
        .kubectl_with_input(&["apply", "-f", "-"], Some(DEPLOYMENT_MUTATOR))?;
    wait_rules(suite, "rules with a Deployment mutator", &with_deployments)?;
    eprintln!(
        "a Deployment mutator applied: deployments in the rules {:?} later",
        start.elapsed()
    );
    suite
        .plane
        .kubectl(&["delete", "assign.mutations.sartor.dev", "rules-deployments"])?;
    wait_rules(suite, "rules without the Deployment mutator", &pod_rules())?;

    // The install's own rule (`*`) comes back with every apply, and is
    // narrowed again within a check interval (1 s here).
    let overlay = suite.applied()?.overlay_arg();
    suite.plane.kubectl(&["apply", "-k", &overlay])?;
    wait_rules(suite, "rules narrowed after a re-apply", &pod_rules())?;
    restore(suite)
}

/// With `--webhook-rules pinned` the install's `*` rule stays, and the API
/// server sends sartor every object of the workload; with derived rules
/// (the previous trial) only the Pod.
pub fn pinned_rules_stay_as_installed(suite: &mut Suite) -> Result<(), String> {
    replica(suite)?;
    delete_all_mutators(suite)?;
    suite
        .plane
        .kubectl_with_input(&["apply", "-f", "-"], Some(POD_MUTATOR))?;
    wait_rules(suite, "rules with a Pod mutator", &pod_rules())?;
    wait_conditions(suite, &["not-a-policy-object", "sartor-may-change"])?;
    let port = suite.applied()?.webhook_port;
    if let Some(replica) = suite.replica.take() {
        replica.stop();
    }
    let overlay = suite.applied()?.overlay_arg();
    suite.plane.kubectl(&["apply", "-k", &overlay])?;
    let install = installed(suite)?;
    // Applying the install again keeps the derived condition (the list
    // merges by name): kept, it would send sartor only what the Pod
    // mutator changes, whatever mutators come later. The pinned replica
    // removes it.
    wait_conditions(suite, &["not-a-policy-object", "sartor-may-change"])?;
    let pinned = Sartor::start(
        suite,
        "replica-pinned",
        port,
        &["--webhook-rules", "pinned"],
    )?;
    wait_ca_injected(suite)?;
    wait_conditions(suite, &["not-a-policy-object"])?;
    // Five check intervals: nothing rewrote them.
    std::thread::sleep(Duration::from_secs(5));
    same(
        "rules with --webhook-rules pinned",
        installed(suite)?,
        install,
    )?;
    let requests = workload(suite, &pinned);
    let none = metric(&pinned, "sartor_webhook_rules_state{");
    pinned.stop();
    let requests = requests?;
    // The API server may send more (its own writes of the moment); never fewer.
    if requests < 5 {
        return Err(format!(
            "mutate requests for 5 objects with the install's `*` rule: {requests}, want at least 5"
        ));
    }
    eprintln!("mutate requests for the 5-object workload: pinned `*` {requests}, derived 1");
    same(
        "rules state metric when pinned",
        none?,
        Vec::<String>::new(),
    )?;
    // The usual replica again: it narrows the rules.
    replica(suite)?;
    wait_rules(suite, "rules derived again", &pod_rules())?;
    restore(suite)
}

/// Two replicas deriving at once: started together on the install's `*`
/// rule, they settle on the same rules, and then neither writes again
/// (the configuration's resourceVersion stays put over five check intervals).
pub fn two_replicas_converge_without_flapping(suite: &mut Suite) -> Result<(), String> {
    replica(suite)?;
    delete_all_mutators(suite)?;
    suite.plane.kubectl_with_input(
        &["apply", "-f", "-"],
        Some(&format!("{POD_MUTATOR}---\n{DEPLOYMENT_MUTATOR}")),
    )?;
    let want = pod_and_deployment_rules();
    let second = Sartor::start(suite, "replica-b", free_port()?, &[])?;
    wait_rules(suite, "rules before the race", &want)?;
    let overlay = suite.applied()?.overlay_arg();
    // Both replicas find `*` installed at their next check and race to narrow it.
    suite.plane.kubectl(&["apply", "-k", &overlay])?;
    wait_rules(suite, "rules after the race", &want)?;
    let settled = resource_version(suite)?;
    std::thread::sleep(Duration::from_secs(5));
    let after = resource_version(suite);
    let state = metric(&second, "sartor_webhook_rule_resources{");
    let (code, log) = second.stop();
    same("resourceVersion over five check intervals", after?, settled)?;
    same("replica-b's exit code", code, Some(0))?;
    let first = suite.replica.as_ref().ok_or("no replica")?;
    same(
        "the resources each replica reports",
        state?,
        metric(first, "sartor_webhook_rule_resources{")?,
    )?;
    let writes = |log: &str| {
        log.lines()
            .filter(|l| l.contains("webhook rules installed"))
            .count()
    };
    eprintln!(
        "writes of the rules: replica-a {} in its life, replica-b {} (log: {} lines)",
        writes(&first.log()),
        writes(&log),
        log.lines().count()
    );
    restore(suite)
}

/// The install's mutating webhook, as installed.
pub(crate) fn mutating_webhook(suite: &Suite) -> Result<Value, String> {
    let config = json(&suite.plane.kubectl(&[
        "get",
        "mutatingwebhookconfiguration",
        "sartor-mutating",
        "-o",
        "json",
    ])?)?;
    Ok(config["webhooks"][0].clone())
}

/// A Pod that [`POD_MUTATOR`] would change (`enableServiceLinks` defaults
/// to true), or would leave as it is.
fn service_links_pod(name: &str, conforms: bool) -> String {
    let links = match conforms {
        true => "\n  enableServiceLinks: false",
        false => "",
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  containers: [{{name: app, image: shop/app:1.0}}]{links}\n"
    )
}

/// The derived match condition (`sartor-may-change`) keeps from sartor
/// what its mutators would not change: with one Pod mutator, a Pod that
/// already conforms is admitted with no call, one that does not is
/// mutated. With `failurePolicy: Fail` and sartor stopped, the conforming
/// Pod is still created and updated; the other is refused with the API
/// server's message, then admitted, mutated, once sartor is back. The
/// install's own condition stays beside the derived one.
pub fn an_outage_blocks_only_what_sartor_would_change(suite: &mut Suite) -> Result<(), String> {
    examples_enforced(suite)?;
    delete_all_mutators(suite)?;
    suite
        .plane
        .kubectl_with_input(&["apply", "-f", "-"], Some(POD_MUTATOR))?;
    wait_rules(suite, "rules with a Pod mutator", &pod_rules())?;
    wait_conditions(suite, &["not-a-policy-object", "sartor-may-change"])?;
    replica(suite)?;
    let sartor = suite.replica.as_ref().ok_or("no replica")?;
    eventually("the condition's metrics", Duration::from_secs(20), || {
        same(
            "sartor_webhook_condition",
            metric(sartor, "sartor_webhook_condition")?,
            vec![
                "sartor_webhook_condition_installed 1".to_string(),
                "sartor_webhook_condition_mutators{decided=\"change\"} 1".to_string(),
                "sartor_webhook_condition_mutators{decided=\"match\"} 0".to_string(),
                "sartor_webhook_condition_mutators{decided=\"never\"} 0".to_string(),
            ],
        )
    })?;
    let result = outage(suite);
    // Whatever happened: Ignore again, the Pods gone, the examples back.
    let _ = set_failure_policy(suite, "Ignore");
    let _ = suite.plane.kubectl(&[
        "delete",
        "pod",
        "outage-conforming",
        "outage-changed",
        "-n",
        "default",
        "--ignore-not-found",
        "--wait=false",
    ]);
    replica(suite)?;
    restore(suite)?;
    result
}

pub(crate) fn set_failure_policy(suite: &Suite, policy: &str) -> Result<String, String> {
    suite.plane.kubectl(&[
        "patch",
        "mutatingwebhookconfiguration",
        "sartor-mutating",
        "--type=json",
        "-p",
        &json!([{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": policy}])
            .to_string(),
    ])
}

/// The calls and the outage of [`an_outage_blocks_only_what_sartor_would_change`].
fn outage(suite: &mut Suite) -> Result<(), String> {
    let plane = &suite.plane;
    let sartor = suite.replica.as_ref().ok_or("no replica")?;
    let before = mutate_requests(sartor)?;
    let created = plane.kubectl_with_input(
        &["create", "--dry-run=server", "-o", "json", "-f", "-"],
        Some(&service_links_pod("outage-changed", false)),
    )?;
    same(
        "enableServiceLinks of a Pod sartor mutated",
        json(&created)?["spec"]["enableServiceLinks"].clone(),
        json!(false),
    )?;
    same(
        "calls for a Pod to change",
        mutate_requests(sartor)? - before,
        1,
    )?;
    let before = mutate_requests(sartor)?;
    plane.kubectl_with_input(
        &["create", "-f", "-"],
        Some(&service_links_pod("outage-conforming", true)),
    )?;
    same(
        "calls for a Pod that conforms",
        mutate_requests(sartor)? - before,
        0,
    )?;

    set_failure_policy(suite, "Fail")?;
    let (_, log) = suite.replica.take().ok_or("no replica")?.stop();
    let plane = &suite.plane;
    // The API server sees the configuration change soon after it is
    // written: the Pod sartor would change is refused once it does.
    let refusal = eventually(
        "the Pod to change refused",
        Duration::from_secs(20),
        || match plane.kubectl_with_input(
            &["create", "--dry-run=server", "-f", "-"],
            Some(&service_links_pod("outage-changed", false)),
        ) {
            Ok(created) => Err(format!("still admitted: {created}")),
            Err(refusal) => Ok(refusal),
        },
    )
    .map_err(|e| format!("{e}\nsartor's log:\n{log}"))?;
    if !refusal.contains("failed calling webhook \"mutation.sartor.dev\"") {
        return Err(format!("refused otherwise than by the outage: {refusal}"));
    }
    plane.kubectl_with_input(
        &["create", "--dry-run=server", "-f", "-"],
        Some(&service_links_pod("outage-conforming-2", true)),
    )?;
    plane.kubectl(&[
        "label",
        "pod",
        "outage-conforming",
        "-n",
        "default",
        "updated=during-the-outage",
    ])?;

    replica(suite)?;
    let plane = &suite.plane;
    eventually(
        "the Pod to change admitted again",
        Duration::from_secs(30),
        || {
            let created = plane.kubectl_with_input(
                &["create", "--dry-run=server", "-o", "json", "-f", "-"],
                Some(&service_links_pod("outage-changed", false)),
            )?;
            same(
                "enableServiceLinks once sartor is back",
                json(&created)?["spec"]["enableServiceLinks"].clone(),
                json!(false),
            )
        },
    )
}
