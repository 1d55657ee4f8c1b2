//! `sartor audit` against the real API server: objects stored before a
//! mutator existed are listed with the paths it would change; an object the
//! webhook already mutated is not.

use std::process::Command;
use std::time::Duration;

use serde_json::json;

use crate::{Sartor, Suite, eventually, same};

/// An Assign that sets `data.audited` on the ConfigMaps of `audit`.
const AUDIT_ME: &str = "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata:\n  name: audit-me\nspec:\n  applyTo:\n  - {groups: [''], versions: [v1], kinds: [ConfigMap]}\n  match:\n    namespaces: [audit]\n  location: data.audited\n  parameters:\n    assign:\n      value: 'yes'\n";

/// The namespace and, created before the mutator exists, a ConfigMap it
/// would change and one it would leave (already as it would set it).
const STORED: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: audit\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: old\n  namespace: audit\ndata:\n  colour: blue\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: done\n  namespace: audit\ndata:\n  audited: 'yes'\n";

/// `sartor audit args...` as the cluster's admin: its exit code and stdout.
fn audit(suite: &Suite, args: &[&str]) -> Result<(Option<i32>, String), String> {
    let output = Command::new(sartor_tests::binary::sartor()?)
        .arg("audit")
        .args(args)
        .env("KUBECONFIG", &suite.plane.kubeconfig)
        .output()
        .map_err(|e| e.to_string())?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.code() == Some(2) {
        return Err(format!("sartor audit {}: {stderr}", args.join(" ")));
    }
    Ok((
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    ))
}

pub fn stored_objects_the_mutators_would_change_are_listed(
    suite: &mut Suite,
) -> Result<(), String> {
    crate::admission::replica(suite)?;
    let plane = &suite.plane;
    plane.kubectl_with_input(&["apply", "-f", "-"], Some(STORED))?;
    let mutators = plane.dir().join("audit-me.yaml");
    std::fs::write(&mutators, AUDIT_ME).map_err(|e| e.to_string())?;
    let mutators = mutators.display().to_string();

    // From files: the set tried against the cluster before it is applied.
    let line = "ConfigMap audit/old: Assign audit-me (data.audited)\n";
    same(
        "audit --mutators",
        audit(suite, &["--mutators", &mutators, "-n", "audit"])?,
        (Some(0), line.to_string()),
    )?;
    // The kubeconfig named by --kubeconfig, as kubectl's flag: it wins
    // over a $KUBECONFIG that points nowhere.
    let output = Command::new(sartor_tests::binary::sartor()?)
        .args([
            "audit",
            "--mutators",
            &mutators,
            "-n",
            "audit",
            "--kubeconfig",
        ])
        .arg(&suite.plane.kubeconfig)
        .env("KUBECONFIG", plane.dir().join("no-such-kubeconfig"))
        .output()
        .map_err(|e| e.to_string())?;
    same(
        "audit --kubeconfig",
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
        ),
        (Some(0), line.to_string()),
    )?;
    // A namespace the webhook never sees is left out, as `serve
    // --exclude-namespace` leaves it out.
    same(
        "audit --exclude-namespace 'aud*'",
        audit(
            suite,
            &[
                "--mutators",
                &mutators,
                "-n",
                "audit",
                "--exclude-namespace",
                "aud*",
            ],
        )?,
        (Some(0), String::new()),
    )?;
    same(
        "audit --mutators --exit-code",
        audit(
            suite,
            &["--mutators", &mutators, "-n", "audit", "--exit-code"],
        )?
        .0,
        Some(1),
    )?;
    let (code, out) = audit(
        suite,
        &["--mutators", &mutators, "-n", "audit", "-o", "json"],
    )?;
    same(
        "audit -o json",
        (code, crate::json(&out)?),
        (
            Some(0),
            json!({
                "scanned": 2,
                "kinds": {"ConfigMap.core/v1": 2},
                "changes": [{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "audit",
                             "name": "old", "mutators": ["Assign audit-me"],
                             "paths": ["data.audited"]}],
                "errors": [],
            }),
        ),
    )?;
    let (code, out) = audit(
        suite,
        &["--mutators", &mutators, "-n", "audit", "-o", "yaml"],
    )?;
    let yaml: serde_json::Value = serde_yaml::from_str(&out).map_err(|e| format!("{e}: {out}"))?;
    let (_, json_out) = audit(
        suite,
        &["--mutators", &mutators, "-n", "audit", "-o", "json"],
    )?;
    same(
        "audit -o yaml",
        (code, yaml),
        (Some(0), crate::json(&json_out)?),
    )?;
    same(
        "audit -o junit",
        audit(
            suite,
            &["--mutators", &mutators, "-n", "audit", "-o", "junit"],
        )?,
        (
            Some(0),
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <testsuites name=\"sartor audit\" tests=\"1\" failures=\"1\" errors=\"0\" time=\"0.000000\">\n\
             \x20 <testsuite name=\"ConfigMap.core/v1\" tests=\"1\" failures=\"1\" errors=\"0\" skipped=\"0\" time=\"0.000000\">\n\
             \x20   <testcase name=\"audit/old\" classname=\"ConfigMap.core/v1\" time=\"0.000000\">\n\
             \x20     <failure message=\"would change: Assign audit-me (data.audited)\" type=\"mismatch\">would change: Assign audit-me (data.audited)</failure>\n\
             \x20   </testcase>\n\
             \x20 </testsuite>\n\
             </testsuites>\n"
                .to_string(),
        ),
    )?;
    same(
        "audit --explain",
        audit(
            suite,
            &["--mutators", &mutators, "-n", "audit", "--explain"],
        )?,
        (
            Some(0),
            format!("{line}  pass 1  Assign audit-me  data.audited\n"),
        ),
    )?;
    let (code, out) = audit(suite, &["--mutators", &mutators, "-n", "audit", "--diff"])?;
    same(
        "audit --diff",
        (code, out),
        (
            Some(0),
            format!(
                "{line}--- ConfigMap audit/old\n+++ ConfigMap audit/old (mutated)\n@@ -1,5 +1,6 @@\n apiVersion: v1\n data:\n+  audited: \"yes\"\n   colour: blue\n kind: ConfigMap\n metadata:\n"
            ),
        ),
    )?;

    // From the cluster, once the webhook enforces the mutator: what it
    // mutated when created is not listed, what was stored before is.
    plane.kubectl_with_input(&["apply", "-f", "-"], Some(AUDIT_ME))?;
    create_once_enforced(suite, "audit", "audited")?;
    let listed = audit(suite, &["-n", "audit"]);
    // A deleted object is gone from the audit.
    plane.kubectl(&["delete", "configmap", "old", "-n", "audit"])?;
    let after_delete = audit(suite, &["-n", "audit"]);
    // A user RBAC does not let list ConfigMaps: the resource, the API
    // server's words and what is missing.
    let forbidden = forbidden_audit(suite, &mutators);
    plane.kubectl(&["delete", "clusterrolebinding,clusterrole", "audit-reader"])?;
    plane.kubectl(&["delete", "assign.mutations.sartor.dev", "audit-me"])?;
    plane.kubectl(&["delete", "namespace", "audit", "--wait=false"])?;
    same(
        "audit (the cluster's mutators)",
        listed?,
        (Some(0), line.to_string()),
    )?;
    same(
        "audit after the object was deleted",
        after_delete?,
        (Some(0), String::new()),
    )?;
    same(
        "audit by a user who may not list ConfigMaps",
        forbidden?,
        (
            Some(2),
            "error: listing configmaps/v1 in audit: configmaps is forbidden: User \
             \"system:serviceaccount:audit:reader\" cannot list resource \"configmaps\" in API \
             group \"\" in the namespace \"audit\" (Forbidden): the user needs the `list` verb \
             on it (RBAC)\n"
                .to_string(),
        ),
    )
}

