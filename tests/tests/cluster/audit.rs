//! `sartor audit` against the real API server: objects stored before a
//! mutator existed are listed with the paths it would change; an object the
//! webhook already mutated is not.

use std::process::Command;
use std::time::Duration;

use serde_json::json;

use crate::{Suite, eventually, same};

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
    eventually("audit-me enforced", Duration::from_secs(20), || {
        let stored = plane.kubectl_with_input(
            &[
                "create",
                "--dry-run=server",
                "-f",
                "-",
                "-o",
                "jsonpath={.data.audited}",
            ],
            Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe\n  namespace: audit\n"),
        )?;
        same("a new ConfigMap's data.audited", stored, "yes".to_string())
    })?;
    plane.kubectl_with_input(
        &["create", "-f", "-"],
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: new\n  namespace: audit\n"),
    )?;
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