/// Waits until the webhook sets `data.<field>` to `yes` on a new ConfigMap
/// of `namespace` (the mutator is enforced), then creates the ConfigMap
/// `new` there through it.
fn create_once_enforced(suite: &Suite, namespace: &str, field: &str) -> Result<(), String> {
    let plane = &suite.plane;
    let configmap = |name: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {namespace}\n"
        )
    };
    eventually(
        &format!("data.{field} enforced"),
        Duration::from_secs(20),
        || {
            let stored = plane.kubectl_with_input(
                &[
                    "create",
                    "--dry-run=server",
                    "-f",
                    "-",
                    "-o",
                    &format!("jsonpath={{.data.{field}}}"),
                ],
                Some(&configmap("probe")),
            )?;
            same(
                &format!("a new ConfigMap's data.{field}"),
                stored,
                "yes".to_string(),
            )
        },
    )?;
    plane.kubectl_with_input(&["create", "-f", "-"], Some(&configmap("new")))?;
    Ok(())
}

/// `sartor audit --mutators mutators -n audit` as the service account
/// `audit/reader`, which may list Namespaces (for their exemption label)
/// and nothing else: its exit code and stderr.
fn forbidden_audit(suite: &Suite, mutators: &str) -> Result<(Option<i32>, String), String> {
    let plane = &suite.plane;
    plane.kubectl(&["create", "serviceaccount", "reader", "-n", "audit"])?;
    plane.kubectl(&[
        "create",
        "clusterrole",
        "audit-reader",
        "--verb=list",
        "--resource=namespaces",
    ])?;
    plane.kubectl(&[
        "create",
        "clusterrolebinding",
        "audit-reader",
        "--clusterrole=audit-reader",
        "--serviceaccount=audit:reader",
    ])?;
    let token = plane.kubectl(&["create", "token", "reader", "-n", "audit"])?;
    let kubeconfig = plane.token_kubeconfig("audit-reader", token.trim())?;
    let output = Command::new(sartor_tests::binary::sartor()?)
        .args(["audit", "--mutators", mutators, "-n", "audit"])
        .env("KUBECONFIG", kubeconfig)
        .output()
        .map_err(|e| e.to_string())?;
    Ok((
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    ))
}

/// Two Assigns of the namespace `repair`: Deployments' Pod template and
/// Pods run as non-root.
const NON_ROOT: &str = "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata:\n  name: non-root-deployments\nspec:\n  applyTo:\n  - {groups: [apps], versions: [v1], kinds: [Deployment]}\n  match:\n    namespaces: [repair]\n  location: spec.template.spec.securityContext.runAsNonRoot\n  parameters:\n    assign:\n      value: true\n---\napiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata:\n  name: non-root-pods\nspec:\n  applyTo:\n  - {groups: [''], versions: [v1], kinds: [Pod]}\n  match:\n    namespaces: [repair]\n  location: spec.securityContext.runAsNonRoot\n  parameters:\n    assign:\n      value: true\n";

/// A Deployment `name` of the namespace `repair`.
fn deployment(name: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: repair\nspec:\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n      - {{name: main, image: registry.example/{name}:1}}\n"
    )
}

/// Stored before the mutators exist: a Deployment, a Pod nothing owns and
/// a Pod a ReplicaSet controls (there is no controller manager here: its
/// owner reference is written by hand).
fn repair_objects() -> String {
    let pod = |name: &str, owner: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: repair\n{owner}spec:\n  containers:\n  - {{name: main, image: registry.example/{name}:1}}\n"
        )
    };
    let owner = "  ownerReferences:\n  - {apiVersion: apps/v1, kind: ReplicaSet, name: web-5d8f, uid: 0b7e3f4c-0000-4000-8000-000000000001, controller: true}\n";
    [
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: repair\n".to_string(),
        deployment("web"),
        pod("lone", ""),
        pod("web-5d8f-x2k9q", owner),
    ]
    .join("---\n")
}

pub fn fix_repairs_stored_objects_as_sartor_mutate_predicts(
    suite: &mut Suite,
) -> Result<(), String> {
    crate::admission::replica(suite)?;
    let plane = &suite.plane;
    plane.kubectl_with_input(&["apply", "-f", "-"], Some(&repair_objects()))?;
    let mutators = plane.dir().join("non-root.yaml");
    std::fs::write(&mutators, NON_ROOT).map_err(|e| e.to_string())?;
    let mutators = mutators.display().to_string();
    // What `sartor mutate` predicts for the Deployment as stored.
    let stored = plane.kubectl(&["get", "deployment", "web", "-n", "repair", "-o", "json"])?;
    let stored_path = plane.dir().join("web.json");
    std::fs::write(&stored_path, &stored).map_err(|e| e.to_string())?;
    let predicted = crate::json(&crate::sartor(&[
        "mutate",
        "-m",
        &mutators,
        "-o",
        "json",
        &stored_path.display().to_string(),
    ])?)?;

    let fixed = audit(suite, &["--mutators", &mutators, "-n", "repair", "--fix"])?;
    let after = crate::json(&plane.kubectl(&[
        "get",
        "deployment",
        "web",
        "-n",
        "repair",
        "-o",
        "json",
    ])?)?;
    let again = audit(suite, &["--mutators", &mutators, "-n", "repair"]);
    let (code, out) = fixed;
    let lines: Vec<&str> = out.lines().collect();
    let listed = [
        "Pod repair/lone: Assign non-root-pods (spec.securityContext.runAsNonRoot)",
        "Pod repair/web-5d8f-x2k9q: Assign non-root-pods (spec.securityContext.runAsNonRoot)",
        "Deployment repair/web: Assign non-root-deployments (spec.template.spec.securityContext.runAsNonRoot)",
    ];
    same(
        "audit --fix: the objects listed",
        lines.get(..3),
        Some(&listed[..]),
    )?;
    // A Pod's spec cannot be changed: the API server's own words (the first
    // line of them: a diff of the spec follows).
    same(
        "audit --fix: the bare Pod",
        lines.get(3).copied(),
        Some(
            "Pod repair/lone: refused: Pod \"lone\" is invalid: spec: Forbidden: pod updates may \
             not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,\
             `spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing \
             tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was \
             previously negative) (Invalid)",
        ),
    )?;
    same(
        "audit --fix: the owned Pod and the Deployment",
        (code, lines.get(4..)),
        (
            Some(1),
            Some(
                &[
                    "Pod repair/web-5d8f-x2k9q: not patched: owned by ReplicaSet/web-5d8f; repair its owner",
                    "Deployment repair/web: repaired (spec.template.spec.securityContext.runAsNonRoot)",
                ][..],
            ),
        ),
    )?;
    same(
        "the repaired Deployment's spec, as sartor mutate predicted",
        after.get("spec"),
        predicted.get("spec"),
    )?;
    same(
        "audit after --fix: only the Pods are left",
        again?,
        (Some(0), format!("{}\n{}\n", listed[0], listed[1])),
    )?;
    concurrent_writers_are_never_overwritten(suite, &mutators)?;
    suite
        .plane
        .kubectl(&["delete", "namespace", "repair", "--wait=false"])?;
    Ok(())
}

/// A repair planned from one read, with a write by someone else before its
/// patch: the patch (which names the version read) is refused, and the
/// repair starts again from a fresh read. Through the library, to put the
/// write between read and patch.
fn concurrent_writers_are_never_overwritten(suite: &Suite, mutators: &str) -> Result<(), String> {
    use sartor_controller::audit::{Planned, Repaired, Repairer, Resource, Stored};
    use sartor_engine::Operation;

    let plane = &suite.plane;
    plane.kubectl_with_input(&["apply", "-f", "-"], Some(&deployment("api")))?;
    plane.kubectl_with_input(&["apply", "-f", "-"], Some(&deployment("shop")))?;
    let loaded = sartor_api::load_mutators(&[sartor_api::Input::from_arg(mutators)]);
    let system = sartor_engine::compile(loaded).system;
    let object = |name: &str| Stored {
        resource: Resource::new("apps", "v1", "Deployment", "deployments"),
        namespace: Some("repair".into()),
        name: name.into(),
        uid: None,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let (unrelated, same_field) = runtime.block_on(async {
        let kubeconfig =
            kube::config::Kubeconfig::read_from(&plane.kubeconfig).map_err(|e| e.to_string())?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let client = kube::Client::try_from(config).map_err(|e| e.to_string())?;
        let repairer = Repairer::new(&client, &system, Operation::Update)
            .await
            .map_err(|e| e.to_string())?;
        let plan = |planned: Planned| match planned {
            Planned::Patch(plan) => Ok(*plan),
            Planned::Done(done) => Err(format!("nothing to patch: {done}")),
        };
        // Another writer annotates `api` after the read: the repair
        // happens on top of it.
        let api = plan(repairer.plan(&object("api")).await)?;
        plane.kubectl(&[
            "annotate",
            "deployment",
            "api",
            "-n",
            "repair",
            "touched=yes",
        ])?;
        let unrelated = repairer.apply(api).await;
        // Another writer sets the very field after the read: the fresh read
        // finds nothing left to do (a patch sent anyway would say Patched).
        let shop = plan(repairer.plan(&object("shop")).await)?;
        plane.kubectl(&[
            "patch",
            "deployment",
            "shop",
            "-n",
            "repair",
            "--type=merge",
            "-p",
            r#"{"spec":{"template":{"spec":{"securityContext":{"runAsNonRoot":true}}}}}"#,
        ])?;
        let same_field = repairer.apply(shop).await;
        Ok::<_, String>((unrelated, same_field))
    })?;
    same(
        "a repair after an unrelated write",
        unrelated,
        Repaired::Patched {
            paths: vec!["spec.template.spec.securityContext.runAsNonRoot".into()],
        },
    )?;
    same(
        "a repair after a write of its field",
        same_field,
        Repaired::Unchanged,
    )?;
    let api = crate::json(&plane.kubectl(&[
        "get",
        "deployment",
        "api",
        "-n",
        "repair",
        "-o",
        "json",
    ])?)?;
    same(
        "api: the other writer's annotation and the repair",
        (
            api.pointer("/metadata/annotations/touched"),
            api.pointer("/spec/template/spec/securityContext/runAsNonRoot"),
        ),
        (Some(&json!("yes")), Some(&json!(true))),
    )
}

/// An Assign that sets `data.reported` on the ConfigMaps of `reported`.
const REPORT_ME: &str = "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata:\n  name: report-me\nspec:\n  applyTo:\n  - {groups: [''], versions: [v1], kinds: [ConfigMap]}\n  match:\n    namespaces: [reported]\n  location: data.reported\n  parameters:\n    assign:\n      value: 'yes'\n";

/// The OpenReports CRDs' files, from the `github.com/openreports/reports-api`
/// module at v0.2.1 (through the Go module proxy, into the module cache).
fn openreports_crds(suite: &Suite) -> Result<Vec<String>, String> {
    let output = Command::new("go")
        .args([
            "mod",
            "download",
            "-json",
            "github.com/openreports/reports-api@v0.2.1",
        ])
        .current_dir(suite.plane.dir())
        .env("GOFLAGS", "-mod=mod")
        .output()
        .map_err(|e| format!("go mod download: {e}"))?;
    let downloaded = crate::json(&String::from_utf8_lossy(&output.stdout))?;
    let dir = downloaded["Dir"]
        .as_str()
        .ok_or_else(|| format!("go mod download gave no Dir: {downloaded}"))?;
    Ok(["reports", "clusterreports"]
        .map(|plural| format!("{dir}/config/crd/openreports.io_{plural}.yaml"))
        .to_vec())
}

/// The Report `sartor-audit` of `reported`, as sartor wrote it (the fields
/// the API server adds left out), or `None` when there is none.
fn stored_report(suite: &Suite) -> Result<Option<serde_json::Value>, String> {
    report_of(suite, "reported")
}

/// sartor's Report of `namespace` as stored, its metadata cut to what sartor
/// writes.
fn report_of(suite: &Suite, namespace: &str) -> Result<Option<serde_json::Value>, String> {
    let listed = crate::json(&suite.plane.kubectl(&[
        "get",
        "reports.openreports.io",
        "-n",
        namespace,
        "-o",
        "json",
    ])?)?;
    Ok(listed["items"]
        .as_array()
        .and_then(|items| items.first())
        .map(|report| {
            let mut report = report.clone();
            let metadata = report["metadata"].clone();
            report["metadata"] = json!({
                "name": metadata["name"],
                "namespace": metadata["namespace"],
                "labels": metadata["labels"],
            });
            report
        }))
}

pub fn findings_are_kept_as_openreports_reports_in_the_cluster(
    suite: &mut Suite,
) -> Result<(), String> {
    // Created through the running webhook, so the other trials' mutators
    // have nothing left to change in them; only report-me, applied later.
    crate::admission::replica(suite)?;
    let plane = &suite.plane;
    plane.kubectl(&[
        "apply",
        "-f",
        &crate::repo_path("manifests/optional/audit/rbac.yaml"),
    ])?;
    // What the audit may list, generated as the docs say from the mutators
    // in the cluster (the earlier trials' too; the examples' AssignMetadata
    // of every kind makes it every kind) and the trial's own.
    let installed = plane.kubectl(&["get", MUTATOR_KINDS, "-o", "yaml"])?;
    apply_objects_role(suite, &format!("{installed}\n---\n{REPORT_ME}"))?;
    let plane = &suite.plane;
    plane.kubectl_with_input(
        &["apply", "-f", "-"],
        Some("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: reported\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: old\n  namespace: reported\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: older\n  namespace: reported\n"),
    )?;
    if let Some(old) = suite.replica.take() {
        let _ = old.stop();
    }
    let port = crate::install::ensure(suite)?.webhook_port;
    // A full scan an hour: within the trial, only the mutators' changes
    // scan; objects written and deleted reach the reports through watches.
    let sartor = Sartor::start(suite, "replica-audit", port, &["--audit-interval", "3600"])?;
    let result = reports_follow_the_cluster(suite, &sartor);
    let (_, log) = sartor.stop();
    // What the replica said, when the trial failed.
    let result = result.map_err(|error| {
        let tail: Vec<&str> = log.lines().rev().take(15).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!(
            "{error}
replica-audit's log, last lines:
{}",
            tail.join("\n")
        )
    });
    let plane = &suite.plane;
    let _ = plane.kubectl(&[
        "delete",
        "assign.mutations.sartor.dev",
        "report-me",
        "--ignore-not-found",
    ]);
    let _ = plane.kubectl(&["delete", "namespace", "reported", "--wait=false"]);
    let _ = plane.kubectl(&[
        "delete",
        "-f",
        &crate::repo_path("manifests/optional/audit/rbac.yaml"),
    ]);
    let _ = plane.kubectl(&[
        "delete",
        "clusterrole,clusterrolebinding",
        "sartor-audit-objects",
        "--ignore-not-found",
    ]);
    // The reports of the other trials' namespaces go with the CRDs.
    let _ = plane.kubectl(&[
        "delete",
        "crd",
        "reports.openreports.io",
        "clusterreports.openreports.io",
        "--ignore-not-found",
        "--wait=false",
    ]);
    result
}

/// The audit replica's reports, from no CRD to findings and back to none,
/// through an API server restart.
fn reports_follow_the_cluster(suite: &mut Suite, sartor: &Sartor) -> Result<(), String> {
    restartable_reports(suite, sartor)?;
    // The API server stopped: the watches fail, /readyz says so, the
    // reports stay as they were; restarted, the watches list again and keep
    // them current.
    suite.plane.stop_apiserver();
    let down = eventually(
        "a failed watch or write said",
        Duration::from_secs(30),
        || {
            let (code, body) = crate::http_get(sartor.metrics, "/readyz")?;
            // A watch fails, or a write due meanwhile does: either is said.
            let said = body.starts_with("ok; audit: watching ")
                && body.contains(" failed, retrying: ")
                || body.starts_with("ok; audit: writing the audit's reports: ");
            match said {
                true => Ok(code),
                false => Err(format!("/readyz: {code} {body:?}")),
            }
        },
    );
    suite.plane.start_apiserver()?;
    same("/readyz while the API server is down", down?, 200)?;
    after_the_restart(suite, sartor)?;
    a_forbidden_kind_is_left_out(suite, sartor)?;
    labelled_namespaces_are_repaired(suite, sartor)?;
    namespace_labels_are_followed(suite)
}

/// An Assign with a namespaceSelector, and a ConfigMap stored in a namespace
/// it does not select: nothing reported. Labelled between full scans (one an
/// hour), the namespace's objects are scanned again and the ConfigMap is
/// reported within seconds; unlabelled, it leaves the report.
fn namespace_labels_are_followed(suite: &Suite) -> Result<(), String> {
    let plane = &suite.plane;
    plane.kubectl_with_input(&["apply", "-f", "-"], Some(SELECTED_OBJECTS))?;
    plane.kubectl_with_input(&["apply", "-f", "-"], Some(SELECT_ME))?;
    let status = || {
        plane.kubectl(&[
            "get",
            "assign.mutations.sartor.dev",
            "select-me",
            "-o",
            "jsonpath={.status.audit}",
        ])
    };
    let result = (|| {
        // The scan the new Assign starts, done: nothing to change yet.
        eventually("select-me scanned", Duration::from_secs(20), || {
            same(
                "select-me's status.audit",
                status()?,
                r#"{"wouldChange":0}"#.to_string(),
            )
        })?;
        same(
            "the Report of selected, unlabelled",
            report_of(suite, "selected")?,
            None,
        )?;
        let uid = uid_of(suite, "selected", "plain")?;
        plane.kubectl(&["label", "namespace", "selected", "audit=me"])?;
        eventually(
            "the labelled namespace reported",
            Duration::from_secs(20),
            || {
                same(
                    "the Report of selected, labelled",
                    report_of(suite, "selected")?,
                    Some(
                        json!({"apiVersion": "openreports.io/v1alpha1", "kind": "Report",
                    "metadata": {"name": "sartor-audit", "namespace": "selected",
                                 "labels": {"app.kubernetes.io/managed-by": "sartor"}},
                    "source": "sartor",
                    "summary": {"pass": 0, "fail": 1, "warn": 0, "error": 0, "skip": 0},
                    "results": [{"policy": "Assign/select-me", "result": "fail",
                                 "message": "would set data.selected on the object's next write",
                                 "properties": {"paths": "data.selected"},
                                 "resources": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "plain",
                                                "namespace": "selected", "uid": uid}],
                                 "source": "sartor"}]}),
                    ),
                )?;
                same(
                    "select-me's status.audit",
                    status()?,
                    r#"{"wouldChange":1}"#.to_string(),
                )
            },
        )?;
        plane.kubectl(&["label", "namespace", "selected", "audit-"])?;
        eventually(
            "the unlabelled namespace not reported",
            Duration::from_secs(20),
            || {
                same(
                    "the Report of selected, unlabelled again",
                    report_of(suite, "selected")?,
                    None,
                )
            },
        )
    })();
    let _ = plane.kubectl(&["delete", "assign.mutations.sartor.dev", "select-me"]);
    let _ = plane.kubectl(&["delete", "namespace", "selected", "--wait=false"]);
    result
}

/// A namespace without labels and a ConfigMap in it.
const SELECTED_OBJECTS: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: selected\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\n  namespace: selected\ndata:\n  a: '1'\n";

/// An Assign of the ConfigMaps of namespaces labelled `audit=me`.
const SELECT_ME: &str = "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata:\n  name: select-me\nspec:\n  applyTo:\n  - {groups: [''], versions: [v1], kinds: [ConfigMap]}\n  match:\n    namespaceSelector:\n      matchLabels: {audit: me}\n  location: data.selected\n  parameters:\n    assign:\n      value: 'yes'\n";

/// Two namespaces' ConfigMaps stored before the Assign repair-me: the one in
/// the namespace labelled `audit.sartor.dev/repair=true` is patched by the
/// audit (and leaves the reports), the other only reported.
fn labelled_namespaces_are_repaired(suite: &Suite, sartor: &Sartor) -> Result<(), String> {
    let plane = &suite.plane;
    plane.kubectl_with_input(&["apply", "-f", "-"], Some(REPAIR_OBJECTS))?;
    plane.kubectl(&[
        "create",
        "clusterrole",
        "sartor-audit-repair-configmaps",
        "--verb=get,patch",
        "--resource=configmaps",
    ])?;
    plane.kubectl(&[
        "create",
        "clusterrolebinding",
        "sartor-audit-repair-configmaps",
        "--clusterrole=sartor-audit-repair-configmaps",
        "--serviceaccount=sartor-system:sartor",
    ])?;
    plane.kubectl_with_input(&["apply", "-f", "-"], Some(REPAIR_ME))?;
    let data = |namespace: &str, name: &str| -> Result<serde_json::Value, String> {
        let configmap = crate::json(&configmap(suite, namespace, name, "json")?)?;
        Ok(configmap["data"].clone())
    };
    let kept_uid = uid_of(suite, "unrepaired", "kept")?;
    let repairs = |sartor: &Sartor| -> Result<Vec<String>, String> {
        let (_, body) = crate::http_get(sartor.metrics, "/metrics")?;
        Ok(body
            .lines()
            .filter(|l| l.starts_with("sartor_audit_repairs_total"))
            // A watch event of the version before the repair, handled after
            // it, marks the object again; that repair reads it fresh and
            // finds nothing to do.
            .filter(|l| !l.starts_with(r#"sartor_audit_repairs_total{result="unchanged"}"#))
            .map(str::to_string)
            .collect())
    };
    let result = eventually(
        "the labelled namespace repaired",
        Duration::from_secs(30),
        || {
            same(
                "the repaired ConfigMap's data",
                data("repaired", "stale")?,
                json!({"a": "1", "repaired": "yes"}),
            )?;
            same(
                "the other namespace's ConfigMap's data",
                data("unrepaired", "kept")?,
                json!({"a": "1"}),
            )?;
            same(
                "the Report of repaired",
                report_of(suite, "repaired")?,
                None,
            )?;
            same(
                "the Report of unrepaired",
                report_of(suite, "unrepaired")?,
                Some(
                    json!({"apiVersion": "openreports.io/v1alpha1", "kind": "Report",
                        "metadata": {"name": "sartor-audit", "namespace": "unrepaired",
                                     "labels": {"app.kubernetes.io/managed-by": "sartor"}},
                        "source": "sartor",
                        "summary": {"pass": 0, "fail": 1, "warn": 0, "error": 0, "skip": 0},
                        "results": [{"policy": "Assign/repair-me", "result": "fail",
                                     "message": "would set data.repaired on the object's next write",
                                     "properties": {"paths": "data.repaired"},
                                     "resources": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "kept",
                                                    "namespace": "unrepaired", "uid": kept_uid}],
                                     "source": "sartor"}]}),
                ),
            )?;
            same(
                "the repairs counted",
                repairs(sartor)?,
                vec![r#"sartor_audit_repairs_total{result="repaired"} 1"#.to_string()],
            )
        },
    );
    let _ = plane.kubectl(&["delete", "assign.mutations.sartor.dev", "repair-me"]);
    let _ = plane.kubectl(&[
        "delete",
        "clusterrolebinding,clusterrole",
        "sartor-audit-repair-configmaps",
    ]);
    let _ = plane.kubectl(&[
        "delete",
        "namespace",
        "repaired",
        "unrepaired",
        "--wait=false",
    ]);
    result
}

/// A ConfigMap in a namespace labelled for repair and one in a namespace
/// that is not.
const REPAIR_OBJECTS: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: repaired\n  labels: {audit.sartor.dev/repair: 'true'}\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: unrepaired\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: stale\n  namespace: repaired\ndata:\n  a: '1'\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept\n  namespace: unrepaired\ndata:\n  a: '1'\n";

/// An Assign of the ConfigMaps of both.
const REPAIR_ME: &str = "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata:\n  name: repair-me\nspec:\n  applyTo:\n  - {groups: [''], versions: [v1], kinds: [ConfigMap]}\n  match:\n    namespaces: [repaired, unrepaired]\n  location: data.repaired\n  parameters:\n    assign:\n      value: 'yes'\n";

/// The audit's objects role (`sartor-audit-objects`), generated by
/// `sartor audit rbac` from `mutators` (YAML documents) and applied.
fn apply_objects_role(suite: &Suite, mutators: &str) -> Result<(), String> {
    let role = sartor_tests::cluster::run(
        Command::new(sartor_tests::binary::sartor()?).args(["audit", "rbac", "--mutators", "-"]),
        Some(mutators),
    )?;
    suite
        .plane
        .kubectl_with_input(&["apply", "-f", "-"], Some(&role))
        .map(|_| ())
}

/// sartor's mutator kinds, for `kubectl get`.
const MUTATOR_KINDS: &str = "assign.mutations.sartor.dev,assignimage.mutations.sartor.dev,assignmetadata.mutations.sartor.dev,modifyset.mutations.sartor.dev";

/// An Assign of Secrets, which the audit's role, generated from the
/// ConfigMaps' mutator alone (ConfigMaps and Namespaces), may not list:
/// /readyz says so, and the ConfigMaps' report is kept current all the same.
fn a_forbidden_kind_is_left_out(suite: &Suite, sartor: &Sartor) -> Result<(), String> {
    apply_objects_role(suite, REPORT_ME)?;
    let plane = &suite.plane;
    plane.kubectl_with_input(
        &["apply", "-f", "-"],
        Some(&format!("{REPORT_ME}---\n{REPORT_SECRETS}")),
    )?;
    let old = uid_of(suite, "reported", "old")?;
    let refused = "listing secrets/v1: secrets is forbidden: User \
                   \"system:serviceaccount:sartor-system:sartor\" cannot list resource \
                   \"secrets\" in API group \"\" at the cluster scope (Forbidden): the user \
                   needs the `list` verb on it (RBAC)";
    let result = eventually("the forbidden kind said", Duration::from_secs(20), || {
        let (code, body) = crate::http_get(sartor.metrics, "/readyz")?;
        let said = code == 200
            && body.starts_with("ok; audit: listing ")
            && body.contains(refused)
            && body.ends_with("; objects of these kinds are not audited\n");
        if !said {
            return Err(format!("/readyz: {code} {body:?}"));
        }
        same(
            "the Report of reported",
            stored_report(suite)?,
            Some(reported(vec![report_me_result("old", &old)])),
        )
    });
    plane.kubectl(&[
        "delete",
        "assign.mutations.sartor.dev",
        "report-me",
        "report-secrets",
    ])?;
    result
}

/// An Assign of every Secret in `reported`.
const REPORT_SECRETS: &str = "apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata:\n  name: report-secrets\nspec:\n  applyTo:\n  - {groups: [''], versions: [v1], kinds: [Secret]}\n  match:\n    namespaces: [reported]\n  location: data.reported\n  parameters:\n    assign:\n      value: eWVz\n";

/// Up to the findings of both ConfigMaps.
fn restartable_reports(suite: &Suite, sartor: &Sartor) -> Result<(), String> {
    let plane = &suite.plane;
    let not_installed = "the OpenReports CRDs (reports.openreports.io, clusterreports.openreports.io) are not installed: the audit's findings are not written (install them from github.com/openreports/reports-api)";
    let written = |sartor: &Sartor| -> Result<Vec<String>, String> {
        let (_, body) = crate::http_get(sartor.metrics, "/metrics")?;
        Ok(body
            .lines()
            .filter(|l| {
                l.starts_with("sartor_audit_reports_written ")
                    || l.starts_with("sartor_audit_leader ")
            })
            .map(str::to_string)
            .collect())
    };
    // Without the CRDs: said on /readyz and in the metric; still ready.
    eventually("the missing CRDs said", Duration::from_secs(20), || {
        same(
            "/readyz",
            crate::http_get(sartor.metrics, "/readyz")?,
            (200, format!("ok; audit: {not_installed}\n")),
        )?;
        same(
            "the audit's gauges",
            written(sartor)?,
            vec![
                "sartor_audit_reports_written 0".to_string(),
                "sartor_audit_leader 1".to_string(),
            ],
        )
    })?;
    // The CRDs installed: the next scan writes, /readyz says ok.
    let crds = openreports_crds(suite)?;
    let mut apply = vec!["apply", "--server-side"];
    for crd in &crds {
        apply.extend(["-f", crd.as_str()]);
    }
    plane.kubectl(&apply)?;
    plane.kubectl(&[
        "wait",
        "--for=condition=established",
        "crd/reports.openreports.io",
        "crd/clusterreports.openreports.io",
    ])?;
    eventually("reports written", Duration::from_secs(20), || {
        same(
            "/readyz",
            crate::http_get(sartor.metrics, "/readyz")?,
            (200, "ok\n".to_string()),
        )
    })?;
    // The mutator applied: both ConfigMaps stored before it are reported.
    plane.kubectl_with_input(&["apply", "-f", "-"], Some(REPORT_ME))?;
    let uid = |name: &str| {
        plane.kubectl(&[
            "get",
            "configmap",
            name,
            "-n",
            "reported",
            "-o",
            "jsonpath={.metadata.uid}",
        ])
    };
    let (result, report) = (report_me_result, reported);
    let (old, older) = (uid("old")?, uid("older")?);
    eventually("both reported", Duration::from_secs(20), || {
        same(
            "the Report of reported",
            stored_report(suite)?,
            Some(report(vec![result("old", &old), result("older", &older)])),
        )?;
        same(
            "report-me's status.audit",
            audit_status(suite)?,
            r#"{"wouldChange":2}"#.to_string(),
        )
    })
}

/// `status.audit` of the Assign report-me, as JSON.
fn audit_status(suite: &Suite) -> Result<String, String> {
    suite.plane.kubectl(&[
        "get",
        "assign.mutations.sartor.dev",
        "report-me",
        "-o",
        "jsonpath={.status.audit}",
    ])
}

/// The expected result of ConfigMap `name` in the Report of `reported`.
fn report_me_result(name: &str, uid: &str) -> serde_json::Value {
    json!({"policy": "Assign/report-me", "result": "fail",
           "message": "would set data.reported on the object's next write",
           "properties": {"paths": "data.reported"},
           "resources": [{"apiVersion": "v1", "kind": "ConfigMap", "name": name,
                          "namespace": "reported", "uid": uid}],
           "source": "sartor"})
}

/// The Report of `reported` with `results`, as sartor writes it.
fn reported(results: Vec<serde_json::Value>) -> serde_json::Value {
    json!({"apiVersion": "openreports.io/v1alpha1", "kind": "Report",
           "metadata": {"name": "sartor-audit", "namespace": "reported",
                        "labels": {"app.kubernetes.io/managed-by": "sartor"}},
           "source": "sartor",
           "summary": {"pass": 0, "fail": results.len(), "warn": 0, "error": 0, "skip": 0},
           "results": results})
}

/// After the restart: new objects are not reported, deleted ones leave.
fn after_the_restart(suite: &Suite, sartor: &Sartor) -> Result<(), String> {
    let plane = &suite.plane;
    eventually(
        "reports kept current again",
        // A watch's failure is said until it has not failed for a minute
        // (one that resumes is quiet); the whole suite leaves mutators of
        // every kind, so dozens of watches come back after the restart.
        Duration::from_secs(90),
        || {
            same(
                "/readyz",
                crate::http_get(sartor.metrics, "/readyz")?,
                (200, "ok\n".to_string()),
            )
        },
    )?;
    let old = uid_of(suite, "reported", "old")?;
    let (result, report) = (report_me_result, reported);
    // A ConfigMap created now, once the webhook enforces the mutator, is
    // mutated by it: never reported.
    create_once_enforced(suite, "reported", "reported")?;
    // A deleted object leaves the report.
    plane.kubectl(&["delete", "configmap", "older", "-n", "reported"])?;
    eventually(
        "older gone from the report",
        Duration::from_secs(20),
        || {
            same(
                "the Report of reported",
                stored_report(suite)?,
                Some(report(vec![result("old", &old)])),
            )?;
            same(
                "report-me's status.audit",
                audit_status(suite)?,
                r#"{"wouldChange":1}"#.to_string(),
            )
        },
    )?;
    // The mutator deleted: nothing to report, no report.
    plane.kubectl(&["delete", "assign.mutations.sartor.dev", "report-me"])?;
    eventually("the report deleted", Duration::from_secs(20), || {
        same("the Report of reported", stored_report(suite)?, None)
    })
}

/// The uid of ConfigMap `name` in `namespace`.
fn uid_of(suite: &Suite, namespace: &str, name: &str) -> Result<String, String> {
    configmap(suite, namespace, name, "jsonpath={.metadata.uid}")
}

/// `kubectl get configmap name -n namespace -o output`.
fn configmap(suite: &Suite, namespace: &str, name: &str, output: &str) -> Result<String, String> {
    suite
        .plane
        .kubectl(&["get", "configmap", name, "-n", namespace, "-o", output])
}
